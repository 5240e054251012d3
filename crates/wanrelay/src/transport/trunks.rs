//! The relay's trunks by peer and slot: where an authenticated trunk is
//! registered, and which trunks may carry a new stream to a destination.
//!
//! Lock order: a trunk's lock may be held while taking a peer's slot list,
//! never the other way round ([`Trunks::route`] takes a snapshot of the
//! slots before [`Trunks::select`] locks the trunks).

use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use wanproto::{TrunkCandidate, TrunkSelector};

use super::trunk::{Placement, Trunk};
use crate::shared::context::Context;

/// The trunk slots of every peer.
pub struct Trunks {
    ctx: Arc<Context>,
    /// Registered trunks by peer, then slot.
    slots: Vec<Mutex<Vec<Option<Arc<Trunk>>>>>,
    selector: TrunkSelector,
}

impl Trunks {
    /// Empty slots for the peers of `ctx`'s configuration.
    pub fn new(ctx: Arc<Context>) -> Trunks {
        let slots = ctx
            .config
            .peers
            .iter()
            .map(|p| Mutex::new(vec![None; p.trunks]))
            .collect();
        Trunks {
            selector: TrunkSelector::new(ctx.config.trunk.policy),
            ctx,
            slots,
        }
    }

    fn lock_slots(&self, peer: usize) -> MutexGuard<'_, Vec<Option<Arc<Trunk>>>> {
        self.slots[peer].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The trunks registered for peer `peer` now, by slot.
    pub fn snapshot(&self, peer: usize) -> Vec<Option<Arc<Trunk>>> {
        self.lock_slots(peer).clone()
    }

    /// Registers a trunk the peer opened in a slot, chosen under one lock:
    /// the first free one, else the one registered longest ago (the peer
    /// reconnecting means that one is dead on its side). Returns the slot
    /// and the trunk it replaces.
    pub fn claim_slot(&self, peer: usize, trunk: Arc<Trunk>) -> (usize, Option<Arc<Trunk>>) {
        let mut slots = self.lock_slots(peer);
        let slot = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => slots
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| t.as_ref().and_then(|t| t.registered_at.get().copied()))
                .map_or(0, |(i, _)| i),
        };
        (slot, slots[slot].replace(trunk))
    }

    /// Puts an authenticated trunk this relay dialed in its slot; returns
    /// the one it replaces.
    pub fn register(&self, p: Placement, trunk: Arc<Trunk>) -> Option<Arc<Trunk>> {
        self.lock_slots(p.peer)[p.slot].replace(trunk)
    }

    /// Removes a closed trunk from its slot (if still there).
    pub fn unregister(&self, p: Placement, trunk: &Trunk) {
        let mut slots = self.lock_slots(p.peer);
        if slots[p.slot].as_ref().is_some_and(|t| t.id == trunk.id) {
            slots[p.slot] = None;
        }
    }

    /// The trunks that may carry a stream to `destination`: those of the
    /// peers whose `reachable` networks match it most specifically, with
    /// their selection keys (peer index << 16 | slot).
    pub fn route(&self, destination: IpAddr) -> Vec<(u64, Arc<Trunk>)> {
        let peers = &self.ctx.config.peers;
        let best = peers
            .iter()
            .filter_map(|p| p.reachable.longest_match(destination))
            .max();
        let Some(best) = best else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, p) in peers.iter().enumerate() {
            if p.reachable.longest_match(destination) != Some(best) {
                continue;
            }
            let slots = self.lock_slots(i);
            for (s, t) in slots.iter().enumerate() {
                if let Some(t) = t {
                    out.push((((i as u64) << 16) | s as u64, t.clone()));
                }
            }
        }
        out
    }

    /// Chooses a trunk for a new stream to `destination` among `routes`:
    /// an established one, else a suspended one (the stream's OPEN waits
    /// for the session to resume, as its bytes do).
    pub fn select(
        &self,
        routes: &[(u64, Arc<Trunk>)],
        destination: IpAddr,
        exclude: &[u64],
    ) -> Option<usize> {
        let (mut established, mut suspended): (Vec<_>, Vec<_>) = (Vec::new(), Vec::new());
        for (key, t) in routes {
            let g = t.lock();
            let free = !exclude.contains(key);
            let candidate = |usable| TrunkCandidate {
                key: *key,
                load: g.conn.buffered_send_bytes(),
                usable,
            };
            established.push(candidate(free && g.conn.accepts_new_streams()));
            suspended.push(candidate(free && g.conn.may_open_streams()));
        }
        self.selector
            .select(&established, destination)
            .or_else(|| self.selector.select(&suspended, destination))
    }
}
