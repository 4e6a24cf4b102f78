//! Profiling helper: the engine alone, one flow keeping QD reads of BS bytes in flight against a device or file,
//! random (default) or sequential.
//!
//! `[SPIN_US=n] [LEAD=1] [STANDBY_US=n] [POLL=1] [TUNABLES=k=v,k=v] cargo run -p bfq-engine --release --example engine_load -- PATH [SECONDS] [POLICY] [BS] [QD] [seq]`

use bfq_engine::{AlignedBuf, Engine, EngineConfig, FlowOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = Path::new(
        args.get(1)
            .ok_or("usage: engine_load PATH [SECONDS] [POLICY] [BS] [QD] [seq]")?,
    );
    let secs: u64 = args.get(2).map_or(Ok(5), |s| s.parse())?;
    let policy = args.get(3).map_or("noop", String::as_str);
    let bs: u64 = args.get(4).map_or(Ok(4096), |s| s.parse())?;
    let qd: usize = args.get(5).map_or(Ok(32), |s| s.parse())?;
    let seq = args.get(6).is_some_and(|s| s == "seq");
    // SPIN_US=n sets EngineConfig::spin_us.
    let spin_us = std::env::var("SPIN_US").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    // LEAD=1 sets EngineConfig::lead (leader/followers).
    let lead = std::env::var("LEAD").is_ok_and(|v| v == "1");
    // STANDBY_US=n sets EngineConfig::standby_us (with LEAD=1).
    let standby_us = std::env::var("STANDBY_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(bfq_engine::DEFAULT_STANDBY_US);
    let cfg = EngineConfig {
        spin_us,
        lead,
        standby_us,
        ..EngineConfig::for_path(path)
    };
    // TUNABLES=slice_idle=0,... passes sysfs-style tunables to the policy.
    let tunables: Vec<String> = std::env::var("TUNABLES")
        .map(|v| v.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    let engine = Engine::start_named(policy, &tunables, cfg)?;
    let file = engine.open(path, false)?;
    let flow = engine.flow(FlowOptions::named("load"))?;
    let blocks = file.size_bytes() / bs;
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut n = 0u64;
    let mut next = || {
        if seq {
            n = (n + 1) % blocks;
            return n * bs;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % blocks) * bs
    };
    let (cpu0, t0) = (cpu_ns(), Instant::now());
    let end = t0 + Duration::from_secs(secs);
    for _ in 0..qd {
        flow.submit_read(file, next(), AlignedBuf::new(bs as usize), 0)?;
    }
    let mut ops = 0u64;
    let mut now = t0;
    // POLL=1: the client never waits; it polls `try_wait` (yielding the CPU between polls), the case in which,
    // with LEAD=1, nobody runs the engine loop but the reactor thread after its stand-by.
    let poll = std::env::var("POLL").is_ok_and(|v| v == "1");
    while flow.in_flight() > 0 {
        let c = if poll {
            loop {
                if let Some(c) = flow.try_wait() {
                    break c;
                }
                std::thread::yield_now();
            }
        } else {
            flow.wait()?
        };
        c.result?;
        ops += 1;
        if ops.is_multiple_of(32) {
            now = Instant::now();
        }
        if now < end {
            flow.submit_read(file, next(), c.buf, 0)?;
        }
    }
    let el = t0.elapsed().as_secs_f64();
    let cpu = cpu_ns() - cpu0;
    drop(flow);
    let st = engine.shutdown()?;
    let per = |v: u64| v as f64 / ops as f64;
    println!(
        "{:.0} IOPS {:.1} MiB/s; per request: reactor sleeps {:.3}, reactor stand-bys {:.4}, kicks {:.3}, \
         client wake-ups {:.3}, \
         client leads {:.3}, leader sleeps {:.3}, inline serves {:.3}, timers armed {:.3}, policy {:.0} ns, \
         process CPU {:.0} ns",
        ops as f64 / el,
        ops as f64 * bs as f64 / el / (1 << 20) as f64,
        per(st.reactor_sleeps),
        per(st.reactor_standbys),
        per(st.reactor_kicks),
        per(st.client_wakeups),
        per(st.client_leads),
        per(st.leader_sleeps),
        per(st.inline_serves),
        per(st.timers_armed),
        per(st.policy_ns),
        cpu as f64 / ops as f64
    );
    Ok(())
}

/// CPU time (user + system) of the whole process so far, in nanoseconds.
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
