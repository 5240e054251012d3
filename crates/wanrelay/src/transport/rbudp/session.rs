//! A trunk's RBUDP session at work, under the trunk's lock: the session's
//! events and control messages ([`pump`]), blasts this relay sends
//! ([`send_blast`]), and blasts it receives, spliced into their streams at
//! their offsets ([`next`], [`release`], [`forget_stream`]).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing::{info, warn};
use wanproto::rbudp::{BlastParams, RbudpEvent, MAX_BLAST_PACKETS};
use wanproto::{CloseCode, StreamId};

use crate::transport::trunk::{Trunk, TrunkInner};

/// A control message from the peer (an RBUDP trunk frame) for the
/// trunk's session (none: nothing to do). A protocol violation closes the
/// trunk.
pub fn on_control(trunk: &Arc<Trunk>, g: &mut TrunkInner, message: &[u8]) {
    let now = trunk.ctx.now();
    let Some(link) = g.rbudp.as_mut() else {
        return;
    };
    if let Err(e) = link.session.handle_control(now, message) {
        warn!(trunk = trunk.id, peer = trunk.peer_name(), error = %e, "RBUDP protocol error: closing the trunk");
        trunk.ctx.metrics.inc(
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
                            .ctx
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
            .ctx
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
