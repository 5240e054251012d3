//! The inside listener: connections from the shim on member nodes.
//!
//! A connection is accepted only from a member address; its first 48 bytes
//! (64 with a blast request, kind 3) must be a connect preamble (checked
//! byte by byte as they arrive, within `inside.preamble_timeout`) whose
//! source is the connection's own address. The relay then opens a stream
//! on the trunk chosen for the destination host, and splices (see
//! [`crate::stream`]); bytes the shim sent after the preamble go first.
//! Every refusal is a 4-byte reply with the reason, then a normal close.
//!
//! A kind-4 preamble instead (a blast request for an open connection) is
//! the whole of a short control connection: it names a connection of this
//! relay by its two endpoints, the node's being the control connection's
//! own address, and sets or withdraws the blast request of the data this
//! relay sends for it ([`crate::rbudp::update_stream`]); the reply is ok,
//! or `NoSuchConnection` (14) when no live connection has those endpoints.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, warn};
use wanproto::{BlastUpdate, Decoded, Inside, OpenError, Reason, Reply};

use crate::reason_label;
use crate::relay::Relay;
use crate::stream;
use crate::trunk::StreamShared;

/// Bytes read with the preamble at most (the rest of a first read is
/// early data, forwarded first).
const FIRST_READ: usize = 64 * 1024;

/// Accepts inside connections until the task is dropped.
pub async fn accept_loop(relay: Arc<Relay>, listener: TcpListener) {
    loop {
        let (sock, remote) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and the like: back off instead of spinning.
                relay
                    .metrics
                    .inc("wanrelay_errors_total", &[("kind", "inside_accept")]);
                warn!(error = %e, "inside accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        relay.metrics.inc("wanrelay_inside_connections_total", &[]);
        match relay.inside_permits.clone().try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(handle(relay.clone(), sock, remote, permit));
            }
            Err(_) => {
                let r = relay.clone();
                tokio::spawn(async move {
                    refuse(
                        &r,
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

async fn refuse(relay: &Relay, mut sock: TcpStream, remote: SocketAddr, reason: Reason, why: &str) {
    relay.metrics.inc(
        "wanrelay_inside_refused_total",
        &[("reason", reason_label(reason))],
    );
    match reason {
        Reason::NoRoute | Reason::Overloaded | Reason::ShuttingDown | Reason::NoSuchConnection => {
            info!(%remote, reason = reason_label(reason), why, "inside connection refused")
        }
        _ => warn!(%remote, reason = reason_label(reason), why, "inside connection refused"),
    }
    send_refusal(&mut sock, reason).await;
}

/// Writes a refusal reply and closes gracefully: the bytes the shim sent
/// (the preamble, early data) are drained first, for a close with unread
/// input would send an RST that can overtake the reply.
pub async fn send_refusal(sock: &mut TcpStream, reason: Reason) {
    send_last_reply(sock, Reply::Refused(reason)).await;
}

/// Writes the last reply of a connection and closes it gracefully (as
/// [`send_refusal`]).
async fn send_last_reply(sock: &mut TcpStream, reply: Reply) {
    let write = async {
        sock.write_all(&reply.encode()).await?;
        sock.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 256 * 1024usize;
        while left > 0 {
            let n = sock.read(&mut sink).await?;
            if n == 0 {
                break;
            }
            left = left.saturating_sub(n);
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

async fn handle(
    relay: Arc<Relay>,
    mut sock: TcpStream,
    remote: SocketAddr,
    _permit: OwnedSemaphorePermit,
) {
    let peer_ip = remote.ip().to_canonical();
    if !relay.config.members.contains(peer_ip) {
        return refuse(
            &relay,
            sock,
            remote,
            Reason::SourceMismatch,
            "connection from an address that is not a member node",
        )
        .await;
    }
    if relay.is_shutting_down() {
        return refuse(
            &relay,
            sock,
            remote,
            Reason::ShuttingDown,
            "relay shutting down",
        )
        .await;
    }
    let mut buf = vec![0u8; FIRST_READ];
    let mut len = 0;
    type Outcome = Result<(Inside, usize), Option<wanproto::PreambleError>>;
    let read = async {
        loop {
            let n = sock.read(&mut buf[len..]).await?;
            if n == 0 {
                return Ok::<Outcome, std::io::Error>(Err(None));
            }
            len += n;
            match Inside::decode(&buf[..len]) {
                Ok(Decoded::Complete(p, used)) => return Ok(Ok((p, used))),
                Ok(Decoded::NeedMore(_)) => {}
                Err(e) => return Ok(Err(Some(e))),
            }
        }
    };
    let (message, used) = match tokio::time::timeout(relay.config.preamble_timeout, read).await {
        Err(_) => {
            return refuse(
                &relay,
                sock,
                remote,
                Reason::Protocol,
                "no complete preamble within inside.preamble_timeout",
            )
            .await
        }
        Ok(Err(e)) => {
            debug!(%remote, error = %e, "inside connection failed before its preamble");
            return;
        }
        Ok(Ok(Err(None))) => {
            relay.metrics.inc(
                "wanrelay_inside_refused_total",
                &[("reason", "closed_early")],
            );
            debug!(%remote, "inside connection closed before its preamble");
            return;
        }
        Ok(Ok(Err(Some(e)))) => {
            let why = format!("malformed preamble: {e}");
            return refuse(&relay, sock, remote, e.reason(), &why).await;
        }
        Ok(Ok(Ok(x))) => x,
    };
    let preamble = match message {
        Inside::Connect(p) => p,
        Inside::BlastUpdate(u) => return blast_update(&relay, sock, remote, u).await,
    };
    let source = preamble.source;
    let destination = preamble.destination;
    if source.ip().to_canonical() != peer_ip {
        let why = format!("preamble source {source} is not the connection's address {peer_ip}");
        return refuse(&relay, sock, remote, Reason::SourceMismatch, &why).await;
    }
    let routes = relay.route(destination.ip());
    if routes.is_empty() {
        let why = format!("no peer relay serves {destination}");
        return refuse(&relay, sock, remote, Reason::NoRoute, &why).await;
    }
    let mut excluded = Vec::new();
    let mut overloaded = false;
    let opened = loop {
        let Some(i) = relay.select(&routes, destination.ip(), &excluded) else {
            break None;
        };
        let (key, trunk) = &routes[i];
        let mut g = trunk.lock();
        match g
            .conn
            .open_stream_with_blast(destination, source, preamble.blast)
        {
            Ok(id) => {
                let shared = Arc::new(StreamShared::default());
                g.streams.insert(id, shared.clone());
                let blasts = crate::rbudp::stream_policy(trunk, &g, id, preamble.blast, "out");
                trunk.dispatch(&mut g);
                trunk.kick(&mut g);
                break Some((trunk.clone(), id, shared, blasts));
            }
            Err(e) => {
                overloaded |= matches!(e, OpenError::StreamLimit(_) | OpenError::IdsExhausted);
                drop(g);
                debug!(trunk = trunk.id, error = %e, "trunk cannot open a stream: trying another");
                excluded.push(*key);
            }
        }
    };
    let Some((trunk, id, shared, blasts)) = opened else {
        let (reason, why) = if relay.is_shutting_down() {
            (Reason::ShuttingDown, "relay shutting down")
        } else if overloaded {
            (
                Reason::Overloaded,
                "every trunk to the destination is at its stream limit",
            )
        } else {
            (
                Reason::NoRoute,
                "no trunk to the destination's cluster is up",
            )
        };
        let why = format!("{why} ({destination})");
        return refuse(&relay, sock, remote, reason, &why).await;
    };
    let slot = trunk.slot_label();
    relay.metrics.inc(
        "wanrelay_streams_opened_total",
        &[
            ("peer", trunk.peer_name()),
            ("trunk", &slot),
            ("side", "out"),
        ],
    );
    debug!(trunk = trunk.id, stream = id, %source, %destination, early = len - used,
           blast_request = preamble.blast.is_some(), "stream opened");
    buf.truncate(len);
    buf.drain(..used);
    stream::splice(trunk, id, shared, sock, true, buf, blasts).await;
}

/// A kind-4 preamble: a blast request (or its withdrawal) for connection
/// `u` of this relay, from node `remote`, which may only name its own
/// connections. Bytes after the 64 are ignored.
async fn blast_update(relay: &Relay, mut sock: TcpStream, remote: SocketAddr, u: BlastUpdate) {
    let (relay_end, node_end) = (u.relay_end, u.node_end);
    if node_end.ip().to_canonical() != remote.ip().to_canonical() {
        let why = format!(
            "blast request for a connection of {node_end}, not of the control connection's address {}",
            remote.ip()
        );
        return refuse(relay, sock, remote, Reason::SourceMismatch, &why).await;
    }
    let Some(c) = relay.connection(relay_end, node_end) else {
        let why = format!(
            "blast request for {node_end} <-> {relay_end}: no such connection at this relay"
        );
        return refuse(relay, sock, remote, Reason::NoSuchConnection, &why).await;
    };
    let now = crate::rbudp::update_stream(&c.trunk, c.stream, &c.blast, u.blast);
    debug!(trunk = c.trunk.id, stream = c.stream, %node_end, %relay_end,
           withdrawn = u.blast.is_none(), requested_rate = u.blast.map(|r| r.rate),
           requested_payload = u.blast.map(|r| r.payload), blasts = now.is_some(),
           rate = now.and_then(|b| b.params.rate), payload = now.and_then(|b| b.params.datagram_size),
           "blast request for an open connection (rates in bytes/s on the wire; no rate: the peer's)");
    send_last_reply(&mut sock, Reply::Ok).await;
}
