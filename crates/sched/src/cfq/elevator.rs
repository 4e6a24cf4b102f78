//! The one-way elevator with short back seeks that CFQ (and BFQ) use to pick between two queued requests
//! (kernel: `cfq_choose_req`, `bfq_choose_req`; docs/SCHEDULERS.md, BFQ, FIFO).

/// What the elevator needs to know about a candidate request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Synchronous request.
    pub sync: bool,
    /// Metadata (REQ_PRIO) request.
    pub meta: bool,
    /// First sector.
    pub sector: u64,
}

/// Cost of reaching `sector` from the head at `head`: forward distance as is, a backward distance within
/// `back_max` sectors multiplied by `penalty`, `None` ("wrapped") when farther behind.
fn cost(sector: u64, head: u64, back_max: u64, penalty: u64) -> Option<u64> {
    if sector >= head {
        Some(sector - head)
    } else if head - sector <= back_max {
        Some((head - sector).saturating_mul(penalty))
    } else {
        None
    }
}

/// True if `a` should be served before `b` with the head at `head`: sync first, then metadata, then the smaller
/// elevator cost (ties to the higher sector); when both are wrapped, the lower sector (one long back seek, then
/// forward again).
pub fn prefer_first(a: Candidate, b: Candidate, head: u64, back_max: u64, penalty: u64) -> bool {
    if a.sync != b.sync {
        return a.sync;
    }
    if a.meta != b.meta {
        return a.meta;
    }
    match (
        cost(a.sector, head, back_max, penalty),
        cost(b.sector, head, back_max, penalty),
    ) {
        (Some(ca), Some(cb)) => ca < cb || (ca == cb && a.sector >= b.sector),
        (Some(_), None) => true,
        (None, Some(_)) => false,
        (None, None) => a.sector <= b.sector,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(sector: u64) -> Candidate {
        Candidate {
            sync: true,
            meta: false,
            sector,
        }
    }

    // With penalty 2, a back seek of 50 sectors (cost 100) beats a forward seek of 150, but a back seek of 100
    // (cost 200) loses to it; beyond back_seek_max the request is "wrapped" and any forward one wins.
    #[test]
    fn short_back_seeks_cost_double() {
        let head = 10_000;
        assert!(prefer_first(c(head - 50), c(head + 150), head, 32768, 2));
        assert!(!prefer_first(c(head - 100), c(head + 150), head, 32768, 2));
        assert!(!prefer_first(c(1), c(head + 1_000_000), 40_000, 32768, 2));
        // Both wrapped: the lower sector first.
        assert!(prefer_first(c(5), c(7), 1_000_000, 32768, 2));
        // Equal cost: the higher sector.
        assert!(prefer_first(c(head + 100), c(head - 50), head, 32768, 2));
    }

    // Sync beats async and metadata beats data regardless of position.
    #[test]
    fn sync_and_meta_first() {
        let a = Candidate { sync: false, ..c(100) };
        assert!(!prefer_first(a, c(1_000_000_000), 100, 32768, 2));
        let m = Candidate { meta: true, ..c(0) };
        assert!(prefer_first(m, c(100), 100, 32768, 2));
    }

    // `cfq_choose_req`: a request behind the head is reached by a back seek when `sector + back_max >= head`, so a
    // back seek of exactly back_seek_max sectors (32 768, the default 16 MiB) is taken at twice its distance (65 536
    // against a forward seek of 70 000); one sector farther it wraps and any forward request goes first. A wrapped
    // request half the disk behind loses to one twice as far ahead. The head sits far from sector 0 so that a
    // distance computed from absolute sectors would show.
    #[test]
    fn a_back_seek_of_exactly_back_seek_max_is_taken_and_one_sector_more_wraps() {
        let (head, max) = (1_000_000_000, 32_768);
        assert!(prefer_first(c(head - max), c(head + 70_000), head, max, 2));
        assert!(!prefer_first(c(head - max - 1), c(head + 70_000), head, max, 2));
        assert!(!prefer_first(c(head / 2), c(head * 3), head, max, 2));
    }

    // Equal elevator costs go to the higher sector whichever comes first (the kernel's `s1 >= s2`): 50 sectors
    // back at penalty 2 and 100 forward cost 100 each, and the forward one wins from both sides. A smaller cost wins
    // whatever the sectors: 200 forward loses to 50 back (cost 100) although it lies higher.
    #[test]
    fn equal_costs_go_to_the_higher_sector_and_a_smaller_cost_wins_regardless() {
        let head = 10_000;
        assert!(!prefer_first(c(head - 50), c(head + 100), head, 32_768, 2));
        assert!(prefer_first(c(head + 100), c(head - 50), head, 32_768, 2));
        assert!(!prefer_first(c(head + 200), c(head - 50), head, 32_768, 2));
        assert!(prefer_first(c(head - 50), c(head + 200), head, 32_768, 2));
    }
}
