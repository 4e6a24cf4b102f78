//! blkparse's default text output.
//!
//! Every event line starts with blkparse's default prefix `%D %2c %8s %5T.%9t %5p %2a %3d`: the device `MAJ,MIN`,
//! the CPU, a sequence number, the time in `SECONDS.NANOSECONDS` since the trace began, the pid, the action
//! (`Q`, `G`, `I`, `D`, `C`, `M`, `P`, `U`, ...) and the `RWBS` flags. Block events then read
//! `SECTOR + BLOCKS [PROCESS]` (`[ERROR]` for completions); other actions have other payloads, which are not
//! read. Blank lines and `Input file ... added` lines are skipped; the summary blkparse prints at the end (from the
//! first `CPU<n> (`, `Total (`, `Throughput (` or `Events (` line) ends the events. Anything else is an error
//! naming the line.
//!
//! Which events become requests, and whose they are, is [`super::block`]'s business.

use super::block::{parse_rwbs, Action, Assembler, BlockEvent, Kind};
use super::{excerpt, parse_seconds_ns, Builder, ParseOptions, Trace, TraceError, TraceFormat};

/// Lines that start blkparse's closing summary.
const SUMMARY_STARTS: [&str; 5] = ["CPU", "Total (", "Throughput (", "Events (", "Skips:"];

/// Reads blkparse's default text output.
pub fn parse(text: &str, opts: &ParseOptions) -> Result<Trace, TraceError> {
    let mut b = Builder::new(TraceFormat::Blkparse, opts);
    let mut asm = Assembler::new(opts.event);
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with("Input file ") {
            b.skip();
            continue;
        }
        if SUMMARY_STARTS.iter().any(|s| line.starts_with(s)) {
            break;
        }
        let ev = parse_line(line, &mut b).map_err(|m| TraceError::line(n, m))?;
        asm.event(&mut b, &ev, || TraceError::line(n, ""))?;
        if b.full() {
            break;
        }
    }
    b.finish()
}

fn num<T: std::str::FromStr>(tok: Option<&str>, what: &str) -> Result<T, String> {
    let tok = tok.ok_or_else(|| {
        format!(
            "missing {what}: expected blkparse's default format `MAJ,MIN CPU SEQ SECONDS.NANOS PID ACTION RWBS ...`"
        )
    })?;
    tok.parse()
        .map_err(|_| format!("{what} {} is not a number", excerpt(tok)))
}

/// Parses one event line (not blank, not summary) into a block event, interning its process name.
fn parse_line(line: &str, b: &mut Builder) -> Result<BlockEvent, String> {
    let mut toks = line.split_whitespace();
    let dev_tok = toks.next().unwrap_or_default();
    let dev = dev_tok
        .split_once(',')
        .and_then(|(a, c)| Some((a.parse::<u32>().ok()?, c.parse::<u32>().ok()?)))
        .ok_or_else(|| {
            format!(
                "device {} is not MAJ,MIN: expected blkparse's default format `MAJ,MIN CPU SEQ SECONDS.NANOS PID ACTION RWBS ...`",
                excerpt(dev_tok)
            )
        })?;
    let _cpu: u32 = num(toks.next(), "CPU")?;
    let _seq: u64 = num(toks.next(), "sequence number")?;
    let time_tok = toks.next().ok_or("missing time")?;
    let time_ns =
        parse_seconds_ns(time_tok).ok_or_else(|| format!("time {} is not SECONDS.NANOSECONDS", excerpt(time_tok)))?;
    let pid: u32 = num(toks.next(), "pid")?;
    let action_tok = toks.next().ok_or("missing action")?;
    if !action_tok.chars().all(|c| c.is_ascii_alphabetic()) || action_tok.len() > 2 {
        return Err(format!(
            "action {} is not a blkparse action letter",
            excerpt(action_tok)
        ));
    }
    let action = match action_tok {
        "Q" => Action::Queue,
        "G" => Action::GetRq,
        "I" => Action::Insert,
        "D" => Action::Issue,
        "C" => Action::Complete,
        _ => Action::Other,
    };
    let rwbs = toks.next().ok_or("missing RWBS flags")?;
    let other = BlockEvent {
        dev,
        action: Action::Other,
        kind: Kind::Other,
        sync: false,
        sector: 0,
        sectors: 0,
        pid,
        name: None,
        time_ns,
    };
    if action == Action::Other {
        return Ok(other);
    }
    let (kind, sync) =
        parse_rwbs(rwbs).ok_or_else(|| format!("RWBS flags {} are not [F]R|W|D|N[FASM...]", excerpt(rwbs)))?;
    let rest: Vec<&str> = toks.collect();
    // Passthrough and data-less requests print other payloads (`0 (cmd) [comm]`, `[comm]`, and for a completion
    // of a flush sequence `SECTOR [ERROR]`): not requests.
    if kind == Kind::Other || rest.get(1) != Some(&"+") {
        let no_data = match rest.as_slice() {
            [] => true,
            [first, ..] if first.starts_with('[') => true,
            [sector, err, ..] => action == Action::Complete && sector.parse::<u64>().is_ok() && err.starts_with('['),
            _ => false,
        };
        if kind != Kind::Other && !no_data {
            return Err(format!(
                "{action_tok} event of a read or write without `SECTOR + BLOCKS`, got {}",
                excerpt(&rest.join(" "))
            ));
        }
        return Ok(BlockEvent { action, ..other });
    }
    let sector: u64 = num(rest.first().copied(), "sector")?;
    let sectors: u64 = num(rest.get(2).copied(), "block count")?;
    let name = match rest.get(3..) {
        Some(words) if !words.is_empty() && action != Action::Complete => {
            let comm = words.join(" ");
            let comm = comm.trim_start_matches('[').trim_end_matches(']');
            // Traces taken through ftrace's blk tracer have no process-name records: blkparse prints `(null)`.
            (!comm.is_empty() && comm != "(null)").then(|| b.name(comm))
        }
        _ => None,
    };
    Ok(BlockEvent {
        dev,
        action,
        kind,
        sync,
        sector,
        sectors,
        pid,
        name,
        time_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Location, TraceEvent};
    use bfq_sched::Direction;

    const SMALL: &str = "\
  7,0    1        1     0.000000000  4242  Q   R 2048 + 8 [fio]
  7,0    1        2     0.000001000  4242  G   R 2048 + 8 [fio]
  7,0    1        3     0.000002000  4242  P   N [fio]
  7,0    1        4     0.000003000  4242  I   R 2048 + 8 [fio]
  7,0    1        5     0.000004000    57  D   R 2048 + 8 [kworker/1:1H]
  7,0    0        1     0.000005000  4243  Q  WS 4096 + 16 [dd]
  7,0    0        2     0.000006000  4243  D  WS 4096 + 16 [dd]
  7,0    1        6     0.000104000     0  C   R 2048 + 8 [0]
  7,0    0        3     0.000306000     0  C  WS 4096 + 16 [0]
  7,0    0        4     0.000400000  4243  D   N 0 (00 00) [dd]
  7,0    0        4     0.000400000  4243  Q FWS [(null)]
  7,0    0        4     0.000400000  4243  C  WS 0 [0]
  7,0    0        5     0.000500000  4243  m   N cfq4243S / some message

CPU0 (7,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        8KiB
Total (7,0):
";

    #[test]
    fn issue_events_become_requests_owned_by_their_queuer_with_response_times() {
        let t = parse(SMALL, &ParseOptions::default()).expect("parses");
        assert_eq!(t.requests.len(), 2);
        let (r, w) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (r.time_ns, r.dir, r.sync, r.offset, r.len),
            (0, Direction::Read, true, 2048 * 512, 4096)
        );
        // The D ran in a kworker; the request is fio's, which queued it.
        assert_eq!(r.pid, Some(4242));
        assert_eq!(t.names[r.name.expect("named") as usize], "fio");
        assert_eq!(r.response_ns, Some(100_000));
        assert_eq!(
            (w.time_ns, w.dir, w.sync, w.len, w.pid),
            (2_000, Direction::Write, true, 8192, Some(4243))
        );
        assert_eq!(w.response_ns, Some(300_000));
        assert_eq!(t.volumes, ["7,0"]);
        assert!(t.skipped > 0);
    }

    #[test]
    fn queue_events_when_asked() {
        let opts = ParseOptions {
            event: TraceEvent::Queue,
            ..ParseOptions::default()
        };
        let t = parse(SMALL, &opts).expect("parses");
        assert_eq!(t.requests.len(), 2);
        assert_eq!(t.requests[0].time_ns, 0);
        assert_eq!(t.requests[1].time_ns, 5_000);
        assert_eq!(t.requests[0].response_ns, Some(104_000));
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        let good = "  7,0 1 1 0.000000000 1 D R 8 + 8 [a]\n";
        let cases: [(&str, &str); 11] = [
            ("x,0 1 1 0.0 1 D R 8 + 8 [a]", "line 2: device `x,0` is not MAJ,MIN"),
            ("7,0 one 1 0.0 1 D R 8 + 8 [a]", "line 2: CPU `one` is not a number"),
            ("7,0 1 1 0.0", "line 2: missing pid"),
            (
                "7,0 1 1 1.5s 1 D R 8 + 8 [a]",
                "line 2: time `1.5s` is not SECONDS.NANOSECONDS",
            ),
            (
                "7,0 1 1 0.0 1 D% R 8 + 8 [a]",
                "line 2: action `D%` is not a blkparse action letter",
            ),
            ("7,0 1 1 0.0 1 D Q 8 + 8 [a]", "line 2: RWBS flags `Q` are not"),
            (
                "7,0 1 1 0.0 1 D R 8 - 8 [a]",
                "line 2: D event of a read or write without `SECTOR + BLOCKS`",
            ),
            ("7,0 1 1 0.0 1 D R 8 [0]", "line 2: D event of a read or write without"),
            ("7,0 1 1 0.0 1 D R x + 8 [a]", "line 2: sector `x` is not a number"),
            (
                "7,0 1 1 0.0 1 D R 8 + 4294967296 [a]",
                "line 2: request of 4294967296 sectors is larger",
            ),
            (
                "7,0 1 1 0.0 1 D R 36028797018963968 + 8 [a]",
                "line 2: sector 36028797018963968 is beyond",
            ),
        ];
        for (bad, want) in cases {
            let e = parse(&format!("{good}{bad}\n"), &ParseOptions::default()).expect_err(bad);
            assert!(e.to_string().starts_with(want), "{bad}: got {e}, want {want}");
            assert_eq!(e.at, Location::Line(2));
        }
        let e = parse("\n\nCPU0 (7,0):\n", &ParseOptions::default()).expect_err("empty");
        assert!(e.to_string().starts_with("no requests in this blkparse trace"), "{e}");
    }

    #[test]
    fn the_request_limit_fails_or_truncates() {
        let text = "7,0 1 1 0.0 1 D R 8 + 8 [a]\n7,0 1 2 0.1 1 D R 16 + 8 [a]\n";
        let mut opts = ParseOptions {
            max_requests: 1,
            ..ParseOptions::default()
        };
        let e = parse(text, &opts).expect_err("too many");
        assert_eq!(
            e.to_string(),
            "line 2: more than 1 requests: replay a part of the trace with --max-requests N"
        );
        opts.truncate = true;
        let t = parse(text, &opts).expect("cut");
        assert!(t.truncated);
        assert_eq!(t.requests.len(), 1);
    }
}
