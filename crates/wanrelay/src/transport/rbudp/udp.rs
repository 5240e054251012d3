//! The relay's UDP socket (`outside.udp_listen`): a receive task hands
//! each datagram to the trunk whose session id it carries, and one
//! *blaster* task per trunk to an rbudp peer sends its session's paced
//! datagrams and runs its timer. A trunk's session is registered here
//! when it starts ([`start`], at authentication) and removed when the
//! trunk closes ([`stop`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::net::UdpSocket;
use tracing::{debug, warn};
use wanproto::rbudp::{datagram_session, RbudpSession};

use super::link::RbudpLink;
use super::session::pump;
use super::stats::ClosedSessions;
use crate::config::RbudpPeer;
use crate::shared::context::Context;
use crate::transport::trunk::{Trunk, TrunkInner};

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

/// The RBUDP settings of the peer a trunk belongs to, if it uses rbudp.
pub fn settings(trunk: &Trunk) -> Option<RbudpPeer> {
    let p = trunk.placement.get()?;
    trunk.ctx.config.peers[p.peer].rbudp.clone()
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
/// peer uses rbudp (and spawns its blaster); `udp`: the relay's socket,
/// if running.
pub fn start(trunk: &Arc<Trunk>, g: &mut TrunkInner, udp: Option<&Arc<UdpPath>>) {
    let Some(settings) = settings(trunk) else {
        return;
    };
    let Some(udp) = udp else {
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
    let trunks = trunk.ctx.config.peers[p.peer].trunks;
    let id = {
        let mut map = udp.sessions();
        let mut id = random_u32();
        while id == 0 || map.contains_key(&id) {
            id = random_u32();
        }
        map.insert(id, Arc::downgrade(trunk));
        id
    };
    let now = trunk.ctx.now();
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
    g.rbudp = Some(RbudpLink::new(session, settings, id));
    debug!(trunk = trunk.id, session = id, "RBUDP session started");
    pump(trunk, g);
    tokio::spawn(blaster(trunk.clone(), udp.clone()));
}

/// Ends the RBUDP session of a closed trunk (its counters go to
/// `closed`); `udp`: the relay's socket, if running.
pub fn stop(
    trunk: &Arc<Trunk>,
    g: &mut TrunkInner,
    udp: Option<&Arc<UdpPath>>,
    closed: &ClosedSessions,
) {
    let Some(link) = g.rbudp.take() else {
        return;
    };
    if let Some(udp) = udp {
        udp.sessions().remove(&link.session.local_session());
    }
    if let Some(p) = trunk.placement.get() {
        closed.add(p.peer, link.session.stats());
    }
    trunk.rbudp_wake.notify_one();
    trunk.rbudp_window.notify_waiters();
}

/// Sends a trunk's datagrams at the session's pace and runs its timer,
/// until the session ends.
async fn blaster(trunk: Arc<Trunk>, udp: Arc<UdpPath>) {
    let ctx = trunk.ctx.clone();
    let sent_c = ctx.metrics.counter(
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
            let now = ctx.now();
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
                    _ = ctx.sleep_until(deadline) => {}
                }
            }
        }
    }
}

/// Receives every datagram of the relay's UDP socket and hands it to its
/// session; datagrams of no live session are dropped and counted.
pub async fn receive(ctx: Arc<Context>, udp: Arc<UdpPath>) {
    let stray = ctx
        .metrics
        .counter("wanrelay_rbudp_dropped_total", &[("reason", "stray")]);
    let malformed = ctx
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
            ctx.traffic();
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
            link.session.handle_datagram(ctx.now(), d);
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
