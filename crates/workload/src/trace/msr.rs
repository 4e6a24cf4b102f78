//! The MSR Cambridge traces (SNIA IOTTA): CSV lines `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`.
//!
//! `Timestamp` is a Windows filetime (100 ns ticks since 1601), `Type` is `Read` or `Write`, `Offset` and `Size`
//! are bytes, `ResponseTime` is in the same 100 ns ticks. A first line starting with `Timestamp` is a header and
//! is skipped, as are blank lines; a request of size 0 is skipped (counted in [`Trace::skipped`]). The traces have
//! no process ids and no sync flag: reads are sync, writes async. The volume is `HOST:DISK`.

use super::{excerpt, Builder, ParseOptions, Trace, TraceError, TraceFormat, TraceRequest, MAX_REQUEST_BYTES};
use bfq_sched::Direction;

/// Fields per line.
pub const FIELDS: usize = 7;
/// Nanoseconds per filetime tick.
const NS_PER_TICK: u64 = 100;

/// Reads an MSR Cambridge CSV trace.
pub fn parse(text: &str, opts: &ParseOptions) -> Result<Trace, TraceError> {
    let mut b = Builder::new(TraceFormat::Msr, opts);
    let mut seen_data = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || (!seen_data && line.starts_with("Timestamp")) {
            b.skip();
            continue;
        }
        seen_data = true;
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != FIELDS {
            return Err(TraceError::line(
                n,
                format!(
                    "{} fields, expected {FIELDS}: Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime",
                    f.len()
                ),
            ));
        }
        let num = |k: usize, what: &str| -> Result<u64, TraceError> {
            f[k].parse::<u64>()
                .map_err(|_| TraceError::line(n, format!("{what} {} is not a whole number", excerpt(f[k]))))
        };
        let ticks = num(0, "Timestamp")?;
        let time_ns = ticks
            .checked_mul(NS_PER_TICK)
            .ok_or_else(|| TraceError::line(n, format!("Timestamp {ticks} is out of range")))?;
        if f[1].is_empty() {
            return Err(TraceError::line(n, "empty Hostname"));
        }
        let disk = num(2, "DiskNumber")?;
        let dir = match f[3].to_ascii_lowercase().as_str() {
            "read" => Direction::Read,
            "write" => Direction::Write,
            _ => {
                return Err(TraceError::line(
                    n,
                    format!("Type {} is not Read or Write", excerpt(f[3])),
                ))
            }
        };
        let offset = num(4, "Offset")?;
        let len = num(5, "Size")?;
        let response = num(6, "ResponseTime")?;
        if len > MAX_REQUEST_BYTES {
            return Err(TraceError::line(
                n,
                format!("Size {len} is larger than {MAX_REQUEST_BYTES} bytes"),
            ));
        }
        if offset.checked_add(len).is_none() {
            return Err(TraceError::line(n, format!("Offset {offset} is beyond any device")));
        }
        if len == 0 {
            b.skip();
            continue;
        }
        let volume = b.volume(&format!("{}:{disk}", f[1]));
        b.push(
            TraceRequest {
                time_ns,
                dir,
                sync: dir == Direction::Read,
                offset,
                len,
                pid: None,
                name: None,
                volume,
                response_ns: response.checked_mul(NS_PER_TICK),
            },
            || TraceError::line(n, ""),
        )?;
        if b.full() {
            break;
        }
    }
    b.finish()
}

/// Writes one line of an MSR trace: the inverse of the reader (times in ns, multiples of 100), for tests and
/// fixtures.
pub fn line(time_ns: u64, host: &str, disk: u32, write: bool, offset: u64, len: u64, response_ns: u64) -> String {
    format!(
        "{},{host},{disk},{},{offset},{len},{}\n",
        time_ns / NS_PER_TICK,
        if write { "Write" } else { "Read" },
        response_ns / NS_PER_TICK
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Location;

    #[test]
    fn lines_become_requests_with_response_times() {
        let text = format!(
            "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n{}{}{}",
            line(128_166_372_003_061_629 * 100, "hm", 1, false, 3_452_928, 4096, 660_800),
            line(128_166_372_003_061_629 * 100 + 5_000, "hm", 1, true, 8192, 512, 1_000),
            line(128_166_372_003_061_629 * 100 + 6_000, "hm", 1, true, 8192, 0, 1_000),
        );
        let t = parse(&text, &ParseOptions::default()).expect("parses");
        assert_eq!(t.requests.len(), 2);
        let (r, w) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (r.time_ns, r.dir, r.sync, r.offset, r.len),
            (0, Direction::Read, true, 3_452_928, 4096)
        );
        assert_eq!(r.response_ns, Some(660_800));
        assert_eq!(
            (w.time_ns, w.dir, w.sync, w.pid),
            (5_000, Direction::Write, false, None)
        );
        assert_eq!(t.volumes, ["hm:1"]);
        assert_eq!(t.skipped, 2, "the header and the empty request");
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        let good = "128166372003061629,hm,1,Read,0,4096,10\n";
        let cases: [(&str, &str); 9] = [
            ("1,2,3", "line 2: 3 fields, expected 7"),
            ("x,hm,1,Read,0,4096,10", "line 2: Timestamp `x` is not a whole number"),
            (
                "184467440737095517,hm,1,Read,0,4096,10",
                "line 2: Timestamp 184467440737095517 is out of range",
            ),
            ("1,,1,Read,0,4096,10", "line 2: empty Hostname"),
            (
                "1,hm,-1,Read,0,4096,10",
                "line 2: DiskNumber `-1` is not a whole number",
            ),
            ("1,hm,1,Trim,0,4096,10", "line 2: Type `Trim` is not Read or Write"),
            ("1,hm,1,Read,0,4.5,10", "line 2: Size `4.5` is not a whole number"),
            ("1,hm,1,Read,0,4096000000000,10", "line 2: Size 4096000000000 is larger"),
            (
                "1,hm,1,Read,18446744073709551615,4096,10",
                "line 2: Offset 18446744073709551615 is beyond",
            ),
        ];
        for (bad, want) in cases {
            let e = parse(&format!("{good}{bad}\n"), &ParseOptions::default()).expect_err(bad);
            assert!(e.to_string().starts_with(want), "{bad}: got {e}, want {want}");
            assert_eq!(e.at, Location::Line(2));
        }
        let e = parse("Timestamp,Hostname\n", &ParseOptions::default()).expect_err("empty");
        assert!(e.to_string().starts_with("no requests in this msr trace"), "{e}");
    }
}
