//! The engine shared by the fio-like readers and writers ([`crate::readers`], [`crate::writers`]): a job that issues
//! fixed-size operations over one file, sequentially or at random block-aligned offsets, with a queue depth, an
//! optional bandwidth cap, and a stop condition.
//!
//! Semantics follow fio's, as S uses it (`fio --loops=10000`, defaults `bs=4k`, `direct=0`, `iodepth=1`):
//! - one *loop* is `ceil(file_size / bs)` operations: the whole file in order for a sequential job, that many
//!   uniformly drawn blocks for a random one (fio's default random map would visit each block exactly once per loop;
//!   we draw with replacement, which has the same offset distribution and needs no per-block memory);
//! - the job waits for its operations to drain at the end of a loop, and a writer may `fsync` there;
//! - `rate=` caps the average bandwidth: operation *n* is not issued before `start + bytes_before_n / rate`, so a job
//!   that fell behind catches up, as fio's does;
//! - the job stops at the first error (fio's default `continue_on_error=none`).

use crate::process::{Actions, Event, FileId, IoMode, Op, ProcessReport};
use crate::rng::ProcessRng;
use bfq_sched::Time;
use rand::Rng;

/// fio's default block size, bytes (fio HOWTO: `bs` defaults to 4k).
pub const FIO_DEFAULT_BS_BYTES: u64 = 4096;
/// fio's loop count as S passes it (`fio --loops=10000`): effectively forever.
pub const S_FIO_LOOPS: u64 = 10_000;
/// Nanoseconds per second.
pub(crate) const NS_PER_S: u64 = 1_000_000_000;

/// Offsets a job visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// 0, bs, 2·bs, … to the end of the file, then again from 0 (fio `read`/`write`).
    Sequential,
    /// Uniformly drawn block-aligned offsets within the file (fio `randread`/`randwrite`).
    Random,
}

/// When a job stops issuing (it exits once its outstanding operations have completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Never: greedy, until the scenario ends (S's `--loops=10000` in practice).
    Forever,
    /// After this many loops over the file.
    Loops(u64),
    /// After this many bytes (the last operation is shortened to fit).
    Bytes(u64),
    /// After this many nanoseconds from the job's start.
    Time(Time),
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// Settings of a fio-like job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    /// Flow name, e.g. `seqreader0`.
    pub name: String,
    /// File the job works on.
    pub file: FileId,
    /// Size of the region of the file the job covers, bytes (fio `size=`).
    pub file_size: u64,
    /// Operation size, bytes (fio `bs=`); 0 is treated as 1.
    pub bs: u64,
    /// Buffered (fio `direct=0`) or O_DIRECT.
    pub mode: IoMode,
    /// Sequential or random offsets.
    pub pattern: Pattern,
    /// Operations outstanding at once (fio `iodepth=`); 0 is treated as 1. 1 means synchronous (psync).
    pub iodepth: u32,
    /// Average bandwidth cap, bytes/s (fio `rate=`); `None` or 0 = uncapped.
    pub rate: Option<u64>,
    /// Stop condition.
    pub limit: Limit,
    /// Call `fsync` on the file at the end of each loop (writers; fio `end_fsync` per loop).
    pub fsync_each_loop: bool,
    /// Readers: drop the file's cached pages before each new pass (fio `invalidate=1`, which S sets), so that later
    /// passes read from the device rather than from memory. Writers ignore it.
    pub invalidate: bool,
}

impl JobConfig {
    /// A greedy job with fio's defaults (4 KiB, buffered, depth 1, uncapped, forever).
    pub fn new(name: impl Into<String>, file: FileId, file_size: u64, pattern: Pattern) -> Self {
        JobConfig {
            name: name.into(),
            file,
            file_size,
            bs: FIO_DEFAULT_BS_BYTES,
            mode: IoMode::Buffered,
            pattern,
            iodepth: 1,
            rate: None,
            limit: Limit::Forever,
            fsync_each_loop: false,
            invalidate: true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NotStarted,
    Running,
    Fsyncing,
    Done,
}

/// The job state machine (wrapped by [`crate::readers::Reader`] and [`crate::writers::Writer`]).
#[derive(Debug, Clone)]
pub(crate) struct Job {
    cfg: JobConfig,
    dir: Dir,
    rng: ProcessRng,
    phase: Phase,
    start: Time,
    ops_per_loop: u64,
    loop_ops_issued: u64,
    loops_done: u64,
    /// A new pass started and the file's cache should be dropped before its first operation.
    invalidate_pending: bool,
    issued_bytes: u64,
    outstanding: u32,
    next_tag: u64,
    fsync_tag: Option<u64>,
    stopped: bool,
    report: ProcessReport,
}

impl Job {
    pub(crate) fn new(mut cfg: JobConfig, dir: Dir, rng: ProcessRng) -> Self {
        cfg.bs = cfg.bs.max(1);
        cfg.iodepth = cfg.iodepth.max(1);
        if cfg.rate == Some(0) {
            cfg.rate = None;
        }
        let ops_per_loop = cfg.file_size.div_ceil(cfg.bs);
        Job {
            cfg,
            dir,
            rng,
            phase: Phase::NotStarted,
            start: 0,
            ops_per_loop,
            loop_ops_issued: 0,
            loops_done: 0,
            invalidate_pending: false,
            issued_bytes: 0,
            outstanding: 0,
            next_tag: 1,
            fsync_tag: None,
            stopped: false,
            report: ProcessReport::default(),
        }
    }

    pub(crate) fn config(&self) -> &JobConfig {
        &self.cfg
    }

    pub(crate) fn report(&self) -> ProcessReport {
        self.report.clone()
    }

    fn max_loops(&self) -> u64 {
        match self.cfg.limit {
            Limit::Loops(n) => n,
            _ => u64::MAX,
        }
    }

    /// True once no more data operations may be issued.
    fn exhausted(&self, now: Time) -> bool {
        if self.stopped || self.ops_per_loop == 0 || self.loops_done >= self.max_loops() {
            return true;
        }
        match self.cfg.limit {
            Limit::Bytes(n) => self.issued_bytes >= n,
            Limit::Time(d) => now >= self.start.saturating_add(d),
            Limit::Forever | Limit::Loops(_) => false,
        }
    }

    /// Earliest time the next operation may be issued under the rate cap.
    fn rate_gate(&self) -> Option<Time> {
        let rate = self.cfg.rate?;
        let delay = (u128::from(self.issued_bytes) * u128::from(NS_PER_S)) / u128::from(rate);
        Some(self.start.saturating_add(u64::try_from(delay).unwrap_or(u64::MAX)))
    }

    fn next_op(&mut self) -> Op {
        let bs = self.cfg.bs;
        let block = match self.cfg.pattern {
            Pattern::Sequential => self.loop_ops_issued,
            Pattern::Random => self.rng.gen_range(0..self.ops_per_loop),
        };
        let offset = block * bs;
        let mut len = bs.min(self.cfg.file_size - offset);
        if let Limit::Bytes(n) = self.cfg.limit {
            len = len.min(n - self.issued_bytes);
        }
        let file = self.cfg.file;
        let mode = self.cfg.mode;
        match self.dir {
            Dir::Read => Op::Read {
                file,
                offset,
                len,
                mode,
                meta: false,
            },
            Dir::Write => Op::Write {
                file,
                offset,
                len,
                mode,
            },
        }
    }

    fn tag(&mut self) -> u64 {
        let t = self.next_tag;
        self.next_tag += 1;
        t
    }

    pub(crate) fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        match event {
            Event::Start => {
                if self.phase == Phase::NotStarted {
                    self.phase = Phase::Running;
                    self.start = now;
                }
            }
            Event::Woke => {}
            Event::Completed { tag, result } => {
                self.outstanding = self.outstanding.saturating_sub(1);
                match result {
                    Ok(bytes) => {
                        self.report.ops += 1;
                        if self.fsync_tag != Some(tag) {
                            match self.dir {
                                Dir::Read => self.report.read_bytes += bytes,
                                Dir::Write => self.report.written_bytes += bytes,
                            }
                        }
                    }
                    Err(_) => {
                        self.report.errors += 1;
                        self.stopped = true;
                    }
                }
                if self.fsync_tag == Some(tag) {
                    self.fsync_tag = None;
                    self.phase = Phase::Running;
                    self.loops_done += 1;
                    self.loop_ops_issued = 0;
                    self.invalidate_pending = self.cfg.invalidate && self.dir == Dir::Read;
                }
            }
        }
        self.step(now, out);
    }

    fn step(&mut self, now: Time, out: &mut Actions) {
        match self.phase {
            Phase::NotStarted | Phase::Done => return,
            Phase::Fsyncing => return,
            Phase::Running => {}
        }
        loop {
            // End of a loop: drain, optionally fsync, then start the next loop.
            if self.loop_ops_issued >= self.ops_per_loop && self.ops_per_loop > 0 {
                if self.outstanding > 0 {
                    return;
                }
                if self.cfg.fsync_each_loop && self.dir == Dir::Write && !self.stopped {
                    let tag = self.tag();
                    self.fsync_tag = Some(tag);
                    self.outstanding += 1;
                    self.phase = Phase::Fsyncing;
                    out.issue(tag, Op::Fsync { file: self.cfg.file });
                    return;
                }
                self.loops_done += 1;
                self.loop_ops_issued = 0;
                self.invalidate_pending = self.cfg.invalidate && self.dir == Dir::Read;
            }
            if self.exhausted(now) {
                if self.outstanding == 0 {
                    self.phase = Phase::Done;
                    out.exit = true;
                }
                return;
            }
            if self.outstanding >= self.cfg.iodepth {
                return;
            }
            if let Some(gate) = self.rate_gate() {
                if gate > now {
                    let wake = match self.cfg.limit {
                        Limit::Time(d) => gate.min(self.start.saturating_add(d)),
                        _ => gate,
                    };
                    out.sleep_until = Some(wake);
                    return;
                }
            }
            if std::mem::take(&mut self.invalidate_pending) {
                out.issue(self.tag(), Op::Invalidate { file: self.cfg.file });
            }
            let op = self.next_op();
            if let Op::Read { len, .. } | Op::Write { len, .. } = op {
                self.issued_bytes += len;
            }
            let tag = self.tag();
            self.outstanding += 1;
            self.loop_ops_issued += 1;
            out.issue(tag, op);
        }
    }
}
