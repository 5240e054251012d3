//! The RBUDP state of one trunk, kept under the trunk's lock
//! ([`TrunkInner::rbudp`](crate::transport::trunk::TrunkInner::rbudp)).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use wanproto::rbudp::RbudpSession;
use wanproto::StreamId;

use crate::config::RbudpPeer;

/// The RBUDP state of one trunk.
pub struct RbudpLink {
    /// The protocol state machine.
    pub session: RbudpSession,
    /// Where datagrams go (the trunk peer's address, the port its SESSION
    /// announced).
    pub peer_addr: Option<SocketAddr>,
    /// Receiver: blasts to splice into each stream, in order (offset, blast).
    pub splices: HashMap<StreamId, VecDeque<(u64, u32)>>,
    /// Receiver: the blast each stream is writing to its socket (taken,
    /// not yet released; released with the stream if the write never ends).
    pub(super) delivering: HashMap<StreamId, u32>,
    /// Sender: blasts in flight per stream.
    pub(super) in_flight: HashMap<StreamId, usize>,
    /// Sender: the stream of each blast in flight.
    pub(super) out_stream: HashMap<u32, StreamId>,
    /// The peer's settings.
    pub settings: RbudpPeer,
    rng: u64,
}

impl RbudpLink {
    /// The state of a new session `session` (id `id`) with a peer of
    /// `settings`; its datagrams have nowhere to go until it is ready.
    pub fn new(session: RbudpSession, settings: RbudpPeer, id: u32) -> RbudpLink {
        RbudpLink {
            session,
            peer_addr: None,
            splices: HashMap::new(),
            delivering: HashMap::new(),
            in_flight: HashMap::new(),
            out_stream: HashMap::new(),
            settings,
            rng: u64::from(id) | 1,
        }
    }

    /// TEST ONLY (`test_drop`): whether to drop the next datagram.
    pub(super) fn test_drop(&mut self) -> bool {
        if self.settings.test_drop <= 0.0 {
            return false;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < self.settings.test_drop
    }
}
