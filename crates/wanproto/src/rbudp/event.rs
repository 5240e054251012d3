//! What an [`RbudpSession`](crate::rbudp::RbudpSession) reports: the fate
//! of each datagram, events for the daemon, errors and counters.

use std::net::IpAddr;

use thiserror::Error;

use super::codec::ControlError;

/// What [`RbudpSession::handle_datagram`](crate::rbudp::RbudpSession::handle_datagram) did with a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramOutcome {
    /// New data, stored.
    Accepted,
    /// That packet was already in: dropped.
    Duplicate,
    /// Not an RBUDP datagram, or a wrong length for its packet: dropped.
    Malformed,
    /// Another session id: dropped.
    Stray,
    /// Our session id with a wrong token: dropped.
    Forged,
    /// A blast that is complete, released or never existed: dropped.
    Stale,
    /// A blast not announced yet (the datagram overtook its BLAST_START):
    /// dropped, it will be resent.
    Early,
}

/// Something the daemon acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RbudpEvent {
    /// The peer's SESSION arrived: blasts may start; datagrams go to
    /// `addr` (`None`: the trunk peer's address) and `port`.
    Ready {
        /// The peer's UDP address, if it announced one.
        addr: Option<IpAddr>,
        /// The peer's UDP port.
        port: u16,
    },
    /// Receiver: the peer announced a blast; its bytes belong at `offset`
    /// of stream `stream`'s trunk data.
    Announced {
        /// Blast id.
        blast: u32,
        /// Stream.
        stream: u32,
        /// Trunk bytes of the stream before it.
        offset: u64,
        /// Bytes.
        length: u32,
    },
    /// Receiver: every byte of the blast is in; [`RbudpSession::take`](crate::rbudp::RbudpSession::take) it.
    Complete {
        /// Blast id.
        blast: u32,
        /// Its stream.
        stream: u32,
    },
    /// Sender: the peer has every byte of our blast.
    Delivered {
        /// Blast id.
        blast: u32,
    },
    /// Sender: the peer released the blast; its window is free again.
    Released {
        /// Blast id.
        blast: u32,
    },
}

/// A peer's control message that breaks the protocol: close the trunk.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum RbudpError {
    /// Malformed message.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A well-formed message that is not allowed now.
    #[error("RBUDP protocol violation: {0}")]
    Protocol(&'static str),
    /// A blast beyond the window we announced.
    #[error("RBUDP peer exceeded the receive window ({used} + {length} > {window} bytes)")]
    Window {
        /// Bytes held.
        used: u64,
        /// The new blast.
        length: u64,
        /// Our window.
        window: u64,
    },
}

/// Why a blast cannot start now.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum BlastError {
    /// The peer's SESSION has not arrived (or the session failed).
    #[error("the peer's RBUDP session is not known yet")]
    NotReady,
    /// No bytes.
    #[error("empty blast")]
    Empty,
    /// More bytes than one blast may carry.
    #[error("blast of {0} bytes is too large")]
    TooLarge(usize),
    /// Invalid [`BlastParams`](crate::rbudp::BlastParams) (a caller bug: requests are checked when
    /// they are decoded).
    #[error("invalid blast parameters: {0}")]
    Params(&'static str),
    /// The peer's window has less room than the blast needs.
    #[error("the peer's window has {available} bytes free, the blast needs {needed}")]
    WindowFull {
        /// Free.
        available: u64,
        /// Needed.
        needed: u64,
    },
}

/// Counters of a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RbudpStats {
    /// Datagrams sent (first transmissions and resends).
    pub datagrams_sent: u64,
    /// Of those, resends.
    pub datagrams_resent: u64,
    /// Datagram bytes sent (UDP payload).
    pub bytes_sent: u64,
    /// Blasts started.
    pub blasts_sent: u64,
    /// Blasts the peer reported complete.
    pub blasts_delivered: u64,
    /// MISSING reports received (each starts a resend round).
    pub reports_received: u64,
    /// Datagrams with new data.
    pub datagrams_received: u64,
    /// Data bytes accepted.
    pub bytes_received: u64,
    /// Blasts received complete.
    pub blasts_received: u64,
    /// MISSING reports sent.
    pub reports_sent: u64,
    /// Dropped: duplicates.
    pub dropped_duplicate: u64,
    /// Dropped: malformed.
    pub dropped_malformed: u64,
    /// Dropped: another session id.
    pub dropped_stray: u64,
    /// Dropped: wrong token.
    pub dropped_forged: u64,
    /// Dropped: blast not active.
    pub dropped_stale: u64,
    /// Dropped: blast not announced yet.
    pub dropped_early: u64,
}
