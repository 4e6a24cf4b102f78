//! Slice lengths: per-priority queue slices, low-latency scaling to `target_latency`, and workload slices
//! (kernel: `cfq_prio_to_slice`, `cfq_scaled_cfqq_slice`, `cfq_group_get_avg_queues`, `choose_wl_class_and_type`;
//! docs/SCHEDULERS.md, CFQ, Slices and queue order).

use super::group::{Group, GroupTree};
use super::service_tree::{tree_index, Workload};
use super::tunables::Params;
use crate::types::{IoClass, Time, MS};

/// Priority steps are `base / SLICE_SCALE` apart: priority 0 gets 1.8x the base slice, priority 7 0.4x.
pub const SLICE_SCALE: u64 = 5;

/// The priority whose slice equals the base slice.
pub const BASE_PRIO: i64 = 4;

/// Shortest workload slice: 2 ms (two jiffies at HZ=1000), so a workload is never chosen for nothing.
pub const MIN_WORKLOAD_SLICE: Time = 2 * MS;

/// `a * b / c` without overflow (saturating at `u64::MAX`; `c` of 0 counts as 1).
pub fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    let v = u128::from(a) * u128::from(b) / u128::from(c.max(1));
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `base + base/5 * (4 - prio)` with base `slice_sync` or `slice_async` (ns).
pub fn prio_slice(p: &Params, sync: bool, prio: u8) -> Time {
    let base = p.slice[usize::from(sync)];
    let step = (base / SLICE_SCALE) as i64;
    let v = base as i64 + step * (BASE_PRIO - i64::from(prio.min(7)));
    u64::try_from(v).unwrap_or(0).max(1)
}

/// The slice of a queue (ns): its priority slice, scaled down with `low_latency` so that the `iq` busy queues of
/// its class fit in the group's share of `target_latency`, but not below `2*slice_idle` scaled the same way.
pub fn scaled_slice(p: &Params, sync: bool, prio: u8, iq: u32, group_slice: Time) -> Time {
    let slice = prio_slice(p, sync, prio);
    if !p.low_latency {
        return slice;
    }
    let sync_slice = p.slice[1];
    let expect = sync_slice.saturating_mul(u64::from(iq));
    if expect <= group_slice {
        return slice;
    }
    let low = slice.min(mul_div(p.slice_idle.saturating_mul(2), slice, sync_slice));
    mul_div(slice, group_slice, expect).max(low).max(1)
}

/// The workload slice of `wl` in `class` of group `g` (ns), with `busy_queues` busy in all groups: the group's slice split in proportion to the queues
/// of that workload; async workloads are capped by their share of all busy queues and scaled by
/// `slice_async/slice_sync`, sync workloads get at least `2*slice_idle`.
pub fn workload_slice(p: &Params, g: &Group, tree: &GroupTree, class: IoClass, wl: Workload, busy_queues: u32) -> Time {
    let group_slice = tree.share(p.target_latency, g.weight);
    let count = g.trees[tree_index(class, wl)].count();
    let denom = u64::from(g.busy_avg[class.index()])
        .max(g.busy_in_class(class) as u64)
        .max(1);
    let mut slice = mul_div(group_slice, count as u64, denom);
    if wl == Workload::Async {
        let cap = mul_div(p.target_latency, g.busy_async() as u64, u64::from(busy_queues));
        slice = mul_div(slice.min(cap), p.slice[0], p.slice[1]);
    } else {
        slice = slice.max(p.slice_idle.saturating_mul(2));
    }
    slice.max(MIN_WORKLOAD_SLICE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceInfo;

    // Sync slices by priority: 0 -> 180 ms, 4 -> 100 ms, 7 -> 40 ms; async at 4 -> 40 ms.
    #[test]
    fn slices_per_priority() {
        let p = Params::defaults(&DeviceInfo::hdd());
        assert_eq!(prio_slice(&p, true, 0), 180 * MS);
        assert_eq!(prio_slice(&p, true, 4), 100 * MS);
        assert_eq!(prio_slice(&p, true, 7), 40 * MS);
        assert_eq!(prio_slice(&p, false, 4), 40 * MS);
        assert_eq!(prio_slice(&p, false, 0), 72 * MS);
    }

    // With 5 busy queues the expected latency 5*100 ms exceeds the 300 ms target, so each 100 ms slice shrinks to
    // 100*300/500 = 60 ms; the floor is min(slice, 2*8 ms * slice/100 ms). Without low_latency nothing changes.
    #[test]
    fn target_latency_scaling() {
        let mut p = Params::defaults(&DeviceInfo::hdd());
        assert_eq!(scaled_slice(&p, true, 4, 5, 300 * MS), 60 * MS);
        assert_eq!(scaled_slice(&p, true, 4, 2, 300 * MS), 100 * MS);
        assert_eq!(scaled_slice(&p, true, 4, 100, 300 * MS), 16 * MS);
        assert_eq!(scaled_slice(&p, true, 0, 100, 300 * MS), 28_800_000);
        p.low_latency = false;
        assert_eq!(scaled_slice(&p, true, 4, 5, 300 * MS), 100 * MS);
    }

    // A workload slice is never below CFQ_MIN_TT, 2 jiffies (2 ms at HZ=1000): with a target latency of 1 ms the
    // async workload's share (1 ms x 1/2, x 40/100 = 0.2 ms) is raised to 2 ms, and so is a sync one when slice_idle
    // is 0 (no 2 x slice_idle floor).
    #[test]
    fn a_workload_slice_is_at_least_2_ms() {
        use super::super::group::Group;
        use crate::types::GroupId;
        let mut p = Params::defaults(&DeviceInfo::hdd());
        p.target_latency = MS;
        p.slice_idle = 0;
        let mut t = GroupTree::default();
        let mut g = Group::new(GroupId(0), 0);
        t.add(0, &mut g);
        g.trees[tree_index(IoClass::Be, Workload::Async)].insert((0, 1), 1);
        g.trees[tree_index(IoClass::Be, Workload::Sync)].insert((0, 2), 2);
        assert_eq!(workload_slice(&p, &g, &t, IoClass::Be, Workload::Async, 2), 2 * MS);
        assert_eq!(workload_slice(&p, &g, &t, IoClass::Be, Workload::Sync, 2), 2 * MS);
    }
}
