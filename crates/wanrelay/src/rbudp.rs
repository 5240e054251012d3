//! The RBUDP data path (docs/rbudp.md): bulk stream data to a peer with
//! `transport = "rbudp"` goes as blasts over UDP; the trunk stays the
//! control channel and carries everything else.
//!
//! * One UDP socket per relay (`outside.udp_listen`); a receive task hands
//!   each datagram to the trunk whose session id it carries.
//! * One [`RbudpSession`] per authenticated trunk to an rbudp peer, in
//!   [`TrunkInner::rbudp`] (under the trunk's lock), and one *blaster*
//!   task per such trunk that sends its paced datagrams and runs its timer.
//! * **Which bytes go by UDP.** A stream task that reads a full 64 KiB from
//!   its socket (bulk is coming) keeps reading, waiting at most
//!   [`GATHER_WAIT`] for each further read, up to `blast` bytes. If it
//!   gathered at least `bulk_threshold` bytes they become one blast,
//!   announced on the trunk with the stream's count of trunk bytes before
//!   it; anything smaller goes over the trunk at once. Small messages thus
//!   keep the trunk's latency (one pass through each relay), and only bulk
//!   pays a blast's (its transmission at the rate plus one round trip).
//! * **Order.** The announcement is a trunk frame queued before the stream
//!   bytes written after it (wanproto guarantees it), so the receiving
//!   relay knows where each blast goes before it can read past that point:
//!   it reads the stream's trunk bytes up to the blast's offset, waits for
//!   the blast to complete, writes it, releases it, and reads on.
//! * **Window.** A stream whose blast does not fit the peer's window waits
//!   for its own earlier blasts to be released; a stream with none in
//!   flight sends over the trunk instead, so a stalled destination holding
//!   the window never stalls another stream.
//! * **Which streams** ([`stream_policy`]): with `rbudp_streams = "all"`
//!   every stream to the peer, with `"requested"` only those whose ranks
//!   sent a blast request (kind-3 preamble, carried in the OPEN so both
//!   relays know it). A request sets the stream's blast rate and datagram
//!   size, clamped to the peer's `rate` (per trunk) and `payload`.
//! * **Upgrading an open connection** ([`update_stream`]): a kind-4
//!   preamble from the node's shim sets (or withdraws) the request of a
//!   connection this relay already splices, for the data this relay sends
//!   ([`BlastSwitch`], read by the stream task before each bulk decision).
//!   Switching at any read boundary keeps the bytes in order: trunk bytes
//!   written so far fix the offset at which the next blast is announced.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::net::UdpSocket;
use tracing::{debug, info, warn};
use wanproto::rbudp::{
    datagram_session, BlastParams, RbudpEvent, RbudpSession, RbudpStats, DATAGRAM_HEADER_LEN,
    MAX_BLAST_PACKETS,
};
use wanproto::{BlastRequest, CloseCode, StreamId};

use crate::config::{RbudpPeer, RbudpStreams};
use crate::relay::Relay;
use crate::trunk::{Trunk, TrunkInner};

/// How long a bulk reader waits for more bytes before it sends what it has.
pub const GATHER_WAIT: Duration = Duration::from_millis(2);
/// Datagrams sent per turn of a blaster before it lets other tasks run.
const BATCH: usize = 64;
/// Requested socket buffers of the UDP socket.
pub const SOCKET_BUFFER: usize = 8 << 20;

/// The relay's UDP socket and the sessions that receive on it.
pub struct UdpPath {
    /// The socket.
    pub sock: UdpSocket,
    /// Its address (announced in SESSION unless unspecified).
    pub ip: Option<std::net::IpAddr>,
    /// Its port (announced in SESSION).
    pub port: u16,
    sessions: Mutex<HashMap<u32, Weak<Trunk>>>,
}

impl UdpPath {
    /// Wraps a bound socket.
    pub fn new(sock: UdpSocket) -> UdpPath {
        let local = sock.local_addr().ok();
        UdpPath {
            sock,
            ip: local.map(|a| a.ip()).filter(|ip| !ip.is_unspecified()),
            port: local.map_or(0, |a| a.port()),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Weak<Trunk>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The RBUDP state of one trunk.
pub struct RbudpLink {
    /// The protocol state machine.
    pub session: RbudpSession,
    /// Where datagrams go (the trunk peer's address, the port its SESSION
    /// announced).
    pub peer_addr: Option<SocketAddr>,
    /// Receiver: blasts to splice into each stream, in order (offset, blast).
    pub splices: HashMap<StreamId, VecDeque<(u64, u32)>>,
    /// Receiver: the blast each stream is writing to its socket (taken,
    /// not yet released; released with the stream if the write never ends).
    delivering: HashMap<StreamId, u32>,
    /// Sender: blasts in flight per stream.
    in_flight: HashMap<StreamId, usize>,
    out_stream: HashMap<u32, StreamId>,
    /// The peer's settings.
    pub settings: RbudpPeer,
    rng: u64,
}

impl RbudpLink {
    fn test_drop(&mut self) -> bool {
        if self.settings.test_drop <= 0.0 {
            return false;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < self.settings.test_drop
    }
}

/// The RBUDP settings of the peer a trunk belongs to, if it uses rbudp.
pub fn settings(trunk: &Trunk) -> Option<RbudpPeer> {
    let p = trunk.placement.get()?;
    trunk.relay.config.peers[p.peer].rbudp.clone()
}

/// How one stream's bulk data goes to the peer by RBUDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamBlast {
    /// Largest blast gathered from the socket, bytes.
    pub blast: usize,
    /// A bulk read gathering less goes over the trunk.
    pub bulk_threshold: usize,
    /// Rate and datagram size of its blasts.
    pub params: BlastParams,
}

/// A stream's [`StreamBlast`] setting for the data this relay sends,
/// changeable while the stream runs (kind-4 preamble, [`update_stream`]).
/// The stream task checks a version number before each bulk decision and
/// takes the lock only when it changed.
#[derive(Debug)]
pub struct BlastSwitch {
    version: AtomicU64,
    setting: Mutex<Option<StreamBlast>>,
    /// What the stream opened with (its OPEN or preamble, `rbudp_streams`):
    /// a withdrawal goes back to it.
    original: Option<StreamBlast>,
}

impl BlastSwitch {
    /// A switch holding `original` (the stream's policy when it opened).
    pub fn new(original: Option<StreamBlast>) -> BlastSwitch {
        BlastSwitch {
            version: AtomicU64::new(0),
            setting: Mutex::new(original),
            original,
        }
    }

    /// The setting the stream opened with.
    pub fn original(&self) -> Option<StreamBlast> {
        self.original
    }

    /// Sets the stream's setting from its next bulk decision on.
    pub fn set(&self, setting: Option<StreamBlast>) {
        *self.setting.lock().unwrap_or_else(|e| e.into_inner()) = setting;
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Puts the current setting in `current` if it changed since version
    /// `seen` (0 and the original setting to begin with).
    pub fn refresh(&self, seen: &mut u64, current: &mut Option<StreamBlast>) {
        let v = self.version.load(Ordering::Acquire);
        if v != *seen {
            *seen = v;
            *current = *self.setting.lock().unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A blast request for an open connection (kind 4) for stream `stream`
/// of `trunk`: `Some` sets its setting as a kind-3 request would have
/// ([`stream_policy`], counted with `side` "update"), `None` withdraws it
/// (back to what the stream opened with; counted `withdrawn`). Returns the
/// setting now in force.
pub fn update_stream(
    trunk: &Trunk,
    stream: StreamId,
    switch: &BlastSwitch,
    request: Option<BlastRequest>,
) -> Option<StreamBlast> {
    let setting = match request {
        Some(r) => stream_policy(trunk, &trunk.lock(), stream, Some(r), "update"),
        None => {
            trunk.relay.metrics.inc(
                "wanrelay_rbudp_requests_total",
                &[
                    ("peer", trunk.peer_name()),
                    ("side", "update"),
                    ("outcome", "withdrawn"),
                ],
            );
            switch.original()
        }
    };
    switch.set(setting);
    setting
}

/// Whether stream `stream` of `trunk` blasts its bulk data to the peer,
/// and how: the peer's `transport` and `rbudp_streams` decide, and the
/// ranks' `request` (from the preamble or the peer's OPEN) sets the
/// rate and datagram size, clamped to the peer's `rate` (this trunk's
/// share) and `payload`. Both relays of a stream call it (`side` "out":
/// the opener, "in": the far relay), each for the data it sends. A
/// request is counted (`wanrelay_rbudp_requests_total`); one that cannot
/// be honoured (tcp peer, RBUDP session not up) is not an error: the
/// stream stays on the trunk, and the first such request per peer is
/// logged at warn.
pub fn stream_policy(
    trunk: &Trunk,
    g: &TrunkInner,
    stream: StreamId,
    request: Option<BlastRequest>,
    side: &str,
) -> Option<StreamBlast> {
    let p = trunk.placement.get()?;
    let relay = &trunk.relay;
    let pc = &relay.config.peers[p.peer];
    let count = |outcome: &str| {
        relay.metrics.inc(
            "wanrelay_rbudp_requests_total",
            &[("peer", &pc.name), ("side", side), ("outcome", outcome)],
        )
    };
    let Some(s) = pc.rbudp.as_ref() else {
        if request.is_some() {
            count("no_rbudp");
            if relay.first_ignored_request(p.peer) {
                warn!(trunk = trunk.id, peer = %pc.name, stream,
                      "blast requests to this peer are ignored: it is configured with transport = \"tcp\" (streams stay on the trunk; counted in wanrelay_rbudp_requests_total)");
            }
        }
        return None;
    };
    if request.is_none() && s.streams == RbudpStreams::Requested {
        return None;
    }
    let mut params = BlastParams::default();
    let mut datagram = s.payload;
    if let Some(r) = request {
        let trunk_rate = s.trunk_rate(pc.trunks);
        let rate = r.rate.min(trunk_rate);
        datagram = usize::from(r.payload).min(s.payload);
        params = BlastParams {
            rate: Some(rate),
            datagram_size: Some(datagram),
        };
        let up = g
            .rbudp
            .as_ref()
            .is_some_and(|l| l.session.is_ready() && l.peer_addr.is_some());
        let outcome = if !up {
            "no_rbudp"
        } else if rate < r.rate || datagram < usize::from(r.payload) {
            "clamped"
        } else {
            "blasted"
        };
        count(outcome);
        debug!(trunk = trunk.id, peer = %pc.name, stream, side, outcome,
               requested_rate = r.rate, rate, requested_payload = r.payload, payload = datagram,
               "blast request (rates in bytes/s on the wire)");
        if !up && relay.first_ignored_request(p.peer) {
            warn!(trunk = trunk.id, peer = %pc.name, stream,
                  "blast request while the RBUDP session with this peer is not up (is it configured with transport = \"rbudp\"?): the stream's data stays on the trunk until it is");
        }
    }
    // A blast holds at most MAX_BLAST_PACKETS datagrams of its chunk.
    let chunk = datagram - DATAGRAM_HEADER_LEN;
    let blast = s.blast.min(MAX_BLAST_PACKETS as usize * chunk);
    Some(StreamBlast {
        blast,
        bulk_threshold: s.bulk_threshold.min(blast),
        params,
    })
}

fn random_u32() -> u32 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        // Session ids need only be unique, not secret (the token is).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos());
        return t | 1;
    }
    u32::from_be_bytes(b)
}

/// Starts the RBUDP session of a trunk that just authenticated, if its
/// peer uses rbudp (and spawns its blaster).
pub fn start(trunk: &Arc<Trunk>, g: &mut TrunkInner) {
    let Some(settings) = settings(trunk) else {
        return;
    };
    let Some(udp) = trunk.relay.udp() else {
        warn!(
            trunk = trunk.id,
            "rbudp peer but no UDP socket: bulk data stays on the trunk"
        );
        return;
    };
    let Some(secret) = g.conn.export_secret(b"rbudp") else {
        return;
    };
    let p = trunk.placement.get().copied().expect("placed before start");
    let trunks = trunk.relay.config.peers[p.peer].trunks;
    let id = {
        let mut map = udp.sessions();
        let mut id = random_u32();
        while id == 0 || map.contains_key(&id) {
            id = random_u32();
        }
        map.insert(id, Arc::downgrade(trunk));
        id
    };
    let now = trunk.relay.now();
    let session = match RbudpSession::new(
        settings.session_config(trunks),
        g.conn.role(),
        secret,
        id,
        udp.ip,
        udp.port,
        now,
    ) {
        Ok(s) => s,
        Err(e) => {
            warn!(trunk = trunk.id, error = %e, "cannot start the RBUDP session");
            udp.sessions().remove(&id);
            return;
        }
    };
    g.rbudp = Some(RbudpLink {
        session,
        peer_addr: None,
        splices: HashMap::new(),
        delivering: HashMap::new(),
        in_flight: HashMap::new(),
        out_stream: HashMap::new(),
        settings,
        rng: u64::from(id) | 1,
    });
    debug!(trunk = trunk.id, session = id, "RBUDP session started");
    pump(trunk, g);
    tokio::spawn(blaster(trunk.clone()));
}

/// Ends the RBUDP session of a closed trunk.
pub fn stop(trunk: &Arc<Trunk>, g: &mut TrunkInner) {
    let Some(link) = g.rbudp.take() else {
        return;
    };
    if let Some(udp) = trunk.relay.udp() {
        udp.sessions().remove(&link.session.local_session());
    }
    if let Some(p) = trunk.placement.get() {
        trunk.relay.add_closed_rbudp(p.peer, link.session.stats());
    }
    trunk.rbudp_wake.notify_one();
    trunk.rbudp_window.notify_waiters();
}

/// A control message from the peer (an RBUDP trunk frame).
pub fn on_control(trunk: &Arc<Trunk>, g: &mut TrunkInner, message: &[u8]) {
    let now = trunk.relay.now();
    let Some(link) = g.rbudp.as_mut() else {
        trunk.relay.metrics.inc(
            "wanrelay_rbudp_control_ignored_total",
            &[("peer", trunk.peer_name())],
        );
        debug!(
            trunk = trunk.id,
            "RBUDP control message from a peer this relay reaches by tcp: ignored"
        );
        return;
    };
    if let Err(e) = link.session.handle_control(now, message) {
        warn!(trunk = trunk.id, peer = trunk.peer_name(), error = %e, "RBUDP protocol error: closing the trunk");
        trunk.relay.metrics.inc(
            "wanrelay_rbudp_protocol_errors_total",
            &[("peer", trunk.peer_name())],
        );
        g.conn.close(CloseCode::Protocol);
        return;
    }
    pump(trunk, g);
    trunk.rbudp_wake.notify_one();
}

/// Acts on the session's events and moves its control messages to the
/// trunk. Returns whether anything was queued on the trunk (kick it).
pub fn pump(trunk: &Arc<Trunk>, g: &mut TrunkInner) -> bool {
    let TrunkInner {
        conn,
        streams,
        rbudp,
        ..
    } = g;
    let Some(link) = rbudp.as_mut() else {
        return false;
    };
    while let Some(ev) = link.session.poll_event() {
        match ev {
            RbudpEvent::Ready { addr, port } => {
                let addr = SocketAddr::new(addr.unwrap_or(trunk.remote.ip()), port);
                link.peer_addr = Some(addr);
                info!(trunk = trunk.id, peer = trunk.peer_name(), %addr, "RBUDP session up: bulk data goes by UDP");
                trunk.rbudp_wake.notify_one();
            }
            RbudpEvent::Announced {
                blast,
                stream,
                offset,
                ..
            } => {
                if conn.stream_stats(stream).is_none() {
                    // The stream is gone (reset, or never ours): discard.
                    link.session.release(blast);
                } else {
                    link.splices
                        .entry(stream)
                        .or_default()
                        .push_back((offset, blast));
                }
            }
            RbudpEvent::Complete { stream, .. } => {
                if let Some(s) = streams.get(&stream) {
                    s.readable.notify_one();
                }
            }
            RbudpEvent::Delivered { .. } => {}
            RbudpEvent::Released { blast } => {
                if let Some(stream) = link.out_stream.remove(&blast) {
                    if let Some(n) = link.in_flight.get_mut(&stream) {
                        *n -= 1;
                        if *n == 0 {
                            link.in_flight.remove(&stream);
                        }
                    }
                }
                trunk.rbudp_window.notify_waiters();
            }
        }
    }
    let mut queued = false;
    while let Some(m) = link.session.poll_control() {
        if conn.send_rbudp(&m).is_err() {
            break;
        }
        queued = true;
    }
    queued
}

/// Sends `data` of stream `id` as one blast inserted after `offset` trunk
/// bytes of the stream. Waits while the peer's window is full and this
/// stream has blasts in flight; gives the bytes back (`Err`) when they
/// should go over the trunk instead (no session, not ready, or window full
/// with nothing of this stream in flight).
pub async fn send_blast(
    trunk: &Arc<Trunk>,
    id: StreamId,
    offset: u64,
    data: Vec<u8>,
    params: BlastParams,
) -> Result<(), Vec<u8>> {
    loop {
        let released = trunk.rbudp_window.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        {
            let mut g = trunk.lock();
            let Some(link) = g.rbudp.as_mut() else {
                return Err(data);
            };
            if !link.session.is_ready() || link.peer_addr.is_none() {
                return Err(data);
            }
            let len = data.len() as u64;
            let packets = data.len().div_ceil(link.session.blast_chunk(&params));
            if packets > MAX_BLAST_PACKETS as usize {
                // The peer's datagrams are smaller than this stream's.
                return Err(data);
            }
            if len <= link.session.window_available() {
                match link.session.start_blast_with(id, offset, data, params) {
                    Ok(blast) => {
                        *link.in_flight.entry(id).or_default() += 1;
                        link.out_stream.insert(blast, id);
                        trunk
                            .relay
                            .metrics
                            .counter(
                                "wanrelay_rbudp_stream_bytes_total",
                                &[("peer", trunk.peer_name()), ("direction", "to_wan")],
                            )
                            .fetch_add(len, Ordering::Relaxed);
                        pump(trunk, &mut g);
                        trunk.kick(&mut g);
                        trunk.rbudp_wake.notify_one();
                        return Ok(());
                    }
                    Err(e) => {
                        // Cannot happen after the checks above; the bytes
                        // are gone, so the stream cannot go on.
                        warn!(trunk = trunk.id, stream = id, error = %e, "blast refused: resetting the stream");
                        let _ = g.conn.reset_stream(id, wanproto::Reason::Internal);
                        trunk.dispatch(&mut g);
                        trunk.kick(&mut g);
                        return Ok(());
                    }
                }
            }
            if !link.in_flight.contains_key(&id) {
                return Err(data);
            }
        }
        released.await;
    }
}

/// What a stream's receiving side does next.
pub enum Next {
    /// Write these bytes of a blast, then [`release`] it.
    Blast(u32, Vec<u8>),
    /// The next bytes are a blast still arriving: wait for `readable`.
    Wait,
    /// Read the trunk stream, at most this many bytes (`None`: no limit).
    Read(Option<u64>),
}

/// Where stream `id` stands after `tcp_read` trunk bytes.
pub fn next(g: &mut TrunkInner, id: StreamId, tcp_read: u64) -> Next {
    let Some(link) = g.rbudp.as_mut() else {
        return Next::Read(None);
    };
    let Some(q) = link.splices.get_mut(&id) else {
        return Next::Read(None);
    };
    let Some(&(offset, blast)) = q.front() else {
        return Next::Read(None);
    };
    if offset > tcp_read {
        return Next::Read(Some(offset - tcp_read));
    }
    match link.session.take(blast) {
        Some(data) => {
            q.pop_front();
            if q.is_empty() {
                link.splices.remove(&id);
            }
            link.delivering.insert(id, blast);
            Next::Blast(blast, data)
        }
        None => Next::Wait,
    }
}

/// A blast of stream `id` was written to the destination: free its window.
pub fn release(trunk: &Arc<Trunk>, g: &mut TrunkInner, id: StreamId, blast: u32, len: u64) {
    if let Some(link) = g.rbudp.as_mut() {
        link.delivering.remove(&id);
        link.session.release(blast);
        trunk
            .relay
            .metrics
            .counter(
                "wanrelay_rbudp_stream_bytes_total",
                &[("peer", trunk.peer_name()), ("direction", "from_wan")],
            )
            .fetch_add(len, Ordering::Relaxed);
    }
    if pump(trunk, g) {
        trunk.kick(g);
    }
}

/// A stream ended: discard the blasts still waiting to be spliced into it.
pub fn forget_stream(trunk: &Arc<Trunk>, g: &mut TrunkInner, id: StreamId) {
    let Some(link) = g.rbudp.as_mut() else {
        return;
    };
    if let Some(q) = link.splices.remove(&id) {
        for (_, blast) in q {
            link.session.release(blast);
        }
    }
    if let Some(blast) = link.delivering.remove(&id) {
        link.session.release(blast);
    }
    if pump(trunk, g) {
        trunk.kick(g);
    }
}

/// Sends a trunk's datagrams at the session's pace and runs its timer,
/// until the session ends.
async fn blaster(trunk: Arc<Trunk>) {
    let Some(udp) = trunk.relay.udp() else {
        return;
    };
    let relay = trunk.relay.clone();
    let sent_c = relay.metrics.counter(
        "wanrelay_rbudp_test_dropped_total",
        &[("peer", trunk.peer_name())],
    );
    let mut buf = vec![0u8; 65_536];
    let mut pending: Option<(usize, SocketAddr)> = None;
    loop {
        if let Some((n, addr)) = pending {
            match udp.sock.try_send_to(&buf[..n], addr) {
                Ok(_) => pending = None,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let _ = udp.sock.writable().await;
                    continue;
                }
                Err(e) => {
                    // Lost like a dropped datagram: the next report names it.
                    debug!(trunk = trunk.id, error = %e, "UDP send failed");
                    pending = None;
                }
            }
        }
        let wait = {
            let mut g = trunk.lock();
            if g.conn.is_closed() {
                return;
            }
            let now = relay.now();
            let mut sent = 0;
            {
                let Some(link) = g.rbudp.as_mut() else {
                    return;
                };
                link.session.handle_timeout(now);
                if let Some(addr) = link.peer_addr {
                    while sent < BATCH {
                        let Some((n, port)) = link.session.poll_datagram(now, &mut buf) else {
                            break;
                        };
                        sent += 1;
                        if link.test_drop() {
                            sent_c.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        let to = SocketAddr::new(addr.ip(), port);
                        match udp.sock.try_send_to(&buf[..n], to) {
                            Ok(_) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                pending = Some((n, to));
                                break;
                            }
                            Err(e) => debug!(trunk = trunk.id, error = %e, "UDP send failed"),
                        }
                    }
                }
            }
            if pump(&trunk, &mut g) {
                trunk.kick(&mut g);
            }
            if pending.is_some() || sent >= BATCH {
                None
            } else {
                g.rbudp.as_ref().map(|l| l.session.poll_timeout())
            }
        };
        match wait {
            None => tokio::task::yield_now().await,
            Some(deadline) => {
                tokio::select! {
                    _ = trunk.rbudp_wake.notified() => {}
                    _ = relay.sleep_until(deadline) => {}
                }
            }
        }
    }
}

/// Receives every datagram of the relay's UDP socket and hands it to its
/// session; datagrams of no live session are dropped and counted.
pub async fn receive(relay: Arc<Relay>) {
    let Some(udp) = relay.udp() else {
        return;
    };
    let stray = relay
        .metrics
        .counter("wanrelay_rbudp_dropped_total", &[("reason", "stray")]);
    let malformed = relay
        .metrics
        .counter("wanrelay_rbudp_dropped_total", &[("reason", "malformed")]);
    let mut buf = vec![0u8; 65_536];
    let mut cache: Option<(u32, Weak<Trunk>)> = None;
    loop {
        if let Err(e) = udp.sock.readable().await {
            warn!(error = %e, "UDP socket failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        for _ in 0..BATCH {
            let n = match udp.sock.try_recv_from(&mut buf) {
                Ok((n, _)) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    debug!(error = %e, "UDP receive failed");
                    break;
                }
            };
            let d = &buf[..n];
            let Some(session) = datagram_session(d) else {
                malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let weak = match &cache {
                Some((s, w)) if *s == session => w.clone(),
                _ => match udp.sessions().get(&session) {
                    Some(w) => {
                        cache = Some((session, w.clone()));
                        w.clone()
                    }
                    None => {
                        stray.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                },
            };
            let Some(trunk) = weak.upgrade() else {
                stray.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let mut g = trunk.lock();
            let Some(link) = g.rbudp.as_mut() else {
                stray.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            link.session.handle_datagram(relay.now(), d);
            if pump(&trunk, &mut g) {
                trunk.kick(&mut g);
            }
        }
        tokio::task::yield_now().await;
    }
}

/// Binds the UDP socket with large buffers (the kernel caps them at
/// `net.core.rmem_max` / `wmem_max`).
///
/// # Errors
/// The socket, option or bind failure.
pub fn bind(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    sock.bind(&addr.into())?;
    sock.set_nonblocking(true)?;
    UdpSocket::from_std(sock.into())
}

/// The metric samples of the RBUDP sessions of one peer.
pub fn stats_samples(peer: &str, s: &RbudpStats) -> Vec<(String, String, f64)> {
    use crate::metrics::gauge;
    let mut out = Vec::new();
    for (kind, v) in [
        ("sent", s.datagrams_sent),
        ("resent", s.datagrams_resent),
        ("received", s.datagrams_received),
    ] {
        out.push(gauge(
            "wanrelay_rbudp_datagrams_total",
            &[("peer", peer), ("kind", kind)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.bytes_sent), ("received", s.bytes_received)] {
        out.push(gauge(
            "wanrelay_rbudp_bytes_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.blasts_sent), ("received", s.blasts_received)] {
        out.push(gauge(
            "wanrelay_rbudp_blasts_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.reports_sent), ("received", s.reports_received)] {
        out.push(gauge(
            "wanrelay_rbudp_reports_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (r, v) in [
        ("duplicate", s.dropped_duplicate),
        ("malformed", s.dropped_malformed),
        ("stray", s.dropped_stray),
        ("forged", s.dropped_forged),
        ("stale", s.dropped_stale),
        ("early", s.dropped_early),
    ] {
        out.push(gauge(
            "wanrelay_rbudp_session_dropped_total",
            &[("peer", peer), ("reason", r)],
            v as f64,
        ));
    }
    out
}

/// Adds `b` to `a`.
pub fn add_stats(a: &mut RbudpStats, b: &RbudpStats) {
    a.datagrams_sent += b.datagrams_sent;
    a.datagrams_resent += b.datagrams_resent;
    a.bytes_sent += b.bytes_sent;
    a.blasts_sent += b.blasts_sent;
    a.blasts_delivered += b.blasts_delivered;
    a.reports_received += b.reports_received;
    a.datagrams_received += b.datagrams_received;
    a.bytes_received += b.bytes_received;
    a.blasts_received += b.blasts_received;
    a.reports_sent += b.reports_sent;
    a.dropped_duplicate += b.dropped_duplicate;
    a.dropped_malformed += b.dropped_malformed;
    a.dropped_stray += b.dropped_stray;
    a.dropped_forged += b.dropped_forged;
    a.dropped_stale += b.dropped_stale;
    a.dropped_early += b.dropped_early;
}
