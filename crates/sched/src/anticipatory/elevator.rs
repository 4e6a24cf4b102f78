//! One direction's queue for AS: requests sorted by sector for the elevator, plus a FIFO by arrival for expiry, and
//! the elevator's choice between two candidates with short, penalised back seeks (kernel: `as_choose_req`,
//! `as_find_next_rq`; docs/SCHEDULERS.md, anticipatory).

use std::collections::{BTreeSet, VecDeque};

/// Longest backward seek the elevator accepts instead of wrapping around, sectors (1024*1024 = 512 MiB): a short seek
/// back is cheaper than sweeping to the end of the disk and back.
pub const MAXBACK: u64 = 1024 * 1024;

/// Cost multiplier of a backward seek relative to a forward seek of the same distance (x2): disks read ahead
/// forwards, so going back costs more than the distance alone suggests.
pub const BACK_PENALTY: u64 = 2;

/// Key of a queued request in the sorted set: (start sector, handle). The handle breaks ties between requests that
/// start at the same sector.
pub type SortKey = (u64, u64);

/// Elevator cost of moving the head from `last` to `sector`; `None` if the request is further behind than
/// [`MAXBACK`] (the elevator would have to wrap around to reach it).
fn cost(last: u64, sector: u64) -> Option<u64> {
    if sector >= last {
        Some(sector - last)
    } else if sector.saturating_add(MAXBACK) >= last {
        Some((last - sector).saturating_mul(BACK_PENALTY))
    } else {
        None
    }
}

/// Which of two candidates the elevator serves next with the head at `last` (the end of the last dispatched request
/// in this direction): the cheaper one in front of the head (back seeks counted double), any reachable one before one
/// that needs a wrap, and among two that need a wrap the lower sector. Ties go to the higher sector, as in AS.
pub fn choose(last: u64, a: Option<SortKey>, b: Option<SortKey>) -> Option<SortKey> {
    let (a, b) = match (a, b) {
        (None, x) | (x, None) => return x,
        (Some(a), Some(b)) if a == b => return Some(a),
        (Some(a), Some(b)) => (a, b),
    };
    let pick = match (cost(last, a.0), cost(last, b.0)) {
        (Some(_), None) => a,
        (None, Some(_)) => b,
        (None, None) => {
            if a.0 <= b.0 {
                a
            } else {
                b
            }
        }
        (Some(ca), Some(cb)) => {
            if ca < cb || (ca == cb && a.0 >= b.0) {
                a
            } else {
                b
            }
        }
    };
    Some(pick)
}

/// One direction (sync or async) of queued requests.
#[derive(Debug, Default)]
pub struct DirQueue {
    /// Requests by start sector.
    pub sorted: BTreeSet<SortKey>,
    /// Handles in arrival order. Entries dispatched through the elevator stay here until they reach the head and are
    /// skipped there (the caller knows which handles are still queued).
    pub fifo: VecDeque<u64>,
}

impl DirQueue {
    /// Number of queued requests (merged parts count once).
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// The elevator's next request after dispatching the one at `gone` (already removed from `sorted`): the better
    /// of its sector successor (wrapping to the lowest sector) and its predecessor.
    pub fn next_after(&self, last: u64, gone: SortKey) -> Option<SortKey> {
        let succ = self
            .sorted
            .range(gone..)
            .next()
            .or_else(|| self.sorted.iter().next())
            .copied();
        let pred = self.sorted.range(..gone).next_back().copied();
        choose(last, succ, pred)
    }

    /// The oldest still-queued handle, dropping stale FIFO entries; `queued` says whether a handle is still queued.
    pub fn fifo_head(&mut self, queued: impl Fn(u64) -> bool) -> Option<u64> {
        while let Some(&h) = self.fifo.front() {
            if queued(h) {
                return Some(h);
            }
            self.fifo.pop_front();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_back_seek_costs_double() {
        // Head at 1000: 900 behind costs 200, 1150 ahead costs 150, so forward wins; 950 behind costs 100 and wins.
        assert_eq!(choose(1000, Some((900, 1)), Some((1150, 2))), Some((1150, 2)));
        assert_eq!(choose(1000, Some((950, 1)), Some((1150, 2))), Some((950, 1)));
    }

    #[test]
    fn far_behind_needs_a_wrap() {
        // Anything reachable beats a request more than MAXBACK behind; two wrapped ones go lowest sector first.
        let last = 10 * MAXBACK;
        assert_eq!(choose(last, Some((1, 1)), Some((last + 50 * MAXBACK, 2))).unwrap().1, 2);
        assert_eq!(choose(last, Some((5, 1)), Some((1, 2))).unwrap().1, 2);
    }

    #[test]
    fn next_after_wraps_to_lowest() {
        // Nothing in front and the only other request far behind: the successor wraps to it.
        let mut q = DirQueue::default();
        q.sorted.insert((8, 1));
        assert_eq!(q.next_after(50 * MAXBACK, (50 * MAXBACK, 9)), Some((8, 1)));
    }

    // The back-seek limit written out as the kernel's figure (`MAXBACK`, 1024 * 1024 sectors): a request exactly
    // 1 048 576 sectors behind the head is reachable, at twice the distance (2 097 152), and beats one 3 000 000
    // ahead; one sector further back it needs a wrap and loses.
    #[test]
    fn the_longest_back_seek_is_1_048_576_sectors() {
        let last = 10_000_000;
        let ahead = Some((last + 3_000_000, 2));
        assert_eq!(choose(last, Some((last - 1_048_576, 1)), ahead).unwrap().1, 1);
        assert_eq!(choose(last, Some((last - 1_048_577, 1)), ahead).unwrap().1, 2);
    }

    // Equal costs go to the higher sector, whichever argument it is (`as_choose_req`): head at 1000, 900 behind
    // costs 2 x 100 = 200, 1200 ahead costs 200: 1200 is served.
    #[test]
    fn a_tie_goes_to_the_higher_sector() {
        assert_eq!(choose(1000, Some((900, 1)), Some((1200, 2))).unwrap().1, 2);
        assert_eq!(choose(1000, Some((1200, 2)), Some((900, 1))).unwrap().1, 2);
    }
}
