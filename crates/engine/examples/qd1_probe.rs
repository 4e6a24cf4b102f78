use bfq_engine::{AlignedBuf, Engine, EngineConfig, FlowOptions};
use std::path::Path;
fn main() {
    let path = Path::new("/mnt/bfqk/bfq-files/probe.dat");
    if !path.exists() {
        std::fs::write(path, vec![1u8; 64 << 20]).unwrap();
    }
    for sched in ["noop", "bfq"] {
        let cfg = EngineConfig::for_path(path);
        println!("rot {}", cfg.device.rotational);
        let engine = Engine::start_named::<&str>(sched, &[], cfg).unwrap();
        let f = engine.open(path, false).unwrap();
        let flow = engine.flow(FlowOptions::named("r")).unwrap();
        let mut buf = AlignedBuf::new(4096);
        let t = std::time::Instant::now();
        for i in 0..2000u64 {
            let off = (i * 7919 % 16000) * 4096;
            flow.read(f, off, &mut buf).unwrap();
        }
        println!("{sched}: {:.1} us/read", t.elapsed().as_secs_f64() * 1e6 / 2000.0);
        drop(flow);
        println!("{:?}", engine.shutdown().unwrap());
    }
}
