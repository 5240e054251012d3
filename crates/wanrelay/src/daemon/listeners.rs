//! The relay's listeners, all bound at start (so errors come before
//! anything runs), and the accept loops of the inside (shim connections)
//! and outside (trunks from peers) listeners.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, warn};
use wanproto::frame::{self, Frame, FRAME_HEADER_LEN, MAX_HELLO_LEN};
use wanproto::{Decoded, Reason, Role};

use super::relay::Relay;
use super::session;
use crate::config::Config;
use crate::streams::inside;
use crate::transport::rbudp::udp;
use crate::transport::trunk::Origin;

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

/// Listeners bound at start.
pub struct Listeners {
    /// `inside.listen`.
    pub inside: Vec<TcpListener>,
    /// `outside.listen`.
    pub outside: Vec<TcpListener>,
    /// `metrics.listen`.
    pub metrics: Option<TcpListener>,
    /// `outside.udp_listen`.
    pub udp: Option<UdpSocket>,
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
        Some(addr) => Some(udp::bind(addr).map_err(|source| StartError::Bind {
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

/// The next connection on `listener` (`side`: "inside" or "outside"). A
/// failed accept (EMFILE and the like) is counted and logged, then retried
/// after a pause instead of spinning.
async fn accept_next(relay: &Relay, listener: &TcpListener, side: &str) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(x) => return x,
            Err(e) => {
                let kind = format!("{side}_accept");
                relay
                    .ctx
                    .metrics
                    .inc("wanrelay_errors_total", &[("kind", kind.as_str())]);
                warn!(error = %e, "{side} accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Accepts inside connections until the task is dropped.
pub async fn accept_inside(relay: Arc<Relay>, listener: TcpListener) {
    loop {
        let (sock, remote) = accept_next(&relay, &listener, "inside").await;
        let _ = sock.set_nodelay(true);
        relay
            .ctx
            .metrics
            .inc("wanrelay_inside_connections_total", &[]);
        match relay.inside_permits.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(inside::handle(relay.streams.clone(), sock, remote, permit));
            }
            Err(_) => {
                let streams = relay.streams.clone();
                tokio::spawn(async move {
                    inside::refuse(
                        &streams,
                        sock,
                        remote,
                        Reason::Overloaded,
                        "too many inside connections (inside.max_connections)",
                    )
                    .await
                });
            }
        }
    }
}

/// Accepts trunk connections from peers until the task is dropped, at
/// most `outside.max_pending` handshakes at once.
pub async fn accept_trunks(relay: Arc<Relay>, listener: TcpListener) {
    loop {
        let (sock, remote) = accept_next(&relay, &listener, "outside").await;
        let Ok(permit) = relay.pending_trunk_permits.clone().try_acquire_owned() else {
            relay
                .ctx
                .metrics
                .inc("wanrelay_trunk_refused_total", &[("reason", "limit")]);
            warn!(%remote, "trunk refused: too many handshakes in progress (outside.max_pending)");
            continue;
        };
        tokio::spawn(accept_trunk(relay.clone(), sock, remote, permit));
    }
}

/// One connection on the outside listener: its first frame tells a
/// resumption (handed to the suspended trunk whose session it names) from
/// a new trunk.
async fn accept_trunk(
    relay: Arc<Relay>,
    mut sock: TcpStream,
    remote: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let limit = relay.ctx.config.trunk.handshake_timeout;
    let Ok(Ok(prefix)) = tokio::time::timeout(limit, read_first_frame(&mut sock)).await else {
        relay
            .ctx
            .metrics
            .inc("wanrelay_trunk_refused_total", &[("reason", "timeout")]);
        debug!(%remote, "trunk connection closed before its HELLO arrived");
        return;
    };
    if let Ok(Decoded::Complete(Frame::Hello(h), _)) = frame::decode(&prefix) {
        if let Some(id) = h.resume {
            if let Some(trunk) = relay.session(&id, &h.name) {
                debug!(trunk = trunk.id, %remote, "peer reconnected to resume the trunk's session");
                trunk.replace_transport((sock, prefix));
                return;
            }
        }
    }
    let id = relay.next_trunk_id();
    debug!(trunk = id, %remote, "trunk connection accepted: handshake");
    let conn = relay.new_connection(Role::Acceptor, None);
    let trunk = relay.new_trunk(id, remote, Origin::Accepted, conn);
    // The permit counts the handshake only: released at authentication or close.
    trunk.hold_handshake_permit(permit);
    session::drive(relay, trunk, sock, prefix).await;
}

/// The first frame a peer sends (its HELLO), or as much of the bytes as
/// show it is not one (the connection's handshake then refuses them).
async fn read_first_frame(sock: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; FRAME_HEADER_LEN];
    sock.read_exact(&mut buf).await?;
    let len = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]) as usize;
    if buf[0] != 0x01 || len > MAX_HELLO_LEN {
        return Ok(buf);
    }
    buf.resize(FRAME_HEADER_LEN + len, 0);
    sock.read_exact(&mut buf[FRAME_HEADER_LEN..]).await?;
    Ok(buf)
}
