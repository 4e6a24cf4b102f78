//! What the simulator measures: device throughput over time, per-flow bytes, request latencies, and the CPU time
//! spent inside the policy.

use bfq_sched::{Direction, FlowId, Time};
use serde::Serialize;
use std::collections::BTreeMap;

/// Width of a throughput bucket (ns): 10 ms, fine enough to cut measurement windows at application start and end.
pub const BUCKET: Time = 10_000_000;

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
    /// Device bytes completed per [`BUCKET`]: `[read, written]`.
    pub buckets: Vec<[u64; 2]>,
    /// Device bytes per flow.
    pub per_flow: BTreeMap<FlowId, FlowBytes>,
    /// Latency from request creation (allocation) to completion, per direction.
    pub latency: [LatencyHistogram; 2],
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
        let b = (now / BUCKET) as usize;
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

    /// Bytes `[read, written]` completed in `[from, to)` (bucket resolution).
    pub fn bytes_between(&self, from: Time, to: Time) -> [u64; 2] {
        let (a, b) = ((from / BUCKET) as usize, (to.div_ceil(BUCKET)) as usize);
        let mut out = [0, 0];
        for x in self.buckets.iter().take(b).skip(a) {
            out[0] += x[0];
            out[1] += x[1];
        }
        out
    }

    /// Throughput `[read, written]` in MB/s (10^6 bytes per second) over `[from, to)`.
    pub fn mbps_between(&self, from: Time, to: Time) -> [f64; 2] {
        let secs = (to.div_ceil(BUCKET) - from / BUCKET) as f64 * BUCKET as f64 / 1e9;
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
