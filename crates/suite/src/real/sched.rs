//! Switching the kernel's I/O scheduler and its tunables through sysfs, with the previous settings restored when
//! the [`SchedulerGuard`] is dropped or restored, on an error, and on an interrupt (see [`super::cleanup`]).

use super::cleanup::Cleanup;
use super::sys::BlockDev;
use super::RealError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The schedulers a device offers and the one in use, from the text of `queue/scheduler`
/// (`none [mq-deadline] kyber bfq`).
pub fn parse_scheduler_list(text: &str) -> (Vec<String>, Option<String>) {
    let mut all = Vec::new();
    let mut current = None;
    for tok in text.split_whitespace() {
        if let Some(name) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            current = Some(name.to_string());
            all.push(name.to_string());
        } else {
            all.push(tok.to_string());
        }
    }
    (all, current)
}

fn read_trim(path: &Path) -> Result<String, RealError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(super::sys::io_err(format!("cannot read {}", path.display())))
}

fn write_value(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::write(path, value)
}

/// The scheduler in use on `dev` and the ones it offers.
pub fn scheduler_of(dev: &BlockDev) -> Result<(String, Vec<String>), RealError> {
    let text = read_trim(&dev.queue().join("scheduler"))?;
    let (all, cur) = parse_scheduler_list(&text);
    Ok((cur.unwrap_or_else(|| "none".to_string()), all))
}

/// Restores the scheduler and tunables of a device when dropped (or by [`SchedulerGuard::restore`]).
pub struct SchedulerGuard {
    cleanup: Option<Cleanup>,
    device: String,
    previous: String,
}

impl SchedulerGuard {
    /// Device name (`loop3`).
    pub fn device(&self) -> &str {
        &self.device
    }
    /// The scheduler in use before, restored at the end.
    pub fn previous(&self) -> &str {
        &self.previous
    }
    /// Restores now, reporting failures.
    pub fn restore(mut self) -> Result<(), RealError> {
        match self.cleanup.take() {
            Some(c) => c.run().map_err(RealError::Restore),
            None => Ok(()),
        }
    }
}

/// Tunable changes made so far, newest last: (file, previous value).
type Changes = Arc<Mutex<Vec<(PathBuf, String)>>>;

fn undo(queue: &Path, previous: &str, changes: &Changes) -> Result<(), String> {
    let mut errors = Vec::new();
    let list = match changes.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    for (path, old) in list.into_iter().rev() {
        match write_value(&path, &old) {
            Ok(()) => {}
            // The tunable belongs to a scheduler instance that is gone already: nothing to restore.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => errors.push(format!("{} back to {old}: {e}", path.display())),
        }
    }
    let sched = queue.join("scheduler");
    let now = std::fs::read_to_string(&sched)
        .ok()
        .and_then(|t| parse_scheduler_list(&t).1)
        .unwrap_or_default();
    if now != previous {
        if let Err(e) = write_value(&sched, previous) {
            errors.push(format!("{} back to {previous}: {e}", sched.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Checks that a tunable's key is a plain sysfs file name.
fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Sets `dev`'s scheduler to `sched` and applies `tunables` (`key=value`, files of `queue/iosched/`). Needs root.
/// Whatever was changed is restored when the returned guard is dropped, also if this function fails half-way.
///
/// This does not check who owns the device: callers decide (the kernel target refuses devices that `bfq loopdev`
/// did not make).
pub fn switch_scheduler(dev: &BlockDev, sched: &str, tunables: &[String]) -> Result<SchedulerGuard, RealError> {
    super::sys::require_root("changing the I/O scheduler")?;
    let (previous, available) = scheduler_of(dev)?;
    if !available.iter().any(|a| a == sched) {
        return Err(RealError::Scheduler(format!(
            "scheduler '{sched}' is not available on {}: choose one of {}",
            dev.name,
            available.join(", ")
        )));
    }
    // Check every tunable's syntax before changing anything.
    let mut pairs = Vec::new();
    for t in tunables {
        let Some((k, v)) = t.split_once('=') else {
            return Err(RealError::Scheduler(format!(
                "tunable '{t}' is not key=value (e.g. low_latency=0)"
            )));
        };
        let (k, v) = (k.trim(), v.trim());
        if !valid_key(k) || v.is_empty() || v.contains('\n') {
            return Err(RealError::Scheduler(format!(
                "tunable '{t}' is not key=value (e.g. low_latency=0)"
            )));
        }
        pairs.push((k.to_string(), v.to_string()));
    }
    let queue = dev.queue();
    let changes: Changes = Arc::new(Mutex::new(Vec::new()));
    let cleanup = {
        let (q, p, c) = (queue.clone(), previous.clone(), changes.clone());
        Cleanup::register(
            format!("restore the scheduler of {} to {previous}", dev.name),
            move || undo(&q, &p, &c),
        )
    };
    let guard = SchedulerGuard {
        cleanup: Some(cleanup),
        device: dev.name.clone(),
        previous: previous.clone(),
    };
    if previous != sched {
        write_value(&queue.join("scheduler"), sched)
            .map_err(|e| RealError::Scheduler(format!("cannot set the scheduler of {} to {sched}: {e}", dev.name)))?;
        let (now, _) = scheduler_of(dev)?;
        if now != sched {
            return Err(RealError::Scheduler(format!(
                "the scheduler of {} is {now} after asking for {sched}",
                dev.name
            )));
        }
    }
    let iosched = queue.join("iosched");
    for (k, v) in pairs {
        let path = iosched.join(&k);
        if !path.is_file() {
            let mut keys: Vec<String> = std::fs::read_dir(&iosched)
                .map(|rd| {
                    rd.filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            keys.sort();
            return Err(RealError::Scheduler(if keys.is_empty() {
                format!("scheduler {sched} on {} has no tunables; remove {k}={v}", dev.name)
            } else {
                format!("{sched} has no tunable '{k}': it has {}", keys.join(", "))
            }));
        }
        let old = read_trim(&path)?;
        if let Ok(mut c) = changes.lock() {
            c.push((path.clone(), old));
        }
        write_value(&path, &v)
            .map_err(|e| RealError::Scheduler(format!("the kernel rejected {sched} tunable {k}={v}: {e}")))?;
    }
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_lists_parse() {
        let (all, cur) = parse_scheduler_list("none [mq-deadline] kyber bfq\n");
        assert_eq!(all, vec!["none", "mq-deadline", "kyber", "bfq"]);
        assert_eq!(cur.as_deref(), Some("mq-deadline"));
        let (all, cur) = parse_scheduler_list("[none] bfq");
        assert_eq!((all.len(), cur.as_deref()), (2, Some("none")));
        assert!(valid_key("low_latency") && !valid_key("../x") && !valid_key("a/b") && !valid_key(""));
    }
}
