//! Groups (cgroups) and the tree that orders busy groups by virtual disk time (kernel:
//! `cfq_group_served`, `cfq_group_notify_queue_add`; docs/SCHEDULERS.md, CFQ, Workloads and groups).

use super::idle::ThinkTime;
use super::service_tree::{ServiceTree, Workload, TREES_PER_GROUP};
use crate::types::{GroupId, IoClass, Time, IOPRIO_LEVELS, MS};
use std::collections::BTreeSet;

/// Weight of a non-root group when none is configured (the kernel's legacy default; accepted range 10..=1000).
/// [`crate::types::FlowInfo`] carries no group weight, so every non-root group gets this one.
pub const GROUP_WEIGHT_DEFAULT: u32 = 500;

/// Weight with which the root group's own queues compete against child groups (twice the default, as in the
/// kernel, so a flat root is not starved by a few children).
pub const ROOT_GROUP_WEIGHT: u32 = 1000;

/// An IDLE-class queue is keyed this far behind the last queue of its tree: 200 ms (the kernel's
/// `CFQ_IDLE_DELAY`, HZ/5 jiffies; the queues' keys are in jiffies).
pub const IDLE_DELAY: Time = 200 * MS;

/// A group becoming busy is placed this far behind the last busy group, in vdisktime units (ns of weighted
/// service): 48 828 ns. The kernel (3.13, `cfq_group_notify_queue_add`) adds the same `CFQ_IDLE_DELAY` (HZ/5) to
/// the last group's vdisktime, but vdisktime is fixed point there: `cfqg_scale_charge` shifts a charge in jiffies
/// left by `CFQ_SERVICE_SHIFT` (12), so one jiffy of service is 4096 units and HZ/5 units are 1/5 s / 4096 of
/// service, whatever HZ is.
pub const GROUP_IDLE_DELAY: u64 = IDLE_DELAY >> SERVICE_SHIFT;

/// The kernel's `CFQ_SERVICE_SHIFT`: vdisktime counts 2^12 units per jiffy of service.
const SERVICE_SHIFT: u32 = 12;

/// The workload a group was serving when it was expired, restored when it is served again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedWorkload {
    /// Remaining workload slice (ns).
    pub slice: Time,
    /// Class being served.
    pub class: IoClass,
    /// Workload type being served.
    pub wl: Workload,
}

/// One group: its service trees, its async queues and its share of the device.
#[derive(Debug, Clone)]
pub struct Group {
    /// Identity.
    pub id: GroupId,
    /// Proportional-share weight.
    pub weight: u32,
    /// Virtual disk time: service received divided by the group's share (ns of weighted service).
    pub vdisktime: u64,
    /// Insertion sequence while on the group tree.
    pub tree_seq: Option<u64>,
    /// Busy queues of the group (queues on one of its service trees).
    pub nr_cfqq: u32,
    /// Requests of the group on the device.
    pub dispatched: u32,
    /// Service trees, indexed by [`super::service_tree::tree_index`].
    pub trees: [ServiceTree; TREES_PER_GROUP],
    /// Decaying average of busy queues per class (index: [`IoClass::index`]).
    pub busy_avg: [u32; 3],
    /// Workload context saved at expiry.
    pub saved: Option<SavedWorkload>,
    /// Think time of the group (for `group_idle`).
    pub ttime: ThinkTime,
    /// Shared async queues for RT and BE, by priority (queue indices; never freed).
    pub async_queues: [[Option<u32>; IOPRIO_LEVELS as usize]; 2],
    /// Shared async queue of the IDLE class.
    pub idle_async: Option<u32>,
}

impl Group {
    /// A new, idle group.
    pub fn new(id: GroupId, now: Time) -> Self {
        Group {
            id,
            weight: if id == GroupId(0) {
                ROOT_GROUP_WEIGHT
            } else {
                GROUP_WEIGHT_DEFAULT
            },
            vdisktime: 0,
            tree_seq: None,
            nr_cfqq: 0,
            dispatched: 0,
            trees: std::array::from_fn(|_| ServiceTree::new(now)),
            busy_avg: [0; 3],
            saved: None,
            ttime: ThinkTime::new(now),
            async_queues: [[None; IOPRIO_LEVELS as usize]; 2],
            idle_async: None,
        }
    }

    /// Busy queues of `class` (all three workload trees for RT and BE).
    pub fn busy_in_class(&self, class: IoClass) -> usize {
        match class {
            IoClass::Idle => self.trees[6].count(),
            c => {
                let base = super::service_tree::tree_index(c, Workload::Async);
                self.trees[base..base + 3].iter().map(ServiceTree::count).sum()
            }
        }
    }

    /// Busy async queues of RT and BE.
    pub fn busy_async(&self) -> usize {
        self.trees[super::service_tree::tree_index(IoClass::Rt, Workload::Async)].count()
            + self.trees[super::service_tree::tree_index(IoClass::Be, Workload::Async)].count()
    }

    /// Updates and returns the decaying average of busy queues of `class`: `(3*max(avg,busy) + min + 2) / 4`.
    pub fn avg_queues(&mut self, class: IoClass) -> u32 {
        let busy = u32::try_from(self.busy_in_class(class)).unwrap_or(u32::MAX);
        let avg = &mut self.busy_avg[class.index()];
        let (lo, hi) = (busy.min(*avg), busy.max(*avg));
        *avg = (3 * hi + lo + 2) / 4;
        *avg
    }
}

/// Busy groups ordered by vdisktime.
#[derive(Debug, Clone, Default)]
pub struct GroupTree {
    set: BTreeSet<(u64, u64, u32)>,
    seq: u64,
    /// Smallest vdisktime seen at the front, never decreasing.
    pub min_vdisktime: u64,
    /// Sum of the weights of the groups on the tree.
    pub total_weight: u64,
}

impl GroupTree {
    /// Puts group `gi` on the tree (its `vdisktime` already set).
    pub fn add(&mut self, gi: u32, g: &mut Group) {
        self.seq += 1;
        g.tree_seq = Some(self.seq);
        self.set.insert((g.vdisktime, self.seq, gi));
        self.total_weight += u64::from(g.weight);
    }

    /// Takes group `gi` off the tree.
    pub fn remove(&mut self, gi: u32, g: &mut Group) {
        if let Some(seq) = g.tree_seq.take() {
            self.set.remove(&(g.vdisktime, seq, gi));
            self.total_weight = self.total_weight.saturating_sub(u64::from(g.weight));
        }
    }

    /// The group with the least vdisktime, advancing `min_vdisktime` to it.
    pub fn first(&mut self) -> Option<u32> {
        let &(v, _, gi) = self.set.first()?;
        self.min_vdisktime = self.min_vdisktime.max(v);
        Some(gi)
    }

    /// The largest vdisktime on the tree.
    pub fn last_vdisktime(&self) -> Option<u64> {
        self.set.last().map(|&(v, _, _)| v)
    }

    /// `value * weight / total_weight`: the part of `value` that belongs to a group of `weight` (the kernel's
    /// `vfraction`, computed over the busy groups).
    pub fn share(&self, value: Time, weight: u32) -> Time {
        let total = self.total_weight.max(u64::from(weight)).max(1);
        let v = u128::from(value) * u128::from(weight) / u128::from(total);
        u64::try_from(v).unwrap_or(u64::MAX)
    }

    /// `charge / vfraction`: the vdisktime a group of `weight` accrues for `charge` of service.
    pub fn scale_charge(&self, charge: Time, weight: u32) -> u64 {
        let total = self.total_weight.max(u64::from(weight)).max(1);
        let v = u128::from(charge) * u128::from(total) / u128::from(weight.max(1));
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The root group weighs 1000 and a child 500, so with both busy the root's share of a 300 ms target is 200 ms
    // and the child's 100 ms; a child charged 10 ms advances by 10 * 1500 / 500 = 30 ms of vdisktime.
    #[test]
    fn shares_by_weight() {
        let mut t = GroupTree::default();
        let mut root = Group::new(GroupId(0), 0);
        let mut child = Group::new(GroupId(1), 0);
        t.add(0, &mut root);
        t.add(1, &mut child);
        assert_eq!(t.share(300 * MS, root.weight), 200 * MS);
        assert_eq!(t.share(300 * MS, child.weight), 100 * MS);
        assert_eq!(t.scale_charge(10 * MS, child.weight), 30 * MS);
        t.remove(1, &mut child);
        assert_eq!(t.share(300 * MS, root.weight), 300 * MS);
        assert_eq!(t.first(), Some(0));
    }

    // Busy-queue average: (3*max + min + 2)/4 moves quickly up and slowly down.
    #[test]
    fn busy_average() {
        let mut g = Group::new(GroupId(0), 0);
        for q in 0..5 {
            g.trees[4].insert((0, q), q as u32);
        }
        assert_eq!(g.avg_queues(IoClass::Be), 4);
        assert_eq!(g.avg_queues(IoClass::Be), 5);
        assert_eq!(g.busy_in_class(IoClass::Be), 5);
        assert_eq!(g.busy_in_class(IoClass::Rt), 0);
    }

    // The async workload slice of `choose_wl_class_and_type` (3.13): the group's slice (all of the 300 ms target
    // for a lone group) times the type's queues over the class's busy queues (1 of 2: 150 ms), capped by the async
    // queues' share of the target over all busy queues of the device (`cfqg_busy_async_queues`: 300 x 1/2 =
    // 150 ms; with a third queue busy elsewhere, 100 ms), then scaled by slice_async/slice_sync (40/100): 60 ms, or
    // 40 ms. The RT async tree counts among the async queues too: with one there as well, the cap is 300 x 2/3.
    #[test]
    fn the_async_workload_slice_is_capped_by_the_async_queues_share_of_the_target() {
        use super::super::slice::workload_slice;
        use super::super::tunables::Params;
        use crate::device::DeviceInfo;
        let p = Params::defaults(&DeviceInfo::hdd());
        let mut t = GroupTree::default();
        let mut g = Group::new(GroupId(0), 0);
        t.add(0, &mut g);
        let (be_async, be_sync) = (
            super::super::service_tree::tree_index(IoClass::Be, Workload::Async),
            super::super::service_tree::tree_index(IoClass::Be, Workload::Sync),
        );
        g.trees[be_async].insert((0, 1), 1);
        g.trees[be_sync].insert((0, 2), 2);
        assert_eq!(g.busy_async(), 1);
        assert_eq!(workload_slice(&p, &g, &t, IoClass::Be, Workload::Async, 2), 60 * MS);
        assert_eq!(workload_slice(&p, &g, &t, IoClass::Be, Workload::Async, 3), 40 * MS);
        let rt_async = super::super::service_tree::tree_index(IoClass::Rt, Workload::Async);
        g.trees[rt_async].insert((0, 3), 3);
        assert_eq!(g.busy_async(), 2);
        // 150 ms (1 of 2 BE queues) against a cap of 300 x 2/3 = 200 ms: 150 x 0.4 = 60 ms.
        assert_eq!(workload_slice(&p, &g, &t, IoClass::Be, Workload::Async, 3), 60 * MS);
    }

    // Groups with equal vdisktime are served in the order they joined the tree (the kernel's rb-tree insert sends
    // an equal key to the right): group 1 joined before group 0, so it comes first, whatever the indices.
    #[test]
    fn groups_with_equal_vdisktime_are_served_in_the_order_they_became_busy() {
        let mut t = GroupTree::default();
        let mut g1 = Group::new(GroupId(1), 0);
        let mut g0 = Group::new(GroupId(0), 0);
        g1.vdisktime = 5 * MS;
        g0.vdisktime = 5 * MS;
        t.add(1, &mut g1);
        t.add(0, &mut g0);
        assert_eq!(t.first(), Some(1));
        t.remove(1, &mut g1);
        assert_eq!(t.first(), Some(0));
    }

    // `cfq_service_tree_add` (3.13): an IDLE-class queue is keyed CFQ_IDLE_DELAY (HZ/5 jiffies, 200 ms) after the
    // last queue of its tree, or after now on an empty tree. Three IDLE readers arriving at 10 s get 10.2, 10.4
    // and 10.6 s; the third, re-keyed 100 ms later while last on its tree, goes 200 ms after that time: 10.3 s,
    // now before the second (with a delay of 0 or 1 ms it would stay last).
    #[test]
    fn an_idle_class_queue_is_keyed_200_ms_after_the_last_one() {
        use super::super::{Cfq, Params};
        use crate::device::DeviceInfo;
        use crate::scheduler::Scheduler;
        use crate::types::{Direction, FlowId, FlowInfo, Request, RequestId, SEC};
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, Params::defaults(&dev));
        let now = 10 * SEC;
        for f in 1..=3u32 {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_class(IoClass::Idle, 7), 0);
        }
        for f in 1..=3u32 {
            let rq = Request::new(
                RequestId(u64::from(f)),
                FlowId(f),
                Direction::Read,
                true,
                u64::from(f) << 24,
                8,
            );
            c.insert(rq, now);
        }
        let key = |c: &Cfq, f: u32| {
            let q = c.flows[&FlowId(f)].sync_q.expect("a sync queue");
            c.queues[q as usize].pos.expect("on a tree").key
        };
        let at = |t: Time| i64::try_from(t).unwrap();
        assert_eq!(key(&c, 1), at(now + 200 * MS));
        assert_eq!(key(&c, 2), at(now + 400 * MS));
        assert_eq!(key(&c, 3), at(now + 600 * MS));
        // Queue 3, last on the tree, re-keyed 100 ms later: 10.3 s, between queues 1 and 2.
        let q3 = c.flows[&FlowId(3)].sync_q.unwrap();
        c.service_tree_add(q3, false, now + 100 * MS);
        assert_eq!(key(&c, 3), at(now + 300 * MS));
        let tree = c.queues[q3 as usize].pos.unwrap().tree;
        let order: Vec<u32> = c.groups[0].trees[tree].queues().collect();
        let q = |f: u32| c.flows[&FlowId(f)].sync_q.unwrap();
        assert_eq!(order, vec![q(1), q(3), q(2)]);
    }

    // `cfq_group_notify_queue_add`: a group that becomes busy goes behind the last busy group (its vdisktime above
    // that group's), so it cannot jump ahead of groups that were waiting. Group 1's two readers use the disk for
    // 500 ms (their group's vdisktime grows well past 200 ms); then group 2's reader arrives: its group is placed
    // after group 1's, by the kernel's fixed-point HZ/5: 200 ms / 4096 = 48 828 ns of weighted service (not 200 ms,
    // which would hold a group that comes back after a pause about 4096 times longer behind the others).
    #[test]
    fn a_group_that_becomes_busy_goes_behind_the_last_busy_group() {
        use super::super::{Cfq, Params};
        use crate::device::DeviceInfo;
        use crate::scheduler::Scheduler;
        use crate::types::{Decision, Direction, FlowId, FlowInfo, Request, RequestId};
        let dev = DeviceInfo::hdd();
        let mut c = Cfq::new(&dev, Params::defaults(&dev));
        for f in [1, 3] {
            c.flow_started(&FlowInfo::new(FlowId(f)).with_group(GroupId(1)), 0);
        }
        c.flow_started(&FlowInfo::new(FlowId(2)).with_group(GroupId(2)), 0);
        let mut id = 0;
        let mut read = |f: u32, sector: u64| {
            id += 1;
            Request::new(RequestId(id), FlowId(f), Direction::Read, true, sector, 8)
        };
        let mut next = [0u64, 0, 0, 1 << 30];
        for f in [1, 3] {
            c.insert(read(f, next[f as usize]), 0);
        }
        let mut now = 0;
        while now < 500 * MS {
            match c.dispatch(now) {
                Decision::Dispatch(r) => {
                    now += MS;
                    c.completed(&r, now);
                    let f = r.flow.0 as usize;
                    next[f] += 8;
                    c.insert(read(r.flow.0, next[f]), now);
                }
                Decision::WaitUntil(t) => now = t,
                Decision::Nothing => break,
            }
        }
        c.insert(read(2, 1 << 31), now);
        let (g1, g2) = (c.group_index[&GroupId(1)], c.group_index[&GroupId(2)]);
        let (v1, v2) = (c.groups[g1 as usize].vdisktime, c.groups[g2 as usize].vdisktime);
        assert!(v1 > 200 * MS + 1, "group 1 was charged {v1} ns");
        assert!(v2 > v1, "group 2 at {v2} ns, group 1 at {v1} ns");
        assert_eq!(v2 - v1, 48_828, "group 2 at {v2} ns, group 1 at {v1} ns");
    }
}
