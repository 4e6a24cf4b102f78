//! [`SortedSet`]: an ordered set that is a sorted vector while small and a B-tree once large (issue 19).
//!
//! BFQ keeps two ordered sets that change at nearly every request: each queue's requests by sector and each
//! group's busy queues by the sector of their next request (the queue-merge position set). With tens of entries,
//! a binary search and a short move in one contiguous vector cost a fraction of a B-tree's node walks,
//! rebalancing and allocations (the instruction counts are in docs/PERFORMANCE.md); with thousands, a move of
//! half the vector per change would cost more than the B-tree's logarithmic work. So the set starts as a vector
//! and turns into a [`BTreeSet`] when it grows past [`SMALL_MAX`] entries, and back when it is emptied. Both
//! forms hold the same elements in the same order: which one is in use never changes what the set answers.

use std::collections::BTreeSet;

/// Largest number of entries kept in the vector form (entries). Estimate: with 16-byte entries, moving half of
/// 256 entries is 2 KiB, about the cost of the three to four node visits of a B-tree insert or remove at that
/// size; the exact crossover matters little, as both forms are cheap there.
pub const SMALL_MAX: usize = 256;

/// An ordered set of `Copy` elements (see the module documentation).
#[derive(Debug, Clone)]
pub enum SortedSet<T: Ord + Copy> {
    /// Sorted, without duplicates, at most [`SMALL_MAX`] entries.
    Small(Vec<T>),
    /// More than [`SMALL_MAX`] entries at some point since the set was last empty.
    Large(BTreeSet<T>),
}

impl<T: Ord + Copy> Default for SortedSet<T> {
    fn default() -> Self {
        SortedSet::Small(Vec::new())
    }
}

impl<T: Ord + Copy> SortedSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            SortedSet::Small(v) => v.len(),
            SortedSet::Large(b) => b.len(),
        }
    }

    /// True if the set holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `x`; false if it was already there.
    pub fn insert(&mut self, x: T) -> bool {
        match self {
            SortedSet::Small(v) => match v.binary_search(&x) {
                Ok(_) => false,
                Err(i) => {
                    if v.len() < SMALL_MAX {
                        v.insert(i, x);
                    } else {
                        let mut b: BTreeSet<T> = v.drain(..).collect();
                        b.insert(x);
                        *self = SortedSet::Large(b);
                    }
                    true
                }
            },
            SortedSet::Large(b) => b.insert(x),
        }
    }

    /// Removes `x`; false if it was not there.
    pub fn remove(&mut self, x: &T) -> bool {
        let removed = match self {
            SortedSet::Small(v) => match v.binary_search(x) {
                Ok(i) => {
                    v.remove(i);
                    true
                }
                Err(_) => false,
            },
            SortedSet::Large(b) => b.remove(x),
        };
        if removed && matches!(self, SortedSet::Large(b) if b.is_empty()) {
            *self = SortedSet::default();
        }
        removed
    }

    /// Replaces `old` by `new` (as a removal of `old` then an insertion of `new`); false if `old` was not there,
    /// and then nothing changes. While small, only the entries between the two positions move, so a key that
    /// keeps its rank (a queue whose next request moves on without passing another queue's) moves nothing.
    pub fn replace(&mut self, old: &T, new: T) -> bool {
        if let SortedSet::Small(v) = self {
            let Ok(i) = v.binary_search(old) else {
                return false;
            };
            if new == *old {
                return true;
            }
            match v.binary_search(&new) {
                Ok(_) => {
                    v.remove(i);
                }
                Err(j) if j > i => {
                    v[i..j].rotate_left(1);
                    v[j - 1] = new;
                }
                Err(j) => {
                    v[j..=i].rotate_right(1);
                    v[j] = new;
                }
            }
            return true;
        }
        if !self.remove(old) {
            return false;
        }
        self.insert(new);
        true
    }

    /// Removes every element.
    pub fn clear(&mut self) {
        *self = SortedSet::default();
    }

    /// True if `x` is in the set.
    pub fn contains(&self, x: &T) -> bool {
        match self {
            SortedSet::Small(v) => v.binary_search(x).is_ok(),
            SortedSet::Large(b) => b.contains(x),
        }
    }

    /// The smallest element.
    pub fn first(&self) -> Option<T> {
        match self {
            SortedSet::Small(v) => v.first().copied(),
            SortedSet::Large(b) => b.first().copied(),
        }
    }

    /// The smallest element not below `x`.
    pub fn at_or_after(&self, x: &T) -> Option<T> {
        match self {
            SortedSet::Small(v) => v.get(v.partition_point(|e| e < x)).copied(),
            SortedSet::Large(b) => b.range(x..).next().copied(),
        }
    }

    /// The largest element below `x`.
    pub fn before(&self, x: &T) -> Option<T> {
        match self {
            SortedSet::Small(v) => v.partition_point(|e| e < x).checked_sub(1).map(|i| v[i]),
            SortedSet::Large(b) => b.range(..x).next_back().copied(),
        }
    }

    /// Removes `x` and returns its neighbours: the smallest element above it and the largest below it (as
    /// [`SortedSet::at_or_after`] and [`SortedSet::before`] would give them once it is gone), in one search
    /// while small.
    pub fn remove_with_neighbours(&mut self, x: &T) -> (Option<T>, Option<T>) {
        if let SortedSet::Small(v) = self {
            let i = match v.binary_search(x) {
                Ok(i) => {
                    v.remove(i);
                    i
                }
                Err(i) => i,
            };
            return (v.get(i).copied(), i.checked_sub(1).map(|j| v[j]));
        }
        self.remove(x);
        (self.at_or_after(x), self.before(x))
    }

    /// The elements in ascending order.
    pub fn iter(&self) -> Iter<'_, T> {
        match self {
            SortedSet::Small(v) => Iter::Small(v.iter()),
            SortedSet::Large(b) => Iter::Large(b.iter()),
        }
    }
}

/// Iterator over a [`SortedSet`] in ascending order.
pub enum Iter<'a, T> {
    /// Over the vector form.
    Small(std::slice::Iter<'a, T>),
    /// Over the B-tree form.
    Large(std::collections::btree_set::Iter<'a, T>),
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;
    fn next(&mut self) -> Option<&'a T> {
        match self {
            Iter::Small(i) => i.next(),
            Iter::Large(i) => i.next(),
        }
    }
}

impl<'a, T: Ord + Copy> IntoIterator for &'a SortedSet<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the sequence of inserts and removes, and across the switch between the two forms, the set
        /// answers every query as a `BTreeSet` does.
        #[test]
        fn answers_as_a_btree_set(ops in proptest::collection::vec((0u8..4, 0u32..700), 1..2000)) {
            let mut s = SortedSet::new();
            let mut r = BTreeSet::new();
            for (op, x) in ops {
                match op {
                    0 | 1 => prop_assert_eq!(s.insert(x), r.insert(x)),
                    2 => prop_assert_eq!(s.remove(&x), r.remove(&x)),
                    3 if x % 2 == 0 => {
                        // Replace `x` by a nearby value (possibly present, possibly equal).
                        let y = (x + 7 * (x % 5)) % 700;
                        let had = r.remove(&x);
                        if had {
                            r.insert(y);
                        }
                        prop_assert_eq!(s.replace(&x, y), had);
                    }
                    _ => {
                        let had = r.remove(&x);
                        let after = r.range(x..).next().copied();
                        let before = r.range(..x).next_back().copied();
                        prop_assert_eq!(s.contains(&x), had);
                        prop_assert_eq!(s.remove_with_neighbours(&x), (after, before));
                    }
                }
                prop_assert_eq!(s.len(), r.len());
                prop_assert_eq!(s.first(), r.first().copied());
                prop_assert_eq!(s.at_or_after(&x), r.range(x..).next().copied());
                prop_assert_eq!(s.before(&x), r.range(..x).next_back().copied());
            }
            prop_assert!(s.iter().copied().eq(r.iter().copied()));
        }
    }

    /// The set turns into a B-tree past `SMALL_MAX` entries and back into a vector once emptied.
    #[test]
    fn switches_form_past_the_limit_and_back_when_empty() {
        let mut s = SortedSet::new();
        for x in 0..=SMALL_MAX as u32 {
            s.insert(x);
        }
        assert!(matches!(s, SortedSet::Large(_)), "{} entries", s.len());
        for x in 0..=SMALL_MAX as u32 {
            s.remove(&x);
        }
        assert!(matches!(s, SortedSet::Small(_)));
    }
}
