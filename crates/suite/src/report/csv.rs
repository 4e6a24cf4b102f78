//! CSV exports: every run, and the per-cell summaries of every figure.
//!
//! Written with the `csv` crate: fields are quoted (RFC 4180) when they contain a comma, a double quote, a carriage
//! return or a newline; a double quote inside is doubled. Floating-point values use Rust's shortest round-trip
//! notation; absent values are empty fields. Lines end with `\n`.

use super::{Cell, Figure};
use crate::result::RunResult;
use std::collections::BTreeSet;

/// A CSV writer into memory with the report's conventions (quote only where needed, `\n` line ends).
struct Out(csv::Writer<Vec<u8>>);

impl Out {
    fn new() -> Out {
        Out(csv::WriterBuilder::new()
            .quote_style(csv::QuoteStyle::Necessary)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new()))
    }

    fn record(&mut self, fields: &[String]) {
        // Writing into a Vec cannot fail, and every record has the header's length (checked by the tests).
        self.0.write_record(fields).expect("CSV into memory");
    }

    fn text(self) -> String {
        let bytes = self.0.into_inner().expect("CSV into memory flushes");
        String::from_utf8(bytes).expect("CSV of UTF-8 fields is UTF-8")
    }
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

/// One value of the runs table ([`runs_table`]), typed; [`runs_csv`] writes it as [`Field::csv`] does.
#[derive(Debug, Clone, PartialEq)]
pub enum Field {
    /// Text (names, labels, joined tunables).
    Text(String),
    /// A whole number (repetition, seed).
    Int(u64),
    /// A measured quantity.
    Float(f64),
    /// A flag (`timed_out`).
    Bool(bool),
    /// No value: an application-less run's `app`, a start-up that timed out, an extra the run lacks.
    Missing,
}

impl Field {
    /// The CSV text of the value: floating-point values in Rust's shortest round-trip notation, flags as
    /// `true`/`false`, a missing value as an empty field.
    pub fn csv(&self) -> String {
        match self {
            Field::Text(t) => t.clone(),
            Field::Int(n) => n.to_string(),
            Field::Float(v) => num(*v),
            Field::Bool(b) => b.to_string(),
            Field::Missing => String::new(),
        }
    }
}

fn opt_field(v: Option<f64>) -> Field {
    v.map_or(Field::Missing, Field::Float)
}

/// The runs table of [`runs_csv`] as values: the header ([`RUN_COLUMNS`], then `extra.<key>` for the union of all
/// runs' extra keys in sorted order) and one row per run. Tunables are joined with `;`; an absent application is
/// [`Field::Missing`], as are the extras a run lacks.
pub fn runs_table(results: &[RunResult]) -> (Vec<String>, Vec<Vec<Field>>) {
    let extra_keys: BTreeSet<&String> = results.iter().flat_map(|r| r.extra.keys()).collect();
    let mut header: Vec<String> = RUN_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(extra_keys.iter().map(|k| format!("extra.{k}")));
    let rows = results
        .iter()
        .map(|r| {
            let mut fields = vec![
                Field::Text(r.benchmark.name().to_string()),
                Field::Text(r.target.clone()),
                Field::Text(r.device.clone()),
                Field::Text(r.scheduler.clone()),
                Field::Text(
                    r.tunables
                        .iter()
                        .chain(&r.scenario)
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(";"),
                ),
                Field::Text(r.workload.clone()),
                r.app.clone().map_or(Field::Missing, Field::Text),
                Field::Int(u64::from(r.rep)),
                Field::Int(r.seed),
                opt_field(r.startup_s),
                Field::Bool(r.timed_out),
                Field::Float(r.throughput_mbps),
                Field::Float(r.read_mbps),
                Field::Float(r.write_mbps),
                opt_field(r.sched_cpu_ns_per_request),
            ];
            fields.extend(extra_keys.iter().map(|k| opt_field(r.extra.get(*k).copied())));
            fields
        })
        .collect();
    (header, rows)
}

/// One row per run with a header line: [`runs_table`] written as CSV.
pub fn runs_csv(results: &[RunResult]) -> String {
    let (header, rows) = runs_table(results);
    let mut out = Out::new();
    out.record(&header);
    for row in rows {
        out.record(&row.iter().map(Field::csv).collect::<Vec<_>>());
    }
    out.text()
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
    let mut out = Out::new();
    out.record(&header);
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
                out.record(&fields);
            }
        }
    }
    out.text()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{run, sample_results};
    use crate::report::{figures, ReportMeta};

    /// Reads CSV text back into records of fields with the `csv` crate's reader.
    fn parse(text: &str) -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.expect("valid CSV").iter().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn fields_are_quoted_only_where_needed() {
        let mut out = Out::new();
        let fields = ["plain", "a,b", "say \"hi\"", "two\nlines", ""].map(String::from);
        out.record(&fields);
        assert_eq!(out.text(), "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\n");
        assert_eq!(
            parse("plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\n"),
            [fields.to_vec()]
        );
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
