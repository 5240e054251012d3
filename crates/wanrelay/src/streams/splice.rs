//! Splicing a local TCP connection with a trunk stream, both ways.
//!
//! Each direction is a small state machine in the manner of tokio's
//! `copy_bidirectional` (running, then finished with a half-close), and the
//! two run side by side:
//!
//! * **to the WAN**: read the socket, `write` to the stream (what does not
//!   fit waits for `StreamWritable`: the socket is not read meanwhile, which
//!   is the backpressure); EOF becomes `finish` (FIN);
//! * **from the WAN**: `read` the stream, write to the socket (the stream is
//!   not read while the socket is full, so its credit is not returned: the
//!   peer's sender stops); the stream's FIN becomes `shutdown(SHUT_WR)`.
//!
//! The connection ends when both directions have finished (graceful), or
//! at once on a reset from either side: a local socket error resets the
//! stream (`ConnectionReset`); a stream reset or a lost trunk resets the
//! socket (`SO_LINGER` 0, so the application sees `ECONNRESET`). For a
//! shim connection (`reply`), the 4-byte reply goes first: ok once the far
//! relay accepted, or the refusal's reason and a normal close.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::TcpStream;
use tracing::{debug, info};
use wanproto::{ReadOutcome, Reason, Reply};

use super::connections::LiveConnection;
use super::reply::send_refusal;
use super::Streams;
use crate::shared::metrics::reason_label;
use crate::transport::blast::{BlastSwitch, StreamBlast, GATHER_WAIT};
use crate::transport::trunk::{StreamShared, Trunk};
use crate::transport::{Incoming, TrunkStream};

/// Buffer of each direction.
const CHUNK: usize = 64 * 1024;

enum Abort {
    /// The local socket failed (or was reset by its endpoint).
    Local(std::io::Error),
    /// The stream was reset by the peer or lost with its trunk.
    Ended,
}

/// Byte counters of the trunk slot a stream runs on.
struct Counters {
    to_wan: Arc<AtomicU64>,
    from_wan: Arc<AtomicU64>,
}

fn counters(trunk: &Trunk) -> Counters {
    let slot = trunk.slot_label();
    let c = |d| {
        trunk.ctx.metrics.counter(
            "wanrelay_stream_bytes_total",
            &[
                ("peer", trunk.peer_name()),
                ("trunk", &slot),
                ("direction", d),
            ],
        )
    };
    Counters {
        to_wan: c("to_wan"),
        from_wan: c("from_wan"),
    }
}

/// A spliced connection's entry in the registry of connections (for
/// kind-4 blast requests), removed when the splice ends.
struct Registration {
    streams: Arc<Streams>,
    addrs: Option<(SocketAddr, SocketAddr)>,
    blast: Arc<BlastSwitch>,
}

impl Registration {
    fn new(
        streams: Arc<Streams>,
        stream: &TrunkStream,
        sock: &TcpStream,
        blast: Arc<BlastSwitch>,
    ) -> Self {
        let addrs = sock.local_addr().ok().zip(sock.peer_addr().ok());
        if let Some((local, peer)) = addrs {
            streams.connections.register(
                local,
                peer,
                LiveConnection {
                    stream: stream.clone(),
                    blast: blast.clone(),
                },
            );
        }
        Registration {
            streams,
            addrs,
            blast,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some((local, peer)) = self.addrs {
            self.streams
                .connections
                .unregister(local, peer, &self.blast);
        }
    }
}

/// Splices `sock` with `stream` until both directions end or either
/// side resets. `reply`: `sock` is a shim connection awaiting the reply;
/// `initial`: bytes already read from `sock` (after the preamble);
/// `blasts`: whether and how its bulk data to the peer goes by RBUDP
/// ([`crate::transport::stream_policy`]), until a kind-4 blast request for
/// the connection changes it (the connection is registered in
/// `streams.connections` meanwhile).
pub async fn splice(
    streams: Arc<Streams>,
    stream: TrunkStream,
    mut sock: TcpStream,
    reply: bool,
    initial: Vec<u8>,
    blasts: Option<StreamBlast>,
) {
    let started = Instant::now();
    let c = counters(&stream.trunk);
    let sent = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let switch = Arc::new(BlastSwitch::new(blasts));
    let registration = Registration::new(streams, &stream, &sock, switch.clone());
    let outcome = {
        let (mut rd, mut wr) = sock.split();
        let up = to_wan(&stream, &mut rd, initial, &switch, &c.to_wan, &sent);
        let down = from_wan(&stream, &mut wr, reply, &c.from_wan, &received);
        both_ways(&stream.shared, up, down).await
    };
    drop(registration);
    let bytes = (sent.into_inner(), received.into_inner());
    match outcome {
        Ok(()) => closed(&stream, bytes, started),
        Err(Abort::Local(e)) => {
            stream.reset(Reason::ConnectionReset);
            let _ = sock.set_zero_linger();
            count_reset(&stream, "local");
            debug!(trunk = stream.trunk.id, stream = stream.id, error = %e, sent = bytes.0,
                   received = bytes.1, "local socket failed: stream reset");
        }
        Err(Abort::Ended) => ended(&stream, &mut sock, reply, bytes).await,
    }
    stream.close();
    drop(sock);
}

/// Runs both directions until both have finished, or either aborts, or
/// the stream is reset.
async fn both_ways(
    shared: &StreamShared,
    up: impl Future<Output = Result<(), Abort>>,
    down: impl Future<Output = Result<(), Abort>>,
) -> Result<(), Abort> {
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    loop {
        if up_done && down_done {
            break Ok(());
        }
        tokio::select! {
            r = &mut up, if !up_done => match r {
                Ok(()) => up_done = true,
                Err(a) => break Err(a),
            },
            r = &mut down, if !down_done => match r {
                Ok(()) => down_done = true,
                Err(a) => break Err(a),
            },
            _ = shared.ended.notified() => {
                if shared.reset_reason().is_some() {
                    break Err(Abort::Ended);
                }
            }
        }
    }
}

/// Both directions finished: counted and logged.
fn closed(stream: &TrunkStream, (sent, received): (u64, u64), started: Instant) {
    let trunk = &stream.trunk;
    let slot = trunk.slot_label();
    trunk.ctx.metrics.inc(
        "wanrelay_streams_closed_total",
        &[("peer", trunk.peer_name()), ("trunk", &slot)],
    );
    debug!(
        trunk = trunk.id,
        stream = stream.id,
        sent,
        received,
        secs = started.elapsed().as_secs_f64(),
        "stream closed"
    );
}

/// Counts a reset of an accepted stream, `by` whom.
fn count_reset(stream: &TrunkStream, by: &str) {
    let trunk = &stream.trunk;
    let slot = trunk.slot_label();
    trunk.ctx.metrics.inc(
        "wanrelay_streams_reset_total",
        &[("peer", trunk.peer_name()), ("trunk", &slot), ("by", by)],
    );
}

/// The stream was reset by the far side or lost with its trunk: a shim
/// still awaiting its reply gets the refusal's reason and a normal close;
/// any other socket is reset.
async fn ended(stream: &TrunkStream, sock: &mut TcpStream, reply: bool, bytes: (u64, u64)) {
    let trunk = &stream.trunk;
    let reason = stream.shared.reset_reason().unwrap_or(Reason::TrunkLost);
    if reply && !stream.shared.accepted.load(Ordering::Acquire) {
        // A refusal: the shim gets the reason and a normal close.
        trunk.ctx.metrics.inc(
            "wanrelay_streams_refused_total",
            &[
                ("peer", trunk.peer_name()),
                ("side", "out"),
                ("reason", reason_label(reason)),
            ],
        );
        info!(
            trunk = trunk.id,
            stream = stream.id,
            reason = reason_label(reason),
            "stream refused by the far side"
        );
        send_refusal(sock, reason).await;
    } else {
        let by = if reason == Reason::TrunkLost {
            "trunk_lost"
        } else {
            "peer"
        };
        count_reset(stream, by);
        debug!(
            trunk = trunk.id,
            stream = stream.id,
            reason = reason_label(reason),
            sent = bytes.0,
            received = bytes.1,
            "stream reset: resetting the local connection"
        );
        let _ = sock.set_zero_linger();
    }
}

async fn to_wan(
    stream: &TrunkStream,
    rd: &mut ReadHalf<'_>,
    initial: Vec<u8>,
    switch: &BlastSwitch,
    counter: &AtomicU64,
    total: &AtomicU64,
) -> Result<(), Abort> {
    // Streams that blast (crate::transport::stream_policy, or a kind-4
    // request since): bulk reads become blasts; `offset` counts the bytes
    // written to the trunk stream, where the next blast is inserted. Every
    // byte read before a blast has been written to the trunk (or blasted)
    // when the setting is checked, so it may change at any read.
    let mut offset: u64 = 0;
    let (mut version, mut bulk) = (0, switch.original());
    let mut out = initial;
    counter.fetch_add(out.len() as u64, Ordering::Relaxed);
    total.fetch_add(out.len() as u64, Ordering::Relaxed);
    let mut buf = vec![0u8; CHUNK];
    loop {
        write_stream(stream, &out, &mut offset).await?;
        out.clear();
        let n = match rd.read(&mut buf).await {
            Ok(0) => return finish_stream(stream),
            Ok(n) => n,
            Err(e) => return Err(Abort::Local(e)),
        };
        stream.trunk.ctx.traffic();
        counter.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
        switch.refresh(&mut version, &mut bulk);
        let Some(b) = bulk
            .as_ref()
            .filter(|_| n == CHUNK && stream.shared.accepted.load(Ordering::Acquire))
        else {
            out.extend_from_slice(&buf[..n]);
            continue;
        };
        // A full read: gather a blast.
        let mut blast = Vec::with_capacity(b.blast);
        blast.extend_from_slice(&buf[..n]);
        let mut eof = false;
        while blast.len() < b.blast {
            let room = (b.blast - blast.len()).min(CHUNK);
            match tokio::time::timeout(GATHER_WAIT, rd.read(&mut buf[..room])).await {
                Err(_) => break,
                Ok(Ok(0)) => {
                    eof = true;
                    break;
                }
                Ok(Ok(k)) => {
                    blast.extend_from_slice(&buf[..k]);
                    counter.fetch_add(k as u64, Ordering::Relaxed);
                    total.fetch_add(k as u64, Ordering::Relaxed);
                }
                Ok(Err(e)) => return Err(Abort::Local(e)),
            }
        }
        if blast.len() >= b.bulk_threshold {
            if let Err(back) = stream.send_bulk(offset, blast, b.params).await {
                out = back;
            }
        } else {
            out = blast;
        }
        if eof {
            write_stream(stream, &out, &mut offset).await?;
            return finish_stream(stream);
        }
    }
}

/// Writes all of `data` to the trunk stream (waiting for room).
async fn write_stream(stream: &TrunkStream, data: &[u8], offset: &mut u64) -> Result<(), Abort> {
    let mut pos = 0;
    while pos < data.len() {
        match stream.write(&data[pos..]) {
            Ok(0) => stream.shared.writable.notified().await,
            Ok(k) => {
                pos += k;
                *offset += k as u64;
            }
            Err(_) => return Err(Abort::Ended),
        }
    }
    Ok(())
}

/// EOF on the socket: FIN on the stream.
fn finish_stream(stream: &TrunkStream) -> Result<(), Abort> {
    stream.finish().map_err(|_| Abort::Ended)
}

async fn from_wan(
    stream: &TrunkStream,
    wr: &mut WriteHalf<'_>,
    reply: bool,
    counter: &AtomicU64,
    total: &AtomicU64,
) -> Result<(), Abort> {
    let shared = &stream.shared;
    if reply {
        while !shared.accepted.load(Ordering::Acquire) {
            if shared.reset_reason().is_some() {
                return Err(Abort::Ended);
            }
            shared.readable.notified().await;
        }
        wr.write_all(&Reply::Ok.encode())
            .await
            .map_err(Abort::Local)?;
    }
    let mut buf = vec![0u8; CHUNK];
    // Trunk bytes read so far: blasts (RBUDP peers) are spliced in at
    // their announced offsets.
    let mut tcp_read: u64 = 0;
    loop {
        match stream.receive(tcp_read, &mut buf) {
            Ok(Incoming::Blast(blast, data)) => {
                // A failed (or abandoned) write releases the blast with the
                // stream (TrunkStream::close).
                wr.write_all(&data).await.map_err(Abort::Local)?;
                let n = data.len() as u64;
                counter.fetch_add(n, Ordering::Relaxed);
                total.fetch_add(n, Ordering::Relaxed);
                drop(data);
                stream.release(blast, n);
            }
            Ok(Incoming::Read(ReadOutcome::Data(n))) => {
                tcp_read += n as u64;
                wr.write_all(&buf[..n]).await.map_err(Abort::Local)?;
                counter.fetch_add(n as u64, Ordering::Relaxed);
                total.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(Incoming::Read(ReadOutcome::Blocked)) => shared.readable.notified().await,
            Ok(Incoming::Read(ReadOutcome::Finished)) => {
                wr.shutdown().await.map_err(Abort::Local)?;
                return Ok(());
            }
            Err(_) => return Err(Abort::Ended),
        }
    }
}
