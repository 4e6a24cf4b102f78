//! A sample of the full `bfq reproduce` matrix gives exactly the results recorded in
//! `data/reproduce-full-cells.json`: the quick run's digests (`reproduce_digest.rs`) pin only the quick matrix, and the
//! full one (1535 simulations, minutes of CPU) is too long for CI, so this test runs one cell of every group of the
//! full plan: every (target, benchmark, application, timer tick, device reordering, repetition), 53 cells. Within a
//! group of n jobs it takes job `(7 x group number) mod n`, so the cells spread over the schedulers and workloads.
//!
//! Each result is compared as text with the recorded one (its entry, as written, in the full run's results.json), so
//! every figure must match to the last digit; a failure names the cell and shows both. The recorded cells were taken from a full run made
//! before issue 19's simulator optimisations (docs/PERFORMANCE.md, "Simulator speed"); a change that moves figures on
//! purpose regenerates them:
//!
//! ```sh
//! BFQ_UPDATE_FULL_CELLS=1 cargo test --release -p bfq --test reproduce_full_cells
//! ```
//!
//! The cells run on two threads and their results are compared in plan order, so this also checks that the
//! parallel runner returns what each simulation computed whatever the thread that ran it.

use bfq_suite::reproduce::{plan, run_all};
use bfq_suite::{Experiment, RunResult};

const CELLS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/reproduce-full-cells.json");

/// The group of a job of the full plan: every job of a group differs from the others only in scheduler and workload.
fn group_key(e: &Experiment) -> String {
    format!(
        "{} {} {:?} {:?} {} {}",
        e.target,
        e.work.benchmark().name(),
        e.work.app(),
        e.settings.timer_hz,
        e.settings.device_reordering,
        e.rep
    )
}

/// Indices in the full plan of the sampled cells, in plan order of their groups.
fn sample(jobs: &[Experiment]) -> Vec<usize> {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, j) in jobs.iter().enumerate() {
        let k = group_key(j);
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(i),
            None => groups.push((k, vec![i])),
        }
    }
    groups
        .iter()
        .enumerate()
        .map(|(g, (_, v))| v[(7 * g) % v.len()])
        .collect()
}

/// The elements of a JSON array as `serde_json::to_string_pretty` writes them (one object per element, each
/// opening with a line `  {` and closing with `  }`): the text of each element, without the separating comma.
fn elements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for line in text.lines() {
        if line == "  {" {
            cur = Some(vec![line]);
        } else if let Some(c) = cur.as_mut() {
            if line == "  }" || line == "  }," {
                c.push("  }");
                out.push(c.join("\n"));
                cur = None;
            } else {
                c.push(line);
            }
        }
    }
    out
}

#[test]
fn a_sample_of_the_full_reproduce_matrix_matches_the_recorded_results() {
    // `bfq reproduce` without options: two repetitions, seed 1.
    let p = plan(false, 2, 1);
    let picked = sample(&p.jobs);
    assert_eq!(picked.len(), 53, "one cell per group of the full plan");
    let jobs: Vec<Experiment> = picked.iter().map(|&i| p.jobs[i].clone()).collect();
    let results: Vec<RunResult> = run_all(&jobs, 2, &|_, _| {})
        .into_iter()
        .zip(&picked)
        .map(|(r, i)| r.unwrap_or_else(|e| panic!("cell {i} failed: {e}")))
        .collect();
    // The text results.json holds for these runs: compared as text, so every figure must be the same to the last
    // digit (parsing the recorded floats back could round them).
    let text = serde_json::to_string_pretty(&results).expect("serialises") + "\n";
    if std::env::var_os("BFQ_UPDATE_FULL_CELLS").is_some() {
        std::fs::write(CELLS, text).expect("writes the recorded cells");
        return;
    }
    let want = elements(&std::fs::read_to_string(CELLS).expect("recorded cells"));
    let got = elements(&text);
    assert_eq!(got.len(), results.len());
    assert_eq!(
        want.len(),
        got.len(),
        "the recorded cells are not one per group of the full plan: regenerate them"
    );
    let moved: Vec<String> = picked
        .iter()
        .zip(got.iter().zip(&want))
        .filter(|(_, (g, w))| g != w)
        .map(|(i, (g, w))| format!("cell {i} ({}):\n--- got\n{g}\n--- wanted\n{w}", jobs_label(&p.jobs[*i])))
        .collect();
    assert!(
        moved.is_empty(),
        "{} of {} cells of the full matrix moved (regenerate with BFQ_UPDATE_FULL_CELLS=1 only for an intended \
         change):\n{}",
        moved.len(),
        got.len(),
        moved.join("\n")
    );
}

fn jobs_label(e: &Experiment) -> String {
    format!("{} {} {:?} rep {}", e.target, e.scheduler, e.work, e.rep)
}
