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

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tracing::{debug, info};
use wanproto::{Preamble, ReadOutcome, Reason, Reply, StreamId};

use crate::rbudp::{BlastSwitch, StreamBlast};
use crate::reason_label;
use crate::relay::{LiveConnection, Relay};
use crate::trunk::{StreamShared, Trunk};

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
        trunk.relay.metrics.counter(
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

/// A spliced connection's entry in the relay's registry (for kind-4 blast
/// requests), removed when the splice ends.
struct Registration {
    relay: Arc<Relay>,
    addrs: Option<(SocketAddr, SocketAddr)>,
    blast: Arc<BlastSwitch>,
}

impl Registration {
    fn new(trunk: &Arc<Trunk>, id: StreamId, sock: &TcpStream, blast: Arc<BlastSwitch>) -> Self {
        let addrs = sock.local_addr().ok().zip(sock.peer_addr().ok());
        if let Some((local, peer)) = addrs {
            trunk.relay.register_connection(
                local,
                peer,
                LiveConnection {
                    trunk: trunk.clone(),
                    stream: id,
                    blast: blast.clone(),
                },
            );
        }
        Registration {
            relay: trunk.relay.clone(),
            addrs,
            blast,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some((local, peer)) = self.addrs {
            self.relay.unregister_connection(local, peer, &self.blast);
        }
    }
}

/// Splices `sock` with stream `id` until both directions end or either
/// side resets. `reply`: `sock` is a shim connection awaiting the reply;
/// `initial`: bytes already read from `sock` (after the preamble);
/// `blasts`: whether and how its bulk data to the peer goes by RBUDP
/// ([`crate::rbudp::stream_policy`]), until a kind-4 blast request for
/// the connection changes it (the connection is registered with the
/// relay meanwhile).
pub async fn splice(
    trunk: Arc<Trunk>,
    id: StreamId,
    shared: Arc<StreamShared>,
    mut sock: TcpStream,
    reply: bool,
    initial: Vec<u8>,
    blasts: Option<StreamBlast>,
) {
    let started = Instant::now();
    let c = counters(&trunk);
    let sent = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let switch = Arc::new(BlastSwitch::new(blasts));
    let registration = Registration::new(&trunk, id, &sock, switch.clone());
    let outcome = {
        let (mut rd, mut wr) = sock.split();
        let up = to_wan(
            &trunk, id, &shared, &mut rd, initial, &switch, &c.to_wan, &sent,
        );
        let down = from_wan(&trunk, id, &shared, &mut wr, reply, &c.from_wan, &received);
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
    };
    drop(registration);
    let relay = &trunk.relay;
    let slot = trunk.slot_label();
    let peer = trunk.peer_name();
    let (sent, received) = (sent.into_inner(), received.into_inner());
    match outcome {
        Ok(()) => {
            relay.metrics.inc(
                "wanrelay_streams_closed_total",
                &[("peer", peer), ("trunk", &slot)],
            );
            debug!(
                trunk = trunk.id,
                stream = id,
                sent,
                received,
                secs = started.elapsed().as_secs_f64(),
                "stream closed"
            );
        }
        Err(Abort::Local(e)) => {
            {
                let mut g = trunk.lock();
                let _ = g.conn.reset_stream(id, Reason::ConnectionReset);
                g.streams.remove(&id);
                trunk.dispatch(&mut g);
                trunk.kick(&mut g);
            }
            let _ = sock.set_zero_linger();
            relay.metrics.inc(
                "wanrelay_streams_reset_total",
                &[("peer", peer), ("trunk", &slot), ("by", "local")],
            );
            debug!(trunk = trunk.id, stream = id, error = %e, sent, received, "local socket failed: stream reset");
        }
        Err(Abort::Ended) => {
            let reason = shared.reset_reason().unwrap_or(Reason::TrunkLost);
            if reply && !shared.accepted.load(Ordering::Acquire) {
                // A refusal: the shim gets the reason and a normal close.
                relay.metrics.inc(
                    "wanrelay_streams_refused_total",
                    &[
                        ("peer", peer),
                        ("side", "out"),
                        ("reason", reason_label(reason)),
                    ],
                );
                info!(
                    trunk = trunk.id,
                    stream = id,
                    reason = reason_label(reason),
                    "stream refused by the far side"
                );
                crate::inside::send_refusal(&mut sock, reason).await;
            } else {
                let by = if reason == Reason::TrunkLost {
                    "trunk_lost"
                } else {
                    "peer"
                };
                relay.metrics.inc(
                    "wanrelay_streams_reset_total",
                    &[("peer", peer), ("trunk", &slot), ("by", by)],
                );
                debug!(
                    trunk = trunk.id,
                    stream = id,
                    reason = reason_label(reason),
                    sent,
                    received,
                    "stream reset: resetting the local connection"
                );
                let _ = sock.set_zero_linger();
            }
        }
    }
    {
        let mut g = trunk.lock();
        g.streams.remove(&id);
        crate::rbudp::forget_stream(&trunk, &mut g, id);
    }
    drop(sock);
}

#[allow(clippy::too_many_arguments)]
async fn to_wan(
    trunk: &Arc<Trunk>,
    id: StreamId,
    shared: &StreamShared,
    rd: &mut tokio::net::tcp::ReadHalf<'_>,
    initial: Vec<u8>,
    switch: &BlastSwitch,
    counter: &AtomicU64,
    total: &AtomicU64,
) -> Result<(), Abort> {
    // Streams that blast (crate::rbudp::stream_policy, or a kind-4 request
    // since): bulk reads become blasts; `offset` counts the bytes written
    // to the trunk stream, where the next blast is inserted. Every byte
    // read before a blast has been written to the trunk (or blasted) when
    // the setting is checked, so it may change at any read.
    let mut offset: u64 = 0;
    let (mut version, mut bulk) = (0, switch.original());
    let mut out = initial;
    counter.fetch_add(out.len() as u64, Ordering::Relaxed);
    total.fetch_add(out.len() as u64, Ordering::Relaxed);
    let mut buf = vec![0u8; CHUNK];
    loop {
        write_stream(trunk, id, shared, &out, &mut offset).await?;
        out.clear();
        let n = match rd.read(&mut buf).await {
            Ok(0) => return finish_stream(trunk, id),
            Ok(n) => n,
            Err(e) => return Err(Abort::Local(e)),
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
        total.fetch_add(n as u64, Ordering::Relaxed);
        switch.refresh(&mut version, &mut bulk);
        let Some(b) = bulk
            .as_ref()
            .filter(|_| n == CHUNK && shared.accepted.load(Ordering::Acquire))
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
            match tokio::time::timeout(crate::rbudp::GATHER_WAIT, rd.read(&mut buf[..room])).await {
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
            if let Err(back) = crate::rbudp::send_blast(trunk, id, offset, blast, b.params).await {
                out = back;
            }
        } else {
            out = blast;
        }
        if eof {
            write_stream(trunk, id, shared, &out, &mut offset).await?;
            return finish_stream(trunk, id);
        }
    }
}

/// Writes all of `data` to the trunk stream (waiting for room).
async fn write_stream(
    trunk: &Arc<Trunk>,
    id: StreamId,
    shared: &StreamShared,
    data: &[u8],
    offset: &mut u64,
) -> Result<(), Abort> {
    let mut pos = 0;
    while pos < data.len() {
        let took = {
            let mut g = trunk.lock();
            let r = g.conn.write(id, &data[pos..]);
            trunk.dispatch(&mut g);
            trunk.kick(&mut g);
            r
        };
        match took {
            Ok(0) => shared.writable.notified().await,
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
fn finish_stream(trunk: &Arc<Trunk>, id: StreamId) -> Result<(), Abort> {
    let mut g = trunk.lock();
    let r = g.conn.finish(id);
    trunk.dispatch(&mut g);
    trunk.kick(&mut g);
    r.map_err(|_| Abort::Ended)
}

async fn from_wan(
    trunk: &Arc<Trunk>,
    id: StreamId,
    shared: &StreamShared,
    wr: &mut tokio::net::tcp::WriteHalf<'_>,
    reply: bool,
    counter: &AtomicU64,
    total: &AtomicU64,
) -> Result<(), Abort> {
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
        let r = {
            let mut g = trunk.lock();
            match crate::rbudp::next(&mut g, id, tcp_read) {
                crate::rbudp::Next::Blast(blast, data) => Ok(Err((blast, data))),
                crate::rbudp::Next::Wait => Ok(Ok(ReadOutcome::Blocked)),
                crate::rbudp::Next::Read(limit) => {
                    let cap = limit.map_or(CHUNK, |l| l.min(CHUNK as u64) as usize);
                    let r = g.conn.read(id, &mut buf[..cap]);
                    trunk.dispatch(&mut g);
                    trunk.kick(&mut g);
                    r.map(Ok)
                }
            }
        };
        match r {
            Ok(Err((blast, data))) => {
                // A failed (or abandoned) write releases the blast with the
                // stream (crate::rbudp::forget_stream).
                wr.write_all(&data).await.map_err(Abort::Local)?;
                let n = data.len() as u64;
                counter.fetch_add(n, Ordering::Relaxed);
                total.fetch_add(n, Ordering::Relaxed);
                drop(data);
                let mut g = trunk.lock();
                crate::rbudp::release(trunk, &mut g, id, blast, n);
            }
            Ok(Ok(ReadOutcome::Data(n))) => {
                tcp_read += n as u64;
                wr.write_all(&buf[..n]).await.map_err(Abort::Local)?;
                counter.fetch_add(n as u64, Ordering::Relaxed);
                total.fetch_add(n as u64, Ordering::Relaxed);
            }
            Ok(Ok(ReadOutcome::Blocked)) => shared.readable.notified().await,
            Ok(Ok(ReadOutcome::Finished)) => {
                wr.shutdown().await.map_err(Abort::Local)?;
                return Ok(());
            }
            Err(_) => return Err(Abort::Ended),
        }
    }
}

/// The far side of a stream the peer opened to `destination` (a member
/// node, checked by the caller): connect, write the delivery preamble,
/// accept the stream, splice (`blasts`: as for [`splice`]). A failure
/// resets the stream with its reason.
pub async fn deliver(
    trunk: Arc<Trunk>,
    id: StreamId,
    shared: Arc<StreamShared>,
    destination: SocketAddr,
    source: SocketAddr,
    blasts: Option<StreamBlast>,
) {
    let relay = trunk.relay.clone();
    let connect = async {
        let sock = connect_node(destination, relay.config.inside_bind).await?;
        let _ = sock.set_nodelay(true);
        let mut sock = sock;
        sock.write_all(&Preamble::deliver(destination, source).encode())
            .await?;
        Ok::<TcpStream, std::io::Error>(sock)
    };
    let result = tokio::select! {
        r = tokio::time::timeout(relay.config.node_connect_timeout, connect) => r,
        _ = shared.ended.notified() => {
            debug!(trunk = trunk.id, stream = id, "stream reset while connecting");
            trunk.lock().streams.remove(&id);
            return;
        }
    };
    let refuse = |reason: Reason, why: String| {
        {
            let mut g = trunk.lock();
            let _ = g.conn.reset_stream(id, reason);
            g.streams.remove(&id);
            trunk.dispatch(&mut g);
            trunk.kick(&mut g);
        }
        relay.metrics.inc(
            "wanrelay_streams_refused_total",
            &[
                ("peer", trunk.peer_name()),
                ("side", "in"),
                ("reason", reason_label(reason)),
            ],
        );
        info!(trunk = trunk.id, stream = id, %destination, %source, reason = reason_label(reason), why,
              "cannot connect to the destination: stream refused");
    };
    let sock = match result {
        Err(_) => return refuse(Reason::TimedOut, "connect timed out".into()),
        Ok(Err(e)) => return refuse(connect_reason(&e), e.to_string()),
        Ok(Ok(s)) => s,
    };
    let accepted = {
        let mut g = trunk.lock();
        let r = g.conn.accept_stream(id);
        trunk.dispatch(&mut g);
        trunk.kick(&mut g);
        r
    };
    if accepted.is_err() {
        // Reset or trunk lost while connecting.
        let _ = sock.set_zero_linger();
        trunk.lock().streams.remove(&id);
        return;
    }
    // Accepted: this side may send blasts too.
    shared.accepted.store(true, Ordering::Release);
    debug!(trunk = trunk.id, stream = id, %destination, %source, "connected to the destination");
    splice(trunk, id, shared, sock, false, Vec::new(), blasts).await;
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
