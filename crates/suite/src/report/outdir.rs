//! The report directory: checked before any work starts, written beside its final place and renamed into it, so a
//! report is either complete or absent, and holds only the files of the run that wrote it.
//!
//! [`ReportDir::prepare`] runs before the first simulation. It refuses an `--out` that is a file, a directory that
//! holds anything but a bfq report (bfq never deletes files it did not write), a name too long for the file
//! system, and a parent where nothing can be created; and it creates the hidden staging directory
//! `.<name>.bfq-partial-<pid>` beside the target (or, when the parent does not exist yet, a probe directory in its
//! nearest existing ancestor, removed at once), so a read-only place fails at once and a refused run creates
//! nothing. [`ReportDir::commit`] writes the
//! report into the staging directory and then swaps it into place: the old report (if any) is renamed aside, the
//! new one renamed in, and the old one removed. A staging directory left by a killed run is removed by the next
//! run into the same place; one left by an error is removed when the [`ReportDir`] is dropped.

use std::fmt;
use std::path::{Path, PathBuf};

/// Longest `--out` file name accepted, bytes: the staging directory adds `.` + `.bfq-partial-` + a pid (at most 31
/// bytes) to it, and Linux file systems allow 255.
pub const MAX_NAME_BYTES: usize = 200;

/// The extensions of the files bfq writes into a report (see [`super::write_all`]).
const REPORT_EXTENSIONS: [&str; 5] = ["json", "csv", "txt", "svg", "html"];

/// Why a report directory cannot be used.
#[derive(Debug)]
pub enum OutDirError {
    /// The path names no directory (empty, `/`, or ending in `..`).
    NoName(PathBuf),
    /// The path's file name is longer than [`MAX_NAME_BYTES`].
    TooLong(PathBuf),
    /// The path exists and is not a directory.
    NotADirectory(PathBuf),
    /// The directory holds something bfq did not write (the first such entry).
    Foreign {
        /// The report directory.
        dir: PathBuf,
        /// An entry that is not a report file.
        entry: String,
    },
    /// The file system refused an operation.
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for OutDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutDirError::NoName(p) => {
                write!(
                    f,
                    "--out '{}' names no directory: give a path such as bfq-results",
                    p.display()
                )
            }
            OutDirError::TooLong(p) => write!(
                f,
                "--out '{}': the name is longer than {MAX_NAME_BYTES} bytes: choose a shorter one",
                p.display()
            ),
            OutDirError::NotADirectory(p) => write!(
                f,
                "--out '{}' is a file, not a directory: give the path of a new directory or of an earlier report",
                p.display()
            ),
            OutDirError::Foreign { dir, entry } => write!(
                f,
                "--out '{}' holds '{entry}', which bfq did not write: give a new or empty directory (bfq replaces \
                 only its own reports)",
                dir.display()
            ),
            OutDirError::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

/// The message already ends with the I/O error, so no source is chained (a chained one would print twice).
impl std::error::Error for OutDirError {}

/// A checked report directory with its staging directory (see the module doc).
#[derive(Debug)]
pub struct ReportDir {
    target: PathBuf,
    staging: PathBuf,
    committed: bool,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> OutDirError {
    move |source| OutDirError::Io { context, source }
}

/// True if `name` is a file that [`super::write_all`] writes.
fn is_report_file(name: &str) -> bool {
    Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| REPORT_EXTENSIONS.contains(&e))
}

/// The first entry of the existing directory `dir` that is not a report file, if any.
fn foreign_entry(dir: &Path) -> Result<Option<String>, OutDirError> {
    let entries = std::fs::read_dir(dir).map_err(io(format!("cannot read --out '{}'", dir.display())))?;
    let mut names = Vec::new();
    for e in entries {
        let e = e.map_err(io(format!("cannot read --out '{}'", dir.display())))?;
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        let name = e.file_name().to_string_lossy().into_owned();
        if !is_file || !is_report_file(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names.into_iter().next())
}

/// The hidden sibling of `target` named `.<name>.<tag>-<pid>`.
fn sibling(target: &Path, tag: &str, pid: u32) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!(".{name}.{tag}-{pid}"))
}

/// Removes staging directories of `target` left by runs whose process is gone.
fn remove_stale(target: &Path) {
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return;
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let name = name.to_string_lossy();
    let leads = ["bfq-partial", "bfq-old"].map(|tag| format!(".{name}.{tag}-"));
    for e in entries.flatten() {
        let fname = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = leads.iter().find_map(|l| fname.strip_prefix(l.as_str())) else {
            continue;
        };
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| Path::new("/proc").join(pid.to_string()).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl ReportDir {
    /// Checks `target` as a report directory and creates its staging directory; call it before any work.
    pub fn prepare(target: &Path) -> Result<ReportDir, OutDirError> {
        let name = match target.file_name() {
            Some(n) => n.to_string_lossy().into_owned(),
            None => return Err(OutDirError::NoName(target.to_path_buf())),
        };
        if name.len() > MAX_NAME_BYTES {
            return Err(OutDirError::TooLong(target.to_path_buf()));
        }
        match std::fs::symlink_metadata(target) {
            Ok(m) if m.is_dir() => {
                if let Some(entry) = foreign_entry(target)? {
                    return Err(OutDirError::Foreign {
                        dir: target.to_path_buf(),
                        entry,
                    });
                }
            }
            Ok(_) => return Err(OutDirError::NotADirectory(target.to_path_buf())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(format!("cannot use --out '{}'", target.display()))(e)),
        }
        // A missing parent is created only when the report is written (a refused run leaves nothing behind); its
        // nearest existing ancestor must be a directory where bfq can create one, which a probe checks now.
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let mut existing = parent;
        while !existing.exists() {
            existing = existing
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
        }
        if !existing.is_dir() {
            return Err(OutDirError::Io {
                context: format!("cannot create '{}'", parent.display()),
                source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
            });
        }
        remove_stale(target);
        let staging = sibling(target, "bfq-partial", std::process::id());
        let probe = if existing == parent {
            staging.clone()
        } else {
            existing.join(format!(".bfq-probe-{}", std::process::id()))
        };
        let _ = std::fs::remove_dir_all(&probe);
        std::fs::create_dir(&probe).map_err(io(format!(
            "cannot write the report beside '{}' (creating '{}')",
            target.display(),
            probe.display()
        )))?;
        if probe != staging {
            let _ = std::fs::remove_dir(&probe);
        }
        Ok(ReportDir {
            target: target.to_path_buf(),
            staging,
            committed: false,
        })
    }

    /// The final place of the report.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The staging directory the report is written into before [`ReportDir::commit`] renames it into place.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// Writes the report with `write` (given the staging directory; it returns the paths it wrote) and swaps it
    /// into place; returns the written files' final paths.
    pub fn commit<E>(
        mut self,
        write: impl FnOnce(&Path) -> Result<Vec<PathBuf>, E>,
    ) -> Result<Vec<PathBuf>, CommitError<E>> {
        if !self.staging.exists() {
            if let Some(parent) = self.staging.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(io(format!("cannot create '{}'", parent.display())))
                    .map_err(CommitError::Dir)?;
            }
            std::fs::create_dir(&self.staging)
                .map_err(io(format!("cannot create '{}'", self.staging.display())))
                .map_err(CommitError::Dir)?;
        }
        let written = write(&self.staging).map_err(CommitError::Write)?;
        let old = sibling(&self.target, "bfq-old", std::process::id());
        let had_old = self.target.exists();
        if had_old {
            // Checked again: something may have appeared since prepare().
            if let Some(entry) = foreign_entry(&self.target).map_err(CommitError::Dir)? {
                return Err(CommitError::Dir(OutDirError::Foreign {
                    dir: self.target.clone(),
                    entry,
                }));
            }
            let _ = std::fs::remove_dir_all(&old);
            std::fs::rename(&self.target, &old)
                .map_err(io(format!(
                    "cannot move the old report '{}' aside",
                    self.target.display()
                )))
                .map_err(CommitError::Dir)?;
        }
        if let Err(e) = std::fs::rename(&self.staging, &self.target) {
            if had_old {
                let _ = std::fs::rename(&old, &self.target);
            }
            return Err(CommitError::Dir(io(format!(
                "cannot move the report into '{}'",
                self.target.display()
            ))(e)));
        }
        self.committed = true;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(written
            .iter()
            .filter_map(|p| p.file_name())
            .map(|n| self.target.join(n))
            .collect())
    }
}

impl Drop for ReportDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// Why [`ReportDir::commit`] failed.
#[derive(Debug)]
pub enum CommitError<E> {
    /// Writing the files failed.
    Write(E),
    /// Swapping the directory into place failed.
    Dir(OutDirError),
}

impl<E: fmt::Display> fmt::Display for CommitError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommitError::Write(e) => write!(f, "{e}"),
            CommitError::Dir(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for CommitError<E> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_two(dir: &Path) -> Result<Vec<PathBuf>, std::io::Error> {
        let a = dir.join("results.json");
        let b = dir.join("report.html");
        std::fs::write(&a, "{}")?;
        std::fs::write(&b, "<html/>")?;
        Ok(vec![a, b])
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_new_directory_is_created_complete_and_nothing_else_is_left() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("a/b/report");
        let files = ReportDir::prepare(&out).unwrap().commit(write_two).unwrap();
        assert_eq!(files, vec![out.join("results.json"), out.join("report.html")]);
        assert_eq!(listing(&out), ["report.html", "results.json"]);
        assert_eq!(
            listing(&root.path().join("a/b")),
            ["report"],
            "no staging or old directory left"
        );
    }

    #[test]
    fn a_run_that_fails_after_prepare_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        drop(ReportDir::prepare(&root.path().join("a/b/report")).unwrap());
        drop(ReportDir::prepare(&root.path().join("here")).unwrap());
        assert!(listing(root.path()).is_empty(), "{:?}", listing(root.path()));
    }

    #[test]
    fn a_rerun_replaces_the_old_report_and_its_stale_charts() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("r");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old-figure.svg"), "<svg/>").unwrap();
        std::fs::write(out.join("results.json"), "old").unwrap();
        ReportDir::prepare(&out).unwrap().commit(write_two).unwrap();
        assert_eq!(
            listing(&out),
            ["report.html", "results.json"],
            "the stale chart is gone"
        );
        assert_eq!(std::fs::read_to_string(out.join("results.json")).unwrap(), "{}");
        assert_eq!(listing(root.path()), ["r"]);
    }

    #[test]
    fn bad_places_are_refused_before_any_work() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let e = ReportDir::prepare(&file).unwrap_err();
        assert!(matches!(e, OutDirError::NotADirectory(_)), "{e}");
        assert!(e.to_string().contains("is a file"), "{e}");

        let mine = root.path().join("mine");
        std::fs::create_dir(&mine).unwrap();
        std::fs::write(mine.join("thesis.tex"), "x").unwrap();
        let e = ReportDir::prepare(&mine).unwrap_err();
        assert!(e.to_string().contains("'thesis.tex', which bfq did not write"), "{e}");
        assert_eq!(listing(&mine), ["thesis.tex"], "nothing touched");

        let sub = root.path().join("withsub");
        std::fs::create_dir_all(sub.join("nested")).unwrap();
        assert!(matches!(ReportDir::prepare(&sub), Err(OutDirError::Foreign { .. })));

        let long = root.path().join("x".repeat(MAX_NAME_BYTES + 1));
        assert!(matches!(ReportDir::prepare(&long), Err(OutDirError::TooLong(_))));
        assert!(matches!(
            ReportDir::prepare(Path::new("/")),
            Err(OutDirError::NoName(_))
        ));

        // Under a file: the parent cannot be created.
        let e = ReportDir::prepare(&file.join("out")).unwrap_err();
        assert!(matches!(e, OutDirError::Io { .. }), "{e}");
    }

    #[test]
    fn a_failed_write_leaves_the_old_report_and_no_staging() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("r");
        ReportDir::prepare(&out).unwrap().commit(write_two).unwrap();
        let r = ReportDir::prepare(&out)
            .unwrap()
            .commit(|_| Err::<Vec<PathBuf>, _>("disk full"));
        assert_eq!(r.unwrap_err().to_string(), "disk full");
        assert_eq!(listing(&out), ["report.html", "results.json"]);
        assert_eq!(listing(root.path()), ["r"]);
    }

    #[test]
    fn a_staging_directory_of_a_dead_run_is_removed() {
        let root = tempfile::tempdir().unwrap();
        let out = root.path().join("r");
        // A pid above the kernel's maximum (4194304) is never alive.
        let stale = sibling(&out, "bfq-partial", 4_194_305);
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("results.json"), "half").unwrap();
        ReportDir::prepare(&out).unwrap().commit(write_two).unwrap();
        assert_eq!(listing(root.path()), ["r"]);
    }
}
