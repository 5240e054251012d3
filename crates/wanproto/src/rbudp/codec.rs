//! RBUDP's byte formats: the control messages carried in RBUDP trunk
//! frames, the header of a data datagram and the token that
//! authenticates it (docs/rbudp.md).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::wire::{
    Role, DATAGRAM_HEADER_LEN, DATAGRAM_MAGIC, MAX_BITMAP_LEN, MAX_DATAGRAM, MIN_DATAGRAM,
    RBUDP_MAX_WINDOW as MAX_WINDOW, RBUDP_VERSION,
};

const TOKEN_LABEL: &[u8] = b"wanproto rbudp v1 token";

const C_SESSION: u8 = 0x01;
const C_BLAST_START: u8 = 0x02;
const C_BLAST_DONE: u8 = 0x03;
const C_MISSING: u8 = 0x04;
const C_COMPLETE: u8 = 0x05;
const C_RELEASE: u8 = 0x06;

/// One RBUDP control message (carried in an RBUDP trunk frame).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Each end, once: where and how to send datagrams to it.
    Session {
        /// The id datagrams to the sender of this message must carry.
        session: u32,
        /// Its UDP address (`None`: the trunk peer's address).
        addr: Option<IpAddr>,
        /// Its UDP port.
        port: u16,
        /// Largest datagram it accepts.
        max_datagram: u16,
        /// Bytes of blasts it holds at most.
        window: u64,
    },
    /// A new blast: `length` bytes of stream `stream`, inserted at byte
    /// `offset` of that stream's trunk data, in datagrams of `chunk` data
    /// bytes (the last one shorter).
    BlastStart {
        /// Blast id: 1, 2, 3, ... per sender.
        blast: u32,
        /// The trunk stream the bytes belong to.
        stream: u32,
        /// Stream bytes sent over the trunk before this blast.
        offset: u64,
        /// Bytes in the blast.
        length: u32,
        /// Data bytes per datagram.
        chunk: u16,
    },
    /// The sender has sent every datagram of this round.
    BlastDone {
        /// Blast id.
        blast: u32,
        /// Round: 0 the first blast, then one per resend.
        round: u32,
    },
    /// The receiver's answer to BLAST_DONE: these packets are missing.
    Missing {
        /// Blast id.
        blast: u32,
        /// The round it answers.
        round: u32,
        /// Packet index of the bitmap's first bit.
        first: u32,
        /// Bit i (most significant bit first) set: packet `first + i` is missing.
        bitmap: Vec<u8>,
    },
    /// The receiver has every packet of the blast (or discarded it).
    Complete {
        /// Blast id.
        blast: u32,
    },
    /// The receiver has delivered (or discarded) the blast and freed its window.
    Release {
        /// Blast id.
        blast: u32,
    },
}

/// A malformed control message.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ControlError {
    /// Empty message.
    #[error("empty RBUDP control message")]
    Empty,
    /// Unknown type byte.
    #[error("unknown RBUDP control type {0:#04x}")]
    UnknownType(u8),
    /// Wrong length for the type.
    #[error("RBUDP control type {ty:#04x} with length {len}")]
    BadLength {
        /// Type byte.
        ty: u8,
        /// Message length.
        len: usize,
    },
    /// A reserved byte is not zero.
    #[error("RBUDP control message with a non-zero reserved byte")]
    NonZeroReserved,
    /// SESSION of another version.
    #[error("unsupported RBUDP version {0}")]
    Version(u8),
    /// A field out of its range (zero length, chunk, port, ...).
    #[error("RBUDP control field out of range: {0}")]
    Range(&'static str),
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

impl Control {
    /// Decodes one message (the whole payload of an RBUDP frame).
    ///
    /// # Errors
    /// [`ControlError`] for anything but an exactly valid message.
    pub fn decode(b: &[u8]) -> Result<Control, ControlError> {
        let &ty = b.first().ok_or(ControlError::Empty)?;
        let fixed = match ty {
            C_SESSION => 36,
            C_BLAST_START => 24,
            C_BLAST_DONE => 12,
            C_MISSING => 16,
            C_COMPLETE | C_RELEASE => 8,
            _ => return Err(ControlError::UnknownType(ty)),
        };
        let ok_len = if ty == C_MISSING {
            b.len() > fixed && b.len() <= fixed + MAX_BITMAP_LEN
        } else {
            b.len() == fixed
        };
        if !ok_len {
            return Err(ControlError::BadLength { ty, len: b.len() });
        }
        match ty {
            C_SESSION => Control::decode_session(b),
            C_BLAST_START => Control::decode_blast_start(b),
            _ => Control::decode_report(ty, b),
        }
    }

    /// SESSION, 36 bytes.
    fn decode_session(b: &[u8]) -> Result<Control, ControlError> {
        if b[1] != RBUDP_VERSION {
            return Err(ControlError::Version(b[1]));
        }
        if b[11] != 0 {
            return Err(ControlError::NonZeroReserved);
        }
        let a = &b[20..36];
        let addr = match b[10] {
            0 if a.iter().all(|&x| x == 0) => None,
            4 if a[4..].iter().all(|&x| x == 0) => {
                Some(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])))
            }
            6 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(a);
                Some(IpAddr::V6(Ipv6Addr::from(o)))
            }
            0 | 4 => return Err(ControlError::NonZeroReserved),
            _ => return Err(ControlError::Range("address family")),
        };
        if addr.is_some_and(|a| a.is_unspecified()) {
            return Err(ControlError::Range("unspecified address"));
        }
        let port = be16(&b[2..]);
        let max_datagram = be16(&b[8..]);
        let window = be64(&b[12..]);
        if port == 0 {
            return Err(ControlError::Range("port 0"));
        }
        if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&(max_datagram as usize)) {
            return Err(ControlError::Range("max_datagram"));
        }
        if window == 0 || window > MAX_WINDOW {
            return Err(ControlError::Range("window"));
        }
        Ok(Control::Session {
            session: be32(&b[4..]),
            addr,
            port,
            max_datagram,
            window,
        })
    }

    /// BLAST_START, 24 bytes.
    fn decode_blast_start(b: &[u8]) -> Result<Control, ControlError> {
        if b[1] != 0 {
            return Err(ControlError::NonZeroReserved);
        }
        let chunk = be16(&b[2..]);
        let length = be32(&b[12..]);
        if chunk == 0 || chunk as usize > MAX_DATAGRAM - DATAGRAM_HEADER_LEN {
            return Err(ControlError::Range("chunk"));
        }
        if length == 0 {
            return Err(ControlError::Range("length"));
        }
        Ok(Control::BlastStart {
            blast: be32(&b[4..]),
            stream: be32(&b[8..]),
            length,
            offset: be64(&b[16..]),
            chunk,
        })
    }

    /// BLAST_DONE, MISSING, COMPLETE and RELEASE: three reserved bytes,
    /// then the blast id and what follows it for the type.
    fn decode_report(ty: u8, b: &[u8]) -> Result<Control, ControlError> {
        if b[1..4] != [0, 0, 0] {
            return Err(ControlError::NonZeroReserved);
        }
        let blast = be32(&b[4..]);
        Ok(match ty {
            C_BLAST_DONE => Control::BlastDone {
                blast,
                round: be32(&b[8..]),
            },
            C_MISSING => Control::Missing {
                blast,
                round: be32(&b[8..]),
                first: be32(&b[12..]),
                bitmap: b[16..].to_vec(),
            },
            C_COMPLETE => Control::Complete { blast },
            _ => Control::Release { blast },
        })
    }

    /// Encodes the message.
    ///
    /// # Panics
    /// A MISSING bitmap empty or longer than [`MAX_BITMAP_LEN`] (a caller
    /// bug; the session only builds valid ones).
    pub fn encode(&self) -> Vec<u8> {
        let mut o = Vec::with_capacity(24);
        match self {
            Control::Session {
                session,
                addr,
                port,
                max_datagram,
                window,
            } => {
                o.extend_from_slice(&[C_SESSION, RBUDP_VERSION]);
                o.extend_from_slice(&port.to_be_bytes());
                o.extend_from_slice(&session.to_be_bytes());
                o.extend_from_slice(&max_datagram.to_be_bytes());
                let mut a = [0u8; 16];
                let family = match addr {
                    None => 0,
                    Some(IpAddr::V4(v4)) => {
                        a[..4].copy_from_slice(&v4.octets());
                        4
                    }
                    Some(IpAddr::V6(v6)) => {
                        a.copy_from_slice(&v6.octets());
                        6
                    }
                };
                o.extend_from_slice(&[family, 0]);
                o.extend_from_slice(&window.to_be_bytes());
                o.extend_from_slice(&a);
            }
            Control::BlastStart {
                blast,
                stream,
                offset,
                length,
                chunk,
            } => {
                o.extend_from_slice(&[C_BLAST_START, 0]);
                o.extend_from_slice(&chunk.to_be_bytes());
                o.extend_from_slice(&blast.to_be_bytes());
                o.extend_from_slice(&stream.to_be_bytes());
                o.extend_from_slice(&length.to_be_bytes());
                o.extend_from_slice(&offset.to_be_bytes());
            }
            Control::BlastDone { blast, round } => {
                o.extend_from_slice(&[C_BLAST_DONE, 0, 0, 0]);
                o.extend_from_slice(&blast.to_be_bytes());
                o.extend_from_slice(&round.to_be_bytes());
            }
            Control::Missing {
                blast,
                round,
                first,
                bitmap,
            } => {
                assert!(
                    !bitmap.is_empty() && bitmap.len() <= MAX_BITMAP_LEN,
                    "MISSING bitmap of {} bytes",
                    bitmap.len()
                );
                o.extend_from_slice(&[C_MISSING, 0, 0, 0]);
                o.extend_from_slice(&blast.to_be_bytes());
                o.extend_from_slice(&round.to_be_bytes());
                o.extend_from_slice(&first.to_be_bytes());
                o.extend_from_slice(bitmap);
            }
            Control::Complete { blast } | Control::Release { blast } => {
                let ty = if matches!(self, Control::Complete { .. }) {
                    C_COMPLETE
                } else {
                    C_RELEASE
                };
                o.extend_from_slice(&[ty, 0, 0, 0]);
                o.extend_from_slice(&blast.to_be_bytes());
            }
        }
        o
    }
}

/// The header of a data datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatagramHeader {
    /// The receiver's session id.
    pub session: u32,
    /// The token of that session.
    pub token: u64,
    /// Blast id.
    pub blast: u32,
    /// Packet index in the blast.
    pub seq: u32,
}

/// A datagram that is not an RBUDP data datagram.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DatagramError {
    /// Shorter than a header plus one data byte.
    #[error("datagram of {0} bytes is too short")]
    TooShort(usize),
    /// Wrong magic.
    #[error("not an RBUDP datagram (magic)")]
    Magic,
    /// Another version.
    #[error("RBUDP datagram version {0}")]
    Version(u8),
    /// Non-zero flags.
    #[error("RBUDP datagram flags {0:#04x}")]
    Flags(u8),
}

impl DatagramHeader {
    /// Writes the header into the first [`DATAGRAM_HEADER_LEN`] bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than the header.
    pub fn write(&self, out: &mut [u8]) {
        out[0..2].copy_from_slice(&DATAGRAM_MAGIC);
        out[2] = RBUDP_VERSION;
        out[3] = 0;
        out[4..8].copy_from_slice(&self.session.to_be_bytes());
        out[8..16].copy_from_slice(&self.token.to_be_bytes());
        out[16..20].copy_from_slice(&self.blast.to_be_bytes());
        out[20..24].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Parses a datagram: its header and data (non-empty).
    ///
    /// # Errors
    /// [`DatagramError`] if it is not a well-formed RBUDP data datagram.
    pub fn parse(b: &[u8]) -> Result<(DatagramHeader, &[u8]), DatagramError> {
        if b.len() <= DATAGRAM_HEADER_LEN {
            return Err(DatagramError::TooShort(b.len()));
        }
        if b[0..2] != DATAGRAM_MAGIC {
            return Err(DatagramError::Magic);
        }
        if b[2] != RBUDP_VERSION {
            return Err(DatagramError::Version(b[2]));
        }
        if b[3] != 0 {
            return Err(DatagramError::Flags(b[3]));
        }
        Ok((
            DatagramHeader {
                session: be32(&b[4..]),
                token: be64(&b[8..]),
                blast: be32(&b[16..]),
                seq: be32(&b[20..]),
            },
            &b[DATAGRAM_HEADER_LEN..],
        ))
    }
}

/// The session id of a datagram (for the daemon's demultiplexing), if it
/// looks like an RBUDP datagram.
pub fn datagram_session(b: &[u8]) -> Option<u32> {
    DatagramHeader::parse(b).ok().map(|(h, _)| h.session)
}

/// The token datagrams to the session `session` of the end with role
/// `receiver` must carry.
pub fn session_token(secret: &[u8; 32], receiver: Role, session: u32) -> u64 {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts keys of any length");
    m.update(TOKEN_LABEL);
    m.update(&[receiver.code()]);
    m.update(&session.to_be_bytes());
    be64(&m.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    #[test]
    fn control_round_trip_and_exact_bytes() {
        let c = Control::BlastStart {
            blast: 1,
            stream: 3,
            offset: 0x0102,
            length: 4096,
            chunk: 1448,
        };
        let b = c.encode();
        assert_eq!(
            b,
            [0x02, 0, 0x05, 0xa8, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 1, 2]
        );
        assert_eq!(Control::decode(&b).unwrap(), c);
        let s = Control::Session {
            session: 0xdead_beef,
            addr: Some(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1))),
            port: 7402,
            max_datagram: 1472,
            window: 16 << 20,
        };
        let b = s.encode();
        assert_eq!(b.len(), 36);
        assert_eq!(
            &b[..24],
            &[
                1, 1, 0x1c, 0xea, 0xde, 0xad, 0xbe, 0xef, 0x05, 0xc0, 4, 0, 0, 0, 0, 0, 1, 0, 0, 0,
                198, 18, 0, 1
            ]
        );
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(Control::decode(&b).unwrap(), s);
        let mut none = b.clone();
        none[10] = 0;
        assert!(Control::decode(&none).is_err(), "family 0 with an address");
        none[20..24].fill(0);
        assert!(matches!(
            Control::decode(&none).unwrap(),
            Control::Session { addr: None, .. }
        ));
        let m = Control::Missing {
            blast: 2,
            round: 1,
            first: 8,
            bitmap: vec![0x81],
        };
        assert_eq!(
            m.encode(),
            [4, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 8, 0x81]
        );
        assert_eq!(Control::decode(&m.encode()).unwrap(), m);
        assert_eq!(Control::decode(&[]), Err(ControlError::Empty));
        assert_eq!(Control::decode(&[9]), Err(ControlError::UnknownType(9)));
        assert!(Control::decode(&[5, 0, 0, 1, 0, 0, 0, 1]).is_err());
    }

    #[test]
    fn datagram_header_exact_bytes() {
        let h = DatagramHeader {
            session: 1,
            token: 0x0102_0304_0506_0708,
            blast: 2,
            seq: 3,
        };
        let mut b = [0u8; 25];
        h.write(&mut b);
        b[24] = 0xff;
        assert_eq!(
            &b[..24],
            &[b'R', b'B', 1, 0, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 2, 0, 0, 0, 3]
        );
        assert_eq!(DatagramHeader::parse(&b).unwrap(), (h, &[0xffu8][..]));
        assert_eq!(
            DatagramHeader::parse(&b[..24]),
            Err(DatagramError::TooShort(24))
        );
        assert_eq!(datagram_session(&b), Some(1));
    }

    #[test]
    fn tokens_depend_on_role_session_and_secret() {
        let a = session_token(&[1; 32], Role::Initiator, 5);
        assert_ne!(a, session_token(&[1; 32], Role::Acceptor, 5));
        assert_ne!(a, session_token(&[1; 32], Role::Initiator, 6));
        assert_ne!(a, session_token(&[2; 32], Role::Initiator, 5));
    }
}
