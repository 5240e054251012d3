//! Running the relay: every task started, then shutdown (GOAWAY on every
//! trunk, a grace period for streams to finish, then what is left is
//! closed and its sockets are reset).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{info, warn};
use wanproto::CloseCode;

use super::dial::dial_loop;
use super::endpoint;
use super::listeners::{accept_inside, accept_trunks, Listeners};
use super::relay::Relay;
use crate::config::Dial;
use crate::transport::rbudp::udp::{self, UdpPath};
use crate::transport::trunk::Placement;

/// Runs the relay until `stop` resolves (a signal), then shuts down:
/// stops accepting, sends GOAWAY on every trunk, waits up to
/// `shutdown_grace` for streams to finish (or until `stop_now` resolves),
/// then closes what is left (their sockets are reset).
pub async fn run(
    relay: Arc<Relay>,
    listeners: Listeners,
    stop: impl Future<Output = ()>,
    stop_now: impl Future<Output = ()>,
) {
    let tasks = start(&relay, listeners);
    let config = &relay.ctx.config;
    info!(name = %config.name, cluster = %config.cluster, peers = config.peers.len(), "relay running");
    stop.await;
    shut_down(&relay, tasks, stop_now).await;
}

/// Starts the tasks of every listener, and the dialers; returns the
/// listeners' tasks (shutdown stops them at once).
fn start(relay: &Arc<Relay>, listeners: Listeners) -> Vec<JoinHandle<()>> {
    let local =
        |a: std::io::Result<std::net::SocketAddr>| a.map_or_else(|_| "?".into(), |a| a.to_string());
    let mut tasks = Vec::new();
    if let Some(sock) = listeners.udp {
        info!(addr = %local(sock.local_addr()), "RBUDP socket");
        let udp = relay.start_udp(UdpPath::new(sock));
        tasks.push(tokio::spawn(udp::receive(relay.ctx.clone(), udp)));
    }
    for l in listeners.inside {
        info!(addr = %local(l.local_addr()), "inside listener");
        tasks.push(tokio::spawn(accept_inside(relay.clone(), l)));
    }
    for l in listeners.outside {
        info!(addr = %local(l.local_addr()), "outside listener");
        tasks.push(tokio::spawn(accept_trunks(relay.clone(), l)));
    }
    if let Some(l) = listeners.metrics {
        info!(addr = %local(l.local_addr()), "metrics endpoint");
        let r = relay.clone();
        tasks.push(tokio::spawn(endpoint::serve(l, move || r.render_metrics())));
    }
    if relay.ctx.busy_poll.enabled() {
        let ctx = relay.ctx.clone();
        let spun = ctx
            .metrics
            .counter("wanrelay_busy_poll_nanoseconds_total", &[]);
        info!(window = ?ctx.config.busy_poll, "busy polling after traffic");
        let spinner = ctx.busy_poll.clone();
        tasks.push(tokio::spawn(spinner.run(move || ctx.now(), spun)));
    }
    for (i, p) in relay.ctx.config.peers.iter().enumerate() {
        if p.dial == Dial::Connect {
            for slot in 0..p.trunks {
                tokio::spawn(dial_loop(relay.clone(), Placement { peer: i, slot }));
            }
        }
    }
    tasks
}

/// Shuts down: stops the listeners, GOAWAY on every trunk, waits for them
/// to close (up to `shutdown_grace`, or until `stop_now`), then closes
/// the rest.
async fn shut_down(relay: &Relay, tasks: Vec<JoinHandle<()>>, stop_now: impl Future<Output = ()>) {
    info!(grace = ?relay.ctx.config.shutdown_grace, "shutting down: no new connections, GOAWAY on every trunk");
    relay.ctx.begin_shutdown();
    // Listeners stop now; dialers stop on the signal once their trunk ends.
    for t in &tasks {
        t.abort();
    }
    for t in relay.live() {
        t.request_close(CloseCode::NoError);
    }
    let drained = async {
        while !relay.live().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = drained => info!("every trunk closed gracefully"),
        _ = tokio::time::sleep(relay.ctx.config.shutdown_grace) => {
            warn!(trunks = relay.live().len(), "shutdown grace expired: closing the remaining trunks");
        }
        _ = stop_now => warn!("second signal: closing the remaining trunks now"),
    }
    for t in relay.live() {
        t.request_close(CloseCode::Shutdown);
    }
    let closed = async {
        while !relay.live().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), closed).await;
    // Let stream tasks reset their sockets.
    tokio::time::sleep(Duration::from_millis(50)).await;
    info!("relay stopped");
}
