//! One trunk: a TCP connection to a peer relay driven through a
//! [`TrunkConnection`].
//!
//! The connection state machine sits behind a mutex that is never held
//! across an `.await`. Three kinds of tasks call into it:
//!
//! * the trunk's **reader** feeds socket bytes to `handle_input`;
//! * the trunk's **writer** takes `poll_transmit` output (within the peer's
//!   pacer), writes it to the socket, and runs the timers;
//! * every **stream task** (one per spliced TCP connection, see
//!   [`crate::stream`]) writes, reads, finishes or resets its stream.
//!
//! After each call the caller drains the events ([`Trunk::dispatch`]) and
//! wakes whoever must act: a stream task through its [`StreamShared`]
//! signals, the writer through `tx`.
//!
//! Lock order: a trunk's lock may be held while taking a peer's slot list
//! or pacer lock, never the other way round (routing takes a snapshot of
//! the slots first).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tracing::{debug, info, warn};
use wanproto::{CloseCode, ConnectionError, Event, Reason, StreamId, TrunkConnection};

use crate::relay::Relay;
use crate::stream;

/// Largest write to a trunk socket at once.
const WRITE_CHUNK: usize = 256 * 1024;
/// Read buffer of a trunk socket.
const READ_CHUNK: usize = 256 * 1024;

/// Signals between a trunk and the task splicing one of its streams.
#[derive(Default)]
pub struct StreamShared {
    /// Data, the FIN, or the accept arrived.
    pub readable: Notify,
    /// The stream's send buffer has room again.
    pub writable: Notify,
    /// The stream was reset, refused or lost with its trunk.
    pub ended: Notify,
    /// The far relay accepted the stream (streams opened here).
    pub accepted: AtomicBool,
    /// Reason code of the reset, 0 while alive.
    pub reset: AtomicU8,
}

impl StreamShared {
    /// The reset reason, if the stream was reset.
    pub fn reset_reason(&self) -> Option<Reason> {
        Reason::from_code(self.reset.load(Ordering::Acquire))
    }

    fn end(&self, reason: Reason) {
        self.reset.store(reason.code(), Ordering::Release);
        self.ended.notify_one();
        self.readable.notify_one();
        self.writable.notify_one();
    }
}

/// Where a trunk stands among the relay's peers once authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Index of the peer in the configuration.
    pub peer: usize,
    /// Trunk slot of that peer (0..trunks).
    pub slot: usize,
}

/// How the trunk came about.
#[derive(Clone, Copy, Debug)]
pub enum Origin {
    /// This relay connected, for the given peer slot.
    Dialed(Placement),
    /// The peer connected to the outside listener.
    Accepted,
}

/// The mutable part of a trunk.
pub struct TrunkInner {
    /// The protocol state machine.
    pub conn: TrunkConnection,
    /// Streams with a task attached, by id.
    pub streams: HashMap<StreamId, Arc<StreamShared>>,
    /// The socket's sending half (until the trunk ends).
    wr: Option<Arc<OwnedWriteHalf>>,
    /// RBUDP session (peers with `transport = "rbudp"`, once authenticated).
    pub rbudp: Option<crate::rbudp::RbudpLink>,
    /// Bytes taken from the connection and not yet written, from `out_pos`.
    out: Vec<u8>,
    out_pos: usize,
}

/// What [`Trunk::flush`] left behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flush {
    /// Nothing more to send.
    Idle,
    /// The socket is full: wait until it is writable.
    Blocked,
    /// The pacer has no tokens before this time (relay ns).
    Paced(u64),
    /// The byte budget of this call is used up; more may be waiting.
    More,
    /// The connection is closed and its last bytes are out (or cannot be).
    Closed,
}

/// One trunk connection to a peer relay.
pub struct Trunk {
    /// The relay.
    pub relay: Arc<Relay>,
    /// Unique id for logs.
    pub id: u64,
    /// The peer's socket address.
    pub remote: SocketAddr,
    /// How it was made.
    pub origin: Origin,
    /// Set once authenticated and registered.
    pub placement: OnceLock<Placement>,
    /// When it was registered.
    pub registered_at: OnceLock<Instant>,
    inner: Mutex<TrunkInner>,
    /// Wakes the writer.
    pub tx: Notify,
    /// Wakes the RBUDP blaster (new blast, report, session change).
    pub rbudp_wake: Notify,
    /// The peer released a blast (window free again).
    pub rbudp_window: Notify,
    /// Asks the writer to close (replaced by a newer trunk, or shutdown).
    close_request: Mutex<Option<CloseCode>>,
    handshake_permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl Trunk {
    /// A trunk around a fresh connection state machine.
    pub fn new(
        relay: Arc<Relay>,
        id: u64,
        remote: SocketAddr,
        origin: Origin,
        conn: TrunkConnection,
    ) -> Arc<Trunk> {
        Arc::new(Trunk {
            relay,
            id,
            remote,
            origin,
            placement: OnceLock::new(),
            registered_at: OnceLock::new(),
            inner: Mutex::new(TrunkInner {
                conn,
                streams: HashMap::new(),
                wr: None,
                rbudp: None,
                out: Vec::with_capacity(WRITE_CHUNK + 1024),
                out_pos: 0,
            }),
            tx: Notify::new(),
            rbudp_wake: Notify::new(),
            rbudp_window: Notify::new(),
            close_request: Mutex::new(None),
            handshake_permit: Mutex::new(None),
        })
    }

    /// Locks the state machine (a poisoned lock is taken over: the state
    /// machine never panics on peer input, and a relay must keep going).
    pub fn lock(&self) -> MutexGuard<'_, TrunkInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Peer name for logs and labels ("?" before authentication).
    pub fn peer_name(&self) -> &str {
        match self.placement.get() {
            Some(p) => &self.relay.config.peers[p.peer].name,
            None => "?",
        }
    }

    /// Slot label ("?" before authentication).
    pub fn slot_label(&self) -> String {
        self.placement
            .get()
            .map_or_else(|| "?".into(), |p| p.slot.to_string())
    }

    /// Holds `permit` until the handshake ends (authenticated or closed).
    pub fn hold_handshake_permit(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        *self
            .handshake_permit
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(permit);
    }

    fn release_handshake_permit(&self) {
        self.handshake_permit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Asks the writer to close the connection with `code` (immediately),
    /// or to start a graceful GOAWAY with `CloseCode::NoError`.
    pub fn request_close(&self, code: CloseCode) {
        *self.close_request.lock().unwrap_or_else(|e| e.into_inner()) = Some(code);
        self.tx.notify_one();
    }

    /// Acts on every pending event of the state machine. Called with the
    /// lock held, after every call into the connection.
    pub fn dispatch(self: &Arc<Trunk>, g: &mut TrunkInner) {
        while let Some(ev) = g.conn.poll_event() {
            match ev {
                Event::Authenticated(peer) => self.on_authenticated(g, peer),
                Event::StreamOpened {
                    stream,
                    destination,
                    source,
                    blast,
                } => self.on_stream_opened(g, stream, destination, source, blast),
                Event::StreamAccepted { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.accepted.store(true, Ordering::Release);
                        s.readable.notify_one();
                    }
                }
                Event::StreamReadable { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.readable.notify_one();
                    }
                }
                Event::StreamWritable { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.writable.notify_one();
                    }
                }
                Event::StreamReset { stream, reason } => {
                    if let Some(s) = g.streams.remove(&stream) {
                        s.end(reason);
                    }
                }
                Event::StreamClosed { stream } => {
                    g.streams.remove(&stream);
                }
                Event::GoAway => {
                    info!(trunk = self.id, peer = self.peer_name(), slot = %self.slot_label(),
                          "peer relay sent GOAWAY: no new streams on this trunk");
                }
                Event::Rbudp { message } => crate::rbudp::on_control(self, g, &message),
                Event::Closed { error } => self.on_closed(g, error),
            }
        }
    }

    fn on_authenticated(self: &Arc<Trunk>, g: &mut TrunkInner, peer: wanproto::PeerInfo) {
        let relay = &self.relay;
        self.release_handshake_permit();
        let (placement, replaced) = match self.origin {
            Origin::Dialed(p) => {
                let expected = &relay.config.peers[p.peer];
                if peer.name != expected.name {
                    warn!(trunk = self.id, remote = %self.remote, announced = %peer.name, expected = %expected.name,
                          "trunk refused: the relay at this address is not the configured peer");
                    relay.metrics.inc(
                        "wanrelay_trunk_refused_total",
                        &[("reason", "unknown_peer")],
                    );
                    g.conn.close(CloseCode::Protocol);
                    return;
                }
                let _ = self.registered_at.set(Instant::now());
                (p, relay.register(p, self.clone()))
            }
            Origin::Accepted => {
                let Some(index) = relay.config.peers.iter().position(|c| c.name == peer.name)
                else {
                    warn!(trunk = self.id, remote = %self.remote, announced = %peer.name, cluster = %peer.cluster,
                          "trunk refused: authenticated, but not a configured peer");
                    relay.metrics.inc(
                        "wanrelay_trunk_refused_total",
                        &[("reason", "unknown_peer")],
                    );
                    g.conn.close(CloseCode::Protocol);
                    return;
                };
                let pc = &relay.config.peers[index];
                if pc.cluster != peer.cluster {
                    warn!(trunk = self.id, remote = %self.remote, peer = %peer.name, announced = %peer.cluster,
                          expected = %pc.cluster, "trunk refused: peer relay of the wrong cluster");
                    relay.metrics.inc(
                        "wanrelay_trunk_refused_total",
                        &[("reason", "wrong_cluster")],
                    );
                    g.conn.close(CloseCode::Protocol);
                    return;
                }
                if pc.dial == crate::config::Dial::Connect {
                    warn!(trunk = self.id, remote = %self.remote, peer = %peer.name,
                          "trunk refused: this relay dials that peer (peer.dial = \"connect\"); exactly one side of a pair must dial");
                    relay.metrics.inc(
                        "wanrelay_trunk_refused_total",
                        &[("reason", "dial_conflict")],
                    );
                    g.conn.close(CloseCode::Protocol);
                    return;
                }
                let _ = self.registered_at.set(Instant::now());
                let (slot, old) = relay.claim_slot(index, self.clone());
                (Placement { peer: index, slot }, old)
            }
        };
        let _ = self.placement.set(placement);
        if let Some(old) = replaced {
            info!(
                trunk = self.id,
                replaced = old.id,
                peer = self.peer_name(),
                slot = placement.slot,
                "trunk replaces an older connection of the same slot"
            );
            old.request_close(CloseCode::Internal);
        }
        let slot = placement.slot.to_string();
        relay.metrics.inc(
            "wanrelay_trunk_connects_total",
            &[("peer", self.peer_name()), ("trunk", &slot)],
        );
        info!(trunk = self.id, remote = %self.remote, peer = self.peer_name(), cluster = %peer.cluster,
              slot = placement.slot, "trunk up: peer relay authenticated");
        crate::rbudp::start(self, g);
    }

    fn on_stream_opened(
        self: &Arc<Trunk>,
        g: &mut TrunkInner,
        stream: StreamId,
        destination: SocketAddr,
        source: SocketAddr,
        request: Option<wanproto::BlastRequest>,
    ) {
        let relay = &self.relay;
        let refuse = |g: &mut TrunkInner, reason: Reason, why: &str| {
            let _ = g.conn.reset_stream(stream, reason);
            relay.metrics.inc(
                "wanrelay_streams_refused_total",
                &[
                    ("peer", self.peer_name()),
                    ("side", "in"),
                    ("reason", crate::reason_label(reason)),
                ],
            );
            warn!(trunk = self.id, peer = self.peer_name(), stream, %destination, %source, why, "stream refused");
        };
        if !relay.config.members.contains(destination.ip()) {
            return refuse(
                g,
                Reason::NotMember,
                "destination is not a member node of this cluster",
            );
        }
        if relay.is_shutting_down() {
            return refuse(g, Reason::ShuttingDown, "relay shutting down");
        }
        let shared = Arc::new(StreamShared::default());
        g.streams.insert(stream, shared.clone());
        let slot = self.slot_label();
        relay.metrics.inc(
            "wanrelay_streams_opened_total",
            &[("peer", self.peer_name()), ("trunk", &slot), ("side", "in")],
        );
        debug!(trunk = self.id, stream, %destination, %source, blast_request = request.is_some(),
               "stream opened by peer: connecting");
        // The data this relay sends back follows its own policy for the
        // opener's relay.
        let blasts = crate::rbudp::stream_policy(self, g, stream, request, "in");
        tokio::spawn(stream::deliver(
            self.clone(),
            stream,
            shared,
            destination,
            source,
            blasts,
        ));
    }

    fn on_closed(self: &Arc<Trunk>, g: &mut TrunkInner, error: Option<ConnectionError>) {
        let relay = &self.relay;
        self.release_handshake_permit();
        crate::rbudp::stop(self, g);
        let lost = g.streams.len();
        for (_, s) in g.streams.drain() {
            s.end(Reason::TrunkLost);
        }
        let reason = match &error {
            None => "graceful",
            Some(ConnectionError::AuthFailed) => "auth_failed",
            Some(ConnectionError::WrongPeerCluster { .. }) => "wrong_cluster",
            Some(ConnectionError::HandshakeTimeout) => "handshake_timeout",
            Some(ConnectionError::IdleTimeout) => "idle_timeout",
            Some(ConnectionError::TransportClosed) => "transport_closed",
            Some(ConnectionError::PeerClosed(_)) => "peer_closed",
            Some(ConnectionError::LocallyClosed(_)) => "local_close",
            Some(ConnectionError::ControlFlood) => "flood",
            Some(ConnectionError::StreamLimit(_)) => "stream_limit",
            Some(ConnectionError::FlowControl(_)) => "flow_control",
            Some(ConnectionError::Frame(_) | ConnectionError::Protocol(_)) => "protocol",
        };
        match self.placement.get() {
            Some(p) => {
                relay.unregister(*p, self);
                let slot = p.slot.to_string();
                relay.metrics.inc(
                    "wanrelay_trunk_closes_total",
                    &[
                        ("peer", self.peer_name()),
                        ("trunk", &slot),
                        ("reason", reason),
                    ],
                );
                let stats = g.conn.stats();
                relay.add_closed_bytes(*p, stats.bytes_sent, stats.bytes_received);
                match &error {
                    None => info!(
                        trunk = self.id,
                        peer = self.peer_name(),
                        slot = p.slot,
                        "trunk closed gracefully"
                    ),
                    Some(e) => {
                        warn!(trunk = self.id, peer = self.peer_name(), slot = p.slot, remote = %self.remote,
                                     error = %e, streams_lost = lost, "trunk closed")
                    }
                }
            }
            None => {
                // Never authenticated: a refused or failed handshake.
                let peer = g.conn.peer().map(|p| format!("{}/{}", p.cluster, p.name));
                let peer = peer.as_deref().unwrap_or("?");
                let label = match reason {
                    "auth_failed" => Some("auth"),
                    "wrong_cluster" => Some("wrong_cluster"),
                    "handshake_timeout" => Some("timeout"),
                    "protocol" | "flood" | "stream_limit" | "flow_control" => Some("protocol"),
                    _ => None,
                };
                if let Some(l) = label {
                    relay
                        .metrics
                        .inc("wanrelay_trunk_refused_total", &[("reason", l)]);
                }
                match &error {
                    Some(ConnectionError::AuthFailed) => warn!(
                        trunk = self.id, remote = %self.remote, announced = peer,
                        "trunk refused: peer failed authentication (wrong pre-shared key?)"),
                    Some(ConnectionError::PeerClosed(CloseCode::AuthFailed)) => warn!(
                        trunk = self.id, remote = %self.remote, announced = peer,
                        "trunk refused by the peer: it could not authenticate us (different pre-shared keys?)"),
                    Some(e) if label.is_some() || matches!(e, ConnectionError::PeerClosed(_)) => {
                        warn!(
                        trunk = self.id, remote = %self.remote, announced = peer, error = %e,
                        "trunk handshake failed")
                    }
                    e => {
                        debug!(trunk = self.id, remote = %self.remote, error = ?e, "trunk closed before authentication")
                    }
                }
            }
        }
        self.tx.notify_one();
    }
}

/// Runs a trunk over `sock` until it closes; returns whether it was ever
/// authenticated.
pub async fn run(trunk: Arc<Trunk>, sock: TcpStream) -> bool {
    let _ = sock.set_nodelay(true);
    let (mut rd, wr) = sock.into_split();
    trunk.lock().wr = Some(Arc::new(wr));
    trunk.relay.track(&trunk);
    let reader = {
        let trunk = trunk.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                let r = rd.read(&mut buf).await;
                let mut g = trunk.lock();
                match r {
                    Ok(n) if n > 0 => {
                        let now = trunk.relay.now();
                        g.conn.handle_input(now, &buf[..n]);
                        trunk.dispatch(&mut g);
                        trunk.kick(&mut g);
                    }
                    other => {
                        if let Err(e) = other {
                            debug!(trunk = trunk.id, error = %e, "trunk read failed");
                        }
                        g.conn.handle_transport_closed();
                        trunk.dispatch(&mut g);
                        drop(g);
                        trunk.tx.notify_one();
                        return;
                    }
                }
            }
        })
    };
    // The writer: what stream tasks and the reader could not write at once
    // (socket full, pacer empty), and the timers.
    let mut linger_until: Option<u64> = None;
    loop {
        let (state, deadline, wr) = {
            let mut g = trunk.lock();
            let request = trunk
                .close_request
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(code) = request {
                if code == CloseCode::NoError {
                    g.conn.go_away();
                } else {
                    g.conn.close(code);
                }
                trunk.dispatch(&mut g);
            }
            let state = trunk.flush(&mut g, 4 * WRITE_CHUNK);
            let mut deadline = g.conn.poll_timeout();
            if g.conn.is_closed() {
                // The last bytes (GOAWAY) get a second to leave.
                let until = *linger_until.get_or_insert(trunk.relay.now() + 1_000_000_000);
                deadline = Some(until);
            }
            (state, deadline, g.wr.clone())
        };
        let now = trunk.relay.now();
        if state == Flush::Closed || (linger_until.is_some_and(|t| now >= t)) {
            break;
        }
        match state {
            Flush::Blocked => {
                let Some(wr) = wr else { break };
                tokio::select! {
                    _ = wr.writable() => {}
                    _ = trunk.relay.sleep_until(deadline) => trunk.on_timer(),
                }
            }
            Flush::Paced(at) => {
                let at = deadline.map_or(at, |d| d.min(at));
                tokio::select! {
                    _ = trunk.tx.notified() => {}
                    _ = trunk.relay.sleep_until(Some(at)) => trunk.on_timer(),
                }
            }
            // Let the other tasks (stream tasks, other trunks) run.
            Flush::More => tokio::task::yield_now().await,
            Flush::Idle | Flush::Closed => {
                tokio::select! {
                    _ = trunk.tx.notified() => {}
                    _ = trunk.relay.sleep_until(deadline) => trunk.on_timer(),
                }
            }
        }
    }
    let wr = trunk.lock().wr.take();
    drop(wr);
    reader.abort();
    let _ = reader.await;
    trunk.relay.untrack(&trunk);
    trunk.registered_at.get().is_some()
}

impl Trunk {
    /// Writes what the connection has to send, as far as the socket takes
    /// it without blocking and the pacer allows, up to about `budget`
    /// bytes. Called with the lock held, by whoever changed the connection.
    pub fn flush(self: &Arc<Trunk>, g: &mut TrunkInner, budget: usize) -> Flush {
        let Some(wr) = g.wr.clone() else {
            return Flush::Closed;
        };
        let mut written = 0usize;
        loop {
            if g.out_pos == g.out.len() {
                g.out.clear();
                g.out_pos = 0;
                if written >= budget {
                    return Flush::More;
                }
                let now = self.relay.now();
                let pacer = self.placement.get().and_then(|p| self.relay.pacer(p.peer));
                let avail = match pacer {
                    Some(p) => {
                        // Below one full DATA frame, wait rather than send slivers.
                        let frame = self.relay.config.trunk.max_data_frame as u64 + 10;
                        let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                        match p.available(now) {
                            a if a < frame => {
                                // Wake when half the bucket is there: timers
                                // round up to the millisecond, and tokens that
                                // accrue while we oversleep are kept as long
                                // as the bucket is not full.
                                let pc = &self.relay.config.peers
                                    [self.placement.get().map_or(0, |p| p.peer)];
                                let want = (pc.pacing_burst / 2).max(frame);
                                if g.conn.is_closed() {
                                    return Flush::Closed;
                                }
                                return Flush::Paced(p.ready_at(now, want));
                            }
                            a => a.min(WRITE_CHUNK as u64) as usize,
                        }
                    }
                    None => WRITE_CHUNK,
                };
                let TrunkInner { conn, out, .. } = &mut *g;
                let n = conn.poll_transmit_into(now, out, avail);
                if n > 0 {
                    if let Some(p) = pacer {
                        p.lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .consume(now, n as u64);
                    }
                }
                self.dispatch(g);
                if n == 0 {
                    return if g.conn.is_closed() {
                        Flush::Closed
                    } else {
                        Flush::Idle
                    };
                }
            }
            match wr.try_write(&g.out[g.out_pos..]) {
                Ok(k) if k > 0 => {
                    g.out_pos += k;
                    written += k;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Flush::Blocked,
                other => {
                    if let Err(e) = other {
                        debug!(trunk = self.id, error = %e, "trunk write failed");
                    }
                    g.out.clear();
                    g.out_pos = 0;
                    g.conn.handle_transport_closed();
                    self.dispatch(g);
                    return Flush::Closed;
                }
            }
        }
    }

    /// Sends what can be sent now after a change to the connection, and
    /// leaves the rest to the writer task.
    pub fn kick(self: &Arc<Trunk>, g: &mut TrunkInner) {
        if self.flush(g, WRITE_CHUNK) != Flush::Idle {
            self.tx.notify_one();
        }
    }
}

impl Trunk {
    fn on_timer(self: &Arc<Trunk>) {
        let mut g = self.lock();
        let now = self.relay.now();
        g.conn.handle_timeout(now);
        self.dispatch(&mut g);
    }
}
