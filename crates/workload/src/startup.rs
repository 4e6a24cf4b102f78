//! Application start-up: replays a [`Profile`] and measures the time from its start until its last read completes
//! ([`ProcessReport::startup_ns`]), as S's `comm_startup_lat.sh` measures `time <command>` and its trace replayer
//! replays recorded start-ups (docs/BENCHMARKS.md, start-up).
//!
//! Replay rules: requests are issued in profile order; before each, the process thinks for the request's think time
//! (measured from the moment it could go on: the previous request's issue for readahead, its completion for a sync
//! read); a sync read (`R`) is waited for before going on; a readahead (`RA`) is issued and not waited for (S's
//! replayer submits readahead asynchronously through libaio). The start-up is over when every request has
//! completed; the process then exits.

use crate::process::{Actions, Event, FileId, FileSpec, FlowSpec, Op, Process, ProcessReport};
use crate::profile::{Profile, ReqKind};
use bfq_sched::Time;
use std::sync::Arc;

/// Nanoseconds per microsecond.
const NS_PER_US: u64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    /// Waiting for the start time.
    Delayed,
    /// Thinking until the given time before issuing the next request.
    Thinking(Time),
    /// Waiting for the sync read with this tag.
    WaitingSync(u64),
    /// Every request issued; waiting for outstanding readahead.
    Draining,
    Done,
}

/// A start-up replay.
#[derive(Debug, Clone)]
pub struct Startup {
    profile: Arc<Profile>,
    file_base: FileId,
    start_at: Time,
    flow: FlowSpec,
    state: State,
    begin: Time,
    next: usize,
    outstanding: u64,
    last_completion: Time,
    report: ProcessReport,
    /// Issue time of each request, by tag - 1, ns.
    issued: Vec<Time>,
}

impl Startup {
    /// Replays `profile`, whose file *i* is the scenario's file `file_base + i` (see [`Startup::files`]), beginning
    /// at `start_at` (or when the process is started, if later). The flow is named after the profile.
    pub fn new(profile: Arc<Profile>, file_base: FileId, start_at: Time) -> Self {
        let flow = FlowSpec::named(if profile.name.is_empty() {
            "startup".to_string()
        } else {
            profile.name.clone()
        });
        Startup {
            profile,
            file_base,
            start_at,
            flow,
            state: State::NotStarted,
            begin: 0,
            next: 0,
            outstanding: 0,
            last_completion: 0,
            report: ProcessReport::default(),
            issued: Vec::new(),
        }
    }

    /// The files the scenario must hold for this replay, in order (ids `file_base..`).
    pub fn files(&self) -> Vec<FileSpec> {
        self.profile.files.clone()
    }

    /// Replaces the flow identity (e.g. to set an I/O class).
    pub fn with_flow(mut self, flow: FlowSpec) -> Self {
        self.flow = flow;
        self
    }

    /// When the replay began, ns (meaningful once started).
    pub fn began_at(&self) -> Time {
        self.begin
    }

    /// Goes on from `now`: thinks, issues requests, or finishes.
    fn advance(&mut self, now: Time, out: &mut Actions) {
        loop {
            let Some(rq) = self.profile.requests.get(self.next).copied() else {
                if self.outstanding == 0 {
                    self.state = State::Done;
                    let end = if self.profile.requests.is_empty() {
                        self.begin
                    } else {
                        self.last_completion
                    };
                    self.report.startup_ns = Some(end.saturating_sub(self.begin));
                    out.exit = true;
                } else {
                    self.state = State::Draining;
                }
                return;
            };
            // Think before the request, once.
            match self.state {
                State::Thinking(until) if until > now => {
                    out.sleep_until = Some(until);
                    return;
                }
                State::Thinking(_) => {}
                _ if rq.think_us > 0 => {
                    let until = now.saturating_add(rq.think_us.saturating_mul(NS_PER_US));
                    self.state = State::Thinking(until);
                    out.sleep_until = Some(until);
                    return;
                }
                _ => {}
            }
            let tag = self.next as u64 + 1;
            self.next += 1;
            self.outstanding += 1;
            self.issued.push(now);
            out.issue(
                tag,
                Op::Read {
                    file: self.file_base + rq.file,
                    offset: rq.offset,
                    len: rq.len,
                    mode: self.profile.mode,
                    meta: rq.meta,
                },
            );
            match rq.kind {
                ReqKind::Sync => {
                    self.state = State::WaitingSync(tag);
                    return;
                }
                ReqKind::Readahead => self.state = State::Draining, // not waiting: go on with the next request
            }
        }
    }
}

impl Process for Startup {
    fn flow(&self) -> FlowSpec {
        self.flow.clone()
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        match (event, self.state) {
            (_, State::Done) => {}
            (Event::Start, State::NotStarted) => {
                if now < self.start_at {
                    self.state = State::Delayed;
                    out.sleep_until = Some(self.start_at);
                } else {
                    self.begin = now;
                    self.state = State::Draining;
                    self.advance(now, out);
                }
            }
            (Event::Woke, State::Delayed) => {
                if now < self.start_at {
                    out.sleep_until = Some(self.start_at);
                } else {
                    self.begin = now;
                    self.state = State::Draining;
                    self.advance(now, out);
                }
            }
            (Event::Woke, State::Thinking(_)) => self.advance(now, out),
            (Event::Completed { tag, result }, state) => {
                self.outstanding = self.outstanding.saturating_sub(1);
                self.last_completion = now;
                if let Some(&issued) = (tag as usize).checked_sub(1).and_then(|i| self.issued.get(i)) {
                    self.report.requests.push(crate::process::RequestTiming {
                        issued,
                        completed: Some(now),
                        ok: result.is_ok(),
                    });
                }
                match result {
                    Ok(b) => {
                        self.report.read_bytes += b;
                        self.report.ops += 1;
                    }
                    Err(_) => self.report.errors += 1,
                }
                match state {
                    State::WaitingSync(t) if t == tag => {
                        self.state = State::Draining;
                        self.advance(now, out);
                    }
                    State::WaitingSync(_) => {}
                    State::Thinking(until) => out.sleep_until = Some(until), // a readahead finished meanwhile
                    _ => self.advance(now, out),
                }
            }
            (_, State::Thinking(until)) => out.sleep_until = Some(until),
            (_, State::Delayed) => out.sleep_until = Some(self.start_at),
            _ => {}
        }
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::synthetic;
    use crate::test_exec::Exec;

    fn tiny() -> Arc<Profile> {
        Arc::new(
            Profile::parse(
                "profile tiny\nfile a 1000000 contiguous\nfile b 1000000 contiguous\n\
                 R 0 0 4096 0\nRA 0 4096 65536 0\nRA 0 69632 65536 0\nR 1 0 8192 100\nR 1 8192 4096 0\n",
            )
            .expect("parses"),
        )
    }

    #[test]
    fn replays_in_order_without_waiting_for_readahead() {
        let p = tiny();
        let mut s = Startup::new(p.clone(), 10, 5_000);
        let mut ex = Exec::new(1_000_000, 0); // 1 ms per read
        let exit = ex.run(&mut s, 1_000, u64::MAX).expect("exits");
        // Same requests, same order, on files 10 and 11.
        let got: Vec<(u32, u64, u64)> = ex
            .issued
            .iter()
            .map(|i| match i.op {
                Op::Read { file, offset, len, .. } => (file, offset, len),
                _ => (u32::MAX, 0, 0),
            })
            .collect();
        let want: Vec<(u32, u64, u64)> = p.requests.iter().map(|r| (10 + r.file, r.offset, r.len)).collect();
        assert_eq!(got, want);
        let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
        // Starts at 5 µs; R at 5 µs, done 1.005 ms; both RA at once; R after 100 µs think; then the last R.
        assert_eq!(times, vec![5_000, 1_005_000, 1_005_000, 1_105_000, 2_105_000]);
        assert_eq!(exit, 3_105_000);
        assert_eq!(s.report().startup_ns, Some(3_100_000));
        assert_eq!(s.report().read_bytes, p.stats().bytes);
        assert_eq!(ex.max_outstanding, 3);
    }

    #[test]
    fn startup_ends_with_the_last_completion_even_if_readahead() {
        let p =
            Arc::new(Profile::parse("file a 1000000 contiguous\nR 0 0 4096 0\nRA 0 4096 500000 0\n").expect("parses"));
        let mut s = Startup::new(p, 0, 0);
        let mut ex = Exec::new(1_000, 1); // the big readahead takes 0.5 ms
        let exit = ex.run(&mut s, 0, u64::MAX).expect("exits");
        assert_eq!(s.report().startup_ns, Some(exit));
        assert_eq!(exit, 5_096 + 501_000);
        assert_eq!(s.flow().name, "startup");
    }

    #[test]
    fn synthetic_profile_replays_exactly() {
        let p = Arc::new(synthetic("xterm").expect("known"));
        let mut s = Startup::new(p.clone(), 0, 0);
        let mut ex = Exec::new(100_000, 1);
        ex.run(&mut s, 0, u64::MAX).expect("exits");
        assert_eq!(ex.issued.len(), p.requests.len());
        let last = ex.completed.iter().map(|c| c.0).max().expect("completions");
        assert_eq!(s.report().startup_ns, Some(last));
        assert_eq!(s.report().read_bytes, p.stats().bytes);
        let empty = Arc::new(Profile::parse("").expect("parses"));
        let mut e = Startup::new(empty, 0, 0);
        assert_eq!(Exec::new(1, 0).run(&mut e, 7, u64::MAX), Some(7));
        assert_eq!(e.report().startup_ns, Some(0));
    }
}
