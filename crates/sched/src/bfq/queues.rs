//! Queues: lookup and creation of a flow's sync queue and of the shared async queues (`bfq_get_queue`,
//! `bfq_get_bfqq_handle_split`), groups, and freeing a queue nobody uses any more (`bfq_put_queue`).

use super::fifo::QueueRqs;
use super::idling::ThinkTime;
use super::ids::{QueueId, SdId};
use super::queue_merge::QueueMerge;
use super::wf2q::Owner;
use super::{burst, inject, weight_raising, Bfq, FlowCtx, Group, Queue, ASYNC_QUEUES, DEFAULT_GROUP_WEIGHT};
use super::{MAX_WEIGHT, WEIGHT_CONVERSION_COEFF};
use crate::counter;
use crate::sorted::SortedSet;
use crate::types::{FlowId, FlowInfo, GroupId, IoClass, Time, IOPRIO_LEVELS};

impl Bfq {
    pub(crate) fn group_index_get(&self, g: GroupId) -> Option<u32> {
        self.group_index.get(&g.0).copied()
    }

    pub(crate) fn group_of(&mut self, g: GroupId) -> u32 {
        if let Some(&i) = self.group_index.get(&g.0) {
            return i;
        }
        let sd = self.wf.new_group(SdId::ROOT, DEFAULT_GROUP_WEIGHT);
        let i = self.groups.len() as u32;
        self.groups.push(Group {
            sd,
            async_q: [None; ASYNC_QUEUES],
            pending: 0,
            pos: SortedSet::new(),
            last_created: None,
        });
        self.group_index.insert(g.0, i);
        i
    }

    pub(crate) fn ensure_flow(&mut self, f: FlowId) {
        self.flows.entry(f.0).or_insert_with(|| FlowCtx {
            info: FlowInfo::new(f),
            sync_q: None,
            saved: None,
            stable_merge: None,
            stably_merged: false,
        });
    }

    /// Weight of a flow: explicit, or `(8 - prio) * 10`; IDLE-class flows use the lowest priority.
    pub fn flow_weight(info: &FlowInfo) -> u32 {
        if let Some(w) = info.weight {
            return w.clamp(1, MAX_WEIGHT);
        }
        let prio = if info.class == IoClass::Idle {
            IOPRIO_LEVELS - 1
        } else {
            info.prio.min(IOPRIO_LEVELS - 1)
        };
        u32::from(IOPRIO_LEVELS - prio) * WEIGHT_CONVERSION_COEFF
    }

    pub(crate) fn new_queue(&mut self, group: u32, info: &FlowInfo, sync: bool, now: Time) -> QueueId {
        let qi = QueueId::at(self.free_queues.pop().unwrap_or_else(|| {
            self.queues.push(None);
            self.queues.len() - 1
        }));
        let weight = Self::flow_weight(info);
        let sd = self.groups.get(group as usize).map_or(SdId::ROOT, |g| g.sd);
        let e = self
            .wf
            .new_entity(sd, weight, info.class.index() as u8, Owner::Queue(qi));
        let max_budget = self.budgets.new_queue_max();
        self.wf.set_budget(e, max_budget);
        let q = Queue {
            entity: e,
            group,
            class: info.class,
            orig_weight: weight,
            sync,
            refs: 0,
            rqs: QueueRqs::default(),
            dispatched: 0,
            busy: false,
            max_budget,
            budget_timeout: 0,
            slot_start: 0,
            fifo_checked: false,
            wait_request: false,
            non_blocking_wait_rq: false,
            io_bound: true,
            requests_within_timer: 0,
            io_start_time: now,
            tot_idle_time: 0,
            just_created: true,
            ttime: ThinkTime::default(),
            has_short_ttime: sync,
            seek_mean: super::era::SeekMean::default(),
            idle_window: sync && info.class != IoClass::Idle,
            budget_new: true,
            slot_dispatched: 0,
            must_alloc: false,
            seek_history: 1,
            last_request_pos: 0,
            last_end_request: None,
            became_idle_at: None,
            last_arrival: None,
            weight_counted: None,
            pending_counted: false,
            pos_key: None,
            wr: weight_raising::WrState::new(now),
            burst: burst::QueueBurst::new(now),
            merge: QueueMerge {
                created_at: now,
                ..QueueMerge::default()
            },
            inject: inject::QueueInject::new(now),
        };
        if let Some(slot) = self.queues.get_mut(qi.slot()) {
            *slot = Some(q);
        }
        qi
    }

    /// What `flow_started` said about `flow`, or the defaults of an unknown flow.
    fn flow_info(&self, flow: FlowId) -> FlowInfo {
        self.flows
            .get(&flow.0)
            .map(|c| c.info.clone())
            .unwrap_or_else(|| FlowInfo::new(flow))
    }

    pub(crate) fn async_queue(&mut self, flow: FlowId, now: Time) -> QueueId {
        let info = self.flow_info(flow);
        let gi = self.group_of(info.group);
        let idx = match info.class {
            IoClass::Rt => usize::from(info.prio.min(7)),
            IoClass::Be => 8 + usize::from(info.prio.min(7)),
            IoClass::Idle => 16,
        };
        if let Some(cur) = self.groups[gi as usize].async_q[idx] {
            return cur;
        }
        // Shared async queues carry the class weight, never a per-flow explicit weight.
        let mut shared = info.clone();
        shared.weight = None;
        let q = self.new_queue(gi, &shared, false, now);
        self.qm(q).refs = 1;
        self.groups[gi as usize].async_q[idx] = Some(q);
        q
    }

    pub(crate) fn sync_queue(&mut self, flow: FlowId, now: Time) -> QueueId {
        let cur = self.flows.get(&flow.0).and_then(|c| c.sync_q);
        if let Some(cur) = cur.filter(|&c| self.is_live(c)) {
            return cur;
        }
        let info = self.flow_info(flow);
        let gi = self.group_of(info.group);
        let q = self.new_queue(gi, &info, true, now);
        self.qm(q).refs = 1;
        self.qm(q).merge.owner = flow.0;
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.sync_q = Some(q);
        }
        self.burst_on_new_queue(q, now);
        self.stable_merge_on_create(flow, q, now)
    }

    /// The live queue `q`; panics if it was freed (a stale id is a bug in the caller).
    #[track_caller]
    pub(crate) fn q(&self, q: QueueId) -> &Queue {
        match self.queues.get(q.slot()) {
            Some(Some(x)) => x,
            _ => panic!("bfq: {q:?} is not a live queue"),
        }
    }

    /// The live queue `q`, mutably; panics if it was freed.
    #[track_caller]
    pub(crate) fn qm(&mut self, q: QueueId) -> &mut Queue {
        match self.queues.get_mut(q.slot()) {
            Some(Some(x)) => x,
            _ => panic!("bfq: {q:?} is not a live queue"),
        }
    }

    /// True if `q` names a live queue.
    pub(crate) fn is_live(&self, q: QueueId) -> bool {
        self.queues.get(q.slot()).is_some_and(Option::is_some)
    }

    pub(crate) fn raised(&self, q: QueueId) -> bool {
        self.q(q).wr.coeff > 1
    }

    /// Frees a queue nobody uses any more: no flow refers to it and it holds no request.
    pub(crate) fn maybe_free(&mut self, q: QueueId) {
        if !self.is_live(q) {
            return;
        }
        let qq = self.q(q);
        if qq.refs > 0 || qq.busy || qq.dispatched > 0 || !qq.rqs.is_empty() || self.in_service == Some(q) {
            return;
        }
        let e = qq.entity;
        self.pos_remove(q);
        self.sync_counters(q);
        self.burst_forget(q);
        self.wf.free_entity(e);
        self.queues[q.slot()] = None;
        self.free_queues.push(q.slot());
    }

    /// A flow's process exited at `now` (ns): it drops its reference to its sync queue (`bfq_exit_icq_bfqq`).
    ///
    /// As `bfq_exit_bfqq` does (v7r2 and today alike), a queue in service leaves service at once, whatever it
    /// holds and whoever else still uses it, through `__bfq_bfqq_expire` alone: no budget feedback, no time
    /// charge, no idling for a process that is gone. Then `bfq_release_process_ref` (since 5.3): a queue still
    /// busy with nothing queued (one requeued empty for its guarantees) leaves the busy set, since nobody is
    /// left to fill it.
    pub(crate) fn flow_exit(&mut self, flow: FlowId, now: Time) {
        let Some(ctx) = self.flows.remove(&flow.0) else { return };
        let Some(q) = ctx.sync_q.filter(|&q| self.is_live(q)) else {
            return;
        };
        self.end_slot(q, false, now);
        counter::dec(&mut self.qm(q).refs, "queue refs");
        if self.q(q).refs == 0 {
            self.qm(q).has_short_ttime = false;
        }
        if self.q(q).busy && self.q(q).rqs.is_empty() && self.in_service != Some(q) {
            let e = self.q(q).entity;
            self.wf.deactivate(e);
            self.del_busy(q);
        }
        self.maybe_free(q);
    }
}

#[cfg(test)]
mod tests {
    use super::super::era::Era;
    use super::super::tests::bfq;
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{Decision, Direction, Request, RequestId, MS};

    fn read(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
    }

    // `bfq_ioprio_to_weight`: weight (8 - prio) x 10, so priority 0 weighs 80 and priority 7 weighs 10; the IDLE
    // class weighs as the lowest priority whatever its level; a priority beyond the lowest level (the kernel
    // has 8) counts as the lowest. An explicit weight is kept within 1..=1000.
    #[test]
    fn a_flows_weight_follows_its_priority_and_stays_in_range() {
        let of = |class: IoClass, prio: u8, weight: Option<u32>| {
            let mut f = FlowInfo::new(FlowId(1));
            f.class = class;
            f.prio = prio;
            f.weight = weight;
            Bfq::flow_weight(&f)
        };
        assert_eq!(of(IoClass::Be, 0, None), 80);
        assert_eq!(of(IoClass::Be, 4, None), 40);
        assert_eq!(of(IoClass::Rt, 7, None), 10);
        assert_eq!(of(IoClass::Be, 8, None), 10, "one level beyond the lowest");
        assert_eq!(of(IoClass::Be, 9, None), 10, "two levels beyond the lowest");
        assert_eq!(of(IoClass::Be, u8::MAX, None), 10);
        assert_eq!(of(IoClass::Idle, 0, None), 10, "IDLE class at level 0");
        assert_eq!(of(IoClass::Be, 0, Some(0)), 1);
        assert_eq!(of(IoClass::Be, 0, Some(5000)), MAX_WEIGHT);
        assert_eq!(of(IoClass::Be, 0, Some(300)), 300);
    }

    // v7r2's `bfq_init_bfqq` opens the idle window of a new sync queue, except for the IDLE class (never worth
    // waiting for); the window is what makes v7r2 idle for a non-raised queue before its think time is known.
    // So on an HDD that does not queue commands, a new BE reader is idled for and a new IDLE-class reader is not.
    #[test]
    fn v7r2_idles_for_a_new_sync_queue_unless_it_is_of_the_idle_class() {
        let dev = DeviceInfo::hdd();
        let v = crate::tunables::TunableValues::parse(
            "bfq",
            &super::super::tunables::V7R2_TUNABLES,
            &dev,
            &["low_latency=0"],
        )
        .unwrap();
        let mut b = Bfq::with_era(&dev, super::super::tunables::Params::from_values(&v), Era::V7r2);
        b.hw.hw_tag = Some(false);
        let mut idle = FlowInfo::new(FlowId(2));
        idle.class = IoClass::Idle;
        for (info, want) in [(FlowInfo::new(FlowId(1)), true), (idle, false)] {
            let q = b.new_queue(0, &info, true, 0);
            b.qm(q).refs = 1;
            assert_eq!(b.q(q).idle_window, want, "{:?}", info.class);
            assert_eq!(b.better_to_idle(q), want, "{:?}", info.class);
        }
    }

    /// Seven sync queues created 1 ms apart (a burst, not yet large: 8 make one), the first one's process gone.
    fn burst_of_seven() -> (Bfq, QueueId) {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let mut first = None;
        for f in 1..=7u32 {
            let t = u64::from(f) * MS;
            let q = b.new_queue(0, &FlowInfo::new(FlowId(f)), true, t);
            b.qm(q).refs = 1;
            b.burst_on_new_queue(q, t);
            first.get_or_insert(q);
        }
        assert_eq!(b.burst.size, 7);
        let q = first.unwrap();
        b.qm(q).refs = 0;
        (b, q)
    }

    /// Whether an eighth queue created at 8 ms joins a large burst (and so is not weight-raised).
    fn eighth_is_in_a_large_burst(b: &mut Bfq) -> bool {
        let n = b.new_queue(0, &FlowInfo::new(FlowId(8)), true, 8 * MS);
        b.burst_on_new_queue(n, 8 * MS);
        b.q(n).burst.in_large_burst
    }

    // `bfq_put_queue`: a queue is freed only when nothing uses it any more: no process reference, not busy,
    // nothing in the driver, no request queued, not in service. A freed member of the current burst no longer
    // counts in the burst (its process has exited), so seven queues of which one was freed plus a newcomer are
    // seven, not the eight that make a large burst; while any of those conditions holds, the queue stays and
    // counts, and the newcomer is in a large burst. The freed slot is reused by the next queue.
    #[test]
    fn only_a_queue_nothing_uses_is_freed_and_it_leaves_the_burst() {
        /// Makes the queue in use in one way.
        type Hold = fn(&mut Bfq, QueueId);
        let keep: [(&str, Hold); 5] = [
            ("a process reference", |b, q| b.qm(q).refs = 1),
            ("busy", |b, q| b.qm(q).busy = true),
            ("a request in the driver", |b, q| b.qm(q).dispatched = 1),
            ("a request queued", |b, q| {
                let slot = b.store.alloc(read(1, 1, 0), q, 0);
                let store = &b.store;
                if let Some(Some(qq)) = b.queues.get_mut(q.slot()) {
                    qq.rqs.add(slot, store, 0, 0, 1);
                }
            }),
            ("in service", |b, q| b.in_service = Some(q)),
        ];
        for (what, hold) in keep {
            let (mut b, q) = burst_of_seven();
            hold(&mut b, q);
            b.maybe_free(q);
            assert!(b.is_live(q), "{what}: kept");
            assert!(eighth_is_in_a_large_burst(&mut b), "{what}: the kept queue counts");
        }
        let (mut b, q) = burst_of_seven();
        b.maybe_free(q);
        assert!(!b.is_live(q), "freed");
        assert_eq!(b.burst.size, 6);
        b.maybe_free(q);
        assert_eq!(b.burst.size, 6, "freeing a freed queue does nothing");
        let n = b.new_queue(0, &FlowInfo::new(FlowId(9)), true, 8 * MS);
        assert_eq!(n.slot(), q.slot(), "the freed slot is reused");
        b.burst_on_new_queue(n, 8 * MS);
        assert!(!b.q(n).burst.in_large_burst, "seven in the burst, not eight");
    }

    // `bfq_exit_icq_bfqq`: an exiting process ends the idling only if it is the one idled for; another process
    // exiting (its queue empty and not in service) leaves the idle timer of the queue in service running, so
    // the device still waits for that queue's next request.
    #[test]
    fn another_process_exiting_does_not_end_the_idling() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        for f in [1, 3] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        // Flow 3 reads once and is idled for until its timer expires; its queue stays, empty.
        b.insert(read(1, 3, 1 << 30), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else {
            panic!("flow 3's read")
        };
        b.completed(&r, MS);
        let Decision::WaitUntil(t) = b.dispatch(MS) else {
            panic!("idling for flow 3")
        };
        assert!(matches!(b.dispatch(t), Decision::Nothing));
        // Flow 1 reads and is idled for.
        b.insert(read(2, 1, 0), 20 * MS);
        let Decision::Dispatch(r) = b.dispatch(20 * MS) else {
            panic!("flow 1's read")
        };
        b.completed(&r, 21 * MS);
        let Decision::WaitUntil(t) = b.dispatch(21 * MS) else {
            panic!("idling for flow 1")
        };
        b.flow_exited(FlowId(3), 22 * MS);
        assert!(
            matches!(b.dispatch(22 * MS), Decision::WaitUntil(u) if u == t),
            "still idling for flow 1"
        );
        b.flow_exited(FlowId(1), 23 * MS);
        assert!(
            matches!(b.dispatch(23 * MS), Decision::Nothing),
            "flow 1 gone: no idling"
        );
    }

    /// Flows 1 and 2 on an HDD without raising; flow 1's read (sector 0) is dispatched at 0 and in flight, so its
    /// queue is in service, empty and not idling; flow 2's read waits. Returns the policy and flow 1's queue.
    fn one_read_in_flight_one_waiting() -> (Bfq, QueueId) {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        for f in [1, 2] {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b.insert(read(1, 1, 0), 0);
        b.insert(read(2, 2, 1 << 30), 0);
        let Decision::Dispatch(r) = b.dispatch(0) else {
            panic!("flow 1's read")
        };
        assert_eq!(r.flow, FlowId(1));
        let q = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.in_service, Some(q));
        assert!(!b.q(q).wait_request && b.q(q).rqs.is_empty() && b.q(q).dispatched == 1);
        (b, q)
    }

    // `bfq_exit_bfqq` expires the queue in service whenever its process exits, through `__bfq_bfqq_expire` only.
    // Here flow 1 exits with its read still in flight (not idling yet): its queue leaves service at the exit, so
    // flow 2's read goes at once instead of after flow 1's completion and a look at an idle window for a
    // process that is gone; the queue gets no budget feedback (its maximum budget is the one it had) and stays
    // until its read completes, then is freed.
    #[test]
    fn a_process_that_exits_while_its_queue_is_served_is_not_waited_for() {
        let (mut b, q) = one_read_in_flight_one_waiting();
        let before = b.q(q).max_budget;
        b.flow_exited(FlowId(1), MS / 2);
        assert_eq!(b.in_service, None, "out of service at the exit");
        assert!(!b.q(q).busy);
        assert_eq!(b.q(q).max_budget, before, "no budget feedback");
        match b.dispatch(MS / 2) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2), "flow 2 at once"),
            d => panic!("{d:?}"),
        }
        assert!(b.is_live(q), "kept while its read is in flight");
        b.check_invariants().unwrap();
    }

    // The same whoever else still uses the queue (a queue shared after a merge keeps another process's
    // reference): the kernel expires it at the exit anyway.
    #[test]
    fn a_shared_queue_in_service_leaves_service_when_one_of_its_processes_exits() {
        let (mut b, q) = one_read_in_flight_one_waiting();
        // Flow 3 shares flow 1's queue, as after a merge.
        b.flow_started(&FlowInfo::new(FlowId(3)), 0);
        b.flows.get_mut(&3).unwrap().sync_q = Some(q);
        b.qm(q).refs += 1;
        b.check_invariants().unwrap();
        b.flow_exited(FlowId(1), MS / 2);
        assert_eq!(b.in_service, None);
        assert_eq!(b.q(q).refs, 1, "the other process's reference stays");
        assert!(matches!(b.dispatch(MS / 2), Decision::Dispatch(r) if r.flow == FlowId(2)));
        b.check_invariants().unwrap();
    }

    // Only the last process leaving a queue ends its short think time (`bfq_update_has_short_ttime` takes a queue
    // whose process is exiting as not worth idling for). On a disk that queues commands, idling pays for a
    // sequential queue only while its think time is short, and with three queues busy no guarantee asks for it;
    // so a queue shared after a merge keeps its short think time, and the idling for it, while another of its
    // processes remains.
    #[test]
    fn a_shared_queue_keeps_its_short_think_time_while_one_of_its_processes_remains() {
        let (mut b, q) = one_read_in_flight_one_waiting();
        b.hw.hw_tag = Some(true);
        b.flow_started(&FlowInfo::new(FlowId(3)), 0);
        b.flows.get_mut(&3).unwrap().sync_q = Some(q);
        b.qm(q).refs += 1;
        b.flow_started(&FlowInfo::new(FlowId(4)), 0);
        b.insert(read(3, 4, 1 << 31), 0);
        assert!(
            b.better_to_idle(q),
            "a new sequential sync queue has a short think time"
        );
        b.flow_exited(FlowId(1), MS / 2);
        assert!(b.better_to_idle(q), "flow 3 still uses it");
        b.qm(q).has_short_ttime = false;
        assert!(!b.better_to_idle(q), "not idled for without a short think time");
    }

    // A queue in service that still holds requests when its process exits is requeued with them (it stays busy
    // and its requests are served later), not dropped.
    #[test]
    fn a_queue_that_leaves_service_at_an_exit_keeps_its_requests() {
        let (mut b, q) = one_read_in_flight_one_waiting();
        b.insert(read(3, 1, 8), MS / 4);
        b.flow_exited(FlowId(1), MS / 2);
        assert_eq!(b.in_service, None);
        assert!(b.q(q).busy && !b.q(q).rqs.is_empty(), "requeued with its request");
        let mut served = Vec::new();
        let mut t = MS / 2;
        for _ in 0..20 {
            match b.dispatch(t) {
                Decision::Dispatch(r) => {
                    served.push(r.id);
                    t += MS;
                    b.completed(&r, t);
                }
                Decision::WaitUntil(u) => t = u.max(t + 1),
                _ => break,
            }
        }
        served.sort();
        assert_eq!(served, [RequestId(2), RequestId(3)]);
        b.check_invariants().unwrap();
    }

    // `bfq_release_process_ref`: a queue that is busy with nothing queued and not in service (one requeued
    // empty at a preemption, to keep its guarantees) leaves the busy set when its process exits, as nobody is
    // left to send it a request; kept busy, it would be selected and idled for.
    #[test]
    fn a_busy_empty_queue_leaves_the_busy_set_when_its_process_exits() {
        let (mut b, q) = one_read_in_flight_one_waiting();
        b.end_slot(q, true, MS / 4);
        assert!(
            b.q(q).busy && b.q(q).rqs.is_empty() && b.in_service.is_none(),
            "requeued empty"
        );
        b.flow_exited(FlowId(1), MS / 2);
        assert!(!b.q(q).busy, "no longer busy");
        assert!(matches!(b.dispatch(MS / 2), Decision::Dispatch(r) if r.flow == FlowId(2)));
        b.check_invariants().unwrap();
    }
}
