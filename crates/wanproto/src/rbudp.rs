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

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

pub use crate::wire::{
    DATAGRAM_HEADER_LEN, DATAGRAM_MAGIC, IPV4_UDP_OVERHEAD, MAX_BITMAP_LEN, MAX_BLAST_PACKETS,
    MAX_DATAGRAM, MIN_DATAGRAM, RBUDP_MAX_WINDOW as MAX_WINDOW, RBUDP_VERSION,
};

use crate::pacer::Pacer;
use crate::wire::Role;

const TOKEN_LABEL: &[u8] = b"wanproto rbudp v1 token";

const C_SESSION: u8 = 0x01;
const C_BLAST_START: u8 = 0x02;
const C_BLAST_DONE: u8 = 0x03;
const C_MISSING: u8 = 0x04;
const C_COMPLETE: u8 = 0x05;
const C_RELEASE: u8 = 0x06;

/// Settings of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbudpConfig {
    /// Sending rate in bytes per second on the wire: datagram bytes plus
    /// `overhead` per datagram. Explicit, never adapted to loss.
    pub rate: u64,
    /// Pacer bucket in bytes (bursts up to this much); at least one datagram.
    pub burst: u64,
    /// Size of a full datagram (UDP payload, the 24-byte header included):
    /// [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`]. Also the largest this end
    /// accepts (announced in SESSION); the sender uses the smaller of its
    /// own and the peer's.
    pub datagram_size: usize,
    /// Bytes per datagram the pacer adds for headers below UDP
    /// ([`IPV4_UDP_OVERHEAD`]).
    pub overhead: u64,
    /// Bytes of the peer's blasts this end holds at most (announced in
    /// SESSION; the peer may not start a blast beyond it).
    pub receive_window: u64,
    /// After a BLAST_DONE, how long the receiver waits for datagrams still
    /// in flight before it reports the missing ones (ns).
    pub report_delay: u64,
}

impl RbudpConfig {
    /// Settings for `rate` bytes/s on the wire and `datagram_size`-byte
    /// datagrams; burst 2 ms of sending (at least 4 datagrams), window
    /// 16 MiB, report delay 1 ms.
    pub fn new(rate: u64, datagram_size: usize) -> RbudpConfig {
        let per = datagram_size as u64 + IPV4_UDP_OVERHEAD;
        RbudpConfig {
            rate,
            burst: (rate / 500).max(4 * per),
            datagram_size,
            overhead: IPV4_UDP_OVERHEAD,
            receive_window: 16 << 20,
            report_delay: 1_000_000,
        }
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`RbudpConfigError`] naming the setting at fault.
    pub fn validate(&self) -> Result<(), RbudpConfigError> {
        if self.rate == 0 {
            return Err(RbudpConfigError::Rate);
        }
        if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&self.datagram_size) {
            return Err(RbudpConfigError::DatagramSize(self.datagram_size));
        }
        if self.burst < self.datagram_size as u64 + self.overhead {
            return Err(RbudpConfigError::Burst);
        }
        if self.receive_window < (self.datagram_size - DATAGRAM_HEADER_LEN) as u64
            || self.receive_window > MAX_WINDOW
        {
            return Err(RbudpConfigError::Window(self.receive_window));
        }
        Ok(())
    }
}

/// Invalid settings.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum RbudpConfigError {
    /// Rate 0.
    #[error("rbudp rate must be above 0")]
    Rate,
    /// Datagram size out of range.
    #[error("rbudp datagram size {0} out of range {MIN_DATAGRAM}..={MAX_DATAGRAM} bytes")]
    DatagramSize(usize),
    /// Burst below one datagram.
    #[error("rbudp burst must hold at least one datagram")]
    Burst,
    /// Window out of range.
    #[error("rbudp receive window {0} must hold one datagram's data and be below 4 GiB")]
    Window(u64),
}

// ---------------------------------------------------------------------------
// Wire formats

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

// ---------------------------------------------------------------------------
// The session

/// What [`RbudpSession::handle_datagram`] did with a datagram.
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
    /// Receiver: every byte of the blast is in; [`RbudpSession::take`] it.
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

/// How one blast is sent, below the session's settings: the defaults send
/// at the session's rate in its full datagrams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlastParams {
    /// Bytes per second on the wire for this blast (counted as the
    /// session's rate is); `None` or more than the session's rate: the
    /// session's rate.
    pub rate: Option<u64>,
    /// Size of a full datagram of this blast (UDP payload, header
    /// included), [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`]; `None` or more than
    /// the session may send: the session's.
    pub datagram_size: Option<usize>,
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
    /// Invalid [`BlastParams`] (a caller bug: requests are checked when
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

#[derive(Debug)]
struct PeerSession {
    session: u32,
    token: u64,
    port: u16,
    max_datagram: usize,
    window: u64,
}

#[derive(Debug, PartialEq, Eq)]
enum OutState {
    /// Sending the round's packets.
    Sending,
    /// Round sent, BLAST_DONE queued: waiting for MISSING or COMPLETE.
    Reported,
    /// The peer has it all; waiting for RELEASE.
    Delivered,
}

#[derive(Debug)]
struct OutBlast {
    id: u32,
    data: Vec<u8>,
    length: u64,
    chunk: usize,
    /// Bytes/s of this blast (at most the session's rate).
    rate: u64,
    packets: u32,
    round: u32,
    /// Resend list of this round (`None`: round 0, every packet in order).
    list: Option<Vec<u32>>,
    pos: usize,
    state: OutState,
}

impl OutBlast {
    fn round_len(&self) -> usize {
        self.list.as_ref().map_or(self.packets as usize, Vec::len)
    }
}

#[derive(Debug)]
struct InBlast {
    id: u32,
    stream: u32,
    data: Option<Vec<u8>>,
    length: usize,
    chunk: usize,
    packets: u32,
    have: Vec<u64>,
    missing: u32,
    report: Option<(u64, u32)>,
}

impl InBlast {
    fn has(&self, seq: u32) -> bool {
        self.have[(seq / 64) as usize] & (1u64 << (seq % 64)) != 0
    }
}

/// Both directions of RBUDP over one trunk connection. See the [module
/// documentation](self).
#[derive(Debug)]
pub struct RbudpSession {
    config: RbudpConfig,
    role: Role,
    secret: [u8; 32],
    local_session: u32,
    local_token: u64,
    peer: Option<PeerSession>,
    pacer: Pacer,
    next_send_at: Option<u64>,
    control: VecDeque<Vec<u8>>,
    events: VecDeque<RbudpEvent>,
    failed: bool,
    // sender
    next_blast: u32,
    out: VecDeque<OutBlast>,
    peer_window_used: u64,
    // receiver
    last_announced: u32,
    inb: VecDeque<InBlast>,
    window_used: u64,
    stats: RbudpStats,
}

impl RbudpSession {
    /// A session over a trunk connection of role `role` whose exported
    /// secret is `secret`; datagrams to this end carry `local_session`
    /// (random, unique on the daemon's UDP socket) and go to `local_addr`
    /// (`None`: wherever the trunk peer reaches this end) and `local_port`.
    /// The SESSION message is queued at once.
    ///
    /// # Errors
    /// [`RbudpConfigError`] for invalid settings.
    pub fn new(
        config: RbudpConfig,
        role: Role,
        secret: [u8; 32],
        local_session: u32,
        local_addr: Option<IpAddr>,
        local_port: u16,
        now: u64,
    ) -> Result<RbudpSession, RbudpConfigError> {
        config.validate()?;
        let pacer =
            Pacer::new(config.rate, config.burst, now).map_err(|_| RbudpConfigError::Rate)?;
        let mut s = RbudpSession {
            local_token: session_token(&secret, role, local_session),
            role,
            secret,
            local_session,
            peer: None,
            pacer,
            next_send_at: None,
            control: VecDeque::new(),
            events: VecDeque::new(),
            failed: false,
            next_blast: 1,
            out: VecDeque::new(),
            peer_window_used: 0,
            last_announced: 0,
            inb: VecDeque::new(),
            window_used: 0,
            stats: RbudpStats::default(),
            config,
        };
        s.push(Control::Session {
            session: local_session,
            addr: local_addr.filter(|a| !a.is_unspecified()),
            port: local_port,
            max_datagram: s.config.datagram_size as u16,
            window: s.config.receive_window,
        });
        Ok(s)
    }

    fn push(&mut self, c: Control) {
        self.control.push_back(c.encode());
    }

    /// This end's session id (what datagrams to it carry).
    pub fn local_session(&self) -> u32 {
        self.local_session
    }

    /// The peer's UDP port, once its SESSION arrived.
    pub fn peer_port(&self) -> Option<u16> {
        self.peer.as_ref().map(|p| p.port)
    }

    /// Whether blasts may start (the peer's SESSION arrived, no error).
    pub fn is_ready(&self) -> bool {
        self.peer.is_some() && !self.failed
    }

    /// Counters.
    pub fn stats(&self) -> RbudpStats {
        self.stats
    }

    /// Data bytes per datagram this sender uses.
    pub fn chunk(&self) -> usize {
        let max = self
            .peer
            .as_ref()
            .map_or(self.config.datagram_size, |p| p.max_datagram);
        self.config.datagram_size.min(max) - DATAGRAM_HEADER_LEN
    }

    /// Data bytes per datagram of a blast sent with `params`: the smallest
    /// of its datagram size, ours and the peer's, less the header.
    pub fn blast_chunk(&self, params: &BlastParams) -> usize {
        let own = self.chunk();
        match params.datagram_size {
            Some(d) => own.min(d.max(MIN_DATAGRAM) - DATAGRAM_HEADER_LEN),
            None => own,
        }
    }

    /// The rate of a blast sent with `params`: its own, at most the
    /// session's.
    pub fn blast_rate(&self, params: &BlastParams) -> u64 {
        params
            .rate
            .map_or(self.config.rate, |r| r.clamp(1, self.config.rate))
    }

    /// The session's rate, bytes/s on the wire.
    pub fn rate(&self) -> u64 {
        self.config.rate
    }

    /// What `bytes` of a blast at `rate` cost the session's pacer: scaled
    /// up by session rate / blast rate, so the blast leaves at its rate.
    fn pacer_cost(&self, bytes: u64, rate: u64) -> u64 {
        if rate >= self.config.rate {
            return bytes;
        }
        let scaled = (u128::from(bytes) * u128::from(self.config.rate)).div_ceil(u128::from(rate));
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// Largest blast that may start now (0 if none).
    pub fn window_available(&self) -> u64 {
        match &self.peer {
            Some(p) if !self.failed => {
                let max_blast = u64::from(MAX_BLAST_PACKETS) * self.chunk() as u64;
                p.window
                    .saturating_sub(self.peer_window_used)
                    .min(max_blast)
                    .min(u64::from(u32::MAX))
            }
            _ => 0,
        }
    }

    /// Bytes of our blasts the peer has not released.
    pub fn peer_window_used(&self) -> u64 {
        self.peer_window_used
    }

    /// Bytes of the peer's blasts held here (announced, not released).
    pub fn receive_window_used(&self) -> u64 {
        self.window_used
    }

    /// Blasts of ours not yet released by the peer.
    pub fn blasts_in_flight(&self) -> usize {
        self.out.len()
    }

    /// Starts a blast of `data` for stream `stream`, inserted at `offset`
    /// of its trunk data, at the session's rate in its full datagrams;
    /// queues BLAST_START. Returns the blast id.
    ///
    /// # Errors
    /// [`BlastError`]; `data` is then dropped.
    pub fn start_blast(
        &mut self,
        stream: u32,
        offset: u64,
        data: Vec<u8>,
    ) -> Result<u32, BlastError> {
        self.start_blast_with(stream, offset, data, BlastParams::default())
    }

    /// As [`RbudpSession::start_blast`], sent at
    /// [`RbudpSession::blast_rate`] in datagrams of
    /// [`RbudpSession::blast_chunk`] data bytes. Blasts leave strictly one
    /// after another (resends of older ones first), so a slow blast also
    /// delays the blasts queued behind it.
    ///
    /// # Errors
    /// [`BlastError`] (also [`BlastError::Params`] for a rate of 0 or a
    /// datagram size out of range); `data` is then dropped.
    pub fn start_blast_with(
        &mut self,
        stream: u32,
        offset: u64,
        data: Vec<u8>,
        params: BlastParams,
    ) -> Result<u32, BlastError> {
        if params.rate == Some(0) {
            return Err(BlastError::Params("rate 0"));
        }
        if params
            .datagram_size
            .is_some_and(|d| !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&d))
        {
            return Err(BlastError::Params("datagram size out of range"));
        }
        if !self.is_ready() {
            return Err(BlastError::NotReady);
        }
        if data.is_empty() {
            return Err(BlastError::Empty);
        }
        let chunk = self.blast_chunk(&params);
        let rate = self.blast_rate(&params);
        let packets = data.len().div_ceil(chunk);
        if packets > MAX_BLAST_PACKETS as usize || data.len() > u32::MAX as usize {
            return Err(BlastError::TooLarge(data.len()));
        }
        let available = self.window_available();
        if data.len() as u64 > available {
            return Err(BlastError::WindowFull {
                available,
                needed: data.len() as u64,
            });
        }
        let id = self.next_blast;
        self.next_blast = self.next_blast.wrapping_add(1).max(1);
        let length = data.len() as u64;
        self.push(Control::BlastStart {
            blast: id,
            stream,
            offset,
            length: length as u32,
            chunk: chunk as u16,
        });
        self.peer_window_used += length;
        self.stats.blasts_sent += 1;
        self.out.push_back(OutBlast {
            id,
            data,
            length,
            chunk,
            rate,
            packets: packets as u32,
            round: 0,
            list: None,
            pos: 0,
            state: OutState::Sending,
        });
        Ok(id)
    }

    /// Takes the next control message for the trunk (an RBUDP frame).
    pub fn poll_control(&mut self) -> Option<Vec<u8>> {
        self.control.pop_front()
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<RbudpEvent> {
        self.events.pop_front()
    }

    /// Handles one control message from the peer (the payload of an
    /// RBUDP frame).
    ///
    /// # Errors
    /// [`RbudpError`] if the message is malformed or breaks the protocol;
    /// the session is then failed (nothing more is sent or accepted) and
    /// the daemon should close the trunk.
    pub fn handle_control(&mut self, now: u64, message: &[u8]) -> Result<(), RbudpError> {
        if self.failed {
            return Err(RbudpError::Protocol("session already failed"));
        }
        let r = Control::decode(message)
            .map_err(RbudpError::from)
            .and_then(|c| self.apply(now, c));
        if r.is_err() {
            self.failed = true;
            self.out.clear();
            self.inb.clear();
            self.next_send_at = None;
        }
        r
    }

    fn apply(&mut self, now: u64, c: Control) -> Result<(), RbudpError> {
        match c {
            Control::Session {
                session,
                addr,
                port,
                max_datagram,
                window,
            } => self.on_session(session, addr, port, max_datagram, window),
            Control::BlastStart {
                blast,
                stream,
                offset,
                length,
                chunk,
            } => self.on_blast_start(blast, stream, offset, length, chunk),
            Control::BlastDone { blast, round } => self.on_blast_done(now, blast, round),
            Control::Missing {
                blast,
                round,
                first,
                bitmap,
            } => self.on_missing(blast, round, first, &bitmap),
            Control::Complete { blast } => self.on_complete(blast),
            Control::Release { blast } => self.on_release(blast),
        }
    }

    /// The peer's SESSION: where its datagrams go; blasts may start.
    fn on_session(
        &mut self,
        session: u32,
        addr: Option<IpAddr>,
        port: u16,
        max_datagram: u16,
        window: u64,
    ) -> Result<(), RbudpError> {
        if self.peer.is_some() {
            return Err(RbudpError::Protocol("second SESSION"));
        }
        self.peer = Some(PeerSession {
            session,
            token: session_token(&self.secret, self.role.peer(), session),
            port,
            max_datagram: max_datagram as usize,
            window,
        });
        self.events.push_back(RbudpEvent::Ready { addr, port });
        Ok(())
    }

    /// Receiver: the peer announces its next blast.
    fn on_blast_start(
        &mut self,
        blast: u32,
        stream: u32,
        offset: u64,
        length: u32,
        chunk: u16,
    ) -> Result<(), RbudpError> {
        if blast != self.last_announced.wrapping_add(1).max(1) {
            return Err(RbudpError::Protocol("blast ids out of sequence"));
        }
        if chunk as usize + DATAGRAM_HEADER_LEN > self.config.datagram_size {
            return Err(RbudpError::Protocol("chunk larger than our datagrams"));
        }
        let packets = (length as usize).div_ceil(chunk as usize);
        if packets > MAX_BLAST_PACKETS as usize {
            return Err(RbudpError::Protocol("blast has too many packets"));
        }
        let length64 = u64::from(length);
        if self.window_used + length64 > self.config.receive_window {
            return Err(RbudpError::Window {
                used: self.window_used,
                length: length64,
                window: self.config.receive_window,
            });
        }
        self.last_announced = blast;
        self.window_used += length64;
        self.inb.push_back(InBlast {
            id: blast,
            stream,
            data: Some(vec![0u8; length as usize]),
            length: length as usize,
            chunk: chunk as usize,
            packets: packets as u32,
            have: vec![0u64; packets.div_ceil(64)],
            missing: packets as u32,
            report: None,
        });
        self.events.push_back(RbudpEvent::Announced {
            blast,
            stream,
            offset,
            length,
        });
        Ok(())
    }

    /// Receiver: the peer sent a round; report what is missing after
    /// `report_delay`.
    fn on_blast_done(&mut self, now: u64, blast: u32, round: u32) -> Result<(), RbudpError> {
        if !self.announced(blast) {
            return Err(RbudpError::Protocol(
                "BLAST_DONE for a blast never announced",
            ));
        }
        let delay = self.config.report_delay;
        if let Some(b) = self.inb.iter_mut().find(|b| b.id == blast) {
            if b.missing > 0 {
                b.report = Some((now.saturating_add(delay), round));
            }
        }
        // Complete or released: COMPLETE was sent already.
        Ok(())
    }

    /// Sender: the peer misses these packets of the round it answers;
    /// they are the next round.
    fn on_missing(
        &mut self,
        blast: u32,
        round: u32,
        first: u32,
        bitmap: &[u8],
    ) -> Result<(), RbudpError> {
        let Some(b) = self.out.iter_mut().find(|b| b.id == blast) else {
            return Err(RbudpError::Protocol("MISSING for an unknown blast"));
        };
        if b.state == OutState::Delivered {
            return Err(RbudpError::Protocol("MISSING after COMPLETE"));
        }
        if b.state != OutState::Reported || round != b.round {
            return Err(RbudpError::Protocol("MISSING for a round not reported"));
        }
        let list = missing_list(first, bitmap, b.packets)?;
        self.stats.reports_received += 1;
        b.round += 1;
        b.list = Some(list);
        b.pos = 0;
        b.state = OutState::Sending;
        Ok(())
    }

    /// Sender: the peer has every packet of the blast.
    fn on_complete(&mut self, blast: u32) -> Result<(), RbudpError> {
        let Some(b) = self.out.iter_mut().find(|b| b.id == blast) else {
            return Err(RbudpError::Protocol("COMPLETE for an unknown blast"));
        };
        if b.state == OutState::Delivered {
            return Err(RbudpError::Protocol("second COMPLETE"));
        }
        b.state = OutState::Delivered;
        b.data = Vec::new();
        b.list = None;
        self.stats.blasts_delivered += 1;
        self.events.push_back(RbudpEvent::Delivered { blast });
        Ok(())
    }

    /// Sender: the peer delivered the blast and freed its window.
    fn on_release(&mut self, blast: u32) -> Result<(), RbudpError> {
        let Some(i) = self.out.iter().position(|b| b.id == blast) else {
            return Err(RbudpError::Protocol("RELEASE for an unknown blast"));
        };
        if self.out[i].state != OutState::Delivered {
            return Err(RbudpError::Protocol("RELEASE before COMPLETE"));
        }
        let b = self.out.remove(i).expect("index found");
        self.peer_window_used -= b.length;
        self.events.push_back(RbudpEvent::Released { blast });
        Ok(())
    }

    fn announced(&self, blast: u32) -> bool {
        // Ids run 1, 2, 3, ... (wrapping past u32::MAX to 1): "announced" is
        // within the 2^31 ids before the last one.
        blast != 0
            && self.last_announced != 0
            && self.last_announced.wrapping_sub(blast) < (1 << 31)
    }

    /// Handles one datagram received on the UDP socket.
    pub fn handle_datagram(&mut self, _now: u64, datagram: &[u8]) -> DatagramOutcome {
        let outcome = self.classify(datagram);
        let s = &mut self.stats;
        match outcome {
            DatagramOutcome::Accepted => {}
            DatagramOutcome::Duplicate => s.dropped_duplicate += 1,
            DatagramOutcome::Malformed => s.dropped_malformed += 1,
            DatagramOutcome::Stray => s.dropped_stray += 1,
            DatagramOutcome::Forged => s.dropped_forged += 1,
            DatagramOutcome::Stale => s.dropped_stale += 1,
            DatagramOutcome::Early => s.dropped_early += 1,
        }
        outcome
    }

    fn classify(&mut self, datagram: &[u8]) -> DatagramOutcome {
        let Ok((h, data)) = DatagramHeader::parse(datagram) else {
            return DatagramOutcome::Malformed;
        };
        if h.session != self.local_session {
            return DatagramOutcome::Stray;
        }
        if h.token != self.local_token {
            return DatagramOutcome::Forged;
        }
        if self.failed {
            return DatagramOutcome::Stale;
        }
        if !self.announced(h.blast) {
            return DatagramOutcome::Early;
        }
        let Some(i) = self.inb.iter().position(|b| b.id == h.blast) else {
            return DatagramOutcome::Stale;
        };
        let b = &mut self.inb[i];
        if b.missing == 0 {
            return DatagramOutcome::Stale;
        }
        if h.seq >= b.packets {
            return DatagramOutcome::Malformed;
        }
        let start = h.seq as usize * b.chunk;
        let len = b.chunk.min(b.length - start);
        if data.len() != len {
            return DatagramOutcome::Malformed;
        }
        if b.has(h.seq) {
            return DatagramOutcome::Duplicate;
        }
        let Some(buf) = b.data.as_mut() else {
            return DatagramOutcome::Stale;
        };
        buf[start..start + len].copy_from_slice(data);
        b.have[(h.seq / 64) as usize] |= 1u64 << (h.seq % 64);
        b.missing -= 1;
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += len as u64;
        if b.missing == 0 {
            b.report = None;
            let (blast, stream) = (b.id, b.stream);
            self.stats.blasts_received += 1;
            self.push(Control::Complete { blast });
            self.events
                .push_back(RbudpEvent::Complete { blast, stream });
        }
        DatagramOutcome::Accepted
    }

    /// The bytes of a complete blast of the peer's (once; `None` if it is
    /// not complete or was taken). Its window stays held until
    /// [`RbudpSession::release`].
    pub fn take(&mut self, blast: u32) -> Option<Vec<u8>> {
        let b = self.inb.iter_mut().find(|b| b.id == blast)?;
        if b.missing > 0 {
            return None;
        }
        b.data.take()
    }

    /// Whether a blast of the peer's is complete and not yet taken.
    pub fn is_complete(&self, blast: u32) -> bool {
        self.inb
            .iter()
            .any(|b| b.id == blast && b.missing == 0 && b.data.is_some())
    }

    /// The daemon delivered (or discards) a blast of the peer's: frees its
    /// window and tells the peer (RELEASE; COMPLETE first if it was not
    /// complete, so the peer stops resending). Unknown ids are ignored.
    pub fn release(&mut self, blast: u32) {
        let Some(i) = self.inb.iter().position(|b| b.id == blast) else {
            return;
        };
        let b = self.inb.remove(i).expect("index found");
        self.window_used -= b.length as u64;
        if self.failed {
            return;
        }
        if b.missing > 0 {
            self.push(Control::Complete { blast });
        }
        self.push(Control::Release { blast });
    }

    /// When [`RbudpSession::handle_timeout`] or
    /// [`RbudpSession::poll_datagram`] wants to be called next (a report
    /// is due, or the pacer has room for the next datagram).
    pub fn poll_timeout(&self) -> Option<u64> {
        let report = self.inb.iter().filter_map(|b| b.report.map(|r| r.0)).min();
        match (report, self.next_send_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sends the reports that are due.
    pub fn handle_timeout(&mut self, now: u64) {
        if self.failed {
            return;
        }
        let mut due = Vec::new();
        for b in &mut self.inb {
            if let Some((at, round)) = b.report {
                if at <= now && b.missing > 0 {
                    b.report = None;
                    due.push((b.id, round, missing_bitmap(b)));
                }
            }
        }
        for (blast, round, (first, bitmap)) in due {
            self.stats.reports_sent += 1;
            self.push(Control::Missing {
                blast,
                round,
                first,
                bitmap,
            });
        }
    }

    /// Whether datagrams are waiting to be sent (pacer permitting).
    pub fn has_datagrams(&self) -> bool {
        self.is_ready() && self.out.iter().any(|b| b.state == OutState::Sending)
    }

    /// Writes the next datagram into `buf` and returns its length and the
    /// peer's UDP port, if one is due and the pacer allows it at `now`;
    /// otherwise `None` ([`RbudpSession::poll_timeout`] says when to try
    /// again). Resends of older blasts go first. The datagram counts as
    /// sent: a daemon that cannot send it now must keep it and send it
    /// later, or lose it (the next report names it again).
    ///
    /// # Panics
    /// If `buf` is shorter than `datagram_size`.
    pub fn poll_datagram(&mut self, now: u64, buf: &mut [u8]) -> Option<(usize, u16)> {
        assert!(
            buf.len() >= self.config.datagram_size,
            "datagram buffer too small"
        );
        self.next_send_at = None;
        if !self.is_ready() {
            return None;
        }
        let peer = self.peer.as_ref()?;
        let (session, token, port) = (peer.session, peer.token, peer.port);
        let i = self.out.iter().position(|b| b.state == OutState::Sending)?;
        let (seq, len, rate) = {
            let b = &self.out[i];
            let seq = match &b.list {
                None => b.pos as u32,
                Some(l) => l[b.pos],
            };
            let start = seq as usize * b.chunk;
            (seq, b.chunk.min(b.data.len() - start), b.rate)
        };
        let size = DATAGRAM_HEADER_LEN + len;
        let cost = self.pacer_cost(size as u64 + self.config.overhead, rate);
        // A slow blast's cost may exceed the bucket: it waits for a full
        // bucket and leaves debt behind, so its average rate stays exact.
        if self.pacer.available(now) < cost.min(self.config.burst) {
            self.next_send_at = Some(self.pacer.ready_at(now, cost));
            return None;
        }
        self.pacer.consume(now, cost);
        let b = &mut self.out[i];
        let start = seq as usize * b.chunk;
        DatagramHeader {
            session,
            token,
            blast: b.id,
            seq,
        }
        .write(buf);
        buf[DATAGRAM_HEADER_LEN..size].copy_from_slice(&b.data[start..start + len]);
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += size as u64;
        if b.round > 0 {
            self.stats.datagrams_resent += 1;
        }
        b.pos += 1;
        if b.pos >= b.round_len() {
            b.state = OutState::Reported;
            b.list = None;
            let (blast, round) = (b.id, b.round);
            self.push(Control::BlastDone { blast, round });
        }
        if let Some(b) = self.out.iter().find(|b| b.state == OutState::Sending) {
            let full = (DATAGRAM_HEADER_LEN + b.chunk) as u64 + self.config.overhead;
            let next = self.pacer_cost(full, b.rate);
            let at = self.pacer.ready_at(now, next);
            if at > now {
                self.next_send_at = Some(at);
            } else {
                self.next_send_at = Some(now);
            }
        }
        Some((size, port))
    }
}

/// The packets a MISSING bitmap names (bit i, most significant first:
/// packet `first + i`), in order; each must be one of the blast's
/// `packets`, and at least one must be named.
fn missing_list(first: u32, bitmap: &[u8], packets: u32) -> Result<Vec<u32>, RbudpError> {
    let mut list = Vec::new();
    for (i, &byte) in bitmap.iter().enumerate() {
        for bit in 0..8u32 {
            if byte & (0x80 >> bit) != 0 {
                let seq = u64::from(first) + 8 * i as u64 + u64::from(bit);
                if seq >= u64::from(packets) {
                    return Err(RbudpError::Protocol(
                        "MISSING names a packet beyond the blast",
                    ));
                }
                list.push(seq as u32);
            }
        }
    }
    if list.is_empty() {
        return Err(RbudpError::Protocol("MISSING without a missing packet"));
    }
    Ok(list)
}

/// The bitmap of a blast's missing packets: from the first missing one
/// (rounded down to a multiple of 8) to the last, at most
/// [`MAX_BITMAP_LEN`] bytes.
fn missing_bitmap(b: &InBlast) -> (u32, Vec<u8>) {
    let first_missing = (0..b.packets).find(|&s| !b.has(s)).unwrap_or(0);
    let last_missing = (0..b.packets).rev().find(|&s| !b.has(s)).unwrap_or(0);
    let first = first_missing / 8 * 8;
    let bits = (last_missing - first + 1) as usize;
    let mut bitmap = vec![0u8; bits.div_ceil(8).min(MAX_BITMAP_LEN)];
    for s in first..=last_missing {
        if !b.has(s) {
            let i = (s - first) as usize;
            bitmap[i / 8] |= 0x80 >> (i % 8);
        }
    }
    (first, bitmap)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn config_validation() {
        assert!(RbudpConfig::new(25_000_000, 1472).validate().is_ok());
        assert_eq!(
            RbudpConfig::new(0, 1472).validate(),
            Err(RbudpConfigError::Rate)
        );
        assert_eq!(
            RbudpConfig::new(1000, 10).validate(),
            Err(RbudpConfigError::DatagramSize(10))
        );
    }
}
