//! Queues: lookup and creation of a flow's sync queue and of the shared async queues (`bfq_get_queue`,
//! `bfq_get_bfqq_handle_split`), groups, and freeing a queue nobody uses any more (`bfq_put_queue`).

use super::fifo::QueueRqs;
use super::idling::ThinkTime;
use super::ids::{QueueId, SdId};
use super::queue_merge::QueueMerge;
use super::wf2q::Owner;
use super::{burst, inject, weight_raising, Bfq, FlowCtx, Group, Queue, ASYNC_QUEUES, DEFAULT_GROUP_WEIGHT};
use super::{Expiration, MAX_WEIGHT, WEIGHT_CONVERSION_COEFF};
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

    /// A flow's process exited: it drops its reference to its sync queue (`bfq_exit_icq_bfqq`).
    pub(crate) fn flow_exit(&mut self, flow: FlowId, now: Time) {
        let Some(ctx) = self.flows.remove(&flow.0) else { return };
        let Some(q) = ctx.sync_q.filter(|&q| self.is_live(q)) else {
            return;
        };
        counter::dec(&mut self.qm(q).refs, "queue refs");
        if self.q(q).refs == 0 {
            self.qm(q).has_short_ttime = false;
            if self.in_service == Some(q) && self.q(q).wait_request && self.q(q).rqs.is_empty() {
                self.cancel_timer();
                self.expire(q, Expiration::NoMoreRequests, now);
            }
        }
        self.maybe_free(q);
    }
}
