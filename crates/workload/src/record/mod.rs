//! Recorded start-up profiles: turning a block-layer trace of a real command's cold-cache start-up into an
//! application [`Profile`] (`bfq record`; the tracing itself is done by the command line tool).
//!
//! The trace is the text output of the Linux ftrace events `block_bio_queue`, `block_rq_issue`,
//! `block_rq_complete`, `mm_filemap_add_to_page_cache` and `sched_process_fork`, plus the `bfq-record` markers the
//! recorder writes ([`ftrace`] parses it). [`assemble`] keeps the read requests of the command's process tree;
//! [`mapping`] turns them into a profile: one file per device region, requests in trace order, kinds and think
//! times from the recorded issue and completion times. Page-fault reads are included: they reach the block layer
//! as reads in the faulting task's context. `docs/PROFILES.md` ("Recorded profiles") documents the mapping and its
//! limits.

pub mod assemble;
pub mod ftrace;
pub mod mapping;

pub use assemble::{assemble, AssembleError, AssembleOptions, Recording, TracedRead};
pub use ftrace::Dev;
pub use mapping::{to_profile, MapError, MapOptions, DEFAULT_MERGE_GAP_BYTES};

use crate::profile::{Profile, ReqKind};
use std::fmt::Write as _;

/// Why a trace could not become a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The trace could not be assembled.
    #[error(transparent)]
    Assemble(#[from] AssembleError),
    /// The reads could not be mapped.
    #[error(transparent)]
    Map(#[from] MapError),
}

/// Figures of a recording that the profile does not hold, for its header and the recorder's summary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordSummary {
    /// Device the reads came from.
    pub dev: Option<Dev>,
    /// Read requests.
    pub requests: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Requests the kernel flagged readahead (`A`).
    pub kernel_readahead: u64,
    /// Requests the kernel flagged metadata (`M`).
    pub metadata: u64,
    /// Requests kept as `RA` (the next read was issued before they completed).
    pub async_requests: u64,
    /// Distinct real files (inodes) whose pages the tree read into the page cache.
    pub files_touched: u64,
    /// Tasks in the process tree.
    pub tasks: u64,
    /// From the start (the command's fork) to the end marker (the command's wall-clock run time), µs.
    pub wall_us: Option<u64>,
    /// From the start to the last read's completion, µs.
    pub io_span_us: Option<u64>,
    /// Sum over reads of issue-to-completion time, µs.
    pub device_busy_us: u64,
    /// Events the kernel lost.
    pub lost_events: u64,
    /// Tree reads dropped because they were on another device.
    pub other_device_requests: u64,
}

impl RecordSummary {
    /// Computes the summary of a recording.
    pub fn of(rec: &Recording, profile: &Profile) -> Self {
        let last_complete = rec.reads.iter().filter_map(|r| r.complete_ns).max();
        RecordSummary {
            dev: rec.dev,
            requests: rec.reads.len() as u64,
            bytes: rec.reads.iter().map(|r| r.sectors * mapping::SECTOR_BYTES).sum(),
            kernel_readahead: rec.reads.iter().filter(|r| r.readahead).count() as u64,
            metadata: rec.reads.iter().filter(|r| r.meta).count() as u64,
            async_requests: profile.requests.iter().filter(|r| r.kind == ReqKind::Readahead).count() as u64,
            files_touched: rec.files.len() as u64,
            tasks: rec.tasks,
            wall_us: rec.start_ns.zip(rec.end_ns).map(|(s, e)| e.saturating_sub(s) / 1000),
            io_span_us: rec.start_ns.zip(last_complete).map(|(s, e)| e.saturating_sub(s) / 1000),
            device_busy_us: rec
                .reads
                .iter()
                .filter_map(|r| r.complete_ns.map(|c| c.saturating_sub(r.issue_ns)))
                .sum::<u64>()
                / 1000,
            lost_events: rec.lost_events,
            other_device_requests: rec.other_devices.iter().map(|(_, n)| n).sum(),
        }
    }

    /// The summary as `# ` comment lines (for the head of a profile file).
    pub fn comment(&self) -> String {
        let mut s = String::new();
        let opt = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("{:.1} ms", v as f64 / 1000.0));
        let _ = writeln!(
            s,
            "# device {}: {} read requests, {} bytes; kernel-flagged readahead {}, metadata {}; kept async (RA) {}",
            self.dev.map_or("?".to_string(), |d| d.to_string()),
            self.requests,
            self.bytes,
            self.kernel_readahead,
            self.metadata,
            self.async_requests
        );
        let _ = writeln!(
            s,
            "# {} real files touched, {} tasks; command ran {}, last read done after {}, device busy {}",
            self.files_touched,
            self.tasks,
            opt(self.wall_us),
            opt(self.io_span_us),
            opt(Some(self.device_busy_us))
        );
        if self.lost_events > 0 {
            let _ = writeln!(s, "# WARNING: the kernel lost {} trace events", self.lost_events);
        }
        if self.other_device_requests > 0 {
            let _ = writeln!(
                s,
                "# {} read requests on other devices were left out",
                self.other_device_requests
            );
        }
        s
    }
}

/// Assembles and maps a trace in one step; returns the profile and the recording it came from.
pub fn profile_from_trace(
    trace: &str,
    assemble_opts: &AssembleOptions,
    map_opts: &MapOptions,
) -> Result<(Profile, Recording), RecordError> {
    let rec = assemble(trace.lines(), assemble_opts)?;
    let profile = to_profile(&rec, map_opts)?;
    Ok((profile, rec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn sample_trace_becomes_a_replayable_profile() {
        let opts = MapOptions {
            name: "bash".into(),
            capacity_sectors: 1 << 29,
            // 984 sectors (492 KiB): exactly the gap between the first two reads' regions.
            merge_gap_bytes: 984 * 512,
        };
        let (p, rec) =
            profile_from_trace(assemble::tests::SAMPLE, &AssembleOptions::default(), &opts).expect("profile");
        // Reads at sectors 1000 (+16), 2000 (+8), 3000 (+64): 1000..1016 and 2000..2008 are 984 sectors apart, so
        // they share a region starting at sector 1000 (page-aligned); 3000 is 992 sectors after 2008: a new region.
        assert_eq!(p.files.len(), 2);
        let got: Vec<_> = p
            .requests
            .iter()
            .map(|r| (r.kind, r.file, r.offset, r.len, r.think_us))
            .collect();
        use ReqKind::{Readahead as A, Sync as S};
        assert_eq!(
            got,
            vec![
                (S, 0, 0, 8192, 100),          // issued 100 µs after the fork, done at 300
                (A, 0, 1000 * 512, 4096, 210), // issued at 510, 210 µs after that; the next came before it completed
                (S, 1, 0, 32768, 20),          // issued at 530, 20 µs after the RA's issue
            ]
        );
        let text = format!("{}{}", RecordSummary::of(&rec, &p).comment(), p.to_text());
        assert!(text.contains("lost 3 trace events"), "{text}");
        assert!(text.contains("1 read requests on other devices"), "{text}");
        let back = Profile::parse(&text).expect("parses");
        assert_eq!(back, p);
        let sum = RecordSummary::of(&rec, &p);
        assert_eq!(
            (sum.requests, sum.bytes, sum.metadata, sum.kernel_readahead),
            (3, 88 * 512, 1, 1)
        );
        assert_eq!(
            (sum.wall_us, sum.io_span_us, sum.device_busy_us),
            (Some(990), Some(790), 190 + 90 + 270)
        );
    }
}
