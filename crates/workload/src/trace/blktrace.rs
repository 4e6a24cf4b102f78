//! blktrace's binary files: one per CPU (`DEV.blktrace.N`), each a sequence of `struct blk_io_trace` records
//! (version 7) with a payload, merged here by time.
//!
//! The record layout (a fact of the format, `include/uapi/linux/blktrace_api.h`), 48 bytes in the byte order of
//! the machine that recorded it:
//!
//! | offset | field | meaning |
//! |---|---|---|
//! | 0 | `u32 magic` | `0x65617400` with the version (7) in the low byte; gives the byte order |
//! | 4 | `u32 sequence` | per-CPU sequence number |
//! | 8 | `u64 time` | ns (monotonic clock) |
//! | 16 | `u64 sector` | first 512-byte sector |
//! | 24 | `u32 bytes` | length |
//! | 28 | `u32 action` | action code in the low 16 bits (bit 8 = a cgroup id leads the payload), categories above |
//! | 32 | `u32 pid` | process id |
//! | 36 | `u32 device` | device number, major in the top 12 bits, minor in the low 20 |
//! | 40 | `u32 cpu` | CPU |
//! | 44 | `u16 error` | completion error |
//! | 46 | `u16 pdu_len` | payload bytes that follow |
//!
//! Categories (bits 16 and up): read 0, write 1, flush 2, sync 3, queue 4, requeue 5, issue 6, complete 7, fs 8,
//! pc 9, notify 10, ahead 11, meta 12, discard 13, driver data 14, fua 15. Actions: queue 1, back merge 2, front
//! merge 3, get request 4, sleep 5, requeue 6, issue 7, complete 8, plug 9, unplug 10 and 11, insert 12, split 13,
//! bounce 14, remap 15, abort 16, driver data 17. A notify record with action 0 names a process: its payload is the
//! command name (NUL padded).

use super::block::{Action, Assembler, BlockEvent, Kind};
use super::{Builder, ParseOptions, Trace, TraceError, TraceFormat};

/// `BLK_IO_TRACE_MAGIC`: the high 24 bits of the magic field.
const MAGIC: u32 = 0x6561_7400;
/// The supported version (`BLK_IO_TRACE_VERSION`).
const VERSION: u32 = 7;
/// Size of a record without its payload, bytes.
pub const RECORD_BYTES: usize = 48;
/// Category bits (shifted by 16 in the action field).
const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_SYNC: u32 = 1 << 3;
const TC_PC: u32 = 1 << 9;
const TC_NOTIFY: u32 = 1 << 10;
const TC_DISCARD: u32 = 1 << 13;
/// `__BLK_TA_CGROUP`: a cgroup id (8 bytes) leads the payload.
const TA_CGROUP: u32 = 1 << 8;
/// `__BLK_TN_PROCESS`: a notify record naming a process.
const TN_PROCESS: u32 = 0;

/// Whether `head` starts with a blktrace record's magic (either byte order).
pub fn has_magic(head: &[u8]) -> bool {
    head.len() >= 4 && {
        let m = [head[0], head[1], head[2], head[3]];
        u32::from_le_bytes(m) & !0xff == MAGIC || u32::from_be_bytes(m) & !0xff == MAGIC
    }
}

/// One raw record.
#[derive(Debug, Clone, Copy)]
struct Raw {
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    /// File index and record index, for a stable merge and for errors.
    file: usize,
    record: usize,
    byte: u64,
    /// Payload range in the file.
    pdu: (usize, usize),
}

/// Reads the records of one file.
fn records(data: &[u8], file: usize, out: &mut Vec<Raw>) -> Result<(), TraceError> {
    let mut at = 0usize;
    let mut n = 0usize;
    let mut big_endian = None;
    while at < data.len() {
        n += 1;
        let err = |m: String| TraceError::record(n, at as u64, m);
        let left = data.len() - at;
        if left < RECORD_BYTES {
            return Err(err(format!("cut: a record needs {RECORD_BYTES} bytes, {left} left")));
        }
        let h = &data[at..at + RECORD_BYTES];
        let m = [h[0], h[1], h[2], h[3]];
        let be = match big_endian {
            Some(be) => be,
            None if u32::from_le_bytes(m) & !0xff == MAGIC => false,
            None if u32::from_be_bytes(m) & !0xff == MAGIC => true,
            None => {
                return Err(err(format!(
                    "bad magic 0x{:08x}: not a blktrace file",
                    u32::from_le_bytes(m)
                )))
            }
        };
        big_endian = Some(be);
        let u32_at = |o: usize| {
            let b = [h[o], h[o + 1], h[o + 2], h[o + 3]];
            if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            if be {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            }
        };
        let magic = u32_at(0);
        if magic & !0xff != MAGIC {
            return Err(err(format!(
                "bad magic 0x{magic:08x}: the file is corrupt or not blktrace output"
            )));
        }
        if magic & 0xff != VERSION {
            return Err(err(format!(
                "blktrace version {} is not supported (only version {VERSION})",
                magic & 0xff
            )));
        }
        let pdu_len = if be {
            u16::from_be_bytes([h[46], h[47]])
        } else {
            u16::from_le_bytes([h[46], h[47]])
        } as usize;
        if left - RECORD_BYTES < pdu_len {
            return Err(err(format!(
                "cut: a payload of {pdu_len} bytes runs past the end ({} left)",
                left - RECORD_BYTES
            )));
        }
        out.push(Raw {
            time: u64_at(8),
            sector: u64_at(16),
            bytes: u32_at(24),
            action: u32_at(28),
            pid: u32_at(32),
            device: u32_at(36),
            file,
            record: n,
            byte: at as u64,
            pdu: (at + RECORD_BYTES, at + RECORD_BYTES + pdu_len),
        });
        at += RECORD_BYTES + pdu_len;
    }
    Ok(())
}

/// Reads one or more blktrace files (the per-CPU files of one trace, each with its name for errors), merged by
/// time (ties: file order, then record order).
pub fn parse_files(files: &[(&str, &[u8])], opts: &ParseOptions) -> Result<Trace, TraceError> {
    let mut raws = Vec::new();
    for (i, (name, data)) in files.iter().enumerate() {
        records(data, i, &mut raws).map_err(|e| if name.is_empty() { e } else { e.in_file(*name) })?;
    }
    raws.sort_by_key(|r| (r.time, r.file, r.record));
    let mut b = Builder::new(TraceFormat::Blktrace, opts);
    let mut asm = Assembler::new(opts.event);
    let mut names = std::collections::HashMap::new();
    for r in &raws {
        let err_at = || {
            let e = TraceError::record(r.record, r.byte, "");
            match files[r.file].0 {
                "" => e,
                f => e.in_file(f),
            }
        };
        let cats = r.action >> 16;
        let code = r.action & 0xffff & !TA_CGROUP;
        if cats & TC_NOTIFY != 0 {
            if code == TN_PROCESS {
                let mut pdu = &files[r.file].1[r.pdu.0..r.pdu.1];
                if r.action & TA_CGROUP != 0 && pdu.len() >= 8 {
                    pdu = &pdu[8..];
                }
                let end = pdu.iter().position(|&c| c == 0).unwrap_or(pdu.len());
                let comm = String::from_utf8_lossy(&pdu[..end]).into_owned();
                if !comm.is_empty() {
                    let id = b.name(&comm);
                    names.insert(r.pid, id);
                }
            }
            b.skip();
            continue;
        }
        let action = match code {
            1 => Action::Queue,
            4 => Action::GetRq,
            12 => Action::Insert,
            7 => Action::Issue,
            8 => Action::Complete,
            _ => Action::Other,
        };
        let kind = if cats & (TC_DISCARD | TC_PC) != 0 {
            Kind::Other
        } else if cats & TC_WRITE != 0 {
            Kind::Write
        } else if cats & TC_READ != 0 || r.bytes > 0 {
            Kind::Read
        } else {
            Kind::Other
        };
        let ev = BlockEvent {
            dev: (r.device >> 20, r.device & 0xf_ffff),
            action,
            kind,
            sync: cats & TC_SYNC != 0,
            sector: r.sector,
            sectors: u64::from(r.bytes).div_ceil(super::SECTOR_BYTES),
            pid: r.pid,
            name: names.get(&r.pid).copied(),
            time_ns: r.time,
        };
        asm.event(&mut b, &ev, err_at)?;
        if b.full() {
            break;
        }
    }
    b.finish()
}

/// Writes one record in the host's little-endian layout: the inverse of the reader, for tests and fixtures.
#[allow(clippy::too_many_arguments)]
pub fn encode_record(
    out: &mut Vec<u8>,
    sequence: u32,
    time_ns: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    pdu: &[u8],
) {
    out.extend_from_slice(&(MAGIC | VERSION).to_le_bytes());
    out.extend_from_slice(&sequence.to_le_bytes());
    out.extend_from_slice(&time_ns.to_le_bytes());
    out.extend_from_slice(&sector.to_le_bytes());
    out.extend_from_slice(&bytes.to_le_bytes());
    out.extend_from_slice(&action.to_le_bytes());
    out.extend_from_slice(&pid.to_le_bytes());
    out.extend_from_slice(&device.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // cpu
    out.extend_from_slice(&0u16.to_le_bytes()); // error
    out.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
    out.extend_from_slice(pdu);
}

/// The action field of a block event: `code` with the category bits `cats`.
pub const fn action(code: u32, cats: u32) -> u32 {
    code | (cats << 16)
}

/// Category bits of a read, a sync write and a plain write, and the queue, get-request, insert, issue and complete
/// codes, for tests.
pub mod codes {
    /// Read category.
    pub const READ: u32 = super::TC_READ;
    /// Write category.
    pub const WRITE: u32 = super::TC_WRITE;
    /// Sync category.
    pub const SYNC: u32 = super::TC_SYNC;
    /// Notify category.
    pub const NOTIFY: u32 = super::TC_NOTIFY;
    /// Discard category.
    pub const DISCARD: u32 = super::TC_DISCARD;
    /// Queue action.
    pub const QUEUE: u32 = 1;
    /// Get-request action (a request allocated for the bio).
    pub const GET_RQ: u32 = 4;
    /// Insert action (a request put on the scheduler's queue).
    pub const INSERT: u32 = 12;
    /// Issue action.
    pub const ISSUE: u32 = 7;
    /// Complete action.
    pub const COMPLETE: u32 = 8;
}

#[cfg(test)]
mod tests {
    use super::codes::*;
    use super::*;
    use crate::trace::Location;
    use bfq_sched::Direction;

    const DEV: u32 = (7 << 20) | 3;

    fn sample() -> (Vec<u8>, Vec<u8>) {
        let mut cpu0 = Vec::new();
        let mut cpu1 = Vec::new();
        encode_record(
            &mut cpu0,
            0,
            1_000,
            0,
            0,
            action(0, NOTIFY),
            4242,
            DEV,
            b"fio\0\0\0\0\0\0\0\0\0\0\0\0\0",
        );
        encode_record(&mut cpu0, 1, 1_000, 2048, 4096, action(QUEUE, READ), 4242, DEV, &[]);
        encode_record(&mut cpu1, 0, 2_000, 2048, 4096, action(ISSUE, READ), 0, DEV, &[]);
        encode_record(
            &mut cpu0,
            2,
            1_500,
            8192,
            8192,
            action(ISSUE, WRITE | SYNC),
            77,
            DEV,
            &[],
        );
        encode_record(&mut cpu1, 1, 9_000, 2048, 4096, action(COMPLETE, READ), 0, DEV, &[]);
        encode_record(
            &mut cpu1,
            2,
            9_500,
            0,
            4096,
            action(ISSUE, WRITE | DISCARD),
            0,
            DEV,
            &[],
        );
        (cpu0, cpu1)
    }

    #[test]
    fn per_cpu_files_merge_by_time_into_requests() {
        let (a, b) = sample();
        let t = parse_files(&[("x.blktrace.0", &a), ("x.blktrace.1", &b)], &ParseOptions::default()).expect("parses");
        assert_eq!(t.requests.len(), 2);
        let (w, r) = (&t.requests[0], &t.requests[1]);
        assert_eq!(
            (w.time_ns, w.dir, w.sync, w.offset, w.len, w.pid),
            (0, Direction::Write, true, 8192 * 512, 8192, Some(77))
        );
        // Issued from pid 0, queued by fio.
        assert_eq!((r.time_ns, r.dir, r.pid), (500, Direction::Read, Some(4242)));
        assert_eq!(t.names[r.name.expect("named") as usize], "fio");
        assert_eq!(r.response_ns, Some(7_000));
        assert_eq!(t.volumes, ["7,3"]);
    }

    #[test]
    fn a_record_without_a_direction_is_a_read_if_it_carries_data() {
        // As blkparse prints it (RWBS): the write category makes a write, else carrying data makes a read, else
        // the record is no request (a flush or another data-less command). Two issue/complete pairs without read
        // or write category bits: 4096 bytes at sector 100 (a read), 0 bytes at sector 200 (nothing).
        let mut a = Vec::new();
        for (seq, (sector, bytes)) in [(100u64, 4096u32), (200, 0)].into_iter().enumerate() {
            let t = 1_000 * (seq as u64 + 1);
            encode_record(&mut a, 2 * seq as u32, t, sector, bytes, action(ISSUE, 0), 9, DEV, &[]);
            encode_record(
                &mut a,
                2 * seq as u32 + 1,
                t + 500,
                sector,
                bytes,
                action(COMPLETE, 0),
                9,
                DEV,
                &[],
            );
        }
        let t = parse_files(&[("f", &a)], &ParseOptions::default()).expect("parses");
        let got: Vec<_> = t.requests.iter().map(|r| (r.dir, r.offset, r.len)).collect();
        assert_eq!(got, [(Direction::Read, 100 * 512, 4096)]);
    }

    #[test]
    fn a_process_name_after_a_cgroup_id_is_read_past_the_id() {
        // With cgroup tracing, the notify record naming a process carries an 8-byte cgroup id before the name
        // (`__BLK_TA_CGROUP` in the action): the request that pid queued is named "fio", not by the id's bytes.
        let mut a = Vec::new();
        let mut pdu = 0x0102_0304_0506_0708_u64.to_le_bytes().to_vec();
        pdu.extend_from_slice(b"fio\0");
        encode_record(&mut a, 0, 500, 0, 0, action(0, NOTIFY) | TA_CGROUP, 4242, DEV, &pdu);
        encode_record(&mut a, 1, 1_000, 2048, 4096, action(QUEUE, READ), 4242, DEV, &[]);
        encode_record(&mut a, 2, 2_000, 2048, 4096, action(ISSUE, READ), 0, DEV, &[]);
        let t = parse_files(&[("f", &a)], &ParseOptions::default()).expect("parses");
        assert_eq!(t.requests.len(), 1);
        let name = t.requests[0].name.expect("named");
        assert_eq!(t.names[name as usize], "fio");
    }

    #[test]
    fn an_issue_by_the_kernel_belongs_to_the_process_that_got_or_inserted_the_request() {
        // Issue records often come from a kernel thread (pid 0). A request allocated (get-request) by pid 77, or
        // inserted by pid 88, without a queue record, is that process's when issued. A plain write
        // carries no sync category and is async; a sync write is sync.
        let mut a = Vec::new();
        encode_record(&mut a, 0, 1_000, 2048, 4096, action(GET_RQ, WRITE), 77, DEV, &[]);
        encode_record(&mut a, 1, 2_000, 2048, 4096, action(ISSUE, WRITE), 0, DEV, &[]);
        encode_record(&mut a, 2, 3_000, 4096, 4096, action(INSERT, WRITE | SYNC), 88, DEV, &[]);
        encode_record(&mut a, 3, 4_000, 4096, 4096, action(ISSUE, WRITE | SYNC), 0, DEV, &[]);
        let t = parse_files(&[("f", &a)], &ParseOptions::default()).expect("parses");
        let got: Vec<_> = t.requests.iter().map(|r| (r.pid, r.sync)).collect();
        assert_eq!(got, [(Some(77), false), (Some(88), true)]);
    }

    #[test]
    fn bad_records_are_refused_with_record_and_byte() {
        let (a, _) = sample();
        let opts = ParseOptions::default();
        let cut = &a[..a.len() - 10];
        let e = parse_files(&[("f", cut)], &opts).expect_err("cut");
        assert_eq!(
            e.to_string(),
            "f: record 3 at byte 112: cut: a record needs 48 bytes, 38 left"
        );
        let mut bad = a.clone();
        bad[67] ^= 0xff; // the magic of record 2 (its high byte)
        let e = parse_files(&[("", &bad)], &opts).expect_err("magic");
        assert!(e.to_string().starts_with("record 2 at byte 64: bad magic"), "{e}");
        let mut v6 = a.clone();
        v6[0] = 6;
        let e = parse_files(&[("", &v6)], &opts).expect_err("version");
        assert_eq!(
            e.to_string(),
            "record 1 at byte 0: blktrace version 6 is not supported (only version 7)"
        );
        let mut long = a[..RECORD_BYTES].to_vec();
        long[46] = 200;
        let e = parse_files(&[("", &long)], &opts).expect_err("payload");
        assert_eq!(e.at, Location::Record { record: 1, byte: 0 });
        assert!(e.message.contains("payload of 200 bytes"), "{e}");
        let e = parse_files(&[("", b"not a trace at all, really not one of them.......")], &opts).expect_err("magic");
        assert!(e.to_string().contains("not a blktrace file"), "{e}");
    }
}
