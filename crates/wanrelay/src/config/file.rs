//! The file format: the file read into a generic value tree (TOML, or
//! JSON when the name ends in `.json`), and [`Table`], which reads one
//! table of it key by key, naming the key in every error.

use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use wanproto::frame::valid_name;

use super::net::{Cidr, NetSet};
use super::units::{parse_duration, parse_socket_addr};
use super::ConfigError;

/// The file at `path` as a value tree: JSON if its name ends in `.json`,
/// else TOML.
///
/// # Errors
/// [`ConfigError::Read`] or [`ConfigError::Syntax`] naming the file.
pub fn read(path: &Path) -> Result<Value, ConfigError> {
    let text = fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    if is_json {
        serde_json::from_str(&text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string(),
        })
    } else {
        toml::from_str(&text).map_err(|e| ConfigError::Syntax {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })
    }
}

/// A view of one table of the file, with the key path for messages.
pub struct Table<'a> {
    map: Option<&'a serde_json::Map<String, Value>>,
    prefix: String,
}

impl<'a> Table<'a> {
    /// The table `v` at key path `prefix` ("" for the top level).
    pub fn new(v: &'a Value, prefix: &str) -> Result<Table<'a>, ConfigError> {
        match v {
            Value::Object(map) => Ok(Table {
                map: Some(map),
                prefix: prefix.to_owned(),
            }),
            _ => Err(ConfigError::Value {
                key: if prefix.is_empty() {
                    "(top level)".into()
                } else {
                    prefix.into()
                },
                message: "must be a table".into(),
            }),
        }
    }

    /// An absent table: every key takes its default.
    pub fn empty(prefix: &str) -> Table<'static> {
        Table {
            map: None,
            prefix: prefix.to_owned(),
        }
    }

    /// The key path of `k` in this table, for messages.
    pub fn key(&self, k: &str) -> String {
        if self.prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{}.{k}", self.prefix)
        }
    }

    /// An error for key `k` of this table.
    pub fn err(&self, k: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Value {
            key: self.key(k),
            message: message.into(),
        }
    }

    /// The value of `k`, if present.
    pub fn get(&self, k: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(k))
    }

    /// Refuses a key not in `known` (a misspelt key must not keep its default silently).
    pub fn only(&self, known: &[&str]) -> Result<(), ConfigError> {
        if let Some(m) = self.map {
            for k in m.keys() {
                if !known.contains(&k.as_str()) {
                    return Err(self.err(k, format!("unknown key (known: {})", known.join(", "))));
                }
            }
        }
        Ok(())
    }

    /// The value of `k`; an error when missing.
    pub fn required(&self, k: &str) -> Result<&'a Value, ConfigError> {
        self.get(k).ok_or_else(|| self.err(k, "missing"))
    }

    /// A non-empty string.
    pub fn string(&self, k: &str) -> Result<String, ConfigError> {
        match self.required(k)? {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            Value::String(_) => Err(self.err(k, "must not be empty")),
            _ => Err(self.err(k, "must be a string")),
        }
    }

    /// A non-empty string, if present.
    pub fn opt_string(&self, k: &str) -> Result<Option<String>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(_) => self.string(k).map(Some),
        }
    }

    /// A relay or cluster name (1-64 of A-Z a-z 0-9 . _ -).
    pub fn name(&self, k: &str) -> Result<String, ConfigError> {
        let s = self.string(k)?;
        if !valid_name(&s) {
            return Err(self.err(
                k,
                format!("{s:?}: must be 1-64 characters from A-Z a-z 0-9 . _ -"),
            ));
        }
        Ok(s)
    }

    /// An integer in `min..=max`, if present.
    pub fn opt_int(&self, k: &str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(self.err(k, format!("must be an integer in {min}..={max}"))),
            },
        }
    }

    /// A duration (`"5s"`), if present.
    pub fn opt_duration(&self, k: &str) -> Result<Option<Duration>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => parse_duration(v).map(Some).map_err(|m| self.err(k, m)),
        }
    }

    /// An IP address (IPv4-mapped as IPv4), if present.
    pub fn opt_ip(&self, k: &str) -> Result<Option<IpAddr>, ConfigError> {
        match self.opt_string(k)? {
            None => Ok(None),
            Some(s) => s
                .parse::<IpAddr>()
                .map(|ip| Some(ip.to_canonical()))
                .map_err(|_| self.err(k, format!("{s:?} is not an IP address"))),
        }
    }

    /// The sub-table `k`; an error when missing.
    pub fn table(&self, k: &str) -> Result<Table<'a>, ConfigError> {
        Table::new(self.required(k)?, &self.key(k))
    }

    /// The sub-table `k`, if present.
    pub fn opt_table(&self, k: &str) -> Result<Option<Table<'a>>, ConfigError> {
        self.get(k).map(|v| Table::new(v, &self.key(k))).transpose()
    }

    /// The list `k`; an error when missing.
    pub fn array(&self, k: &str) -> Result<&'a Vec<Value>, ConfigError> {
        match self.required(k)? {
            Value::Array(a) => Ok(a),
            _ => Err(self.err(k, "must be a list")),
        }
    }

    /// A list of strings (a single string is a list of one).
    pub fn strings(&self, k: &str) -> Result<Vec<(String, String)>, ConfigError> {
        let v = self.required(k)?;
        let items: Vec<(String, &Value)> = match v {
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("{}[{i}]", self.key(k)), v))
                .collect(),
            other => vec![(self.key(k), other)],
        };
        items
            .into_iter()
            .map(|(key, v)| match v {
                Value::String(s) => Ok((key, s.clone())),
                _ => Err(ConfigError::Value {
                    key,
                    message: "must be a string".into(),
                }),
            })
            .collect()
    }

    /// A list of `address:port` (or one).
    pub fn addresses(&self, k: &str) -> Result<Vec<SocketAddr>, ConfigError> {
        let mut out = Vec::new();
        for (key, s) in self.strings(k)? {
            let a = parse_socket_addr(&s).map_err(|message| ConfigError::Value { key, message })?;
            out.push(a);
        }
        Ok(out)
    }

    /// A list of networks or single addresses (or one).
    pub fn nets(&self, k: &str) -> Result<NetSet, ConfigError> {
        let mut out = Vec::new();
        for (key, s) in self.strings(k)? {
            out.push(Cidr::parse(&s).map_err(|message| ConfigError::Value { key, message })?);
        }
        Ok(NetSet(out))
    }
}
