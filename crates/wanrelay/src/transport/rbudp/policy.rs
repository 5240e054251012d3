//! Whether and how a stream to a peer with `transport = "rbudp"` blasts
//! the bulk data this relay sends (the peer's `rbudp_streams`, the ranks'
//! blast request); [`super::super::stream_policy`] asks it for rbudp peers.

use tracing::{debug, warn};
use wanproto::rbudp::{BlastParams, DATAGRAM_HEADER_LEN, MAX_BLAST_PACKETS};
use wanproto::{BlastRequest, StreamId};

use crate::config::{RbudpPeer, RbudpStreams};
use crate::transport::blast::StreamBlast;
use crate::transport::trunk::{Placement, Trunk, TrunkInner};

/// The blast setting of stream `stream` of `trunk` (placed at `p`, a peer
/// with RBUDP settings `s`), for the data this relay sends: with
/// `rbudp_streams = "requested"` only a stream with a `request` blasts; a
/// request sets the rate and datagram size, clamped to the peer's `rate`
/// (this trunk's share) and `payload`, and is counted
/// (`wanrelay_rbudp_requests_total`, by `side`). A request while the
/// session is not up is counted `no_rbudp`, the first such per peer logged
/// at warn: the stream's data stays on the trunk until it is.
pub fn stream_policy(
    trunk: &Trunk,
    g: &TrunkInner,
    p: Placement,
    s: &RbudpPeer,
    stream: StreamId,
    request: Option<BlastRequest>,
    side: &str,
) -> Option<StreamBlast> {
    if request.is_none() && s.streams == RbudpStreams::Requested {
        return None;
    }
    let mut params = BlastParams::default();
    let mut datagram = s.payload;
    if let Some(r) = request {
        (params, datagram) = requested_params(trunk, g, p, s, stream, r, side);
    }
    // A blast holds at most MAX_BLAST_PACKETS datagrams of its chunk.
    let chunk = datagram - DATAGRAM_HEADER_LEN;
    let blast = s.blast.min(MAX_BLAST_PACKETS as usize * chunk);
    Some(StreamBlast {
        blast,
        bulk_threshold: s.bulk_threshold.min(blast),
        params,
    })
}

/// The blast parameters and datagram size of a stream whose ranks sent
/// request `r`, within the peer's settings `s`; counts and logs the
/// request.
fn requested_params(
    trunk: &Trunk,
    g: &TrunkInner,
    p: Placement,
    s: &RbudpPeer,
    stream: StreamId,
    r: BlastRequest,
    side: &str,
) -> (BlastParams, usize) {
    let ctx = &trunk.ctx;
    let pc = &ctx.config.peers[p.peer];
    let trunk_rate = s.trunk_rate(pc.trunks);
    let rate = r.rate.min(trunk_rate);
    let datagram = usize::from(r.payload).min(s.payload);
    let params = BlastParams {
        rate: Some(rate),
        datagram_size: Some(datagram),
    };
    let up = g
        .rbudp
        .as_ref()
        .is_some_and(|l| l.session.is_ready() && l.peer_addr.is_some());
    let outcome = if !up {
        "no_rbudp"
    } else if rate < r.rate || datagram < usize::from(r.payload) {
        "clamped"
    } else {
        "blasted"
    };
    ctx.metrics.inc(
        "wanrelay_rbudp_requests_total",
        &[("peer", &pc.name), ("side", side), ("outcome", outcome)],
    );
    debug!(trunk = trunk.id, peer = %pc.name, stream, side, outcome,
           requested_rate = r.rate, rate, requested_payload = r.payload, payload = datagram,
           "blast request (rates in bytes/s on the wire)");
    if !up && ctx.first_ignored_request(p.peer) {
        warn!(trunk = trunk.id, peer = %pc.name, stream,
              "blast request while the RBUDP session with this peer is not up (is it configured with transport = \"rbudp\"?): the stream's data stays on the trunk until it is");
    }
    (params, datagram)
}
