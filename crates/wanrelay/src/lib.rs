//! wanrelay: the relay daemon of wanmpi (tokio), on top of the I/O-free
//! protocol core `wanproto`.
//!
//! * [`config`]: the configuration file and the pre-shared key file;
//! * [`inside`]: shim connections from member nodes (connect preamble,
//!   reply, stream);
//! * [`trunk`]: authenticated trunk connections to peer relays;
//! * [`stream`]: splicing a TCP connection with a trunk stream, and the far
//!   side's connect to the destination node;
//! * [`relay`]: shared state, listeners, dialers, shutdown;
//! * [`metrics`]: counters and the Prometheus text endpoint;
//! * [`rbudp`]: the RBUDP data path (UDP socket, sessions, blasts) for
//!   peers with `transport = "rbudp"`.
//!
//! The reference for operators is docs/wanrelay.md; the wire formats are in
//! docs/wanproto.md.

pub mod config;
pub mod inside;
pub mod metrics;
pub mod rbudp;
pub mod relay;
pub mod stream;
pub mod trunk;

use wanproto::Reason;

/// The label of a reason code in logs and metrics.
pub fn reason_label(r: Reason) -> &'static str {
    match r {
        Reason::Refused => "refused",
        Reason::Unreachable => "unreachable",
        Reason::TimedOut => "timed_out",
        Reason::NotMember => "not_member",
        Reason::SourceMismatch => "source_mismatch",
        Reason::NoRoute => "no_route",
        Reason::ConnectionReset => "connection_reset",
        Reason::Overloaded => "overloaded",
        Reason::ShuttingDown => "shutting_down",
        Reason::Protocol => "protocol",
        Reason::UnsupportedVersion => "unsupported_version",
        Reason::TrunkLost => "trunk_lost",
        Reason::Internal => "internal",
        Reason::NoSuchConnection => "no_such_connection",
        Reason::Other(_) => "other",
    }
}
