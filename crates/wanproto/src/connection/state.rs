//! A trunk connection's state: the fields the protocol's parts share
//! ([`super`]: handshake, streams and flow control; [`super::resume`]:
//! session resumption).

use std::collections::{HashMap, VecDeque};

use super::config::Config;
use super::event::{ConnectionStats, Event, PeerInfo};
use super::session::Session;
use super::stream::Stream;
use crate::auth::PresharedKey;
use crate::wire::{Role, StreamId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    Handshake,
    Established,
    /// Transport lost, session kept for a resumption ([`resume`]).
    Suspended,
    /// A resumption's handshake on a new transport.
    Resuming,
    Closed,
}

/// What one `poll_transmit` call may still emit: `out` grew from `start`,
/// against `max_len`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Room {
    pub(super) start: usize,
    pub(super) max_len: usize,
}

impl Room {
    /// Bytes emitted in this call.
    pub(super) fn used(self, out: &[u8]) -> usize {
        out.len() - self.start
    }

    /// Whether a frame of `len` bytes goes out now: it fits, or it is the
    /// first of the call (a control frame is never cut).
    pub(super) fn fits(self, out: &[u8], len: usize) -> bool {
        self.used(out) == 0 || self.used(out) + len <= self.max_len
    }
}

/// One trunk connection. See the [module documentation](self).
#[derive(Debug)]
pub struct TrunkConnection {
    pub(super) config: Config,
    pub(super) role: Role,
    pub(super) key: PresharedKey,
    pub(super) state: State,
    pub(super) created_at: u64,
    pub(super) last_input: u64,
    pub(super) our_hello: Vec<u8>,
    pub(super) peer: Option<PeerInfo>,
    pub(super) peer_hello: Option<Vec<u8>>,
    pub(super) inbuf: Vec<u8>,
    pub(super) handshake_out: VecDeque<Vec<u8>>,
    pub(super) control: VecDeque<Vec<u8>>,
    pub(super) control_bytes: usize,
    pub(super) pong_pending: Option<[u8; 8]>,
    pub(super) ping_pending: bool,
    pub(super) ping_seq: u64,
    pub(super) ping_outstanding: Option<(u64, Option<u64>)>,
    pub(super) rtt: Option<u64>,
    pub(super) streams: HashMap<StreamId, Stream>,
    pub(super) ctrl_queue: VecDeque<StreamId>,
    pub(super) send_queue: VecDeque<StreamId>,
    pub(super) next_local_id: u64,
    pub(super) last_peer_stream: StreamId,
    pub(super) local_streams: u32,
    pub(super) remote_streams: u32,
    pub(super) pool_used: u64,
    pub(super) peer_resumable: bool,
    pub(super) peer_resumes: bool,
    pub(super) going_away_sent: bool,
    pub(super) going_away_received: bool,
    pub(super) events: VecDeque<Event>,
    pub(super) stats: ConnectionStats,
    pub(super) session: Session,
}
