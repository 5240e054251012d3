//! Stream behaviour of two trunk connections on virtual time: exact
//! delivery, half-close, reset, flow control, graceful close, keepalive.

mod harness;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use harness::{LinkParams, Pair, Rng, MS, SEC};
use wanproto::{
    BlastRequest, CloseCode, Config, ConnectionError, Event, OpenError, ReadOutcome, Reason,
    StreamError, StreamId, TrunkConnection,
};

/// What one end does with one stream.
#[derive(Debug, Default)]
struct StreamApp {
    out: Vec<u8>,
    written: usize,
    /// Write only this much before finishing (for half-close tests: the
    /// rest is never sent).
    finish: bool,
    finished: bool,
    input: Vec<u8>,
    got_fin: bool,
    closed: bool,
    reset: Option<Reason>,
    /// When false the app never reads this stream.
    reads: bool,
    accepted: bool,
}

/// One end's application: streams by id.
#[derive(Debug, Default)]
struct App {
    streams: BTreeMap<StreamId, StreamApp>,
}

fn payload(seed: u64, side: u8, index: u16, max_len: usize) -> Vec<u8> {
    let mut r = Rng(seed ^ (u64::from(side) << 40) ^ (u64::from(index) << 8));
    let len = r.range(0, max_len);
    r.bytes(len)
}

fn dest(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 1, 0, (port % 200) as u8 + 1], port))
}

fn src() -> SocketAddr {
    "10.0.0.2:1024".parse().unwrap()
}

impl App {
    /// Writes a random amount on every stream with data left; finishes
    /// streams that are done.
    fn pump(&mut self, conn: &mut TrunkConnection, rng: &mut Rng) {
        for (&id, s) in self.streams.iter_mut() {
            if s.closed || s.reset.is_some() || s.finished {
                continue;
            }
            if s.written < s.out.len() {
                let n = rng.range(1, (s.out.len() - s.written).min(100_000));
                let k = conn.write(id, &s.out[s.written..s.written + n]).unwrap();
                s.written += k;
            }
            if s.written == s.out.len() && s.finish {
                conn.finish(id).unwrap();
                s.finished = true;
            }
        }
    }

    /// Handles events: accepts opened streams (generating the reply
    /// payload from the destination port), reads readable streams.
    fn handle(
        &mut self,
        events: &mut std::collections::VecDeque<Event>,
        conn: &mut TrunkConnection,
        rng: &mut Rng,
        reply: &dyn Fn(u16) -> Vec<u8>,
    ) {
        while let Some(ev) = events.pop_front() {
            match ev {
                Event::StreamOpened {
                    stream,
                    destination,
                    ..
                } => {
                    conn.accept_stream(stream).unwrap();
                    self.streams.insert(
                        stream,
                        StreamApp {
                            out: reply(destination.port()),
                            finish: true,
                            reads: true,
                            accepted: true,
                            ..Default::default()
                        },
                    );
                }
                Event::StreamAccepted { stream } => {
                    self.streams.get_mut(&stream).unwrap().accepted = true;
                }
                Event::StreamReadable { stream } => {
                    let s = self.streams.get_mut(&stream).unwrap();
                    if !s.reads {
                        continue;
                    }
                    loop {
                        let mut buf = vec![0u8; rng.range(1, 70_000)];
                        match conn.read(stream, &mut buf).unwrap() {
                            ReadOutcome::Data(n) => s.input.extend_from_slice(&buf[..n]),
                            ReadOutcome::Blocked => break,
                            ReadOutcome::Finished => {
                                s.got_fin = true;
                                break;
                            }
                        }
                    }
                }
                Event::StreamClosed { stream } => {
                    self.streams.get_mut(&stream).unwrap().closed = true
                }
                Event::StreamReset { stream, reason } => {
                    self.streams.get_mut(&stream).unwrap().reset = Some(reason)
                }
                Event::StreamWritable { .. }
                | Event::Authenticated(_)
                | Event::GoAway
                | Event::Suspended { .. }
                | Event::Resumed { .. }
                | Event::Rbudp { .. } => {}
                Event::Closed { error } => panic!("connection closed: {error:?}"),
            }
        }
    }
}

/// Runs the apps on both ends until `done` or the deadline.
fn run_apps(
    p: &mut Pair,
    a: &mut App,
    b: &mut App,
    seed: u64,
    max_len: usize,
    deadline: u64,
    mut done: impl FnMut(&Pair, &App, &App) -> bool,
) -> bool {
    let mut rng = Rng(seed ^ 0x55);
    loop {
        let reply_b = |port: u16| payload(seed, b'B', port, max_len);
        let reply_a = |port: u16| payload(seed, b'A', port, max_len);
        let mut ev = std::mem::take(&mut p.events_a);
        a.handle(&mut ev, &mut p.a, &mut rng, &reply_a);
        let mut ev = std::mem::take(&mut p.events_b);
        b.handle(&mut ev, &mut p.b, &mut rng, &reply_b);
        a.pump(&mut p.a, &mut rng);
        b.pump(&mut p.b, &mut rng);
        if done(p, a, b) {
            return true;
        }
        if !p.step(deadline) {
            return done(p, a, b);
        }
    }
}

/// Opens `n` streams from `conn`, with ports starting at `base`.
fn open_streams(
    conn: &mut TrunkConnection,
    app: &mut App,
    seed: u64,
    side: u8,
    base: u16,
    n: u16,
    max_len: usize,
) {
    for i in 0..n {
        let port = base + i;
        let id = conn.open_stream(dest(port), src()).unwrap();
        app.streams.insert(
            id,
            StreamApp {
                out: payload(seed, side, port, max_len),
                finish: true,
                reads: true,
                ..Default::default()
            },
        );
    }
}

fn all_done(app: &App) -> bool {
    app.streams.values().all(|s| s.closed)
}

/// Every stream carried exactly the bytes of its payload in both directions.
fn check_exact(a: &App, b: &App) {
    for (id, s) in &a.streams {
        let peer = &b.streams[id];
        assert_eq!(s.input.len(), peer.out.len(), "stream {id} a<-b length");
        assert!(s.input == peer.out, "stream {id} a<-b bytes differ");
        assert!(peer.input == s.out, "stream {id} a->b bytes differ");
        assert!(s.got_fin && peer.got_fin, "stream {id} fin");
    }
    assert_eq!(a.streams.len(), b.streams.len());
}

fn exact_delivery(link: LinkParams, seed: u64, n_a: u16, n_b: u16, max_len: usize) {
    let mut p = Pair::with_link(link, seed);
    assert!(p.handshake());
    let (mut a, mut b) = (App::default(), App::default());
    open_streams(&mut p.a, &mut a, seed, b'A', 1, n_a, max_len);
    open_streams(&mut p.b, &mut b, seed, b'B', 1000, n_b, max_len);
    let ok = run_apps(
        &mut p,
        &mut a,
        &mut b,
        seed,
        max_len,
        600 * SEC,
        |_, a, b| all_done(a) && all_done(b),
    );
    assert!(ok, "not done by the deadline (now {} ms)", p.now / MS);
    check_exact(&a, &b);
    assert_eq!(p.a.stream_count(), 0);
    assert_eq!(p.b.stream_count(), 0);
    let cfg = Config::new("x", "y");
    assert!(p.max_committed <= cfg.receive_buffer);
    assert!(p.max_send_buffered <= u64::from(cfg.stream_send_buffer) * u64::from(n_a + n_b));
    assert_eq!(p.a.stats().resets_sent + p.b.stats().resets_sent, 0);
}

#[test]
fn many_concurrent_streams_deliver_exact_bytes_both_ways_over_a_wan() {
    for seed in 1..=3 {
        exact_delivery(LinkParams::wan(), seed, 24, 16, 300_000);
    }
}

#[test]
fn exact_delivery_survives_tiny_segments_and_chunks() {
    for seed in 10..=14 {
        let mut rng = Rng(seed);
        let link = LinkParams {
            latency: rng.range(0, 3) as u64 * MS,
            rate: 10_000_000,
            mtu: rng.range(1, 7),
            max_chunk: rng.range(1, 40),
            sndbuf: rng.range(1, 5000),
        };
        exact_delivery(link, seed, 6, 4, 20_000);
    }
}

#[test]
fn exact_delivery_of_large_streams_with_window_growth() {
    // 4 MiB each way on 3 streams over a 20 ms RTT, 1 Gbit/s path.
    let link = LinkParams {
        latency: 10 * MS,
        rate: 125_000_000,
        mtu: 8948,
        max_chunk: 256 * 1024,
        sndbuf: 8 << 20,
    };
    let mut p = Pair::with_link(link, 99);
    assert!(p.handshake());
    let (mut a, mut b) = (App::default(), App::default());
    for port in 1..=3u16 {
        let id = p.a.open_stream(dest(port), src()).unwrap();
        let mut r = Rng(u64::from(port));
        a.streams.insert(
            id,
            StreamApp {
                out: r.bytes(4 << 20),
                finish: true,
                reads: true,
                ..Default::default()
            },
        );
    }
    let ok = run_apps(&mut p, &mut a, &mut b, 99, 0, 120 * SEC, |_, a, b| {
        all_done(a) && all_done(b) && !a.streams.is_empty()
    });
    assert!(ok);
    for (id, s) in &a.streams {
        assert!(b.streams[id].input == s.out);
    }
    // 12 MiB at 125 MB/s is ~100 ms of transmission: window growth must
    // make it far faster than 32 KiB per round trip (which needs ~8 s).
    assert!(p.now < 2 * SEC, "took {} ms", p.now / MS);
}

#[test]
fn a_blast_request_reaches_the_far_end_with_its_stream() {
    let mut p = Pair::with_link(LinkParams::wan(), 3);
    assert!(p.handshake());
    let request = BlastRequest::new(3_125_000, 1200).unwrap();
    let asked =
        p.a.open_stream_with_blast(dest(1), src(), Some(request))
            .unwrap();
    let plain = p.a.open_stream(dest(2), src()).unwrap();
    assert!(p.run_until(SEC, |p| p
        .events_b
        .iter()
        .filter(|e| matches!(e, Event::StreamOpened { .. }))
        .count()
        == 2));
    let opened: Vec<_> = p
        .events_b
        .iter()
        .filter_map(|e| match e {
            Event::StreamOpened { stream, blast, .. } => Some((*stream, *blast)),
            _ => None,
        })
        .collect();
    assert_eq!(opened, [(asked, Some(request)), (plain, None)]);
}

#[test]
fn half_close_propagates_both_ways() {
    let mut p = Pair::with_link(LinkParams::wan(), 3);
    assert!(p.handshake());
    let id = p.a.open_stream(dest(1), src()).unwrap();
    assert_eq!(p.a.write(id, b"request").unwrap(), 7);
    p.a.finish(id).unwrap();
    assert!(p.run_until(SEC, |p| p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::StreamReadable { .. }))));
    let opened = p.events_b.iter().find_map(|e| match e {
        Event::StreamOpened {
            stream,
            destination,
            source,
            blast: None,
        } => Some((*stream, *destination, *source)),
        _ => None,
    });
    assert_eq!(opened, Some((id, dest(1), src())));
    p.b.accept_stream(id).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(p.b.read(id, &mut buf).unwrap(), ReadOutcome::Data(7));
    assert_eq!(&buf[..7], b"request");
    assert_eq!(p.b.read(id, &mut buf).unwrap(), ReadOutcome::Finished);
    // b still sends after a's FIN, in two writes separated by time.
    assert_eq!(p.b.write(id, b"reply-1 ").unwrap(), 8);
    let t = p.now + 50 * MS;
    p.run_until(t, |p| p.now >= t);
    assert_eq!(p.b.write(id, b"reply-2").unwrap(), 7);
    assert!(
        p.a.write(id, b"late").is_err(),
        "a finished: no more writes"
    );
    p.b.finish(id).unwrap();
    let t = p.now + 100 * MS;
    p.run_until(t, |p| p.now >= t);
    assert!(p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::StreamClosed { .. })));
    let mut got = Vec::new();
    loop {
        match p.a.read(id, &mut buf).unwrap() {
            ReadOutcome::Data(n) => got.extend_from_slice(&buf[..n]),
            ReadOutcome::Finished => break,
            ReadOutcome::Blocked => panic!("blocked before FIN"),
        }
    }
    assert_eq!(got, b"reply-1 reply-2");
    p.collect();
    assert!(p
        .events_a
        .iter()
        .any(|e| *e == Event::StreamClosed { stream: id }));
    assert_eq!(p.a.stream_count() + p.b.stream_count(), 0);
    assert_eq!(p.a.read(id, &mut buf), Err(StreamError::UnknownStream(id)));
}

#[test]
fn reset_propagates_and_drops_the_stream_on_both_ends() {
    let mut p = Pair::with_link(LinkParams::wan(), 4);
    assert!(p.handshake());
    let keep = p.a.open_stream(dest(1), src()).unwrap();
    let doomed = p.a.open_stream(dest(2), src()).unwrap();
    p.a.write(doomed, &[1u8; 100_000]).unwrap();
    p.a.write(keep, b"keep").unwrap();
    assert!(p.run_until(SEC, |p| p.b.stream_count() == 2));
    p.b.accept_stream(keep).unwrap();
    p.b.accept_stream(doomed).unwrap();
    p.a.reset_stream(doomed, Reason::ConnectionReset).unwrap();
    assert_eq!(
        p.a.write(doomed, b"x"),
        Err(StreamError::UnknownStream(doomed))
    );
    assert!(p.run_until(SEC, |p| p.events_b.iter().any(|e| *e
        == Event::StreamReset {
            stream: doomed,
            reason: Reason::ConnectionReset
        })));
    assert_eq!(
        p.b.write(doomed, b"x"),
        Err(StreamError::UnknownStream(doomed))
    );
    assert_eq!(p.b.stream_count(), 1);
    // b resets the other one back.
    p.b.reset_stream(keep, Reason::Refused).unwrap();
    assert!(p.run_until(SEC, |p| p.events_a.iter().any(|e| *e
        == Event::StreamReset {
            stream: keep,
            reason: Reason::Refused
        })));
    assert_eq!(p.a.stream_count(), 0);
    assert!(p.a.is_established() && p.b.is_established());
    assert_eq!(p.b.stats().resets_received, 1);
    assert_eq!(p.a.stats().resets_received, 1);
}

#[test]
fn refused_open_is_a_reset_before_accept() {
    let mut p = Pair::with_link(LinkParams::wan(), 5);
    assert!(p.handshake());
    let id = p.a.open_stream(dest(9), src()).unwrap();
    p.a.write(id, b"pipelined before the answer").unwrap();
    assert!(p.run_until(SEC, |p| p.b.stream_count() == 1));
    // Not accepted: b may not write yet.
    assert_eq!(p.b.write(id, b"x"), Err(StreamError::NotAccepted(id)));
    p.b.reset_stream(id, Reason::NotMember).unwrap();
    assert!(p.run_until(SEC, |p| p.events_a.iter().any(|e| *e
        == Event::StreamReset {
            stream: id,
            reason: Reason::NotMember
        })));
    assert!(!p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::StreamAccepted { .. })));
    // A stream reset before its OPEN left sends nothing at all.
    let before = p.a.stats().frames_sent;
    let id2 = p.a.open_stream(dest(10), src()).unwrap();
    p.a.reset_stream(id2, Reason::Internal).unwrap();
    assert_eq!(p.a.poll_transmit(p.now, 1 << 16), None);
    assert_eq!(p.a.stats().frames_sent, before);
}

#[test]
fn a_reader_that_never_reads_does_not_stall_another_stream() {
    let mut p = Pair::with_link(LinkParams::wan(), 6);
    assert!(p.handshake());
    let (mut a, mut b) = (App::default(), App::default());
    let stalled = p.a.open_stream(dest(1), src()).unwrap();
    let flowing = p.a.open_stream(dest(2), src()).unwrap();
    let mut r = Rng(6);
    let flowing_bytes = r.bytes(8 << 20);
    a.streams.insert(
        stalled,
        StreamApp {
            out: r.bytes(8 << 20),
            reads: true,
            ..Default::default()
        },
    );
    a.streams.insert(
        flowing,
        StreamApp {
            out: flowing_bytes.clone(),
            finish: true,
            reads: true,
            ..Default::default()
        },
    );
    let mut rng = Rng(66);
    let mut max_b_buffered = 0;
    let done = loop {
        let mut ev = std::mem::take(&mut p.events_b);
        b.handle(&mut ev, &mut p.b, &mut rng, &|_| Vec::new());
        if let Some(s) = b.streams.get_mut(&stalled) {
            s.reads = false;
            s.finish = false;
        }
        let mut ev = std::mem::take(&mut p.events_a);
        a.handle(&mut ev, &mut p.a, &mut rng, &|_| Vec::new());
        a.pump(&mut p.a, &mut rng);
        max_b_buffered = max_b_buffered.max(p.b.buffered_receive_bytes());
        if b.streams.get(&flowing).is_some_and(|s| s.got_fin) {
            break true;
        }
        if !p.step(60 * SEC) {
            break false;
        }
    };
    assert!(done, "the flowing stream stalled");
    assert!(b.streams[&flowing].input == flowing_bytes);
    let cfg = Config::new("x", "y");
    // The stalled stream holds exactly its floor window; nothing more.
    assert_eq!(
        p.b.buffered_receive_bytes(),
        u64::from(cfg.min_stream_window)
    );
    assert!(max_b_buffered <= u64::from(cfg.min_stream_window) + u64::from(cfg.max_stream_window));
    // The sender holds at most its send buffer for the stalled stream.
    assert!(p.a.buffered_send_bytes() <= u64::from(cfg.stream_send_buffer));
    assert!(p.a.send_capacity(stalled) < cfg.stream_send_buffer as usize);
}

#[test]
fn streams_stalled_after_growing_leave_new_streams_their_floor() {
    // A budget with room for only two grown windows beyond the floors.
    let mut ca = Config::new("a-relay0", "a");
    let mut cb = Config::new("b-relay0", "b");
    for c in [&mut ca, &mut cb] {
        c.max_streams = 8;
        c.min_stream_window = 16 * 1024;
        c.max_stream_window = 1 << 20;
        c.receive_buffer = 2 * 8 * 16 * 1024 + (2 << 20);
    }
    let mut p = Pair::new(
        ca,
        cb.clone(),
        harness::key(1),
        harness::key(1),
        LinkParams::wan(),
        7,
    );
    assert!(p.handshake());
    let mut rng = Rng(7);
    let (mut a, mut b) = (App::default(), App::default());
    // Three streams are read for a while (they grow), then never again.
    for port in 1..=3u16 {
        let id = p.a.open_stream(dest(port), src()).unwrap();
        a.streams.insert(
            id,
            StreamApp {
                out: rng.bytes(6 << 20),
                reads: true,
                ..Default::default()
            },
        );
    }
    let t = p.now + 30 * MS;
    while p.now < t {
        let mut ev = std::mem::take(&mut p.events_b);
        b.handle(&mut ev, &mut p.b, &mut rng, &|_| Vec::new());
        a.pump(&mut p.a, &mut rng);
        p.events_a.clear();
        if !p.step(t) {
            break;
        }
    }
    for s in b.streams.values_mut() {
        s.reads = false;
    }
    let t = p.now + 500 * MS;
    while p.now < t {
        a.pump(&mut p.a, &mut rng);
        p.events_a.clear();
        p.events_b.clear();
        if !p.step(t) {
            break;
        }
    }
    assert!(p.b.committed_receive_bytes() <= cb.receive_buffer);
    assert!(
        p.b.buffered_receive_bytes() > 1 << 20,
        "stalled streams hold their grown windows"
    );
    // A new stream still delivers 1 MiB, at its floor window at worst.
    let fresh = p.a.open_stream(dest(50), src()).unwrap();
    let bytes = rng.bytes(1 << 20);
    a.streams.insert(
        fresh,
        StreamApp {
            out: bytes.clone(),
            finish: true,
            reads: true,
            ..Default::default()
        },
    );
    let ok = run_apps(&mut p, &mut a, &mut b, 7, 0, 120 * SEC, |_, _, b| {
        b.streams.get(&fresh).is_some_and(|s| s.got_fin)
    });
    assert!(ok, "the new stream stalled");
    assert!(b.streams[&fresh].input == bytes);
    assert!(p.max_committed <= cb.receive_buffer);
}

#[test]
fn graceful_go_away_drains_streams_then_closes_both_ends() {
    let mut p = Pair::with_link(LinkParams::wan(), 8);
    assert!(p.handshake());
    let id = p.a.open_stream(dest(1), src()).unwrap();
    p.a.write(id, b"in flight").unwrap();
    assert!(p.run_until(SEC, |p| p.b.stream_count() == 1));
    p.b.accept_stream(id).unwrap();
    p.b.go_away();
    assert!(p.run_until(SEC, |p| p.events_a.contains(&Event::GoAway)));
    assert_eq!(p.a.open_stream(dest(2), src()), Err(OpenError::GoingAway));
    assert!(!p.a.accepts_new_streams());
    // The existing stream still completes.
    p.a.finish(id).unwrap();
    let mut buf = [0u8; 32];
    assert!(p.run_until(SEC, |p| p
        .events_b
        .iter()
        .filter(|e| matches!(e, Event::StreamReadable { .. }))
        .count()
        >= 1));
    assert!(p.run_until(SEC, |p| {
        let mut buf = [0u8; 32];
        matches!(p.b.read(id, &mut buf), Ok(ReadOutcome::Finished))
    }));
    p.b.write(id, b"bye").unwrap();
    p.b.finish(id).unwrap();
    assert!(p.run_until(SEC, |p| matches!(
        p.a.read(id, &mut [0u8; 8]),
        Ok(ReadOutcome::Data(3))
    )));
    assert_eq!(p.a.read(id, &mut buf), Ok(ReadOutcome::Finished));
    assert!(p.run_until(SEC, |p| p.a.is_closed() && p.b.is_closed()));
    p.collect();
    assert!(p.events_a.contains(&Event::Closed { error: None }));
    assert!(p.events_b.contains(&Event::Closed { error: None }));
}

#[test]
fn keepalive_keeps_an_idle_trunk_up_and_measures_rtt() {
    let mut p = Pair::with_link(LinkParams::wan(), 9);
    assert!(p.handshake());
    let t = p.now + 120 * SEC;
    p.run_until(t, |p| p.now >= t);
    assert!(p.a.is_established() && p.b.is_established());
    let rtt = p.a.rtt().expect("a PING was answered");
    assert!((10 * MS..11 * MS).contains(&rtt), "rtt {rtt}");
}

#[test]
fn a_silent_peer_is_declared_dead_within_the_idle_timeout() {
    // Without resumption (resume_timeout 0) the connection closes.
    let mut ca = Config::new("a-relay0", "a");
    ca.resume_timeout = 0;
    let (k, l) = (harness::key(7), harness::key(7));
    let mut p = Pair::new(
        ca,
        Config::new("b-relay0", "b"),
        k,
        l,
        LinkParams::wan(),
        10,
    );
    assert!(p.handshake());
    assert_eq!(p.a.session_id(), None);
    let id = p.a.open_stream(dest(1), src()).unwrap();
    let start = p.now;
    p.ba.up = false; // b dies: nothing more arrives at a
    p.ab.up = false;
    assert!(p.run_until(start + 30 * SEC, |p| p.a.is_closed()));
    let idle = Config::new("x", "y").idle_timeout;
    assert!(
        p.now - start <= idle + MS,
        "closed after {} ms",
        (p.now - start) / MS
    );
    assert!(p.events_a.contains(&Event::Closed {
        error: Some(ConnectionError::IdleTimeout)
    }));
    assert_eq!(p.a.write(id, b"x"), Err(StreamError::ConnectionClosed));
    assert_eq!(
        p.a.open_stream(dest(2), src()),
        Err(OpenError::ConnectionClosed)
    );
}

#[test]
fn a_silent_peer_suspends_a_resumable_session_until_resume_timeout() {
    let mut p = Pair::with_link(LinkParams::wan(), 10);
    assert!(p.handshake());
    assert!(p.a.session_id().is_some());
    assert_eq!(p.a.session_id(), p.b.session_id());
    let id = p.a.open_stream(dest(1), src()).unwrap();
    let start = p.now;
    p.ba.up = false;
    p.ab.up = false;
    assert!(p.run_until(start + 30 * SEC, |p| p.a.is_suspended()));
    let c = Config::new("x", "y");
    assert!(p.now - start <= c.idle_timeout + MS);
    assert!(p.events_a.contains(&Event::Suspended {
        error: ConnectionError::IdleTimeout
    }));
    // Streams stay usable: writes are buffered for the resumption.
    assert_eq!(p.a.write(id, b"x"), Ok(1));
    assert!(p.a.open_stream(dest(2), src()).is_ok());
    assert!(
        p.run_until(start + c.idle_timeout + c.resume_timeout + SEC, |p| p
            .a
            .is_closed())
    );
    assert!(p.events_a.contains(&Event::Closed {
        error: Some(ConnectionError::ResumeTimeout(Box::new(
            ConnectionError::IdleTimeout
        )))
    }));
    assert_eq!(p.a.write(id, b"x"), Err(StreamError::ConnectionClosed));
}

#[test]
fn close_sends_goaway_with_the_code_and_the_peer_closes() {
    let mut p = Pair::with_link(LinkParams::wan(), 11);
    assert!(p.handshake());
    p.a.open_stream(dest(1), src()).unwrap();
    p.a.close(CloseCode::Shutdown);
    assert!(p.a.is_closed());
    assert!(p.run_until(SEC, |p| p.b.is_closed()));
    assert!(p.events_b.contains(&Event::Closed {
        error: Some(ConnectionError::PeerClosed(CloseCode::Shutdown))
    }));
}

#[test]
fn bytes_that_arrive_before_accept_are_announced_again_after_it() {
    let mut p = Pair::with_link(LinkParams::wan(), 12);
    assert!(p.handshake());
    let id = p.a.open_stream(dest(1), src()).unwrap();
    p.a.write(id, b"early").unwrap();
    p.a.finish(id).unwrap();
    assert!(p.run_until(SEC, |p| p
        .events_b
        .iter()
        .any(|e| *e == Event::StreamReadable { stream: id })));
    p.events_b.clear(); // the daemon could not act on it yet
    p.b.accept_stream(id).unwrap();
    p.collect();
    assert_eq!(
        p.events_b.pop_front(),
        Some(Event::StreamReadable { stream: id })
    );
    let mut buf = [0u8; 16];
    assert_eq!(p.b.read(id, &mut buf), Ok(ReadOutcome::Data(5)));
    assert_eq!(p.b.read(id, &mut buf), Ok(ReadOutcome::Finished));
    assert!(p.run_until(SEC, |p| p
        .events_a
        .contains(&Event::StreamAccepted { stream: id })));
}

#[test]
fn rbudp_frames_overtake_later_stream_data_and_secrets_match() {
    let mut p = Pair::with_link(LinkParams::wan(), 12);
    assert_eq!(
        p.a.export_secret(b"rbudp"),
        None,
        "no secret before authentication"
    );
    assert!(
        p.a.send_rbudp(b"x").is_err(),
        "no RBUDP before authentication"
    );
    assert!(p.handshake());
    let sa = p.a.export_secret(b"rbudp").unwrap();
    assert_eq!(
        Some(sa),
        p.b.export_secret(b"rbudp"),
        "both ends derive one secret"
    );
    assert_ne!(Some(sa), p.a.export_secret(b"other"));
    let mut q = Pair::with_link(LinkParams::wan(), 13);
    assert!(q.handshake());
    assert_ne!(
        Some(sa),
        q.a.export_secret(b"rbudp"),
        "fresh nonces, fresh secret"
    );

    let id = p.a.open_stream(dest(1), src()).unwrap();
    assert!(p.run_until(SEC, |p| p.b.stream_count() == 1));
    p.b.accept_stream(id).unwrap();
    assert!(p.run_until(SEC, |p| p
        .events_a
        .contains(&Event::StreamAccepted { stream: id })));
    // The announcement is queued before the bytes written after it: the
    // peer sees it before it can read those bytes.
    p.a.send_rbudp(b"announce").unwrap();
    p.a.write(id, b"after").unwrap();
    assert!(p.a.send_rbudp(&[]).is_err());
    assert!(p.a.send_rbudp(&vec![0; 65_537]).is_err());
    let mut seen_announce_first = false;
    let mut buf = [0u8; 16];
    assert!(p.run_until(SEC, |p| {
        let announced = p.events_b.contains(&Event::Rbudp {
            message: b"announce".to_vec(),
        });
        match p.b.read(id, &mut buf) {
            Ok(ReadOutcome::Data(n)) => {
                assert_eq!(&buf[..n], b"after");
                seen_announce_first = announced;
                true
            }
            _ => false,
        }
    }));
    assert!(seen_announce_first);
}
