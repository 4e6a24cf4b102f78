//! The S timeline, written once for every testbed (docs/BENCHMARKS.md, Timeline): the order of the steps of a
//! throughput or start-up run and every timing constant. The simulator ([`crate::scenario`], virtual time) and
//! the real targets ([`crate::real::timeline`], real clocks) implement the [`Testbed`] verbs; [`run`] calls them.
//!
//! - Throughput: the background processes start at t = 0 and run for the duration; the measurement window is
//!   `[min(1 s, duration/2), duration]`, or with the paper era on a testbed that applies it
//!   `[PAPER_DISCARD, duration − PAPER_DISCARD]` when the run is long enough.
//! - Start-up: the background starts at t = 0. S samples iostat over its whole iteration (`sleep 3; sleep 1`,
//!   then 0.2 s after dropping caches), so the window opens [`ITERATION_LEAD`] before the application; caches are
//!   dropped [`DROP_LEAD`] before it (without a `sync`, as S does); the application starts at the warm-up's end
//!   and is waited for until [`STARTUP_TIMEOUT`] (past it the result is X). The window closes at its end, plus
//!   [`SHORT_APP_TAIL`] when it took less than that (S sleeps so that iostat gets samples).

use bfq_sched::{Time, SEC};

/// Start-up timeout, ns: S's `run_main_benchmarks` passes 60 s; past it the result is shown as X.
pub const STARTUP_TIMEOUT: Time = 60 * SEC;

/// Background warm-up before an application starts, ns. S waits BFQ's raising time plus 4 s (other schedulers:
/// 7 s) so that the background flows are in steady state; 15 s covers BFQ's 10.5 s default raising on HDDs for
/// every scheduler alike.
pub const STARTUP_WARMUP: Time = 15 * SEC;

/// How long before the application caches are dropped, ns (S's `time sleep 0.2` after `echo 3 > drop_caches`).
pub const DROP_LEAD: Time = SEC / 5;

/// Time of an S start-up iteration before the command starts, ns: `sleep 3`, `sleep 1`, then [`DROP_LEAD`]
/// after dropping caches. The throughput window opens this long before the application.
pub const ITERATION_LEAD: Time = 4 * SEC + DROP_LEAD;

/// Extra window after an application that took less than this, ns (S sleeps 2 s more to get iostat samples).
pub const SHORT_APP_TAIL: Time = 2 * SEC;

/// Throughput samples discarded at each end of a paper-era run, ns: S@2011 dropped the first 3 and the last 3 of
/// its 2 s iostat samples.
pub const PAPER_DISCARD: Time = 6 * SEC;

/// Longest lead of a throughput window, ns: it opens at `min(THROUGHPUT_LEAD, duration / 2)`.
pub const THROUGHPUT_LEAD: Time = SEC;

/// The steps of a run, in a testbed's own clock (ns from the start of the background processes).
///
/// Each verb is called once per step, in timeline order and with non-decreasing times. A virtual-time testbed may
/// schedule a step at its time and advance only in [`Testbed::run_app`] and [`Testbed::run_until`]; a real one
/// waits for the time and acts.
pub trait Testbed {
    /// Why a step failed.
    type Error;
    /// Starts the background processes at t = 0.
    fn start_background(&mut self) -> Result<(), Self::Error>;
    /// The throughput window opens at `t`.
    fn open_window(&mut self, t: Time) -> Result<(), Self::Error>;
    /// Drops the page cache at `t`.
    fn drop_caches_at(&mut self, t: Time) -> Result<(), Self::Error>;
    /// Starts the application at `at` and waits for it until `deadline`: its end time, or `None` if it had not
    /// started up by then (it is then stopped).
    fn run_app(&mut self, at: Time, deadline: Time) -> Result<Option<Time>, Self::Error>;
    /// Runs (or waits) until `t`.
    fn run_until(&mut self, t: Time) -> Result<(), Self::Error>;
    /// The throughput window closes at `t` (the clock has reached `t`).
    fn close_window(&mut self, t: Time) -> Result<(), Self::Error>;
}

/// What a run does, as the timeline needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Background processes alone for `duration` ns.
    Throughput {
        /// Length of the run, ns.
        duration: Time,
        /// Leave out [`PAPER_DISCARD`] at each end (paper era, on testbeds that apply it).
        paper_discard: bool,
    },
    /// An application starting at `warmup` ns under the background processes.
    Startup {
        /// Background warm-up before the application, ns.
        warmup: Time,
    },
}

/// How a run went, by the timeline's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Measurement window `[open, close)`, ns.
    pub window: (Time, Time),
    /// The application did not start up before [`STARTUP_TIMEOUT`].
    pub timed_out: bool,
}

/// The throughput window of a background-only run of `duration` ns.
pub fn throughput_window(duration: Time, paper_discard: bool) -> (Time, Time) {
    if paper_discard && duration > 2 * PAPER_DISCARD + SEC {
        (PAPER_DISCARD, duration - PAPER_DISCARD)
    } else {
        (THROUGHPUT_LEAD.min(duration / 2), duration)
    }
}

/// Runs `plan` on `tb` with the S timeline (module documentation).
pub fn run<T: Testbed>(tb: &mut T, plan: Plan) -> Result<Span, T::Error> {
    tb.start_background()?;
    match plan {
        Plan::Throughput {
            duration,
            paper_discard,
        } => {
            let (w0, w1) = throughput_window(duration, paper_discard);
            tb.open_window(w0)?;
            tb.run_until(w1)?;
            tb.close_window(w1)?;
            if w1 < duration {
                tb.run_until(duration)?;
            }
            Ok(Span {
                window: (w0, w1),
                timed_out: false,
            })
        }
        Plan::Startup { warmup: start } => {
            let w0 = start.saturating_sub(ITERATION_LEAD);
            tb.open_window(w0)?;
            tb.drop_caches_at(start.saturating_sub(DROP_LEAD))?;
            let end = tb.run_app(start, start + STARTUP_TIMEOUT)?;
            let cmd_end = match end {
                Some(e) => e.max(start + 1),
                None => start + STARTUP_TIMEOUT,
            };
            let tail = if cmd_end - start < SHORT_APP_TAIL {
                SHORT_APP_TAIL
            } else {
                0
            };
            let w1 = cmd_end + tail;
            tb.run_until(w1)?;
            tb.close_window(w1)?;
            Ok(Span {
                window: (w0, w1),
                timed_out: end.is_none(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every verb with its time; the application ends `app_takes` ns after it starts (`None`: never).
    struct Fake {
        app_takes: Option<Time>,
        steps: Vec<(&'static str, Time)>,
    }

    impl Testbed for Fake {
        type Error = ();
        fn start_background(&mut self) -> Result<(), ()> {
            self.steps.push(("background", 0));
            Ok(())
        }
        fn open_window(&mut self, t: Time) -> Result<(), ()> {
            self.steps.push(("open", t));
            Ok(())
        }
        fn drop_caches_at(&mut self, t: Time) -> Result<(), ()> {
            self.steps.push(("drop", t));
            Ok(())
        }
        fn run_app(&mut self, at: Time, deadline: Time) -> Result<Option<Time>, ()> {
            self.steps.push(("app", at));
            self.steps.push(("deadline", deadline));
            Ok(self.app_takes.map(|d| at + d).filter(|&e| e <= deadline))
        }
        fn run_until(&mut self, t: Time) -> Result<(), ()> {
            self.steps.push(("until", t));
            Ok(())
        }
        fn close_window(&mut self, t: Time) -> Result<(), ()> {
            self.steps.push(("close", t));
            Ok(())
        }
    }

    /// Runs `plan` on a fake testbed: the span and the steps in order.
    fn steps(plan: Plan, app_takes: Option<Time>) -> (Span, Vec<(&'static str, Time)>) {
        let mut tb = Fake {
            app_takes,
            steps: Vec::new(),
        };
        let span = run(&mut tb, plan).expect("fake never fails");
        (span, tb.steps)
    }

    fn startup(app_takes: Option<Time>) -> (Span, Vec<(&'static str, Time)>) {
        steps(Plan::Startup { warmup: 15 * SEC }, app_takes)
    }

    fn throughput(seconds: Time, paper_discard: bool) -> (Span, Vec<(&'static str, Time)>) {
        let duration = seconds * SEC;
        steps(
            Plan::Throughput {
                duration,
                paper_discard,
            },
            None,
        )
    }

    #[test]
    fn a_short_start_up_gets_caches_dropped_0_2_s_before_and_a_2_s_tail() {
        let (span, steps) = startup(Some(SEC / 2));
        assert_eq!(
            steps,
            vec![
                ("background", 0),
                ("open", 15 * SEC - 4 * SEC - SEC / 5),
                ("drop", 15 * SEC - SEC / 5),
                ("app", 15 * SEC),
                ("deadline", 75 * SEC),
                ("until", 15 * SEC + SEC / 2 + 2 * SEC),
                ("close", 15 * SEC + SEC / 2 + 2 * SEC),
            ]
        );
        assert_eq!(span.window, (10 * SEC + 4 * SEC / 5, 17 * SEC + SEC / 2));
        assert!(!span.timed_out);
    }

    #[test]
    fn a_long_start_up_has_no_tail() {
        let (span, steps) = startup(Some(3 * SEC));
        assert_eq!(steps.last(), Some(&("close", 18 * SEC)));
        assert_eq!(span.window.1, 18 * SEC);
        assert!(!span.timed_out);
    }

    #[test]
    fn a_start_up_past_the_timeout_is_x_and_the_window_ends_at_the_timeout() {
        let (span, steps) = startup(None);
        assert!(span.timed_out);
        assert_eq!(span.window.1, 75 * SEC);
        assert_eq!(steps[steps.len() - 2..], [("until", 75 * SEC), ("close", 75 * SEC)]);
        let (late, _) = startup(Some(STARTUP_TIMEOUT + 1));
        assert!(late.timed_out);
    }

    #[test]
    fn a_warm_up_shorter_than_the_lead_opens_the_window_at_zero() {
        let (span, steps) = steps(Plan::Startup { warmup: SEC / 10 }, Some(SEC));
        assert_eq!(steps[1], ("open", 0));
        assert_eq!(steps[2], ("drop", 0));
        assert_eq!(span.window, (0, SEC / 10 + SEC + 2 * SEC));
    }

    #[test]
    fn throughput_windows_skip_the_first_second_or_the_paper_discard() {
        let (span, steps) = throughput(20, false);
        assert_eq!(span.window, (SEC, 20 * SEC));
        assert_eq!(
            steps,
            vec![
                ("background", 0),
                ("open", SEC),
                ("until", 20 * SEC),
                ("close", 20 * SEC)
            ]
        );
        let (span, steps) = throughput(120, true);
        assert_eq!(span.window, (6 * SEC, 114 * SEC));
        assert_eq!(steps[3..], [("close", 114 * SEC), ("until", 120 * SEC)]);
        // Too short for the discard, and half of a short run.
        assert_eq!(throughput_window(12 * SEC, true), (SEC, 12 * SEC));
        assert_eq!(throughput_window(SEC, false), (SEC / 2, SEC));
    }
}
