use bfq_sched::SEC;
use bfq_sim::{HostConfig, Simulation};
use bfq_workload::fio::{JobConfig, Pattern};
use bfq_workload::readers::Reader;
use bfq_workload::{FileSpec, IoMode, Placement};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bs: u64 = args.get(1).map_or(4096, |s| s.parse().unwrap());
    let direct = args.get(2).is_some_and(|s| s == "direct");
    let dev = bfq_sim::device::resolve("seagate-hdd").unwrap().build();
    let info = dev.info();
    let pol = bfq_sched::build::<&str>("noop", &info, &[]).unwrap();
    let mut sim = Simulation::new(
        dev,
        pol,
        HostConfig {
            time_policy: false,
            ..Default::default()
        },
        1,
    );
    let f = sim
        .add_file(&FileSpec {
            name: "f".into(),
            size: 500 << 20,
            placement: Placement::Contiguous,
            prewritten: true,
        })
        .unwrap();
    let mut cfg = JobConfig::new("r", f, 500 << 20, Pattern::Sequential);
    cfg.bs = bs;
    cfg.mode = if direct { IoMode::Direct } else { IoMode::Buffered };
    sim.spawn(0, Box::new(Reader::new(cfg, bfq_workload::rng::stream(1, "r"))));
    sim.run_until(10 * SEC);
    println!("{:?}", sim.metrics().samples(0, 10 * SEC, SEC));
    let m = sim.metrics();
    println!(
        "bs {bs} direct {direct}: {:.1} MB/s, {} requests, mean lat {} us",
        m.mbps_between(0, 5 * SEC)[0],
        m.device_requests,
        m.latency[0].mean_ns() / 1000
    );
}
