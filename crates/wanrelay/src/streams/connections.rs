//! The connections this relay splices with a trunk stream, by their two
//! endpoints: a kind-4 blast request names one of them
//! ([`super::inside`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::transport::blast::BlastSwitch;
use crate::transport::TrunkStream;

/// A connection this relay splices with a trunk stream, found by a kind-4
/// blast request ([`Connections::get`]).
#[derive(Clone)]
pub struct LiveConnection {
    /// Its stream.
    pub stream: TrunkStream,
    /// Its blast setting for the data this relay sends.
    pub blast: Arc<BlastSwitch>,
}

/// The key of a connection: (this relay's endpoint, the node's), IPv4-mapped
/// addresses as IPv4, without flow label or scope id.
type ConnectionKey = (SocketAddr, SocketAddr);

fn connection_key(local: SocketAddr, peer: SocketAddr) -> ConnectionKey {
    let c = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    (c(local), c(peer))
}

/// Every spliced connection (one entry per live splice).
#[derive(Default)]
pub struct Connections {
    map: Mutex<HashMap<ConnectionKey, LiveConnection>>,
}

impl Connections {
    fn lock(&self) -> MutexGuard<'_, HashMap<ConnectionKey, LiveConnection>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a spliced connection whose socket has `local` and `peer`
    /// addresses (until [`Connections::unregister`]).
    pub fn register(&self, local: SocketAddr, peer: SocketAddr, c: LiveConnection) {
        self.lock().insert(connection_key(local, peer), c);
    }

    /// Removes a connection's entry, if it is still the one of `blast`'s
    /// splice (a later connection may reuse the addresses).
    pub fn unregister(&self, local: SocketAddr, peer: SocketAddr, blast: &Arc<BlastSwitch>) {
        let mut m = self.lock();
        let key = connection_key(local, peer);
        if m.get(&key).is_some_and(|c| Arc::ptr_eq(&c.blast, blast)) {
            m.remove(&key);
        }
    }

    /// The live connection whose socket has addresses `local` (this
    /// relay's) and `peer` (the node's).
    pub fn get(&self, local: SocketAddr, peer: SocketAddr) -> Option<LiveConnection> {
        self.lock().get(&connection_key(local, peer)).cloned()
    }
}
