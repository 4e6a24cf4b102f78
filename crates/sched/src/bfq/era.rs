//! The two eras of BFQ this policy reproduces, as one switch per rule that differs (docs/SCHEDULERS.md, "BFQ in two
//! eras"; the facts are in `shared/docs/fidelity.md` §1 and §2).
//!
//! - [`Era::Newest`] (`bfq`): the rules of the newest mainline BFQ (`block/bfq-iosched.c`, 6.9 and later).
//! - [`Era::V7r2`] (`bfq-v7r2`): BFQ v7r2 for Linux 3.13 (2014), the version seed 004 measured on its first three
//!   devices. Where the two behave the same they run the same code; every rule that differs is one field of
//!   [`Rules`], read at the one place the rule lives.
//!
//! Why the two eras part on ten random readers on an NCQ disk: v7r2 keeps every sync queue's idle window set
//! unless the queue proves it should not idle, and a 4 KiB random reader never receives enough service in a slot
//! for that check to run ([`Rules::idle_window`]); so v7r2 idles after each of its requests and the drive sees
//! one request at a time. The newest kernel decides per slot from the device and the queue
//! (`bfq_better_to_idle`) and does not idle for seeky queues on a queueing disk when nothing needs it.

use crate::types::{Time, MS};

/// Which kernel's BFQ the policy follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// The newest mainline BFQ.
    Newest,
    /// BFQ v7r2 for Linux 3.13 (2014).
    V7r2,
}

/// One switch per rule that differs between the eras; `true` selects the v7r2 rule unless the field says
/// otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The era these rules were built for.
    pub era: Era,
    /// Seekiness from the queue's decayed mean seek distance (seeky above 8192 sectors), v7r2's
    /// `bfq_update_io_seektime`, instead of "more than 19 of the last 32 requests were seeky".
    pub seek_mean: bool,
    /// The sticky per-queue idle window of v7r2 (`bfq_update_idle_window`): set for every new sync queue and
    /// re-evaluated at an arrival only if the queue is not seeky or has received more than max_budget / 8 in its
    /// slot; it decides idling together with [`Rules::v7_idling`].
    pub idle_window: bool,
    /// v7r2's idling predicate (`bfq_bfqq_must_not_expire`): a sync queue idles if it is raised, or has the idle
    /// window unless the device queues and (is non-rotational or a raised queue is busy). Otherwise the newest
    /// `bfq_better_to_idle`.
    pub v7_idling: bool,
    /// v7r2's idle-timer lengths: raised queues 3 x slice_idle; 2 ms only for a seeky, non-raised queue that
    /// received more than max_budget / 8 in the slot. Otherwise the newest: 2 ms for a seeky non-raised queue
    /// in a symmetric scenario, at least 20 ms for a raised one.
    pub v7_idle_lengths: bool,
    /// v7r2's command-queueing detection: threshold 4 requests, samples while at least 4 are in the driver or
    /// queued, no exception for a small in-service queue. Otherwise the newest: threshold 3 with that exception.
    pub v7_hw_tag: bool,
    /// A queue becoming busy may preempt the one in service (newest); v7r2 never preempts.
    pub preemption: bool,
    /// The budget timeout is armed at the slot's first completion (v7r2's `budget_new` flag) and not enforced
    /// while the idle timer runs; the newest arms it when the slot starts.
    pub timeout_at_first_completion: bool,
    /// v7r2's peak-rate estimate, one sample per slot at expiration (7/8 low-pass filter, autotuning after 32
    /// samples, `bfq_update_peak_rate` of 2014), and its "slow" test with full-budget charging
    /// (`bfq_bfqq_charge_full_budget`). Otherwise the newest dispatch-window estimator and time charging.
    pub v7_peak_rate_and_charge: bool,
    /// v7r2's budget feedback: no change on "no more requests", and raised queues follow the same feedback as
    /// the others (the newest gives them 2 x min_budget).
    pub v7_budget_feedback: bool,
    /// v7r2's async handling: charge x11 (`bfq_async_charge_factor` 10 plus the request), an async slot ends after
    /// `max_budget_async_rq` dispatches when other queues are busy, the async budget timeout `timeout_async`, no
    /// async dispatch while sync requests are in the driver, and a per-queue quantum of 4 requests in the driver
    /// while other queues are busy (16 when alone). Otherwise the newest: charge x3, depth limits.
    pub v7_async: bool,
    /// Large-burst detection (newest; v7r2 has none).
    pub burst_detection: bool,
    /// Stable merging of sync queues created close together (newest, since 5.13; v7r2 has none).
    pub stable_merge: bool,
    /// Injection while the in-service queue is plugged (newest; v7r2 has none).
    pub injection: bool,
    /// The asymmetric-scenario logic (weights tree, idling needed for guarantees; newest; v7r2 has none).
    pub asymmetry: bool,
    /// v7r2's weight raising: coefficient 20 (the tunable's default) for interactive and soft real-time queues
    /// alike; interactive length R x T / peak rate (R and T by device kind and speed class, no clamp), no end
    /// after 120 000 sectors of raised service, no totally-seeky test for soft real-time, no budget cut when
    /// raising starts.
    pub v7_weight_raising: bool,
    /// The newest think-time rules: sampled only when the queue has nothing queued or in the driver, short if
    /// the mean is at most slice_idle / 2. v7r2 samples at every arrival, short if at most slice_idle.
    pub newest_think_time: bool,
    /// Tag depth limits for async I/O and sync writes (`bfq_limit_depth`, blk-mq; newest only).
    pub depth_limits: bool,
    /// I/O bound judged by I/O intensity (newest, `bfq_update_io_intensity`, 2021): a sync queue is I/O bound
    /// while it was idle (empty, nothing in the driver) at most 20 % of a window of about 200 ms. v7r2 instead
    /// restores the flag after 120 consecutive in-time arrivals (`requests_within_timer`).
    pub io_intensity: bool,
    /// The legacy block layer's allocation exemption (`bfq_may_queue`, v7r2): once per slot, the process of the
    /// in-service queue BFQ is idling for may take a request past a full pool (`ELV_MQUEUE_MUST`), so that the
    /// request BFQ waits for is not itself waiting for a request held by queues that BFQ will not serve meanwhile.
    /// blk-mq's BFQ has no such hook.
    pub may_queue_exemption: bool,
}

impl Rules {
    /// The newest kernel's rules.
    pub const NEWEST: Rules = Rules {
        era: Era::Newest,
        seek_mean: false,
        idle_window: false,
        v7_idling: false,
        v7_idle_lengths: false,
        v7_hw_tag: false,
        preemption: true,
        timeout_at_first_completion: false,
        v7_peak_rate_and_charge: false,
        v7_budget_feedback: false,
        v7_async: false,
        burst_detection: true,
        stable_merge: true,
        injection: true,
        asymmetry: true,
        v7_weight_raising: false,
        newest_think_time: true,
        depth_limits: true,
        io_intensity: true,
        may_queue_exemption: false,
    };

    /// BFQ v7r2's rules.
    pub const V7R2: Rules = Rules {
        era: Era::V7r2,
        seek_mean: true,
        idle_window: true,
        v7_idling: true,
        v7_idle_lengths: true,
        v7_hw_tag: true,
        preemption: false,
        timeout_at_first_completion: true,
        v7_peak_rate_and_charge: true,
        v7_budget_feedback: true,
        v7_async: true,
        burst_detection: false,
        stable_merge: false,
        injection: false,
        asymmetry: false,
        v7_weight_raising: true,
        newest_think_time: false,
        depth_limits: false,
        io_intensity: false,
        may_queue_exemption: true,
    };

    /// The rules of `era`.
    pub fn of(era: Era) -> Rules {
        match era {
            Era::Newest => Rules::NEWEST,
            Era::V7r2 => Rules::V7R2,
        }
    }
}

/// The newest kernel's I/O-intensity window (ns): once longer, it is halved, as is the idle time counted in it.
pub const IO_INTENSITY_WINDOW: Time = 200 * MS;

/// v7r2: a queue is seeky when its decayed mean seek distance exceeds this (sectors), `BFQQ_SEEK_THR`.
pub const V7_SEEK_THR: u64 = 8 * 1024;

/// v7r2's reference rates (sectors/µs << 16), `R_slow` and `R_fast`, indexed by `[rotational as usize ^ 1]`
/// (0 rotational, 1 non-rotational), from the v7 sources' tables.
pub const V7_R_SLOW: [u64; 2] = [1536, 10752];
/// See [`V7_R_SLOW`].
pub const V7_R_FAST: [u64; 2] = [17415, 34791];
/// v7's reference start-up times (ms), `T_slow` and `T_fast`, same indexing; fidelity.md §2 gives T = 5.5 s
/// with R = 17415 for v7r2 on a rotational disk.
pub const V7_T_SLOW_MS: [u64; 2] = [2600, 1000];
/// See [`V7_T_SLOW_MS`].
pub const V7_T_FAST_MS: [u64; 2] = [5500, 2000];

/// v7r2: async requests cost `1 + 10` times their size (`bfq_async_charge_factor` = 10).
pub const V7_ASYNC_CHARGE: u64 = 11;

/// v7r2: requests a queue may have in the driver while other queues are busy (the dispatch quantum).
pub const V7_QUANTUM: u32 = 4;

/// v7r2: peak-rate samples (one per long enough slot) before the maximum budget is autotuned.
pub const V7_PEAK_RATE_SAMPLES: u32 = 32;

/// Decayed mean seek distance of a queue (v7r2's `seek_samples`, `seek_total`, `seek_mean`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeekMean {
    /// Filtered sample count (256 = one sample).
    pub samples: u64,
    /// Filtered sum of distances (sectors x 256).
    pub total: u64,
    /// Mean seek distance (sectors).
    pub mean: u64,
}

impl SeekMean {
    /// Adds the distance (sectors) from the end of the queue's previous request to the new one. The first
    /// request is not a seek; while few samples exist a distance counts at most 4 x mean + 1 GiB, later at most
    /// 4 x mean + 64 MiB (in sectors: 2^21 and 2^17), which bounds how far one jump moves the mean (one jump still makes
    /// a sequential reader seeky for a few requests, as in v7r2).
    pub fn update(&mut self, distance: u64) {
        let d = if self.samples == 0 {
            0
        } else if self.samples <= 60 {
            distance.min(self.mean.saturating_mul(4).saturating_add(2 * 1024 * 1024))
        } else {
            distance.min(self.mean.saturating_mul(4).saturating_add(2 * 1024 * 64))
        };
        self.samples = (7 * self.samples + 256) / 8;
        self.total = (7 * self.total).saturating_add(256u64.saturating_mul(d)) / 8;
        self.mean = (self.total + self.samples / 2) / self.samples.max(1);
    }

    /// Seeky by v7r2's rule.
    pub fn seeky(&self) -> bool {
        self.mean > V7_SEEK_THR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A sequential reader (distance 0) never becomes seeky; a random reader jumping 1 GiB (2^21 sectors) each time
    // is seeky from its second request (the first is not a seek), its mean well above 8192 sectors.
    #[test]
    fn mean_seek_distance() {
        let mut s = SeekMean::default();
        for _ in 0..100 {
            s.update(0);
        }
        assert!(!s.seeky());
        let mut r = SeekMean::default();
        r.update(1 << 21);
        assert!(!r.seeky(), "the first request is not a seek");
        r.update(1 << 21);
        assert!(r.seeky(), "mean {}", r.mean);
        // One far jump in a sequential stream counts at most 4 x mean + 2^17 sectors, with weight 1/8.
        let mut q = SeekMean::default();
        for _ in 0..100 {
            q.update(0);
        }
        q.update(1 << 30);
        // (the filtered sample count settles a little below 256, hence the 5 % margin)
        assert!(q.mean <= (2 * 1024 * 64) / 8 * 105 / 100, "mean {}", q.mean);
    }

    // Issue 21 (session 9): v7r2's seek filter (`bfq_update_io_seektime`) with its figures written out. Samples
    // are counted in 1/256 units and decay by 7/8 (0 -> 32 -> 60 -> 84 -> 105 -> 123), the distance total the
    // same way, and the mean is total / samples rounded to nearest. A reader jumping 10 000 sectors each time:
    // the first request is no seek (mean 0); then 2 560 000 / 8 = 320 000 over 60 gives 5333; 600 000 / 84 =
    // 7143; 845 000 / 105 = 8048, still not seeky (8192 is the threshold); 1 059 375 / 123 = 8613, seeky.
    #[test]
    fn the_mean_seek_distance_is_a_seven_eighths_filter_rounded_to_nearest() {
        let mut s = SeekMean::default();
        let mut got = Vec::new();
        for _ in 0..5 {
            s.update(10_000);
            got.push((s.samples, s.total, s.mean, s.seeky()));
        }
        assert_eq!(
            got,
            vec![
                (32, 0, 0, false),
                (60, 320_000, 5333, false),
                (84, 600_000, 7143, false),
                (105, 845_000, 8048, false),
                (123, 1_059_375, 8613, true),
            ]
        );
    }

    // One far jump counts at most 4 x mean + 2^21 sectors (1 GiB) while the filtered count is at most 60 (the
    // second and third requests), 4 x mean + 2^17 (64 MiB) after. From a mean of 0: at 32 and at 60 samples the
    // jump counts 2^21 (total 256 x 2^21 / 8 = 67 108 864, mean 1 118 481 and 798 915); at 84 it counts 2^17
    // (total 4 194 304, mean 39 946).
    #[test]
    fn one_far_jump_is_capped_by_how_many_samples_came_before() {
        for (before, want) in [
            (1, (60, 67_108_864, 1_118_481)),
            (2, (84, 67_108_864, 798_915)),
            (3, (105, 4_194_304, 39_946)),
        ] {
            let mut s = SeekMean::default();
            for _ in 0..before {
                s.update(0);
            }
            s.update(1 << 30);
            assert_eq!((s.samples, s.total, s.mean), want, "after {before} sequential requests");
        }
    }

    // Seeky means a mean seek distance strictly above 8192 sectors (4 MiB).
    #[test]
    fn seeky_above_8192_sectors() {
        let at = |mean| SeekMean {
            samples: 256,
            total: 256 * mean,
            mean,
        };
        assert!(!at(8192).seeky());
        assert!(at(8193).seeky());
        assert!(!at(0).seeky());
    }

    // The I/O-intensity window (`bfq_update_io_intensity`) is halved only once it is longer than 200 ms. A reader
    // whose window is exactly 200 ms old at a request (no idle time) keeps it whole; 41 ms later, after 40 ms
    // idle, it has been idle 40 of 241 ms, at most a fifth: still I/O bound. Had the window been halved at 200 ms
    // (to 100 ms), the same 40 ms would be judged against 141 ms, more than a fifth, and the reader would lose
    // IO_bound (and with it the idling that keeps its disk head).
    #[test]
    fn the_io_intensity_window_is_halved_only_past_200_ms() {
        use super::super::*;
        use crate::device::DeviceInfo;
        use crate::types::{Direction, FlowId, FlowInfo, Request, RequestId, SEC};
        let read = |id: u64, sector: u64| Request::new(RequestId(id), FlowId(1), Direction::Read, true, sector, 8);
        let mut d = DeviceInfo::hdd();
        d.queue_depth = 1;
        let v = crate::tunables::TunableValues::parse("bfq", &TUNABLES, &d, &["low_latency=0"]).unwrap();
        let mut b = Bfq::new(&d, tunables::Params::from_values(&v));
        b.flow_started(&FlowInfo::new(FlowId(1)), 0);
        b.insert(read(1, 0), SEC);
        let Decision::Dispatch(r) = b.dispatch(SEC) else {
            panic!()
        };
        let c = SEC + MS;
        b.completed(&r, c);
        let q = b.flows[&1].sync_q.unwrap();
        {
            let qq = b.qm(q);
            qq.io_start_time = c - 200 * MS;
            qq.tot_idle_time = 0;
            qq.just_created = false;
        }
        b.insert(read(2, 8), c);
        assert!(b.q(q).io_bound);
        let Decision::Dispatch(r) = b.dispatch(c) else { panic!() };
        b.completed(&r, c + MS);
        b.insert(read(3, 16), c + 41 * MS);
        assert!(b.q(q).io_bound, "idle 40 ms of 241");
        b.check_invariants().unwrap();
    }
}
