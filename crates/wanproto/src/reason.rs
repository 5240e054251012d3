//! Reason codes on the wire: why a stream was refused or reset, and why a
//! trunk connection was closed.
//!
//! Both are one byte. Unknown values are kept (`Other`) rather than
//! rejected, so a newer peer's new reason does not break an older one.

use std::fmt;

/// Why a stream was refused or reset: the byte of a trunk `RESET` frame and
/// of the relay's reply to the inside preamble ([`crate::preamble::Reply`]).
///
/// The shim turns a refusal into an `errno` for the application; the
/// suggested mapping is in [`Reason::errno_name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// 1: the destination refused the connection (`ECONNREFUSED`).
    Refused,
    /// 2: the destination host or network is unreachable (`EHOSTUNREACH`).
    Unreachable,
    /// 3: connecting to the destination timed out (`ETIMEDOUT`).
    TimedOut,
    /// 4: the destination is not a declared node of the far cluster; relays
    /// are never open proxies (`ECONNREFUSED`).
    NotMember,
    /// 5: the preamble's source is not the address the connection came
    /// from, or not a node of the relay's own cluster (`EACCES`).
    SourceMismatch,
    /// 6: no trunk to the destination's cluster is up (`ENETUNREACH`).
    NoRoute,
    /// 7: an endpoint reset its TCP connection (`ECONNRESET`).
    ConnectionReset,
    /// 8: a limit was reached (streams, memory) (`EAGAIN`).
    Overloaded,
    /// 9: the relay is shutting down or the trunk is going away
    /// (`ECONNREFUSED`).
    ShuttingDown,
    /// 10: a malformed preamble or an out-of-protocol stream frame
    /// (`EPROTO`).
    Protocol,
    /// 11: the preamble's version is not supported (`EPROTO`).
    UnsupportedVersion,
    /// 12: the trunk carrying the stream was lost (`ECONNABORTED`).
    TrunkLost,
    /// 13: an internal error in a relay (`EIO`).
    Internal,
    /// 14: a blast request for an open connection (preamble kind 4) names
    /// no live connection of this relay (`ENOENT`).
    NoSuchConnection,
    /// Any other non-zero code, kept as received (`EIO`).
    Other(u8),
}

impl Reason {
    /// The byte on the wire (never 0: 0 means "ok" in a reply).
    pub fn code(self) -> u8 {
        match self {
            Reason::Refused => 1,
            Reason::Unreachable => 2,
            Reason::TimedOut => 3,
            Reason::NotMember => 4,
            Reason::SourceMismatch => 5,
            Reason::NoRoute => 6,
            Reason::ConnectionReset => 7,
            Reason::Overloaded => 8,
            Reason::ShuttingDown => 9,
            Reason::Protocol => 10,
            Reason::UnsupportedVersion => 11,
            Reason::TrunkLost => 12,
            Reason::Internal => 13,
            Reason::NoSuchConnection => 14,
            Reason::Other(c) => c,
        }
    }

    /// The reason for a wire byte; `None` for 0, which is not a reason.
    pub fn from_code(code: u8) -> Option<Reason> {
        Some(match code {
            0 => return None,
            1 => Reason::Refused,
            2 => Reason::Unreachable,
            3 => Reason::TimedOut,
            4 => Reason::NotMember,
            5 => Reason::SourceMismatch,
            6 => Reason::NoRoute,
            7 => Reason::ConnectionReset,
            8 => Reason::Overloaded,
            9 => Reason::ShuttingDown,
            10 => Reason::Protocol,
            11 => Reason::UnsupportedVersion,
            12 => Reason::TrunkLost,
            13 => Reason::Internal,
            14 => Reason::NoSuchConnection,
            c => Reason::Other(c),
        })
    }

    /// The `errno` the shim should report for this reason (its name; the
    /// C side uses the constant of that name).
    pub fn errno_name(self) -> &'static str {
        match self {
            Reason::Refused | Reason::NotMember | Reason::ShuttingDown => "ECONNREFUSED",
            Reason::Unreachable => "EHOSTUNREACH",
            Reason::TimedOut => "ETIMEDOUT",
            Reason::SourceMismatch => "EACCES",
            Reason::NoRoute => "ENETUNREACH",
            Reason::ConnectionReset => "ECONNRESET",
            Reason::Overloaded => "EAGAIN",
            Reason::Protocol | Reason::UnsupportedVersion => "EPROTO",
            Reason::TrunkLost => "ECONNABORTED",
            Reason::NoSuchConnection => "ENOENT",
            Reason::Internal | Reason::Other(_) => "EIO",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Reason::Refused => "connection refused by the destination",
            Reason::Unreachable => "destination unreachable",
            Reason::TimedOut => "connect timed out",
            Reason::NotMember => "destination is not a member of its cluster",
            Reason::SourceMismatch => "source does not match the connection",
            Reason::NoRoute => "no trunk to the destination cluster",
            Reason::ConnectionReset => "connection reset by an endpoint",
            Reason::Overloaded => "relay overloaded",
            Reason::ShuttingDown => "relay shutting down",
            Reason::Protocol => "protocol error",
            Reason::UnsupportedVersion => "unsupported preamble version",
            Reason::TrunkLost => "trunk lost",
            Reason::Internal => "internal relay error",
            Reason::NoSuchConnection => "no such connection at this relay",
            Reason::Other(c) => return write!(f, "reason {c}"),
        };
        f.write_str(name)
    }
}

/// Why a trunk connection was closed: the code of a `GOAWAY` frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseCode {
    /// 0: graceful (drain and close).
    NoError,
    /// 1: a malformed or out-of-protocol frame.
    Protocol,
    /// 2: a peer sent more than its credit.
    FlowControl,
    /// 3: a frame longer than allowed.
    FrameSize,
    /// 4: a peer opened more streams than allowed.
    StreamLimit,
    /// 5: the handshake did not authenticate.
    AuthFailed,
    /// 6: handshake or idle timeout.
    Timeout,
    /// 7: an internal error.
    Internal,
    /// 8: the relay is shutting down now.
    Shutdown,
    /// 9: unsupported protocol version.
    Version,
    /// 10: too many control frames queued (a peer that sends but never reads).
    Flood,
    /// 11: a HELLO resumes a session this relay does not have (restarted,
    /// or the session expired).
    UnknownSession,
    /// Any other code, kept as received.
    Other(u8),
}

impl CloseCode {
    /// The byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            CloseCode::NoError => 0,
            CloseCode::Protocol => 1,
            CloseCode::FlowControl => 2,
            CloseCode::FrameSize => 3,
            CloseCode::StreamLimit => 4,
            CloseCode::AuthFailed => 5,
            CloseCode::Timeout => 6,
            CloseCode::Internal => 7,
            CloseCode::Shutdown => 8,
            CloseCode::Version => 9,
            CloseCode::Flood => 10,
            CloseCode::UnknownSession => 11,
            CloseCode::Other(c) => c,
        }
    }

    /// The close code for a wire byte.
    pub fn from_code(code: u8) -> CloseCode {
        match code {
            0 => CloseCode::NoError,
            1 => CloseCode::Protocol,
            2 => CloseCode::FlowControl,
            3 => CloseCode::FrameSize,
            4 => CloseCode::StreamLimit,
            5 => CloseCode::AuthFailed,
            6 => CloseCode::Timeout,
            7 => CloseCode::Internal,
            8 => CloseCode::Shutdown,
            9 => CloseCode::Version,
            10 => CloseCode::Flood,
            11 => CloseCode::UnknownSession,
            c => CloseCode::Other(c),
        }
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            CloseCode::NoError => "no error",
            CloseCode::Protocol => "protocol error",
            CloseCode::FlowControl => "flow control error",
            CloseCode::FrameSize => "frame size error",
            CloseCode::StreamLimit => "stream limit exceeded",
            CloseCode::AuthFailed => "authentication failed",
            CloseCode::Timeout => "timeout",
            CloseCode::Internal => "internal error",
            CloseCode::Shutdown => "shutting down",
            CloseCode::Version => "unsupported protocol version",
            CloseCode::Flood => "control frame flood",
            CloseCode::UnknownSession => "unknown session",
            CloseCode::Other(c) => return write!(f, "close code {c}"),
        };
        f.write_str(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_codes_round_trip() {
        assert_eq!(Reason::from_code(0), None);
        for c in 1..=255u8 {
            assert_eq!(Reason::from_code(c).map(Reason::code), Some(c));
        }
    }

    #[test]
    fn close_codes_round_trip() {
        for c in 0..=255u8 {
            assert_eq!(CloseCode::from_code(c).code(), c);
        }
    }
}
