//! fio-like readers: sequential (`rw=read`) and random (`rw=randread`), greedy or limited, with a queue depth and an
//! optional bandwidth cap. See [`crate::fio`] for the exact semantics.

use crate::fio::{Dir, Job, JobConfig, Pattern};
use crate::process::{Actions, Event, FileId, FlowSpec, Process, ProcessReport};
use crate::rng::ProcessRng;
use bfq_sched::Time;

/// A reader process.
#[derive(Debug, Clone)]
pub struct Reader {
    job: Job,
    flow: FlowSpec,
}

impl Reader {
    /// A reader with the given settings; `rng` draws the offsets of a random reader (unused by a sequential one).
    pub fn new(cfg: JobConfig, rng: ProcessRng) -> Self {
        let flow = FlowSpec::named(cfg.name.clone());
        Reader {
            job: Job::new(cfg, Dir::Read, rng),
            flow,
        }
    }

    /// A greedy sequential reader of `file` (`file_size` bytes) with fio's defaults (4 KiB buffered sync reads).
    pub fn seq(name: impl Into<String>, file: FileId, file_size: u64, rng: ProcessRng) -> Self {
        Self::new(JobConfig::new(name, file, file_size, Pattern::Sequential), rng)
    }

    /// A greedy random reader of `file` (`file_size` bytes) with fio's defaults (4 KiB buffered sync reads).
    pub fn rand(name: impl Into<String>, file: FileId, file_size: u64, rng: ProcessRng) -> Self {
        Self::new(JobConfig::new(name, file, file_size, Pattern::Random), rng)
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

impl Process for Reader {
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
    use crate::process::{IoMode, Op};
    use crate::rng::stream;
    use crate::test_exec::Exec;

    fn offsets(exec: &Exec) -> Vec<(u64, u64)> {
        exec.issued
            .iter()
            .filter_map(|i| match i.op {
                Op::Read { offset, len, .. } => Some((offset, len)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn sequential_offsets_advance_and_wrap() {
        // 10 KiB file with 4 KiB blocks: 0, 4096, 8192 (2 KiB), then again from 0.
        let mut cfg = JobConfig::new("r", 3, 10 * 1024, Pattern::Sequential);
        cfg.limit = Limit::Loops(2);
        let mut r = Reader::new(cfg, stream(1, "r"));
        let mut ex = Exec::new(1000, 1);
        let exit = ex.run(&mut r, 0, u64::MAX);
        assert!(exit.is_some());
        let offs = offsets(&ex);
        assert_eq!(
            offs,
            vec![
                (0, 4096),
                (4096, 4096),
                (8192, 2048),
                (0, 4096),
                (4096, 4096),
                (8192, 2048)
            ]
        );
        // Every read is buffered on file 3; the second pass starts by dropping the file's cache (fio invalidate=1),
        // so exactly one Invalidate is issued, right before the first read of pass two.
        let kinds: Vec<&Op> = ex.issued.iter().map(|i| &i.op).collect();
        assert_eq!(
            kinds.iter().filter(|o| matches!(o, Op::Invalidate { file: 3 })).count(),
            1
        );
        assert!(matches!(kinds[3], Op::Invalidate { file: 3 }));
        assert!(kinds.iter().all(|o| matches!(
            o,
            Op::Read {
                file: 3,
                mode: IoMode::Buffered,
                ..
            } | Op::Invalidate { file: 3 }
        )));
        assert_eq!(r.report().read_bytes, 2 * 10 * 1024);
        assert_eq!(r.report().ops, 6);
        assert_eq!(ex.max_outstanding, 1);
    }

    #[test]
    fn random_offsets_aligned_in_range_and_deterministic() {
        let run = |seed: u64| {
            let mut cfg = JobConfig::new("rr", 0, 1 << 30, Pattern::Random);
            cfg.limit = Limit::Bytes(4096 * 2000);
            let mut r = Reader::new(cfg, stream(seed, "rr"));
            let mut ex = Exec::new(1000, 0);
            ex.run(&mut r, 0, u64::MAX).expect("exits");
            offsets(&ex)
        };
        let a = run(42);
        assert_eq!(a.len(), 2000);
        assert!(a.iter().all(|&(o, l)| o % 4096 == 0 && o + l <= 1 << 30 && l == 4096));
        // Uniform: both halves of the file are hit about equally.
        let low = a.iter().filter(|&&(o, _)| o < 1 << 29).count();
        assert!((800..1200).contains(&low), "low half hits {low}");
        assert_eq!(a, run(42));
        assert_ne!(a, run(43));
    }

    #[test]
    fn queue_depth_is_respected() {
        let mut cfg = JobConfig::new("qd", 0, 1 << 20, Pattern::Random);
        cfg.iodepth = 8;
        cfg.mode = IoMode::Direct;
        cfg.limit = Limit::Loops(1);
        let mut r = Reader::new(cfg, stream(1, "qd"));
        let mut ex = Exec::new(10_000, 1);
        ex.run(&mut r, 0, u64::MAX).expect("exits");
        assert_eq!(ex.max_outstanding, 8);
        assert_eq!(ex.issued.len(), 256);
        // The first eight go out at once.
        assert!(ex.issued[..8].iter().all(|i| i.time == 0));
        assert!(ex.issued[8].time > 0);
    }

    #[test]
    fn rate_cap_holds() {
        let rate = 1_000_000; // 1 MB/s
        let mut cfg = JobConfig::new("capped", 0, 1 << 30, Pattern::Sequential);
        cfg.rate = Some(rate);
        cfg.limit = Limit::Time(10 * crate::fio::NS_PER_S);
        let mut r = Reader::new(cfg, stream(1, "capped"));
        let mut ex = Exec::new(50_000, 1); // the device alone would give ~80 MB/s
        let exit = ex.run(&mut r, 0, u64::MAX).expect("exits");
        let bytes = r.report().read_bytes as f64;
        let secs = exit as f64 / 1e9;
        let got = bytes / secs;
        assert!(
            (got / rate as f64 - 1.0).abs() < 0.02,
            "{got} B/s against a cap of {rate}"
        );
    }

    #[test]
    fn time_limit_and_empty_file() {
        let mut cfg = JobConfig::new("t", 0, 1 << 30, Pattern::Sequential);
        cfg.limit = Limit::Time(1_000_000);
        let mut r = Reader::new(cfg, stream(1, "t"));
        let mut ex = Exec::new(100_000, 0);
        let exit = ex.run(&mut r, 5, u64::MAX).expect("exits");
        assert_eq!(ex.issued.len(), 10);
        assert_eq!(exit, 5 + 1_000_000);
        let mut e = Reader::seq("e", 0, 0, stream(1, "e"));
        let mut ex = Exec::new(1, 0);
        assert_eq!(ex.run(&mut e, 0, u64::MAX), Some(0));
        assert!(ex.issued.is_empty());
    }
}
