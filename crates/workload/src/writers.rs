//! fio-like writers: sequential (`rw=write`) and random (`rw=randwrite`), greedy or limited, with a queue depth, an
//! optional bandwidth cap (fio `rate=`, as S's `MAXRATE`) and an optional `fsync` at the end of each loop. See
//! [`crate::fio`] for the exact semantics.

use crate::fio::{Dir, Job, JobConfig, Pattern};
use crate::process::{Actions, Event, FileId, FlowSpec, Process, ProcessReport};
use crate::rng::ProcessRng;
use bfq_sched::Time;

/// A writer process.
#[derive(Debug, Clone)]
pub struct Writer {
    job: Job,
    flow: FlowSpec,
}

impl Writer {
    /// A writer with the given settings; `rng` draws the offsets of a random writer (unused by a sequential one).
    pub fn new(cfg: JobConfig, rng: ProcessRng) -> Self {
        let flow = FlowSpec::named(cfg.name.clone());
        Writer {
            job: Job::new(cfg, Dir::Write, rng),
            flow,
        }
    }

    /// A greedy sequential writer of `file` (`file_size` bytes per loop), fio defaults (4 KiB buffered writes),
    /// capped at `rate` bytes/s if given.
    pub fn seq(name: impl Into<String>, file: FileId, file_size: u64, rate: Option<u64>, rng: ProcessRng) -> Self {
        let mut cfg = JobConfig::new(name, file, file_size, Pattern::Sequential);
        cfg.rate = rate;
        Self::new(cfg, rng)
    }

    /// A greedy random writer of `file` (`file_size` bytes), fio defaults (4 KiB buffered writes), capped at `rate`
    /// bytes/s if given.
    pub fn rand(name: impl Into<String>, file: FileId, file_size: u64, rate: Option<u64>, rng: ProcessRng) -> Self {
        let mut cfg = JobConfig::new(name, file, file_size, Pattern::Random);
        cfg.rate = rate;
        Self::new(cfg, rng)
    }

    /// Replaces the flow identity (name, class, priority, weight, group).
    pub fn with_flow(mut self, flow: FlowSpec) -> Self {
        self.flow = flow;
        self
    }

    /// The job's settings.
    pub fn config(&self) -> &JobConfig {
        self.job.config()
    }
}

impl Process for Writer {
    fn flow(&self) -> FlowSpec {
        self.flow.clone()
    }
    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        self.job.on_event(event, now, out);
    }
    fn report(&self) -> ProcessReport {
        self.job.report()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fio::Limit;
    use crate::process::Op;
    use crate::rng::stream;
    use crate::test_exec::Exec;

    #[test]
    fn sequential_writes_with_fsync_per_loop() {
        let mut cfg = JobConfig::new("w", 1, 8192, Pattern::Sequential);
        cfg.fsync_each_loop = true;
        cfg.iodepth = 2;
        cfg.limit = Limit::Loops(2);
        let mut w = Writer::new(cfg, stream(1, "w"));
        let mut ex = Exec::new(1000, 0);
        ex.run(&mut w, 0, u64::MAX).expect("exits");
        let ops: Vec<Op> = ex.issued.iter().map(|i| i.op.clone()).collect();
        let wr = |offset| Op::Write {
            file: 1,
            offset,
            len: 4096,
            mode: crate::IoMode::Buffered,
        };
        assert_eq!(
            ops,
            vec![
                wr(0),
                wr(4096),
                Op::Fsync { file: 1 },
                wr(0),
                wr(4096),
                Op::Fsync { file: 1 }
            ]
        );
        // The fsync waits for the loop's writes.
        assert!(ex.issued[2].time >= 1000);
        let r = w.report();
        assert_eq!((r.written_bytes, r.read_bytes, r.ops), (16384, 0, 6));
    }

    #[test]
    fn random_writer_rate_cap_holds() {
        let rate = 13 * 1024; // S: 4000 KB/s / 60 / 5 writers, in fio KiB
        let mut cfg = JobConfig::new("rw", 0, 500 << 20, Pattern::Random);
        cfg.rate = Some(rate);
        cfg.limit = Limit::Time(100 * crate::fio::NS_PER_S);
        let mut w = Writer::new(cfg, stream(5, "rw"));
        let mut ex = Exec::new(20_000, 2);
        let exit = ex.run(&mut w, 0, u64::MAX).expect("exits");
        let got = w.report().written_bytes as f64 / (exit as f64 / 1e9);
        assert!((got / rate as f64 - 1.0).abs() < 0.02, "{got} B/s");
        assert!(ex
            .issued
            .iter()
            .all(|i| matches!(i.op, Op::Write { offset, .. } if offset % 4096 == 0)));
    }
}
