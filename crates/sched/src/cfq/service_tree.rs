//! Service trees: the busy queues of one group, one tree per class and workload type, ordered by `rb_key`
//! (kernel: `cfq_service_tree_add`, `cfq_slice_offset`; docs/SCHEDULERS.md, CFQ, Slices and queue order).

use super::idle::ThinkTime;
use crate::types::{IoClass, Time};
use std::collections::BTreeSet;

/// Workload type of a queue, which picks its service tree within a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Workload {
    /// Async (writeback) queues.
    Async = 0,
    /// Sync queues that do not idle (seeky or thinking too long): served as a group with tree-level idling.
    SyncNoIdle = 1,
    /// Sync queues with an idle window.
    Sync = 2,
}

impl Workload {
    /// All types in the order the kernel scans them when choosing a workload (ties go to the earlier one).
    pub const ALL: [Workload; 3] = [Workload::Async, Workload::SyncNoIdle, Workload::Sync];
}

/// Number of service trees per group: RT and BE times three workload types, plus one IDLE tree.
pub const TREES_PER_GROUP: usize = 7;

/// Index of the service tree of `class` and `wl` within a group (IDLE has a single tree).
pub fn tree_index(class: IoClass, wl: Workload) -> usize {
    match class {
        IoClass::Rt => wl as usize,
        IoClass::Be => 3 + wl as usize,
        IoClass::Idle => 6,
    }
}

/// Queues of one (class, workload type) in a group, ordered by key; ties keep insertion order.
#[derive(Debug, Clone)]
pub struct ServiceTree {
    /// (rb_key in ns, insertion sequence, queue index).
    set: BTreeSet<(i64, u64, u32)>,
    /// Think time of the sync queues on this tree (for tree-level idling on SYNC_NOIDLE).
    pub ttime: ThinkTime,
}

impl ServiceTree {
    /// An empty tree created at `now`.
    pub fn new(now: Time) -> Self {
        ServiceTree {
            set: BTreeSet::new(),
            ttime: ThinkTime::new(now),
        }
    }

    /// Number of queues on the tree.
    pub fn count(&self) -> usize {
        self.set.len()
    }

    /// Adds a queue; `pos` is `(rb_key, sequence)`.
    pub fn insert(&mut self, pos: (i64, u64), q: u32) {
        self.set.insert((pos.0, pos.1, q));
    }

    /// True if queue `q` is on the tree at `pos`.
    pub fn contains(&self, pos: (i64, u64), q: u32) -> bool {
        self.set.contains(&(pos.0, pos.1, q))
    }

    /// Removes a queue inserted at `pos`.
    pub fn remove(&mut self, pos: (i64, u64), q: u32) {
        self.set.remove(&(pos.0, pos.1, q));
    }

    /// The queue with the smallest key and that key.
    pub fn first(&self) -> Option<(i64, u32)> {
        self.set.first().map(|&(k, _, q)| (k, q))
    }

    /// The queues on the tree in key order.
    pub fn queues(&self) -> impl Iterator<Item = u32> + '_ {
        self.set.iter().map(|&(_, _, q)| q)
    }

    /// The queue with the largest key and that key.
    pub fn last(&self) -> Option<(i64, u32)> {
        self.set.last().map(|&(k, _, q)| (k, q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Queues come out by key, equal keys in insertion order; the IDLE class has one tree for all types.
    #[test]
    fn ordered_by_key_then_insertion() {
        let mut t = ServiceTree::new(0);
        t.insert((50, 1), 7);
        t.insert((10, 2), 8);
        t.insert((10, 3), 9);
        assert_eq!(t.first(), Some((10, 8)));
        t.remove((10, 2), 8);
        assert_eq!(t.first(), Some((10, 9)));
        assert_eq!(t.last(), Some((50, 7)));
        assert_eq!(t.count(), 2);
        assert_eq!(
            tree_index(IoClass::Idle, Workload::Async),
            tree_index(IoClass::Idle, Workload::Sync)
        );
        assert_ne!(
            tree_index(IoClass::Rt, Workload::Sync),
            tree_index(IoClass::Be, Workload::Sync)
        );
    }
}
