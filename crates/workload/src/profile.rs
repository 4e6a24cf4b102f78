//! Application start-up profiles: the files an application reads while starting and the ordered list of its reads,
//! replayed by [`crate::startup::Startup`]; a text format to store them; and synthetic profiles whose statistics match
//! the start-up traces of the S suite (docs/BENCHMARKS.md, start-up; derivations in docs/PROFILES.md, Synthetic
//! profiles).
//!
//! # Text format (version 2)
//!
//! UTF-8, one item per line; blank lines and lines starting with `#` are ignored; fields are separated by
//! whitespace; numbers are decimal (sizes and offsets in bytes, think times in microseconds, fractions as decimal
//! numbers in `0..=1`). Version 2 adds the closing `end N` line (N = the number of requests): a profile file cut at a
//! line boundary would otherwise read as a shorter, valid start-up. [`Profile::parse_file`], used for every profile
//! read from a file, requires it and at least one request; [`Profile::parse`] checks it when present.
//!
//! ```text
//! # comments anywhere
//! profile xterm                               # name (optional, at most once, before any request)
//! mode direct                                 # direct | buffered (optional, default direct)
//! file libX11.so 1310720 scattered 1048576 0.05 0.1   # placement: contiguous | at F | scattered EXTENT FROM TO
//! file xterm 524288 contiguous
//! R 0 0 16384 120                             # sync read: file index, offset, length, think time before it
//! RM 0 16384 4096 0                           # sync metadata read (REQ_META), same fields
//! RA 0 16384 131072 0                         # readahead: issued without waiting for it
//! end 3                                       # the number of requests; nothing may follow
//! ```
//!
//! Files are numbered from 0 in the order declared and must be declared before a request uses them. Every request
//! must lie inside its file and have a length of at least one byte. Errors name the line (counted from 1).

use crate::process::{FileSpec, IoMode, Placement};
use crate::rng::{name_hash, stream_numbered};
use rand::Rng;
use std::fmt::Write as _;

/// Page size of the generator's size unit, bytes (Linux page cache pages).
pub const PAGE_BYTES: u64 = 4096;

/// How a request is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReqKind {
    /// `R`: a synchronous read; the application waits for it before going on.
    Sync,
    /// `RA`: readahead, issued asynchronously (S's replayer submits these through libaio and does not wait).
    Readahead,
}

impl ReqKind {
    /// The token used in the text format.
    pub fn token(self) -> &'static str {
        match self {
            ReqKind::Sync => "R",
            ReqKind::Readahead => "RA",
        }
    }
}

/// One read of a start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileRequest {
    /// Index of the file in [`Profile::files`].
    pub file: u32,
    /// Byte offset in the file.
    pub offset: u64,
    /// Length, bytes (at least 1).
    pub len: u64,
    /// Sync or readahead.
    pub kind: ReqKind,
    /// Think time before issuing it, µs (CPU work since the previous request was issued or completed).
    pub think_us: u64,
    /// A file-system metadata read (`RM` in the text format; recorded from the kernel's `M` flag, REQ_META): its
    /// block requests carry [`bfq_sched::Request::meta`]. Synthetic profiles have none (S's traces do not say).
    pub meta: bool,
}

/// An application start-up profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Application name (flow name of the replay).
    pub name: String,
    /// How the replay reads: direct by default, since a profile lists device-level requests (readahead included).
    pub mode: IoMode,
    /// The files read, with their sizes and placements; all prewritten.
    pub files: Vec<FileSpec>,
    /// The reads, in order.
    pub requests: Vec<ProfileRequest>,
}

/// A profile error: what is wrong, and on which line (1-based; 0 when not from text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ProfileError {
    /// Line number, counted from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn err(line: usize, message: impl Into<String>) -> ProfileError {
    ProfileError {
        line,
        message: message.into(),
    }
}

/// Statistics of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProfileStats {
    /// Number of requests.
    pub requests: u64,
    /// Bytes requested.
    pub bytes: u64,
    /// Requests that do not continue from the previous request (other file, or offset ≠ previous offset + length);
    /// the first request counts as random.
    pub random: u64,
    /// Readahead requests.
    pub readahead: u64,
    /// Number of files.
    pub files: u64,
    /// Total size of the files, bytes.
    pub file_bytes: u64,
    /// Sum of think times, µs.
    pub think_us: u64,
}

impl ProfileStats {
    /// Random requests as a fraction of all requests (0 for an empty profile).
    pub fn random_fraction(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.random as f64 / self.requests as f64
        }
    }
}

fn parse_num<T: std::str::FromStr>(tok: Option<&str>, line: usize, what: &str) -> Result<T, ProfileError> {
    let tok = tok.ok_or_else(|| err(line, format!("missing {what}")))?;
    tok.parse()
        .map_err(|_| err(line, format!("{what}: `{tok}` is not a valid number")))
}

fn parse_fraction(tok: Option<&str>, line: usize, what: &str) -> Result<f64, ProfileError> {
    let v: f64 = parse_num(tok, line, what)?;
    if !(0.0..=1.0).contains(&v) {
        return Err(err(line, format!("{what} must be between 0 and 1, got {v}")));
    }
    Ok(v)
}

impl Profile {
    /// Parses the text format (see the module documentation).
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let mut p = Profile {
            name: String::new(),
            mode: IoMode::Direct,
            files: Vec::new(),
            requests: Vec::new(),
        };
        let mut named = false;
        let mut ended: Option<usize> = None;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("");
            let mut toks = content.split_whitespace();
            let Some(head) = toks.next() else { continue };
            if let Some(end_line) = ended {
                return Err(err(line, format!("`{head}` after the `end` line ({end_line})")));
            }
            match head {
                "end" => {
                    let n: usize = parse_num(toks.next(), line, "request count")?;
                    if n != p.requests.len() {
                        return Err(err(
                            line,
                            format!(
                                "`end {n}` but {} requests were read: the profile is damaged or cut short",
                                p.requests.len()
                            ),
                        ));
                    }
                    ended = Some(line);
                }
                "profile" => {
                    if named {
                        return Err(err(line, "second `profile` line"));
                    }
                    if !p.requests.is_empty() {
                        return Err(err(line, "`profile` must come before the requests"));
                    }
                    p.name = toks
                        .next()
                        .ok_or_else(|| err(line, "missing profile name"))?
                        .to_string();
                    named = true;
                }
                "mode" => {
                    p.mode = match toks.next() {
                        Some("direct") => IoMode::Direct,
                        Some("buffered") => IoMode::Buffered,
                        Some(other) => return Err(err(line, format!("mode `{other}`: expected direct or buffered"))),
                        None => return Err(err(line, "missing mode (direct or buffered)")),
                    };
                }
                "file" => {
                    let name = toks.next().ok_or_else(|| err(line, "missing file name"))?.to_string();
                    let size: u64 = parse_num(toks.next(), line, "file size")?;
                    if size == 0 {
                        return Err(err(line, "file size must be at least 1 byte"));
                    }
                    let placement = match toks.next() {
                        Some("contiguous") => Placement::Contiguous,
                        Some("at") => Placement::At(parse_fraction(toks.next(), line, "position")?),
                        Some("scattered") => {
                            let extent: u64 = parse_num(toks.next(), line, "extent size")?;
                            if extent == 0 {
                                return Err(err(line, "extent size must be at least 1 byte"));
                            }
                            let from = parse_fraction(toks.next(), line, "region start")?;
                            let to = parse_fraction(toks.next(), line, "region end")?;
                            if from > to {
                                return Err(err(line, format!("region start {from} is after its end {to}")));
                            }
                            Placement::Scattered { extent, from, to }
                        }
                        Some(other) => {
                            return Err(err(
                                line,
                                format!("placement `{other}`: expected contiguous, at or scattered"),
                            ))
                        }
                        None => return Err(err(line, "missing placement (contiguous, at F or scattered E FROM TO)")),
                    };
                    p.files.push(FileSpec {
                        name,
                        size,
                        placement,
                        prewritten: true,
                    });
                }
                "R" | "RA" | "RM" => {
                    let kind = if head == "RA" {
                        ReqKind::Readahead
                    } else {
                        ReqKind::Sync
                    };
                    let meta = head == "RM";
                    let file: u32 = parse_num(toks.next(), line, "file index")?;
                    let offset: u64 = parse_num(toks.next(), line, "offset")?;
                    let len: u64 = parse_num(toks.next(), line, "length")?;
                    let think_us: u64 = parse_num(toks.next(), line, "think time")?;
                    let rq = ProfileRequest {
                        file,
                        offset,
                        len,
                        kind,
                        think_us,
                        meta,
                    };
                    p.check_request(&rq).map_err(|m| err(line, m))?;
                    p.requests.push(rq);
                }
                other => {
                    return Err(err(
                        line,
                        format!("unknown item `{other}`: expected profile, mode, file, R, RA, RM or end"),
                    ))
                }
            }
            if let Some(extra) = toks.next() {
                return Err(err(line, format!("unexpected `{extra}` at the end of the line")));
            }
        }
        Ok(p)
    }

    /// Parses a profile read from a file: as [`Profile::parse`], and it must hold at least one request and end with
    /// the `end N` line, so that an empty file, a file of comments, a profile without requests, or one cut at a line
    /// boundary is refused instead of replayed as a start-up of 0 s or a shortened one. The error's line is the
    /// file's last line + 1 for a missing `end`.
    pub fn parse_file(text: &str) -> Result<Profile, ProfileError> {
        let p = Profile::parse(text)?;
        let last = text.lines().count();
        let has_end = text
            .lines()
            .any(|l| l.split('#').next().unwrap_or("").split_whitespace().next() == Some("end"));
        if p.requests.is_empty() {
            return Err(err(
                last.max(1),
                "the profile has no requests (R or RA lines): an empty start-up measures nothing",
            ));
        }
        if !has_end {
            return Err(err(
                last + 1,
                format!(
                    "no `end` line after {} requests: the profile may be cut short; re-record it, or append \
                     `end {}` if it is complete",
                    p.requests.len(),
                    p.requests.len()
                ),
            ));
        }
        Ok(p)
    }

    fn check_request(&self, rq: &ProfileRequest) -> Result<(), String> {
        let Some(f) = self.files.get(rq.file as usize) else {
            return Err(format!(
                "file index {} is not declared ({} files so far)",
                rq.file,
                self.files.len()
            ));
        };
        if rq.len == 0 {
            return Err("length must be at least 1 byte".into());
        }
        let past_end = match rq.offset.checked_add(rq.len) {
            Some(end) => end > f.size,
            None => true,
        };
        if past_end {
            return Err(format!(
                "request {}+{} goes past the end of file {} ({} bytes)",
                rq.offset, rq.len, f.name, f.size
            ));
        }
        Ok(())
    }

    /// Checks every request against the files; the error's line is the request's position + 1.
    pub fn validate(&self) -> Result<(), ProfileError> {
        for (i, rq) in self.requests.iter().enumerate() {
            self.check_request(rq)
                .map_err(|m| err(i + 1, format!("request {}: {m}", i + 1)))?;
        }
        Ok(())
    }

    /// Writes the profile in the text format; [`Profile::parse`] gives it back unchanged, provided names hold no
    /// whitespace or `#` (such characters are written as `_`).
    pub fn to_text(&self) -> String {
        fn token(name: &str) -> String {
            name.chars()
                .map(|c| if c.is_whitespace() || c == '#' { '_' } else { c })
                .collect()
        }
        let mut s = String::new();
        let _ = writeln!(s, "# bfq start-up profile, format version 2");
        if !self.name.is_empty() {
            let _ = writeln!(s, "profile {}", token(&self.name));
        }
        let mode = match self.mode {
            IoMode::Direct | IoMode::DirectAsync => "direct",
            IoMode::Buffered => "buffered",
        };
        let _ = writeln!(s, "mode {mode}");
        for f in &self.files {
            let name = token(&f.name);
            let _ = match f.placement {
                Placement::Contiguous => writeln!(s, "file {name} {} contiguous", f.size),
                Placement::At(x) => writeln!(s, "file {name} {} at {x:?}", f.size),
                Placement::Scattered { extent, from, to } => {
                    writeln!(s, "file {name} {} scattered {extent} {from:?} {to:?}", f.size)
                }
            };
        }
        for r in &self.requests {
            let token = if r.meta { "RM" } else { r.kind.token() };
            let _ = writeln!(s, "{token} {} {} {} {}", r.file, r.offset, r.len, r.think_us);
        }
        let _ = writeln!(s, "end {}", self.requests.len());
        s
    }

    /// Computes the profile's statistics.
    pub fn stats(&self) -> ProfileStats {
        let mut st = ProfileStats {
            requests: self.requests.len() as u64,
            files: self.files.len() as u64,
            file_bytes: self.files.iter().map(|f| f.size).sum(),
            ..ProfileStats::default()
        };
        let mut prev: Option<(u32, u64)> = None;
        for r in &self.requests {
            st.bytes += r.len;
            st.think_us += r.think_us;
            if r.kind == ReqKind::Readahead {
                st.readahead += 1;
            }
            if prev != Some((r.file, r.offset)) {
                st.random += 1;
            }
            prev = Some((r.file, r.offset.saturating_add(r.len)));
        }
        st
    }
}

/// What a synthetic profile must look like.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticSpec {
    /// Application name.
    pub name: String,
    /// Number of requests (met exactly).
    pub requests: u64,
    /// Bytes requested (met to within half a page, unless `requests` pages exceed it: every request is at least one
    /// page).
    pub bytes: u64,
    /// Fraction of random requests (met to within 0.5/`requests`).
    pub random_fraction: f64,
    /// Seed of the generator.
    pub seed: u64,
    /// Think times to draw from before a run's first (random) request, µs; each draw picks one entry uniformly
    /// (empty: no think time). By default the measured gaps of a recording ([`RecordedThink`]).
    pub think_random_us: Vec<u64>,
    /// Think times to draw from before a continuation (a request continuing the previous one), µs; empty: none.
    pub think_continuation_us: Vec<u64>,
    /// Fraction of multi-request runs that are readahead runs (a sync read followed by readahead).
    pub readahead_run_fraction: f64,
    /// Sequential runs per file, on average (sets the number of files).
    pub runs_per_file: f64,
    /// Device region holding the files, as fractions of capacity.
    pub region: (f64, f64),
}

/// The application CPU time between reads measured by `bfq record` on this machine, split by the request that
/// follows it: a random request (another file, or not continuing the previous read) or a continuation. Parsed from
/// the recordings in `profiles/` (docs/PROFILES.md, Think times); the synthetic profiles draw their think times
/// from these samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedThink {
    /// The recording the samples come from.
    pub source: &'static str,
    /// Think times before random requests (the first request's included: the time from the fork to it), µs.
    pub random_us: Vec<u64>,
    /// Think times before continuations, µs.
    pub continuation_us: Vec<u64>,
}

/// `bfq record -- bash -c exit` on this machine (docs/PROFILES.md, Recorded profiles).
const BASH_RECORDING: &str = include_str!("../../../profiles/bash.recorded.profile");
/// `bfq record -- xterm /bin/true` on this machine, without the X server's reads.
const XTERM_RECORDING: &str = include_str!("../../../profiles/xterm.recorded.profile");

impl RecordedThink {
    /// The think times of a recorded profile, split into random and continuation samples.
    pub fn of(source: &'static str, p: &Profile) -> RecordedThink {
        let mut out = RecordedThink {
            source,
            random_us: Vec::new(),
            continuation_us: Vec::new(),
        };
        let mut prev: Option<&ProfileRequest> = None;
        for r in &p.requests {
            let continues = prev.is_some_and(|q| q.file == r.file && q.offset + q.len == r.offset);
            if continues {
                out.continuation_us.push(r.think_us);
            } else {
                out.random_us.push(r.think_us);
            }
            prev = Some(r);
        }
        out
    }

    /// The samples for the synthetic profile `name`: bash's own recording for bash; for the X and office
    /// applications the xterm recording, the only recorded graphical start-up (an assumption for konsole,
    /// gnome-terminal and lowriter: their CPU work per read is taken as xterm's). `None` for other names.
    pub fn for_app(name: &str) -> Option<RecordedThink> {
        let (source, text) = match name {
            "bash" => ("profiles/bash.recorded.profile", BASH_RECORDING),
            "xterm" | "konsole" | "gnome-terminal" | "lowriter" | "oowriter" => {
                ("profiles/xterm.recorded.profile", XTERM_RECORDING)
            }
            _ => return None,
        };
        // The recordings are part of the source tree and tested to parse; a broken one gives no think times
        // rather than a panic.
        let p = Profile::parse_file(text).ok()?;
        Some(RecordedThink::of(source, &p))
    }
}

/// Mean of a sample, µs (0 for an empty one).
pub fn mean_us(sample: &[u64]) -> f64 {
    if sample.is_empty() {
        0.0
    } else {
        sample.iter().sum::<u64>() as f64 / sample.len() as f64
    }
}
/// Share of multi-request runs that are readahead (in S's xterm trace most sequential requests are flagged RA).
pub const SYNTHETIC_RA_RUN_FRACTION: f64 = 0.6;
/// Sequential runs per file on average (an application touches each library in a few places).
pub const SYNTHETIC_RUNS_PER_FILE: f64 = 4.0;
/// Region of the device holding the application's files, fractions of capacity (assumption: a root file system in
/// the outer 5–10 % of the disk).
pub const SYNTHETIC_REGION: (f64, f64) = (0.05, 0.10);
/// Extent size of scattered application files, bytes (assumption: small files mostly in one extent, big libraries
/// in 1 MiB pieces).
pub const SYNTHETIC_EXTENT_BYTES: u64 = 1 << 20;
/// Largest request of a synthetic profile, pages (512 KiB, a large readahead window).
const MAX_REQUEST_PAGES: u64 = 128;
/// Range of multi-page request sizes drawn log-uniformly, pages: 8 KiB to 128 KiB.
const MULTI_PAGE_RANGE: (f64, f64) = (2.0, 32.0);

impl SyntheticSpec {
    /// A spec with the default shape parameters, a seed derived from the name, and think times drawn from the
    /// recording [`RecordedThink::for_app`] gives for the name (none for other names).
    pub fn new(name: &str, requests: u64, bytes: u64, random_fraction: f64) -> Self {
        let think = RecordedThink::for_app(name);
        SyntheticSpec {
            name: name.to_string(),
            requests,
            bytes,
            random_fraction,
            seed: name_hash(name),
            think_random_us: think.as_ref().map(|t| t.random_us.clone()).unwrap_or_default(),
            think_continuation_us: think.map(|t| t.continuation_us).unwrap_or_default(),
            readahead_run_fraction: SYNTHETIC_RA_RUN_FRACTION,
            runs_per_file: SYNTHETIC_RUNS_PER_FILE,
            region: SYNTHETIC_REGION,
        }
    }
}

/// Draws a request size in pages from the mixture "one page with probability `p_one`, otherwise log-uniform in
/// 2..=32 pages".
fn draw_pages<R: Rng>(rng: &mut R, p_one: f64) -> u64 {
    if rng.gen::<f64>() < p_one {
        1
    } else {
        let (lo, hi) = MULTI_PAGE_RANGE;
        let x = (lo.ln() + rng.gen::<f64>() * (hi.ln() - lo.ln())).exp();
        (x.round() as u64).clamp(2, 32)
    }
}

/// Generates a deterministic synthetic profile: `K = round(f·N)` sequential runs, each starting with a random sync
/// read; runs are spread over many small files, placed scattered; see `docs/PROFILES.md`.
pub fn generate(spec: &SyntheticSpec) -> Profile {
    let mut rng = stream_numbered(spec.seed, name_hash("synthetic-profile"));
    let n = spec.requests;
    let mut profile = Profile {
        name: spec.name.clone(),
        mode: IoMode::Direct,
        files: Vec::new(),
        requests: Vec::new(),
    };
    if n == 0 {
        return profile;
    }
    let frac = if spec.random_fraction.is_finite() {
        spec.random_fraction.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let k = ((frac * n as f64).round() as u64).clamp(1, n);

    // Run lengths: every run has one request, the other n - k are shared in proportion to exponential weights.
    let extra = n - k;
    let weights: Vec<f64> = (0..k).map(|_| -(1.0 - rng.gen::<f64>()).ln()).collect();
    let wsum: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let mut lens: Vec<u64> = weights
        .iter()
        .map(|w| 1 + (extra as f64 * w / wsum).floor() as u64)
        .collect();
    let mut assigned: u64 = lens.iter().sum();
    let mut j = 0usize;
    let nruns = lens.len();
    while assigned < n {
        lens[j % nruns] += 1;
        assigned += 1;
        j += 1;
    }

    // Sizes, in pages, from a mixture whose mean matches the target.
    let target_pages = (spec.bytes + PAGE_BYTES / 2) / PAGE_BYTES;
    let mean = target_pages as f64 / n as f64;
    let (lo, hi) = MULTI_PAGE_RANGE;
    let multi_mean = (hi - lo) / (hi.ln() - lo.ln());
    let p_one = ((multi_mean - mean) / (multi_mean - 1.0)).clamp(0.0, 1.0);
    struct Run {
        readahead: bool,
        pages: Vec<u64>,
    }
    let mut runs: Vec<Run> = lens
        .iter()
        .map(|&len| {
            let readahead = len >= 2 && rng.gen::<f64>() < spec.readahead_run_fraction;
            let first = draw_pages(&mut rng, p_one);
            let rest = draw_pages(&mut rng, p_one); // readahead runs use one window size throughout
            let pages = (0..len)
                .map(|i| {
                    if i == 0 {
                        first
                    } else if readahead {
                        rest
                    } else {
                        draw_pages(&mut rng, p_one)
                    }
                })
                .collect();
            Run { readahead, pages }
        })
        .collect();

    // Adjust sizes one page at a time, at random requests, until the total is met.
    let cap = MAX_REQUEST_PAGES.max(mean.ceil() as u64 * 2);
    let mut total: u64 = runs.iter().flat_map(|r| r.pages.iter()).sum();
    let slots: Vec<(usize, usize)> = runs
        .iter()
        .enumerate()
        .flat_map(|(ri, r)| (0..r.pages.len()).map(move |pi| (ri, pi)))
        .collect();
    let mut guard = 0u64;
    while total != target_pages && guard < 100 * (n + target_pages) {
        guard += 1;
        let (ri, pi) = slots[rng.gen_range(0..slots.len())];
        let p = &mut runs[ri].pages[pi];
        if total < target_pages && *p < cap {
            *p += 1;
            total += 1;
        } else if total > target_pages && *p > 1 {
            *p -= 1;
            total -= 1;
        }
    }

    // Files: runs assigned at random; within a file, runs in random order separated by gaps of at least a page, so
    // no run starts where another ends and every run start is a random request.
    let nfiles = ((k as f64 / spec.runs_per_file.max(1.0)).round() as usize).max(1);
    let run_file: Vec<usize> = (0..runs.len()).map(|_| rng.gen_range(0..nfiles)).collect();
    let mut run_offset = vec![0u64; runs.len()];
    let mut file_sizes = vec![0u64; nfiles];
    for (f, size) in file_sizes.iter_mut().enumerate() {
        let mut members: Vec<usize> = (0..runs.len()).filter(|&r| run_file[r] == f).collect();
        for i in (1..members.len()).rev() {
            members.swap(i, rng.gen_range(0..=i));
        }
        let mut pos = 0u64;
        for r in members {
            pos += rng.gen_range(1..=16) * PAGE_BYTES;
            run_offset[r] = pos;
            pos += runs[r].pages.iter().sum::<u64>() * PAGE_BYTES;
        }
        *size = pos + rng.gen_range(1..=64) * PAGE_BYTES;
    }
    let (from, to) = spec.region;
    profile.files = file_sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| FileSpec {
            name: format!("{}-lib{i:03}", spec.name),
            size,
            placement: Placement::Scattered {
                extent: SYNTHETIC_EXTENT_BYTES,
                from,
                to,
            },
            prewritten: true,
        })
        .collect();

    // Think times come from a stream of their own, so that the profile's shape (runs, sizes, files) does not
    // depend on them.
    let mut think_rng = stream_numbered(spec.seed, name_hash("synthetic-think"));
    let mut draw = |sample: &[u64]| -> u64 {
        if sample.is_empty() {
            0
        } else {
            sample[think_rng.gen_range(0..sample.len())]
        }
    };
    for (ri, run) in runs.iter().enumerate() {
        let mut off = run_offset[ri];
        for (i, &pages) in run.pages.iter().enumerate() {
            let think_us = if i == 0 {
                draw(&spec.think_random_us)
            } else {
                draw(&spec.think_continuation_us)
            };
            let kind = if i > 0 && run.readahead {
                ReqKind::Readahead
            } else {
                ReqKind::Sync
            };
            let len = pages * PAGE_BYTES;
            profile.requests.push(ProfileRequest {
                file: run_file[ri] as u32,
                offset: off,
                len,
                kind,
                think_us,
                meta: false,
            });
            off += len;
        }
    }
    profile
}

/// Names accepted by [`synthetic`] (`oowriter` is an alias of `lowriter`).
pub const SYNTHETIC_NAMES: [&str; 6] = ["bash", "xterm", "konsole", "gnome-terminal", "lowriter", "oowriter"];

/// The spec of a named synthetic profile (targets from S's start-up traces; docs/PROFILES.md, Synthetic profiles).
pub fn synthetic_spec(name: &str) -> Option<SyntheticSpec> {
    Some(match name {
        // Estimate: a cold `bash -c exit` maps bash, ld.so, libc and libtinfo and reads a locale file or two.
        "bash" => SyntheticSpec::new("bash", 40, 1_500_000, 0.30),
        // S's xterm.trace: 718 requests, 6.2 MB, ~15 % random.
        "xterm" => SyntheticSpec::new("xterm", 718, 6_200_000, 0.15),
        // Estimate: geometric mean of xterm and gnome-terminal (sqrt(718·2781) ≈ 1413, sqrt(6.2·21.1) ≈ 11.4 MB).
        "konsole" => SyntheticSpec::new("konsole", 1413, 11_400_000, 0.15),
        // S's gnometerm.trace: 2781 requests, 21.1 MB, ~15 % random.
        "gnome-terminal" => SyntheticSpec::new("gnome-terminal", 2781, 21_100_000, 0.15),
        // S's lowriter.trace: 1268 requests, 48.6 MB, ~27 % random.
        "lowriter" | "oowriter" => SyntheticSpec::new("lowriter", 1268, 48_600_000, 0.27),
        _ => return None,
    })
}

/// A named synthetic profile: bash, xterm, konsole, gnome-terminal, lowriter (alias oowriter), with think times
/// drawn from this machine's recordings ([`RecordedThink::for_app`]).
pub fn synthetic(name: &str) -> Option<Profile> {
    synthetic_spec(name).map(|s| generate(&s))
}

/// Suffix of an application name asking for S's replay without think times (`xterm:zero-think`).
pub const ZERO_THINK_SUFFIX: &str = ":zero-think";

impl Profile {
    /// The same profile with every think time 0: S's replayer issues the recorded requests back to back, with no
    /// application CPU time between them.
    pub fn without_think(mut self) -> Profile {
        for r in &mut self.requests {
            r.think_us = 0;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prints each synthetic profile's think-time total and its source (the figures in docs/PROFILES.md; run with
    /// `cargo test --release -p bfq-workload -- --ignored --nocapture synthetic_think_report`).
    #[test]
    #[ignore]
    fn synthetic_think_report() {
        for name in SYNTHETIC_NAMES {
            let rec = RecordedThink::for_app(name).expect("recorded");
            let st = synthetic(name).expect("known").stats();
            println!(
                "{name}: think total {:.1} ms over {} requests ({} random); source {} (mean {:.1} us before random, \
                 {:.1} us before continuations; {} and {} samples)",
                st.think_us as f64 / 1e3,
                st.requests,
                st.random,
                rec.source,
                mean_us(&rec.random_us),
                mean_us(&rec.continuation_us),
                rec.random_us.len(),
                rec.continuation_us.len()
            );
        }
    }

    #[test]
    fn synthetic_think_times_come_from_the_recordings() {
        // Every think time of a synthetic profile is one of the recorded gaps of its source recording: run starts
        // (random requests) draw from the gaps before random requests, continuations from the gaps before
        // continuations. Both samples of both recordings are non-empty, and xterm's recorded gaps before random
        // requests are longer on average than before continuations (a new library or file means CPU work:
        // relocation, parsing; a continuation is the next page of the same read).
        for name in SYNTHETIC_NAMES {
            let rec = RecordedThink::for_app(name).expect("every synthetic profile has a recording");
            assert!(!rec.random_us.is_empty() && !rec.continuation_us.is_empty(), "{name}");
            let p = synthetic(name).expect("known");
            let mut prev: Option<&ProfileRequest> = None;
            for r in &p.requests {
                let continues = prev.is_some_and(|q| q.file == r.file && q.offset + q.len == r.offset);
                let sample = if continues {
                    &rec.continuation_us
                } else {
                    &rec.random_us
                };
                assert!(
                    sample.contains(&r.think_us),
                    "{name}: think {} not recorded",
                    r.think_us
                );
                prev = Some(r);
            }
            assert!(p.stats().think_us > 0, "{name}");
        }
        let x = RecordedThink::for_app("xterm").expect("recorded");
        assert!(mean_us(&x.random_us) > mean_us(&x.continuation_us));
        assert!(RecordedThink::for_app("emacs").is_none());
        // The zero-think replay keeps every request and drops every think time.
        let z = synthetic("xterm").expect("known").without_think();
        assert_eq!(z.requests.len(), 718);
        assert_eq!(z.stats().think_us, 0);
    }

    #[test]
    fn validate_refuses_a_built_profile_at_its_first_bad_request() {
        // A profile built in code (not parsed) is checked by `validate`: a request past its file's end, or of an
        // undeclared file, is refused, and the error names the first bad request counting from 1.
        let mut p = synthetic("xterm").expect("known");
        p.validate().expect("the synthetic profile is valid");
        let size = p.files[p.requests[2].file as usize].size;
        p.requests[2].offset = size;
        p.requests[4].file = u32::MAX;
        let e = p.validate().expect_err("a request past the file's end");
        assert_eq!(e.line, 3);
        assert!(e.message.starts_with("request 3: request "), "{}", e.message);
        p.requests[2].offset = 0;
        let e = p.validate().expect_err("an undeclared file");
        assert_eq!(e.line, 5);
        assert!(e.message.contains("is not declared"), "{}", e.message);
    }

    #[test]
    fn synthetic_profiles_match_targets() {
        for name in SYNTHETIC_NAMES {
            let spec = synthetic_spec(name).expect("known");
            let p = synthetic(name).expect("known");
            p.validate().expect("valid");
            let st = p.stats();
            assert_eq!(st.requests, spec.requests, "{name}");
            let bytes_err = (st.bytes as f64 / spec.bytes as f64 - 1.0).abs();
            assert!(bytes_err < 0.02, "{name}: {} bytes against {}", st.bytes, spec.bytes);
            let frac_err = (st.random_fraction() - spec.random_fraction).abs();
            assert!(frac_err < 0.02, "{name}: random {:.3}", st.random_fraction());
            assert!(st.files > 1, "{name}: many small files");
            assert!(p
                .files
                .iter()
                .all(|f| matches!(f.placement, Placement::Scattered { .. }) && f.prewritten));
            // Mostly 4-128 KiB requests.
            let in_range = p
                .requests
                .iter()
                .filter(|r| (4096..=128 * 1024).contains(&r.len))
                .count();
            assert!(in_range as f64 >= 0.9 * st.requests as f64, "{name}");
            // Deterministic.
            assert_eq!(p, synthetic(name).expect("known"));
        }
        assert_eq!(
            synthetic("oowriter").map(|p| p.requests),
            synthetic("lowriter").map(|p| p.requests)
        );
        assert!(synthetic("emacs").is_none());
    }

    #[test]
    fn text_round_trips() {
        for name in ["bash", "xterm", "lowriter"] {
            let p = synthetic(name).expect("known");
            let text = p.to_text();
            assert_eq!(Profile::parse(&text).expect("parses"), p);
        }
        let mut p = Profile::parse("profile t\nmode buffered\nfile a 100 at 0.25\nfile b 10 contiguous\nRA 1 0 10 7\n")
            .expect("parses");
        assert_eq!(Profile::parse(&p.to_text()), Ok(p.clone()));
        p.name.clear();
        assert_eq!(Profile::parse(&p.to_text()), Ok(p));
    }

    #[test]
    fn bad_text_names_the_line() {
        let cases = [
            ("file a 100 contiguous\nR 1 0 10 0\n", 2, "not declared"),
            ("\n# c\nfile a 100 contiguous\nR 0 95 10 0\n", 4, "past the end"),
            ("file a 100 contiguous\nR 0 0 0 0\n", 2, "at least 1 byte"),
            ("file a x contiguous\n", 1, "not a valid number"),
            ("file a 10 scattered 4096 0.5 0.2\n", 1, "after its end"),
            ("file a 10 at 1.5\n", 1, "between 0 and 1"),
            ("file a 10 somewhere\n", 1, "placement"),
            ("mode fast\n", 1, "mode"),
            ("file a 10 contiguous\nR 0 0 1\n", 2, "missing think time"),
            ("file a 10 contiguous\nR 0 0 1 0 9\n", 2, "unexpected"),
            ("W 0 0 1 0\n", 1, "unknown item"),
            ("profile a\nprofile b\n", 2, "second"),
            (
                "file a 10 contiguous\nR 0 18446744073709551615 2 0\n",
                2,
                "past the end",
            ),
        ];
        for (text, line, what) in cases {
            let e = Profile::parse(text).expect_err(text);
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.contains(what), "{text}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")));
        }
    }

    /// `RM` is a sync read flagged as file-system metadata; it writes back as `RM`.
    #[test]
    fn metadata_reads_are_rm() {
        let p = Profile::parse_file("file a 100 contiguous\nRM 0 0 10 3\nR 0 10 10 0\nRA 0 20 10 0\nend 3\n")
            .expect("parses");
        let flags: Vec<(ReqKind, bool)> = p.requests.iter().map(|r| (r.kind, r.meta)).collect();
        assert_eq!(
            flags,
            [
                (ReqKind::Sync, true),
                (ReqKind::Sync, false),
                (ReqKind::Readahead, false)
            ]
        );
        assert!(p.to_text().contains("\nRM 0 0 10 3\n"));
        assert_eq!(Profile::parse(&p.to_text()), Ok(p));
    }

    /// Files that used to replay as a start-up of 0 s or a shortened one (issue 16, defect 4).
    #[test]
    fn a_profile_file_must_hold_requests_and_its_end_line() {
        let whole = synthetic("bash").expect("known").to_text();
        assert!(Profile::parse_file(&whole).is_ok());
        let lines: Vec<&str> = whole.lines().collect();
        // Cut at a line boundary, anywhere after the first request: the `end` line is gone.
        let cut = lines[..lines.len() - 5].join("\n");
        let e = Profile::parse_file(&cut).expect_err("cut short");
        assert!(e.message.contains("may be cut short"), "{e}");
        let n_lines = lines.len() - 5;
        assert_eq!(e.line, n_lines + 1);
        // The `end` count no longer matches once a request line is lost from the middle.
        let mut holed = lines.clone();
        holed.remove(lines.len() - 3);
        let e = Profile::parse_file(&holed.join("\n")).expect_err("a request lost");
        assert!(e.message.contains("damaged or cut short"), "{e}");
        for text in ["", "# only a comment\n\n", "profile x\nfile a 10 contiguous\nend 0\n"] {
            let e = Profile::parse_file(text).expect_err(text);
            assert!(e.message.contains("no requests"), "{text:?}: {e}");
        }
        let e = Profile::parse("file a 10 contiguous\nR 0 0 1 0\nend 1\nR 0 1 1 0\n").expect_err("after end");
        assert_eq!(e.line, 4);
        assert!(e.message.contains("after the `end` line (3)"), "{e}");
    }

    #[test]
    fn random_means_not_continuing() {
        let p = Profile::parse(
            "file a 100000 contiguous\nfile b 100000 contiguous\n\
             R 0 0 4096 0\nRA 0 4096 4096 0\nR 0 4096 4096 0\nR 1 8192 4096 0\nR 0 8192 4096 0\n",
        )
        .expect("parses");
        let st = p.stats();
        assert_eq!((st.requests, st.random, st.readahead, st.bytes), (5, 4, 1, 5 * 4096));
    }

    #[test]
    fn garbage_text_never_panics() {
        let toks = [
            "file",
            "R",
            "RA",
            "profile",
            "mode",
            "direct",
            "a",
            "0",
            "1",
            "4096",
            "-1",
            "0.5",
            "1e400",
            "NaN",
            "scattered",
            "at",
            "contiguous",
            "18446744073709551615",
            "#",
            "\t",
            "é",
            "",
        ];
        let mut rng = stream_numbered(3, 0);
        for _ in 0..2000 {
            let mut text = String::from("file f 100000 contiguous\n");
            for _ in 0..rng.gen_range(0..6) {
                for _ in 0..rng.gen_range(0..8) {
                    text.push_str(toks[rng.gen_range(0..toks.len())]);
                    text.push(' ');
                }
                text.push('\n');
            }
            if let Ok(p) = Profile::parse(&text) {
                p.validate().expect("parsed profiles are valid");
                assert_eq!(Profile::parse(&p.to_text()), Ok(p));
            }
        }
    }

    #[test]
    fn degenerate_specs_do_not_panic() {
        for (n, b, f) in [
            (0, 0, 0.0),
            (1, 0, 1.0),
            (5, 1, 0.0),
            (3, 10_000_000, f64::NAN),
            (100, 4096 * 100, 2.0),
        ] {
            let p = generate(&SyntheticSpec::new("x", n, b, f));
            assert_eq!(p.requests.len() as u64, n);
            p.validate().expect("valid");
        }
    }
}
