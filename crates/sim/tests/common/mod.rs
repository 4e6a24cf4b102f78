//! Processes shared by the simulator's integration tests.

#![allow(dead_code)]

use bfq_sched::Time;
use bfq_workload::{Actions, Event, FlowSpec, IoMode, Op, Process, ProcessReport};

/// Buffer size of [`SeqReader`]'s reads, bytes (4 KiB, so that the host's readahead makes the block requests).
pub const BS: u64 = 4096;

/// Reads its file front to back in 4 KiB buffered reads (so the host's readahead makes the block requests).
pub struct SeqReader {
    /// The file (index in the simulation's file table).
    pub file: u32,
    /// Bytes to read.
    pub size: u64,
    /// Next offset, bytes.
    pub pos: u64,
    /// What it has read so far.
    pub report: ProcessReport,
}

impl SeqReader {
    /// A reader of `size` bytes of `file`, from its start.
    pub fn new(file: u32, size: u64) -> Self {
        SeqReader {
            file,
            size,
            pos: 0,
            report: ProcessReport::default(),
        }
    }
}

impl Process for SeqReader {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named("seqreader")
    }
    fn on_event(&mut self, ev: Event, _now: Time, out: &mut Actions) {
        if let Event::Completed { result: Ok(n), .. } = ev {
            self.report.read_bytes += n;
        }
        if self.pos >= self.size {
            out.exit = true;
            return;
        }
        out.issue(
            0,
            Op::Read {
                file: self.file,
                offset: self.pos,
                len: BS,
                mode: IoMode::Buffered,
                meta: false,
            },
        );
        self.pos += BS;
    }
    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}
