//! From a command's traced reads to an application [`Profile`].
//!
//! - **Files = device regions.** The reads' sector ranges are merged into regions: ranges that overlap, touch, or lie
//!   less than [`MapOptions::merge_gap_bytes`] apart join one region. Each region, widened to whole 4 KiB pages,
//!   becomes one profile file named `NAME-rNNN` (in device order) with placement `at F`, F = the region's first
//!   sector as a fraction of the traced device's capacity. A read becomes a request of its region's file at offset
//!   (sector − region start) × 512 and length sectors × 512. So the replay reproduces the recorded sizes, order and
//!   relative positions; it does not know which real file a region belongs to.
//! - **Kind.** A read is `RA` (not waited for) when the next read was issued before it completed, or it never
//!   completed within the trace; otherwise `R`. The kernel's readahead flag is not used: it is set on the
//!   synchronous part of readahead too, which the faulting task waits for.
//! - **Think time.** Before the first read: from the start (the command's fork) to its issue. Before read i: from the completion of
//!   read i−1 if that is `R`, from its issue if it is `RA`, to the issue of read i; rounded to µs, never negative.
//!   This is the replay rule of [`crate::startup`], so replaying on the recording device reproduces the recorded
//!   timing.

use super::assemble::{Recording, TracedRead};
use crate::process::{FileSpec, IoMode, Placement};
use crate::profile::{Profile, ProfileRequest, ReqKind, PAGE_BYTES};

/// Bytes per sector of the block events.
pub const SECTOR_BYTES: u64 = 512;
/// Sectors per page.
const PAGE_SECTORS: u64 = PAGE_BYTES / SECTOR_BYTES;
/// Default region merge gap, bytes: reads less than 64 KiB apart share a file (a gap the size of a typical
/// readahead window; any gap gives the same device positions, only the file count changes).
pub const DEFAULT_MERGE_GAP_BYTES: u64 = 64 * 1024;

/// How to turn reads into a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapOptions {
    /// Profile name (the replay's flow name) and prefix of the file names.
    pub name: String,
    /// Capacity of the traced device, sectors (for the placement fractions).
    pub capacity_sectors: u64,
    /// Reads less than this many bytes apart on the device share a region (file).
    pub merge_gap_bytes: u64,
}

/// Why no profile could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The recording holds no reads (warm cache, wrong process tree, or tracing saw nothing).
    #[error("the command read nothing from a block device (was the cache dropped, and did it run?)")]
    NoReads,
    /// The device capacity is unknown or zero.
    #[error("device capacity must be at least one sector")]
    NoCapacity,
    /// A read lies past the end of the device.
    #[error("read at sector {sector} (+{sectors}) lies past the device's end ({capacity} sectors)")]
    PastEnd {
        /// First sector.
        sector: u64,
        /// Length, sectors.
        sectors: u64,
        /// Capacity, sectors.
        capacity: u64,
    },
}

/// A region of the device: `[start, end)` in sectors, page-aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First sector.
    pub start: u64,
    /// One past the last sector.
    pub end: u64,
}

/// Merges the reads' ranges into page-aligned regions, sorted by position (see the module documentation).
pub fn regions(reads: &[TracedRead], merge_gap_bytes: u64) -> Vec<Region> {
    let gap = merge_gap_bytes.div_ceil(SECTOR_BYTES);
    let mut ranges: Vec<(u64, u64)> = reads
        .iter()
        .map(|r| {
            let start = r.sector / PAGE_SECTORS * PAGE_SECTORS;
            let end = (r.sector + r.sectors.max(1)).div_ceil(PAGE_SECTORS) * PAGE_SECTORS;
            (start, end)
        })
        .collect();
    ranges.sort_unstable();
    let mut out: Vec<Region> = Vec::new();
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.end.saturating_add(gap) => last.end = last.end.max(e),
            _ => out.push(Region { start: s, end: e }),
        }
    }
    out
}

/// Kinds and think times (µs) of the reads, in order (see the module documentation).
pub fn kinds_and_think(reads: &[TracedRead], start_ns: Option<u64>) -> Vec<(ReqKind, u64)> {
    let mut out = Vec::with_capacity(reads.len());
    for (i, r) in reads.iter().enumerate() {
        let kind = match (r.complete_ns, reads.get(i + 1)) {
            (None, _) => ReqKind::Readahead,
            (Some(c), Some(next)) if next.issue_ns < c => ReqKind::Readahead,
            _ => ReqKind::Sync,
        };
        let from = if i == 0 {
            start_ns.unwrap_or(r.issue_ns)
        } else {
            let p = &reads[i - 1];
            match out.last() {
                Some(&(ReqKind::Sync, _)) => p.complete_ns.unwrap_or(p.issue_ns),
                _ => p.issue_ns,
            }
        };
        let think_us = (r.issue_ns.saturating_sub(from) + 500) / 1000;
        out.push((kind, think_us));
    }
    out
}

/// Makes the profile of a recording (see the module documentation). The profile's mode is direct: its requests are
/// device-level requests, readahead included.
pub fn to_profile(rec: &Recording, opts: &MapOptions) -> Result<Profile, MapError> {
    if rec.reads.is_empty() {
        return Err(MapError::NoReads);
    }
    let cap = opts.capacity_sectors;
    if cap == 0 {
        return Err(MapError::NoCapacity);
    }
    if let Some(r) = rec.reads.iter().find(|r| r.sector.saturating_add(r.sectors) > cap) {
        return Err(MapError::PastEnd {
            sector: r.sector,
            sectors: r.sectors,
            capacity: cap,
        });
    }
    let regs = regions(&rec.reads, opts.merge_gap_bytes);
    let files = regs
        .iter()
        .enumerate()
        .map(|(i, g)| FileSpec {
            name: format!("{}-r{i:03}", opts.name),
            size: (g.end - g.start) * SECTOR_BYTES,
            placement: Placement::At(g.start as f64 / cap as f64),
            prewritten: true,
        })
        .collect();
    let kt = kinds_and_think(&rec.reads, rec.start_ns);
    let requests = rec
        .reads
        .iter()
        .zip(kt)
        .map(|(r, (kind, think_us))| {
            let file = regs.partition_point(|g| g.start <= r.sector) - 1;
            ProfileRequest {
                file: file as u32,
                offset: (r.sector - regs[file].start) * SECTOR_BYTES,
                len: r.sectors.max(1) * SECTOR_BYTES,
                kind,
                think_us,
                // The text format flags sync metadata reads (`RM`); a metadata readahead stays `RA`.
                meta: r.meta && kind == ReqKind::Sync,
            }
        })
        .collect();
    Ok(Profile {
        name: opts.name.clone(),
        mode: IoMode::Direct,
        files,
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::ftrace::Dev;

    const D: Dev = Dev { major: 254, minor: 0 };

    fn read(sector: u64, sectors: u64, issue_us: u64, complete_us: Option<u64>) -> TracedRead {
        TracedRead {
            dev: D,
            sector,
            sectors,
            issue_ns: issue_us * 1000,
            complete_ns: complete_us.map(|c| c * 1000),
            readahead: false,
            meta: false,
        }
    }

    #[test]
    fn regions_merge_close_ranges_and_align_to_pages() {
        let reads = [
            read(1000, 16, 0, None),
            read(1016, 8, 0, None), // touches the first
            read(1100, 8, 0, None), // 76 sectors after: within a 64 KiB gap
            read(3, 2, 0, None),    // unaligned: widened to the page 0..8
            read(50_000, 8, 0, None),
        ];
        assert_eq!(
            regions(&reads, 64 * 1024),
            vec![
                Region { start: 0, end: 8 },
                Region { start: 1000, end: 1112 },
                Region {
                    start: 50_000,
                    end: 50_008
                }
            ]
        );
        // Without a gap, only touching ranges merge.
        assert_eq!(regions(&reads, 0).len(), 4);
    }

    #[test]
    fn think_times_follow_the_replay_rule() {
        let reads = [
            read(0, 8, 100, Some(150)),     // completes before the next issue: R; think 100 from the start
            read(8, 8, 170, Some(300)),     // the next is issued at 200, before 300: RA; think 170 - 150
            read(16, 8, 200, Some(260)),    // R; think 200 - 170 (from the RA's issue)
            read(100, 8, 1260, None),       // never completed: RA; think 1260 - 260
            read(200, 8, 1300, Some(1400)), // last: R; think 1300 - 1260
        ];
        let kt = kinds_and_think(&reads, Some(0));
        use ReqKind::{Readahead as A, Sync as S};
        assert_eq!(kt, vec![(S, 100), (A, 20), (S, 30), (A, 1000), (S, 40)]);
        // Without a start marker the first think time is 0.
        assert_eq!(kinds_and_think(&reads, None)[0], (S, 0));
    }

    #[test]
    fn profile_maps_sectors_to_file_offsets() {
        let rec = Recording {
            start_ns: Some(0),
            reads: vec![
                read(2048, 16, 10, Some(20)),
                read(2064, 8, 20, Some(30)),
                read(1_000_000, 8, 40, Some(50)),
            ],
            ..Recording::default()
        };
        let opts = MapOptions {
            name: "app".into(),
            capacity_sectors: 2_000_000,
            merge_gap_bytes: DEFAULT_MERGE_GAP_BYTES,
        };
        let p = to_profile(&rec, &opts).expect("maps");
        assert_eq!(p.files.len(), 2);
        assert_eq!(p.files[0].name, "app-r000");
        assert_eq!(p.files[0].size, 24 * 512);
        assert_eq!(p.files[0].placement, Placement::At(2048.0 / 2e6));
        assert_eq!(p.files[1].placement, Placement::At(0.5));
        let got: Vec<_> = p
            .requests
            .iter()
            .map(|r| (r.file, r.offset, r.len, r.think_us))
            .collect();
        assert_eq!(got, vec![(0, 0, 8192, 10), (0, 8192, 4096, 0), (1, 0, 4096, 10)]);
        let st = p.stats();
        assert_eq!((st.requests, st.random, st.bytes), (3, 2, 16384));
        p.validate().expect("valid");
        assert_eq!(Profile::parse(&p.to_text()), Ok(p));

        let bad = MapOptions {
            capacity_sectors: 1_000_000,
            ..opts.clone()
        };
        assert!(matches!(to_profile(&rec, &bad), Err(MapError::PastEnd { .. })));
        let empty = Recording::default();
        assert_eq!(to_profile(&empty, &opts), Err(MapError::NoReads));
        assert_eq!(
            to_profile(
                &rec,
                &MapOptions {
                    capacity_sectors: 0,
                    ..opts
                }
            ),
            Err(MapError::NoCapacity)
        );
    }
}
