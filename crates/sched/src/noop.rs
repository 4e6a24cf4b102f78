//! NOOP (`none` in blk-mq): one FIFO, with back and front merging of contiguous requests up to the device's maximum
//! request size (kernel: `noop_add_request`, `noop_dispatch`; docs/SCHEDULERS.md, noop).

use crate::device::DeviceInfo;
use crate::ensure_invariant;
use crate::merge::{absorb, MergeIndex};
use crate::scheduler::{InvariantViolation, Scheduler};
use crate::tunables::{TunableSpec, TunableValues};
use crate::types::{Decision, FlowId, FlowInfo, Request, Time};
use std::collections::VecDeque;

/// NOOP has no tunables of its own.
pub static TUNABLES: [TunableSpec; 0] = [];

/// First-in first-out with merging.
pub struct Noop {
    /// Queue slots; `None` for a request merged away. Slot `i` has handle `base + i`.
    fifo: VecDeque<Option<Request>>,
    base: u64,
    index: MergeIndex,
    max_sectors: u32,
    queued: usize,
}

impl Noop {
    /// A NOOP policy for `dev`.
    pub fn new(dev: &DeviceInfo) -> Self {
        Noop {
            fifo: VecDeque::new(),
            base: 0,
            index: MergeIndex::new(),
            max_sectors: dev.max_sectors.max(1),
            queued: 0,
        }
    }

    /// Registry constructor.
    pub fn build(dev: &DeviceInfo, _t: &TunableValues) -> Box<dyn Scheduler> {
        Box::new(Noop::new(dev))
    }

    fn slot(&self, handle: u64) -> Option<&Request> {
        let i = handle.checked_sub(self.base)?;
        self.fifo.get(usize::try_from(i).ok()?)?.as_ref()
    }
}

impl Scheduler for Noop {
    /// A legacy (single-queue block layer) elevator: sync and async requests have pools of their own.
    fn separate_sync_pool(&self) -> bool {
        true
    }

    fn name(&self) -> &'static str {
        "noop"
    }

    fn flow_started(&mut self, _flow: &FlowInfo, _now: Time) {}

    fn flow_exited(&mut self, _flow: FlowId, _now: Time) {}

    fn would_merge(&self, rq: &Request) -> bool {
        self.index.find(rq, self.max_sectors, true, |h| self.slot(h)).is_some()
    }

    fn insert(&mut self, rq: Request, _now: Time) {
        self.queued += rq.parts();
        if let Some((h, kind)) = self.index.find(&rq, self.max_sectors, true, |h| self.slot(h)) {
            let i = (h - self.base) as usize;
            if let Some(target) = self.fifo[i].as_mut() {
                self.index.remove(h, target);
                absorb(target, rq, kind);
                self.index.add(h, target);
                return;
            }
        }
        let h = self.base + self.fifo.len() as u64;
        self.index.add(h, &rq);
        self.fifo.push_back(Some(rq));
    }

    fn dispatch(&mut self, _now: Time) -> Decision {
        while let Some(slot) = self.fifo.pop_front() {
            let h = self.base;
            self.base += 1;
            if let Some(rq) = slot {
                self.index.remove(h, &rq);
                self.queued -= rq.parts();
                return Decision::Dispatch(rq);
            }
        }
        Decision::Nothing
    }

    fn completed(&mut self, _rq: &Request, _now: Time) {}

    fn queued(&self) -> usize {
        self.queued
    }

    /// The queued count equals the parts of the requests in the FIFO, and the merge index names only queued
    /// requests.
    fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let parts: usize = self.fifo.iter().flatten().map(Request::parts).sum();
        ensure_invariant!(
            parts == self.queued,
            "noop",
            "queued {} != {parts} request parts in the FIFO",
            self.queued
        );
        let live = self.fifo.iter().flatten().count();
        self.index
            .check_invariants(live, |h| self.slot(h))
            .map_err(|e| InvariantViolation::new("noop merge index", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Direction, RequestId};

    fn rq(id: u64, flow: u32, sector: u64, sectors: u32) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, sectors)
    }

    fn next(n: &mut Noop) -> Request {
        match n.dispatch(0) {
            Decision::Dispatch(r) => r,
            d => panic!("expected a dispatch, got {d:?}"),
        }
    }

    #[test]
    fn fifo_order_regardless_of_sector() {
        let mut n = Noop::new(&DeviceInfo::hdd());
        n.insert(rq(1, 0, 9000, 8), 0);
        n.insert(rq(2, 1, 10, 8), 0);
        n.insert(rq(3, 2, 5000, 8), 0);
        let order: Vec<u64> = (0..3).map(|_| next(&mut n).id.0).collect();
        assert_eq!(order, vec![1, 2, 3]);
        assert_eq!(n.dispatch(0), Decision::Nothing);
    }

    #[test]
    fn merges_back_and_front_keeping_fifo_position() {
        let mut n = Noop::new(&DeviceInfo::hdd());
        n.insert(rq(1, 0, 100, 8), 0);
        n.insert(rq(2, 1, 500, 8), 0);
        n.insert(rq(3, 0, 108, 8), 0); // back merge into 1
        n.insert(rq(4, 0, 92, 8), 0); // front merge into 1
        assert_eq!(n.queued(), 4);
        let a = next(&mut n);
        assert_eq!((a.id.0, a.sector, a.sectors, a.parts()), (1, 92, 24, 3));
        assert_eq!(next(&mut n).id.0, 2);
        assert_eq!(n.queued(), 0);
    }

    #[test]
    fn merge_respects_max_request_size() {
        let mut dev = DeviceInfo::hdd();
        dev.max_sectors = 16;
        let mut n = Noop::new(&dev);
        n.insert(rq(1, 0, 0, 8), 0);
        n.insert(rq(2, 0, 8, 8), 0);
        n.insert(rq(3, 0, 16, 8), 0); // would make 24 > 16
        assert_eq!(next(&mut n).sectors, 16);
        assert_eq!(next(&mut n).id.0, 3);
    }

    #[test]
    fn no_merge_after_dispatch() {
        let mut n = Noop::new(&DeviceInfo::hdd());
        n.insert(rq(1, 0, 0, 8), 0);
        next(&mut n);
        n.insert(rq(2, 0, 8, 8), 0);
        assert_eq!(next(&mut n).parts(), 1);
    }

    #[test]
    fn check_invariants_catches_a_broken_queued_count() {
        let mut n = Noop::new(&DeviceInfo::hdd());
        n.insert(rq(1, 1, 0, 8), 0);
        n.insert(rq(2, 1, 8, 8), 0);
        n.insert(rq(3, 1, 800, 8), 0);
        n.check_invariants().expect("healthy");
        n.queued += 1;
        let e = n.check_invariants().expect_err("one too many");
        assert_eq!(e.what, "noop");
        n.queued -= 1;
        next(&mut n);
        n.check_invariants().expect("healthy after a dispatch");
    }
}
