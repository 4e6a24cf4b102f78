//! The policy interface every scheduler implements.

use crate::device::DeviceInfo;
use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, Time};

/// A storage I/O scheduling policy: a pure state machine that is told the time.
///
/// The caller (the [`Driver`](crate::driver::Driver)) calls [`Scheduler::dispatch`] while the device has a free
/// tag, and again after every insert, every completion, and when a [`Decision::WaitUntil`] time is reached.
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

    /// Whether [`Scheduler::dispatch`] may answer differently with time alone, without a timer the policy asked for
    /// (`WaitUntil`), and without an insert, a completion or a flow event in between. The driver asks a policy that
    /// says no only when one of those happened or its `WaitUntil` time came ([`crate::Driver::pump`]), as the
    /// kernel runs a queue on inserts, completions and timers; a policy that says yes is asked on every pump. The
    /// default is no. CFQ and BFQ say yes: asked only after events, their results moved (CFQ's async dispatch depth
    /// grows with the time since the last delayed sync request; BFQ's path was not found), and whether their
    /// results rely on being asked more often than the kernel asks is an open question (docs/PERFORMANCE.md,
    /// session 8).
    fn answers_change_with_time(&self) -> bool {
        false
    }

    /// The host kernel ticks `hz` times per second ([`crate::tick`]). A policy whose kernel armed its timers in
    /// jiffies (3.13's CFQ, BFQ v7r2) rounds them to the tick from now on and takes its jiffy-valued defaults at
    /// this HZ; the default (every policy on high-resolution timers, or without timers) ignores it. Called once,
    /// before the first request; without a call, timers are exact to the nanosecond.
    fn set_timer_hz(&mut self, hz: u32) {
        let _ = hz;
    }
}

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
