//! The relay's state: its context, key, trunks and streams, the trunks
//! shutdown works through, its UDP socket, and the totals of closed
//! trunks and RBUDP sessions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Semaphore;
use tracing::error;
use wanproto::{PresharedKey, Role, TrunkConnection};

use crate::config::Config;
use crate::shared::context::Context;
use crate::streams::Streams;
use crate::transport::rbudp::stats::ClosedSessions;
use crate::transport::rbudp::udp::UdpPath;
use crate::transport::trunk::{Placement, Trunk};
use crate::transport::trunks::Trunks;

/// The relay's shared state.
pub struct Relay {
    /// The context every layer reads.
    pub ctx: Arc<Context>,
    key: PresharedKey,
    /// The trunks of every peer.
    pub trunks: Arc<Trunks>,
    /// What the stream tasks share.
    pub streams: Arc<Streams>,
    next_trunk_id: AtomicU64,
    live_trunks: Mutex<HashMap<u64, Arc<Trunk>>>,
    udp: OnceLock<Arc<UdpPath>>,
    /// Counters of the closed RBUDP sessions.
    pub closed_rbudp: ClosedSessions,
    closed_trunk_bytes: Mutex<HashMap<(usize, usize), (u64, u64)>>,
    /// Inside connections allowed at once.
    pub inside_permits: Arc<Semaphore>,
    /// Trunk handshakes allowed at once on the outside listener.
    pub pending_trunk_permits: Arc<Semaphore>,
}

impl Relay {
    /// A relay for `config` with `key`.
    pub fn new(config: Config, key: PresharedKey) -> Arc<Relay> {
        let inside_permits = Arc::new(Semaphore::new(config.max_inside_connections));
        let pending_trunk_permits = Arc::new(Semaphore::new(config.max_pending_trunks));
        let ctx = Context::new(config);
        let trunks = Arc::new(Trunks::new(ctx.clone()));
        Arc::new(Relay {
            streams: Streams::new(ctx.clone(), trunks.clone()),
            ctx,
            key,
            trunks,
            next_trunk_id: AtomicU64::new(1),
            live_trunks: Mutex::new(HashMap::new()),
            udp: OnceLock::new(),
            closed_rbudp: ClosedSessions::default(),
            closed_trunk_bytes: Mutex::new(HashMap::new()),
            inside_permits,
            pending_trunk_permits,
        })
    }

    /// A new trunk's id (unique, for logs).
    pub fn next_trunk_id(&self) -> u64 {
        self.next_trunk_id.fetch_add(1, Ordering::Relaxed)
    }

    /// A connection state machine for a new trunk, expecting a peer of
    /// `peer_cluster` (dialed) or any (accepted).
    pub fn new_connection(&self, role: Role, peer_cluster: Option<&str>) -> TrunkConnection {
        TrunkConnection::new(
            self.ctx.config.protocol_config(peer_cluster),
            role,
            self.key.clone(),
            self.fresh_nonce(),
            self.ctx.now(),
        )
        .expect("configuration validated at load")
    }

    /// A fresh handshake nonce (for a new connection or a resumption).
    pub fn fresh_nonce(&self) -> [u8; 32] {
        let mut nonce = [0u8; 32];
        if let Err(e) = getrandom::fill(&mut nonce) {
            // No randomness: a handshake with a predictable nonce could be
            // replayed; better to stop than to run insecurely.
            error!(error = %e, "getrandom failed: cannot make a handshake nonce");
            std::process::exit(1);
        }
        nonce
    }

    /// The live trunk whose resumable session is `id`, with peer `name`.
    pub fn session(&self, id: &[u8; 16], name: &str) -> Option<Arc<Trunk>> {
        self.live().into_iter().find(|t| {
            let g = t.lock();
            g.conn.session_id().as_ref() == Some(id)
                && g.conn.peer().is_some_and(|p| p.name == name)
        })
    }

    /// Adds a trunk to the list shutdown works through.
    pub(super) fn track(&self, trunk: &Arc<Trunk>) {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(trunk.id, trunk.clone());
    }

    /// Removes a trunk that ended from that list.
    pub(super) fn untrack(&self, trunk: &Trunk) {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&trunk.id);
    }

    /// The trunks running now.
    pub fn live(&self) -> Vec<Arc<Trunk>> {
        self.live_trunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Keeps the RBUDP socket (`outside.udp_listen`) once running; returns
    /// it.
    pub fn start_udp(&self, udp: UdpPath) -> Arc<UdpPath> {
        let udp = Arc::new(udp);
        let _ = self.udp.set(udp.clone());
        udp
    }

    /// The RBUDP socket, once running.
    pub fn udp(&self) -> Option<&Arc<UdpPath>> {
        self.udp.get()
    }

    /// Adds the byte counts of a closed trunk connection to its slot's totals.
    pub fn add_closed_bytes(&self, p: Placement, sent: u64, received: u64) {
        let mut m = self
            .closed_trunk_bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let e = m.entry((p.peer, p.slot)).or_default();
        e.0 += sent;
        e.1 += received;
    }

    /// The byte counts (sent, received) of the closed trunk connections,
    /// by (peer, slot).
    pub fn closed_bytes(&self) -> HashMap<(usize, usize), (u64, u64)> {
        self.closed_trunk_bytes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
