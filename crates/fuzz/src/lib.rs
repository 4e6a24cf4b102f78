//! The bodies of the fuzz targets (docs/ROBUSTNESS.md). Each takes arbitrary bytes and must never panic; where a
//! parser accepts its input, the target also checks a property the input must keep (a profile writes back to the
//! same profile; a policy passes the conformance checker). `fuzz/` wraps each in a cargo-fuzz target (nightly,
//! libFuzzer); `tests/corpus.rs` replays the committed corpus and every regression through the same functions on
//! stable, so `cargo test` keeps every input the fuzzers found.

use bfq_sched::DeviceInfo;

/// A fuzz target's body: takes the fuzzer's bytes, panics on a defect.
pub type Body = fn(&[u8]);

/// Every fuzz target by name, as in `fuzz/fuzz_targets/<name>.rs` and `fuzz/corpus/<name>/`.
pub const TARGETS: [(&str, Body); 10] = [
    ("profile", profile),
    ("device_toml", device_toml),
    ("ftrace", ftrace),
    ("tunables", tunables),
    ("cli_args", cli_args),
    ("policies", policies),
    ("blkparse", blkparse),
    ("blktrace", blktrace),
    ("msr", msr),
    ("fiu", fiu),
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

/// What every trace reader must keep, on any input: no panic; an error is one line and points inside the input
/// (a line of the text, or a record starting inside the bytes); an accepted trace is sorted by time from 0 with
/// requests of at least one byte that do not overflow, and its replay plan maps every request into the replay
/// area on sector boundaries.
fn check_trace(
    parsed: Result<bfq_workload::trace::Trace, bfq_workload::trace::TraceError>,
    lines: usize,
    bytes: usize,
) {
    use bfq_workload::trace::replay::{plan, Mapping, ReplayOptions};
    use bfq_workload::trace::Location;
    match parsed {
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains('\n'), "one line: {text:?}");
            match e.at {
                Location::Line(n) => assert!(n >= 1 && n <= lines.max(1), "line {n} of {lines}"),
                Location::Record { record, byte } => {
                    assert!(
                        record >= 1 && (byte as usize) < bytes.max(1),
                        "record {record} at byte {byte} of {bytes}"
                    )
                }
                Location::Whole => {}
            }
        }
        Ok(t) => {
            assert!(!t.requests.is_empty(), "an accepted trace has requests");
            assert_eq!(t.requests[0].time_ns, 0, "times start at 0");
            for w in t.requests.windows(2) {
                assert!(w[0].time_ns <= w[1].time_ns, "sorted by time");
            }
            for r in &t.requests {
                assert!(r.len >= 1 && r.offset.checked_add(r.len).is_some(), "{r:?}");
                assert!((r.volume as usize) < t.volumes.len().max(1));
            }
            for mapping in [Mapping::Wrap, Mapping::Scale] {
                let area = 1 << 20;
                let opts = ReplayOptions {
                    mapping,
                    max_flows: 4,
                    ..ReplayOptions::default()
                };
                let p = plan(&t, &opts, area).expect("default options plan any trace");
                assert_eq!(p.requests(), t.requests.len(), "every request in one flow");
                assert!(p.flows.len() <= 4);
                for f in &p.flows {
                    for r in &f.requests {
                        assert!(r.offset % 512 == 0 && r.len % 512 == 0 && r.len > 0, "{r:?}");
                        assert!(r.offset + r.len <= area, "{r:?} inside the area");
                    }
                }
            }
        }
    }
}

fn trace_text(
    data: &[u8],
    parse: fn(
        &str,
        &bfq_workload::trace::ParseOptions,
    ) -> Result<bfq_workload::trace::Trace, bfq_workload::trace::TraceError>,
) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    for event in [
        bfq_workload::trace::TraceEvent::Issue,
        bfq_workload::trace::TraceEvent::Queue,
    ] {
        let opts = bfq_workload::trace::ParseOptions {
            event,
            max_requests: 64,
            truncate: data.first().is_some_and(|b| b % 2 == 0),
        };
        check_trace(parse(text, &opts), lines, data.len());
    }
}

/// blkparse's text reader (`bfq replay --format blkparse`), with issue and queue events.
pub fn blkparse(data: &[u8]) {
    trace_text(data, bfq_workload::trace::blkparse::parse);
}

/// The MSR Cambridge CSV reader (`bfq replay --format msr`).
pub fn msr(data: &[u8]) {
    trace_text(data, bfq_workload::trace::msr::parse);
}

/// The FIU trace reader (`bfq replay --format fiu`).
pub fn fiu(data: &[u8]) {
    trace_text(data, bfq_workload::trace::fiu::parse);
}

/// blktrace's binary reader (`bfq replay --format blktrace`): the bytes as one file, and split in two per-CPU
/// files at a point the first byte chooses.
pub fn blktrace(data: &[u8]) {
    use bfq_workload::trace::{blktrace::parse_files, ParseOptions, TraceEvent};
    let split = data.first().map_or(0, |&b| usize::from(b) * 48).min(data.len());
    for event in [TraceEvent::Issue, TraceEvent::Queue] {
        let opts = ParseOptions {
            event,
            max_requests: 64,
            truncate: true,
        };
        check_trace(parse_files(&[("", data)], &opts), 0, data.len());
        let (a, b) = data.split_at(split);
        let two = parse_files(&[("a", a), ("b", b)], &opts);
        if let Err(e) = &two {
            assert!(!e.to_string().contains('\n'));
        }
        check_trace(
            two.map_err(|e| bfq_workload::trace::TraceError { file: None, ..e }),
            0,
            data.len(),
        );
    }
}
