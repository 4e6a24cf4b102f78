//! Block I/O traces in the standard formats, read into one model ([`Trace`]) and replayed as workload processes
//! ([`replay`]). docs/TRACES.md describes the formats, the mapping rules and the limits.
//!
//! Readers, one small module each, all refusing bad input with a one-line error that says where
//! ([`TraceError`]: `line N: ...` for text, `record N at byte B: ...` for binary) before any replay starts:
//! - [`blkparse`]: blkparse's default text output (`%D %2c %8s %5T.%9t %5p %2a %3d` then sector + blocks
//!   `[process]`);
//! - [`blktrace`]: blktrace's binary per-CPU files (`struct blk_io_trace`, version 7), merged by time;
//! - [`msr`]: the MSR Cambridge CSV traces (`Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`);
//! - [`fiu`]: the FIU traces (`ts pid process lba size R/W major minor md5`).

pub mod blkparse;
pub mod blktrace;
mod block;
pub mod fiu;
pub mod msr;
pub mod replay;

use bfq_sched::{Direction, Time};
use std::collections::HashMap;

/// Bytes per sector in every format that counts sectors (blkparse, blktrace, FIU).
pub const SECTOR_BYTES: u64 = 512;

/// Most requests a trace may hold unless [`ParseOptions::max_requests`] cuts it earlier: about 56 bytes each, so a
/// full trace stays under 300 MB of memory.
pub const MAX_TRACE_REQUESTS: usize = 5_000_000;

/// Largest request accepted, bytes (a larger size is a corrupt record, not an I/O).
pub const MAX_REQUEST_BYTES: u64 = 1 << 30;

/// A trace format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// blkparse's default text output.
    Blkparse,
    /// blktrace's binary files.
    Blktrace,
    /// MSR Cambridge CSV.
    Msr,
    /// FIU text traces.
    Fiu,
}

impl TraceFormat {
    /// Every format, in help order.
    pub const ALL: [TraceFormat; 4] = [
        TraceFormat::Blkparse,
        TraceFormat::Blktrace,
        TraceFormat::Msr,
        TraceFormat::Fiu,
    ];

    /// Name as on the command line (`blkparse`, `blktrace`, `msr`, `fiu`).
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Blkparse => "blkparse",
            TraceFormat::Blktrace => "blktrace",
            TraceFormat::Msr => "msr",
            TraceFormat::Fiu => "fiu",
        }
    }

    /// Parses a name given by [`TraceFormat::name`].
    pub fn parse(text: &str) -> Option<TraceFormat> {
        TraceFormat::ALL.into_iter().find(|f| f.name() == text.trim())
    }

    /// Guesses the format from the first bytes of a trace: blktrace's magic number, else the first line that is
    /// not blank (MSR: seven comma-separated fields; FIU: nine white-space-separated fields with R or W sixth;
    /// blkparse: a `MAJ,MIN` device first). `None` when nothing fits.
    pub fn detect(head: &[u8]) -> Option<TraceFormat> {
        if blktrace::has_magic(head) {
            return Some(TraceFormat::Blktrace);
        }
        let text = String::from_utf8_lossy(&head[..head.len().min(64 * 1024)]);
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))?;
        if line.split(',').count() == msr::FIELDS {
            return Some(TraceFormat::Msr);
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() == fiu::FIELDS && matches!(toks[5], "R" | "W" | "r" | "w") {
            return Some(TraceFormat::Fiu);
        }
        let first = toks.first()?;
        let dev = first.split_once(',')?;
        (dev.0.parse::<u32>().is_ok() && dev.1.parse::<u32>().is_ok()).then_some(TraceFormat::Blkparse)
    }
}

impl std::fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which block-layer event of blkparse and blktrace traces is the request's arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TraceEvent {
    /// Issue to the driver (`D`): what the device saw (the default).
    #[default]
    Issue,
    /// Queue (`Q`): what the processes asked for, before merging.
    Queue,
}

/// How a trace is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// The block-layer event taken as a request (blkparse and blktrace only).
    pub event: TraceEvent,
    /// Keep at most this many requests (the first ones in time); more is an error naming this option.
    pub max_requests: usize,
    /// Stop quietly at `max_requests` instead of failing.
    pub truncate: bool,
}

impl Default for ParseOptions {
    /// Issue events, at most [`MAX_TRACE_REQUESTS`], failing beyond.
    fn default() -> Self {
        ParseOptions {
            event: TraceEvent::Issue,
            max_requests: MAX_TRACE_REQUESTS,
            truncate: false,
        }
    }
}

/// Where a trace error is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Line of a text trace, from 1.
    Line(usize),
    /// Record of a binary trace, from 1, and the byte offset where it starts.
    Record {
        /// Record number, from 1.
        record: usize,
        /// Byte offset of the record in its file.
        byte: u64,
    },
    /// The trace as a whole (no request, too many requests).
    Whole,
}

/// A trace that cannot be read: where and what is wrong. One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{}", file.as_deref().map(|f| format!("{}: ", bfq_sched::text::one_line(f))).unwrap_or_default(), location_prefix(at), bfq_sched::text::one_line(message))]
pub struct TraceError {
    /// The file, when a reader of several files says which (blktrace's per-CPU files).
    pub file: Option<String>,
    /// Where.
    pub at: Location,
    /// What is wrong.
    pub message: String,
}

fn location_prefix(at: &Location) -> String {
    match at {
        Location::Line(n) => format!("line {n}: "),
        Location::Record { record, byte } => format!("record {record} at byte {byte}: "),
        Location::Whole => String::new(),
    }
}

impl TraceError {
    /// An error on text line `line`.
    pub fn line(line: usize, message: impl Into<String>) -> TraceError {
        TraceError {
            file: None,
            at: Location::Line(line),
            message: message.into(),
        }
    }

    /// An error in binary record `record` starting at byte `byte`.
    pub fn record(record: usize, byte: u64, message: impl Into<String>) -> TraceError {
        TraceError {
            file: None,
            at: Location::Record { record, byte },
            message: message.into(),
        }
    }

    /// An error about the whole trace.
    pub fn whole(message: impl Into<String>) -> TraceError {
        TraceError {
            file: None,
            at: Location::Whole,
            message: message.into(),
        }
    }

    /// The same error, naming `file`.
    pub fn in_file(mut self, file: impl Into<String>) -> TraceError {
        self.file = Some(file.into());
        self
    }
}

/// One request of a trace, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRequest {
    /// Arrival time, ns since the trace's first request.
    pub time_ns: Time,
    /// Read or write.
    pub dir: Direction,
    /// Synchronous: every read, and writes the trace flags sync (blkparse/blktrace `S`); MSR and FIU have no flag,
    /// so their writes are async.
    pub sync: bool,
    /// Byte offset on the traced device.
    pub offset: u64,
    /// Length, bytes (at least 1).
    pub len: u64,
    /// Process id, where the trace has one (blkparse, blktrace, FIU).
    pub pid: Option<u32>,
    /// Index of the process name in [`Trace::names`], where the trace has one.
    pub name: Option<u32>,
    /// Index of the volume (traced device, or MSR host and disk) in [`Trace::volumes`].
    pub volume: u32,
    /// The trace's own response time, ns: MSR's `ResponseTime`; for blkparse and blktrace the time from the chosen
    /// event to the matching completion (`C`) when the trace holds it.
    pub response_ns: Option<Time>,
}

/// A trace read into memory: requests in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The format it was read from.
    pub format: TraceFormat,
    /// Requests, by non-decreasing [`TraceRequest::time_ns`] (ties in trace order); the first at time 0.
    pub requests: Vec<TraceRequest>,
    /// Process names referred to by [`TraceRequest::name`].
    pub names: Vec<String>,
    /// Volume names referred to by [`TraceRequest::volume`] (`8,16` for a block device, `hm:1` for MSR host hm,
    /// disk 1).
    pub volumes: Vec<String>,
    /// Lines or records read but not requests (other block-layer events, flushes, discards, headers).
    pub skipped: u64,
    /// The requests were cut at [`ParseOptions::max_requests`].
    pub truncated: bool,
}

impl Trace {
    /// Length of the trace, ns: the last request's arrival time.
    pub fn span_ns(&self) -> Time {
        self.requests.last().map_or(0, |r| r.time_ns)
    }

    /// The trace's footprint, bytes: the end of its highest request.
    pub fn extent_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.offset + r.len).max().unwrap_or(0)
    }

    /// Bytes read and written.
    pub fn bytes(&self) -> [u64; 2] {
        let mut b = [0; 2];
        for r in &self.requests {
            b[r.dir.index()] += r.len;
        }
        b
    }

    /// Whether some request has a recorded response time.
    pub fn has_response_times(&self) -> bool {
        self.requests.iter().any(|r| r.response_ns.is_some())
    }
}

/// Reads a trace of a given format from its bytes; blktrace takes one file here (see [`blktrace::parse_files`]
/// for several per-CPU files).
pub fn parse(format: TraceFormat, data: &[u8], opts: &ParseOptions) -> Result<Trace, TraceError> {
    match format {
        TraceFormat::Blktrace => blktrace::parse_files(&[("", data)], opts),
        text_format => {
            let text = std::str::from_utf8(data).map_err(|e| {
                let line = data[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
                TraceError::line(line, format!("not UTF-8 text (a {text_format} trace is text)"))
            })?;
            match text_format {
                TraceFormat::Blkparse => blkparse::parse(text, opts),
                TraceFormat::Msr => msr::parse(text, opts),
                _ => fiu::parse(text, opts),
            }
        }
    }
}

/// Collects requests while a reader runs: interns names and volumes, enforces the request limit, and finishes
/// the trace (sorted by time, relative to the first request).
#[derive(Debug)]
pub(crate) struct Builder {
    format: TraceFormat,
    opts: ParseOptions,
    requests: Vec<TraceRequest>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
    volumes: Vec<String>,
    volume_ids: HashMap<String, u32>,
    skipped: u64,
    truncated: bool,
}

impl Builder {
    pub(crate) fn new(format: TraceFormat, opts: &ParseOptions) -> Builder {
        Builder {
            format,
            opts: *opts,
            requests: Vec::new(),
            names: Vec::new(),
            name_ids: HashMap::new(),
            volumes: Vec::new(),
            volume_ids: HashMap::new(),
            skipped: 0,
            truncated: false,
        }
    }

    pub(crate) fn name(&mut self, name: &str) -> u32 {
        intern(&mut self.names, &mut self.name_ids, name)
    }

    pub(crate) fn volume(&mut self, name: &str) -> u32 {
        intern(&mut self.volumes, &mut self.volume_ids, name)
    }

    pub(crate) fn skip(&mut self) {
        self.skipped += 1;
    }

    /// Whether the request limit is reached and the reader should stop (when truncating).
    pub(crate) fn full(&self) -> bool {
        self.truncated
    }

    /// Adds a request (absolute time, ns); `at` locates it for the limit's error. Returns its index.
    pub(crate) fn push(&mut self, rq: TraceRequest, at: impl FnOnce() -> TraceError) -> Result<usize, TraceError> {
        if self.requests.len() >= self.opts.max_requests {
            if self.opts.truncate {
                self.truncated = true;
                return Ok(usize::MAX);
            }
            let mut e = at();
            e.message = format!(
                "more than {} requests: replay a part of the trace with --max-requests N",
                self.opts.max_requests
            );
            return Err(e);
        }
        self.requests.push(rq);
        Ok(self.requests.len() - 1)
    }

    pub(crate) fn get_mut(&mut self, index: usize) -> Option<&mut TraceRequest> {
        self.requests.get_mut(index)
    }

    pub(crate) fn finish(mut self) -> Result<Trace, TraceError> {
        if self.requests.is_empty() {
            return Err(TraceError::whole(format!(
                "no requests in this {} trace ({} other lines or records)",
                self.format, self.skipped
            )));
        }
        // Stable: equal times keep trace order.
        self.requests.sort_by_key(|r| r.time_ns);
        let t0 = self.requests[0].time_ns;
        for r in &mut self.requests {
            r.time_ns -= t0;
        }
        Ok(Trace {
            format: self.format,
            requests: self.requests,
            names: self.names,
            volumes: self.volumes,
            skipped: self.skipped,
            truncated: self.truncated,
        })
    }
}

fn intern(list: &mut Vec<String>, ids: &mut HashMap<String, u32>, name: &str) -> u32 {
    if let Some(&id) = ids.get(name) {
        return id;
    }
    let id = list.len() as u32;
    list.push(name.to_string());
    ids.insert(name.to_string(), id);
    id
}

/// Parses a decimal seconds value `S.FRACTION` (up to 9 fraction digits) into ns, without floating point.
pub(crate) fn parse_seconds_ns(text: &str) -> Option<Time> {
    let (s, frac) = text.split_once('.').unwrap_or((text, ""));
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 9 {
        return None;
    }
    let secs: u64 = s.parse().ok()?;
    let mut ns: u64 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..9 {
        ns *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// A short, one-line excerpt of bad input for a message (at most 40 characters).
pub(crate) fn excerpt(text: &str) -> String {
    let t: String = text.chars().take(40).collect();
    let t = bfq_sched::text::one_line(&t);
    if text.chars().count() > 40 {
        format!("`{t}...`")
    } else {
        format!("`{t}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_parse_exactly() {
        assert_eq!(parse_seconds_ns("0.000000001"), Some(1));
        assert_eq!(parse_seconds_ns("12.5"), Some(12_500_000_000));
        assert_eq!(parse_seconds_ns("3"), Some(3_000_000_000));
        for bad in ["", ".5", "1.2.3", "-1.0", "1.0000000001", "1e3", "x"] {
            assert_eq!(parse_seconds_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_are_detected_from_their_first_line() {
        let blk = b"  8,0    1        1     0.000000000  4242  Q   R 2048 + 8 [fio]\n";
        assert_eq!(TraceFormat::detect(blk), Some(TraceFormat::Blkparse));
        let msr = b"128166372003061629,hm,1,Read,3452928,4096,6608\n";
        assert_eq!(TraceFormat::detect(msr), Some(TraceFormat::Msr));
        let fiu = b"89966527079846 4604 syslogd 1030351 8 W 6 0 01e5a4d9a7fd9ce6a4cf0b08cd6b3d8a\n";
        assert_eq!(TraceFormat::detect(fiu), Some(TraceFormat::Fiu));
        let mut bin = 0x6561_7407_u32.to_le_bytes().to_vec();
        bin.extend_from_slice(&[0; 44]);
        assert_eq!(TraceFormat::detect(&bin), Some(TraceFormat::Blktrace));
        assert_eq!(TraceFormat::detect(b"hello world\n"), None);
        assert_eq!(TraceFormat::detect(b""), None);
        for f in TraceFormat::ALL {
            assert_eq!(TraceFormat::parse(f.name()), Some(f));
        }
    }

    #[test]
    fn errors_are_one_line_and_say_where() {
        assert_eq!(TraceError::line(3, "bad\nthing").to_string(), "line 3: bad\\nthing");
        assert_eq!(
            TraceError::record(2, 48, "cut").in_file("a.blktrace.0").to_string(),
            "a.blktrace.0: record 2 at byte 48: cut"
        );
        assert_eq!(TraceError::whole("empty").to_string(), "empty");
    }

    #[test]
    fn each_text_format_goes_to_its_reader_and_the_trace_sums_itself() {
        // Two MSR Cambridge lines (time in 100 ns ticks, offset and size in bytes, response time in ticks): a
        // 4 KiB read, then 1 ms later an 8 KiB write. The trace spans 1 ms, reaches 3 457 024 bytes (the read's
        // end), holds 4096 bytes read and 8192 written, and has response times.
        let msr = b"128166372003061629,hm,1,Read,3452928,4096,6608\n128166372003071629,hm,1,Write,1000000,8192,100\n";
        let t = parse(TraceFormat::Msr, msr, &ParseOptions::default()).expect("MSR parses");
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.span_ns(), 1_000_000);
        assert_eq!(t.extent_bytes(), 3_452_928 + 4096);
        assert_eq!(t.bytes(), [4096, 8192]);
        assert!(t.has_response_times());
        // blkparse's text: one read of 8 sectors at 2048, queued, issued 1 µs later and completed 100 µs after that.
        let blk = "  8,0    1        1     0.000000000  4242  Q   R 2048 + 8 [fio]\n  \
                   8,0    1        2     0.000001000  4242  D   R 2048 + 8 [fio]\n  \
                   8,0    1        3     0.000101000     0  C   R 2048 + 8 [0]\n";
        let t = parse(TraceFormat::Blkparse, blk.as_bytes(), &ParseOptions::default()).expect("blkparse parses");
        assert_eq!(t.requests.len(), 1);
        assert_eq!((t.requests[0].offset, t.requests[0].len), (2048 * 512, 4096));
        assert_eq!(t.requests[0].response_ns, Some(100_000));
        assert_eq!(t.bytes(), [4096, 0]);
    }

    #[test]
    fn non_utf8_text_is_refused_with_its_line() {
        let e = parse(TraceFormat::Fiu, b"1 2 a 3 8 R 8 0 x\n\xff\n", &ParseOptions::default()).expect_err("bad");
        assert_eq!(e.at, Location::Line(2));
    }
}
