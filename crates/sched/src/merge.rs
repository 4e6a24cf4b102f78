//! The shared merge layer: finds a queued request that a new one can extend, as the kernel's generic elevator does
//! (back merges through a hash of request end sectors, front merges through a lookup of start sectors).

use crate::types::{Direction, Request};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hasher for integer keys (the keys are sector numbers, never attacker-controlled).
///
/// The low bits of a product depend only on the low bits of its factors, and `HashMap` picks the bucket from the
/// low bits of the hash: so [`Hasher::finish`] folds the high half of the product into the low half. Without the
/// fold, keys that differ only in high bits (the merge keys of aligned requests of different flows, `sector << 2`
/// with `sector` a multiple of 8 and flows far apart on the disk) share buckets, the probe sequences grow with the
/// number of queued requests, and every lookup becomes a linear scan (issue 19).
#[derive(Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    // `u32` keys (flow and group ids) in one step, not through the byte loop of `write` (issue 19).
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
}

/// `HashMap` keyed by integers with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// Which end of the queued request the new one attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeKind {
    /// The new request starts where the queued one ends.
    Back,
    /// The new request ends where the queued one starts.
    Front,
}

fn key(dir: Direction, sync: bool, sector: u64) -> u64 {
    (sector << 2) | ((dir as u64) << 1) | u64::from(sync)
}

/// Index of queued requests by start and end sector, mapping to a policy-chosen handle.
#[derive(Debug, Clone, Default)]
pub struct MergeIndex {
    by_end: IntMap<u64, u64>,
    by_start: IntMap<u64, u64>,
}

impl MergeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records queued request `rq` under `handle`.
    pub fn add(&mut self, handle: u64, rq: &Request) {
        self.by_end.insert(key(rq.dir, rq.sync, rq.end()), handle);
        self.by_start.insert(key(rq.dir, rq.sync, rq.sector), handle);
    }

    /// Forgets `rq` (stored under `handle`); entries that now point at other requests are left alone.
    pub fn remove(&mut self, handle: u64, rq: &Request) {
        // One probe per map: look the entry up once and remove it through the same handle.
        for (map, sector) in [(&mut self.by_end, rq.end()), (&mut self.by_start, rq.sector)] {
            if let Entry::Occupied(o) = map.entry(key(rq.dir, rq.sync, sector)) {
                if *o.get() == handle {
                    o.remove();
                }
            }
        }
    }

    /// A queued request that `rq` may be merged into: same direction and sync flag, contiguous, and the result no
    /// longer than `max_sectors`. `lookup` returns a handle's request (the index does not own them). Back merges are
    /// preferred; front merges only when `front` is true.
    pub fn find<'a>(
        &self,
        rq: &Request,
        max_sectors: u32,
        front: bool,
        lookup: impl Fn(u64) -> Option<&'a Request>,
    ) -> Option<(u64, MergeKind)> {
        let fits = |q: &Request| u64::from(q.sectors) + u64::from(rq.sectors) <= u64::from(max_sectors);
        if let Some(&h) = self.by_end.get(&key(rq.dir, rq.sync, rq.sector)) {
            if let Some(q) = lookup(h) {
                if q.end() == rq.sector && fits(q) {
                    return Some((h, MergeKind::Back));
                }
            }
        }
        if front {
            if let Some(&h) = self.by_start.get(&key(rq.dir, rq.sync, rq.end())) {
                if let Some(q) = lookup(h) {
                    if q.sector == rq.end() && fits(q) {
                        return Some((h, MergeKind::Front));
                    }
                }
            }
        }
        None
    }

    /// Checks that every indexed start and end names a request `lookup` knows, with that start or end and the
    /// same direction and sync flag, and that no more requests are indexed than `live` (two queued requests
    /// sharing a start or an end share one entry, so fewer is fine).
    pub fn check_invariants<'a>(&self, live: usize, lookup: impl Fn(u64) -> Option<&'a Request>) -> Result<(), String> {
        for (by, map, end) in [("start", &self.by_start, false), ("end", &self.by_end, true)] {
            if map.len() > live {
                return Err(format!(
                    "{} requests indexed by {by}, but only {live} queued",
                    map.len()
                ));
            }
            for (&k, &h) in map {
                let Some(rq) = lookup(h) else {
                    return Err(format!("the {by} index names handle {h}, which is not queued"));
                };
                let sector = if end { rq.end() } else { rq.sector };
                if key(rq.dir, rq.sync, sector) != k {
                    return Err(format!("handle {h} is indexed by a {by} it does not have"));
                }
            }
        }
        Ok(())
    }

    /// Number of indexed requests.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// True if nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

/// Extends `target` with `rq` at the given end, keeping `target`'s identity and flags and recording `rq`'s ids as
/// merged. The metadata flag is `target`'s alone: the kernel's merges (`bio_attempt_back_merge`,
/// `bio_attempt_front_merge`, `attempt_merge`) carry the I/O priority and the failfast mix into the grown request,
/// not REQ_PRIO/REQ_META, so a metadata request merged into an ordinary one leaves it ordinary. The caller removes
/// `target` from its [`MergeIndex`] before and adds it back after.
pub fn absorb(target: &mut Request, rq: Request, kind: MergeKind) {
    if kind == MergeKind::Front {
        target.sector = rq.sector;
    }
    target.sectors += rq.sectors;
    target.merged.push(rq.id);
    target.merged.extend(rq.merged);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{FlowId, RequestId};

    /// Merge keys that differ only in high bits (aligned requests of flows far apart on the disk) must still land
    /// in different buckets: `HashMap` takes the bucket from the hash's low bits (issue 19).
    #[test]
    fn int_hasher_spreads_keys_that_differ_only_in_high_bits() {
        use std::collections::HashSet;
        let low_bits = |k: u64| {
            let mut h = IntHasher::default();
            h.write_u64(k);
            h.finish() & 0x3fff
        };
        let buckets: HashSet<u64> = (0..4096u64)
            .map(|f| low_bits(key(Direction::Read, true, f << 24)))
            .collect();
        assert!(
            buckets.len() > 2048,
            "4096 keys in only {} of 16384 buckets",
            buckets.len()
        );
    }

    fn rq(id: u64, sector: u64, sectors: u32) -> Request {
        Request::new(RequestId(id), FlowId(0), Direction::Read, true, sector, sectors)
    }

    #[test]
    fn finds_back_and_front_within_size() {
        let mut idx = MergeIndex::new();
        let a = rq(1, 100, 8);
        idx.add(7, &a);
        let get = |h: u64| if h == 7 { Some(&a) } else { None };
        assert_eq!(idx.find(&rq(2, 108, 8), 64, true, get), Some((7, MergeKind::Back)));
        assert_eq!(idx.find(&rq(2, 92, 8), 64, true, get), Some((7, MergeKind::Front)));
        assert_eq!(idx.find(&rq(2, 92, 8), 64, false, get), None);
        assert_eq!(
            idx.find(&rq(2, 108, 60), 64, true, get),
            None,
            "would exceed max_sectors"
        );
        let mut w = rq(3, 108, 8);
        w.dir = Direction::Write;
        assert_eq!(idx.find(&w, 64, true, get), None, "direction must match");
    }

    #[test]
    fn absorb_keeps_ids() {
        let mut a = rq(1, 100, 8);
        absorb(&mut a, rq(2, 92, 8), MergeKind::Front);
        absorb(&mut a, rq(3, 108, 8), MergeKind::Back);
        assert_eq!((a.sector, a.sectors, a.parts()), (92, 24, 3));
        assert_eq!(a.merged, vec![RequestId(2), RequestId(3)]);
    }

    // The grown request keeps its own metadata flag, whichever end the other joins: a metadata request merged
    // into an ordinary one leaves it ordinary, an ordinary one merged into a metadata request leaves it metadata.
    #[test]
    fn absorb_keeps_the_targets_metadata_flag() {
        for kind in [MergeKind::Front, MergeKind::Back] {
            let mut ordinary = rq(1, 100, 8);
            let mut m = rq(2, if kind == MergeKind::Front { 92 } else { 108 }, 8);
            m.meta = true;
            absorb(&mut ordinary, m, kind);
            assert!(!ordinary.meta, "{kind:?}: ordinary stays ordinary");
            let mut meta = rq(3, 100, 8);
            meta.meta = true;
            absorb(
                &mut meta,
                rq(4, if kind == MergeKind::Front { 92 } else { 108 }, 8),
                kind,
            );
            assert!(meta.meta, "{kind:?}: metadata stays metadata");
        }
    }
}
