//! Queue selection, workload choice, the `cfq_may_dispatch` limits, request choice, expiry and completion
//! (kernel: `cfq_select_queue`, `choose_wl_class_and_type`, `cfq_may_dispatch`, `cfq_dispatch_request`,
//! `__cfq_slice_expired`, `cfq_completed_request`; docs/SCHEDULERS.md, CFQ, Dispatch).

use super::group::{SavedWorkload, GROUP_IDLE_DELAY, IDLE_DELAY};
use super::service_tree::{tree_index, Workload};
use super::slice::{prio_slice, scaled_slice, workload_slice};
use super::{Cfq, InFlight};
use crate::types::{Decision, IoClass, Request, Time, MS, SEC};
use std::ops::Bound;

/// In IOPS mode a group is charged this much vdisktime per dispatched request: one jiffy (1 ms at HZ=1000), as
/// the kernel adds the dispatch count to a vdisktime counted in jiffies.
pub const IOPS_DISPATCH_CHARGE: Time = MS;

/// Least charge for a slot that ended before or right at its first completion: one jiffy (1 ms), so that queues
/// dispatching a single seeky request each still cost their group something.
pub const MIN_SLOT_CHARGE: Time = MS;

/// A preempting queue is keyed this far ahead of the first queue of its tree (1 s, the kernel's `-HZ`).
pub const PREEMPT_KEY_LEAD: i64 = SEC as i64;

/// With this little slice left at a completion, a lone queue of a group waits busy (one jiffy, 1 ms).
pub const WAIT_BUSY_LAST_TICK: Time = MS;

/// Bound on queue switches within one dispatch call (each switch expires a queue, so a few always suffice).
/// Running out of rounds is counted in `Cfq::select_rounds_exhausted`, which [`Cfq::check_invariants`] requires to
/// stay zero (a policy must not panic, so the count is where the conformance checker and the debug simulator see it).
///
/// [`Cfq::check_invariants`]: crate::Scheduler::check_invariants
pub const MAX_SELECT_ROUNDS: usize = 8;

/// What queue selection decided.
enum Pick {
    /// Dispatch from this (active) queue.
    Queue(u32),
    /// Idling: ask again at this time.
    Wait(Time),
    /// Nothing now; a completion will call again.
    Hold,
}

impl Cfq {
    pub(super) fn dispatch_decision(&mut self, now: Time) -> Decision {
        if self.rq_queued == 0 {
            return Decision::Nothing;
        }
        let mut rounds = 0;
        loop {
            if rounds == MAX_SELECT_ROUNDS {
                self.select_rounds_exhausted += 1;
                break;
            }
            rounds += 1;
            match self.select_queue(now) {
                Pick::Wait(t) => return Decision::WaitUntil(t),
                Pick::Hold => break,
                Pick::Queue(q) => {
                    if self.p.async_starvation_fix {
                        // The 2016 fix: the FIFO is looked at before the dispatch limits, and an async queue whose
                        // oldest request expired must dispatch (v4.9 `cfq_dispatch_request`).
                        self.mark_expired_async_must_dispatch(q, now);
                    }
                    if !self.may_dispatch(q, now) {
                        break;
                    }
                    match self
                        .choose_request(q, now)
                        .and_then(|h| self.dispatch_request(q, h, now))
                    {
                        Some(rq) => return Decision::Dispatch(rq),
                        None => self.expire(now, false),
                    }
                }
            }
        }
        if self.rq_in_driver == 0 {
            // Liveness guard: every path above that holds back has a request on the device to call us again, so
            // this is not expected to run; if it does, serve the first non-empty queue rather than stall.
            return self.forced_dispatch(now);
        }
        Decision::Nothing
    }

    fn forced_dispatch(&mut self, now: Time) -> Decision {
        let Some(q) = self.queues.iter().position(|q| q.live && !q.is_empty()) else {
            return Decision::Nothing;
        };
        let q = q as u32;
        self.forced += 1;
        if self.active != Some(q) {
            self.expire(now, false);
            self.set_active(q, now);
        }
        match self.queues[q as usize]
            .next_rq
            .and_then(|h| self.dispatch_request(q, h, now))
        {
            Some(rq) => Decision::Dispatch(rq),
            None => Decision::Nothing,
        }
    }

    /// The kernel's `cfq_select_queue`: keep the active queue, idle for it, or expire it and pick the next one.
    fn select_queue(&mut self, now: Time) -> Pick {
        let Some(a) = self.active else {
            return self.new_queue(now, None);
        };
        let q = &self.queues[a as usize];
        let g = &self.groups[q.group as usize];
        if q.wait_busy && !q.is_empty() {
            // The group was kept backlogged and got its request: now end the (already used) slice.
            self.expire(now, false);
            return self.new_queue(now, None);
        }
        if q.slice_used(now) && !q.must_dispatch {
            if g.nr_cfqq == 1 && q.is_empty() && q.dispatched > 0 && self.should_idle(a) {
                // Its completion may still extend the slice to keep the group busy.
                return Pick::Hold;
            }
        } else {
            if !q.is_empty() {
                return Pick::Queue(a);
            }
            if let Some(c) = self.close_cooperator(a) {
                self.setup_merge_unless_pending(a, c);
                self.expire(now, false);
                return self.new_queue(now, Some(c));
            }
            if q.wait_request {
                return Pick::Wait(self.idle_deadline);
            }
            let elapsed = q.slice_start.map_or(0, |s| now.saturating_sub(s));
            if q.seeky() && q.idle_window && (q.slice_new || q.slice_end.saturating_sub(now) > elapsed) {
                // A deep seeky queue the device serves faster than it refills: stop idling for it.
                let q = &mut self.queues[a as usize];
                q.deep = false;
                q.idle_window = false;
            }
            if self.queues[a as usize].dispatched > 0 && self.should_idle(a) {
                return Pick::Hold;
            }
        }
        let q = &self.queues[a as usize];
        let g = &self.groups[q.group as usize];
        if self.p.group_idle > 0 && g.nr_cfqq == 1 && g.dispatched > 0 && !g.ttime.big(self.p.group_idle) {
            // Group idling: wait for the group's requests on the device before switching groups.
            return Pick::Hold;
        }
        self.expire(now, false);
        self.new_queue(now, None)
    }

    fn new_queue(&mut self, now: Time, forced: Option<u32>) -> Pick {
        let q = match forced {
            Some(c) => Some(c),
            None => {
                self.choose_group(now);
                self.next_queue()
            }
        };
        match q {
            Some(q) => {
                self.set_active(q, now);
                Pick::Queue(q)
            }
            None => Pick::Hold,
        }
    }

    fn set_active(&mut self, q: u32, now: Time) {
        self.queues[q as usize].start_slot(now);
        self.active = Some(q);
        self.active_flow = None;
    }

    /// Serves the group with the least vdisktime, restoring its saved workload.
    fn choose_group(&mut self, now: Time) {
        let Some(g) = self.gtree.first() else {
            self.serving_group = None;
            return;
        };
        self.serving_group = Some(g);
        match self.groups[g as usize].saved {
            Some(s) => {
                self.workload_expires = Some(now.saturating_add(s.slice));
                self.serving_class = s.class;
                self.serving_wl = s.wl;
            }
            None => self.workload_expires = None,
        }
        self.choose_workload(g, now);
    }

    /// Class (RT, else BE, else IDLE) and workload type, with the workload slice.
    fn choose_workload(&mut self, g: u32, now: Time) {
        let original = self.serving_class;
        let grp = &self.groups[g as usize];
        self.serving_class = if grp.busy_in_class(IoClass::Rt) > 0 {
            IoClass::Rt
        } else if grp.busy_in_class(IoClass::Be) > 0 {
            IoClass::Be
        } else {
            self.serving_class = IoClass::Idle;
            self.workload_expires = Some(now.saturating_add(MS));
            return;
        };
        let class = self.serving_class;
        if original == class {
            let count = grp.trees[tree_index(class, self.serving_wl)].count();
            if count > 0 && self.workload_expires.is_some_and(|e| now <= e) {
                return;
            }
        }
        // The type whose first queue has waited longest (lowest key).
        let mut best: Option<(i64, Workload)> = None;
        for wl in Workload::ALL {
            if let Some((key, _)) = grp.trees[tree_index(class, wl)].first() {
                if best.is_none_or(|(k, _)| key < k) {
                    best = Some((key, wl));
                }
            }
        }
        let wl = best.map_or(Workload::SyncNoIdle, |(_, w)| w);
        self.serving_wl = wl;
        let slice = workload_slice(&self.p, grp, &self.gtree, class, wl, self.busy_queues);
        self.workload_expires = Some(now.saturating_add(slice));
    }

    fn next_queue(&self) -> Option<u32> {
        let g = self.serving_group?;
        let tree = tree_index(self.serving_class, self.serving_wl);
        self.groups.get(g as usize)?.trees[tree].first().map(|(_, q)| q)
    }

    /// The kernel's `cfq_may_dispatch`: drain async before idling sync, hold async behind sync on the device,
    /// and limit each queue's depth (quantum/2, quantum near the start of a slice, unlimited when alone).
    fn may_dispatch(&self, q: u32, now: Time) -> bool {
        let queue = &self.queues[q as usize];
        if self.in_flight[0] > 0 && self.should_idle(q) {
            return false;
        }
        // Async waits while sync I/O is on the device (3.13; with the 2016 fix, unless it must dispatch).
        if self.in_flight[1] > 0 && !queue.sync && !(self.p.async_starvation_fix && queue.must_dispatch) {
            return false;
        }
        let mut max = (self.p.quantum / 2).max(1);
        if queue.class == IoClass::Idle {
            max = 1;
        }
        if queue.dispatched >= max {
            if queue.class == IoClass::Idle {
                return false;
            }
            // A lone sync queue can preempt async ones anyway, so limiting it makes no sense.
            let promote = queue.sync && self.busy_sync_queues == 1;
            if self.busy_queues > 1 && queue.slice_used_soon(now, self.p.slice_idle) && !promote {
                return false;
            }
            max = if self.busy_queues == 1 || promote {
                u32::MAX
            } else {
                self.p.quantum
            };
        }
        if !queue.sync && self.p.low_latency {
            // Async depth ramps up with the time since a sync request was last delayed past its deadline.
            let since = match self.last_delayed_sync {
                Some(t) => now.saturating_sub(t),
                None => now.saturating_add(SEC),
            };
            let mut depth = u32::try_from(since / self.p.slice[1].max(1)).unwrap_or(u32::MAX);
            if depth == 0 && queue.dispatched == 0 {
                depth = 1;
            }
            max = max.min(depth);
        }
        queue.dispatched < max
    }

    /// With the 2016 async-starvation fix: marks async queue `q` must-dispatch when its FIFO head has expired and
    /// the FIFO was not consulted yet this slot.
    fn mark_expired_async_must_dispatch(&mut self, q: u32, now: Time) {
        let queue = &mut self.queues[q as usize];
        if !queue.sync && !queue.fifo_checked && queue.fifo.front().is_some_and(|&(t, _, _)| now >= t) {
            queue.must_dispatch = true;
        }
    }

    /// The FIFO head if it expired and the FIFO was not consulted yet this slot, else the elevator's choice.
    fn choose_request(&mut self, q: u32, now: Time) -> Option<u32> {
        let queue = &mut self.queues[q as usize];
        if !queue.fifo_checked {
            queue.fifo_checked = true;
            if let Some(&(t, h, _)) = queue.fifo.front() {
                if now >= t {
                    return Some(h);
                }
            }
        }
        queue.next_rq
    }

    /// Drops FIFO entries of requests that left the queue.
    fn clean_fifo(&mut self, q: u32) {
        let queue = &mut self.queues[q as usize];
        while let Some(&(_, h, id)) = queue.fifo.front() {
            let live = self
                .rqs
                .get(h as usize)
                .and_then(|s| s.as_ref())
                .is_some_and(|s| s.rq.id == id && s.queue == q);
            if live {
                break;
            }
            queue.fifo.pop_front();
        }
    }

    /// The elevator's next request after removing the one at `key`: the better of its successor (wrapping to the
    /// first) and its predecessor, seen from `head`.
    fn find_next(&self, q: u32, key: (u64, u64), head: u64) -> Option<u32> {
        let sort = &self.queues[q as usize].sort;
        let next = sort
            .range((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .or_else(|| sort.iter().next())
            .map(|(_, &h)| h);
        let prev = sort.range(..key).next_back().map(|(_, &h)| h);
        match (next, prev) {
            (Some(n), Some(p)) if n != p => Some(self.better(n, p, head)),
            (n, p) => n.or(p),
        }
    }

    /// Moves request slot `h` of queue `q` to the device. `None` only if the slot is empty, which the queue's
    /// bookkeeping rules out.
    fn dispatch_request(&mut self, q: u32, h: u32, now: Time) -> Option<Request> {
        let stored = self.rqs.get_mut(h as usize).and_then(Option::take)?;
        self.free_rqs.push(h);
        let rq = stored.rq;
        let key = (rq.sector, rq.id.0);
        let queue = &mut self.queues[q as usize];
        queue.sort.remove(&key);
        queue.merge.remove(u64::from(h), &rq);
        if rq.meta {
            crate::counter::dec(&mut queue.prio_pending, "cfq queue prio_pending");
        }
        // `cfq_dispatch_insert`: the next request is chosen afresh at every dispatch, between the dispatched
        // request's two neighbours as seen from its first sector (`cfq_find_next_rq(.., rq)` compares from
        // `blk_rq_pos(rq)`), whether or not it was the next request (a FIFO-expired one need not be).
        let next = self.find_next(q, key, rq.sector);
        self.queues[q as usize].next_rq = next;
        self.clean_fifo(q);
        crate::counter::dec(&mut self.rq_queued, "cfq rq_queued");
        self.queued_parts = self.queued_parts.saturating_sub(rq.parts());
        let queue = &mut self.queues[q as usize];
        queue.dispatched += 1;
        let sync = queue.sync;
        let g = queue.group as usize;
        self.groups[g].dispatched += 1;
        self.in_flight[usize::from(sync)] += 1;
        self.rq_in_driver += 1;
        self.last_position = rq.end();
        self.inflight.insert(
            rq.id,
            InFlight {
                queue: q,
                start: stored.start,
            },
        );
        if self.active == Some(q) && self.active_flow.is_none() {
            self.active_flow = Some(rq.flow);
        }
        let queue = &mut self.queues[q as usize];
        // A dispatch ends any idle wait (the kernel would let the timer run on; we cancel it).
        queue.wait_request = false;
        queue.slice_dispatch += 1;
        queue.must_dispatch = false;
        let max_async = queue.max_async_dispatches(self.p.slice_async_rq);
        if self.active == Some(q)
            && self.busy_queues > 1
            && ((!queue.sync && queue.slice_dispatch >= max_async) || queue.class == IoClass::Idle)
        {
            // An async queue used up its dispatch allowance; an IDLE-class queue gets one dispatch per turn.
            self.expire(now, false);
        }
        Some(rq)
    }

    /// Length of the slice of queue `q` now, with low-latency scaling (updates the group's busy average).
    fn scaled_slice_of(&mut self, q: u32) -> Time {
        let queue = &self.queues[q as usize];
        let (sync, prio, class, g) = (queue.sync, queue.prio, queue.class, queue.group as usize);
        if !self.p.low_latency {
            return prio_slice(&self.p, sync, prio);
        }
        let avg_class = if class == IoClass::Rt { IoClass::Rt } else { IoClass::Be };
        let iq = self.groups[g].avg_queues(avg_class);
        let group_slice = self.gtree.share(self.p.target_latency, self.groups[g].weight);
        scaled_slice(&self.p, sync, prio, iq, group_slice)
    }

    /// Sets the slice at the first completion of the slot.
    fn set_prio_slice(&mut self, q: u32, now: Time) {
        let slice = self.scaled_slice_of(q);
        let queue = &mut self.queues[q as usize];
        queue.slice_start = Some(now);
        queue.slice_end = now.saturating_add(slice);
        queue.allocated_slice = slice;
        queue.slice_new = false;
    }

    /// Ends the active queue's slot; with `timed_out` (slice over at a completion, or preemption) the unused or
    /// overrun part of the slice is carried into its next key.
    pub(super) fn expire(&mut self, now: Time, timed_out: bool) {
        let Some(a) = self.active else {
            return;
        };
        {
            let queue = &mut self.queues[a as usize];
            queue.wait_request = false;
            queue.wait_busy = false;
            if queue.coop && queue.seeky() {
                queue.split_coop = true;
            }
        }
        if timed_out {
            let resid = if self.queues[a as usize].slice_new {
                i64::try_from(self.scaled_slice_of(a)).unwrap_or(i64::MAX)
            } else {
                self.queues[a as usize].slice_end as i64 - now as i64
            };
            self.queues[a as usize].slice_resid = resid;
        }
        self.group_served(a, now);
        let queue = &self.queues[a as usize];
        if queue.on_rr && queue.is_empty() {
            self.del_rr(a);
        }
        if self.queues[a as usize].on_rr {
            self.service_tree_add(a, false, now);
        }
        self.active = None;
        self.active_flow = None;
        self.maybe_free(a);
    }

    /// Charges the group of queue `q` for its slot and saves the group's workload context.
    fn group_served(&mut self, q: u32, now: Time) {
        let queue = &self.queues[q as usize];
        let g = queue.group as usize;
        let grp = &self.groups[g];
        let nr_sync = (grp.nr_cfqq as usize).saturating_sub(grp.busy_async() + grp.trees[6].count());
        let used = match queue.slice_start {
            Some(s) if s != now => now.saturating_sub(s).min(queue.allocated_slice),
            _ => now.saturating_sub(queue.dispatch_start).max(MIN_SLOT_CHARGE),
        };
        let charge = if self.iops_mode() {
            u64::from(queue.slice_dispatch) * IOPS_DISPATCH_CHARGE
        } else if !queue.sync && nr_sync == 0 {
            // An async-only group pays the whole slice, exactly (3.13's `charge = cfqq->allocated_slice`): nothing
            // for a slot that ends before its first completion, when the slice is not set yet.
            queue.allocated_slice
        } else {
            used
        };
        let weight = grp.weight;
        let on_tree = grp.tree_seq.is_some();
        let delta = self.gtree.scale_charge(charge, weight);
        let grp = &mut self.groups[g];
        if on_tree {
            self.gtree.remove(g as u32, grp);
        }
        grp.vdisktime = grp.vdisktime.saturating_add(delta);
        if on_tree {
            self.gtree.add(g as u32, grp);
        }
        grp.saved = match self.workload_expires {
            Some(e) if e > now && self.serving_group == Some(g as u32) => Some(SavedWorkload {
                slice: e - now,
                class: self.serving_class,
                wl: self.serving_wl,
            }),
            _ => None,
        };
    }

    pub(super) fn add_rr(&mut self, q: u32, now: Time) {
        let queue = &mut self.queues[q as usize];
        queue.on_rr = true;
        self.busy_queues += 1;
        if queue.sync {
            self.busy_sync_queues += 1;
        }
        self.service_tree_add(q, false, now);
    }

    fn del_rr(&mut self, q: u32) {
        let queue = &mut self.queues[q as usize];
        queue.on_rr = false;
        crate::counter::dec(&mut self.busy_queues, "cfq busy_queues");
        if queue.sync {
            crate::counter::dec(&mut self.busy_sync_queues, "cfq busy_sync_queues");
        }
        let g = queue.group as usize;
        if let Some(pos) = queue.pos.take() {
            self.groups[g].trees[pos.tree].remove((pos.key, pos.seq), q);
        }
        let grp = &mut self.groups[g];
        crate::counter::dec(&mut grp.nr_cfqq, "cfq group nr_cfqq");
        if grp.nr_cfqq == 0 {
            self.gtree.remove(g as u32, grp);
            grp.saved = None;
        }
    }

    /// (Re)places queue `q` on its service tree: key `now + offset - resid`, IDLE class behind the last queue,
    /// or, for a preempting queue (`front`), ahead of the first.
    pub(super) fn service_tree_add(&mut self, q: u32, front: bool, now: Time) {
        let queue = &self.queues[q as usize];
        let g = queue.group as usize;
        let tree = tree_index(queue.class, queue.workload());
        let st = &self.groups[g].trees[tree];
        let now_key = i64::try_from(now).unwrap_or(i64::MAX);
        let key = if queue.class == IoClass::Idle {
            match st.last() {
                Some((k, last)) if last != q => k.saturating_add(IDLE_DELAY as i64),
                _ => now_key.saturating_add(IDLE_DELAY as i64),
            }
        } else if !front {
            // Queues of higher priority get a smaller offset, so they come around sooner. The kernel's
            // `cfq_slice_offset` computes (nr_cfqq - 1) x gap in signed arithmetic before the new queue is counted
            // in nr_cfqq, so the first queue of an idle group gets a negative offset (-gap: 80 ms for a sync queue
            // of priority 4), and the second none.
            let others = i64::from(self.groups[g].nr_cfqq) - 1;
            let gap = prio_slice(&self.p, true, 0).saturating_sub(prio_slice(&self.p, queue.sync, queue.prio));
            let offset = others.saturating_mul(i64::try_from(gap).unwrap_or(i64::MAX));
            now_key.saturating_add(offset).saturating_sub(queue.slice_resid)
        } else {
            st.first().map_or(now_key, |(k, _)| k).saturating_sub(PREEMPT_KEY_LEAD)
        };
        let queue = &mut self.queues[q as usize];
        if !front && queue.class != IoClass::Idle {
            queue.slice_resid = 0;
        }
        let is_new = queue.pos.is_none();
        if let Some(pos) = queue.pos {
            if pos.key == key && pos.tree == tree {
                return;
            }
            self.groups[g].trees[pos.tree].remove((pos.key, pos.seq), q);
        }
        self.tree_seq += 1;
        let pos = super::queue::TreePos {
            tree,
            key,
            seq: self.tree_seq,
        };
        queue.pos = Some(pos);
        self.groups[g].trees[tree].insert((key, pos.seq), q);
        if front || !is_new {
            return;
        }
        // The queue just became busy: so did its group, if it was not already.
        let grp = &mut self.groups[g];
        grp.nr_cfqq += 1;
        if grp.tree_seq.is_none() {
            grp.vdisktime = match self.gtree.last_vdisktime() {
                Some(v) => v.saturating_add(GROUP_IDLE_DELAY),
                None => self.gtree.min_vdisktime,
            };
            self.gtree.add(g as u32, grp);
        }
    }

    /// Completion: accounting, the slice start, wait-busy, expiry, and arming the idle timer.
    pub(super) fn request_completed(&mut self, rq: &Request, now: Time) {
        let Some(inf) = self.inflight.remove(&rq.id) else {
            return;
        };
        let q = inf.queue;
        let shallow = self.active.is_some_and(|a| {
            let aq = &self.queues[a as usize];
            aq.idle_window
                && aq.dispatched + (aq.len() as u32) < super::ncq::HW_QUEUE_MIN
                && self.rq_in_driver < super::ncq::HW_QUEUE_MIN
        });
        self.ncq.observe(self.rq_in_driver, self.rq_queued, shallow);
        crate::counter::dec(&mut self.rq_in_driver, "cfq rq_in_driver");
        let queue = &mut self.queues[q as usize];
        let sync_q = queue.sync;
        crate::counter::dec(&mut self.in_flight[usize::from(sync_q)], "cfq in_flight[sync]");
        crate::counter::dec(&mut queue.dispatched, "cfq queue dispatched");
        let g = queue.group as usize;
        let tree = queue.pos.map_or(tree_index(queue.class, queue.workload()), |p| p.tree);
        let grp = &mut self.groups[g];
        crate::counter::dec(&mut grp.dispatched, "cfq group dispatched");
        if rq.sync {
            if let Some(ctx) = self.flows.get_mut(&rq.flow) {
                ctx.ttime.last_end = now;
            }
            grp.trees[tree].ttime.last_end = now;
            if now >= inf.start.saturating_add(self.p.fifo_expire[1]) {
                self.last_delayed_sync = Some(now);
            }
        }
        grp.ttime.last_end = now;

        if self.active == Some(q) {
            let empty = self.queues[q as usize].is_empty();
            if self.queues[q as usize].slice_new {
                self.set_prio_slice(q, now);
            }
            if self.should_wait_busy(q, now) {
                let extend = if self.p.slice_idle > 0 {
                    self.p.slice_idle
                } else {
                    self.p.group_idle
                };
                let queue = &mut self.queues[q as usize];
                queue.slice_end = now.saturating_add(extend);
                queue.wait_busy = true;
            }
            let queue = &self.queues[q as usize];
            if queue.slice_used(now) || queue.class == IoClass::Idle {
                self.expire(now, true);
            } else if rq.sync && empty && self.close_cooperator(q).is_none() {
                self.arm_idle_timer(q, now);
            }
        }
        self.maybe_free(q);
    }

    /// Whether the last queue of a group should stretch its slice to keep the group backlogged.
    fn should_wait_busy(&self, q: u32, now: Time) -> bool {
        let queue = &self.queues[q as usize];
        let grp = &self.groups[queue.group as usize];
        if !queue.is_empty() || grp.nr_cfqq > 1 || grp.ttime.big(self.p.group_idle) {
            return false;
        }
        if queue.slice_used(now) {
            return true;
        }
        let left = queue.slice_end.saturating_sub(now);
        let ttime = self.active_flow.and_then(|f| self.flows.get(&f)).map(|c| c.ttime);
        if ttime.is_some_and(|t| t.valid() && left < t.mean) {
            return true;
        }
        left <= WAIT_BUSY_LAST_TICK
    }

    /// Arms the idle timer for the emptied active queue, with `slice_idle`, or `group_idle` for the last queue
    /// of a group that should not idle itself.
    fn arm_idle_timer(&mut self, q: u32, now: Time) {
        if !self.rotational && self.ncq.on() && self.p.group_idle == 0 {
            // No seek to save on a queueing SSD; 3.13 skips idling there only when group idling is off too.
            return;
        }
        let mut group_idle = false;
        if !self.should_idle(q) {
            if self.p.group_idle > 0 {
                group_idle = true;
            } else {
                return;
            }
        }
        let queue = &self.queues[q as usize];
        if queue.dispatched > 0 {
            return;
        }
        // The process must still exist, and think briefly enough to come back within the slice.
        let Some(ctx) = self.active_flow.and_then(|f| self.flows.get(&f)) else {
            return;
        };
        let left = queue.slice_end.saturating_sub(now);
        if ctx.ttime.valid() && left < ctx.ttime.mean {
            return;
        }
        // Group idling only for the group's last queue. 3.13 has no think-time condition here (a group think-time
        // test came with 4.6, "Don't group_idle if cfqq has big thinktime").
        let grp = &self.groups[queue.group as usize];
        if group_idle && grp.nr_cfqq > 1 {
            return;
        }
        let wait = if group_idle {
            self.p.group_idle
        } else {
            self.p.slice_idle
        };
        self.queues[q as usize].wait_request = true;
        self.idle_deadline = match self.jiffy {
            Some(j) => crate::tick::fire_time(now, wait.max(1), j),
            None => now.saturating_add(wait.max(1)),
        };
    }
}

#[cfg(test)]
mod tests {
    //! Queue selection, dispatch limits, expiry and completion, each asserted by the decision it changes (which
    //! request goes next, or whether CFQ holds the device), with the kernel's rule in the comment.

    use super::super::tests::{cfq, dispatched, flat_1ms, root_to_child_time_over_10_s, rq, Reader, Sim};
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{FlowId, FlowInfo, GroupId, SEC};

    const US: Time = MS / 1000;

    /// The sync queue of flow `f`.
    fn sync_q(c: &Cfq, f: u32) -> u32 {
        c.flows[&FlowId(f)].sync_q.expect("a sync queue")
    }

    // The liveness guard (never needed in a correct run) serves the first queue that holds a request and gives it
    // the slot: flow 1's queue is live but empty (its one request completed), so flow 2's request is the one sent,
    // and flow 2's queue becomes the active one.
    #[test]
    fn the_liveness_guard_serves_the_first_queue_holding_a_request_and_makes_it_active() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 100, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.completed(&r, MS);
        c.insert(rq(2, 2, 900_000_000, true), MS);
        assert!(c.queues[sync_q(&c, 1) as usize].live);
        match c.forced_dispatch(MS) {
            Decision::Dispatch(r) => assert_eq!(r.id.0, 2),
            d => panic!("the guard sent nothing: {d:?}"),
        }
        assert_eq!(c.active, Some(sync_q(&c, 2)));
        assert_eq!(c.forced, 1);
    }

    // `cfq_select_queue`: a queue whose slice has run out is expired even if a request of its own arrives in time
    // for the idle wait. Flow 1 reads with 0.3 ms of think time and 10 ms slices (slice_sync=10, priority 4; two
    // queues fit the 300 ms target, so no scaling): its slice runs from its first completion at 1 ms to 11 ms. Its
    // last request completes at 10.5 ms, CFQ idles for it (until 18.5 ms), and its next request comes at 11.2 ms:
    // after the slice end, so flow 2, waiting since 0, is served, not flow 1.
    #[test]
    fn a_request_arriving_after_the_slice_ended_does_not_extend_it() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=10"]);
        c.insert(rq(1, 1, 0, true), 0);
        c.insert(rq(2, 2, 900_000_000, true), 0);
        let mut r = dispatched(&mut c, 0).unwrap();
        assert_eq!(r.flow, FlowId(1));
        let mut id = 10;
        for ms in 1..=10 {
            c.completed(&r, ms * MS);
            c.insert(rq(id, 1, id * 16, true), ms * MS + 300 * US);
            r = dispatched(&mut c, ms * MS + 300 * US).unwrap();
            assert_eq!(r.flow, FlowId(1), "flow 1 keeps its slice at {ms} ms");
            id += 1;
        }
        c.completed(&r, 10 * MS + 500 * US);
        assert_eq!(c.dispatch(10 * MS + 500 * US), Decision::WaitUntil(18 * MS + 500 * US));
        c.insert(rq(id, 1, id * 16, true), 11 * MS + 200 * US);
        assert_eq!(dispatched(&mut c, 11 * MS + 200 * US).unwrap().flow, FlowId(2));
    }

    // `cfq_select_queue`: when the slice of a group's only queue ran out while its last request is still on the
    // device, CFQ holds the device (no group switch) so that the completion can stretch the slice and keep the group
    // backlogged (wait-busy). Flow 1 (root group) and flow 2 (another group); group_idle=0, so group idling does not
    // hold the device instead. Flow 1's slice runs from 1 ms to 11 ms; at 12 ms, with one request in flight and
    // nothing queued, the answer is "nothing" (not flow 2); its completion at 13 ms extends the slice by slice_idle
    // (8 ms) and CFQ idles for flow 1 until 21 ms. With slice_idle=0 instead (and group_idle 8 ms), group idling
    // holds the device at 12 ms, and the slice is extended by group_idle: the same answers.
    #[test]
    fn the_last_queue_of_a_group_keeps_the_device_until_its_request_completes() {
        for idle in ["group_idle=0", "slice_idle=0"] {
            let mut c = cfq(&DeviceInfo::hdd(), &[idle, "slice_sync=10"]);
            c.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(1)), 0);
            c.insert(rq(1, 1, 0, true), 0);
            c.insert(rq(2, 1, 1000, true), 0);
            c.insert(rq(3, 2, 900_000_000, true), 0);
            let a = dispatched(&mut c, 0).unwrap();
            let b = dispatched(&mut c, 0).unwrap();
            assert_eq!((a.flow, b.flow), (FlowId(1), FlowId(1)), "{idle}");
            c.completed(&a, MS);
            assert_eq!(c.dispatch(12 * MS), Decision::Nothing, "{idle}");
            c.completed(&b, 13 * MS);
            assert_eq!(c.dispatch(13 * MS), Decision::WaitUntil(21 * MS), "{idle}");
        }
    }

    /// Flow 1 queues eight 8-sector requests `stride` sectors apart at 0 (deep: four or more queued) and flow 2 one
    /// request; flow 1's first four go to the device at 0 (quantum/2 while the slice is new), its first completion
    /// at 1 ms starts a 100 ms slice, and its other four go at once. Returns the answer of the next dispatch call at
    /// `ask` (its queue empty, seven requests in flight), after one more dispatch at `ask` when `hold_one` kept
    /// one request queued until then.
    fn after_a_deep_queue_empties(stride: u64, hold_one: bool, ask: Time) -> Decision {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for i in 0..8 {
            c.insert(rq(i, 1, 1_000 + i * stride, true), 0);
        }
        c.insert(rq(100, 2, 1_900_000_000, true), 0);
        let first: Vec<Request> = std::iter::from_fn(|| dispatched(&mut c, 0)).collect();
        assert_eq!(first.len(), 4);
        assert!(first.iter().all(|r| r.flow == FlowId(1)));
        c.completed(&first[0], MS);
        let more = if hold_one { 3 } else { 4 };
        for _ in 0..more {
            assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(1));
        }
        if hold_one {
            assert_eq!(dispatched(&mut c, ask).unwrap().flow, FlowId(1));
        }
        let q = sync_q(&c, 1) as usize;
        assert!(c.queues[q].is_empty() && c.queues[q].deep);
        c.dispatch(ask)
    }

    // `cfq_select_queue`: a deep seeky queue keeps its idle window (deep queues are not denied it), but when it
    // empties with requests still in flight while less than half of its slice has passed, the device is serving it
    // faster than it refills: CFQ clears the idle window and moves on to flow 2 at once. At exactly half the slice
    // (50 ms used, 50 ms left at 51 ms) it still holds the device for the seeky queue; and a sequential queue
    // (requests 100 sectors apart) is held for early in the slice too.
    #[test]
    fn a_deep_seeky_queue_that_empties_early_in_its_slice_stops_being_idled_for() {
        let seeky = 10_000_000;
        match after_a_deep_queue_empties(seeky, false, MS) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2)),
            d => panic!("still held for the seeky queue: {d:?}"),
        }
        assert_eq!(after_a_deep_queue_empties(seeky, true, 51 * MS), Decision::Nothing);
        assert_eq!(after_a_deep_queue_empties(100, false, MS), Decision::Nothing);
    }

    // `cfq_select_queue`, group idling: with slice_idle=0 no queue is idled for, but the only queue of a group whose
    // request is still on the device holds it for the group while `group_idle` is set (8 ms by default), rather
    // than letting another group in; with group_idle=0 the other group's reader is served at once.
    #[test]
    fn group_idle_holds_the_device_for_a_group_with_a_request_in_flight() {
        for (group_idle, held) in [("group_idle=8", true), ("group_idle=0", false)] {
            let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0", group_idle]);
            c.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(1)), 0);
            c.insert(rq(1, 1, 0, true), 0);
            c.insert(rq(2, 2, 900_000_000, true), 0);
            assert_eq!(dispatched(&mut c, 0).unwrap().flow, FlowId(1));
            match c.dispatch(0) {
                Decision::Nothing => assert!(held, "{group_idle}: held"),
                Decision::Dispatch(r) => assert!(!held && r.flow == FlowId(2), "{group_idle}: {r:?}"),
                d => panic!("{group_idle}: {d:?}"),
            }
        }
    }

    // `choose_wl_class_and_type`: within a class, the workload type in service is kept while its tree has queues
    // and its workload slice lasts, and only then is the type whose first queue has the lowest key taken. Readers A
    // (flow 1) and B (flow 2) are sync, W (flow 3) an async writer; A is served first and W's key (0) is below B's
    // (80 ms: the third queue of the group, one 80 ms priority gap after the second). The SYNC workload slice is
    // set at 0 while A is alone: the whole 300 ms target. So B follows A (the SYNC type is kept, its slice lasts),
    // then A again (still SYNC, 200 ms < 300 ms), and only after the 300 ms does W, the lowest key, get its turn.
    #[test]
    fn the_workload_type_is_kept_until_its_slice_ends() {
        let mut w = Reader::new(3, 1_900_000_000);
        w.sync = false;
        let readers = vec![Reader::new(1, 0), w, Reader::new(2, 500_000_000)];
        let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, readers);
        sim.run(SEC);
        let runs = sim.runs();
        let order: Vec<u32> = runs.iter().take(4).map(|r| r.0 .0).collect();
        assert_eq!(order, vec![1, 2, 1, 3], "{runs:?}");
        assert!(sim.first_dispatch(3).unwrap() >= 300 * MS);
    }

    // `cfq_choose_wl_type` scans ASYNC, SYNC_NOIDLE, SYNC and takes a type only if its first key is strictly lower,
    // so on a tie the earlier type wins. Flow 1, a seeky reader at priority 0 (its queue lost the idle window: it
    // goes on the SYNC_NOIDLE tree), and flow 2, a sequential reader at priority 0 (SYNC tree), both queue a
    // request at 100 ms into an idle group: at priority 0 the slice offset is 0, so both keys are exactly 100 ms,
    // and the seeky reader is served first.
    #[test]
    fn equal_keys_go_to_the_earlier_workload_type() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0), 0);
        }
        for i in 0..8 {
            let t = i * MS;
            c.insert(rq(i, 1, i * 10_000_000, true), t);
            let r = dispatched(&mut c, t).unwrap();
            c.completed(&r, t + MS / 2);
        }
        let s = sync_q(&c, 1) as usize;
        assert!(c.queues[s].seeky() && !c.queues[s].idle_window);
        c.insert(rq(100, 1, 900_000_000, true), 100 * MS);
        c.insert(rq(101, 2, 1_500_000_000, true), 100 * MS);
        let q = sync_q(&c, 2) as usize;
        assert_eq!(c.queues[s].pos.unwrap().key, c.queues[q].pos.unwrap().key);
        assert_eq!(dispatched(&mut c, 100 * MS).unwrap().flow, FlowId(1));
    }

    // `cfq_may_dispatch`: a queue that will be idled for waits until the async requests on the device have
    // drained before it starts (so that its think time is not measured against writes). A writer's request is on
    // the device when a reader's sync request preempts the writer: the reader is held ("nothing") until the write
    // completes at 1 ms, then served.
    #[test]
    fn an_idling_sync_queue_waits_for_async_requests_on_the_device_to_drain() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 3, 1_900_000_000, false), 0);
        let w = dispatched(&mut c, 0).unwrap();
        assert_eq!(w.flow, FlowId(3));
        c.insert(rq(2, 1, 1000, true), 0);
        assert_eq!(c.dispatch(0), Decision::Nothing);
        assert_eq!(c.active, Some(sync_q(&c, 1)), "the sync request preempted the writer");
        c.completed(&w, MS);
        assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(1));
    }

    // With the 2016 async-starvation fix (v4.9 `cfq_dispatch_request`/`cfq_may_dispatch`), an async queue still
    // waits while sync I/O is on the device, unless its oldest request has passed fifo_expire_async (250 ms): the
    // writer is held at 0 and served at 260 ms with the reader's request still on the device.
    #[test]
    fn with_the_starvation_fix_async_waits_for_sync_until_its_fifo_expires() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0", "async_starvation_fix=1"]);
        c.insert(rq(1, 1, 100, true), 0);
        assert_eq!(dispatched(&mut c, 0).unwrap().flow, FlowId(1));
        for i in 0..2 {
            c.insert(rq(10 + i, 3, 50_000_000 + i * 1000, false), 0);
        }
        assert_eq!(c.dispatch(0), Decision::Nothing);
        assert_eq!(c.dispatch(249 * MS), Decision::Nothing);
        assert_eq!(dispatched(&mut c, 260 * MS).unwrap().flow, FlowId(3));
    }

    /// How many of 20 requests queued at 0 go to the device at 0 (no completion in between).
    fn dispatched_at_once(c: &mut Cfq) -> usize {
        std::iter::from_fn(|| dispatched(c, 0)).count()
    }

    // `cfq_may_dispatch`: the only busy queue has no depth limit, and an async one is then limited only by the
    // low-latency ramp: depth = time since the last delayed sync completion / slice_sync, with none yet counting as
    // 1 s ago (the kernel starts `last_delayed_sync` at `jiffies - HZ`): 1 s / 100 ms = 10 requests. Without
    // low_latency all 20 go.
    #[test]
    fn a_lone_async_queue_is_limited_only_by_the_low_latency_ramp() {
        for (tunables, expect) in [(&[][..], 10), (&["low_latency=0"][..], 20)] {
            let mut c = cfq(&DeviceInfo::hdd(), tunables);
            for i in 0..20 {
                c.insert(rq(i, 3, 1000 + i * 100, false), 0);
            }
            assert_eq!(dispatched_at_once(&mut c), expect, "{tunables:?}");
        }
    }

    // `cfq_may_dispatch`: the only busy sync queue is not limited even while an async queue is busy too (a sync
    // queue preempts async ones anyway, so limiting it makes no sense): all 20 of its requests go at once, where
    // two sync queues would stop it at quantum/2 = 4 while its slice is new.
    #[test]
    fn the_only_sync_queue_is_not_depth_limited_by_a_busy_async_queue() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for i in 0..20 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        c.insert(rq(100, 3, 1_900_000_000, false), 0);
        assert_eq!(dispatched_at_once(&mut c), 20);
    }

    // The FIFO keeps the requests still queued after a slot ends, so the next slot starts with the oldest one if
    // it has expired (`cfq_check_fifo`). Flow 1 queues A (sector 1000), B (50 000 000), C (2000) at 0 and is served
    // A; an RT reader preempts it at 1 ms and holds the disk until 200 ms (one slow request, then 8 ms of idling).
    // When flow 1 comes back at 208 ms, B has waited past fifo_expire_sync (125 ms) and goes first, ahead of C,
    // the elevator's choice.
    #[test]
    fn the_next_slot_starts_with_the_oldest_expired_request() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.flow_started(&FlowInfo::new(FlowId(2)).with_class(IoClass::Rt, 4), 0);
        for (id, sector) in [(1, 1000), (2, 50_000_000), (3, 2000)] {
            c.insert(rq(id, 1, sector, true), 0);
        }
        let a = dispatched(&mut c, 0).unwrap();
        assert_eq!(a.id.0, 1);
        c.insert(rq(10, 2, 900_000_000, true), MS);
        let rt = dispatched(&mut c, MS).unwrap();
        assert_eq!(rt.flow, FlowId(2));
        c.completed(&a, 2 * MS);
        c.completed(&rt, 200 * MS);
        assert_eq!(c.dispatch(200 * MS), Decision::WaitUntil(208 * MS));
        let order: Vec<u64> = (0..2).map(|_| dispatched(&mut c, 208 * MS).unwrap().id.0).collect();
        assert_eq!(order, vec![2, 3]);
    }

    // After a dispatch the elevator's next request is the better of the dispatched one's neighbours in sector
    // order (`cfq_find_next_rq`), with a back seek costing twice its distance (`cfq_choose_req`). With the head at
    // 10 008 after X (10 000-10 008), P at 9000 (1008 behind: cost 2016) beats S at 20 000 (9992 ahead).
    #[test]
    fn the_next_request_after_a_dispatch_is_the_nearer_neighbour_counting_back_seeks_double() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 9992, true), 0);
        assert_eq!(dispatched(&mut c, 0).unwrap().id.0, 1);
        for (id, sector) in [(2, 10_000), (3, 9000), (4, 20_000)] {
            c.insert(rq(id, 1, sector, true), 0);
        }
        let order: Vec<u64> = (0..3).map(|_| dispatched(&mut c, 0).unwrap().id.0).collect();
        assert_eq!(order, vec![2, 3, 4]);
    }

    // `cfq_dispatch_requests`: an async queue's dispatch allowance (2 x slice_async_rq x (8 - prio) = 16 at
    // priority 4) ends its slot only while another queue is busy; a lone writer keeps its slot, so its FIFO is not
    // consulted again. The writer's first request F (sector 50 000 000) goes at 0, which checks the FIFO for the
    // slot; E (sector 10) and twenty requests ahead of the head are queued at 0. At 300 ms, with E past
    // fifo_expire_async (250 ms), the elevator still sends the twenty first and E, behind the head, last.
    #[test]
    fn a_lone_async_queue_keeps_its_slot_past_its_dispatch_allowance() {
        let mut c = cfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        c.insert(rq(1, 3, 50_000_000, false), 0);
        assert_eq!(dispatched(&mut c, 0).unwrap().id.0, 1);
        c.insert(rq(2, 3, 10, false), 0);
        for i in 0..20 {
            c.insert(rq(10 + i, 3, 60_000_000 + i * 100, false), 0);
        }
        let order: Vec<u64> = std::iter::from_fn(|| dispatched(&mut c, 300 * MS))
            .map(|r| r.id.0)
            .collect();
        assert_eq!(order.len(), 21);
        assert_eq!(order.last(), Some(&2), "{order:?}");
    }

    /// The preemption scenario of the next two tests: the BE flows `be` (priority 0) and an RT reader (flow 3);
    /// flow 1 queues ten reads at 0 and is served from 1 ms, flow 2 queues one at 10 ms, the RT reader one at 20
    /// ms, which preempts flow 1 and completes at 21 ms.
    fn flow_1_preempted_by_an_rt_reader(be: &[u32]) -> Cfq {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for &f in be {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0), 0);
        }
        c.flow_started(&FlowInfo::new(FlowId(3)).with_class(IoClass::Rt, 4), 0);
        for i in 0..10 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        let a = dispatched(&mut c, 0).unwrap();
        c.completed(&a, MS);
        c.insert(rq(20, 2, 900_000_000, true), 10 * MS);
        c.insert(rq(30, 3, 1_500_000_000, true), 20 * MS);
        let rt = dispatched(&mut c, 20 * MS).unwrap();
        assert_eq!(rt.flow, FlowId(3));
        c.completed(&rt, 21 * MS);
        c
    }

    // `__cfq_slice_expired` with `timed_out`: a preempted queue keeps the unused part of its slice, taken off its
    // next key, so it comes back before queues that arrived while it was served. Flows 1 and 2 are BE at priority 0
    // (no slice offset: keys are the arrival or expiry time). Flow 1's 180 ms slice runs from 1 ms; flow 2 queues
    // a request at 10 ms (key 10 ms); an RT reader preempts flow 1 at 20 ms, which leaves it 161 ms (key 20 - 161
    // ms). When the RT reader is done (its request completes at 21 ms, then 8 ms of idling), flow 1 goes first.
    #[test]
    fn a_preempted_queue_keeps_its_unused_slice_and_comes_back_first() {
        let mut c = flow_1_preempted_by_an_rt_reader(&[1, 2]);
        assert_eq!(c.dispatch(21 * MS), Decision::WaitUntil(29 * MS));
        assert_eq!(dispatched(&mut c, 29 * MS).unwrap().flow, FlowId(1));
    }

    // `__cfq_slice_expired` marks a shared (cooperating) queue for splitting only when it has turned seeky. Two
    // readers interleave 256-sector chunks of one file (as in `tests::cooperating_queues_merge_and_split`), so
    // their queues merge; the shared queue's slots end every 100 ms or so, and as long as the readers stay
    // sequential both keep using the one queue, checked at every millisecond for 300 ms.
    #[test]
    fn a_shared_queue_that_stays_sequential_is_not_split_when_its_slot_ends() {
        let mut sim = super::super::tests::interleaved_pair_for_500_ms();
        for ms in 501..=800 {
            sim.run(ms * MS);
            let (qa, qb) = (sim.cfq.flows[&FlowId(1)].sync_q, sim.cfq.flows[&FlowId(2)].sync_q);
            assert!(qa.is_some() && qa == qb, "split at {ms} ms: {qa:?} {qb:?}");
        }
    }

    // `cfq_group_served`: a group with only async queues is charged the whole slice it was allotted, not the time
    // it used. The root group (weight 1000) has a backlogged sync reader, a child group (500) a backlogged async
    // writer, 1 ms per request. The reader's slots last 100 ms and cost 100 ms; the writer's end after its 16
    // dispatches (2 x slice_async_rq x (8 - 4)), about 16 ms, but cost its 40 ms async slice. With vdisktime
    // advancing by cost / weight, per 1000 units of it the root gets 1000 / 100 = 10 slots of 100 ms and the writer
    // 500 / 40 = 12.5 slots of 16 ms: 1000 against 200 ms, a time ratio of 5 (measured 5.13).
    // Charged the 16 ms used instead, the writer would get 500 / 16 = 31 slots: a ratio of about 2.
    #[test]
    fn an_async_only_group_is_charged_its_whole_slice() {
        let mut w = Reader::new(2, 500_000_000);
        w.sync = false;
        w.depth = 32;
        w.stride = 512;
        let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, vec![Reader::new(1, 0), w]);
        sim.start_flow(FlowInfo::new(FlowId(2)).with_group(GroupId(1)));
        let ratio = root_to_child_time_over_10_s(&mut sim);
        assert!((4.5..=5.5).contains(&ratio), "root/child time ratio {ratio}");
    }

    // `cfq_service_tree_add`: an IDLE-class queue goes 200 ms (`CFQ_IDLE_DELAY`) behind the last queue of its tree,
    // and each gets one dispatch per turn while another is busy, so two backlogged IDLE-class readers take turns
    // request by request: over 100 ms (1 ms a request) each gets about half, and neither two in a row.
    #[test]
    fn idle_class_queues_take_turns_behind_each_other() {
        let readers = vec![Reader::new(1, 0), Reader::new(2, 500_000_000)];
        let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, readers);
        for f in [1, 2] {
            sim.start_flow(FlowInfo::new(FlowId(f)).with_class(IoClass::Idle, 7));
        }
        sim.run(100 * MS);
        assert!(sim.log.len() >= 90);
        assert!(sim.log.windows(2).all(|w| w[0].flow != w[1].flow), "{:?}", sim.runs());
    }

    // The unused slice a preempted queue keeps is spent once, on the key it gets at that expiry (`rb_key -=
    // slice_resid; slice_resid = 0`): later keys are plain arrival times again. As in
    // `a_preempted_queue_keeps_its_unused_slice_and_comes_back_first`, flow 1 (priority 0) is preempted with 161 ms
    // left and comes back first; it then empties, is idled for, and flow 2 is served. Flow 4 (priority 0) queues a
    // request 10 ms after that, flow 1 a new one 2 ms later: flow 4, keyed earlier, goes first.
    #[test]
    fn the_saved_slice_is_spent_on_one_key_only() {
        let mut c = flow_1_preempted_by_an_rt_reader(&[1, 2, 4]);
        let mut t = 29 * MS;
        let mut r = dispatched(&mut c, t).unwrap();
        while r.flow == FlowId(1) {
            t += MS;
            c.completed(&r, t);
            match c.dispatch(t) {
                Decision::Dispatch(next) => r = next,
                Decision::WaitUntil(w) => {
                    t = w;
                    r = dispatched(&mut c, t).unwrap();
                }
                Decision::Nothing => panic!("nothing at {t}"),
            }
        }
        assert_eq!(r.flow, FlowId(2));
        c.insert(rq(40, 4, 1_200_000_000, true), t + 10 * MS);
        c.insert(rq(11, 1, 50_000, true), t + 12 * MS);
        c.completed(&r, t + 20 * MS);
        assert_eq!(c.dispatch(t + 20 * MS), Decision::WaitUntil(t + 28 * MS));
        assert_eq!(dispatched(&mut c, t + 28 * MS).unwrap().flow, FlowId(4));
    }

    // Queues with equal keys on one service tree keep their order of arrival (the kernel's rbtree insert puts an
    // equal key to the right). Two readers at priority 0 (no slice offset) queue at 0: both keyed 0; the first to
    // arrive is served first, and the second gets the next turn (each turn is a 180 ms slice plus the first
    // request: 181 ms).
    #[test]
    fn queues_with_equal_keys_are_served_in_order_of_arrival() {
        let readers = vec![Reader::new(1, 0), Reader::new(2, 500_000_000)];
        let mut sim = Sim::new(&DeviceInfo::hdd(), &[], 1, flat_1ms, readers);
        for f in [1, 2] {
            sim.start_flow(FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0));
        }
        sim.run(500 * MS);
        let runs = sim.runs();
        let order: Vec<u32> = runs.iter().take(2).map(|r| r.0 .0).collect();
        assert_eq!(order, vec![1, 2], "{runs:?}");
        assert_eq!(sim.first_dispatch(2), Some(181 * MS));
    }

    // `cfq_completed_request`: idling is not armed for an async queue, and an IDLE-class queue is expired at each
    // completion, even when it is the only queue of its group (where group idling would otherwise hold the
    // device). Flow 1, alone in group 1 (busy first, so served first), completes its one request at 1 ms; flow 2's
    // request, queued at 0 in the root group, is served at 1 ms.
    #[test]
    fn neither_an_async_nor_an_idle_class_queue_is_idled_for() {
        for (sync, class) in [(false, IoClass::Be), (true, IoClass::Idle)] {
            let mut c = cfq(&DeviceInfo::hdd(), &[]);
            c.flow_started(&FlowInfo::new(FlowId(1)).with_group(GroupId(1)).with_class(class, 7), 0);
            c.insert(rq(1, 1, 0, sync), 0);
            c.insert(rq(2, 2, 900_000_000, true), 0);
            let r = dispatched(&mut c, 0).unwrap();
            assert_eq!(r.flow, FlowId(1), "{sync} {class:?}");
            c.completed(&r, MS);
            match c.dispatch(MS) {
                Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(2)),
                d => panic!("sync {sync}, {class:?}: {d:?}"),
            }
        }
    }

    /// Flow 1 issues four reads, each 4 ms after the previous completion (a mean think time of 4 ms), served in
    /// 1, 1, 1 and 3 ms; flow 2 queues a read at the first one. Returns the last completion time (22 ms).
    fn four_reads_thinking_4_ms(c: &mut Cfq) -> Time {
        let mut t = 0;
        for (i, service) in [(1, MS), (2, MS), (3, MS), (4, 3 * MS)] {
            t += 4 * MS;
            c.insert(rq(i, 1, i * 16, true), t);
            let r = dispatched(c, t).unwrap();
            assert_eq!(r.flow, FlowId(1), "request {i}");
            if i == 1 {
                c.insert(rq(100, 2, 900_000_000, true), t);
            }
            t += service;
            c.completed(&r, t);
        }
        t
    }

    // `cfq_should_wait_busy`: the only queue of a group whose slice has less left than its process's mean think
    // time stretches the slice by slice_idle and keeps the group, rather than let the group go for a wait that
    // could not pay off. Flow 1 (root group, 20 ms slices) thinks exactly 4 ms between a completion and its next
    // request (the mean is valid after three samples); flow 2 waits in group 1 from 4 ms. Its slice runs 5-25 ms; its fourth
    // request completes at 22 ms, 3 ms before the end: the slice is stretched to 30 ms and CFQ idles for flow 1.
    #[test]
    fn a_groups_last_queue_with_less_slice_left_than_its_think_time_keeps_the_group() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=20"]);
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        c.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(1)), 0);
        let t = four_reads_thinking_4_ms(&mut c);
        assert_eq!(t, 22 * MS);
        assert_eq!(c.dispatch(t), Decision::WaitUntil(30 * MS));
    }

    // `cfq_arm_slice_timer` (3.13): only a non-rotational queueing device skips idling when group_idle is 0; a disk
    // still idles slice_idle (8 ms) for an emptied sequential reader with group_idle=0 (and the NCQ detector still
    // undecided, which counts as queueing): flow 2, waiting, gets the disk 8 ms after flow 1's completion.
    #[test]
    fn a_disk_idles_for_an_emptied_reader_with_group_idle_off() {
        let mut c = cfq(&DeviceInfo::hdd(), &["group_idle=0"]);
        c.insert(rq(1, 1, 0, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 2, 900_000_000, true), 0);
        c.completed(&r, MS);
        assert_eq!(c.dispatch(MS), Decision::WaitUntil(9 * MS));
        assert_eq!(dispatched(&mut c, 9 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_arm_slice_timer`: no idle timer while the queue still has requests on the device (their completions
    // will come back): flow 1's two requests are on the device, its queue empty; at the first completion (1 ms)
    // CFQ holds the device without a timer ("nothing"), and at the second (2 ms) it arms slice_idle: until 10 ms.
    #[test]
    fn no_idle_timer_while_the_queue_has_requests_in_flight() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.insert(rq(1, 1, 0, true), 0);
        c.insert(rq(2, 1, 100, true), 0);
        let a = dispatched(&mut c, 0).unwrap();
        let b = dispatched(&mut c, 0).unwrap();
        c.insert(rq(3, 2, 900_000_000, true), 0);
        c.completed(&a, MS);
        assert_eq!(c.dispatch(MS), Decision::Nothing);
        c.completed(&b, 2 * MS);
        assert_eq!(c.dispatch(2 * MS), Decision::WaitUntil(10 * MS));
    }

    // `cfq_arm_slice_timer`: with slice_idle=0 and group_idle=0 nothing is idled for, not even the last queue of
    // a group: flow 1 (root group) completes its only request at 1 ms and flow 2 (group 1) is served at 1 ms.
    #[test]
    fn with_both_idles_off_the_last_queue_of_a_group_is_not_idled_for() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0", "group_idle=0"]);
        c.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(1)), 0);
        c.insert(rq(1, 1, 0, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 2, 900_000_000, true), 0);
        c.completed(&r, MS);
        assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(2));
    }

    // `cfq_arm_slice_timer`: no idling when the process's mean think time is longer than what is left of the slice
    // (the wait would overrun it). As in `a_groups_last_queue_with_less_slice_left_than_its_think_time_keeps_the_group`
    // flow 1 thinks 4 ms and its fourth request completes 3 ms before its slice ends, but flow 2 waits in the same
    // group (so no wait-busy stretch): CFQ does not idle and serves flow 2 at once.
    #[test]
    fn no_idling_when_the_think_time_exceeds_the_slice_left() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=20"]);
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        let t = four_reads_thinking_4_ms(&mut c);
        assert_eq!(dispatched(&mut c, t).unwrap().flow, FlowId(2));
    }

    // `cfq_arm_slice_timer`: group idling is for the last queue of a group only. With slice_idle=0 (no queue
    // idling) and group_idle at 8 ms, flow 1's queue empties at 1 ms while flow 2 waits in the same group: no
    // timer, and flow 2 is served at 1 ms.
    #[test]
    fn group_idling_is_only_for_the_last_queue_of_a_group() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0"]);
        c.insert(rq(1, 1, 0, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        c.insert(rq(2, 2, 900_000_000, true), 0);
        c.completed(&r, MS);
        assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(2));
    }

    /// As `four_reads_thinking_4_ms`, with the fourth read served in `last` (the first three in 1 ms each): the
    /// fourth completion comes at 19 ms + `last`. Flow 2 queues its read at the first one only with `flow_2`.
    fn four_reads_thinking_4_ms_last_in(c: &mut Cfq, last: Time, flow_2: bool) -> Time {
        let mut t = 0;
        for (i, service) in [(1, MS), (2, MS), (3, MS), (4, last)] {
            t += 4 * MS;
            c.insert(rq(i, 1, i * 16, true), t);
            let r = dispatched(c, t).unwrap();
            assert_eq!(r.flow, FlowId(1), "request {i}");
            if i == 1 && flow_2 {
                c.insert(rq(100, 2, 900_000_000, true), t);
            }
            t += service;
            c.completed(&r, t);
        }
        t
    }

    // `cfq_arm_slice_timer` skips idling only when the slice left is strictly shorter than the process's mean think
    // time (`slice_end - jiffies < ttime_mean`). As in `no_idling_when_the_think_time_exceeds_the_slice_left`
    // (flow 2 waits in the same group; flow 1's 20 ms slice runs from its first completion at 5 ms to 25 ms), flow 1
    // thinks 4 ms before each of its four reads (a mean of 4.036 ms, `mean_of_four_4_ms_thinks`); the fourth read
    // is served so that it completes with exactly that much of the slice left (at 25 ms minus the mean): CFQ still
    // idles for flow 1 (slice_idle, 8 ms) rather than serve flow 2.
    #[test]
    fn a_think_time_equal_to_the_slice_left_is_still_idled_for() {
        let mean = mean_of_four_4_ms_thinks();
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=20"]);
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        let t = four_reads_thinking_4_ms_last_in(&mut c, 6 * MS - mean, true);
        assert_eq!(t, 25 * MS - mean);
        assert_eq!(c.flows[&FlowId(1)].ttime.mean, mean);
        assert_eq!(c.queues[sync_q(&c, 1) as usize].slice_end, 25 * MS);
        assert_eq!(c.dispatch(t), Decision::WaitUntil(t + 8 * MS));
    }

    // The FIFO holds only queued requests: a request the elevator sends from behind the FIFO's head leaves the
    // FIFO too (`cfq_remove_request` unlinks it), so its entry can never send a later request early, even one that
    // reuses its storage slot here. Flow 1 (one-tag disk) queues X (sector 1 000 000) and A (sector 100) at 0; A,
    // nearer the head, goes first, its entry behind X's. N (sector 900 000 000) arrives at 50 ms and takes A's slot,
    // then Y (1 000 400). A completes at 60 ms: X goes; an RT reader arrives and preempts flow 1, and holds the
    // disk until 140 ms plus 8 ms of idling. Flow 1's new slot at 148 ms checks the FIFO first: its oldest request
    // N (queued at 50 ms) expires only at 175 ms (fifo_expire_sync 125 ms), so the elevator's choice from X's end,
    // Y, goes first, then N; A's entry, had it stayed, would have expired at 125 ms and sent N first.
    #[test]
    fn a_request_the_elevator_sent_leaves_no_fifo_entry_behind() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        c.flow_started(&FlowInfo::new(FlowId(2)).with_class(IoClass::Rt, 4), 0);
        c.insert(rq(1, 1, 1_000_000, true), 0);
        c.insert(rq(2, 1, 100, true), 0);
        let a = dispatched(&mut c, 0).unwrap();
        assert_eq!(a.id.0, 2);
        let slot_a = c.rqs.iter().position(Option::is_none);
        c.insert(rq(3, 1, 900_000_000, true), 50 * MS);
        assert!(
            slot_a.is_some() && c.rqs[slot_a.unwrap()].as_ref().unwrap().rq.id.0 == 3,
            "N reuses A's slot"
        );
        c.insert(rq(4, 1, 1_000_400, true), 50 * MS);
        c.completed(&a, 60 * MS);
        let x = dispatched(&mut c, 60 * MS).unwrap();
        assert_eq!(x.id.0, 1);
        c.insert(rq(10, 2, 1_500_000_000, true), 60 * MS);
        c.completed(&x, 61 * MS);
        let rt = dispatched(&mut c, 61 * MS).unwrap();
        assert_eq!(rt.flow, FlowId(2));
        c.completed(&rt, 140 * MS);
        assert_eq!(c.dispatch(140 * MS), Decision::WaitUntil(148 * MS));
        let y = dispatched(&mut c, 148 * MS).unwrap();
        assert_eq!(y.id.0, 4);
        c.completed(&y, 149 * MS);
        assert_eq!(dispatched(&mut c, 149 * MS).unwrap().id.0, 3);
    }

    /// The mean think time of `four_reads_thinking_4_ms_last_in`'s flow 1 after its fourth read: the decaying
    /// average of four 4 ms samples (flow start at 0, then completions at 5, 10 and 15 ms), 4.036 ms with the
    /// filter's integer weights (32, 60, 84, 105).
    fn mean_of_four_4_ms_thinks() -> Time {
        let mut mean = super::super::idle::ThinkTime::new(0);
        for (arrival, last_end) in [(4, 0), (9, 5), (14, 10), (19, 15)] {
            mean.last_end = last_end * MS;
            mean.sample(arrival * MS, 8 * MS);
        }
        assert!((4 * MS..4 * MS + 40 * US).contains(&mean.mean), "{}", mean.mean);
        mean.mean
    }

    // `cfq_should_wait_busy` stretches the slice of a group's last queue only when the slice left is strictly
    // shorter than the process's mean think time (`slice_end - jiffies < ttime_mean`) or down to its last jiffy;
    // a queue so marked ends its slot as soon as its next request arrives (`cfq_select_queue`: the group was kept
    // backlogged for it). Flow 1 is alone in the root group (20 ms slice from 5 ms to 25 ms, four reads thinking
    // 4 ms, as in `a_think_time_equal_to_the_slice_left_is_still_idled_for`); its fourth read completes with
    // exactly its mean think time left: not marked, CFQ idles for it (8 ms). Flow 2 queues a far read in the same
    // group 1 ms later (no preemption: flow 1 idles and the read is not close), and flow 1's next read, 4 ms after
    // its completion and still before 25 ms, is served in flow 1's slot. Marked wait-busy, flow 1's slot would end
    // there and flow 2 (keyed at its arrival, ahead of flow 1 re-keyed one 80 ms priority gap later) would be served.
    #[test]
    fn a_groups_last_queue_with_exactly_its_think_time_left_is_not_stretched() {
        let mean = mean_of_four_4_ms_thinks();
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=20"]);
        c.flow_started(&FlowInfo::new(FlowId(1)), 0);
        let t = four_reads_thinking_4_ms_last_in(&mut c, 6 * MS - mean, false);
        assert_eq!(t, 25 * MS - mean);
        assert_eq!(c.flows[&FlowId(1)].ttime.mean, mean);
        c.insert(rq(100, 2, 900_000_000, true), t + MS);
        assert_eq!(c.dispatch(t + MS), Decision::WaitUntil(t + 8 * MS));
        c.insert(rq(5, 1, 5 * 16, true), t + 4 * MS);
        assert!(t + 4 * MS < 25 * MS);
        assert_eq!(dispatched(&mut c, t + 4 * MS).unwrap().flow, FlowId(1));
    }

    // `cfq_service_tree_add`: a queue re-added with the key and tree it already has keeps its place ("same
    // position, nothing more to do"), ahead of queues that got the same key after it. Flows 1 and 2 read at
    // priority 0 (no slice offset: keys are arrival times, so both are keyed 0, flow 1 first). Flow 1 is served from
    // 0; its first completion at 1 ms starts its slice, which ends at `end`. An RT reader preempts it at exactly
    // `end / 2`: flow 1 keeps the unused `end / 2` of its slice, taken off its new key, `end / 2 - end / 2 = 0`, its
    // old key. When the RT reader is done (its request completes 1 ms later, then 8 ms of idling), flow 1, still
    // ahead of flow 2 on the tree, is served first; re-inserted behind its equal, it would follow flow 2.
    #[test]
    fn a_queue_re_keyed_to_its_own_key_keeps_its_place_among_equals() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0), 0);
        }
        c.flow_started(&FlowInfo::new(FlowId(3)).with_class(IoClass::Rt, 4), 0);
        for i in 0..10 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        c.insert(rq(20, 2, 900_000_000, true), 0);
        let (q1, q2) = (sync_q(&c, 1) as usize, sync_q(&c, 2) as usize);
        assert_eq!((c.queues[q1].pos.unwrap().key, c.queues[q2].pos.unwrap().key), (0, 0));
        let a = dispatched(&mut c, 0).unwrap();
        assert_eq!(a.flow, FlowId(1));
        c.completed(&a, MS);
        let end = c.queues[q1].slice_end;
        assert!(end.is_multiple_of(2) && end > 2 * MS, "{end}");
        let t = end / 2;
        c.insert(rq(30, 3, 1_500_000_000, true), t);
        assert_eq!(c.queues[q1].pos.unwrap().key, 0, "flow 1 re-keyed to 0");
        let rt = dispatched(&mut c, t).unwrap();
        assert_eq!(rt.flow, FlowId(3));
        c.completed(&rt, t + MS);
        assert_eq!(c.dispatch(t + MS), Decision::WaitUntil(t + 9 * MS));
        assert_eq!(dispatched(&mut c, t + 9 * MS).unwrap().flow, FlowId(1));
    }

    // `cfq_cfqq_slice_usage` (3.13): a slot is charged from its first completion (the slice start), at most its
    // allocated slice. Readers 1 and 2 are each alone in a group of weight 500 (groups 1 and 2): group 1, busy first,
    // starts at vdisktime 0, group 2 goes `CFQ_IDLE_DELAY` in vdisktime's fixed-point units (48 828 ns) behind it; a
    // charge costs vdisktime charge x 1000 / 500 (total weight over the group's). Reader 1 sends two of its three
    // reads at 0; the first completes at 50 ms (an 80 ms slice, to 130 ms), the second at 300 ms, past the slice
    // end: the slot ends and is charged 80 ms, so group 1 moves to 160 ms of vdisktime (charged from its first
    // dispatch without the cap, 300 ms: 600 ms), behind group 2, whose reader is served next.
    #[test]
    fn a_slot_is_charged_from_its_first_completion_at_most_its_slice() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=80"]);
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(f)), 0);
        }
        for i in 0..3 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        c.insert(rq(10, 2, 900_000_000, true), 0);
        let a = dispatched(&mut c, 0).unwrap();
        let b = dispatched(&mut c, 0).unwrap();
        assert_eq!((a.flow, b.flow), (FlowId(1), FlowId(1)));
        c.completed(&a, 50 * MS);
        assert_eq!(c.queues[sync_q(&c, 1) as usize].slice_end, 130 * MS);
        c.completed(&b, 300 * MS);
        let g1 = c.group_index[&GroupId(1)] as usize;
        assert_eq!(c.groups[g1].vdisktime, 160 * MS, "80 ms charged at half the weight");
        assert_eq!(dispatched(&mut c, 300 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_cfqq_slice_usage` (3.13): a slot that ends at its first completion ("expired immediately after first
    // request completion") is charged the time since its first dispatch, at least a jiffy, so that queues sending
    // one slow request each still cost their group. Groups as in
    // `a_slot_is_charged_from_its_first_completion_at_most_its_slice` (group 1 at vdisktime 0, group 2 at 48 828 ns,
    // charges doubled); group 1 holds writer 1 and reader 3, group 2 reader 2. The writer's key (the first queue of
    // an idle group, one 140 ms priority gap ahead) is the group's lowest, so its write goes first, at 0, and
    // completes at 120 ms; the writer is empty and not idled for (async), so its slot ends there: charged 120 ms
    // (240 ms of vdisktime), group 1 goes behind group 2 and reader 2 is served. Charged nothing, group 1 would
    // stay at 0 and reader 3 would go first.
    #[test]
    fn a_slot_ending_at_its_first_completion_is_charged_from_its_first_dispatch() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for (f, g) in [(1, 1), (3, 1), (2, 2)] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(g)), 0);
        }
        c.insert(rq(1, 1, 1000, false), 0);
        c.insert(rq(3, 3, 500_000_000, true), 0);
        c.insert(rq(2, 2, 900_000_000, true), 0);
        let w = dispatched(&mut c, 0).unwrap();
        assert_eq!(w.flow, FlowId(1));
        c.completed(&w, 120 * MS);
        assert_eq!(dispatched(&mut c, 120 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_group_served` (3.13) charges an async queue its whole allocated slice only when its group has no sync
    // queue busy (`!cfq_cfqq_sync(cfqq) && !nr_sync`); otherwise the time it used. Groups and queues as in
    // `a_slot_ending_at_its_first_completion_is_charged_from_its_first_dispatch` (group 1: writer 1 and reader 3;
    // group 2, 48 828 ns of vdisktime behind: reader 2; charges doubled), with a 200 ms async slice
    // (slice_async=200, no low-latency scaling; the writer's key then ties with reader 3's at 0 and the ASYNC type,
    // scanned first, wins). The write completes at 60 ms and the writer's slot ends: reader 3 is busy in the group,
    // so the slot is charged the 60 ms it used, and group 1 moves to 120 ms of vdisktime (charged its 200 ms slice:
    // 400 ms).
    #[test]
    fn an_async_queue_next_to_a_busy_sync_queue_is_charged_the_time_it_used() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_async=200", "low_latency=0"]);
        for (f, g) in [(1, 1), (3, 1), (2, 2)] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(g)), 0);
        }
        c.insert(rq(1, 1, 1000, false), 0);
        c.insert(rq(3, 3, 500_000_000, true), 0);
        c.insert(rq(2, 2, 900_000_000, true), 0);
        let w = dispatched(&mut c, 0).unwrap();
        assert_eq!(w.flow, FlowId(1));
        let wq = c.active.unwrap() as usize;
        c.completed(&w, 60 * MS);
        assert_eq!(c.queues[wq].allocated_slice, 200 * MS);
        // The writer's slot ends at the next dispatch, which charges group 1 and then picks group 2's reader.
        assert_eq!(dispatched(&mut c, 60 * MS).unwrap().flow, FlowId(2));
        let g1 = c.group_index[&GroupId(1)] as usize;
        assert_eq!(c.groups[g1].vdisktime, 120 * MS, "60 ms charged at half the weight");
    }

    // `cfq_group_served` (3.13) charges an async queue of a group with no sync queue busy exactly its allocated
    // slice, which is set only at the slot's first completion (`cfq_set_prio_slice`) and cleared when the slot
    // starts: a writer alone in group 1 dispatches its one write at 0 and, empty and not idled for (async, and no
    // group idling: group_idle=0), ends its slot at the next dispatch, before the write completes; group 1 is
    // charged nothing and stays at vdisktime 0, and group 2's reader gets the device next. (Charged the time used,
    // at least a jiffy, group 1 would move 2 ms.)
    #[test]
    fn an_async_only_slot_that_ends_before_its_first_completion_costs_its_group_nothing() {
        let mut c = cfq(&DeviceInfo::hdd(), &["group_idle=0"]);
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(f)), 0);
        }
        c.insert(rq(1, 1, 1000, false), 0);
        c.insert(rq(2, 2, 900_000_000, true), 0);
        let w = dispatched(&mut c, 0).unwrap();
        assert_eq!(w.flow, FlowId(1));
        let wq = c.active;
        // Reader 2's queue becomes active; its read waits for the write to drain (`cfq_may_dispatch`).
        assert_eq!(c.dispatch(MS), Decision::Nothing);
        assert_ne!(c.active, wq, "the writer's slot ended");
        let g1 = c.group_index[&GroupId(1)] as usize;
        assert_eq!(c.groups[g1].vdisktime, 0, "nothing charged");
    }

    // `cfq_group_served` saves the group's workload context only while the workload slice lasts
    // (`time_after(workload_expires, jiffies)`); a slice over exactly at the expiry is not saved, so the next
    // choice is made afresh, by lowest key. Reader A (flow 1, 10 ms slices) is served from 0 on the SYNC workload,
    // whose slice ends at `e`; writer W (flow 3) queues at 1 ms (keyed 1 ms). A's second request completes at
    // exactly `e`, after A's slice ended: A's slot ends, A is re-keyed after W, and W, the lowest key, is served.
    // Had the context been saved with 0 left, the SYNC type would be restored with its slice ending now, kept,
    // and A served again.
    #[test]
    fn a_workload_slice_ending_exactly_at_an_expiry_is_not_kept() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_sync=10"]);
        for i in 0..4 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        let a = dispatched(&mut c, 0).unwrap();
        assert_eq!(a.flow, FlowId(1));
        let e = c.workload_expires.unwrap();
        c.insert(rq(10, 3, 900_000_000, false), MS);
        c.completed(&a, MS);
        let b = dispatched(&mut c, MS).unwrap();
        assert_eq!(b.flow, FlowId(1));
        assert!(c.queues[sync_q(&c, 1) as usize].slice_end < e, "{e}");
        c.completed(&b, e);
        assert_eq!(dispatched(&mut c, e).unwrap().flow, FlowId(3));
    }

    /// On a flash device (group_idle=0) a reader (flow 1, 128 KiB reads 128 KiB apart, so not seeky there) keeps one
    /// read on the device and `behind` more queued, issuing a new one at each completion, while a writer (flow 3)
    /// has ten writes queued (so the NCQ detector's load condition, more than five queued, holds at every
    /// completion). After 60 such completions 0.5 ms apart (one slot: the reader's slice is 100 ms) the reader
    /// drains its queue; returns the answer of the dispatch call at its last completion, and that time.
    fn flash_reader_with_queued_behind(behind: u64) -> (Decision, Time) {
        use crate::types::{Direction, RequestId};
        let read = |id: u64| Request::new(RequestId(id), FlowId(1), Direction::Read, true, id * 512, 256);
        let mut c = cfq(&DeviceInfo::ssd(), &["group_idle=0"]);
        for id in 0..=behind {
            c.insert(read(id), 0);
        }
        let mut on_device = dispatched(&mut c, 0).unwrap();
        for i in 0..10 {
            c.insert(rq(1000 + i, 3, 100_000_000 + i * 1000, false), 0);
        }
        let mut t = 0;
        let mut next = behind + 1;
        for k in 0..60 + behind {
            t += 500 * US;
            c.completed(&on_device, t);
            match c.dispatch(t) {
                Decision::Dispatch(r) if r.flow == FlowId(1) => on_device = r,
                d => panic!("completion {k}: {d:?}"),
            }
            if k < 60 {
                c.insert(read(next), t);
                next += 1;
            }
        }
        assert!(c.queues[sync_q(&c, 1) as usize].is_empty());
        t += 500 * US;
        c.completed(&on_device, t);
        (c.dispatch(t), t)
    }

    // `cfq_update_hw_tag` (3.13) does not count a completion toward the NCQ decision while the active queue can
    // idle and holds too little to fill the device (`idle_window && dispatched + queued < CFQ_HW_QUEUE_MIN (5) &&
    // rq_in_driver < 5`): CFQ itself keeps the device shallow then. With one read on the device and one queued (2 <
    // 5) every completion is skipped, the detector stays undecided, which counts as queueing, and on a queueing
    // flash device with group_idle=0 CFQ does not idle: the writer is served at the reader's last completion. With
    // four queued (5, not < 5) the completions count: after more than 50, with at most one request ever on the
    // device, the device is found not to queue, and CFQ idles for the emptied reader (slice_idle, 8 ms).
    #[test]
    fn completions_of_a_shallow_idling_queue_do_not_count_toward_the_ncq_decision() {
        match flash_reader_with_queued_behind(1) {
            (Decision::Dispatch(r), _) => assert_eq!(r.flow, FlowId(3)),
            d => panic!("{d:?}"),
        }
        let (d, t) = flash_reader_with_queued_behind(4);
        assert_eq!(d, Decision::WaitUntil(t + 8 * MS));
    }

    // `cfq_arm_slice_timer` reads the think time of the process whose request started the slot (`active_cic`, set
    // at the slot's first dispatch and kept until it expires), also on a queue that two processes share. Readers A
    // (flow 1) and B (flow 2) read one file in alternate 128 KiB chunks, so their queues merge (as in
    // `tests::cooperating_queues_merge_and_split`). Then A reads on its own, each read 16 ms after the previous one
    // completed (A's mean think time grows past 10 ms), while B's stays about 0. In the last slot A's read goes
    // first, then B's, which B queued last (so the shared queue keeps B's idle window); B's read completes with 5 ms
    // of the slice left: less than A's mean think time, so CFQ does not idle and serves reader C, waiting since the
    // slot began. Reading the think time of the last process served (B) instead, it would idle.
    #[test]
    fn a_shared_queue_is_idled_for_by_the_think_time_of_the_process_that_started_the_slot() {
        let mut sim = super::super::tests::interleaved_pair_for_500_ms();
        for r in &mut sim.readers {
            r.stop = 500 * MS;
        }
        sim.run(600 * MS);
        let (mut next_a, mut next_b) = (sim.readers[0].next, sim.readers[1].next);
        let mut c = sim.cfq;
        let q = sync_q(&c, 1);
        assert_eq!(sync_q(&c, 2), q, "merged");
        let mut t = 600 * MS;
        let mut id = 10_000;
        for _ in 0..10 {
            c.insert(rq(id, 1, next_a, true), t);
            let r = dispatched(&mut c, t).unwrap();
            assert_eq!(r.flow, FlowId(1));
            t += MS;
            c.completed(&r, t);
            t += 16 * MS;
            next_a += 512;
            next_b += 512;
            id += 1;
        }
        assert!(c.flows[&FlowId(1)].ttime.mean > 10 * MS);
        assert!(c.flows[&FlowId(2)].ttime.mean < MS);
        c.insert(rq(id, 1, next_a, true), t);
        c.insert(rq(id + 1, 2, next_b, true), t);
        c.insert(rq(id + 2, 3, 1_900_000_000, true), t);
        let ra = dispatched(&mut c, t).unwrap();
        let rb = dispatched(&mut c, t).unwrap();
        assert_eq!((ra.flow, rb.flow), (FlowId(1), FlowId(2)));
        assert_eq!(sync_q(&c, 2), q, "still shared");
        c.completed(&ra, t + MS);
        let end = c.queues[q as usize].slice_end;
        assert!(c.queues[q as usize].idle_window);
        c.completed(&rb, end - 5 * MS);
        match c.dispatch(end - 5 * MS) {
            Decision::Dispatch(r) => assert_eq!(r.flow, FlowId(3)),
            d => panic!("{d:?}"),
        }
    }

    // Equal keys on one service tree keep the order of arrival (`cfq_service_tree_add` goes right on equal keys),
    // whatever the queues' ages. Flows 1 and 2 (priority 0: no slice offset, so keys are arrival times) each read
    // once alone, flow 1 first, so flow 1's queue is the older one; at 100 ms flow 2 queues a read and then flow 1,
    // at the same instant: both are keyed 100 ms, and flow 2, first to arrive, is served first (where
    // `queues_with_equal_keys_are_served_in_order_of_arrival` has the older queue arrive first).
    #[test]
    fn equal_keys_go_in_order_of_arrival_not_of_queue_age() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for f in [1, 2] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0), 0);
        }
        for (f, t) in [(1, 0), (2, 20 * MS)] {
            c.insert(rq(u64::from(f), f, 1000, true), t);
            let r = dispatched(&mut c, t).unwrap();
            c.completed(&r, t + MS);
        }
        assert!(sync_q(&c, 1) < sync_q(&c, 2), "flow 1's queue is the older");
        c.insert(rq(12, 2, 900_000_000, true), 100 * MS);
        c.insert(rq(11, 1, 500_000_000, true), 100 * MS);
        let (q1, q2) = (sync_q(&c, 1) as usize, sync_q(&c, 2) as usize);
        assert_eq!(c.queues[q1].pos.unwrap().key, c.queues[q2].pos.unwrap().key);
        assert_eq!(dispatched(&mut c, 100 * MS).unwrap().flow, FlowId(2));
    }

    // `cfq_completed_request`: a slot whose slice is over when a request completes ends there as timed out
    // (`cfq_slice_expired(cfqd, 1)`), so the overrun is carried into the queue's next key (`slice_resid = slice_end -
    // jiffies`, negative). Flows 1, 2 and 3 read at priority 0 (keys are arrival times). Flow 1 queues three reads
    // and flow 2 one at 0; flow 1 sends two, the first completes at 1 ms (its slice then ends at `e`), the second
    // 100 ms after `e`: flow 1's slot ends with a 100 ms overrun and is keyed at `e + 200 ms`. Flow 2 is served,
    // flow 3 queues a read at `e + 110 ms`, and when flow 2's slot ends (its read completes at `e + 120 ms`, then
    // 8 ms of idling) flow 3 goes before flow 1. Ended without the overrun (at the next dispatch call), flow 1
    // would be keyed `e + 100 ms` and go first.
    #[test]
    fn a_slot_that_overran_its_slice_carries_the_overrun_into_its_next_key() {
        let mut c = cfq(&DeviceInfo::hdd(), &[]);
        for f in [1, 2, 3] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Be, 0), 0);
        }
        for i in 0..3 {
            c.insert(rq(i, 1, 1000 + i * 100, true), 0);
        }
        c.insert(rq(20, 2, 900_000_000, true), 0);
        let a = dispatched(&mut c, 0).unwrap();
        let b = dispatched(&mut c, 0).unwrap();
        assert_eq!((a.flow, b.flow), (FlowId(1), FlowId(1)));
        c.completed(&a, MS);
        let e = c.queues[sync_q(&c, 1) as usize].slice_end;
        c.completed(&b, e + 100 * MS);
        let r2 = dispatched(&mut c, e + 100 * MS).unwrap();
        assert_eq!(r2.flow, FlowId(2));
        c.insert(rq(30, 3, 1_500_000_000, true), e + 110 * MS);
        c.completed(&r2, e + 120 * MS);
        assert_eq!(c.dispatch(e + 120 * MS), Decision::WaitUntil(e + 128 * MS));
        assert_eq!(dispatched(&mut c, e + 128 * MS).unwrap().flow, FlowId(3));
    }

    // `cfq_arm_slice_timer`: "there are other queues in the group, don't do group idle". As in
    // `group_idling_is_only_for_the_last_queue_of_a_group` (slice_idle=0, group_idle 8 ms), but flow 2's read is
    // queued before flow 1 is served, so that it does not preempt flow 1 (an emptied queue that should not idle is
    // preempted by any newcomer of its group) and flow 1 is still in service at its completion (1 ms) with flow 2
    // busy in the group: no group idling, flow 2 is served at 1 ms.
    #[test]
    fn no_group_idling_while_another_queue_of_the_group_is_busy() {
        let mut c = cfq(&DeviceInfo::hdd(), &["slice_idle=0"]);
        c.insert(rq(1, 1, 0, true), 0);
        c.insert(rq(2, 2, 900_000_000, true), 0);
        let r = dispatched(&mut c, 0).unwrap();
        assert_eq!(r.flow, FlowId(1));
        c.completed(&r, MS);
        assert_eq!(c.active, Some(sync_q(&c, 1)), "flow 1 still in service");
        assert_eq!(dispatched(&mut c, MS).unwrap().flow, FlowId(2));
    }
}
