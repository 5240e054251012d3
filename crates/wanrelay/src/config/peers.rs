//! The `[[peer]]` tables: one peer relay each, with its RBUDP keys when it
//! uses `transport = "rbudp"`.

use std::collections::HashSet;
use std::net::SocketAddr;

use serde_json::Value;
use wanproto::RbudpConfig;

use super::file::Table;
use super::net::NetSet;
use super::units::{parse_rate, parse_size};
use super::{ConfigError, Dial, PeerConfig, RbudpPeer, RbudpStreams, Transport};

/// The keys of a `[[peer]]` table.
const PEER_KEYS: [&str; 16] = [
    "name",
    "cluster",
    "addresses",
    "reachable",
    "trunks",
    "transport",
    "dial",
    "pacing_rate",
    "pacing_burst",
    "rate",
    "payload",
    "blast",
    "window",
    "bulk_threshold",
    "test_drop",
    "rbudp_streams",
];

/// The keys only a peer with `transport = "rbudp"` may have.
const RBUDP_KEYS: [&str; 7] = [
    "rate",
    "payload",
    "blast",
    "window",
    "bulk_threshold",
    "test_drop",
    "rbudp_streams",
];

/// Every `[[peer]]` of the file (at least one) of relay `name` in
/// `cluster`, whose own nodes are `members`.
///
/// # Errors
/// [`ConfigError::Value`] naming the key at fault.
pub fn peer_list(
    root: &Table<'_>,
    name: &str,
    cluster: &str,
    members: &NetSet,
) -> Result<Vec<PeerConfig>, ConfigError> {
    let mut peers = Vec::new();
    let mut names = HashSet::new();
    for (i, v) in root.array("peer")?.iter().enumerate() {
        let t = Table::new(v, &format!("peer[{i}]"))?;
        t.only(&PEER_KEYS)?;
        peers.push(peer(&t, &mut names, name, cluster, members)?);
    }
    if peers.is_empty() {
        return Err(ConfigError::Value {
            key: "peer".into(),
            message: "at least one [[peer]] is needed".into(),
        });
    }
    Ok(peers)
}

/// One `[[peer]]` table; `names` holds the names of the peers before it.
fn peer(
    t: &Table<'_>,
    names: &mut HashSet<String>,
    name: &str,
    cluster: &str,
    members: &NetSet,
) -> Result<PeerConfig, ConfigError> {
    let pname = t.name("name")?;
    if !names.insert(pname.clone()) {
        return Err(t.err("name", format!("{pname:?} appears twice")));
    }
    if pname == name {
        return Err(t.err("name", format!("{pname:?} is this relay's own name")));
    }
    let pcluster = t.name("cluster")?;
    if pcluster == cluster {
        return Err(t.err(
            "cluster",
            format!("{pcluster:?} is this relay's own cluster: peers serve other clusters"),
        ));
    }
    let addresses = match t.get("addresses") {
        None => Vec::new(),
        Some(_) => t.addresses("addresses")?,
    };
    let reachable = reachable(t, members)?;
    let trunks = t.opt_int("trunks", 1, 64)?.unwrap_or(1) as usize;
    let transport = match t.opt_string("transport")?.as_deref() {
        None | Some("tcp") => Transport::Tcp,
        Some("rbudp") => Transport::Rbudp,
        Some(other) => {
            return Err(t.err(
                "transport",
                format!("{other:?}: must be \"tcp\" or \"rbudp\""),
            ))
        }
    };
    let rbudp = rbudp_settings(t, transport, trunks)?;
    let dial = dial(t, name, &pname, &addresses)?;
    let (pacing_rate, pacing_burst) = pacing(t)?;
    Ok(PeerConfig {
        name: pname,
        cluster: pcluster,
        addresses,
        reachable,
        trunks,
        transport,
        dial,
        pacing_rate,
        pacing_burst,
        rbudp,
    })
}

/// `reachable`: at least one network, none overlapping `members`.
fn reachable(t: &Table<'_>, members: &NetSet) -> Result<NetSet, ConfigError> {
    let reachable = t.nets("reachable")?;
    if reachable.0.is_empty() {
        return Err(t.err("reachable", "at least one CIDR is needed"));
    }
    for c in &reachable.0 {
        if members
            .0
            .iter()
            .any(|m| m.contains(c.network) || c.contains(m.network))
        {
            return Err(t.err(
                "reachable",
                format!("{c} overlaps this relay's own members (inside.members)"),
            ));
        }
    }
    Ok(reachable)
}

/// `dial`: by default the relay whose name sorts first connects.
fn dial(
    t: &Table<'_>,
    name: &str,
    pname: &str,
    addresses: &[SocketAddr],
) -> Result<Dial, ConfigError> {
    let dial = match t.get("dial") {
        None => {
            if name < pname {
                Dial::Connect
            } else {
                Dial::Accept
            }
        }
        Some(Value::Bool(true)) => Dial::Connect,
        Some(Value::Bool(false)) => Dial::Accept,
        Some(Value::String(s)) if s == "connect" => Dial::Connect,
        Some(Value::String(s)) if s == "accept" => Dial::Accept,
        Some(_) => return Err(t.err("dial", "must be \"connect\" or \"accept\"")),
    };
    if dial == Dial::Connect && addresses.is_empty() {
        return Err(t.err(
            "addresses",
            "needed: this relay connects to the peer (dial = \"connect\")",
        ));
    }
    Ok(dial)
}

/// `pacing_rate` (bytes/s, `None`: not paced) and `pacing_burst` (bytes).
fn pacing(t: &Table<'_>) -> Result<(Option<u64>, u64), ConfigError> {
    let pacing_rate = match t.get("pacing_rate") {
        None => None,
        Some(Value::String(s)) if s == "off" => None,
        Some(v) => Some(parse_rate(v).map_err(|m| t.err("pacing_rate", m))? / 8),
    };
    let pacing_burst = match t.get("pacing_burst") {
        None => wanproto::Pacer::default_burst(pacing_rate.unwrap_or(0)),
        Some(v) => {
            let b = parse_size(v).map_err(|m| t.err("pacing_burst", m))?;
            if b < 16 * 1024 {
                return Err(t.err("pacing_burst", "must be at least 16KiB (one DATA frame)"));
            }
            b
        }
    };
    Ok((pacing_rate, pacing_burst))
}

/// The RBUDP keys of a peer: required with `transport = "rbudp"`
/// (`rate`, `payload`), refused without it.
fn rbudp_settings(
    t: &Table<'_>,
    transport: Transport,
    trunks: usize,
) -> Result<Option<RbudpPeer>, ConfigError> {
    if transport != Transport::Rbudp {
        if let Some(k) = RBUDP_KEYS.iter().find(|k| t.get(k).is_some()) {
            return Err(t.err(k, "only for transport = \"rbudp\""));
        }
        return Ok(None);
    }
    let rate = rbudp_rate(t)?;
    let payload = rbudp_payload(t)?;
    let (window, blast, bulk_threshold) = blast_sizes(t, payload)?;
    let test_drop = match t.get("test_drop") {
        None => 0.0,
        Some(v) => match v.as_f64() {
            Some(f) if (0.0..1.0).contains(&f) => f,
            _ => return Err(t.err("test_drop", "a share 0 <= x < 1 (TEST ONLY)")),
        },
    };
    let streams = rbudp_streams(t)?;
    let per_trunk = RbudpConfig::new(rate / trunks as u64, payload as usize);
    per_trunk
        .validate()
        .map_err(|e| t.err("rate", e.to_string()))?;
    Ok(Some(RbudpPeer {
        rate,
        payload: payload as usize,
        blast: blast as usize,
        window,
        bulk_threshold: bulk_threshold as usize,
        test_drop,
        streams,
    }))
}

/// `rate` (required), bytes/s.
fn rbudp_rate(t: &Table<'_>) -> Result<u64, ConfigError> {
    let rate = match t.get("rate") {
        None => {
            return Err(t.err(
                "rate",
                "required with transport = \"rbudp\": RBUDP sends at this rate whatever the loss \
                 (it is not TCP-friendly); give the dedicated link's rate or less, e.g. \"190Mbit\"",
            ))
        }
        Some(v) => parse_rate(v).map_err(|m| t.err("rate", m))? / 8,
    };
    if rate < 1000 {
        return Err(t.err("rate", "must be at least 8kbit"));
    }
    Ok(rate)
}

/// `payload` (required), bytes.
fn rbudp_payload(t: &Table<'_>) -> Result<u64, ConfigError> {
    let payload = match t.get("payload") {
        None => {
            return Err(t.err(
                "payload",
                "required with transport = \"rbudp\": the UDP payload of a datagram in bytes, \
                 e.g. 1472 for a 1500-byte MTU",
            ))
        }
        Some(v) => parse_size(v).map_err(|m| t.err("payload", m))?,
    };
    let (lo, hi) = (wanproto::rbudp::MIN_DATAGRAM, wanproto::rbudp::MAX_DATAGRAM);
    if payload < lo as u64 || payload > hi as u64 {
        return Err(t.err("payload", format!("{payload} bytes: must be {lo}..={hi}")));
    }
    Ok(payload)
}

/// `window`, `blast` and `bulk_threshold`, bytes, for datagrams of
/// `payload` bytes.
fn blast_sizes(t: &Table<'_>, payload: u64) -> Result<(u64, u64, u64), ConfigError> {
    let size = |k: &str, default: u64, min: u64, max: u64| -> Result<u64, ConfigError> {
        let v = match t.get(k) {
            None => default,
            Some(v) => parse_size(v).map_err(|m| t.err(k, m))?,
        };
        if v < min || v > max {
            return Err(t.err(k, format!("{v} bytes: must be {min}..={max}")));
        }
        Ok(v)
    };
    let window = size("window", 16 << 20, 64 << 10, 1 << 30)?;
    let blast = size("blast", 1 << 20, 16 << 10, 64 << 20)?;
    if blast > window {
        return Err(t.err(
            "blast",
            format!("{blast} bytes: larger than window ({window})"),
        ));
    }
    let chunk = payload - wanproto::rbudp::DATAGRAM_HEADER_LEN as u64;
    if blast.div_ceil(chunk) > u64::from(wanproto::rbudp::MAX_BLAST_PACKETS) {
        return Err(t.err(
            "blast",
            "more than 262144 datagrams: raise payload or lower blast",
        ));
    }
    let bulk_threshold = size("bulk_threshold", 256 << 10, 64 << 10, blast)?;
    Ok((window, blast, bulk_threshold))
}

/// `rbudp_streams`: `"all"` (default) or `"requested"`.
fn rbudp_streams(t: &Table<'_>) -> Result<RbudpStreams, ConfigError> {
    match t.opt_string("rbudp_streams")?.as_deref() {
        None | Some("all") => Ok(RbudpStreams::All),
        Some("requested") => Ok(RbudpStreams::Requested),
        Some(other) => Err(t.err(
            "rbudp_streams",
            format!(
                "{other:?}: must be \"all\" (every stream's bulk data blasts) or \"requested\" \
                 (only connections whose ranks asked for it)"
            ),
        )),
    }
}
