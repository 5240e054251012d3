//! Session resumption: a trunk whose transport is lost keeps its streams
//! and continues on a new transport, with nothing lost or duplicated.
//!
//! * Both ends announce `resumable` in HELLO; the first handshake then
//!   derives a session id from the key and both HELLOs.
//! * Every *sequenced* frame ([`frame::is_sequenced`]: all but handshake,
//!   keepalive and ACK frames) is counted by its encoded length. The
//!   sender keeps the ones sent in a replay buffer until the peer's ACK
//!   covers them; at most [`Config::resume_buffer`] is unacknowledged (new
//!   sequenced frames wait beyond it). The receiver acknowledges every
//!   MiB, and 20 ms after the first unacknowledged byte.
//! * When the transport ends (or stays silent for `idle_timeout`) the
//!   connection is *suspended* ([`Event::Suspended`]): streams, buffers and
//!   credit stay; writes are buffered.
//! * [`TrunkConnection::begin_resume`] on a new transport runs a fresh
//!   handshake (new nonces, authenticated like the first; the initiator's
//!   HELLO names the session), then each end sends RESUME with what it
//!   received; each replays the rest of its buffer and the session goes on
//!   ([`Event::Resumed`]). A peer that does not know the session answers
//!   GOAWAY `UnknownSession`, which closes the connection for good.
//! * Not resumed within `resume_timeout`: closed with the suspending error.

use super::state::{Room, State, TrunkConnection};
use crate::frame::{Frame, Hello};
use crate::wire::{FRAME_HEADER_LEN, NONCE_LEN, SESSION_ID_LEN};

use super::event::{ConnectionError, Event};

impl TrunkConnection {
    /// The session id, if this connection's session survives a lost
    /// transport (both ends resumable, handshake done, not closed).
    pub fn session_id(&self) -> Option<[u8; SESSION_ID_LEN]> {
        self.session.id.filter(|_| self.state != State::Closed)
    }

    /// Whether the session is suspended (no transport) or resuming on a
    /// new one.
    pub fn is_suspended(&self) -> bool {
        matches!(self.state, State::Suspended | State::Resuming)
    }

    /// Whether the connection has (or is setting up) a transport: false
    /// once closed or suspended.
    pub fn has_transport(&self) -> bool {
        matches!(
            self.state,
            State::Handshake | State::Established | State::Resuming
        )
    }

    /// Whether a stream may be opened here now: established, or suspended
    /// (its OPEN waits for the resumption); never after a GOAWAY.
    pub fn may_open_streams(&self) -> bool {
        matches!(
            self.state,
            State::Established | State::Suspended | State::Resuming
        ) && !self.going_away_sent
            && !self.going_away_received
    }

    /// Bytes of sent sequenced frames the peer has not acknowledged yet
    /// (the replay buffer).
    pub fn unacknowledged_bytes(&self) -> u64 {
        self.session.replay.len() as u64
    }

    /// Starts resuming the session on a new transport: a fresh HELLO
    /// (with the session id, for the initiator) is queued, and the
    /// handshake runs as the first did; once both ends are authenticated
    /// and have exchanged RESUME, [`Event::Resumed`] follows. A transport
    /// still in use is given up first; a resumption in progress is
    /// abandoned. `nonce` must be fresh, as for [`TrunkConnection::new`].
    ///
    /// # Errors
    /// [`ConnectionError::UnknownSession`] if the session is not
    /// resumable (never was, or closed).
    pub fn begin_resume(
        &mut self,
        now: u64,
        nonce: [u8; NONCE_LEN],
    ) -> Result<(), ConnectionError> {
        self.session.now = now;
        let Some(id) = self.session.id else {
            return Err(ConnectionError::UnknownSession);
        };
        match self.state {
            State::Closed | State::Handshake => return Err(ConnectionError::UnknownSession),
            State::Established => self.suspend(ConnectionError::TransportClosed),
            State::Suspended | State::Resuming => {}
        }
        let hello = Frame::Hello(Hello {
            role: self.role,
            nonce,
            max_streams: self.config.max_streams,
            initial_window: self.config.min_stream_window,
            name: self.config.name.clone(),
            cluster: self.config.cluster.clone(),
            resumable: true,
            resume: (self.role == crate::wire::Role::Initiator).then_some(id),
        });
        let mut our_hello = Vec::with_capacity(hello.encoded_len());
        hello.encode(&mut our_hello);
        self.our_hello = our_hello.clone();
        self.peer_hello = None;
        self.handshake_out.clear();
        self.handshake_out.push_back(our_hello);
        self.inbuf.clear();
        self.created_at = now;
        self.last_input = now;
        self.session.resume_authenticated = false;
        self.state = State::Resuming;
        Ok(())
    }

    /// Gives up the transport but keeps the session (if it is resumable;
    /// else closes with `error`). From a resumption in progress: back to
    /// suspended.
    pub(super) fn suspend(&mut self, error: ConnectionError) {
        let resumable = self.session.active() && self.config.resume_timeout > 0;
        match self.state {
            State::Established if resumable => {
                self.session.suspended_at = self.session.now;
                self.session.suspend_error = Some(error.clone());
                self.stats.suspends += 1;
            }
            State::Resuming => {}
            _ => return self.fail(error),
        }
        self.state = State::Suspended;
        self.inbuf.clear();
        self.handshake_out.clear();
        self.pong_pending = None;
        self.ping_pending = false;
        self.ping_outstanding = None;
        self.session.resend_end = 0;
        self.session.resend_pos = 0;
        self.events.push_back(Event::Suspended { error });
    }

    /// When a suspended session expires.
    pub(super) fn resume_deadline(&self) -> u64 {
        self.session.suspended_at + self.config.resume_timeout
    }

    /// A suspended session's timer: closed when not resumed in time.
    pub(super) fn handle_suspended_timeout(&mut self, now: u64) {
        if now >= self.resume_deadline() {
            let why = self
                .session
                .suspend_error
                .take()
                .unwrap_or(ConnectionError::TransportClosed);
            self.fail(ConnectionError::ResumeTimeout(Box::new(why)));
        }
    }

    /// A frame while resuming: the handshake again, then the peer's RESUME.
    /// A failure sends the session back to suspended (a new transport may
    /// do better), except an inconsistent RESUME, which closes it.
    pub(super) fn handle_resume_frame(&mut self, now: u64, f: Frame<'_>, raw: &[u8]) {
        match (
            f,
            self.peer_hello.is_some(),
            self.session.resume_authenticated,
        ) {
            (Frame::Hello(h), false, _) => {
                let known = self
                    .peer
                    .as_ref()
                    .is_some_and(|p| p.name == h.name && p.cluster == h.cluster);
                let names_session = match self.role {
                    crate::wire::Role::Acceptor => h.resume == self.session.id,
                    crate::wire::Role::Initiator => h.resume.is_none(),
                };
                if h.role != self.role.peer() || !known || !names_session || !h.resumable {
                    return self.suspend(ConnectionError::Protocol(
                        "resuming HELLO from another relay or session",
                    ));
                }
                if self.our_hello[FRAME_HEADER_LEN + 8..FRAME_HEADER_LEN + 8 + NONCE_LEN] == h.nonce
                {
                    return self.suspend(ConnectionError::Protocol("peer echoed our nonce"));
                }
                self.peer_hello = Some(raw.to_vec());
                let (hi, ha) = self.transcript();
                let mac = self.key.auth_mac(self.role, hi, ha);
                self.push_handshake(&Frame::Auth { mac });
            }
            (Frame::Auth { mac }, true, false) => {
                let (hi, ha) = self.transcript();
                if !self.key.verify_auth_mac(self.role.peer(), hi, ha, &mac) {
                    return self.suspend(ConnectionError::AuthFailed);
                }
                self.session.resume_authenticated = true;
                let received = self.session.rx_seq;
                self.push_handshake(&Frame::Resume { received });
            }
            (Frame::Resume { received }, true, true) => {
                if let Err(e) = self.session.acknowledge(received) {
                    return self.fail(e);
                }
                let s = &mut self.session;
                s.resend_end = s.replay.len();
                s.resend_pos = 0;
                // Our RESUME told the peer what we have.
                s.ack_sent = s.rx_seq;
                s.ack_at = None;
                s.ack_due = false;
                s.suspend_error = None;
                let replayed = s.resend_end as u64;
                self.stats.resumes += 1;
                self.stats.replayed += replayed;
                self.state = State::Established;
                self.last_input = now;
                self.events.push_back(Event::Resumed { replayed });
            }
            _ => self.suspend(ConnectionError::Protocol("unexpected frame while resuming")),
        }
    }

    /// After the first handshake: keep the session if both ends can.
    pub(super) fn start_session(&mut self, peer_resumable: bool) {
        if self.config.resume_timeout == 0 || !peer_resumable {
            return;
        }
        let (hi, ha) = self.transcript();
        let secret = self.key.export(b"wanproto session id", hi, ha);
        let mut id = [0u8; SESSION_ID_LEN];
        id.copy_from_slice(&secret[..SESSION_ID_LEN]);
        self.session.first_hellos = Some((hi.to_vec(), ha.to_vec()));
        self.session.id = Some(id);
    }

    /// An ACK from the peer.
    pub(super) fn on_ack(&mut self, received: u64) -> Result<(), ConnectionError> {
        if !self.session.active() {
            return Err(ConnectionError::Protocol("ACK without a resumable session"));
        }
        self.session.acknowledge(received)
    }

    /// The ACK due now, if any (into `out`); false if it did not fit.
    pub(super) fn transmit_ack(&mut self, out: &mut Vec<u8>, room: Room) -> bool {
        if !self.session.ack_due || self.session.rx_seq == self.session.ack_sent {
            return true;
        }
        if !room.fits(out, FRAME_HEADER_LEN + 8) {
            return false;
        }
        let received = self.session.rx_seq;
        Frame::Ack { received }.encode(out);
        self.stats.frames_sent += 1;
        self.session.ack_sent = received;
        self.session.ack_at = None;
        self.session.ack_due = false;
        true
    }

    /// Replayed frames after a resumption, then whether new sequenced
    /// frames may follow now.
    pub(super) fn transmit_replay(&mut self, out: &mut Vec<u8>, room: Room) -> bool {
        if !self.session.resend(out, room.start, room.max_len) {
            return false;
        }
        self.session.may_send_new(self.config.resume_buffer)
    }

    /// Records the new sequenced frames of `out[from..]` for replay.
    pub(super) fn record_sent(&mut self, out: &[u8], from: usize) {
        if self.session.active() {
            self.session.record(&out[from..]);
        }
    }
}
