//! One self-contained HTML page: inline CSS, inline SVG charts, no scripts and no external resources. Links
//! point only at the sibling files [`super::write_all`] writes.

use super::svg::{bar_chart, escape, Palette};
use super::table::{format_value, quantity_with_unit, reference_text, x_meaning};
use super::{Cell, ChecklistItem, Figure, ReportMeta, CPU_FILE, IOZONE_FILE, SIDE_BY_SIDE_FILE};
use crate::stats::CI_FORMULA;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The data files the report links to, as written by [`super::write_all`]: (file name, description).
pub const DATA_FILES: [(&str, &str); 5] = [
    ("results.json", "every run (JSON)"),
    ("results.csv", "every run (CSV)"),
    ("summary.csv", "per-cell statistics (CSV)"),
    ("result_list.txt", "S result list"),
    ("summary.txt", "summary table with 99% intervals"),
];

const STYLE: &str = r#"
:root { --fg: #1d232a; --muted: #5b6670; --line: #d9dee3; --bg: #f6f7f9; --pass: #1a7f37; --fail: #c62828; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 980px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 1.8rem; margin: 0 0 12px; }
h2 { font-size: 1.25rem; margin: 0 0 12px; }
section, header, nav { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 18px 22px;
  margin: 0 0 20px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0 0 12px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
code { font: 0.9em/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--bg);
  padding: 1px 4px; border-radius: 4px; }
a { color: #0b5cad; }
ul.files { margin: 0; padding-left: 20px; }
table.eras td { vertical-align: top; padding: 6px 8px; border-top: 1px solid #ddd; }
ul.checklist { list-style: none; margin: 0; padding: 0; }
ul.checklist li { display: grid; grid-template-columns: 64px 1fr; gap: 2px 12px; padding: 8px 0;
  border-top: 1px solid var(--line); }
ul.checklist li:first-child { border-top: none; }
.badge { display: inline-block; text-align: center; font-weight: 700; font-size: 0.8rem; letter-spacing: 0.04em;
  color: #fff; border-radius: 4px; padding: 2px 0; height: 1.6em; }
.badge.pass { background: var(--pass); }
.badge.fail { background: var(--fail); }
.detail { grid-column: 2; color: var(--muted); font-size: 0.9rem; }
.tally { color: var(--muted); margin: -6px 0 10px; }
nav ol { margin: 0; padding-left: 22px; }
.chart svg { display: block; width: 100%; max-width: 960px; height: auto; margin: 0 auto 12px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.92rem; font-variant-numeric: tabular-nums; min-width: 60%; }
th, td { padding: 5px 12px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid var(--fg); }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; }
.ci { color: var(--muted); font-size: 0.85em; }
td.x { color: var(--fail); font-weight: 700; }
td.missing { color: var(--muted); }
tr.ref td { background: #f1f5fb; }
.notes { color: var(--muted); font-size: 0.88rem; margin: 10px 0 0; }
.source { color: var(--muted); margin: -6px 0 10px; font-style: italic; }
pre { font: 0.85rem/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; margin: 0; }
footer { color: var(--muted); font-size: 0.85rem; text-align: center; }
@media (max-width: 600px) { main { padding: 12px 8px; } section, header, nav { padding: 12px; } }
"#;

/// The chart as it is embedded in HTML: without the `xmlns` attribute, which inline SVG does not need, so the
/// page names no URL at all.
pub fn inline_svg(svg: &str) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

fn table_html(fig: &Figure, palette: &Palette) -> String {
    let mut s = String::new();
    s.push_str("<div class=\"table-wrap\"><table>\n<thead><tr><th>Workload</th>");
    for sched in &fig.schedulers {
        let _ = write!(
            s,
            "<th><span class=\"swatch\" style=\"background:{}\"></span>{}</th>",
            palette.colour(sched),
            escape(sched)
        );
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (workload, row) in fig.workloads.iter().zip(&fig.cells) {
        let is_ref = fig.reference_workload.as_ref() == Some(workload);
        s.push_str(if is_ref { "<tr class=\"ref\">" } else { "<tr>" });
        let _ = write!(s, "<td>{}</td>", escape(workload));
        for cell in row {
            match cell {
                Cell::Value(sum) => {
                    let _ = write!(
                        s,
                        "<td title=\"n={}, min {}, max {}, std {}\">{}",
                        sum.n,
                        format_value(sum.min),
                        format_value(sum.max),
                        format_value(sum.std),
                        format_value(sum.avg)
                    );
                    if let Some(ci) = sum.ci99 {
                        let _ = write!(s, " <span class=\"ci\">± {}</span>", format_value(ci));
                    }
                    s.push_str("</td>");
                }
                Cell::TimedOut { runs, timed_out } => {
                    let _ = write!(
                        s,
                        "<td class=\"x\" title=\"{timed_out} of {runs} runs timed out\">X</td>"
                    );
                }
                Cell::Missing => s.push_str("<td class=\"missing\">–</td>"),
            }
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table></div>\n");
    s
}

/// The whole report page: a header with the run's metadata and links to the data files, the checklist (when
/// there is one) with PASS/FAIL badges, a list of figures, then every figure's chart (inline SVG) and table.
pub fn report_html(figs: &[Figure], meta: &ReportMeta, checklist: &[ChecklistItem]) -> String {
    report_html_with(figs, meta, checklist, None, None)
}

/// [`report_html`] with, when given, the headline tables of several targets side by side
/// ([`super::table::side_by_side`]) and the iozone tables in seed 003's layout ([`super::table::iozone_tables`]),
/// each as a section of its own, linked to their files (and to the CPU-time file when the iozone tables have a CPU
/// column).
pub fn report_html_with(
    figs: &[Figure],
    meta: &ReportMeta,
    checklist: &[ChecklistItem],
    side_by_side: Option<&str>,
    iozone: Option<&str>,
) -> String {
    let palette = Palette::for_figures(figs);
    let mut s = String::new();
    s.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(s, "<title>{}</title>", escape(&meta.title));
    let _ = writeln!(s, "<style>{STYLE}</style>\n</head>\n<body>\n<main>");

    // Header.
    let targets: Vec<&str> = {
        let mut seen = BTreeSet::new();
        figs.iter()
            .map(|f| f.target.as_str())
            .filter(|t| seen.insert(*t))
            .collect()
    };
    let schedulers: Vec<&str> = {
        let mut seen = BTreeSet::new();
        figs.iter()
            .flat_map(|f| f.schedulers.iter().map(String::as_str))
            .filter(|t| seen.insert(*t))
            .collect()
    };
    let _ = writeln!(s, "<header>\n<h1>{}</h1>\n<dl class=\"meta\">", escape(&meta.title));
    let command = if meta.command.is_empty() {
        "(not given)".to_string()
    } else {
        meta.command.clone()
    };
    let _ = writeln!(s, "<dt>Command</dt><dd><code>{}</code></dd>", escape(&command));
    let _ = writeln!(s, "<dt>Seed</dt><dd>{}</dd>", meta.seed);
    let _ = writeln!(s, "<dt>Targets</dt><dd>{}</dd>", escape(&targets.join(", ")));
    let _ = writeln!(s, "<dt>Schedulers</dt><dd>{}</dd>", escape(&schedulers.join(", ")));
    let _ = writeln!(s, "<dt>Figures</dt><dd>{}</dd>", figs.len());
    let _ = writeln!(s, "<dt>Statistics</dt><dd>{}</dd>", escape(CI_FORMULA));
    s.push_str("</dl>\n<ul class=\"files\">\n");
    for (file, what) in DATA_FILES {
        let _ = writeln!(s, "<li><a href=\"{file}\">{file}</a>: {}</li>", escape(what));
    }
    if side_by_side.is_some() {
        let _ = writeln!(
            s,
            "<li><a href=\"{SIDE_BY_SIDE_FILE}\">{SIDE_BY_SIDE_FILE}</a>: headline tables, targets side by side</li>"
        );
    }
    if let Some(t) = iozone {
        let _ = writeln!(
            s,
            "<li><a href=\"{IOZONE_FILE}\">{IOZONE_FILE}</a>: iozone tables in seed 003's layout</li>"
        );
        if t.contains("policy CPU") {
            let _ = writeln!(
                s,
                "<li><a href=\"{CPU_FILE}\">{CPU_FILE}</a>: measured policy CPU time per run (wall clock, not \
                 reproducible)</li>"
            );
        }
    }
    s.push_str("</ul>\n</header>\n");

    // Checklist.
    if !checklist.is_empty() {
        let passed = checklist.iter().filter(|c| c.pass).count();
        let _ = writeln!(
            s,
            "<section id=\"checklist\">\n<h2>Checklist</h2>\n<p class=\"tally\">{passed} of {} passed</p>\n\
             <ul class=\"checklist\">",
            checklist.len()
        );
        let eras = checklist.iter().any(|i| i.newest.is_some());
        for item in checklist.iter().filter(|i| !eras || i.newest.is_none()) {
            let (class, badge) = if item.pass { ("pass", "PASS") } else { ("fail", "FAIL") };
            let _ = write!(
                s,
                "<li class=\"{class}\"><span class=\"badge {class}\">{badge}</span><span class=\"text\">{}</span>",
                escape(&item.text)
            );
            if !item.detail.is_empty() {
                let _ = write!(s, "<span class=\"detail\">{}</span>", escape(&item.detail));
            }
            s.push_str("</li>\n");
        }
        s.push_str("</ul>\n");
        if eras {
            // Claims about BFQ: the era the seed measured (which decides) and the newest kernel's, as columns.
            s.push_str(
                "<h3>Claims about BFQ, in both eras</h3>\n<div class=\"table-wrap\"><table class=\"eras\">\n\
                 <tr><th>BFQ v7r2 (the seed's era)</th><th>newest BFQ</th><th>where the eras differ</th></tr>\n",
            );
            let cell = |pass: bool, text: &str, detail: &str| {
                let (class, badge) = if pass { ("pass", "PASS") } else { ("fail", "FAIL") };
                format!(
                    "<td><span class=\"badge {class}\">{badge}</span> {}<br><span class=\"detail\">{}</span></td>",
                    escape(text),
                    escape(detail)
                )
            };
            for item in checklist {
                let Some(n) = &item.newest else { continue };
                let _ = writeln!(
                    s,
                    "<tr>{}{}<td class=\"detail\">{}</td></tr>",
                    cell(item.pass, &item.text, &item.detail),
                    cell(n.pass, &n.text, &n.detail),
                    escape(&n.differs)
                );
            }
            s.push_str("</table></div>\n");
        }
        s.push_str("</section>\n");
    }

    // Targets side by side.
    if let Some(t) = side_by_side {
        let _ = writeln!(
            s,
            "<section id=\"side-by-side\">\n<h2>Targets side by side</h2>\n<div class=\"table-wrap\"><pre>{}</pre></div>\n\
             <p class=\"notes\">Averages over repetitions; X: a repetition timed out; -: not run.</p>\n</section>",
            escape(t)
        );
    }

    // iozone tables.
    if let Some(t) = iozone {
        let _ = writeln!(
            s,
            "<section id=\"iozone\">\n<h2>iozone tables (seed 003 layout)</h2>\n<div class=\"table-wrap\"><pre>{}</pre></div>\n\
             <p class=\"notes\">Throughput in KB/s per phase, average over repetitions. A CPU column, when present, is \
             the wall-clock time spent inside the policy per request, measured with --cpu-time; it varies from run to \
             run and is kept out of results.json.</p>\n</section>",
            escape(t)
        );
    }

    // Contents.
    if !figs.is_empty() {
        s.push_str("<nav>\n<h2>Figures</h2>\n<ol>\n");
        for fig in figs {
            let _ = writeln!(s, "<li><a href=\"#{}\">{}</a></li>", fig.slug, escape(&fig.title));
        }
        s.push_str("</ol>\n</nav>\n");
    }

    // Figures.
    for fig in figs {
        let _ = writeln!(
            s,
            "<section class=\"figure\" id=\"{}\">\n<h2>{}</h2>",
            fig.slug,
            escape(&fig.title)
        );
        if let Some(src) = &fig.source {
            let _ = writeln!(s, "<p class=\"source\">Reproduces: {}</p>", escape(src));
        }
        let _ = writeln!(
            s,
            "<div class=\"chart\">\n{}</div>",
            inline_svg(&bar_chart(fig, &palette))
        );
        s.push_str(&table_html(fig, &palette));
        let _ = writeln!(
            s,
            "<p class=\"notes\">Cells: {}, average over repetitions ± 99% confidence half-width. X: {}. \
             Reference case: {}.<br/>Files: <a href=\"{slug}-table.txt\">{slug}-table.txt</a> (S format), \
             <a href=\"{slug}.svg\">{slug}.svg</a></p>",
            escape(&quantity_with_unit(fig)),
            escape(&x_meaning(fig, meta)),
            escape(&reference_text(fig, meta)),
            slug = fig.slug
        );
        s.push_str("</section>\n");
    }
    if figs.is_empty() {
        s.push_str("<section><h2>No results</h2><p>There were no runs to report.</p></section>\n");
    }
    let _ = writeln!(
        s,
        "<footer>Generated by bfq-suite. {}</footer>\n</main>\n</body>\n</html>",
        escape(CI_FORMULA)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures;
    use crate::report::testdata::sample_results;
    use crate::report::xmlcheck::check_well_formed;

    fn page(checklist: &[ChecklistItem]) -> (Vec<Figure>, String) {
        let meta = ReportMeta::new("bfq reproduce --seed 7 --out <dir>", 7);
        let figs = figures(&sample_results(), &meta);
        let html = report_html(&figs, &meta, checklist);
        (figs, html)
    }

    #[test]
    fn embeds_every_chart_and_table() {
        let (figs, html) = page(&[]);
        let palette = Palette::for_figures(&figs);
        for fig in &figs {
            assert!(html.contains(&inline_svg(&bar_chart(fig, &palette))), "{}", fig.slug);
            assert!(html.contains(&format!("id=\"{}\"", fig.slug)));
            assert!(html.contains(&format!("href=\"{}-table.txt\"", fig.slug)));
            assert!(html.contains(&format!("href=\"#{}\"", fig.slug)));
        }
        assert_eq!(html.matches("<svg ").count(), figs.len());
        for (file, _) in DATA_FILES {
            assert!(html.contains(&format!("<a href=\"{file}\">")));
        }
        assert!(html.contains("<td class=\"x\" title=\"1 of 2 runs timed out\">X</td>"));
        assert!(html.contains("bfq reproduce --seed 7 --out &lt;dir&gt;"));
        assert!(!html.contains("id=\"checklist\""));
    }

    #[test]
    fn no_external_resources() {
        let (_, html) = page(&[ChecklistItem::new("x", true, "")]);
        assert!(!html.contains("http:") && !html.contains("https:"));
        assert!(!html.contains("src=") && !html.contains("<script") && !html.contains("<link"));
        assert!(!html.contains("url("));
        assert!(!html.contains("@import"));
    }

    #[test]
    fn checklist_shows_both_bfq_eras_as_columns() {
        let mut item = ChecklistItem::new("10r-rand: bfq-v7r2 at 46%", true, "0.77 MB/s");
        item.newest = Some(super::super::EraCheck {
            pass: false,
            text: "10r-rand: bfq at 100%".into(),
            detail: "1.68 MB/s".into(),
            differs: "v7r2 idles for seeky queues & keeps one request in the drive".into(),
        });
        let other = ChecklistItem::new("iozone within 9.6%", true, "8 schedulers");
        let (_, html) = page(&[item, other]);
        assert!(html.contains("2 of 2 passed"), "the seed's era decides");
        assert!(html.contains("<th>BFQ v7r2 (the seed's era)</th><th>newest BFQ</th><th>where the eras differ</th>"));
        let row = html
            .lines()
            .find(|l| l.starts_with("<tr><td>"))
            .expect("a row of the eras table");
        let pass = row.find("PASS</span> 10r-rand: bfq-v7r2").expect("the v7r2 column");
        let fail = row
            .find("FAIL</span> 10r-rand: bfq at 100%")
            .expect("the newest column");
        let why = row.find("keeps one request").expect("the differences column");
        assert!(pass < fail && fail < why, "{row}");
        assert!(row.contains("idles for seeky queues &amp; keeps"), "escaped: {row}");
        // A line without the newest era stays in the plain list, and the era lines are not listed twice.
        assert!(html.contains("<span class=\"text\">iozone within 9.6%</span>"));
        assert_eq!(html.matches("10r-rand: bfq-v7r2 at 46%").count(), 1);
    }

    #[test]
    fn checklist_badges() {
        let items = [
            ChecklistItem::new("bfq start-up under 10r-seq < 2 s", true, "0.46 s"),
            ChecklistItem::new("bfq beats cfq & deadline", false, "cfq 3.99 s < bfq"),
        ];
        let (_, html) = page(&items);
        assert!(html.contains("1 of 2 passed"));
        assert!(html.contains("<span class=\"badge pass\">PASS</span><span class=\"text\">bfq start-up under"));
        assert!(html.contains("<span class=\"badge fail\">FAIL</span><span class=\"text\">bfq beats cfq &amp;"));
        assert!(html.contains("<span class=\"detail\">cfq 3.99 s &lt; bfq</span>"));
    }

    #[test]
    fn body_is_well_formed_markup() {
        let (_, html) = page(&[ChecklistItem::new("a", false, "b")]);
        let start = html.find("<body>").unwrap();
        let end = html.find("</body>").unwrap() + "</body>".len();
        check_well_formed(&html[start..end]).unwrap();
    }
}
