//! CSV exports: every run, and the per-cell summaries of every figure.
//!
//! Fields are quoted (RFC 4180) when they contain a comma, a double quote, a carriage return or a newline, or
//! start or end with a space; a double quote inside is doubled. Floating-point values use Rust's shortest
//! round-trip notation; absent values are empty fields. Lines end with `\n`.

use super::{Cell, Figure};
use crate::result::RunResult;
use std::collections::BTreeSet;

/// Quotes one CSV field if needed.
pub fn quote(field: &str) -> String {
    let needs = field.contains([',', '"', '\n', '\r']) || field.starts_with(' ') || field.ends_with(' ');
    if needs {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

fn line(fields: &[String]) -> String {
    let mut s = fields.iter().map(|f| quote(f)).collect::<Vec<_>>().join(",");
    s.push('\n');
    s
}

fn num(v: f64) -> String {
    format!("{v}")
}

fn opt(v: Option<f64>) -> String {
    v.map(num).unwrap_or_default()
}

/// The fixed columns of [`runs_csv`], before the `extra.<key>` columns.
pub const RUN_COLUMNS: [&str; 15] = [
    "benchmark",
    "target",
    "device",
    "scheduler",
    "tunables",
    "workload",
    "app",
    "rep",
    "seed",
    "startup_s",
    "timed_out",
    "throughput_mbps",
    "read_mbps",
    "write_mbps",
    "sched_cpu_ns_per_request",
];

/// One row per run with a header line. Tunables are joined with `;`. The `extra` maps are flattened into
/// `extra.<key>` columns, the union of all runs' keys in sorted order, empty where a run lacks the key.
pub fn runs_csv(results: &[RunResult]) -> String {
    let extra_keys: BTreeSet<&String> = results.iter().flat_map(|r| r.extra.keys()).collect();
    let mut header: Vec<String> = RUN_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(extra_keys.iter().map(|k| format!("extra.{k}")));
    let mut out = line(&header);
    for r in results {
        let mut fields = vec![
            r.benchmark.name().to_string(),
            r.target.clone(),
            r.device.clone(),
            r.scheduler.clone(),
            r.tunables.join(";"),
            r.workload.clone(),
            r.app.clone().unwrap_or_default(),
            r.rep.to_string(),
            r.seed.to_string(),
            opt(r.startup_s),
            r.timed_out.to_string(),
            num(r.throughput_mbps),
            num(r.read_mbps),
            num(r.write_mbps),
            opt(r.sched_cpu_ns_per_request),
        ];
        fields.extend(extra_keys.iter().map(|k| opt(r.extra.get(*k).copied())));
        out.push_str(&line(&fields));
    }
    out
}

/// The columns of [`summary_csv`].
pub const SUMMARY_COLUMNS: [&str; 17] = [
    "figure",
    "benchmark",
    "target",
    "device",
    "app",
    "quantity",
    "unit",
    "workload",
    "scheduler",
    "status",
    "n",
    "min",
    "max",
    "avg",
    "std",
    "ci99",
    "timed_out_runs",
];

/// One row per (figure, workload, scheduler) cell, with a header. `status` is `ok`, `X` (a repetition timed
/// out) or `missing`; the statistics are empty unless `ok`; `ci99` is empty with a single repetition.
pub fn summary_csv(figs: &[Figure]) -> String {
    let header: Vec<String> = SUMMARY_COLUMNS.iter().map(|c| c.to_string()).collect();
    let mut out = line(&header);
    for fig in figs {
        for (workload, row) in fig.workloads.iter().zip(&fig.cells) {
            for (sched, cell) in fig.schedulers.iter().zip(row) {
                let mut fields = vec![
                    fig.slug.clone(),
                    fig.benchmark.name().to_string(),
                    fig.target.clone(),
                    fig.device.clone(),
                    fig.app.clone().unwrap_or_default(),
                    fig.quantity.name(),
                    fig.unit().to_string(),
                    workload.clone(),
                    sched.clone(),
                ];
                match cell {
                    Cell::Value(s) => fields.extend([
                        "ok".to_string(),
                        s.n.to_string(),
                        num(s.min),
                        num(s.max),
                        num(s.avg),
                        num(s.std),
                        opt(s.ci99),
                        "0".to_string(),
                    ]),
                    Cell::TimedOut { runs, timed_out } => {
                        fields.extend(["X".to_string(), runs.to_string()]);
                        fields.extend(std::iter::repeat_n(String::new(), 5));
                        fields.push(timed_out.to_string());
                    }
                    Cell::Missing => {
                        fields.extend(["missing".to_string(), "0".to_string()]);
                        fields.extend(std::iter::repeat_n(String::new(), 6));
                    }
                }
                out.push_str(&line(&fields));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{run, sample_results};
    use crate::report::{figures, ReportMeta};

    /// Splits CSV text into records of fields, honouring quotes (a minimal reader for the tests).
    fn parse(text: &str) -> Vec<Vec<String>> {
        let mut records = Vec::new();
        let mut record = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match (quoted, c) {
                (true, '"') if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                (true, '"') => quoted = false,
                (true, c) => field.push(c),
                (false, '"') => quoted = true,
                (false, ',') => record.push(std::mem::take(&mut field)),
                (false, '\n') => {
                    record.push(std::mem::take(&mut field));
                    records.push(std::mem::take(&mut record));
                }
                (false, c) => field.push(c),
            }
        }
        records
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("plain"), "plain");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote("two\nlines"), "\"two\nlines\"");
        assert_eq!(quote(" padded"), "\" padded\"");
        assert_eq!(quote(""), "");
    }

    #[test]
    fn runs_csv_columns_extras_and_round_trip() {
        let mut a = run("video", "bfq", "10r-seq", 0, 50.5);
        a.extra.insert("drop_rate_pct".into(), 2.5);
        a.tunables = vec!["slice_idle=0".into(), "low_latency=1".into()];
        a.app = Some("mplayer, \"HD\"".into());
        let mut b = run("video", "cfq", "10r-seq", 1, 40.0);
        b.extra.insert("a_share".into(), 0.5);
        b.timed_out = true;
        let text = runs_csv(&[a, b]);
        let rows = parse(&text);
        assert_eq!(rows.len(), 3);
        let header = &rows[0];
        assert_eq!(&header[..15], RUN_COLUMNS);
        assert_eq!(&header[15..], ["extra.a_share", "extra.drop_rate_pct"]);
        assert!(rows.iter().all(|r| r.len() == header.len()));
        assert_eq!(rows[1][3], "bfq");
        assert_eq!(rows[1][4], "slice_idle=0;low_latency=1");
        assert_eq!(rows[1][6], "mplayer, \"HD\"");
        assert_eq!(rows[1][9], "");
        assert_eq!(rows[1][11], "50.5");
        assert_eq!((rows[1][15].as_str(), rows[1][16].as_str()), ("", "2.5"));
        assert_eq!((rows[2][15].as_str(), rows[2][16].as_str()), ("0.5", ""));
        assert_eq!(rows[2][10], "true");
        assert!(text.contains("\"mplayer, \"\"HD\"\"\""));
    }

    #[test]
    fn summary_csv_has_one_row_per_cell() {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let rows = parse(&summary_csv(&figs));
        let cells: usize = figs.iter().map(|f| f.workloads.len() * f.schedulers.len()).sum();
        assert_eq!(rows.len(), 1 + cells);
        assert!(rows.iter().all(|r| r.len() == SUMMARY_COLUMNS.len()));
        let x = rows
            .iter()
            .find(|r| r[9] == "X")
            .expect("the timed-out cell is in the summary");
        assert_eq!(
            (x[7].as_str(), x[8].as_str(), x[16].as_str()),
            ("10r-rand", "deadline", "1")
        );
    }
}
