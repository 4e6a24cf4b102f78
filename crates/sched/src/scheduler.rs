//! The policy interface every scheduler implements.

use crate::device::DeviceInfo;
use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, Time};

/// A storage I/O scheduling policy: a pure state machine that is told the time.
///
/// The caller (the [`Driver`](crate::driver::Driver)) calls [`Scheduler::dispatch`] while the device has a free
/// tag, and again after every insert, after completions (see [`Scheduler::block_layer`]), and when a
/// [`Decision::WaitUntil`] time is reached.
/// Implementations never read a clock, never block and never panic on any sequence of valid calls.
pub trait Scheduler: Send {
    /// The registry name of the policy (`"bfq"`, `"noop"`, ...).
    fn name(&self) -> &'static str;

    /// A flow (process I/O context) appears. Called before its first insert.
    fn flow_started(&mut self, flow: &FlowInfo, now: Time);

    /// A flow's process has exited. Its queued and in-flight requests still complete normally.
    fn flow_exited(&mut self, flow: FlowId, now: Time);

    /// A new request arrives. The policy may merge it into a queued request (see [`Request::merged`]).
    fn insert(&mut self, rq: Request, now: Time);

    /// Asks for the next request to send to the device.
    fn dispatch(&mut self, now: Time) -> Decision;

    /// A request returned by [`Scheduler::dispatch`] has completed on the device.
    fn completed(&mut self, rq: &Request, now: Time);

    /// Number of inserted requests held and not yet dispatched (merged parts count individually).
    fn queued(&self) -> usize;

    /// How many scheduler tags (see [`DeviceInfo::nr_requests`]) requests of this kind may hold at once. The
    /// submitter blocks while that many are allocated. Sync reads are never limited; the default limits nothing.
    fn depth_limit(&self, dir: Direction, sync: bool, nr_requests: u32) -> u32 {
        let _ = (dir, sync);
        nr_requests
    }

    /// Whether this policy comes from the legacy single-queue block layer, which kept two request pools of
    /// `nr_requests` each, one for sync and one for async requests, so that a flood of async writes never left
    /// a sync read without a request. blk-mq policies share one pool of scheduler tags (and limit async requests
    /// with [`Scheduler::depth_limit`] instead). Default: one shared pool.
    fn separate_sync_pool(&self) -> bool {
        false
    }

    /// Asked at every request allocation of `flow` (`sync` or not) in a legacy pool (`elv_may_queue`): true exempts
    /// it from a full pool (`ELV_MQUEUE_MUST`). CFQ answers true, once per slice, for the active queue it is idling
    /// for, so the process it waits for is not blocked by a full pool; the other policies never exempt.
    fn may_queue_must(&mut self, _flow: FlowId, _sync: bool) -> bool {
        false
    }

    /// Whether `rq`, inserted now, would merge into a request already queued here (the kernel's `elv_merge`, which
    /// the legacy block layer tries before `get_request`: a bio that merges takes no request). The legacy elevators
    /// answer from their merge index; the default (blk-mq policies) is false.
    fn would_merge(&self, _rq: &Request) -> bool {
        false
    }

    /// Checks the policy's internal invariants (counters against the structures they count, tree orderings,
    /// weight sums) and returns the first violation found. The conformance checker calls it after every call it
    /// makes, the simulator after every step in debug builds. A policy with nothing to check keeps the default.
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        Ok(())
    }

    /// The block layer the policy's kernel ran it in, which decides when the queue is run (the policy asked for
    /// requests) besides inserts and timers ([`crate::Driver`]): the legacy layer ran it after every completion;
    /// blk-mq runs it after a completion only when the scheduler or a full tag set asks for it, and again
    /// [`BLK_MQ_RERUN_DELAY`] after a run in which the scheduler declined while it had work. Default: legacy.
    fn block_layer(&self) -> BlockLayer {
        BlockLayer::Legacy
    }

    /// Whether the policy holds work it may dispatch later (blk-mq's `has_work`): by default, requests queued.
    /// BFQ also counts a busy queue it idles for (`bfq_has_work`: any busy queue).
    fn has_work(&self) -> bool {
        self.queued() > 0
    }

    /// Asked on blk-mq right after [`Scheduler::completed`]: whether the scheduler itself runs the queue after
    /// that completion (BFQ does when no request is left in the driver, `bfq_schedule_dispatch`). The default,
    /// yes, suits every policy whose dispatch cannot be unblocked by a completion without the block layer also
    /// running the queue (a full tag set, or a token another waiter is woken for). Ignored on the legacy layer,
    /// which runs the queue after every completion.
    fn completion_runs_queue(&self) -> bool {
        true
    }

    /// The host kernel ticks `hz` times per second ([`crate::tick`]). A policy whose kernel armed its timers in
    /// jiffies (3.13's CFQ, BFQ v7r2) rounds them to the tick from now on and takes its jiffy-valued defaults at
    /// this HZ; the default (every policy on high-resolution timers, or without timers) ignores it. Called once,
    /// before the first request; without a call, timers are exact to the nanosecond.
    fn set_timer_hz(&mut self, hz: u32) {
        let _ = hz;
    }
}

/// The block layer a policy ran in, for when its queue is run ([`Scheduler::block_layer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockLayer {
    /// The single-queue block layer of Linux 3.13 and before: the queue runs on every insert (at unplug), every
    /// completion (the low-level driver restarts it, e.g. SCSI's `scsi_run_queue`) and the elevator's timers.
    Legacy,
    /// blk-mq (the newest kernel): the queue runs on every insert, after a completion only on a restart (the
    /// last run stopped on a full tag set) or when the scheduler asks, on the scheduler's timers, and
    /// [`BLK_MQ_RERUN_DELAY`] after a run that ended with the scheduler declining while it had work.
    BlkMq,
}

/// blk-mq's delayed re-run after a run in which the scheduler returned no request while it had work:
/// `BLK_MQ_BUDGET_DELAY`, 3 ms, armed by `__blk_mq_do_dispatch_sched` through `blk_mq_delay_run_hw_queues` (since
/// Linux 5.8; since 6.0 an already pending delayed run is left as it is). It is delayed work, so it fires on a
/// timer tick.
pub const BLK_MQ_RERUN_DELAY: Time = 3 * crate::types::MS;

/// A broken internal invariant of a policy or model: which structure and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invariant broken in {what}: {detail}")]
pub struct InvariantViolation {
    /// The structure whose invariant failed (`"bfq"`, `"wf2q"`, `"cfq service tree"`, ...).
    pub what: &'static str,
    /// What was found, with the values involved.
    pub detail: String,
}

impl InvariantViolation {
    /// A violation in `what`, described by `detail`.
    pub fn new(what: &'static str, detail: impl Into<String>) -> Self {
        InvariantViolation {
            what,
            detail: detail.into(),
        }
    }
}

/// Returns an [`InvariantViolation`] from the enclosing function when `cond` is false.
///
/// `ensure_invariant!(cond, "what", "format {}", args)`.
#[macro_export]
macro_rules! ensure_invariant {
    ($cond:expr, $what:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::scheduler::InvariantViolation::new($what, format!($($fmt)+)));
        }
    };
}

/// Constructor signature stored in the registry.
pub type BuildFn = fn(&DeviceInfo, &crate::tunables::TunableValues) -> Box<dyn Scheduler>;
