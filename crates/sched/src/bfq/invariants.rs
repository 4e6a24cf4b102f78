//! The policy's invariants as code: every counter equals what the structures it counts hold, and the B-WF2Q+
//! engine's own invariants ([`Wf2q::check_invariants`](super::wf2q::Wf2q::check_invariants)) hold.

use super::ids::QueueId;
use super::wf2q::Place;
use super::Bfq;
use crate::ensure_invariant;
use crate::scheduler::InvariantViolation;
use std::collections::BTreeMap;

const W: &str = "bfq";

impl Bfq {
    /// Checks BFQ's invariants (see [`Bfq::check_invariants_impl`]'s body for the list): busy, raised-busy,
    /// per-class, in-flight, queued, weight and pending-group counters against the queues; the request store
    /// against the per-queue sorted sets; queue references against the flows and async slots; the position
    /// trees and the burst list against the queues' flags; the in-service queue and the idle timer against the
    /// engine.
    pub(crate) fn check_invariants_impl(&self) -> Result<(), InvariantViolation> {
        self.wf.check_invariants()?;
        if let Err(e) = self.store.check_slab() {
            return Err(InvariantViolation::new(W, format!("request store: {e}")));
        }
        let live: Vec<(QueueId, &super::Queue)> = self
            .queues
            .iter()
            .enumerate()
            .filter_map(|(i, q)| q.as_ref().map(|q| (QueueId::at(i), q)))
            .collect();
        // Busy counters (`bfq_add_bfqq_busy` / `bfq_del_bfqq_busy`).
        let busy = live.iter().filter(|(_, q)| q.busy).count();
        ensure_invariant!(
            self.busy_queues as usize == busy,
            W,
            "busy_queues {} but {busy} queues are busy",
            self.busy_queues
        );
        for c in 0..3 {
            let n = live.iter().filter(|(_, q)| q.busy && q.class.index() == c).count();
            ensure_invariant!(
                self.busy_per_class[c] as usize == n,
                W,
                "busy_per_class[{c}] {} but {n} busy queues of that class",
                self.busy_per_class[c]
            );
        }
        let wr = live.iter().filter(|(_, q)| q.busy && q.wr.coeff > 1).count();
        ensure_invariant!(
            self.wr_busy_queues as usize == wr,
            W,
            "wr_busy_queues {} but {wr} busy queues are raised",
            self.wr_busy_queues
        );
        // In flight: the driver count, the map and the per-queue counts.
        ensure_invariant!(
            self.rq_in_driver as usize == self.in_flight.len(),
            W,
            "rq_in_driver {} but {} requests in flight",
            self.rq_in_driver,
            self.in_flight.len()
        );
        let mut per_queue: BTreeMap<QueueId, u32> = BTreeMap::new();
        for &q in self.in_flight.values() {
            ensure_invariant!(self.is_live(q), W, "a request in flight belongs to freed queue {q:?}");
            *per_queue.entry(q).or_insert(0) += 1;
        }
        for &(id, q) in &live {
            let n = per_queue.get(&id).copied().unwrap_or(0);
            ensure_invariant!(
                q.dispatched == n,
                W,
                "{id:?} counts {} dispatched but {n} of its requests are in flight",
                q.dispatched
            );
        }
        // Queued requests: the store against the queues' sorted sets, and the parts counter.
        let mut held = 0usize;
        let mut parts = 0usize;
        for (slot, s) in self.store.iter() {
            held += 1;
            parts += s.rq.parts();
            let ok = self.is_live(s.queue) && self.q(s.queue).rqs.sort.contains(&(s.rq.sector, slot));
            ensure_invariant!(
                ok,
                W,
                "stored request in {slot:?} is not in the sorted set of {:?}",
                s.queue
            );
        }
        let sorted: usize = live.iter().map(|(_, q)| q.rqs.len()).sum();
        ensure_invariant!(
            held == sorted,
            W,
            "{held} requests stored but the queues' sorted sets hold {sorted}"
        );
        ensure_invariant!(
            self.queued == parts,
            W,
            "queued {} but the stored requests have {parts} parts",
            self.queued
        );
        for &(id, q) in &live {
            ensure_invariant!(
                q.rqs.next.is_some() != q.rqs.is_empty(),
                W,
                "{id:?}: next request {:?} with {} queued",
                q.rqs.next,
                q.rqs.len()
            );
            if let Some(n) = q.rqs.next {
                let ok = self.store.slot(n).is_some_and(|s| s.queue == id);
                ensure_invariant!(ok, W, "{id:?}: next request {n:?} is not one of its own");
            }
            // Busy queues are scheduled (active or in service); others are not.
            let place = self.wf.entity(q.entity).map(|e| e.place);
            let scheduled = matches!(place, Some(Place::Active | Place::InService));
            ensure_invariant!(
                q.busy == scheduled,
                W,
                "{id:?}: busy {} but its entity is {place:?}",
                q.busy
            );
        }
        // Weights of non-raised pending queues (`bfq_weights_tree_add`), and groups with pending queues.
        let mut weights: BTreeMap<u32, u32> = BTreeMap::new();
        for (_, q) in &live {
            if let Some(w) = q.weight_counted {
                *weights.entry(w).or_insert(0) += 1;
            }
        }
        ensure_invariant!(
            weights == self.weights,
            W,
            "weights map {:?} but the queues count {weights:?}",
            self.weights
        );
        let mut with_pending = 0u32;
        for (gi, g) in self.groups.iter().enumerate() {
            let n = live
                .iter()
                .filter(|(_, q)| q.group as usize == gi && q.pending_counted)
                .count();
            ensure_invariant!(
                g.pending as usize == n,
                W,
                "group {gi}: pending {} but {n} of its queues are counted pending",
                g.pending
            );
            with_pending += u32::from(g.pending > 0);
            let mut last_pos = None;
            for &(pos, q) in &g.pos {
                let ok = self.is_live(q) && self.q(q).pos_key == Some(pos) && self.q(q).group as usize == gi;
                ensure_invariant!(ok, W, "group {gi}: position entry ({pos}, {q:?}) is not its queue's");
                ensure_invariant!(
                    last_pos != Some(pos),
                    W,
                    "group {gi}: two queues filed at sector {pos} (the tree holds one per sector)"
                );
                last_pos = Some(pos);
            }
        }
        ensure_invariant!(
            self.groups_with_pending == with_pending,
            W,
            "groups_with_pending {} but {with_pending} groups have pending queues",
            self.groups_with_pending
        );
        let positioned = live.iter().filter(|(_, q)| q.pos_key.is_some()).count();
        let entries: usize = self.groups.iter().map(|g| g.pos.len()).sum();
        ensure_invariant!(
            positioned == entries,
            W,
            "{positioned} queues have a position key but the position trees hold {entries}"
        );
        // References: flows using a queue as their sync queue, plus one for a group's async slot.
        let mut refs: BTreeMap<QueueId, u32> = BTreeMap::new();
        for c in self.flows.values() {
            if let Some(q) = c.sync_q {
                ensure_invariant!(self.is_live(q), W, "a flow's sync queue {q:?} is freed");
                *refs.entry(q).or_insert(0) += 1;
            }
        }
        for g in &self.groups {
            for q in g.async_q.iter().flatten() {
                ensure_invariant!(self.is_live(*q), W, "an async queue slot names freed {q:?}");
                *refs.entry(*q).or_insert(0) += 1;
            }
        }
        for &(id, q) in &live {
            let n = refs.get(&id).copied().unwrap_or(0);
            ensure_invariant!(q.refs == n, W, "{id:?}: refs {} but {n} flows and slots use it", q.refs);
        }
        // Burst list against the queues' flags.
        for &q in &self.burst.list {
            ensure_invariant!(
                self.is_live(q) && self.q(q).burst.in_list,
                W,
                "burst list names {q:?}, which is not flagged in it"
            );
        }
        let flagged = live.iter().filter(|(_, q)| q.burst.in_list).count();
        ensure_invariant!(
            flagged == self.burst.list.len(),
            W,
            "{flagged} queues flagged on the burst list, which holds {}",
            self.burst.list.len()
        );
        // The in-service queue, its idling flag and the idle timer.
        if let Some(s) = self.in_service {
            ensure_invariant!(self.is_live(s), W, "in-service queue {s:?} is freed");
            let place = self.wf.entity(self.q(s).entity).map(|e| e.place);
            ensure_invariant!(
                place == Some(Place::InService),
                W,
                "in-service queue {s:?} has its entity {place:?}"
            );
        }
        for &(id, q) in &live {
            ensure_invariant!(
                !q.wait_request || self.in_service == Some(id),
                W,
                "{id:?} idles (wait_request) but is not in service"
            );
        }
        if self.timer.is_some() {
            let ok = self.in_service.is_some_and(|s| self.q(s).wait_request);
            ensure_invariant!(ok, W, "the idle timer is armed but the in-service queue is not idling");
        }
        Ok(())
    }

    /// Breaks the busy-queue counter on purpose, for the test that shows [`Bfq::check_invariants_impl`] notices.
    #[cfg(test)]
    pub(crate) fn break_busy_counter_for_test(&mut self) {
        self.busy_queues += 1;
    }
}
