//! wanrelay: the relay daemon of wanmpi (tokio), on top of the I/O-free
//! protocol core `wanproto`.
//!
//! Layers, each calling only the ones below it:
//!
//! ```text
//! main.rs     the command line: --config, --check, exit codes
//!   |
//! daemon/     the relay: listeners and accept loops, dialers, trunk events,
//!   |         shutdown, the metrics page and endpoint
//! streams/    a local TCP connection carried as a trunk stream: the LAN side
//!   |         (inside: preamble, route, reply), the far side (deliver),
//!   |         splicing both ways
//! transport/  what a trunk carries streams over, behind one interface
//!   |         (transport/mod.rs): the TCP trunk (trunk.rs, tcp.rs) and
//!   |         RBUDP (rbudp/, its bulk data over UDP); the trunk table
//! shared/     the clock, the counters, the context every layer reads
//! config/     the configuration file and the key file
//! ```
//!
//! A trunk reports what it cannot decide alone (who the authenticated peer
//! is, whether a stream the peer opened is delivered, RBUDP control, its
//! close) through [`transport::trunk::TrunkEvents`], which the daemon
//! implements: calls go down, events come up through that interface only.
//!
//! The reference for operators is docs/wanrelay.md; the wire formats are in
//! docs/wanproto.md.

pub mod config;
pub mod daemon;
pub mod shared;
pub mod streams;
pub mod transport;
