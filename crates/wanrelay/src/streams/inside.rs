//! The LAN side: connections from the shim on member nodes (the daemon's
//! inside listener accepts them and hands each to [`handle`]).
//!
//! A connection is accepted only from a member address; its first 48 bytes
//! (64 with a blast request, kind 3) must be a connect preamble (checked
//! byte by byte as they arrive, within `inside.preamble_timeout`) whose
//! source is the connection's own address. The relay then opens a stream
//! on the trunk chosen for the destination host, and splices (see
//! [`super::splice`]); bytes the shim sent after the preamble go first.
//! Every refusal is a 4-byte reply with the reason, then a normal close.
//!
//! A kind-4 preamble instead (a blast request for an open connection) is
//! the whole of a short control connection: it names a connection of this
//! relay by its two endpoints, the node's being the control connection's
//! own address, and sets or withdraws the blast request of the data this
//! relay sends for it ([`TrunkStream::update_blast`]); the reply is ok,
//! or `NoSuchConnection` (14) when no live connection has those endpoints.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, warn};
use wanproto::{BlastUpdate, Decoded, Inside, OpenError, Preamble, Reason, Reply};

use super::reply::{send_last_reply, send_refusal};
use super::splice::splice;
use super::Streams;
use crate::shared::metrics::reason_label;
use crate::transport::blast::StreamBlast;
use crate::transport::trunk::Trunk;
use crate::transport::TrunkStream;

/// Bytes read with the preamble at most (the rest of a first read is
/// early data, forwarded first).
const FIRST_READ: usize = 64 * 1024;

/// How the first bytes of an inside connection ended.
enum Start {
    /// A complete preamble, the bytes read with it, and its length.
    Message(Inside, Vec<u8>, usize),
    /// Refuse the connection with this reason.
    Refuse(Reason, String),
    /// The connection failed or closed first (counted and logged).
    Gone,
}

/// Refuses an inside connection: counts it, logs it, and replies with
/// `reason` before a graceful close.
pub async fn refuse(
    streams: &Streams,
    mut sock: TcpStream,
    remote: SocketAddr,
    reason: Reason,
    why: &str,
) {
    streams.ctx.metrics.inc(
        "wanrelay_inside_refused_total",
        &[("reason", reason_label(reason))],
    );
    if let Some(skipped) = streams.ctx.log_refusal() {
        match reason {
            Reason::NoRoute | Reason::Overloaded | Reason::ShuttingDown | Reason::NoSuchConnection => {
                info!(%remote, reason = reason_label(reason), why, skipped, "inside connection refused")
            }
            _ => warn!(%remote, reason = reason_label(reason), why, skipped, "inside connection refused"),
        }
    }
    send_refusal(&mut sock, reason).await;
}

/// Serves one inside connection from `remote` (holding `_permit`, one of
/// `inside.max_connections`): its preamble, then a stream to splice it
/// with, or a kind-4 blast request.
pub async fn handle(
    streams: Arc<Streams>,
    mut sock: TcpStream,
    remote: SocketAddr,
    _permit: OwnedSemaphorePermit,
) {
    let peer_ip = remote.ip().to_canonical();
    if !streams.ctx.config.members.contains(peer_ip) {
        return refuse(
            &streams,
            sock,
            remote,
            Reason::SourceMismatch,
            "connection from an address that is not a member node",
        )
        .await;
    }
    if streams.ctx.is_shutting_down() {
        return refuse(
            &streams,
            sock,
            remote,
            Reason::ShuttingDown,
            "relay shutting down",
        )
        .await;
    }
    let (message, mut buf, used) = match read_preamble(&streams, &mut sock, remote).await {
        Start::Message(message, buf, used) => (message, buf, used),
        Start::Refuse(reason, why) => return refuse(&streams, sock, remote, reason, &why).await,
        Start::Gone => return,
    };
    let preamble = match message {
        Inside::Connect(p) => p,
        Inside::BlastUpdate(u) => return blast_update(&streams, sock, remote, u).await,
    };
    let (source, destination) = (preamble.source, preamble.destination);
    if source.ip().to_canonical() != peer_ip {
        let why = format!("preamble source {source} is not the connection's address {peer_ip}");
        return refuse(&streams, sock, remote, Reason::SourceMismatch, &why).await;
    }
    let (stream, blasts) = match open(&streams, &preamble) {
        Ok(x) => x,
        Err((reason, why)) => return refuse(&streams, sock, remote, reason, &why).await,
    };
    let trunk = &stream.trunk;
    let slot = trunk.slot_label();
    streams.ctx.metrics.inc(
        "wanrelay_streams_opened_total",
        &[
            ("peer", trunk.peer_name()),
            ("trunk", &slot),
            ("side", "out"),
        ],
    );
    debug!(trunk = trunk.id, stream = stream.id, %source, %destination, early = buf.len() - used,
           blast_request = preamble.blast.is_some(), "stream opened");
    buf.drain(..used);
    splice(streams, stream, sock, true, buf, blasts).await;
}

/// Reads the preamble, byte by byte as it arrives, within
/// `inside.preamble_timeout`.
async fn read_preamble(streams: &Streams, sock: &mut TcpStream, remote: SocketAddr) -> Start {
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
    match tokio::time::timeout(streams.ctx.config.preamble_timeout, read).await {
        Err(_) => Start::Refuse(
            Reason::Protocol,
            "no complete preamble within inside.preamble_timeout".into(),
        ),
        Ok(Err(e)) => {
            debug!(%remote, error = %e, "inside connection failed before its preamble");
            Start::Gone
        }
        Ok(Ok(Err(None))) => {
            streams.ctx.metrics.inc(
                "wanrelay_inside_refused_total",
                &[("reason", "closed_early")],
            );
            debug!(%remote, "inside connection closed before its preamble");
            Start::Gone
        }
        Ok(Ok(Err(Some(e)))) => Start::Refuse(e.reason(), format!("malformed preamble: {e}")),
        Ok(Ok(Ok((message, used)))) => {
            buf.truncate(len);
            Start::Message(message, buf, used)
        }
    }
}

/// Opens the stream of `preamble` on a trunk to its destination: the
/// selected one, else the next that can. The error is the refusal's
/// reason and why.
fn open(
    streams: &Streams,
    preamble: &Preamble,
) -> Result<(TrunkStream, Option<StreamBlast>), (Reason, String)> {
    let destination = preamble.destination;
    let routes = streams.trunks.route(destination.ip());
    if routes.is_empty() {
        return Err((
            Reason::NoRoute,
            format!("no peer relay serves {destination}"),
        ));
    }
    let mut excluded = Vec::new();
    let mut overloaded = false;
    while let Some(i) = streams.trunks.select(&routes, destination.ip(), &excluded) {
        let (key, trunk): &(u64, Arc<Trunk>) = &routes[i];
        match TrunkStream::open(trunk, destination, preamble.source, preamble.blast) {
            Ok(opened) => return Ok(opened),
            Err(e) => {
                overloaded |= matches!(e, OpenError::StreamLimit(_) | OpenError::IdsExhausted);
                debug!(trunk = trunk.id, error = %e, "trunk cannot open a stream: trying another");
                excluded.push(*key);
            }
        }
    }
    let (reason, why) = if streams.ctx.is_shutting_down() {
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
    Err((reason, format!("{why} ({destination})")))
}

/// A kind-4 preamble: a blast request (or its withdrawal) for connection
/// `u` of this relay, from node `remote`, which may only name its own
/// connections. Bytes after the 64 are ignored.
async fn blast_update(streams: &Streams, mut sock: TcpStream, remote: SocketAddr, u: BlastUpdate) {
    let (relay_end, node_end) = (u.relay_end, u.node_end);
    if node_end.ip().to_canonical() != remote.ip().to_canonical() {
        let why = format!(
            "blast request for a connection of {node_end}, not of the control connection's address {}",
            remote.ip()
        );
        return refuse(streams, sock, remote, Reason::SourceMismatch, &why).await;
    }
    let Some(c) = streams.connections.get(relay_end, node_end) else {
        let why = format!(
            "blast request for {node_end} <-> {relay_end}: no such connection at this relay"
        );
        return refuse(streams, sock, remote, Reason::NoSuchConnection, &why).await;
    };
    let now = c.stream.update_blast(&c.blast, u.blast);
    debug!(trunk = c.stream.trunk.id, stream = c.stream.id, %node_end, %relay_end,
           withdrawn = u.blast.is_none(), requested_rate = u.blast.map(|r| r.rate),
           requested_payload = u.blast.map(|r| r.payload), blasts = now.is_some(),
           rate = now.and_then(|b| b.params.rate), payload = now.and_then(|b| b.params.datagram_size),
           "blast request for an open connection (rates in bytes/s on the wire; no rate: the peer's)");
    send_last_reply(&mut sock, Reply::Ok).await;
}
