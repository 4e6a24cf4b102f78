//! An iozone-style throughput test, one process per thread (`iozone -s <size> -r <record> -i 0 -i 1 -t <threads>`):
//! write the file sequentially, re-write it, read it, re-read it, phase after phase, one record at a time, and report
//! each phase's bytes and duration ([`ProcessReport::phases`]).
//!
//! There is no iozone in S (docs/BENCHMARKS.md, iozone); the reference tables (seed 003: `-s24g -r512 -i 0 -i 1
//! -t 1|10`) report Write, re-write, read, re-read in KiB/s. Threads are independent processes; iozone's throughput
//! mode, where all threads start each phase together, is the benchmark runner's job (it runs one phase per process,
//! `bfq_suite::benchmarks::run_iozone`). iozone's "write" includes creating the file, which here is a file that
//! starts empty ([`FileSpec::prewritten`] false).

use crate::process::{
    Actions, Event, FileId, FileSpec, FlowSpec, IoMode, Op, PhaseReport, Placement, Process, ProcessReport,
};
use bfq_sched::Time;

/// Record size of the reference runs, bytes (`iozone -r512`: 512 KiB).
pub const IOZONE_REFERENCE_RECORD_BYTES: u64 = 512 * 1024;

/// One iozone test phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IozonePhase {
    /// First sequential write of the file (`-i 0`, "Write").
    Write,
    /// Second sequential write over the existing file (`-i 0`, "re-write").
    Rewrite,
    /// Sequential read (`-i 1`, "read").
    Read,
    /// Second sequential read (`-i 1`, "re-read").
    Reread,
}

impl IozonePhase {
    /// Name as reported.
    pub fn name(self) -> &'static str {
        match self {
            IozonePhase::Write => "write",
            IozonePhase::Rewrite => "rewrite",
            IozonePhase::Read => "read",
            IozonePhase::Reread => "reread",
        }
    }
    fn writes(self) -> bool {
        matches!(self, IozonePhase::Write | IozonePhase::Rewrite)
    }
    /// `-i 0 -i 1`: write, re-write, read, re-read.
    pub const WRITE_READ: [IozonePhase; 4] = [
        IozonePhase::Write,
        IozonePhase::Rewrite,
        IozonePhase::Read,
        IozonePhase::Reread,
    ];
}

/// Settings of one iozone thread.
#[derive(Debug, Clone, PartialEq)]
pub struct IozoneConfig {
    /// Flow name.
    pub name: String,
    /// The thread's file.
    pub file: FileId,
    /// File size, bytes (`-s`).
    pub file_size: u64,
    /// Record (operation) size, bytes (`-r`); 0 is treated as 1.
    pub record: u64,
    /// Buffered, or O_DIRECT (`-I`).
    pub mode: IoMode,
    /// Include an `fsync` at the end of each write phase in its time (`-e`).
    pub fsync_writes: bool,
    /// Phases, in order.
    pub phases: Vec<IozonePhase>,
}

impl IozoneConfig {
    /// `-s file_size -r 512 -i 0 -i 1`, buffered, without `-e`.
    pub fn new(name: impl Into<String>, file: FileId, file_size: u64) -> Self {
        IozoneConfig {
            name: name.into(),
            file,
            file_size,
            record: IOZONE_REFERENCE_RECORD_BYTES,
            mode: IoMode::Buffered,
            fsync_writes: false,
            phases: IozonePhase::WRITE_READ.to_vec(),
        }
    }
}

/// One iozone thread.
#[derive(Debug, Clone)]
pub struct Iozone {
    cfg: IozoneConfig,
    started: bool,
    phase: usize,
    phase_start: Time,
    phase_bytes: u64,
    offset: u64,
    in_flight: Option<u64>,
    fsyncing: bool,
    next_tag: u64,
    done: bool,
    report: ProcessReport,
}

impl Iozone {
    /// A thread with the given settings.
    pub fn new(mut cfg: IozoneConfig) -> Self {
        cfg.record = cfg.record.max(1);
        Iozone {
            cfg,
            started: false,
            phase: 0,
            phase_start: 0,
            phase_bytes: 0,
            offset: 0,
            in_flight: None,
            fsyncing: false,
            next_tag: 1,
            done: false,
            report: ProcessReport::default(),
        }
    }

    fn issue(&mut self, op: Op, out: &mut Actions) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.in_flight = Some(tag);
        out.issue(tag, op);
    }

    /// Issues the next operation of the current phase, or closes phases that are finished; exits after the last.
    fn step(&mut self, now: Time, out: &mut Actions) {
        while let Some(&ph) = self.cfg.phases.get(self.phase) {
            if self.offset < self.cfg.file_size {
                if self.offset == 0 && self.phase_bytes == 0 {
                    self.phase_start = now;
                }
                let len = self.cfg.record.min(self.cfg.file_size - self.offset);
                let (file, offset, mode) = (self.cfg.file, self.offset, self.cfg.mode);
                self.offset += len;
                let op = if ph.writes() {
                    Op::Write {
                        file,
                        offset,
                        len,
                        mode,
                    }
                } else {
                    Op::Read {
                        file,
                        offset,
                        len,
                        mode,
                        meta: false,
                    }
                };
                self.issue(op, out);
                return;
            }
            if ph.writes() && self.cfg.fsync_writes && !self.fsyncing {
                self.fsyncing = true;
                self.issue(Op::Fsync { file: self.cfg.file }, out);
                return;
            }
            let ns = if self.cfg.file_size == 0 {
                0
            } else {
                now - self.phase_start
            };
            self.report.phases.push(PhaseReport {
                name: ph.name().to_string(),
                bytes: self.phase_bytes,
                ns,
            });
            self.phase += 1;
            self.phase_bytes = 0;
            self.offset = 0;
            self.fsyncing = false;
        }
        self.done = true;
        out.exit = true;
    }

    /// The thread's settings.
    pub fn config(&self) -> &IozoneConfig {
        &self.cfg
    }

    /// The thread's file as the scenario must create it (empty, contiguous).
    pub fn file_spec(&self) -> FileSpec {
        FileSpec {
            name: format!("{}.tmp", self.cfg.name),
            size: self.cfg.file_size,
            placement: Placement::Contiguous,
            prewritten: false,
        }
    }
}

impl Process for Iozone {
    fn flow(&self) -> FlowSpec {
        FlowSpec::named(self.cfg.name.clone())
    }

    fn on_event(&mut self, event: Event, now: Time, out: &mut Actions) {
        if self.done {
            return;
        }
        match event {
            Event::Start if !self.started => {
                self.started = true;
                self.step(now, out);
            }
            Event::Completed { tag, result } if self.in_flight == Some(tag) => {
                self.in_flight = None;
                match result {
                    Ok(b) => {
                        self.report.ops += 1;
                        if !self.fsyncing {
                            self.phase_bytes += b;
                            match self.cfg.phases.get(self.phase) {
                                Some(ph) if ph.writes() => self.report.written_bytes += b,
                                _ => self.report.read_bytes += b,
                            }
                        }
                    }
                    Err(_) => self.report.errors += 1,
                }
                self.step(now, out);
            }
            _ => {}
        }
    }

    fn report(&self) -> ProcessReport {
        self.report.clone()
    }
}

/// `iozone -t threads`: `threads` processes `iozone0..`, thread *i* on file `base + i`, each of `file_size` bytes
/// with `record`-byte records; returns the files to create (in order, for ids `base..`) and the processes.
pub fn iozone_threads(threads: u32, base: FileId, file_size: u64, record: u64) -> (Vec<FileSpec>, Vec<Iozone>) {
    let procs: Vec<Iozone> = (0..threads)
        .map(|i| {
            let mut c = IozoneConfig::new(format!("iozone{i}"), base + i, file_size);
            c.record = record;
            Iozone::new(c)
        })
        .collect();
    (procs.iter().map(Iozone::file_spec).collect(), procs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_exec::Exec;

    #[test]
    fn phases_in_order_with_bytes_and_times() {
        let mut c = IozoneConfig::new("iozone0", 4, 3 * 512 * 1024 + 1000);
        c.fsync_writes = true;
        let mut z = Iozone::new(c);
        let mut ex = Exec::new(1_000, 1);
        let exit = ex.run(&mut z, 10, u64::MAX).expect("exits");
        let r = z.report();
        let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, vec!["write", "rewrite", "read", "reread"]);
        let size = 3 * 512 * 1024 + 1000;
        assert!(r.phases.iter().all(|p| p.bytes == size));
        // 4 records per phase at 1 µs + 1 ns/byte each, plus a 1 µs fsync in the write phases.
        let data_ns = 4 * 1_000 + size;
        assert_eq!(
            r.phases.iter().map(|p| p.ns).collect::<Vec<_>>(),
            vec![data_ns + 1000, data_ns + 1000, data_ns, data_ns]
        );
        assert_eq!(exit, 10 + 4 * data_ns + 2000);
        assert_eq!((r.written_bytes, r.read_bytes), (2 * size, 2 * size));
        // Operation order: 4 writes + fsync, 4 writes + fsync, 4 reads, 4 reads.
        let kinds: String = ex
            .issued
            .iter()
            .map(|i| match i.op {
                Op::Write { .. } => 'w',
                Op::Read { .. } => 'r',
                Op::Fsync { .. } => 'f',
                Op::Sync => 's',
                Op::Invalidate { .. } => 'i',
            })
            .collect();
        assert_eq!(kinds, "wwwwfwwwwfrrrrrrrr");
        assert!(matches!(
            ex.issued[3].op,
            Op::Write {
                offset: 1_572_864,
                len: 1000,
                ..
            }
        ));
        assert_eq!(ex.max_outstanding, 1);
        assert!(r.phases[0].bytes_per_s() > 0.0);
    }

    #[test]
    fn threads_get_their_own_files() {
        let (files, procs) = iozone_threads(10, 5, 1 << 30, IOZONE_REFERENCE_RECORD_BYTES);
        assert_eq!((files.len(), procs.len()), (10, 10));
        assert_eq!(procs[9].flow().name, "iozone9");
        assert!(files.iter().all(|f| f.size == 1 << 30 && !f.prewritten));
        let mut z = Iozone::new(IozoneConfig::new("empty", 0, 0));
        let mut ex = Exec::new(1, 0);
        assert_eq!(ex.run(&mut z, 0, u64::MAX), Some(0));
        assert_eq!(z.report().phases.len(), 4);
    }
}
