//! The noise process of S's video benchmark: every few seconds, read a small file with 1 MiB reads that bypass the
//! cache (`dd if=smallfile of=/dev/null iflag=nocache bs=1M count=15`), optionally with a `sync` in parallel
//! (docs/BENCHMARKS.md, video).
//!
//! `iflag=nocache` drops the file's pages after reading, so every round reaches the device; we issue O_DIRECT reads
//! by default to get the same effect without a cache-drop operation.

use crate::fio::NS_PER_S;
use crate::process::{Actions, Event, FileId, FlowSpec, IoMode, Op, Process, ProcessReport};
use bfq_sched::Time;

/// Period of S's noise command, ns (`video_play_vs_comms.sh`: every 4 s).
pub const S_NOISE_PERIOD_NS: Time = 4 * NS_PER_S;
/// Read size of S's noise `dd`, bytes (`bs=1M`).
pub const S_NOISE_BS_BYTES: u64 = 1 << 20;
/// Reads per round of S's noise `dd` (`count=15`: 15 MiB).
pub const S_NOISE_COUNT: u64 = 15;

/// Settings of a noise process.
#[derive(Debug, Clone, PartialEq)]
pub struct NoiseConfig {
    /// Flow name.
    pub name: String,
    /// The file read each round.
    pub file: FileId,
    /// Its size, bytes; a round reads `min(count·bs, file_size)` bytes from offset 0.
    pub file_size: u64,
    /// Read size, bytes (0 is treated as 1).
    pub bs: u64,
    /// Reads per round.
    pub count: u64,
    /// Rounds start at `start + k·period` (k = 1, 2, …); a round due while the previous runs waits for it, and due
    /// times that passed meanwhile are skipped. 0 is treated as 1 ns.
    pub period_ns: Time,
    /// Buffered or direct reads.
    pub mode: IoMode,
    /// Also issue a `sync` at the start of each round, in parallel with the reads.
    pub with_sync: bool,
}

impl NoiseConfig {
    /// S's noise: 15 × 1 MiB every 4 s, cache bypassed, with a parallel `sync`; `file` must hold at least 15 MiB.
    pub fn s_default(file: FileId, file_size: u64) -> Self {
        NoiseConfig {
            name: "noise".into(),
            file,
            file_size,
            bs: S_NOISE_BS_BYTES,
            count: S_NOISE_COUNT,
            period_ns: S_NOISE_PERIOD_NS,
            mode: IoMode::Direct,
            with_sync: true,
        }
    }
}

/// The noise process; runs forever.
#[derive(Debug, Clone)]
pub struct Noise {
    cfg: NoiseConfig,
    started: bool,
    next_due: Time,
    round_active: bool,
    reads_issued: u64,
    read_in_flight: Option<u64>,
    sync_in_flight: Option<u64>,
    next_tag: u64,
    rounds: u64,
    report: ProcessReport,
}

impl Noise {
    /// A noise process with the given settings.
    pub fn new(mut cfg: NoiseConfig) -> Self {
        cfg.bs = cfg.bs.max(1);
        cfg.period_ns = cfg.period_ns.max(1);
        Noise {
            cfg,
            started: false,
            next_due: 0,
            round_active: false,
            reads_issued: 0,
            read_in_flight: None,
            sync_in_flight: None,
            next_tag: 1,
            rounds: 0,
            report: ProcessReport::default(),
        }
    }

    /// Rounds completed.
    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    fn tag(&mut self) -> u64 {
        let t = self.next_tag;
        self.next_tag += 1;
        t
    }

    fn reads_per_round(&self) -> u64 {
        self.cfg.count.min(self.cfg.file_size.div_ceil(self.cfg.bs))
    }
}

impl Process for Noise {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named(self.cfg.name.clone())
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        match event {
            Event::Start if !self.started => {
                self.started = true;
                self.next_due = now.saturating_add(self.cfg.period_ns);
            }
            Event::Completed { tag, result } => {
                match result {
                    Ok(b) => {
                        self.report.ops += 1;
                        if self.read_in_flight == Some(tag) {
                            self.report.read_bytes += b;
                        }
                    }
                    Err(_) => self.report.errors += 1,
                }
                if self.read_in_flight == Some(tag) {
                    self.read_in_flight = None;
                }
                if self.sync_in_flight == Some(tag) {
                    self.sync_in_flight = None;
                }
            }
            _ => {}
        }
        if !self.started {
            return;
        }
        if self.round_active {
            if self.read_in_flight.is_none() && self.reads_issued < self.reads_per_round() {
                let offset = self.reads_issued * self.cfg.bs;
                let len = self.cfg.bs.min(self.cfg.file_size - offset);
                let tag = self.tag();
                self.read_in_flight = Some(tag);
                self.reads_issued += 1;
                out.issue(
                    tag,
                    Op::Read {
                        file: self.cfg.file,
                        offset,
                        len,
                        mode: self.cfg.mode,
                        meta: false,
                    },
                );
            }
            if self.read_in_flight.is_none() && self.sync_in_flight.is_none() {
                self.round_active = false;
                self.rounds += 1;
                while self.next_due <= now {
                    self.next_due = self.next_due.saturating_add(self.cfg.period_ns);
                }
            } else {
                return;
            }
        }
        if now >= self.next_due {
            self.round_active = true;
            self.reads_issued = 0;
            self.next_due = self.next_due.saturating_add(self.cfg.period_ns);
            if self.cfg.with_sync {
                let tag = self.tag();
                self.sync_in_flight = Some(tag);
                out.issue(tag, Op::Sync);
            }
            if self.reads_per_round() > 0 {
                let tag = self.tag();
                self.read_in_flight = Some(tag);
                self.reads_issued = 1;
                let len = self.cfg.bs.min(self.cfg.file_size);
                out.issue(
                    tag,
                    Op::Read {
                        file: self.cfg.file,
                        offset: 0,
                        len,
                        mode: self.cfg.mode,
                        meta: false,
                    },
                );
            }
            if self.read_in_flight.is_some() || self.sync_in_flight.is_some() {
                return;
            }
            self.round_active = false;
            self.rounds += 1;
        }
        out.sleep_until = Some(self.next_due);
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::Exec;

    #[test]
    fn rounds_every_period_with_sync() {
        let mut n = Noise::new(NoiseConfig::s_default(7, 15 << 20));
        let mut ex = Exec::new(10_000_000, 0); // 10 ms per op
        ex.run(&mut n, 0, 10 * NS_PER_S);
        assert_eq!(n.rounds(), 2);
        assert_eq!(n.report().read_bytes, 2 * (15 << 20));
        let round1: Vec<&crate::test_exec::Issued> = ex.issued.iter().filter(|i| i.time < 8 * NS_PER_S).collect();
        assert_eq!(round1.len(), 16);
        assert_eq!(round1[0].op, Op::Sync);
        assert_eq!(round1[0].time, 4 * NS_PER_S);
        assert!(matches!(
            round1[1].op,
            Op::Read {
                file: 7,
                offset: 0,
                len: 1_048_576,
                mode: IoMode::Direct,
                meta: false
            }
        ));
        assert!(matches!(round1[15].op, Op::Read { offset: 14_680_064, .. }));
        assert_eq!(
            ex.issued.iter().find(|i| i.time >= 8 * NS_PER_S).map(|i| i.time),
            Some(8 * NS_PER_S)
        );
        assert_eq!(ex.max_outstanding, 2);
    }

    #[test]
    fn slow_rounds_skip_missed_periods() {
        let mut c = NoiseConfig::s_default(0, 15 << 20);
        c.with_sync = false;
        let mut n = Noise::new(c);
        let mut ex = Exec::new(400_000_000, 0); // 0.4 s per read: a round takes 6 s
        ex.run(&mut n, 0, 20 * NS_PER_S);
        let starts: Vec<Time> = ex
            .issued
            .iter()
            .filter(|i| matches!(i.op, Op::Read { offset: 0, .. }))
            .map(|i| i.time)
            .collect();
        assert_eq!(starts, vec![4 * NS_PER_S, 12 * NS_PER_S, 20 * NS_PER_S]);
    }
}
