//! The preambles between the shim (libwanshim, C) and the relays.
//!
//! Three fixed-size messages, all integers big-endian (network order):
//!
//! * the **connect preamble** ([`Kind::Connect`], 48 bytes): the first
//!   bytes the shim writes on a TCP connection to its local relay; it names
//!   the real destination and the original source;
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
//! | 5 | 1 | kind: 1 = connect, 2 = deliver |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 1 | destination family: 4 or 6 |
//! | 9 | 1 | source family: 4 or 6 |
//! | 10 | 2 | destination port (non-zero) |
//! | 12 | 2 | source port (non-zero) |
//! | 14 | 2 | reserved, 0 |
//! | 16 | 16 | destination address: IPv4 in bytes 16..20 then 12 zero bytes, or IPv6 |
//! | 32 | 16 | source address, same encoding |
//!
//! Reply layout: `57 52` ("WR"), version 1, then status: 0 = ok, otherwise
//! the [`Reason`] code of the refusal.
//!
//! Decoders are strict (every reserved and padding byte must be zero,
//! addresses must be specified, ports non-zero) and incremental: given a
//! prefix they check what is there and answer [`Decoded::NeedMore`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

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
    /// Kind byte other than the one expected.
    #[error("preamble kind {found}, expected {expected}")]
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
}

impl Preamble {
    /// A connect preamble (shim to local relay).
    pub fn connect(destination: SocketAddr, source: SocketAddr) -> Preamble {
        Preamble {
            kind: Kind::Connect,
            destination,
            source,
        }
    }

    /// A delivery preamble (far relay to destination node).
    pub fn deliver(destination: SocketAddr, source: SocketAddr) -> Preamble {
        Preamble {
            kind: Kind::Deliver,
            destination,
            source,
        }
    }

    /// The 48 bytes of this preamble.
    pub fn encode(&self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[0..4].copy_from_slice(&PREAMBLE_MAGIC);
        b[4] = PREAMBLE_VERSION;
        b[5] = self.kind.code();
        b[8] = family(&self.destination);
        b[9] = family(&self.source);
        b[10..12].copy_from_slice(&self.destination.port().to_be_bytes());
        b[12..14].copy_from_slice(&self.source.port().to_be_bytes());
        put_addr(&mut b[16..32], self.destination.ip());
        put_addr(&mut b[32..48], self.source.ip());
        b
    }

    /// Decodes a connect preamble from the start of `buf` (what the local
    /// relay reads first from a shim connection).
    ///
    /// # Errors
    /// A [`PreambleError`] as soon as a byte present in `buf` is wrong, even
    /// before all 48 have arrived; the relay then replies
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
/// goes), then decodes the rest once all 48 bytes are there.
fn decode(buf: &[u8], expected: Kind) -> Result<Decoded<Preamble>, PreambleError> {
    for (i, &byte) in buf.iter().take(PREAMBLE_LEN).enumerate() {
        match i {
            0..=3 if byte != PREAMBLE_MAGIC[i] => return Err(PreambleError::BadMagic),
            4 if byte != PREAMBLE_VERSION => return Err(PreambleError::UnsupportedVersion(byte)),
            5 if byte != expected.code() => {
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
    Ok(Decoded::Complete(
        Preamble {
            kind: expected,
            destination,
            source,
        },
        PREAMBLE_LEN,
    ))
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
        let mut b = good;
        b[25] = 1;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::NonZeroReserved { offset: 25 })
        );
        let mut b = good;
        b[10] = 0;
        b[11] = 0;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::ZeroPort("destination"))
        );
        let mut b = good;
        b[32..36].fill(0);
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::UnspecifiedAddress("source"))
        );
        let mut b = good;
        b[9] = 5;
        assert_eq!(
            Preamble::decode_connect(&b),
            Err(PreambleError::BadFamily(5))
        );
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
