//! Periodic `sync`: S runs a background loop calling `sync` every 2 s whenever writers run, "to increase difficulty"
//! (S@HEAD, start-up, video and throughput benchmarks; docs/BENCHMARKS.md, Workloads).

use crate::process::{Actions, Event, FlowSpec, Op, Process, ProcessReport};
use bfq_sched::Time;

/// S's period between `sync` calls, ns (2 s; docs/BENCHMARKS.md, Workloads).
pub const S_SYNC_PERIOD_NS: Time = 2_000_000_000;

/// How the period is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncTiming {
    /// Sleep one period after each `sync` returns, as a shell loop `while true; do sleep 2; sync; done` does.
    AfterCompletion,
    /// A `sync` is due at start + k·period (k = 1, 2, …); one that would overlap the previous waits for it, and due
    /// times that passed meanwhile are skipped.
    FixedRate,
}

/// A process that calls `sync` periodically, forever. The first call comes one period after the start.
#[derive(Debug, Clone)]
pub struct PeriodicSync {
    name: String,
    period: Time,
    timing: SyncTiming,
    started: bool,
    start: Time,
    next_due: Time,
    in_flight: Option<u64>,
    next_tag: u64,
    report: ProcessReport,
}

impl PeriodicSync {
    /// A sync loop named `name` with a period of `period_ns` (0 is treated as 1 ns).
    pub fn new(name: impl Into<String>, period_ns: Time, timing: SyncTiming) -> Self {
        PeriodicSync {
            name: name.into(),
            period: period_ns.max(1),
            timing,
            started: false,
            start: 0,
            next_due: 0,
            in_flight: None,
            next_tag: 1,
            report: ProcessReport::default(),
        }
    }

    /// S's loop: `sync` every 2 s, sleeping after each one returns.
    pub fn s_default() -> Self {
        Self::new("sync", S_SYNC_PERIOD_NS, SyncTiming::AfterCompletion)
    }
}

impl Process for PeriodicSync {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named(self.name.clone())
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        match event {
            Event::Start if !self.started => {
                self.started = true;
                self.start = now;
                self.next_due = now.saturating_add(self.period);
            }
            Event::Completed { tag, result } if self.in_flight == Some(tag) => {
                self.in_flight = None;
                self.report.ops += 1;
                if result.is_err() {
                    self.report.errors += 1;
                }
                match self.timing {
                    SyncTiming::AfterCompletion => self.next_due = now.saturating_add(self.period),
                    SyncTiming::FixedRate => {
                        while self.next_due <= now {
                            self.next_due = self.next_due.saturating_add(self.period);
                        }
                    }
                }
            }
            _ => {}
        }
        if !self.started || self.in_flight.is_some() {
            return;
        }
        if now >= self.next_due {
            let tag = self.next_tag;
            self.next_tag += 1;
            self.in_flight = Some(tag);
            out.issue(tag, Op::Sync);
            if self.timing == SyncTiming::FixedRate {
                self.next_due = self.next_due.saturating_add(self.period);
            }
        } else {
            out.sleep_until = Some(self.next_due);
        }
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
    fn after_completion_period() {
        let mut p = PeriodicSync::s_default();
        let mut ex = Exec::new(300_000_000, 0); // each sync takes 0.3 s
        assert_eq!(ex.run(&mut p, 1000, 1000 + 9_000_000_000), None);
        let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
        assert_eq!(
            times,
            vec![
                1000 + 2_000_000_000,
                1000 + 4_300_000_000,
                1000 + 6_600_000_000,
                1000 + 8_900_000_000
            ]
        );
        assert!(ex.issued.iter().all(|i| i.op == Op::Sync));
        assert_eq!(p.report().ops, 3);
    }

    #[test]
    fn fixed_rate_period_and_no_overlap() {
        let mut p = PeriodicSync::new("s", 1_000, SyncTiming::FixedRate);
        let mut ex = Exec::new(100, 0);
        ex.run(&mut p, 0, 5_500);
        let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
        assert_eq!(times, vec![1_000, 2_000, 3_000, 4_000, 5_000]);
        // A sync slower than the period: the next waits, missed due times are skipped.
        let mut p = PeriodicSync::new("s", 1_000, SyncTiming::FixedRate);
        let mut ex = Exec::new(2_500, 0);
        ex.run(&mut p, 0, 10_000);
        let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
        assert_eq!(times, vec![1_000, 4_000, 7_000, 10_000]);
        assert_eq!(ex.max_outstanding, 1);
    }
}
