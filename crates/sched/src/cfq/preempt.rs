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
        // "Idling on the sync-noidle tree": the workload type being served, not the active queue's own type (a
        // queue that turned seeky in service keeps its place, and the serving type, until it is re-added).
        if self.serving_wl == Workload::SyncNoIdle
            && nq.workload() == Workload::SyncNoIdle
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

#[cfg(test)]
mod tests {
    use super::super::tests::dispatched;
    use super::super::{Params, TUNABLES};
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::tunables::TunableValues;
    use crate::types::{Direction, FlowId, FlowInfo, GroupId, Request, RequestId, MS, SEC};

    /// The active queue's process (flow 1) and the newcomer's (flow 2), and what each has done.
    #[derive(Clone)]
    struct Case {
        tunables: &'static [&'static str],
        a: FlowInfo,
        /// The active queue reads (sync) or writes (async).
        a_sync: bool,
        /// The active queue holds a second request (so it is not empty); with `Some(true)` both of its requests
        /// are metadata, so one stays pending after the first is dispatched.
        a_queued: Option<bool>,
        /// The active queue's request completed at 1 ms (its slice is set; an emptied sync queue idles).
        a_done: bool,
        n: FlowInfo,
        n_sync: bool,
        /// Sectors between the newcomer's request and the end of the active queue's last dispatch.
        n_distance: u64,
        n_meta: bool,
        /// When the newcomer's request arrives (ns).
        at: Time,
        /// The active queue is marked must-dispatch (with the 2016 fix: its FIFO head expired) at the arrival.
        a_must_dispatch: bool,
    }

    fn base() -> Case {
        Case {
            tunables: &[],
            a: FlowInfo::new(FlowId(1)),
            a_sync: true,
            a_queued: None,
            a_done: false,
            n: FlowInfo::new(FlowId(2)),
            n_sync: true,
            n_distance: 1 << 30,
            n_meta: false,
            at: 0,
            a_must_dispatch: false,
        }
    }

    fn request(id: u64, flow: FlowId, sync: bool, sector: u64, meta: bool) -> Request {
        let dir = if sync { Direction::Read } else { Direction::Write };
        let mut r = Request::new(RequestId(id), flow, dir, sync, sector, 8);
        r.meta = meta;
        r
    }

    /// Whether the newcomer's request preempts the active queue: the active queue is no longer in service after
    /// the arrival (preemption expires it and puts the newcomer at the front).
    fn preempts(k: &Case) -> bool {
        let dev = DeviceInfo::hdd();
        let values = TunableValues::parse("cfq", &TUNABLES, &dev, k.tunables).unwrap();
        let mut c = Cfq::new(&dev, Params::from_values(&values));
        c.flow_started(&k.a, 0);
        c.flow_started(&k.n, 0);
        c.insert(request(1, k.a.id, k.a_sync, 0, k.a_queued == Some(true)), 0);
        if let Some(meta) = k.a_queued {
            c.insert(request(2, k.a.id, k.a_sync, 1_000, meta), 0);
        }
        let r = dispatched(&mut c, 0).expect("the active queue dispatches");
        assert_eq!(r.flow, k.a.id);
        let a = c.active.expect("an active queue");
        if k.a_done {
            c.completed(&r, MS);
        }
        let now = k.at.max(if k.a_done { MS } else { 0 });
        c.queues[a as usize].must_dispatch |= k.a_must_dispatch;
        c.insert(request(3, k.n.id, k.n_sync, r.end() + k.n_distance, k.n_meta), now);
        c.active != Some(a)
    }

    fn with(f: impl Fn(&mut Case)) -> Case {
        let mut k = base();
        f(&mut k);
        k
    }

    // `cfq_should_preempt` (3.13), the class rules first: an IDLE-class newcomer never preempts, not even an async
    // queue; anything preempts an IDLE-class queue; nothing but RT preempts an RT queue, not even a sync request
    // against an RT writer; a sync request preempts a BE writer, even from another group (with the 2016 fix, not
    // a writer that must dispatch).
    #[test]
    fn class_rules_come_first_then_sync_over_async() {
        let idle = |f: u32| FlowInfo::new(FlowId(f)).with_class(IoClass::Idle, 7);
        let rt = |f: u32| FlowInfo::new(FlowId(f)).with_class(IoClass::Rt, 4);
        let other_group = FlowInfo::new(FlowId(2)).with_group(GroupId(1));
        // A reader idling-worthy and empty, a far newcomer of the same class: no reason to preempt.
        assert!(!preempts(&base()));
        assert!(!preempts(&with(|k| {
            k.a_sync = false;
            k.n = idle(2);
        })));
        assert!(preempts(&with(|k| k.a = idle(1))));
        assert!(preempts(&with(|k| {
            k.a = idle(1);
            k.n_sync = false;
        })));
        assert!(!preempts(&with(|k| {
            k.a = rt(1);
            k.a_sync = false;
        })));
        assert!(preempts(&with(|k| k.a_sync = false)));
        assert!(preempts(&with(|k| {
            k.a_sync = false;
            k.n = other_group.clone();
        })));
        // With the 2016 fix a sync request still preempts a writer, unless the writer must dispatch (its FIFO head
        // expired); the writer holds another request here, as an emptied one is preempted anyway (it should not
        // idle).
        let fixed = |must: bool| {
            with(|k| {
                k.tunables = &["async_starvation_fix=1"];
                k.a_sync = false;
                k.a_queued = Some(false);
                k.a_must_dispatch = must;
            })
        };
        assert!(preempts(&fixed(false)));
        assert!(!preempts(&fixed(true)));
        // In 3.13 (no fix) must-dispatch does not protect a writer.
        assert!(preempts(&with(|k| {
            k.a_sync = false;
            k.a_queued = Some(false);
            k.a_must_dispatch = true;
        })));
        // An async newcomer does not preempt a writer.
        assert!(!preempts(&with(|k| {
            k.a_sync = false;
            k.a_queued = Some(false);
            k.n_sync = false;
        })));
    }

    // Within one group (and only there): an RT newcomer preempts a BE queue, a metadata request preempts a queue
    // with no metadata pending, and a queue whose slice is over is preempted. Across groups none of these applies.
    // The active reader holds a second request here, so it neither idles nor is empty.
    #[test]
    fn within_a_group_rt_metadata_and_a_used_slice_preempt() {
        let busy = |f: &dyn Fn(&mut Case)| {
            with(|k| {
                k.a_queued = Some(false);
                f(k);
            })
        };
        let rt = FlowInfo::new(FlowId(2)).with_class(IoClass::Rt, 4);
        assert!(!preempts(&busy(&|_| {})));
        assert!(preempts(&busy(&|k| k.n = rt.clone())));
        assert!(!preempts(&busy(&|k| k.n = rt.clone().with_group(GroupId(1)))));
        assert!(preempts(&busy(&|k| k.n_meta = true)));
        assert!(!preempts(&busy(&|k| k.n_meta = true).clone_with_meta_pending()));
        assert!(!preempts(&busy(&|k| {
            k.n_meta = true;
            k.n = FlowInfo::new(FlowId(2)).with_group(GroupId(1));
        })));
        // The slice (100 ms, from the first completion at 1 ms) is over at 101 ms, not before.
        assert!(!preempts(&busy(&|k| {
            k.a_done = true;
            k.at = 101 * MS - 1;
        })));
        assert!(preempts(&busy(&|k| {
            k.a_done = true;
            k.at = 101 * MS;
        })));
        assert!(!preempts(&busy(&|k| {
            k.a_done = true;
            k.at = 101 * MS;
            k.n = FlowInfo::new(FlowId(2)).with_group(GroupId(1));
        })));
    }

    impl Case {
        fn clone_with_meta_pending(&self) -> Case {
            let mut k = self.clone();
            k.a_queued = Some(true);
            k
        }
    }

    // An emptied active queue that should not idle (slice_idle 0) is preempted by any newcomer of its group. One
    // that idles for its next request (its idle timer armed after its completion) is preempted only by a request
    // as good as its own next one: within 8192 sectors of the head (`cfq_rq_close`), not 8193.
    #[test]
    fn an_empty_queue_is_preempted_if_it_should_not_idle_or_by_a_close_request_while_it_idles() {
        assert!(preempts(&with(|k| k.tunables = &["slice_idle=0", "group_idle=0"])));
        assert!(!preempts(&with(|k| {
            k.tunables = &["slice_idle=0", "group_idle=0"];
            k.n = FlowInfo::new(FlowId(2)).with_group(GroupId(1));
        })));
        let waiting = |d: u64| {
            with(|k| {
                k.a_done = true;
                k.n_distance = d;
            })
        };
        assert!(preempts(&waiting(8192)));
        assert!(!preempts(&waiting(8193)));
        // Not idling yet (its request still on the disk): a close request does not preempt.
        assert!(!preempts(&with(|k| k.n_distance = 100)));
    }

    /// Serves `flow` alone for six reads 10 M sectors apart, each issued when the previous one completes, then lets
    /// its idle wait run out: its queue ends up seeky, without an idle window (on the SYNC_NOIDLE tree when busy).
    fn make_seeky(c: &mut Cfq, flow: u32, mut now: Time) -> Time {
        use crate::types::Decision;
        for k in 0..6u64 {
            let id = u64::from(flow) * 100 + k;
            c.insert(
                request(id, FlowId(flow), true, (u64::from(flow) << 32) + k * 10_000_000, false),
                now,
            );
            let r = loop {
                match c.dispatch(now) {
                    Decision::Dispatch(r) => break r,
                    Decision::WaitUntil(t) => now = t,
                    Decision::Nothing => panic!("nothing to dispatch"),
                }
            };
            now += MS;
            c.completed(&r, now);
        }
        while let Decision::WaitUntil(t) = c.dispatch(now) {
            now = t;
        }
        let q = c.flows[&FlowId(flow)].sync_q.expect("a sync queue") as usize;
        assert!(c.queues[q].seeky() && !c.queues[q].idle_window);
        now
    }

    // The SYNC_NOIDLE rule of `cfq_should_preempt` applies only when both queues are SYNC_NOIDLE: a newcomer on
    // a SYNC_NOIDLE tree holding two queues does not preempt an emptied reader that idles (SYNC tree, idle
    // window), and a SYNC newcomer on a tree of two does not preempt an emptied seeky reader that idles as the last
    // queue of its SYNC_NOIDLE tree. (Within one tree of two the rule agrees with the next one: a queue that is not
    // alone on its SYNC_NOIDLE tree should not idle.)
    #[test]
    fn the_sync_noidle_rule_needs_both_queues_on_sync_noidle() {
        // Readers 2 and 3 seeky; reader 1 active with its idle window, its request on the disk.
        let mut c = hdd_with_readers(3);
        let now = make_seeky(&mut c, 2, 0);
        let now = make_seeky(&mut c, 3, now);
        c.insert(request(1, FlowId(1), true, 0, false), now);
        assert_eq!(dispatched(&mut c, now).map(|r| r.flow), Some(FlowId(1)));
        let a = c.active.unwrap();
        c.insert(request(2, FlowId(2), true, 1 << 40, false), now);
        c.insert(request(3, FlowId(3), true, 1 << 41, false), now);
        let q3 = c.flows[&FlowId(3)].sync_q.unwrap() as usize;
        let tree = c.queues[q3].pos.unwrap().tree;
        assert_eq!(c.groups[0].trees[tree].count(), 2, "readers 2 and 3 on SYNC_NOIDLE");
        assert_eq!(c.active, Some(a), "reader 1 still in service");

        // Reader 1 seeky; reader 4 takes the disk from it (so that reader 1 leaves its old tree) and then reader 1
        // is active again, on the SYNC_NOIDLE tree alone; readers 2 and 3 fresh (SYNC tree).
        let mut c = hdd_with_readers(4);
        let mut now = make_seeky(&mut c, 1, 0);
        c.insert(request(4, FlowId(4), true, 1 << 38, false), now);
        let r = dispatched(&mut c, now).expect("reader 4 is served");
        assert_eq!(r.flow, FlowId(4));
        now += MS;
        c.completed(&r, now);
        c.insert(request(1, FlowId(1), true, 1 << 39, false), now);
        let r = loop {
            match c.dispatch(now) {
                crate::types::Decision::Dispatch(r) => break r,
                crate::types::Decision::WaitUntil(t) => now = t,
                crate::types::Decision::Nothing => panic!("nothing to dispatch"),
            }
        };
        assert_eq!(r.flow, FlowId(1));
        let a = c.active.unwrap();
        let sync_noidle = super::super::service_tree::tree_index(IoClass::Be, Workload::SyncNoIdle);
        assert_eq!(c.queues[a as usize].pos.unwrap().tree, sync_noidle);
        assert!(c.should_idle(a), "the last queue of its SYNC_NOIDLE tree is idled for");
        c.insert(request(2, FlowId(2), true, 1 << 40, false), now);
        c.insert(request(3, FlowId(3), true, 1 << 41, false), now);
        assert_eq!(c.active, Some(a), "reader 1 still in service");
    }

    /// CFQ with its defaults on an HDD, with readers (flows) 1 to `n` started at time 0.
    fn hdd_with_readers(n: u32) -> Cfq {
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, Params::defaults(&dev));
        for f in 1..=n {
            c.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        c
    }

    /// Reader 1 (a new queue, on the SYNC tree with an idle window) is served six reads 10 M sectors apart in one
    /// slot from `now`, each issued as the previous one completes: it turns seeky in service and, emptied, is idled
    /// for. Returns its queue and the time of its last completion.
    fn reader_1_turns_seeky_in_service(c: &mut Cfq, mut now: Time) -> (u32, Time) {
        let mut a = None;
        for k in 0..6u64 {
            c.insert(request(10 + k, FlowId(1), true, (1 << 36) + k * 10_000_000, false), now);
            let r = dispatched(c, now).expect("reader 1 is served at once");
            assert_eq!(r.flow, FlowId(1));
            assert_eq!(*a.get_or_insert(c.active.unwrap()), c.active.unwrap(), "one slot");
            now += MS;
            c.completed(&r, now);
        }
        (a.unwrap(), now)
    }

    // `cfq_should_preempt` (3.13) lets a SYNC_NOIDLE newcomer preempt only "if we are idling on the sync-noidle
    // tree": its tree must hold exactly two queues (its own and the one in service). A newcomer alone on its
    // SYNC_NOIDLE tree does not preempt a queue that idles as the last of another tree. Reader 1 starts its slot on
    // the SYNC tree (fresh, with an idle window) and turns seeky in service: it loses its idle window (its type is
    // now SYNC_NOIDLE) but keeps its place on the SYNC tree until it is re-added, where it is the tree's last queue,
    // so CFQ still idles for it (`cfq_should_idle`: `st->count == 1`, the tree's think time 0). Reader 2, seeky, queues
    // a far request: it is alone on the SYNC_NOIDLE tree (count 1), the request is not close, so reader 1 keeps the
    // disk and its idle wait (until 8 ms after its last completion).
    #[test]
    fn a_newcomer_alone_on_its_sync_noidle_tree_does_not_preempt_an_idling_queue() {
        use crate::types::Decision;
        let mut c = hdd_with_readers(2);
        let now = make_seeky(&mut c, 2, 0);
        let sync = super::super::service_tree::tree_index(IoClass::Be, Workload::Sync);
        let (a, now) = reader_1_turns_seeky_in_service(&mut c, now);
        let aq = &c.queues[a as usize];
        assert!(aq.seeky() && aq.workload() == Workload::SyncNoIdle && aq.wait_request);
        assert_eq!(aq.pos.unwrap().tree, sync, "still on the SYNC tree");
        c.insert(request(30, FlowId(2), true, 1 << 40, false), now);
        let q2 = c.flows[&FlowId(2)].sync_q.unwrap() as usize;
        let tree = c.queues[q2].pos.unwrap().tree;
        assert_eq!(c.groups[0].trees[tree].count(), 1, "reader 2 alone on SYNC_NOIDLE");
        assert_eq!(c.active, Some(a), "reader 1 still in service");
        assert_eq!(c.dispatch(now), Decision::WaitUntil(now + 8 * MS));
    }

    // The rule decides alone when the queue in service has an idle window while placed, and served, on the
    // SYNC_NOIDLE tree (a seeky queue whose history turned sequential in service regains its window before it is
    // re-added): reader 1, seeky, is served on the SYNC_NOIDLE tree and idled for as its tree's last queue; its
    // window is then set, as that re-evaluation would. Seeky reader 2 queues a far request: the tree holds the two
    // of them and reader 1 is empty, so the rule preempts (3.13). The next rules would not (reader 1 has an idle
    // window, so it should idle; reader 2's request is far), so the preemption is the rule's alone.
    #[test]
    fn the_sync_noidle_rule_preempts_a_queue_with_an_idle_window_on_that_tree() {
        let mut c = hdd_with_readers(2);
        let mut now = make_seeky(&mut c, 2, 0);
        // A second later the SYNC workload's slice is long over: reader 1's next read starts a SYNC_NOIDLE one.
        now = make_seeky(&mut c, 1, now) + SEC;
        let noidle = super::super::service_tree::tree_index(IoClass::Be, Workload::SyncNoIdle);
        c.insert(request(500, FlowId(1), true, 1 << 38, false), now);
        let r = dispatched(&mut c, now).expect("reader 1 is served at once");
        now += MS;
        c.completed(&r, now);
        let q1 = c.active.expect("reader 1 in service");
        assert_eq!(c.serving_wl, Workload::SyncNoIdle);
        assert_eq!(c.queues[q1 as usize].pos.unwrap().tree, noidle);
        assert!(
            c.queues[q1 as usize].wait_request,
            "idled for as the last queue of its tree"
        );
        c.queues[q1 as usize].idle_window = true;
        assert_eq!(
            c.groups[0].trees[noidle].count(),
            1,
            "reader 1 alone there; reader 2 makes two"
        );
        c.insert(request(30, FlowId(2), true, 1 << 40, false), now);
        assert_ne!(c.active, Some(q1), "reader 1 preempted");
        let next = dispatched(&mut c, now).map(|r| r.flow);
        assert_eq!(
            next,
            Some(FlowId(2)),
            "reader 2 served at once, not after reader 1's idle wait"
        );
    }

    // The same stale tree with a second seeky reader: the rule reads the workload type being served
    // (`cfqd->serving_wl_type`), SYNC here (reader 1 started its slot on the SYNC tree), not reader 1's own type,
    // now SYNC_NOIDLE. Reader 3 queues a far request first (alone on the SYNC_NOIDLE tree: no preemption), then
    // reader 2 (the tree now holds two): still no preemption, and reader 1 keeps its idle wait. Reading the
    // queue's own type, reader 2 would preempt.
    #[test]
    fn the_sync_noidle_rule_reads_the_workload_being_served() {
        use crate::types::Decision;
        let mut c = hdd_with_readers(3);
        let mut now = make_seeky(&mut c, 2, 0);
        now = make_seeky(&mut c, 3, now);
        let (a, now) = reader_1_turns_seeky_in_service(&mut c, now);
        assert_eq!(c.serving_wl, Workload::Sync);
        assert_eq!(c.queues[a as usize].workload(), Workload::SyncNoIdle);
        c.insert(request(40, FlowId(3), true, 1 << 42, false), now);
        c.insert(request(30, FlowId(2), true, 1 << 40, false), now);
        let q2 = c.flows[&FlowId(2)].sync_q.unwrap() as usize;
        let tree = c.queues[q2].pos.unwrap().tree;
        assert_eq!(c.groups[0].trees[tree].count(), 2, "readers 2 and 3 on SYNC_NOIDLE");
        assert_eq!(c.active, Some(a), "reader 1 still in service");
        assert_eq!(c.dispatch(now), Decision::WaitUntil(now + 8 * MS));
    }
}
