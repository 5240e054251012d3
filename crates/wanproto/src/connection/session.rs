//! The session layer's bookkeeping of one trunk connection (see
//! [`super::resume`]): what was sent and received in sequenced frames, the
//! replay buffer and the acknowledgements.

use std::collections::VecDeque;

use crate::frame;
use crate::wire::{FRAME_HEADER_LEN, SESSION_ID_LEN};

use super::event::ConnectionError;

/// Acknowledge at least every this many received bytes.
const ACK_EVERY: u64 = 1024 * 1024;
/// Acknowledge this long (ns) after the first unacknowledged byte.
const ACK_DELAY: u64 = 20_000_000;

/// The session layer's state of one connection.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// The session id, once both ends agreed to keep the session.
    pub(super) id: Option<[u8; SESSION_ID_LEN]>,
    /// The first handshake's HELLOs (initiator's, acceptor's): secrets
    /// exported from the session stay the same across resumptions.
    pub(super) first_hellos: Option<(Vec<u8>, Vec<u8>)>,
    /// Sequenced bytes sent, in total.
    pub(super) tx_seq: u64,
    /// Sequenced bytes the peer acknowledged; `replay` holds the rest.
    pub(super) tx_acked: u64,
    pub(super) replay: VecDeque<u8>,
    /// Bytes at the front of `replay` still to be sent again (after a
    /// resumption), and how far that has got.
    pub(super) resend_end: usize,
    pub(super) resend_pos: usize,
    /// Sequenced bytes received, in total, and acknowledged so far.
    pub(super) rx_seq: u64,
    pub(super) ack_sent: u64,
    /// When an ACK falls due (20 ms after the first unacknowledged byte).
    pub(super) ack_at: Option<u64>,
    /// An ACK goes out at the next transmit.
    pub(super) ack_due: bool,
    /// In a resumption: the peer's AUTH was verified.
    pub(super) resume_authenticated: bool,
    /// Why and since when the session is suspended.
    pub(super) suspended_at: u64,
    pub(super) suspend_error: Option<ConnectionError>,
    /// The last `now` the connection was given.
    pub(super) now: u64,
}

impl Session {
    pub(super) fn new(now: u64) -> Session {
        Session {
            now,
            ..Session::default()
        }
    }

    /// Whether the session is kept through transport losses.
    pub(super) fn active(&self) -> bool {
        self.id.is_some()
    }

    /// A sequenced frame of `len` bytes was received.
    pub(super) fn on_received(&mut self, now: u64, len: usize) {
        if !self.active() {
            return;
        }
        self.rx_seq += len as u64;
        if self.rx_seq - self.ack_sent >= ACK_EVERY {
            self.ack_due = true;
        } else if self.ack_at.is_none() && !self.ack_due {
            self.ack_at = Some(now + ACK_DELAY);
        }
    }

    /// When the ACK timer runs out, if it runs.
    pub(super) fn ack_deadline(&self) -> Option<u64> {
        self.ack_at
    }

    /// The ACK timer: an ACK is due once it ran out.
    pub(super) fn on_timer(&mut self, now: u64) {
        if self.ack_at.is_some_and(|t| now >= t) {
            self.ack_at = None;
            self.ack_due = true;
        }
    }

    /// Whether new sequenced frames may be sent (the replay buffer has
    /// room, and what a resumption replays has gone out).
    pub(super) fn may_send_new(&self, limit: u64) -> bool {
        !self.active() || (self.resend_pos >= self.resend_end && (self.replay.len() as u64) < limit)
    }

    /// Frees the replay buffer (the session is over).
    pub(super) fn end(&mut self) {
        self.id = None;
        self.replay = VecDeque::new();
        self.resend_end = 0;
        self.resend_pos = 0;
    }

    /// The peer has received `received` sequenced bytes of ours: forget
    /// them. Errors if that is not between what it acknowledged before and
    /// what was sent.
    pub(super) fn acknowledge(&mut self, received: u64) -> Result<(), ConnectionError> {
        if received < self.tx_acked || received > self.tx_seq {
            return Err(ConnectionError::Protocol(
                "acknowledgement outside the bytes sent",
            ));
        }
        let n = (received - self.tx_acked) as usize;
        self.replay.drain(..n);
        self.tx_acked = received;
        self.resend_end = self.resend_end.saturating_sub(n);
        self.resend_pos = self.resend_pos.saturating_sub(n);
        Ok(())
    }

    /// Records the sequenced frames among `bytes` (whole frames, just
    /// produced for the transport) in the replay buffer.
    pub(super) fn record(&mut self, mut bytes: &[u8]) {
        while bytes.len() >= FRAME_HEADER_LEN {
            let len = frame_len(|i| bytes[i]);
            let (f, rest) = bytes.split_at(len.min(bytes.len()));
            if frame::is_sequenced(f[0]) {
                self.tx_seq += f.len() as u64;
                self.replay.extend(f);
            }
            bytes = rest;
        }
    }

    /// Sends again, after a resumption, the replayed frames that fit
    /// `max_len` bytes of `out` (whole frames, at least one); returns
    /// whether all of them are out.
    pub(super) fn resend(&mut self, out: &mut Vec<u8>, start: usize, max_len: usize) -> bool {
        while self.resend_pos < self.resend_end {
            let p = self.resend_pos;
            let len = frame_len(|i| self.replay[p + i]);
            let used = out.len() - start;
            if used > 0 && used + len > max_len {
                return false;
            }
            out.extend(self.replay.range(p..p + len));
            self.resend_pos += len;
        }
        true
    }
}

/// The encoded length of the frame whose header bytes `byte(i)` gives
/// (the header's length field, bytes 6..10, plus the header).
fn frame_len(byte: impl Fn(usize) -> u8) -> usize {
    FRAME_HEADER_LEN + u32::from_be_bytes([byte(6), byte(7), byte(8), byte(9)]) as usize
}
