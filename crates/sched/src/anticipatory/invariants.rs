//! The anticipatory scheduler's counters checked against the structures they count.

use super::Anticipatory;
use crate::ensure_invariant;
use crate::scheduler::InvariantViolation;
use crate::types::FlowId;
use std::collections::{HashMap, HashSet};

const WHAT: &str = "anticipatory";

impl Anticipatory {
    /// Checks the bookkeeping: `queued_parts` equals the parts of the queued requests; every queued request is in
    /// its direction's sorted list under its start sector and in its FIFO, and the sorted lists hold nothing else;
    /// each known flow's `queued` equals its queued requests, and the flows' `in_flight` add up to the scheduler's;
    /// the merge index names only queued requests.
    pub(super) fn check(&self) -> Result<(), InvariantViolation> {
        let parts: usize = self.entries.values().map(|e| e.rq.parts()).sum();
        ensure_invariant!(
            parts == self.queued_parts,
            WHAT,
            "queued_parts {} != {parts} queued request parts",
            self.queued_parts
        );
        let sorted: usize = self.dirs.iter().map(|d| d.sorted.len()).sum();
        ensure_invariant!(
            sorted == self.entries.len(),
            WHAT,
            "{sorted} requests in the sorted lists, {} queued",
            self.entries.len()
        );
        let in_fifo: [HashSet<u64>; 2] = [
            self.dirs[0].fifo.iter().copied().collect(),
            self.dirs[1].fifo.iter().copied().collect(),
        ];
        let mut per_flow: HashMap<FlowId, u32> = HashMap::new();
        for (&h, e) in self.entries.iter() {
            ensure_invariant!(
                self.dirs[e.dir].sorted.contains(&(e.rq.sector, h)) && in_fifo[e.dir].contains(&h),
                WHAT,
                "request {h} is missing from the sorted list or FIFO of its direction"
            );
            *per_flow.entry(e.rq.flow).or_default() += 1;
        }
        for (flow, f) in &self.flows {
            let n = per_flow.get(flow).copied().unwrap_or(0);
            ensure_invariant!(
                f.queued == n,
                WHAT,
                "flow {flow:?}: queued {} != {n} queued requests",
                f.queued
            );
        }
        let flows_in_flight: u32 = self.flows.values().map(|f| f.in_flight).sum();
        ensure_invariant!(
            flows_in_flight == self.in_flight,
            WHAT,
            "in_flight {} != {flows_in_flight} summed over the flows",
            self.in_flight
        );
        self.index
            .check_invariants(self.entries.len(), |h| self.entries.get(&h).map(|e| &e.rq))
            .map_err(|e| InvariantViolation::new("anticipatory merge index", e))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Anticipatory, Params};
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, RequestId};

    #[test]
    fn broken_counters_fail() {
        let mut s = Anticipatory::new(&DeviceInfo::hdd(), Params::default());
        for f in 1..=2u32 {
            s.flow_started(&FlowInfo::new(FlowId(f)), 0);
            for i in 0..3u64 {
                let id = RequestId(u64::from(f) * 10 + i);
                s.insert(
                    Request::new(id, FlowId(f), Direction::Read, true, u64::from(f) << 20 | (i * 64), 8),
                    0,
                );
            }
        }
        assert!(matches!(s.dispatch(0), Decision::Dispatch(_)));
        s.check().expect("healthy");
        s.in_flight += 1;
        assert!(s.check().expect_err("in_flight").detail.contains("in_flight"));
        s.in_flight -= 1;
        s.queued_parts += 1;
        assert!(s.check().expect_err("queued_parts").detail.contains("queued_parts"));
        s.queued_parts -= 1;
        s.flows.get_mut(&FlowId(2)).expect("flow").queued += 1;
        assert!(s.check().expect_err("flow queued").detail.contains("queued"));
    }
}
