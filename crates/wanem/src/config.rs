//! The JSON configuration and the validation shared with control `set`.
//!
//! Every message names what is wrong where: `link a-b a_to_b: queue_bytes
//! 1000 is smaller than one MTU (1500)`.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Number, Value};
use thiserror::Error;

use crate::impair::Settings;

/// MTU when a link does not give one.
pub const DEFAULT_MTU: u64 = 1500;
/// Smallest accepted MTU (the IPv4 minimum).
pub const MIN_MTU: u64 = 68;
/// Largest accepted MTU.
pub const MAX_MTU: u64 = 65_535;
/// Largest accepted one-way delay: one hour.
pub const MAX_DELAY_US: u64 = 3_600_000_000;
/// Largest accepted queue limit: 4 GiB.
pub const MAX_QUEUE_BYTES: u64 = 1 << 32;
/// Longest Linux interface name (IFNAMSIZ - 1).
pub const MAX_DEV_NAME: usize = 15;

/// The two directions of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Read from end `a`, written to end `b`.
    AToB,
    /// Read from end `b`, written to end `a`.
    BToA,
}

impl Dir {
    /// Both directions, in index order.
    pub const BOTH: [Dir; 2] = [Dir::AToB, Dir::BToA];

    /// The name used in JSON and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Dir::AToB => "a_to_b",
            Dir::BToA => "b_to_a",
        }
    }

    /// Index into per-link arrays: also the index of the ingress end.
    pub fn index(self) -> usize {
        match self {
            Dir::AToB => 0,
            Dir::BToA => 1,
        }
    }
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One end of a link: a TUN device inside a network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndConfig {
    /// Path of the namespace file, e.g. `/run/netns/wm-a-r`.
    pub netns: PathBuf,
    /// Name of the persistent TUN device inside that namespace.
    pub dev: String,
}

/// One emulated WAN link between two ends.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Unique name, used by the control socket and the monitor CSV.
    pub name: String,
    /// End `a`.
    pub a: EndConfig,
    /// End `b`.
    pub b: EndConfig,
    /// Largest packet expected on this link (bytes).
    pub mtu: u64,
    /// Settings of the a -> b direction.
    pub a_to_b: Settings,
    /// Settings of the b -> a direction.
    pub b_to_a: Settings,
}

impl LinkConfig {
    /// The two ends, `a` first.
    pub fn ends(&self) -> [&EndConfig; 2] {
        [&self.a, &self.b]
    }
}

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The links, in file order.
    pub links: Vec<LinkConfig>,
}

/// What is wrong with one setting of one direction.
#[derive(Debug, Error, PartialEq)]
pub enum SettingError {
    /// A required field is absent.
    #[error("{0} is missing")]
    Missing(&'static str),
    /// A numeric field holds something else.
    #[error("{field} must be a number (got {value})")]
    NotNumber {
        /// Field name.
        field: &'static str,
        /// What was given.
        value: String,
    },
    /// An integer field holds a fraction.
    #[error("{field} must be an integer (got {value})")]
    NotInteger {
        /// Field name.
        field: &'static str,
        /// What was given.
        value: String,
    },
    /// Negative delay.
    #[error("delay_us must be >= 0 (got {0})")]
    NegativeDelay(i128),
    /// Absurdly long delay.
    #[error("delay_us {0} exceeds the maximum {MAX_DELAY_US} (one hour)")]
    DelayTooLarge(i128),
    /// Zero or negative rate.
    #[error("rate_bps must be > 0 (got {0})")]
    RateNotPositive(i128),
    /// Rate beyond u64.
    #[error("rate_bps {0} is out of range")]
    RateTooLarge(i128),
    /// Queue smaller than one packet.
    #[error("queue_bytes {queue} is smaller than one MTU ({mtu})")]
    QueueBelowMtu {
        /// Requested limit.
        queue: i128,
        /// The link's MTU.
        mtu: u64,
    },
    /// Absurdly large queue.
    #[error("queue_bytes {0} exceeds the maximum {MAX_QUEUE_BYTES}")]
    QueueTooLarge(i128),
    /// Loss outside [0, 1].
    #[error("loss must be between 0 and 1 (got {0})")]
    LossOutOfRange(f64),
    /// Seed outside u64.
    #[error("seed must be an integer from 0 to 18446744073709551615 (got {0})")]
    SeedOutOfRange(i128),
}

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// Config path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// Not valid JSON, or the top level has the wrong shape.
    #[error("config {path}: {source}")]
    Syntax {
        /// Config path.
        path: PathBuf,
        /// Underlying error.
        source: serde_json::Error,
    },
    /// `links` is empty.
    #[error("config has no links")]
    NoLinks,
    /// A link object has the wrong shape (unknown or missing key, bad type).
    #[error("link {link}: {source}")]
    LinkShape {
        /// Link name, or `#N` when it has none.
        link: String,
        /// Underlying error.
        source: serde_json::Error,
    },
    /// A direction object has the wrong shape.
    #[error("link {link} {dir}: {source}")]
    DirectionShape {
        /// Link name.
        link: String,
        /// Direction.
        dir: Dir,
        /// Underlying error.
        source: serde_json::Error,
    },
    /// A direction setting is invalid.
    #[error("link {link} {dir}: {source}")]
    Setting {
        /// Link name.
        link: String,
        /// Direction.
        dir: Dir,
        /// What is wrong.
        source: SettingError,
    },
    /// Bad link name.
    #[error("link {link:?}: name must be 1-64 characters from A-Z a-z 0-9 . _ -")]
    LinkName {
        /// The name given.
        link: String,
    },
    /// Two links with one name.
    #[error("link {0}: name is used twice")]
    DuplicateLink(String),
    /// Bad MTU.
    #[error("link {link}: mtu must be an integer from {MIN_MTU} to {MAX_MTU} (got {value})")]
    Mtu {
        /// Link name.
        link: String,
        /// What was given.
        value: String,
    },
    /// Bad device name or namespace path.
    #[error("link {link} end {end}: {reason}")]
    End {
        /// Link name.
        link: String,
        /// `a` or `b`.
        end: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// One TUN device named by two ends.
    #[error("link {link} end {end}: device {dev} in {netns} is already used by another end")]
    DuplicateDevice {
        /// Link name.
        link: String,
        /// `a` or `b`.
        end: &'static str,
        /// Device name.
        dev: String,
        /// Namespace path.
        netns: String,
    },
}

/// Any subset of direction settings, as in the config file or a `set`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// Bottleneck rate, bits/s.
    pub rate_bps: Option<Number>,
    /// One-way delay, µs.
    pub delay_us: Option<Number>,
    /// Drop-tail limit, bytes.
    pub queue_bytes: Option<Number>,
    /// Loss probability.
    pub loss: Option<Number>,
    /// Loss PRNG seed.
    pub seed: Option<Number>,
    /// Link up.
    pub up: Option<bool>,
}

fn integer(field: &'static str, n: &Number) -> Result<i128, SettingError> {
    if let Some(v) = n.as_i64() {
        return Ok(i128::from(v));
    }
    if let Some(v) = n.as_u64() {
        return Ok(i128::from(v));
    }
    match n.as_f64() {
        Some(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 => Ok(f as i128),
        _ => Err(SettingError::NotInteger {
            field,
            value: n.to_string(),
        }),
    }
}

impl SettingsPatch {
    /// `base` with this patch applied, validated for a link of `mtu` bytes.
    ///
    /// # Errors
    /// The first invalid field, by name.
    pub fn apply(&self, base: &Settings, mtu: u64) -> Result<Settings, SettingError> {
        let mut s = base.clone();
        if let Some(n) = &self.rate_bps {
            let v = integer("rate_bps", n)?;
            if v <= 0 {
                return Err(SettingError::RateNotPositive(v));
            }
            s.rate_bps = u64::try_from(v).map_err(|_| SettingError::RateTooLarge(v))?;
        }
        if let Some(n) = &self.delay_us {
            let v = integer("delay_us", n)?;
            if v < 0 {
                return Err(SettingError::NegativeDelay(v));
            }
            if v > i128::from(MAX_DELAY_US) {
                return Err(SettingError::DelayTooLarge(v));
            }
            s.delay_us = v as u64;
        }
        if let Some(n) = &self.queue_bytes {
            let v = integer("queue_bytes", n)?;
            if v < i128::from(mtu) {
                return Err(SettingError::QueueBelowMtu { queue: v, mtu });
            }
            if v > i128::from(MAX_QUEUE_BYTES) {
                return Err(SettingError::QueueTooLarge(v));
            }
            s.queue_bytes = v as u64;
        } else if s.queue_bytes < mtu {
            return Err(SettingError::QueueBelowMtu {
                queue: i128::from(s.queue_bytes),
                mtu,
            });
        }
        if let Some(n) = &self.loss {
            let v = n.as_f64().ok_or_else(|| SettingError::NotNumber {
                field: "loss",
                value: n.to_string(),
            })?;
            if !(0.0..=1.0).contains(&v) {
                return Err(SettingError::LossOutOfRange(v));
            }
            s.loss = v;
        }
        if let Some(n) = &self.seed {
            let v = integer("seed", n)?;
            s.seed = u64::try_from(v).map_err(|_| SettingError::SeedOutOfRange(v))?;
        }
        if let Some(up) = self.up {
            s.up = up;
        }
        Ok(s)
    }

    /// Full settings from a config direction: rate, delay and queue are
    /// required; loss defaults to 0, seed to 0, up to true.
    ///
    /// # Errors
    /// A missing required field or an invalid value.
    pub fn complete(&self, mtu: u64) -> Result<Settings, SettingError> {
        for (field, present) in [
            ("rate_bps", self.rate_bps.is_some()),
            ("delay_us", self.delay_us.is_some()),
            ("queue_bytes", self.queue_bytes.is_some()),
        ] {
            if !present {
                return Err(SettingError::Missing(field));
            }
        }
        let base = Settings {
            rate_bps: 1,
            delay_us: 0,
            queue_bytes: mtu,
            loss: 0.0,
            seed: 0,
            up: true,
        };
        self.apply(&base, mtu)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    links: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnd {
    netns: String,
    dev: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: String,
    a: RawEnd,
    b: RawEnd,
    #[serde(default)]
    mtu: Option<Number>,
    a_to_b: Value,
    b_to_a: Value,
}

fn valid_link_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn check_end(link: &str, end: &'static str, raw: RawEnd) -> Result<EndConfig, ConfigError> {
    let bad = |reason: String| ConfigError::End {
        link: link.to_string(),
        end,
        reason,
    };
    if raw.netns.is_empty() {
        return Err(bad("netns is empty".into()));
    }
    if raw.dev.is_empty() || raw.dev.len() > MAX_DEV_NAME {
        return Err(bad(format!(
            "dev {:?} must be 1-{MAX_DEV_NAME} characters",
            raw.dev
        )));
    }
    if raw
        .dev
        .chars()
        .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control())
    {
        return Err(bad(format!("dev {:?} is not a valid interface name", raw.dev)));
    }
    Ok(EndConfig {
        netns: PathBuf::from(raw.netns),
        dev: raw.dev,
    })
}

fn parse_mtu(link: &str, n: Option<&Number>) -> Result<u64, ConfigError> {
    let Some(n) = n else {
        return Ok(DEFAULT_MTU);
    };
    match n.as_u64() {
        Some(v) if (MIN_MTU..=MAX_MTU).contains(&v) => Ok(v),
        _ => Err(ConfigError::Mtu {
            link: link.to_string(),
            value: n.to_string(),
        }),
    }
}

fn parse_link(index: usize, value: Value) -> Result<LinkConfig, ConfigError> {
    let label = value
        .get("name")
        .and_then(Value::as_str)
        .map_or_else(|| format!("#{index}"), str::to_string);
    let raw: RawLink = serde_json::from_value(value).map_err(|source| ConfigError::LinkShape {
        link: label,
        source,
    })?;
    let name = raw.name;
    if !valid_link_name(&name) {
        return Err(ConfigError::LinkName { link: name });
    }
    let mtu = parse_mtu(&name, raw.mtu.as_ref())?;
    let a = check_end(&name, "a", raw.a)?;
    let b = check_end(&name, "b", raw.b)?;
    let mut dirs = Vec::with_capacity(2);
    for (dir, value) in [(Dir::AToB, raw.a_to_b), (Dir::BToA, raw.b_to_a)] {
        let patch: SettingsPatch =
            serde_json::from_value(value).map_err(|source| ConfigError::DirectionShape {
                link: name.clone(),
                dir,
                source,
            })?;
        let settings = patch.complete(mtu).map_err(|source| ConfigError::Setting {
            link: name.clone(),
            dir,
            source,
        })?;
        dirs.push(settings);
    }
    let b_to_a = dirs.pop().expect("two directions pushed");
    let a_to_b = dirs.pop().expect("two directions pushed");
    Ok(LinkConfig {
        name,
        a,
        b,
        mtu,
        a_to_b,
        b_to_a,
    })
}

impl Config {
    /// Parses and validates config text; `path` is only used in messages.
    ///
    /// # Errors
    /// The first problem found, naming link, direction and field.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let raw: RawConfig = serde_json::from_str(text).map_err(|source| ConfigError::Syntax {
            path: path.to_path_buf(),
            source,
        })?;
        if raw.links.is_empty() {
            return Err(ConfigError::NoLinks);
        }
        let mut links = Vec::with_capacity(raw.links.len());
        let mut names = HashSet::new();
        let mut devices = HashSet::new();
        for (i, value) in raw.links.into_iter().enumerate() {
            let link = parse_link(i, value)?;
            if !names.insert(link.name.clone()) {
                return Err(ConfigError::DuplicateLink(link.name));
            }
            for (end, e) in [("a", &link.a), ("b", &link.b)] {
                if !devices.insert((e.netns.clone(), e.dev.clone())) {
                    return Err(ConfigError::DuplicateDevice {
                        link: link.name.clone(),
                        end,
                        dev: e.dev.clone(),
                        netns: e.netns.display().to_string(),
                    });
                }
            }
            links.push(link);
        }
        Ok(Config { links })
    }

    /// Reads and validates a config file.
    ///
    /// # Errors
    /// Unreadable file or any [`Config::parse`] error.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Config::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"links": [
      {"name": "a-b",
       "a": {"netns": "/run/netns/wm-a-r", "dev": "wan-b"},
       "b": {"netns": "/run/netns/wm-b-r", "dev": "wan-a"},
       "mtu": 1500,
       "a_to_b": {"rate_bps": 200000000, "delay_us": 10000, "queue_bytes": 100000, "loss": 0.0, "seed": 1, "up": true},
       "b_to_a": {"rate_bps": 200000000, "delay_us": 10000, "queue_bytes": 100000, "loss": 0.0, "seed": 2, "up": true}}
    ]}"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("test.json"))
    }

    fn error_of(edit: impl Fn(&mut Value)) -> String {
        let mut v: Value = serde_json::from_str(GOOD).unwrap();
        edit(&mut v);
        parse(&v.to_string()).unwrap_err().to_string()
    }

    #[test]
    fn contract_example_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.links.len(), 1);
        let l = &c.links[0];
        assert_eq!(l.name, "a-b");
        assert_eq!(l.a.dev, "wan-b");
        assert_eq!(l.b.netns, PathBuf::from("/run/netns/wm-b-r"));
        assert_eq!(l.a_to_b.rate_bps, 200_000_000);
        assert_eq!(l.a_to_b.delay_us, 10_000);
        assert_eq!(l.b_to_a.seed, 2);
        assert!(l.b_to_a.up);
    }

    #[test]
    fn optional_fields_take_documented_defaults() {
        let c = parse(
            r#"{"links":[{"name":"x","a":{"netns":"/n1","dev":"d1"},"b":{"netns":"/n2","dev":"d2"},
            "a_to_b":{"rate_bps":1e6,"delay_us":0,"queue_bytes":1500},
            "b_to_a":{"rate_bps":1000000,"delay_us":5,"queue_bytes":3000}}]}"#,
        )
        .unwrap();
        let l = &c.links[0];
        assert_eq!(l.mtu, DEFAULT_MTU);
        assert_eq!(l.a_to_b.rate_bps, 1_000_000);
        assert_eq!((l.a_to_b.loss, l.a_to_b.seed, l.a_to_b.up), (0.0, 0, true));
    }

    #[test]
    fn queue_below_mtu_is_refused_with_link_direction_and_field() {
        let e = error_of(|v| v["links"][0]["b_to_a"]["queue_bytes"] = 1000.into());
        assert_eq!(e, "link a-b b_to_a: queue_bytes 1000 is smaller than one MTU (1500)");
    }

    #[test]
    fn negative_delay_is_refused() {
        let e = error_of(|v| v["links"][0]["a_to_b"]["delay_us"] = (-5).into());
        assert_eq!(e, "link a-b a_to_b: delay_us must be >= 0 (got -5)");
    }

    #[test]
    fn fractional_delay_is_refused() {
        let e = error_of(|v| v["links"][0]["a_to_b"]["delay_us"] = 1.5.into());
        assert_eq!(e, "link a-b a_to_b: delay_us must be an integer (got 1.5)");
    }

    #[test]
    fn zero_rate_is_refused() {
        let e = error_of(|v| v["links"][0]["a_to_b"]["rate_bps"] = 0.into());
        assert_eq!(e, "link a-b a_to_b: rate_bps must be > 0 (got 0)");
    }

    #[test]
    fn loss_out_of_range_is_refused() {
        let e = error_of(|v| v["links"][0]["b_to_a"]["loss"] = 1.5.into());
        assert_eq!(e, "link a-b b_to_a: loss must be between 0 and 1 (got 1.5)");
        let e = error_of(|v| v["links"][0]["b_to_a"]["loss"] = (-0.1).into());
        assert!(e.contains("loss must be between 0 and 1"), "{e}");
    }

    #[test]
    fn missing_required_field_is_named() {
        let e = error_of(|v| {
            v["links"][0]["a_to_b"]
                .as_object_mut()
                .unwrap()
                .remove("rate_bps");
        });
        assert_eq!(e, "link a-b a_to_b: rate_bps is missing");
    }

    #[test]
    fn unknown_keys_are_rejected_everywhere() {
        let e = error_of(|v| v["extra"] = 1.into());
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = error_of(|v| v["links"][0]["colour"] = 1.into());
        assert!(e.starts_with("link a-b: unknown field `colour`"), "{e}");
        let e = error_of(|v| v["links"][0]["a"]["ns"] = 1.into());
        assert!(e.contains("unknown field `ns`"), "{e}");
        let e = error_of(|v| v["links"][0]["a_to_b"]["delay_ms"] = 1.into());
        assert!(e.starts_with("link a-b a_to_b: unknown field `delay_ms`"), "{e}");
    }

    #[test]
    fn duplicate_link_names_are_rejected() {
        let e = error_of(|v| {
            let mut second = v["links"][0].clone();
            second["a"]["dev"] = "other-a".into();
            second["b"]["dev"] = "other-b".into();
            v["links"].as_array_mut().unwrap().push(second);
        });
        assert_eq!(e, "link a-b: name is used twice");
    }

    #[test]
    fn one_device_for_two_ends_is_rejected() {
        let e = error_of(|v| v["links"][0]["b"] = v["links"][0]["a"].clone());
        assert!(e.starts_with("link a-b end b: device wan-b"), "{e}");
    }

    #[test]
    fn bad_mtu_and_device_names_are_rejected() {
        let e = error_of(|v| v["links"][0]["mtu"] = 10.into());
        assert!(e.starts_with("link a-b: mtu must be"), "{e}");
        let e = error_of(|v| v["links"][0]["a"]["dev"] = "a-very-long-device-name".into());
        assert!(e.starts_with("link a-b end a: dev"), "{e}");
        let e = error_of(|v| v["links"][0]["name"] = "a,b".into());
        assert!(e.contains("name must be"), "{e}");
    }

    #[test]
    fn queue_check_uses_the_links_mtu() {
        let e = error_of(|v| {
            v["links"][0]["mtu"] = 9000.into();
            v["links"][0]["a_to_b"]["queue_bytes"] = 5000.into();
        });
        assert_eq!(e, "link a-b a_to_b: queue_bytes 5000 is smaller than one MTU (9000)");
    }

    #[test]
    fn empty_links_and_bad_json_are_errors() {
        assert!(matches!(parse(r#"{"links":[]}"#), Err(ConfigError::NoLinks)));
        assert!(matches!(parse("{"), Err(ConfigError::Syntax { .. })));
    }

    #[test]
    fn patch_changes_only_given_fields() {
        let base = parse(GOOD).unwrap().links[0].a_to_b.clone();
        let patch: SettingsPatch = serde_json::from_str(r#"{"delay_us": 1, "up": false}"#).unwrap();
        let s = patch.apply(&base, 1500).unwrap();
        assert_eq!(s.delay_us, 1);
        assert!(!s.up);
        assert_eq!(s.rate_bps, base.rate_bps);
        assert_eq!(s.queue_bytes, base.queue_bytes);
    }
}
