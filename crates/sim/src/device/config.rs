//! Device descriptions: the named presets, TOML files with the same fields, validation, and building a model.
//!
//! Every preset is a [`DeviceConfig`]; `bfq` accepts either a preset name or a path to a `.toml` file
//! ([`resolve`]). A TOML file names its model with `model = "hdd" | "raid1" | "ssd" | "flash" | "nvme"` followed by
//! that model's fields (see the `*Config` structs; `crates/sim/devices/*.toml` are exported presets).

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::array::{Array, ArrayConfig};
use super::flash::{Flash, FlashConfig};
use super::hdd::{DecisionPoint, Hdd, HddConfig};
use super::measured::{Measured, MeasuredConfig};
use super::nvme::{Nvme, NvmeConfig};
use super::raid1::{Raid1, Raid1Config};
use super::ssd::{SataSsd, SsdConfig};
use super::Device;

/// Errors from loading or validating a device description.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The spec is neither a preset name nor an existing `.toml` file.
    #[error(
        "unknown device '{}': not a preset ({presets}) and not a .toml file",
        bfq_sched::text::one_line(spec)
    )]
    Unknown {
        /// What the user gave.
        spec: String,
        /// The preset names, comma separated.
        presets: String,
    },
    /// The file could not be read.
    #[error("cannot read device file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TOML did not parse or a field is missing, unknown or of the wrong type (serde's message names it).
    #[error("invalid device description{}: {message}", origin.as_deref().map(|p| format!(" in {p}")).unwrap_or_default())]
    Parse {
        /// The file, if any.
        origin: Option<String>,
        /// The parser's message (names the field and line).
        message: String,
    },
    /// A field is present but its value is out of range.
    #[error("invalid device field '{field}' = {value}: {reason}")]
    Field {
        /// Dotted field name, e.g. `disk.rpm`.
        field: String,
        /// The value given.
        value: String,
        /// The accepted range.
        reason: String,
    },
}

/// A device description: one of the models with its parameters. Serialized with a `model` tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "lowercase")]
pub enum DeviceConfig {
    /// A rotating disk ([`Hdd`]).
    Hdd(HddConfig),
    /// Two identical disks mirrored like Linux md raid1 ([`Raid1`]).
    Raid1(Raid1Config),
    /// A SATA SSD with a stream-favouring internal queue ([`SataSsd`]).
    Ssd(SsdConfig),
    /// A microSD card or an eMMC: one command at a time ([`Flash`]).
    Flash(FlashConfig),
    /// An NVMe SSD ([`Nvme`]).
    Nvme(NvmeConfig),
    /// A measured, table-driven device ([`Measured`]), as `bfq calibrate` writes it.
    Measured(MeasuredConfig),
    /// A SAN LUN: a controller with a write cache over a striped array of disks ([`Array`]).
    Array(ArrayConfig),
}

impl DeviceConfig {
    /// Parses a TOML description and validates it. Errors name the offending field (and show its line).
    pub fn from_toml_str(text: &str) -> Result<DeviceConfig, DeviceError> {
        // One line: where (line and column, from the error's span) and what; toml's own text spans several lines.
        let parse_err = |text: &str, e: toml::de::Error| DeviceError::Parse {
            origin: None,
            message: match e.span() {
                Some(span) => {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
                    let column = before.len() - line_start + 1;
                    let key = text[line_start..]
                        .lines()
                        .next()
                        .and_then(|l| l.split_once('='))
                        .map(|(k, _)| format!(" ({})", k.trim()))
                        .unwrap_or_default();
                    format!(
                        "line {line}{key}, column {column}: {}",
                        e.message().trim().replace('\n', "; ")
                    )
                }
                None => e.message().trim().replace('\n', "; "),
            },
        };
        let table: toml::Table = text.parse().map_err(|e| parse_err(text, e))?;
        let model = match table.get("model") {
            Some(toml::Value::String(m)) => m.clone(),
            Some(other) => {
                return Err(DeviceError::Field {
                    field: "model".into(),
                    value: other.to_string(),
                    reason: format!("must be a string, one of {}", MODELS.join(", ")),
                })
            }
            None => {
                return Err(DeviceError::Field {
                    field: "model".into(),
                    value: "(missing)".into(),
                    reason: format!("say which model the file describes: one of {}", MODELS.join(", ")),
                })
            }
        };
        // Parse the model's struct from the original text with the `model` line blanked, so that serde/toml
        // errors carry the field's line (an internally tagged enum would lose it).
        let body = blank_top_level_key(text, "model");
        let cfg = match model.as_str() {
            "hdd" => DeviceConfig::Hdd(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "raid1" => DeviceConfig::Raid1(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "ssd" => DeviceConfig::Ssd(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "flash" => DeviceConfig::Flash(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "nvme" => DeviceConfig::Nvme(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "measured" => DeviceConfig::Measured(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            "array" => DeviceConfig::Array(toml::from_str(&body).map_err(|e| parse_err(&body, e))?),
            other => {
                return Err(DeviceError::Field {
                    field: "model".into(),
                    value: format!("\"{other}\""),
                    reason: format!("unknown model; one of {}", MODELS.join(", ")),
                })
            }
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// The description as TOML (what [`DeviceConfig::from_toml_str`] reads back).
    pub fn to_toml_string(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// The device name reported to policies.
    pub fn name(&self) -> &str {
        match self {
            DeviceConfig::Hdd(c) => &c.name,
            DeviceConfig::Raid1(c) => &c.name,
            DeviceConfig::Ssd(c) => &c.name,
            DeviceConfig::Flash(c) => &c.name,
            DeviceConfig::Nvme(c) => &c.name,
            DeviceConfig::Measured(c) => &c.name,
            DeviceConfig::Array(c) => &c.name,
        }
    }

    /// The readahead window (`read_ahead_kb`, KiB) recorded with a measured device, if any; presets leave the
    /// host's default.
    pub fn read_ahead_kb(&self) -> Option<u64> {
        match self {
            DeviceConfig::Measured(c) => c.read_ahead_kb,
            _ => None,
        }
    }

    /// The host CPU costs recorded with a measured device, if any; presets leave the host's defaults.
    pub fn host_costs(&self) -> Option<super::measured::HostCosts> {
        match self {
            DeviceConfig::Measured(c) => c.host,
            _ => None,
        }
    }

    /// Checks every field's range; the error names the first offending field.
    pub fn validate(&self) -> Result<(), DeviceError> {
        if self.name().trim().is_empty() {
            return Err(DeviceError::Field {
                field: "name".into(),
                value: format!("{:?}", self.name()),
                reason: "must not be empty: policies and reports name the device by it".into(),
            });
        }
        match self {
            DeviceConfig::Hdd(c) => validate_hdd(c, ""),
            DeviceConfig::Raid1(c) => {
                check_u("", "nr_requests", c.nr_requests as u64, 1, 1 << 20)?;
                check_u("", "queue_depth", c.queue_depth as u64, 1, 1 << 16)?;
                validate_hdd(&c.disk, "disk.")
            }
            DeviceConfig::Ssd(c) => c.validate(),
            DeviceConfig::Flash(c) => c.validate(),
            DeviceConfig::Nvme(c) => c.validate(),
            DeviceConfig::Measured(c) => c.validate(),
            DeviceConfig::Array(c) => {
                check_common("", c.disk.capacity_sectors, c.queue_depth, c.nr_requests, c.max_sectors)?;
                check_u("", "members", c.members as u64, 1, 256)?;
                check_u("", "chunk_kib", c.chunk_kib as u64, 4, 1 << 16)?;
                check_f("", "link_mb_s", c.link_mb_s, 0.1, 100_000.0)?;
                check_f("", "controller_us", c.controller_us, 0.0, 100_000.0)?;
                check_u("", "write_cache_mib", c.write_cache_mib as u64, 0, 1 << 20)?;
                check_u("", "destage_depth", c.destage_depth as u64, 1, 1024)?;
                validate_hdd(&c.disk, "disk.")
            }
        }
    }

    /// Builds the model. Out-of-range values (which [`DeviceConfig::validate`] rejects) are clamped, never panic.
    pub fn build(&self) -> Box<dyn Device> {
        match self {
            DeviceConfig::Hdd(c) => Box::new(Hdd::new(c)),
            DeviceConfig::Raid1(c) => Box::new(Raid1::new(c)),
            DeviceConfig::Ssd(c) => Box::new(SataSsd::new(c)),
            DeviceConfig::Flash(c) => Box::new(Flash::new(c)),
            DeviceConfig::Nvme(c) => Box::new(Nvme::new(c)),
            DeviceConfig::Measured(c) => match &c.backing {
                // `validate` refuses a backing scheduler that does not build, so the fallback is never taken for a
                // description that was loaded.
                Some(b) => super::Backed::new(Measured::new(c), b)
                    .map(|d| Box::new(d) as Box<dyn Device>)
                    .unwrap_or_else(|_| Box::new(Measured::new(c))),
                None => Box::new(Measured::new(c)),
            },
            DeviceConfig::Array(c) => Box::new(Array::new(c)),
        }
    }

    /// The device as the host sees it with `scheduler` chosen, and the scheduler the host runs instead of it, if
    /// any: for `raid1`, md over two members that each run their own `scheduler` with `tunables` ([`super::Md1`]),
    /// under a pass-through `noop` (md has no scheduler); for every other model, [`DeviceConfig::build`] and
    /// `None` (the host runs `scheduler`).
    pub fn build_stack<S: AsRef<str>>(
        &self,
        scheduler: &str,
        tunables: &[S],
    ) -> Result<(Box<dyn Device>, Option<&'static str>), bfq_sched::ConfigError> {
        match self {
            DeviceConfig::Raid1(c) => Ok((Box::new(super::Md1::new(c, scheduler, tunables)?), Some("noop"))),
            _ => Ok((self.build(), None)),
        }
    }
}

/// The `model` tags a TOML description may give.
const MODELS: [&str; 7] = ["hdd", "raid1", "ssd", "flash", "nvme", "measured", "array"];

/// `text` with the line defining `key` before the first table header replaced by an empty line.
fn blank_top_level_key(text: &str, key: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut top = true;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with('[') {
            top = false;
        }
        let is_key = top
            && t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='));
        if is_key {
            out.push('\n');
        } else {
            out.push_str(line);
        }
    }
    out
}

/// Checks an integer field: `min <= value <= max`.
pub(crate) fn check_u(prefix: &str, field: &str, value: u64, min: u64, max: u64) -> Result<(), DeviceError> {
    if value < min || value > max {
        return Err(DeviceError::Field {
            field: format!("{prefix}{field}"),
            value: value.to_string(),
            reason: format!("must be between {min} and {max}"),
        });
    }
    Ok(())
}

/// Checks a real field: finite and `min <= value <= max`.
pub(crate) fn check_f(prefix: &str, field: &str, value: f64, min: f64, max: f64) -> Result<(), DeviceError> {
    if !value.is_finite() || value < min || value > max {
        return Err(DeviceError::Field {
            field: format!("{prefix}{field}"),
            value: value.to_string(),
            reason: format!("must be a number between {min} and {max}"),
        });
    }
    Ok(())
}

/// Sectors in a device of at most 2^48 sectors (128 PiB): the common capacity bound.
pub(crate) const MAX_CAPACITY_SECTORS: u64 = 1 << 48;

/// Checks the fields every model shares.
pub(crate) fn check_common(
    prefix: &str,
    capacity_sectors: u64,
    queue_depth: u32,
    nr_requests: u32,
    max_sectors: u32,
) -> Result<(), DeviceError> {
    check_u(prefix, "capacity_sectors", capacity_sectors, 2048, MAX_CAPACITY_SECTORS)?;
    check_u(prefix, "queue_depth", queue_depth as u64, 1, 65_536)?;
    check_u(prefix, "nr_requests", nr_requests as u64, 1, 1 << 20)?;
    check_u(prefix, "max_sectors", max_sectors as u64, 1, 1 << 16)
}

fn validate_hdd(c: &HddConfig, p: &str) -> Result<(), DeviceError> {
    check_common(p, c.capacity_sectors, c.queue_depth, c.nr_requests, c.max_sectors)?;
    check_u(p, "rpm", c.rpm as u64, 1000, 30_000)?;
    check_u(p, "heads", c.heads as u64, 1, 64)?;
    check_u(p, "zones", c.zones as u64, 1, 1000)?;
    check_f(p, "outer_mb_s", c.outer_mb_s, 0.1, 10_000.0)?;
    check_f(p, "inner_mb_s", c.inner_mb_s, 0.1, c.outer_mb_s)?;
    check_f(p, "track_to_track_ms", c.track_to_track_ms, 0.0, 100.0)?;
    check_f(
        p,
        "average_seek_ms",
        c.average_seek_ms,
        c.track_to_track_ms,
        c.full_stroke_ms,
    )?;
    check_f(p, "full_stroke_ms", c.full_stroke_ms, c.track_to_track_ms, 1000.0)?;
    check_f(p, "head_switch_ms", c.head_switch_ms, 0.0, 100.0)?;
    check_f(p, "write_settle_ms", c.write_settle_ms, 0.0, 100.0)?;
    check_f(p, "command_overhead_us", c.command_overhead_us, 0.0, 100_000.0)?;
    check_f(p, "interface_mb_s", c.interface_mb_s, 0.1, 100_000.0)?;
    check_u(p, "cache_segments", c.cache_segments as u64, 0, 1024)?;
    check_u(p, "segment_kib", c.segment_kib as u64, 1, 1 << 20)?;
    check_u(p, "write_cache_kib", c.write_cache_kib as u64, 0, 1 << 24)?;
    check_f(p, "ncq_age_limit_ms", c.ncq_age_limit_ms, 0.001, 1.0e6)?;
    // The geometry must hold the capacity without the model clamping it (it used to, silently).
    let (need, max) = (
        super::hdd::cylinders_per_zone_needed(c),
        super::hdd::max_cylinders_per_zone(c),
    );
    if need > max {
        return Err(DeviceError::Field {
            field: format!("{p}capacity_sectors"),
            value: c.capacity_sectors.to_string(),
            reason: format!(
                "needs {need} cylinders per zone with these heads, zones and rates, more than the model's {max}: \
                 give more heads or zones, faster rates, or less capacity"
            ),
        });
    }
    Ok(())
}

/// Names of the built-in presets.
pub fn preset_names() -> &'static [&'static str] {
    &[
        "seagate-hdd",
        "hitachi-hdd",
        "seagate-raid1",
        "enterprise-hdd",
        "plextor-ssd",
        "toshiba-1.8-hdd",
        "transcend-microsd",
        "sandisk-emmc",
        "nvme",
        "san-lun",
    ]
}

/// The preset called `name`, if any. The sources of each figure are in `docs/DEVICES.md`.
pub fn preset(name: &str) -> Option<DeviceConfig> {
    Some(match name {
        "seagate-hdd" => DeviceConfig::Hdd(seagate_hdd()),
        "hitachi-hdd" => DeviceConfig::Hdd(HddConfig {
            name: "hitachi-hdd".into(),
            // 500 GB (estimate: a Deskstar 7K1000.C-class desktop disk, 2 heads on one 500 GB platter).
            capacity_sectors: 976_773_168,
            rpm: 7200,
            heads: 2,
            zones: 16,
            // "Somewhat slower" than the Seagate: estimate 120 -> 60 MB/s (ZBR ratio 2).
            outer_mb_s: 120.0,
            inner_mb_s: 60.0,
            track_to_track_ms: 1.0,
            // HGST Ultrastar 7K4000 datasheet: average seek 8.2 ms; desktop Deskstar estimate 8.9 ms
            // (docs/DEVICES.md, HDD).
            average_seek_ms: 8.9,
            full_stroke_ms: 18.0,
            head_switch_ms: 0.5,
            write_settle_ms: 0.1,
            command_overhead_us: 50.0,
            interface_mb_s: 300.0,
            cache_segments: 8,
            segment_kib: 1024,
            write_cache_kib: 8192,
            queue_depth: 31,
            ncq_age_limit_ms: HGST_AGING_LIMIT_MS,
            decision_point: DecisionPoint::TransferStart,
            nr_requests: 64,
            max_sectors: 1024,
        }),
        "seagate-raid1" => {
            let mut disk = seagate_hdd();
            disk.name = "seagate-hdd".into();
            DeviceConfig::Raid1(Raid1Config {
                name: "seagate-raid1".into(),
                queue_depth: 62,
                nr_requests: 128,
                disk,
            })
        }
        "enterprise-hdd" => DeviceConfig::Hdd(HddConfig {
            name: "enterprise-hdd".into(),
            // A modern enterprise drive that chooses its next command at completion (fidelity.md §4: such a drive
            // keeps streaming one reader until the aging limit). The mechanics are the Seagate's on purpose
            // (estimate), so that the decision point is the only difference between the two presets.
            decision_point: DecisionPoint::Completion,
            ..seagate_hdd()
        }),
        "toshiba-1.8-hdd" => DeviceConfig::Hdd(HddConfig {
            name: "toshiba-1.8-hdd".into(),
            // Estimates for a ~2010 1.8-inch ZIF/CE-ATA disk (Toshiba MK1235GSL class): 120 GB, 4200 rpm, 1 platter.
            capacity_sectors: 234_441_648,
            rpm: 4200,
            heads: 2,
            zones: 12,
            outer_mb_s: 28.0,
            inner_mb_s: 15.0,
            track_to_track_ms: 3.0,
            average_seek_ms: 15.0,
            full_stroke_ms: 28.0,
            head_switch_ms: 1.5,
            write_settle_ms: 0.3,
            command_overhead_us: 300.0,
            interface_mb_s: 100.0,
            cache_segments: 4,
            segment_kib: 512,
            write_cache_kib: 2048,
            queue_depth: 1,
            ncq_age_limit_ms: HGST_AGING_LIMIT_MS,
            decision_point: DecisionPoint::TransferStart,
            nr_requests: 64,
            max_sectors: 256,
        }),
        "plextor-ssd" => DeviceConfig::Ssd(SsdConfig::plextor_m5()),
        "transcend-microsd" => DeviceConfig::Flash(FlashConfig::transcend_microsd()),
        "sandisk-emmc" => DeviceConfig::Flash(FlashConfig::sandisk_emmc()),
        "nvme" => DeviceConfig::Nvme(NvmeConfig::modern()),
        "san-lun" => DeviceConfig::Array(san_lun()),
        _ => return None,
    })
}

/// The HGST Ultrastar manuals' default command aging limit: 0x30 units of 50 ms = 2.4 s, ms
/// (`../shared/docs/fidelity.md` §4). Used for every HDD preset: no desktop drive publishes its own.
pub const HGST_AGING_LIMIT_MS: f64 = 2400.0;

fn seagate_hdd() -> HddConfig {
    HddConfig {
        name: "seagate-hdd".into(),
        // 1 TB, 2 platters / 4 heads (Barracuda 7200.12 ST31000528AS class; docs/DEVICES.md, HDD).
        capacity_sectors: 1_953_525_168,
        rpm: 7200,
        heads: 4,
        zones: 16,
        // Reviews and datasheets of 2009-2013 Barracudas: 138-156 MB/s outer, ID about 45-50% of OD
        // (docs/DEVICES.md, HDD).
        outer_mb_s: 140.0,
        inner_mb_s: 70.0,
        // Desktop calibration derived from those datasheets: ~1 ms, ~8.5 ms, 16-18 ms (docs/DEVICES.md, HDD).
        track_to_track_ms: 1.0,
        average_seek_ms: 8.5,
        full_stroke_ms: 17.0,
        // Estimates (DiskSim validated disks: 0.1-0.9 ms head switch, 0.65 ms write settle on the oldest).
        head_switch_ms: 0.5,
        write_settle_ms: 0.1,
        command_overhead_us: 50.0,
        // SATA 3 Gb/s payload rate.
        interface_mb_s: 300.0,
        // 32 MB cache (7200.12 reviews): half read segments, half write cache (split is an estimate).
        cache_segments: 16,
        segment_kib: 1024,
        write_cache_kib: 16_384,
        // Linux uses 31 of the 32 NCQ tags.
        queue_depth: 31,
        // HGST Ultrastar manuals' command aging limit (fidelity.md §4); the Seagate's own is not published.
        ncq_age_limit_ms: HGST_AGING_LIMIT_MS,
        // The era's desktop drives fix the next command as the current transfer starts (fidelity.md §4).
        decision_point: DecisionPoint::TransferStart,
        nr_requests: 64,
        max_sectors: 1024,
    }
}

/// Seed 003's device class: a LUN of a mid-range SAN array (a controller with a mirrored write cache over striped
/// 15 000 rpm Fibre Channel disks) on one 4 Gb/s FC path. Sources and estimates: docs/DEVICES.md, SAN LUN.
fn san_lun() -> ArrayConfig {
    ArrayConfig {
        name: "san-lun".into(),
        // qla2xxx's default LUN queue depth (`ql2xmaxqdepth` = 32).
        queue_depth: 32,
        // 2.6.18's default `nr_requests` and SCSI's default largest request (512 KiB).
        nr_requests: 128,
        max_sectors: 1024,
        // Estimates: an 8-disk group with 128 KiB segments (the array's default segment size class).
        members: 8,
        chunk_kib: 128,
        // 4 Gb/s Fibre Channel: 400 MB/s of payload per direction; the seed's one-thread read (390 MB/s) sits at
        // it. One path carries the LUN (active/passive multipathing: estimate).
        link_mb_s: 400.0,
        // Estimates: controller time per command, the LUN's share of a 1 GiB mirrored cache, destage depth.
        controller_us: 50.0,
        write_cache_mib: 512,
        destage_depth: 4,
        disk: HddConfig {
            name: "fc-15k".into(),
            // Cheetah 15K.5 FC 146 GB class (product manual): 15 000 rpm, 73-125 MB/s, 3.5 ms average read seek,
            // 0.2 ms track to track, write seek 0.5 ms longer; heads, zones, full stroke and overheads estimates.
            capacity_sectors: 286_749_488,
            rpm: 15_000,
            heads: 8,
            zones: 16,
            outer_mb_s: 125.0,
            inner_mb_s: 73.0,
            track_to_track_ms: 0.2,
            average_seek_ms: 3.5,
            full_stroke_ms: 7.0,
            head_switch_ms: 0.3,
            write_settle_ms: 0.5,
            command_overhead_us: 50.0,
            // The member's own FC port (4 Gb/s).
            interface_mb_s: 400.0,
            // 16 MB buffer: 8 read segments of 1 MiB (estimate); array controllers run member disks with their
            // write caches off (estimate), so every destage is a media write.
            cache_segments: 8,
            segment_kib: 1024,
            write_cache_kib: 0,
            queue_depth: 32,
            ncq_age_limit_ms: HGST_AGING_LIMIT_MS,
            decision_point: DecisionPoint::TransferStart,
            nr_requests: 128,
            max_sectors: 1024,
        },
    }
}

/// Reads and validates a TOML device description.
pub fn load_toml(path: impl AsRef<Path>) -> Result<DeviceConfig, DeviceError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|source| DeviceError::Io {
        path: path.display().to_string(),
        source,
    })?;
    DeviceConfig::from_toml_str(&text).map_err(|e| match e {
        DeviceError::Parse { message, .. } => DeviceError::Parse {
            origin: Some(path.display().to_string()),
            message,
        },
        other => other,
    })
}

/// A preset name, or a path to a `.toml` description.
pub fn resolve(spec: &str) -> Result<DeviceConfig, DeviceError> {
    if let Some(cfg) = preset(spec) {
        return Ok(cfg);
    }
    let path = Path::new(spec);
    if spec.ends_with(".toml") || path.is_file() {
        return load_toml(path);
    }
    Err(DeviceError::Unknown {
        spec: spec.to_string(),
        presets: preset_names().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_validates_builds_and_round_trips() {
        for name in preset_names() {
            let cfg = preset(name).unwrap();
            cfg.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            let text = cfg.to_toml_string();
            let back = DeviceConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(back, cfg, "{name}");
            let dev = cfg.build();
            assert_eq!(dev.info().name, *name);
            assert!(resolve(name).is_ok());
        }
        assert!(preset("nope").is_none());
    }

    /// Drives every preset with random requests (odd sizes, beyond capacity, reads and writes, idle gaps) and
    /// checks the device contract: every tag completes exactly once, never before it was submitted, completions come
    /// in time order, a completion is always available at `next_completion()`, and the same run gives the same
    /// completions.
    #[test]
    fn every_preset_keeps_the_device_contract() {
        use crate::device::testutil::Lcg;
        use crate::device::DevRequest;
        use bfq_sched::Direction;
        for name in preset_names() {
            let run = || {
                let mut dev = preset(name).unwrap().build();
                let info = dev.info();
                let mut rng = Lcg::new(42);
                let mut t = 0u64;
                let mut outstanding = std::collections::HashMap::new();
                let mut log = Vec::new();
                let mut next_tag = 0u64;
                let mut wakeups = 0u64;
                for _ in 0..3000 {
                    let can_submit = (outstanding.len() as u32) < info.queue_depth;
                    if can_submit && (outstanding.is_empty() || rng.below(2) == 0) {
                        // Arrivals with idle gaps up to 20 ms now and then.
                        t += if rng.below(10) == 0 {
                            rng.below(20_000_000)
                        } else {
                            rng.below(50_000)
                        };
                        if let Some(c) = dev.next_completion() {
                            if c <= t {
                                t = c;
                            }
                        }
                        let dir = if rng.below(3) == 0 {
                            Direction::Write
                        } else {
                            Direction::Read
                        };
                        let sector = match rng.below(4) {
                            0 => rng.below(info.capacity_sectors + 10_000),
                            1 => next_tag * 64,
                            _ => rng.below(info.capacity_sectors),
                        };
                        let sectors = rng.below(info.max_sectors as u64 + 1) as u32;
                        next_tag += 1;
                        outstanding.insert(next_tag, t);
                        dev.submit(
                            DevRequest {
                                tag: next_tag,
                                dir,
                                sector,
                                sectors,
                            },
                            t,
                        );
                    } else {
                        let c = dev
                            .next_completion()
                            .unwrap_or_else(|| panic!("{name}: outstanding requests but no next completion"));
                        assert!(c >= t, "{name}: completion {c} in the past (now {t})");
                        t = c;
                        // The device may ask to be advanced for internal work (destaging) before a completion.
                        let Some(tag) = dev.pop_completion(t) else {
                            wakeups += 1;
                            assert!(wakeups < 1_000_000, "{name}: keeps waking without completing at {t}");
                            continue;
                        };
                        let sub = outstanding
                            .remove(&tag)
                            .unwrap_or_else(|| panic!("{name}: tag {tag} twice"));
                        assert!(sub <= t);
                        log.push((t, tag));
                    }
                }
                while let Some(c) = dev.next_completion() {
                    assert!(c >= t);
                    t = c;
                    let Some(tag) = dev.pop_completion(t) else {
                        wakeups += 1;
                        assert!(wakeups < 1_000_000, "{name}: keeps waking without completing at {t}");
                        continue;
                    };
                    assert!(outstanding.remove(&tag).is_some());
                    log.push((t, tag));
                }
                assert!(
                    outstanding.is_empty(),
                    "{name}: {} requests never completed",
                    outstanding.len()
                );
                log
            };
            assert_eq!(run(), run(), "{name} is not deterministic");
        }
    }

    #[test]
    fn shipped_toml_files_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("devices");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let cfg = resolve(path.to_str().unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                cfg.build();
                n += 1;
            }
        }
        assert!(n >= 1);
        // The exported Seagate matches the preset.
        assert_eq!(
            load_toml(dir.join("seagate-hdd.toml")).unwrap(),
            preset("seagate-hdd").unwrap()
        );
    }

    #[test]
    fn errors_name_the_field() {
        let good = preset("seagate-hdd").unwrap().to_toml_string();
        // Missing field.
        let missing: String = good
            .lines()
            .filter(|l| !l.starts_with("rpm"))
            .collect::<Vec<_>>()
            .join("\n");
        let e = DeviceConfig::from_toml_str(&missing).unwrap_err().to_string();
        assert!(e.contains("rpm"), "{e}");
        // Unknown field.
        let unknown = format!("{good}\nspindles = 3\n");
        let e = DeviceConfig::from_toml_str(&unknown).unwrap_err().to_string();
        assert!(e.contains("spindles"), "{e}");
        // Wrong type.
        let wrong = good.replace("rpm = 7200", "rpm = \"fast\"");
        let e = DeviceConfig::from_toml_str(&wrong).unwrap_err().to_string();
        assert!(e.contains("rpm"), "{e}");
        // Out of range.
        let bad = good.replace("rpm = 7200", "rpm = 5");
        let e = DeviceConfig::from_toml_str(&bad).unwrap_err().to_string();
        assert!(e.contains("'rpm'") && e.contains("1000"), "{e}");
        // Unknown model.
        let e = DeviceConfig::from_toml_str("model = \"tape\"\nname = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tape") && e.contains("'model'"), "{e}");
        let e = DeviceConfig::from_toml_str("name = \"x\"\n").unwrap_err().to_string();
        assert!(e.contains("'model'"), "{e}");
        // Nested field of the RAID's disk.
        let raid = preset("seagate-raid1")
            .unwrap()
            .to_toml_string()
            .replace("heads = 4", "heads = 0");
        let e = DeviceConfig::from_toml_str(&raid).unwrap_err().to_string();
        assert!(e.contains("disk.heads"), "{e}");
        // Unknown spec.
        let e = resolve("no-such-device").unwrap_err().to_string();
        assert!(e.contains("seagate-hdd"), "{e}");
        let e = resolve("/nonexistent/dev.toml").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/dev.toml"), "{e}");
    }

    /// Accepted silently before (issue 16, defect 8): an HDD whose geometry cannot hold its capacity, which the
    /// model clamped to fewer cylinders (a smaller disk than described).
    #[test]
    fn a_geometry_that_cannot_hold_the_capacity_is_refused() {
        let Some(DeviceConfig::Hdd(mut c)) = preset("seagate-hdd") else {
            panic!("seagate-hdd is an HDD preset");
        };
        assert!(validate_hdd(&c, "").is_ok());
        c.heads = 1;
        c.zones = 1;
        c.outer_mb_s = 0.1;
        c.inner_mb_s = 0.1;
        c.capacity_sectors = MAX_CAPACITY_SECTORS;
        let e = validate_hdd(&c, "").unwrap_err().to_string();
        assert!(
            e.contains("'capacity_sectors'") && e.contains("cylinders per zone"),
            "{e}"
        );
    }

    /// Accepted silently before (issue 16, defect 8): a device without a name; and toml's errors spanned several
    /// lines where every bfq error is one.
    #[test]
    fn an_empty_name_is_refused_and_errors_are_one_line() {
        let good = preset("nvme").unwrap().to_toml_string();
        let unnamed = good
            .lines()
            .map(|l| if l.starts_with("name") { "name = \"  \"" } else { l })
            .collect::<Vec<_>>()
            .join("\n");
        let e = DeviceConfig::from_toml_str(&unnamed).unwrap_err().to_string();
        assert!(e.contains("'name'") && e.contains("must not be empty"), "{e}");
        let missing: String = good
            .lines()
            .filter(|l| !l.starts_with("name"))
            .collect::<Vec<_>>()
            .join("\n");
        let wrong = good.replace("model = \"nvme\"", "model = \"nvme\"\nqueue_depth = [1, 2]");
        for text in [missing.as_str(), wrong.as_str(), "model = \"hdd\"\nrpm = \n"] {
            let e = DeviceConfig::from_toml_str(text).unwrap_err().to_string();
            assert_eq!(e.lines().count(), 1, "{e}");
            assert!(e.contains("line "), "{e}");
        }
    }
}

#[cfg(test)]
mod export {
    /// Writes every preset as TOML under `crates/sim/devices/` (run with `--ignored` to refresh the examples).
    #[test]
    #[ignore]
    fn export_presets() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("devices");
        std::fs::create_dir_all(&dir).unwrap();
        for name in super::preset_names() {
            let cfg = super::preset(name).unwrap();
            let text = format!(
                "# The `{name}` preset, exported from bfq-sim. Copy and edit to describe another device;\n\
                 # every field is documented in docs/DEVICES.md.\n{}",
                cfg.to_toml_string()
            );
            std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
        }
    }
}
