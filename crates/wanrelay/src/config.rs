//! The relay's configuration file (TOML, or JSON when the name ends in
//! `.json`) and the pre-shared key file. The reference is docs/wanrelay.md.
//!
//! The file is read into a generic value tree and walked key by key, so
//! every error names the key (`peer[1].reachable[0]: ...`). Unknown keys are
//! errors too: a misspelt optional key must not silently keep its default.
//!
//! Quantities use the units of the topology file (docs/topology.md): rates
//! `"200Mbit"` (bit, kbit, Mbit, Gbit, Tbit, optional `/s`), sizes `"64KiB"`
//! or a bare integer of bytes, durations `"5s"`, `"500ms"`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::net::{IpAddr, SocketAddr};
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use thiserror::Error;
use wanproto::{frame::valid_name, Policy, PresharedKey, RbudpConfig};

/// A configuration that cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or JSON.
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is missing, of the wrong type or out of range.
    #[error("{key}: {message}")]
    Value {
        /// The key, e.g. `peer[0].addresses[1]`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// The pre-shared key file cannot be used.
#[derive(Debug, Error)]
pub enum KeyFileError {
    /// Not readable.
    #[error("key_file {path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Readable or writable by others than its owner and group.
    #[error("key_file {path}: mode {mode:04o} lets every user read or write the key; run `chmod 600 {path}`")]
    WorldAccessible {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Too short or too long.
    #[error("key_file {path}: {source}")]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        source: wanproto::KeyError,
    },
}

/// An IPv4 or IPv6 network (address and prefix length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    /// Network address (host bits zero).
    pub network: IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// Parses `a.b.c.d/n`, `x::y/n`, or a single address (a /32 or /128).
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let ip: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{s:?} is not an IP address or CIDR (e.g. \"10.1.0.0/24\")"))?;
        let ip = ip.to_canonical();
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?,
        };
        let network = mask(ip, prefix);
        if network != ip {
            return Err(format!(
                "{s:?} has host bits set (the network is {network}/{prefix})"
            ));
        }
        Ok(Cidr { network, prefix })
    }

    /// Whether `ip` is inside this network (IPv4-mapped IPv6 counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.network.is_ipv4() && mask(ip, self.prefix) == self.network
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

/// A set of networks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetSet(pub Vec<Cidr>);

impl NetSet {
    /// Whether any network contains `ip`.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|c| c.contains(ip))
    }

    /// The longest prefix containing `ip`, if any.
    pub fn longest_match(&self, ip: IpAddr) -> Option<u8> {
        self.0
            .iter()
            .filter(|c| c.contains(ip))
            .map(|c| c.prefix)
            .max()
    }
}

/// The WAN transport of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// TCP trunks carry everything.
    Tcp,
    /// TCP trunks for control and small data, RBUDP blasts over UDP for
    /// bulk data (docs/rbudp.md).
    Rbudp,
}

/// Which streams to an rbudp peer blast their bulk data
/// (`rbudp_streams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RbudpStreams {
    /// `"all"` (default): every stream; one with a blast request at the
    /// requested rate and payload (within the peer's).
    All,
    /// `"requested"`: only streams whose ranks asked for it (kind-3
    /// preamble); the others stay on the trunk.
    Requested,
}

/// The RBUDP settings of a peer (`transport = "rbudp"`).
#[derive(Clone, Debug, PartialEq)]
pub struct RbudpPeer {
    /// Blast rate to this peer, bytes/s on the wire (all trunks together).
    pub rate: u64,
    /// UDP payload of a full datagram, bytes (header included).
    pub payload: usize,
    /// Largest blast, bytes.
    pub blast: usize,
    /// Bytes of this peer's blasts this relay holds at most (per trunk).
    pub window: u64,
    /// Bulk reads smaller than this go over the TCP trunk.
    pub bulk_threshold: usize,
    /// TEST ONLY: share of outgoing datagrams dropped on purpose.
    pub test_drop: f64,
    /// Which streams blast.
    pub streams: RbudpStreams,
}

/// Who opens the trunk connections of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dial {
    /// This relay connects (and reconnects) to the peer.
    Connect,
    /// The peer connects to this relay.
    Accept,
}

/// One peer relay.
#[derive(Clone, Debug)]
pub struct PeerConfig {
    /// Its relay name (announced in its HELLO).
    pub name: String,
    /// Its cluster (checked after authentication).
    pub cluster: String,
    /// Addresses to connect to (tried in turn); may be empty with `dial = accept`.
    pub addresses: Vec<SocketAddr>,
    /// Destinations reached through it.
    pub reachable: NetSet,
    /// Trunk connections to keep with it.
    pub trunks: usize,
    /// WAN transport.
    pub transport: Transport,
    /// Who connects.
    pub dial: Dial,
    /// Pacing rate of each trunk to it, bytes/s (`None`: not paced).
    pub pacing_rate: Option<u64>,
    /// Pacer bucket size, bytes.
    pub pacing_burst: u64,
    /// RBUDP settings (`transport = "rbudp"` only).
    pub rbudp: Option<RbudpPeer>,
}

/// Settings of the trunk protocol (wanproto::Config) that the file may change.
#[derive(Clone, Debug)]
pub struct TrunkSettings {
    /// Streams a peer may open on one trunk.
    pub max_streams: u32,
    /// Initial (and guaranteed) window of a stream.
    pub min_stream_window: u32,
    /// Largest window a stream grows to.
    pub max_stream_window: u32,
    /// Receive memory per trunk.
    pub receive_buffer: u64,
    /// Unsent bytes one stream may hold.
    pub stream_send_buffer: u32,
    /// Largest DATA frame sent.
    pub max_data_frame: u32,
    /// Handshake timeout.
    pub handshake_timeout: Duration,
    /// Silence before a PING.
    pub keepalive: Duration,
    /// Silence before the trunk is declared dead.
    pub idle_timeout: Duration,
    /// Trunk selection policy.
    pub policy: Policy,
    /// Timeout of a TCP connect to a peer relay.
    pub connect_timeout: Duration,
    /// First reconnect delay (doubles up to `reconnect_max`).
    pub reconnect_min: Duration,
    /// Largest reconnect delay.
    pub reconnect_max: Duration,
}

/// The validated configuration of one relay.
#[derive(Clone, Debug)]
pub struct Config {
    /// The file it came from.
    pub path: PathBuf,
    /// Relay name.
    pub name: String,
    /// Relay's cluster.
    pub cluster: String,
    /// Pre-shared key file (relative paths are relative to the config file).
    pub key_file: PathBuf,
    /// tracing filter directive (`info`, `debug`, `wanrelay=debug`, ...).
    pub log_level: String,
    /// Inside listen addresses (shim connections).
    pub inside_listen: Vec<SocketAddr>,
    /// The cluster's member nodes.
    pub members: NetSet,
    /// Source address for connections to members.
    pub inside_bind: Option<IpAddr>,
    /// Time allowed for the connect preamble.
    pub preamble_timeout: Duration,
    /// Timeout of a connect to a member node.
    pub node_connect_timeout: Duration,
    /// Inside connections open at once (beyond: refused with Overloaded).
    pub max_inside_connections: usize,
    /// Outside listen addresses (trunks from peers).
    pub outside_listen: Vec<SocketAddr>,
    /// Source address for trunk connections.
    pub outside_bind: Option<IpAddr>,
    /// Trunk handshakes in progress at once on the outside listener.
    pub max_pending_trunks: usize,
    /// UDP socket for RBUDP datagrams (needed when a peer uses rbudp).
    pub udp_listen: Option<SocketAddr>,
    /// Metrics endpoint.
    pub metrics_listen: Option<SocketAddr>,
    /// Grace period of a shutdown for streams to finish.
    pub shutdown_grace: Duration,
    /// Runtime threads: 1 runs everything on one thread (the default).
    pub threads: usize,
    /// Peers.
    pub peers: Vec<PeerConfig>,
    /// Trunk protocol settings.
    pub trunk: TrunkSettings,
}

impl Config {
    /// Reads and validates a configuration file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let is_json = path.extension().is_some_and(|e| e == "json");
        let value: Value = if is_json {
            serde_json::from_str(&text).map_err(|e| ConfigError::Syntax {
                path: path.to_owned(),
                message: e.to_string(),
            })?
        } else {
            toml::from_str(&text).map_err(|e| ConfigError::Syntax {
                path: path.to_owned(),
                message: e.to_string().trim_end().to_owned(),
            })?
        };
        Config::from_value(&value, path)
    }

    /// Validates a parsed configuration (`path` locates a relative key file).
    ///
    /// # Errors
    /// [`ConfigError::Value`] naming the key at fault.
    pub fn from_value(value: &Value, path: &Path) -> Result<Config, ConfigError> {
        let root = Table::new(value, "")?;
        root.only(&[
            "name",
            "cluster",
            "key_file",
            "log_level",
            "shutdown_grace",
            "threads",
            "inside",
            "outside",
            "metrics",
            "trunk",
            "peer",
        ])?;
        let name = root.name("name")?;
        let cluster = root.name("cluster")?;
        let key_file = PathBuf::from(root.string("key_file")?);
        let key_file = if key_file.is_relative() {
            path.parent().unwrap_or(Path::new(".")).join(key_file)
        } else {
            key_file
        };
        let log_level = root
            .opt_string("log_level")?
            .unwrap_or_else(|| "info".into());
        let plain_level =
            ["off", "error", "warn", "info", "debug", "trace"].contains(&log_level.as_str());
        let directive = log_level.contains('=') || log_level.contains(',');
        if !(plain_level || directive)
            || tracing_subscriber::EnvFilter::try_new(&log_level).is_err()
        {
            return Err(root.err(
                "log_level",
                format!("{log_level:?} is not a level (error, warn, info, debug, trace) or a tracing filter"),
            ));
        }
        let threads = root.opt_int("threads", 1, 64)?.unwrap_or(1) as usize;
        let shutdown_grace = root
            .opt_duration("shutdown_grace")?
            .unwrap_or(Duration::from_secs(5));

        let inside = root.table("inside")?;
        inside.only(&[
            "listen",
            "members",
            "bind",
            "preamble_timeout",
            "connect_timeout",
            "max_connections",
        ])?;
        let inside_listen = inside.addresses("listen")?;
        if inside_listen.is_empty() {
            return Err(inside.err("listen", "at least one address is needed"));
        }
        let members = inside.nets("members")?;
        if members.0.is_empty() {
            return Err(inside.err("members", "at least one node address or CIDR is needed"));
        }
        let inside_bind = inside.opt_ip("bind")?;
        let preamble_timeout = inside
            .opt_duration("preamble_timeout")?
            .unwrap_or(Duration::from_secs(5));
        let node_connect_timeout = inside
            .opt_duration("connect_timeout")?
            .unwrap_or(Duration::from_secs(5));
        let max_inside_connections = inside
            .opt_int("max_connections", 1, 1 << 20)?
            .unwrap_or(4096) as usize;
        for &d in [&preamble_timeout, &node_connect_timeout] {
            if d.is_zero() {
                return Err(inside.err("preamble_timeout", "timeouts must be above 0"));
            }
        }

        let (outside_listen, outside_bind, max_pending_trunks, udp_listen) =
            match root.opt_table("outside")? {
                None => (Vec::new(), None, 64, None),
                Some(t) => {
                    t.only(&["listen", "bind", "max_pending", "udp_listen"])?;
                    let listen = match t.get("listen") {
                        None => Vec::new(),
                        Some(_) => t.addresses("listen")?,
                    };
                    let udp = match t.opt_string("udp_listen")? {
                        None => None,
                        Some(s) => Some(parse_socket_addr(&s).map_err(|m| t.err("udp_listen", m))?),
                    };
                    (
                        listen,
                        t.opt_ip("bind")?,
                        t.opt_int("max_pending", 1, 65536)?.unwrap_or(64) as usize,
                        udp,
                    )
                }
            };

        let metrics_listen = match root.opt_table("metrics")? {
            None => None,
            Some(t) => {
                t.only(&["listen"])?;
                match t.opt_string("listen")? {
                    None => None,
                    Some(s) => Some(parse_socket_addr(&s).map_err(|m| t.err("listen", m))?),
                }
            }
        };

        let trunk = match root.opt_table("trunk")? {
            None => trunk_settings(&Table::empty("trunk"))?,
            Some(t) => trunk_settings(&t)?,
        };

        let peers_v = root.array("peer")?;
        let mut peers = Vec::new();
        let mut names = HashSet::new();
        for (i, v) in peers_v.iter().enumerate() {
            let t = Table::new(v, &format!("peer[{i}]"))?;
            t.only(&[
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
            ])?;
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
            let rbudp = rbudp_settings(&t, transport, trunks)?;
            let dial = match t.get("dial") {
                None => {
                    if name.as_str() < pname.as_str() {
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
                        return Err(
                            t.err("pacing_burst", "must be at least 16KiB (one DATA frame)")
                        );
                    }
                    b
                }
            };
            peers.push(PeerConfig {
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
            });
        }
        if peers.is_empty() {
            return Err(ConfigError::Value {
                key: "peer".into(),
                message: "at least one [[peer]] is needed".into(),
            });
        }
        if outside_listen.is_empty() && peers.iter().any(|p| p.dial == Dial::Accept) {
            let i = peers
                .iter()
                .position(|p| p.dial == Dial::Accept)
                .unwrap_or(0);
            return Err(ConfigError::Value {
                key: "outside.listen".into(),
                message: format!(
                    "needed: peer {:?} connects to this relay (peer[{i}].dial is \"accept\")",
                    peers[i].name
                ),
            });
        }
        if udp_listen.is_none() {
            if let Some(i) = peers.iter().position(|p| p.transport == Transport::Rbudp) {
                return Err(ConfigError::Value {
                    key: "outside.udp_listen".into(),
                    message: format!(
                        "needed: peer[{i}] ({:?}) uses transport \"rbudp\", whose datagrams arrive on this UDP address",
                        peers[i].name
                    ),
                });
            }
        }
        let config = Config {
            path: path.to_owned(),
            name,
            cluster,
            key_file,
            log_level,
            inside_listen,
            members,
            inside_bind,
            preamble_timeout,
            node_connect_timeout,
            max_inside_connections,
            outside_listen,
            outside_bind,
            max_pending_trunks,
            udp_listen,
            metrics_listen,
            shutdown_grace,
            threads,
            peers,
            trunk,
        };
        config
            .protocol_config(None)
            .validate()
            .map_err(|e| ConfigError::Value {
                key: "trunk".into(),
                message: e.to_string(),
            })?;
        Ok(config)
    }

    /// The wanproto settings of a trunk, expecting a peer of `peer_cluster`.
    pub fn protocol_config(&self, peer_cluster: Option<&str>) -> wanproto::Config {
        let t = &self.trunk;
        let mut c = wanproto::Config::new(&self.name, &self.cluster);
        c.expected_peer_cluster = peer_cluster.map(str::to_owned);
        c.max_streams = t.max_streams;
        c.min_stream_window = t.min_stream_window;
        c.max_stream_window = t.max_stream_window;
        c.receive_buffer = t.receive_buffer;
        c.stream_send_buffer = t.stream_send_buffer;
        c.max_data_frame = t.max_data_frame;
        c.handshake_timeout = t.handshake_timeout.as_nanos() as u64;
        c.keepalive_interval = t.keepalive.as_nanos() as u64;
        c.idle_timeout = t.idle_timeout.as_nanos() as u64;
        c
    }

    /// Reads the pre-shared key file: refuses a file that every user may
    /// read or write, warns (returned) if its group may read it; one
    /// trailing newline is stripped.
    ///
    /// # Errors
    /// [`KeyFileError`].
    pub fn load_key(&self) -> Result<(PresharedKey, Option<String>), KeyFileError> {
        let path = &self.key_file;
        let meta = fs::metadata(path).map_err(|source| KeyFileError::Read {
            path: path.clone(),
            source,
        })?;
        let mut warning = None;
        #[cfg(unix)]
        {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o007 != 0 {
                return Err(KeyFileError::WorldAccessible {
                    path: path.clone(),
                    mode,
                });
            }
            if mode & 0o070 != 0 {
                warning = Some(format!(
                    "key_file {}: mode {mode:04o} lets its group read the key; chmod 600 is safer",
                    path.display()
                ));
            }
        }
        #[cfg(not(unix))]
        let _ = meta;
        let mut bytes = fs::read(path).map_err(|source| KeyFileError::Read {
            path: path.clone(),
            source,
        })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let key = PresharedKey::new(&bytes).map_err(|source| KeyFileError::Key {
            path: path.clone(),
            source,
        })?;
        Ok((key, warning))
    }
}

/// The RBUDP keys of a peer: required with `transport = "rbudp"`
/// (`rate`, `payload`), refused without it.
fn rbudp_settings(
    t: &Table<'_>,
    transport: Transport,
    trunks: usize,
) -> Result<Option<RbudpPeer>, ConfigError> {
    const KEYS: [&str; 7] = [
        "rate",
        "payload",
        "blast",
        "window",
        "bulk_threshold",
        "test_drop",
        "rbudp_streams",
    ];
    if transport != Transport::Rbudp {
        if let Some(k) = KEYS.iter().find(|k| t.get(k).is_some()) {
            return Err(t.err(k, "only for transport = \"rbudp\""));
        }
        return Ok(None);
    }
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
    let test_drop = match t.get("test_drop") {
        None => 0.0,
        Some(v) => match v.as_f64() {
            Some(f) if (0.0..1.0).contains(&f) => f,
            _ => return Err(t.err("test_drop", "a share 0 <= x < 1 (TEST ONLY)")),
        },
    };
    let streams = match t.opt_string("rbudp_streams")?.as_deref() {
        None | Some("all") => RbudpStreams::All,
        Some("requested") => RbudpStreams::Requested,
        Some(other) => {
            return Err(t.err(
                "rbudp_streams",
                format!(
                    "{other:?}: must be \"all\" (every stream's bulk data blasts) or \"requested\" \
                     (only connections whose ranks asked for it)"
                ),
            ))
        }
    };
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

impl RbudpPeer {
    /// The session settings of one of `trunks` trunks (the rate is shared).
    pub fn session_config(&self, trunks: usize) -> RbudpConfig {
        let mut c = RbudpConfig::new(self.trunk_rate(trunks), self.payload);
        c.receive_window = self.window;
        c
    }

    /// The blast rate of one of `trunks` trunks, bytes/s on the wire.
    pub fn trunk_rate(&self, trunks: usize) -> u64 {
        (self.rate / trunks.max(1) as u64).max(1)
    }
}

fn trunk_settings(t: &Table<'_>) -> Result<TrunkSettings, ConfigError> {
    t.only(&[
        "max_streams",
        "min_stream_window",
        "max_stream_window",
        "receive_buffer",
        "stream_send_buffer",
        "max_data_frame",
        "handshake_timeout",
        "keepalive",
        "idle_timeout",
        "select",
        "connect_timeout",
        "reconnect_min",
        "reconnect_max",
    ])?;
    let d = wanproto::Config::new("x", "x");
    let size = |k: &str, def: u64, max: u64| -> Result<u64, ConfigError> {
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
    };
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
        min_stream_window: size(
            "min_stream_window",
            d.min_stream_window.into(),
            (1 << 31) - 1,
        )? as u32,
        max_stream_window: size(
            "max_stream_window",
            d.max_stream_window.into(),
            (1 << 31) - 1,
        )? as u32,
        receive_buffer: size("receive_buffer", d.receive_buffer, 1 << 40)?,
        stream_send_buffer: size("stream_send_buffer", d.stream_send_buffer.into(), 1 << 30)?
            as u32,
        max_data_frame: size("max_data_frame", d.max_data_frame.into(), 65536)? as u32,
        handshake_timeout: t
            .opt_duration("handshake_timeout")?
            .unwrap_or(Duration::from_nanos(d.handshake_timeout)),
        keepalive: t
            .opt_duration("keepalive")?
            .unwrap_or(Duration::from_nanos(d.keepalive_interval)),
        idle_timeout: t
            .opt_duration("idle_timeout")?
            .unwrap_or(Duration::from_nanos(d.idle_timeout)),
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
    if s.connect_timeout.is_zero() {
        return Err(t.err("connect_timeout", "must be above 0"));
    }
    if s.reconnect_min.is_zero() || s.reconnect_min > s.reconnect_max {
        return Err(t.err("reconnect_min", "must be above 0 and at most reconnect_max"));
    }
    Ok(s)
}

/// A view of one table of the file, with the key path for messages.
struct Table<'a> {
    map: Option<&'a serde_json::Map<String, Value>>,
    prefix: String,
}

impl<'a> Table<'a> {
    fn new(v: &'a Value, prefix: &str) -> Result<Table<'a>, ConfigError> {
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

    fn empty(prefix: &str) -> Table<'static> {
        Table {
            map: None,
            prefix: prefix.to_owned(),
        }
    }

    fn key(&self, k: &str) -> String {
        if self.prefix.is_empty() {
            k.to_owned()
        } else {
            format!("{}.{k}", self.prefix)
        }
    }

    fn err(&self, k: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Value {
            key: self.key(k),
            message: message.into(),
        }
    }

    fn get(&self, k: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(k))
    }

    fn only(&self, known: &[&str]) -> Result<(), ConfigError> {
        if let Some(m) = self.map {
            for k in m.keys() {
                if !known.contains(&k.as_str()) {
                    return Err(self.err(k, format!("unknown key (known: {})", known.join(", "))));
                }
            }
        }
        Ok(())
    }

    fn required(&self, k: &str) -> Result<&'a Value, ConfigError> {
        self.get(k).ok_or_else(|| self.err(k, "missing"))
    }

    fn string(&self, k: &str) -> Result<String, ConfigError> {
        match self.required(k)? {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            Value::String(_) => Err(self.err(k, "must not be empty")),
            _ => Err(self.err(k, "must be a string")),
        }
    }

    fn opt_string(&self, k: &str) -> Result<Option<String>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(_) => self.string(k).map(Some),
        }
    }

    fn name(&self, k: &str) -> Result<String, ConfigError> {
        let s = self.string(k)?;
        if !valid_name(&s) {
            return Err(self.err(
                k,
                format!("{s:?}: must be 1-64 characters from A-Z a-z 0-9 . _ -"),
            ));
        }
        Ok(s)
    }

    fn opt_int(&self, k: &str, min: u64, max: u64) -> Result<Option<u64>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(self.err(k, format!("must be an integer in {min}..={max}"))),
            },
        }
    }

    fn opt_duration(&self, k: &str) -> Result<Option<Duration>, ConfigError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => parse_duration(v).map(Some).map_err(|m| self.err(k, m)),
        }
    }

    fn opt_ip(&self, k: &str) -> Result<Option<IpAddr>, ConfigError> {
        match self.opt_string(k)? {
            None => Ok(None),
            Some(s) => s
                .parse::<IpAddr>()
                .map(|ip| Some(ip.to_canonical()))
                .map_err(|_| self.err(k, format!("{s:?} is not an IP address"))),
        }
    }

    fn table(&self, k: &str) -> Result<Table<'a>, ConfigError> {
        Table::new(self.required(k)?, &self.key(k))
    }

    fn opt_table(&self, k: &str) -> Result<Option<Table<'a>>, ConfigError> {
        self.get(k).map(|v| Table::new(v, &self.key(k))).transpose()
    }

    fn array(&self, k: &str) -> Result<&'a Vec<Value>, ConfigError> {
        match self.required(k)? {
            Value::Array(a) => Ok(a),
            _ => Err(self.err(k, "must be a list")),
        }
    }

    /// A list of strings (a single string is a list of one).
    fn strings(&self, k: &str) -> Result<Vec<(String, String)>, ConfigError> {
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

    fn addresses(&self, k: &str) -> Result<Vec<SocketAddr>, ConfigError> {
        let mut out = Vec::new();
        for (key, s) in self.strings(k)? {
            let a = parse_socket_addr(&s).map_err(|message| ConfigError::Value { key, message })?;
            out.push(a);
        }
        Ok(out)
    }

    fn nets(&self, k: &str) -> Result<NetSet, ConfigError> {
        let mut out = Vec::new();
        for (key, s) in self.strings(k)? {
            out.push(Cidr::parse(&s).map_err(|message| ConfigError::Value { key, message })?);
        }
        Ok(NetSet(out))
    }
}

fn parse_socket_addr(s: &str) -> Result<SocketAddr, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({
            "name": "a0", "cluster": "a", "key_file": "k",
            "inside": {"listen": "127.0.1.254:7400", "members": ["127.0.1.0/24"]},
            "outside": {"listen": ["127.0.0.1:7401"]},
            "peer": [{"name": "b0", "cluster": "b", "addresses": "127.0.0.2:7401",
                      "reachable": ["127.0.2.0/24"], "trunks": 2, "pacing_rate": "100Mbit"}]
        })
    }

    fn err(v: Value) -> String {
        Config::from_value(&v, Path::new("/etc/x.toml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn minimal_config_gets_the_defaults() {
        let c = Config::from_value(&base(), Path::new("/etc/wanrelay/a0.toml")).unwrap();
        assert_eq!(c.key_file, Path::new("/etc/wanrelay/k"));
        assert_eq!(c.peers[0].trunks, 2);
        assert_eq!(c.peers[0].dial, Dial::Connect);
        assert_eq!(c.peers[0].pacing_rate, Some(12_500_000));
        assert_eq!(c.preamble_timeout, Duration::from_secs(5));
        assert!(c.members.contains("127.0.1.9".parse().unwrap()));
        assert!(!c.members.contains("127.0.2.9".parse().unwrap()));
    }

    #[test]
    fn every_bad_value_names_its_key() {
        type Change = fn(&mut Value);
        let cases: Vec<(Change, &str)> = vec![
            (|v| v["name"] = json!("a 0"), "name:"),
            (
                |v| v["inside"]["members"] = json!(["10.0.0.1/24"]),
                "inside.members[0]:",
            ),
            (
                |v| v["inside"]["listen"] = json!("nowhere"),
                "inside.listen:",
            ),
            (
                |v| v["peer"][0]["reachable"] = json!(["127.0.1.0/25"]),
                "peer[0].reachable:",
            ),
            (
                |v| v["peer"][0]["pacing_rate"] = json!("100Mbps"),
                "peer[0].pacing_rate:",
            ),
            (|v| v["peer"][0]["trunks"] = json!(0), "peer[0].trunks:"),
            (
                |v| v["peer"][0]["transport"] = json!("udp"),
                "peer[0].transport:",
            ),
            (|v| v["peer"][0]["colour"] = json!("red"), "peer[0].colour:"),
            (
                |v| v["peer"][0]["transport"] = json!("rbudp"),
                "peer[0].rate: required",
            ),
            (
                |v| {
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                },
                "peer[0].payload: required",
            ),
            (
                |v| {
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(20);
                },
                "peer[0].payload:",
            ),
            (
                |v| {
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(1472);
                },
                "outside.udp_listen: needed",
            ),
            (
                |v| {
                    v["outside"]["udp_listen"] = json!("127.0.0.1:7402");
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(1472);
                    v["peer"][0]["blast"] = json!("32MiB");
                },
                "peer[0].blast:",
            ),
            (
                |v| {
                    v["outside"]["udp_listen"] = json!("127.0.0.1:7402");
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(1472);
                    v["peer"][0]["test_drop"] = json!(1.5);
                },
                "peer[0].test_drop:",
            ),
            (
                |v| v["peer"][0]["rate"] = json!("100Mbit"),
                "peer[0].rate: only for",
            ),
            (
                |v| v["peer"][0]["rbudp_streams"] = json!("requested"),
                "peer[0].rbudp_streams: only for transport = \"rbudp\"",
            ),
            (
                |v| {
                    v["outside"]["udp_listen"] = json!("127.0.0.1:7402");
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(1472);
                    v["peer"][0]["rbudp_streams"] = json!("some");
                },
                "peer[0].rbudp_streams: \"some\": must be \"all\"",
            ),
            (
                |v| {
                    v["outside"]["udp_listen"] = json!("127.0.0.1:7402");
                    v["peer"][0]["transport"] = json!("rbudp");
                    v["peer"][0]["rate"] = json!("100Mbit");
                    v["peer"][0]["payload"] = json!(1472);
                    v["peer"][0]["rbudp_streams"] = json!(true);
                },
                "peer[0].rbudp_streams:",
            ),
            (|v| v["peer"][0]["cluster"] = json!("a"), "peer[0].cluster:"),
            (
                |v| v["trunk"] = json!({"idle_timeout": "20"}),
                "trunk.idle_timeout:",
            ),
            (|v| v["trunk"] = json!({"receive_buffer": "1MiB"}), "trunk:"),
            (|v| v["log_level"] = json!("loud"), "log_level:"),
            (
                |v| v["metrics"] = json!({"listen": "127.0.0.1"}),
                "metrics.listen:",
            ),
            (
                |v| {
                    v.as_object_mut().unwrap().remove("key_file");
                },
                "key_file: missing",
            ),
        ];
        for (change, key) in cases {
            let mut v = base();
            change(&mut v);
            let e = err(v);
            assert!(e.starts_with(key), "{e:?} should start with {key:?}");
        }
    }

    #[test]
    fn rbudp_peer_settings_and_defaults() {
        let mut v = base();
        v["outside"]["udp_listen"] = json!("127.0.0.1:7402");
        v["peer"][0]["transport"] = json!("rbudp");
        v["peer"][0]["rate"] = json!("190Mbit");
        v["peer"][0]["payload"] = json!(1472);
        let c = Config::from_value(&v, Path::new("/etc/x.toml")).unwrap();
        let r = c.peers[0].rbudp.clone().unwrap();
        assert_eq!(c.peers[0].transport, Transport::Rbudp);
        assert_eq!(r.rate, 190_000_000 / 8);
        assert_eq!((r.payload, r.blast, r.window), (1472, 1 << 20, 16 << 20));
        assert_eq!(r.bulk_threshold, 256 << 10);
        assert_eq!(r.test_drop, 0.0);
        assert_eq!(r.streams, RbudpStreams::All);
        // Two trunks share the rate.
        assert_eq!(r.session_config(2).rate, 190_000_000 / 16);
        assert_eq!(c.udp_listen, Some("127.0.0.1:7402".parse().unwrap()));
        assert_eq!(r.trunk_rate(2), 190_000_000 / 16);
        for (value, streams) in [
            ("all", RbudpStreams::All),
            ("requested", RbudpStreams::Requested),
        ] {
            v["peer"][0]["rbudp_streams"] = json!(value);
            let c = Config::from_value(&v, Path::new("/etc/x.toml")).unwrap();
            assert_eq!(c.peers[0].rbudp.as_ref().unwrap().streams, streams);
        }
    }

    #[test]
    fn cidrs_and_units() {
        let c = Cidr::parse("10.1.0.0/16").unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.3".parse().unwrap()));
        assert!(Cidr::parse("10.1.0.1/16").is_err());
        assert_eq!(Cidr::parse("fd00::1").unwrap().prefix, 128);
        assert_eq!(parse_rate(&json!("1.5 Gbit/s")).unwrap(), 1_500_000_000);
        assert_eq!(parse_size(&json!("64KiB")).unwrap(), 65536);
        assert_eq!(parse_size(&json!(1000)).unwrap(), 1000);
        assert_eq!(
            parse_duration(&json!("250ms")).unwrap(),
            Duration::from_millis(250)
        );
        assert!(parse_duration(&json!(5)).is_err());
    }
}
