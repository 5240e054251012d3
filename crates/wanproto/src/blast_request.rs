//! The ranks' blast request: a pair of MPI ranks asks that their
//! connection's bulk data be blasted (RBUDP) at a rate and datagram size.
//! It travels in a kind-3 connect preamble and a kind-4 blast update
//! ([`crate::preamble`]) and in the trunk OPEN of its stream
//! ([`crate::frame`]), so both codecs take it from here.

use thiserror::Error;

use crate::wire::{BLAST_REQUEST_LEN, MAX_DATAGRAM, MIN_DATAGRAM};

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
    /// Kind 4: rate 0 (a withdrawal) with a non-zero payload.
    #[error("blast request with rate 0 and payload {0}: a withdrawal (rate 0) has payload 0")]
    WithdrawPayload(u16),
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
    /// `withdraw`: rate 0 with payload 0 is valid (kind 4).
    pub(crate) fn check_prefix(prefix: &[u8], withdraw: bool) -> Result<(), BlastRequestError> {
        let zero_rate = || prefix[..8].iter().all(|&x| x == 0);
        for (i, &byte) in prefix.iter().take(BLAST_REQUEST_LEN).enumerate() {
            match i {
                7 if !withdraw && zero_rate() => return Err(BlastRequestError::ZeroRate),
                9 => {
                    let payload = u16::from_be_bytes([prefix[8], byte]);
                    if zero_rate() {
                        if payload != 0 {
                            return Err(BlastRequestError::WithdrawPayload(payload));
                        }
                    } else if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&usize::from(payload)) {
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
        BlastRequest::check_prefix(b, false)?;
        let mut rate = [0u8; 8];
        rate.copy_from_slice(&b[0..8]);
        Ok(BlastRequest {
            rate: u64::from_be_bytes(rate),
            payload: u16::from_be_bytes([b[8], b[9]]),
        })
    }
}
