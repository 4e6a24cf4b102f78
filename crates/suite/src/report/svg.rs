//! Hand-written SVG clustered bar charts, one per figure, in the manner of S's `plot_stats.sh`: one cluster per
//! workload, one bar per scheduler, the value above each bar, the y range 1.55 times the largest value, the
//! reference (idle-device) value as a horizontal dashed line, and a red "X" at the bottom where a cell timed
//! out. Error bars show the 99% confidence interval when there is one.

use super::{Cell, Figure, Reference};
use crate::stats::Summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Chart width in pixels.
pub const WIDTH: f64 = 800.0;
/// Chart height in pixels.
pub const HEIGHT: f64 = 400.0;
/// S's y range: the axis goes to this multiple of the largest value, leaving room for the labels.
pub const Y_RANGE_FACTOR: f64 = 1.55;

/// Width in pixels of the right margin that holds the reference-line labels.
const REF_MARGIN: f64 = 118.0;
/// Font size of the reference labels.
const REF_FONT: f64 = 11.0;
/// Colour of reference lines shared by several schedulers or given by the caller.
const REF_GREY: &str = "#444444";

/// A white outline behind text, so labels stay legible over grid and reference lines.
const HALO: &str = " stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" paint-order=\"stroke\"";

/// Colour of the timed-out "X" markers (no scheduler gets it).
pub const X_COLOUR: &str = "#d62728";

/// Fixed colours of the known policies, so that a scheduler looks the same in every report.
const KNOWN_COLOURS: [(&str, &str); 9] = [
    ("bfq", "#1f77b4"),
    ("cfq", "#ff7f0e"),
    ("deadline", "#2ca02c"),
    ("mq-deadline", "#17becf"),
    ("anticipatory", "#9467bd"),
    ("noop", "#8c564b"),
    ("none", "#7f7f7f"),
    ("kyber", "#e377c2"),
    ("bfq-mq", "#393b79"),
];

/// Colours for other columns (schedulers with tunables, unknown names), in first-seen order.
const OTHER_COLOURS: [&str; 10] = [
    "#bcbd22", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#637939",
];

/// Colour of every scheduler column of a report: known policy names have fixed colours, the others take the
/// next free colour in first-seen order across all figures, so a column has the same colour in every chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Palette {
    colours: BTreeMap<String, String>,
}

impl Palette {
    /// The palette of a set of figures.
    pub fn for_figures(figs: &[Figure]) -> Palette {
        let mut palette = Palette::default();
        let mut next = 0usize;
        for label in figs.iter().flat_map(|f| f.schedulers.iter()) {
            if palette.colours.contains_key(label) {
                continue;
            }
            let colour = match KNOWN_COLOURS.iter().find(|(name, _)| name == label) {
                Some((_, c)) => c.to_string(),
                None => {
                    let c = OTHER_COLOURS[next % OTHER_COLOURS.len()].to_string();
                    next += 1;
                    c
                }
            };
            palette.colours.insert(label.clone(), colour);
        }
        palette
    }

    /// The colour of a column; grey for one the palette does not know.
    pub fn colour(&self, scheduler: &str) -> &str {
        self.colours.get(scheduler).map(String::as_str).unwrap_or("#555555")
    }
}

/// Escapes text for XML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A bar's value label: fewer decimals for larger values.
pub fn value_label(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A "nice" tick step (1, 2 or 5 times a power of ten) near `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let f = raw / magnitude;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.0 {
        2.0
    } else if f < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn tick_label(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// Estimated width in pixels of `text` at `size` px in a sans-serif font.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.58
}

/// Formats a coordinate with one decimal.
fn c(v: f64) -> String {
    format!("{v:.1}")
}

/// The SVG bar chart of one figure, 800×400, with `xmlns` (a standalone file); every text is XML-escaped.
///
/// Drawn in this order: header (title), legend, y axis with grid, reference lines, bars with their X markers and
/// workload labels, axes, and "no data" when the figure is empty.
pub fn bar_chart(fig: &Figure, palette: &Palette) -> String {
    let mut s = String::new();
    header(&mut s, fig);
    let legend_bottom = legend(&mut s, fig, palette);
    let plot = Plot::new(fig, legend_bottom);
    y_axis(&mut s, &plot, &y_title(fig));
    reference_lines(&mut s, fig, palette, &plot);
    bars(&mut s, fig, palette, &plot);
    axes(&mut s, fig, &plot);
    s.push_str("</svg>\n");
    s
}

/// The y-axis title: the quantity's name, capitalised, with its unit in brackets when it has one.
fn y_title(fig: &Figure) -> String {
    match fig.unit() {
        "" => capitalise(&fig.quantity.name()),
        u => format!("{} [{u}]", capitalise(&fig.quantity.name())),
    }
}

/// The `<svg>` element, the document title, the white background and the chart title.
fn header(s: &mut String, fig: &Figure) {
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
         font-family=\"Helvetica, Arial, sans-serif\" role=\"img\">",
        w = WIDTH,
        h = HEIGHT
    );
    let _ = writeln!(s, "<title>{}</title>", escape(&fig.title));
    let _ = writeln!(s, "<rect width=\"{WIDTH}\" height=\"{HEIGHT}\" fill=\"#ffffff\"/>");
    let _ = writeln!(
        s,
        "<text class=\"chart-title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"16\" \
         font-weight=\"bold\" fill=\"#222\">{}</text>",
        c(WIDTH / 2.0),
        escape(&fig.title)
    );
}

/// Font size and swatch side of the legend, px.
const LEGEND_SIZE: f64 = 12.0;

/// The legend: one swatch per scheduler, in centred rows under the title. Returns the baseline below the last row.
fn legend(s: &mut String, fig: &Figure, palette: &Palette) -> f64 {
    let legend_size = LEGEND_SIZE;
    let item_w: Vec<f64> = fig
        .schedulers
        .iter()
        .map(|l| legend_size + 6.0 + text_width(l, legend_size) + 18.0)
        .collect();
    let mut rows: Vec<Vec<usize>> = vec![Vec::new()];
    let mut row_w = 0.0;
    for (i, w) in item_w.iter().enumerate() {
        if row_w + w > WIDTH - 40.0 && !rows.last().is_some_and(|r| r.is_empty()) {
            rows.push(Vec::new());
            row_w = 0.0;
        }
        row_w += w;
        if let Some(r) = rows.last_mut() {
            r.push(i);
        }
    }
    let mut y = 44.0;
    for row in &rows {
        let total: f64 = row.iter().map(|&i| item_w[i]).sum::<f64>() - 18.0;
        let mut x = (WIDTH - total) / 2.0;
        for &i in row {
            let label = &fig.schedulers[i];
            let _ = writeln!(
                s,
                "<g class=\"legend-item\"><rect x=\"{}\" y=\"{}\" width=\"{legend_size}\" height=\"{legend_size}\" \
                 fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"{legend_size}\" fill=\"#222\">{}</text></g>",
                c(x),
                c(y - legend_size + 2.0),
                palette.colour(label),
                c(x + legend_size + 5.0),
                c(y),
                escape(label)
            );
            x += item_w[i];
        }
        y += 18.0;
    }
    y
}

/// The plot area and its y scale, px.
struct Plot {
    /// Top of the plot area (below the legend).
    top: f64,
    /// Bottom of the plot area (the x axis).
    bottom: f64,
    /// Left edge (the y axis).
    left: f64,
    /// Right edge (before the reference-label margin, when there are references).
    right: f64,
    /// Value at the top of the y axis, in the figure's unit.
    y_max: f64,
}

impl Plot {
    /// The plot area under a legend ending at `legend_bottom`, scaled to S's [`Y_RANGE_FACTOR`] times the largest
    /// value, confidence-interval top or reference of `fig` (1 when there is none).
    fn new(fig: &Figure, legend_bottom: f64) -> Plot {
        let right = if fig.references.is_empty() {
            WIDTH - 16.0
        } else {
            WIDTH - REF_MARGIN
        };
        let mut data_max = 0.0f64;
        for cell in fig.cells.iter().flatten() {
            if let Cell::Value(sum) = cell {
                let top = sum.avg + sum.ci99.unwrap_or(0.0);
                if top.is_finite() {
                    data_max = data_max.max(sum.avg).max(top);
                }
            }
        }
        for r in fig.references.iter().filter(|r| r.value.is_finite()) {
            data_max = data_max.max(r.value);
        }
        let y_max = if data_max > 0.0 && data_max.is_finite() {
            Y_RANGE_FACTOR * data_max
        } else {
            1.0
        };
        Plot {
            top: legend_bottom + 6.0,
            bottom: HEIGHT - 58.0,
            left: 74.0,
            right,
            y_max,
        }
    }

    /// Width of the plot area.
    fn width(&self) -> f64 {
        self.right - self.left
    }

    /// Height of the plot area.
    fn height(&self) -> f64 {
        self.bottom - self.top
    }

    /// The y coordinate of value `v` (clamped to the axis).
    fn y(&self, v: f64) -> f64 {
        self.bottom - (v.clamp(0.0, self.y_max) / self.y_max) * self.height()
    }
}

/// Grid lines, ticks and tick labels at a "nice" step (about five), and the y-axis title.
fn y_axis(s: &mut String, plot: &Plot, y_title: &str) {
    let (left, right, top) = (plot.left, plot.right, plot.top);
    let step = nice_step(plot.y_max / 5.0);
    let _ = writeln!(s, "<g class=\"y-axis\" font-size=\"11\" fill=\"#333\">");
    let mut k = 0u32;
    loop {
        let v = step * k as f64;
        if v > plot.y_max * (1.0 + 1e-9) {
            break;
        }
        let yy = plot.y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e3e3e3\"/><line x1=\"{}\" y1=\"{}\" x2=\"{}\" \
             y2=\"{}\" stroke=\"#333\"/><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            c(left),
            c(yy),
            c(right),
            c(yy),
            c(left - 5.0),
            c(yy),
            c(left),
            c(yy),
            c(left - 8.0),
            c(yy + 4.0),
            escape(&tick_label(v, step))
        );
        k += 1;
    }
    let _ = writeln!(s, "</g>");
    let _ = writeln!(
        s,
        "<text class=\"y-title\" x=\"18\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\" fill=\"#222\" \
         transform=\"rotate(-90 18 {})\">{}</text>",
        c(top + plot.height() / 2.0),
        c(top + plot.height() / 2.0),
        escape(y_title)
    );
}

/// The finite references of `fig` grouped by printed value, in first-seen order: schedulers whose references print
/// the same share one line.
fn reference_groups(fig: &Figure) -> Vec<(String, Vec<&Reference>)> {
    let mut groups: Vec<(String, Vec<&Reference>)> = Vec::new();
    for r in fig.references.iter().filter(|r| r.value.is_finite()) {
        let key = value_label(r.value);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(r),
            None => groups.push((key, vec![r])),
        }
    }
    groups
}

/// The label of one reference group: its colour (the scheduler's for a single scheduler, else grey), its name
/// wrapped to `max_chars` in at most two lines, and its value with the unit.
struct RefLabel {
    colour: String,
    name_lines: Vec<String>,
    value_text: String,
}

/// The labels of `groups`, in the same order.
fn reference_labels(
    fig: &Figure,
    palette: &Palette,
    groups: &[(String, Vec<&Reference>)],
    max_chars: usize,
) -> Vec<RefLabel> {
    let unit = fig.unit();
    groups
        .iter()
        .map(|(value_text, members)| {
            let first = members[0];
            let all = members.len() > 1 && members.len() == fig.references.len();
            let (colour, name) = match (members.len(), first.scheduler.as_deref()) {
                (1, Some(sched)) => (palette.colour(sched).to_string(), format!("{} {sched}", first.label)),
                (1, None) => (REF_GREY.to_string(), first.label.clone()),
                _ if all => (REF_GREY.to_string(), format!("{}, all", first.label)),
                _ => {
                    let names: Vec<&str> = members.iter().filter_map(|r| r.scheduler.as_deref()).collect();
                    (REF_GREY.to_string(), format!("{} {}", first.label, names.join(", ")))
                }
            };
            let value_text = match unit {
                "" => value_text.clone(),
                u => format!("{value_text} {u}"),
            };
            RefLabel {
                colour,
                name_lines: wrap(&name, max_chars, 2),
                value_text,
            }
        })
        .collect()
}

/// Top of each label in the right margin, by group index: at its line's height, pushed down so that labels of
/// `heights[i]` px do not overlap, and pulled back up as a block if they run below the chart.
fn place_reference_labels(line_ys: &[f64], heights: &[f64], top: f64) -> Vec<(f64, usize)> {
    let mut placed: Vec<(f64, usize)> = line_ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - heights[i] / 2.0, i))
        .collect();
    placed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut next_free = top;
    for p in placed.iter_mut() {
        p.0 = p.0.max(next_free);
        next_free = p.0 + heights[p.1] + 3.0;
    }
    let overflow = next_free - (HEIGHT - 16.0);
    if overflow > 0.0 {
        for p in placed.iter_mut() {
            p.0 -= overflow;
        }
    }
    placed.sort_by_key(|p| p.1);
    placed
}

/// Reference lines: one dashed line per distinct value, labelled in the right margin with a leader.
fn reference_lines(s: &mut String, fig: &Figure, palette: &Palette, plot: &Plot) {
    if !fig.references.iter().any(|r| r.value.is_finite()) {
        return;
    }
    let (left, right) = (plot.left, plot.right);
    let groups = reference_groups(fig);
    let line_h = REF_FONT + 2.0;
    let max_chars = ((WIDTH - right - 10.0) / (REF_FONT * 0.58)).floor() as usize;
    let labels = reference_labels(fig, palette, &groups, max_chars);
    let heights: Vec<f64> = labels
        .iter()
        .map(|l| (l.name_lines.len() + 1) as f64 * line_h)
        .collect();
    let line_ys: Vec<f64> = groups.iter().map(|(_, members)| plot.y(members[0].value)).collect();
    let _ = writeln!(s, "<g class=\"references\" font-size=\"{REF_FONT}\">");
    for (label_top, i) in place_reference_labels(&line_ys, &heights, plot.top) {
        let RefLabel {
            colour,
            name_lines,
            value_text,
        } = &labels[i];
        let yy = line_ys[i];
        let _ = write!(
            s,
            "<line class=\"reference\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{colour}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/><path d=\"M{} {}L{} {}\" stroke=\"{colour}\" \
             fill=\"none\"/><text class=\"reference-label\" x=\"{}\" y=\"{}\" fill=\"{colour}\">",
            c(left),
            c(yy),
            c(right),
            c(yy),
            c(right),
            c(yy),
            c(right + 5.0),
            c(label_top + heights[i] / 2.0),
            c(right + 8.0),
            c(label_top + REF_FONT),
        );
        for (k, line) in name_lines.iter().enumerate() {
            let dy = if k == 0 { 0.0 } else { line_h };
            let _ = write!(
                s,
                "<tspan x=\"{}\" dy=\"{}\">{}</tspan>",
                c(right + 8.0),
                c(dy),
                escape(line)
            );
        }
        let _ = writeln!(
            s,
            "<tspan x=\"{}\" dy=\"{}\" font-weight=\"bold\">{}</tspan></text>",
            c(right + 8.0),
            c(line_h),
            escape(value_text)
        );
    }
    let _ = writeln!(s, "</g>");
}

/// Geometry of the bars: one cluster per workload, one slot per scheduler, px.
struct BarLayout {
    /// Width of one workload's cluster.
    cluster_w: f64,
    /// Width of one scheduler's slot in a cluster.
    bar_slot: f64,
    /// Width of a bar (90% of its slot, at least 1).
    bar_w: f64,
    /// Whether value labels are rotated (slots narrower than 34 px).
    rotate_labels: bool,
    /// Font size of the value labels.
    label_size: f64,
}

impl BarLayout {
    fn new(fig: &Figure, plot: &Plot) -> BarLayout {
        let n_w = fig.workloads.len().max(1) as f64;
        let n_s = fig.schedulers.len().max(1) as f64;
        let cluster_w = plot.width() / n_w;
        let bar_slot = cluster_w * 0.8 / n_s;
        BarLayout {
            cluster_w,
            bar_slot,
            bar_w: (bar_slot * 0.9).max(1.0),
            rotate_labels: bar_slot < 34.0,
            label_size: if bar_slot < 16.0 { 9.0 } else { 11.0 },
        }
    }
}

/// Bars, error bars, value labels and X markers, cluster by cluster, each cluster with its workload label.
fn bars(s: &mut String, fig: &Figure, palette: &Palette, plot: &Plot) {
    let layout = BarLayout::new(fig, plot);
    let _ = writeln!(s, "<g class=\"bars\">");
    for (i, (workload, row)) in fig.workloads.iter().zip(&fig.cells).enumerate() {
        let x0 = plot.left + layout.cluster_w * i as f64 + layout.cluster_w * 0.1;
        for (j, (sched, cell)) in fig.schedulers.iter().zip(row).enumerate() {
            let x = x0 + layout.bar_slot * j as f64 + (layout.bar_slot - layout.bar_w) / 2.0;
            match cell {
                Cell::Value(sum) if sum.avg.is_finite() => {
                    value_bar(s, fig.unit(), workload, sched, sum, x, &layout, palette, plot);
                }
                Cell::TimedOut { runs, timed_out } => {
                    timeout_marker(s, workload, sched, *runs, *timed_out, x + layout.bar_w / 2.0, plot);
                }
                Cell::Value(_) | Cell::Missing => {}
            }
        }
        let _ = writeln!(
            s,
            "<text class=\"workload\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" \
             fill=\"#222\">{}</text>",
            c(plot.left + layout.cluster_w * (i as f64 + 0.5)),
            c(plot.bottom + 18.0),
            escape(workload)
        );
    }
    let _ = writeln!(s, "</g>");
}

/// One bar at `x` for the summary `sum` of (`workload`, `sched`), with its tooltip, its 99% confidence interval
/// as an error bar when there is one, and its value above.
#[allow(clippy::too_many_arguments)]
fn value_bar(
    s: &mut String,
    unit: &str,
    workload: &str,
    sched: &str,
    sum: &Summary,
    x: f64,
    layout: &BarLayout,
    palette: &Palette,
    plot: &Plot,
) {
    let bar_w = layout.bar_w;
    let cx = x + bar_w / 2.0;
    let yt = plot.y(sum.avg);
    let tip = match sum.ci99 {
        Some(ci) => format!(
            "{sched}, {workload}: {} ± {} {unit} (99% CI, n={})",
            value_label(sum.avg),
            value_label(ci),
            sum.n
        ),
        None => format!("{sched}, {workload}: {} {unit} (n={})", value_label(sum.avg), sum.n),
    };
    let _ = writeln!(
        s,
        "<rect class=\"bar\" data-workload=\"{}\" data-scheduler=\"{}\" x=\"{}\" y=\"{}\" \
         width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
        escape(workload),
        escape(sched),
        c(x),
        c(yt),
        c(bar_w),
        c(plot.bottom - yt),
        palette.colour(sched),
        escape(&tip)
    );
    let mut label_y = yt;
    if let Some(ci) = sum.ci99.filter(|ci| *ci > 0.0) {
        label_y = label_y.min(error_bar(s, sum.avg, ci, cx, bar_w, plot));
    }
    value_text(s, &value_label(sum.avg), cx, label_y, layout);
}

/// The error bar avg ± `ci` centred on `cx`, with caps; returns the y of its top.
fn error_bar(s: &mut String, avg: f64, ci: f64, cx: f64, bar_w: f64, plot: &Plot) -> f64 {
    let lo = plot.y(avg - ci);
    let hi = plot.y(avg + ci);
    let cap = (bar_w * 0.35).clamp(2.0, 8.0);
    let _ = writeln!(
        s,
        "<path class=\"errbar\" d=\"M{} {}V{}M{} {}H{}M{} {}H{}\" stroke=\"#222\" \
         stroke-width=\"1.2\" fill=\"none\"/>",
        c(cx),
        c(lo),
        c(hi),
        c(cx - cap),
        c(hi),
        c(cx + cap),
        c(cx - cap),
        c(lo),
        c(cx + cap)
    );
    hi
}

/// A bar's value label above `label_y`, centred on `cx`, rotated when the bars are narrow.
fn value_text(s: &mut String, label: &str, cx: f64, label_y: f64, layout: &BarLayout) {
    let text = escape(label);
    let label_size = layout.label_size;
    if layout.rotate_labels {
        let (tx, ty) = (cx + label_size * 0.35, label_y - 4.0);
        let _ = writeln!(
            s,
            "<text class=\"value\" x=\"{}\" y=\"{}\" font-size=\"{label_size}\" fill=\"#222\" \
             transform=\"rotate(-90 {} {})\"{HALO}>{text}</text>",
            c(tx),
            c(ty),
            c(tx),
            c(ty)
        );
    } else {
        let _ = writeln!(
            s,
            "<text class=\"value\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" \
             font-size=\"{label_size}\" fill=\"#222\"{HALO}>{text}</text>",
            c(cx),
            c(label_y - 4.0)
        );
    }
}

/// The red X at the foot of a slot whose cell timed out, with a tooltip counting the timed-out runs.
fn timeout_marker(s: &mut String, workload: &str, sched: &str, runs: usize, timed_out: usize, cx: f64, plot: &Plot) {
    let _ = writeln!(
        s,
        "<text class=\"timeout\" data-workload=\"{}\" data-scheduler=\"{}\" x=\"{}\" y=\"{}\" \
         text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\" fill=\"{X_COLOUR}\"{HALO}>X<title>{}, \
         {}: {timed_out} of {runs} runs timed out</title></text>",
        escape(workload),
        escape(sched),
        c(cx),
        c(plot.bottom - 5.0),
        escape(sched),
        escape(workload)
    );
}

/// The axis lines, the x-axis title, and "no data" in the middle when the figure has no row or no column.
fn axes(s: &mut String, fig: &Figure, plot: &Plot) {
    let _ = writeln!(
        s,
        "<path class=\"axes\" d=\"M{} {}V{}H{}\" stroke=\"#333\" fill=\"none\"/>",
        c(plot.left),
        c(plot.top),
        c(plot.bottom),
        c(plot.right)
    );
    let _ = writeln!(
        s,
        "<text class=\"x-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\" \
         fill=\"#222\">Background workload</text>",
        c(plot.left + plot.width() / 2.0),
        c(HEIGHT - 14.0)
    );
    if fig.workloads.is_empty() || fig.schedulers.is_empty() {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666\">no data</text>",
            c(plot.left + plot.width() / 2.0),
            c(plot.top + plot.height() / 2.0)
        );
    }
}

/// Wraps `text` at spaces into at most `max_lines` lines of at most `max` characters; words longer than a line
/// and text beyond the last line are cut, ending in "…".
fn wrap(text: &str, max: usize, max_lines: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in text.split(' ') {
        let needed = if current.is_empty() {
            word.chars().count()
        } else {
            current.chars().count() + 1 + word.chars().count()
        };
        if needed > max && !current.is_empty() {
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() || lines.is_empty() {
        lines.push(current);
    }
    if lines.len() > max_lines {
        let rest = lines.split_off(max_lines - 1).join(" ");
        lines.push(format!("{rest}\u{2026}"));
    }
    lines.into_iter().map(|l| truncate(&l, max)).collect()
}

/// Cuts `text` to at most `max` characters, ending in "…" when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{run, sample_results};
    use crate::report::xmlcheck::check_well_formed;
    use crate::report::{figures, ReportMeta};

    fn charts() -> (Vec<Figure>, Vec<String>) {
        let figs = figures(&sample_results(), &ReportMeta::default());
        let palette = Palette::for_figures(&figs);
        let svgs = figs.iter().map(|f| bar_chart(f, &palette)).collect();
        (figs, svgs)
    }

    #[test]
    fn a_bar_per_cell_and_an_x_per_timeout() {
        let (figs, svgs) = charts();
        for (fig, svg) in figs.iter().zip(&svgs) {
            check_well_formed(svg).unwrap_or_else(|e| panic!("{}: {e}", fig.slug));
            for (w, row) in fig.workloads.iter().zip(&fig.cells) {
                for (sch, cell) in fig.schedulers.iter().zip(row) {
                    let bar = format!("class=\"bar\" data-workload=\"{w}\" data-scheduler=\"{sch}\"");
                    let x = format!("class=\"timeout\" data-workload=\"{w}\" data-scheduler=\"{sch}\"");
                    match cell {
                        Cell::Value(_) => assert!(svg.contains(&bar) && !svg.contains(&x), "{w} {sch}"),
                        Cell::TimedOut { .. } => assert!(svg.contains(&x) && !svg.contains(&bar), "{w} {sch}"),
                        Cell::Missing => unreachable!(),
                    }
                }
            }
        }
        let startup = &svgs[0];
        assert_eq!(startup.matches("class=\"bar\"").count(), 11);
        assert_eq!(startup.matches("class=\"timeout\"").count(), 1);
        assert!(startup.contains(&format!("fill=\"{X_COLOUR}\"{HALO}>X<title>")));
        assert_eq!(startup.matches("class=\"value\"").count(), 11);
        assert_eq!(startup.matches("class=\"errbar\"").count(), 11);
    }

    #[test]
    fn labels_axes_legend_and_reference_lines() {
        let (figs, svgs) = charts();
        let svg = &svgs[0];
        assert!(svg.contains(">Start-up time of xterm on sim:seagate-hdd</text>"));
        assert!(svg.contains(">Start-up time [s]</text>"));
        assert!(svg.contains(">Background workload</text>"));
        for w in &figs[0].workloads {
            assert!(svg.contains(&format!(">{w}</text>")), "{w}");
        }
        assert_eq!(svg.matches("class=\"workload\"").count(), figs[0].workloads.len());
        assert_eq!(svg.matches("class=\"legend-item\"").count(), 3);
        assert_eq!(svg.matches("<line class=\"reference\"").count(), 3);
        assert!(svg.contains("stroke-dasharray"));
        assert!(svg.contains(">idle bfq</tspan>"), "{svg}");
        assert!(svg.contains(">0.22 s</tspan>"), "{svg}");
        // The bfq 10r-seq bar's label (0.45 and 0.4725 average to 0.46).
        assert!(svg.contains(">0.46</text>"));
        // Throughput: reference at 1r-seq.
        assert!(svgs[2].contains(">1r-seq bfq</tspan>"), "{}", svgs[2]);
        assert!(svgs[2].contains(">101 MB/s</tspan>"));
        // cfq and deadline both print 100: one shared grey line, its name wrapped onto two lines.
        assert_eq!(svgs[2].matches("<line class=\"reference\"").count(), 2);
        assert!(svgs[2].contains(">1r-seq cfq,</tspan>"), "{}", svgs[2]);
        assert!(svgs[2].contains(">deadline</tspan>"));
    }

    #[test]
    fn colours_are_consistent_and_y_range_is_s_like() {
        let (figs, svgs) = charts();
        let palette = Palette::for_figures(&figs);
        assert_eq!(palette.colour("bfq"), "#1f77b4");
        for svg in &svgs {
            assert!(svg.contains("data-scheduler=\"bfq\" x="));
            assert!(svg.contains("fill=\"#1f77b4\"><title>bfq,"));
        }
        // Largest bar top: deadline 5r5w-seq, 10.05 + 15.6 (n = 2, t = 63.657); 1.55 times that is 39.7, so
        // the ticks go 0, 10, 20, 30.
        assert!(svgs[0].contains("text-anchor=\"end\">30</text>"));
        assert!(!svgs[0].contains("text-anchor=\"end\">40</text>"));
    }

    #[test]
    fn text_is_escaped_and_many_columns_stay_well_formed() {
        let mut results = Vec::new();
        for (i, sched) in ["a<b", "c&d", "e\"f", "g'h", "bfq", "cfq", "noop", "kyber"]
            .iter()
            .enumerate()
        {
            for w in ["0r0w", "1r-seq", "10r-seq", "10r-rand", "5r5w-seq", "5r5w-rand"] {
                let mut r = run("throughput", sched, w, 0, 10.0 + i as f64);
                r.target = "sim:<odd & \"name\">".into();
                results.push(r);
            }
        }
        let figs = figures(&results, &ReportMeta::default());
        let svg = bar_chart(&figs[0], &Palette::for_figures(&figs));
        check_well_formed(&svg).unwrap();
        assert!(svg.contains("a&lt;b") && svg.contains("c&amp;d") && svg.contains("e&quot;f"));
        assert!(svg.contains("rotate(-90"));
    }

    #[test]
    fn non_finite_values_draw_no_bar() {
        let results = vec![
            run("throughput", "bfq", "1r-seq", 0, f64::NAN),
            run("throughput", "cfq", "1r-seq", 0, 50.0),
            run("throughput", "bfq", "10r-seq", 0, f64::INFINITY),
        ];
        let figs = figures(&results, &ReportMeta::default());
        let svg = bar_chart(&figs[0], &Palette::for_figures(&figs));
        check_well_formed(&svg).unwrap();
        assert_eq!(svg.matches("class=\"bar\"").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_figure_is_well_formed() {
        let fig = Figure {
            benchmark: crate::result::Benchmark::Throughput,
            target: "t".into(),
            device: "d".into(),
            app: None,
            quantity: crate::report::Quantity::AggregateThroughput,
            title: "empty".into(),
            slug: "empty".into(),
            workloads: vec![],
            schedulers: vec![],
            cells: vec![],
            reference_workload: None,
            references: vec![],
            source: None,
        };
        let svg = bar_chart(&fig, &Palette::default());
        check_well_formed(&svg).unwrap();
        assert!(svg.contains("no data"));
    }

    #[test]
    fn wrapping() {
        assert_eq!(wrap("idle bfq", 16, 2), ["idle bfq"]);
        assert_eq!(wrap("1r-seq cfq, deadline", 16, 2), ["1r-seq cfq,", "deadline"]);
        assert_eq!(wrap("a b c d e f", 3, 2), ["a b", "c …"]);
        assert_eq!(wrap("averyveryverylongword", 8, 2), ["averyve…"]);
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.9), 1.0);
        assert_eq!(nice_step(2.2), 2.0);
        assert_eq!(nice_step(40.0), 50.0);
        assert_eq!(nice_step(0.031), 0.05);
        assert_eq!(nice_step(0.025), 0.02);
        assert_eq!(tick_label(0.4, 0.2), "0.4");
    }
}
