//! A virtual-time pair harness: two trunk connections joined by two
//! one-way links with latency, a bottleneck rate, MTU-sized segmentation of
//! the byte stream, a bounded socket send buffer, and random chunking at
//! both ends (of what `poll_transmit` may return, and of what
//! `handle_input` is given).
//!
//! TCP below the trunk is reliable and ordered, so the links never lose or
//! reorder: what varies is where the byte stream is cut and when the
//! pieces arrive.

#![allow(dead_code)]

use std::collections::VecDeque;

use wanproto::{Config, Event, PresharedKey, Role, TrunkConnection};

pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000 * MS;

/// SplitMix64: a small seeded generator.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }

    pub fn nonce(&mut self) -> [u8; 32] {
        let mut n = [0u8; 32];
        n.iter_mut().for_each(|b| *b = self.next_u64() as u8);
        n
    }
}

/// One direction's impairments.
#[derive(Clone, Copy, Debug)]
pub struct LinkParams {
    /// One-way delay (ns).
    pub latency: u64,
    /// Bottleneck rate, bytes per second.
    pub rate: u64,
    /// Segment size the byte stream is cut into.
    pub mtu: usize,
    /// Largest `max_len` given to `poll_transmit` (a random value up to it
    /// is used each time).
    pub max_chunk: usize,
    /// Bytes that may be in flight (the socket send buffer).
    pub sndbuf: usize,
}

impl LinkParams {
    pub fn wan() -> LinkParams {
        LinkParams {
            latency: 5 * MS,
            rate: 125_000_000,
            mtu: 1448,
            max_chunk: 64 * 1024,
            sndbuf: 4 << 20,
        }
    }

    pub fn instant() -> LinkParams {
        LinkParams {
            latency: 0,
            rate: u64::MAX / 4,
            mtu: 1 << 20,
            max_chunk: 1 << 20,
            sndbuf: usize::MAX / 2,
        }
    }
}

/// One direction.
#[derive(Debug)]
pub struct Link {
    pub params: LinkParams,
    busy_until: u64,
    in_flight: usize,
    /// (arrival time, segment)
    queue: VecDeque<(u64, Vec<u8>)>,
    /// When false, everything sent is lost (a dead peer or path).
    pub up: bool,
    /// Everything ever sent (for replay tests).
    pub record: Vec<u8>,
}

impl Link {
    fn new(params: LinkParams) -> Link {
        Link {
            params,
            busy_until: 0,
            in_flight: 0,
            queue: VecDeque::new(),
            up: true,
            record: Vec::new(),
        }
    }

    fn has_room(&self) -> bool {
        self.in_flight < self.params.sndbuf
    }

    fn send(&mut self, now: u64, bytes: &[u8]) {
        self.record.extend_from_slice(bytes);
        if !self.up {
            return;
        }
        for seg in bytes.chunks(self.params.mtu) {
            let tx = (seg.len() as u128 * 1_000_000_000 / u128::from(self.params.rate)) as u64;
            let departure = self.busy_until.max(now) + tx;
            self.busy_until = departure;
            let arrival = departure + self.params.latency;
            self.in_flight += seg.len();
            self.queue.push_back((arrival, seg.to_vec()));
        }
    }

    fn next_arrival(&self) -> Option<u64> {
        self.queue.front().map(|(t, _)| *t)
    }
}

/// Two connections and the links between them. `a` is the initiator.
pub struct Pair {
    pub now: u64,
    pub a: TrunkConnection,
    pub b: TrunkConnection,
    pub ab: Link,
    pub ba: Link,
    pub rng: Rng,
    pub events_a: VecDeque<Event>,
    pub events_b: VecDeque<Event>,
    /// Largest `committed_receive_bytes` seen on either side.
    pub max_committed: u64,
    /// Largest `buffered_send_bytes` seen on either side.
    pub max_send_buffered: u64,
}

pub fn key(byte: u8) -> PresharedKey {
    PresharedKey::new(&[byte; 32]).unwrap()
}

pub fn config(name: &str, cluster: &str) -> Config {
    Config::new(name, cluster)
}

impl Pair {
    pub fn new(
        ca: Config,
        cb: Config,
        ka: PresharedKey,
        kb: PresharedKey,
        link: LinkParams,
        seed: u64,
    ) -> Pair {
        let mut rng = Rng(seed);
        let a = TrunkConnection::new(ca, Role::Initiator, ka, rng.nonce(), 0).unwrap();
        let b = TrunkConnection::new(cb, Role::Acceptor, kb, rng.nonce(), 0).unwrap();
        Pair {
            now: 0,
            a,
            b,
            ab: Link::new(link),
            ba: Link::new(link),
            rng,
            events_a: VecDeque::new(),
            events_b: VecDeque::new(),
            max_committed: 0,
            max_send_buffered: 0,
        }
    }

    /// Default configs, same key, given link.
    pub fn with_link(link: LinkParams, seed: u64) -> Pair {
        Pair::new(
            config("a-relay0", "a"),
            config("b-relay0", "b"),
            key(7),
            key(7),
            link,
            seed,
        )
    }

    fn transmit(&mut self) {
        let now = self.now;
        for (conn, link) in [(&mut self.a, &mut self.ab), (&mut self.b, &mut self.ba)] {
            while link.has_room() {
                let max = self.rng.range(1, link.params.max_chunk);
                match conn.poll_transmit(now, max) {
                    Some(bytes) => link.send(now, &bytes),
                    None => break,
                }
            }
        }
    }

    fn deliver(&mut self) {
        let now = self.now;
        for (conn, link) in [(&mut self.b, &mut self.ab), (&mut self.a, &mut self.ba)] {
            while link.next_arrival().is_some_and(|t| t <= now) {
                let (_, seg) = link.queue.pop_front().unwrap();
                link.in_flight -= seg.len();
                // Receiver-side chunking: cut the segment at random points.
                let mut rest = &seg[..];
                while !rest.is_empty() {
                    let n = if self.rng.range(0, 3) == 0 {
                        self.rng.range(1, rest.len())
                    } else {
                        rest.len()
                    };
                    conn.handle_input(now, &rest[..n]);
                    rest = &rest[n..];
                }
            }
        }
    }

    /// Moves the connections' events to `events_a` and `events_b`; true if
    /// there were any.
    pub fn collect(&mut self) -> bool {
        let mut any = false;
        while let Some(e) = self.a.poll_event() {
            self.events_a.push_back(e);
            any = true;
        }
        while let Some(e) = self.b.poll_event() {
            self.events_b.push_back(e);
            any = true;
        }
        for c in [&self.a, &self.b] {
            self.max_committed = self.max_committed.max(c.committed_receive_bytes());
            self.max_send_buffered = self.max_send_buffered.max(c.buffered_send_bytes());
        }
        any
    }

    /// Transmits what is ready; if that (or the application since the last
    /// step) produced events, returns at once so they can be handled at the
    /// same instant. Otherwise advances to the next arrival or timer (never
    /// past `limit`) and processes it. False if nothing is scheduled before
    /// `limit`.
    pub fn step(&mut self, limit: u64) -> bool {
        self.transmit();
        if self.collect() {
            return true;
        }
        let next = [
            self.ab.next_arrival(),
            self.ba.next_arrival(),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(t) = next else { return false };
        if t > limit {
            self.now = self.now.max(limit);
            return false;
        }
        self.now = self.now.max(t);
        self.deliver();
        for c in [&mut self.a, &mut self.b] {
            if c.poll_timeout().is_some_and(|t| t <= self.now) {
                c.handle_timeout(self.now);
            }
        }
        self.transmit();
        self.collect();
        true
    }

    /// Steps until `done` holds (true) or virtual time passes `deadline`
    /// (false).
    pub fn run_until(&mut self, deadline: u64, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if !self.step(deadline) {
                return done(self);
            }
        }
    }

    /// The transport breaks: whatever is in flight is lost, both ends are
    /// told, and fresh links (empty, same parameters) replace the old.
    pub fn break_transport(&mut self) {
        self.ab = Link::new(self.ab.params);
        self.ba = Link::new(self.ba.params);
        self.a.handle_transport_closed();
        self.b.handle_transport_closed();
        self.collect();
    }

    /// Both ends resume on the (fresh) links.
    pub fn resume(&mut self) {
        let (na, nb) = (self.rng.nonce(), self.rng.nonce());
        self.a.begin_resume(self.now, na).expect("a resumable");
        self.b.begin_resume(self.now, nb).expect("b resumable");
    }

    /// Runs the handshake; true if both ends authenticated.
    pub fn handshake(&mut self) -> bool {
        let ok = self.run_until(30 * SEC, |p| {
            (p.a.is_established() && p.b.is_established()) || p.a.is_closed() || p.b.is_closed()
        });
        ok && self.a.is_established() && self.b.is_established()
    }
}
