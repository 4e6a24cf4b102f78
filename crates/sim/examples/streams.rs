//! Probe: N interleaved sequential streams of 128 KiB reads against a device preset, closed loop at depth D.
use bfq_sched::Direction;
use bfq_sim::device::{resolve, DevRequest};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let preset = a.get(1).map_or("seagate-hdd", |s| s.as_str());
    let n: u64 = a.get(2).map_or(10, |s| s.parse().unwrap());
    let per_stream: u64 = a.get(3).map_or(1, |s| s.parse().unwrap());
    let mut d = resolve(preset).unwrap().build();
    let gap = 500u64 << 11; // 500 MiB apart
    let mut pos: Vec<u64> = (0..n).map(|i| i * gap).collect();
    let mut now = 0u64;
    let mut bytes = 0u64;
    let mut issued = 0u64;
    // Submits the next 128 KiB read of stream `s`; the tag encodes the stream as `tag % n`.
    let mut next = |d: &mut Box<dyn bfq_sim::device::Device>, s: u64, now: u64| {
        let tag = issued * n + s;
        issued += 1;
        d.submit(
            DevRequest {
                tag,
                dir: Direction::Read,
                sector: pos[s as usize],
                sectors: 256,
            },
            now,
        );
        pos[s as usize] += 256;
    };
    for s in 0..n {
        for _ in 0..per_stream {
            next(&mut d, s, now);
        }
    }
    while now < 5_000_000_000 {
        now = d.next_completion().expect("requests outstanding");
        while let Some(t) = d.pop_completion(now) {
            bytes += 128 << 10;
            next(&mut d, t % n, now);
        }
    }
    println!(
        "{preset}: {n} streams x {per_stream} outstanding: {:.1} MB/s",
        bytes as f64 / 5.0 / 1e6
    );
}
