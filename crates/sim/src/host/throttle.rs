//! Dirty throttling: what a process that dirties page-cache pages over the dirty limit does.
//!
//! Two generations of Linux's `balance_dirty_pages` (mm/page-writeback.c):
//! - since 3.2 ("I/O-less dirty throttling") the writer only sleeps, and the flusher thread alone writes dirty
//!   pages back: [`DirtyThrottle::Sleep`], the simulator's default;
//! - before 3.2 the writer wrote dirty pages back itself: [`DirtyThrottle::WriteBack`]. Read from 2.6.18's
//!   sources (mm/page-writeback.c, fs/fs-writeback.c of 2.6.18.8; docs/DEVICES.md, "Host: 2.6.18 writeback"), the
//!   rule is, in our words: while dirty plus under-writeback pages exceed the limit, the writer asks the file system
//!   to start writeback of up to `chunk` pages (`sync_writeback_pages`: 1.5 times `ratelimit_pages`), taking
//!   inodes oldest-dirtied first, skipping any inode another task is writing back at that moment (its `I_LOCK`),
//!   and leaving alone inodes dirtied after the call began. Each inode's writeback resumes where its previous one
//!   stopped (`writeback_index`, cyclic); an inode left with dirty pages because the chunk ran out goes to the back
//!   of the order with a fresh dirtying time, so the next caller takes another inode. The writer submits the
//!   requests itself and so sleeps whenever the request pool is full. After a call it returns to its `write` once
//!   the total is under the limit or it has written a whole chunk; otherwise it waits for the queue to leave
//!   congestion (`blk_congestion_wait`, at most a tenth of a second) and tries again.
//!
//! With several throttled writers, each holds a different inode and all of them wait for requests at once, so the
//! queue receives their files' requests interleaved: the order that a FIFO elevator keeps and a sorting one
//! undoes. This module holds the rules that need no simulator state: the chunk size and the inode choice.

use crate::host::PageCache;
use bfq_sched::Time;

/// Pages of 4 KiB per MiB.
const PAGES_PER_MIB: u64 = 256;

/// How a buffered writer over the dirty limit (`dirty_ratio`) is throttled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DirtyThrottle {
    /// Linux 3.2 and later (I/O-less throttling): the writer sleeps until writeback by the flusher brings dirty plus
    /// under-writeback pages back under the limit.
    #[default]
    Sleep,
    /// Linux before 3.2 (2.6.18): the writer writes dirty pages back itself ([`WriterWriteback`]).
    WriteBack(WriterWriteback),
}

/// The parameters of a throttled writer's own writeback (Linux before 3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterWriteback {
    /// Pages one call writes back at most (`write_chunk` = `sync_writeback_pages()`), 4 KiB pages.
    pub chunk_pages: u64,
    /// Longest wait for the queue to leave write congestion after a call that wrote less than a chunk
    /// (`blk_congestion_wait(WRITE, HZ/10)`), ns.
    pub congestion_wait: Time,
    /// While over the limit, a writer checks the limit (calls `balance_dirty_pages`) once per this many pages it
    /// dirties (`balance_dirty_pages_ratelimited`: 8 once the limit has been exceeded), 4 KiB pages.
    pub check_every_pages: u64,
    /// CPU time the writer spends per page it puts under writeback (finding and locking the page, the file
    /// system's block mapping and allocation, building the bio), ns: after submitting a request it is busy this
    /// long per page before it can submit the next. Estimate ([`WRITEBACK_SUBMIT_NS_PER_PAGE`]).
    pub submit_ns_per_page: Time,
}

/// Estimate of the CPU time 2.6.18 with XFS spent per page a throttled writer wrote back, ns (docs/DEVICES.md,
/// "Host: 2.6.18 writeback", with a sensitivity table). Seed 003's one-thread write ran at 462 901 KB/s with 65 %
/// CPU: 1.4 µs per KiB, 5.6 µs per 4 KiB page for everything the writer did; the simulator already charges the
/// copy (`copy_ns_per_kib`, 1 µs per page), which leaves 4.6 µs for the page-cache insertion, XFS's delayed
/// allocation and the writeback. 2 µs of it (about 40 %) are taken to be the writeback's.
pub const WRITEBACK_SUBMIT_NS_PER_PAGE: Time = 2_000;

impl WriterWriteback {
    /// 2.6.18's values for a host with `memory_bytes` of page cache and `cpus` CPUs: `ratelimit_pages` is the
    /// machine's pages over 32 per CPU, at least 16 and at most 4 MiB (`set_ratelimit`), the chunk 1.5 times that
    /// (`sync_writeback_pages`: 6 MiB on any host with more than 128 MiB per CPU); the congestion wait is
    /// `HZ/10` jiffies, 100 ms at any `HZ`; the limit is checked every 8 dirtied pages while exceeded.
    pub fn linux_2_6_18(memory_bytes: u64, cpus: u64) -> Self {
        let pages = memory_bytes / crate::host::PAGE_BYTES;
        let ratelimit = (pages / (cpus.max(1) * 32)).clamp(16, 4 * PAGES_PER_MIB);
        WriterWriteback {
            chunk_pages: ratelimit + ratelimit / 2,
            congestion_wait: 100_000_000,
            check_every_pages: 8,
            submit_ns_per_page: WRITEBACK_SUBMIT_NS_PER_PAGE,
        }
    }
}

/// What the inode lists of 2.6.18's writeback remember per file: the order in which throttled writers take inodes
/// (`s_dirty`/`s_io`, by dirtying time), which inodes a writer holds (`I_LOCK`), and where each inode's next
/// writeback starts (`writeback_index`).
#[derive(Debug, Clone, Default)]
pub struct InodeOrder {
    /// Per file: the dirtying time set when a writer left the inode with dirty pages (`dirtied_when = jiffies`),
    /// if later than the page cache's first-dirtied time.
    redirtied: Vec<Time>,
    /// Per file: held by a writer now.
    locked: Vec<bool>,
    /// Per file: the page the next writeback starts from.
    next_page: Vec<u64>,
}

impl InodeOrder {
    fn grow(&mut self, files: usize) {
        if self.locked.len() < files {
            self.redirtied.resize(files, 0);
            self.locked.resize(files, false);
            self.next_page.resize(files, 0);
        }
    }

    /// The inode a writeback call that began at `started` takes next: among files with dirty pages not under
    /// writeback, not held by another writer and dirtied (or redirtied) no later than `started`, the one dirtied
    /// longest ago (ties: the lower file number). `None` ends the call.
    pub fn pick(&mut self, cache: &PageCache, started: Time) -> Option<u32> {
        self.grow(cache.files() as usize);
        (0..cache.files())
            .filter(|&f| !self.locked[f as usize] && cache.has_dirty(f))
            .filter_map(|f| cache.dirtied_at(f).map(|t| (t.max(self.redirtied[f as usize]), f)))
            .filter(|&(t, _)| t <= started)
            .min()
            .map(|(_, f)| f)
    }

    /// A writer takes `file` (sets its `I_LOCK`).
    pub fn lock(&mut self, file: u32) {
        self.grow(file as usize + 1);
        self.locked[file as usize] = true;
    }

    /// The writer is done with `file` at `now`: if pages are still dirty (its chunk ran out first), the inode is
    /// redirtied at `now` and so goes behind every other dirty inode.
    pub fn unlock(&mut self, file: u32, cache: &PageCache, now: Time) {
        self.grow(file as usize + 1);
        self.locked[file as usize] = false;
        if cache.has_dirty(file) {
            self.redirtied[file as usize] = now;
        }
    }

    /// Whether a writer holds `file`.
    pub fn is_locked(&self, file: u32) -> bool {
        self.locked.get(file as usize).copied().unwrap_or(false)
    }

    /// Where `file`'s next writeback starts (cyclic: the page after the last one written).
    pub fn next_page(&self, file: u32) -> u64 {
        self.next_page.get(file as usize).copied().unwrap_or(0)
    }

    /// Writeback of `file` went up to (not including) `page`.
    pub fn set_next_page(&mut self, file: u32, page: u64) {
        self.grow(file as usize + 1);
        self.next_page[file as usize] = page;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_is_six_mib_on_any_host_with_more_than_128_mib_per_cpu() {
        // ratelimit_pages = pages / (32 x CPUs), capped at 4 MiB; the chunk is 1.5 times it.
        let seed_host = WriterWriteback::linux_2_6_18(12 << 30, 4);
        assert_eq!(seed_host.chunk_pages, 6 * PAGES_PER_MIB);
        assert_eq!(WriterWriteback::linux_2_6_18(4 << 30, 4).chunk_pages, 6 * PAGES_PER_MIB);
        // 64 MiB on one CPU: 16384 pages / 32 = 512 pages of ratelimit, a 768-page chunk.
        assert_eq!(WriterWriteback::linux_2_6_18(64 << 20, 1).chunk_pages, 768);
        // The floor of 16 pages: 24-page chunks.
        assert_eq!(WriterWriteback::linux_2_6_18(1 << 20, 8).chunk_pages, 24);
    }

    #[test]
    fn writers_take_the_oldest_unlocked_inode_and_a_redirtied_one_goes_last() {
        let mut cache = PageCache::new(1 << 20);
        let files: Vec<u32> = (0..3).map(|_| cache.add_file(1024)).collect();
        for (i, &f) in files.iter().enumerate() {
            cache.write(f, 0, 512, 10 * i as Time);
        }
        let mut o = InodeOrder::default();
        // Oldest first.
        assert_eq!(o.pick(&cache, 100), Some(0));
        o.lock(0);
        // A second writer skips the held inode.
        assert_eq!(o.pick(&cache, 100), Some(1));
        // A call that began before an inode was dirtied leaves it alone.
        assert_eq!(o.pick(&cache, 5), None);
        // Writer one stops with pages left: inode 0 goes behind 1 and 2.
        cache.take_dirty_run(0, 0, 256);
        o.unlock(0, &cache, 200);
        assert_eq!(o.pick(&cache, 300), Some(1));
        o.lock(1);
        o.lock(2);
        assert_eq!(o.pick(&cache, 300), Some(0));
        // ... and a call begun before the redirtying does not take it.
        assert_eq!(o.pick(&cache, 150), None);
    }
}
