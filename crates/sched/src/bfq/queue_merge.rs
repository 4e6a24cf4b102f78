//! Early queue merging (`bfq_setup_cooperator`, `bfq_merge_bfqqs`, `bfq_split_bfqq`): processes that interleave I/O on
//! nearby sectors (cooperating threads, a parallel reader) are redirected to one shared queue, which then looks
//! sequential; a shared queue that turns out seeky is split again at each process's next request.

use super::burst::BURST_INTERVAL;
use super::idling::{boosts_throughput, is_seeky, ThinkTime};
use super::ids::QueueId;
use super::weight_raising::WrState;
use super::Bfq;
use crate::counter;
use crate::types::{FlowId, IoClass, Request, Time, MS};

/// Queues whose next requests are this close (sectors) cooperate: 8192 sectors = 4 MiB (`BFQQ_CLOSE_THR`).
pub const CLOSE_THR: u64 = 8192;

/// A queue may be merged only within this time (ns) of its first dispatch in the current backlogged period:
/// 100 ms, after which its pattern is established and a merge would only disturb it.
pub const MERGE_TIME_LIMIT: Time = 100 * MS;

/// A sync queue created within this time (ns) of its group's last created one may be stably merged with it:
/// 600 ms (`bfq_activation_stable_merging`). Queues of processes started together (the threads of one program, a
/// set of jobs) usually serve one task.
pub const STABLE_MERGE_WINDOW: Time = 600 * MS;

/// A scheduled (delayed) stable merge is decided no earlier than this (ns) after the queue's creation and its
/// last split: 600 ms (`bfq_late_stable_merging`), so that the queue has shown whether idling for it pays.
pub const LATE_STABLE_MERGE: Time = 600 * MS;

/// Per-queue merge state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueMerge {
    /// Shared by several flows after a merge.
    pub coop: bool,
    /// Found seeky while shared: split at the next request of each flow.
    pub split_coop: bool,
    /// First dispatch in the current backlogged period (ns).
    pub first_io_time: Option<Time>,
    /// Last split that produced this queue (ns).
    pub split_time: Option<Time>,
    /// The flow that created the queue.
    pub owner: u32,
    /// When the queue was created (ns; `creation_time`, for stable merging).
    pub created_at: Time,
}

/// A flow's queue state, saved at a merge and restored at a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saved {
    ttime: ThinkTime,
    has_short_ttime: bool,
    io_bound: bool,
    seek_history: u32,
    wr: WrState,
    in_large_burst: bool,
}

impl Bfq {
    /// Merging is off when the device queues commands internally on flash: it reorders for itself, or when
    /// switched off for an experiment ([`Bfq::without_queue_merging`]).
    pub(crate) fn eqm_enabled(&self) -> bool {
        !self.no_queue_merging && !self.hw.nonrot_with_queueing(self.rotational)
    }

    fn too_late_for_merging(&self, q: QueueId, now: Time) -> bool {
        let qq = self.q(q);
        qq.merge
            .first_io_time
            .is_some_and(|t| now > t.saturating_add(MERGE_TIME_LIMIT))
            && qq.wr.service_from_backlogged > 0
    }

    fn may_cooperate(&self, a: QueueId, b: QueueId) -> bool {
        let (qa, qb) = (self.q(a), self.q(b));
        a != b
            && qa.group == qb.group
            && qa.class == qb.class
            && qa.sync
            && qb.sync
            && qa.class != IoClass::Idle
            && !is_seeky(qa.seek_history)
            && !is_seeky(qb.seek_history)
            && qb.refs > 0
    }

    /// A queue cooperating with `q` for a request at `sector` (`bfq_setup_cooperator`'s search): the in-service
    /// queue if its own last dispatched request ended within [`CLOSE_THR`]; else the queue the group's position
    /// tree finds close to `sector` ([`Bfq::find_close`]), if that one may cooperate. As in the kernel, only the
    /// one queue found is judged: a close queue that may not cooperate (an async one) hides the others.
    pub(crate) fn find_cooperator(&self, q: QueueId, sector: u64) -> Option<QueueId> {
        let near_in_service = self.in_serv_last_pos.is_some_and(|p| sector.abs_diff(p) <= CLOSE_THR);
        if let Some(s) = self.in_service.filter(|&s| near_in_service && self.may_cooperate(q, s)) {
            return Some(s);
        }
        let c = self.find_close(self.q(q).group as usize, sector)?;
        self.may_cooperate(q, c).then_some(c)
    }

    /// `bfqq_find_close`: the filed queue of group `g` whose next request starts at `sector`; else, of the two
    /// filed neighbours of `sector`, the first within [`CLOSE_THR`] of it. The kernel looks first at the
    /// red-black tree parent of `sector`'s leaf, which is one of the two neighbours depending on the tree's
    /// shape (its insertion history and rebalancing); we look first at the nearer one (the one ahead, at or after
    /// `sector`, on a tie: the direction the head sweeps), a deterministic stand-in that differs only when both are close and only one may cooperate.
    fn find_close(&self, g: usize, sector: u64) -> Option<QueueId> {
        let gr = self.groups.get(g)?;
        let lowest = QueueId::at(0);
        let after = gr.pos.at_or_after(&(sector, lowest));
        if let Some((_, c)) = after.filter(|&(s, _)| s == sector) {
            return Some(c);
        }
        let before = gr.pos.before(&(sector, lowest));
        let mut near = [before, after].map(|e| e.map(|(s, c)| (s.abs_diff(sector), c)));
        if let [Some((db, _)), Some((da, _))] = near {
            if da <= db {
                near.swap(0, 1);
            }
        }
        near.into_iter()
            .flatten()
            .find(|&(d, _)| d <= CLOSE_THR)
            .map(|(_, c)| c)
    }

    /// At a sync insert of `flow` into `q`: merge `q` into a cooperator if there is one; returns the queue the
    /// request goes to.
    pub(crate) fn maybe_merge_on_insert(&mut self, flow: FlowId, q: QueueId, rq: &Request, now: Time) -> QueueId {
        if !self.eqm_enabled() || Some(q) == self.in_service || self.q(q).class == IoClass::Idle {
            return q;
        }
        if self.too_late_for_merging(q, now) {
            return q;
        }
        let Some(to) = self.find_cooperator(q, rq.sector) else {
            return q;
        };
        self.merge_queues(flow, q, to, now);
        to
    }

    /// Redirects `flow` from `from` to `to`, saving its state for a later split.
    pub(crate) fn merge_queues(&mut self, flow: FlowId, from: QueueId, to: QueueId, now: Time) {
        let f = self.q(from);
        let saved = Saved {
            ttime: f.ttime,
            has_short_ttime: f.has_short_ttime,
            io_bound: f.io_bound,
            seek_history: f.seek_history,
            wr: f.wr,
            in_large_burst: f.burst.in_large_burst,
        };
        let from_wr = f.wr;
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.saved = Some(saved);
            c.sync_q = Some(to);
        }
        // A non-raised shared queue inherits the source's raising (`bfq_merge_bfqqs`: only when it has none).
        if self.q(to).wr.coeff == 1 && from_wr.coeff > 1 {
            self.set_wr_coeff(to, from_wr.coeff);
            let w = &mut self.qm(to).wr;
            w.kind = from_wr.kind;
            w.last_start_finish = from_wr.last_start_finish;
            w.cur_max_time = from_wr.cur_max_time;
            w.service_from_wr = from_wr.service_from_wr;
        }
        // The source gives its raising to the shared queue (or loses it): it must not count twice.
        if self.q(from).wr.coeff > 1 {
            self.end_wr(from, now);
        }
        self.qm(to).refs += 1;
        self.qm(to).merge.coop = true;
        counter::dec(&mut self.qm(from).refs, "queue refs");
        self.maybe_free(from);
    }

    /// Before a sync insert: if `flow`'s shared queue was marked for splitting, give the flow its own queue back
    /// with the state saved at the merge.
    pub(crate) fn maybe_split(&mut self, flow: FlowId, now: Time) {
        let Some(ctx) = self.flows.get(&flow.0) else { return };
        // A stably merged flow stays in its shared queue, seeky or not.
        if ctx.stably_merged {
            return;
        }
        let saved = ctx.saved;
        let Some(q) = ctx.sync_q.filter(|&q| self.is_live(q) && self.q(q).merge.split_coop) else {
            return;
        };
        if self.q(q).refs <= 1 {
            let m = &mut self.qm(q).merge;
            m.coop = false;
            m.split_coop = false;
            return;
        }
        self.qm(q).refs -= 1;
        let info = self
            .flows
            .get(&flow.0)
            .map(|c| c.info.clone())
            .unwrap_or_else(|| crate::types::FlowInfo::new(flow));
        let gi = self.group_of(info.group);
        let nq = self.new_queue(gi, &info, true, now);
        self.qm(nq).refs = 1;
        self.qm(nq).merge.owner = flow.0;
        self.qm(nq).merge.split_time = Some(now);
        if let Some(s) = saved {
            let n = self.qm(nq);
            n.ttime = s.ttime;
            n.has_short_ttime = s.has_short_ttime;
            n.io_bound = s.io_bound;
            n.seek_history = s.seek_history;
            n.burst.in_large_burst = s.in_large_burst;
            if s.wr.coeff > 1 {
                self.set_wr_coeff(nq, s.wr.coeff);
                let w = &mut self.qm(nq).wr;
                w.kind = s.wr.kind;
                w.last_start_finish = s.wr.last_start_finish;
                w.cur_max_time = s.wr.cur_max_time;
                w.service_from_wr = s.wr.service_from_wr;
            }
        }
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.sync_q = Some(nq);
            c.saved = None;
        }
    }

    /// At the creation of `flow`'s new sync queue `q` (not by a split), the newest kernels' stable merging
    /// (`bfq_do_or_sched_stable_merge`): if the group's last created sync queue is less than 600 ms older, of the
    /// same class and priority, and `q` came within the burst interval (180 ms) of it, then on a non-rotational
    /// queueing device `q` is merged into it at once (an early stable merge: idling cannot pay there), and
    /// otherwise a merge into it is scheduled, to be decided 600 ms later. A queue that comes later, or differs,
    /// starts a new window. Returns the flow's queue.
    pub(crate) fn stable_merge_on_create(&mut self, flow: FlowId, q: QueueId, now: Time) -> QueueId {
        if !self.rules.stable_merge {
            return q;
        }
        let g = self.q(q).group as usize;
        let last = self
            .groups
            .get(g)
            .and_then(|gr| gr.last_created)
            .filter(|&l| l != q && self.is_live(l));
        let Some(l) = last else {
            if let Some(gr) = self.groups.get_mut(g) {
                gr.last_created = Some(q);
            }
            return q;
        };
        let (ql, qq) = (self.q(l), self.q(q));
        let new_window = ql.merge.created_at.saturating_add(STABLE_MERGE_WINDOW) < qq.merge.created_at
            || ql.class != qq.class
            || ql.orig_weight != qq.orig_weight;
        if new_window {
            if let Some(gr) = self.groups.get_mut(g) {
                gr.last_created = Some(q);
            }
            return q;
        }
        if qq.merge.created_at > ql.merge.created_at.saturating_add(BURST_INTERVAL) || ql.refs == 0 {
            return q;
        }
        if self.hw.nonrot_with_queueing(self.rotational) {
            self.merge_queues(flow, q, l, now);
            self.mark_stably_merged(flow, l);
            return l;
        }
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.stable_merge = Some(l);
        }
        q
    }

    /// Before a sync insert of `flow` into its queue `q`: the flow's scheduled stable merge is decided once `q`
    /// has existed (and not been split) for 600 ms and its first request has been seen. It happens if idling
    /// does not boost throughput for `q` without issues (else the queue is better served alone) and both queues
    /// still have processes; either way it is descheduled. Returns the queue to use if a merge happened.
    pub(crate) fn stable_merge_on_insert(&mut self, flow: FlowId, q: QueueId, now: Time) -> Option<QueueId> {
        if self.no_queue_merging {
            return None;
        }
        let t = self.flows.get(&flow.0).and_then(|c| c.stable_merge)?;
        let qq = self.q(q);
        let too_early = qq.just_created
            || now <= qq.merge.created_at.saturating_add(LATE_STABLE_MERGE)
            || qq
                .merge
                .split_time
                .is_some_and(|s| now <= s.saturating_add(LATE_STABLE_MERGE));
        if too_early {
            return None;
        }
        if let Some(c) = self.flows.get_mut(&flow.0) {
            c.stable_merge = None;
        }
        if t == q || !self.is_live(t) || self.q(t).refs == 0 || self.q(q).refs == 0 {
            return None;
        }
        let f = self.idle_facts(q);
        if boosts_throughput(&f) && f.wr_busy == 0 {
            return None;
        }
        self.merge_queues(flow, q, t, now);
        self.mark_stably_merged(flow, t);
        Some(t)
    }

    /// Marks `flow` and the owner of the queue `to` it was merged into as stably merged: their shared queue is
    /// not split when it turns seeky.
    fn mark_stably_merged(&mut self, flow: FlowId, to: QueueId) {
        let owner = self.q(to).merge.owner;
        for f in [flow.0, owner] {
            if let Some(c) = self.flows.get_mut(&f) {
                c.stably_merged = true;
            }
        }
    }

    /// At an idle→busy switch a new backlogged period starts.
    pub(crate) fn merge_on_busy(&mut self, q: QueueId, _now: Time) {
        self.qm(q).merge.first_io_time = None;
    }

    /// At expiration: a shared queue found seeky is marked for splitting.
    pub(crate) fn merge_on_expire(&mut self, q: QueueId) {
        if self.q(q).merge.coop && is_seeky(self.q(q).seek_history) {
            self.qm(q).merge.split_coop = true;
        }
    }

    /// At a dispatch: records the first dispatch of the backlogged period.
    pub(crate) fn merge_on_dispatch(&mut self, q: QueueId, now: Time) {
        let m = &mut self.qm(q).merge;
        if m.first_io_time.is_none() {
            m.first_io_time = Some(now);
        }
    }

    /// `bfq_pos_tree_add_move`: keeps `q`'s entry in its group's position tree in step with its next request, as
    /// of `now` (ns). Any queue with a next request is filed, sync or async (a near async queue can so hide a sync
    /// cooperator from [`Bfq::find_cooperator`], as in the kernel), except an IDLE-class queue, a queue too late
    /// for merging, and every queue while merging is off (the kernel's callers skip the filing on a
    /// non-rotational queueing device). The tree holds one queue per sector: a queue whose next request starts
    /// where a filed queue's does is left out, until its next move.
    pub(crate) fn pos_update(&mut self, q: QueueId, now: Time) {
        let qq = self.q(q);
        let fileable = self.eqm_enabled() && qq.class != IoClass::Idle && !self.too_late_for_merging(q, now);
        let mut want = if fileable {
            qq.rqs.next.and_then(|s| self.store.rq(s)).map(|r| r.sector)
        } else {
            None
        };
        if want == qq.pos_key {
            return;
        }
        let g = qq.group as usize;
        let old = qq.pos_key;
        if let Some(gr) = self.groups.get_mut(g) {
            if let Some(n) = want {
                if gr.pos.at_or_after(&(n, QueueId::at(0))).is_some_and(|(s, _)| s == n) {
                    want = None;
                }
            }
            match (old, want) {
                (Some(o), Some(n)) => {
                    // A queue's key is filed whenever it is `Some` (`check_invariants`), so the replacement finds it.
                    gr.pos.replace(&(o, q), (n, q));
                }
                (Some(o), None) => {
                    gr.pos.remove(&(o, q));
                }
                (None, Some(n)) => {
                    gr.pos.insert((n, q));
                }
                (None, None) => {}
            }
        }
        self.qm(q).pos_key = want;
    }

    /// Removes `q` from its group's position tree.
    pub(crate) fn pos_remove(&mut self, q: QueueId) {
        if let Some(old) = self.q(q).pos_key {
            let g = self.q(q).group as usize;
            if let Some(gr) = self.groups.get_mut(g) {
                gr.pos.remove(&(old, q));
            }
            self.qm(q).pos_key = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{bfq, checked, rq};
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{FlowInfo, SEC};

    /// Flow `f`'s sync queue on `b`, filed in its group's position tree at `sector` as if busy there.
    fn filed_at(b: &mut Bfq, f: u32, sector: u64) -> QueueId {
        b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        let q = b.sync_queue(FlowId(f), 0);
        b.groups[0].pos.insert((sector, q));
        q
    }

    // Queues cooperate only when the next requests are within CLOSE_THR sectors, in the same class, and
    // neither is seeky.
    #[test]
    fn only_close_queues_cooperate() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        let c = filed_at(&mut b, 2, 1_000_000);
        b.groups[0].pos.remove(&(0, a));
        assert_eq!(b.find_cooperator(a, 1_000_000 + CLOSE_THR), Some(c));
        assert_eq!(b.find_cooperator(a, 1_000_000 - CLOSE_THR), Some(c));
        assert_eq!(b.find_cooperator(a, 1_000_000 + CLOSE_THR + 1), None, "too far");
        b.qm(c).seek_history = u32::MAX;
        assert_eq!(b.find_cooperator(a, 1_000_000), None, "seeky");
        b.qm(c).seek_history = 0;
        b.qm(c).class = IoClass::Rt;
        assert_eq!(b.find_cooperator(a, 1_000_000), None, "another class");
    }

    // A merge redirects the flow to the shared queue (which gains its reference and the stronger raising) and
    // frees the empty old queue; when the shared queue is later marked for splitting, the flow gets a fresh
    // queue back with the state saved at the merge.
    #[test]
    fn merge_redirects_the_flow_and_a_split_restores_its_state() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let a = filed_at(&mut b, 1, 0);
        let c = filed_at(&mut b, 2, 64);
        b.groups[0].pos.clear();
        b.qm(a).seek_history = 0b1011;
        b.set_wr_coeff(a, 30);
        b.merge_queues(FlowId(1), a, c, 0);
        assert_eq!(b.flows[&1].sync_q, Some(c));
        assert_eq!(b.q(c).refs, 2);
        assert!(b.q(c).merge.coop);
        assert_eq!(b.q(c).wr.coeff, 30, "the shared queue inherits the stronger raising");
        assert!(!b.is_live(a), "the old queue, empty and unreferenced, is freed");
        checked(&b);
        b.qm(c).merge.split_coop = true;
        b.maybe_split(FlowId(1), 5 * MS);
        let n = b.flows[&1].sync_q.unwrap();
        assert_ne!(n, c);
        assert_eq!(b.q(c).refs, 1);
        assert_eq!(b.q(n).seek_history, 0b1011, "saved state restored");
        assert_eq!(b.q(n).merge.split_time, Some(5 * MS));
        assert_eq!(b.q(n).wr.coeff, 30);
        checked(&b);
    }

    // A shared queue found seeky at expiration is marked for splitting; a sequential one is not.
    #[test]
    fn a_seeky_shared_queue_is_marked_for_splitting() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        b.qm(a).merge.coop = true;
        b.merge_on_expire(a);
        assert!(!b.q(a).merge.split_coop);
        b.qm(a).seek_history = u32::MAX;
        b.merge_on_expire(a);
        assert!(b.q(a).merge.split_coop);
    }

    // Early merging is off on a non-rotational device that queues commands; on a disk a queue is merged only
    // within 100 ms of its first dispatch (the kernel's `bfq_merge_time_limit`, written out here so that a wrong
    // constant fails), and only once it has received service in its backlogged period (before that, never late).
    #[test]
    fn merging_is_off_on_queueing_flash_and_late_in_a_backlog() {
        let ssd = bfq(&DeviceInfo::ssd(), &[]);
        assert!(!ssd.eqm_enabled());
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        assert!(b.eqm_enabled());
        let a = filed_at(&mut b, 1, 0);
        b.qm(a).merge.first_io_time = Some(0);
        b.qm(a).wr.service_from_backlogged = 8;
        assert!(!b.too_late_for_merging(a, 100 * MS));
        assert!(b.too_late_for_merging(a, 100 * MS + 1));
        b.qm(a).wr.service_from_backlogged = 0;
        assert!(
            !b.too_late_for_merging(a, 1000 * MS),
            "no service yet in this backlogged period: never too late"
        );
    }

    // Which queue a sync request goes to at insertion: flow 1's queue `a` has a close cooperator `c` (flow 2's,
    // 64 sectors on), so the request goes to `c` and the flows share it; it stays in `a` when `a` is the queue in
    // service, when `a` is of the IDLE class, or when early merging is off (a queueing SSD).
    #[test]
    fn a_request_goes_to_a_close_cooperator_unless_its_queue_is_in_service_or_idle_class() {
        use crate::types::{Direction, RequestId};
        let rq = Request::new(RequestId(1), FlowId(1), Direction::Read, true, 64, 8);
        let setup = |dev: &DeviceInfo| {
            let mut b = bfq(dev, &[]);
            let a = filed_at(&mut b, 1, 0);
            let c = filed_at(&mut b, 2, 64);
            b.groups[0].pos.remove(&(0, a));
            (b, a, c)
        };
        let (mut b, a, c) = setup(&DeviceInfo::hdd());
        assert_eq!(b.maybe_merge_on_insert(FlowId(1), a, &rq, 0), c, "merged");
        let (mut b, a, _) = setup(&DeviceInfo::hdd());
        b.in_service = Some(a);
        assert_eq!(b.maybe_merge_on_insert(FlowId(1), a, &rq, 0), a, "in service");
        let (mut b, a, _) = setup(&DeviceInfo::hdd());
        b.qm(a).class = IoClass::Idle;
        assert_eq!(b.maybe_merge_on_insert(FlowId(1), a, &rq, 0), a, "IDLE class");
        let (mut b, a, _) = setup(&DeviceInfo::ssd());
        assert_eq!(b.maybe_merge_on_insert(FlowId(1), a, &rq, 0), a, "merging off");
    }

    // A queue whose process has gone (no reference left) is no cooperator: nobody would issue the next request it
    // is close to.
    #[test]
    fn a_queue_without_a_process_is_no_cooperator() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        let c = filed_at(&mut b, 2, 64);
        b.groups[0].pos.remove(&(0, a));
        assert_eq!(b.find_cooperator(a, 64), Some(c));
        b.qm(c).refs = 0;
        assert_eq!(b.find_cooperator(a, 64), None);
    }

    // The shared queue inherits the source's raising only if it has none of its own (the kernel's
    // `bfq_merge_bfqqs`): a shared queue raised at 30 keeps 30 when a queue raised at 3000 merges into it, and the
    // source's raising ends (it must not count twice).
    #[test]
    fn a_raised_shared_queue_keeps_its_own_raising_at_a_merge() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        let c = filed_at(&mut b, 2, 64);
        b.groups[0].pos.clear();
        b.set_wr_coeff(c, 30);
        b.set_wr_coeff(a, 3000);
        // A second process still uses `a`, so it outlives the merge and its coefficient can be read.
        b.qm(a).refs = 2;
        b.merge_queues(FlowId(1), a, c, 0);
        assert_eq!(b.flows[&1].sync_q, Some(c));
        assert_eq!(b.q(c).wr.coeff, 30);
        assert!(b.is_live(a));
        assert_eq!(b.q(a).wr.coeff, 1, "the source's raising ended");
    }

    // A flow in a shared queue gets its own queue back only once that queue is marked for splitting: before, its
    // next request still goes to the shared queue.
    #[test]
    fn a_flow_leaves_a_shared_queue_only_once_it_is_marked_for_splitting() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        let a = filed_at(&mut b, 1, 0);
        let c = filed_at(&mut b, 2, 64);
        b.groups[0].pos.clear();
        b.merge_queues(FlowId(1), a, c, 0);
        b.maybe_split(FlowId(1), 5 * MS);
        assert_eq!(b.flows[&1].sync_q, Some(c), "not marked: stays");
        b.qm(c).merge.split_coop = true;
        b.maybe_split(FlowId(1), 6 * MS);
        assert_ne!(b.flows[&1].sync_q, Some(c), "marked: split");
        checked(&b);
    }

    // Among several queues within CLOSE_THR, the one whose next request is closest is the cooperator, whichever
    // side of the request it lies on: queues at 500 and 1000, a request at 600 finds the one at 500 (100 sectors
    // away, against 400) and one at 900 the one at 1000.
    #[test]
    fn the_closest_queue_is_the_cooperator() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        let near = filed_at(&mut b, 2, 500);
        let far = filed_at(&mut b, 3, 1000);
        b.groups[0].pos.remove(&(0, a));
        assert_eq!(b.find_cooperator(a, 600), Some(near));
        assert_eq!(b.find_cooperator(a, 900), Some(far));
    }

    /// Flow `f` (class `class`, priority `prio`) starts and its sync queue is created at `at`.
    fn created(b: &mut Bfq, f: u32, at: Time, class: IoClass, prio: u8) -> QueueId {
        let mut info = FlowInfo::new(FlowId(f));
        info.class = class;
        info.prio = prio;
        b.flow_started(&info, at);
        b.sync_queue(FlowId(f), at)
    }

    // Stable merging at a queue's creation (`bfq_do_or_sched_stable_merge`), on a disk without command queueing,
    // where the merge is only scheduled: a sync queue created within the burst interval (180 ms) of the group's last
    // created one, of the same class and weight, is scheduled to merge into it; one created 181 ms after it is not;
    // one of another class or weight is not and starts a new window.
    #[test]
    fn a_stable_merge_is_scheduled_only_for_a_like_queue_created_within_the_burst_interval() {
        let be = IoClass::Be;
        for (at, class, prio, want) in [
            (180 * MS, be, 4, true),
            (181 * MS, be, 4, false),
            (50 * MS, IoClass::Rt, 4, false),
            (50 * MS, be, 2, false),
        ] {
            let mut b = bfq(&DeviceInfo::hdd(), &[]);
            let l = created(&mut b, 1, 0, be, 4);
            assert_eq!(b.q(l).class, be);
            created(&mut b, 2, at, class, prio);
            let got = b.flows[&2].stable_merge;
            assert_eq!(got, want.then_some(l), "created at {at} ns, {class:?} prio {prio}");
        }
    }

    // The 600 ms window is counted from the queue that opened it: a queue created at 600 ms (too late for the
    // burst interval, not yet past the window) does not open a new one, so a queue created at 650 ms, 650 ms after
    // the window's first queue, opens a new window instead of being scheduled to merge with the one of 600 ms.
    #[test]
    fn the_stable_merge_window_is_600_ms_from_its_first_queue() {
        let be = IoClass::Be;
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        created(&mut b, 1, 0, be, 4);
        created(&mut b, 2, STABLE_MERGE_WINDOW, be, 4);
        assert_eq!(b.flows[&2].stable_merge, None);
        let q3 = created(&mut b, 3, 650 * MS, be, 4);
        assert_eq!(b.flows[&3].stable_merge, None);
        assert_eq!(
            b.groups[0].last_created,
            Some(q3),
            "the 650 ms queue opened a new window"
        );
    }

    /// Flows 1 and 2 on a disk each issue a read, at 0 and at 50 ms: flow 2's queue (returned second) is
    /// scheduled to merge into flow 1's (returned first). Both are busy and weight-raised, so idling for flow 2's
    /// queue is not issue-free and the merge will happen once it is decided.
    fn scheduled_pair() -> (Bfq, QueueId, QueueId) {
        use crate::types::{Direction, RequestId};
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.flow_started(&FlowInfo::new(FlowId(2)), 0);
        b.insert(Request::new(RequestId(1), FlowId(1), Direction::Read, true, 0, 8), 0);
        b.insert(
            Request::new(RequestId(2), FlowId(2), Direction::Read, true, 1 << 30, 8),
            50 * MS,
        );
        let (q1, q2) = (b.flows[&1].sync_q.unwrap(), b.flows[&2].sync_q.unwrap());
        assert_eq!(b.flows[&2].stable_merge, Some(q1));
        (b, q1, q2)
    }

    // A scheduled stable merge is decided only after the queue has existed for 600 ms (`bfq_late_stable_merging`)
    // and 600 ms after its last split: at exactly 600 ms it is still pending, just after it the queues merge.
    #[test]
    fn a_scheduled_stable_merge_waits_600_ms_after_creation_and_after_a_split() {
        let (mut b, q1, q2) = scheduled_pair();
        let t = 50 * MS + LATE_STABLE_MERGE;
        assert_eq!(b.stable_merge_on_insert(FlowId(2), q2, t), None);
        assert_eq!(b.flows[&2].stable_merge, Some(q1), "still pending");
        assert_eq!(b.stable_merge_on_insert(FlowId(2), q2, t + 1), Some(q1));
        assert_eq!(b.flows[&2].sync_q, Some(q1));

        let (mut b, q1, q2) = scheduled_pair();
        b.qm(q2).merge.split_time = Some(SEC);
        let t = SEC + LATE_STABLE_MERGE;
        assert_eq!(b.stable_merge_on_insert(FlowId(2), q2, t), None);
        assert_eq!(b.stable_merge_on_insert(FlowId(2), q2, t + 1), Some(q1));
        checked(&b);
    }

    /// Flow 1 (low_latency off) on a disk: reads at `t0` at sectors 1 000 000 and 2 000 000, the first dispatched
    /// at `t0` (its queue in service alone), then the queue expired with the second still queued; flow 2 then has a
    /// read queued at sector 50 000 000. Returns flow 1's queue and flow 2's.
    fn served_then_expired(b: &mut Bfq, t0: Time) -> (QueueId, QueueId) {
        use super::super::budget::Expiration;
        use crate::types::{Direction, RequestId};
        let rd = |id: u64, f: u32, s: u64| Request::new(RequestId(id), FlowId(f), Direction::Read, true, s, 8);
        b.insert(rd(10 + t0, 1, 1_000_000), t0);
        b.insert(rd(20 + t0, 1, 2_000_000), t0);
        let q1 = b.flows[&1].sync_q.unwrap();
        assert!(matches!(b.dispatch(t0), crate::types::Decision::Dispatch(_)));
        assert_eq!(b.in_service, Some(q1));
        b.expire(q1, Expiration::BudgetTimeout, t0 + MS);
        assert!(b.q(q1).busy && b.in_service.is_none());
        b.insert(rd(30 + t0, 2, 50_000_000), t0 + 2 * MS);
        (q1, b.flows[&2].sync_q.unwrap())
    }

    // The 100 ms merge limit runs from the queue's first dispatch in its current backlogged period: flow 1's queue,
    // first served at 0, joins flow 2's close queue with a request at 50 ms but not at 200 ms; after it went idle
    // and came back at 1 s, the limit runs from its new first dispatch (1 s), so a request at 1.05 s joins.
    #[test]
    fn the_merge_limit_runs_from_the_first_dispatch_of_the_current_backlog() {
        use crate::types::{Direction, RequestId};
        let rd = |id: u64, s: u64| Request::new(RequestId(id), FlowId(1), Direction::Read, true, s, 8);
        for (at, joins) in [(50 * MS, true), (200 * MS, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.flow_started(&FlowInfo::new(FlowId(2)), 0);
            let (q1, q2) = served_then_expired(&mut b, 0);
            b.insert(rd(99, 50_000_064), at);
            let want = if joins { q2 } else { q1 };
            assert_eq!(b.flows[&1].sync_q, Some(want), "a request at {at} ns");
            checked(&b);
        }

        // A first backlog at 0, served and drained; the second from 1 s.
        use super::super::budget::Expiration;
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.flow_started(&FlowInfo::new(FlowId(2)), 0);
        b.insert(rd(1, 0), 0);
        let r = match b.dispatch(0) {
            crate::types::Decision::Dispatch(r) => r,
            d => panic!("{d:?}"),
        };
        b.completed(&r, MS);
        let q1 = b.flows[&1].sync_q.unwrap();
        if b.in_service == Some(q1) {
            b.expire(q1, Expiration::NoMoreRequests, 2 * MS);
        }
        assert!(!b.q(q1).busy);
        let (q1b, q2) = served_then_expired(&mut b, SEC);
        assert_eq!(q1b, q1);
        b.insert(rd(99, 50_000_064), SEC + 50 * MS);
        assert_eq!(
            b.flows[&1].sync_q,
            Some(q2),
            "within 100 ms of the new backlog's first dispatch"
        );
        checked(&b);
    }

    // Two queues exactly as far from the request, one on each side: the one ahead of it (at or after the request's
    // sector, the direction the disk head sweeps) is the cooperator. This tie rule is ours: the kernel's walk of its
    // position tree settles a tie by the tree's shape.
    #[test]
    fn of_two_equally_close_queues_the_one_ahead_is_the_cooperator() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let a = filed_at(&mut b, 1, 0);
        let behind = filed_at(&mut b, 2, 500);
        let ahead = filed_at(&mut b, 3, 700);
        b.groups[0].pos.remove(&(0, a));
        assert_eq!(b.find_cooperator(a, 600), Some(ahead));
        assert_ne!(b.find_cooperator(a, 550), Some(ahead), "{behind:?} is closer there");
    }

    /// Starts flows `1..=n` on an HDD (merging on, no raising) with none of their requests dispatched.
    fn flows_on_hdd(n: u32) -> Bfq {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        for f in 1..=n {
            b.flow_started(&FlowInfo::new(FlowId(f)), 0);
        }
        b
    }

    /// Whether flow 3's read at sector 10 000 (inserted at `now`) ends in flow 1's queue.
    fn third_reader_joins_the_first(b: &mut Bfq, now: Time) -> bool {
        b.insert(rq(9, 3, true, 10_000, 8), now);
        checked(b);
        b.flows[&3].sync_q.is_some() && b.flows[&3].sync_q == b.flows[&1].sync_q
    }

    // `bfq_pos_tree_add_move` files async queues too, and `bfq_setup_cooperator` judges only the one queue
    // `bfqq_find_close` returns: flow 1 reads at 10 100, and flow 3's read at 10 000 joins its queue; but with
    // flow 2's write (async) filed at 10 050, nearer, the write's queue is the one found, and it may not
    // cooperate, so flow 3 stays alone.
    #[test]
    fn a_near_async_queue_hides_a_sync_cooperator() {
        let mut b = flows_on_hdd(3);
        b.insert(rq(1, 1, true, 10_100, 8), 0);
        assert!(third_reader_joins_the_first(&mut b, 0), "no async queue near: merged");
        let mut b = flows_on_hdd(3);
        b.insert(rq(1, 1, true, 10_100, 8), 0);
        b.insert(rq(2, 2, false, 10_050, 8), 0);
        assert!(!third_reader_joins_the_first(&mut b, 0), "hidden by the async queue");
    }

    // The kernel does not file an IDLE-class queue (it never merges), so an IDLE-class reader at 10 050 does not
    // hide flow 1's queue at 10 100 from flow 3's read at 10 000.
    #[test]
    fn an_idle_class_queue_is_not_filed_and_hides_nothing() {
        let mut b = flows_on_hdd(3);
        let mut idle = FlowInfo::new(FlowId(2));
        idle.class = IoClass::Idle;
        b.flow_started(&idle, 0);
        b.insert(rq(1, 1, true, 10_100, 8), 0);
        b.insert(rq(2, 2, true, 10_050, 8), 0);
        let q2 = b.flows[&2].sync_q.unwrap();
        assert_eq!(b.q(q2).pos_key, None);
        assert!(third_reader_joins_the_first(&mut b, 0));
    }

    // A queue too late for merging (served in its backlog and more than 100 ms past that backlog's first
    // dispatch) leaves the tree at its next move, so a newcomer close to it is not merged into it: the kernel
    // never offers a queue that could not be merged itself.
    #[test]
    fn a_queue_too_late_for_merging_is_not_offered_as_a_cooperator() {
        let mut b = flows_on_hdd(3);
        b.insert(rq(1, 1, true, 10_100, 8), 0);
        let q1 = b.flows[&1].sync_q.unwrap();
        b.qm(q1).merge.first_io_time = Some(0);
        b.qm(q1).wr.service_from_backlogged = 8;
        b.pos_update(q1, MERGE_TIME_LIMIT);
        assert_eq!(b.q(q1).pos_key, Some(10_100), "not yet too late");
        let t = MERGE_TIME_LIMIT + MS;
        b.pos_update(q1, t);
        assert_eq!(b.q(q1).pos_key, None, "too late: out of the tree");
        assert!(!third_reader_joins_the_first(&mut b, t));
    }

    // The tree holds one queue per sector: flow 2's write filed at 10 000 keeps flow 1's read at 10 000 out of it,
    // and flow 3's read there finds the write's queue, which may not cooperate. Once the write's queue leaves the
    // tree (as when its write is dispatched), flow 1's queue is filed at its next move and flow 4's read joins it.
    #[test]
    fn the_tree_holds_one_queue_per_sector() {
        let mut b = flows_on_hdd(4);
        b.insert(rq(2, 2, false, 10_000, 8), 0);
        b.insert(rq(1, 1, true, 10_000, 8), 0);
        let q1 = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.q(q1).pos_key, None, "the sector is taken");
        assert!(!third_reader_joins_the_first(&mut b, 0));
        let aq = b.async_queue(FlowId(2), 0);
        b.pos_remove(aq);
        b.pos_update(q1, 0);
        assert_eq!(b.q(q1).pos_key, Some(10_000));
        b.insert(rq(4, 4, true, 10_008, 8), 0);
        assert_eq!(b.flows[&4].sync_q, Some(q1));
        checked(&b);
    }
}
