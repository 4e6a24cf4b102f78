//! Cooperating queues: processes that read close to each other (interleaved parts of one file) are served one
//! after the other without idling, merged into one queue lazily, and split again when the shared queue turns
//! seeky (kernel: `cfq_close_cooperator`, `cfq_setup_merge`, `cfq_merge_cfqqs`, `split_cfqq`; docs/SCHEDULERS.md, CFQ,
//! Cooperating queues and NCQ).

use super::preempt::CLOSE_THRESHOLD_SECTORS;
use super::service_tree::{tree_index, Workload};
use super::Cfq;
use crate::types::{FlowId, IoClass};

impl Cfq {
    /// A busy sync, non-seeky queue of the same group, class and priority as the emptied active queue `cur`
    /// whose next request is within [`CLOSE_THRESHOLD_SECTORS`] of the head; the closest one.
    pub(super) fn close_cooperator(&self, cur: u32) -> Option<u32> {
        let c = &self.queues[cur as usize];
        if c.class == IoClass::Idle || !c.sync || c.seeky() {
            return None;
        }
        let grp = &self.groups[c.group as usize];
        if grp.nr_cfqq <= 1 {
            return None;
        }
        let mut best: Option<(u64, u32)> = None;
        for wl in [Workload::SyncNoIdle, Workload::Sync] {
            let tree = &grp.trees[tree_index(c.class, wl)];
            for q in tree.queues() {
                if q == cur {
                    continue;
                }
                let cand = &self.queues[q as usize];
                if !cand.sync || cand.seeky() || cand.prio != c.prio {
                    continue;
                }
                let Some(next) = cand
                    .next_rq
                    .and_then(|h| self.rqs.get(h as usize))
                    .and_then(|s| s.as_ref())
                else {
                    continue;
                };
                let d = next.rq.sector.abs_diff(self.last_position);
                if d <= CLOSE_THRESHOLD_SECTORS && best.is_none_or(|(bd, _)| d < bd) {
                    best = Some((d, q));
                }
            }
        }
        best.map(|(_, q)| q)
    }

    /// [`Cfq::setup_merge`] unless `cur` already has a merge pending: `cfq_select_queue` in 3.13 sets up a merge
    /// with a close cooperator only when `cfqq->new_cfqq` is empty, so a pending merge is never replaced.
    pub(super) fn setup_merge_unless_pending(&mut self, cur: u32, new: u32) {
        if self.merge_target(cur).is_none() {
            self.setup_merge(cur, new);
        }
    }

    /// Schedules a lazy merge of `cur` and `new`: the queue with fewer processes will hand them to the other at
    /// their next request.
    pub(super) fn setup_merge(&mut self, cur: u32, new: u32) {
        let mut new = new;
        // Skip interim merges, and never form a cycle.
        for _ in 0..self.queues.len() {
            match self.merge_target(new) {
                Some(next) if next == cur => return,
                Some(next) => new = next,
                None => break,
            }
        }
        let (pr, npr) = (self.queues[cur as usize].members, self.queues[new as usize].members);
        if pr == 0 || npr == 0 || cur == new {
            return;
        }
        if npr >= pr {
            let gen = self.queues[new as usize].gen;
            self.queues[cur as usize].new_queue = Some((new, gen));
        } else {
            let gen = self.queues[cur as usize].gen;
            self.queues[new as usize].new_queue = Some((cur, gen));
        }
    }

    /// The live queue `q` is scheduled to merge into.
    pub(super) fn merge_target(&self, q: u32) -> Option<u32> {
        let (t, gen) = self.queues.get(q as usize)?.new_queue?;
        let target = self.queues.get(t as usize)?;
        (target.live && target.gen == gen && t != q).then_some(t)
    }

    /// Moves `flow` from queue `q` to its merge target `t`, which becomes a shared (cooperating) queue.
    pub(super) fn merge_queues(&mut self, flow: FlowId, q: u32, t: u32) -> u32 {
        if let Some(ctx) = self.flows.get_mut(&flow) {
            ctx.sync_q = Some(t);
        }
        let target = &mut self.queues[t as usize];
        target.coop = true;
        target.members += 1;
        let queue = &mut self.queues[q as usize];
        crate::counter::dec(&mut queue.members, "cfq queue members");
        self.maybe_free(q);
        t
    }

    /// Gives `flow` its own queue again, out of the shared queue `q` that became seeky.
    pub(super) fn split_queue(&mut self, flow: FlowId, q: u32, group: u32, class: IoClass, prio: u8) -> u32 {
        let queue = &mut self.queues[q as usize];
        if queue.members <= 1 {
            // The last user keeps the queue, no longer shared.
            queue.coop = false;
            queue.split_coop = false;
            return q;
        }
        queue.members -= 1;
        self.new_sync_queue(flow, group, class, prio)
    }
}
