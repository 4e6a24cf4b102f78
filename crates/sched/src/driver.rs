//! The dispatch driver loop: feeds a policy's decisions to a device that has a bounded number of tags.

use crate::scheduler::{BlockLayer, Scheduler, BLK_MQ_RERUN_DELAY};
use crate::types::{Decision, FlowId, FlowInfo, Request, Time};

/// Counters kept by the driver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Requests inserted (before any merging).
    pub inserted: u64,
    /// Requests sent to the device (after merging).
    pub dispatched: u64,
    /// Requests completed by the device (after merging).
    pub completed: u64,
}

/// Owns a policy and drives it against a device with `tags` hardware tags.
///
/// Call [`Driver::pump`] after every insert, every completion and whenever [`Driver::wakeup`] is reached; it asks
/// the policy for requests while a tag is free and stops at the first `WaitUntil` or `Nothing`. The policy is
/// asked only when its kernel's block layer would run the queue ([`Scheduler::block_layer`]): after an insert, a
/// completion (on blk-mq only on a restart or when the scheduler asks), a flow event, mutable access, its
/// `WaitUntil` time, and on blk-mq [`BLK_MQ_RERUN_DELAY`] after a run it declined while it had work.
pub struct Driver {
    policy: Box<dyn Scheduler>,
    tags: u32,
    in_flight: u32,
    wakeup: Option<Time>,
    /// Whether the queue is to be run at the next [`Driver::pump`]: an insert, a completion that runs it, a flow
    /// starting or exiting, or mutable access happened since the last pump that ended on the policy's answer.
    stale: bool,
    /// blk-mq's delayed re-run of the queue ([`BLK_MQ_RERUN_DELAY`]), `None` on the legacy layer.
    rerun_delay: Option<Time>,
    /// When the armed delayed re-run fires.
    rerun: Option<Time>,
    /// blk-mq's restart mark: the last run stopped because every tag was taken, so the next completion runs the
    /// queue.
    restart: bool,
    /// The host's jiffy (ns), once [`Driver::set_timer_hz`] was called: the delayed re-run fires on a tick.
    jiffy: Option<Time>,
    stats: DriverStats,
}

impl Driver {
    /// Wraps `policy` for a device accepting `tags` requests at once (at least 1).
    pub fn new(policy: Box<dyn Scheduler>, tags: u32) -> Self {
        Driver {
            rerun_delay: match policy.block_layer() {
                BlockLayer::Legacy => None,
                BlockLayer::BlkMq => Some(BLK_MQ_RERUN_DELAY),
            },
            policy,
            tags: tags.max(1),
            in_flight: 0,
            wakeup: None,
            stale: true,
            rerun: None,
            restart: false,
            jiffy: None,
            stats: DriverStats::default(),
        }
    }

    /// The host kernel ticks `hz` times per second: the policy's jiffy-armed timers round to it
    /// ([`Scheduler::set_timer_hz`]), and so does blk-mq's delayed re-run, which is delayed work.
    pub fn set_timer_hz(&mut self, hz: u32) {
        self.jiffy = Some(crate::tick::jiffy_ns(hz));
        self.stale = true;
        self.policy.set_timer_hz(hz);
    }

    /// Tells the policy a flow started.
    pub fn flow_started(&mut self, flow: &FlowInfo, now: Time) {
        self.stale = true;
        self.policy.flow_started(flow, now);
    }

    /// Tells the policy a flow exited.
    pub fn flow_exited(&mut self, flow: FlowId, now: Time) {
        self.stale = true;
        self.policy.flow_exited(flow, now);
    }

    /// Inserts a request into the policy. Call [`Driver::pump`] afterwards.
    pub fn insert(&mut self, rq: Request, now: Time) {
        self.stats.inserted += 1;
        self.stale = true;
        self.policy.insert(rq, now);
    }

    /// Reports the completion of a dispatched request and frees its tag. Call [`Driver::pump`] afterwards.
    pub fn complete(&mut self, rq: &Request, now: Time) {
        self.stats.completed += 1;
        crate::counter::dec(&mut self.in_flight, "driver in_flight");
        self.policy.completed(rq, now);
        // The legacy layer runs the queue after every completion; blk-mq after one that frees a tag a stopped run
        // waited for, or when the scheduler asks.
        if self.rerun_delay.is_none() || std::mem::take(&mut self.restart) || self.policy.completion_runs_queue() {
            self.stale = true;
        }
    }

    /// Dispatches as many requests as the policy and the free tags allow, appending them to `out`.
    /// Returns the number dispatched. Afterwards [`Driver::wakeup`] tells when the policy wants to be asked again.
    pub fn pump(&mut self, now: Time, out: &mut Vec<Request>) -> usize {
        // The queue runs only when its block layer would run it (the struct's doc); otherwise the policy would
        // answer what it answered last, as far as the kernel could tell.
        if !self.would_run(now) {
            return 0;
        }
        let rerun_due = self.rerun.is_some_and(|r| now >= r);
        if rerun_due {
            self.rerun = None;
        }
        let mut n = 0;
        self.wakeup = None;
        let mut declined = false;
        while self.in_flight < self.tags {
            match self.policy.dispatch(now) {
                Decision::Dispatch(rq) => {
                    self.in_flight += 1;
                    self.stats.dispatched += 1;
                    n += 1;
                    out.push(rq);
                }
                Decision::WaitUntil(t) => {
                    // A policy must ask for a time in the future; never spin on a faulty answer.
                    self.wakeup = Some(t.max(now + 1));
                    declined = true;
                    break;
                }
                Decision::Nothing => {
                    declined = true;
                    break;
                }
            }
        }
        if declined {
            self.stale = false;
            self.restart = false;
            // blk-mq kicks the queue again a little later when the scheduler declined while it had work, unless a
            // delayed run is already pending.
            if let Some(delay) = self.rerun_delay {
                if self.rerun.is_none() && self.policy.has_work() {
                    self.rerun = Some(match self.jiffy {
                        Some(j) => crate::tick::fire_time(now, delay, j),
                        None => now + delay,
                    });
                }
            }
        } else {
            // Every tag is taken: the next completion runs the queue (on blk-mq, the restart mark).
            self.stale = true;
            self.restart = true;
        }
        n
    }

    /// Whether [`Driver::pump`] at `now` would run the queue (ask the policy): something it was not told of
    /// happened since its last run, or a wake-up time it asked for (or blk-mq's delayed re-run) has come. When
    /// false, `pump` does nothing, so a caller may skip its own work around the call.
    pub fn would_run(&self, now: Time) -> bool {
        self.stale || self.rerun.is_some_and(|r| now >= r) || self.wakeup.is_some_and(|w| now >= w)
    }

    /// When the queue is to be run again without an event: the policy's `WaitUntil` time or blk-mq's delayed
    /// re-run, whichever comes first.
    pub fn wakeup(&self) -> Option<Time> {
        match (self.wakeup, self.rerun) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Requests on the device.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Hardware tags.
    pub fn tags(&self) -> u32 {
        self.tags
    }

    /// Counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// The policy, for inspection.
    pub fn policy(&self) -> &dyn Scheduler {
        self.policy.as_ref()
    }

    /// The policy, mutably.
    pub fn policy_mut(&mut self) -> &mut dyn Scheduler {
        self.stale = true;
        self.policy.as_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;
    use crate::types::{Direction, RequestId, MS};

    /// Answers from a script, then `Nothing`.
    struct Scripted(Vec<Decision>);

    impl Scheduler for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
        fn flow_exited(&mut self, _: FlowId, _: Time) {}
        fn insert(&mut self, _: Request, _: Time) {}
        fn dispatch(&mut self, _: Time) -> Decision {
            if self.0.is_empty() {
                Decision::Nothing
            } else {
                self.0.remove(0)
            }
        }
        fn completed(&mut self, _: &Request, _: Time) {}
        fn queued(&self) -> usize {
            self.0.len()
        }
        // Never asks for a run after a completion itself (only a blk-mq restart would run it then).
        fn completion_runs_queue(&self) -> bool {
            false
        }
    }

    fn rq(id: u64) -> Request {
        Request::new(RequestId(id), FlowId(0), Direction::Read, true, id * 8, 8)
    }

    #[test]
    fn never_exceeds_the_tag_limit() {
        // Ten requests queued in noop, two tags: only two go out until one completes.
        let mut d = Driver::new(crate::build::<&str>("noop", &DeviceInfo::hdd(), &[]).unwrap(), 2);
        for i in 0..10 {
            d.insert(rq(i * 100), 0);
        }
        let mut out = Vec::new();
        assert_eq!(d.pump(0, &mut out), 2);
        assert_eq!(d.pump(0, &mut out), 0, "tags full");
        let first = out[0].clone();
        d.complete(&first, 1);
        assert_eq!(d.pump(1, &mut out), 1);
        assert_eq!(d.in_flight(), 2);
        assert_eq!(
            d.stats(),
            DriverStats {
                inserted: 10,
                dispatched: 3,
                completed: 1
            }
        );
    }

    /// A driver with 8 tags over a script: one request, a wait until 50 ns, another request, then nothing.
    fn dispatch_wait_until_50_dispatch() -> Driver {
        Driver::new(
            Box::new(Scripted(vec![
                Decision::Dispatch(rq(1)),
                Decision::WaitUntil(50),
                Decision::Dispatch(rq(2)),
            ])),
            8,
        )
    }

    #[test]
    fn would_run_says_whether_a_pump_would_ask_the_policy() {
        // The simulator skips its own work around `pump` when this is false, so it must be true exactly when a
        // pump would ask the policy: after an insert, at the policy's wake-up time, and not in between.
        let mut d = dispatch_wait_until_50_dispatch();
        let mut out = Vec::new();
        assert!(d.would_run(0), "a new driver runs the queue once");
        assert_eq!(d.pump(10, &mut out), 1);
        assert!(
            !d.would_run(10) && !d.would_run(49),
            "declined until 50 with nothing new"
        );
        assert_eq!(d.pump(49, &mut out), 0);
        assert!(d.would_run(50), "its wake-up time has come");
        d.insert(rq(3), 20);
        assert!(d.would_run(20), "an insert runs the queue");
        assert_eq!(d.pump(50, &mut out), 1);
        assert!(
            !d.would_run(1_000),
            "the script answered Nothing and nothing happened since"
        );
    }

    #[test]
    fn wait_until_stops_the_pump_and_is_kept_in_the_future() {
        let mut d = dispatch_wait_until_50_dispatch();
        let mut out = Vec::new();
        assert_eq!(d.pump(10, &mut out), 1, "stops at the WaitUntil");
        assert_eq!(d.wakeup(), Some(50));
        assert_eq!(d.pump(50, &mut out), 1);
        assert_eq!(d.wakeup(), None, "Nothing clears the wake-up");
        // A faulty answer in the past becomes now + 1 ns, so a caller never spins at the same instant.
        let mut d = Driver::new(Box::new(Scripted(vec![Decision::WaitUntil(5)])), 8);
        d.pump(10, &mut out);
        assert_eq!(d.wakeup(), Some(11));
    }

    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// Counts its dispatch calls; answers `Nothing`, or `WaitUntil(at)` when `at` is set and not yet reached.
    struct Counting {
        calls: Arc<AtomicU32>,
        at: Option<Time>,
        layer: BlockLayer,
        /// What `has_work` answers.
        work: bool,
        /// What `completion_runs_queue` answers.
        runs: bool,
    }

    impl Scheduler for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn flow_started(&mut self, _: &FlowInfo, _: Time) {}
        fn flow_exited(&mut self, _: FlowId, _: Time) {}
        fn insert(&mut self, _: Request, _: Time) {}
        fn dispatch(&mut self, now: Time) -> Decision {
            self.calls.fetch_add(1, Ordering::Relaxed);
            match self.at {
                Some(t) if now < t => Decision::WaitUntil(t),
                _ => Decision::Nothing,
            }
        }
        fn completed(&mut self, _: &Request, _: Time) {}
        fn queued(&self) -> usize {
            0
        }
        fn block_layer(&self) -> BlockLayer {
            self.layer
        }
        fn has_work(&self) -> bool {
            self.work
        }
        fn completion_runs_queue(&self) -> bool {
            self.runs
        }
    }

    fn counting(layer: BlockLayer, at: Option<Time>, work: bool, runs: bool) -> (Driver, Arc<AtomicU32>) {
        let calls = Arc::new(AtomicU32::new(0));
        let policy = Counting {
            calls: calls.clone(),
            at,
            layer,
            work,
            runs,
        };
        (Driver::new(Box::new(policy), 8), calls)
    }

    #[test]
    fn a_policy_is_asked_again_only_after_an_event_or_at_its_wakeup() {
        let (mut d, calls) = counting(BlockLayer::Legacy, Some(100), true, false);
        let mut out = Vec::new();
        d.pump(0, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (1, Some(100)));
        // Nothing happened and its time has not come: the same answer, not asked.
        d.pump(10, &mut out);
        d.pump(99, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(d.wakeup(), Some(100), "the wake-up is kept");
        // An insert, a completion (the legacy layer runs the queue after every one, whatever the policy says), a
        // flow event or mutable access: asked again.
        d.insert(rq(1), 20);
        d.pump(20, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        d.in_flight = 1;
        d.complete(&rq(1), 25);
        d.pump(25, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        d.flow_started(&FlowInfo::new(FlowId(3)), 30);
        d.pump(30, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 4);
        let _ = d.policy_mut();
        d.pump(40, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 5);
        // Its wake-up time: asked; it answers Nothing, and is then left alone until an event (the legacy layer
        // has no delayed re-run, even though the policy has work).
        d.pump(100, &mut out);
        d.pump(500 * MS, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (6, None));
    }

    #[test]
    fn blk_mq_runs_a_declining_queue_with_work_again_3_ms_later_and_keeps_a_pending_rerun() {
        let (mut d, calls) = counting(BlockLayer::BlkMq, None, true, false);
        let mut out = Vec::new();
        d.pump(0, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (1, Some(3 * MS)));
        d.pump(3 * MS - 1, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 1, "not before the delayed run");
        // An insert runs the queue at once; the policy declines again, and the pending delayed run keeps its time
        // (since 6.0 a pending run is not pushed out).
        d.insert(rq(1), MS);
        d.pump(MS, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (2, Some(3 * MS)));
        // The delayed run: asked, declines with work, re-armed 3 ms on.
        d.pump(3 * MS, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (3, Some(6 * MS)));
        // Ticking at 250 Hz the delayed work fires on a 4 ms tick: 3 ms from 6 ms is one jiffy, at the tick of 8 ms.
        d.set_timer_hz(250);
        d.pump(6 * MS, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (4, Some(8 * MS)));
        // With no work, a declining policy is left alone.
        let (mut d, calls) = counting(BlockLayer::BlkMq, None, false, false);
        d.pump(0, &mut out);
        assert_eq!((calls.load(Ordering::Relaxed), d.wakeup()), (1, None));
        // Its own timer comes first when it is earlier than the delayed run.
        let (mut d, _) = counting(BlockLayer::BlkMq, Some(MS), true, false);
        d.pump(0, &mut out);
        assert_eq!(d.wakeup(), Some(MS));
    }

    #[test]
    fn blk_mq_runs_the_queue_after_a_completion_only_on_a_restart_or_when_the_scheduler_asks() {
        let (mut d, calls) = counting(BlockLayer::BlkMq, None, false, false);
        let mut out = Vec::new();
        d.pump(0, &mut out);
        d.in_flight = 2;
        d.complete(&rq(1), MS);
        d.pump(MS, &mut out);
        assert_eq!(
            calls.load(Ordering::Relaxed),
            1,
            "a completion alone does not run a blk-mq queue"
        );
        // The scheduler asks (BFQ with nothing left in the driver).
        let (mut d, calls) = counting(BlockLayer::BlkMq, None, false, true);
        d.pump(0, &mut out);
        d.in_flight = 1;
        d.complete(&rq(1), MS);
        d.pump(MS, &mut out);
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        // A run that stopped on a full tag set: the next completion restarts it, the one after does not.
        let mut d = Driver::new(
            Box::new(Scripted(vec![
                Decision::Dispatch(rq(1)),
                Decision::Dispatch(rq(2)),
                Decision::Nothing,
                Decision::Nothing,
            ])),
            2,
        );
        assert_eq!(d.policy().block_layer(), BlockLayer::Legacy);
        d.rerun_delay = Some(BLK_MQ_RERUN_DELAY);
        assert_eq!(d.pump(0, &mut out), 2);
        d.complete(&rq(1), MS);
        d.pump(MS, &mut out);
        assert_eq!(d.policy().queued(), 1, "the restart asked the policy once");
        d.complete(&rq(2), 2 * MS);
        d.pump(2 * MS, &mut out);
        assert_eq!(d.policy().queued(), 1, "no restart mark, no run");
    }

    /// The kernel's schedulers run in the block layer of their era: the legacy layer for 3.13's elevators and
    /// BFQ v7r2, blk-mq for the newest BFQ, mq-deadline and kyber.
    #[test]
    fn each_policy_runs_in_its_eras_block_layer() {
        for (name, layer) in [
            ("noop", BlockLayer::Legacy),
            ("deadline", BlockLayer::Legacy),
            ("cfq", BlockLayer::Legacy),
            ("anticipatory", BlockLayer::Legacy),
            ("bfq-v7r2", BlockLayer::Legacy),
            ("bfq", BlockLayer::BlkMq),
            ("mq-deadline", BlockLayer::BlkMq),
            ("kyber", BlockLayer::BlkMq),
        ] {
            let p = crate::build::<&str>(name, &DeviceInfo::hdd(), &[]).unwrap();
            assert_eq!(p.block_layer(), layer, "{name}");
        }
    }
}
