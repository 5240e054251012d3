//! The relay: shared state (configuration, key, peers and their trunks,
//! metrics), the listeners, the dialers, and shutdown.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{watch, Semaphore};
use tracing::{debug, error, info, warn};
use wanproto::{
    CloseCode, Pacer, PresharedKey, Role, TrunkCandidate, TrunkConnection, TrunkSelector,
};

use crate::config::{Config, Dial};
use crate::metrics::{gauge, Registry};
use crate::trunk::{self, Origin, Placement, Trunk};

/// A failure to start the relay.
#[derive(Debug, Error)]
pub enum StartError {
    /// A listener could not be bound.
    #[error("cannot listen on {what} {addr}: {source}")]
    Bind {
        /// Which listener (`inside.listen`, ...).
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A peer relay and its trunk slots.
pub struct PeerState {
    /// Registered trunks by slot.
    slots: Mutex<Vec<Option<Arc<Trunk>>>>,
    /// Shared pacer of every trunk to this peer (if paced).
    pacer: Option<Mutex<Pacer>>,
    /// A blast request to this peer was ignored (logged once).
    ignored_request: AtomicBool,
}

/// A connection this relay splices with a trunk stream, found by a kind-4
/// blast request ([`Relay::connection`]).
#[derive(Clone)]
pub struct LiveConnection {
    /// The trunk of its stream.
    pub trunk: Arc<Trunk>,
    /// Its stream.
    pub stream: wanproto::StreamId,
    /// Its blast setting for the data this relay sends.
    pub blast: Arc<crate::rbudp::BlastSwitch>,
}

/// The key of a connection: (this relay's endpoint, the node's), IPv4-mapped
/// addresses as IPv4, without flow label or scope id.
type ConnectionKey = (SocketAddr, SocketAddr);

fn connection_key(local: SocketAddr, peer: SocketAddr) -> ConnectionKey {
    let c = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    (c(local), c(peer))
}

/// The relay's shared state.
pub struct Relay {
    /// Configuration.
    pub config: Config,
    key: PresharedKey,
    epoch: Instant,
    /// Counters.
    pub metrics: Registry,
    peers: Vec<PeerState>,
    selector: TrunkSelector,
    shutting_down: AtomicBool,
    shutdown_tx: watch::Sender<bool>,
    next_trunk_id: AtomicU64,
    live_trunks: Mutex<HashMap<u64, Arc<Trunk>>>,
    udp: std::sync::OnceLock<crate::rbudp::UdpPath>,
    closed_rbudp: Mutex<HashMap<usize, wanproto::RbudpStats>>,
    closed_trunk_bytes: Mutex<HashMap<(usize, usize), (u64, u64)>>,
    /// Every spliced connection (one entry per live splice).
    connections: Mutex<HashMap<ConnectionKey, LiveConnection>>,
    /// Inside connections allowed at once.
    pub inside_permits: Arc<Semaphore>,
    pending_trunk_permits: Arc<Semaphore>,
}

impl Relay {
    /// A relay for `config` with `key`.
    pub fn new(config: Config, key: PresharedKey) -> Arc<Relay> {
        let epoch = Instant::now();
        let peers = config
            .peers
            .iter()
            .map(|p| PeerState {
                slots: Mutex::new(vec![None; p.trunks]),
                pacer: p.pacing_rate.map(|r| {
                    Mutex::new(
                        Pacer::new(r, p.pacing_burst, 0).unwrap_or_else(|_| Pacer::unlimited()),
                    )
                }),
                ignored_request: AtomicBool::new(false),
            })
            .collect();
        let (shutdown_tx, _) = watch::channel(false);
        Arc::new(Relay {
            selector: TrunkSelector::new(config.trunk.policy),
            inside_permits: Arc::new(Semaphore::new(config.max_inside_connections)),
            pending_trunk_permits: Arc::new(Semaphore::new(config.max_pending_trunks)),
            config,
            key,
            epoch,
            metrics: Registry::default(),
            peers,
            shutting_down: AtomicBool::new(false),
            shutdown_tx,
            next_trunk_id: AtomicU64::new(1),
            live_trunks: Mutex::new(HashMap::new()),
            udp: std::sync::OnceLock::new(),
            closed_rbudp: Mutex::new(HashMap::new()),
            closed_trunk_bytes: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
        })
    }

    /// Nanoseconds since the relay started (CLOCK_MONOTONIC).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Sleeps until `at` (relay time in ns); forever for `None`.
    pub async fn sleep_until(&self, at: Option<u64>) {
        match at {
            Some(t) => {
                let when = self.epoch + Duration::from_nanos(t);
                tokio::time::sleep_until(when.into()).await;
            }
            None => std::future::pending().await,
        }
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// A receiver that turns true when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Whether this is the first blast request to peer `index` that
    /// cannot be honoured (it is logged once per peer).
    pub fn first_ignored_request(&self, index: usize) -> bool {
        !self.peers[index]
            .ignored_request
            .swap(true, Ordering::Relaxed)
    }

    fn lock_connections(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ConnectionKey, LiveConnection>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a spliced connection whose socket has `local` and `peer`
    /// addresses (until [`Relay::unregister_connection`]).
    pub fn register_connection(&self, local: SocketAddr, peer: SocketAddr, c: LiveConnection) {
        self.lock_connections()
            .insert(connection_key(local, peer), c);
    }

    /// Removes a connection's entry, if it is still the one of `blast`'s
    /// splice (a later connection may reuse the addresses).
    pub fn unregister_connection(
        &self,
        local: SocketAddr,
        peer: SocketAddr,
        blast: &Arc<crate::rbudp::BlastSwitch>,
    ) {
        let mut m = self.lock_connections();
        let key = connection_key(local, peer);
        if m.get(&key).is_some_and(|c| Arc::ptr_eq(&c.blast, blast)) {
            m.remove(&key);
        }
    }

    /// The live connection whose socket has addresses `local` (this
    /// relay's) and `peer` (the node's).
    pub fn connection(&self, local: SocketAddr, peer: SocketAddr) -> Option<LiveConnection> {
        self.lock_connections()
            .get(&connection_key(local, peer))
            .cloned()
    }

    /// The pacer of peer `index`, if paced.
    pub fn pacer(&self, index: usize) -> Option<&Mutex<Pacer>> {
        self.peers[index].pacer.as_ref()
    }

    fn lock_slots(&self, peer: usize) -> std::sync::MutexGuard<'_, Vec<Option<Arc<Trunk>>>> {
        self.peers[peer]
            .slots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a trunk the peer opened in a slot, chosen under one lock:
    /// the first free one, else the one registered longest ago (the peer
    /// reconnecting means that one is dead on its side). Returns the slot
    /// and the trunk it replaces.
    pub fn claim_slot(&self, peer: usize, trunk: Arc<Trunk>) -> (usize, Option<Arc<Trunk>>) {
        let mut slots = self.lock_slots(peer);
        let slot = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => slots
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| t.as_ref().and_then(|t| t.registered_at.get().copied()))
                .map_or(0, |(i, _)| i),
        };
        (slot, slots[slot].replace(trunk))
    }

    /// Puts an authenticated trunk this relay dialed in its slot; returns
    /// the one it replaces.
    pub fn register(&self, p: Placement, trunk: Arc<Trunk>) -> Option<Arc<Trunk>> {
        self.lock_slots(p.peer)[p.slot].replace(trunk)
    }

    /// The RBUDP socket (`outside.udp_listen`), once running.
    pub fn udp(&self) -> Option<&crate::rbudp::UdpPath> {
        self.udp.get()
    }

    /// Adds the counters of a closed RBUDP session to its peer's totals.
    pub fn add_closed_rbudp(&self, peer: usize, stats: wanproto::RbudpStats) {
        let mut m = self.closed_rbudp.lock().unwrap_or_else(|e| e.into_inner());
        crate::rbudp::add_stats(m.entry(peer).or_default(), &stats);
    }

    /// Adds the byte counts of a closed trunk connection to its slot's totals.
    pub fn add_closed_bytes(&self, p: Placement, sent: u64, received: u64) {
        let mut m = self
            .closed_trunk_bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let e = m.entry((p.peer, p.slot)).or_default();
        e.0 += sent;
        e.1 += received;
    }

    /// Removes a closed trunk from its slot (if still there).
    pub fn unregister(&self, p: Placement, trunk: &Trunk) {
        let mut slots = self.lock_slots(p.peer);
        if slots[p.slot].as_ref().is_some_and(|t| t.id == trunk.id) {
            slots[p.slot] = None;
        }
    }

    /// Keeps a running trunk in the list shutdown works through.
    pub fn track(&self, trunk: &Arc<Trunk>) {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(trunk.id, trunk.clone());
    }

    /// Drops a finished trunk from that list.
    pub fn untrack(&self, trunk: &Trunk) {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&trunk.id);
    }

    fn live(&self) -> Vec<Arc<Trunk>> {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The trunks that may carry a stream to `destination`: those of the
    /// peers whose `reachable` networks match it most specifically, with
    /// their selection keys (peer index << 16 | slot).
    pub fn route(&self, destination: IpAddr) -> Vec<(u64, Arc<Trunk>)> {
        let best = self
            .config
            .peers
            .iter()
            .filter_map(|p| p.reachable.longest_match(destination))
            .max();
        let Some(best) = best else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, p) in self.config.peers.iter().enumerate() {
            if p.reachable.longest_match(destination) != Some(best) {
                continue;
            }
            let slots = self.lock_slots(i);
            for (s, t) in slots.iter().enumerate() {
                if let Some(t) = t {
                    out.push((((i as u64) << 16) | s as u64, t.clone()));
                }
            }
        }
        out
    }

    /// Chooses a trunk for a new stream to `destination` among `routes`.
    pub fn select(
        &self,
        routes: &[(u64, Arc<Trunk>)],
        destination: IpAddr,
        exclude: &[u64],
    ) -> Option<usize> {
        let candidates: Vec<TrunkCandidate> = routes
            .iter()
            .map(|(key, t)| {
                let g = t.lock();
                TrunkCandidate {
                    key: *key,
                    load: g.conn.buffered_send_bytes(),
                    usable: g.conn.accepts_new_streams() && !exclude.contains(key),
                }
            })
            .collect();
        self.selector.select(&candidates, destination)
    }

    fn new_connection(&self, role: Role, peer_cluster: Option<&str>) -> TrunkConnection {
        let mut nonce = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut nonce) {
            // No randomness: a handshake with a predictable nonce could be
            // replayed; better to stop than to run insecurely.
            error!(error = %e, "getrandom failed: cannot make a handshake nonce");
            std::process::exit(1);
        }
        TrunkConnection::new(
            self.config.protocol_config(peer_cluster),
            role,
            self.key.clone(),
            nonce,
            self.now(),
        )
        .expect("configuration validated at load")
    }

    /// The metrics page.
    pub fn render_metrics(&self) -> String {
        let mut gauges = Vec::new();
        gauges.push(gauge(
            "wanrelay_inside_active",
            &[],
            (self.config.max_inside_connections - self.inside_permits.available_permits()) as f64,
        ));
        let mut live_bytes: HashMap<(usize, usize), (u64, u64)> = HashMap::new();
        for (i, p) in self.config.peers.iter().enumerate() {
            let slots: Vec<Option<Arc<Trunk>>> = self.lock_slots(i).clone();
            if p.rbudp.is_some() {
                let mut total = self
                    .closed_rbudp
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&i)
                    .copied()
                    .unwrap_or_default();
                for (s, t) in slots.iter().enumerate() {
                    let Some(t) = t else { continue };
                    let g = t.lock();
                    let Some(link) = g.rbudp.as_ref() else {
                        continue;
                    };
                    crate::rbudp::add_stats(&mut total, &link.session.stats());
                    let slot = s.to_string();
                    let labels = [("peer", p.name.as_str()), ("trunk", slot.as_str())];
                    gauges.push(gauge(
                        "wanrelay_rbudp_up",
                        &labels,
                        f64::from(u8::from(
                            link.peer_addr.is_some() && link.session.is_ready(),
                        )),
                    ));
                    gauges.push(gauge(
                        "wanrelay_rbudp_window_bytes",
                        &[
                            ("peer", p.name.as_str()),
                            ("trunk", slot.as_str()),
                            ("side", "sent"),
                        ],
                        link.session.peer_window_used() as f64,
                    ));
                    gauges.push(gauge(
                        "wanrelay_rbudp_window_bytes",
                        &[
                            ("peer", p.name.as_str()),
                            ("trunk", slot.as_str()),
                            ("side", "received"),
                        ],
                        link.session.receive_window_used() as f64,
                    ));
                }
                gauges.extend(crate::rbudp::stats_samples(&p.name, &total));
            }
            for (s, t) in slots.iter().enumerate() {
                let slot = s.to_string();
                let labels = [("peer", p.name.as_str()), ("trunk", slot.as_str())];
                match t {
                    Some(t) => {
                        let g = t.lock();
                        let up = g.conn.is_established();
                        gauges.push(gauge("wanrelay_trunk_up", &labels, f64::from(u8::from(up))));
                        gauges.push(gauge(
                            "wanrelay_trunk_streams",
                            &labels,
                            g.conn.stream_count() as f64,
                        ));
                        gauges.push(gauge(
                            "wanrelay_trunk_send_buffered_bytes",
                            &labels,
                            g.conn.buffered_send_bytes() as f64,
                        ));
                        if let Some(rtt) = g.conn.rtt() {
                            gauges.push(gauge(
                                "wanrelay_trunk_rtt_seconds",
                                &labels,
                                rtt as f64 / 1e9,
                            ));
                        }
                        let st = g.conn.stats();
                        live_bytes.insert((i, s), (st.bytes_sent, st.bytes_received));
                    }
                    None => gauges.push(gauge("wanrelay_trunk_up", &labels, 0.0)),
                }
            }
        }
        // Trunk bytes: closed connections of each slot plus the live one.
        let closed = self
            .closed_trunk_bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (i, p) in self.config.peers.iter().enumerate() {
            for s in 0..p.trunks {
                let (cs, cr) = closed.get(&(i, s)).copied().unwrap_or_default();
                let (ls, lr) = live_bytes.get(&(i, s)).copied().unwrap_or_default();
                let slot = s.to_string();
                for (d, v) in [("sent", cs + ls), ("received", cr + lr)] {
                    gauges.push(gauge(
                        "wanrelay_trunk_bytes_total",
                        &[
                            ("peer", p.name.as_str()),
                            ("trunk", &slot),
                            ("direction", d),
                        ],
                        v as f64,
                    ));
                }
            }
        }
        self.metrics.render(&gauges)
    }
}

/// Listeners bound at start.
pub struct Listeners {
    inside: Vec<TcpListener>,
    outside: Vec<TcpListener>,
    metrics: Option<TcpListener>,
    udp: Option<tokio::net::UdpSocket>,
}

/// Binds every listener of `config` (so errors come before anything runs).
///
/// # Errors
/// [`StartError::Bind`] for the first listener that fails.
pub async fn bind(config: &Config) -> Result<Listeners, StartError> {
    async fn one(what: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let l = sock
            .and_then(|s| {
                s.set_reuseaddr(true)?;
                s.bind(addr)?;
                s.listen(1024)
            })
            .map_err(|source| StartError::Bind { what, addr, source })?;
        Ok(l)
    }
    let mut inside = Vec::new();
    for &a in &config.inside_listen {
        inside.push(one("inside.listen", a).await?);
    }
    let mut outside = Vec::new();
    for &a in &config.outside_listen {
        outside.push(one("outside.listen", a).await?);
    }
    let metrics = match config.metrics_listen {
        Some(a) => Some(one("metrics.listen", a).await?),
        None => None,
    };
    let udp = match config.udp_listen {
        Some(addr) => Some(crate::rbudp::bind(addr).map_err(|source| StartError::Bind {
            what: "outside.udp_listen",
            addr,
            source,
        })?),
        None => None,
    };
    Ok(Listeners {
        inside,
        outside,
        metrics,
        udp,
    })
}

/// Runs the relay until `stop` resolves (a signal), then shuts down:
/// stops accepting, sends GOAWAY on every trunk, waits up to
/// `shutdown_grace` for streams to finish (or until `stop_now` resolves),
/// then closes what is left (their sockets are reset).
pub async fn run(
    relay: Arc<Relay>,
    listeners: Listeners,
    stop: impl std::future::Future<Output = ()>,
    stop_now: impl std::future::Future<Output = ()>,
) {
    let mut tasks = Vec::new();
    if let Some(sock) = listeners.udp {
        info!(addr = %sock.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()), "RBUDP socket");
        let _ = relay.udp.set(crate::rbudp::UdpPath::new(sock));
        tasks.push(tokio::spawn(crate::rbudp::receive(relay.clone())));
    }
    for l in listeners.inside {
        info!(addr = %l.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()), "inside listener");
        tasks.push(tokio::spawn(crate::inside::accept_loop(relay.clone(), l)));
    }
    for l in listeners.outside {
        info!(addr = %l.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()), "outside listener");
        tasks.push(tokio::spawn(accept_trunks(relay.clone(), l)));
    }
    if let Some(l) = listeners.metrics {
        info!(addr = %l.local_addr().map_or_else(|_| "?".into(), |a| a.to_string()), "metrics endpoint");
        let r = relay.clone();
        tasks.push(tokio::spawn(crate::metrics::serve(l, move || {
            r.render_metrics()
        })));
    }
    for (i, p) in relay.config.peers.iter().enumerate() {
        if p.dial == Dial::Connect {
            for slot in 0..p.trunks {
                tokio::spawn(dial_loop(relay.clone(), Placement { peer: i, slot }));
            }
        }
    }
    info!(name = %relay.config.name, cluster = %relay.config.cluster, peers = relay.config.peers.len(), "relay running");
    stop.await;

    info!(grace = ?relay.config.shutdown_grace, "shutting down: no new connections, GOAWAY on every trunk");
    relay.shutting_down.store(true, Ordering::Release);
    let _ = relay.shutdown_tx.send(true);
    // Listeners stop now; dialers stop on the signal once their trunk ends.
    for t in &tasks {
        t.abort();
    }
    for t in relay.live() {
        t.request_close(CloseCode::NoError);
    }
    let drained = async {
        while !relay.live().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = drained => info!("every trunk closed gracefully"),
        _ = tokio::time::sleep(relay.config.shutdown_grace) => {
            warn!(trunks = relay.live().len(), "shutdown grace expired: closing the remaining trunks");
        }
        _ = stop_now => warn!("second signal: closing the remaining trunks now"),
    }
    for t in relay.live() {
        t.request_close(CloseCode::Shutdown);
    }
    let closed = async {
        while !relay.live().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), closed).await;
    // Let stream tasks reset their sockets.
    tokio::time::sleep(Duration::from_millis(50)).await;
    info!("relay stopped");
}

async fn accept_trunks(relay: Arc<Relay>, listener: TcpListener) {
    loop {
        let (sock, remote) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                relay
                    .metrics
                    .inc("wanrelay_errors_total", &[("kind", "outside_accept")]);
                warn!(error = %e, "outside accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = relay.pending_trunk_permits.clone().try_acquire_owned() else {
            relay
                .metrics
                .inc("wanrelay_trunk_refused_total", &[("reason", "limit")]);
            warn!(%remote, "trunk refused: too many handshakes in progress (outside.max_pending)");
            continue;
        };
        let id = relay.next_trunk_id.fetch_add(1, Ordering::Relaxed);
        debug!(trunk = id, %remote, "trunk connection accepted: handshake");
        let conn = relay.new_connection(Role::Acceptor, None);
        let trunk = Trunk::new(relay.clone(), id, remote, Origin::Accepted, conn);
        // The permit counts the handshake only: released at authentication or close.
        trunk.hold_handshake_permit(permit);
        tokio::spawn(trunk::run(trunk, sock));
    }
}

async fn connect_peer(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = bind {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    sock.connect(addr).await
}

async fn dial_loop(relay: Arc<Relay>, p: Placement) {
    let pc = &relay.config.peers[p.peer];
    let t = &relay.config.trunk;
    let mut backoff = t.reconnect_min;
    let mut attempt: usize = 0;
    let mut shutdown = relay.shutdown_signal();
    let mut failures = 0u32;
    loop {
        if relay.is_shutting_down() {
            return;
        }
        let addr = pc.addresses[(p.slot + attempt) % pc.addresses.len()];
        attempt += 1;
        match tokio::time::timeout(
            t.connect_timeout,
            connect_peer(addr, relay.config.outside_bind),
        )
        .await
        {
            Ok(Ok(sock)) => {
                failures = 0;
                let id = relay.next_trunk_id.fetch_add(1, Ordering::Relaxed);
                debug!(trunk = id, peer = %pc.name, slot = p.slot, %addr, "trunk connected: handshake");
                let conn = relay.new_connection(Role::Initiator, Some(&pc.cluster));
                let trunk = Trunk::new(relay.clone(), id, addr, Origin::Dialed(p), conn);
                let started = Instant::now();
                let authenticated = trunk::run(trunk, sock).await;
                if authenticated && started.elapsed() > Duration::from_secs(2) {
                    backoff = t.reconnect_min;
                }
            }
            Ok(Err(e)) => {
                failures += 1;
                relay
                    .metrics
                    .inc("wanrelay_trunk_dial_failures_total", &[("peer", &pc.name)]);
                if failures == 1 || failures.is_power_of_two() {
                    warn!(peer = %pc.name, slot = p.slot, %addr, error = %e, failures, "cannot connect to peer relay; retrying");
                }
            }
            Err(_) => {
                failures += 1;
                relay
                    .metrics
                    .inc("wanrelay_trunk_dial_failures_total", &[("peer", &pc.name)]);
                if failures == 1 || failures.is_power_of_two() {
                    warn!(peer = %pc.name, slot = p.slot, %addr, failures, "connect to peer relay timed out; retrying");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.wait_for(|&s| s) => return,
        }
        backoff = (backoff * 2).min(t.reconnect_max);
    }
}
