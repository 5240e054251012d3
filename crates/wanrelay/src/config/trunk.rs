//! The `[trunk]` table: the settings of the trunk protocol
//! (`wanproto::Config`) the file may change, trunk selection, and the
//! dialers' timeouts.

use std::time::Duration;

use wanproto::Policy;

use super::file::Table;
use super::units::parse_size;
use super::{ConfigError, TrunkSettings};

/// The keys of `[trunk]`.
const TRUNK_KEYS: [&str; 15] = [
    "max_streams",
    "min_stream_window",
    "max_stream_window",
    "receive_buffer",
    "stream_send_buffer",
    "max_data_frame",
    "handshake_timeout",
    "keepalive",
    "idle_timeout",
    "resume_timeout",
    "resume_buffer",
    "select",
    "connect_timeout",
    "reconnect_min",
    "reconnect_max",
];

/// The `[trunk]` table `t` (an empty one for the defaults).
///
/// # Errors
/// [`ConfigError::Value`] naming the key at fault.
pub fn trunk_settings(t: &Table<'_>) -> Result<TrunkSettings, ConfigError> {
    t.only(&TRUNK_KEYS)?;
    let d = wanproto::Config::new("x", "x");
    let policy = match t.opt_string("select")?.as_deref() {
        None | Some("host") => Policy::DestinationHost,
        Some("least_loaded") => Policy::LeastLoaded,
        Some(o) => {
            return Err(t.err(
                "select",
                format!("{o:?}: must be \"host\" or \"least_loaded\""),
            ))
        }
    };
    let s = TrunkSettings {
        max_streams: t
            .opt_int("max_streams", 1, 1 << 20)?
            .unwrap_or(u64::from(d.max_streams)) as u32,
        min_stream_window: limited_size(
            t,
            "min_stream_window",
            d.min_stream_window.into(),
            (1 << 31) - 1,
        )? as u32,
        max_stream_window: limited_size(
            t,
            "max_stream_window",
            d.max_stream_window.into(),
            (1 << 31) - 1,
        )? as u32,
        receive_buffer: limited_size(t, "receive_buffer", d.receive_buffer, 1 << 40)?,
        stream_send_buffer: limited_size(
            t,
            "stream_send_buffer",
            d.stream_send_buffer.into(),
            1 << 30,
        )? as u32,
        max_data_frame: limited_size(t, "max_data_frame", d.max_data_frame.into(), 65536)? as u32,
        handshake_timeout: t
            .opt_duration("handshake_timeout")?
            .unwrap_or(Duration::from_nanos(d.handshake_timeout)),
        keepalive: t
            .opt_duration("keepalive")?
            .unwrap_or(Duration::from_nanos(d.keepalive_interval)),
        idle_timeout: t
            .opt_duration("idle_timeout")?
            .unwrap_or(Duration::from_nanos(d.idle_timeout)),
        resume_timeout: t
            .opt_duration("resume_timeout")?
            .unwrap_or(Duration::from_nanos(d.resume_timeout)),
        resume_buffer: limited_size(t, "resume_buffer", d.resume_buffer, 1 << 40)?,
        policy,
        connect_timeout: t
            .opt_duration("connect_timeout")?
            .unwrap_or(Duration::from_secs(5)),
        reconnect_min: t
            .opt_duration("reconnect_min")?
            .unwrap_or(Duration::from_millis(100)),
        reconnect_max: t
            .opt_duration("reconnect_max")?
            .unwrap_or(Duration::from_secs(5)),
    };
    if !s.resume_timeout.is_zero() && s.resume_buffer < wanproto::MIN_RESUME_BUFFER {
        return Err(t.err(
            "resume_buffer",
            "must be at least 1MiB (the replay buffer of a resumable trunk)",
        ));
    }
    if s.connect_timeout.is_zero() {
        return Err(t.err("connect_timeout", "must be above 0"));
    }
    if s.reconnect_min.is_zero() || s.reconnect_min > s.reconnect_max {
        return Err(t.err("reconnect_min", "must be above 0 and at most reconnect_max"));
    }
    Ok(s)
}
/// The size `k` in bytes, `def` when absent, at most `max`.
fn limited_size(t: &Table<'_>, k: &str, def: u64, max: u64) -> Result<u64, ConfigError> {
    match t.get(k) {
        None => Ok(def),
        Some(v) => {
            let n = parse_size(v).map_err(|m| t.err(k, m))?;
            if n > max {
                return Err(t.err(k, format!("{n} bytes is above the limit {max}")));
            }
            Ok(n)
        }
    }
}
