//! The trunks this relay dials (`dial = "connect"`): one task per slot
//! connects, runs the trunk (resuming its session on new sockets while it
//! can, [`session`]), and reconnects with a doubling backoff once it closed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, warn};
use wanproto::Role;

use super::relay::Relay;
use super::session::{self, connect_peer};
use crate::transport::trunk::{Origin, Placement};

/// Keeps the trunk of slot `p` up until shutdown: connects (to the peer's
/// addresses in turn), runs the trunk, and after it ends or a connect
/// fails waits `trunk.reconnect_min`, doubling up to `reconnect_max`
/// (back to the minimum after a trunk that lived over 2 s).
pub async fn dial_loop(relay: Arc<Relay>, p: Placement) {
    let pc = &relay.ctx.config.peers[p.peer];
    let t = &relay.ctx.config.trunk;
    let mut backoff = t.reconnect_min;
    let mut attempt: usize = 0;
    let mut shutdown = relay.ctx.shutdown_signal();
    let mut failures = 0u32;
    loop {
        if relay.ctx.is_shutting_down() {
            return;
        }
        let addr = pc.addresses[(p.slot + attempt) % pc.addresses.len()];
        attempt += 1;
        match tokio::time::timeout(
            t.connect_timeout,
            connect_peer(addr, relay.ctx.config.outside_bind),
        )
        .await
        {
            Ok(Ok(sock)) => {
                failures = 0;
                let id = relay.next_trunk_id();
                debug!(trunk = id, peer = %pc.name, slot = p.slot, %addr, "trunk connected: handshake");
                let conn = relay.new_connection(Role::Initiator, Some(&pc.cluster));
                let trunk = relay.new_trunk(id, addr, Origin::Dialed(p), conn);
                let started = Instant::now();
                let authenticated = session::drive(relay.clone(), trunk, sock, Vec::new()).await;
                if authenticated && started.elapsed() > Duration::from_secs(2) {
                    backoff = t.reconnect_min;
                }
            }
            Ok(Err(e)) => {
                failures += 1;
                count_failure(&relay, &pc.name);
                if failures == 1 || failures.is_power_of_two() {
                    warn!(peer = %pc.name, slot = p.slot, %addr, error = %e, failures, "cannot connect to peer relay; retrying");
                }
            }
            Err(_) => {
                failures += 1;
                count_failure(&relay, &pc.name);
                if failures == 1 || failures.is_power_of_two() {
                    warn!(peer = %pc.name, slot = p.slot, %addr, failures, "connect to peer relay timed out; retrying");
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.wait_for(|&s| s) => return,
        }
        backoff = (backoff * 2).min(t.reconnect_max);
    }
}

fn count_failure(relay: &Relay, peer: &str) {
    relay
        .ctx
        .metrics
        .inc("wanrelay_trunk_dial_failures_total", &[("peer", peer)]);
}
