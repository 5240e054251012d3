//! The TCP trunk: the tasks that move a trunk's bytes between its socket
//! and its connection state machine ([`super::trunk`]).
//!
//! * the **reader** feeds socket bytes to `handle_input`;
//! * the **writer** takes `poll_transmit` output within the peer's pacer,
//!   writes it to the socket, runs the timers, and closes the connection
//!   when asked ([`Trunk::request_close`]);
//! * whoever changes the connection (a stream task, the reader, RBUDP)
//!   sends what it can at once ([`Trunk::kick`]) and leaves the rest to
//!   the writer.
//!
//! A trunk may run over several sockets in turn (session resumption):
//! each [`run`] is one socket's life, ended when the connection closes or
//! is suspended, or when [`Trunk::replace_transport`] hands the session to
//! a newer socket (its generation tells the old tasks to stop).
//!
//! A stream of a `tcp` peer travels in this connection only: its blast
//! requests are counted and ignored ([`ignore_blast_request`]), and so is
//! RBUDP control from such a peer ([`ignore_rbudp_control`]).

use std::sync::Arc;

use tokio::io::AsyncReadExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tracing::{debug, warn};
use wanproto::{BlastRequest, CloseCode, StreamId};

use super::trunk::{Placement, Trunk, TrunkInner, WRITE_CHUNK};

/// Read buffer of a trunk socket.
const READ_CHUNK: usize = 256 * 1024;

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

/// How one socket's run of a trunk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The connection is closed.
    Closed,
    /// The session is kept for a resumption on another socket.
    Suspended,
}

/// Runs a trunk over `sock` until the connection closes, is suspended, or
/// moves to a newer socket. `prefix`: bytes already read from `sock` (the
/// peer's HELLO, read to find the session it resumes).
pub async fn run(trunk: Arc<Trunk>, sock: TcpStream, prefix: Vec<u8>) -> Ended {
    let _ = sock.set_nodelay(true);
    super::socket_options::wan_retransmission(&sock);
    let (rd, wr) = sock.into_split();
    let wr = Arc::new(wr);
    let generation = {
        let mut g = trunk.lock();
        g.generation += 1;
        g.wr = Some(wr.clone());
        g.out.clear();
        g.out_pos = 0;
        if !prefix.is_empty() {
            let now = trunk.ctx.now();
            g.conn.handle_input(now, &prefix);
            trunk.dispatch(&mut g);
        }
        g.generation
    };
    let reader = tokio::spawn(read_loop(trunk.clone(), rd, generation));
    write_loop(&trunk, generation).await;
    let ended = {
        let mut g = trunk.lock();
        if g.generation == generation {
            g.wr = None;
        }
        if g.conn.is_closed() {
            Ended::Closed
        } else {
            Ended::Suspended
        }
    };
    if ended == Ended::Suspended {
        abort(&wr);
    }
    drop(wr);
    reader.abort();
    let _ = reader.await;
    ended
}

/// Makes the socket's close a reset rather than a FIN: the peer relay reads
/// a FIN as "this relay's process ended" and gives the session up, while a
/// reset (or silence) keeps it for the resumption that follows.
fn abort(wr: &OwnedWriteHalf) {
    let sock: &TcpStream = wr.as_ref();
    let _ = socket2::SockRef::from(sock).set_linger(Some(std::time::Duration::ZERO));
}

/// The reader: socket bytes into the connection, until EOF, an error, or
/// a newer socket.
async fn read_loop(trunk: Arc<Trunk>, mut rd: OwnedReadHalf, generation: u64) {
    let mut buf = vec![0u8; READ_CHUNK];
    loop {
        let r = rd.read(&mut buf).await;
        let mut g = trunk.lock();
        if g.generation != generation {
            return;
        }
        match r {
            Ok(n) if n > 0 => {
                let now = trunk.ctx.now();
                trunk.ctx.busy_poll.traffic(now);
                g.conn.handle_input(now, &buf[..n]);
                trunk.dispatch(&mut g);
                trunk.kick(&mut g);
            }
            other => {
                match other {
                    Err(e) => {
                        debug!(trunk = trunk.id, error = %e, "trunk read failed");
                        g.conn.handle_transport_closed();
                    }
                    // EOF: the peer relay's process closed its socket.
                    Ok(_) => g.conn.handle_transport_finished(),
                }
                trunk.dispatch(&mut g);
                drop(g);
                trunk.tx.notify_one();
                return;
            }
        }
    }
}

/// The writer: what stream tasks and the reader could not write at once
/// (socket full, pacer empty), and the timers, until the connection is
/// closed and its last bytes are out (or had their second to leave).
async fn write_loop(trunk: &Arc<Trunk>, generation: u64) {
    let mut linger_until: Option<u64> = None;
    loop {
        let (state, deadline, wr) = writer_turn(trunk, &mut linger_until, generation);
        let now = trunk.ctx.now();
        if state == Flush::Closed || (linger_until.is_some_and(|t| now >= t)) {
            break;
        }
        match state {
            Flush::Blocked => {
                let Some(wr) = wr else { break };
                tokio::select! {
                    _ = wr.writable() => {}
                    // A newer socket, or the session suspended.
                    _ = trunk.tx.notified() => {}
                    _ = trunk.ctx.sleep_until(deadline) => trunk.on_timer(),
                }
            }
            Flush::Paced(at) => {
                let at = deadline.map_or(at, |d| d.min(at));
                tokio::select! {
                    _ = trunk.tx.notified() => {}
                    _ = trunk.ctx.sleep_until(Some(at)) => trunk.on_timer(),
                }
            }
            // Let the other tasks (stream tasks, other trunks) run.
            Flush::More => tokio::task::yield_now().await,
            Flush::Idle | Flush::Closed => {
                tokio::select! {
                    _ = trunk.tx.notified() => {}
                    _ = trunk.ctx.sleep_until(deadline) => trunk.on_timer(),
                }
            }
        }
    }
}

/// One turn of the writer under the lock: a requested close, then a flush.
/// Returns what the flush left, the next deadline, and the socket.
fn writer_turn(
    trunk: &Arc<Trunk>,
    linger_until: &mut Option<u64>,
    generation: u64,
) -> (Flush, Option<u64>, Option<Arc<OwnedWriteHalf>>) {
    let mut g = trunk.lock();
    if g.generation != generation {
        return (Flush::Closed, None, None);
    }
    if let Some(code) = trunk.take_close_request() {
        if code == CloseCode::NoError {
            g.conn.go_away();
        } else {
            g.conn.close(code);
        }
        trunk.dispatch(&mut g);
    }
    if !g.conn.has_transport() && !g.conn.is_closed() {
        // Suspended: this socket is done.
        return (Flush::Closed, None, None);
    }
    let state = trunk.flush(&mut g, 4 * WRITE_CHUNK);
    let mut deadline = g.conn.poll_timeout();
    if g.conn.is_closed() {
        // The last bytes (GOAWAY) get a second to leave.
        let until = *linger_until.get_or_insert(trunk.ctx.now() + 1_000_000_000);
        deadline = Some(until);
    }
    (state, deadline, g.wr.clone())
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
                let now = self.ctx.now();
                let pacer = self.placement.get().and_then(|p| self.ctx.pacer(p.peer));
                let avail = match pacer {
                    Some(p) => {
                        // Below one full DATA frame, wait rather than send slivers.
                        let frame = self.ctx.config.trunk.max_data_frame as u64 + 10;
                        let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                        match p.available(now) {
                            a if a < frame => {
                                // Wake when half the bucket is there: timers
                                // round up to the millisecond, and tokens that
                                // accrue while we oversleep are kept as long
                                // as the bucket is not full.
                                let pc = &self.ctx.config.peers
                                    [self.placement.get().map_or(0, |p| p.peer)];
                                let want = (pc.pacing_burst / 2).max(frame);
                                if !g.conn.has_transport() {
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
                    return if g.conn.has_transport() {
                        Flush::Idle
                    } else {
                        Flush::Closed
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
        let now = self.ctx.now();
        g.conn.handle_timeout(now);
        self.dispatch(&mut g);
    }
}

/// A stream to a peer with `transport = "tcp"` stays on the trunk: a
/// blast request for it (`side`: as for [`super::stream_policy`]) is
/// counted with outcome `no_rbudp` and ignored, the first one per peer
/// logged at warn.
pub fn ignore_blast_request(
    trunk: &Trunk,
    p: Placement,
    stream: StreamId,
    request: Option<BlastRequest>,
    side: &str,
) {
    if request.is_none() {
        return;
    }
    let ctx = &trunk.ctx;
    let pc = &ctx.config.peers[p.peer];
    ctx.metrics.inc(
        "wanrelay_rbudp_requests_total",
        &[("peer", &pc.name), ("side", side), ("outcome", "no_rbudp")],
    );
    if ctx.first_ignored_request(p.peer) {
        warn!(trunk = trunk.id, peer = %pc.name, stream,
              "blast requests to this peer are ignored: it is configured with transport = \"tcp\" (streams stay on the trunk; counted in wanrelay_rbudp_requests_total)");
    }
}

/// RBUDP control from a peer this relay has no RBUDP session with (it is
/// configured here with transport tcp): counted and ignored.
pub fn ignore_rbudp_control(trunk: &Trunk) {
    trunk.ctx.metrics.inc(
        "wanrelay_rbudp_control_ignored_total",
        &[("peer", trunk.peer_name())],
    );
    debug!(
        trunk = trunk.id,
        "RBUDP control message from a peer this relay reaches by tcp: ignored"
    );
}
