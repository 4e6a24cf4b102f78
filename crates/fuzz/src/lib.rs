//! The bodies of the fuzz targets (docs/ROBUSTNESS.md). Each takes arbitrary bytes and must never panic; where a
//! parser accepts its input, the target also checks a property the input must keep (a profile writes back to the
//! same profile; a policy passes the conformance checker). `fuzz/` wraps each in a cargo-fuzz target (nightly,
//! libFuzzer); `tests/corpus.rs` replays the committed corpus and every regression through the same functions on
//! stable, so `cargo test` keeps every input the fuzzers found.

use bfq_sched::DeviceInfo;

/// A fuzz target's body: takes the fuzzer's bytes, panics on a defect.
pub type Body = fn(&[u8]);

/// Every fuzz target by name, as in `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/`.
pub const TARGETS: [(&str, Body); 6] = [
    ("profile", profile),
    ("device_toml", device_toml),
    ("ftrace", ftrace),
    ("tunables", tunables),
    ("cli_args", cli_args),
    ("policies", policies),
];

/// The start-up profile parser: any text parses or fails with a line number inside the text; an accepted profile
/// writes back to text that parses to the same profile.
pub fn profile(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    for parsed in [
        bfq_workload::profile::Profile::parse(text),
        bfq_workload::profile::Profile::parse_file(text),
    ] {
        match parsed {
            Ok(p) => {
                let back = bfq_workload::profile::Profile::parse(&p.to_text()).expect("a written profile parses");
                // Names with whitespace or '#' are written as '_' (documented): compare what survives.
                assert_eq!(back.requests, p.requests, "requests survive a round trip");
                assert_eq!(back.files.len(), p.files.len(), "files survive a round trip");
            }
            Err(e) => assert!(
                e.line <= lines + 1,
                "error line {} beyond the text's {lines} lines",
                e.line
            ),
        }
    }
}

/// The device TOML loader: any text loads or fails with a message; a loaded description builds a model whose
/// facts are sane, and writes back to TOML that loads again.
pub fn device_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(cfg) = bfq_sim::device::DeviceConfig::from_toml_str(text) {
        let dev = cfg.build();
        let info = dev.info();
        assert!(info.queue_depth >= 1, "a device takes at least one command");
        assert!(info.max_sectors >= 1, "a device takes requests of at least one sector");
        let again = bfq_sim::device::DeviceConfig::from_toml_str(&cfg.to_toml_string());
        assert!(again.is_ok(), "written TOML loads again: {again:?}");
    }
}

/// The ftrace text parser and the trace-to-profile pipeline of `bfq record --from-trace`: any text gives a profile
/// or an error, never a panic.
pub fn ftrace(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for line in text.lines() {
        let _ = bfq_workload::record::ftrace::parse_line(line);
        let _ = bfq_workload::record::ftrace::lost_events(line);
    }
    let map = bfq_workload::record::mapping::MapOptions {
        name: "fuzz".into(),
        capacity_sectors: 1 << 29,
        merge_gap_bytes: 1 << 20,
    };
    if let Ok((p, _)) = bfq_workload::record::profile_from_trace(text, &Default::default(), &map) {
        p.validate().expect("a profile made from a trace is valid");
    }
}

/// Tunable parsing of every policy on both device kinds: any `key=value` list is accepted or refused with a
/// message, and an accepted one builds the policy.
pub fn tunables(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let pairs: Vec<&str> = text.split('\n').collect();
    for desc in bfq_sched::policies() {
        for dev in [DeviceInfo::hdd(), DeviceInfo::ssd()] {
            if let Ok(policy) = bfq_sched::build(desc.name, &dev, &pairs) {
                assert!(
                    policy.check_invariants().is_ok(),
                    "a new {} keeps its invariants",
                    desc.name
                );
            }
        }
    }
}

/// The validation layer behind the command line's values (targets, workloads, benchmarks, eras, the suite's whole
/// plan): any strings are accepted or refused with a one-line message.
pub fn cli_args(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut fields = text.split('\u{1f}');
    let mut next = || fields.next().unwrap_or("").to_string();
    let (bench, targets, scheds, workloads, apps, tune, num) = (next(), next(), next(), next(), next(), next(), next());
    let one_line = |e: &dyn std::fmt::Display| {
        let m = e.to_string();
        assert!(!m.is_empty() && !m.trim_end().contains('\n'), "one-line message: {m:?}");
    };
    if let Err(e) = bfq_suite::target::Target::parse_list(&targets) {
        one_line(&e);
    }
    if let Err(e) = bfq_workload::workloads::WorkloadSpec::parse(&workloads) {
        one_line(&e);
    }
    if let Err(e) = bfq_suite::scenario::Era::parse(&apps) {
        one_line(&e);
    }
    if let Ok(x) = num.trim().parse::<f64>() {
        let _ = bfq_suite::limits::duration_ns(x).map_err(|e| one_line(&e));
        let _ = bfq_suite::limits::file_scale(x).map_err(|e| one_line(&e));
        let _ = bfq_suite::limits::warmup_ns(x).map_err(|e| one_line(&e));
    }
    let Ok(benchmark) = bfq_suite::suite::Benchmark::parse(&bench) else {
        return;
    };
    let Ok(targets) = bfq_suite::target::Target::parse_list(&targets) else {
        return;
    };
    // Only simulator targets: planning a real target checks its directory, which a fuzzer must not probe.
    if !targets.iter().all(bfq_suite::target::Target::is_sim) {
        return;
    }
    let list = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
    let Some(first) = targets.first().cloned() else { return };
    let mut cfg = bfq_suite::suite::SuiteConfig::new(benchmark, first);
    cfg.targets = targets;
    cfg.schedulers = list(&scheds);
    cfg.workloads = Some(list(&workloads));
    cfg.apps = (benchmark == bfq_suite::suite::Benchmark::Startup).then(|| list(&apps));
    cfg.tunables = tune.split(' ').filter(|s| !s.is_empty()).map(str::to_string).collect();
    if let Err(e) = bfq_suite::suite::plan(&cfg) {
        one_line(&e);
    }
}

/// Every registered policy driven by the conformance checker with the operations chosen by the input
/// ([`bfq_sched::conformance::run_script`]): a contract violation, a broken invariant or a panic is a crash.
pub fn policies(data: &[u8]) {
    for desc in bfq_sched::policies() {
        if let Err(e) = bfq_sched::conformance::run_script(desc.name, data) {
            panic!("{e}");
        }
    }
}
