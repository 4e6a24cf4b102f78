//! Low-latency heuristics (`bfq_update_bfqq_wr_on_rq_arrival`, `bfq_update_wr_data`, `bfq_bfqq_softrt_next_start`):
//! interactive and soft real-time weight raising, their ends, and async raising. Active only with `low_latency = 1`.

use super::ids::QueueId;
use super::Bfq;
use crate::types::{Time, MS, SEC};

/// Interactive raising lasts at least this long (ns): 3 s.
pub const WR_DURATION_MIN: Time = 3 * SEC;
/// Interactive raising lasts at most this long (ns): 25 s.
pub const WR_DURATION_MAX: Time = 25 * SEC;
/// Reference raising length on a rotational disk at its reference rate (ns): 7 s, about the start-up time of a
/// large application under no load.
pub const WR_REF_DURATION_ROT: Time = 7 * SEC;
/// Reference raising length on a non-rotational device at its reference rate (ns): 2.5 s.
pub const WR_REF_DURATION_NONROT: Time = 2500 * MS;
/// Interactive raising ends early once the queue has received this much service while raised (sectors):
/// 120000 ≈ 60 MB, more than an application start-up reads.
pub const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// Extra gap (ns) beyond `slice_idle` before a soft real-time queue's next batch may count as soft real-time:
/// the kernel's 4 jiffies, 4 ms at HZ=1000.
pub const SOFTRT_NEXT_START_MARGIN: Time = 4 * MS;

/// Kind of raising in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WrKind {
    /// Not raised.
    #[default]
    None,
    /// Interactive (×`wr_coeff`).
    Interactive,
    /// Soft real-time (×`wr_coeff` × 100).
    SoftRt,
}

/// Per-queue weight-raising state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WrState {
    /// Weight multiplier (1 = not raised).
    pub coeff: u32,
    /// Kind of raising.
    pub kind: WrKind,
    /// When the current raising period started, or when the last one finished (ns).
    pub last_start_finish: Time,
    /// Length of the current raising period (ns).
    pub cur_max_time: Time,
    /// Service received while raised (sectors).
    pub service_from_wr: u64,
    /// Start of an interactive period interrupted by soft real-time raising (ns).
    pub start_at_switch_to_srt: Option<Time>,
    /// Earliest time (ns) the next idle→busy switch may count as soft real-time.
    pub soft_rt_next_start: Time,
    /// Recompute `soft_rt_next_start` at the completion that drains the queue.
    pub softrt_update: bool,
    /// Last idle→busy switch (ns).
    pub last_idle_bklogged: Time,
    /// Service since the last idle→busy switch (sectors).
    pub service_from_backlogged: u64,
}

impl WrState {
    /// Not raised. `soft_rt_next_start` starts at the creation time `now`, so a queue that is still in its
    /// interactive period can switch to soft real-time raising at its next idle→busy switch (the interactive
    /// period is then remembered and resumed).
    pub fn new(now: Time) -> Self {
        WrState {
            coeff: 1,
            soft_rt_next_start: now,
            ..WrState::default()
        }
    }
    /// Multiplier of the budget timeout: the raising coefficient for interactive raising, else 1.
    pub fn timeout_coeff(&self) -> u32 {
        if self.kind == WrKind::Interactive {
            self.coeff.max(1)
        } else {
            1
        }
    }
}

/// Interactive raising length (ns): `ref_rate * ref_duration / peak_rate`, clamped to 3..25 s, so that slower
/// devices (longer start-ups) get longer raising.
pub fn wr_duration(rotational: bool, peak_rate: u64) -> Time {
    let (rate, dur) = if rotational {
        (super::peak_rate::REF_RATE_ROT, WR_REF_DURATION_ROT)
    } else {
        (super::peak_rate::REF_RATE_NONROT, WR_REF_DURATION_NONROT)
    };
    let d = (u128::from(rate) * u128::from(dur) / u128::from(peak_rate.max(1))) as u64;
    d.clamp(WR_DURATION_MIN, WR_DURATION_MAX)
}

/// v7r2's interactive raising length (ns): `R x T / peak_rate` with the reference pair (R, T) of the device's
/// kind and speed class ([`super::era::V7_R_FAST`] and the tables beside it), without v5's 3..25 s clamp. On a
/// fast rotational disk at R = 17415 that is T = 5.5 s.
pub fn wr_duration_v7(rotational: bool, slow: bool, peak_rate: u64) -> Time {
    use super::era::{V7_R_FAST, V7_R_SLOW, V7_T_FAST_MS, V7_T_SLOW_MS};
    let k = usize::from(!rotational);
    let (r, t) = if slow {
        (V7_R_SLOW[k], V7_T_SLOW_MS[k])
    } else {
        (V7_R_FAST[k], V7_T_FAST_MS[k])
    };
    let d = u128::from(r) * u128::from(t) * u128::from(MS) / u128::from(peak_rate.max(1));
    d.min(u128::from(u64::MAX)) as Time
}

impl Bfq {
    /// Current interactive raising length (ns): the `wr_max_time` override or [`wr_duration`].
    pub(crate) fn wr_duration(&self) -> Time {
        if self.p.wr_max_time > 0 {
            self.p.wr_max_time
        } else if self.rules.v7_weight_raising {
            wr_duration_v7(self.rotational, self.v7_slow_device, self.peak.peak)
        } else {
            wr_duration(self.rotational, self.peak.peak)
        }
    }

    /// The raising coefficient of a soft real-time queue: `wr_coeff` x 100 (newest), `wr_coeff` (v7r2).
    pub(crate) fn softrt_coeff(&self) -> u32 {
        if self.rules.v7_weight_raising {
            self.p.wr_coeff.max(2)
        } else {
            self.p.wr_coeff.max(2) * super::tunables::SOFTRT_WR_FACTOR
        }
    }

    /// Changes the raising coefficient of `q`, keeping the counters and the (lazily applied) weight in step.
    pub(crate) fn set_wr_coeff(&mut self, q: QueueId, coeff: u32) {
        let old = self.q(q).wr.coeff;
        if old == coeff {
            return;
        }
        if self.q(q).busy {
            if old > 1 && coeff == 1 {
                crate::counter::dec(&mut self.wr_busy_queues, "wr_busy_queues");
            } else if old == 1 && coeff > 1 {
                self.wr_busy_queues += 1;
            }
        }
        self.qm(q).wr.coeff = coeff;
        let w = self.q(q).orig_weight.saturating_mul(coeff);
        let e = self.q(q).entity;
        self.wf.set_weight(e, w);
        self.sync_counters(q);
    }

    /// Whether an idle→busy switch of `q` at `now` makes it (interactive, soft real-time).
    pub(crate) fn wr_candidate(&self, q: QueueId, now: Time) -> (bool, bool) {
        if !self.p.low_latency {
            return (false, false);
        }
        let qq = self.q(q);
        let in_burst = qq.burst.in_large_burst;
        let interactive = !in_burst
            && qq.dispatched == 0
            && qq
                .became_idle_at
                .is_none_or(|t| now > t.saturating_add(self.p.wr_min_idle_time));
        let seeky_test = !self.rules.v7_weight_raising && super::idling::totally_seeky(qq.seek_history);
        let soft_rt = self.p.wr_max_softrt_rate > 0
            && !seeky_test
            && !in_burst
            && qq.dispatched == 0
            && now > qq.wr.soft_rt_next_start;
        (interactive, soft_rt)
    }

    /// Starts or renews raising on an idle→busy switch (`bfq_update_bfqq_wr_on_rq_arrival`).
    pub(crate) fn wr_on_arrival(&mut self, q: QueueId, interactive: bool, soft_rt: bool, now: Time) {
        let qq = self.q(q);
        // A queue starts raising only if it is sync and not shared; a raised one (async raising included) is
        // renewed or ended at its idle-to-busy switch whatever its kind (`bfq_update_bfqq_wr_on_rq_arrival`).
        if !self.p.low_latency || (qq.wr.coeff == 1 && (!qq.sync || qq.merge.coop)) {
            return;
        }
        if self.rules.v7_weight_raising {
            self.wr_on_arrival_v7(q, interactive, soft_rt, now);
            return;
        }
        if qq
            .merge
            .split_time
            .is_some_and(|t| now <= t.saturating_add(self.p.wr_min_idle_time))
        {
            return;
        }
        let dur = self.wr_duration();
        let two_min = 2 * self.budgets.min_budget();
        let cut_budget = |b: &mut Bfq| {
            let e = b.q(q).entity;
            let budget = b.wf.entity(e).map_or(0, |en| en.budget);
            b.wf.set_budget(e, budget.min(two_min));
        };
        if qq.wr.coeff == 1 {
            if interactive {
                self.set_wr_coeff(q, self.p.wr_coeff.max(2));
                let w = &mut self.qm(q).wr;
                w.kind = WrKind::Interactive;
                w.cur_max_time = dur;
                w.last_start_finish = now;
                w.service_from_wr = 0;
                w.start_at_switch_to_srt = None;
                cut_budget(self);
            } else if soft_rt {
                self.set_wr_coeff(q, self.softrt_coeff());
                let rt = self.p.wr_rt_max_time;
                let w = &mut self.qm(q).wr;
                w.kind = WrKind::SoftRt;
                w.cur_max_time = rt;
                w.last_start_finish = now;
                w.service_from_wr = 0;
                w.start_at_switch_to_srt = None;
                cut_budget(self);
            }
        } else if interactive {
            self.set_wr_coeff(q, self.p.wr_coeff.max(2));
            let w = &mut self.qm(q).wr;
            w.kind = WrKind::Interactive;
            w.cur_max_time = dur;
            w.last_start_finish = now;
        } else if self.q(q).burst.in_large_burst {
            self.end_wr(q, now);
        } else if soft_rt {
            let was = self.q(q).wr;
            self.set_wr_coeff(q, self.softrt_coeff());
            let rt = self.p.wr_rt_max_time;
            let w = &mut self.qm(q).wr;
            if was.kind == WrKind::Interactive {
                w.start_at_switch_to_srt = Some(was.last_start_finish);
            }
            w.kind = WrKind::SoftRt;
            w.cur_max_time = rt;
            w.last_start_finish = now;
        }
    }

    /// v7r2's raising at an idle-to-busy switch: a non-raised queue idle long enough (interactive) or soft
    /// real-time starts raising with `wr_coeff` for the interactive length or `wr_rt_max_time`, its budget
    /// untouched; a raised queue that is interactive again restarts its length; a soft real-time period ends
    /// when the queue is no longer soft real-time; a raised queue whose remaining time is below
    /// `wr_rt_max_time` and that is soft real-time starts a soft real-time period.
    fn wr_on_arrival_v7(&mut self, q: QueueId, interactive: bool, soft_rt: bool, now: Time) {
        let w = self.q(q).wr;
        let rt = self.p.wr_rt_max_time;
        if w.coeff == 1 {
            if !(interactive || soft_rt) {
                return;
            }
            let dur = if interactive { self.wr_duration() } else { rt };
            self.set_wr_coeff(q, self.p.wr_coeff.max(2));
            let ws = &mut self.qm(q).wr;
            ws.kind = if interactive {
                WrKind::Interactive
            } else {
                WrKind::SoftRt
            };
            ws.cur_max_time = dur;
            ws.last_start_finish = now;
            ws.service_from_wr = 0;
        } else if interactive {
            let dur = self.wr_duration();
            let ws = &mut self.qm(q).wr;
            ws.kind = WrKind::Interactive;
            ws.cur_max_time = dur;
        } else if w.kind == WrKind::SoftRt && !soft_rt {
            self.end_wr(q, now);
        } else if soft_rt && w.last_start_finish.saturating_add(w.cur_max_time) < now.saturating_add(rt) {
            let ws = &mut self.qm(q).wr;
            ws.kind = WrKind::SoftRt;
            ws.last_start_finish = now;
            ws.cur_max_time = rt;
        }
    }

    /// Resets the per-backlog counters at an idle→busy switch.
    pub(crate) fn wr_on_idle_busy(&mut self, q: QueueId, now: Time) {
        let w = &mut self.qm(q).wr;
        w.last_idle_bklogged = now;
        w.service_from_backlogged = 0;
        w.softrt_update = false;
    }

    /// Async raising: a busy, non-raised async queue receiving a request long after its previous one.
    pub(crate) fn async_raise_on_arrival(&mut self, q: QueueId, sync: bool, now: Time) {
        let qq = self.q(q);
        if !self.p.low_latency || sync || qq.sync || qq.wr.coeff != 1 || !qq.busy {
            return;
        }
        let Some(last) = qq.last_arrival else { return };
        if now >= last.saturating_add(self.p.wr_min_inter_arr_async) {
            let dur = self.wr_duration();
            self.set_wr_coeff(q, self.p.wr_coeff.max(2));
            let w = &mut self.qm(q).wr;
            w.kind = WrKind::Interactive;
            w.cur_max_time = dur;
            w.last_start_finish = now;
            w.service_from_wr = 0;
        }
    }

    /// Accounts service for the raising limits.
    pub(crate) fn wr_on_served(&mut self, q: QueueId, charge: u64) {
        let w = &mut self.qm(q).wr;
        if w.coeff > 1 {
            w.service_from_wr = w.service_from_wr.saturating_add(charge);
        }
        w.service_from_backlogged = w.service_from_backlogged.saturating_add(charge);
    }

    /// Ends raising.
    pub(crate) fn end_wr(&mut self, q: QueueId, now: Time) {
        self.set_wr_coeff(q, 1);
        let w = &mut self.qm(q).wr;
        w.kind = WrKind::None;
        w.cur_max_time = 0;
        w.last_start_finish = now;
        w.start_at_switch_to_srt = None;
    }

    /// `bfq_update_wr_data`, at each dispatch of the in-service queue: ends raising when its time or service is
    /// up, when the queue joined a large burst, or when a soft real-time queue turned totally seeky; an expired
    /// soft real-time period falls back to an interrupted interactive one that is still running.
    pub(crate) fn update_wr_data(&mut self, q: QueueId, now: Time) {
        let w = self.q(q).wr;
        if w.coeff <= 1 {
            return;
        }
        if self.q(q).burst.in_large_burst || !self.p.low_latency {
            self.end_wr(q, now);
            return;
        }
        if self.rules.v7_weight_raising {
            // v7r2 ends raising on time only.
            if now > w.last_start_finish.saturating_add(w.cur_max_time) {
                self.end_wr(q, now);
            }
            return;
        }
        if now > w.last_start_finish.saturating_add(w.cur_max_time) {
            let dur = self.wr_duration();
            match (w.kind, w.start_at_switch_to_srt) {
                (WrKind::SoftRt, Some(t)) if now <= t.saturating_add(dur) => {
                    self.set_wr_coeff(q, self.p.wr_coeff.max(2));
                    let ws = &mut self.qm(q).wr;
                    ws.kind = WrKind::Interactive;
                    ws.last_start_finish = t;
                    ws.cur_max_time = dur;
                    ws.start_at_switch_to_srt = None;
                }
                _ => {
                    self.end_wr(q, now);
                    return;
                }
            }
        }
        let w = self.q(q).wr;
        let too_much_service = w.kind == WrKind::Interactive && w.service_from_wr > MAX_SERVICE_FROM_WR;
        let seeky_soft_rt = w.kind == WrKind::SoftRt && super::idling::totally_seeky(self.q(q).seek_history);
        if too_much_service || seeky_soft_rt {
            self.end_wr(q, now);
        }
    }

    fn softrt_next_start(&self, q: QueueId, now: Time) -> Time {
        let w = self.q(q).wr;
        let rate = self.p.wr_max_softrt_rate.max(1);
        let by_rate = w
            .last_idle_bklogged
            .saturating_add((u128::from(w.service_from_backlogged) * u128::from(SEC) / u128::from(rate)) as Time);
        let by_gap = now
            .saturating_add(self.p.slice_idle)
            .saturating_add(SOFTRT_NEXT_START_MARGIN);
        if self.rules.v7_weight_raising {
            // v7r2 does not keep a later earlier-computed start.
            return by_rate.max(by_gap);
        }
        w.soft_rt_next_start.max(by_rate).max(by_gap)
    }

    /// At expiration: plans the earliest soft real-time reactivation if the queue is drained, whatever its raising
    /// (the newest kernel computes it for interactive queues too, since 2021: skipping them left a greedy reader,
    /// raised as interactive when it started, with a stale start time once its raising ended, so its next
    /// idle-to-busy switch raised it as soft real-time x3000). With requests still in the driver the planning waits
    /// for the completion that drains the queue; v7r2 meanwhile sets the start to "never".
    pub(crate) fn softrt_on_expire(&mut self, q: QueueId, now: Time) {
        if !self.p.low_latency || self.p.wr_max_softrt_rate == 0 || !self.q(q).rqs.is_empty() {
            return;
        }
        if self.q(q).dispatched == 0 {
            let t = self.softrt_next_start(q, now);
            self.qm(q).wr.soft_rt_next_start = t;
        } else {
            if self.rules.v7_weight_raising {
                self.qm(q).wr.soft_rt_next_start = Time::MAX;
            }
            self.qm(q).wr.softrt_update = true;
        }
    }

    /// At a completion: the deferred soft real-time planning of a queue that is now drained.
    pub(crate) fn softrt_on_completion(&mut self, q: QueueId, now: Time) {
        let qq = self.q(q);
        if qq.wr.softrt_update && qq.rqs.is_empty() && qq.dispatched == 0 {
            let t = self.softrt_next_start(q, now);
            let w = &mut self.qm(q).wr;
            w.soft_rt_next_start = t;
            w.softrt_update = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::peak_rate::{REF_RATE_NONROT, REF_RATE_ROT};
    use super::super::tests::{bfq, checked};
    use super::*;
    use crate::device::DeviceInfo;
    use crate::scheduler::Scheduler;
    use crate::types::{Direction, FlowId, FlowInfo, Request, RequestId};

    fn read(id: u64, flow: u32, sector: u64) -> Request {
        Request::new(RequestId(id), FlowId(flow), Direction::Read, true, sector, 8)
    }

    // The raising length is the reference duration at the reference rate, inversely proportional to the peak
    // rate, within 3..25 s.
    #[test]
    fn raising_length_follows_the_peak_rate_within_bounds() {
        assert_eq!(wr_duration(true, REF_RATE_ROT), WR_REF_DURATION_ROT);
        assert_eq!(wr_duration(true, 2 * REF_RATE_ROT), WR_REF_DURATION_ROT / 2);
        assert_eq!(wr_duration(false, REF_RATE_NONROT / 2), 2 * WR_REF_DURATION_NONROT);
        // The non-rotational reference (2.5 s) is below the 3 s minimum, so at its reference rate the minimum wins.
        assert_eq!(wr_duration(false, REF_RATE_NONROT), WR_DURATION_MIN);
        assert_eq!(wr_duration(true, 100 * REF_RATE_ROT), WR_DURATION_MIN);
        assert_eq!(wr_duration(true, REF_RATE_ROT / 100), WR_DURATION_MAX);
    }

    // v7r2's raising length is R x T / peak rate with the (R, T) pair of the device's kind and speed class and no
    // clamp: at its own reference rate each kind lasts its reference time (rotational fast 5.5 s, non-rotational
    // fast 2 s, rotational slow 2.6 s), twice the rate halves it. The figures are v7r2's, written out.
    #[test]
    fn v7r2_raising_length_is_the_reference_time_scaled_by_the_rate() {
        assert_eq!(wr_duration_v7(true, false, 17_415), 5_500 * MS);
        assert_eq!(wr_duration_v7(true, false, 34_830), 2_750 * MS);
        assert_eq!(wr_duration_v7(false, false, 34_791), 2_000 * MS);
        assert_eq!(wr_duration_v7(true, true, 1_536), 2_600 * MS);
        assert_eq!(wr_duration_v7(false, true, 21_504), 500 * MS);
    }

    // Interactive raising stretches the budget timeout by the raising coefficient (a raised application may take
    // its time to use its budget); soft real-time raising and no raising leave it as it is.
    #[test]
    fn only_interactive_raising_stretches_the_budget_timeout() {
        let mut w = WrState::new(0);
        assert_eq!(w.timeout_coeff(), 1);
        w.coeff = 30;
        w.kind = WrKind::Interactive;
        assert_eq!(w.timeout_coeff(), 30);
        w.coeff = 3000;
        w.kind = WrKind::SoftRt;
        assert_eq!(w.timeout_coeff(), 1);
    }

    // A queue that expires empty after little service may count as soft real-time again only once slice_idle plus
    // 4 ms have passed: here 8 sectors (their rate term is about 1 ms) and an expiry at 2 ms with slice_idle 8 ms
    // give 2 + 8 + 4 = 14 ms.
    #[test]
    fn a_light_queue_is_soft_real_time_again_after_slice_idle_plus_4_ms() {
        let mut b = bfq(&DeviceInfo::hdd(), &["slice_idle=8"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        let r = super::super::tests::next_rq(&mut b, 0);
        b.completed(&r, MS);
        b.expire(q, super::super::budget::Expiration::NoMoreRequests, 2 * MS);
        assert_eq!(b.q(q).wr.soft_rt_next_start, 14 * MS);
    }

    // The `wr_max_time` tunable overrides the computed length: with 2000 ms a new queue's raising is still on at
    // 2 s and over just after (computed, it would last 10.5 s on this device: `raising_ends_after_its_duration`).
    #[test]
    fn wr_max_time_sets_the_raising_length() {
        let mut b = bfq(&DeviceInfo::hdd(), &["wr_max_time=2000"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.q(q).wr.coeff, 30);
        b.update_wr_data(q, 2 * SEC);
        assert_eq!(b.q(q).wr.coeff, 30, "raised until 2 s have passed");
        b.update_wr_data(q, 2 * SEC + 1);
        assert_eq!(b.q(q).wr.coeff, 1, "over after 2 s");
    }

    // v7r2 raises too (its own `wr_on_arrival_v7`): a new sync queue of an idle flow is raised at its first request,
    // its weight in force multiplied by v7r2's coefficient, for the interactive length.
    #[test]
    fn v7r2_raises_a_new_queue_and_multiplies_its_weight() {
        let dev = DeviceInfo::hdd();
        let v = crate::tunables::TunableValues::parse("bfq-v7r2", &super::super::V7R2_TUNABLES, &dev, &[] as &[&str])
            .unwrap();
        let mut b = Bfq::with_era(
            &dev,
            super::super::tunables::Params::from_values(&v),
            super::super::Era::V7r2,
        );
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        checked(&b);
        let q = b.flows[&1].sync_q.unwrap();
        let coeff = b.p.wr_coeff;
        assert!(coeff > 1);
        assert_eq!(b.q(q).wr.coeff, coeff);
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        assert_eq!(b.wf.entity(b.q(q).entity).unwrap().weight, b.q(q).orig_weight * coeff);
        assert_eq!(b.q(q).wr.cur_max_time, b.wr_duration());
    }

    // A new sync queue of a flow that was idle is raised: its coefficient is wr_coeff, the weight its entity is
    // scheduled with is the original weight times the coefficient, for the current raising length; the raising
    // is still on just before that length has passed and over just after, which restores the weight.
    #[test]
    fn interactive_raising_multiplies_the_weight_for_its_duration() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        checked(&b);
        let q = b.flows[&1].sync_q.unwrap();
        let (orig, coeff) = (b.q(q).orig_weight, b.q(q).wr.coeff);
        assert_eq!(orig, 40);
        assert_eq!(coeff, 30);
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        assert_eq!(b.wf.entity(b.q(q).entity).unwrap().weight, orig * coeff);
        assert_eq!(b.wr_busy_queues, 1);
        let dur = b.wr_duration();
        assert_eq!(b.q(q).wr.cur_max_time, dur);
        b.update_wr_data(q, dur);
        assert_eq!(b.q(q).wr.coeff, 30, "raised until the length has passed");
        b.update_wr_data(q, dur + 1);
        assert_eq!(b.q(q).wr.coeff, 1);
        assert_eq!(b.q(q).wr.kind, WrKind::None);
        assert_eq!(b.wr_busy_queues, 0);
        checked(&b);
    }

    // Interactive raising also ends once the queue has received more than MAX_SERVICE_FROM_WR sectors raised.
    #[test]
    fn interactive_raising_ends_after_too_much_service() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        b.wr_on_served(q, MAX_SERVICE_FROM_WR);
        b.update_wr_data(q, MS);
        assert_eq!(b.q(q).wr.coeff, 30, "exactly the limit is still allowed");
        b.wr_on_served(q, 1);
        b.update_wr_data(q, MS);
        assert_eq!(b.q(q).wr.coeff, 1);
    }

    // Without low_latency no queue is raised, and a flow that was busy a moment ago (within wr_min_idle_time)
    // is not an interactive candidate.
    #[test]
    fn no_raising_without_low_latency_or_idleness() {
        let mut b = bfq(&DeviceInfo::hdd(), &["low_latency=0"]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.q(q).wr.coeff, 1);
        assert_eq!(b.wf.entity(b.q(q).entity).unwrap().weight, 40);

        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        b.qm(q).became_idle_at = Some(SEC);
        let min_idle = b.p.wr_min_idle_time;
        assert!(
            !b.wr_candidate(q, SEC + min_idle).0,
            "idle for exactly wr_min_idle_time"
        );
        assert!(b.wr_candidate(q, SEC + min_idle + 1).0);
    }

    // The newest kernel plans a drained queue's earliest soft real-time start at every expiration, interactive
    // raising or not (the exclusion of interactive queues was dropped in 2021): a reader raised as interactive
    // that expires empty gets a start no earlier than now + slice_idle + 4 ms, and one that received many sectors
    // since it became busy gets a start that its rate pushes far away (service / wr_max_softrt_rate).
    #[test]
    fn soft_rt_start_is_planned_for_interactive_queues_too() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        let r = super::super::tests::next_rq(&mut b, 0);
        b.wr_on_served(q, 70_000);
        b.completed(&r, MS);
        let now = 2 * MS;
        b.expire(q, super::super::budget::Expiration::NoMoreRequests, now);
        let next = b.q(q).wr.soft_rt_next_start;
        assert!(next >= now + b.p.slice_idle + SOFTRT_NEXT_START_MARGIN, "{next}");
        assert!(next >= 10 * SEC, "70 000 sectors at 7000 sectors/s: {next}");
    }

    // A soft real-time period that expires falls back to the interactive period it interrupted, if that one is
    // still running, with the interactive coefficient.
    #[test]
    fn expired_soft_rt_period_resumes_the_interrupted_interactive_one() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        let rt = b.p.wr_rt_max_time;
        b.wr_on_arrival(q, false, true, 100 * MS);
        assert_eq!(b.q(q).wr.kind, WrKind::SoftRt);
        assert_eq!(b.q(q).wr.coeff, 30 * super::super::tunables::SOFTRT_WR_FACTOR);
        assert_eq!(b.q(q).wr.start_at_switch_to_srt, Some(0));
        b.update_wr_data(q, 100 * MS + rt + 1);
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        assert_eq!(b.q(q).wr.coeff, 30);
        assert_eq!(b.q(q).wr.last_start_finish, 0, "the interactive period keeps its start");
    }

    /// A v7r2 BFQ on the test HDD with v7r2's default tunables.
    fn v7() -> Bfq {
        let dev = DeviceInfo::hdd();
        let v = crate::tunables::TunableValues::parse("bfq-v7r2", &super::super::V7R2_TUNABLES, &dev, &[] as &[&str])
            .unwrap();
        Bfq::with_era(
            &dev,
            super::super::tunables::Params::from_values(&v),
            super::super::Era::V7r2,
        )
    }

    /// Flow 1's sync queue on `b`, raised as interactive by its first request at 0.
    fn raised_at_0(b: &mut Bfq) -> QueueId {
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 1, 0), 0);
        let q = b.flows[&1].sync_q.unwrap();
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        q
    }

    /// The weight `q` is to be scheduled with: `set_wr_coeff` hands it to B-WF2Q+, which applies it at the
    /// entity's next activation (`interactive_raising_multiplies_the_weight_for_its_duration` checks that it does).
    fn weight(b: &Bfq, q: QueueId) -> u32 {
        b.q(q).orig_weight * b.q(q).wr.coeff
    }

    /// Whether `q` is still raised after the raising-end check at `now` (`update_wr_data`, run at each dispatch).
    fn raised_at(b: &mut Bfq, q: QueueId, now: Time) -> bool {
        b.update_wr_data(q, now);
        weight(b, q) > b.q(q).orig_weight
    }

    // v7r2 (`bfq_add_request` of 2014) at an idle-to-busy switch of a raised queue: a soft real-time period ends
    // when the queue comes back no longer soft real-time and goes on when it comes back soft real-time; an
    // interactive period is left alone by an arrival that is neither, even in its last 300 ms (it is not turned
    // into a soft real-time period that would outlast it).
    #[test]
    fn v7r2_ends_a_soft_real_time_period_only_when_the_queue_is_no_longer_soft_real_time() {
        let mut b = v7();
        let q = raised_at_0(&mut b);
        let (orig, coeff) = (b.q(q).orig_weight, b.p.wr_coeff);
        let (d, rt) = (b.q(q).wr.cur_max_time, b.p.wr_rt_max_time);
        assert!(d > 2 * rt, "the interactive length {d} is well above wr_rt_max_time");
        // 100 ms before the interactive period ends, an arrival that is neither interactive nor soft real-time.
        b.wr_on_arrival(q, false, false, d - rt / 3);
        assert_eq!(weight(&b, q), orig * coeff, "an interactive period goes on");
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        assert!(raised_at(&mut b, q, d), "raised to its own end");
        assert!(!raised_at(&mut b, q, d + 1), "and not beyond it");
        // A soft real-time period, started later.
        let t = 10 * d;
        b.wr_on_arrival(q, false, true, t);
        assert_eq!((b.q(q).wr.kind, weight(&b, q)), (WrKind::SoftRt, orig * coeff));
        b.wr_on_arrival(q, false, true, t + rt / 3);
        assert_eq!(weight(&b, q), orig * coeff, "soft real-time again: the period goes on");
        b.wr_on_arrival(q, false, false, t + 2 * rt / 3);
        assert_eq!(
            weight(&b, q),
            orig,
            "no longer soft real-time: the raising ends at once"
        );
        assert_eq!(b.q(q).wr.coeff, 1);
        checked(&b);
    }

    // v7r2: a raised queue that comes back soft real-time with less than wr_rt_max_time of raising left starts a
    // soft real-time period from now (raised wr_rt_max_time more, beyond its old end); with more left, or exactly
    // wr_rt_max_time (the kernel's `time_before` is strict), its period is kept, still interactive, so a later
    // arrival that is not soft real-time does not end it.
    #[test]
    fn v7r2_switches_to_soft_real_time_only_when_less_than_its_length_is_left() {
        // Much time left: nothing changes, the raising ends at the interactive end.
        let mut b = v7();
        let q = raised_at_0(&mut b);
        let (d, rt) = (b.q(q).wr.cur_max_time, b.p.wr_rt_max_time);
        b.wr_on_arrival(q, false, true, SEC);
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        assert!(!raised_at(&mut b, q, d + 1));

        // 100 ms left: a soft real-time period from now, to now + rt.
        let mut b = v7();
        let q = raised_at_0(&mut b);
        let now = d - rt / 3;
        b.wr_on_arrival(q, false, true, now);
        assert_eq!(b.q(q).wr.kind, WrKind::SoftRt);
        assert!(raised_at(&mut b, q, d + 1), "raised past the interactive end");
        assert!(raised_at(&mut b, q, now + rt));
        assert!(!raised_at(&mut b, q, now + rt + 1));

        // Exactly rt left: kept as it is; an arrival that is neither then leaves it raised.
        let mut b = v7();
        let q = raised_at_0(&mut b);
        b.wr_on_arrival(q, false, true, d - rt);
        assert_eq!(b.q(q).wr.kind, WrKind::Interactive);
        b.wr_on_arrival(q, false, false, d - rt / 2);
        assert!(raised_at(&mut b, q, d), "the interactive period was not ended");
        checked(&b);
    }

    // The soft real-time test at an idle-to-busy switch: the queue must come back strictly after its planned
    // earliest soft real-time start; the newest kernel also refuses a totally seeky queue (all of its last 32
    // requests seeky: `BFQQ_TOTALLY_SEEKY`), v7r2 has no such test.
    #[test]
    fn soft_real_time_needs_the_planned_start_passed_and_newest_refuses_a_totally_seeky_queue() {
        for era_v7 in [false, true] {
            let mut b = if era_v7 { v7() } else { bfq(&DeviceInfo::hdd(), &[]) };
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            let q = b.sync_queue(FlowId(1), 0);
            b.qm(q).wr.soft_rt_next_start = SEC;
            assert!(!b.wr_candidate(q, SEC).1, "at the planned start: not yet");
            assert!(b.wr_candidate(q, SEC + 1).1, "just after it");
            b.qm(q).seek_history = u32::MAX;
            assert_eq!(b.wr_candidate(q, SEC + 1).1, era_v7, "totally seeky (v7r2: {era_v7})");
            b.qm(q).seek_history = u32::MAX - 1;
            assert!(b.wr_candidate(q, SEC + 1).1, "one request of 32 not seeky is enough");
        }
    }

    // Newest: a queue produced by a split is neither raised nor renewed until wr_min_idle_time has passed since the
    // split (`bfq_bfqq_handle_idle_busy_switch`: the split queue's process just lost a shared queue's raising, and
    // its first arrivals say nothing about its interactivity).
    #[test]
    fn a_queue_split_less_than_wr_min_idle_time_ago_is_not_raised() {
        let mut b = bfq(&DeviceInfo::hdd(), &[]);
        let q = raised_at_0(&mut b);
        b.end_wr(q, 0);
        let min_idle = b.p.wr_min_idle_time;
        b.qm(q).merge.split_time = Some(SEC);
        b.wr_on_arrival(q, true, false, SEC + min_idle);
        assert_eq!(
            weight(&b, q),
            b.q(q).orig_weight,
            "not raised at split + wr_min_idle_time"
        );
        b.wr_on_arrival(q, true, false, SEC + min_idle + 1);
        assert_eq!(weight(&b, q), b.q(q).orig_weight * 30, "raised just after");
    }

    // Newest: starting raising cuts the queue's budget to 2 x min_budget (`bfq_update_bfqq_wr_on_rq_arrival`), so a
    // raised newcomer gets short slots (its B-WF2Q+ finish time is near) and does not hold the device for a whole
    // max_budget; without raising the newcomer keeps max_budget.
    #[test]
    fn raising_cuts_the_budget_to_twice_the_minimum() {
        let budget = |ll: &str| {
            let mut b = bfq(&DeviceInfo::hdd(), &[ll]);
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(read(1, 1, 0), 0);
            let q = b.flows[&1].sync_q.unwrap();
            let min = b.budgets.min_budget();
            (b.wf.entity(b.q(q).entity).unwrap().budget, min, b.q(q).max_budget)
        };
        let (raised, min, max) = budget("low_latency=1");
        assert!(max > 2 * min + 2, "{max} {min}: the cut is visible");
        assert_eq!(raised, 2 * min);
        let (plain, _, max) = budget("low_latency=0");
        assert_eq!(plain, max);
    }

    // Async raising happens only to a busy, non-raised async queue receiving an async request wr_min_inter_arr_async
    // after its previous one, with low_latency on: each guard alone refuses it (a sync request, a sync queue, a
    // queue already raised, which keeps its period, an idle queue, low_latency off).
    #[test]
    fn async_raising_needs_every_one_of_its_conditions() {
        // An async queue, busy, last request at 0, not raised; `tune` breaks one condition.
        let try_raise = |ll: bool, sync: bool, tune: &dyn Fn(&mut Bfq, QueueId)| {
            let mut b = bfq(
                &DeviceInfo::hdd(),
                &[if ll { "low_latency=1" } else { "low_latency=0" }],
            );
            b.flow_started(&FlowInfo::new(FlowId(1)), 0);
            b.insert(Request::new(RequestId(1), FlowId(1), Direction::Write, false, 0, 8), 0);
            let q = b.groups[0].async_q[8 + 4].unwrap();
            assert!(b.q(q).busy && b.q(q).wr.coeff == 1);
            tune(&mut b, q);
            let before = b.q(q).wr;
            b.async_raise_on_arrival(q, sync, SEC);
            (before, b.q(q).wr, weight(&b, q) > b.q(q).orig_weight)
        };
        let none = |_: &mut Bfq, _: QueueId| {};
        assert!(try_raise(true, false, &none).2, "all conditions met: raised");
        assert!(!try_raise(false, false, &none).2, "low_latency off");
        assert!(!try_raise(true, true, &none).2, "a sync request");
        assert!(!try_raise(true, false, &|b, q| b.qm(q).sync = true).2, "a sync queue");
        assert!(!try_raise(true, false, &|b, q| b.qm(q).busy = false).2, "an idle queue");
        let (before, after, still) = try_raise(true, false, &|b, q| {
            b.set_wr_coeff(q, 30);
            b.qm(q).wr.kind = WrKind::Interactive;
            b.qm(q).wr.last_start_finish = 5 * MS;
        });
        assert!(still);
        assert_eq!(
            after.last_start_finish, before.last_start_finish,
            "a raised queue's period is not restarted"
        );
    }

    // Newest: a soft real-time period that expires after the interactive period it interrupted would have ended
    // does not resume it: the raising ends (at exactly that end it still resumes).
    #[test]
    fn an_expired_soft_rt_period_ends_raising_if_the_interrupted_one_is_over_too() {
        for (late, resumes) in [(0, true), (1, false)] {
            let mut b = bfq(&DeviceInfo::hdd(), &["wr_rt_max_time=4000"]);
            let q = raised_at_0(&mut b);
            let d = b.wr_duration();
            assert!(d > 4 * SEC, "{d}");
            b.wr_on_arrival(q, false, true, d - 4 * SEC - 1);
            assert_eq!(b.q(q).wr.start_at_switch_to_srt, Some(0));
            // The soft real-time period ends at d - 1, the interactive one at d; the check runs at d + late.
            assert_eq!(raised_at(&mut b, q, d + late), resumes);
            assert_eq!(b.q(q).wr.kind == WrKind::Interactive, resumes);
        }
    }

    // Newest: a queue that expired with requests still in the driver plans its earliest soft real-time start at the
    // completion that drains it (slice_idle + 4 ms after that completion here: 8 sectors weigh little); a completion
    // of a queue that was not waiting for it plans nothing, so the start stays where it was.
    #[test]
    fn the_draining_completion_plans_the_soft_real_time_start() {
        let mut b = bfq(&DeviceInfo::hdd(), &["slice_idle=8"]);
        let q = raised_at_0(&mut b);
        let r = super::super::tests::next_rq(&mut b, 0);
        let before = b.q(q).wr.soft_rt_next_start;
        b.expire(q, super::super::budget::Expiration::NoMoreRequests, MS);
        assert_eq!(
            b.q(q).wr.soft_rt_next_start,
            before,
            "planning waits for the completion"
        );
        b.completed(&r, 10 * MS);
        let next = b.q(q).wr.soft_rt_next_start;
        assert_eq!(next, 10 * MS + 8 * MS + SOFTRT_NEXT_START_MARGIN);
        assert!(!b.wr_candidate(q, next).1 && b.wr_candidate(q, next + 1).1);

        // In service and not expired: its completion plans nothing.
        let mut b = bfq(&DeviceInfo::hdd(), &["slice_idle=8"]);
        let q = raised_at_0(&mut b);
        let r = super::super::tests::next_rq(&mut b, 0);
        let before = b.q(q).wr.soft_rt_next_start;
        b.completed(&r, 10 * MS);
        assert_eq!(b.q(q).wr.soft_rt_next_start, before);
        assert!(b.wr_candidate(q, before + 1).1);
    }
}
