//! [`RbudpSession`]: both directions of RBUDP over one trunk connection,
//! the sender of this relay's blasts and the receiver of the peer's (see
//! the [`crate::rbudp`] documentation).

use std::collections::VecDeque;
use std::net::IpAddr;

use super::codec::{session_token, Control, DatagramHeader};
use super::config::{RbudpConfig, RbudpConfigError};
use super::event::{BlastError, DatagramOutcome, RbudpError, RbudpEvent, RbudpStats};
use crate::pacer::Pacer;
use crate::wire::{
    Role, DATAGRAM_HEADER_LEN, MAX_BITMAP_LEN, MAX_BLAST_PACKETS, MAX_DATAGRAM, MIN_DATAGRAM,
};

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
/// documentation](crate::rbudp).
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
