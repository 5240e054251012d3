//! One trunk: a TCP connection to a peer relay driven through a
//! [`TrunkConnection`], and the state its tasks share.
//!
//! The connection state machine sits behind a mutex that is never held
//! across an `.await`. Three kinds of tasks call into it:
//!
//! * the trunk's **reader** feeds socket bytes to `handle_input`, and its
//!   **writer** takes `poll_transmit` output (within the peer's pacer),
//!   writes it to the socket, and runs the timers ([`super::tcp`]);
//! * every **stream task** (one per spliced TCP connection, see
//!   [`crate::streams`]) writes, reads, finishes or resets its stream
//!   through [`super::TrunkStream`];
//! * the RBUDP tasks of a trunk to an rbudp peer ([`super::rbudp`]).
//!
//! After each call the caller drains the events ([`Trunk::dispatch`]) and
//! wakes whoever must act: a stream task through its [`StreamShared`]
//! signals, the writer through `tx`. What the trunk cannot decide alone
//! (who the authenticated peer is, whether to accept a stream the peer
//! opened, RBUDP control, the end of the connection) goes to the relay
//! above through [`TrunkEvents`].
//!
//! Lock order: a trunk's lock may be held while taking a peer's slot list
//! or pacer lock, never the other way round (routing takes a snapshot of
//! the slots first).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tracing::info;
use wanproto::{
    BlastRequest, CloseCode, ConnectionError, Event, PeerInfo, Reason, StreamId, TrunkConnection,
};

use super::rbudp::link::RbudpLink;
use crate::shared::context::Context;

/// Largest write to a trunk socket at once.
pub const WRITE_CHUNK: usize = 256 * 1024;

/// Signals between a trunk and the task splicing one of its streams.
#[derive(Default)]
pub struct StreamShared {
    /// Data, the FIN, or the accept arrived.
    pub readable: Notify,
    /// The stream's send buffer has room again.
    pub writable: Notify,
    /// The stream was reset, refused or lost with its trunk.
    pub ended: Notify,
    /// The far relay accepted the stream (streams opened here).
    pub accepted: AtomicBool,
    /// Reason code of the reset, 0 while alive.
    pub reset: AtomicU8,
}

impl StreamShared {
    /// The reset reason, if the stream was reset.
    pub fn reset_reason(&self) -> Option<Reason> {
        Reason::from_code(self.reset.load(Ordering::Acquire))
    }

    fn end(&self, reason: Reason) {
        self.reset.store(reason.code(), Ordering::Release);
        self.ended.notify_one();
        self.readable.notify_one();
        self.writable.notify_one();
    }
}

/// Where a trunk stands among the relay's peers once authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Index of the peer in the configuration.
    pub peer: usize,
    /// Trunk slot of that peer (0..trunks).
    pub slot: usize,
}

/// How the trunk came about.
#[derive(Clone, Copy, Debug)]
pub enum Origin {
    /// This relay connected, for the given peer slot.
    Dialed(Placement),
    /// The peer connected to the outside listener.
    Accepted,
}

/// A stream the peer opened ([`Event::StreamOpened`]).
#[derive(Clone, Copy, Debug)]
pub struct OpenedStream {
    /// Its id.
    pub stream: StreamId,
    /// Where to connect (a member node, if the relay accepts it).
    pub destination: SocketAddr,
    /// The original source, for the delivery preamble.
    pub source: SocketAddr,
    /// The ranks' blast request its OPEN carried, if any.
    pub request: Option<BlastRequest>,
}

/// What the relay above a trunk decides when the trunk's connection
/// reports it; called by [`Trunk::dispatch`] with the trunk's lock held.
pub trait TrunkEvents: Send + Sync {
    /// The peer proved the key: place the trunk among the relay's peers
    /// (or close it), start what the peer's transport needs.
    fn authenticated(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, peer: PeerInfo);
    /// The peer opened a stream: accept it (and connect to its
    /// destination) or refuse it.
    fn stream_opened(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, open: OpenedStream);
    /// An RBUDP control message from the peer.
    fn rbudp_control(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, message: &[u8]);
    /// The connection closed (`error` says why; `None`: gracefully). The
    /// trunk's streams are still attached ([`Trunk::end_streams`]).
    fn closed(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, error: Option<ConnectionError>);
    /// The transport was lost; the session waits for a resumption.
    fn suspended(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, error: &ConnectionError);
    /// The session resumed on a new transport (`replayed` bytes sent again).
    fn resumed(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, replayed: u64);
}

/// The mutable part of a trunk.
pub struct TrunkInner {
    /// The protocol state machine.
    pub conn: TrunkConnection,
    /// Streams with a task attached, by id.
    pub streams: HashMap<StreamId, Arc<StreamShared>>,
    /// The socket's sending half (until the trunk ends).
    pub(super) wr: Option<Arc<OwnedWriteHalf>>,
    /// RBUDP session (peers with `transport = "rbudp"`, once authenticated).
    pub rbudp: Option<RbudpLink>,
    /// Bytes taken from the connection and not yet written, from `out_pos`.
    pub(super) out: Vec<u8>,
    pub(super) out_pos: usize,
    /// Which socket's tasks may drive the connection (one per [`super::tcp::run`]).
    pub(super) generation: u64,
}

/// A socket the peer connected to resume this trunk's session, with the
/// bytes already read from it (its HELLO).
pub type Offer = (TcpStream, Vec<u8>);

/// One trunk connection to a peer relay.
pub struct Trunk {
    /// The relay's context.
    pub ctx: Arc<Context>,
    /// Who decides what the trunk cannot.
    events: Arc<dyn TrunkEvents>,
    /// Unique id for logs.
    pub id: u64,
    /// The peer's socket address.
    pub remote: SocketAddr,
    /// How it was made.
    pub origin: Origin,
    /// Set once authenticated and registered.
    pub placement: OnceLock<Placement>,
    /// When it was registered.
    pub registered_at: OnceLock<Instant>,
    inner: Mutex<TrunkInner>,
    /// Wakes the writer.
    pub tx: Notify,
    /// Wakes the RBUDP blaster (new blast, report, session change).
    pub rbudp_wake: Notify,
    /// The peer released a blast (window free again).
    pub rbudp_window: Notify,
    /// Asks the writer to close (replaced by a newer trunk, or shutdown).
    close_request: Mutex<Option<CloseCode>>,
    handshake_permit: Mutex<Option<OwnedSemaphorePermit>>,
    /// A resuming socket from the outside listener, for the trunk's task.
    offer: Mutex<Option<Offer>>,
    /// Wakes the trunk's task: a socket was offered.
    pub offered: Notify,
}

impl Trunk {
    /// A trunk around a fresh connection state machine; `events` decides
    /// what the trunk cannot.
    pub fn new(
        ctx: Arc<Context>,
        events: Arc<dyn TrunkEvents>,
        id: u64,
        remote: SocketAddr,
        origin: Origin,
        conn: TrunkConnection,
    ) -> Arc<Trunk> {
        Arc::new(Trunk {
            ctx,
            events,
            id,
            remote,
            origin,
            placement: OnceLock::new(),
            registered_at: OnceLock::new(),
            inner: Mutex::new(TrunkInner {
                conn,
                streams: HashMap::new(),
                wr: None,
                rbudp: None,
                out: Vec::with_capacity(WRITE_CHUNK + 1024),
                out_pos: 0,
                generation: 0,
            }),
            tx: Notify::new(),
            rbudp_wake: Notify::new(),
            rbudp_window: Notify::new(),
            close_request: Mutex::new(None),
            handshake_permit: Mutex::new(None),
            offer: Mutex::new(None),
            offered: Notify::new(),
        })
    }

    /// Locks the state machine (a poisoned lock is taken over: the state
    /// machine never panics on peer input, and a relay must keep going).
    pub fn lock(&self) -> MutexGuard<'_, TrunkInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Peer name for logs and labels ("?" before authentication).
    pub fn peer_name(&self) -> &str {
        match self.placement.get() {
            Some(p) => &self.ctx.config.peers[p.peer].name,
            None => "?",
        }
    }

    /// Slot label ("?" before authentication).
    pub fn slot_label(&self) -> String {
        self.placement
            .get()
            .map_or_else(|| "?".into(), |p| p.slot.to_string())
    }

    /// Holds `permit` until the handshake ends (authenticated or closed).
    pub fn hold_handshake_permit(&self, permit: OwnedSemaphorePermit) {
        *self
            .handshake_permit
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(permit);
    }

    fn release_handshake_permit(&self) {
        self.handshake_permit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// Asks the writer to close the connection with `code` (immediately),
    /// or to start a graceful GOAWAY with `CloseCode::NoError`.
    pub fn request_close(&self, code: CloseCode) {
        *self.close_request.lock().unwrap_or_else(|e| e.into_inner()) = Some(code);
        self.tx.notify_one();
    }

    /// The close [`Trunk::request_close`] asked for, if any (taken).
    pub fn take_close_request(&self) -> Option<CloseCode> {
        self.close_request
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Hands the session to a socket the peer connected to resume it: the
    /// socket in use (if any) is given up at once, and the trunk's task
    /// resumes on the new one. A newer offer replaces an older one.
    pub fn replace_transport(&self, offer: Offer) {
        *self.offer.lock().unwrap_or_else(|e| e.into_inner()) = Some(offer);
        {
            let mut g = self.lock();
            g.generation += 1;
            g.wr = None;
            g.out.clear();
            g.out_pos = 0;
        }
        self.tx.notify_one();
        self.offered.notify_one();
    }

    /// The socket offered for a resumption, if any (taken).
    pub fn take_offer(&self) -> Option<Offer> {
        self.offer.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Ends every stream still attached (their tasks see `TrunkLost`);
    /// returns how many there were.
    pub fn end_streams(&self, g: &mut TrunkInner) -> usize {
        let lost = g.streams.len();
        for (_, s) in g.streams.drain() {
            s.end(Reason::TrunkLost);
        }
        lost
    }

    /// Acts on every pending event of the state machine. Called with the
    /// lock held, after every call into the connection.
    pub fn dispatch(self: &Arc<Trunk>, g: &mut TrunkInner) {
        while let Some(ev) = g.conn.poll_event() {
            match ev {
                Event::Authenticated(peer) => {
                    self.release_handshake_permit();
                    self.events.authenticated(self, g, peer);
                }
                Event::StreamOpened {
                    stream,
                    destination,
                    source,
                    blast,
                } => {
                    let open = OpenedStream {
                        stream,
                        destination,
                        source,
                        request: blast,
                    };
                    self.events.stream_opened(self, g, open);
                }
                Event::StreamAccepted { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.accepted.store(true, Ordering::Release);
                        s.readable.notify_one();
                    }
                }
                Event::StreamReadable { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.readable.notify_one();
                    }
                }
                Event::StreamWritable { stream } => {
                    if let Some(s) = g.streams.get(&stream) {
                        s.writable.notify_one();
                    }
                }
                Event::StreamReset { stream, reason } => {
                    if let Some(s) = g.streams.remove(&stream) {
                        s.end(reason);
                    }
                }
                Event::StreamClosed { stream } => {
                    g.streams.remove(&stream);
                }
                Event::GoAway => {
                    info!(trunk = self.id, peer = self.peer_name(), slot = %self.slot_label(),
                          "peer relay sent GOAWAY: no new streams on this trunk");
                }
                Event::Rbudp { message } => self.events.rbudp_control(self, g, &message),
                Event::Closed { error } => {
                    self.release_handshake_permit();
                    self.events.closed(self, g, error);
                    self.tx.notify_one();
                }
                Event::Suspended { error } => {
                    self.events.suspended(self, g, &error);
                    self.tx.notify_one();
                }
                Event::Resumed { replayed } => {
                    self.events.resumed(self, g, replayed);
                    for s in g.streams.values() {
                        s.readable.notify_one();
                        s.writable.notify_one();
                    }
                }
            }
        }
    }
}
