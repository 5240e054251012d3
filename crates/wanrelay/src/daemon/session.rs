//! A trunk's whole life, over as many sockets as it takes: the first
//! socket's run, then, each time the session is suspended (its transport
//! lost), a new socket to resume it on: dialed again by the relay that
//! dialed the trunk, or offered by the outside listener when the peer
//! connects to resume ([`Trunk::replace_transport`]). Ends when the
//! connection closes: a peer that does not know the session any more, no
//! resumption within `trunk.resume_timeout`, or shutdown.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};
use tokio::task::JoinSet;
use tracing::debug;
use wanproto::CloseCode;

use super::relay::Relay;
use crate::transport::tcp::{self, Ended};
use crate::transport::trunk::{Origin, Placement, Trunk};

/// Between two connect attempts to resume a session, for its first minute
/// (then [`RESUME_RETRY_LATER`]: a long outage is not worth 4 SYNs a second).
const RESUME_RETRY: Duration = Duration::from_millis(250);
const RESUME_RETRY_FOR: Duration = Duration::from_secs(60);
const RESUME_RETRY_LATER: Duration = Duration::from_secs(1);
/// Longest wait for one of those connects (SYNs lost in an outage are
/// retried by a newer attempt rather than by the kernel's backoff).
const RESUME_CONNECT: Duration = Duration::from_secs(1);

/// A TCP connection to a peer relay at `addr`, from `bind` if given.
pub async fn connect_peer(addr: SocketAddr, bind: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = bind {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    sock.connect(addr).await
}

/// Runs `trunk` from `sock` (`prefix`: bytes already read from it) until
/// its connection closes, in the list shutdown works through meanwhile;
/// returns whether it was ever authenticated.
pub async fn drive(relay: Arc<Relay>, trunk: Arc<Trunk>, sock: TcpStream, prefix: Vec<u8>) -> bool {
    relay.track(&trunk);
    let (mut sock, mut prefix) = (sock, prefix);
    while tcp::run(trunk.clone(), sock, prefix).await == Ended::Suspended {
        match next_transport(&relay, &trunk).await {
            Some((s, p)) => (sock, prefix) = (s, p),
            None => break,
        }
    }
    relay.untrack(&trunk);
    trunk.registered_at.get().is_some()
}

/// Waits, with the session suspended, for a socket to resume it on, and
/// starts the resumption; `None` once the connection closed instead.
async fn next_transport(relay: &Arc<Relay>, trunk: &Arc<Trunk>) -> Option<(TcpStream, Vec<u8>)> {
    let redial = async {
        match trunk.origin {
            Origin::Dialed(p) => redial(relay, p).await,
            Origin::Accepted => std::future::pending().await,
        }
    };
    tokio::pin!(redial);
    loop {
        let offered = trunk.take_offer();
        {
            let mut g = trunk.lock();
            if let Some(code) = trunk.take_close_request() {
                g.conn.close(code);
                trunk.dispatch(&mut g);
            }
            if g.conn.is_closed() {
                return None;
            }
            if let Some(offer) = offered {
                return resume_on(relay, trunk, &mut g, offer);
            }
            if g.conn.has_transport() {
                // Resuming on a socket whose run ended: start again.
                debug!(
                    trunk = trunk.id,
                    "resumption's socket ended; waiting for another"
                );
            }
        }
        let deadline = trunk.lock().conn.poll_timeout();
        tokio::select! {
            sock = &mut redial => {
                let mut g = trunk.lock();
                let Some(sock) = sock else {
                    // Nothing listens at the peer's address: its relay is
                    // not running, and a restarted one has no session.
                    g.conn.close(CloseCode::UnknownSession);
                    trunk.dispatch(&mut g);
                    return None;
                };
                return resume_on(relay, trunk, &mut g, (sock, Vec::new()));
            }
            _ = trunk.offered.notified() => {}
            _ = trunk.tx.notified() => {}
            _ = trunk.ctx.sleep_until(deadline) => {
                let mut g = trunk.lock();
                let now = trunk.ctx.now();
                g.conn.handle_timeout(now);
                trunk.dispatch(&mut g);
            }
        }
    }
}

/// Starts resuming the session on `offer`'s socket.
fn resume_on(
    relay: &Relay,
    trunk: &Arc<Trunk>,
    g: &mut crate::transport::trunk::TrunkInner,
    offer: (TcpStream, Vec<u8>),
) -> Option<(TcpStream, Vec<u8>)> {
    let nonce = relay.fresh_nonce();
    let now = trunk.ctx.now();
    match g.conn.begin_resume(now, nonce) {
        Ok(()) => Some(offer),
        Err(e) => {
            debug!(trunk = trunk.id, error = %e, "session not resumable");
            g.conn.close(CloseCode::Internal);
            trunk.dispatch(g);
            None
        }
    }
}

/// Connects to the peer of slot `p` again, trying its addresses in turn,
/// a new attempt every 250 ms (every second after a minute) while older
/// ones wait for their SYN's answer (so a link that comes back is used
/// within a fraction of a second).
/// `None` when every address refused the connection (the peer relay's host
/// answers, its relay does not run).
async fn redial(relay: &Relay, p: Placement) -> Option<TcpStream> {
    let pc = &relay.ctx.config.peers[p.peer];
    let bind = relay.ctx.config.outside_bind;
    let limit = relay.ctx.config.trunk.connect_timeout.min(RESUME_CONNECT);
    let mut attempts = JoinSet::new();
    let mut n = 0usize;
    let mut refused = 0usize;
    let started = tokio::time::Instant::now();
    loop {
        let addr = pc.addresses[(p.slot + n) % pc.addresses.len()];
        n += 1;
        attempts.spawn(async move { tokio::time::timeout(limit, connect_peer(addr, bind)).await });
        let pause = if started.elapsed() < RESUME_RETRY_FOR {
            RESUME_RETRY
        } else {
            RESUME_RETRY_LATER
        };
        let next = tokio::time::sleep(pause);
        tokio::pin!(next);
        loop {
            tokio::select! {
                _ = &mut next => break,
                Some(done) = attempts.join_next() => match done {
                    Ok(Ok(Ok(sock))) => {
                        attempts.abort_all();
                        return Some(sock);
                    }
                    Ok(Ok(Err(e))) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                        refused += 1;
                        if refused >= pc.addresses.len() {
                            attempts.abort_all();
                            return None;
                        }
                    }
                    _ => {}
                },
            }
        }
    }
}
