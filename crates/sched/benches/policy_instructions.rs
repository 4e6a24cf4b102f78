//! Instructions per request (insert + dispatch + completed) of every registered policy at 1, 64, 1024 and 4096
//! busy flows, counted by valgrind's callgrind: a figure that does not move when a neighbour loads the cores,
//! unlike the nanoseconds of the `policy_cost` bench, whose rig (`common/rig.rs`) it shares.
//!
//! For every (policy, flows) pair this bench runs itself once under
//! `valgrind --tool=callgrind --collect-atstart=no --toggle-collect=*measured_steps*`: the child builds the rig,
//! runs [`rig::SETTLE_STEPS`] steps uncounted, then `--steps` counted steps inside `measured_steps`. The same is done
//! with the empty policy (a FIFO that does nothing else), whose count is the rig's own cost and is subtracted, so the
//! `net` figure is the policy's alone. With `--cache`, callgrind also simulates the caches and the bench reports
//! first-level data misses (D1) and last-level data misses (LL) per request, net of the rig likewise.
//!
//! Run: `cargo bench -p bfq-sched --bench policy_instructions [-- [--flows 1,64,1024,4096] [--steps N] [--cache]
//! [--jobs J] [policy ...]]` (needs `valgrind` on the PATH). The callgrind output files are kept in
//! `$CARGO_TARGET_DIR/policy_instructions/` (or the system temporary directory) for `callgrind_annotate`.

#[path = "common/rig.rs"]
mod rig;

use bfq_sched::policies;
use rig::{Rig, EMPTY, SETTLE_STEPS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Counted steps per run unless `--steps` says otherwise.
const DEFAULT_STEPS: u32 = 20_000;
/// Flow counts unless `--flows` says otherwise.
const DEFAULT_FLOWS: [usize; 4] = [1, 64, 1024, 4096];

/// The counted region: callgrind collects only while this function is on the stack.
#[inline(never)]
fn measured_steps(rig: &mut Rig, steps: u32) {
    for _ in 0..steps {
        rig.step();
    }
}

/// Child mode: one (policy, flows) pair, run under callgrind by the parent.
fn child(policy: &str, flows: usize, steps: u32) {
    let mut rig = Rig::new(policy, flows);
    for _ in 0..SETTLE_STEPS {
        rig.step();
    }
    let before = rig.issued();
    measured_steps(std::hint::black_box(&mut rig), steps);
    let issued = rig.issued() - before;
    assert_eq!(
        issued,
        u64::from(steps),
        "{policy} at {flows} flows issued {issued} requests in {steps} steps"
    );
}

/// The events callgrind counted in one run, by name (`Ir`, `D1mr`, ...).
type Counts = BTreeMap<String, u64>;

/// Reads the `events:` and `totals:` (or `summary:`) lines of a callgrind output file.
fn read_counts(path: &Path) -> Result<Counts, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut names: Vec<String> = Vec::new();
    let mut totals: Option<Vec<u64>> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("events:") {
            names = rest.split_whitespace().map(str::to_string).collect();
        } else if let Some(rest) = line.strip_prefix("totals:").or_else(|| line.strip_prefix("summary:")) {
            totals = Some(rest.split_whitespace().filter_map(|v| v.parse().ok()).collect());
        }
    }
    let totals = totals.ok_or_else(|| format!("{}: no totals line", path.display()))?;
    Ok(names
        .into_iter()
        .zip(totals.into_iter().chain(std::iter::repeat(0)))
        .collect())
}

/// Options of the parent run.
struct Options {
    flows: Vec<usize>,
    steps: u32,
    cache: bool,
    jobs: usize,
    policies: Vec<String>,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        flows: DEFAULT_FLOWS.to_vec(),
        steps: DEFAULT_STEPS,
        cache: false,
        jobs: 1,
        policies: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |what: &str| it.next().cloned().ok_or_else(|| format!("{what} needs a value"));
        match a.as_str() {
            // Passed by `cargo bench` to every bench binary.
            "--bench" => {}
            "--flows" => {
                o.flows = value("--flows")?
                    .split(',')
                    .map(|f| f.trim().parse().map_err(|e| format!("--flows: {f}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--steps" => o.steps = value("--steps")?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--jobs" => {
                o.jobs = value("--jobs")?
                    .parse::<usize>()
                    .map_err(|e| format!("--jobs: {e}"))?
                    .max(1)
            }
            "--cache" => o.cache = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            name => {
                if bfq_sched::find(name).is_none() {
                    return Err(format!("unknown policy {name}"));
                }
                o.policies.push(name.to_string());
            }
        }
    }
    if o.policies.is_empty() {
        o.policies = policies().iter().map(|p| p.name.to_string()).collect();
    }
    Ok(o)
}

/// Where the callgrind output files go.
fn out_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    base.join("policy_instructions")
}

/// Runs one (policy, flows) pair under callgrind and returns its counts.
fn measure(exe: &Path, dir: &Path, policy: &str, flows: usize, o: &Options) -> Result<Counts, String> {
    let out = dir.join(format!("callgrind.{policy}.{flows}.out"));
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--collect-atstart=no",
        "--toggle-collect=*measured_steps*",
        &format!("--cache-sim={}", if o.cache { "yes" } else { "no" }),
        &format!("--callgrind-out-file={}", out.display()),
    ])
    .arg(exe)
    .args(["--child", policy, &flows.to_string(), &o.steps.to_string()]);
    let run = cmd
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}); install it (apt-get install valgrind)"))?;
    if !run.status.success() {
        return Err(format!(
            "valgrind on {policy} at {flows} flows failed: {}\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    let counts = read_counts(&out)?;
    if counts.get("Ir").copied().unwrap_or(0) == 0 {
        return Err(format!(
            "{}: nothing counted (was measured_steps inlined?)",
            out.display()
        ));
    }
    Ok(counts)
}

/// `count / steps` with one decimal.
fn per_request(count: u64, steps: u32) -> f64 {
    count as f64 / f64::from(steps)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let policy = &args[1];
        let flows = args[2].parse().expect("flows");
        let steps = args[3].parse().expect("steps");
        child(policy, flows, steps);
        return;
    }
    let o = match parse_options(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("policy_instructions: {e}");
            std::process::exit(2);
        }
    };
    let exe = std::env::current_exe().expect("own path");
    let dir = out_dir();
    std::fs::create_dir_all(&dir).expect("output directory");
    let names: Vec<&str> = std::iter::once(EMPTY)
        .chain(o.policies.iter().map(String::as_str))
        .collect();
    let pairs: Vec<(&str, usize)> = names
        .iter()
        .flat_map(|&p| o.flows.iter().map(move |&f| (p, f)))
        .collect();
    eprintln!(
        "policy_instructions: {} callgrind runs of {} counted steps each, {} at a time; output in {}",
        pairs.len(),
        o.steps,
        o.jobs,
        dir.display()
    );
    let mut results: BTreeMap<(String, usize), Counts> = BTreeMap::new();
    for chunk in pairs.chunks(o.jobs) {
        let done: Vec<Result<Counts, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|&(p, f)| {
                    let (exe, dir, o) = (&exe, &dir, &o);
                    s.spawn(move || measure(exe, dir, p, f, o))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("measuring thread"))
                .collect()
        });
        for (&(p, f), r) in chunk.iter().zip(done) {
            match r {
                Ok(c) => {
                    eprintln!(
                        "  {p:<13} {f:>5} flows: {:.1} Ir/request",
                        per_request(c["Ir"], o.steps)
                    );
                    results.insert((p.to_string(), f), c);
                }
                Err(e) => {
                    eprintln!("policy_instructions: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    print_tables(&o, &names, &results);
}

/// The per-request value of `event` for `policy` at `flows`, and the same net of the empty policy.
fn figure(
    results: &BTreeMap<(String, usize), Counts>,
    o: &Options,
    policy: &str,
    flows: usize,
    event: &str,
) -> (f64, f64) {
    let get = |p: &str| results[&(p.to_string(), flows)].get(event).copied().unwrap_or(0);
    let raw = per_request(get(policy), o.steps);
    (raw, raw - per_request(get(EMPTY), o.steps))
}

fn print_tables(o: &Options, names: &[&str], results: &BTreeMap<(String, usize), Counts>) {
    let mut events = vec![("Ir", "instructions")];
    if o.cache {
        events.push(("D1mr+D1mw", "D1 data misses"));
        events.push(("DLmr+DLmw", "LL data misses"));
    }
    for (event, title) in events {
        let value = |p: &str, f: usize| -> (f64, f64) {
            event
                .split('+')
                .map(|e| figure(results, o, p, f, e))
                .fold((0.0, 0.0), |(a, b), (c, d)| (a + c, b + d))
        };
        println!();
        println!(
            "{title} per request (insert + dispatch + completed), {} counted steps; net = policy - empty",
            o.steps
        );
        print!("| policy |");
        for f in &o.flows {
            print!(" {f} flows net (raw) |");
        }
        let growth = o.flows.contains(&64) && o.flows.contains(&4096);
        if growth {
            print!(" net 4096 / net 64 |");
        }
        println!();
        print!("|---|");
        for _ in &o.flows {
            print!("---|");
        }
        if growth {
            print!("---|");
        }
        println!();
        for &p in names {
            print!("| {p} |");
            for &f in &o.flows {
                let (raw, net) = value(p, f);
                if p == EMPTY {
                    print!(" - ({raw:.1}) |");
                } else {
                    print!(" {net:.1} ({raw:.1}) |");
                }
            }
            if growth {
                let base = value(p, 64).1;
                // A ratio to (nearly) nothing says nothing: the rig itself, or no misses at 64 flows.
                if p == EMPTY || base < 1.0 {
                    print!(" - |");
                } else {
                    print!(" {:.2}x |", value(p, 4096).1 / base);
                }
            }
            println!();
        }
    }
}
