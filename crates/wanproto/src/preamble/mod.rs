//! The preambles between the shim (libwanshim, C) and the relays.
//!
//! Four fixed-size messages, all integers big-endian (network order):
//!
//! * the **connect preamble** ([`Kind::Connect`], 48 bytes, or 64 with a
//!   [`BlastRequest`]): the first bytes the shim writes on a TCP connection
//!   to its local relay; it names the real destination and the original
//!   source, and may ask that the connection's bulk data be blasted (RBUDP)
//!   at a given rate and datagram size;
//! * the **blast request for an open connection** ([`BlastUpdate`], kind 4,
//!   64 bytes): the only bytes the shim writes on a short control
//!   connection to its local relay; it names a connection the relay
//!   already carries and sets (or withdraws) the blast request of the data
//!   this relay sends to the WAN for it;
//! * the **reply** ([`Reply`], 4 bytes): the relay's answer, sent once the
//!   far relay has connected to the destination (ok) or failed (a
//!   [`Reason`]); application bytes follow an ok reply on the same
//!   connection;
//! * the **delivery preamble** ([`Kind::Deliver`], 48 bytes, same layout as
//!   the connect preamble): the first bytes the far relay writes on its
//!   connection to the destination node; the destination's shim strips it
//!   and reports `source` from `accept()`/`getpeername()`. It has no reply.
//!
//! Preamble layout (offsets in bytes):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `57 53 48 50` ("WSHP") |
//! | 4 | 1 | version, 1 |
//! | 5 | 1 | kind: 1 = connect, 2 = deliver, 3 = connect with a blast request, 4 = blast request for an open connection |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 1 | destination family: 4 or 6 |
//! | 9 | 1 | source family: 4 or 6 |
//! | 10 | 2 | destination port (non-zero) |
//! | 12 | 2 | source port (non-zero) |
//! | 14 | 2 | reserved, 0 |
//! | 16 | 16 | destination address: IPv4 in bytes 16..20 then 12 zero bytes, or IPv6 |
//! | 32 | 16 | source address, same encoding |
//!
//! Kind 3 is kind 1 followed by the 16-byte blast request ([`BlastRequest`],
//! 64 bytes in all):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 48 | 8 | rate: bytes per second on the wire (IP bytes), > 0 |
//! | 56 | 2 | payload: UDP payload of a full datagram, [`crate::wire::MIN_DATAGRAM`]..=[`crate::wire::MAX_DATAGRAM`] |
//! | 58 | 6 | reserved, 0 |
//!
//! Kind 4 ([`BlastUpdate`]) has the layout of kind 3, with *destination* =
//! the relay's endpoint of the open connection and *source* = the node's;
//! rate 0 with payload 0 withdraws the request (any other rate 0 is an
//! error).
//!
//! Reply layout: `57 52` ("WR"), version 1, then status: 0 = ok, otherwise
//! the [`Reason`] code of the refusal. Kinds 1, 3 and 4 get one.
//!
//! Decoders are strict (every reserved and padding byte must be zero,
//! addresses must be specified, ports non-zero) and incremental: given a
//! prefix they check what is there and answer [`Decoded::NeedMore`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

pub use crate::blast_request::{BlastRequest, BlastRequestError};
pub use crate::wire::{
    BLAST_PREAMBLE_LEN, BLAST_REQUEST_LEN, KIND_BLAST_UPDATE, KIND_CONNECT_BLAST, PREAMBLE_LEN,
    PREAMBLE_MAGIC, PREAMBLE_VERSION, REPLY_LEN, REPLY_MAGIC,
};

use crate::reason::Reason;
use crate::wire::Decoded;

/// Which preamble: the two share one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// 1: shim to its local relay.
    Connect,
    /// 2: far relay to the destination node.
    Deliver,
}

impl Kind {
    /// The byte on the wire.
    pub fn code(self) -> u8 {
        match self {
            Kind::Connect => 1,
            Kind::Deliver => 2,
        }
    }
}

/// A connect or delivery preamble.
///
/// IPv6 flow labels and scope ids are not carried (they mean nothing on the
/// far side); decoded IPv6 addresses have them 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Preamble {
    /// Connect or deliver.
    pub kind: Kind,
    /// The address the application connected to.
    pub destination: SocketAddr,
    /// The application's own address (bound address of the connecting socket).
    pub source: SocketAddr,
    /// A connect preamble's blast request (kind 3 on the wire); always
    /// `None` for a delivery preamble.
    pub blast: Option<BlastRequest>,
}

/// A blast request for a connection the relay already carries (kind 4 on
/// the wire, 64 bytes): sent by the shim on a new, short TCP connection to
/// an inside listener of its local relay, for connections opened before
/// the ranks asked for blasts (MPICH connects during `MPI_Init`). The relay
/// then blasts (or, withdrawn, no longer blasts) the bulk data it reads
/// from that connection's node socket, i.e. what it sends to the WAN for
/// it; the far relay's direction is upgraded by the far node's own kind 4.
///
/// Wire format: the 48 bytes of a connect preamble with kind 4,
/// *destination* = [`BlastUpdate::relay_end`], *source* =
/// [`BlastUpdate::node_end`], then the 16 bytes of a [`BlastRequest`], or
/// 16 zero bytes (rate 0, payload 0) to withdraw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlastUpdate {
    /// The relay's endpoint of the connection (its address and port on the
    /// relay's socket): the inside listen address for a connection the
    /// node opened through the relay, the relay's own address and
    /// ephemeral port for one the relay delivered to the node.
    pub relay_end: SocketAddr,
    /// The node's endpoint of the connection (its address and port).
    pub node_end: SocketAddr,
    /// The new request; `None` withdraws it (the connection's data goes
    /// back to the policy it had when it opened).
    pub blast: Option<BlastRequest>,
}

impl BlastUpdate {
    /// The 64 bytes of this message.
    pub fn encode(&self) -> [u8; BLAST_PREAMBLE_LEN] {
        let mut b = [0u8; BLAST_PREAMBLE_LEN];
        encode_header(
            &mut b[..PREAMBLE_LEN],
            KIND_BLAST_UPDATE,
            self.relay_end,
            self.node_end,
        );
        if let Some(r) = &self.blast {
            b[PREAMBLE_LEN..].copy_from_slice(&r.encode());
        }
        b
    }
}

/// What a shim sends first on a connection to an inside listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Inside {
    /// Kind 1 or 3: a new connection to relay.
    Connect(Preamble),
    /// Kind 4: a blast request for an open connection.
    BlastUpdate(BlastUpdate),
}

impl Inside {
    /// Decodes the first message of an inside connection from the start
    /// of `buf`: a connect preamble (kind 1 or 3) or a blast request for an
    /// open connection (kind 4), as strictly and incrementally as
    /// [`Preamble::decode_connect`].
    ///
    /// # Errors
    /// A [`PreambleError`] as soon as a byte present in `buf` is wrong.
    pub fn decode(buf: &[u8]) -> Result<Decoded<Inside>, PreambleError> {
        let accepts =
            |k| k == Kind::Connect.code() || k == KIND_CONNECT_BLAST || k == KIND_BLAST_UPDATE;
        let (kind, destination, source) = match decode_header(buf, accepts, KIND_BLAST_UPDATE)? {
            Decoded::NeedMore(n) => return Ok(Decoded::NeedMore(n)),
            Decoded::Complete(h, _) => h,
        };
        if kind == Kind::Connect.code() {
            return Ok(Decoded::Complete(
                Inside::Connect(Preamble::connect(destination, source)),
                PREAMBLE_LEN,
            ));
        }
        let withdraw = kind == KIND_BLAST_UPDATE;
        let blast = match decode_extension(&buf[PREAMBLE_LEN..], withdraw)? {
            Decoded::NeedMore(n) => return Ok(Decoded::NeedMore(n)),
            Decoded::Complete(r, _) => r,
        };
        let message = if withdraw {
            Inside::BlastUpdate(BlastUpdate {
                relay_end: destination,
                node_end: source,
                blast,
            })
        } else {
            Inside::Connect(Preamble {
                kind: Kind::Connect,
                destination,
                source,
                blast,
            })
        };
        Ok(Decoded::Complete(message, BLAST_PREAMBLE_LEN))
    }
}

/// What is wrong with a preamble or a reply.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum PreambleError {
    /// The magic bytes are wrong: not a wanshim preamble.
    #[error("bad magic: not a wanshim preamble")]
    BadMagic,
    /// A version this code does not speak.
    #[error("unsupported preamble version {0}")]
    UnsupportedVersion(u8),
    /// Kind byte other than the one expected (for a connect preamble: 1
    /// or 3).
    #[error("preamble kind {found}, expected {}", expected_kinds(*expected))]
    WrongKind {
        /// The byte received.
        found: u8,
        /// The kind the decoder was asked for: 1 (a connect preamble, kind
        /// 1 or 3), 2 (a delivery preamble) or 4 (the first message of an
        /// inside connection, [`Inside::decode`]: kind 1, 3 or 4).
        expected: u8,
    },
    /// A reserved or padding byte is not zero.
    #[error("reserved byte {offset} is not zero")]
    NonZeroReserved {
        /// Offset of the byte in the message.
        offset: usize,
    },
    /// An address family byte other than 4 or 6.
    #[error("address family {0} (expected 4 or 6)")]
    BadFamily(u8),
    /// Port 0.
    #[error("port 0 in the {0} address")]
    ZeroPort(&'static str),
    /// 0.0.0.0 or ::.
    #[error("unspecified {0} address")]
    UnspecifiedAddress(&'static str),
    /// A kind-3 or kind-4 preamble whose blast request is invalid.
    #[error("{0}")]
    BlastRequest(BlastRequestError),
}

fn expected_kinds(expected: u8) -> &'static str {
    match expected {
        1 => "1 (connect) or 3 (connect with a blast request)",
        2 => "2 (deliver)",
        4 => "1 (connect), 3 (connect with a blast request) or 4 (blast request for an open connection)",
        _ => "another kind",
    }
}

impl Preamble {
    /// A connect preamble (shim to local relay).
    pub fn connect(destination: SocketAddr, source: SocketAddr) -> Preamble {
        Preamble {
            kind: Kind::Connect,
            destination,
            source,
            blast: None,
        }
    }

    /// A connect preamble with a blast request (kind 3, 64 bytes).
    pub fn connect_with_blast(
        destination: SocketAddr,
        source: SocketAddr,
        blast: BlastRequest,
    ) -> Preamble {
        Preamble {
            kind: Kind::Connect,
            destination,
            source,
            blast: Some(blast),
        }
    }

    /// A delivery preamble (far relay to destination node).
    pub fn deliver(destination: SocketAddr, source: SocketAddr) -> Preamble {
        Preamble {
            kind: Kind::Deliver,
            destination,
            source,
            blast: None,
        }
    }

    /// The encoded length: 48, or 64 with a blast request.
    pub fn encoded_len(&self) -> usize {
        if self.blast.is_some() {
            BLAST_PREAMBLE_LEN
        } else {
            PREAMBLE_LEN
        }
    }

    /// The bytes of this preamble: 48, or 64 for a connect preamble with a
    /// blast request (kind 3).
    ///
    /// # Panics
    /// If a delivery preamble has a blast request (a caller bug: only
    /// connect preambles carry one).
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            self.blast.is_none() || self.kind == Kind::Connect,
            "a delivery preamble never carries a blast request"
        );
        let mut b = vec![0u8; self.encoded_len()];
        let kind = match self.blast {
            Some(_) => KIND_CONNECT_BLAST,
            None => self.kind.code(),
        };
        encode_header(&mut b[..PREAMBLE_LEN], kind, self.destination, self.source);
        if let Some(r) = &self.blast {
            b[PREAMBLE_LEN..].copy_from_slice(&r.encode());
        }
        b
    }

    /// Decodes a connect preamble (kind 1, or kind 3 with its blast
    /// request) from the start of `buf` (what the local relay reads first
    /// from a shim connection).
    ///
    /// # Errors
    /// A [`PreambleError`] as soon as a byte present in `buf` is wrong, even
    /// before all 48 (64) have arrived; the relay then replies
    /// [`Reply::Refused`] with [`PreambleError::reason`] and closes.
    pub fn decode_connect(buf: &[u8]) -> Result<Decoded<Preamble>, PreambleError> {
        decode(buf, Kind::Connect)
    }

    /// Decodes a delivery preamble from the start of `buf` (what the
    /// destination's shim reads first from a connection accepted from a
    /// relay).
    ///
    /// # Errors
    /// As [`Preamble::decode_connect`].
    pub fn decode_deliver(buf: &[u8]) -> Result<Decoded<Preamble>, PreambleError> {
        decode(buf, Kind::Deliver)
    }
}

impl PreambleError {
    /// The reason code a relay sends back for this error.
    pub fn reason(self) -> Reason {
        match self {
            PreambleError::UnsupportedVersion(_) => Reason::UnsupportedVersion,
            _ => Reason::Protocol,
        }
    }
}

/// The 48 bytes common to every preamble kind, into `b` (zeroed).
fn encode_header(b: &mut [u8], kind: u8, destination: SocketAddr, source: SocketAddr) {
    b[0..4].copy_from_slice(&PREAMBLE_MAGIC);
    b[4] = PREAMBLE_VERSION;
    b[5] = kind;
    b[8] = family(&destination);
    b[9] = family(&source);
    b[10..12].copy_from_slice(&destination.port().to_be_bytes());
    b[12..14].copy_from_slice(&source.port().to_be_bytes());
    put_addr(&mut b[16..32], destination.ip());
    put_addr(&mut b[32..48], source.ip());
}

fn family(a: &SocketAddr) -> u8 {
    match a {
        SocketAddr::V4(_) => 4,
        SocketAddr::V6(_) => 6,
    }
}

fn put_addr(dst: &mut [u8], ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => dst[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => dst.copy_from_slice(&v6.octets()),
    }
}

/// Checks the fixed header of a preamble byte by byte (as far as `buf`
/// goes), the addresses once all 48 bytes are there, and a kind-3 blast
/// request byte by byte after them.
fn decode(buf: &[u8], expected: Kind) -> Result<Decoded<Preamble>, PreambleError> {
    let accepts = |kind: u8| {
        kind == expected.code() || (expected == Kind::Connect && kind == KIND_CONNECT_BLAST)
    };
    let (kind, destination, source) = match decode_header(buf, accepts, expected.code())? {
        Decoded::NeedMore(n) => return Ok(Decoded::NeedMore(n)),
        Decoded::Complete(h, _) => h,
    };
    let mut preamble = Preamble {
        kind: expected,
        destination,
        source,
        blast: None,
    };
    if kind != KIND_CONNECT_BLAST {
        return Ok(Decoded::Complete(preamble, PREAMBLE_LEN));
    }
    match decode_extension(&buf[PREAMBLE_LEN..], false)? {
        Decoded::NeedMore(n) => Ok(Decoded::NeedMore(n)),
        Decoded::Complete(blast, _) => {
            preamble.blast = blast;
            Ok(Decoded::Complete(preamble, BLAST_PREAMBLE_LEN))
        }
    }
}

/// The 48-byte header, checked byte by byte as far as `buf` goes, the
/// addresses once all 48 are there: (kind, destination, source).
fn decode_header(
    buf: &[u8],
    accepts: impl Fn(u8) -> bool,
    expected: u8,
) -> Result<Decoded<(u8, SocketAddr, SocketAddr)>, PreambleError> {
    for (i, &byte) in buf.iter().take(PREAMBLE_LEN).enumerate() {
        match i {
            0..=3 if byte != PREAMBLE_MAGIC[i] => return Err(PreambleError::BadMagic),
            4 if byte != PREAMBLE_VERSION => return Err(PreambleError::UnsupportedVersion(byte)),
            5 if !accepts(byte) => {
                return Err(PreambleError::WrongKind {
                    found: byte,
                    expected,
                })
            }
            6 | 7 | 14 | 15 if byte != 0 => {
                return Err(PreambleError::NonZeroReserved { offset: i })
            }
            8 | 9 if byte != 4 && byte != 6 => return Err(PreambleError::BadFamily(byte)),
            // IPv4 padding: the 12 bytes after a 4-byte address.
            20..=31 if buf[8] == 4 && byte != 0 => {
                return Err(PreambleError::NonZeroReserved { offset: i })
            }
            36..=47 if buf[9] == 4 && byte != 0 => {
                return Err(PreambleError::NonZeroReserved { offset: i })
            }
            _ => {}
        }
    }
    if buf.len() < PREAMBLE_LEN {
        return Ok(Decoded::NeedMore(PREAMBLE_LEN - buf.len()));
    }
    let dport = u16::from_be_bytes([buf[10], buf[11]]);
    let sport = u16::from_be_bytes([buf[12], buf[13]]);
    let destination = endpoint(buf[8], &buf[16..32], dport, "destination")?;
    let source = endpoint(buf[9], &buf[32..48], sport, "source")?;
    Ok(Decoded::Complete(
        (buf[5], destination, source),
        PREAMBLE_LEN,
    ))
}

/// The 16-byte blast request after a kind-3 or kind-4 header (`ext`: the
/// bytes after the 48), checked byte by byte; `withdraw` (kind 4): 16
/// zero bytes are valid and decode as `None`.
fn decode_extension(
    ext: &[u8],
    withdraw: bool,
) -> Result<Decoded<Option<BlastRequest>>, PreambleError> {
    let ext = &ext[..ext.len().min(BLAST_REQUEST_LEN)];
    BlastRequest::check_prefix(ext, withdraw).map_err(|e| match e {
        BlastRequestError::NonZeroReserved(i) => PreambleError::NonZeroReserved {
            offset: PREAMBLE_LEN + i,
        },
        e => PreambleError::BlastRequest(e),
    })?;
    if ext.len() < BLAST_REQUEST_LEN {
        return Ok(Decoded::NeedMore(BLAST_REQUEST_LEN - ext.len()));
    }
    if ext.iter().all(|&b| b == 0) {
        // Only reachable with `withdraw` (rate 0 is refused otherwise).
        return Ok(Decoded::Complete(None, BLAST_REQUEST_LEN));
    }
    let mut rate = [0u8; 8];
    rate.copy_from_slice(&ext[0..8]);
    let request = BlastRequest {
        rate: u64::from_be_bytes(rate),
        payload: u16::from_be_bytes([ext[8], ext[9]]),
    };
    Ok(Decoded::Complete(Some(request), BLAST_REQUEST_LEN))
}

fn endpoint(
    fam: u8,
    bytes: &[u8],
    port: u16,
    which: &'static str,
) -> Result<SocketAddr, PreambleError> {
    let ip = if fam == 4 {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    } else {
        let mut o = [0u8; 16];
        o.copy_from_slice(bytes);
        IpAddr::V6(Ipv6Addr::from(o))
    };
    if ip.is_unspecified() {
        return Err(PreambleError::UnspecifiedAddress(which));
    }
    if port == 0 {
        return Err(PreambleError::ZeroPort(which));
    }
    Ok(SocketAddr::new(ip, port))
}

/// The relay's answer to a connect preamble.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// Status 0: the destination accepted; the connection now carries the
    /// application's bytes both ways.
    Ok,
    /// The connection was refused; the relay closes it after the reply.
    Refused(Reason),
}

impl Reply {
    /// The 4 bytes of this reply.
    pub fn encode(&self) -> [u8; REPLY_LEN] {
        let status = match self {
            Reply::Ok => 0,
            Reply::Refused(r) => r.code(),
        };
        [REPLY_MAGIC[0], REPLY_MAGIC[1], PREAMBLE_VERSION, status]
    }

    /// Decodes a reply from the start of `buf`.
    ///
    /// # Errors
    /// [`PreambleError::BadMagic`] or [`PreambleError::UnsupportedVersion`]
    /// as soon as the bytes present are wrong.
    pub fn decode(buf: &[u8]) -> Result<Decoded<Reply>, PreambleError> {
        for (i, &byte) in buf.iter().take(REPLY_LEN).enumerate() {
            match i {
                0 | 1 if byte != REPLY_MAGIC[i] => return Err(PreambleError::BadMagic),
                2 if byte != PREAMBLE_VERSION => {
                    return Err(PreambleError::UnsupportedVersion(byte))
                }
                _ => {}
            }
        }
        if buf.len() < REPLY_LEN {
            return Ok(Decoded::NeedMore(REPLY_LEN - buf.len()));
        }
        let reply = match Reason::from_code(buf[3]) {
            None => Reply::Ok,
            Some(r) => Reply::Refused(r),
        };
        Ok(Decoded::Complete(reply, REPLY_LEN))
    }
}

#[cfg(test)]
mod tests;
