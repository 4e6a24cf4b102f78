//! Preemption: when a new request for a queue that is not in service ends the active queue's slot
//! (kernel: `cfq_should_preempt`, `cfq_preempt_queue`; docs/SCHEDULERS.md, CFQ, Preemption).

use super::service_tree::Workload;
use super::Cfq;
use crate::types::{IoClass, Time};

/// A new request within this many sectors (4 MiB) of the head counts as "close": as good as what an idling
/// queue would send next.
pub const CLOSE_THRESHOLD_SECTORS: u64 = 8192;

impl Cfq {
    /// Whether new request slot `h` of queue `n` should preempt the active queue at `now`.
    pub(super) fn should_preempt(&self, n: u32, h: u32, now: Time) -> bool {
        let Some(a) = self.active else {
            return false;
        };
        let Some(rq) = self.rqs.get(h as usize).and_then(|s| s.as_ref()).map(|s| &s.rq) else {
            return false;
        };
        let (nq, aq) = (&self.queues[n as usize], &self.queues[a as usize]);
        if nq.class == IoClass::Idle {
            return false;
        }
        if aq.class == IoClass::Idle {
            return true;
        }
        if aq.class == IoClass::Rt && nq.class != IoClass::Rt {
            return false;
        }
        // A sync request preempts an async queue; with the 2016 fix, not one whose FIFO expired (must dispatch).
        if rq.sync && !aq.sync && !(self.p.async_starvation_fix && aq.must_dispatch) {
            return true;
        }
        // The rest only within a group: groups are isolated from each other.
        if nq.group != aq.group {
            return false;
        }
        if aq.slice_used(now) {
            return true;
        }
        if nq.class == IoClass::Rt && aq.class != IoClass::Rt {
            return true;
        }
        if rq.meta && aq.prio_pending == 0 {
            return true;
        }
        if nq.workload() == Workload::SyncNoIdle
            && aq.workload() == Workload::SyncNoIdle
            && nq
                .pos
                .is_some_and(|p| self.groups[nq.group as usize].trees[p.tree].count() == 2)
            && aq.is_empty()
        {
            return true;
        }
        if aq.is_empty() && !self.should_idle(a) {
            return true;
        }
        if !aq.wait_request {
            return false;
        }
        // Idling for a request that this one is as good as.
        rq.sector.abs_diff(self.last_position) <= CLOSE_THRESHOLD_SECTORS
    }

    /// Expires the active queue (keeping its unused slice) and puts `n` at the front of its tree.
    pub(super) fn preempt(&mut self, n: u32, now: Time) {
        let old_wl = self.active.map(|a| self.queues[a as usize].workload());
        self.expire(now, true);
        let nq = &self.queues[n as usize];
        if old_wl != Some(nq.workload()) {
            // A different workload type: a saved workload slice would keep the preemptor waiting.
            self.groups[nq.group as usize].saved = None;
        }
        self.service_tree_add(n, true, now);
        let nq = &mut self.queues[n as usize];
        nq.slice_end = 0;
        nq.slice_new = true;
    }
}
