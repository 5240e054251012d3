//! One trunk connection between two relays: handshake, stream multiplexing
//! and flow control, as a state machine without I/O or clock.
//!
//! The daemon owns the TCP socket and the timers and drives the machine:
//!
//! ```text
//! bytes read from the socket  -> handle_input(now, bytes)
//! socket writable             -> poll_transmit(now, max_len) -> bytes to write
//! after any call              -> poll_event() until None
//! timer at poll_timeout()     -> handle_timeout(now)
//! socket EOF or error         -> handle_transport_closed()
//! ```
//!
//! Time (`now`) is nanoseconds on any monotone clock the caller chooses.
//!
//! # Flow control
//!
//! Credit is per stream, so a stream whose reader does not read holds at
//! most its own window and never stalls another stream. Receive memory is
//! bounded by [`Config::receive_buffer`]:
//!
//! * every stream starts with [`Config::min_stream_window`] of credit (the
//!   `initial_window` of HELLO); room for that floor is reserved for every
//!   stream that may exist (`2 * max_streams`: the peer's and ours), so a
//!   new stream always gets it;
//! * the rest of the budget is a shared pool: when the application reads a
//!   stream, its window is topped up to as much as
//!   [`Config::max_stream_window`] from the pool (a stream that is being
//!   read fast grows; one that is never read stays at its floor);
//! * credit goes back to the peer in WINDOW_UPDATE once at least half of
//!   the stream's window has been read.
//!
//! A stream that stalls after growing keeps its grown window; other streams
//! then grow less, down to their floor, but never stop.
//!
//! Sending is bounded per stream by [`Config::stream_send_buffer`]:
//! [`TrunkConnection::write`] takes what fits and returns how much it took.

mod config;
mod event;
mod resume;
mod session;
mod state;
mod stream;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

pub use self::config::{Config, ConfigError, MIN_RESUME_BUFFER};
pub use self::event::{
    ConnectionError, ConnectionStats, Event, OpenError, PeerInfo, ReadOutcome, StreamError,
    StreamStats,
};

use self::session::Session;
pub use self::state::TrunkConnection;
use self::state::{Room, State};
use self::stream::{SendEnd, Stream};
use crate::auth::PresharedKey;
use crate::blast_request::BlastRequest;
use crate::frame::{self, Frame, Hello};
use crate::reason::{CloseCode, Reason};
use crate::wire::{
    Decoded, Role, StreamId, FRAME_HEADER_LEN, MAX_DATA_PAYLOAD, MAX_WINDOW, NONCE_LEN,
};

impl TrunkConnection {
    /// A new connection in the handshake; its HELLO is queued for
    /// transmission at once.
    ///
    /// `nonce` must come from a cryptographically secure random source and
    /// never be reused (the daemon uses `getrandom`); `now` starts the
    /// handshake timer.
    ///
    /// # Errors
    /// [`ConfigError`] if `config` is invalid.
    pub fn new(
        config: Config,
        role: Role,
        key: PresharedKey,
        nonce: [u8; NONCE_LEN],
        now: u64,
    ) -> Result<TrunkConnection, ConfigError> {
        config.validate()?;
        let hello = Frame::Hello(Hello {
            role,
            nonce,
            max_streams: config.max_streams,
            initial_window: config.min_stream_window,
            name: config.name.clone(),
            cluster: config.cluster.clone(),
            resumable: config.resume_timeout > 0,
            resume: None,
        });
        let mut our_hello = Vec::with_capacity(hello.encoded_len());
        hello.encode(&mut our_hello);
        let mut c = TrunkConnection {
            config,
            role,
            key,
            state: State::Handshake,
            created_at: now,
            last_input: now,
            our_hello: our_hello.clone(),
            peer: None,
            peer_hello: None,
            inbuf: Vec::new(),
            handshake_out: VecDeque::from([our_hello.clone()]),
            control: VecDeque::new(),
            control_bytes: 0,
            pong_pending: None,
            ping_pending: false,
            ping_seq: 0,
            ping_outstanding: None,
            rtt: None,
            streams: HashMap::new(),
            ctrl_queue: VecDeque::new(),
            send_queue: VecDeque::new(),
            next_local_id: u64::from(role.first_stream_id()),
            last_peer_stream: 0,
            local_streams: 0,
            remote_streams: 0,
            pool_used: 0,
            peer_resumable: false,
            peer_resumes: false,
            going_away_sent: false,
            going_away_received: false,
            events: VecDeque::new(),
            stats: ConnectionStats::default(),
            session: Session::new(now),
        };
        c.our_hello = our_hello;
        Ok(c)
    }

    // ----- queries -------------------------------------------------------

    /// This end's role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The authenticated peer, once [`Event::Authenticated`] was emitted.
    pub fn peer(&self) -> Option<&PeerInfo> {
        self.peer.as_ref()
    }

    /// Whether the handshake completed and the connection is not closed.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    /// Whether the connection is closed (after a graceful drain or an error).
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// Whether new streams may be opened here (established, no GOAWAY).
    pub fn accepts_new_streams(&self) -> bool {
        self.state == State::Established && !self.going_away_sent && !self.going_away_received
    }

    /// Last round-trip time measured with PING (ns).
    pub fn rtt(&self) -> Option<u64> {
        self.rtt
    }

    /// Connection counters.
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }

    /// Counters of a live stream.
    pub fn stream_stats(&self, stream: StreamId) -> Option<StreamStats> {
        self.streams.get(&stream).map(|s| s.stats)
    }

    /// Number of live streams.
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Bytes received and not yet read, over all streams.
    pub fn buffered_receive_bytes(&self) -> u64 {
        self.streams.values().map(|s| s.recv_buf.len() as u64).sum()
    }

    /// Bytes written and not yet transmitted, over all streams: the load
    /// figure for least-loaded trunk selection.
    pub fn buffered_send_bytes(&self) -> u64 {
        self.streams.values().map(|s| s.send_buf.len() as u64).sum()
    }

    /// Receive memory committed to the peer (credit plus unread bytes);
    /// never more than [`Config::receive_buffer`].
    pub fn committed_receive_bytes(&self) -> u64 {
        self.streams.values().map(Stream::committed).sum()
    }

    /// Bytes of an incomplete frame held until the rest arrives; never more
    /// than [`FRAME_HEADER_LEN`] + [`MAX_DATA_PAYLOAD`].
    pub fn pending_input_bytes(&self) -> usize {
        self.inbuf.len()
    }

    /// Bytes of control frames waiting for transmission; never more than
    /// [`Config::max_control_queue`] plus one GOAWAY.
    pub fn queued_control_bytes(&self) -> usize {
        self.control_bytes
    }

    /// How many bytes [`TrunkConnection::write`] would take now.
    pub fn send_capacity(&self, stream: StreamId) -> usize {
        self.streams
            .get(&stream)
            .filter(|s| s.send_end == SendEnd::Open && (s.local || s.accepted))
            .map_or(0, |s| {
                (self.config.stream_send_buffer as usize).saturating_sub(s.send_buf.len())
            })
    }

    // ----- driving -------------------------------------------------------

    /// Feeds bytes read from the trunk socket. Any amount, split anywhere.
    /// Errors close the connection ([`Event::Closed`]).
    pub fn handle_input(&mut self, now: u64, mut data: &[u8]) {
        self.session.now = now;
        if !self.has_transport() {
            return;
        }
        self.last_input = now;
        self.stats.bytes_received += data.len() as u64;
        while !data.is_empty() && self.has_transport() {
            if self.inbuf.is_empty() {
                match frame::decode(data) {
                    Ok(Decoded::Complete(f, n)) => {
                        let raw = &data[..n];
                        self.handle_frame(now, f, raw);
                        data = &data[n..];
                    }
                    Ok(Decoded::NeedMore(_)) => {
                        self.inbuf.extend_from_slice(data);
                        return;
                    }
                    Err(e) => return self.fail(e.into()),
                }
            } else {
                // Complete the partial frame: copy no more than it needs.
                let missing = match frame::decode(&self.inbuf) {
                    Ok(Decoded::NeedMore(k)) => k,
                    Ok(Decoded::Complete(..)) => 0,
                    Err(e) => return self.fail(e.into()),
                };
                let take = missing.min(data.len());
                self.inbuf.extend_from_slice(&data[..take]);
                data = &data[take..];
                let inbuf = std::mem::take(&mut self.inbuf);
                match frame::decode(&inbuf) {
                    Ok(Decoded::Complete(f, n)) => {
                        debug_assert_eq!(n, inbuf.len());
                        self.handle_frame(now, f, &inbuf);
                        let mut inbuf = inbuf;
                        inbuf.clear();
                        if self.inbuf.is_empty() {
                            self.inbuf = inbuf;
                        }
                    }
                    Ok(Decoded::NeedMore(_)) => self.inbuf = inbuf,
                    Err(e) => return self.fail(e.into()),
                }
            }
        }
    }

    /// The peer closed its end of the transport (EOF) without GOAWAY: its
    /// process ended (an exiting process closes its sockets; a network
    /// outage never does; a relay that gives a socket up for a resumption
    /// resets it), so the session is not kept: the connection closes, as
    /// without resumption. Except:
    /// * during a resumption, that attempt only ends: back to suspended;
    /// * once suspended, nothing changes: the socket was given up already
    ///   (after a reset has been reported, say to a write, the next read
    ///   sees an EOF).
    pub fn handle_transport_finished(&mut self) {
        match self.state {
            State::Resuming => return self.suspend(ConnectionError::TransportClosed),
            State::Suspended => return,
            State::Handshake | State::Established => self.fail(ConnectionError::TransportClosed),
            State::Closed => {}
        }
        self.control.clear();
        self.control_bytes = 0;
    }

    /// The transport failed (a reset, a timeout, an unreachable path). A
    /// resumable session is suspended ([`Event::Suspended`]) for a
    /// resumption on a new transport; otherwise the connection closes.
    pub fn handle_transport_closed(&mut self) {
        match self.state {
            State::Established | State::Resuming => self.suspend(ConnectionError::TransportClosed),
            State::Suspended | State::Closed => {}
            State::Handshake => self.fail(ConnectionError::TransportClosed),
        }
        if self.state == State::Closed {
            self.control.clear();
            self.control_bytes = 0;
        }
    }

    /// When [`TrunkConnection::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<u64> {
        match self.state {
            State::Closed => None,
            State::Suspended => Some(self.resume_deadline()),
            State::Handshake | State::Resuming => Some(
                (self.created_at + self.config.handshake_timeout)
                    .min(self.last_input + self.config.idle_timeout),
            ),
            State::Established => {
                let idle = self.last_input + self.config.idle_timeout;
                let t = if self.ping_outstanding.is_some() {
                    idle
                } else {
                    idle.min(self.last_input + self.config.keepalive_interval)
                };
                Some(self.session.ack_deadline().map_or(t, |a| a.min(t)))
            }
        }
    }

    /// Handles expired timers: handshake and idle timeouts, keepalive PING.
    pub fn handle_timeout(&mut self, now: u64) {
        self.session.now = now;
        match self.state {
            State::Closed => {}
            State::Suspended => self.handle_suspended_timeout(now),
            State::Handshake | State::Resuming => {
                let error = if now >= self.created_at + self.config.handshake_timeout {
                    ConnectionError::HandshakeTimeout
                } else if now >= self.last_input + self.config.idle_timeout {
                    ConnectionError::IdleTimeout
                } else {
                    return;
                };
                if self.state == State::Resuming {
                    self.suspend(error);
                } else {
                    self.fail(error);
                }
            }
            State::Established => {
                self.session.on_timer(now);
                if now >= self.last_input + self.config.idle_timeout {
                    self.suspend(ConnectionError::IdleTimeout);
                } else if self.ping_outstanding.is_none()
                    && now >= self.last_input + self.config.keepalive_interval
                {
                    self.ping_seq += 1;
                    self.ping_pending = true;
                    self.ping_outstanding = Some((self.ping_seq, None));
                }
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Bytes to write to the trunk socket, at most about `max_len` (see
    /// [`TrunkConnection::poll_transmit_into`]); `None` when there is
    /// nothing to send.
    pub fn poll_transmit(&mut self, now: u64, max_len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        (self.poll_transmit_into(now, &mut out, max_len) > 0).then_some(out)
    }

    /// Appends bytes to write to the trunk socket to `out`; returns how many.
    ///
    /// Nothing is produced for `max_len` 0. DATA frames are cut to fit
    /// `max_len` (at least one payload byte). Control frames are never cut:
    /// one that does not fit is still emitted when nothing else has been
    /// (so at most [`crate::wire::MAX_HELLO_LEN`] + [`FRAME_HEADER_LEN`] bytes more
    /// than `max_len`); a pacer accounts for it as debt. Streams share the
    /// link round-robin, one DATA frame at a time.
    pub fn poll_transmit_into(&mut self, now: u64, out: &mut Vec<u8>, max_len: usize) -> usize {
        self.session.now = now;
        if max_len == 0 {
            return 0;
        }
        let start = out.len();
        let n = self.transmit(now, out, max_len);
        debug_assert_eq!(n, out.len() - start);
        self.stats.bytes_sent += n as u64;
        n
    }

    // ----- streams -------------------------------------------------------

    /// Opens a stream to `destination` on behalf of `source`. Data may be
    /// written at once (it travels behind the OPEN, within the peer's
    /// initial window); [`Event::StreamAccepted`] or [`Event::StreamReset`]
    /// tells whether the far relay connected.
    ///
    /// # Errors
    /// [`OpenError`] if the connection cannot take a new stream.
    pub fn open_stream(
        &mut self,
        destination: SocketAddr,
        source: SocketAddr,
    ) -> Result<StreamId, OpenError> {
        self.open_stream_with_blast(destination, source, None)
    }

    /// As [`TrunkConnection::open_stream`], with the ranks' blast request
    /// (from a kind-3 connect preamble) carried in the OPEN, so the far
    /// relay knows it too.
    ///
    /// # Errors
    /// [`OpenError`] if the connection cannot take a new stream.
    pub fn open_stream_with_blast(
        &mut self,
        destination: SocketAddr,
        source: SocketAddr,
        blast: Option<BlastRequest>,
    ) -> Result<StreamId, OpenError> {
        match self.state {
            State::Closed => return Err(OpenError::ConnectionClosed),
            State::Handshake => return Err(OpenError::NotEstablished),
            State::Established | State::Suspended | State::Resuming => {}
        }
        if self.going_away_sent || self.going_away_received {
            return Err(OpenError::GoingAway);
        }
        let peer = self.peer.as_ref().ok_or(OpenError::NotEstablished)?;
        let limit = peer.max_streams.min(self.config.max_streams);
        if self.local_streams >= limit {
            return Err(OpenError::StreamLimit(limit));
        }
        if self.next_local_id > u64::from(u32::MAX) {
            return Err(OpenError::IdsExhausted);
        }
        let id = self.next_local_id as StreamId;
        self.next_local_id += 2;
        let mut s = Stream::new(
            true,
            u64::from(peer.initial_window),
            u64::from(self.config.min_stream_window),
        );
        s.open_pending = Some((destination, source, blast));
        s.in_ctrl = true;
        self.streams.insert(id, s);
        self.ctrl_queue.push_back(id);
        self.local_streams += 1;
        self.stats.streams_opened_local += 1;
        Ok(id)
    }

    /// Accepts a stream the peer opened (after connecting to its
    /// destination): sends OPEN_OK; data may flow both ways from now on.
    /// If bytes (or the FIN) arrived before the accept, a
    /// [`Event::StreamReadable`] for them follows.
    ///
    /// # Errors
    /// [`StreamError`] if there is no such stream or it is not awaiting
    /// acceptance.
    pub fn accept_stream(&mut self, stream: StreamId) -> Result<(), StreamError> {
        let s = self.stream_mut(stream)?;
        if s.local || s.accepted {
            return Err(StreamError::NotAcceptable(stream));
        }
        s.accepted = true;
        s.open_ok_pending = true;
        // Bytes that arrived before the accept: announce them again, so
        // the daemon need not remember an event it could not act on yet.
        if !s.recv_buf.is_empty() || s.recv_fin {
            s.readable_notified = true;
            self.events.push_back(Event::StreamReadable { stream });
        }
        self.schedule_ctrl(stream);
        Ok(())
    }

    /// Queues up to `data.len()` bytes on a stream; returns how many were
    /// taken (0 when its send buffer is full: wait for
    /// [`Event::StreamWritable`]).
    ///
    /// # Errors
    /// [`StreamError`] if the stream does not exist, is not accepted yet, or
    /// was finished.
    pub fn write(&mut self, stream: StreamId, data: &[u8]) -> Result<usize, StreamError> {
        let limit = self.config.stream_send_buffer as usize;
        let s = self.stream_mut(stream)?;
        if !s.local && !s.accepted {
            return Err(StreamError::NotAccepted(stream));
        }
        if s.send_end != SendEnd::Open {
            return Err(StreamError::Finished(stream));
        }
        let n = data.len().min(limit.saturating_sub(s.send_buf.len()));
        if n < data.len() {
            s.write_blocked = true;
        }
        s.send_buf.extend(&data[..n]);
        self.schedule_send(stream);
        Ok(n)
    }

    /// Finishes the sending side of a stream: a FIN follows the bytes
    /// already written (half-close). Idempotent.
    ///
    /// # Errors
    /// [`StreamError`] if the stream does not exist or is not accepted yet.
    pub fn finish(&mut self, stream: StreamId) -> Result<(), StreamError> {
        let s = self.stream_mut(stream)?;
        if !s.local && !s.accepted {
            return Err(StreamError::NotAccepted(stream));
        }
        if s.send_end == SendEnd::Open {
            s.send_end = SendEnd::FinQueued;
            self.schedule_send(stream);
        }
        Ok(())
    }

    /// Copies received bytes of a stream into `buf`.
    ///
    /// # Errors
    /// [`StreamError`] if the stream does not exist (never opened, reset, or
    /// closed after `Finished` was returned).
    pub fn read(&mut self, stream: StreamId, buf: &mut [u8]) -> Result<ReadOutcome, StreamError> {
        let s = self.stream_mut(stream)?;
        if s.recv_buf.is_empty() {
            if s.recv_fin {
                s.fin_read = true;
                self.maybe_remove(stream);
                return Ok(ReadOutcome::Finished);
            }
            s.readable_notified = false;
            return Ok(ReadOutcome::Blocked);
        }
        let n = buf.len().min(s.recv_buf.len());
        for (dst, src) in buf[..n].iter_mut().zip(s.recv_buf.drain(..n)) {
            *dst = src;
        }
        if s.recv_buf.is_empty() && !s.recv_fin {
            s.readable_notified = false;
        }
        self.replenish(stream);
        Ok(ReadOutcome::Data(n))
    }

    /// Resets a stream (both directions): unsent and unread bytes are
    /// dropped and the peer gets RESET with `reason`. The stream is gone
    /// at once; no event follows.
    ///
    /// # Errors
    /// [`StreamError::UnknownStream`] if there is no such stream.
    pub fn reset_stream(&mut self, stream: StreamId, reason: Reason) -> Result<(), StreamError> {
        let s = self.stream_mut(stream)?;
        let never_announced = s.open_pending.is_some();
        self.remove_stream(stream);
        if !never_announced {
            self.stats.resets_sent += 1;
            self.push_frame(&Frame::Reset { stream, reason });
        }
        Ok(())
    }

    /// Starts a graceful close: GOAWAY, no new streams either way, and
    /// [`Event::Closed`] once every stream has ended. Before the handshake
    /// completes, closes at once.
    pub fn go_away(&mut self) {
        match self.state {
            State::Closed => {}
            State::Handshake | State::Suspended | State::Resuming => {
                self.fail(ConnectionError::LocallyClosed(CloseCode::NoError));
            }
            State::Established => {
                if !self.going_away_sent {
                    self.going_away_sent = true;
                    let last = self.last_peer_stream;
                    self.push_frame(&Frame::GoAway {
                        code: CloseCode::NoError,
                        last_stream: last,
                    });
                    self.check_drained();
                }
            }
        }
    }

    /// Closes at once with `code` (sent in GOAWAY); every stream is gone.
    pub fn close(&mut self, code: CloseCode) {
        self.fail(ConnectionError::LocallyClosed(code));
    }

    /// Queues one RBUDP control message (an RBUDP frame, sent before any
    /// stream data written after this call: [`crate::rbudp`] relies on it).
    ///
    /// # Errors
    /// [`StreamError::ConnectionClosed`] before authentication, after the
    /// connection closed, or if the message is empty or longer than
    /// 65536 bytes.
    pub fn send_rbudp(&mut self, message: &[u8]) -> Result<(), StreamError> {
        if !matches!(
            self.state,
            State::Established | State::Suspended | State::Resuming
        ) || message.is_empty()
            || message.len() > MAX_DATA_PAYLOAD
        {
            return Err(StreamError::ConnectionClosed);
        }
        self.push_frame(&Frame::Rbudp { payload: message });
        if self.state == State::Closed {
            return Err(StreamError::ConnectionClosed);
        }
        Ok(())
    }

    /// A 32-byte secret bound to this connection's authenticated handshake
    /// and to `label` (HMAC-SHA256 of the key over the label and both
    /// HELLOs: see [`PresharedKey::export`]); the same on both ends.
    /// `None` before authentication.
    pub fn export_secret(&self, label: &[u8]) -> Option<[u8; 32]> {
        if self.peer.is_none() || self.state == State::Handshake {
            return None;
        }
        if let Some((hi, ha)) = &self.session.first_hellos {
            return Some(self.key.export(label, hi, ha));
        }
        let (hi, ha) = self.transcript();
        Some(self.key.export(label, hi, ha))
    }

    // ----- internals: input ---------------------------------------------

    fn handle_frame(&mut self, now: u64, f: Frame<'_>, raw: &[u8]) {
        self.stats.frames_received += 1;
        if self.state == State::Established && frame::is_sequenced(raw[0]) {
            self.session.on_received(now, raw.len());
        }
        if let Frame::GoAway { code, .. } = f {
            return self.handle_go_away(code);
        }
        match self.state {
            State::Closed | State::Suspended => {}
            State::Handshake => self.handle_handshake_frame(f, raw),
            State::Resuming => self.handle_resume_frame(now, f, raw),
            State::Established => {
                if let Err(e) = self.handle_stream_frame(now, f) {
                    self.fail(e);
                }
            }
        }
    }

    fn handle_handshake_frame(&mut self, f: Frame<'_>, raw: &[u8]) {
        match (f, self.peer_hello.is_some()) {
            (Frame::Hello(h), false) => {
                if h.role != self.role.peer() {
                    return self.fail(ConnectionError::Protocol("both ends claim the same role"));
                }
                if self.our_hello[FRAME_HEADER_LEN + 8..FRAME_HEADER_LEN + 8 + NONCE_LEN] == h.nonce
                {
                    return self.fail(ConnectionError::Protocol("peer echoed our nonce"));
                }
                self.peer_hello = Some(raw.to_vec());
                self.peer_resumable = h.resumable;
                self.peer_resumes = h.resume.is_some();
                self.peer = Some(PeerInfo {
                    name: h.name,
                    cluster: h.cluster,
                    max_streams: h.max_streams,
                    initial_window: h.initial_window,
                });
                let (hi, ha) = self.transcript();
                let mac = self.key.auth_mac(self.role, hi, ha);
                self.push_handshake(&Frame::Auth { mac });
            }
            (Frame::Auth { mac }, true) => {
                let (hi, ha) = self.transcript();
                if !self.key.verify_auth_mac(self.role.peer(), hi, ha, &mac) {
                    return self.fail(ConnectionError::AuthFailed);
                }
                let peer = self.peer.clone().expect("peer set with its HELLO");
                if let Some(expected) = &self.config.expected_peer_cluster {
                    if *expected != peer.cluster {
                        let expected = expected.clone();
                        return self.fail(ConnectionError::WrongPeerCluster {
                            found: peer.cluster,
                            expected,
                        });
                    }
                }
                if self.peer_resumes {
                    // The listener found no session of this id here.
                    return self.fail(ConnectionError::UnknownSession);
                }
                self.start_session(self.peer_resumable);
                self.state = State::Established;
                self.events.push_back(Event::Authenticated(peer));
            }
            (Frame::Hello(_), true) => self.fail(ConnectionError::Protocol("second HELLO")),
            (_, false) => self.fail(ConnectionError::Protocol("first frame is not HELLO")),
            (_, true) => self.fail(ConnectionError::Protocol("frame before AUTH")),
        }
    }

    fn transcript(&self) -> (&[u8], &[u8]) {
        let peer = self.peer_hello.as_deref().unwrap_or(&[]);
        match self.role {
            Role::Initiator => (&self.our_hello, peer),
            Role::Acceptor => (peer, &self.our_hello),
        }
    }

    fn handle_go_away(&mut self, code: CloseCode) {
        if self.state == State::Closed {
            return;
        }
        if code != CloseCode::NoError || self.state != State::Established {
            return self.fail(ConnectionError::PeerClosed(code));
        }
        if !self.going_away_received {
            self.going_away_received = true;
            self.events.push_back(Event::GoAway);
            self.check_drained();
        }
    }

    /// The live stream a frame is for: `None` if it was closed already
    /// (frames in flight are dropped); an error if it never existed.
    fn target(&mut self, id: StreamId) -> Result<Option<&mut Stream>, ConnectionError> {
        if self.streams.contains_key(&id) {
            return Ok(self.streams.get_mut(&id));
        }
        let existed = if self.role.owns(id) {
            u64::from(id) < self.next_local_id
        } else {
            id <= self.last_peer_stream
        };
        if existed {
            self.stats.frames_ignored += 1;
            Ok(None)
        } else {
            Err(ConnectionError::Protocol(
                "frame on a stream that was never opened",
            ))
        }
    }

    fn handle_stream_frame(&mut self, now: u64, f: Frame<'_>) -> Result<(), ConnectionError> {
        match f {
            Frame::Hello(_) | Frame::Auth { .. } | Frame::Resume { .. } => Err(
                ConnectionError::Protocol("handshake frame after the handshake"),
            ),
            Frame::Ack { received } => self.on_ack(received),
            Frame::GoAway { .. } => unreachable!("handled before"),
            Frame::Ping { payload } => {
                self.pong_pending = Some(payload);
                Ok(())
            }
            Frame::Rbudp { payload } => {
                self.events.push_back(Event::Rbudp {
                    message: payload.to_vec(),
                });
                Ok(())
            }
            Frame::Pong { payload } => {
                self.on_pong(now, payload);
                Ok(())
            }
            Frame::Open {
                stream,
                destination,
                source,
                blast,
            } => self.on_open(stream, destination, source, blast),
            Frame::OpenOk { stream } => self.on_open_ok(stream),
            Frame::Data { stream, payload } => self.on_data(stream, payload),
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
            Frame::Fin { stream } => self.on_fin(stream),
            Frame::Reset { stream, reason } => self.on_reset(stream, reason),
        }
    }

    /// PONG: the round trip of our outstanding PING, if it answers it.
    fn on_pong(&mut self, now: u64, payload: [u8; 8]) {
        if let Some((seq, Some(sent))) = self.ping_outstanding {
            if payload == seq.to_be_bytes() {
                self.rtt = Some(now.saturating_sub(sent));
                self.ping_outstanding = None;
            }
        }
    }

    /// OPEN: a new stream of the peer's, refused while going away.
    fn on_open(
        &mut self,
        stream: StreamId,
        destination: SocketAddr,
        source: SocketAddr,
        blast: Option<BlastRequest>,
    ) -> Result<(), ConnectionError> {
        if self.role.owns(stream) {
            return Err(ConnectionError::Protocol("OPEN with one of our stream ids"));
        }
        if stream <= self.last_peer_stream {
            return Err(ConnectionError::Protocol("stream id reused"));
        }
        self.last_peer_stream = stream;
        if self.going_away_sent || self.going_away_received {
            self.stats.resets_sent += 1;
            self.push_frame(&Frame::Reset {
                stream,
                reason: Reason::ShuttingDown,
            });
            return Ok(());
        }
        if self.remote_streams >= self.config.max_streams {
            return Err(ConnectionError::StreamLimit(self.config.max_streams));
        }
        let peer_window = self.peer.as_ref().map_or(0, |p| p.initial_window);
        let s = Stream::new(
            false,
            u64::from(peer_window),
            u64::from(self.config.min_stream_window),
        );
        self.streams.insert(stream, s);
        self.remote_streams += 1;
        self.stats.streams_opened_remote += 1;
        self.events.push_back(Event::StreamOpened {
            stream,
            destination,
            source,
            blast,
        });
        Ok(())
    }

    /// OPEN_OK: the far relay accepted a stream we opened.
    fn on_open_ok(&mut self, stream: StreamId) -> Result<(), ConnectionError> {
        let Some(s) = self.target(stream)? else {
            return Ok(());
        };
        if !s.local || s.accepted {
            return Err(ConnectionError::Protocol("unexpected OPEN_OK"));
        }
        s.accepted = true;
        self.events.push_back(Event::StreamAccepted { stream });
        Ok(())
    }

    /// DATA: bytes within the stream's credit.
    fn on_data(&mut self, stream: StreamId, payload: &[u8]) -> Result<(), ConnectionError> {
        let len = payload.len() as u64;
        self.stats.data_received += len;
        let Some(s) = self.target(stream)? else {
            return Ok(());
        };
        if s.local && !s.accepted {
            return Err(ConnectionError::Protocol("DATA before OPEN_OK"));
        }
        if s.recv_fin {
            return Err(ConnectionError::Protocol("DATA after FIN"));
        }
        if len > s.recv_credit {
            return Err(ConnectionError::FlowControl(stream));
        }
        s.recv_credit -= len;
        s.recv_buf.extend(payload);
        s.stats.bytes_received += len;
        if !s.readable_notified {
            s.readable_notified = true;
            self.events.push_back(Event::StreamReadable { stream });
        }
        Ok(())
    }

    /// WINDOW_UPDATE: more credit to send on a stream.
    fn on_window_update(
        &mut self,
        stream: StreamId,
        increment: u32,
    ) -> Result<(), ConnectionError> {
        let Some(s) = self.target(stream)? else {
            return Ok(());
        };
        let credit = s.send_credit + u64::from(increment);
        if credit > u64::from(MAX_WINDOW) {
            return Err(ConnectionError::FlowControl(stream));
        }
        s.send_credit = credit;
        self.schedule_send(stream);
        Ok(())
    }

    /// FIN: the peer's direction of a stream is finished.
    fn on_fin(&mut self, stream: StreamId) -> Result<(), ConnectionError> {
        let Some(s) = self.target(stream)? else {
            return Ok(());
        };
        if s.local && !s.accepted {
            return Err(ConnectionError::Protocol("FIN before OPEN_OK"));
        }
        if s.recv_fin {
            return Err(ConnectionError::Protocol("second FIN"));
        }
        s.recv_fin = true;
        // Credit the peer can no longer use goes back to the pool.
        s.recv_credit = 0;
        s.window_pending = 0;
        if !s.readable_notified {
            s.readable_notified = true;
            self.events.push_back(Event::StreamReadable { stream });
        }
        self.update_extra(stream);
        Ok(())
    }

    /// RESET: the peer aborted a stream; it is gone.
    fn on_reset(&mut self, stream: StreamId, reason: Reason) -> Result<(), ConnectionError> {
        if self.target(stream)?.is_none() {
            return Ok(());
        }
        self.stats.resets_received += 1;
        self.remove_stream(stream);
        self.events.push_back(Event::StreamReset { stream, reason });
        Ok(())
    }

    // ----- internals: flow control ----------------------------------------

    /// Re-derives a stream's share of the growth pool from its committed
    /// bytes.
    fn update_extra(&mut self, id: StreamId) {
        let min = u64::from(self.config.min_stream_window);
        if let Some(s) = self.streams.get_mut(&id) {
            let extra = s.committed().saturating_sub(min);
            self.pool_used = self.pool_used - s.recv_extra + extra;
            s.recv_extra = extra;
        }
    }

    /// After a read: tops the stream's window up towards its target and
    /// queues a WINDOW_UPDATE once half a window is owed.
    fn replenish(&mut self, id: StreamId) {
        self.update_extra(id);
        let min = u64::from(self.config.min_stream_window);
        let span = u64::from(self.config.max_stream_window) - min;
        let pool = self.config.growth_pool();
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.recv_fin {
            return;
        }
        let others = self.pool_used - s.recv_extra;
        let target = min + span.min(pool.saturating_sub(others));
        let committed = s.committed();
        if target > committed {
            s.window_pending += target - committed;
        }
        let send_now = s.window_pending > 0 && s.window_pending >= target / 2;
        self.update_extra(id);
        if send_now {
            self.schedule_ctrl(id);
        }
    }

    // ----- internals: output --------------------------------------------

    fn schedule_ctrl(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            if !s.in_ctrl {
                s.in_ctrl = true;
                self.ctrl_queue.push_back(id);
            }
        }
    }

    fn schedule_send(&mut self, id: StreamId) {
        if let Some(s) = self.streams.get_mut(&id) {
            if !s.in_send && s.sendable() {
                s.in_send = true;
                self.send_queue.push_back(id);
            }
        }
    }

    fn push_control(&mut self, bytes: Vec<u8>) {
        self.control_bytes += bytes.len();
        self.control.push_back(bytes);
        if self.control_bytes > self.config.max_control_queue {
            self.fail(ConnectionError::ControlFlood);
        }
    }

    fn push_handshake(&mut self, f: &Frame<'_>) {
        let mut b = Vec::with_capacity(f.encoded_len());
        f.encode(&mut b);
        self.handshake_out.push_back(b);
    }

    fn push_frame(&mut self, f: &Frame<'_>) {
        let mut b = Vec::with_capacity(f.encoded_len());
        f.encode(&mut b);
        self.push_control(b);
    }

    /// Control frames first (the queue, then PONG and PING, then each
    /// stream's OPEN, OPEN_OK and WINDOW_UPDATE), then DATA and FIN round
    /// robin; stops at the first frame that does not fit.
    fn transmit(&mut self, now: u64, out: &mut Vec<u8>, max_len: usize) -> usize {
        let room = Room {
            start: out.len(),
            max_len,
        };
        if !self.transmit_handshake(out, room) {
            return room.used(out);
        }
        match self.state {
            State::Handshake | State::Closed => {
                self.transmit_control_queue(out, room);
            }
            State::Suspended | State::Resuming => {}
            State::Established => {
                if self.transmit_ack(out, room)
                    && self.transmit_ping_pong(now, out, room)
                    && self.transmit_replay(out, room)
                {
                    let mark = out.len();
                    if self.transmit_control_queue(out, room)
                        && self.transmit_stream_control(out, room)
                    {
                        self.transmit_data(out, room);
                    }
                    self.record_sent(out, mark);
                }
            }
        }
        room.used(out)
    }

    /// Our handshake frames (HELLO, AUTH, RESUME); false if one did not fit.
    fn transmit_handshake(&mut self, out: &mut Vec<u8>, room: Room) -> bool {
        while let Some(front) = self.handshake_out.front() {
            if !room.fits(out, front.len()) {
                return false;
            }
            let b = self.handshake_out.pop_front().expect("front exists");
            out.extend_from_slice(&b);
            self.stats.frames_sent += 1;
        }
        true
    }

    /// The queued control frames (RESET, GOAWAY, RBUDP); false
    /// if one did not fit.
    fn transmit_control_queue(&mut self, out: &mut Vec<u8>, room: Room) -> bool {
        while let Some(front) = self.control.front() {
            if !room.fits(out, front.len()) {
                return false;
            }
            let b = self.control.pop_front().expect("front exists");
            self.control_bytes -= b.len();
            out.extend_from_slice(&b);
            self.stats.frames_sent += 1;
        }
        true
    }

    /// The pending PONG, then our keepalive PING; false if one did not fit.
    fn transmit_ping_pong(&mut self, now: u64, out: &mut Vec<u8>, room: Room) -> bool {
        if let Some(payload) = self.pong_pending {
            if !room.fits(out, FRAME_HEADER_LEN + 8) {
                return false;
            }
            Frame::Pong { payload }.encode(out);
            self.stats.frames_sent += 1;
            self.pong_pending = None;
        }
        if self.ping_pending {
            if !room.fits(out, FRAME_HEADER_LEN + 8) {
                return false;
            }
            let seq = self.ping_seq;
            Frame::Ping {
                payload: seq.to_be_bytes(),
            }
            .encode(out);
            self.stats.frames_sent += 1;
            self.ping_pending = false;
            self.ping_outstanding = Some((seq, Some(now)));
        }
        true
    }

    /// Each scheduled stream's OPEN, OPEN_OK and WINDOW_UPDATE, together;
    /// false if a stream's did not fit.
    fn transmit_stream_control(&mut self, out: &mut Vec<u8>, room: Room) -> bool {
        while let Some(&id) = self.ctrl_queue.front() {
            let Some(s) = self.streams.get_mut(&id) else {
                self.ctrl_queue.pop_front();
                continue;
            };
            let mut frames: Vec<Frame<'static>> = Vec::new();
            if let Some((destination, source, blast)) = s.open_pending {
                frames.push(Frame::Open {
                    stream: id,
                    destination,
                    source,
                    blast,
                });
            }
            if s.open_ok_pending {
                frames.push(Frame::OpenOk { stream: id });
            }
            if s.window_pending > 0 && !s.recv_fin {
                let inc = s.window_pending.min(u64::from(MAX_WINDOW)) as u32;
                frames.push(Frame::WindowUpdate {
                    stream: id,
                    increment: inc,
                });
            }
            let len: usize = frames.iter().map(Frame::encoded_len).sum();
            if !room.fits(out, len) {
                return false;
            }
            for f in &frames {
                f.encode(out);
                self.stats.frames_sent += 1;
                if let Frame::WindowUpdate { increment, .. } = f {
                    s.window_pending -= u64::from(*increment);
                    s.recv_credit += u64::from(*increment);
                }
            }
            s.open_pending = None;
            s.open_ok_pending = false;
            s.in_ctrl = false;
            self.ctrl_queue.pop_front();
            self.schedule_send(id);
        }
        true
    }

    /// DATA and FIN of the streams that may send, one frame per stream in
    /// turn, while a frame with a payload byte still fits.
    fn transmit_data(&mut self, out: &mut Vec<u8>, room: Room) {
        while room.used(out) + FRAME_HEADER_LEN < room.max_len.max(FRAME_HEADER_LEN + 1)
            || room.used(out) == 0
        {
            let Some(id) = self.send_queue.pop_front() else {
                break;
            };
            let Some(s) = self.streams.get_mut(&id) else {
                continue;
            };
            s.in_send = false;
            if !s.sendable() {
                continue;
            }
            if !s.send_buf.is_empty() {
                self.transmit_data_frame(id, out, room);
                continue;
            }
            if !room.fits(out, FRAME_HEADER_LEN) {
                s.in_send = true;
                self.send_queue.push_front(id);
                break;
            }
            Frame::Fin { stream: id }.encode(out);
            self.stats.frames_sent += 1;
            s.send_end = SendEnd::FinSent;
            self.maybe_remove(id);
        }
    }

    /// One DATA frame of a stream with bytes and credit: as much as the
    /// frame size, the room and the credit allow (at least one byte).
    fn transmit_data_frame(&mut self, id: StreamId, out: &mut Vec<u8>, room: Room) {
        let frame_cap = self.config.max_data_frame as usize;
        let limit = self.config.stream_send_buffer as usize;
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        let space = room
            .max_len
            .saturating_sub(room.used(out) + FRAME_HEADER_LEN)
            .max(1);
        let n = s
            .send_buf
            .len()
            .min(frame_cap)
            .min(space)
            .min(s.send_credit as usize);
        let (a, b) = s.send_buf.as_slices();
        let payload: Vec<u8>;
        let slice = if a.len() >= n {
            &a[..n]
        } else {
            payload = a.iter().chain(b.iter()).take(n).copied().collect();
            &payload[..]
        };
        Frame::Data {
            stream: id,
            payload: slice,
        }
        .encode(out);
        s.send_buf.drain(..n);
        s.send_credit -= n as u64;
        s.stats.bytes_sent += n as u64;
        self.stats.data_sent += n as u64;
        self.stats.frames_sent += 1;
        if s.write_blocked && s.send_buf.len() < limit {
            s.write_blocked = false;
            self.events.push_back(Event::StreamWritable { stream: id });
        }
        if s.sendable() {
            s.in_send = true;
            self.send_queue.push_back(id);
        }
    }

    // ----- internals: lifecycle -----------------------------------------

    fn stream_mut(&mut self, id: StreamId) -> Result<&mut Stream, StreamError> {
        // Suspended and resuming sessions keep their streams usable.
        if self.state == State::Closed {
            return Err(StreamError::ConnectionClosed);
        }
        self.streams
            .get_mut(&id)
            .ok_or(StreamError::UnknownStream(id))
    }

    fn maybe_remove(&mut self, id: StreamId) {
        let done = self
            .streams
            .get(&id)
            .is_some_and(|s| s.send_end == SendEnd::FinSent && s.fin_read);
        if done {
            self.remove_stream(id);
            self.events.push_back(Event::StreamClosed { stream: id });
        }
    }

    fn remove_stream(&mut self, id: StreamId) {
        if let Some(s) = self.streams.remove(&id) {
            self.pool_used -= s.recv_extra;
            if s.local {
                self.local_streams -= 1;
            } else {
                self.remote_streams -= 1;
            }
            self.check_drained();
        }
    }

    fn check_drained(&mut self) {
        if self.state == State::Established
            && (self.going_away_sent || self.going_away_received)
            && self.streams.is_empty()
        {
            self.state = State::Closed;
            self.events.push_back(Event::Closed { error: None });
        }
    }

    fn fail(&mut self, error: ConnectionError) {
        if self.state == State::Closed {
            return;
        }
        // In the handshake the control queue holds only our HELLO and AUTH:
        // they still go out before the GOAWAY, so a peer whose key differs
        // sees our AUTH fail on its own side and says so, whichever end
        // checked first (it would otherwise see only our GOAWAY when both
        // HELLO and AUTH reached us in one read).
        if self.state != State::Handshake {
            self.control.clear();
            self.control_bytes = 0;
            self.handshake_out.clear();
        }
        self.state = State::Closed;
        self.session.end();
        self.streams.clear();
        self.ctrl_queue.clear();
        self.send_queue.clear();
        self.pool_used = 0;
        self.local_streams = 0;
        self.remote_streams = 0;
        self.inbuf = Vec::new();
        if !matches!(
            error,
            ConnectionError::PeerClosed(_)
                | ConnectionError::TransportClosed
                | ConnectionError::ResumeTimeout(_)
        ) {
            let f = Frame::GoAway {
                code: error.close_code(),
                last_stream: self.last_peer_stream,
            };
            let mut b = Vec::new();
            f.encode(&mut b);
            self.control_bytes += b.len();
            self.control.push_back(b);
        }
        self.events.push_back(Event::Closed { error: Some(error) });
    }
}
