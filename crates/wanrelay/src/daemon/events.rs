//! What the relay decides when one of its trunks reports
//! ([`TrunkEvents`], for every trunk made by [`Relay::new_trunk`]): which
//! configured peer an authenticated trunk belongs to and in which slot,
//! whether a stream the peer opened is delivered, where RBUDP control
//! goes, and what a closed trunk leaves behind (its slot, its counters,
//! its log line). Called with the trunk's lock held.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tracing::{debug, info, warn};
use wanproto::{CloseCode, ConnectionError, PeerInfo, Reason, TrunkConnection};

use super::relay::Relay;
use crate::config::Dial;
use crate::shared::metrics::reason_label;
use crate::streams::deliver::deliver;
use crate::transport::trunk::{OpenedStream, Origin, Placement, Trunk, TrunkEvents, TrunkInner};
use crate::transport::{self, TrunkStream};

impl TrunkEvents for Relay {
    fn authenticated(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, peer: PeerInfo) {
        let Some((placement, replaced)) = self.place(trunk, g, &peer) else {
            return;
        };
        let _ = trunk.placement.set(placement);
        if let Some(old) = replaced {
            info!(
                trunk = trunk.id,
                replaced = old.id,
                peer = trunk.peer_name(),
                slot = placement.slot,
                "trunk replaces an older connection of the same slot"
            );
            old.request_close(CloseCode::Internal);
        }
        let slot = placement.slot.to_string();
        self.ctx.metrics.inc(
            "wanrelay_trunk_connects_total",
            &[("peer", trunk.peer_name()), ("trunk", &slot)],
        );
        info!(trunk = trunk.id, remote = %trunk.remote, peer = trunk.peer_name(), cluster = %peer.cluster,
              slot = placement.slot, "trunk up: peer relay authenticated");
        transport::start(trunk, g, self.udp());
    }

    fn stream_opened(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, open: OpenedStream) {
        let OpenedStream {
            stream,
            destination,
            source,
            request,
        } = open;
        let refuse = |g: &mut TrunkInner, reason: Reason, why: &str| {
            let _ = g.conn.reset_stream(stream, reason);
            self.ctx.metrics.inc(
                "wanrelay_streams_refused_total",
                &[
                    ("peer", trunk.peer_name()),
                    ("side", "in"),
                    ("reason", reason_label(reason)),
                ],
            );
            if let Some(skipped) = self.ctx.log_refusal() {
                warn!(trunk = trunk.id, peer = trunk.peer_name(), stream, %destination, %source, why, skipped,
                      "stream refused");
            }
        };
        if !self.ctx.config.members.contains(destination.ip()) {
            return refuse(
                g,
                Reason::NotMember,
                "destination is not a member node of this cluster",
            );
        }
        if self.ctx.config.is_own_listener(destination) {
            return refuse(
                g,
                Reason::NotMember,
                "destination is one of this relay's own listeners",
            );
        }
        if self.ctx.is_shutting_down() {
            return refuse(g, Reason::ShuttingDown, "relay shutting down");
        }
        let attached = TrunkStream::attach(trunk, g, stream);
        let slot = trunk.slot_label();
        self.ctx.metrics.inc(
            "wanrelay_streams_opened_total",
            &[
                ("peer", trunk.peer_name()),
                ("trunk", &slot),
                ("side", "in"),
            ],
        );
        debug!(trunk = trunk.id, stream, %destination, %source, blast_request = request.is_some(),
               "stream opened by peer: connecting");
        // The data this relay sends back follows its own policy for the
        // opener's relay.
        let blasts = transport::stream_policy(trunk, g, stream, request, "in");
        tokio::spawn(deliver(
            self.streams.clone(),
            attached,
            destination,
            source,
            blasts,
        ));
    }

    fn rbudp_control(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, message: &[u8]) {
        transport::on_rbudp_control(trunk, g, message);
    }

    fn suspended(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, error: &ConnectionError) {
        self.ctx.metrics.inc(
            "wanrelay_trunk_suspends_total",
            &[("peer", trunk.peer_name()), ("trunk", &trunk.slot_label())],
        );
        let timeout = self.ctx.config.trunk.resume_timeout;
        warn!(trunk = trunk.id, peer = trunk.peer_name(), slot = %trunk.slot_label(), remote = %trunk.remote,
              %error, streams = g.streams.len(), ?timeout,
              "trunk transport lost: session suspended, streams kept until it resumes");
    }

    fn resumed(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, replayed: u64) {
        self.ctx.metrics.inc(
            "wanrelay_trunk_resumes_total",
            &[("peer", trunk.peer_name()), ("trunk", &trunk.slot_label())],
        );
        info!(trunk = trunk.id, peer = trunk.peer_name(), slot = %trunk.slot_label(),
              streams = g.streams.len(), replayed, "trunk session resumed on a new connection");
    }

    fn closed(&self, trunk: &Arc<Trunk>, g: &mut TrunkInner, error: Option<ConnectionError>) {
        transport::stop(trunk, g, self.udp(), &self.closed_rbudp);
        let lost = trunk.end_streams(g);
        let reason = close_reason(&error);
        match trunk.placement.get() {
            Some(p) => self.closed_placed(trunk, g, *p, &error, reason, lost),
            None => closed_unplaced(self, trunk, g, &error, reason),
        }
    }
}

impl Relay {
    /// Trunk `id` to `remote` around a fresh connection state machine
    /// ([`Relay::new_connection`]); this relay answers its events.
    pub fn new_trunk(
        self: &Arc<Relay>,
        id: u64,
        remote: SocketAddr,
        origin: Origin,
        conn: TrunkConnection,
    ) -> Arc<Trunk> {
        Trunk::new(self.ctx.clone(), self.clone(), id, remote, origin, conn)
    }

    /// Where an authenticated trunk goes: the slot it was dialed for (if
    /// the peer is the one configured there), or a slot of the configured
    /// peer that connected (of the right cluster, and not one this relay
    /// dials). Returns the placement and the trunk it replaces; `None`
    /// when the trunk is refused (counted, logged and closed).
    fn place(
        &self,
        trunk: &Arc<Trunk>,
        g: &mut TrunkInner,
        peer: &PeerInfo,
    ) -> Option<(Placement, Option<Arc<Trunk>>)> {
        let peers = &self.ctx.config.peers;
        let refuse = |g: &mut TrunkInner, label: &str| {
            self.ctx
                .metrics
                .inc("wanrelay_trunk_refused_total", &[("reason", label)]);
            g.conn.close(CloseCode::Protocol);
        };
        match trunk.origin {
            Origin::Dialed(p) => {
                let expected = &peers[p.peer];
                if peer.name != expected.name {
                    warn!(trunk = trunk.id, remote = %trunk.remote, announced = %peer.name, expected = %expected.name,
                          "trunk refused: the relay at this address is not the configured peer");
                    refuse(g, "unknown_peer");
                    return None;
                }
                let _ = trunk.registered_at.set(Instant::now());
                Some((p, self.trunks.register(p, trunk.clone())))
            }
            Origin::Accepted => {
                let Some(index) = peers.iter().position(|c| c.name == peer.name) else {
                    warn!(trunk = trunk.id, remote = %trunk.remote, announced = %peer.name, cluster = %peer.cluster,
                          "trunk refused: authenticated, but not a configured peer");
                    refuse(g, "unknown_peer");
                    return None;
                };
                let pc = &peers[index];
                if pc.cluster != peer.cluster {
                    warn!(trunk = trunk.id, remote = %trunk.remote, peer = %peer.name, announced = %peer.cluster,
                          expected = %pc.cluster, "trunk refused: peer relay of the wrong cluster");
                    refuse(g, "wrong_cluster");
                    return None;
                }
                if pc.dial == Dial::Connect {
                    warn!(trunk = trunk.id, remote = %trunk.remote, peer = %peer.name,
                          "trunk refused: this relay dials that peer (peer.dial = \"connect\"); exactly one side of a pair must dial");
                    refuse(g, "dial_conflict");
                    return None;
                }
                let _ = trunk.registered_at.set(Instant::now());
                let (slot, old) = self.trunks.claim_slot(index, trunk.clone());
                Some((Placement { peer: index, slot }, old))
            }
        }
    }

    /// A trunk that was placed closed: frees its slot, counts it and its
    /// bytes, logs it (`lost` streams ended with it).
    fn closed_placed(
        &self,
        trunk: &Trunk,
        g: &TrunkInner,
        p: Placement,
        error: &Option<ConnectionError>,
        reason: &str,
        lost: usize,
    ) {
        self.trunks.unregister(p, trunk);
        let slot = p.slot.to_string();
        self.ctx.metrics.inc(
            "wanrelay_trunk_closes_total",
            &[
                ("peer", trunk.peer_name()),
                ("trunk", &slot),
                ("reason", reason),
            ],
        );
        let stats = g.conn.stats();
        self.add_closed_bytes(p, stats.bytes_sent, stats.bytes_received);
        match error {
            None => info!(
                trunk = trunk.id,
                peer = trunk.peer_name(),
                slot = p.slot,
                "trunk closed gracefully"
            ),
            Some(e) => {
                warn!(trunk = trunk.id, peer = trunk.peer_name(), slot = p.slot, remote = %trunk.remote,
                             error = %e, streams_lost = lost, "trunk closed")
            }
        }
    }
}

/// The label of why a trunk closed (`wanrelay_trunk_closes_total`).
fn close_reason(error: &Option<ConnectionError>) -> &'static str {
    match error {
        None => "graceful",
        Some(ConnectionError::AuthFailed) => "auth_failed",
        Some(ConnectionError::WrongPeerCluster { .. }) => "wrong_cluster",
        Some(ConnectionError::HandshakeTimeout) => "handshake_timeout",
        Some(ConnectionError::IdleTimeout) => "idle_timeout",
        Some(ConnectionError::TransportClosed) => "transport_closed",
        Some(ConnectionError::PeerClosed(_)) => "peer_closed",
        Some(ConnectionError::LocallyClosed(_)) => "local_close",
        Some(ConnectionError::ControlFlood) => "flood",
        Some(ConnectionError::StreamLimit(_)) => "stream_limit",
        Some(ConnectionError::FlowControl(_)) => "flow_control",
        Some(ConnectionError::Frame(_) | ConnectionError::Protocol(_)) => "protocol",
        Some(ConnectionError::UnknownSession) => "unknown_session",
        Some(ConnectionError::ResumeTimeout(_)) => "resume_timeout",
    }
}

/// A trunk that never authenticated closed: a refused or failed
/// handshake, counted by reason and logged.
fn closed_unplaced(
    relay: &Relay,
    trunk: &Trunk,
    g: &TrunkInner,
    error: &Option<ConnectionError>,
    reason: &str,
) {
    let peer = g.conn.peer().map(|p| format!("{}/{}", p.cluster, p.name));
    let peer = peer.as_deref().unwrap_or("?");
    let label = match reason {
        "auth_failed" => Some("auth"),
        "wrong_cluster" => Some("wrong_cluster"),
        "handshake_timeout" => Some("timeout"),
        "protocol" | "flood" | "stream_limit" | "flow_control" => Some("protocol"),
        _ => None,
    };
    if let Some(l) = label {
        relay
            .ctx
            .metrics
            .inc("wanrelay_trunk_refused_total", &[("reason", l)]);
    }
    match error {
        Some(ConnectionError::AuthFailed) => warn!(
            trunk = trunk.id, remote = %trunk.remote, announced = peer,
            "trunk refused: peer failed authentication (wrong pre-shared key?)"),
        Some(ConnectionError::PeerClosed(CloseCode::AuthFailed)) => warn!(
            trunk = trunk.id, remote = %trunk.remote, announced = peer,
            "trunk refused by the peer: it could not authenticate us (different pre-shared keys?)"),
        Some(e) if label.is_some() || matches!(e, ConnectionError::PeerClosed(_)) => {
            warn!(
            trunk = trunk.id, remote = %trunk.remote, announced = peer, error = %e,
            "trunk handshake failed")
        }
        e => {
            debug!(trunk = trunk.id, remote = %trunk.remote, error = ?e, "trunk closed before authentication")
        }
    }
}
