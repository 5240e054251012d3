//! Quantities in the units of the topology file (docs/topology.md): rates
//! `"200Mbit"` (bit, kbit, Mbit, Gbit, Tbit, optional `/s`), sizes `"64KiB"`
//! or a bare integer of bytes, durations `"5s"`, `"500ms"`; and socket
//! addresses. Each parser returns a message without the key; the caller
//! names it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

/// An `address:port` with a port above 0 (IPv4-mapped addresses as IPv4).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
    let a: SocketAddr = s.parse().map_err(|_| {
        format!("{s:?} is not an address:port (e.g. \"10.0.0.254:7400\", \"[fd00::1]:7400\")")
    })?;
    if a.port() == 0 {
        return Err(format!("{s:?}: port 0"));
    }
    Ok(SocketAddr::new(a.ip().to_canonical(), a.port()))
}

fn split_quantity(v: &Value, what: &str, example: &str) -> Result<(f64, String), String> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .map(|f| (f, String::new()))
            .ok_or_else(|| format!("cannot read {n} as a {what}")),
        Value::String(s) => {
            let s = s.trim();
            let split = s
                .find(|c: char| {
                    !(c.is_ascii_digit()
                        || c == '.'
                        || c == '+'
                        || c == '-'
                        || c == 'e'
                        || c == 'E')
                })
                .unwrap_or(s.len());
            // "1e3kbit" is fine; "e" inside a unit ("Gbit") is not a digit run
            let (num, unit) = s.split_at(split);
            let (num, unit) = if num.ends_with(['e', 'E']) {
                (&num[..num.len() - 1], &s[num.len() - 1..])
            } else {
                (num, unit)
            };
            let f: f64 = num
                .parse()
                .map_err(|_| format!("cannot read {s:?} as a {what} (example: {example})"))?;
            if !f.is_finite() || f < 0.0 {
                return Err(format!("{s:?}: a {what} must be a non-negative number"));
            }
            Ok((f, unit.trim().to_owned()))
        }
        _ => Err(format!("must be a {what} such as {example}")),
    }
}

/// A rate in bits/s: `"200Mbit"`, `"1.5 Gbit/s"` (bit, kbit, Mbit, Gbit, Tbit).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_rate(v: &Value) -> Result<u64, String> {
    let (n, unit) = split_quantity(v, "rate", "\"200Mbit\"")?;
    let lower = unit.to_ascii_lowercase();
    let key = lower.strip_suffix("/s").unwrap_or(&lower);
    let units: BTreeMap<&str, f64> = [
        ("bit", 1.0),
        ("kbit", 1e3),
        ("mbit", 1e6),
        ("gbit", 1e9),
        ("tbit", 1e12),
    ]
    .into_iter()
    .collect();
    let Some(scale) = units.get(key) else {
        if key.ends_with("bps") {
            return Err(format!(
                "ambiguous unit {unit:?}: write bits per second as \"kbit\", \"Mbit\" or \"Gbit\""
            ));
        }
        return Err(format!(
            "{v} needs a unit: bit, kbit, Mbit, Gbit or Tbit (e.g. \"200Mbit\")"
        ));
    };
    let bits = (n * scale).round();
    if bits < 8000.0 {
        return Err(format!("{v} is below 8 kbit/s"));
    }
    Ok(bits as u64)
}

/// A size in bytes: an integer, or `"64KiB"` (B, KB, MB, GB, KiB, MiB, GiB).
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_size(v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    let (n, unit) = split_quantity(v, "size", "\"64KiB\"")?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {v} (B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    Ok((n * scale).round() as u64)
}

/// A duration: `"5s"`, `"500ms"`, `"250us"` (ns, us, ms, s), or 0.
///
/// # Errors
/// A message saying what is wrong.
pub fn parse_duration(v: &Value) -> Result<Duration, String> {
    let (n, unit) = split_quantity(v, "duration", "\"5s\" or \"500ms\"")?;
    let ns = match unit.to_ascii_lowercase().as_str() {
        "" if n == 0.0 => 0.0,
        "" => {
            return Err(format!(
                "{v} needs a unit: ns, us, ms or s (e.g. \"500ms\")"
            ))
        }
        "ns" => n,
        "us" => n * 1e3,
        "ms" => n * 1e6,
        "s" => n * 1e9,
        _ => return Err(format!("unknown unit {unit:?} in {v} (ns, us, ms, s)")),
    };
    if ns > 1e9 * 86400.0 * 365.0 {
        return Err(format!("{v} is too long"));
    }
    Ok(Duration::from_nanos(ns.round() as u64))
}
