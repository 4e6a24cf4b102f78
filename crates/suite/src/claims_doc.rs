//! The claim-to-line map of docs/CLAIMS.md: every measurable sentence of the five seeds, the checklist claim that
//! checks it, and that claim's lines in the quick matrix, rendered from the code ([`SEED_SENTENCES`],
//! [`crate::reproduce::CLAIMS`]) and the pinned quick results (`docs/results/results.json`), so that the table
//! cannot drift: `crates/suite/tests/claims_doc.rs` regenerates it and compares (`BFQ_UPDATE_DOCS=1` rewrites it).

use crate::reproduce::{checklist_by_claim, Claim, CLAIMS, CPU_CLAIM};
use crate::result::RunResult;

/// One measurable sentence of a seed and the claims (ids of [`CLAIMS`] or [`CPU_CLAIM`]) that check it; no claim
/// means the project does not check it, and `note` says why.
#[derive(Debug, Clone, Copy)]
pub struct SeedSentence {
    /// Seed file number and where in it (`000`, `004 figure 1`).
    pub seed: &'static str,
    /// The sentence, quoted (shortened with `...`).
    pub sentence: &'static str,
    /// Ids of the claims that check it.
    pub claims: &'static [&'static str],
    /// Why it is not checked, or what else to know; empty when there is nothing to add.
    pub note: &'static str,
}

/// Every sentence of the seeds that states a measurable result, in seed order. Seed 002 forwards seed 000's
/// announcement word for word: its sentences are seed 000's.
pub const SEED_SENTENCES: [SeedSentence; 31] = [
    SeedSentence {
        seed: "000 (= 002)",
        sentence:
            "a disk scheduler providing definitely lower latencies than cfq, as well as a higher throughput with \
                   most of the test workloads we used (or the same throughput as cfq with the other workloads)",
        claims: &["startup-vs-cfq", "hdd-seq-throughput"],
        note: "",
    },
    SeedSentence {
        seed: "000 (= 002)",
        sentence: "these execution times were five to nine times lower with bfq under 2.6.32. Under 2.6.35 they were \
                   instead from six to fourteen times lower",
        claims: &["startup-vs-cfq", "startup-ratio-by-kernel"],
        note: "no 2010 kernel is modelled (the eras are 3.13's v7r2 and the newest): judged against 5-14x",
    },
    SeedSentence {
        seed: "000 (= 002)",
        sentence: "a 20% loss of aggregated disk throughput for konsole in case of background workloads made only of \
                   sequential requests",
        claims: &["startup-throughput"],
        note: "konsole runs in the full matrix only",
    },
    SeedSentence {
        seed: "000 (= 002)",
        sentence: "with shorter commands, as bash or xterm, bfq also provided up to 30% higher aggregated throughput",
        claims: &["startup-throughput"],
        note: "",
    },
    SeedSentence {
        seed: "000 (= 002)",
        sentence: "We saw from 15% to 30% higher aggregated throughput also in our only-aggregated-throughput tests",
        claims: &["hdd-seq-throughput"],
        note: "the line passes at or above cfq and states the seed's 15-30%",
    },
    SeedSentence {
        seed: "000 (= 002)",
        sentence: "it perfectly distributes the disk throughput as desired, independently of disk physical parameters \
                   like, e.g., ZBR",
        claims: &["fairness-by-weight"],
        note: "",
    },
    SeedSentence {
        seed: "001, Hitachi HDD",
        sentence: "the same comments as in the main result page apply [bash and xterm start-up under 10r-seq, \
                   10r-rand, 5r5w-seq, 5r5w-rand]",
        claims: &["startup-near-idle"],
        note: "the Hitachi HDD runs in the full matrix only",
    },
    SeedSentence {
        seed: "001, Hitachi HDD",
        sentence: "Except for the case 5r5w-seq, BFQ again guarantees a start-up time comparable to that with an idle \
                   disk, whereas with all the other schedulers the application fails, with any background workload, \
                   to start in 60 seconds [lowriter]",
        claims: &["startup-near-idle", "heavy-app-x"],
        note: "lowriter runs in the full matrix only",
    },
    SeedSentence {
        seed: "001, Hitachi HDD",
        sentence:
            "BFQ guarantees however that, after a given maximum waiting time, any queued request eventually gets \
                   dispatched",
        claims: &["bounded-wait"],
        note: "",
    },
    SeedSentence {
        seed: "001, Hitachi HDD",
        sentence: "having each write request to wait, in the worst-case, for this maximum time before being \
                   dispatched, significantly inflates the start-up time of lowriter [under 5r5w-seq]",
        claims: &["bounded-wait"],
        note: "the 5r5w-seq lines show each application's longest read and write wait; the inflation itself is not \
               reproduced: in the full matrix lowriter under 5r5w-seq on the Hitachi HDD starts in 3.0 s with \
               bfq-v7r2 (idle 2.77 s), its writes waiting at most 875 ms",
    },
    SeedSentence {
        seed: "001, Seagate HDD",
        sentence: "Tests abandoned because the relative performance of the schedulers is the same as on the other HDD",
        claims: &[],
        note: "no result to check",
    },
    SeedSentence {
        seed: "001, Plextor SSD",
        sentence: "the cold-cache start-up time of bash, xterm and lowriter [figures without text]",
        claims: &["startup-near-idle"],
        note: "bash and lowriter on the SSD run in the full matrix only",
    },
    SeedSentence {
        seed: "003, test 1",
        sentence: "there is hardly different amoung them [1 thread: write, re-write, read, re-read]",
        claims: &["iozone-one-thread"],
        note: "",
    },
    SeedSentence {
        seed: "003, test 1",
        sentence: "NOOP takes less CPU cost",
        claims: &["policy-cpu-cost"],
        note: "measured wall clock: `bfq reproduce --cpu-time`, beside the checklist, never in results.json",
    },
    SeedSentence {
        seed: "003, test 2",
        sentence: "there is not much different on reading [...] While they made different on writing, where deadline \
                   does the best",
        claims: &["iozone-ten-threads-write", "iozone-ten-threads-read"],
        note: "",
    },
    SeedSentence {
        seed: "003, test 2",
        sentence:
            "NOOP takes less CPU cost, while deadline io scheduler takes the most CPU on most of write/read tests",
        claims: &["policy-cpu-cost"],
        note: "measured wall clock: `bfq reproduce --cpu-time`, beside the checklist, never in results.json",
    },
    SeedSentence {
        seed: "004, figure 1",
        sentence: "BFQ outperforms the other schedulers with the sequential workloads, especially DEADLINE and NOOP",
        claims: &["hdd-seq-throughput"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 1",
        sentence: "All the schedulers have instead about the same performance with 5r5w-rand",
        claims: &["rand-mixed-throughput"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 1",
        sentence: "BFQ achieves only slightly more than half the throughput of the other schedulers with 10r-rand",
        claims: &["hdd-rand-throughput"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 2",
        sentence: "with any workload BFQ guarantees the same start-up time as if the disk was idle. With the other \
                   schedulers the application either takes a long time to start or is practically unresponsive",
        claims: &["startup-near-idle", "startup-vs-cfq"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 3",
        sentence: "Except for the case 5r5w-seq, BFQ again guarantees a start-up time comparable to that with an idle \
                   disk, whereas with all the other schedulers the application fails, with any background workload, \
                   to start in 60 seconds [oowriter]",
        claims: &["startup-near-idle", "heavy-app-x"],
        note: "oowriter runs in the full matrix only",
    },
    SeedSentence {
        seed: "004, figures 4-6",
        sentence: "RAID results basically match the above results with one HDD",
        claims: &[
            "startup-vs-cfq",
            "startup-near-idle",
            "hdd-seq-throughput",
            "rand-mixed-throughput",
        ],
        note: "the RAID1 pair runs in the full matrix only",
    },
    SeedSentence {
        seed: "004, figure 7",
        sentence: "With sequential readers, BFQ loses about a 0.05 percent of throughput [...] The throughput loss is \
                   instead at most 6% with random readers",
        claims: &["ssd-throughput-loss"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 7",
        sentence: "the throughput slightly grows as the complexity, and hence the execution time, of the schedulers \
                   decrease",
        claims: &["policy-cpu-cost"],
        note: "not checked on throughput: the simulator charges no policy CPU time to the I/O path; the measured \
               cost per request is the CPU claim's",
    },
    SeedSentence {
        seed: "004, figures 8-9",
        sentence: "for both applications BFQ achieves almost the lowest-possible start-up time with both workloads",
        claims: &["startup-near-idle", "ssd-reordering"],
        note: "",
    },
    SeedSentence {
        seed: "004, figures 8-9",
        sentence: "The high start-up times with the other schedulers in the presence of sequential readers is a \
                   consequence also of the fact that [...] the device prefetches requests, and, among \
                   internally-queued requests, privileges sequential ones",
        claims: &["ssd-reordering"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 10",
        sentence: "No result is available with CFQ with random workloads, because, with these workloads, the system \
                   became unresponsive",
        claims: &[],
        note: "a system hang, not a measurement; the simulator runs cfq there (figure 10's table)",
    },
    SeedSentence {
        seed: "004, figure 11",
        sentence: "With 5r-rand, BFQ performs worse than with the other workloads. The main cause of this problem is \
                   the coarse granularity of kernel time ticks on the embedded system",
        claims: &["coarse-tick", "startup-near-idle"],
        note: "the embedded system's tick is taken as HZ=100 (SEED_HOST_HZ)",
    },
    SeedSentence {
        seed: "004, figure 12",
        sentence: "Both schedulers achieve about the same performance for each workload [microSDHC]",
        claims: &["flash-like-cfq"],
        note: "",
    },
    SeedSentence {
        seed: "004, figure 13",
        sentence: "responsiveness results have the same pattern as with the 1.8-inch HDD [microSDHC]",
        claims: &["startup-near-idle"],
        note: "the microSDHC start-up runs are in the full matrix only",
    },
    SeedSentence {
        seed: "004, figures 14-15",
        sentence: "results with eMMC have basically the same pattern as with the microSDHC",
        claims: &["flash-like-cfq", "startup-near-idle"],
        note: "",
    },
];

/// The claim with id `id`, among [`CLAIMS`] and [`CPU_CLAIM`].
pub fn claim(id: &str) -> Option<&'static Claim> {
    CLAIMS.iter().chain(std::iter::once(&CPU_CLAIM)).find(|c| c.id == id)
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// docs/CLAIMS.md: the map from every sentence of [`SEED_SENTENCES`] to its claims and their lines in `quick` (the
/// quick matrix's results), with the verdict judged with the seed's era and the newest `bfq`'s beside it.
pub fn claims_markdown(quick: &[RunResult]) -> String {
    let by_claim = checklist_by_claim(quick);
    let verdict = |p: bool| if p { "PASS" } else { "FAIL" };
    let mut out = String::new();
    out.push_str(
        "# The seeds' claims and the checklist\n\n\
         Generated from the code (`crates/suite/src/claims_doc.rs`, `crates/suite/src/reproduce.rs`) and the quick \
         matrix's results (`docs/results/results.json`) by `crates/suite/tests/claims_doc.rs`; do not edit by hand \
         (`BFQ_UPDATE_DOCS=1 cargo test --release -p bfq-suite --test claims_doc` rewrites it).\n\n\
         Every sentence of the five seeds (`../shared/seeds/`) that states a measurable result, the checklist claim \
         that checks it, and that claim's lines as `bfq reproduce --quick` prints them (seed 1): each line is judged \
         with BFQ v7r2, the era the seeds measured, and shows the newest `bfq`'s verdict beside it. A claim without a \
         quick line is checked by the full matrix (`bfq reproduce`), whose printed checklist is \
         [full-checklist.txt](full-checklist.txt) (run time in [PERFORMANCE.md](PERFORMANCE.md)); the reasons behind each FAIL are in \
         [SCHEDULERS.md](SCHEDULERS.md) (\"BFQ in two eras\", \"Timer tick\") and the README.\n\n",
    );
    out.push_str("| seed | sentence | checklist claim | result (quick matrix) |\n|---|---|---|---|\n");
    for s in &SEED_SENTENCES {
        let claims: Vec<String> = s
            .claims
            .iter()
            .map(|id| match claim(id) {
                Some(c) => format!("`{}`: {}", c.id, cell(c.description)),
                None => format!("`{id}`: (unknown claim)"),
            })
            .collect();
        let mut results: Vec<String> = Vec::new();
        for id in s.claims {
            if *id == CPU_CLAIM.id {
                results.push(format!(
                    "`{id}`: measured only with `--cpu-time` (wall clock, not reproducible)"
                ));
                continue;
            }
            let lines = by_claim
                .iter()
                .find(|(c, _)| c.id == *id)
                .map(|(_, items)| items.as_slice())
                .unwrap_or(&[]);
            if lines.is_empty() {
                results.push(format!("`{id}`: full matrix only"));
            }
            for i in lines {
                let mut r = format!("`{id}` {} {}", verdict(i.pass), cell(&i.text));
                if let Some(n) = &i.newest {
                    r.push_str(&format!(" (newest bfq: {})", verdict(n.pass)));
                }
                results.push(r);
            }
        }
        if !s.note.is_empty() {
            results.push(format!("note: {}", cell(s.note)));
        }
        out.push_str(&format!(
            "| {} | \"{}\" | {} | {} |\n",
            s.seed,
            cell(s.sentence),
            if claims.is_empty() {
                "none".to_string()
            } else {
                claims.join("<br>")
            },
            results.join("<br>")
        ));
    }
    let unused: Vec<&str> = CLAIMS
        .iter()
        .chain(std::iter::once(&CPU_CLAIM))
        .map(|c| c.id)
        .filter(|id| !SEED_SENTENCES.iter().any(|s| s.claims.contains(id)))
        .collect();
    if !unused.is_empty() {
        out.push_str(&format!("\nClaims no sentence maps to: {}\n", unused.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_claim_is_mapped_and_every_mapped_id_exists() {
        for s in &SEED_SENTENCES {
            for id in s.claims {
                assert!(claim(id).is_some(), "{}: unknown claim {id}", s.seed);
            }
            assert!(
                !s.claims.is_empty() || !s.note.is_empty(),
                "{}: unchecked without a reason",
                s.seed
            );
        }
        for c in CLAIMS.iter().chain(std::iter::once(&CPU_CLAIM)) {
            assert!(
                SEED_SENTENCES.iter().any(|s| s.claims.contains(&c.id)),
                "claim {} checks no sentence",
                c.id
            );
        }
    }
}
