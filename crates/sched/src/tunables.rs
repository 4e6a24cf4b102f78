//! Typed tunables parsed from sysfs-style `key=value` pairs.

use crate::device::DeviceInfo;
use thiserror::Error;

/// How a tunable's default is chosen.
#[derive(Debug, Clone, Copy)]
pub enum DefaultValue {
    /// The same on every device.
    Fixed(i64),
    /// Depends on the device (for example mq-deadline's `async_depth`, the device's `nr_requests`).
    Device(fn(&DeviceInfo) -> i64, &'static str),
}

/// Description of one tunable, named exactly as in sysfs, in sysfs units.
#[derive(Debug, Clone, Copy)]
pub struct TunableSpec {
    /// sysfs name, e.g. `read_expire`.
    pub name: &'static str,
    /// Default value.
    pub default: DefaultValue,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
    /// Unit of the value as written in sysfs (`ms`, `us`, `ns`, `KiB`, `sectors`, `requests`, `bool`, ...).
    pub unit: &'static str,
    /// One line on what it does.
    pub doc: &'static str,
}

impl TunableSpec {
    /// A tunable with a fixed default.
    pub const fn new(
        name: &'static str,
        default: i64,
        min: i64,
        max: i64,
        unit: &'static str,
        doc: &'static str,
    ) -> Self {
        TunableSpec {
            name,
            default: DefaultValue::Fixed(default),
            min,
            max,
            unit,
            doc,
        }
    }
    /// A boolean (0/1) tunable.
    pub const fn flag(name: &'static str, default: bool, doc: &'static str) -> Self {
        TunableSpec::new(name, default as i64, 0, 1, "bool", doc)
    }
    /// The default on `dev`.
    pub fn default_for(&self, dev: &DeviceInfo) -> i64 {
        match self.default {
            DefaultValue::Fixed(v) => v,
            DefaultValue::Device(f, _) => f(dev),
        }
    }
    /// The default as text for listings.
    pub fn default_text(&self) -> String {
        match self.default {
            DefaultValue::Fixed(v) => v.to_string(),
            DefaultValue::Device(_, note) => note.to_string(),
        }
    }
    /// The accepted range as text.
    pub fn range_text(&self) -> String {
        if self.unit == "bool" {
            "0 or 1".to_string()
        } else {
            format!("{}..={} {}", self.min, self.max, self.unit)
        }
    }
}

/// The end of an unknown-key message: the keys a policy accepts, or that it takes none.
fn accepted_keys(accepted: &str) -> String {
    if accepted.is_empty() {
        "it has no tunables (see `bfq schedulers`)".to_string()
    } else {
        format!("accepted keys are {accepted}")
    }
}

/// Errors from building a policy.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// No policy has this name.
    #[error(
        "unknown scheduler '{}': choose one of {available} (see `bfq schedulers`)",
        crate::text::one_line(name)
    )]
    UnknownScheduler {
        /// The name given.
        name: String,
        /// Comma-separated list of known policies.
        available: String,
    },
    /// The policy has no such tunable.
    #[error(
        "{sched} has no tunable '{}': {}",
        crate::text::one_line(key),
        accepted_keys(accepted)
    )]
    UnknownKey {
        /// The policy.
        sched: String,
        /// The key given.
        key: String,
        /// Comma-separated accepted keys.
        accepted: String,
    },
    /// The same tunable was given twice.
    #[error("{sched} tunable '{key}' is given twice: give each tunable once")]
    DuplicateKey {
        /// The policy.
        sched: String,
        /// The key.
        key: String,
    },
    /// The value is not an integer (or 0/1 for a flag).
    #[error(
        "{sched} tunable '{key}': '{}' is not a number; expected {range}",
        crate::text::one_line(value)
    )]
    BadValue {
        /// The policy.
        sched: String,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// Accepted range.
        range: String,
    },
    /// The value is outside the accepted range.
    #[error("{sched} tunable '{key}' = {value} is out of range: expected {range}")]
    OutOfRange {
        /// The policy.
        sched: String,
        /// The key.
        key: String,
        /// The value given.
        value: i64,
        /// Accepted range.
        range: String,
    },
    /// Not of the form `key=value`.
    #[error("tunable '{}' is malformed: write it as key=value, e.g. slice_idle=0", crate::text::one_line(.0))]
    Malformed(String),
}

/// Parsed tunable values of one policy, looked up by sysfs name.
#[derive(Debug, Clone)]
pub struct TunableValues {
    specs: &'static [TunableSpec],
    values: Vec<i64>,
}

impl TunableValues {
    /// Defaults for `dev`, then each `key=value`; a key given twice is an error ([`ConfigError::DuplicateKey`]).
    pub fn parse<S: AsRef<str>>(
        sched: &str,
        specs: &'static [TunableSpec],
        dev: &DeviceInfo,
        pairs: &[S],
    ) -> Result<Self, ConfigError> {
        let mut values: Vec<i64> = specs.iter().map(|s| s.default_for(dev)).collect();
        let mut given = vec![false; specs.len()];
        for pair in pairs {
            let pair = pair.as_ref().trim();
            let (key, raw) = pair
                .split_once('=')
                .ok_or_else(|| ConfigError::Malformed(pair.to_string()))?;
            let (key, raw) = (key.trim(), raw.trim());
            let idx = specs
                .iter()
                .position(|s| s.name == key)
                .ok_or_else(|| ConfigError::UnknownKey {
                    sched: sched.to_string(),
                    key: key.to_string(),
                    accepted: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", "),
                })?;
            if std::mem::replace(&mut given[idx], true) {
                return Err(ConfigError::DuplicateKey {
                    sched: sched.to_string(),
                    key: key.to_string(),
                });
            }
            let spec = &specs[idx];
            let v: i64 = match (spec.unit, raw) {
                ("bool", "true" | "on" | "yes") => 1,
                ("bool", "false" | "off" | "no") => 0,
                _ => raw.parse().map_err(|_| ConfigError::BadValue {
                    sched: sched.to_string(),
                    key: key.to_string(),
                    value: raw.to_string(),
                    range: spec.range_text(),
                })?,
            };
            if v < spec.min || v > spec.max {
                return Err(ConfigError::OutOfRange {
                    sched: sched.to_string(),
                    key: key.to_string(),
                    value: v,
                    range: spec.range_text(),
                });
            }
            values[idx] = v;
        }
        Ok(TunableValues { specs, values })
    }

    /// The value of tunable `name`.
    ///
    /// # Panics
    /// If the policy has no tunable of that name: a programming error, caught by the registry's tests, which build
    /// every policy with its defaults.
    pub fn get(&self, name: &str) -> i64 {
        match self.specs.iter().position(|s| s.name == name) {
            Some(i) => self.values[i],
            None => panic!("policy reads undeclared tunable '{name}'"),
        }
    }

    /// The value of tunable `name` if the policy declares it, else `default` (for policies whose eras declare
    /// different sets).
    pub fn get_or(&self, name: &str, default: i64) -> i64 {
        self.specs
            .iter()
            .position(|s| s.name == name)
            .map_or(default, |i| self.values[i])
    }

    /// The value of a boolean tunable.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) != 0
    }

    /// All `(name, value)` pairs in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, i64)> + '_ {
        self.specs.iter().map(|s| s.name).zip(self.values.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPECS: [TunableSpec; 2] = [
        TunableSpec::new("read_expire", 500, 0, 60_000, "ms", "read deadline"),
        TunableSpec::flag("front_merges", true, "front merging"),
    ];

    #[test]
    fn defaults_then_overrides() {
        let dev = DeviceInfo::hdd();
        let v = TunableValues::parse("x", &SPECS, &dev, &["read_expire=250", "front_merges=false"]).unwrap();
        assert_eq!(v.get("read_expire"), 250);
        assert!(!v.flag("front_merges"));
        let d = TunableValues::parse::<&str>("x", &SPECS, &dev, &[]).unwrap();
        assert_eq!(d.get("read_expire"), 500);
    }

    #[test]
    fn errors_name_key_and_range() {
        let dev = DeviceInfo::hdd();
        let e = TunableValues::parse("x", &SPECS, &dev, &["nope=1"]).unwrap_err();
        assert!(e.to_string().contains("'nope'") && e.to_string().contains("read_expire"));
        let e = TunableValues::parse("x", &SPECS, &dev, &["read_expire=abc"]).unwrap_err();
        assert!(e.to_string().contains("read_expire") && e.to_string().contains("0..=60000 ms"));
        let e = TunableValues::parse("x", &SPECS, &dev, &["read_expire=-1"]).unwrap_err();
        assert!(matches!(e, ConfigError::OutOfRange { .. }));
        assert!(e.to_string().contains("read_expire"));
        let e = TunableValues::parse("x", &SPECS, &dev, &["front_merges=2"]).unwrap_err();
        assert!(e.to_string().contains("0 or 1"));
        let e = TunableValues::parse("x", &SPECS, &dev, &["read_expire=1", "read_expire=2"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x tunable 'read_expire' is given twice: give each tunable once"
        );
        let e = TunableValues::parse("x", &SPECS, &dev, &["read_expire"]).unwrap_err();
        assert!(matches!(e, ConfigError::Malformed(_)));
    }
}
