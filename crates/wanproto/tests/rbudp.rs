//! RBUDP sessions on virtual time: two ends, a reliable in-order control
//! channel (the trunk) and a datagram path with latency, jitter
//! (reordering), loss, duplication and injected stray, forged and stale
//! datagrams. Data must always arrive complete and exact.

use std::collections::VecDeque;

use wanproto::frame::Role;
use wanproto::rbudp::{
    BlastError, BlastParams, Control, DatagramHeader, DatagramOutcome, RbudpConfig, RbudpError,
    RbudpEvent, RbudpSession, DATAGRAM_HEADER_LEN,
};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Impairments of the datagram path (each direction).
#[derive(Clone, Copy)]
struct Path {
    latency: u64,
    jitter: u64,
    loss: f64,
    duplicate: f64,
    /// Per datagram sent, the chance of also injecting a hostile one.
    hostile: f64,
}

impl Path {
    fn clean(latency: u64) -> Path {
        Path {
            latency,
            jitter: 0,
            loss: 0.0,
            duplicate: 0.0,
            hostile: 0.0,
        }
    }
}

struct End {
    s: RbudpSession,
    /// Blasts still to start: (stream, bytes).
    to_send: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    /// Blast id -> its bytes, for checking the receiver.
    received: Vec<(u32, Vec<u8>)>,
    announced: Vec<(u32, u32, u64, u32)>,
    delivered: u32,
    released: u32,
    release_on_complete: bool,
    /// How this end's blasts are sent.
    params: BlastParams,
    /// Largest datagram this end sent.
    largest: usize,
}

struct Sim {
    now: u64,
    ends: [End; 2],
    path: Path,
    rng: Rng,
    /// Control in flight to end i: (deliver at, bytes), in order.
    ctrl: [VecDeque<(u64, Vec<u8>)>; 2],
    /// Datagrams in flight to end i: (deliver at, bytes), unordered.
    udp: [Vec<(u64, Vec<u8>)>; 2],
    /// Datagrams delivered to end i, kept for replays.
    history: [Vec<Vec<u8>>; 2],
    outcomes: [Vec<DatagramOutcome>; 2],
    buf: Vec<u8>,
}

fn config(rate: u64, datagram: usize) -> RbudpConfig {
    let mut c = RbudpConfig::new(rate, datagram);
    c.receive_window = 4 << 20;
    c
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng(seed | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

impl Sim {
    fn new(cfg: RbudpConfig, path: Path, seed: u64) -> Sim {
        let secret = [7u8; 32];
        let a =
            RbudpSession::new(cfg.clone(), Role::Initiator, secret, 0x1111, None, 5000, 0).unwrap();
        let b =
            RbudpSession::new(cfg.clone(), Role::Acceptor, secret, 0x2222, None, 6000, 0).unwrap();
        let end = |s| End {
            s,
            to_send: VecDeque::new(),
            sent: Vec::new(),
            received: Vec::new(),
            announced: Vec::new(),
            delivered: 0,
            released: 0,
            release_on_complete: true,
            params: BlastParams::default(),
            largest: 0,
        };
        Sim {
            now: 0,
            ends: [end(a), end(b)],
            path,
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            ctrl: [VecDeque::new(), VecDeque::new()],
            udp: [Vec::new(), Vec::new()],
            history: [Vec::new(), Vec::new()],
            outcomes: [Vec::new(), Vec::new()],
            buf: vec![0u8; 65_536],
        }
    }

    /// One pass at `now`: deliver, act on events, start blasts, send.
    fn pump(&mut self) {
        for i in 0..2 {
            while self.ctrl[i].front().is_some_and(|c| c.0 <= self.now) {
                let (_, m) = self.ctrl[i].pop_front().unwrap();
                self.ends[i].s.handle_control(self.now, &m).unwrap();
            }
            let mut k = 0;
            while k < self.udp[i].len() {
                if self.udp[i][k].0 <= self.now {
                    let (_, d) = self.udp[i].swap_remove(k);
                    let o = self.ends[i].s.handle_datagram(self.now, &d);
                    self.outcomes[i].push(o);
                    if self.history[i].len() < 100_000 {
                        self.history[i].push(d);
                    }
                } else {
                    k += 1;
                }
            }
            self.ends[i].s.handle_timeout(self.now);
            while let Some(ev) = self.ends[i].s.poll_event() {
                let e = &mut self.ends[i];
                match ev {
                    RbudpEvent::Ready { .. } => {}
                    RbudpEvent::Announced {
                        blast,
                        stream,
                        offset,
                        length,
                    } => e.announced.push((blast, stream, offset, length)),
                    RbudpEvent::Complete { blast, stream } => {
                        assert_eq!(stream, 2 - i as u32);
                        let data = e.s.take(blast).expect("complete blast can be taken");
                        assert!(e.s.take(blast).is_none(), "taken once");
                        e.received.push((blast, data));
                        if e.release_on_complete {
                            e.s.release(blast);
                        }
                    }
                    RbudpEvent::Delivered { .. } => e.delivered += 1,
                    RbudpEvent::Released { .. } => e.released += 1,
                }
            }
        }
        for i in 0..2 {
            // Start what the window allows.
            loop {
                let e = &mut self.ends[i];
                let Some(front) = e.to_send.front() else {
                    break;
                };
                if !e.s.is_ready() || (front.len() as u64) > e.s.window_available() {
                    break;
                }
                let data = e.to_send.pop_front().unwrap();
                let stream = 1 + i as u32;
                e.sent.push(data.clone());
                e.s.start_blast_with(stream, 0, data, e.params).unwrap();
            }
            // Datagrams.
            while let Some((n, port)) = self.ends[i].s.poll_datagram(self.now, &mut self.buf) {
                assert_eq!(port, if i == 0 { 6000 } else { 5000 });
                self.ends[i].largest = self.ends[i].largest.max(n);
                let d = self.buf[..n].to_vec();
                self.send_datagram(1 - i, d);
            }
            // Control, in order, reliable.
            while let Some(m) = self.ends[i].s.poll_control() {
                let at = self.now + self.path.latency;
                let at = self.ctrl[1 - i].back().map_or(at, |b| b.0.max(at));
                self.ctrl[1 - i].push_back((at, m));
            }
        }
    }

    fn send_datagram(&mut self, to: usize, d: Vec<u8>) {
        let p = self.path;
        if self.rng.unit() < p.hostile {
            let h = self.hostile(to, &d);
            let at = self.now + p.latency + self.rng.below(p.jitter + 1);
            self.udp[to].push((at, h));
        }
        if self.rng.unit() < p.loss {
            return;
        }
        let copies = if self.rng.unit() < p.duplicate { 2 } else { 1 };
        for _ in 0..copies {
            let at = self.now + p.latency + self.rng.below(p.jitter + 1);
            self.udp[to].push((at, d.clone()));
        }
    }

    /// A hostile datagram modelled on `d`: another session, a wrong token,
    /// a blast long gone or far ahead, a packet beyond the blast, a wrong
    /// length, garbage, or a replay of an old datagram.
    fn hostile(&mut self, to: usize, d: &[u8]) -> Vec<u8> {
        let mut h = d.to_vec();
        match self.rng.below(8) {
            0 => h[4..8].copy_from_slice(&(self.rng.next() as u32 | 0x8000_0000).to_be_bytes()),
            1 => h[8] ^= 1 + self.rng.below(255) as u8,
            2 => h[16..20].copy_from_slice(&0u32.to_be_bytes()),
            3 => h[16..20].copy_from_slice(&0x4000_0000u32.to_be_bytes()),
            4 => h[20..24].copy_from_slice(&0x00ff_ffffu32.to_be_bytes()),
            5 => h.truncate(DATAGRAM_HEADER_LEN + 1 + self.rng.below(3) as usize),
            6 => {
                let n = self.rng.below(40) as usize;
                h = (0..n).map(|_| self.rng.next() as u8).collect();
            }
            _ => {
                if !self.history[to].is_empty() {
                    let k = self.rng.below(self.history[to].len() as u64) as usize;
                    h = self.history[to][k].clone();
                }
            }
        }
        h
    }

    fn next_time(&self) -> Option<u64> {
        let mut t: Option<u64> = None;
        let mut consider = |x: Option<u64>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t: u64| t.min(x)));
            }
        };
        for i in 0..2 {
            consider(self.ctrl[i].front().map(|c| c.0));
            consider(self.udp[i].iter().map(|u| u.0).min());
            consider(self.ends[i].s.poll_timeout());
        }
        t
    }

    fn done(&self) -> bool {
        self.ends
            .iter()
            .all(|e| e.to_send.is_empty() && e.s.blasts_in_flight() == 0)
            && self.ctrl.iter().all(VecDeque::is_empty)
    }

    /// Runs until every blast is released (or `limit` of virtual time).
    fn run(&mut self, limit: u64) {
        loop {
            self.pump();
            if self.done() {
                return;
            }
            let Some(t) = self.next_time() else {
                panic!("stalled at {} ms with work left", self.now / MS);
            };
            assert!(t <= limit, "not done after {} ms", limit / MS);
            self.now = t.max(self.now);
        }
    }

    fn check_exact(&self) {
        for i in 0..2 {
            let sent = &self.ends[i].sent;
            let got = &self.ends[1 - i].received;
            assert_eq!(got.len(), sent.len(), "every blast of end {i} received");
            for (k, (blast, data)) in got.iter().enumerate() {
                let want = &sent[*blast as usize - 1];
                assert!(data == want, "blast {blast} (#{k}) of end {i} is exact");
            }
        }
    }
}

fn impaired(loss: f64) -> Path {
    Path {
        latency: 10 * MS,
        jitter: 2 * MS,
        loss,
        duplicate: 0.02,
        hostile: 0.0,
    }
}

#[test]
fn clean_blast_arrives_exact_without_resends() {
    // 100 Mbit/s, 1500-byte packets on the wire.
    let mut sim = Sim::new(config(12_500_000, 1472), Path::clean(10 * MS), 1);
    sim.ends[0].to_send.push_back(pattern(1, 1 << 20));
    sim.run(10 * SEC);
    sim.check_exact();
    let st = sim.ends[0].s.stats();
    assert_eq!(st.datagrams_resent, 0);
    assert_eq!(st.datagrams_sent, (1u64 << 20).div_ceil(1448));
    assert_eq!(sim.ends[0].delivered, 1);
    assert_eq!(sim.ends[0].released, 1);
    assert_eq!(sim.ends[1].announced, vec![(1, 1, 0, 1 << 20)]);
    assert_eq!(sim.ends[1].s.stats().reports_sent, 0);
    // 1 MiB at 100 Mbit/s with 28+24 bytes of headers per 1448: ~87 ms,
    // plus one-way latency for the first SESSION and the last datagram.
    assert!(sim.now < 130 * MS, "took {} ms", sim.now / MS);
    assert_eq!(sim.ends[1].s.receive_window_used(), 0);
}

#[test]
fn lossy_reordered_duplicated_blasts_both_ways_are_exact() {
    for (seed, loss) in [
        (1, 0.001),
        (2, 0.01),
        (3, 0.05),
        (4, 0.10),
        (5, 0.10),
        (6, 0.03),
    ] {
        let mut sim = Sim::new(config(12_500_000, 1472), impaired(loss), seed);
        let mut r = Rng(seed * 77 + 1);
        for i in 0..2 {
            for k in 0..6 {
                let len = 1 + r.below(1 << 20) as usize;
                sim.ends[i]
                    .to_send
                    .push_back(pattern(seed * 100 + i as u64 * 10 + k, len));
            }
        }
        sim.run(60 * SEC);
        sim.check_exact();
        for i in 0..2 {
            let st = sim.ends[i].s.stats();
            assert!(st.datagrams_resent > 0, "loss {loss}: something was resent");
            assert!(st.reports_received > 0);
            assert_eq!(sim.ends[i].released, 6);
            assert_eq!(sim.ends[1 - i].s.stats().dropped_forged, 0);
        }
        let dup: u64 = (0..2)
            .map(|i| sim.ends[i].s.stats().dropped_duplicate)
            .sum();
        assert!(dup > 0, "duplicates were dropped and counted");
    }
}

#[test]
fn hostile_datagrams_are_dropped_and_counted() {
    let mut path = impaired(0.02);
    path.hostile = 0.05;
    let mut sim = Sim::new(config(12_500_000, 1472), path, 9);
    for k in 0..4 {
        sim.ends[0].to_send.push_back(pattern(900 + k, 700_000));
    }
    sim.run(60 * SEC);
    sim.check_exact();
    let st = sim.ends[1].s.stats();
    assert!(st.dropped_stray > 0, "{st:?}");
    assert!(st.dropped_forged > 0, "{st:?}");
    assert!(st.dropped_malformed > 0, "{st:?}");
    assert!(st.dropped_stale + st.dropped_early > 0, "{st:?}");
    let bad = st.dropped_stray
        + st.dropped_forged
        + st.dropped_malformed
        + st.dropped_stale
        + st.dropped_early;
    let hostile = sim.outcomes[1]
        .iter()
        .filter(|o| !matches!(o, DatagramOutcome::Accepted | DatagramOutcome::Duplicate))
        .count() as u64;
    assert_eq!(bad, hostile);
}

#[test]
fn datagrams_of_another_connection_are_forged() {
    // Same session ids, another trunk connection's secret: every datagram
    // is refused by its token.
    let cfg = config(12_500_000, 1472);
    let mut sim = Sim::new(cfg.clone(), Path::clean(MS), 3);
    sim.ends[0].to_send.push_back(pattern(5, 200_000));
    sim.run(10 * SEC);
    let replay = sim.history[1].clone();
    assert!(!replay.is_empty());
    let mut other = RbudpSession::new(
        cfg.clone(),
        Role::Acceptor,
        [8u8; 32],
        0x2222,
        None,
        6000,
        0,
    )
    .unwrap();
    // Make blast 1 active there, so only the token stands in the way.
    let peer_secret = [8u8; 32];
    let mut a2 =
        RbudpSession::new(cfg, Role::Initiator, peer_secret, 0x1111, None, 5000, 0).unwrap();
    other
        .handle_control(0, &a2.poll_control().unwrap())
        .unwrap();
    a2.handle_control(0, &other.poll_control().unwrap())
        .unwrap();
    a2.start_blast(1, 0, vec![0; 200_000]).unwrap();
    other
        .handle_control(0, &a2.poll_control().unwrap())
        .unwrap();
    for d in &replay {
        assert_eq!(other.handle_datagram(0, d), DatagramOutcome::Forged);
    }
    assert_eq!(other.stats().dropped_forged, replay.len() as u64);
    assert_eq!(other.stats().datagrams_received, 0);
}

#[test]
fn window_bounds_the_sender_and_is_enforced_on_the_receiver() {
    let mut cfg = config(12_500_000, 1472);
    cfg.receive_window = 1 << 20;
    let mut sim = Sim::new(cfg, Path::clean(MS), 4);
    sim.ends[0].release_on_complete = false;
    sim.ends[1].release_on_complete = false;
    sim.ends[0].to_send.push_back(pattern(1, 600_000));
    sim.ends[0].to_send.push_back(pattern(2, 600_000));
    for _ in 0..2000 {
        sim.pump();
        match sim.next_time() {
            Some(t) => sim.now = t,
            None => break,
        }
    }
    // The second blast does not fit beside the unreleased first.
    assert_eq!(sim.ends[0].sent.len(), 1);
    let s = &mut sim.ends[0].s;
    assert_eq!(s.window_available(), (1 << 20) - 600_000);
    assert!(matches!(
        s.start_blast(1, 0, vec![1; 600_000]),
        Err(BlastError::WindowFull { .. })
    ));
    // A peer that ignores the window is cut off.
    let mut b = RbudpSession::new(
        config(1_000_000, 1472),
        Role::Acceptor,
        [1; 32],
        1,
        None,
        1,
        0,
    )
    .unwrap();
    let start = |blast, length| {
        Control::BlastStart {
            blast,
            stream: 1,
            offset: 0,
            length,
            chunk: 1448,
        }
        .encode()
    };
    b.handle_control(0, &start(1, 3 << 20)).unwrap();
    assert!(matches!(
        b.handle_control(0, &start(2, 2 << 20)),
        Err(RbudpError::Window { .. })
    ));
    assert!(!b.is_ready());
}

#[test]
fn protocol_violations_fail_the_session() {
    let cases: Vec<(Vec<Control>, &str)> = vec![
        (
            vec![Control::BlastStart {
                blast: 2,
                stream: 1,
                offset: 0,
                length: 10,
                chunk: 100,
            }],
            "out of sequence",
        ),
        (
            vec![Control::Missing {
                blast: 1,
                round: 0,
                first: 0,
                bitmap: vec![1],
            }],
            "unknown blast",
        ),
        (vec![Control::Release { blast: 1 }], "unknown blast"),
        (vec![Control::Complete { blast: 1 }], "unknown blast"),
        (
            vec![Control::BlastDone { blast: 1, round: 0 }],
            "never announced",
        ),
        (
            vec![
                Control::Session {
                    session: 1,
                    addr: None,
                    port: 1,
                    max_datagram: 1472,
                    window: 100,
                },
                Control::Session {
                    session: 1,
                    addr: None,
                    port: 1,
                    max_datagram: 1472,
                    window: 100,
                },
            ],
            "second SESSION",
        ),
        (
            vec![Control::BlastStart {
                blast: 1,
                stream: 1,
                offset: 0,
                length: 10,
                chunk: 2000,
            }],
            "chunk larger",
        ),
    ];
    for (msgs, what) in cases {
        let mut s = RbudpSession::new(
            config(1_000_000, 1472),
            Role::Acceptor,
            [1; 32],
            1,
            None,
            1,
            0,
        )
        .unwrap();
        let mut err = None;
        for m in msgs {
            if let Err(e) = s.handle_control(0, &m.encode()) {
                err = Some(e);
                break;
            }
        }
        let e = err.unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(e.to_string().contains(what), "{what}: {e}");
        assert!(s
            .handle_control(0, &Control::Release { blast: 1 }.encode())
            .is_err());
    }
    // A sender whose MISSING names packets beyond the blast, or none.
    for bitmap in [vec![0u8], vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff]] {
        let mut sim = Sim::new(config(12_500_000, 1472), Path::clean(MS), 1);
        sim.ends[0].to_send.push_back(vec![1; 10_000]);
        sim.ends[1].release_on_complete = false;
        for _ in 0..50 {
            sim.pump();
            if let Some(t) = sim.next_time() {
                sim.now = t;
            }
        }
        let m = Control::Missing {
            blast: 1,
            round: 0,
            first: 0,
            bitmap,
        }
        .encode();
        assert!(sim.ends[0].s.handle_control(sim.now, &m).is_err());
    }
}

#[test]
fn released_incomplete_blast_stops_the_sender() {
    // The receiver discards a blast (its stream went away) before it is
    // complete: COMPLETE + RELEASE, the sender stops resending.
    let mut sim = Sim::new(config(12_500_000, 1472), impaired(0.5), 11);
    sim.ends[0].to_send.push_back(pattern(3, 500_000));
    for _ in 0..400 {
        sim.pump();
        if sim.ends[1].announced.len() == 1 && sim.ends[0].s.stats().datagrams_sent > 100 {
            break;
        }
        sim.now = sim.next_time().unwrap();
    }
    assert!(!sim.ends[1].s.is_complete(1));
    sim.ends[1].s.release(1);
    sim.run(10 * SEC);
    assert_eq!(sim.ends[0].delivered, 1);
    assert_eq!(sim.ends[0].released, 1);
    assert!(sim.ends[1].received.is_empty());
    assert_eq!(sim.ends[0].s.peer_window_used(), 0);
}

#[test]
fn pipelined_blasts_fill_the_rate_at_small_loss() {
    // 200 Mbit/s, 10 ms one way, 0.1 % loss, 64 MiB in 1 MiB blasts with a
    // 16 MiB window: goodput at least 90 % of the rate.
    let rate = 25_000_000;
    let mut cfg = RbudpConfig::new(rate, 1472);
    cfg.receive_window = 16 << 20;
    let mut path = impaired(0.001);
    path.duplicate = 0.0;
    let mut sim = Sim::new(cfg, path, 21);
    let total = 64usize << 20;
    for k in 0..64 {
        sim.ends[0].to_send.push_back(pattern(k, 1 << 20));
    }
    sim.run(60 * SEC);
    sim.check_exact();
    let goodput = total as f64 / (sim.now as f64 / 1e9);
    let share = goodput / rate as f64;
    assert!(
        share >= 0.90,
        "goodput {:.1} Mbit/s = {:.1} % of the rate",
        goodput * 8e-6,
        share * 100.0
    );
    // ... and no more than the payload share of the wire rate.
    assert!(share <= 1448.0 / 1500.0 + 1e-9);
}

#[test]
fn smaller_datagrams_of_the_peer_are_respected() {
    // The receiver accepts at most 512-byte datagrams: the sender cuts its
    // 1472-byte chunks down.
    let secret = [3u8; 32];
    let mut a = RbudpSession::new(
        config(12_500_000, 1472),
        Role::Initiator,
        secret,
        1,
        None,
        1,
        0,
    )
    .unwrap();
    let mut b = RbudpSession::new(
        config(12_500_000, 512),
        Role::Acceptor,
        secret,
        2,
        None,
        2,
        0,
    )
    .unwrap();
    a.handle_control(0, &b.poll_control().unwrap()).unwrap();
    b.handle_control(0, &a.poll_control().unwrap()).unwrap();
    assert_eq!(a.chunk(), 512 - DATAGRAM_HEADER_LEN);
    let data = pattern(8, 5000);
    a.start_blast(7, 42, data.clone()).unwrap();
    b.handle_control(0, &a.poll_control().unwrap()).unwrap();
    let mut buf = vec![0u8; 2000];
    let mut now = 0;
    let mut n = 0;
    while !b.is_complete(1) {
        match a.poll_datagram(now, &mut buf) {
            Some((len, port)) => {
                assert!(len <= 512);
                assert_eq!(port, 2);
                let (h, _) = DatagramHeader::parse(&buf[..len]).unwrap();
                assert_eq!((h.session, h.blast, h.seq), (2, 1, n));
                assert_eq!(
                    b.handle_datagram(now, &buf[..len]),
                    DatagramOutcome::Accepted
                );
                n += 1;
            }
            None => now = a.poll_timeout().expect("pacer timer"),
        }
    }
    assert_eq!(n, 5000u32.div_ceil(488));
    assert_eq!(b.take(1).unwrap(), data);
}

/// Virtual time to send 8 MiB in 1 MiB blasts from end 0 at `params`,
/// 100 Mbit/s session, over `path`; the data checked exact.
fn blast_time(params: BlastParams, path: Path, seed: u64) -> (u64, Sim) {
    let mut sim = Sim::new(config(12_500_000, 1472), path, seed);
    sim.ends[0].params = params;
    for k in 0..8 {
        sim.ends[0]
            .to_send
            .push_back(pattern(seed * 10 + k, 1 << 20));
    }
    sim.run(60 * SEC);
    sim.check_exact();
    (sim.now, sim)
}

#[test]
fn a_blast_at_half_the_session_rate_takes_twice_as_long() {
    for (seed, path) in [(31, Path::clean(10 * MS)), (32, impaired(0.03))] {
        let (full, _) = blast_time(BlastParams::default(), path, seed);
        let half = BlastParams {
            rate: Some(12_500_000 / 2),
            datagram_size: None,
        };
        let (slow, sim) = blast_time(half, path, seed);
        let ratio = slow as f64 / full as f64;
        assert!(
            (1.8..=2.1).contains(&ratio),
            "half rate took {} ms, full rate {} ms (x{ratio:.2})",
            slow / MS,
            full / MS
        );
        // The wire rate of the slow blasts (resends included) is at most
        // half the session's.
        let st = sim.ends[0].s.stats();
        let wire = st.bytes_sent + 28 * st.datagrams_sent;
        let rate = wire as f64 / (slow as f64 / 1e9);
        assert!(rate <= 12_500_000.0 / 2.0 * 1.01, "{rate:.0} bytes/s");
    }
}

#[test]
fn a_rate_above_the_session_rate_is_clamped() {
    let (full, _) = blast_time(BlastParams::default(), Path::clean(10 * MS), 33);
    let fast = BlastParams {
        rate: Some(u64::MAX),
        datagram_size: Some(65_507),
    };
    let (clamped, sim) = blast_time(fast, Path::clean(10 * MS), 33);
    assert_eq!(clamped, full);
    assert!(sim.ends[0].largest <= 1472);
    assert_eq!(sim.ends[0].s.blast_rate(&fast), 12_500_000);
}

#[test]
fn a_smaller_blast_datagram_gives_more_smaller_datagrams() {
    let small = BlastParams {
        rate: None,
        datagram_size: Some(600),
    };
    for (seed, path) in [(41, Path::clean(10 * MS)), (42, impaired(0.03))] {
        let (_, sim) = blast_time(small, path, seed);
        assert_eq!(sim.ends[0].largest, 600, "largest datagram");
        let st = sim.ends[0].s.stats();
        let first = st.datagrams_sent - st.datagrams_resent;
        assert_eq!(
            first,
            8 * (1u64 << 20).div_ceil(600 - DATAGRAM_HEADER_LEN as u64)
        );
        assert_eq!(sim.ends[0].s.blast_chunk(&small), 576);
    }
}

#[test]
fn invalid_blast_params_are_refused() {
    let mut sim = Sim::new(config(12_500_000, 1472), Path::clean(MS), 5);
    sim.run(SEC);
    let s = &mut sim.ends[0].s;
    assert!(s.is_ready());
    let zero = BlastParams {
        rate: Some(0),
        datagram_size: None,
    };
    assert_eq!(
        s.start_blast_with(1, 0, vec![1; 100], zero),
        Err(BlastError::Params("rate 0"))
    );
    for d in [10, 63, 65_508] {
        let p = BlastParams {
            rate: None,
            datagram_size: Some(d),
        };
        assert_eq!(
            s.start_blast_with(1, 0, vec![1; 100], p),
            Err(BlastError::Params("datagram size out of range"))
        );
    }
    // The smallest datagrams: 40 data bytes each; a blast of more than
    // 2^18 of them is too large.
    let tiny = BlastParams {
        rate: None,
        datagram_size: Some(64),
    };
    assert_eq!(s.blast_chunk(&tiny), 40);
    assert_eq!(
        s.start_blast_with(1, 0, vec![1; 40 * (1 << 18) + 1], tiny),
        Err(BlastError::TooLarge(40 * (1 << 18) + 1))
    );
}
