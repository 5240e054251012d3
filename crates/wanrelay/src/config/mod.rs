//! The relay's configuration: the types every part of the relay reads.
//! The reference is docs/wanrelay.md.
//!
//! * [`file`](mod@file): the file (TOML, or JSON when the name ends in `.json`) read
//!   into a generic value tree, and [`file::Table`], which reads one table
//!   of it key by key, so every error names the key
//!   (`peer[1].reachable[0]: ...`);
//! * [`validate`] ([`Config::load`], [`Config::from_value`]): the top-level
//!   keys and `[inside]`, `[outside]`, `[metrics]`, and the checks across
//!   sections; [`peers`] the `[[peer]]` tables (with their RBUDP keys),
//!   [`trunk`] the `[trunk]` table. Unknown keys are errors too: a
//!   misspelt optional key must not silently keep its default;
//! * [`units`]: quantities in the units of the topology file
//!   (docs/topology.md): rates `"200Mbit"` (bit, kbit, Mbit, Gbit, Tbit,
//!   optional `/s`), sizes `"64KiB"` or a bare integer of bytes, durations
//!   `"5s"`, `"500ms"`; and `address:port`;
//! * [`net`]: networks ([`Cidr`], [`NetSet`]);
//! * [`keyfile`]: the pre-shared key file ([`Config::load_key`]).
//!
//! This file may use [`net`] only; the others use it.

pub mod file;
pub mod keyfile;
pub mod net;
pub mod peers;
pub mod trunk;
pub mod units;
pub mod validate;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;
use wanproto::{Policy, RbudpConfig};

pub use self::net::{Cidr, NetSet};

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
    /// Silence before the trunk's transport is declared lost.
    pub idle_timeout: Duration,
    /// How long a trunk whose transport was lost keeps its streams for a
    /// resumption (0: no resumption, streams reset at once).
    pub resume_timeout: Duration,
    /// Unacknowledged bytes a resumable trunk keeps for replay.
    pub resume_buffer: u64,
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
    /// How long the relay keeps polling its sockets, without sleeping,
    /// after it last moved bytes (0: never; it sleeps in the kernel
    /// between events and every message costs a wake-up).
    pub busy_poll: Duration,
    /// Peers.
    pub peers: Vec<PeerConfig>,
    /// Trunk protocol settings.
    pub trunk: TrunkSettings,
}

impl Config {
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
        c.resume_timeout = t.resume_timeout.as_nanos() as u64;
        c.resume_buffer = t.resume_buffer;
        c
    }

    /// The relay's own listening addresses (inside, outside, UDP, metrics).
    pub fn own_listeners(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.inside_listen
            .iter()
            .chain(self.outside_listen.iter())
            .chain(self.udp_listen.iter())
            .chain(self.metrics_listen.iter())
            .copied()
    }

    /// Whether `destination` is one of the relay's own listeners: the very
    /// address, or its port on a wildcard listener when `destination` is
    /// a loopback address or one this relay listens on. Streams to it are
    /// refused (a member could otherwise make the relay connect to itself,
    /// a loop for amplification); [`Config::is_self_connection`] catches
    /// the rest once connected.
    pub fn is_own_listener(&self, destination: SocketAddr) -> bool {
        let ip = destination.ip().to_canonical();
        let ours = |a: &SocketAddr| a.ip().to_canonical() == ip;
        self.own_listeners().any(|l| {
            l.port() == destination.port()
                && (l.ip().to_canonical() == ip
                    || (l.ip().is_unspecified()
                        && (ip.is_loopback() || self.own_listeners().any(|a| ours(&a)))))
        })
    }

    /// Whether a connection from `local` to `peer` ended at one of the
    /// relay's own ports on this host (a local connection: both ends share
    /// an address).
    pub fn is_self_connection(&self, local: SocketAddr, peer: SocketAddr) -> bool {
        local.ip().to_canonical() == peer.ip().to_canonical()
            && self.own_listeners().any(|l| l.port() == peer.port())
    }
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
