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

#[cfg(test)]
mod tests {
    use super::super::tests::dispatched;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{Decision, Direction, FlowInfo, Request, RequestId, Time, MS};

    /// Sectors between the far requests that make a queue seeky (far beyond the 800-sector seek threshold).
    const FAR: u64 = 10_000_000;

    fn read(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
    }

    /// Reader 1 (active) reads `far1` requests `FAR` apart and then one more, each served alone for 1 ms; while its
    /// last one is on the disk, each reader `f` of `others` (`(flow, prio, far, offset)`) queues `far` requests far
    /// away and then one `offset` sectors past the head. Returns the policy and the time of reader 1's last
    /// completion, with reader 1's queue just emptied.
    fn emptied_reader(far1: u64, others: &[(u32, u8, u64, u64)]) -> (Cfq, Time) {
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, super::super::Params::defaults(&dev));
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        for &(f, prio, _, _) in others {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, prio), 0);
        }
        let mut now = 0;
        let mut last = None;
        for k in 0..=far1 {
            if let Some(r) = last.take() {
                now += MS;
                c.completed(&r, now);
            }
            c.insert(read(k, 1, k * FAR), now);
            let r = dispatched(&mut c, now).expect("reader 1 is served");
            assert_eq!(r.flow, FlowId(1));
            last = Some(r);
        }
        let head = c.last_position;
        let mut id = 100;
        for &(f, _, far, offset) in others {
            for k in 0..far {
                c.insert(read(id, f, 1_000_000_000 + (u64::from(f) * 100 + k) * FAR), now);
                id += 1;
            }
            c.insert(read(id, f, head + offset), now);
            id += 1;
        }
        now += MS;
        c.completed(&last.expect("reader 1 dispatched"), now);
        (c, now)
    }

    fn queue_of(c: &Cfq, f: u32) -> u32 {
        c.flows[&FlowId(f)].sync_q.expect("a sync queue")
    }

    // `cfq_close_cooperator` (3.13): when the active sync queue empties, another sync, non-seeky queue whose next
    // request lies within 8192 sectors of the head is served at once instead of idling. Neither may be seeky (more
    // than 4 of the last 32 requests over 800 sectors apart): reader 1 after 5 far jumps, or reader 2 after 5, gets
    // no cooperator, and the emptied reader 1 is idled for (WaitUntil). The policy also requires the same priority
    // (the kernel searches the per-priority tree of `cur_cfqq->org_ioprio`): a priority-5 reader at the same spot is
    // not a cooperator either.
    #[test]
    fn only_a_close_sync_reader_that_is_not_seeky_and_of_the_same_priority_cooperates() {
        let (mut c, now) = emptied_reader(0, &[(2, 4, 0, 100)]);
        let (q1, q2) = (queue_of(&c, 1), queue_of(&c, 2));
        assert!(!c.queues[q1 as usize].seeky() && !c.queues[q2 as usize].seeky());
        assert_eq!(c.close_cooperator(q1), Some(q2));
        let r = dispatched(&mut c, now).expect("the cooperator is served at once");
        assert_eq!(r.flow, FlowId(2));

        for (far1, far2, prio2, why) in [
            (5, 0, 4, "the emptied queue is seeky"),
            (0, 5, 4, "the close queue is seeky"),
            (0, 0, 5, "the close queue has another priority"),
        ] {
            let (mut c, now) = emptied_reader(far1, &[(2, prio2, far2, 100)]);
            let (q1, q2) = (queue_of(&c, 1), queue_of(&c, 2));
            assert_eq!(c.queues[q1 as usize].seeky(), far1 == 5, "{why}");
            assert_eq!(c.queues[q2 as usize].seeky(), far2 == 5, "{why}");
            assert_eq!(c.close_cooperator(q1), None, "{why}");
            if far1 == 0 {
                // A reader with an idle window is idled for: its next request is expected within slice_idle.
                assert!(matches!(c.dispatch(now), Decision::WaitUntil(_)), "{why}");
            }
        }
    }

    // Of several close queues the nearest next request wins, wherever its queue sits on the tree: reader 2 (first
    // on the tree) 3000 sectors past the head loses to reader 3 at 1000. At equal distances (2000 each) the
    // first one on the tree keeps it: the one that waited longest (the kernel's choice there follows the shape of
    // its position tree, so this tie rule is the policy's own).
    #[test]
    fn the_nearest_close_queue_is_the_cooperator_and_a_tie_keeps_the_first() {
        let (mut c, now) = emptied_reader(0, &[(2, 4, 0, 3000), (3, 4, 0, 1000)]);
        let q1 = queue_of(&c, 1);
        assert_eq!(c.close_cooperator(q1), Some(queue_of(&c, 3)));
        assert_eq!(dispatched(&mut c, now).map(|r| r.flow), Some(FlowId(3)));

        let (c, _) = emptied_reader(0, &[(2, 4, 0, 2000), (3, 4, 0, 2000)]);
        let q1 = queue_of(&c, 1);
        assert_eq!(c.close_cooperator(q1), Some(queue_of(&c, 2)));
    }

    /// Serves every queued request, one at a time (1 ms each), waiting out idle timers; returns the time after.
    fn serve_all(c: &mut Cfq, mut now: Time) -> Time {
        loop {
            match c.dispatch(now) {
                Decision::Dispatch(r) => {
                    now += MS;
                    c.completed(&r, now);
                }
                Decision::WaitUntil(t) => now = t,
                Decision::Nothing => return now,
            }
        }
    }

    /// A policy on a disk with readers `flows`, each with one request queued at `sector(f)`.
    fn with_readers(flows: &[u32]) -> Cfq {
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, super::super::Params::defaults(&dev));
        for &f in flows {
            c.flow_started(&FlowInfo::new(FlowId(f)), 0);
            c.insert(read(u64::from(f), f, u64::from(f) << 24), 0);
        }
        c
    }

    // `cfq_setup_merge` (3.13): a merge needs a process on both queues ("if the process for the cfqq has gone
    // away, there is no sense in merging"), skips interim merges (a queue that is itself about to merge hands the
    // merge on to its target), and never closes a cycle. Here reader 1's queue cooperates with reader 2's, which
    // is already merging into reader 3's: reader 1 merges into reader 3's queue, and at its next request uses it.
    #[test]
    fn a_merge_follows_a_pending_merge_to_its_end_and_needs_processes_on_both_queues() {
        let mut c = with_readers(&[1, 2, 3]);
        let (q1, q2, q3) = (queue_of(&c, 1), queue_of(&c, 2), queue_of(&c, 3));
        c.setup_merge(q2, q3);
        assert_eq!(c.merge_target(q2), Some(q3));
        c.setup_merge(q1, q2);
        assert_eq!(c.merge_target(q1), Some(q3), "the interim queue 2 is skipped");
        c.insert(read(10, 1, 7 << 24), 0);
        assert_eq!(queue_of(&c, 1), q3, "reader 1 now uses reader 3's queue");
        assert!(c.queues[q3 as usize].coop);

        // Reader 3's process exited (its request still queued): no merge is set up with its queue, either way.
        let mut c = with_readers(&[1, 2, 3]);
        let (q1, q3) = (queue_of(&c, 1), queue_of(&c, 3));
        c.flow_exited(FlowId(3), 0);
        assert_eq!(c.queues[q3 as usize].members, 0);
        c.setup_merge(q1, q3);
        c.setup_merge(q3, q1);
        assert_eq!((c.merge_target(q1), c.merge_target(q3)), (None, None));
    }

    // A merge scheduled into a queue that was freed meanwhile (its process exited and its requests were served)
    // is void: the slot, given to a new process, is another queue. Reader 2 was to merge into reader 3's queue;
    // reader 3 exits and reader 4 gets the freed slot; reader 2's next request stays in its own queue.
    #[test]
    fn a_merge_into_a_freed_queue_is_dropped() {
        let mut c = with_readers(&[2, 3]);
        let (q2, q3) = (queue_of(&c, 2), queue_of(&c, 3));
        c.setup_merge(q2, q3);
        assert_eq!(c.merge_target(q2), Some(q3));
        let now = serve_all(&mut c, 0);
        c.flow_exited(FlowId(3), now);
        c.flow_started(&FlowInfo::new(FlowId(4)), now);
        c.insert(read(40, 4, 9 << 24), now);
        assert_eq!(queue_of(&c, 4), q3, "reader 4 got the freed slot");
        assert_eq!(c.merge_target(q2), None);
        c.insert(read(20, 2, 5 << 24), now);
        assert_eq!(queue_of(&c, 2), q2, "reader 2 keeps its own queue");
        assert!(!c.queues[q3 as usize].coop);
    }

    // `cfq_close_cooperator` looks for a cooperator only for a sync queue that is not of the IDLE class. A writer's
    // async queue, emptied with reader 2's request 100 sectors past the head and reader 1's far away but first in
    // line, has none: after the write, reader 1 is served first. An emptied IDLE-class reader does not cooperate
    // with a close IDLE-class reader either: no merge is scheduled, and its next request stays in its own queue.
    #[test]
    fn async_and_idle_class_queues_have_no_cooperator() {
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, super::super::Params::defaults(&dev));
        for f in [1, 2, 9] {
            c.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        c.insert(
            Request::new(RequestId(9), FlowId(9), Direction::Write, false, 1_000_000, 8),
            0,
        );
        c.insert(read(1, 1, 500_000_000), 0);
        c.insert(read(2, 2, 1_000_108), 0);
        let w = dispatched(&mut c, 0).expect("the writer goes first (its key is earliest)");
        assert_eq!(w.flow, FlowId(9));
        let wq = c.groups[0].async_queues[IoClass::Be.index()][4].expect("the writer's queue");
        assert_eq!(c.close_cooperator(wq), None);
        assert!(dispatched(&mut c, 0).is_none(), "sync waits for the write to drain");
        c.completed(&w, MS);
        assert_eq!(dispatched(&mut c, MS).map(|r| r.flow), Some(FlowId(1)));

        let mut c = Cfq::new(&dev, super::super::Params::defaults(&dev));
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Idle, 7), 0);
        }
        c.insert(read(1, 1, 0), 0);
        let r = dispatched(&mut c, 0).expect("the lone IDLE reader is served");
        c.insert(read(2, 2, 108), 0);
        let (q1, q2) = (queue_of(&c, 1), queue_of(&c, 2));
        assert_eq!(c.close_cooperator(q1), None);
        assert_eq!(dispatched(&mut c, 0).map(|r| r.flow), Some(FlowId(2)));
        c.completed(&r, MS);
        c.insert(read(3, 1, 16), MS);
        assert_eq!(queue_of(&c, 1), q1, "no merge with the IDLE-class neighbour");
        assert!(!c.queues[q2 as usize].coop);
    }
}
