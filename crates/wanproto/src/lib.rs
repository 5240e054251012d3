//! wanproto: the protocol core of the wanrelay relays, without I/O and
//! without a clock (the quinn model).
//!
//! Modules, from the bottom up; each uses only those above it in this
//! list (no circle):
//!
//! * [`wire`]: what every byte format shares: [`Role`], [`StreamId`],
//!   [`Decoded`], and the constants of the trunk frames, the preambles and
//!   RBUDP (each codec re-exports its own: `frame::MAX_WINDOW`,
//!   `rbudp::MIN_DATAGRAM`, ...).
//! * [`reason`]: reason codes shared by the preamble reply and the trunk,
//!   and the trunk's close codes.
//! * [`pacer`]: a token bucket for the WAN side.
//! * [`select`]: which trunk carries a new stream (by destination host, or
//!   least loaded).
//! * [`blast_request`]: the ranks' request that a connection be blasted,
//!   carried by a preamble and by the trunk OPEN.
//! * [`auth`]: the pre-shared key and the handshake's MACs (HMAC-SHA256
//!   both ways).
//! * [`preamble`]: the fixed-size messages between the shim (libwanshim, C)
//!   and the relays: the connect preamble, the relay's reply, and the
//!   delivery preamble that carries the original source to the destination
//!   (`preamble/tests.rs`: their test vectors).
//! * [`frame`]: the trunk frame format between two relays.
//! * [`connection`]: [`TrunkConnection`], one trunk connection as a state
//!   machine: handshake, stream multiplexing, per-stream flow control,
//!   keepalive (`connection/mod.rs`); its settings (`config.rs`), what it
//!   reports (`event.rs`) and one stream's state (`stream.rs`).
//! * [`rbudp`]: Reliable Blast UDP, the bulk transport for dedicated links:
//!   blasts at a fixed rate over UDP, missing-packet bitmaps over the trunk
//!   (`rbudp/mod.rs`); its settings (`config.rs`), byte formats
//!   (`codec.rs`), what a session reports (`event.rs`) and the session
//!   itself, sender and receiver (`session.rs`).
//!
//! Time is a `u64` count of nanoseconds on any monotone clock the caller
//! chooses; the daemon passes `CLOCK_MONOTONIC`, tests pass virtual time.
//! Nothing a peer sends can make this crate panic or allocate without
//! bound: malformed input is an error value. The byte-exact formats are in
//! docs/wanproto.md.

#![warn(missing_docs)]

pub mod auth;
pub mod blast_request;
pub mod connection;
pub mod frame;
pub mod pacer;
pub mod preamble;
pub mod rbudp;
pub mod reason;
pub mod select;
pub mod wire;

pub use auth::{KeyError, PresharedKey};
pub use blast_request::{BlastRequest, BlastRequestError};
pub use connection::{
    Config, ConfigError, ConnectionError, ConnectionStats, Event, OpenError, PeerInfo, ReadOutcome,
    StreamError, StreamStats, TrunkConnection, MIN_RESUME_BUFFER,
};
pub use pacer::Pacer;
pub use preamble::{BlastUpdate, Inside, Preamble, PreambleError, Reply};
pub use rbudp::{RbudpConfig, RbudpEvent, RbudpSession, RbudpStats};
pub use reason::{CloseCode, Reason};
pub use select::{Policy, TrunkCandidate, TrunkSelector};
pub use wire::{Decoded, Role, StreamId};
