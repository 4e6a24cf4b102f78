//! CFQ's counters checked against the structures they count.

use super::Cfq;
use crate::ensure_invariant;
use crate::scheduler::InvariantViolation;

const WHAT: &str = "cfq";

impl Cfq {
    /// Checks CFQ's bookkeeping:
    ///
    /// - `rq_queued` equals the stored requests and `queued_parts` their parts; each live queue's sort list holds
    ///   exactly the stored requests of that queue, and its `prio_pending` counts their metadata requests;
    /// - `busy_queues` (`busy_sync_queues`) equals the live (sync) queues on a service tree, a queue is busy exactly
    ///   when it has a tree position, and it is on that tree at that position; the trees hold nothing else;
    /// - each group's `nr_cfqq` equals its busy queues;
    /// - `rq_in_driver` equals the requests on the device, split into `in_flight` by their queue's sync flag; each
    ///   queue's and group's `dispatched` equals its requests on the device;
    /// - no dispatch call ever ran out of queue switches or needed the liveness guard.
    pub(super) fn check(&self) -> Result<(), InvariantViolation> {
        ensure_invariant!(
            self.select_rounds_exhausted == 0 && self.forced == 0,
            WHAT,
            "{} dispatch calls ran out of their {} queue switches; the liveness guard forced {} dispatches",
            self.select_rounds_exhausted,
            super::dispatch::MAX_SELECT_ROUNDS,
            self.forced
        );
        let nq = self.queues.len();
        let mut stored = vec![0usize; nq];
        let mut meta = vec![0u32; nq];
        let (mut held, mut parts) = (0u32, 0usize);
        for s in self.rqs.iter().flatten() {
            held += 1;
            parts += s.rq.parts();
            let q = s.queue as usize;
            ensure_invariant!(
                q < nq && self.queues[q].live,
                WHAT,
                "request {:?} is in dead queue {q}",
                s.rq.id
            );
            stored[q] += 1;
            meta[q] += u32::from(s.rq.meta);
        }
        ensure_invariant!(
            held == self.rq_queued,
            WHAT,
            "rq_queued {} != {held} stored requests",
            self.rq_queued
        );
        ensure_invariant!(
            parts == self.queued_parts,
            WHAT,
            "queued_parts {} != {parts} stored request parts",
            self.queued_parts
        );
        let mut on_device = vec![0u32; nq];
        let mut in_flight = [0u32; 2];
        for f in self.inflight.values() {
            let q = f.queue as usize;
            ensure_invariant!(
                q < nq,
                WHAT,
                "a request on the device names queue {q}, which does not exist"
            );
            on_device[q] += 1;
            in_flight[usize::from(self.queues[q].sync)] += 1;
        }
        ensure_invariant!(
            self.rq_in_driver as usize == self.inflight.len() && in_flight == self.in_flight,
            WHAT,
            "rq_in_driver {} and in_flight {:?} for {} requests on the device ({in_flight:?} by sync)",
            self.rq_in_driver,
            self.in_flight,
            self.inflight.len()
        );
        let (mut busy, mut busy_sync) = (0u32, 0u32);
        let mut group_busy = vec![0u32; self.groups.len()];
        let mut group_dispatched = vec![0u32; self.groups.len()];
        let mut positioned = 0usize;
        for (q, queue) in self.queues.iter().enumerate() {
            if !queue.live {
                ensure_invariant!(
                    on_device[q] == 0 && !queue.on_rr,
                    WHAT,
                    "free queue {q} is busy or has requests on the device"
                );
                continue;
            }
            ensure_invariant!(
                queue.sort.len() == stored[q] && queue.prio_pending == meta[q],
                WHAT,
                "queue {q}: {} sorted and {} metadata requests counted, {} and {} stored",
                queue.sort.len(),
                queue.prio_pending,
                stored[q],
                meta[q]
            );
            ensure_invariant!(
                queue.dispatched == on_device[q],
                WHAT,
                "queue {q}: dispatched {} != {} requests on the device",
                queue.dispatched,
                on_device[q]
            );
            let g = queue.group as usize;
            ensure_invariant!(
                g < self.groups.len(),
                WHAT,
                "queue {q} names group {g}, which does not exist"
            );
            group_dispatched[g] += queue.dispatched;
            ensure_invariant!(
                queue.on_rr == queue.pos.is_some(),
                WHAT,
                "queue {q}: on_rr {} but tree position {:?}",
                queue.on_rr,
                queue.pos
            );
            if let Some(pos) = queue.pos {
                positioned += 1;
                ensure_invariant!(
                    self.groups[g].trees[pos.tree].contains((pos.key, pos.seq), q as u32),
                    WHAT,
                    "queue {q} is not on tree {} of group {g} at its position",
                    pos.tree
                );
            }
            if queue.on_rr {
                busy += 1;
                busy_sync += u32::from(queue.sync);
                group_busy[g] += 1;
            }
        }
        ensure_invariant!(
            busy == self.busy_queues && busy_sync == self.busy_sync_queues,
            WHAT,
            "busy_queues {} / busy_sync_queues {} for {busy} / {busy_sync} busy queues",
            self.busy_queues,
            self.busy_sync_queues
        );
        let on_trees: usize = self.groups.iter().flat_map(|g| g.trees.iter()).map(|t| t.count()).sum();
        ensure_invariant!(
            on_trees == positioned,
            WHAT,
            "{on_trees} queues on the service trees, {positioned} with a position"
        );
        for (g, grp) in self.groups.iter().enumerate() {
            ensure_invariant!(
                grp.nr_cfqq == group_busy[g] && grp.dispatched == group_dispatched[g],
                WHAT,
                "group {g}: nr_cfqq {} and dispatched {} for {} busy queues and {} requests on the device",
                grp.nr_cfqq,
                grp.dispatched,
                group_busy[g],
                group_dispatched[g]
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tunables::{Params, TUNABLES};
    use super::Cfq;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::tunables::TunableValues;
    use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, RequestId};

    fn busy_cfq() -> Cfq {
        let dev = DeviceInfo::hdd();
        let values = TunableValues::parse("cfq", &TUNABLES, &dev, &[] as &[&str]).expect("defaults");
        let mut c = Cfq::new(&dev, Params::from_values(&values));
        for f in 1..=3u32 {
            c.flow_started(&FlowInfo::new(FlowId(f)), 0);
            for i in 0..3u64 {
                let id = RequestId(u64::from(f) * 10 + i);
                let rq = Request::new(id, FlowId(f), Direction::Read, true, u64::from(f) << 20 | (i * 64), 8);
                c.insert(rq, 0);
            }
        }
        assert!(matches!(c.dispatch(0), Decision::Dispatch(_)));
        c
    }

    #[test]
    fn a_healthy_cfq_passes() {
        busy_cfq().check().expect("healthy");
    }

    #[test]
    fn broken_counters_fail() {
        let mut c = busy_cfq();
        c.busy_queues += 1;
        assert!(c.check().expect_err("busy_queues").detail.contains("busy_queues"));
        c.busy_queues -= 1;
        c.rq_in_driver += 1;
        assert!(c.check().expect_err("rq_in_driver").detail.contains("rq_in_driver"));
        c.rq_in_driver -= 1;
        c.rq_queued += 1;
        assert!(c.check().expect_err("rq_queued").detail.contains("rq_queued"));
        c.rq_queued -= 1;
        c.groups[0].nr_cfqq += 1;
        assert!(c.check().expect_err("nr_cfqq").detail.contains("nr_cfqq"));
        c.groups[0].nr_cfqq -= 1;
        c.check().expect("repaired");
        c.select_rounds_exhausted += 1;
        assert!(c.check().expect_err("round cap hit").detail.contains("queue switches"));
    }
}
