//! Reliable Blast UDP (RBUDP): bulk data blasted over UDP at a fixed rate,
//! the missing packets reported as a bitmap over a reliable control
//! channel, resent until every packet is in.
//!
//! One [`RbudpSession`] per trunk connection carries blasts both ways: it
//! is the sender of this relay's blasts and the receiver of the peer's.
//! It does no I/O and reads no clock: the daemon passes datagrams
//! ([`RbudpSession::handle_datagram`]), control messages from the trunk
//! ([`RbudpSession::handle_control`]) and `now`, and takes datagrams to
//! send ([`RbudpSession::poll_datagram`], paced at the configured rate),
//! control messages for the trunk ([`RbudpSession::poll_control`], sent
//! as RBUDP frames), events and one timer.
//!
//! A blast's life (sender S, receiver R):
//!
//! ```text
//! S: BLAST_START(blast, stream, offset, length, chunk)   over the trunk
//! S: datagrams 0..n                                      over UDP, paced
//! S: BLAST_DONE(blast, round 0)                          over the trunk
//! R: after report_delay: MISSING(blast, 0, bitmap)  -- or COMPLETE(blast) as soon as all are in
//! S: resends the missing ones, BLAST_DONE(blast, 1) ... until COMPLETE
//! R: the daemon takes the bytes, delivers them, then RELEASE(blast)
//! ```
//!
//! Several blasts may be in flight (their total is bounded by the
//! receiver's announced window); resends go before new data.
//!
//! **Per-blast rate and datagram size.** A blast may go slower than the
//! session's rate and in smaller datagrams ([`BlastParams`], from a pair of
//! ranks' request): its datagrams (resends included) are charged to the
//! session's pacer at `cost * session_rate / blast_rate`, so, blasts being
//! sent strictly one after another, it leaves at its own rate; its `chunk`
//! travels in BLAST_START, so the receiver needs nothing else.
//!
//! **Authentication.** The session secret is exported from the trunk's
//! authenticated handshake ([`crate::TrunkConnection::export_secret`]).
//! Each end picks a random 32-bit session id for the datagrams it
//! receives and announces it in SESSION; every datagram to it carries that
//! id and the 64-bit token `HMAC-SHA256(secret, "wanproto rbudp v1 token"
//! || receiver role || session id)[0..8]`. A datagram with another id is
//! stray, with a wrong token forged, for a blast that is not active stale,
//! for a blast not yet announced early, for a packet already received a
//! duplicate: each is dropped and counted, never panics, never allocates.
//! Like the trunk's frames after the handshake, datagram payloads are not
//! integrity-protected: the token stops blind (off-path) forgery and
//! replays from other connections, not an on-path attacker.
//!
//! **Not TCP-friendly.** The sender blasts at its configured rate whatever
//! the loss: only for dedicated links, with an explicit rate at or below
//! the link's (docs/rbudp.md).
//!
//! The byte-exact formats are in docs/rbudp.md.

mod codec;
mod config;
mod event;
mod session;

pub use self::codec::{
    datagram_session, session_token, Control, ControlError, DatagramError, DatagramHeader,
};
pub use self::config::{RbudpConfig, RbudpConfigError};
pub use self::event::{BlastError, DatagramOutcome, RbudpError, RbudpEvent, RbudpStats};
pub use self::session::{BlastParams, RbudpSession};
pub use crate::wire::{
    DATAGRAM_HEADER_LEN, DATAGRAM_MAGIC, IPV4_UDP_OVERHEAD, MAX_BITMAP_LEN, MAX_BLAST_PACKETS,
    MAX_DATAGRAM, MIN_DATAGRAM, RBUDP_MAX_WINDOW as MAX_WINDOW, RBUDP_VERSION,
};
