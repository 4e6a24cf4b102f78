//! The FIU traces (SNIA IOTTA, "SRCMap" and "I/O deduplication"): lines `ts pid process lba size R/W major minor
//! md5`, separated by white space.
//!
//! `ts` is in ns, `lba` and `size` count 512-byte sectors, the operation is `R` or `W`, `major minor` is the
//! traced device (the volume, `MAJ,MIN`), `md5` the content hash (not used). The traces carry the process id and
//! name, which make the flows, but no sync flag: reads are sync, writes async. Blank lines and lines starting with
//! `#` are skipped.

use super::{
    excerpt, Builder, ParseOptions, Trace, TraceError, TraceFormat, TraceRequest, MAX_REQUEST_BYTES, SECTOR_BYTES,
};
use bfq_sched::Direction;

/// Fields per line.
pub const FIELDS: usize = 9;

/// Reads a FIU trace.
pub fn parse(text: &str, opts: &ParseOptions) -> Result<Trace, TraceError> {
    let mut b = Builder::new(TraceFormat::Fiu, opts);
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            b.skip();
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != FIELDS {
            return Err(TraceError::line(
                n,
                format!(
                    "{} fields, expected {FIELDS}: ts pid process lba size R/W major minor md5",
                    f.len()
                ),
            ));
        }
        let num = |k: usize, what: &str| -> Result<u64, TraceError> {
            f[k].parse::<u64>()
                .map_err(|_| TraceError::line(n, format!("{what} {} is not a whole number", excerpt(f[k]))))
        };
        let time_ns = num(0, "ts")?;
        let pid =
            u32::try_from(num(1, "pid")?).map_err(|_| TraceError::line(n, format!("pid {} is out of range", f[1])))?;
        let lba = num(3, "lba")?;
        let size = num(4, "size")?;
        let dir = match f[5] {
            "R" | "r" => Direction::Read,
            "W" | "w" => Direction::Write,
            other => {
                return Err(TraceError::line(
                    n,
                    format!("operation {} is not R or W", excerpt(other)),
                ))
            }
        };
        let major = num(6, "major")?;
        let minor = num(7, "minor")?;
        let len = size.saturating_mul(SECTOR_BYTES);
        if len > MAX_REQUEST_BYTES {
            return Err(TraceError::line(
                n,
                format!("size {size} sectors is larger than {MAX_REQUEST_BYTES} bytes"),
            ));
        }
        let Some(offset) = lba.checked_mul(SECTOR_BYTES).filter(|o| o.checked_add(len).is_some()) else {
            return Err(TraceError::line(n, format!("lba {lba} is beyond any device")));
        };
        if len == 0 {
            b.skip();
            continue;
        }
        let name = b.name(f[2]);
        let volume = b.volume(&format!("{major},{minor}"));
        b.push(
            TraceRequest {
                time_ns,
                dir,
                sync: dir == Direction::Read,
                offset,
                len,
                pid: Some(pid),
                name: Some(name),
                volume,
                response_ns: None,
            },
            || TraceError::line(n, ""),
        )?;
        if b.full() {
            break;
        }
    }
    b.finish()
}

/// Writes one line of a FIU trace: the inverse of the reader, for tests and fixtures.
pub fn line(time_ns: u64, pid: u32, process: &str, lba: u64, sectors: u64, write: bool) -> String {
    format!(
        "{time_ns} {pid} {process} {lba} {sectors} {} 8 0 00000000000000000000000000000000\n",
        if write { "W" } else { "R" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Location;

    #[test]
    fn lines_become_requests_of_their_processes() {
        let text = format!(
            "# a comment\n{}{}",
            line(89_966_527_079_846, 4604, "syslogd", 1_030_351, 8, true),
            line(89_966_527_089_846, 77, "httpd", 16, 16, false)
        );
        let t = parse(&text, &ParseOptions::default()).expect("parses");
        assert_eq!(t.requests.len(), 2);
        let (w, r) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (w.time_ns, w.dir, w.sync, w.offset, w.len, w.pid),
            (0, Direction::Write, false, 1_030_351 * 512, 4096, Some(4604))
        );
        assert_eq!(t.names[w.name.expect("named") as usize], "syslogd");
        assert_eq!(
            (r.time_ns, r.dir, r.sync, r.offset, r.len),
            (10_000, Direction::Read, true, 8192, 8192)
        );
        assert_eq!(t.volumes, ["8,0"]);
        assert!(!t.has_response_times());
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        let good = "1 2 a 3 8 R 8 0 x\n";
        let cases: [(&str, &str); 8] = [
            ("1 2 a 3 8 R 8 0", "line 2: 8 fields, expected 9"),
            ("t 2 a 3 8 R 8 0 x", "line 2: ts `t` is not a whole number"),
            ("1 99999999999 a 3 8 R 8 0 x", "line 2: pid 99999999999 is out of range"),
            ("1 2 a -3 8 R 8 0 x", "line 2: lba `-3` is not a whole number"),
            ("1 2 a 3 8 X 8 0 x", "line 2: operation `X` is not R or W"),
            ("1 2 a 3 8 R eight 0 x", "line 2: major `eight` is not a whole number"),
            (
                "1 2 a 3 8000000000 R 8 0 x",
                "line 2: size 8000000000 sectors is larger",
            ),
            (
                "1 2 a 36028797018963968 8 R 8 0 x",
                "line 2: lba 36028797018963968 is beyond",
            ),
        ];
        for (bad, want) in cases {
            let e = parse(&format!("{good}{bad}\n"), &ParseOptions::default()).expect_err(bad);
            assert!(e.to_string().starts_with(want), "{bad}: got {e}, want {want}");
            assert_eq!(e.at, Location::Line(2));
        }
    }
}
