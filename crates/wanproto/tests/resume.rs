//! Session resumption: streams carry on across broken transports with
//! nothing lost or duplicated; a resumption is authenticated like the
//! first handshake; unknown sessions and expired ones close for good.

mod harness;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use harness::{key, LinkParams, Pair, Rng, MS, SEC};
use wanproto::{
    CloseCode, Config, ConnectionError, Event, ReadOutcome, Role, StreamId, TrunkConnection,
};

fn dest(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 1, 0, 1], port))
}

fn src() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 5000))
}

/// What one end of a stream sends and has received.
#[derive(Default)]
struct End {
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    fin_sent: bool,
    fin_got: bool,
}

/// Streams opened by `a`, each sending its payload both ways.
struct Transfer {
    a: BTreeMap<StreamId, End>,
    b: BTreeMap<StreamId, End>,
    /// What b sends back on a stream, by the stream's destination port.
    replies: BTreeMap<u16, Vec<u8>>,
}

impl Transfer {
    fn start(p: &mut Pair, streams: u16, bytes: usize) -> Transfer {
        let mut t = Transfer {
            a: BTreeMap::new(),
            b: BTreeMap::new(),
            replies: BTreeMap::new(),
        };
        for port in 1..=streams {
            let id = p.a.open_stream(dest(port), src()).unwrap();
            let n = bytes + p.rng.range(0, bytes);
            t.a.insert(
                id,
                End {
                    out: p.rng.bytes(n),
                    ..End::default()
                },
            );
            let m = bytes + p.rng.range(0, bytes);
            t.replies.insert(port, p.rng.bytes(m));
        }
        t
    }

    /// Writes what fits, finishes what is written, handles events.
    fn pump(&mut self, p: &mut Pair) {
        for (conn, ends) in [(&mut p.a, &mut self.a), (&mut p.b, &mut self.b)] {
            for (&id, e) in ends.iter_mut() {
                if e.written < e.out.len() {
                    let n = (e.out.len() - e.written).min(200_000);
                    e.written += conn.write(id, &e.out[e.written..e.written + n]).unwrap();
                }
                if e.written == e.out.len() && !e.fin_sent {
                    conn.finish(id).unwrap();
                    e.fin_sent = true;
                }
            }
        }
        while let Some(ev) = p.events_b.pop_front() {
            if let Event::StreamOpened {
                stream,
                destination,
                ..
            } = ev
            {
                p.b.accept_stream(stream).unwrap();
                let out = self.replies[&destination.port()].clone();
                self.b.insert(
                    stream,
                    End {
                        out,
                        ..End::default()
                    },
                );
            }
        }
        p.events_a
            .retain(|e| !matches!(e, Event::StreamAccepted { .. }));
        for (conn, ends) in [(&mut p.a, &mut self.a), (&mut p.b, &mut self.b)] {
            for (&id, e) in ends.iter_mut() {
                if e.fin_got {
                    continue;
                }
                let mut buf = vec![0u8; 65536];
                loop {
                    match conn.read(id, &mut buf) {
                        Ok(ReadOutcome::Data(n)) => e.input.extend_from_slice(&buf[..n]),
                        Ok(ReadOutcome::Finished) => {
                            e.fin_got = true;
                            break;
                        }
                        Ok(ReadOutcome::Blocked) | Err(_) => break,
                    }
                }
            }
        }
    }

    fn done(&self) -> bool {
        let all = |m: &BTreeMap<StreamId, End>| m.values().all(|e| e.fin_got && e.fin_sent);
        self.b.len() == self.a.len() && all(&self.a) && all(&self.b)
    }

    /// Every byte arrived once, in order, on every stream, both ways.
    fn check(&self) {
        for (id, e) in &self.a {
            let port = (id / 2 + 1) as u16;
            assert_eq!(
                e.input.len(),
                self.replies[&port].len(),
                "stream {id} b->a length"
            );
            assert!(
                e.input == self.replies[&port],
                "stream {id} b->a bytes differ"
            );
        }
        for (id, e) in &self.b {
            let sent = &self.a[id].out;
            assert_eq!(e.input.len(), sent.len(), "stream {id} a->b length");
            assert!(e.input == *sent, "stream {id} a->b bytes differ");
        }
    }
}

/// Runs until the transfer is done or `until`; checks the replay buffers
/// stay within their bound meanwhile.
fn run(p: &mut Pair, t: &mut Transfer, duration: u64) -> bool {
    let until = p.now + duration;
    let bound = Config::new("x", "y").resume_buffer + 512 * 1024;
    p.run_until(until, |p| {
        t.pump(p);
        assert!(p.a.unacknowledged_bytes() <= bound && p.b.unacknowledged_bytes() <= bound);
        t.done()
    })
}

#[test]
fn streams_continue_exactly_across_broken_transports() {
    for seed in 1..=6u64 {
        let mut p = Pair::with_link(LinkParams::wan(), seed);
        assert!(p.handshake());
        let mut t = Transfer::start(&mut p, 4, 600_000);
        let mut cuts = 0;
        let mut rng = Rng(seed * 77);
        while !t.done() {
            // Run a while, then break the transport mid-transfer.
            if run(&mut p, &mut t, rng.range(5, 60) as u64 * MS) {
                break;
            }
            p.break_transport();
            assert!(p.a.is_suspended() && p.b.is_suspended(), "seed {seed}");
            // Writes go on while suspended.
            t.pump(&mut p);
            p.now += rng.range(1, 3000) as u64 * MS;
            p.resume();
            cuts += 1;
            assert!(
                p.run_until(p.now + 10 * SEC, |p| p.a.is_established()
                    && p.b.is_established()),
                "seed {seed}: not resumed"
            );
            assert!(p
                .events_a
                .iter()
                .any(|e| matches!(e, Event::Resumed { .. })));
            assert!(cuts < 50, "seed {seed}: no progress");
        }
        assert!(
            run(&mut p, &mut t, 120 * SEC),
            "seed {seed}: transfer did not finish"
        );
        t.check();
        assert!(cuts > 0);
        assert_eq!(p.a.stats().resumes, cuts);
        assert_eq!(p.b.stats().resumes, cuts);
        assert!(p.a.stats().replayed + p.b.stats().replayed > 0);
        assert!(!p
            .events_a
            .iter()
            .chain(&p.events_b)
            .any(|e| matches!(e, Event::StreamReset { .. } | Event::Closed { .. })));
    }
}

#[test]
fn an_idle_timeout_suspends_and_a_resumption_recovers_what_was_in_flight() {
    let mut p = Pair::with_link(LinkParams::wan(), 3);
    assert!(p.handshake());
    let mut t = Transfer::start(&mut p, 2, 2_000_000);
    run(&mut p, &mut t, 30 * MS);
    // The path goes dark: bytes sent are lost, nothing tells the ends.
    p.ab.up = false;
    p.ba.up = false;
    let idle = Config::new("x", "y").idle_timeout;
    let start = p.now;
    assert!(p.run_until(start + idle + SEC, |p| p.a.is_suspended()
        && p.b.is_suspended()));
    assert!(p.events_a.contains(&Event::Suspended {
        error: ConnectionError::IdleTimeout
    }));
    p.break_transport();
    p.resume();
    assert!(run(&mut p, &mut t, 120 * SEC));
    t.check();
}

#[test]
fn a_fresh_acceptor_refuses_to_resume_an_unknown_session() {
    let mut p = Pair::with_link(LinkParams::wan(), 4);
    assert!(p.handshake());
    p.break_transport();
    // The peer relay restarted: a new acceptor, no session.
    p.b = TrunkConnection::new(
        Config::new("b-relay0", "b"),
        Role::Acceptor,
        key(7),
        p.rng.nonce(),
        p.now,
    )
    .unwrap();
    p.events_b.clear();
    let nonce = p.rng.nonce();
    p.a.begin_resume(p.now, nonce).unwrap();
    assert!(p.run_until(p.now + 30 * SEC, |p| p.a.is_closed() && p.b.is_closed()));
    assert!(p.events_a.contains(&Event::Closed {
        error: Some(ConnectionError::PeerClosed(CloseCode::UnknownSession))
    }));
    assert!(p.events_b.contains(&Event::Closed {
        error: Some(ConnectionError::UnknownSession)
    }));
    assert!(!p
        .events_b
        .iter()
        .any(|e| matches!(e, Event::Authenticated(_))));
}

#[test]
fn a_resumption_with_another_key_fails_and_leaves_the_session_suspended() {
    let mut p = Pair::with_link(LinkParams::wan(), 5);
    assert!(p.handshake());
    let id = p.a.open_stream(dest(9), src()).unwrap();
    assert_eq!(p.a.write(id, b"kept"), Ok(4));
    p.break_transport();
    // An impostor with another key answers the resumption for b.
    let session = p.b.session_id();
    let real_b = std::mem::replace(
        &mut p.b,
        TrunkConnection::new(
            Config::new("b-relay0", "b"),
            Role::Acceptor,
            key(9),
            p.rng.nonce(),
            p.now,
        )
        .unwrap(),
    );
    let nonce = p.rng.nonce();
    p.a.begin_resume(p.now, nonce).unwrap();
    assert!(p.run_until(p.now + 30 * SEC, |p| !p.a.has_transport()));
    assert!(p.a.is_suspended() && !p.a.is_closed());
    assert!(p
        .events_a
        .iter()
        .any(|e| matches!(e, Event::Suspended { .. })));
    // The real peer then resumes it, and the stream's bytes arrive.
    p.b = real_b;
    assert_eq!(p.b.session_id(), session);
    p.break_transport();
    p.resume();
    assert!(p.run_until(p.now + 10 * SEC, |p| p.a.is_established()
        && p.b.is_established()));
    let mut opened = false;
    let mut got = Vec::new();
    assert!(p.run_until(p.now + 10 * SEC, |p| {
        while let Some(e) = p.events_b.pop_front() {
            if let Event::StreamOpened { stream, .. } = e {
                p.b.accept_stream(stream).unwrap();
                opened = true;
            }
        }
        let mut buf = [0u8; 16];
        if opened {
            if let Ok(ReadOutcome::Data(n)) = p.b.read(id, &mut buf) {
                got.extend_from_slice(&buf[..n]);
            }
        }
        got == b"kept"
    }));
}

#[test]
fn a_resumption_that_claims_more_than_was_sent_closes() {
    let mut p = Pair::with_link(LinkParams::instant(), 6);
    assert!(p.handshake());
    p.break_transport();
    let nonce = p.rng.nonce();
    p.a.begin_resume(p.now, nonce).unwrap();
    // Play the exchange by hand: b's RESUME claims more than a sent.
    // The honest b resumes; its RESUME is then rewritten.
    p.b.begin_resume(p.now, p.rng.nonce()).unwrap();
    let from_a = p.a.poll_transmit(p.now, 1 << 20).unwrap();
    p.b.handle_input(p.now, &from_a);
    let mut from_b = p.b.poll_transmit(p.now, 1 << 20).unwrap();
    p.a.handle_input(p.now, &from_b);
    let from_a = p.a.poll_transmit(p.now, 1 << 20).unwrap();
    p.b.handle_input(p.now, &from_a);
    from_b = p.b.poll_transmit(p.now, 1 << 20).unwrap();
    // from_b is b's RESUME: 10-byte header, u64.
    assert_eq!(from_b[0], 0x03);
    from_b[10..18].copy_from_slice(&u64::MAX.to_be_bytes());
    p.a.handle_input(p.now, &from_b);
    assert!(p.a.is_closed());
    while let Some(e) = p.a.poll_event() {
        if let Event::Closed { error } = e {
            assert_eq!(
                error,
                Some(ConnectionError::Protocol(
                    "acknowledgement outside the bytes sent"
                ))
            );
        }
    }
}

#[test]
fn garbage_during_a_resumption_never_panics_and_never_resumes() {
    let mut rng = Rng(99);
    for round in 0..300 {
        let mut p = Pair::with_link(LinkParams::instant(), round);
        assert!(p.handshake());
        p.break_transport();
        let nonce = p.rng.nonce();
        p.a.begin_resume(p.now, nonce).unwrap();
        let _ = p.a.poll_transmit(p.now, 1 << 20);
        // Random bytes, or a valid frame header followed by random bytes.
        let n = rng.range(1, 400);
        let mut junk = rng.bytes(n);
        if round % 2 == 0 {
            let ty = [0x01u8, 0x02, 0x03, 0x23, 0x12, 0x22][rng.range(0, 5)];
            junk[0] = ty;
            if junk.len() > 1 {
                junk[1] = 0;
            }
        }
        p.a.handle_input(p.now, &junk);
        while let Some(e) = p.a.poll_event() {
            assert!(
                !matches!(e, Event::Resumed { .. }),
                "round {round}: resumed on garbage"
            );
        }
        assert!(!p.a.is_established(), "round {round}");
        // Its streams are still there unless the session ended.
        assert!(
            p.a.is_closed() || p.a.session_id().is_some(),
            "round {round}"
        );
    }
}

#[test]
fn an_eof_ends_the_session_unless_it_was_suspended_already() {
    // EOF on an established trunk: the peer's process is gone; closed.
    let mut p = Pair::with_link(LinkParams::instant(), 7);
    assert!(p.handshake());
    p.a.handle_transport_finished();
    assert!(p.a.is_closed());
    // EOF read after the session was suspended (a reset reported to a
    // write first, then an EOF to the read): the session stays.
    let mut p = Pair::with_link(LinkParams::instant(), 8);
    assert!(p.handshake());
    p.break_transport();
    p.a.handle_transport_finished();
    assert!(p.a.is_suspended() && !p.a.is_closed());
    p.resume();
    assert!(p.run_until(p.now + 10 * SEC, |p| p.a.is_established()
        && p.b.is_established()));
}
