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
}
