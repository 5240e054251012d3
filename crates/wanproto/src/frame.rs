//! Trunk frames: encoding and a strict, incremental decoder.
//!
//! Every frame is a 10-byte header and a payload (integers big-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | type |
//! | 1 | 1 | flags, 0 (no flags are defined) |
//! | 2 | 4 | stream id (0 for connection frames) |
//! | 6 | 4 | payload length |
//!
//! | type | name | stream | payload |
//! |---|---|---|---|
//! | 0x01 | HELLO | 0 | see [`Hello`], 52..=178 bytes |
//! | 0x02 | AUTH | 0 | 32-byte HMAC-SHA256 |
//! | 0x03 | RESUME | 0 | u64: bytes of the peer's sequenced frames received in the session |
//! | 0x10 | OPEN | new id | 38 bytes: families, ports, addresses (as the preamble's bytes 8..48, without bytes 14..16); or 54: the same and a 16-byte [`BlastRequest`] |
//! | 0x11 | OPEN_OK | id | empty |
//! | 0x12 | DATA | id | 1..=[`MAX_DATA_PAYLOAD`] bytes |
//! | 0x13 | WINDOW_UPDATE | id | u32 increment, 1..=[`MAX_WINDOW`] |
//! | 0x14 | FIN | id | empty |
//! | 0x15 | RESET | id | u8 [`Reason`] code, non-zero |
//! | 0x20 | PING | 0 | 8 opaque bytes |
//! | 0x21 | PONG | 0 | the 8 bytes of the PING it answers |
//! | 0x22 | GOAWAY | 0 | u8 [`CloseCode`], u32 last stream id the sender accepted |
//! | 0x23 | ACK | 0 | u64: bytes of the peer's sequenced frames received in the session |
//! | 0x30 | RBUDP | 0 | one RBUDP control message (1..=[`MAX_DATA_PAYLOAD`] bytes, [`crate::rbudp`]) |
//!
//! *Sequenced* frames (all but HELLO, AUTH, RESUME, PING, PONG and ACK)
//! are counted by their encoded length; a resumable session replays them
//! after a reconnect (docs/wanproto.md, "Resumption").
//!
//! The decoder rejects a frame as soon as its header is wrong (unknown
//! type, flags, stream id 0 or not 0, a length that is not allowed for the
//! type), so a peer can never make it wait for, or buffer, more than
//! [`FRAME_HEADER_LEN`] + [`MAX_DATA_PAYLOAD`] bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use thiserror::Error;

pub use crate::wire::{
    Role, StreamId, FRAME_HEADER_LEN, MAC_LEN, MAX_DATA_PAYLOAD, MAX_HELLO_LEN, MAX_NAME_LEN,
    MAX_WINDOW, MIN_INITIAL_WINDOW, NONCE_LEN, SESSION_ID_LEN, TRUNK_MAGIC, TRUNK_VERSION,
};

use crate::blast_request::{BlastRequest, BlastRequestError};
use crate::reason::{CloseCode, Reason};
use crate::wire::{Decoded, HELLO_FIXED_LEN, OPEN_BLAST_LEN, OPEN_LEN};

const T_HELLO: u8 = 0x01;
const T_AUTH: u8 = 0x02;
const T_RESUME: u8 = 0x03;
const T_OPEN: u8 = 0x10;
const T_OPEN_OK: u8 = 0x11;
const T_DATA: u8 = 0x12;
const T_WINDOW_UPDATE: u8 = 0x13;
const T_FIN: u8 = 0x14;
const T_RESET: u8 = 0x15;
const T_PING: u8 = 0x20;
const T_PONG: u8 = 0x21;
const T_GOAWAY: u8 = 0x22;
const T_ACK: u8 = 0x23;
const T_RBUDP: u8 = 0x30;

/// The first frame each side sends.
///
/// HELLO payload (offsets in the payload):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic "WANT" |
/// | 4 | 1 | version, 1 |
/// | 5 | 1 | role: 1 initiator, 2 acceptor |
/// | 6 | 1 | flags: 1 resumable (the sender keeps sessions), 2 resume (this HELLO resumes a session) |
/// | 7 | 1 | reserved, 0 |
/// | 8 | 32 | nonce (random, fresh for every connection) |
/// | 40 | 4 | max_streams: streams the receiver of this HELLO may have open that it opened, >= 1 |
/// | 44 | 4 | initial_window: credit of every new stream, 1024..=[`MAX_WINDOW`] |
/// | 48 | 1 | name length n, 1..=64 |
/// | 49 | n | relay name |
/// | 49+n | 1 | cluster length m, 1..=64 |
/// | 50+n | m | cluster name |
/// | 50+n+m | 16 | session id, only with flag 2 |
///
/// Names are 1..=64 characters from `A-Z a-z 0-9 . _ -`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Sender's role.
    pub role: Role,
    /// Sender's fresh nonce.
    pub nonce: [u8; NONCE_LEN],
    /// How many streams the receiver may open concurrently.
    pub max_streams: u32,
    /// The credit every new stream starts with, in both directions'
    /// receive side of the sender.
    pub initial_window: u32,
    /// Sender's relay name.
    pub name: String,
    /// Sender's cluster name.
    pub cluster: String,
    /// The sender keeps this connection's session through a reconnect.
    pub resumable: bool,
    /// The session this connection resumes (its id), if it does.
    pub resume: Option<[u8; SESSION_ID_LEN]>,
}

/// HELLO flag: the sender keeps sessions.
const HELLO_RESUMABLE: u8 = 1;
/// HELLO flag: this HELLO resumes the session whose id follows the names.
const HELLO_RESUME: u8 = 2;

/// One decoded frame. DATA borrows its payload from the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Handshake: who the sender is, its nonce and limits.
    Hello(Hello),
    /// Handshake: the sender's proof of the key.
    Auth {
        /// HMAC-SHA256 over the handshake transcript.
        mac: [u8; MAC_LEN],
    },
    /// Resumption, after AUTH: how much of the session's sequenced
    /// frames the sender has received from the receiver.
    Resume {
        /// Bytes received.
        received: u64,
    },
    /// Acknowledgement: how much of the session's sequenced frames the
    /// sender has received (the receiver may forget them).
    Ack {
        /// Bytes received.
        received: u64,
    },
    /// Open a stream to `destination` on behalf of `source`.
    Open {
        /// The new stream's id.
        stream: StreamId,
        /// Where the far relay must connect.
        destination: SocketAddr,
        /// The original source, passed on in the delivery preamble.
        source: SocketAddr,
        /// The ranks' request that the stream's bulk data be blasted
        /// (from a kind-3 connect preamble).
        blast: Option<BlastRequest>,
    },
    /// The far relay connected to the destination.
    OpenOk {
        /// Stream id.
        stream: StreamId,
    },
    /// Stream bytes.
    Data {
        /// Stream id.
        stream: StreamId,
        /// The bytes (non-empty).
        payload: &'a [u8],
    },
    /// More credit for the receiver of this frame on a stream.
    WindowUpdate {
        /// Stream id.
        stream: StreamId,
        /// Bytes of additional credit.
        increment: u32,
    },
    /// The sender will send no more bytes on the stream (half-close).
    Fin {
        /// Stream id.
        stream: StreamId,
    },
    /// The stream is aborted in both directions.
    Reset {
        /// Stream id.
        stream: StreamId,
        /// Why.
        reason: Reason,
    },
    /// Liveness probe; answered by PONG with the same payload.
    Ping {
        /// Opaque.
        payload: [u8; 8],
    },
    /// Answer to PING.
    Pong {
        /// The PING's payload.
        payload: [u8; 8],
    },
    /// The sender opens no more streams and accepts no more; with a
    /// non-zero code it closes the connection now.
    GoAway {
        /// Why.
        code: CloseCode,
        /// The highest stream id opened by the receiver that the sender
        /// accepted.
        last_stream: StreamId,
    },
    /// One control message of the RBUDP transport ([`crate::rbudp`]),
    /// opaque to the trunk: the trunk is the RBUDP control channel.
    Rbudp {
        /// The message (non-empty).
        payload: &'a [u8],
    },
}

/// What is wrong with a frame.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    /// A type byte this version does not define.
    #[error("unknown frame type {0:#04x}")]
    UnknownType(u8),
    /// Non-zero flags.
    #[error("frame type {frame_type:#04x} with flags {flags:#04x}")]
    NonZeroFlags {
        /// Type byte.
        frame_type: u8,
        /// Flags byte.
        flags: u8,
    },
    /// Stream id 0 on a stream frame, or non-zero on a connection frame.
    #[error("frame type {frame_type:#04x} on stream {stream}")]
    BadStreamId {
        /// Type byte.
        frame_type: u8,
        /// Stream id in the header.
        stream: u32,
    },
    /// A payload length the type does not allow (too long, too short, or
    /// not the fixed length).
    #[error("frame type {frame_type:#04x} with payload length {len}")]
    BadLength {
        /// Type byte.
        frame_type: u8,
        /// Length in the header.
        len: u32,
    },
    /// HELLO magic is not "WANT".
    #[error("bad HELLO magic: not a wanrelay trunk")]
    BadMagic,
    /// HELLO from another protocol version.
    #[error("unsupported trunk protocol version {0}")]
    UnsupportedVersion(u8),
    /// HELLO role byte other than 1 or 2.
    #[error("bad role byte {0}")]
    BadRole(u8),
    /// Name empty, too long, or with a forbidden character.
    #[error("bad relay or cluster name")]
    BadName,
    /// A HELLO whose name lengths do not add up to the payload length.
    #[error("HELLO names do not fill the payload exactly")]
    BadHelloLength,
    /// HELLO max_streams 0 or initial_window out of range.
    #[error("HELLO limit out of range")]
    BadLimit,
    /// A reserved byte is not zero.
    #[error("reserved byte is not zero")]
    NonZeroReserved,
    /// OPEN address family not 4 or 6.
    #[error("address family {0} (expected 4 or 6)")]
    BadFamily(u8),
    /// OPEN with a zero port or an unspecified address.
    #[error("OPEN with an unspecified address or port 0")]
    BadAddress,
    /// OPEN with an invalid blast request.
    #[error("OPEN: {0}")]
    BadBlastRequest(BlastRequestError),
    /// WINDOW_UPDATE of 0 or more than [`MAX_WINDOW`].
    #[error("WINDOW_UPDATE increment {0} out of range")]
    BadIncrement(u32),
    /// RESET with reason 0.
    #[error("RESET with reason 0")]
    ZeroReason,
}

impl FrameError {
    /// The close code a connection sends when it receives this.
    pub fn close_code(&self) -> CloseCode {
        match self {
            FrameError::BadLength { .. } => CloseCode::FrameSize,
            FrameError::UnsupportedVersion(_) => CloseCode::Version,
            _ => CloseCode::Protocol,
        }
    }
}

/// Allowed payload lengths and stream-id rule of a frame type.
fn frame_rule(ty: u8) -> Option<(usize, usize, bool)> {
    // (min len, max len, on a stream)
    Some(match ty {
        T_HELLO => (HELLO_FIXED_LEN + 2, MAX_HELLO_LEN, false),
        T_AUTH => (MAC_LEN, MAC_LEN, false),
        T_RESUME | T_ACK => (8, 8, false),
        T_OPEN => (OPEN_LEN, OPEN_BLAST_LEN, true),
        T_OPEN_OK | T_FIN => (0, 0, true),
        T_DATA => (1, MAX_DATA_PAYLOAD, true),
        T_WINDOW_UPDATE => (4, 4, true),
        T_RESET => (1, 1, true),
        T_PING | T_PONG => (8, 8, false),
        T_GOAWAY => (5, 5, false),
        T_RBUDP => (1, MAX_DATA_PAYLOAD, false),
        _ => return None,
    })
}

/// Decodes one frame from the start of `buf`.
///
/// Returns [`Decoded::NeedMore`] with the number of bytes still missing
/// (at least 1) when `buf` holds only part of a frame, or the frame and the
/// bytes it took.
///
/// # Errors
/// A [`FrameError`] as soon as the bytes present are invalid: the header
/// is checked byte by byte before any payload is awaited.
pub fn decode(buf: &[u8]) -> Result<Decoded<Frame<'_>>, FrameError> {
    let header = match decode_header(buf)? {
        Decoded::NeedMore(n) => return Ok(Decoded::NeedMore(n)),
        Decoded::Complete(header, _) => header,
    };
    let total = FRAME_HEADER_LEN + header.len;
    if buf.len() < total {
        return Ok(Decoded::NeedMore(total - buf.len()));
    }
    let frame = decode_payload(&header, &buf[FRAME_HEADER_LEN..total])?;
    Ok(Decoded::Complete(frame, total))
}

/// A frame header that passed the checks of its type.
struct Header {
    ty: u8,
    stream: StreamId,
    /// Payload length, allowed for the type.
    len: usize,
}

/// Checks a frame header byte by byte as far as `buf` goes: the type and
/// flags first, then the stream id and the length the type allows.
fn decode_header(buf: &[u8]) -> Result<Decoded<Header>, FrameError> {
    let Some(&ty) = buf.first() else {
        return Ok(Decoded::NeedMore(FRAME_HEADER_LEN));
    };
    let (min, max, on_stream) = frame_rule(ty).ok_or(FrameError::UnknownType(ty))?;
    if let Some(&flags) = buf.get(1) {
        if flags != 0 {
            return Err(FrameError::NonZeroFlags {
                frame_type: ty,
                flags,
            });
        }
    }
    if buf.len() < FRAME_HEADER_LEN {
        return Ok(Decoded::NeedMore(FRAME_HEADER_LEN - buf.len()));
    }
    let stream = u32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
    let len = u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]);
    if (stream != 0) != on_stream {
        return Err(FrameError::BadStreamId {
            frame_type: ty,
            stream,
        });
    }
    let ulen = len as usize;
    // OPEN is the one type with two lengths (without and with a request).
    if ulen < min || ulen > max || (ty == T_OPEN && ulen != OPEN_LEN && ulen != OPEN_BLAST_LEN) {
        return Err(FrameError::BadLength {
            frame_type: ty,
            len,
        });
    }
    let header = Header {
        ty,
        stream,
        len: ulen,
    };
    Ok(Decoded::Complete(header, FRAME_HEADER_LEN))
}

/// The frame of a checked header and its whole payload `p`.
fn decode_payload<'a>(header: &Header, p: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    let stream = header.stream;
    Ok(match header.ty {
        T_HELLO => Frame::Hello(decode_hello(p)?),
        T_AUTH => {
            let mut mac = [0u8; MAC_LEN];
            mac.copy_from_slice(p);
            Frame::Auth { mac }
        }
        T_RESUME | T_ACK => {
            let received = u64::from_be_bytes(p[..8].try_into().expect("8 bytes"));
            if header.ty == T_RESUME {
                Frame::Resume { received }
            } else {
                Frame::Ack { received }
            }
        }
        T_OPEN => decode_open(stream, p)?,
        T_OPEN_OK => Frame::OpenOk { stream },
        T_DATA => Frame::Data { stream, payload: p },
        T_WINDOW_UPDATE => {
            let increment = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
            if increment == 0 || increment > MAX_WINDOW {
                return Err(FrameError::BadIncrement(increment));
            }
            Frame::WindowUpdate { stream, increment }
        }
        T_FIN => Frame::Fin { stream },
        T_RESET => Frame::Reset {
            stream,
            reason: Reason::from_code(p[0]).ok_or(FrameError::ZeroReason)?,
        },
        T_PING | T_PONG => {
            let mut payload = [0u8; 8];
            payload.copy_from_slice(p);
            if header.ty == T_PING {
                Frame::Ping { payload }
            } else {
                Frame::Pong { payload }
            }
        }
        T_GOAWAY => Frame::GoAway {
            code: CloseCode::from_code(p[0]),
            last_stream: u32::from_be_bytes([p[1], p[2], p[3], p[4]]),
        },
        T_RBUDP => Frame::Rbudp { payload: p },
        ty => return Err(FrameError::UnknownType(ty)),
    })
}

/// Whether `name` is a valid relay or cluster name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

fn decode_hello(p: &[u8]) -> Result<Hello, FrameError> {
    if p[0..4] != TRUNK_MAGIC {
        return Err(FrameError::BadMagic);
    }
    if p[4] != TRUNK_VERSION {
        return Err(FrameError::UnsupportedVersion(p[4]));
    }
    let role = match p[5] {
        1 => Role::Initiator,
        2 => Role::Acceptor,
        r => return Err(FrameError::BadRole(r)),
    };
    let flags = p[6];
    if flags & !(HELLO_RESUMABLE | HELLO_RESUME) != 0 || p[7] != 0 {
        return Err(FrameError::NonZeroReserved);
    }
    let session_len = if flags & HELLO_RESUME != 0 {
        SESSION_ID_LEN
    } else {
        0
    };
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&p[8..40]);
    let max_streams = u32::from_be_bytes([p[40], p[41], p[42], p[43]]);
    let initial_window = u32::from_be_bytes([p[44], p[45], p[46], p[47]]);
    if max_streams == 0 || !(MIN_INITIAL_WINDOW..=MAX_WINDOW).contains(&initial_window) {
        return Err(FrameError::BadLimit);
    }
    let n = p[48] as usize;
    let name_end = 49 + n;
    let m = *p.get(name_end).ok_or(FrameError::BadHelloLength)? as usize;
    let cluster_end = name_end + 1 + m;
    if cluster_end + session_len != p.len() {
        return Err(FrameError::BadHelloLength);
    }
    let name = std::str::from_utf8(&p[49..name_end]).map_err(|_| FrameError::BadName)?;
    let cluster =
        std::str::from_utf8(&p[name_end + 1..cluster_end]).map_err(|_| FrameError::BadName)?;
    if !valid_name(name) || !valid_name(cluster) {
        return Err(FrameError::BadName);
    }
    Ok(Hello {
        role,
        nonce,
        max_streams,
        initial_window,
        name: name.to_owned(),
        cluster: cluster.to_owned(),
        resumable: flags & HELLO_RESUMABLE != 0,
        resume: (session_len > 0)
            .then(|| p[cluster_end..].try_into().expect("length checked above")),
    })
}

fn decode_open(stream: StreamId, p: &[u8]) -> Result<Frame<'static>, FrameError> {
    let (destination, source) = decode_addresses(p)?;
    let blast = match p.len() {
        OPEN_BLAST_LEN => {
            Some(BlastRequest::decode(&p[OPEN_LEN..]).map_err(FrameError::BadBlastRequest)?)
        }
        _ => None,
    };
    Ok(Frame::Open {
        stream,
        destination,
        source,
        blast,
    })
}

fn decode_addresses(p: &[u8]) -> Result<(SocketAddr, SocketAddr), FrameError> {
    let dport = u16::from_be_bytes([p[2], p[3]]);
    let sport = u16::from_be_bytes([p[4], p[5]]);
    let d = address(p[0], &p[6..22], dport)?;
    let s = address(p[1], &p[22..38], sport)?;
    Ok((d, s))
}

fn address(fam: u8, b: &[u8], port: u16) -> Result<SocketAddr, FrameError> {
    let ip = match fam {
        4 => {
            if b[4..].iter().any(|&x| x != 0) {
                return Err(FrameError::NonZeroReserved);
            }
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(b);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        f => return Err(FrameError::BadFamily(f)),
    };
    if ip.is_unspecified() || port == 0 {
        return Err(FrameError::BadAddress);
    }
    Ok(SocketAddr::new(ip, port))
}

fn header(out: &mut Vec<u8>, ty: u8, stream: StreamId, len: usize) {
    out.push(ty);
    out.push(0);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(&(len as u32).to_be_bytes());
}

fn put_address(fam: &mut u8, port: &mut [u8], addr: &mut [u8], a: &SocketAddr) {
    port.copy_from_slice(&a.port().to_be_bytes());
    match a.ip() {
        IpAddr::V4(v4) => {
            *fam = 4;
            addr[..4].copy_from_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            *fam = 6;
            addr.copy_from_slice(&v6.octets());
        }
    }
}

impl Frame<'_> {
    /// The encoded length of this frame.
    pub fn encoded_len(&self) -> usize {
        FRAME_HEADER_LEN
            + match self {
                Frame::Hello(h) => hello_len(h),
                Frame::Auth { .. } => MAC_LEN,
                Frame::Resume { .. } | Frame::Ack { .. } => 8,
                Frame::Open { blast: None, .. } => OPEN_LEN,
                Frame::Open { blast: Some(_), .. } => OPEN_BLAST_LEN,
                Frame::OpenOk { .. } | Frame::Fin { .. } => 0,
                Frame::Data { payload, .. } => payload.len(),
                Frame::WindowUpdate { .. } => 4,
                Frame::Reset { .. } => 1,
                Frame::Ping { .. } | Frame::Pong { .. } => 8,
                Frame::GoAway { .. } => 5,
                Frame::Rbudp { payload } => payload.len(),
            }
    }

    /// Appends the encoded frame to `out`.
    ///
    /// # Panics
    /// If the frame is not encodable: a HELLO with an invalid name, a DATA
    /// (or RBUDP) payload empty or longer than [`MAX_DATA_PAYLOAD`], or stream id 0 on
    /// a stream frame. These are bugs of the caller, never peer input; the
    /// connection state machine only encodes valid frames.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Hello(h) => encode_hello(out, h),
            Frame::Auth { mac } => {
                header(out, T_AUTH, 0, MAC_LEN);
                out.extend_from_slice(mac);
            }
            Frame::Resume { received } => {
                header(out, T_RESUME, 0, 8);
                out.extend_from_slice(&received.to_be_bytes());
            }
            Frame::Ack { received } => {
                header(out, T_ACK, 0, 8);
                out.extend_from_slice(&received.to_be_bytes());
            }
            Frame::Open {
                stream,
                destination,
                source,
                blast,
            } => encode_open(out, *stream, destination, source, blast.as_ref()),
            Frame::OpenOk { stream } => stream_header(out, T_OPEN_OK, *stream, 0),
            Frame::Data { stream, payload } => {
                assert!(
                    !payload.is_empty() && payload.len() <= MAX_DATA_PAYLOAD,
                    "DATA payload length {}",
                    payload.len()
                );
                stream_header(out, T_DATA, *stream, payload.len());
                out.extend_from_slice(payload);
            }
            Frame::WindowUpdate { stream, increment } => {
                stream_header(out, T_WINDOW_UPDATE, *stream, 4);
                out.extend_from_slice(&increment.to_be_bytes());
            }
            Frame::Fin { stream } => stream_header(out, T_FIN, *stream, 0),
            Frame::Reset { stream, reason } => {
                stream_header(out, T_RESET, *stream, 1);
                out.push(reason.code());
            }
            Frame::Ping { payload } => {
                header(out, T_PING, 0, 8);
                out.extend_from_slice(payload);
            }
            Frame::Pong { payload } => {
                header(out, T_PONG, 0, 8);
                out.extend_from_slice(payload);
            }
            Frame::GoAway { code, last_stream } => {
                header(out, T_GOAWAY, 0, 5);
                out.push(code.code());
                out.extend_from_slice(&last_stream.to_be_bytes());
            }
            Frame::Rbudp { payload } => {
                assert!(
                    !payload.is_empty() && payload.len() <= MAX_DATA_PAYLOAD,
                    "RBUDP payload length {}",
                    payload.len()
                );
                header(out, T_RBUDP, 0, payload.len());
                out.extend_from_slice(payload);
            }
        }
    }
}

fn encode_hello(out: &mut Vec<u8>, h: &Hello) {
    assert!(
        valid_name(&h.name) && valid_name(&h.cluster),
        "invalid HELLO name"
    );
    header(out, T_HELLO, 0, hello_len(h));
    let mut flags = 0;
    if h.resumable {
        flags |= HELLO_RESUMABLE;
    }
    if h.resume.is_some() {
        flags |= HELLO_RESUME;
    }
    out.extend_from_slice(&TRUNK_MAGIC);
    out.extend_from_slice(&[TRUNK_VERSION, h.role.code(), flags, 0]);
    out.extend_from_slice(&h.nonce);
    out.extend_from_slice(&h.max_streams.to_be_bytes());
    out.extend_from_slice(&h.initial_window.to_be_bytes());
    out.push(h.name.len() as u8);
    out.extend_from_slice(h.name.as_bytes());
    out.push(h.cluster.len() as u8);
    out.extend_from_slice(h.cluster.as_bytes());
    if let Some(id) = &h.resume {
        out.extend_from_slice(id);
    }
}

fn hello_len(h: &Hello) -> usize {
    HELLO_FIXED_LEN + h.name.len() + h.cluster.len() + h.resume.map_or(0, |_| SESSION_ID_LEN)
}

/// Whether a frame of type byte `ty` is sequenced: counted, acknowledged
/// and replayed after a resumption (everything but the handshake, the
/// keepalive and the acknowledgements).
pub fn is_sequenced(ty: u8) -> bool {
    !matches!(ty, T_HELLO | T_AUTH | T_RESUME | T_PING | T_PONG | T_ACK)
}

fn encode_open(
    out: &mut Vec<u8>,
    stream: StreamId,
    destination: &SocketAddr,
    source: &SocketAddr,
    blast: Option<&BlastRequest>,
) {
    assert!(stream != 0, "OPEN on stream 0");
    let len = if blast.is_some() {
        OPEN_BLAST_LEN
    } else {
        OPEN_LEN
    };
    header(out, T_OPEN, stream, len);
    let mut p = [0u8; OPEN_LEN];
    let (fams, rest) = p.split_at_mut(2);
    let (ports, addrs) = rest.split_at_mut(4);
    let (dport, sport) = ports.split_at_mut(2);
    let (daddr, saddr) = addrs.split_at_mut(16);
    let (dfam, sfam) = fams.split_at_mut(1);
    put_address(&mut dfam[0], dport, daddr, destination);
    put_address(&mut sfam[0], sport, saddr, source);
    out.extend_from_slice(&p);
    if let Some(r) = blast {
        out.extend_from_slice(&r.encode());
    }
}

fn stream_header(out: &mut Vec<u8>, ty: u8, stream: StreamId, len: usize) {
    assert!(stream != 0, "stream frame on stream 0");
    header(out, ty, stream, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(f: Frame<'_>) {
        let mut b = Vec::new();
        f.encode(&mut b);
        assert_eq!(b.len(), f.encoded_len());
        assert_eq!(decode(&b), Ok(Decoded::Complete(f.clone(), b.len())));
        for n in 0..b.len() {
            assert!(
                matches!(decode(&b[..n]), Ok(Decoded::NeedMore(k)) if k == b.len() - n || n < FRAME_HEADER_LEN)
            );
        }
    }

    #[test]
    fn every_frame_type_round_trips() {
        round_trip(Frame::Hello(Hello {
            role: Role::Acceptor,
            nonce: [7; 32],
            max_streams: 10,
            initial_window: 65536,
            name: "b-relay0".into(),
            cluster: "b".into(),
            resumable: true,
            resume: Some([7; 16]),
        }));
        round_trip(Frame::Auth { mac: [9; 32] });
        round_trip(Frame::Open {
            stream: 3,
            destination: "10.1.0.3:4000".parse().unwrap(),
            source: "[fd00::2]:5000".parse().unwrap(),
            blast: None,
        });
        round_trip(Frame::Open {
            stream: 5,
            destination: "10.1.0.3:4000".parse().unwrap(),
            source: "10.0.0.2:5000".parse().unwrap(),
            blast: Some(BlastRequest::new(12_500_000, 1472).unwrap()),
        });
        round_trip(Frame::OpenOk { stream: 3 });
        round_trip(Frame::Data {
            stream: 5,
            payload: b"hello",
        });
        round_trip(Frame::WindowUpdate {
            stream: 5,
            increment: MAX_WINDOW,
        });
        round_trip(Frame::Fin { stream: 2 });
        round_trip(Frame::Reset {
            stream: 2,
            reason: Reason::Refused,
        });
        round_trip(Frame::Ping {
            payload: [1, 2, 3, 4, 5, 6, 7, 8],
        });
        round_trip(Frame::Pong { payload: [1; 8] });
        round_trip(Frame::GoAway {
            code: CloseCode::Shutdown,
            last_stream: 41,
        });
    }

    #[test]
    fn data_header_is_byte_exact() {
        let mut b = Vec::new();
        Frame::Data {
            stream: 0x0102_0304,
            payload: b"ab",
        }
        .encode(&mut b);
        assert_eq!(b, [0x12, 0, 1, 2, 3, 4, 0, 0, 0, 2, b'a', b'b']);
    }

    #[test]
    fn huge_length_is_refused_from_the_header_alone() {
        let h = [T_DATA, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            decode(&h),
            Err(FrameError::BadLength {
                frame_type: T_DATA,
                len: u32::MAX
            })
        );
        let h = [T_DATA, 0, 0, 0, 0, 1, 0, 1, 0, 1];
        assert!(matches!(decode(&h), Err(FrameError::BadLength { .. })));
    }

    #[test]
    fn unknown_type_flags_and_stream_zero_are_refused() {
        assert_eq!(decode(&[0x99]), Err(FrameError::UnknownType(0x99)));
        assert!(matches!(
            decode(&[T_DATA, 1]),
            Err(FrameError::NonZeroFlags { .. })
        ));
        let h = [T_DATA, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        assert!(matches!(decode(&h), Err(FrameError::BadStreamId { .. })));
        let h = [T_PING, 0, 0, 0, 0, 1, 0, 0, 0, 8];
        assert!(matches!(decode(&h), Err(FrameError::BadStreamId { .. })));
    }

    #[test]
    fn open_with_a_blast_request_is_byte_exact() {
        let mut b = Vec::new();
        Frame::Open {
            stream: 1,
            destination: "10.1.0.3:40000".parse().unwrap(),
            source: "10.0.0.2:1024".parse().unwrap(),
            blast: Some(BlastRequest::new(12_500_000, 1472).unwrap()),
        }
        .encode(&mut b);
        let mut expected = vec![T_OPEN, 0, 0, 0, 0, 1, 0, 0, 0, 54];
        expected.extend_from_slice(&[4, 4, 0x9c, 0x40, 0x04, 0x00]);
        expected.extend_from_slice(&[10, 1, 0, 3]);
        expected.extend_from_slice(&[0; 12]);
        expected.extend_from_slice(&[10, 0, 0, 2]);
        expected.extend_from_slice(&[0; 12]);
        expected.extend_from_slice(&[
            0, 0, 0, 0, 0, 0xbe, 0xbc, 0x20, 0x05, 0xc0, 0, 0, 0, 0, 0, 0,
        ]);
        assert_eq!(b, expected);
    }

    #[test]
    fn open_lengths_other_than_38_and_54_are_refused_from_the_header() {
        for len in [0u32, 37, 39, 53, 55, 64, 1000] {
            let mut h = vec![T_OPEN, 0, 0, 0, 0, 1];
            h.extend_from_slice(&len.to_be_bytes());
            assert_eq!(
                decode(&h),
                Err(FrameError::BadLength {
                    frame_type: T_OPEN,
                    len
                }),
                "OPEN of {len} bytes"
            );
        }
        for len in [38u32, 54] {
            let mut h = vec![T_OPEN, 0, 0, 0, 0, 1];
            h.extend_from_slice(&len.to_be_bytes());
            assert_eq!(decode(&h), Ok(Decoded::NeedMore(len as usize)));
        }
    }

    #[test]
    fn open_with_a_bad_blast_request_is_refused() {
        let good = {
            let mut b = Vec::new();
            Frame::Open {
                stream: 1,
                destination: "10.1.0.3:1".parse().unwrap(),
                source: "10.0.0.2:2".parse().unwrap(),
                blast: Some(BlastRequest::new(1000, 64).unwrap()),
            }
            .encode(&mut b);
            b
        };
        let ext = FRAME_HEADER_LEN + OPEN_LEN;
        let mut b = good.clone();
        b[ext..ext + 8].fill(0);
        assert_eq!(
            decode(&b),
            Err(FrameError::BadBlastRequest(BlastRequestError::ZeroRate))
        );
        let mut b = good.clone();
        b[ext + 8..ext + 10].copy_from_slice(&63u16.to_be_bytes());
        assert_eq!(
            decode(&b),
            Err(FrameError::BadBlastRequest(BlastRequestError::Payload(63)))
        );
        let mut b = good.clone();
        b[ext + 15] = 1;
        assert_eq!(
            decode(&b),
            Err(FrameError::BadBlastRequest(
                BlastRequestError::NonZeroReserved(15)
            ))
        );
        assert_eq!(
            FrameError::BadBlastRequest(BlastRequestError::ZeroRate).close_code(),
            CloseCode::Protocol
        );
    }

    #[test]
    fn bad_payload_values_are_refused() {
        let mut b = Vec::new();
        header(&mut b, T_WINDOW_UPDATE, 1, 4);
        b.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(decode(&b), Err(FrameError::BadIncrement(0)));
        let mut b = Vec::new();
        header(&mut b, T_WINDOW_UPDATE, 1, 4);
        b.extend_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(decode(&b), Err(FrameError::BadIncrement(u32::MAX)));
        let mut b = Vec::new();
        header(&mut b, T_RESET, 1, 1);
        b.push(0);
        assert_eq!(decode(&b), Err(FrameError::ZeroReason));
    }
}
