//! Profiling helper: the engine alone on 4 KiB random reads at queue depth 32 against a device or file.
//! `cargo run -p bfq-engine --release --example engine_randread -- PATH [SECONDS] [POLICY]`

use bfq_engine::{AlignedBuf, Engine, EngineConfig, FlowOptions};
use std::path::Path;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = Path::new(args.get(1).ok_or("usage: engine_randread PATH [SECONDS] [POLICY]")?);
    let secs: u64 = args.get(2).map_or(Ok(5), |s| s.parse())?;
    let policy = args.get(3).map_or("noop", String::as_str);
    let engine = Engine::start_named::<&str>(policy, &[], EngineConfig::for_path(path))?;
    let file = engine.open(path, false)?;
    let flow = engine.flow(FlowOptions::named("randread"))?;
    let blocks = file.size_bytes() / 4096;
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % blocks) * 4096
    };
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(secs);
    for _ in 0..32 {
        flow.submit_read(file, next(), AlignedBuf::new(4096), 0)?;
    }
    let mut ops = 0u64;
    let mut now = t0;
    while flow.in_flight() > 0 {
        let c = flow.wait()?;
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
    drop(flow);
    let st = engine.shutdown()?;
    println!(
        "{:.0} IOPS; reactor sleeps/request {:.3}; kicks/request {:.3}; client wakeups/request {:.3}; policy ns/request {:.0}",
        ops as f64 / el,
        st.reactor_sleeps as f64 / ops as f64,
        st.reactor_kicks as f64 / ops as f64,
        st.client_wakeups as f64 / ops as f64,
        st.policy_ns as f64 / ops as f64
    );
    Ok(())
}
