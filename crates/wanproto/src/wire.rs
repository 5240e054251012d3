//! The numbers and names every byte format of the crate shares: the
//! constants of the trunk frames, of the shim's preambles and of RBUDP's
//! datagrams and control messages; the two roles of a trunk connection;
//! stream ids; and what an incremental decoder returns.
//!
//! The bottom of the crate: this module uses nothing of it, and every
//! other module takes these from here. The codecs re-export the constants
//! of their format where their users have always found them
//! (`frame::MAX_WINDOW`, `preamble::PREAMBLE_LEN`, `rbudp::MIN_DATAGRAM`,
//! ...). A format's type codes stay private to its codec.

/// The result of an incremental decoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded<T> {
    /// The input is a valid prefix; at least this many more bytes are
    /// needed (never 0).
    NeedMore(usize),
    /// A complete value and the number of input bytes it took.
    Complete(T, usize),
}

/// A stream id: non-zero. Streams opened by the connection's initiator
/// (the relay that connected) are odd, by the acceptor even.
pub type StreamId = u32;

/// Which end of a trunk connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The relay that made the TCP connection (role byte 1, odd stream ids).
    Initiator,
    /// The relay that accepted it (role byte 2, even stream ids).
    Acceptor,
}

impl Role {
    /// The role byte in HELLO.
    pub fn code(self) -> u8 {
        match self {
            Role::Initiator => 1,
            Role::Acceptor => 2,
        }
    }

    /// The other end.
    pub fn peer(self) -> Role {
        match self {
            Role::Initiator => Role::Acceptor,
            Role::Acceptor => Role::Initiator,
        }
    }

    /// The first stream id this role opens (1 or 2).
    pub fn first_stream_id(self) -> StreamId {
        self.code() as StreamId
    }

    /// Whether `id` belongs to streams this role opens.
    pub fn owns(self, id: StreamId) -> bool {
        (id % 2 == 1) == (self == Role::Initiator)
    }
}

// ---------------------------------------------------------------------------
// Trunk frames (crate::frame)

/// Length of a frame header.
pub const FRAME_HEADER_LEN: usize = 10;
/// Largest DATA payload (and so the largest frame payload of any type).
pub const MAX_DATA_PAYLOAD: usize = 65_536;
/// Largest flow-control window and WINDOW_UPDATE increment: 2^31 - 1.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The first four bytes of a HELLO payload: "WANT".
pub const TRUNK_MAGIC: [u8; 4] = *b"WANT";
/// The trunk protocol version.
pub const TRUNK_VERSION: u8 = 1;
/// Length of a HELLO nonce.
pub const NONCE_LEN: usize = 32;
/// Length of an AUTH MAC.
pub const MAC_LEN: usize = 32;
/// Longest relay or cluster name.
pub const MAX_NAME_LEN: usize = 64;
/// Fixed part of a HELLO payload (without the two names).
pub(crate) const HELLO_FIXED_LEN: usize = 50;
/// Length of a trunk session id (in a resuming HELLO).
pub const SESSION_ID_LEN: usize = 16;
/// Largest HELLO payload (a resuming one, with its session id).
pub const MAX_HELLO_LEN: usize = HELLO_FIXED_LEN + 2 * MAX_NAME_LEN + SESSION_ID_LEN;
/// Smallest initial window a HELLO may announce.
pub const MIN_INITIAL_WINDOW: u32 = 1024;
/// Length of an OPEN payload without a blast request.
pub(crate) const OPEN_LEN: usize = 38;
/// Length of an OPEN payload with a blast request.
pub(crate) const OPEN_BLAST_LEN: usize = OPEN_LEN + BLAST_REQUEST_LEN;

// ---------------------------------------------------------------------------
// Preambles between the shim and the relays (crate::preamble)

/// The first four bytes of a preamble: "WSHP".
pub const PREAMBLE_MAGIC: [u8; 4] = *b"WSHP";
/// The first two bytes of a reply: "WR".
pub const REPLY_MAGIC: [u8; 2] = *b"WR";
/// The only preamble version.
pub const PREAMBLE_VERSION: u8 = 1;
/// Length of a connect or delivery preamble.
pub const PREAMBLE_LEN: usize = 48;
/// Length of a blast request (after a kind-3 preamble, in a trunk OPEN).
pub const BLAST_REQUEST_LEN: usize = 16;
/// Length of a connect preamble with a blast request (kind 3).
pub const BLAST_PREAMBLE_LEN: usize = PREAMBLE_LEN + BLAST_REQUEST_LEN;
/// The kind byte of a connect preamble with a blast request.
pub const KIND_CONNECT_BLAST: u8 = 3;
/// The kind byte of a blast request for an open connection
/// ([`crate::preamble::BlastUpdate`]).
pub const KIND_BLAST_UPDATE: u8 = 4;
/// Length of a reply.
pub const REPLY_LEN: usize = 4;

// ---------------------------------------------------------------------------
// RBUDP datagrams and control messages (crate::rbudp)

/// Datagram magic, "RB".
pub const DATAGRAM_MAGIC: [u8; 2] = *b"RB";
/// The RBUDP version (datagrams and SESSION).
pub const RBUDP_VERSION: u8 = 1;
/// Length of a datagram header.
pub const DATAGRAM_HEADER_LEN: usize = 24;
/// Smallest configurable datagram (UDP payload, header included).
pub const MIN_DATAGRAM: usize = 64;
/// Largest datagram: the largest UDP payload over IPv4.
pub const MAX_DATAGRAM: usize = 65_507;
/// Most packets in one blast (the bitmap of a report fits one frame).
pub const MAX_BLAST_PACKETS: u32 = 1 << 18;
/// Longest MISSING bitmap, bytes.
pub const MAX_BITMAP_LEN: usize = (MAX_BLAST_PACKETS / 8) as usize;
/// IPv4 and UDP headers: what a datagram costs on the wire beyond its payload.
pub const IPV4_UDP_OVERHEAD: u64 = 28;
/// Largest receive window an RBUDP session may announce (4 GiB - 1);
/// `rbudp::MAX_WINDOW`.
pub const RBUDP_MAX_WINDOW: u64 = u32::MAX as u64;
