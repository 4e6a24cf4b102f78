//! Parsing of the ftrace text output (`trace` / `trace_pipe`) for the events `bfq record` enables.
//!
//! A line reads `COMM-PID [CPU] FLAGS SECONDS.MICROS: EVENT: PAYLOAD`, where COMM may hold spaces and dashes, the
//! FLAGS column is absent when the `irq-info` option is off, and a `(TGID)` column follows COMM-PID when
//! `record-tgid` is on. Payloads follow the kernel's print formats of the events (facts from the `format` files
//! under `events/`):
//!
//! - `block_bio_queue`: `MAJ,MIN RWBS SECTOR + SECTORS [COMM]`
//! - `block_rq_issue`: `MAJ,MIN RWBS BYTES (CMD) SECTOR + SECTORS [IOPRIO] [COMM]`
//! - `block_rq_complete`: `MAJ,MIN RWBS (CMD) SECTOR + SECTORS [IOPRIO] [ERROR]`
//! - `mm_filemap_add_to_page_cache`: `dev MAJ:MIN ino HEXINO pfn=... ofs=BYTES [order=N]`
//! - `sched_process_fork`: `comm=C pid=P child_comm=C child_pid=P`
//! - `tracing_mark_write`: free text written to `trace_marker`.
//!
//! Sectors are 512-byte units. Unknown events and unparsable lines are reported as [`Event::Other`] or `None`, never
//! as an error: a trace taken from a busy machine holds many lines of no interest.

/// A block device number (major, minor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dev {
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

impl std::fmt::Display for Dev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// The request flags of a block event (`rwbs`: operation letter plus modifiers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rwbs {
    /// The operation is a read (`R`).
    pub read: bool,
    /// Kernel readahead (`A`, `REQ_RAHEAD`). Note: set on every read that goes through the readahead code, which
    /// includes the synchronous part a page fault waits for.
    pub readahead: bool,
    /// File-system metadata (`M`).
    pub meta: bool,
    /// Synchronous (`S`).
    pub sync: bool,
}

impl Rwbs {
    /// Parses the `rwbs` column: an optional `F` (preflush), the operation letter, then modifiers.
    pub fn parse(s: &str) -> Rwbs {
        let body = s.strip_prefix('F').unwrap_or(s);
        let mut chars = body.chars();
        let read = chars.next() == Some('R');
        let rest: String = chars.collect();
        Rwbs {
            read,
            readahead: rest.contains('A'),
            meta: rest.contains('M'),
            sync: rest.contains('S'),
        }
    }
}

/// A block I/O range as traced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRange {
    /// Device.
    pub dev: Dev,
    /// Flags.
    pub rwbs: Rwbs,
    /// First sector (512 bytes).
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u64,
}

/// What a trace line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `block_bio_queue`: a bio entered the block layer, in the context of the task that submitted it.
    BioQueue(BlockRange),
    /// `block_rq_issue`: a request (one or more merged bios) was sent to the driver.
    RqIssue(BlockRange),
    /// `block_rq_complete`: (part of) a request completed; `error` is 0 on success.
    RqComplete {
        /// The completed range.
        range: BlockRange,
        /// Error code (0 = success).
        error: i32,
    },
    /// `mm_filemap_add_to_page_cache`: a page (or folio) of a file entered the page cache.
    PageCacheAdd {
        /// Device of the file system.
        dev: Dev,
        /// Inode number.
        ino: u64,
        /// Byte offset of the page in the file.
        offset: u64,
    },
    /// `sched_process_fork`: `parent` created `child` (a process or a thread).
    Fork {
        /// Parent task id.
        parent: u32,
        /// Child task id.
        child: u32,
    },
    /// `tracing_mark_write`: text written to `trace_marker`.
    Marker(String),
    /// Any other event.
    Other,
}

/// One parsed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceLine {
    /// Command name of the task the event ran in.
    pub comm: String,
    /// Task id (thread id) of that task.
    pub pid: u32,
    /// Timestamp, ns (of the instance's trace clock).
    pub ts_ns: u64,
    /// The event.
    pub event: Event,
}

/// A line of the form `CPU:N [LOST M EVENTS]`: returns M.
pub fn lost_events(line: &str) -> Option<u64> {
    let i = line.find("[LOST ")?;
    line[i + 6..].split_whitespace().next()?.parse().ok()
}

/// Parses `SECONDS.FRACTION` into nanoseconds.
fn parse_ts(tok: &str) -> Option<u64> {
    let (s, f) = tok.split_once('.').unwrap_or((tok, ""));
    let secs: u64 = s.parse().ok()?;
    if f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac: u64 = if f.is_empty() { 0 } else { f.parse().ok()? };
    Some(secs.checked_mul(1_000_000_000)? + frac * 10u64.pow(9 - f.len() as u32))
}

fn parse_dev(tok: &str, sep: char) -> Option<Dev> {
    let (a, b) = tok.split_once(sep)?;
    Some(Dev {
        major: a.parse().ok()?,
        minor: b.parse().ok()?,
    })
}

/// Parses the common block payload: device, rwbs, and the `SECTOR + SECTORS` pair wherever it is.
fn parse_block(payload: &str) -> Option<BlockRange> {
    let toks: Vec<&str> = payload.split_whitespace().collect();
    let dev = parse_dev(toks.first()?, ',')?;
    let rwbs = Rwbs::parse(toks.get(1)?);
    let plus = toks.iter().position(|t| *t == "+")?;
    let sector = toks.get(plus.checked_sub(1)?)?.parse().ok()?;
    let sectors = toks.get(plus + 1)?.parse().ok()?;
    Some(BlockRange {
        dev,
        rwbs,
        sector,
        sectors,
    })
}

fn parse_filemap(payload: &str) -> Option<Event> {
    let mut dev = None;
    let mut ino = None;
    let mut offset = None;
    let mut toks = payload.split_whitespace();
    while let Some(t) = toks.next() {
        match t {
            "dev" => dev = parse_dev(toks.next()?, ':'),
            "ino" => ino = u64::from_str_radix(toks.next()?, 16).ok(),
            _ => {
                if let Some(v) = t.strip_prefix("ofs=") {
                    offset = v.parse().ok();
                }
            }
        }
    }
    Some(Event::PageCacheAdd {
        dev: dev?,
        ino: ino?,
        offset: offset?,
    })
}

fn parse_fork(payload: &str) -> Option<Event> {
    let (head, tail) = payload.rsplit_once(" child_comm=")?;
    let child = tail
        .rsplit_once("child_pid=")?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let parent = head.rsplit_once(" pid=")?.1.split_whitespace().next()?.parse().ok()?;
    Some(Event::Fork { parent, child })
}

/// Parses one line of ftrace text output; `None` for headers, comments, and lines not in the expected shape.
pub fn parse_line(line: &str) -> Option<TraceLine> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim_start().starts_with('#') {
        return None;
    }
    // The CPU column: the first ` [DIGITS]` (COMM may contain spaces but not this pattern before it in practice).
    let bytes = line.as_bytes();
    let mut cpu_at = None;
    for (i, _) in line.match_indices('[') {
        if i == 0 || !bytes[i - 1].is_ascii_whitespace() {
            continue;
        }
        let rest = &line[i + 1..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest.as_bytes().get(digits) == Some(&b']') {
            cpu_at = Some((i, i + 1 + digits + 1));
            break;
        }
    }
    let (cpu_start, cpu_end) = cpu_at?;
    let mut head = line[..cpu_start].trim();
    // Optional TGID column `(  123)` or `(-------)`.
    if head.ends_with(')') {
        if let Some(open) = head.rfind('(') {
            head = head[..open].trim_end();
        }
    }
    let (comm, pid) = head.rsplit_once('-')?;
    let pid: u32 = pid.parse().ok()?;
    let comm = comm.trim_start().to_string();

    // After the CPU: optional flags, then `SECONDS.FRACTION:`, then `EVENT:`, then the payload.
    let rest = &line[cpu_end..];
    let mut pos = 0;
    let mut ts_ns = None;
    for tok in rest.split_whitespace() {
        let at = rest[pos..].find(tok)? + pos;
        pos = at + tok.len();
        if let Some(t) = tok.strip_suffix(':') {
            ts_ns = Some(parse_ts(t)?);
            break;
        }
    }
    let ts_ns = ts_ns?;
    let rest = rest[pos..].trim_start();
    let (name, payload) = rest.split_once(':').unwrap_or((rest, ""));
    let payload = payload.strip_prefix(' ').unwrap_or(payload);
    let event = match name {
        "block_bio_queue" => Event::BioQueue(parse_block(payload)?),
        "block_rq_issue" => Event::RqIssue(parse_block(payload)?),
        "block_rq_complete" => {
            let range = parse_block(payload)?;
            let error = payload
                .rsplit_once('[')
                .and_then(|(_, e)| e.trim_end().strip_suffix(']'))
                .and_then(|e| e.parse().ok())
                .unwrap_or(0);
            Event::RqComplete { range, error }
        }
        "mm_filemap_add_to_page_cache" => parse_filemap(payload)?,
        "sched_process_fork" => parse_fork(payload)?,
        "tracing_mark_write" => Event::Marker(payload.trim().to_string()),
        _ => Event::Other,
    };
    Some(TraceLine {
        comm,
        pid,
        ts_ns,
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VDA: Dev = Dev { major: 254, minor: 0 };

    #[test]
    fn block_events() {
        let l = parse_line(
            "            bash-4039    [001] .....  2139.962157: block_bio_queue: 254,0 RA 10486016 + 8 [bash]",
        )
        .expect("parses");
        assert_eq!((l.comm.as_str(), l.pid, l.ts_ns), ("bash", 4039, 2_139_962_157_000));
        let Event::BioQueue(r) = l.event else { panic!("{l:?}") };
        assert_eq!((r.dev, r.sector, r.sectors), (VDA, 10486016, 8));
        assert!(r.rwbs.read && r.rwbs.readahead && !r.rwbs.meta);

        let l = parse_line(
            "            bash-4039    [001] .....  2139.962202: block_rq_issue: 254,0 RM 4096 () 10486224 + 8 be,0,4 [bash]",
        )
        .expect("parses");
        let Event::RqIssue(r) = l.event else { panic!("{l:?}") };
        assert_eq!((r.sector, r.sectors), (10486224, 8));
        assert!(r.rwbs.read && r.rwbs.meta && !r.rwbs.readahead);

        // COMM with a space, softirq flags, an error code.
        let l = parse_line(
            "      lto cgu.06-4047    [001] ..s..  2139.963629: block_rq_complete: 254,0 RA () 10486016 + 208 be,0,4 [-5]",
        )
        .expect("parses");
        assert_eq!((l.comm.as_str(), l.pid), ("lto cgu.06", 4047));
        let Event::RqComplete { range, error } = l.event else {
            panic!()
        };
        assert_eq!((range.sector, range.sectors, error), (10486016, 208, -5));

        // Older kernels print no ioprio; no irq-info flags column.
        let l = parse_line("  kworker/0:1H-44 [000] 5.000001: block_rq_issue: 8,16 WS 4096 () 8 + 8 [kworker/0:1H]")
            .expect("parses");
        let Event::RqIssue(r) = l.event else { panic!() };
        assert_eq!(r.dev, Dev { major: 8, minor: 16 });
        assert!(!r.rwbs.read && r.rwbs.sync);
        assert_eq!(l.ts_ns, 5_000_001_000);
    }

    #[test]
    fn other_events() {
        let l = parse_line(
            "  sync-4044 (   4044) [000] .....  2139.364078: mm_filemap_add_to_page_cache: dev 254:0 ino 3c7f3 pfn=0x1fb54f ofs=16384 order=0",
        )
        .expect("parses");
        assert_eq!(l.pid, 4044);
        assert_eq!(
            l.event,
            Event::PageCacheAdd {
                dev: VDA,
                ino: 0x3c7f3,
                offset: 16384
            }
        );
        let l = parse_line(
            "  bash-4039 [001] ..... 2139.360584: sched_process_fork: comm=bash pid=4039 child_comm=my prog child_pid=4044",
        )
        .expect("parses");
        assert_eq!(
            l.event,
            Event::Fork {
                parent: 4039,
                child: 4044
            }
        );
        let l = parse_line("  bfq-7 [001] ...1. 1.5: tracing_mark_write: bfq-record start").expect("parses");
        assert_eq!(l.event, Event::Marker("bfq-record start".into()));
        assert_eq!(l.ts_ns, 1_500_000_000);
        let l = parse_line("  bash-1 [000] ..... 3.000000: sched_process_exec: filename=/bin/true pid=1 old_pid=1")
            .expect("parses");
        assert_eq!(l.event, Event::Other);
    }

    #[test]
    fn junk_is_skipped() {
        for line in [
            "# tracer: nop",
            "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
            "",
            "CPU:1 [LOST 12 EVENTS]",
            "bash [001] 1.0: block_rq_issue: 254,0 R 4096 () 8 + 8 [bash]",
            "bash-12 [001] x.y: block_rq_issue: 254,0 R 4096 () 8 + 8 [bash]",
            "bash-12 [001] 1.0: block_rq_issue: 254,0 R 4096 () 8 +",
            "bash-12 [001] 1.0: block_bio_queue: 254 R 8 + 8 [bash]",
        ] {
            assert_eq!(parse_line(line), None, "{line}");
        }
        assert_eq!(lost_events("CPU:1 [LOST 12 EVENTS]"), Some(12));
        assert_eq!(lost_events("bash-1 [000] 1.0: x"), None);
    }
}
