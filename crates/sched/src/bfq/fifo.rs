//! Requests inside one BFQ queue (`bfq_add_request`, `bfq_check_fifo`, `bfq_choose_req`; docs/SCHEDULERS.md, BFQ): a
//! sector-sorted set, a FIFO with per-request deadlines that is consulted at most once per service slot, and the choice
//! of the next request by a one-way elevator with a penalised short backward seek.

use super::ids::{QueueId, SlotId};
use crate::merge::{absorb, MergeIndex, MergeKind};
use crate::slab::{Slab, SlabKey};
use crate::sorted::SortedSet;
use crate::types::{Request, Time};
use std::collections::VecDeque;

/// One stored request.
#[derive(Debug, Clone)]
pub struct Slot {
    /// The request.
    pub rq: Request,
    /// The queue holding it.
    pub queue: QueueId,
    /// FIFO deadline (ns).
    pub fifo_time: Time,
}

/// All queued requests of the policy, in reusable slots, with the merge index over them.
#[derive(Debug, Clone, Default)]
pub struct Store {
    slots: Slab<SlotId, Slot>,
    /// Back/front merge lookup; handles are raw slot indices ([`SlotId`]'s index).
    pub index: MergeIndex,
}

impl Store {
    /// Stores `rq` for `queue` with deadline `fifo_time`; returns its slot.
    pub fn alloc(&mut self, rq: Request, queue: QueueId, fifo_time: Time) -> SlotId {
        let id = self.slots.insert(Slot { rq, queue, fifo_time });
        self.index.add(u64::from(id.index()), &self.slots[id].rq);
        id
    }

    /// Takes the request out of slot `i`, freeing the slot.
    pub fn take(&mut self, i: SlotId) -> Option<Request> {
        let s = self.slots.remove(i)?;
        self.index.remove(u64::from(i.index()), &s.rq);
        Some(s.rq)
    }

    /// The slot `i`, if it still holds the request it was issued for.
    pub fn slot(&self, i: SlotId) -> Option<&Slot> {
        self.slots.get(i)
    }

    /// The live slot with raw index `h` (a merge-index handle) and its key.
    pub fn at_handle(&self, h: u64) -> Option<(SlotId, &Slot)> {
        let k = self.slots.key_at(u32::try_from(h).ok()?)?;
        Some((k, &self.slots[k]))
    }

    /// The request in slot `i`.
    pub fn rq(&self, i: SlotId) -> Option<&Request> {
        self.slots.get(i).map(|s| &s.rq)
    }

    /// Merges `rq` into the request in slot `i` (`kind` says which end), keeping the merge index in step;
    /// returns the stored request's (old, new) start sector, or `None` if the slot is stale.
    pub fn merge_into(&mut self, i: SlotId, rq: Request, kind: MergeKind) -> Option<(u64, u64)> {
        let s = self.slots.get_mut(i)?;
        let h = u64::from(i.index());
        self.index.remove(h, &s.rq);
        let old = s.rq.sector;
        absorb(&mut s.rq, rq, kind);
        self.index.add(h, &s.rq);
        Some((old, s.rq.sector))
    }

    /// Number of stored requests.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True if no request is stored.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Stored requests with their slots, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (SlotId, &Slot)> + '_ {
        self.slots.iter()
    }

    /// The slab's own bookkeeping (see [`Slab::check_invariants`]).
    pub fn check_slab(&self) -> Result<(), String> {
        self.slots.check_invariants()
    }
}

/// What the elevator compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cand {
    /// First sector.
    pub sector: u64,
    /// Sync request.
    pub sync: bool,
    /// Metadata request.
    pub meta: bool,
}

impl Cand {
    /// The candidate view of a request.
    pub fn of(rq: &Request) -> Self {
        Cand {
            sector: rq.sector,
            sync: rq.sync,
            meta: rq.meta,
        }
    }
}

/// `bfq_choose_req`: true if `a` should be served before `b`, for a head at sector `last`.
///
/// Sync beats async, then metadata beats data; then a one-way elevator: a forward distance counts as is, a
/// backward one within `back_max` sectors counts `penalty` times, a farther backward one "wraps". The smaller
/// distance wins, ties to the higher sector; if both wrap, the lower sector wins.
pub fn choose_first(a: Cand, b: Cand, last: u64, back_max: u64, penalty: u64) -> bool {
    if a.sync != b.sync {
        return a.sync;
    }
    if a.meta != b.meta {
        return a.meta;
    }
    let dist = |s: u64| -> Option<u64> {
        if s >= last {
            Some(s - last)
        } else if s.saturating_add(back_max) >= last {
            Some((last - s).saturating_mul(penalty))
        } else {
            None
        }
    };
    match (dist(a.sector), dist(b.sector)) {
        (Some(da), Some(db)) => {
            if da != db {
                da < db
            } else {
                a.sector >= b.sector
            }
        }
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => a.sector <= b.sector,
    }
}

/// The requests of one queue.
#[derive(Debug, Clone, Default)]
pub struct QueueRqs {
    /// (sector, slot), sector-sorted.
    pub sort: SortedSet<(u64, SlotId)>,
    /// Slots in arrival order; entries of dispatched requests (stale keys) are dropped lazily.
    pub fifo: VecDeque<SlotId>,
    /// The request to serve next.
    pub next: Option<SlotId>,
}

impl QueueRqs {
    /// Number of queued requests (merged requests count once).
    pub fn len(&self) -> usize {
        self.sort.len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sort.is_empty()
    }

    /// Adds the request in `slot`; it becomes `next` if the elevator prefers it to the current one.
    pub fn add(&mut self, slot: SlotId, store: &Store, last: u64, back_max: u64, penalty: u64) {
        let Some(rq) = store.rq(slot) else {
            return;
        };
        self.sort.insert((rq.sector, slot));
        self.fifo.push_back(slot);
        self.next = match self.next.and_then(|n| store.rq(n).map(|r| (n, r))) {
            Some((n, cur)) if !choose_first(Cand::of(rq), Cand::of(cur), last, back_max, penalty) => Some(n),
            _ => Some(slot),
        };
    }

    /// Removes the request in `slot` (whose sector is `sector`) and, if it was `next`, picks the new `next`
    /// between its sector-order neighbours.
    pub fn remove(&mut self, slot: SlotId, sector: u64, store: &Store, back_max: u64, penalty: u64) {
        let key = (sector, slot);
        let (after, before) = if self.next == Some(slot) {
            self.sort.remove_with_neighbours(&key)
        } else {
            self.sort.remove(&key);
            (None, None)
        };
        if self.sort.is_empty() {
            self.fifo.clear();
            self.next = None;
            return;
        }
        if self.next != Some(slot) {
            return;
        }
        let after = after.or_else(|| self.sort.first());
        let last = sector;
        self.next = match (after, before) {
            (Some(a), Some(b)) if a != b => {
                let (ca, cb) = (store.rq(a.1).map(Cand::of), store.rq(b.1).map(Cand::of));
                match (ca, cb) {
                    (Some(x), Some(y)) => Some(if choose_first(x, y, last, back_max, penalty) {
                        a.1
                    } else {
                        b.1
                    }),
                    _ => Some(a.1),
                }
            }
            (Some(a), _) => Some(a.1),
            (None, Some(b)) => Some(b.1),
            (None, None) => None,
        };
    }

    /// Moves `slot` in the sorted set after a front merge changed its start sector.
    pub fn resort(&mut self, slot: SlotId, old_sector: u64, new_sector: u64) {
        self.sort.replace(&(old_sector, slot), (new_sector, slot));
    }

    /// The oldest queued request if its deadline has passed at `now` (stale entries are dropped).
    pub fn expired_head(&mut self, store: &Store, queue: QueueId, now: Time) -> Option<SlotId> {
        while let Some(&slot) = self.fifo.front() {
            match store.slot(slot) {
                Some(s) if s.queue == queue => {
                    return (now >= s.fifo_time).then_some(slot);
                }
                _ => {
                    self.fifo.pop_front();
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Direction, FlowId, RequestId};

    fn q0() -> QueueId {
        QueueId::from_parts(0, 0)
    }

    fn c(sector: u64) -> Cand {
        Cand {
            sector,
            sync: true,
            meta: false,
        }
    }

    // The elevator: forward 100 beats backward 60 (counted 120 with penalty 2); backward 40 (80) beats forward
    // 100; a backward seek past back_seek_max wraps and loses to any forward one; sync beats async and meta beats
    // data before distances are looked at.
    #[test]
    fn back_seek_choice() {
        let bm = 32768;
        assert!(choose_first(c(1100), c(940), 1000, bm, 2));
        assert!(choose_first(c(960), c(1100), 1000, bm, 2));
        assert!(
            choose_first(c(1_000_000), c(0), 100_000, bm, 2),
            "0 is 100000 back: wrapped"
        );
        assert!(
            choose_first(c(10), c(20), 100_000, bm, 2),
            "both wrapped: lower sector first"
        );
        assert!(choose_first(c(1100), c(900), 1000, bm, 2), "tie 100 vs 200");
        assert!(choose_first(c(1100), c(950), 1000, bm, 2) && !choose_first(c(950), c(1100), 1000, bm, 2));
        assert!(
            choose_first(c(1100), c(950), 1000, bm, 2),
            "equal 100/100: higher sector"
        );
        let mut a = c(5000);
        a.sync = false;
        assert!(!choose_first(a, c(900_000), 4999, bm, 2), "sync first");
        let mut m = c(900_000);
        m.meta = true;
        assert!(choose_first(m, c(5000), 4999, bm, 2), "meta first");
    }

    fn rq(id: u64, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(0), Direction::Read, true, sector, 8)
    }

    // After removing the served request the next one is its forward neighbour in sector order, and the FIFO head
    // is reported only once its deadline has passed, skipping entries of requests already gone.
    #[test]
    fn next_and_fifo() {
        let mut st = Store::default();
        let mut q = QueueRqs::default();
        let s1 = st.alloc(rq(1, 5000), q0(), 100);
        q.add(s1, &st, 0, 32768, 2);
        let s2 = st.alloc(rq(2, 1000), q0(), 200);
        q.add(s2, &st, 0, 32768, 2);
        let s3 = st.alloc(rq(3, 3000), q0(), 300);
        q.add(s3, &st, 0, 32768, 2);
        assert_eq!(q.next, Some(s2), "closest forward from 0");
        q.remove(s2, 1000, &st, 32768, 2);
        st.take(s2);
        assert_eq!(q.next, Some(s3));
        assert_eq!(q.expired_head(&st, q0(), 99), None);
        assert_eq!(q.expired_head(&st, q0(), 100), Some(s1));
        q.remove(s1, 5000, &st, 32768, 2);
        st.take(s1);
        assert_eq!(
            q.expired_head(&st, q0(), 250),
            None,
            "the stale entry of 2 is skipped; 3 expires at 300"
        );
        assert_eq!(q.expired_head(&st, q0(), 300), Some(s3));
    }

    // When the request served next leaves, the elevator chooses between its two sector-order neighbours (the
    // kernel's `bfq_find_next_rq`: the next one up, else the first, against the one below), from the removed
    // request's position. Queued 1000, 2900, 3000 and 10 000 with the head at 2950: 3000 is next (50 forward).
    // Once it is served, 2900 is 100 back (200 with the penalty of 2) and 10 000 is 7000 forward: 2900 wins. Taking
    // the forward neighbour without the comparison, or the first request instead of the forward neighbour, gives
    // another answer. The store counts what it holds.
    #[test]
    fn the_next_request_is_the_better_of_the_removed_ones_neighbours() {
        let (bm, pen) = (32768, 2);
        let mut st = Store::default();
        assert!(st.is_empty());
        let mut q = QueueRqs::default();
        let slots: Vec<SlotId> = [1000u64, 2900, 3000, 10_000]
            .iter()
            .enumerate()
            .map(|(i, &sector)| {
                let s = st.alloc(rq(i as u64, sector), q0(), 0);
                q.add(s, &st, 2950, bm, pen);
                s
            })
            .collect();
        assert_eq!((st.len(), st.is_empty()), (4, false));
        assert_eq!(q.next, Some(slots[2]), "3000: 50 forward of 2950");
        q.remove(slots[2], 3000, &st, bm, pen);
        st.take(slots[2]);
        assert_eq!(
            q.next,
            Some(slots[1]),
            "2900 (100 back, 200 penalised) beats 10 000 (7000 forward)"
        );
        // Served 2900: its neighbours are 10 000 above and 1000 below (1900 back, 3800 penalised): 10 000 is 7100
        // forward, so 1000 wins; the first request (1000) is not the forward neighbour (10 000).
        q.remove(slots[1], 2900, &st, bm, pen);
        st.take(slots[1]);
        assert_eq!(q.next, Some(slots[0]));
        // Removing a request that is not `next` (10 000, say by a merge) leaves `next` as it is.
        q.remove(slots[3], 10_000, &st, bm, pen);
        st.take(slots[3]);
        assert_eq!(q.next, Some(slots[0]));
        assert_eq!(st.len(), 1);
    }

    // A front merge moves a request's start: `resort` keeps the sorted set keyed by the new start, so that removing
    // the request by its new sector empties the queue (a stale key would stay behind and count as a request).
    #[test]
    fn a_front_merged_request_is_found_by_its_new_start() {
        let mut st = Store::default();
        let mut q = QueueRqs::default();
        let s = st.alloc(rq(1, 5000), q0(), 0);
        q.add(s, &st, 0, 32768, 2);
        let (old, new) = st.merge_into(s, rq(2, 4992), MergeKind::Front).expect("merged");
        assert_eq!((old, new), (5000, 4992));
        q.resort(s, old, new);
        q.remove(s, new, &st, 32768, 2);
        assert!(q.is_empty(), "{} left", q.len());
        assert_eq!(q.next, None);
    }

    // A FIFO entry whose request has moved to another queue (queue merging moves requests) is not this queue's
    // expired head: the deadline check skips it.
    #[test]
    fn a_request_moved_to_another_queue_is_not_this_queues_fifo_head() {
        let mut st = Store::default();
        let mut q = QueueRqs::default();
        let s = st.alloc(rq(1, 5000), q0(), 100);
        q.add(s, &st, 0, 32768, 2);
        let other = QueueId::from_parts(1, 0);
        st.slots.get_mut(s).expect("live").queue = other;
        assert_eq!(q.expired_head(&st, q0(), 1000), None);
    }
}
