//! Interleaved readers: N processes that together read one area sequentially, each taking every N-th block (S's
//! `interleaved_io` test, docs/BENCHMARKS.md, interleaved: fio readers with `bs=16k`, `zonemode=strided`, zone size
//! 16 KiB, reader *i* starting at *i*·16 KiB and skipping the (N−1) blocks the others read).
//!
//! This is the I/O of a virtual machine whose disk is served by several I/O threads of one emulator (QEMU/KVM):
//! each thread looks seeky on its own, while their union is one sequential stream. A scheduler that idles for each
//! process in turn (CFQ, BFQ) seeks between the threads' blocks unless it recognises them as cooperating and merges
//! their queues (CFQ's close cooperators, BFQ's early queue merge: `cfq_close_cooperator`, `bfq_setup_cooperator`).
//!
//! Reads are O_DIRECT by default: an emulator with `cache=none` bypasses the host page cache, so the device sees
//! exactly the threads' blocks (with buffered reads the page cache and readahead would serve most of them and hide the
//! scheduler).
//!
//! Each reader keeps one read in flight (fio's synchronous engine, depth 1) and wraps around at the end of the area.

use crate::fio::NS_PER_S;
use crate::process::{Actions, Event, FileId, FlowSpec, IoMode, Op, Process, ProcessReport};
use bfq_sched::Time;

/// Block size of S's interleaved readers, bytes (`bs=16k`, `zonesize=16k`).
pub const S_INTERLEAVED_BS_BYTES: u64 = 16 << 10;
/// Reader counts S runs the test with (N = 3, 5, 6, 7, 9; docs/BENCHMARKS.md, interleaved).
pub const S_INTERLEAVED_READERS: [u32; 5] = [3, 5, 6, 7, 9];
/// S's warm-up before measuring, ns (5 s).
pub const S_INTERLEAVED_WARMUP_NS: Time = 5 * NS_PER_S;
/// S's measurement time, ns (30 s).
pub const S_INTERLEAVED_MEASURE_NS: Time = 30 * NS_PER_S;

/// Settings of one interleaved reader.
#[derive(Debug, Clone, PartialEq)]
pub struct InterleavedConfig {
    /// Flow name.
    pub name: String,
    /// The shared area (a file or the raw device).
    pub file: FileId,
    /// Bytes of the area the readers cover; a pass ends at the last whole stride that fits.
    pub area_bytes: u64,
    /// Block size, bytes (0 is treated as 1).
    pub bs: u64,
    /// Number of readers sharing the area (0 is treated as 1).
    pub readers: u32,
    /// This reader's index, `0..readers`.
    pub index: u32,
    /// Buffered or direct reads.
    pub mode: IoMode,
}

impl InterleavedConfig {
    /// Reader `index` of `readers` over `area_bytes` of `file`, with S's 16 KiB blocks and direct reads.
    pub fn new(file: FileId, area_bytes: u64, readers: u32, index: u32) -> Self {
        InterleavedConfig {
            name: format!("interleaved{index}"),
            file,
            area_bytes,
            bs: S_INTERLEAVED_BS_BYTES,
            readers,
            index,
            mode: IoMode::Direct,
        }
    }

    /// Strides (rounds of one block per reader) in one pass over the area; at least 1.
    pub fn strides(&self) -> u64 {
        (self.area_bytes / (self.bs.max(1) * u64::from(self.readers.max(1)))).max(1)
    }

    /// Byte offset of this reader's `k`-th read (counting from 0 over all passes).
    pub fn offset(&self, k: u64) -> u64 {
        let n = u64::from(self.readers.max(1));
        let stride = k % self.strides();
        (stride * n + u64::from(self.index.min(self.readers.max(1) - 1))) * self.bs.max(1)
    }
}

/// One interleaved reader; runs until the scenario ends.
#[derive(Debug, Clone)]
pub struct InterleavedReader {
    cfg: InterleavedConfig,
    started: bool,
    next: u64,
    in_flight: Option<u64>,
    report: ProcessReport,
}

impl InterleavedReader {
    /// A reader with the given settings.
    pub fn new(cfg: InterleavedConfig) -> Self {
        InterleavedReader {
            cfg,
            started: false,
            next: 0,
            in_flight: None,
            report: ProcessReport::default(),
        }
    }

    /// The `readers` cooperating readers of `area_bytes` of `file`, with S's settings.
    pub fn group(file: FileId, area_bytes: u64, readers: u32) -> Vec<InterleavedReader> {
        (0..readers.max(1))
            .map(|i| InterleavedReader::new(InterleavedConfig::new(file, area_bytes, readers.max(1), i)))
            .collect()
    }
}

impl Process for InterleavedReader {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named(self.cfg.name.clone())
    }

    fn on_event(&mut self, event: Event, _now: Time, out: &mut Actions) {
        match event {
            Event::Start => self.started = true,
            Event::Completed { tag, result } => {
                if self.in_flight == Some(tag) {
                    self.in_flight = None;
                    match result {
                        Ok(b) => {
                            self.report.read_bytes += b;
                            self.report.ops += 1;
                        }
                        Err(_) => {
                            // fio stops at the first error (`continue_on_error=none`).
                            self.report.errors += 1;
                            out.exit = true;
                            return;
                        }
                    }
                }
            }
            Event::Woke => {}
        }
        if !self.started || self.in_flight.is_some() {
            return;
        }
        let k = self.next;
        self.next += 1;
        let tag = k + 1;
        self.in_flight = Some(tag);
        out.issue(
            tag,
            Op::Read {
                file: self.cfg.file,
                offset: self.cfg.offset(k),
                len: self.cfg.bs.max(1),
                mode: self.cfg.mode,
                meta: false,
            },
        );
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::Exec;

    fn offsets(ex: &Exec) -> Vec<u64> {
        ex.issued
            .iter()
            .filter_map(|i| match i.op {
                Op::Read { offset, .. } => Some(offset),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn readers_partition_the_area_into_one_sequential_stream() {
        // 3 readers over 6 strides (288 KiB): reader i reads blocks i, i+3, i+6, ...; together every block once.
        let area = 3 * 6 * S_INTERLEAVED_BS_BYTES;
        let mut all = Vec::new();
        for mut r in InterleavedReader::group(1, area, 3) {
            let mut ex = Exec::new(1_000, 0);
            ex.run(&mut r, 0, 6 * 1_000 - 1);
            assert_eq!(ex.max_outstanding, 1, "synchronous, depth 1");
            let offs = offsets(&ex);
            assert_eq!(offs.len(), 6);
            for w in offs.windows(2) {
                assert_eq!(w[1] - w[0], 3 * S_INTERLEAVED_BS_BYTES, "stride of N blocks");
            }
            all.extend(offs);
        }
        all.sort_unstable();
        let want: Vec<u64> = (0..18).map(|b| b * S_INTERLEAVED_BS_BYTES).collect();
        assert_eq!(all, want);
    }

    #[test]
    fn wraps_at_the_end_of_the_area_and_reads_direct() {
        let cfg = InterleavedConfig::new(0, 2 * 2 * S_INTERLEAVED_BS_BYTES, 2, 1);
        let mut r = InterleavedReader::new(cfg);
        let mut ex = Exec::new(1_000, 0);
        ex.run(&mut r, 0, 4 * 1_000 - 1);
        let bs = S_INTERLEAVED_BS_BYTES;
        assert_eq!(offsets(&ex), vec![bs, 3 * bs, bs, 3 * bs]);
        assert!(ex.issued.iter().all(|i| matches!(
            i.op,
            Op::Read {
                mode: IoMode::Direct,
                len: S_INTERLEAVED_BS_BYTES,
                ..
            }
        )));
        assert_eq!(r.report().read_bytes, 3 * bs, "three completed by the end");
    }
}
