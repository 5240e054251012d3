//! The transports a trunk carries its streams over, behind one interface.
//!
//! A stream's bytes go to the peer in one of two ways, chosen per peer
//! (`transport`) and per stream (`rbudp_streams`, blast requests):
//!
//! * **TCP** ([`tcp`]): in the stream's frames on the trunk's TCP
//!   connection, every byte;
//! * **RBUDP** ([`rbudp`]): bulk reads as blasts over UDP, each announced
//!   in the stream at its offset; the rest, and every control message, on
//!   the trunk as before.
//!
//! The streams layer ([`crate::streams`]) uses only this file: a
//! [`TrunkStream`] opens, writes, reads, finishes and resets a stream,
//! sends bulk data ([`TrunkStream::send_bulk`]: a blast, or the bytes back
//! when they must go over the trunk) and receives it in order
//! ([`TrunkStream::receive`]: trunk bytes, or a blast at its offset).
//! [`stream_policy`] decides whether a stream blasts, asking the peer's
//! transport. The relay above calls [`start`], [`on_rbudp_control`] and
//! [`stop`] as its trunks authenticate, get RBUDP control and close.
//!
//! Below this file, each using only those after it:
//!
//! * [`trunks`]: the trunk slots of every peer, routes, selection;
//! * [`rbudp`]: the RBUDP implementation (on top of the TCP trunk, its
//!   control channel);
//! * [`tcp`]: the TCP trunk's I/O (reader, writer, pacing, timers) and a
//!   tcp peer's answer to RBUDP requests (ignored);
//! * [`trunk`]: a trunk's state, its stream signals, its events and
//!   [`trunk::TrunkEvents`], through which the relay above answers them;
//!   the RBUDP state it holds is [`rbudp::link`], which uses nothing here;
//! * [`blast`]: a stream's blast setting.

pub mod blast;
pub mod rbudp;
pub mod socket_options;
pub mod tcp;
pub mod trunk;
pub mod trunks;

use std::net::SocketAddr;
use std::sync::Arc;

use wanproto::rbudp::BlastParams;
use wanproto::{BlastRequest, OpenError, ReadOutcome, Reason, StreamError, StreamId};

use self::blast::{BlastSwitch, StreamBlast};
use self::rbudp::session::{self as rbudp_session, Next};
use self::rbudp::stats::ClosedSessions;
use self::rbudp::udp::{self as rbudp_udp, UdpPath};
use self::trunk::{StreamShared, Trunk, TrunkInner};

/// One stream of a trunk, with the signals its task waits on.
#[derive(Clone)]
pub struct TrunkStream {
    /// The trunk.
    pub trunk: Arc<Trunk>,
    /// The stream's id on it.
    pub id: StreamId,
    /// Its signals.
    pub shared: Arc<StreamShared>,
}

/// What a stream's receiving side got from [`TrunkStream::receive`].
pub enum Incoming {
    /// A blast, the stream's next bytes: write them, then
    /// [`TrunkStream::release`] it.
    Blast(u32, Vec<u8>),
    /// What reading the trunk stream gave (`Blocked` too while the next
    /// bytes are a blast still arriving).
    Read(ReadOutcome),
}

impl TrunkStream {
    /// Opens a stream from `source` to `destination` on `trunk` (with the
    /// ranks' blast `request`, if any); returns it with its blast setting
    /// for the data this relay sends ([`stream_policy`], side "out").
    ///
    /// # Errors
    /// The trunk cannot open a stream now ([`OpenError`]).
    pub fn open(
        trunk: &Arc<Trunk>,
        destination: SocketAddr,
        source: SocketAddr,
        request: Option<BlastRequest>,
    ) -> Result<(TrunkStream, Option<StreamBlast>), OpenError> {
        let mut g = trunk.lock();
        let id = g
            .conn
            .open_stream_with_blast(destination, source, request)?;
        let shared = Arc::new(StreamShared::default());
        g.streams.insert(id, shared.clone());
        let blasts = stream_policy(trunk, &g, id, request, "out");
        trunk.dispatch(&mut g);
        trunk.kick(&mut g);
        let stream = TrunkStream {
            trunk: trunk.clone(),
            id,
            shared,
        };
        Ok((stream, blasts))
    }

    /// Attaches a task to stream `id` the peer opened, with new signals
    /// (called with the trunk's lock held).
    pub fn attach(trunk: &Arc<Trunk>, g: &mut TrunkInner, id: StreamId) -> TrunkStream {
        let shared = Arc::new(StreamShared::default());
        g.streams.insert(id, shared.clone());
        TrunkStream {
            trunk: trunk.clone(),
            id,
            shared,
        }
    }

    /// Runs `f` on the connection, then acts on its events and sends what
    /// it queued.
    fn with_conn<R>(&self, f: impl FnOnce(&mut TrunkInner) -> R) -> R {
        let mut g = self.trunk.lock();
        let r = f(&mut g);
        self.trunk.dispatch(&mut g);
        self.trunk.kick(&mut g);
        r
    }

    /// Accepts the stream (the peer opened it; its destination answered).
    ///
    /// # Errors
    /// The stream was reset or lost with its trunk meanwhile.
    pub fn accept(&self) -> Result<(), StreamError> {
        self.with_conn(|g| g.conn.accept_stream(self.id))
    }

    /// Writes what fits of `data` to the stream; 0 when its send buffer is
    /// full (wait for `writable`).
    ///
    /// # Errors
    /// The stream was reset or lost with its trunk.
    pub fn write(&self, data: &[u8]) -> Result<usize, StreamError> {
        self.with_conn(|g| g.conn.write(self.id, data))
    }

    /// Finishes the stream (FIN: no more bytes from this side).
    ///
    /// # Errors
    /// The stream was reset or lost with its trunk.
    pub fn finish(&self) -> Result<(), StreamError> {
        self.with_conn(|g| g.conn.finish(self.id))
    }

    /// Resets the stream with `reason` and detaches its task.
    pub fn reset(&self, reason: Reason) {
        self.with_conn(|g| {
            let _ = g.conn.reset_stream(self.id, reason);
            g.streams.remove(&self.id);
        });
    }

    /// Detaches the stream's task (the stream already ended).
    pub fn detach(&self) {
        self.trunk.lock().streams.remove(&self.id);
    }

    /// Detaches the stream's task at its end, and discards the blasts still
    /// waiting to be spliced into it.
    pub fn close(&self) {
        let mut g = self.trunk.lock();
        g.streams.remove(&self.id);
        rbudp_session::forget_stream(&self.trunk, &mut g, self.id);
    }

    /// The stream's next bytes after `tcp_read` trunk bytes: a blast whose
    /// offset is reached, or what reading the trunk (at most up to the
    /// next blast's offset) gave into `buf`.
    ///
    /// # Errors
    /// The stream was reset or lost with its trunk.
    pub fn receive(&self, tcp_read: u64, buf: &mut [u8]) -> Result<Incoming, StreamError> {
        let mut g = self.trunk.lock();
        match rbudp_session::next(&mut g, self.id, tcp_read) {
            Next::Blast(blast, data) => Ok(Incoming::Blast(blast, data)),
            Next::Wait => Ok(Incoming::Read(ReadOutcome::Blocked)),
            Next::Read(limit) => {
                let cap = limit.map_or(buf.len(), |l| l.min(buf.len() as u64) as usize);
                let r = g.conn.read(self.id, &mut buf[..cap]);
                self.trunk.dispatch(&mut g);
                self.trunk.kick(&mut g);
                r.map(Incoming::Read)
            }
        }
    }

    /// Blast `blast` (`len` bytes) was written to the destination: frees
    /// its place in the window.
    pub fn release(&self, blast: u32, len: u64) {
        let mut g = self.trunk.lock();
        rbudp_session::release(&self.trunk, &mut g, self.id, blast, len);
    }

    /// Sends bulk `data` as one blast inserted after `offset` trunk bytes
    /// of the stream, waiting while the peer's window is full and this
    /// stream has blasts in flight.
    ///
    /// # Errors
    /// The bytes back, when they must go over the trunk instead (no RBUDP
    /// session, not ready, or window full with nothing of this stream in
    /// flight).
    pub async fn send_bulk(
        &self,
        offset: u64,
        data: Vec<u8>,
        params: BlastParams,
    ) -> Result<(), Vec<u8>> {
        rbudp_session::send_blast(&self.trunk, self.id, offset, data, params).await
    }

    /// A blast request for this open connection (kind 4): `Some` sets its
    /// setting as a kind-3 request would have ([`stream_policy`], counted
    /// with `side` "update"), `None` withdraws it (back to what the stream
    /// opened with; counted `withdrawn`). Returns the setting now in force.
    pub fn update_blast(
        &self,
        switch: &BlastSwitch,
        request: Option<BlastRequest>,
    ) -> Option<StreamBlast> {
        let trunk = &self.trunk;
        let setting = match request {
            Some(r) => stream_policy(trunk, &trunk.lock(), self.id, Some(r), "update"),
            None => {
                trunk.ctx.metrics.inc(
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
    let p = *trunk.placement.get()?;
    match trunk.ctx.config.peers[p.peer].rbudp.as_ref() {
        None => {
            tcp::ignore_blast_request(trunk, p, stream, request, side);
            None
        }
        Some(s) => rbudp::policy::stream_policy(trunk, g, p, s, stream, request, side),
    }
}

/// Starts what the transport of a trunk that just authenticated needs: an
/// RBUDP session for an rbudp peer (`udp`: the relay's socket, if running).
pub fn start(trunk: &Arc<Trunk>, g: &mut TrunkInner, udp: Option<&Arc<UdpPath>>) {
    rbudp_udp::start(trunk, g, udp);
}

/// An RBUDP control message from the peer: for the trunk's RBUDP session,
/// or ignored (and counted) without one.
pub fn on_rbudp_control(trunk: &Arc<Trunk>, g: &mut TrunkInner, message: &[u8]) {
    if g.rbudp.is_some() {
        rbudp_session::on_control(trunk, g, message);
    } else {
        tcp::ignore_rbudp_control(trunk);
    }
}

/// Ends the RBUDP session of a closed trunk, if it has one (its counters
/// go to `closed`).
pub fn stop(
    trunk: &Arc<Trunk>,
    g: &mut TrunkInner,
    udp: Option<&Arc<UdpPath>>,
    closed: &ClosedSessions,
) {
    rbudp_udp::stop(trunk, g, udp, closed);
}
