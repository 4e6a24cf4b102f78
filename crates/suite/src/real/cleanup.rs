//! Undo actions that must run whatever happens: on the normal path, on an error (the guard is dropped), and on
//! Ctrl-C, SIGTERM or SIGHUP (a handler thread runs every pending action, newest first, and exits with status 130).
//!
//! Each action is registered once and runs at most once: [`Cleanup::run`] (or dropping the [`Cleanup`]) removes it
//! from the registry and runs it while holding the registry's lock, so a signal arriving meanwhile waits for it
//! instead of running it a second time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

/// An undo action: returns a description of what went wrong, if anything.
type Action = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// Pending actions, in registration order, with their ids and labels.
static REGISTRY: Mutex<Vec<(u64, String, Action)>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static INSTALL: Once = Once::new();

/// Exit status after an interrupt (128 + SIGINT, as shells report it).
pub const INTERRUPTED_EXIT_STATUS: i32 = 130;

fn install_handler() {
    INSTALL.call_once(|| {
        let r = ctrlc::set_handler(|| {
            // Keep the lock to the end: no guard may start its own undo while we run them all and exit.
            let mut reg = match REGISTRY.lock() {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
            if !reg.is_empty() {
                eprintln!("\nbfq: interrupted; undoing {} change(s)", reg.len());
            }
            while let Some((_, label, action)) = reg.pop() {
                match action() {
                    Ok(()) => eprintln!("bfq: undone: {label}"),
                    Err(e) => eprintln!("bfq: could not undo {label}: {e}"),
                }
            }
            std::process::exit(INTERRUPTED_EXIT_STATUS);
        });
        if let Err(e) = r {
            eprintln!(
                "bfq: warning: cannot install the Ctrl-C handler ({e}); an interrupt will not undo device changes"
            );
        }
    });
}

/// A registered undo action; runs when [`Cleanup::run`] is called, when dropped, or on an interrupt.
#[must_use = "dropping a Cleanup runs it at once"]
pub struct Cleanup {
    id: u64,
}

impl Cleanup {
    /// Registers `action`, described by `label` (e.g. `restore scheduler of loop3 to mq-deadline`), and makes sure
    /// the interrupt handler is installed.
    pub fn register(label: impl Into<String>, action: impl FnOnce() -> Result<(), String> + Send + 'static) -> Cleanup {
        install_handler();
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut reg = match REGISTRY.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        reg.push((id, label.into(), Box::new(action)));
        Cleanup { id }
    }

    /// Runs the action now (once) and returns its outcome.
    pub fn run(self) -> Result<(), String> {
        let r = self.run_inner();
        std::mem::forget(self);
        r
    }

    /// Forgets the action without running it (the change is to be kept).
    pub fn disarm(self) {
        let mut reg = match REGISTRY.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        reg.retain(|(id, _, _)| *id != self.id);
        drop(reg);
        std::mem::forget(self);
    }

    fn run_inner(&self) -> Result<(), String> {
        let mut reg = match REGISTRY.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(pos) = reg.iter().position(|(id, _, _)| *id == self.id) else {
            return Ok(()); // already run
        };
        let (_, _, action) = reg.remove(pos);
        // Run under the lock, so an interrupt handler cannot run it concurrently.
        action()
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Err(e) = self.run_inner() {
            eprintln!("bfq: cleanup failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::sync::Arc;

    #[test]
    fn runs_once_on_run_or_drop_and_never_when_disarmed() {
        let n = Arc::new(AtomicU32::new(0));
        let c = {
            let n = n.clone();
            Cleanup::register("count", move || {
                n.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
        };
        assert_eq!(c.run(), Ok(()));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        {
            let n = n.clone();
            let _c = Cleanup::register("count", move || {
                n.fetch_add(1, Ordering::SeqCst);
                Err("reported".into())
            });
        }
        assert_eq!(n.load(Ordering::SeqCst), 2);
        let n2 = n.clone();
        Cleanup::register("count", move || {
            n2.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .disarm();
        assert_eq!(n.load(Ordering::SeqCst), 2);
    }
}
