//! Streams: a local TCP connection carried as a stream over a trunk.
//!
//! * [`inside`]: the LAN side, connections from the shim on member nodes
//!   (connect preamble, route, open the stream, reply), and kind-4 blast
//!   requests for an open connection;
//! * [`deliver`]: the far side of a stream the peer opened: connect to the
//!   destination node, write the delivery preamble, accept the stream;
//! * [`splice`]: both ways between a socket and its stream until both
//!   finish or either side resets;
//! * [`connections`]: the connections being spliced, by their endpoints
//!   (what a kind-4 blast request names);
//! * [`reply`]: the 4-byte reply to the shim and a graceful close.
//!
//! These files use the transport interface ([`crate::transport`]), the
//! trunk table ([`crate::transport::trunks`]) and the shared bottom, never
//! the daemon above them; each uses only those listed after it (and this
//! file's [`Streams`]).

pub mod connections;
pub mod deliver;
pub mod inside;
pub mod reply;
pub mod splice;

use std::sync::Arc;

use self::connections::Connections;
use crate::shared::context::Context;
use crate::transport::trunks::Trunks;

/// What every stream task shares: the relay's context, its trunks (to
/// route a new stream), and the registry of spliced connections.
pub struct Streams {
    /// The relay's context.
    pub ctx: Arc<Context>,
    /// The trunks of every peer.
    pub trunks: Arc<Trunks>,
    /// The connections being spliced.
    pub connections: Connections,
}

impl Streams {
    /// The stream tasks' shared state for a relay with `ctx` and `trunks`.
    pub fn new(ctx: Arc<Context>, trunks: Arc<Trunks>) -> Arc<Streams> {
        Arc::new(Streams {
            ctx,
            trunks,
            connections: Connections::default(),
        })
    }
}
