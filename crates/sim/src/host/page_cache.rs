//! The page cache: per-page state of every file, clean-page eviction, and dirty-page bookkeeping.

use bfq_sched::Time;
use std::collections::{BTreeMap, VecDeque};

/// State of one page of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PageState {
    /// Not in memory.
    Absent = 0,
    /// A read of it is queued or on the device.
    Reading = 1,
    /// In memory, same as on the device.
    Clean = 2,
    /// In memory, newer than the device.
    Dirty = 3,
    /// Being written back.
    Writeback = 4,
}

/// The low bits of a page's byte hold its [`PageState`]; the high bits count its entries in the LRU queue.
const STATE_MASK: u8 = 0b111;
/// One LRU entry in the high bits of a page's byte.
const ENTRY_UNIT: u8 = 0b1000;
/// The most LRU entries one page can have (5 bits).
const MAX_ENTRIES: u8 = u8::MAX >> 3;
/// LRU entries kept without compaction whatever the number of clean pages: compaction below this length would cost
/// more than the memory it frees.
const LRU_SLACK: usize = 4096;

impl PageState {
    fn from_u8(v: u8) -> PageState {
        match v & STATE_MASK {
            1 => PageState::Reading,
            2 => PageState::Clean,
            3 => PageState::Dirty,
            4 => PageState::Writeback,
            _ => PageState::Absent,
        }
    }
}

/// One file's pages.
#[derive(Debug, Clone, Default)]
struct FileCache {
    /// Per page: the state in the low 3 bits, the number of the page's entries in the LRU queue in the high 5.
    state: Vec<u8>,
    /// Dirty page runs: start -> end (exclusive).
    dirty: BTreeMap<u64, u64>,
    /// When the file went from clean to dirty (the kernel's `dirtied_when`).
    dirtied_at: Option<Time>,
}

/// The page cache of the simulated host.
#[derive(Debug, Clone)]
pub struct PageCache {
    files: Vec<FileCache>,
    /// Clean pages in the order they became clean (oldest first). A page that became clean again has a newer
    /// entry, and only a page's newest entry counts: older ones, and entries of pages no longer clean, are stale.
    /// Stale entries are dropped when popped, or all at once by [`PageCache::compact`] when they outnumber the
    /// clean pages, so the queue's length stays below `2 x clean + LRU_SLACK` whatever the simulated time.
    lru: VecDeque<(u32, u64)>,
    /// Clean pages.
    clean: u64,
    /// The longest the LRU queue has been, in entries.
    lru_peak: usize,
    capacity: u64,
    resident: u64,
    dirty: u64,
    writeback: u64,
}

impl PageCache {
    /// A cache holding at most `capacity` pages.
    pub fn new(capacity: u64) -> Self {
        PageCache {
            files: Vec::new(),
            lru: VecDeque::new(),
            clean: 0,
            lru_peak: 0,
            capacity: capacity.max(1),
            resident: 0,
            dirty: 0,
            writeback: 0,
        }
    }

    /// Registers a file of `pages` pages (files are numbered in registration order).
    pub fn add_file(&mut self, pages: u64) -> u32 {
        self.files.push(FileCache {
            state: vec![0; pages as usize],
            ..FileCache::default()
        });
        (self.files.len() - 1) as u32
    }

    /// Number of pages of `file`.
    pub fn pages(&self, file: u32) -> u64 {
        self.files.get(file as usize).map_or(0, |f| f.state.len() as u64)
    }

    /// State of a page (absent if out of range).
    pub fn state(&self, file: u32, page: u64) -> PageState {
        self.files
            .get(file as usize)
            .and_then(|f| f.state.get(page as usize))
            .map_or(PageState::Absent, |&v| PageState::from_u8(v))
    }

    fn set(&mut self, file: u32, page: u64, new: PageState) {
        let Some(slot) = self
            .files
            .get_mut(file as usize)
            .and_then(|f| f.state.get_mut(page as usize))
        else {
            return;
        };
        let old = PageState::from_u8(*slot);
        let mut entries = *slot & !STATE_MASK;
        if new == PageState::Clean && old != PageState::Clean {
            // Saturation cannot happen while compaction runs (a page's entries beyond its newest are stale, and
            // compaction removes them); the check keeps the count honest regardless.
            if entries < MAX_ENTRIES * ENTRY_UNIT {
                entries += ENTRY_UNIT;
            }
        }
        *slot = entries | new as u8;
        match (old == PageState::Absent, new == PageState::Absent) {
            (true, false) => self.resident += 1,
            (false, true) => self.resident -= 1,
            _ => {}
        }
        if old == PageState::Dirty {
            self.dirty -= 1;
        }
        if new == PageState::Dirty {
            self.dirty += 1;
        }
        if old == PageState::Writeback {
            self.writeback -= 1;
        }
        if new == PageState::Writeback {
            self.writeback += 1;
        }
        if old == PageState::Clean && new != PageState::Clean {
            self.clean -= 1;
        }
        if new == PageState::Clean && old != PageState::Clean {
            self.clean += 1;
            self.lru.push_back((file, page));
            self.lru_peak = self.lru_peak.max(self.lru.len());
            if self.lru.len() > 2 * self.clean as usize + LRU_SLACK {
                self.compact();
            }
        }
    }

    /// Removes one LRU entry of `(file, page)` from the page's count; true if it was the page's newest entry.
    fn take_entry(&mut self, file: u32, page: u64) -> bool {
        let Some(slot) = self
            .files
            .get_mut(file as usize)
            .and_then(|f| f.state.get_mut(page as usize))
        else {
            return false;
        };
        let entries = *slot >> 3;
        if entries == 0 {
            return false;
        }
        *slot -= ENTRY_UNIT;
        entries == 1
    }

    /// Drops every stale entry from the LRU queue, keeping the order of the rest.
    fn compact(&mut self) {
        let mut kept = VecDeque::with_capacity(self.clean as usize);
        while let Some((f, p)) = self.lru.pop_front() {
            if self.take_entry(f, p) && self.state(f, p) == PageState::Clean {
                kept.push_back((f, p));
            }
        }
        for &(f, p) in &kept {
            if let Some(slot) = self.files[f as usize].state.get_mut(p as usize) {
                *slot += ENTRY_UNIT;
            }
        }
        self.lru = kept;
    }

    /// Pops LRU entries until the oldest live one; returns it.
    fn pop_live(&mut self) -> Option<(u32, u64)> {
        while let Some((f, p)) = self.lru.pop_front() {
            if self.take_entry(f, p) && self.state(f, p) == PageState::Clean {
                return Some((f, p));
            }
        }
        None
    }

    /// Marks absent pages in `[first, first+count)` as being read; returns the runs `(start, len)` that were absent.
    pub fn start_read(&mut self, file: u32, first: u64, count: u64, runs: &mut Vec<(u64, u64)>) {
        let end = (first + count).min(self.pages(file));
        let mut p = first;
        while p < end {
            if self.state(file, p) == PageState::Absent {
                let s = p;
                while p < end && self.state(file, p) == PageState::Absent {
                    self.set(file, p, PageState::Reading);
                    p += 1;
                }
                runs.push((s, p - s));
            } else {
                p += 1;
            }
        }
    }

    /// Pages `[first, first+count)` arrived from the device; evicts old clean pages if over capacity.
    pub fn finish_read(&mut self, file: u32, first: u64, count: u64) {
        for p in first..first + count {
            if self.state(file, p) == PageState::Reading {
                self.set(file, p, PageState::Clean);
            }
        }
        self.evict();
    }

    /// Evicts clean pages, oldest first, until within capacity or nothing evictable is left.
    fn evict(&mut self) {
        while self.resident > self.capacity {
            let Some((f, p)) = self.pop_live() else { break };
            self.set(f, p, PageState::Absent);
        }
    }

    /// Marks `[first, first+count)` dirty at time `now`; returns how many pages became newly dirty.
    pub fn write(&mut self, file: u32, first: u64, count: u64, now: Time) -> u64 {
        let end = (first + count).min(self.pages(file));
        if first >= end {
            return 0;
        }
        let mut newly = 0;
        for p in first..end {
            if self.state(file, p) != PageState::Dirty {
                self.set(file, p, PageState::Dirty);
                newly += 1;
            }
        }
        let f = &mut self.files[file as usize];
        if f.dirty.is_empty() {
            f.dirtied_at = Some(now);
        }
        // Insert [first, end) into the run map, merging with neighbours.
        let (mut s, mut e) = (first, end);
        if let Some((&ps, &pe)) = f.dirty.range(..=s).next_back() {
            if pe >= s {
                s = ps;
                e = e.max(pe);
            }
        }
        let overlapping: Vec<u64> = f.dirty.range(s..=e).map(|(&k, _)| k).collect();
        for k in overlapping {
            if let Some(v) = f.dirty.remove(&k) {
                e = e.max(v);
            }
        }
        f.dirty.insert(s, e);
        self.evict();
        newly
    }

    /// Takes the next dirty run of `file` at or after page `from` (wrapping), at most `max` pages, and marks it
    /// under writeback.
    pub fn take_dirty_run(&mut self, file: u32, from: u64, max: u64) -> Option<(u64, u64)> {
        let f = self.files.get_mut(file as usize)?;
        let (&s, &e) = f
            .dirty
            .range(..=from)
            .next_back()
            .filter(|(_, &e)| e > from)
            .or_else(|| f.dirty.range(from..).next())
            .or_else(|| f.dirty.iter().next())?;
        let start = s.max(if s <= from && from < e { from } else { s });
        let len = (e - start).min(max.max(1));
        f.dirty.remove(&s);
        if s < start {
            f.dirty.insert(s, start);
        }
        if start + len < e {
            f.dirty.insert(start + len, e);
        }
        if f.dirty.is_empty() {
            f.dirtied_at = None;
        }
        for p in start..start + len {
            self.set(file, p, PageState::Writeback);
        }
        Some((start, len))
    }

    /// Pages `[first, first+count)` were written to the device. Pages redirtied meanwhile stay dirty.
    pub fn finish_write(&mut self, file: u32, first: u64, count: u64) {
        for p in first..first + count {
            if self.state(file, p) == PageState::Writeback {
                self.set(file, p, PageState::Clean);
            }
        }
        self.evict();
    }

    /// Drops every clean page (`echo 1 > drop_caches`); dirty and in-flight pages stay.
    pub fn drop_clean(&mut self) {
        while let Some((f, p)) = self.pop_live() {
            self.set(f, p, PageState::Absent);
        }
    }

    /// Drops `file`'s clean pages (`POSIX_FADV_DONTNEED`); dirty and in-flight pages stay.
    pub fn drop_file_clean(&mut self, file: u32) {
        for p in 0..self.pages(file) {
            if self.state(file, p) == PageState::Clean {
                self.set(file, p, PageState::Absent);
            }
        }
    }

    /// When `file` was first dirtied, if it has dirty pages.
    pub fn dirtied_at(&self, file: u32) -> Option<Time> {
        self.files.get(file as usize).and_then(|f| f.dirtied_at)
    }

    /// True if `file` has dirty pages not yet under writeback.
    pub fn has_dirty(&self, file: u32) -> bool {
        self.files.get(file as usize).is_some_and(|f| !f.dirty.is_empty())
    }

    /// Number of files.
    pub fn files(&self) -> u32 {
        self.files.len() as u32
    }

    /// Dirty pages in the system.
    pub fn dirty_pages(&self) -> u64 {
        self.dirty
    }

    /// Pages under writeback.
    pub fn writeback_pages(&self) -> u64 {
        self.writeback
    }

    /// Pages in memory (any state but absent).
    pub fn resident_pages(&self) -> u64 {
        self.resident
    }

    /// Clean pages (in memory, same as on the device).
    pub fn clean_pages(&self) -> u64 {
        self.clean
    }

    /// Entries in the LRU queue now, live and stale.
    pub fn lru_len(&self) -> usize {
        self.lru.len()
    }

    /// The most entries the LRU queue has held, in entries (see [`PageCache::lru_bound`]).
    pub fn lru_peak(&self) -> usize {
        self.lru_peak
    }

    /// The length, in entries, that the LRU queue of a cache of `capacity` pages never exceeds when no completion
    /// brings more than `largest_completion` pages at once. Stale entries are compacted away as soon as the queue
    /// is longer than twice the clean pages plus a fixed slack; clean pages exceed `capacity` only inside one
    /// completion, before its eviction runs, and then by at most that completion's pages.
    pub fn lru_bound(capacity: u64, largest_completion: u64) -> usize {
        2 * (capacity + largest_completion) as usize + LRU_SLACK + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_fill_and_evict_oldest_first() {
        let mut c = PageCache::new(4);
        let f = c.add_file(10);
        let mut runs = Vec::new();
        c.start_read(f, 0, 3, &mut runs);
        assert_eq!(runs, vec![(0, 3)]);
        c.finish_read(f, 0, 3);
        runs.clear();
        c.start_read(f, 2, 4, &mut runs);
        assert_eq!(runs, vec![(3, 3)], "page 2 is cached");
        c.finish_read(f, 3, 3);
        assert_eq!(c.resident_pages(), 4);
        assert_eq!(c.state(f, 0), PageState::Absent, "oldest evicted");
        assert_eq!(c.state(f, 5), PageState::Clean);
    }

    #[test]
    fn dirty_runs_merge_and_are_taken_in_order() {
        let mut c = PageCache::new(100);
        let f = c.add_file(100);
        assert_eq!(c.write(f, 10, 5, 7), 5);
        assert_eq!(c.write(f, 15, 5, 8), 5);
        assert_eq!(c.write(f, 12, 2, 9), 0, "already dirty");
        assert_eq!(c.dirtied_at(f), Some(7));
        assert_eq!(c.take_dirty_run(f, 0, 4), Some((10, 4)));
        assert_eq!(c.take_dirty_run(f, 14, 100), Some((14, 6)));
        assert_eq!(c.take_dirty_run(f, 0, 100), None);
        assert_eq!((c.dirty_pages(), c.writeback_pages()), (0, 10));
        c.finish_write(f, 10, 10);
        assert_eq!(c.writeback_pages(), 0);
        assert_eq!(c.state(f, 12), PageState::Clean);
    }

    #[test]
    fn redirtied_during_writeback_stays_dirty() {
        let mut c = PageCache::new(100);
        let f = c.add_file(10);
        c.write(f, 0, 4, 0);
        c.take_dirty_run(f, 0, 4);
        c.write(f, 1, 1, 1);
        c.finish_write(f, 0, 4);
        assert_eq!(c.state(f, 1), PageState::Dirty);
        assert_eq!(c.take_dirty_run(f, 0, 10), Some((1, 1)));
    }

    #[test]
    fn drop_clean_keeps_dirty() {
        let mut c = PageCache::new(100);
        let f = c.add_file(10);
        let mut r = Vec::new();
        c.start_read(f, 0, 5, &mut r);
        c.finish_read(f, 0, 5);
        c.write(f, 7, 1, 0);
        c.drop_clean();
        assert_eq!(c.resident_pages(), 1);
        assert_eq!(c.state(f, 7), PageState::Dirty);
    }
}
