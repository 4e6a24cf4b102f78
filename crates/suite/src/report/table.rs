//! Text tables: S-compatible `*-table.txt` files, S's `result_list.txt` lines, and a human-readable summary with
//! confidence intervals.

use super::{scheduler_label, Cell, Figure, Quantity, ReportMeta};
use crate::result::{Benchmark, RunResult};
use crate::stats::CI_FORMULA;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// A value with two decimals, as S's tables print it.
pub fn format_value(value: f64) -> String {
    format!("{value:.2}")
}

/// A number without a needless fraction: `60` for 60.0, `2.5` for 2.5.
fn format_plain(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

/// The cell as an S table prints it: the average with two decimals, `X` on a timeout, `-` when missing.
pub fn cell_text(cell: &Cell) -> String {
    match cell {
        Cell::Value(s) => format_value(s.avg),
        Cell::TimedOut { .. } => "X".to_string(),
        Cell::Missing => "-".to_string(),
    }
}

/// The cell with its interval: `1.23 ± 0.45 (n=3)`, `1.23 (n=1)`, `X (1/2 timed out)` or `-`.
pub fn cell_text_with_ci(cell: &Cell) -> String {
    match cell {
        Cell::Value(s) => match s.ci99 {
            Some(ci) => format!("{} ± {} (n={})", format_value(s.avg), format_value(ci), s.n),
            None => format!("{} (n={})", format_value(s.avg), s.n),
        },
        Cell::TimedOut { runs, timed_out } => format!("X ({timed_out}/{runs} timed out)"),
        Cell::Missing => "-".to_string(),
    }
}

/// What X means in a figure's cells.
pub fn x_meaning(fig: &Figure, meta: &ReportMeta) -> String {
    match fig.benchmark {
        Benchmark::Startup => format!(
            "the application did not start up in {} seconds",
            format_plain(meta.startup_timeout_s)
        ),
        Benchmark::Throughput => "the workloads did not stop when asked to".to_string(),
        _ => "a run timed out".to_string(),
    }
}

/// The quantity with its unit, e.g. `start-up time [s]`.
pub fn quantity_with_unit(fig: &Figure) -> String {
    match fig.unit() {
        "" => fig.quantity.name(),
        unit => format!("{} [{unit}]", fig.quantity.name()),
    }
}

/// The reference-case explanation of a figure.
pub fn reference_text(fig: &Figure, meta: &ReportMeta) -> String {
    let given = fig.app.as_ref().and_then(|a| meta.startup_reference_s.get(a));
    match (&fig.quantity, &fig.reference_workload, given) {
        (Quantity::StartupTime, _, Some(v)) => {
            format!("idle device, given reference start-up time {} s", format_value(*v))
        }
        (Quantity::StartupTime, Some(w), None) => {
            format!("{w} (no background workload): each scheduler's idle-device start-up time")
        }
        (Quantity::StartupTime, None, None) => "0r-seq (idle device), not measured in these runs".to_string(),
        (Quantity::AggregateThroughput, Some(w), _) => {
            format!("{w} (one sequential reader): the throughput one sync reader gets from the device")
        }
        (Quantity::AggregateThroughput, None, _) if fig.benchmark == Benchmark::Throughput => {
            "1r-seq (one sequential reader), not measured in these runs".to_string()
        }
        _ => "none".to_string(),
    }
}

/// The S-style `*-table.txt` of a figure: a comment header, then `# Workload  <schedulers>` and one row per
/// workload with two-decimal averages, `X` on a timeout and `-` for a missing combination.
pub fn s_table(fig: &Figure, meta: &ReportMeta) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}", fig.title);
    if let Some(src) = &fig.source {
        let _ = writeln!(out, "# Reproduces: {src}");
    }
    let _ = writeln!(out, "# First column: Workload");
    let _ = writeln!(
        out,
        "# Next columns: {}, or X if {}",
        quantity_with_unit(fig),
        x_meaning(fig, meta)
    );
    if fig.cells.iter().flatten().any(|c| matches!(c, Cell::Missing)) {
        let _ = writeln!(out, "# A '-' marks a workload a scheduler was not run with");
    }
    let _ = writeln!(out, "# Reference case: {}", reference_text(fig, meta));
    let _ = writeln!(out, "# Workload  {}", fig.schedulers.join(" "));
    for (workload, row) in fig.workloads.iter().zip(&fig.cells) {
        let values: Vec<String> = row.iter().map(cell_text).collect();
        let _ = writeln!(out, "  {workload}  {}", values.join(" "));
    }
    out
}

/// S's `result_list.txt`: one line per (figure, workload, scheduler),
/// `<name>--<workload>--<scheduler> pass <min> <max> <avg> <std> <unit>`, or `... fail` when a repetition
/// timed out. The name is [`Figure::list_name`], followed by `@<target>` when the results span several targets.
pub fn result_list(figs: &[Figure]) -> String {
    let targets: BTreeSet<(&str, &str)> = figs.iter().map(|f| (f.target.as_str(), f.device.as_str())).collect();
    let mut out = String::new();
    for fig in figs {
        let mut name = fig.list_name();
        if targets.len() > 1 {
            name.push('@');
            name.push_str(&fig.target);
        }
        for (workload, row) in fig.workloads.iter().zip(&fig.cells) {
            for (sched, cell) in fig.schedulers.iter().zip(row) {
                match cell {
                    Cell::Value(s) => {
                        let _ = write!(
                            out,
                            "{name}--{workload}--{sched} pass {} {} {} {}",
                            format_value(s.min),
                            format_value(s.max),
                            format_value(s.avg),
                            format_value(s.std)
                        );
                        if !fig.unit().is_empty() {
                            let _ = write!(out, " {}", fig.unit());
                        }
                        out.push('\n');
                    }
                    Cell::TimedOut { .. } => {
                        let _ = writeln!(out, "{name}--{workload}--{sched} fail");
                    }
                    Cell::Missing => {}
                }
            }
        }
    }
    out
}

/// Pads `text` with spaces to `width` characters.
fn pad(text: &str, width: usize) -> String {
    let len = text.chars().count();
    let mut s = text.to_string();
    s.extend(std::iter::repeat_n(' ', width.saturating_sub(len)));
    s
}

/// A human-readable summary of every figure: average ± 99% confidence half-width and the number of
/// repetitions per cell, in aligned columns, with the interval's formula ([`CI_FORMULA`]) in the header.
pub fn summary_table(figs: &[Figure]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Summary over repetitions: avg ± half-width of the 99% confidence interval (n runs)"
    );
    let _ = writeln!(out, "{CI_FORMULA}");
    let _ = writeln!(out, "X: a repetition timed out; -: not run");
    for fig in figs {
        out.push('\n');
        let _ = writeln!(out, "{} [{}]", fig.title, fig.unit());
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut header = vec!["workload".to_string()];
        header.extend(fig.schedulers.iter().cloned());
        rows.push(header);
        for (workload, row) in fig.workloads.iter().zip(&fig.cells) {
            let mut line = vec![workload.clone()];
            line.extend(row.iter().map(cell_text_with_ci));
            rows.push(line);
        }
        let columns = rows[0].len();
        let widths: Vec<usize> = (0..columns)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for row in &rows {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(t, w)| pad(t, *w)).collect();
            let _ = writeln!(out, "  {}", cells.join("   ").trim_end());
        }
    }
    out
}

/// The headline figures of several targets side by side: one table per (benchmark, application, quantity), with a
/// row per (workload, target), the targets of one workload on adjacent rows, and a column per scheduler (the union
/// over targets, `-` where a target did not run one). `None` when the figures span fewer than two targets.
pub fn side_by_side(figs: &[&Figure]) -> Option<String> {
    let targets: BTreeSet<&str> = figs.iter().map(|f| f.target.as_str()).collect();
    if targets.len() < 2 {
        return None;
    }
    type Key = (Benchmark, Option<String>, Quantity);
    let mut keys: Vec<Key> = Vec::new();
    for f in figs {
        let k = (f.benchmark, f.app.clone(), f.quantity.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = String::new();
    for (benchmark, app, quantity) in keys {
        let group: Vec<&&Figure> = figs
            .iter()
            .filter(|f| f.benchmark == benchmark && f.app == app && f.quantity == quantity)
            .collect();
        let mut scheds: Vec<String> = Vec::new();
        let mut workloads: Vec<String> = Vec::new();
        for f in &group {
            for s in &f.schedulers {
                if !scheds.contains(s) {
                    scheds.push(s.clone());
                }
            }
            for w in &f.workloads {
                if !workloads.contains(w) {
                    workloads.push(w.clone());
                }
            }
        }
        let what = match (&app, &quantity) {
            (Some(a), _) if benchmark == Benchmark::Replay => format!("{} replaying {a}", quantity_with_unit(group[0])),
            (Some(a), Quantity::StartupTime) => format!("{} of {a}", quantity_with_unit(group[0])),
            (Some(a), _) => format!("{} during {a} start-up", quantity_with_unit(group[0])),
            (None, _) => quantity_with_unit(group[0]),
        };
        let _ = writeln!(out, "# {benchmark}: {what}, targets side by side");
        let mut header = vec!["workload".to_string(), "target".to_string()];
        header.extend(scheds.iter().cloned());
        let mut rows = vec![header];
        for w in &workloads {
            for f in &group {
                if !f.workloads.contains(w) {
                    continue;
                }
                let mut row = vec![w.clone(), f.target.clone()];
                for s in &scheds {
                    row.push(f.cell(w, s).map_or("-".to_string(), cell_text));
                }
                rows.push(row);
            }
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row.iter().zip(&widths).map(|(t, w)| pad(t, *w)).collect();
            let lead = if i == 0 { "# " } else { "  " };
            let _ = writeln!(out, "{lead}{}", cells.join("  ").trim_end());
        }
        out.push('\n');
    }
    Some(out)
}

/// iozone's phases: the `extra` key of each and its column title in seed 003's tables.
pub const IOZONE_PHASES: [(&str, &str); 4] = [
    ("write_kbps", "write"),
    ("rewrite_kbps", "re-write"),
    ("read_kbps", "read"),
    ("reread_kbps", "re-read"),
];

/// The iozone results in seed 003's layout: one table per (target, thread count) with a row per scheduler and the
/// write, re-write, read and re-read throughput in KB/s (average over repetitions). When the runs measured the
/// policy's CPU time (`--cpu-time`), a last column gives it in ns per request; that column is wall-clock, not
/// reproducible, and exists only then. `None` when there are no iozone results.
pub fn iozone_tables(results: &[RunResult]) -> Option<String> {
    let runs: Vec<&RunResult> = results.iter().filter(|r| r.benchmark == Benchmark::Iozone).collect();
    if runs.is_empty() {
        return None;
    }
    let mut groups: Vec<(String, String)> = Vec::new();
    for r in &runs {
        let key = (r.target.clone(), r.workload.clone());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    let mut out = String::new();
    for (target, workload) in &groups {
        let of_group: Vec<&&RunResult> = runs
            .iter()
            .filter(|r| &r.target == target && &r.workload == workload)
            .collect();
        let mut scheds: Vec<String> = Vec::new();
        for r in &of_group {
            let l = scheduler_label(r);
            if !scheds.contains(&l) {
                scheds.push(l);
            }
        }
        let with_cpu = of_group.iter().any(|r| r.sched_cpu_ns_per_request.is_some());
        let threads = workload.split('-').next().unwrap_or(workload);
        let _ = writeln!(
            out,
            "# iozone -r 512k -i 0 -i 1 -t {threads} on {target}: throughput in KB/s (average over repetitions)"
        );
        let mut header = vec!["scheduler".to_string()];
        header.extend(IOZONE_PHASES.iter().map(|(_, t)| t.to_string()));
        if with_cpu {
            header.push("policy CPU [ns/request]".to_string());
        }
        let mut rows = vec![header];
        for sched in &scheds {
            let mine: Vec<&&&RunResult> = of_group.iter().filter(|r| &scheduler_label(r) == sched).collect();
            let avg = |f: &dyn Fn(&RunResult) -> Option<f64>| {
                let v: Vec<f64> = mine.iter().filter_map(|r| f(r)).collect();
                if v.is_empty() {
                    "-".to_string()
                } else {
                    format_value(v.iter().sum::<f64>() / v.len() as f64)
                }
            };
            let mut row = vec![sched.clone()];
            for (key, _) in IOZONE_PHASES {
                row.push(avg(&|r: &RunResult| r.extra.get(key).copied()));
            }
            if with_cpu {
                row.push(avg(&|r: &RunResult| r.sched_cpu_ns_per_request));
            }
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (t, w))| {
                    if c == 0 {
                        pad(t, *w)
                    } else {
                        format!("{}{t}", " ".repeat(w.saturating_sub(t.chars().count())))
                    }
                })
                .collect();
            let lead = if i == 0 { "# " } else { "  " };
            let _ = writeln!(out, "{lead}{}", cells.join("  ").trim_end());
        }
        out.push('\n');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures;
    use crate::report::testdata::sample_results;

    #[test]
    fn s_table_has_header_x_cells_and_s_row_order() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let t = s_table(&figs[0], &ReportMeta::default());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "# Start-up time of xterm on sim:seagate-hdd");
        assert_eq!(lines[1], "# First column: Workload");
        assert_eq!(
            lines[2],
            "# Next columns: start-up time [s], or X if the application did not start up in 60 seconds"
        );
        assert!(lines[3].starts_with("# Reference case: 0r0w"), "{}", lines[3]);
        assert_eq!(lines[4], "# Workload  bfq cfq deadline");
        assert_eq!(lines[5], "  0r0w  0.22 0.23 0.21");
        assert!(lines[6].starts_with("  10r-seq  0.46 "), "{}", lines[6]);
        assert!(
            lines[7].starts_with("  10r-rand  ") && lines[7].ends_with(" X"),
            "{}",
            lines[7]
        );
        assert!(lines[8].starts_with("  5r5w-seq  "));
        assert_eq!(lines.len(), 9);
    }

    #[test]
    fn throughput_table_names_its_reference_and_x() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let t = s_table(&figs[2], &ReportMeta::default());
        assert!(t.contains("# Next columns: aggregate throughput [MB/s], or X if the workloads did not stop"));
        assert!(t.contains("# Reference case: 1r-seq"));
        let rows: Vec<&str> = t.lines().filter(|l| !l.starts_with('#')).collect();
        let order: Vec<&str> = rows.iter().map(|l| l.split_whitespace().next().unwrap()).collect();
        assert_eq!(order, ["1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"]);
    }

    #[test]
    fn result_list_lines() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let list = result_list(&figs);
        assert!(
            list.contains("\nthroughput--10r-seq--bfq pass 96.53 98.50 97.52 1.39 MB/s\n"),
            "{list}"
        );
        assert!(list.contains("\nstartup-xterm--10r-rand--deadline fail\n"));
        assert!(list.starts_with("startup-xterm--0r0w--bfq pass "));
        assert!(list.contains("\nstartup-xterm-throughput--0r0w--bfq pass "));
        assert_eq!(list.lines().count(), 12 + 12 + 15);
    }

    #[test]
    fn summary_table_names_the_interval() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let s = summary_table(&figs);
        assert!(s.contains(CI_FORMULA));
        assert!(s.contains("X (1/2 timed out)"));
        assert!(s.contains("0.46 ± "));
    }

    #[test]
    fn iozone_tables_follow_seed_003_layout() {
        let mk = |sched: &str, w: f64, cpu: Option<f64>| {
            let mut r = crate::report::testdata::run("iozone", sched, "10-thread", 0, 1.0);
            for (i, (k, _)) in IOZONE_PHASES.iter().enumerate() {
                r.extra.insert(k.to_string(), w + i as f64);
            }
            r.sched_cpu_ns_per_request = cpu;
            r
        };
        assert!(iozone_tables(&sample_results()).is_none());
        let t = iozone_tables(&[mk("cfq", 1000.0, None), mk("noop", 2000.0, None)]).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("-t 10 on sim:seagate-hdd"), "{t}");
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["#", "scheduler", "write", "re-write", "read", "re-read"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["cfq", "1000.00", "1001.00", "1002.00", "1003.00"]
        );
        assert!(!t.contains("CPU"), "no CPU column without measurements");
        let t = iozone_tables(&[mk("cfq", 1000.0, Some(250.0))]).unwrap();
        assert!(t.contains("policy CPU [ns/request]") && t.contains(" 250.00"), "{t}");
    }

    #[test]
    fn side_by_side_puts_the_targets_of_a_workload_together() {
        let mut rs = sample_results();
        for r in sample_results() {
            rs.push(RunResult {
                target: "kernel:/mnt/x".into(),
                device: "loop0".into(),
                ..r
            });
        }
        let figs = figures(&rs, &ReportMeta::default());
        let refs: Vec<&Figure> = figs.iter().collect();
        assert!(side_by_side(&refs[..1]).is_none(), "one target: nothing to compare");
        let t = side_by_side(&refs).unwrap();
        let rows: Vec<Vec<&str>> = t
            .lines()
            .filter(|l| l.starts_with("  "))
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(rows[0][..2], ["0r0w", "sim:seagate-hdd"]);
        assert_eq!(rows[1][..2], ["0r0w", "kernel:/mnt/x"]);
        assert_eq!(rows[0][2..], rows[1][2..], "same values in both copies");
        assert!(
            t.starts_with("# startup: start-up time [s] of xterm, targets side by side\n"),
            "{t}"
        );
    }

    #[test]
    fn timeout_is_configurable() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let meta = ReportMeta {
            startup_timeout_s: 120.0,
            ..ReportMeta::default()
        };
        assert!(s_table(&figs[0], &meta).contains("did not start up in 120 seconds"));
    }
}
