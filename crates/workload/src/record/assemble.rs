//! From trace lines to the reads a command's process tree caused.
//!
//! 1. **Process tree.** The root is the recorded command's pid (from the options or from the
//!    `bfq-record root PID` marker); every task a tree member forks (`sched_process_fork`, threads included) joins,
//!    in trace order.
//! 2. **Attribution.** A read bio queued (`block_bio_queue`) in the context of a tree task, or of a task whose command
//!    name is in [`AssembleOptions::also_comms`], is the tree's. Page-fault reads and readahead (synchronous and
//!    asynchronous) are submitted in the context of the task that faulted or read, so they are attributed; I/O that
//!    a kernel thread submits on the tree's behalf is not (see `docs/PROFILES.md`).
//! 3. **Requests.** Bios are merged into requests before they reach the device; a read request issued
//!    (`block_rq_issue`, any context) that overlaps a pending tree bio is one of the tree's reads; its bios are
//!    consumed. Its completion is the `block_rq_complete` at its start sector (partial completions move the start).
//! 4. **Start and end.** The start is the fork that created the command's process (or, without it, the
//!    `bfq-record start` marker, written just before the spawn); the end is the `bfq-record end` marker, written
//!    after the command exited. Bios queued and requests issued after the end are ignored (they can only come from
//!    companions).

use super::ftrace::{lost_events, parse_line, BlockRange, Dev, Event};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Marker written to `trace_marker` just before the command is spawned.
pub const MARK_START: &str = "bfq-record start";
/// Marker prefix written after the spawn, followed by the command's pid.
pub const MARK_ROOT: &str = "bfq-record root";
/// Marker written after the command exited.
pub const MARK_END: &str = "bfq-record end";

/// One read request of the recorded process tree, as the device saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracedRead {
    /// Device.
    pub dev: Dev,
    /// First sector (512 bytes).
    pub sector: u64,
    /// Length in sectors.
    pub sectors: u64,
    /// Issue time (`block_rq_issue`), ns.
    pub issue_ns: u64,
    /// Completion time, ns; `None` if the trace ended first.
    pub complete_ns: Option<u64>,
    /// Flagged kernel readahead (`A`).
    pub readahead: bool,
    /// Flagged file-system metadata (`M`).
    pub meta: bool,
}

/// What to attribute.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssembleOptions {
    /// Pid of the recorded command; `None`: take it from the `bfq-record root PID` marker.
    pub root_pid: Option<u32>,
    /// Also attribute reads submitted by tasks with these command names (e.g. `Xvfb`, whose font reads are part of
    /// an X client's start-up).
    pub also_comms: Vec<String>,
    /// Keep only reads of this device; `None`: the device with the most tree reads.
    pub device: Option<Dev>,
}

/// The reads of a recorded command, with what was learnt on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// Start time, ns: the fork of the command's process, else the start marker (`None` if neither is in the trace:
    /// the first read's issue time is used).
    pub start_ns: Option<u64>,
    /// Time of the end marker, ns.
    pub end_ns: Option<u64>,
    /// The device kept.
    pub dev: Option<Dev>,
    /// The tree's read requests on that device, in issue order.
    pub reads: Vec<TracedRead>,
    /// Tree reads on other devices, dropped: (device, requests).
    pub other_devices: Vec<(Dev, u64)>,
    /// Tasks in the process tree (root, children and threads).
    pub tasks: u64,
    /// Distinct files (device, inode) whose pages the tree brought into the page cache, on the kept device.
    pub files: BTreeSet<(Dev, u64)>,
    /// Events the kernel reported lost (`[LOST N EVENTS]`); non-zero means the recording may be incomplete.
    pub lost_events: u64,
    /// Tree bios that never became an issued request before the trace ended.
    pub unissued_bios: u64,
}

/// Why a trace cannot be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssembleError {
    /// No root pid given and no root marker in the trace.
    #[error(
        "no root pid: the trace has no `{MARK_ROOT} PID` marker; use a trace saved by `bfq record --keep-trace FILE -- CMD`"
    )]
    NoRoot,
}

#[derive(Debug, Clone, Copy)]
struct PendingBio {
    end: u64,
}

/// Assembles the tree's reads from ftrace text lines (see the module documentation).
pub fn assemble<'a, I>(lines: I, opts: &AssembleOptions) -> Result<Recording, AssembleError>
where
    I: IntoIterator<Item = &'a str>,
    I::IntoIter: Clone,
{
    let lines = lines.into_iter();
    let mut rec = Recording::default();

    // Pass 1: markers, lost events, and the process tree (fork events in trace order).
    let mut root = opts.root_pid;
    let mut forks = Vec::new();
    for line in lines.clone() {
        if let Some(n) = lost_events(line) {
            rec.lost_events += n;
            continue;
        }
        let Some(l) = parse_line(line) else { continue };
        match l.event {
            Event::Marker(text) => {
                if text == MARK_START && rec.start_ns.is_none() {
                    rec.start_ns = Some(l.ts_ns);
                } else if text == MARK_END {
                    rec.end_ns = Some(l.ts_ns);
                } else if let Some(pid) = text.strip_prefix(MARK_ROOT) {
                    if root.is_none() {
                        root = pid.trim().parse().ok();
                    }
                }
            }
            Event::Fork { parent, child } => forks.push((parent, child, l.ts_ns)),
            _ => {}
        }
    }
    let root = root.ok_or(AssembleError::NoRoot)?;
    let mut tree: HashSet<u32> = HashSet::from([root]);
    for (parent, child, ts) in forks {
        if child == root && !tree.contains(&parent) {
            // The command's process came to life: a better start than the marker, which precedes the recorder's
            // own (cold-cache) work to spawn it.
            rec.start_ns = Some(ts);
        }
        if tree.contains(&parent) {
            tree.insert(child);
        }
    }
    rec.tasks = tree.len() as u64;
    let also: HashSet<&str> = opts.also_comms.iter().map(String::as_str).collect();

    // Pass 2: bios, requests, completions, page-cache additions.
    let mut pending: BTreeMap<(Dev, u64), PendingBio> = BTreeMap::new();
    let mut outstanding: HashMap<(Dev, u64), (usize, u64)> = HashMap::new();
    let mut reads: Vec<TracedRead> = Vec::new();
    let mut files: BTreeSet<(Dev, u64)> = BTreeSet::new();
    for line in lines {
        let Some(l) = parse_line(line) else { continue };
        // After the end marker the tree is gone; companions (`also_comms`) may go on reading, but not for it.
        let ended = rec.end_ns.is_some_and(|e| l.ts_ns > e);
        let ours = !ended && (tree.contains(&l.pid) || also.contains(l.comm.as_str()));
        match l.event {
            Event::BioQueue(r) if ours && r.rwbs.read && r.sectors > 0 => {
                pending.insert(
                    (r.dev, r.sector),
                    PendingBio {
                        end: r.sector + r.sectors,
                    },
                );
            }
            // A read request that carries tree bios (consumed here) and is not a re-issue of one outstanding.
            Event::RqIssue(r)
                if r.rwbs.read
                    && r.sectors > 0
                    && !ended
                    && consume(&mut pending, &r)
                    && !outstanding.contains_key(&(r.dev, r.sector)) =>
            {
                outstanding.insert((r.dev, r.sector), (reads.len(), r.sectors));
                reads.push(TracedRead {
                    dev: r.dev,
                    sector: r.sector,
                    sectors: r.sectors,
                    issue_ns: l.ts_ns,
                    complete_ns: None,
                    readahead: r.rwbs.readahead,
                    meta: r.rwbs.meta,
                });
            }
            Event::RqComplete { range: r, .. } if r.rwbs.read => {
                if let Some((idx, left)) = outstanding.remove(&(r.dev, r.sector)) {
                    if r.sectors > 0 && r.sectors < left {
                        outstanding.insert((r.dev, r.sector + r.sectors), (idx, left - r.sectors));
                    } else {
                        reads[idx].complete_ns = Some(l.ts_ns);
                    }
                }
            }
            Event::PageCacheAdd { dev, ino, .. } if ours => {
                files.insert((dev, ino));
            }
            _ => {}
        }
    }
    rec.unissued_bios = pending.len() as u64;

    // Keep one device.
    let mut per_dev: BTreeMap<Dev, u64> = BTreeMap::new();
    for r in &reads {
        *per_dev.entry(r.dev).or_default() += 1;
    }
    let dev = opts.device.or_else(|| {
        per_dev
            .iter()
            .max_by_key(|(d, n)| (**n, std::cmp::Reverse(**d)))
            .map(|(d, _)| *d)
    });
    rec.other_devices = per_dev.into_iter().filter(|(d, _)| Some(*d) != dev).collect();
    rec.reads = reads.into_iter().filter(|r| Some(r.dev) == dev).collect();
    rec.files = files.into_iter().filter(|(d, _)| Some(*d) == dev).collect();
    rec.dev = dev;
    Ok(rec)
}

/// Removes the pending tree bios that overlap request `r` (trimming ones that stick out); true if any did.
fn consume(pending: &mut BTreeMap<(Dev, u64), PendingBio>, r: &BlockRange) -> bool {
    let end = r.sector + r.sectors;
    let hits: Vec<(u64, u64)> = pending
        .range((r.dev, 0)..(r.dev, end))
        .filter(|(_, b)| b.end > r.sector)
        .map(|(k, b)| (k.1, b.end))
        .collect();
    for &(start, bend) in &hits {
        pending.remove(&(r.dev, start));
        if start < r.sector {
            pending.insert((r.dev, start), PendingBio { end: r.sector });
        }
        if bend > end {
            pending.insert((r.dev, end), PendingBio { end: bend });
        }
    }
    !hits.is_empty()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A trimmed real trace of `bash -c true` (ftrace on a virtio disk), with other processes' I/O interleaved.
    pub(crate) const SAMPLE: &str = "\
# tracer: nop
             bfq-900     [000] ...1.   100.000000: tracing_mark_write: bfq-record start
             bfq-900     [000] .....   100.000010: sched_process_fork: comm=bfq pid=900 child_comm=bfq child_pid=901
             bfq-900     [000] ...1.   100.000020: tracing_mark_write: bfq-record root 901
            bash-901     [001] .....   100.000100: mm_filemap_add_to_page_cache: dev 254:0 ino 3c7f3 pfn=0x1 ofs=0 order=0
            bash-901     [001] .....   100.000101: block_bio_queue: 254,0 RA 1000 + 8 [bash]
            bash-901     [001] .....   100.000102: mm_filemap_add_to_page_cache: dev 254:0 ino 3c7f3 pfn=0x2 ofs=4096 order=0
            bash-901     [001] .....   100.000103: block_bio_queue: 254,0 RA 1008 + 8 [bash]
            bash-901     [001] .....   100.000110: block_rq_issue: 254,0 RA 8192 () 1000 + 16 be,0,4 [bash]
    kworker/u8:0-12      [000] .....   100.000111: block_bio_queue: 254,0 WS 5000 + 8 [kworker/u8:0]
    kworker/0:1H-44      [000] .....   100.000112: block_rq_issue: 254,0 WS 4096 () 5000 + 8 be,0,4 [kworker/0:1H]
           rustc-77      [000] .....   100.000113: block_bio_queue: 254,0 R 9000 + 8 [rustc]
           rustc-77      [000] .....   100.000114: block_rq_issue: 254,0 R 4096 () 9000 + 8 be,0,4 [rustc]
      lto cgu.06-78      [001] ..s..   100.000300: block_rq_complete: 254,0 RA () 1000 + 16 be,0,4 [0]
      lto cgu.06-78      [001] ..s..   100.000301: block_rq_complete: 254,0 R () 9000 + 8 be,0,4 [0]
            bash-901     [001] .....   100.000400: sched_process_fork: comm=bash pid=901 child_comm=bash child_pid=902
            true-902     [000] .....   100.000500: block_bio_queue: 254,0 RM 2000 + 8 [true]
    kworker/0:1H-44      [000] .....   100.000510: block_rq_issue: 254,0 RM 4096 () 2000 + 8 be,0,4 [kworker/0:1H]
            true-902     [000] .....   100.000520: block_bio_queue: 254,0 R 3000 + 64 [true]
            true-902     [000] .....   100.000530: block_rq_issue: 254,0 R 32768 () 3000 + 64 be,0,4 [true]
          <idle>-0       [000] d.h1.   100.000600: block_rq_complete: 254,0 RM () 2000 + 8 be,0,4 [0]
          <idle>-0       [000] d.h1.   100.000700: block_rq_complete: 254,0 R () 3000 + 32 be,0,4 [0]
          <idle>-0       [000] d.h1.   100.000800: block_rq_complete: 254,0 R () 3032 + 32 be,0,4 [0]
CPU:1 [LOST 3 EVENTS]
             sdd-903     [001] .....   100.000900: block_bio_queue: 8,48 R 64 + 8 [sdd]
            bash-901     [001] .....   100.000950: block_bio_queue: 8,48 R 64 + 8 [bash]
            bash-901     [001] .....   100.000960: block_rq_issue: 8,48 R 4096 () 64 + 8 be,0,4 [bash]
            bash-901     [001] .....   100.000970: block_bio_queue: 254,0 R 7000 + 8 [bash]
             bfq-900     [000] ...1.   100.001000: tracing_mark_write: bfq-record end
           rustc-77      [000] .....   100.001100: block_bio_queue: 254,0 R 9100 + 8 [rustc]
           rustc-77      [000] .....   100.001110: block_rq_issue: 254,0 R 4096 () 9100 + 8 be,0,4 [rustc]
";

    #[test]
    fn attributes_the_tree_reads() {
        let rec = assemble(SAMPLE.lines(), &AssembleOptions::default()).expect("assembles");
        let vda = Dev { major: 254, minor: 0 };
        assert_eq!(rec.dev, Some(vda));
        assert_eq!(rec.start_ns, Some(100_000_010_000));
        assert_eq!(rec.end_ns, Some(100_001_000_000));
        assert_eq!(rec.tasks, 2);
        assert_eq!(rec.lost_events, 3);
        assert_eq!(rec.unissued_bios, 1);
        assert_eq!(rec.other_devices, vec![(Dev { major: 8, minor: 48 }, 1)]);
        assert_eq!(rec.files.len(), 1);
        let got: Vec<_> = rec
            .reads
            .iter()
            .map(|r| {
                (
                    r.sector,
                    r.sectors,
                    r.issue_ns % 1_000_000_000,
                    r.complete_ns.map(|c| c % 1_000_000_000),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1000, 16, 110_000, Some(300_000)),
                (2000, 8, 510_000, Some(600_000)),
                (3000, 64, 530_000, Some(800_000)),
            ]
        );
        assert!(rec.reads[0].readahead && rec.reads[1].meta && !rec.reads[2].readahead);
    }

    #[test]
    fn root_and_companions_from_options() {
        // Root given explicitly: the child 902 is not in the tree (its fork came from 901).
        let opts = AssembleOptions {
            root_pid: Some(902),
            ..AssembleOptions::default()
        };
        let rec = assemble(SAMPLE.lines(), &opts).expect("assembles");
        assert_eq!(rec.reads.len(), 2);
        // The rustc read is attributed by command name.
        let opts = AssembleOptions {
            root_pid: Some(902),
            also_comms: vec!["rustc".into()],
            device: None,
        };
        let rec = assemble(SAMPLE.lines(), &opts).expect("assembles");
        assert_eq!(
            rec.reads.iter().map(|r| r.sector).collect::<Vec<_>>(),
            vec![9000, 2000, 3000]
        );
        // The other device on request.
        let opts = AssembleOptions {
            device: Some(Dev { major: 8, minor: 48 }),
            ..AssembleOptions::default()
        };
        let rec = assemble(SAMPLE.lines(), &opts).expect("assembles");
        assert_eq!(rec.reads.len(), 1);
        assert_eq!(rec.reads[0].complete_ns, None);
    }

    #[test]
    fn no_root_is_an_error() {
        let text = "  a-1 [000] 1.0: block_bio_queue: 254,0 R 8 + 8 [a]\n";
        assert_eq!(
            assemble(text.lines(), &AssembleOptions::default()),
            Err(AssembleError::NoRoot)
        );
    }

    #[test]
    fn split_bios_are_consumed_piecewise() {
        let mut pending = BTreeMap::new();
        let d = Dev { major: 1, minor: 0 };
        pending.insert((d, 100), PendingBio { end: 300 });
        let r = |sector, sectors| BlockRange {
            dev: d,
            rwbs: super::super::ftrace::Rwbs::parse("R"),
            sector,
            sectors,
        };
        assert!(consume(&mut pending, &r(100, 128)));
        assert_eq!(pending.keys().copied().collect::<Vec<_>>(), vec![(d, 228)]);
        assert!(!consume(&mut pending, &r(0, 100)));
        assert!(consume(&mut pending, &r(228, 72)));
        assert!(pending.is_empty());
    }
}
