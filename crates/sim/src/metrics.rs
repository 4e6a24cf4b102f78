//! What the simulator measures: device throughput over time, per-flow bytes, request latencies, and the CPU time
//! spent inside the policy.

use bfq_sched::{Direction, FlowId, Time};
use serde::Serialize;
use std::collections::BTreeMap;

/// Width of a throughput bucket (ns): 10 ms, fine enough to cut measurement windows at application start and end.
pub const BUCKET: Time = 10_000_000;

/// Most throughput buckets kept: 2^17 buckets of 10 ms cover 1310 simulated seconds. A longer run merges
/// neighbouring buckets in pairs and doubles their width (20 ms up to 2620 s, and so on), so the timeline's memory
/// (16 bytes a bucket, at most 2 MiB) does not grow with simulated time; windows are then cut at the wider bucket's
/// edges.
pub const MAX_BUCKETS: usize = 1 << 17;

/// Number of buckets in a latency histogram: bucket `i` holds latencies in `[2^i, 2^(i+1))` microseconds.
pub const LAT_BUCKETS: usize = 24;

/// Latency histogram with power-of-two microsecond buckets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LatencyHistogram {
    /// Counts per bucket; bucket `i` covers `[2^i, 2^(i+1))` µs (bucket 0 also holds < 1 µs).
    pub buckets: Vec<u64>,
    /// Number of samples.
    pub count: u64,
    /// Sum of latencies (ns).
    pub sum_ns: u128,
    /// Largest latency (ns).
    pub max_ns: Time,
}

impl LatencyHistogram {
    /// Adds one latency sample (ns).
    pub fn record(&mut self, ns: Time) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; LAT_BUCKETS];
        }
        let us = (ns / 1000).max(1);
        let i = (63 - us.leading_zeros() as usize).min(LAT_BUCKETS - 1);
        self.buckets[i] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Mean latency (ns), 0 without samples.
    pub fn mean_ns(&self) -> Time {
        if self.count == 0 {
            0
        } else {
            (self.sum_ns / u128::from(self.count)) as Time
        }
    }

    /// Upper edge (ns) of the bucket holding the `q`-quantile (0 < q <= 1), 0 without samples.
    pub fn quantile_upper_ns(&self, q: f64) -> Time {
        let target = ((self.count as f64) * q).ceil() as u64;
        let mut acc = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            acc += c;
            if acc >= target && c > 0 {
                return (2u64 << i) * 1000;
            }
        }
        0
    }
}

/// Bytes moved by one flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FlowBytes {
    /// Bytes read from the device.
    pub read: u64,
    /// Bytes written to the device.
    pub written: u64,
}

/// Everything the simulator measured.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Device bytes completed per bucket of [`Metrics::bucket_width`]: `[read, written]`.
    pub buckets: Vec<[u64; 2]>,
    /// Bucket width (ns) over [`BUCKET`]: 1 until the run outgrows [`MAX_BUCKETS`], then doubled at each merge
    /// (0 means 1, for `Default`).
    bucket_scale: u64,
    /// Device bytes per flow.
    pub per_flow: BTreeMap<FlowId, FlowBytes>,
    /// Latency from request creation (allocation) to completion, per direction.
    pub latency: [LatencyHistogram; 2],
    /// Longest wait from a request's insertion into the policy (after any wait for a tag) to its dispatch to the
    /// device, per direction, ns: how long the policy held it (a merged request counts each part from its own
    /// insertion).
    pub dispatch_wait_max: [Time; 2],
    /// Requests sent to the device (after merging).
    pub device_requests: u64,
    /// Requests created by the host (before merging).
    pub block_requests: u64,
    /// Wall-clock time spent inside the policy (ns), if timing was on.
    pub sched_cpu_ns: u64,
}

impl Metrics {
    /// Records a completed block request.
    pub fn complete(&mut self, now: Time, flow: FlowId, dir: Direction, bytes: u64, latency: Time) {
        let mut b = (now / self.bucket_width()) as usize;
        while b >= MAX_BUCKETS {
            self.coarsen();
            b = (now / self.bucket_width()) as usize;
        }
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, [0, 0]);
        }
        self.buckets[b][dir.index()] += bytes;
        let f = self.per_flow.entry(flow).or_default();
        match dir {
            Direction::Read => f.read += bytes,
            Direction::Write => f.written += bytes,
        }
        self.latency[dir.index()].record(latency);
    }

    /// Width of a throughput bucket now, ns: [`BUCKET`], doubled each time the run outgrew [`MAX_BUCKETS`].
    pub fn bucket_width(&self) -> Time {
        BUCKET * self.bucket_scale.max(1)
    }

    /// Merges neighbouring buckets in pairs and doubles the width.
    fn coarsen(&mut self) {
        let merged: Vec<[u64; 2]> = self
            .buckets
            .chunks(2)
            .map(|c| c.iter().fold([0, 0], |a, x| [a[0] + x[0], a[1] + x[1]]))
            .collect();
        self.buckets = merged;
        self.bucket_scale = self.bucket_scale.max(1) * 2;
    }

    /// Bytes `[read, written]` completed in `[from, to)` (bucket resolution).
    pub fn bytes_between(&self, from: Time, to: Time) -> [u64; 2] {
        let w = self.bucket_width();
        let (a, b) = ((from / w) as usize, (to.div_ceil(w)) as usize);
        let mut out = [0, 0];
        for x in self.buckets.iter().take(b).skip(a) {
            out[0] += x[0];
            out[1] += x[1];
        }
        out
    }

    /// Throughput `[read, written]` in MB/s (10^6 bytes per second) over `[from, to)`.
    pub fn mbps_between(&self, from: Time, to: Time) -> [f64; 2] {
        let w = self.bucket_width();
        let secs = (to.div_ceil(w) - from / w) as f64 * w as f64 / 1e9;
        let b = self.bytes_between(from, to);
        if secs <= 0.0 {
            return [0.0, 0.0];
        }
        [b[0] as f64 / 1e6 / secs, b[1] as f64 / 1e6 / secs]
    }

    /// Aggregate throughput sampled every `period` ns over `[from, to)`, in MB/s per sample (iostat-style).
    pub fn samples(&self, from: Time, to: Time, period: Time) -> Vec<f64> {
        let mut out = Vec::new();
        let mut t = from;
        while t + period <= to {
            let m = self.mbps_between(t, t + period);
            out.push(m[0] + m[1]);
            t += period;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_merges_buckets_and_keeps_every_byte() {
        let mut m = Metrics::default();
        // One 1000-byte read every 5 ms for 4 x the full-resolution span: the timeline merges twice.
        let step = BUCKET / 2;
        let end = 4 * MAX_BUCKETS as u64 * BUCKET;
        let mut t = 0;
        while t < end {
            m.complete(t, FlowId(1), Direction::Read, 1000, 1);
            t += step;
        }
        assert!(m.buckets.len() <= MAX_BUCKETS, "{}", m.buckets.len());
        assert_eq!(m.bucket_width(), 4 * BUCKET, "two merges: 10 ms -> 20 ms -> 40 ms");
        let n = end / step;
        assert_eq!(m.bytes_between(0, end), [n * 1000, 0], "no byte lost in the merges");
        // Throughput is unchanged by the resolution: 1000 B per 5 ms = 0.2 MB/s.
        let mbps = m.mbps_between(0, end)[0];
        assert!((mbps - 0.2).abs() < 1e-9, "{mbps}");
    }

    #[test]
    fn histogram_buckets_and_quantiles() {
        let mut h = LatencyHistogram::default();
        for _ in 0..90 {
            h.record(3_000); // 3 µs -> bucket 1 [2,4)
        }
        for _ in 0..10 {
            h.record(1_000_000); // 1 ms -> bucket 9 [512,1024) µs
        }
        assert_eq!(h.count, 100);
        assert_eq!(h.quantile_upper_ns(0.5), 4_000);
        assert_eq!(h.quantile_upper_ns(0.99), 1_024_000);
        assert_eq!(h.max_ns, 1_000_000);
    }

    #[test]
    fn throughput_over_window() {
        let mut m = Metrics::default();
        // 1 MB read in each of the first 100 buckets (1 s): 100 MB/s.
        for i in 0..100 {
            m.complete(i * BUCKET, FlowId(1), Direction::Read, 1_000_000, 1);
        }
        let r = m.mbps_between(0, 1_000_000_000);
        assert!((r[0] - 100.0).abs() < 1e-9);
        assert_eq!(m.per_flow[&FlowId(1)].read, 100_000_000);
        assert_eq!(m.samples(0, 1_000_000_000, 500_000_000), vec![100.0, 100.0]);
    }
}
