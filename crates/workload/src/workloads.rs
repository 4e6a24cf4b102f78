//! The named background workloads of the S suite (docs/BENCHMARKS.md, Workloads): `idle` (`0r0w`), `1r-seq`,
//! `10r-seq`, `10r-rand`, `5r5w-seq`, `5r5w-rand`, and generally `<N>r<M>w-seq|rand` (parsed by [`WorkloadSpec`]):
//! N greedy fio readers and M greedy fio writers with fio's defaults (4 KiB buffered synchronous I/O, depth 1), plus,
//! where the settings say so, a write-rate cap and a periodic `sync`.

use crate::fio::{JobConfig, Pattern, FIO_DEFAULT_BS_BYTES};
use crate::process::{FileId, FileSpec, Placement, Process};
use crate::readers::Reader;
use crate::rng::stream;
use crate::sync::{PeriodicSync, SyncTiming, S_SYNC_PERIOD_NS};
use crate::writers::Writer;
use bfq_sched::Time;

/// Bytes per MiB.
const MIB: u64 = 1 << 20;
/// Bytes per fio "k" (fio's default `kb_base=1024`).
const FIO_KIB: u64 = 1024;

/// Per-file size of S@HEAD, bytes: `FILE_SIZE_MB` is normally 500 MiB (docs/BENCHMARKS.md, Eras).
pub const S36_FILE_BYTES: u64 = 500 * MIB;
/// Total writer rate cap of S@HEAD on rotational devices, fio KiB/s (`MAXRATE=4000`, docs/BENCHMARKS.md, Eras).
pub const S36_MAXRATE_KIB_S: u64 = 4000;
/// Divisor S@HEAD applies to `MAXRATE` for random writers (docs/BENCHMARKS.md, Eras).
pub const S36_RAND_MAXRATE_DIVISOR: u64 = 60;
/// Sequential file size of the SYSTOR'12-era scripts, bytes (`NUM_BLOCKS_CREATE_SEQ=5000` MiB, S@2011).
pub const PAPER_SEQ_FILE_BYTES: u64 = 5000 * MIB;
/// Shared random file size of the SYSTOR'12-era scripts, bytes (50 000 MiB, S@2011).
pub const PAPER_RAND_FILE_BYTES: u64 = 50_000 * MIB;
/// Total writer rate cap of S as of November 2013, fio KiB/s: `MAXRATE=${8-16500}` in
/// `agg_thr-with-greedy_rw/aggthr-with-greedy_rw.sh` and `comm_startup_lat.sh` at Algodev-github/S commit fa47092
/// (2013-11-22), split evenly over the writers, random or sequential, on every device.
pub const S2013_MAXRATE_KIB_S: u64 = 16_500;

/// Which files random readers and writers use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RandFiles {
    /// One file per process, of the sequential file size (S@HEAD since 2017).
    PerProcess,
    /// One file of this many bytes shared by all random readers, and another shared by all random writers
    /// (S@2011: `fio --numjobs=N` on a 50 GB file).
    Shared(u64),
}

/// Settings that differ between versions of S and between benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSettings {
    /// Size of each sequential reader's and writer's file, bytes (also random per-process files).
    pub file_bytes: u64,
    /// Files of random readers and writers.
    pub rand_files: RandFiles,
    /// Total writer rate cap, fio KiB/s (`MAXRATE`); `None` = uncapped.
    pub maxrate_kib_s: Option<u64>,
    /// The cap applies on rotational devices only (S 3.6); otherwise on every device (S of 2013).
    pub maxrate_rotational_only: bool,
    /// Divisor of `MAXRATE` for random writers.
    pub rand_maxrate_divisor: u64,
    /// Period of the background `sync` loop when writers run, ns; `None` = no loop.
    pub sync_period_ns: Option<Time>,
    /// Request size, bytes.
    pub bs: u64,
}

impl WorkloadSettings {
    /// S@HEAD (v3.6) as the start-up, video and kernel-task benchmarks use it: 500 MiB files, per-process random
    /// files, 4000 KiB/s total writer cap on rotational devices (random: /60), `sync` every 2 s when writers run.
    pub fn s36() -> Self {
        WorkloadSettings {
            file_bytes: S36_FILE_BYTES,
            rand_files: RandFiles::PerProcess,
            maxrate_kib_s: Some(S36_MAXRATE_KIB_S),
            maxrate_rotational_only: true,
            rand_maxrate_divisor: S36_RAND_MAXRATE_DIVISOR,
            sync_period_ns: Some(S_SYNC_PERIOD_NS),
            bs: FIO_DEFAULT_BS_BYTES,
        }
    }

    /// S@HEAD as `throughput-sync.sh` uses it: like [`WorkloadSettings::s36`] but uncapped (its `MAXRATE` defaults
    /// to 0).
    pub fn s36_throughput() -> Self {
        WorkloadSettings {
            maxrate_kib_s: None,
            ..Self::s36()
        }
    }

    /// The SYSTOR'12-era scripts (S@2011): 5000 MiB sequential files, one shared 50 000 MiB random file, no cap, no
    /// periodic `sync`.
    pub fn paper() -> Self {
        WorkloadSettings {
            file_bytes: PAPER_SEQ_FILE_BYTES,
            rand_files: RandFiles::Shared(PAPER_RAND_FILE_BYTES),
            maxrate_kib_s: None,
            maxrate_rotational_only: true,
            rand_maxrate_divisor: S36_RAND_MAXRATE_DIVISOR,
            sync_period_ns: None,
            bs: FIO_DEFAULT_BS_BYTES,
        }
    }

    /// S as of November 2013 (Algodev-github/S commit fa47092, 2013-11-22), the version seed 004 used for BFQ
    /// v7r2 under Linux 3.13: the 2011 files (5000 MiB sequential, one shared 50 000 MiB random file each for
    /// readers and writers), a 16 500 KiB/s total writer cap on every device, split evenly over the writers with
    /// no divisor for random ones, and no periodic `sync` (the throughput script syncs only before the run; the
    /// `sync &` every 2 s came with commit fa4abf4, 2016-07-02).
    pub fn s2013() -> Self {
        WorkloadSettings {
            maxrate_kib_s: Some(S2013_MAXRATE_KIB_S),
            maxrate_rotational_only: false,
            rand_maxrate_divisor: 1,
            ..Self::paper()
        }
    }

    /// Rate cap of each of `writers` writers, bytes/s, on a device that is `rotational` or not, computed as S's
    /// shell does: `(MAXRATE [/divisor if random]) / writers` in integer KiB/s. A result of 0 means uncapped, as
    /// fio's `rate=0k` does.
    pub fn writer_rate(&self, writers: u32, random: bool, rotational: bool) -> Option<u64> {
        let applies = rotational || !self.maxrate_rotational_only;
        let total = self.maxrate_kib_s.filter(|_| applies && writers > 0)?;
        let total = if random {
            total / self.rand_maxrate_divisor.max(1)
        } else {
            total
        };
        let per = total / u64::from(writers);
        (per > 0).then_some(per * FIO_KIB)
    }
}

/// Largest number of readers or of writers a workload name may ask for.
pub const MAX_WORKLOAD_PROCESSES: u32 = 10_000;

/// A background workload as a value: how many greedy fio readers and writers, and their access pattern.
///
/// This is the one parser of S's workload names (`idle`, `0r0w`, `1r-seq`, `10r0w-rand`, `5r5w-seq`, `3w-rand`,
/// ...): the simulator, the real targets and the report all read names through [`WorkloadSpec::parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadSpec {
    /// Number of readers.
    pub readers: u32,
    /// Number of writers.
    pub writers: u32,
    /// Access pattern of every reader and writer: `-rand` or `-seq` (the default).
    pub pattern: Pattern,
}

/// A workload name that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workload `{}`: expected idle or <N>r<M>w-seq|rand with N and M up to 10000, e.g. 10r-seq, 5r5w-rand, 0r0w", bfq_sched::text::one_line(.0))]
pub struct WorkloadError(pub String);

impl WorkloadSpec {
    /// The idle workload: no background reader or writer (`idle`, `0r0w`).
    pub const IDLE: WorkloadSpec = WorkloadSpec {
        readers: 0,
        writers: 0,
        pattern: Pattern::Sequential,
    };

    /// Parses `idle`, `0r0w`, `1r-seq`, `10r0w-rand`, `5r5w-seq`, `3w-rand`, ... (ASCII case-insensitive, surrounding
    /// white space ignored; counts up to [`MAX_WORKLOAD_PROCESSES`]; `r` before `w`, each at most once; no suffix
    /// means `-seq`).
    pub fn parse(name: &str) -> Result<WorkloadSpec, WorkloadError> {
        let bad = || WorkloadError(name.to_string());
        let lower = name.trim().to_ascii_lowercase();
        if lower == "idle" {
            return Ok(WorkloadSpec::IDLE);
        }
        let (counts, pattern) = match lower.rsplit_once('-') {
            Some((c, "seq")) => (c, Pattern::Sequential),
            Some((c, "rand")) => (c, Pattern::Random),
            Some(_) => return Err(bad()),
            None => (lower.as_str(), Pattern::Sequential),
        };
        let mut readers = None;
        let mut writers = None;
        let mut digits = String::new();
        for ch in counts.chars() {
            match ch {
                '0'..='9' => digits.push(ch),
                'r' | 'w' => {
                    let n: u32 = digits.parse().map_err(|_| bad())?;
                    if n > MAX_WORKLOAD_PROCESSES {
                        return Err(bad());
                    }
                    // `r` before `w`, each at most once.
                    if writers.is_some() || (ch == 'r' && readers.is_some()) {
                        return Err(bad());
                    }
                    if ch == 'r' {
                        readers = Some(n);
                    } else {
                        writers = Some(n);
                    }
                    digits.clear();
                }
                _ => return Err(bad()),
            }
        }
        if !digits.is_empty() || (readers.is_none() && writers.is_none()) {
            return Err(bad());
        }
        Ok(WorkloadSpec {
            readers: readers.unwrap_or(0),
            writers: writers.unwrap_or(0),
            pattern,
        })
    }

    /// Whether the readers and writers access their files at random offsets.
    pub fn is_random(&self) -> bool {
        self.pattern == Pattern::Random
    }

    /// Whether there is no background reader or writer (whatever the pattern).
    pub fn is_idle(&self) -> bool {
        self.readers == 0 && self.writers == 0
    }

    /// The pattern's suffix in a name and in process names: `seq` or `rand`.
    pub fn pattern_name(&self) -> &'static str {
        match self.pattern {
            Pattern::Sequential => "seq",
            Pattern::Random => "rand",
        }
    }

    /// The canonical name, in S's form `<N>r<M>w-seq|rand` (e.g. `10r0w-seq`; idle is `0r0w-seq`).
    pub fn name(&self) -> String {
        self.to_string()
    }
}

impl std::fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}r{}w-{}", self.readers, self.writers, self.pattern_name())
    }
}

impl std::str::FromStr for WorkloadSpec {
    type Err = WorkloadError;

    fn from_str(name: &str) -> Result<WorkloadSpec, WorkloadError> {
        WorkloadSpec::parse(name)
    }
}

/// A background workload ready to run: the files it needs (scenario ids `base..`, in order) and its processes.
pub struct Workload {
    /// Canonical name (`10r0w-seq`).
    pub name: String,
    /// Files to create, for ids `base`, `base + 1`, ….
    pub files: Vec<FileSpec>,
    /// Readers, then writers, then the `sync` loop if any.
    pub processes: Vec<Box<dyn Process>>,
}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.processes.iter().map(|p| p.flow().name).collect();
        f.debug_struct("Workload")
            .field("name", &self.name)
            .field("files", &self.files)
            .field("processes", &names)
            .finish()
    }
}

fn big_file(name: String, size: u64, prewritten: bool) -> FileSpec {
    FileSpec {
        name,
        size,
        placement: Placement::Contiguous,
        prewritten,
    }
}

/// Builds the workload named `name` (see [`WorkloadSpec::parse`]) with `settings`, on a device that is `rotational`
/// or not (the write cap applies to rotational devices only), with files from id `base` on and random streams
/// derived from `seed` and each process's name.
pub fn build(
    name: &str,
    settings: &WorkloadSettings,
    rotational: bool,
    base: FileId,
    seed: u64,
) -> Result<Workload, WorkloadError> {
    Ok(build_spec(WorkloadSpec::parse(name)?, settings, rotational, base, seed))
}

/// Builds the workload `spec`; see [`build`].
pub fn build_spec(
    spec: WorkloadSpec,
    settings: &WorkloadSettings,
    rotational: bool,
    base: FileId,
    seed: u64,
) -> Workload {
    let mut files: Vec<FileSpec> = Vec::new();
    let mut processes: Vec<Box<dyn Process>> = Vec::new();
    let pattern = spec.pattern;
    let kind = spec.pattern_name();
    let shared = match settings.rand_files {
        RandFiles::Shared(size) if spec.is_random() => Some(size),
        _ => None,
    };
    let add_file = |files: &mut Vec<FileSpec>, f: FileSpec| -> FileId {
        files.push(f);
        base + (files.len() as FileId - 1)
    };

    // Readers: S's `largefile<i>`, prewritten (`dd if=/dev/zero`).
    let shared_read = shared.map(|size| {
        (
            add_file(&mut files, big_file("largefile_rand".into(), size, true)),
            size,
        )
    });
    for i in 0..spec.readers {
        let (file, size) = match shared_read {
            Some(fs) => fs,
            None => (
                add_file(&mut files, big_file(format!("largefile{i}"), settings.file_bytes, true)),
                settings.file_bytes,
            ),
        };
        let name = format!("{kind}reader{i}");
        let mut cfg = JobConfig::new(name.clone(), file, size, pattern);
        cfg.bs = settings.bs;
        processes.push(Box::new(Reader::new(cfg, stream(seed, &name))));
    }

    // Writers: S's `largefile_write<i>`, deleted before the run, so they start empty.
    let rate = settings.writer_rate(spec.writers, spec.is_random(), rotational);
    let shared_write = if spec.writers > 0 {
        shared.map(|size| {
            (
                add_file(&mut files, big_file("largefile_write_rand".into(), size, false)),
                size,
            )
        })
    } else {
        None
    };
    for i in 0..spec.writers {
        let (file, size) = match shared_write {
            Some(fs) => fs,
            None => (
                add_file(
                    &mut files,
                    big_file(format!("largefile_write{i}"), settings.file_bytes, false),
                ),
                settings.file_bytes,
            ),
        };
        let name = format!("{kind}writer{i}");
        let mut cfg = JobConfig::new(name.clone(), file, size, pattern);
        cfg.bs = settings.bs;
        cfg.rate = rate;
        processes.push(Box::new(Writer::new(cfg, stream(seed, &name))));
    }

    if spec.writers > 0 {
        if let Some(period) = settings.sync_period_ns {
            processes.push(Box::new(PeriodicSync::new("sync", period, SyncTiming::AfterCompletion)));
        }
    }
    Workload {
        name: spec.name(),
        files,
        processes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Op;
    use crate::test_exec::Exec;

    /// S of 2013 caps writers on flash too, splits its 16 500 KiB/s evenly with no divisor for random writers,
    /// and has no periodic sync; S 3.6 caps rotational devices only, random writers at a sixtieth.
    #[test]
    fn the_2013_settings_cap_every_device_and_never_sync() {
        let s = WorkloadSettings::s2013();
        assert_eq!(s.sync_period_ns, None);
        assert_eq!(s.file_bytes, PAPER_SEQ_FILE_BYTES);
        assert_eq!(s.writer_rate(5, false, true), Some(3300 * FIO_KIB));
        assert_eq!(s.writer_rate(5, true, false), Some(3300 * FIO_KIB));
        let c = WorkloadSettings::s36();
        assert!(c.sync_period_ns.is_some());
        assert_eq!(c.writer_rate(5, false, false), None);
        assert_eq!(c.writer_rate(5, true, true), Some(13 * FIO_KIB));
    }

    /// Includes the names on which the report's former second parser (`report::parse_rw`, `is_idle_workload`)
    /// disagreed with this one; the report now asks this parser, so these are the answers everywhere:
    /// - the report needed a `-seq`/`-rand` suffix to rank a name (`10r`, `1r0w`); the default pattern is sequential;
    /// - it compared case-sensitively and did not trim (` 1R-Seq `);
    /// - it required an `r` part, so writers-only names (`0w`, `3w-rand`) had no rank and were never idle;
    /// - it took `none` and any `0r0w-<anything>` as idle, accepted `+1` (Rust's integer parsing) and had no upper
    ///   limit (`10001r-seq`).
    #[test]
    fn names_parse_including_those_the_two_former_copies_disagreed_on() {
        for (name, want) in [
            ("idle", (0, 0, false)),
            ("0r0w", (0, 0, false)),
            ("0r0w-seq", (0, 0, false)),
            ("1r-seq", (1, 0, false)),
            ("10r-seq", (10, 0, false)),
            ("10r0w-rand", (10, 0, true)),
            ("5r5w-seq", (5, 5, false)),
            ("5R5W-RAND", (5, 5, true)),
            // Disagreements with the report's former parser:
            ("10r", (10, 0, false)),
            ("1r0w", (1, 0, false)),
            (" 1R-Seq ", (1, 0, false)),
            ("0w", (0, 0, false)),
            ("3w-rand", (0, 3, true)),
            ("10000r-seq", (10_000, 0, false)),
        ] {
            let got = WorkloadSpec::parse(name).map(|w| (w.readers, w.writers, w.is_random()));
            assert_eq!(got, Ok(want), "{name}");
        }
        let bad = [
            "",
            "r-seq",
            "5r5w-mixed",
            "5x",
            "5w5r",
            "5r5r",
            "10",
            "99999r",
            "-seq",
            "5r5w-",
        ];
        // Disagreements with the report's former parser:
        let disputed = ["none", "0r0w-mixed", "+1r-seq", "10001r-seq", "1r-seq-x"];
        for name in bad.iter().chain(&disputed) {
            assert!(WorkloadSpec::parse(name).is_err(), "{name}");
        }
        // Idle is about the counts, not the pattern.
        assert!(WorkloadSpec::parse("0r0w-rand").is_ok_and(|w| w.is_idle()));
        assert!(WorkloadSpec::parse("idle").is_ok_and(|w| w.is_idle() && w == WorkloadSpec::IDLE));
        assert!(!WorkloadSpec::parse("1r").is_ok_and(|w| w.is_idle()));
    }

    #[test]
    fn canonical_names_round_trip() {
        for (given, canonical) in [
            ("idle", "0r0w-seq"),
            ("1r-seq", "1r0w-seq"),
            ("10r-rand", "10r0w-rand"),
            ("5r5w-seq", "5r5w-seq"),
            ("3w-rand", "0r3w-rand"),
        ] {
            let spec: WorkloadSpec = given.parse().expect("parses");
            assert_eq!(spec.name(), canonical);
            assert_eq!(spec.to_string(), canonical);
            assert_eq!(WorkloadSpec::parse(canonical), Ok(spec));
        }
    }

    fn names(w: &Workload) -> Vec<String> {
        w.processes.iter().map(|p| p.flow().name).collect()
    }

    #[test]
    fn counts_and_files_current_s() {
        let s = WorkloadSettings::s36();
        let idle = build("idle", &s, true, 0, 1).expect("builds");
        assert!(idle.processes.is_empty() && idle.files.is_empty());
        let w = build("10r-seq", &s, true, 3, 1).expect("builds");
        assert_eq!(w.processes.len(), 10);
        assert_eq!(w.files.len(), 10);
        assert!(w.files.iter().all(|f| f.size == 500 * MIB && f.prewritten));
        assert_eq!(names(&w)[9], "seqreader9");
        let w = build("5r5w-seq", &s, true, 0, 1).expect("builds");
        assert_eq!(w.processes.len(), 11);
        assert_eq!(names(&w).last().map(String::as_str), Some("sync"));
        assert_eq!(w.files.iter().filter(|f| !f.prewritten).count(), 5);
        let w = build("10r-rand", &s, true, 0, 1).expect("builds");
        assert_eq!((w.processes.len(), w.files.len()), (10, 10));
        let w = build("5r5w-rand", &s, false, 0, 1).expect("builds");
        assert_eq!((w.processes.len(), w.files.len()), (11, 10));
    }

    #[test]
    fn counts_and_files_paper() {
        let s = WorkloadSettings::paper();
        let w = build("10r-rand", &s, true, 0, 1).expect("builds");
        assert_eq!((w.processes.len(), w.files.len()), (10, 1));
        assert_eq!(w.files[0].size, 50_000 * MIB);
        let w = build("5r5w-rand", &s, true, 0, 1).expect("builds");
        assert_eq!((w.processes.len(), w.files.len()), (10, 2)); // no sync loop in the paper's scripts
        let w = build("5r5w-seq", &s, true, 0, 1).expect("builds");
        assert_eq!((w.processes.len(), w.files.len()), (10, 10));
        assert!(w.files.iter().all(|f| f.size == 5000 * MIB));
    }

    #[test]
    fn writer_caps_follow_s() {
        let s = WorkloadSettings::s36();
        assert_eq!(s.writer_rate(5, false, true), Some(800 * 1024));
        assert_eq!(s.writer_rate(5, true, true), Some(13 * 1024)); // 4000/60 = 66, 66/5 = 13
        assert_eq!(s.writer_rate(5, false, false), None);
        assert_eq!(s.writer_rate(0, false, true), None);
        assert_eq!(s.writer_rate(100, true, true), None); // rate=0k: uncapped
        assert_eq!(WorkloadSettings::s36_throughput().writer_rate(5, false, true), None);
        assert_eq!(WorkloadSettings::paper().writer_rate(5, false, true), None);
    }

    #[test]
    fn processes_use_their_files_and_defaults() {
        let w = build("2r2w-rand", &WorkloadSettings::s36(), true, 7, 9).expect("builds");
        let mut used = Vec::new();
        for mut p in w.processes.into_iter().take(4) {
            let mut ex = Exec::new(1000, 0);
            ex.run(p.as_mut(), 0, 50_000_000);
            let first = ex.issued.first().map(|i| i.op.clone());
            match first {
                Some(Op::Read { file, len, mode, .. }) | Some(Op::Write { file, len, mode, .. }) => {
                    assert_eq!((len, mode), (4096, crate::IoMode::Buffered));
                    used.push(file);
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(used, vec![7, 8, 9, 10]);
    }
}
