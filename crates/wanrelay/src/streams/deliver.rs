//! The far side of a stream the peer opened: connect to the destination
//! node, write the delivery preamble (which carries the original source),
//! accept the stream, and splice.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};
use tracing::{debug, info};
use wanproto::{Preamble, Reason};

use super::splice::splice;
use super::Streams;
use crate::shared::metrics::reason_label;
use crate::transport::blast::StreamBlast;
use crate::transport::TrunkStream;

/// Why a stream whose connect ended at the relay itself is refused.
const SELF_CONNECTION: &str = "destination is one of this relay's own listeners";

/// The far side of `stream`, which the peer opened to `destination` (a
/// member node, checked by the caller) for `source`: connect, write the
/// delivery preamble, accept the stream, splice (`blasts`: as for
/// [`splice`]). A failure resets the stream with its reason.
pub async fn deliver(
    streams: Arc<Streams>,
    stream: TrunkStream,
    destination: SocketAddr,
    source: SocketAddr,
    blasts: Option<StreamBlast>,
) {
    let ctx = streams.ctx.clone();
    let connect = async {
        let sock = connect_node(destination, ctx.config.inside_bind)
            .await
            .map_err(|e| (connect_reason(&e), e.to_string()))?;
        if let (Ok(local), Ok(peer)) = (sock.local_addr(), sock.peer_addr()) {
            if ctx.config.is_self_connection(local, peer) {
                let _ = sock.set_zero_linger();
                return Err((Reason::NotMember, SELF_CONNECTION.to_owned()));
            }
        }
        let _ = sock.set_nodelay(true);
        let mut sock = sock;
        sock.write_all(&Preamble::deliver(destination, source).encode())
            .await
            .map_err(|e| (connect_reason(&e), e.to_string()))?;
        Ok::<TcpStream, (Reason, String)>(sock)
    };
    let result = tokio::select! {
        r = tokio::time::timeout(ctx.config.node_connect_timeout, connect) => r,
        _ = stream.shared.ended.notified() => {
            debug!(trunk = stream.trunk.id, stream = stream.id, "stream reset while connecting");
            stream.detach();
            return;
        }
    };
    let sock = match result {
        Err(_) => {
            return refuse(
                &stream,
                destination,
                source,
                Reason::TimedOut,
                "connect timed out",
            )
        }
        Ok(Err((reason, why))) => return refuse(&stream, destination, source, reason, &why),
        Ok(Ok(s)) => s,
    };
    if stream.accept().is_err() {
        // Reset or trunk lost while connecting.
        let _ = sock.set_zero_linger();
        stream.detach();
        return;
    }
    // Accepted: this side may send blasts too.
    stream.shared.accepted.store(true, Ordering::Release);
    debug!(trunk = stream.trunk.id, stream = stream.id, %destination, %source, "connected to the destination");
    splice(streams, stream, sock, false, Vec::new(), blasts).await;
}

/// The destination cannot be reached: resets the stream with `reason`,
/// counted and logged.
fn refuse(
    stream: &TrunkStream,
    destination: SocketAddr,
    source: SocketAddr,
    reason: Reason,
    why: &str,
) {
    let trunk = &stream.trunk;
    stream.reset(reason);
    trunk.ctx.metrics.inc(
        "wanrelay_streams_refused_total",
        &[
            ("peer", trunk.peer_name()),
            ("side", "in"),
            ("reason", reason_label(reason)),
        ],
    );
    if let Some(skipped) = trunk.ctx.log_refusal() {
        info!(trunk = trunk.id, stream = stream.id, %destination, %source, reason = reason_label(reason), why,
              skipped, "cannot connect to the destination: stream refused");
    }
}

async fn connect_node(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = bind {
        if ip.is_ipv4() == addr.is_ipv4() {
            sock.bind(SocketAddr::new(ip, 0))?;
        }
    }
    sock.connect(addr).await
}

/// The reason code for a failed connect to a member node.
fn connect_reason(e: &std::io::Error) -> Reason {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => Reason::Refused,
        K::TimedOut => Reason::TimedOut,
        K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => Reason::Unreachable,
        K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe => Reason::ConnectionReset,
        _ => Reason::Unreachable,
    }
}
