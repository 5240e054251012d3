//! The preambles between the shim (libwanshim, C) and the relays.
//!
//! Three fixed-size messages, all integers big-endian (network order):
//!
//! * the **connect preamble** ([`Kind::Connect`], 48 bytes, or 64 with a
//!   [`BlastRequest`]): the first bytes the shim writes on a TCP connection
//!   to its local relay; it names the real destination and the original
//!   source, and may ask that the connection's bulk data be blasted (RBUDP)
//!   at a given rate and datagram size;
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
//! | 5 | 1 | kind: 1 = connect, 2 = deliver, 3 = connect with a blast request |
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
//! | 56 | 2 | payload: UDP payload of a full datagram, [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`] |
//! | 58 | 6 | reserved, 0 |
//!
//! Reply layout: `57 52` ("WR"), version 1, then status: 0 = ok, otherwise
//! the [`Reason`] code of the refusal.
//!
//! Decoders are strict (every reserved and padding byte must be zero,
//! addresses must be specified, ports non-zero) and incremental: given a
//! prefix they check what is there and answer [`Decoded::NeedMore`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

use crate::rbudp::{MAX_DATAGRAM, MIN_DATAGRAM};
use crate::reason::Reason;
use crate::Decoded;

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
/// Length of a reply.
pub const REPLY_LEN: usize = 4;

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

/// A pair of MPI ranks' request that their connection's bulk data be
/// blasted (RBUDP) at `rate` with `payload`-byte datagrams: carried by a
/// kind-3 connect preamble and by the trunk OPEN of its stream. The relays
/// clamp it to their own settings (docs/wanrelay.md).
///
/// Wire format, 16 bytes, big-endian:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | rate: bytes per second on the wire (IP bytes, as the peer `rate` key), > 0 |
/// | 8 | 2 | payload: UDP payload of a full datagram, [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`] |
/// | 10 | 6 | reserved, 0 |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlastRequest {
    /// Requested blast rate, bytes/s on the wire.
    pub rate: u64,
    /// Requested UDP payload of a full datagram, bytes (RBUDP header included).
    pub payload: u16,
}

/// What is wrong with a blast request.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum BlastRequestError {
    /// Rate 0.
    #[error("blast request with rate 0 (must be above 0 bytes/s)")]
    ZeroRate,
    /// Payload outside [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`].
    #[error("blast request payload {0} bytes out of range {MIN_DATAGRAM}..={MAX_DATAGRAM}")]
    Payload(u16),
    /// A reserved byte (offset in the request) is not zero.
    #[error("blast request reserved byte {0} is not zero")]
    NonZeroReserved(usize),
}

impl BlastRequest {
    /// A request, checked.
    ///
    /// # Errors
    /// [`BlastRequestError`] if `rate` is 0 or `payload` out of range.
    pub fn new(rate: u64, payload: u16) -> Result<BlastRequest, BlastRequestError> {
        if rate == 0 {
            return Err(BlastRequestError::ZeroRate);
        }
        if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&usize::from(payload)) {
            return Err(BlastRequestError::Payload(payload));
        }
        Ok(BlastRequest { rate, payload })
    }

    /// The 16 bytes of this request.
    pub fn encode(&self) -> [u8; BLAST_REQUEST_LEN] {
        let mut b = [0u8; BLAST_REQUEST_LEN];
        b[0..8].copy_from_slice(&self.rate.to_be_bytes());
        b[8..10].copy_from_slice(&self.payload.to_be_bytes());
        b
    }

    /// Checks the bytes of a request present in `prefix` (the first
    /// `prefix.len()` of its 16): an error as soon as a byte is wrong.
    fn check_prefix(prefix: &[u8]) -> Result<(), BlastRequestError> {
        for (i, &byte) in prefix.iter().take(BLAST_REQUEST_LEN).enumerate() {
            match i {
                7 if prefix[..8].iter().all(|&x| x == 0) => {
                    return Err(BlastRequestError::ZeroRate)
                }
                9 => {
                    let payload = u16::from_be_bytes([prefix[8], byte]);
                    if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&usize::from(payload)) {
                        return Err(BlastRequestError::Payload(payload));
                    }
                }
                10..=15 if byte != 0 => return Err(BlastRequestError::NonZeroReserved(i)),
                _ => {}
            }
        }
        Ok(())
    }

    /// Decodes the 16 bytes of a request.
    ///
    /// # Errors
    /// [`BlastRequestError`] for rate 0, a payload out of range or a
    /// non-zero reserved byte.
    ///
    /// # Panics
    /// If `b` is shorter than [`BLAST_REQUEST_LEN`] (callers check lengths
    /// first).
    pub fn decode(b: &[u8]) -> Result<BlastRequest, BlastRequestError> {
        let b = &b[..BLAST_REQUEST_LEN];
        BlastRequest::check_prefix(b)?;
        let mut rate = [0u8; 8];
        rate.copy_from_slice(&b[0..8]);
        Ok(BlastRequest {
            rate: u64::from_be_bytes(rate),
            payload: u16::from_be_bytes([b[8], b[9]]),
        })
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
        /// The kind the decoder was asked for.
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
    /// A kind-3 preamble whose blast request is invalid.
    #[error("{0}")]
    BlastRequest(BlastRequestError),
}

fn expected_kinds(expected: u8) -> &'static str {
    match expected {
        1 => "1 (connect) or 3 (connect with a blast request)",
        2 => "2 (deliver)",
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
        b[0..4].copy_from_slice(&PREAMBLE_MAGIC);
        b[4] = PREAMBLE_VERSION;
        b[5] = match self.blast {
            Some(_) => KIND_CONNECT_BLAST,
            None => self.kind.code(),
        };
        b[8] = family(&self.destination);
        b[9] = family(&self.source);
        b[10..12].copy_from_slice(&self.destination.port().to_be_bytes());
        b[12..14].copy_from_slice(&self.source.port().to_be_bytes());
        put_addr(&mut b[16..32], self.destination.ip());
        put_addr(&mut b[32..48], self.source.ip());
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
    for (i, &byte) in buf.iter().take(PREAMBLE_LEN).enumerate() {
        match i {
            0..=3 if byte != PREAMBLE_MAGIC[i] => return Err(PreambleError::BadMagic),
            4 if byte != PREAMBLE_VERSION => return Err(PreambleError::UnsupportedVersion(byte)),
            5 if !accepts(byte) => {
                return Err(PreambleError::WrongKind {
                    found: byte,
                    expected: expected.code(),
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
    let mut preamble = Preamble {
        kind: expected,
        destination,
        source,
        blast: None,
    };
    if buf[5] != KIND_CONNECT_BLAST {
        return Ok(Decoded::Complete(preamble, PREAMBLE_LEN));
    }
    let ext = &buf[PREAMBLE_LEN..buf.len().min(BLAST_PREAMBLE_LEN)];
    BlastRequest::check_prefix(ext).map_err(|e| match e {
        BlastRequestError::NonZeroReserved(i) => PreambleError::NonZeroReserved {
            offset: PREAMBLE_LEN + i,
        },
        e => PreambleError::BlastRequest(e),
    })?;
    if ext.len() < BLAST_REQUEST_LEN {
        return Ok(Decoded::NeedMore(BLAST_REQUEST_LEN - ext.len()));
    }
    preamble.blast = Some(BlastRequest::decode(ext).map_err(PreambleError::BlastRequest)?);
    Ok(Decoded::Complete(preamble, BLAST_PREAMBLE_LEN))
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
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn connect_preamble_layout_is_byte_exact() {
        let p = Preamble::connect(sa("10.1.0.3:40000"), sa("10.0.0.2:1024"));
        let b = p.encode();
        let expected: [u8; 48] = [
            0x57, 0x53, 0x48, 0x50, 1, 1, 0, 0, // magic, version, kind, reserved
            4, 4, 0x9c, 0x40, 0x04, 0x00, 0, 0, // families, ports, reserved
            10, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // destination
            10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // source
        ];
        assert_eq!(b, expected);
        assert_eq!(Preamble::decode_connect(&b), Ok(Decoded::Complete(p, 48)));
    }

    #[test]
    fn ipv6_preamble_round_trips() {
        let p = Preamble::deliver(sa("[fd00::1:2]:5000"), sa("10.0.0.2:1024"));
        let b = p.encode();
        assert_eq!(b[8], 6);
        assert_eq!(Preamble::decode_deliver(&b), Ok(Decoded::Complete(p, 48)));
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::WrongKind {
                found: 2,
                expected: 1
            })
        );
    }

    #[test]
    fn partial_preamble_needs_more_and_bad_prefix_fails_early() {
        let b = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2")).encode();
        for n in 0..48 {
            assert_eq!(
                Preamble::decode_connect(&b[..n]),
                Ok(Decoded::NeedMore(48 - n))
            );
        }
        assert_eq!(
            Preamble::decode_connect(b"GE"),
            Err(PreambleError::BadMagic)
        );
        assert_eq!(
            Preamble::decode_connect(b"WSHP\x02"),
            Err(PreambleError::UnsupportedVersion(2))
        );
    }

    #[test]
    fn preamble_rejects_padding_zero_port_and_unspecified() {
        let good = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2")).encode();
        let mut b = good.clone();
        b[25] = 1;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::NonZeroReserved { offset: 25 })
        );
        let mut b = good.clone();
        b[10] = 0;
        b[11] = 0;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::ZeroPort("destination"))
        );
        let mut b = good.clone();
        b[32..36].fill(0);
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::UnspecifiedAddress("source"))
        );
        let mut b = good.clone();
        b[9] = 5;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::BadFamily(5))
        );
    }

    /// The test vector of docs/wanproto.md, section 1.
    const BLAST_VECTOR: [u8; 64] = [
        0x57, 0x53, 0x48, 0x50, 1, 3, 0, 0, // magic, version, kind 3, reserved
        4, 4, 0x9c, 0x40, 0x04, 0x00, 0, 0, // families, ports, reserved
        10, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // destination
        10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // source
        0, 0, 0, 0, 0, 0xbe, 0xbc, 0x20, // rate 12500000 bytes/s (100 Mbit/s)
        0x05, 0xc0, 0, 0, 0, 0, 0, 0, // payload 1472, reserved
    ];

    #[test]
    fn blast_request_preamble_layout_is_byte_exact() {
        let r = BlastRequest::new(12_500_000, 1472).unwrap();
        let p = Preamble::connect_with_blast(sa("10.1.0.3:40000"), sa("10.0.0.2:1024"), r);
        assert_eq!(p.encode(), BLAST_VECTOR);
        assert_eq!(p.encoded_len(), 64);
        assert_eq!(
            Preamble::decode_connect(&BLAST_VECTOR),
            Ok(Decoded::Complete(p, 64))
        );
        // Bytes after the 64 are the application's.
        let mut more = BLAST_VECTOR.to_vec();
        more.extend_from_slice(b"early");
        assert_eq!(
            Preamble::decode_connect(&more),
            Ok(Decoded::Complete(p, 64))
        );
        assert_eq!(BlastRequest::decode(&BLAST_VECTOR[48..]), Ok(r));
        assert_eq!(r.encode()[..], BLAST_VECTOR[48..]);
    }

    #[test]
    fn partial_blast_preamble_needs_all_64_bytes() {
        for n in 0..64 {
            assert_eq!(
                Preamble::decode_connect(&BLAST_VECTOR[..n]),
                Ok(Decoded::NeedMore(if n < 48 { 48 - n } else { 64 - n })),
                "prefix of {n} bytes"
            );
        }
    }

    #[test]
    fn every_bad_blast_request_field_is_refused_at_its_byte() {
        // (change, bytes needed to see the error, the error)
        type Change = fn(&mut [u8; 64]);
        let cases: Vec<(Change, usize, PreambleError)> = vec![
            (
                |b| b[48..56].fill(0),
                56,
                PreambleError::BlastRequest(BlastRequestError::ZeroRate),
            ),
            (
                |b| b[56..58].copy_from_slice(&63u16.to_be_bytes()),
                58,
                PreambleError::BlastRequest(BlastRequestError::Payload(63)),
            ),
            (
                |b| b[56..58].fill(0),
                58,
                PreambleError::BlastRequest(BlastRequestError::Payload(0)),
            ),
            (
                |b| b[56..58].copy_from_slice(&65508u16.to_be_bytes()),
                58,
                PreambleError::BlastRequest(BlastRequestError::Payload(65508)),
            ),
            (
                |b| b[58] = 1,
                59,
                PreambleError::NonZeroReserved { offset: 58 },
            ),
            (
                |b| b[63] = 0x80,
                64,
                PreambleError::NonZeroReserved { offset: 63 },
            ),
        ];
        for (change, at, error) in cases {
            let mut b = BLAST_VECTOR;
            change(&mut b);
            assert_eq!(
                Preamble::decode_connect(&b[..at - 1]),
                Ok(Decoded::NeedMore(65 - at)),
                "{error}: not detectable before byte {}",
                at - 1
            );
            assert_eq!(Preamble::decode_connect(&b[..at]), Err(error));
            assert_eq!(Preamble::decode_connect(&b), Err(error));
            assert_eq!(error.reason(), Reason::Protocol);
        }
        // The smallest and largest payloads and rate 1 are valid.
        for (rate, payload) in [(1u64, 64u16), (u64::MAX, 65507)] {
            let mut b = BLAST_VECTOR;
            b[48..56].copy_from_slice(&rate.to_be_bytes());
            b[56..58].copy_from_slice(&payload.to_be_bytes());
            let Ok(Decoded::Complete(p, 64)) = Preamble::decode_connect(&b) else {
                panic!("rate {rate} payload {payload} refused");
            };
            assert_eq!(p.blast, Some(BlastRequest { rate, payload }));
        }
        // The messages name the problem.
        assert_eq!(
            PreambleError::BlastRequest(BlastRequestError::Payload(63)).to_string(),
            "blast request payload 63 bytes out of range 64..=65507"
        );
        assert_eq!(BlastRequest::new(0, 1472), Err(BlastRequestError::ZeroRate));
    }

    #[test]
    fn a_blast_request_is_only_for_connect_preambles() {
        assert_eq!(
            Preamble::decode_deliver(&BLAST_VECTOR),
            Err(PreambleError::WrongKind {
                found: 3,
                expected: 2
            })
        );
        let mut b = BLAST_VECTOR;
        b[5] = 4;
        let e = Preamble::decode_connect(&b[..6]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "preamble kind 4, expected 1 (connect) or 3 (connect with a blast request)"
        );
        // A kind-1 preamble stays 48 bytes, without a request.
        let p = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2"));
        let Ok(Decoded::Complete(d, 48)) = Preamble::decode_connect(&p.encode()) else {
            panic!("kind 1 refused");
        };
        assert_eq!(d.blast, None);
    }

    #[test]
    #[should_panic(expected = "never carries a blast request")]
    fn encoding_a_delivery_preamble_with_a_request_is_a_bug() {
        let mut p = Preamble::deliver(sa("10.1.0.3:1"), sa("10.0.0.2:2"));
        p.blast = Some(BlastRequest::new(1000, 1472).unwrap());
        let _ = p.encode();
    }

    #[test]
    fn reply_layout_and_decode() {
        assert_eq!(Reply::Ok.encode(), [0x57, 0x52, 1, 0]);
        assert_eq!(Reply::Refused(Reason::Refused).encode(), [0x57, 0x52, 1, 1]);
        assert_eq!(
            Reply::decode(&[0x57, 0x52, 1, 0]),
            Ok(Decoded::Complete(Reply::Ok, 4))
        );
        assert_eq!(
            Reply::decode(&[0x57, 0x52, 1, 6]),
            Ok(Decoded::Complete(Reply::Refused(Reason::NoRoute), 4))
        );
        assert_eq!(Reply::decode(&[0x57]), Ok(Decoded::NeedMore(3)));
        assert_eq!(Reply::decode(&[0x57, 0x53]), Err(PreambleError::BadMagic));
    }
}
