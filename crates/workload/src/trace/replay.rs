//! A trace as a workload: its requests grouped into flows ([`plan`]), each flow a [`TraceFlow`] process that
//! replays its requests on one replay file covering the target's replay area (docs/TRACES.md, Mapping).
//!
//! - **Flows**: by process id where the trace has one (blkparse, blktrace, FIU), else by volume (MSR), or by a
//!   chosen key ([`FlowKey`]). Beyond `max_flows`, the flows with the fewest requests are merged into one flow
//!   named `other`.
//! - **Offsets**: aligned to 512-byte sectors (start down, end up), then mapped onto the area: [`Mapping::Wrap`]
//!   keeps an offset that fits and wraps one beyond the area around it (offset modulo the area);
//!   [`Mapping::Scale`] multiplies every offset by area / footprint when the trace's footprint is larger than the
//!   area (never enlarging). A request that would run past the area's end is moved back to end there; a request
//!   larger than the area is cut to it.
//! - **Timing**: open loop ([`Pacing::Open`]): each request is issued at its recorded time divided by the speed,
//!   counted from the common start, whether or not earlier ones have completed. Closed loop ([`Pacing::Closed`]):
//!   a flow's first request is issued at its recorded time; each next one when the previous one has completed
//!   plus the recorded gap between their arrivals (divided by the speed).
//! - **Sync**: a read is O_DIRECT; a write is O_DIRECT ([`IoMode::Direct`]) when the trace flags it sync, else
//!   [`IoMode::DirectAsync`].

use super::{Trace, TraceFormat, SECTOR_BYTES};
use crate::process::{Actions, Event, FileId, FlowSpec, IoMode, Op, Process, ProcessReport, RequestTiming};
use bfq_sched::{Direction, Time};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Largest accepted `--speed`.
pub const MAX_SPEED: f64 = 1e6;
/// Default number of flows before the smallest are merged into `other`.
pub const DEFAULT_MAX_FLOWS: usize = 32;
/// Largest accepted number of flows.
pub const MAX_FLOWS: usize = 4096;

/// When requests are issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// At their recorded times (divided by the speed), whatever the completions.
    #[default]
    Open,
    /// Per flow, after the previous request completed plus the recorded gap.
    Closed,
}

impl Pacing {
    /// Parses `open` or `closed`.
    pub fn parse(text: &str) -> Option<Pacing> {
        match text.trim() {
            "open" => Some(Pacing::Open),
            "closed" => Some(Pacing::Closed),
            _ => None,
        }
    }
    /// Name as parsed.
    pub fn name(self) -> &'static str {
        match self {
            Pacing::Open => "open",
            Pacing::Closed => "closed",
        }
    }
}

/// How trace offsets land in the replay area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mapping {
    /// Offset modulo the area: a trace that fits keeps its offsets exactly.
    #[default]
    Wrap,
    /// Offsets times area / footprint when the footprint exceeds the area: relative positions are kept.
    Scale,
}

impl Mapping {
    /// Parses `wrap` or `scale`.
    pub fn parse(text: &str) -> Option<Mapping> {
        match text.trim() {
            "wrap" => Some(Mapping::Wrap),
            "scale" => Some(Mapping::Scale),
            _ => None,
        }
    }
    /// Name as parsed.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::Wrap => "wrap",
            Mapping::Scale => "scale",
        }
    }
}

/// What makes two requests belong to one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowKey {
    /// The process id where every request has one, else the volume.
    #[default]
    Auto,
    /// The process id (requests without one share a flow).
    Pid,
    /// The process name (else the process id).
    Process,
    /// The traced device, or MSR's host and disk.
    Volume,
    /// The region of the given size, bytes, holding the request's offset (a hash of the offset region).
    Region(u64),
}

impl FlowKey {
    /// Parses `auto`, `pid`, `process`, `volume`, `region` (1 GiB regions) or `region:MIB` (MiB regions).
    pub fn parse(text: &str) -> Option<FlowKey> {
        match text.trim() {
            "auto" => Some(FlowKey::Auto),
            "pid" => Some(FlowKey::Pid),
            "process" => Some(FlowKey::Process),
            "volume" => Some(FlowKey::Volume),
            "region" => Some(FlowKey::Region(1 << 30)),
            other => {
                let mib: u64 = other.strip_prefix("region:")?.parse().ok()?;
                (1..=1 << 30).contains(&mib).then_some(FlowKey::Region(mib << 20))
            }
        }
    }

    /// Name as parsed (`region:MIB` for regions).
    pub fn name(self) -> String {
        match self {
            FlowKey::Auto => "auto".into(),
            FlowKey::Pid => "pid".into(),
            FlowKey::Process => "process".into(),
            FlowKey::Volume => "volume".into(),
            FlowKey::Region(b) => format!("region:{}", b >> 20),
        }
    }
}

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    /// Open or closed loop.
    pub pacing: Pacing,
    /// Time scale: recorded times and gaps are divided by it (2 = twice as fast).
    pub speed: f64,
    /// Offset mapping.
    pub mapping: Mapping,
    /// Flow grouping.
    pub flow_key: FlowKey,
    /// Flows kept apart; the rest are merged into `other`.
    pub max_flows: usize,
}

impl Default for ReplayOptions {
    /// Open loop at speed 1, wrap, flows by pid (else volume), at most [`DEFAULT_MAX_FLOWS`] flows.
    fn default() -> Self {
        ReplayOptions {
            pacing: Pacing::Open,
            speed: 1.0,
            mapping: Mapping::Wrap,
            flow_key: FlowKey::Auto,
            max_flows: DEFAULT_MAX_FLOWS,
        }
    }
}

/// A replay option out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReplayError(pub String);

/// One request as replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayRequest {
    /// Index of the request in [`Trace::requests`].
    pub trace_index: u32,
    /// Scheduled issue time, ns from the replay's start (recorded time / speed).
    pub at: Time,
    /// Read or write.
    pub dir: Direction,
    /// Sync (reads always).
    pub sync: bool,
    /// Byte offset in the replay area (a multiple of 512).
    pub offset: u64,
    /// Length, bytes (a multiple of 512, at least 512).
    pub len: u64,
    /// The trace's own response time, ns, if it has one.
    pub response_ns: Option<Time>,
}

/// One flow of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayFlowPlan {
    /// Name for reports: `COMM-PID`, `pid-PID`, `vol-NAME`, `region-N`, or `other`.
    pub name: String,
    /// Its requests, by schedule.
    pub requests: Vec<ReplayRequest>,
}

/// A trace ready to replay: its flows and how its offsets were mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPlan {
    /// Flows, by first request.
    pub flows: Vec<ReplayFlowPlan>,
    /// The replay area, bytes.
    pub area_bytes: u64,
    /// The trace's footprint, bytes (end of its highest request).
    pub extent_bytes: u64,
    /// The options used.
    pub options: ReplayOptions,
    /// The flow key actually used (`Auto` resolved).
    pub flow_key: FlowKey,
    /// Requests whose offset the mapping changed (wrapped, scaled or moved back to fit).
    pub remapped: u64,
    /// Flows merged into `other`.
    pub merged_flows: usize,
    /// The trace's format.
    pub format: TraceFormat,
}

impl ReplayPlan {
    /// Requests in all flows.
    pub fn requests(&self) -> usize {
        self.flows.iter().map(|f| f.requests.len()).sum()
    }

    /// The last scheduled issue time, ns.
    pub fn span(&self) -> Time {
        self.flows
            .iter()
            .filter_map(|f| f.requests.last().map(|r| r.at))
            .max()
            .unwrap_or(0)
    }

    /// One line saying how offsets were mapped, for reports.
    pub fn mapping_text(&self) -> String {
        let how = match self.options.mapping {
            Mapping::Wrap => "wrap (offset modulo the area)",
            Mapping::Scale => "scale (offsets times area/footprint when the footprint is larger)",
        };
        format!(
            "{how} onto {} bytes (trace footprint {} bytes); {} of {} requests remapped",
            self.area_bytes,
            self.extent_bytes,
            self.remapped,
            self.requests()
        )
    }
}

fn label_part(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/') {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect()
}

/// Groups `trace` into flows and maps its offsets onto an area of `area_bytes` (at least 4096).
pub fn plan(trace: &Trace, opts: &ReplayOptions, area_bytes: u64) -> Result<ReplayPlan, ReplayError> {
    if !(opts.speed.is_finite() && opts.speed > 0.0 && opts.speed <= MAX_SPEED) {
        return Err(ReplayError(format!(
            "speed {} is out of range: give a number in (0, {MAX_SPEED}]",
            opts.speed
        )));
    }
    if !(1..=MAX_FLOWS).contains(&opts.max_flows) {
        return Err(ReplayError(format!(
            "max flows {} is out of range: give 1..={MAX_FLOWS}",
            opts.max_flows
        )));
    }
    let area = area_bytes / 4096 * 4096;
    if area == 0 {
        return Err(ReplayError(format!(
            "replay area of {area_bytes} bytes is too small: at least 4096 bytes"
        )));
    }
    let key = match opts.flow_key {
        FlowKey::Auto if trace.requests.iter().all(|r| r.pid.is_some()) => FlowKey::Pid,
        FlowKey::Auto => FlowKey::Volume,
        k => k,
    };
    let extent = trace.extent_bytes();
    // Group by key, in order of first request.
    let mut groups: BTreeMap<(u8, u64, String), usize> = BTreeMap::new();
    let mut flows: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, r) in trace.requests.iter().enumerate() {
        let name_of = |id: Option<u32>| id.and_then(|n| trace.names.get(n as usize)).map(String::as_str);
        let k: (u8, u64, String) = match key {
            FlowKey::Pid | FlowKey::Auto => (0, r.pid.map_or(u64::MAX, u64::from), String::new()),
            FlowKey::Process => match name_of(r.name) {
                Some(n) => (1, 0, n.to_string()),
                None => (0, r.pid.map_or(u64::MAX, u64::from), String::new()),
            },
            FlowKey::Volume => (2, u64::from(r.volume), String::new()),
            FlowKey::Region(size) => (3, r.offset / size.max(1), String::new()),
        };
        let idx = *groups.entry(k.clone()).or_insert_with(|| {
            let name = match (key, &k) {
                (FlowKey::Process, (1, _, n)) => label_part(n),
                (FlowKey::Volume, (_, v, _)) => {
                    format!(
                        "vol-{}",
                        label_part(trace.volumes.get(*v as usize).map_or("?", String::as_str))
                    )
                }
                (FlowKey::Region(_), (_, n, _)) => format!("region-{n}"),
                (_, (_, u64::MAX, _)) => "no-pid".to_string(),
                (_, (_, pid, _)) => match name_of(r.name) {
                    Some(n) => format!("{}-{pid}", label_part(n)),
                    None => format!("pid-{pid}"),
                },
            };
            flows.push((name, Vec::new()));
            flows.len() - 1
        });
        flows[idx].1.push(i);
    }
    // Merge the smallest flows beyond the limit into `other`, keeping first-request order.
    let mut merged_flows = 0;
    if flows.len() > opts.max_flows {
        let keep = opts.max_flows - 1;
        let mut by_size: Vec<usize> = (0..flows.len()).collect();
        by_size.sort_by_key(|&i| (std::cmp::Reverse(flows[i].1.len()), i));
        let kept: std::collections::BTreeSet<usize> = by_size[..keep].iter().copied().collect();
        let mut other = Vec::new();
        let mut out = Vec::new();
        for (i, f) in flows.into_iter().enumerate() {
            if kept.contains(&i) {
                out.push(f);
            } else {
                merged_flows += 1;
                other.extend(f.1);
            }
        }
        other.sort_unstable();
        out.push(("other".to_string(), other));
        out.sort_by_key(|f| f.1[0]);
        flows = out;
    }
    // Names are unique: two processes of one name and pid cannot be, but labels are cut and cleaned.
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut remapped = 0;
    let mut out = Vec::with_capacity(flows.len());
    for (name, idxs) in flows {
        let n = seen.entry(name.clone()).or_insert(0);
        *n += 1;
        let name = if *n > 1 { format!("{name}~{n}") } else { name };
        let requests = idxs
            .into_iter()
            .map(|i| {
                let r = &trace.requests[i];
                let (offset, len) = map_offset(r.offset, r.len, area, extent, opts.mapping);
                if offset != r.offset || len != r.len {
                    remapped += 1;
                }
                ReplayRequest {
                    trace_index: i as u32,
                    at: (r.time_ns as f64 / opts.speed).round() as Time,
                    dir: r.dir,
                    sync: r.sync,
                    offset,
                    len,
                    response_ns: r.response_ns,
                }
            })
            .collect();
        out.push(ReplayFlowPlan { name, requests });
    }
    Ok(ReplayPlan {
        flows: out,
        area_bytes: area,
        extent_bytes: extent,
        options: *opts,
        flow_key: key,
        remapped,
        merged_flows,
        format: trace.format,
    })
}

/// Maps one request onto an area of `area` bytes (a positive multiple of 4096): sector-aligned, inside the area.
pub fn map_offset(offset: u64, len: u64, area: u64, extent: u64, mapping: Mapping) -> (u64, u64) {
    let start = offset / SECTOR_BYTES * SECTOR_BYTES;
    let end = offset.saturating_add(len.max(1)).div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
    let len = (end - start).min(area);
    let at = match mapping {
        Mapping::Wrap => start % area,
        Mapping::Scale if extent > area => {
            ((u128::from(start) * u128::from(area) / u128::from(extent)) as u64) / SECTOR_BYTES * SECTOR_BYTES
        }
        Mapping::Scale => start,
    };
    (at.min(area - len), len)
}

/// One flow of a trace replay as a process: issues its requests on the replay file, open or closed loop, and
/// records when each was issued and completed ([`ProcessReport::requests`]).
#[derive(Debug, Clone)]
pub struct TraceFlow {
    flow: FlowSpec,
    requests: Arc<[ReplayRequest]>,
    file: FileId,
    start_at: Time,
    pacing: Pacing,
    started: bool,
    next: usize,
    outstanding: u64,
    /// Closed loop: when the next request may go (`None` while one is outstanding).
    ready_at: Option<Time>,
    done: bool,
    report: ProcessReport,
}

impl TraceFlow {
    /// Replays `flow` of `plan` on file `file` (the replay area), starting at `start_at` (recorded time 0).
    pub fn new(plan: &ReplayPlan, flow: &ReplayFlowPlan, file: FileId, start_at: Time) -> TraceFlow {
        TraceFlow {
            flow: FlowSpec::named(flow.name.clone()),
            requests: flow.requests.clone().into(),
            file,
            start_at,
            pacing: plan.options.pacing,
            started: false,
            next: 0,
            outstanding: 0,
            ready_at: None,
            done: false,
            report: ProcessReport {
                requests: vec![RequestTiming::default(); flow.requests.len()],
                ..ProcessReport::default()
            },
        }
    }

    /// The scheduled time of request `i`, ns.
    fn scheduled(&self, i: usize) -> Time {
        self.start_at.saturating_add(self.requests[i].at)
    }

    fn issue(&mut self, now: Time, out: &mut Actions) {
        let i = self.next;
        let r = self.requests[i];
        self.next += 1;
        self.outstanding += 1;
        self.report.requests[i].issued = now;
        let op = match r.dir {
            Direction::Read => Op::Read {
                file: self.file,
                offset: r.offset,
                len: r.len,
                mode: IoMode::Direct,
                meta: false,
            },
            Direction::Write => Op::Write {
                file: self.file,
                offset: r.offset,
                len: r.len,
                mode: if r.sync { IoMode::Direct } else { IoMode::DirectAsync },
            },
        };
        out.issue(i as u64 + 1, op);
    }

    /// Issues what is due at `now` and says when to wake or whether to exit.
    fn pump(&mut self, now: Time, out: &mut Actions) {
        match self.pacing {
            Pacing::Open => {
                while self.next < self.requests.len() && self.scheduled(self.next) <= now {
                    self.issue(now, out);
                }
                if self.next < self.requests.len() {
                    out.sleep_until = Some(self.scheduled(self.next));
                }
            }
            Pacing::Closed => {
                if self.next < self.requests.len() && self.outstanding == 0 {
                    let at = *self.ready_at.get_or_insert(self.scheduled(self.next));
                    if at <= now {
                        self.ready_at = None;
                        self.issue(now, out);
                    } else {
                        out.sleep_until = Some(at);
                    }
                }
            }
        }
        if self.next >= self.requests.len() && self.outstanding == 0 {
            self.done = true;
            out.exit = true;
        }
    }
}

impl Process for TraceFlow {
    fn flow(&self) -> FlowSpec {
        self.flow.clone()
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        if self.done {
            return;
        }
        match event {
            Event::Start | Event::Woke if !self.started => {
                if now < self.start_at {
                    out.sleep_until = Some(self.start_at);
                    return;
                }
                self.started = true;
            }
            Event::Completed { tag, result } => {
                self.outstanding = self.outstanding.saturating_sub(1);
                let i = (tag as usize).wrapping_sub(1);
                let ok = result.is_ok();
                match result {
                    Ok(b) => {
                        self.report.ops += 1;
                        match self.requests.get(i).map(|r| r.dir) {
                            Some(Direction::Write) => self.report.written_bytes += b,
                            _ => self.report.read_bytes += b,
                        }
                    }
                    Err(_) => self.report.errors += 1,
                }
                if let Some(t) = self.report.requests.get_mut(i) {
                    t.completed = Some(now);
                    t.ok = ok;
                }
                if self.pacing == Pacing::Closed && self.next < self.requests.len() {
                    // The next request follows after the recorded gap between the two arrivals.
                    let gap = self.requests[self.next]
                        .at
                        .saturating_sub(self.requests[self.next - 1].at);
                    self.ready_at = Some(now.saturating_add(gap));
                }
                if !self.started {
                    return;
                }
            }
            _ => {}
        }
        self.pump(now, out);
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

/// The processes of a replay: one [`TraceFlow`] per flow of `plan`, all on file `file`, starting at `start_at`.
pub fn processes(plan: &ReplayPlan, file: FileId, start_at: Time) -> Vec<TraceFlow> {
    plan.flows
        .iter()
        .map(|f| TraceFlow::new(plan, f, file, start_at))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::Exec;
    use crate::trace::{fiu, ParseOptions};

    fn fiu_trace(lines: &[(u64, u32, &str, u64, u64, bool)]) -> Trace {
        let text: String = lines
            .iter()
            .map(|&(t, p, n, l, s, w)| fiu::line(t, p, n, l, s, w))
            .collect();
        fiu::parse(&text, &ParseOptions::default()).expect("parses")
    }

    #[test]
    fn offsets_wrap_or_scale_into_the_area_and_stay_aligned() {
        let mib = 1 << 20;
        // Fits: unchanged (alignment only).
        assert_eq!(map_offset(4096, 4096, mib, 2 * mib, Mapping::Wrap), (4096, 4096));
        assert_eq!(map_offset(100, 10, mib, mib, Mapping::Wrap), (0, 512));
        // Beyond the area: modulo.
        assert_eq!(map_offset(mib + 8192, 4096, mib, 2 * mib, Mapping::Wrap), (8192, 4096));
        // Scale halves a footprint twice the area.
        assert_eq!(
            map_offset(mib + 8192, 4096, mib, 2 * mib, Mapping::Scale),
            (mib / 2 + 4096, 4096)
        );
        // Scale never enlarges.
        assert_eq!(map_offset(8192, 4096, 4 * mib, mib, Mapping::Scale), (8192, 4096));
        // Straddling the end: moved back; larger than the area: cut.
        assert_eq!(map_offset(mib - 512, 4096, mib, mib, Mapping::Wrap), (mib - 4096, 4096));
        assert_eq!(map_offset(0, 3 * mib, mib, 3 * mib, Mapping::Wrap), (0, mib));
    }

    #[test]
    fn option_names_parse_back_and_nothing_else_parses() {
        // Each option's name is what its parser takes (the CLI and the Python API pass these words), and a word
        // that names nothing is refused.
        for p in [Pacing::Open, Pacing::Closed] {
            assert_eq!(Pacing::parse(p.name()), Some(p));
        }
        for m in [Mapping::Wrap, Mapping::Scale] {
            assert_eq!(Mapping::parse(m.name()), Some(m));
        }
        let keys = [
            FlowKey::Auto,
            FlowKey::Pid,
            FlowKey::Process,
            FlowKey::Volume,
            FlowKey::Region(1 << 30),
            FlowKey::Region(64 << 20),
        ];
        for k in keys {
            assert_eq!(FlowKey::parse(&k.name()), Some(k), "{}", k.name());
        }
        assert_eq!(FlowKey::Region(64 << 20).name(), "region:64");
        assert_eq!(FlowKey::parse("region"), Some(FlowKey::Region(1 << 30)));
        for bad in ["", "xyzzy", "region:0", "region:x"] {
            assert_eq!(Pacing::parse(bad), None);
            assert_eq!(Mapping::parse(bad), None);
            assert_eq!(FlowKey::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_plan_counts_its_requests_and_its_last_issue_time() {
        // Three requests of two processes at 0, 10 and 30 µs (fiu times in ns), played open at speed 1: 3
        // requests, the last issued at 30 µs; the mapping line says how offsets landed.
        let t = fiu_trace(&[
            (0, 1, "a", 0, 8, false),
            (10_000, 2, "b", 8, 8, false),
            (30_000, 1, "a", 16, 8, false),
        ]);
        let p = plan(&t, &ReplayOptions::default(), 1 << 20).expect("plans");
        assert_eq!(p.requests(), 3);
        assert_eq!(p.span(), 30_000);
        let text = p.mapping_text();
        assert!(
            text.starts_with("wrap (offset modulo the area) onto 1048576 bytes"),
            "{text}"
        );
        assert!(text.ends_with("of 3 requests remapped"), "{text}");
    }

    #[test]
    fn flows_follow_pids_and_the_smallest_merge_into_other() {
        let t = fiu_trace(&[
            (0, 1, "a", 0, 8, false),
            (10, 2, "b", 8, 8, false),
            (20, 1, "a", 16, 8, true),
            (30, 3, "c", 24, 8, false),
            (40, 2, "b", 32, 8, false),
            (50, 1, "a", 40, 8, false),
        ]);
        let p = plan(&t, &ReplayOptions::default(), 1 << 20).expect("plans");
        let names: Vec<&str> = p.flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a-1", "b-2", "c-3"]);
        assert_eq!(p.flows[0].requests.len(), 3);
        assert_eq!(p.flow_key, FlowKey::Pid);
        let two = ReplayOptions {
            max_flows: 2,
            ..ReplayOptions::default()
        };
        let p = plan(&t, &two, 1 << 20).expect("plans");
        let names: Vec<&str> = p.flows.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["a-1", "other"]);
        assert_eq!((p.flows[1].requests.len(), p.merged_flows), (3, 2));
        let regions = ReplayOptions {
            flow_key: FlowKey::Region(8192),
            ..ReplayOptions::default()
        };
        let p = plan(&t, &regions, 1 << 20).expect("plans");
        assert_eq!(p.flows.len(), 3, "24 KiB of requests in 8 KiB regions");
        for bad in [
            ReplayOptions {
                speed: 0.0,
                ..ReplayOptions::default()
            },
            ReplayOptions {
                speed: f64::NAN,
                ..ReplayOptions::default()
            },
            ReplayOptions {
                max_flows: 0,
                ..ReplayOptions::default()
            },
        ] {
            assert!(plan(&t, &bad, 1 << 20).is_err());
        }
        assert!(plan(&t, &ReplayOptions::default(), 100).is_err());
    }

    #[test]
    fn open_loop_issues_at_the_recorded_times_divided_by_the_speed() {
        let t = fiu_trace(&[
            (1_000_000, 1, "a", 0, 8, false),
            (1_000_000, 1, "a", 8, 8, true),
            (3_000_000, 1, "a", 16, 8, false),
            (9_000_000, 1, "a", 24, 8, false),
        ]);
        for speed in [1.0, 2.0] {
            let opts = ReplayOptions {
                speed,
                ..ReplayOptions::default()
            };
            let p = plan(&t, &opts, 1 << 20).expect("plans");
            let mut f = TraceFlow::new(&p, &p.flows[0], 0, 500);
            // Each request takes 5 ms: longer than the gaps, so the loop is open (several outstanding).
            let mut ex = Exec::new(5_000_000, 0);
            ex.run(&mut f, 0, u64::MAX).expect("exits");
            let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
            let want: Vec<Time> = [0, 0, 2_000_000, 8_000_000]
                .iter()
                .map(|&t| 500 + (t as f64 / speed) as Time)
                .collect();
            assert_eq!(times, want, "speed {speed}");
            let rep = f.report();
            assert_eq!(rep.requests.iter().map(|r| r.issued).collect::<Vec<_>>(), want);
            assert!(rep.requests.iter().all(|r| r.ok && r.completed.is_some()));
            assert_eq!((rep.read_bytes, rep.written_bytes), (3 * 4096, 4096));
            assert!(ex.max_outstanding >= 2);
        }
    }

    #[test]
    fn closed_loop_waits_for_each_completion_then_the_recorded_gap() {
        let t = fiu_trace(&[
            (0, 1, "a", 0, 8, false),
            (1_000_000, 1, "a", 8, 8, false),
            (1_500_000, 1, "a", 16, 8, false),
        ]);
        let opts = ReplayOptions {
            pacing: Pacing::Closed,
            ..ReplayOptions::default()
        };
        let p = plan(&t, &opts, 1 << 20).expect("plans");
        let mut f = TraceFlow::new(&p, &p.flows[0], 0, 0);
        let mut ex = Exec::new(2_000_000, 0); // 2 ms each
        let end = ex.run(&mut f, 0, u64::MAX).expect("exits");
        let times: Vec<Time> = ex.issued.iter().map(|i| i.time).collect();
        // 0; done at 2 ms, + 1 ms gap; done at 5 ms, + 0.5 ms gap.
        assert_eq!(times, [0, 3_000_000, 5_500_000]);
        assert_eq!(ex.max_outstanding, 1);
        assert_eq!(end, 7_500_000);
    }

    #[test]
    fn async_writes_are_issued_as_such() {
        let t = fiu_trace(&[(0, 1, "a", 0, 8, true)]);
        let p = plan(&t, &ReplayOptions::default(), 1 << 20).expect("plans");
        let mut f = TraceFlow::new(&p, &p.flows[0], 3, 0);
        let mut ex = Exec::new(1_000, 0);
        ex.run(&mut f, 0, u64::MAX).expect("exits");
        assert!(matches!(
            ex.issued[0].op,
            Op::Write {
                file: 3,
                mode: IoMode::DirectAsync,
                ..
            }
        ));
    }
}
