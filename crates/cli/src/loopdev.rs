//! `bfq loopdev`: make and remove the loop devices the real targets run on.

use anyhow::Result;
use bfq_suite::real::loopdev::{self, CreateOptions, FsKind};
use std::path::PathBuf;

/// Arguments of `bfq loopdev`.
#[derive(clap::Args)]
pub struct LoopdevArgs {
    #[command(subcommand)]
    cmd: LoopdevCmd,
}

#[derive(clap::Subcommand)]
enum LoopdevCmd {
    /// Write a full (not sparse) image under /var/tmp/bfq-loop, attach it with direct I/O, make a file system and
    /// mount it on DIR. Needs root.
    Create {
        /// Device size: a number with an optional unit K, M, G or T (powers of 1024), e.g. 512M or 16G.
        #[arg(long)]
        size: String,
        /// File system: ext4 (mounted on DIR) or none (the raw device, linked as DIR/device).
        #[arg(long, default_value = "ext4")]
        fs: String,
        /// Mount point (created if missing; must be empty).
        dir: PathBuf,
    },
    /// Unmount DIR, detach its loop device and delete the image; does nothing if there is nothing to remove.
    /// Needs root.
    Remove {
        /// Mount point given to `bfq loopdev create`.
        dir: PathBuf,
    },
    /// List the devices made by bfq loopdev.
    List,
}

/// Runs `bfq loopdev ...`.
pub fn run(a: LoopdevArgs) -> Result<()> {
    match a.cmd {
        LoopdevCmd::Create { size, fs, dir } => {
            let opts = CreateOptions {
                size_bytes: loopdev::parse_size(&size)?,
                fs: FsKind::parse(&fs)?,
                progress: true,
            };
            let rec = loopdev::create(&dir, &opts)?;
            let dev = rec.device.as_ref().map_or("?".to_string(), |d| d.display().to_string());
            match rec.fs {
                FsKind::Ext4 => println!(
                    "{dev} ({}, ext4, direct I/O) mounted on {}; remove it with `bfq loopdev remove {}`",
                    loopdev::format_size(rec.size_bytes),
                    rec.dir.display(),
                    rec.dir.display()
                ),
                FsKind::None => println!(
                    "{dev} ({}, no file system, direct I/O) linked as {}/device; remove it with `bfq loopdev remove {}`",
                    loopdev::format_size(rec.size_bytes),
                    rec.dir.display(),
                    rec.dir.display()
                ),
            }
            Ok(())
        }
        LoopdevCmd::Remove { dir } => {
            let r = loopdev::remove(&dir)?;
            if !r.had_record {
                println!("nothing to remove: no bfq loop device for {}", dir.display());
                return Ok(());
            }
            for m in &r.unmounted {
                println!("unmounted {}", m.display());
            }
            for d in &r.detached {
                println!("detached {}", d.display());
            }
            println!(
                "{}; record removed",
                if r.image_deleted {
                    "image deleted"
                } else {
                    "no image left to delete"
                }
            );
            Ok(())
        }
        LoopdevCmd::List => {
            let all = loopdev::records();
            if all.is_empty() {
                println!("no bfq loop devices");
            }
            for r in all {
                let attached = r.device.as_ref().is_some_and(|d| {
                    let name = d
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    loopdev::loops_backed_by(&r.image).iter().any(|l| l.name == name)
                });
                println!(
                    "{}  {}  {}  {}  {}",
                    r.dir.display(),
                    r.device.as_ref().map_or("-".into(), |d| d.display().to_string()),
                    loopdev::format_size(r.size_bytes),
                    r.fs.name(),
                    if attached {
                        "attached"
                    } else {
                        "NOT attached (run remove)"
                    }
                );
            }
            Ok(())
        }
    }
}
