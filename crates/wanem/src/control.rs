//! The control protocol: one JSON object per line in, one per line out.
//!
//! This module parses requests and formats replies; the runtime executes
//! them (monitor files are I/O) against the [`crate::emulator::Emulator`].

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Number, Value};

use crate::config::SettingsPatch;
use crate::emulator::DirSelect;

/// Longest accepted request line (bytes, without the newline).
pub const MAX_LINE: usize = 64 * 1024;

/// A parsed control request.
#[derive(Debug, PartialEq)]
pub enum Request {
    /// `{"cmd":"show"}`
    Show,
    /// `{"cmd":"set","link":..,"dir":..,<settings>}`
    Set {
        /// Link name.
        link: String,
        /// Directions to change.
        dir: DirSelect,
        /// The settings to change.
        patch: SettingsPatch,
    },
    /// `{"cmd":"monitor","file":"/path.csv"|null}`
    Monitor {
        /// Where to write, or `None` to stop.
        file: Option<PathBuf>,
    },
    /// `{"cmd":"reset_counters"}`
    ResetCounters,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    link: String,
    dir: String,
    rate_bps: Option<Number>,
    delay_us: Option<Number>,
    queue_bytes: Option<Number>,
    loss: Option<Number>,
    seed: Option<Number>,
    up: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MonitorArgs {
    file: Option<String>,
}

fn args<T: serde::de::DeserializeOwned>(cmd: &str, rest: Value) -> Result<T, String> {
    serde_json::from_value(rest).map_err(|e| format!("{cmd}: {e}"))
}

/// Parses one request line.
///
/// # Errors
/// A message for the `error` field of the reply.
pub fn parse_request(line: &str) -> Result<Request, String> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| format!("malformed request: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("malformed request: expected a JSON object".into());
    };
    let cmd = match map.remove("cmd") {
        Some(Value::String(s)) => s,
        Some(_) => return Err("malformed request: cmd must be a string".into()),
        None => return Err("malformed request: cmd is missing".into()),
    };
    let rest = Value::Object(map);
    match cmd.as_str() {
        "show" => args::<NoArgs>(&cmd, rest).map(|_| Request::Show),
        "reset_counters" => args::<NoArgs>(&cmd, rest).map(|_| Request::ResetCounters),
        "monitor" => {
            let has_file = rest.get("file").is_some();
            let a: MonitorArgs = args(&cmd, rest)?;
            if !has_file {
                return Err("monitor: file is missing (a path, or null to stop)".into());
            }
            match a.file {
                Some(f) if f.is_empty() => Err("monitor: file is empty".into()),
                f => Ok(Request::Monitor {
                    file: f.map(PathBuf::from),
                }),
            }
        }
        "set" => {
            let a: SetArgs = args(&cmd, rest)?;
            let dir = DirSelect::parse(&a.dir).ok_or_else(|| {
                format!("set: dir must be \"a_to_b\", \"b_to_a\" or \"both\" (got {:?})", a.dir)
            })?;
            Ok(Request::Set {
                link: a.link,
                dir,
                patch: SettingsPatch {
                    rate_bps: a.rate_bps,
                    delay_us: a.delay_us,
                    queue_bytes: a.queue_bytes,
                    loss: a.loss,
                    seed: a.seed,
                    up: a.up,
                },
            })
        }
        other => Err(format!(
            "unknown cmd {other:?} (expected show, set, monitor or reset_counters)"
        )),
    }
}

/// `{"ok":true}` plus newline.
pub fn ok_reply() -> String {
    "{\"ok\":true}\n".to_string()
}

#[derive(serde::Serialize)]
struct ErrorReply<'a> {
    ok: bool,
    error: &'a str,
}

/// `{"ok":false,"error":..}` plus newline.
pub fn error_reply(message: &str) -> String {
    let reply = ErrorReply {
        ok: false,
        error: message,
    };
    let mut s = serde_json::to_string(&reply)
        .unwrap_or_else(|_| "{\"ok\":false,\"error\":\"unprintable error\"}".into());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Dir;

    #[test]
    fn parses_every_command() {
        assert_eq!(parse_request(r#"{"cmd":"show"}"#), Ok(Request::Show));
        assert_eq!(
            parse_request(r#"{"cmd":"reset_counters"}"#),
            Ok(Request::ResetCounters)
        );
        assert_eq!(
            parse_request(r#"{"cmd":"monitor","file":"/tmp/x.csv"}"#),
            Ok(Request::Monitor {
                file: Some(PathBuf::from("/tmp/x.csv"))
            })
        );
        assert_eq!(
            parse_request(r#"{"cmd":"monitor","file":null}"#),
            Ok(Request::Monitor { file: None })
        );
        let Ok(Request::Set { link, dir, patch }) =
            parse_request(r#"{"cmd":"set","link":"a-b","dir":"b_to_a","delay_us":5,"up":false}"#)
        else {
            panic!("set did not parse");
        };
        assert_eq!(link, "a-b");
        assert_eq!(dir, DirSelect::One(Dir::BToA));
        assert_eq!(patch.delay_us, Some(5.into()));
        assert_eq!(patch.up, Some(false));
        assert_eq!(patch.rate_bps, None);
    }

    #[test]
    fn malformed_requests_are_errors_not_panics() {
        for line in [
            "",
            "{",
            "[]",
            "42",
            r#"{"cmd":1}"#,
            r#"{"nocmd":true}"#,
            r#"{"cmd":"fly"}"#,
            r#"{"cmd":"show","x":1}"#,
            r#"{"cmd":"set","link":"a-b","dir":"up"}"#,
            r#"{"cmd":"set","link":"a-b","dir":"both","delay":5}"#,
            r#"{"cmd":"set","dir":"both"}"#,
            r#"{"cmd":"set","link":"a-b","dir":"both","up":"yes"}"#,
            r#"{"cmd":"monitor"}"#,
            r#"{"cmd":"monitor","file":""}"#,
            r#"{"cmd":"monitor","file":3}"#,
        ] {
            assert!(parse_request(line).is_err(), "{line} parsed");
        }
    }

    #[test]
    fn error_reply_is_one_json_line() {
        let r = error_reply("bad \"thing\"\nhere");
        assert!(r.ends_with('\n'));
        assert_eq!(r.matches('\n').count(), 1);
        assert!(r.starts_with("{\"ok\":false,\"error\":"), "{r}");
        let v: Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["ok"], false);
        assert_eq!(v["error"], "bad \"thing\"\nhere");
    }
}
