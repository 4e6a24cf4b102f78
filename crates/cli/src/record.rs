//! `bfq record`: records a real command's cold-cache start-up I/O into an application profile.
//!
//! Steps: `sync`; drop the page cache (`/proc/sys/vm/drop_caches`); create a private ftrace instance
//! (`instances/bfq-record-PID` under tracefs, mounting tracefs if it is not mounted) with the block, filemap and fork
//! events on; run the command in its own process group until it exits (or the timeout, or Ctrl-C, kills the group);
//! stop tracing; remove the instance (and unmount tracefs if this run mounted it), on every path out, errors and
//! signals included. The machine's global tracing settings, its devices and their schedulers are never touched: the
//! instance has its own buffer, clock and event switches. The trace is then turned into a profile by
//! `bfq_workload::record`.

use anyhow::{anyhow, bail, Context, Result};
use bfq_workload::record::{
    assemble::{MARK_END, MARK_ROOT, MARK_START},
    profile_from_trace, AssembleOptions, Dev, MapOptions, RecordSummary, DEFAULT_MERGE_GAP_BYTES,
};
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Arguments of `bfq record`.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// Write the profile here (default: standard output).
    #[arg(long, value_name = "PROFILE")]
    out: Option<PathBuf>,
    /// Profile name (default: the command's file name).
    #[arg(long)]
    name: Option<String>,
    /// Kill the command after this long (e.g. 60s, 500ms, 2m); what was read until then is kept.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    timeout: Duration,
    /// Also count reads by processes with this command name (repeatable), e.g. Xvfb for an X client's fonts.
    #[arg(long = "also-comm", value_name = "COMM")]
    also_comm: Vec<String>,
    /// Reads less than this many bytes apart on the device share one profile file.
    #[arg(long, default_value_t = DEFAULT_MERGE_GAP_BYTES, value_name = "BYTES")]
    merge_gap: u64,
    /// Save the raw ftrace text here.
    #[arg(long, value_name = "FILE")]
    keep_trace: Option<PathBuf>,
    /// Make the profile from a trace saved with --keep-trace instead of running a command (no root needed).
    #[arg(long, value_name = "FILE", conflicts_with = "cmd")]
    from_trace: Option<PathBuf>,
    /// Capacity of the traced device in 512-byte sectors (default: read from sysfs).
    #[arg(long, value_name = "SECTORS")]
    capacity: Option<u64>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    cmd: Vec<String>,
}

/// Parses `60s`, `500ms`, `2m`, `1.5s` or plain seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, "s"),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: give e.g. 60s, 500ms or 2m"))?;
    let secs = match unit {
        "ms" => v / 1e3,
        "s" => v,
        "m" | "min" => v * 60.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s or m)")),
    };
    if !(secs > 0.0 && secs <= bfq_suite::limits::MAX_DURATION_S) {
        return Err(format!("`{s}` is out of range: give more than 0 and at most 24 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Runs `bfq record`.
pub fn record(a: RecordArgs) -> Result<()> {
    // Checked before the command runs: nothing is recorded in vain.
    let capacity_given = a.capacity.map(bfq_suite::limits::capacity_sectors).transpose()?;
    if let Some(out) = &a.out {
        check_out_file(out)?;
    }
    let (trace, header) = if let Some(path) = &a.from_trace {
        let t = fs::read_to_string(path).with_context(|| format!("cannot read trace {}", path.display()))?;
        if t.trim().is_empty() {
            bail!(
                "trace {} is empty: save one with `bfq record --keep-trace FILE -- CMD`",
                path.display()
            );
        }
        (t, format!("# made by bfq record --from-trace {}\n", path.display()))
    } else {
        if a.cmd.is_empty() {
            bail!("no command given: use bfq record [OPTIONS] -- CMD [ARGS...]");
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("bfq record needs root (to drop the page cache and trace the block layer): run it as root, e.g. sudo bfq record -- {}", a.cmd.join(" "));
        }
        let (t, note) = trace_command(&a.cmd, a.timeout)?;
        let mut h = format!("# recorded by bfq record: {}\n", shell_words(&a.cmd));
        if let Ok(rel) = fs::read_to_string("/proc/sys/kernel/osrelease") {
            h.push_str(&format!(
                "# kernel {}; cold page cache (sync; drop_caches 3)\n",
                rel.trim()
            ));
        }
        if !a.also_comm.is_empty() {
            h.push_str(&format!(
                "# also counted: reads by processes named {}\n",
                a.also_comm.join(", ")
            ));
        }
        h.push_str(&note);
        (t, h)
    };
    if let Some(path) = &a.keep_trace {
        fs::write(path, &trace).with_context(|| format!("cannot write trace {}", path.display()))?;
    }
    let name = a.name.clone().unwrap_or_else(|| {
        a.cmd
            .first()
            .and_then(|c| Path::new(c).file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "recorded".into())
    });
    let assemble_opts = AssembleOptions {
        root_pid: None,
        also_comms: a.also_comm.clone(),
        device: None,
    };
    // The device is known only once the trace is assembled; find it first to read its capacity.
    let rec = bfq_workload::record::assemble(trace.lines(), &assemble_opts)?;
    let dev = rec.dev.ok_or_else(|| {
        anyhow!("the command read nothing from a block device (was it already running, or did it fail to start?)")
    })?;
    let capacity = match capacity_given {
        Some(c) => c,
        None => device_capacity(dev)?,
    };
    let map_opts = MapOptions {
        name,
        capacity_sectors: capacity,
        merge_gap_bytes: a.merge_gap,
    };
    let (profile, rec) = profile_from_trace(&trace, &assemble_opts, &map_opts)?;
    let summary = RecordSummary::of(&rec, &profile);
    let st = profile.stats();
    let text = format!(
        "{header}# device {dev} ({}), {capacity} sectors\n{}{}",
        device_name(dev).unwrap_or_else(|| "?".into()),
        summary.comment(),
        profile.to_text()
    );
    match &a.out {
        Some(path) => write_atomically(path, &text)?,
        None => print!("{text}"),
    }
    eprintln!(
        "recorded {}: {} requests, {:.2} MB, {:.1} % random, {} RA, {} profile files ({} real files), start-up I/O done after {}",
        profile.name,
        st.requests,
        st.bytes as f64 / 1e6,
        100.0 * st.random_fraction(),
        st.readahead,
        st.files,
        summary.files_touched,
        summary
            .io_span_us
            .map_or("?".into(), |u| format!("{:.1} ms", u as f64 / 1e3))
    );
    if summary.lost_events > 0 {
        eprintln!(
            "warning: the kernel lost {} trace events: the profile may miss reads",
            summary.lost_events
        );
    }
    if let Some(path) = &a.out {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Checks an `--out` profile path before any work: it must not be a directory, and its directory must exist.
fn check_out_file(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!(
            "--out {} is a directory: give a file path such as {}/app.profile",
            path.display(),
            path.display()
        );
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        bail!(
            "--out {}: directory {} does not exist: create it first",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}

/// Writes `text` to a hidden file beside `path` and renames it into place, so `path` is whole or untouched.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.bfq-partial-{}", std::process::id()));
    let res = fs::write(&partial, text).and_then(|()| fs::rename(&partial, path));
    if res.is_err() {
        let _ = fs::remove_file(&partial);
    }
    res.with_context(|| format!("cannot write {}", path.display()))
}

fn shell_words(cmd: &[String]) -> String {
    cmd.iter()
        .map(|w| {
            if w.is_empty() || w.contains(|c: char| c.is_whitespace() || "'\"\\$`#".contains(c)) {
                format!("'{}'", w.replace('\'', "'\\''"))
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace('\n', " ")
}

/// Capacity of a block device in 512-byte sectors, from sysfs (for a partition: its own size).
fn device_capacity(dev: Dev) -> Result<u64> {
    let p = format!("/sys/dev/block/{}:{}/size", dev.major, dev.minor);
    let s = fs::read_to_string(&p)
        .with_context(|| format!("cannot read the capacity of device {dev} ({p}); give --capacity"))?;
    s.trim()
        .parse()
        .with_context(|| format!("bad capacity in {p}: `{}`", s.trim()))
}

/// Kernel name of a block device (e.g. `vda`), from sysfs.
fn device_name(dev: Dev) -> Option<String> {
    let uevent = fs::read_to_string(format!("/sys/dev/block/{}:{}/uevent", dev.major, dev.minor)).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------------------------------
// Tracing session

/// Set by the signal handler; checked by the wait loop.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The signal that interrupted us.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work: two atomic stores.
    SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP while alive (so the guards below run), restoring the previous handlers on drop.
struct SignalGuard {
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalGuard {
    fn install() -> Result<Self> {
        INTERRUPTED.store(false, Ordering::SeqCst);
        let mut old = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: a zeroed sigaction is a valid value; the handler only stores atomics; `prev` is written by
            // the kernel.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &sa, &mut prev) != 0 {
                    return Err(std::io::Error::last_os_error()).context("cannot install a signal handler");
                }
                old.push((sig, prev));
            }
        }
        Ok(SignalGuard { old })
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores a sigaction previously returned by the kernel.
            unsafe {
                libc::sigaction(*sig, prev, std::ptr::null_mut());
            }
        }
    }
}

/// The tracefs mount, mounted by us if it was not mounted (then unmounted on drop).
struct Tracefs {
    root: PathBuf,
    mounted_by_us: Option<PathBuf>,
}

impl Tracefs {
    fn open() -> Result<Self> {
        for root in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
            if Path::new(root).join("instances").is_dir() {
                return Ok(Tracefs {
                    root: root.into(),
                    mounted_by_us: None,
                });
            }
        }
        let filesystems = fs::read_to_string("/proc/filesystems").unwrap_or_default();
        let attempts: [(&str, &str, &str); 2] = [
            ("tracefs", "/sys/kernel/tracing", "/sys/kernel/tracing"),
            ("debugfs", "/sys/kernel/debug", "/sys/kernel/debug/tracing"),
        ];
        let mut why = Vec::new();
        for (fstype, target, root) in attempts {
            if !filesystems.contains(fstype) {
                why.push(format!("{fstype} is not supported by this kernel"));
                continue;
            }
            match mount(fstype, target) {
                Ok(()) => {
                    if Path::new(root).join("instances").is_dir() {
                        return Ok(Tracefs {
                            root: root.into(),
                            mounted_by_us: Some(target.into()),
                        });
                    }
                    let _ = umount(Path::new(target));
                    why.push(format!("{fstype} mounted on {target} has no tracing instances"));
                }
                Err(e) => why.push(format!("mount {fstype} on {target}: {e}")),
            }
        }
        bail!(
            "block-layer tracing is unavailable ({}): the kernel needs CONFIG_FTRACE with the block and filemap trace events",
            why.join("; ")
        )
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if let Some(target) = &self.mounted_by_us {
            if let Err(e) = umount(target) {
                eprintln!(
                    "bfq record: warning: cannot unmount {} ({e}); remove it with: umount {}",
                    target.display(),
                    target.display()
                );
            }
        }
    }
}

fn cstr(s: &str) -> std::ffi::CString {
    std::ffi::CString::new(s).expect("no NUL in fixed strings")
}

fn mount(fstype: &str, target: &str) -> std::io::Result<()> {
    let (src, t, ty) = (cstr("nodev"), cstr(target), cstr(fstype));
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), t.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

fn umount(target: &Path) -> std::io::Result<()> {
    let t = cstr(&target.to_string_lossy());
    // SAFETY: valid NUL-terminated string.
    if unsafe { libc::umount2(t.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Events enabled in the instance, with an optional filter (reads only, to keep the buffer small).
const EVENTS: [(&str, Option<&str>); 5] = [
    ("block/block_bio_queue", Some("rwbs ~ \"*R*\"")),
    ("block/block_rq_issue", Some("rwbs ~ \"*R*\"")),
    ("block/block_rq_complete", Some("rwbs ~ \"*R*\"")),
    ("filemap/mm_filemap_add_to_page_cache", None),
    ("sched/sched_process_fork", None),
];

/// A private ftrace instance; stopped and removed on drop.
struct Instance {
    dir: PathBuf,
}

impl Instance {
    fn create(fs_: &Tracefs) -> Result<Self> {
        let dir = fs_
            .root
            .join("instances")
            .join(format!("bfq-record-{}", std::process::id()));
        fs::create_dir(&dir).with_context(|| format!("cannot create the ftrace instance {}", dir.display()))?;
        let inst = Instance { dir };
        inst.write("tracing_on", "0")?;
        inst.write("trace_clock", "mono")?;
        inst.write("buffer_size_kb", "16384")?;
        for (event, filter) in EVENTS {
            let base = format!("events/{event}");
            if !inst.dir.join(&base).is_dir() {
                bail!("the kernel has no trace event {event}: block-layer tracing is unavailable");
            }
            if let Some(f) = filter {
                // A filter only saves buffer space; kernels without glob filters work without it.
                let _ = inst.write(&format!("{base}/filter"), f);
            }
            inst.write(&format!("{base}/enable"), "1")?;
        }
        Ok(inst)
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let p = self.dir.join(file);
        fs::write(&p, value).with_context(|| format!("cannot write `{value}` to {}", p.display()))
    }

    fn mark(&self, text: &str) -> Result<()> {
        self.write("trace_marker", text)
    }

    /// Events the ring buffer overwrote or dropped, summed over CPUs.
    fn lost(&self) -> u64 {
        let Ok(cpus) = fs::read_dir(self.dir.join("per_cpu")) else {
            return 0;
        };
        cpus.flatten()
            .filter_map(|c| fs::read_to_string(c.path().join("stats")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        matches!(k.trim(), "overrun" | "dropped events")
                            .then(|| v.trim().parse::<u64>().ok())
                            .flatten()
                    })
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!(
                "bfq record: warning: cannot remove the ftrace instance ({e}); remove it with: rmdir {}",
                self.dir.display()
            );
        }
    }
}

/// Drains `trace_pipe` on a thread while tracing runs.
struct PipeReader {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<std::io::Result<Vec<u8>>>>,
}

impl PipeReader {
    fn start(inst: &Instance) -> Result<Self> {
        let path = inst.dir.join("trace_pipe");
        let mut f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                match f.read(&mut chunk) {
                    Ok(n) if n > 0 => out.extend_from_slice(&chunk[..n]),
                    Ok(_) => {
                        if flag.load(Ordering::SeqCst) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if flag.load(Ordering::SeqCst) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        });
        Ok(PipeReader {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops after the pipe is empty and returns everything read.
    fn finish(mut self) -> Result<String> {
        self.stop.store(true, Ordering::SeqCst);
        let h = self.handle.take().expect("joined once");
        let bytes = h
            .join()
            .map_err(|_| anyhow!("the trace reader panicked"))?
            .context("cannot read trace_pipe")?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Drop for PipeReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Kills a process group (ignoring a group that is already gone).
fn kill_group(pgid: u32) {
    // SAFETY: kill with a negative pid signals the group; no memory is involved.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), libc::SIGKILL);
    }
}

/// Drops the page cache, traces `cmd` until it exits, and returns the trace text and a note for the profile header.
fn trace_command(cmd: &[String], timeout: Duration) -> Result<(String, String)> {
    // Signals first, so that an interrupted setup still unwinds through the guards below.
    let _signals = SignalGuard::install()?;
    let tracefs = Tracefs::open()?;
    let inst = Instance::create(&tracefs)?;
    let reader = PipeReader::start(&inst)?;

    // Cold cache: write back dirty pages, then drop clean page cache, dentries and inodes.
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    fs::write("/proc/sys/vm/drop_caches", "3").context("cannot drop the page cache (/proc/sys/vm/drop_caches)")?;

    inst.write("tracing_on", "1")?;
    inst.mark(MARK_START)?;
    let t0 = Instant::now();
    let mut child = std::process::Command::new(&cmd[0])
        .args(&cmd[1..])
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot run {}", cmd[0]))?;
    let pid = child.id();
    inst.mark(&format!("{MARK_ROOT} {pid}"))?;

    let mut note = String::new();
    let status = loop {
        if let Some(st) = child.try_wait().context("cannot wait for the command")? {
            break Some(st);
        }
        if INTERRUPTED.load(Ordering::SeqCst) {
            kill_group(pid);
            let _ = child.wait();
            break None;
        }
        if t0.elapsed() >= timeout {
            kill_group(pid);
            let _ = child.wait();
            note.push_str(&format!(
                "# the command was killed at the timeout ({:.1} s): the profile holds its I/O until then\n",
                timeout.as_secs_f64()
            ));
            eprintln!(
                "warning: {} did not exit within {:.1} s; killed it, keeping its I/O until then",
                cmd[0],
                timeout.as_secs_f64()
            );
            break Some(child.wait()?);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    // Leftover members of the command's process group (daemons it started) are not part of the start-up.
    kill_group(pid);
    inst.mark(MARK_END)?;
    // Let in-flight reads complete before stopping.
    std::thread::sleep(Duration::from_millis(100));
    inst.write("tracing_on", "0")?;
    let trace = reader.finish()?;
    let lost = inst.lost();
    let Some(status) = status else {
        bail!(
            "interrupted by signal {}: tracing stopped and removed, nothing written",
            SIGNAL.load(Ordering::SeqCst)
        );
    };
    if !status.success() {
        eprintln!("warning: {} exited with {status}", cmd[0]);
        note.push_str(&format!("# the command exited with {status}\n"));
    }
    let mut trace = trace;
    // trace_pipe reports lost events in-line; add the ring buffer's own count if it did not.
    if lost > 0 && !trace.contains("[LOST ") {
        trace.push_str(&format!("CPU:all [LOST {lost} EVENTS]\n"));
    }
    Ok((trace, note))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["", "s", "0s", "-1s", "3h", "1e9", "x"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn words_are_quoted_for_the_header() {
        let w = |v: &[&str]| shell_words(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(w(&["bash", "-c", "true"]), "bash -c true");
        assert_eq!(w(&["sh", "-c", "echo it's #1\nok"]), "sh -c 'echo it'\\''s #1 ok'");
    }
}
