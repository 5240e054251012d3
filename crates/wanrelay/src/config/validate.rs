//! Reading and checking a whole configuration: the top-level keys,
//! `[inside]`, `[outside]`, `[metrics]`, then [`super::trunk`] and
//! [`super::peers`], then the checks across sections. Checks run in the
//! order of the file's documentation, and the first failure is the error.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::file::{self, Table};
use super::net::NetSet;
use super::peers::peer_list;
use super::trunk::trunk_settings;
use super::units::parse_socket_addr;
use super::{Config, ConfigError, Dial, PeerConfig, Transport};

/// The top-level keys of the file.
const ROOT_KEYS: [&str; 12] = [
    "name",
    "cluster",
    "key_file",
    "log_level",
    "shutdown_grace",
    "threads",
    "busy_poll",
    "inside",
    "outside",
    "metrics",
    "trunk",
    "peer",
];

/// The longest `busy_poll`: spinning longer after every byte is a core
/// given to the relay, which `threads` and a machine of its own say better.
const MAX_BUSY_POLL: Duration = Duration::from_millis(10);

/// The top-level keys that are not tables.
struct RelayKeys {
    name: String,
    cluster: String,
    key_file: PathBuf,
    log_level: String,
    threads: usize,
    busy_poll: Duration,
    shutdown_grace: Duration,
}

/// `[inside]`.
struct InsideKeys {
    listen: Vec<SocketAddr>,
    members: NetSet,
    bind: Option<IpAddr>,
    preamble_timeout: Duration,
    connect_timeout: Duration,
    max_connections: usize,
}

/// `[outside]` (all optional).
struct OutsideKeys {
    listen: Vec<SocketAddr>,
    bind: Option<IpAddr>,
    max_pending: usize,
    udp_listen: Option<SocketAddr>,
}

impl Config {
    /// Reads and validates a configuration file.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file or the key at fault.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let value = file::read(path)?;
        Config::from_value(&value, path)
    }

    /// Validates a parsed configuration (`path` locates a relative key file).
    ///
    /// # Errors
    /// [`ConfigError::Value`] naming the key at fault.
    pub fn from_value(value: &Value, path: &Path) -> Result<Config, ConfigError> {
        let root = Table::new(value, "")?;
        root.only(&ROOT_KEYS)?;
        let relay = relay_keys(&root, path)?;
        let inside = inside_keys(&root.table("inside")?)?;
        let outside = outside_keys(&root)?;
        let metrics_listen = metrics_listen(&root)?;
        let trunk = match root.opt_table("trunk")? {
            None => trunk_settings(&Table::empty("trunk"))?,
            Some(t) => trunk_settings(&t)?,
        };
        let peers = peer_list(&root, &relay.name, &relay.cluster, &inside.members)?;
        check_outside_for_peers(&peers, &outside)?;
        let config = Config {
            path: path.to_owned(),
            name: relay.name,
            cluster: relay.cluster,
            key_file: relay.key_file,
            log_level: relay.log_level,
            inside_listen: inside.listen,
            members: inside.members,
            inside_bind: inside.bind,
            preamble_timeout: inside.preamble_timeout,
            node_connect_timeout: inside.connect_timeout,
            max_inside_connections: inside.max_connections,
            outside_listen: outside.listen,
            outside_bind: outside.bind,
            max_pending_trunks: outside.max_pending,
            udp_listen: outside.udp_listen,
            metrics_listen,
            shutdown_grace: relay.shutdown_grace,
            threads: relay.threads,
            busy_poll: relay.busy_poll,
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
}

/// `name`, `cluster`, `key_file` (relative to the file's directory),
/// `log_level`, `threads`, `busy_poll`, `shutdown_grace`.
fn relay_keys(root: &Table<'_>, path: &Path) -> Result<RelayKeys, ConfigError> {
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
    if !(plain_level || directive) || tracing_subscriber::EnvFilter::try_new(&log_level).is_err() {
        return Err(root.err(
            "log_level",
            format!("{log_level:?} is not a level (error, warn, info, debug, trace) or a tracing filter"),
        ));
    }
    let threads = root.opt_int("threads", 1, 64)?.unwrap_or(1) as usize;
    let busy_poll = root.opt_duration("busy_poll")?.unwrap_or(Duration::ZERO);
    if busy_poll > MAX_BUSY_POLL {
        return Err(root.err(
            "busy_poll",
            format!("{busy_poll:?} is too long: at most 10ms (a relay spins that long after each byte it moves)"),
        ));
    }
    let shutdown_grace = root
        .opt_duration("shutdown_grace")?
        .unwrap_or(Duration::from_secs(5));
    Ok(RelayKeys {
        name,
        cluster,
        key_file,
        log_level,
        threads,
        busy_poll,
        shutdown_grace,
    })
}

fn inside_keys(inside: &Table<'_>) -> Result<InsideKeys, ConfigError> {
    inside.only(&[
        "listen",
        "members",
        "bind",
        "preamble_timeout",
        "connect_timeout",
        "max_connections",
    ])?;
    let listen = inside.addresses("listen")?;
    if listen.is_empty() {
        return Err(inside.err("listen", "at least one address is needed"));
    }
    let members = inside.nets("members")?;
    if members.0.is_empty() {
        return Err(inside.err("members", "at least one node address or CIDR is needed"));
    }
    let bind = inside.opt_ip("bind")?;
    let preamble_timeout = inside
        .opt_duration("preamble_timeout")?
        .unwrap_or(Duration::from_secs(5));
    let connect_timeout = inside
        .opt_duration("connect_timeout")?
        .unwrap_or(Duration::from_secs(5));
    let max_connections = inside
        .opt_int("max_connections", 1, 1 << 20)?
        .unwrap_or(4096) as usize;
    for &d in [&preamble_timeout, &connect_timeout] {
        if d.is_zero() {
            return Err(inside.err("preamble_timeout", "timeouts must be above 0"));
        }
    }
    Ok(InsideKeys {
        listen,
        members,
        bind,
        preamble_timeout,
        connect_timeout,
        max_connections,
    })
}

fn outside_keys(root: &Table<'_>) -> Result<OutsideKeys, ConfigError> {
    let Some(t) = root.opt_table("outside")? else {
        return Ok(OutsideKeys {
            listen: Vec::new(),
            bind: None,
            max_pending: 64,
            udp_listen: None,
        });
    };
    t.only(&["listen", "bind", "max_pending", "udp_listen"])?;
    let listen = match t.get("listen") {
        None => Vec::new(),
        Some(_) => t.addresses("listen")?,
    };
    let udp_listen = match t.opt_string("udp_listen")? {
        None => None,
        Some(s) => Some(parse_socket_addr(&s).map_err(|m| t.err("udp_listen", m))?),
    };
    Ok(OutsideKeys {
        listen,
        bind: t.opt_ip("bind")?,
        max_pending: t.opt_int("max_pending", 1, 65536)?.unwrap_or(64) as usize,
        udp_listen,
    })
}

fn metrics_listen(root: &Table<'_>) -> Result<Option<SocketAddr>, ConfigError> {
    let Some(t) = root.opt_table("metrics")? else {
        return Ok(None);
    };
    t.only(&["listen"])?;
    match t.opt_string("listen")? {
        None => Ok(None),
        Some(s) => Ok(Some(parse_socket_addr(&s).map_err(|m| t.err("listen", m))?)),
    }
}

/// Peers that connect to this relay need `outside.listen`; peers with
/// `transport = "rbudp"` need `outside.udp_listen`.
fn check_outside_for_peers(peers: &[PeerConfig], outside: &OutsideKeys) -> Result<(), ConfigError> {
    if outside.listen.is_empty() && peers.iter().any(|p| p.dial == Dial::Accept) {
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
    if outside.udp_listen.is_none() {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::units::{parse_duration, parse_rate, parse_size};
    use crate::config::{Cidr, RbudpStreams};
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
        assert_eq!(c.busy_poll, Duration::ZERO);
        assert!(c.members.contains("127.0.1.9".parse().unwrap()));
        assert!(!c.members.contains("127.0.2.9".parse().unwrap()));
    }

    #[test]
    fn busy_poll_is_a_duration() {
        let mut v = base();
        v["busy_poll"] = json!("50us");
        let c = Config::from_value(&v, Path::new("/etc/x.toml")).unwrap();
        assert_eq!(c.busy_poll, Duration::from_micros(50));
        v["busy_poll"] = json!("10ms");
        let c = Config::from_value(&v, Path::new("/etc/x.toml")).unwrap();
        assert_eq!(c.busy_poll, Duration::from_millis(10));
    }

    #[test]
    fn every_bad_value_names_its_key() {
        type Change = fn(&mut Value);
        let cases: Vec<(Change, &str)> = vec![
            (|v| v["name"] = json!("a 0"), "name:"),
            (|v| v["busy_poll"] = json!("11ms"), "busy_poll:"),
            (|v| v["busy_poll"] = json!("fast"), "busy_poll:"),
            (|v| v["busy_poll"] = json!(-1), "busy_poll:"),
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
