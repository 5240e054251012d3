//! Authentication and hostile input: wrong keys, garbled, replayed and
//! reflected handshakes, and handcrafted malicious frames on an
//! established trunk. Every case ends in an error value and a GOAWAY with
//! the right code, never a panic.

mod harness;

use std::net::SocketAddr;

use harness::{key, LinkParams, Pair, Rng, MS, SEC};
use wanproto::frame::{self, Frame, FRAME_HEADER_LEN, MAX_WINDOW};
use wanproto::{
    CloseCode, Config, ConnectionError, Decoded, Event, PeerInfo, Reason, Role, TrunkConnection,
};

fn conn(role: Role, k: u8, seed: u64) -> TrunkConnection {
    let (name, cluster) = match role {
        Role::Initiator => ("a-relay0", "a"),
        Role::Acceptor => ("b-relay0", "b"),
    };
    TrunkConnection::new(
        Config::new(name, cluster),
        role,
        key(k),
        Rng(seed).nonce(),
        0,
    )
    .unwrap()
}

fn drain(c: &mut TrunkConnection) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(b) = c.poll_transmit(0, 1 << 20) {
        out.extend_from_slice(&b);
    }
    out
}

fn events(c: &mut TrunkConnection) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn closed_with(c: &mut TrunkConnection) -> Option<ConnectionError> {
    events(c).into_iter().find_map(|e| match e {
        Event::Closed { error } => error,
        _ => None,
    })
}

/// The frames in `bytes` (which must decode completely).
fn frames(bytes: &[u8]) -> Vec<Frame<'_>> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        match frame::decode(rest).unwrap() {
            Decoded::Complete(f, n) => {
                out.push(f);
                rest = &rest[n..];
            }
            Decoded::NeedMore(_) => panic!("truncated output"),
        }
    }
    out
}

fn last_goaway(bytes: &[u8]) -> Option<CloseCode> {
    frames(bytes).into_iter().rev().find_map(|f| match f {
        Frame::GoAway { code, .. } => Some(code),
        _ => None,
    })
}

#[test]
fn same_key_authenticates_both_ends_and_names_the_peer() {
    let mut p = Pair::with_link(LinkParams::wan(), 1);
    assert!(p.handshake());
    let auth_a: Vec<_> = p
        .events_a
        .iter()
        .filter(|e| matches!(e, Event::Authenticated(_)))
        .collect();
    assert_eq!(
        auth_a,
        [&Event::Authenticated(PeerInfo {
            name: "b-relay0".into(),
            cluster: "b".into(),
            max_streams: 1024,
            initial_window: 32 * 1024,
        })]
    );
    assert_eq!(p.b.peer().unwrap().name, "a-relay0");
    // One round trip after the HELLOs: 2 one-way delays plus transmission.
    assert!(p.now < 11 * MS, "handshake took {} ns", p.now);
}

#[test]
fn wrong_key_is_refused_on_both_ends() {
    let mut p = Pair::new(
        Config::new("a-relay0", "a"),
        Config::new("b-relay0", "b"),
        key(1),
        key(2),
        LinkParams::wan(),
        2,
    );
    assert!(!p.handshake());
    p.run_until(SEC, |p| p.a.is_closed() && p.b.is_closed());
    for evs in [&p.events_a, &p.events_b] {
        assert!(!evs.iter().any(|e| matches!(e, Event::Authenticated(_))));
        let err = evs.iter().find_map(|e| match e {
            Event::Closed { error } => error.clone(),
            _ => None,
        });
        assert!(
            matches!(
                err,
                Some(
                    ConnectionError::AuthFailed
                        | ConnectionError::PeerClosed(CloseCode::AuthFailed)
                )
            ),
            "{err:?}"
        );
    }
}

/// An end that reads the peer's HELLO and AUTH together (it was scheduled
/// late) still sends its own AUTH before its GOAWAY, so the peer checks it
/// and finds the keys differ itself: both ends say "failed authentication",
/// whichever checked first (a relay test once saw only "refused by the peer"
/// on a loaded host).
#[test]
fn a_late_reader_still_sends_its_auth_before_refusing() {
    let mut a = conn(Role::Initiator, 1, 1);
    let mut b = conn(Role::Acceptor, 2, 2);
    let hello_a = drain(&mut a);
    let mut from_b = drain(&mut b);
    b.handle_input(0, &hello_a);
    from_b.extend(drain(&mut b));
    assert!(matches!(
        frames(&from_b)[..],
        [Frame::Hello(_), Frame::Auth { .. }]
    ));
    a.handle_input(0, &from_b);
    assert_eq!(closed_with(&mut a), Some(ConnectionError::AuthFailed));
    let from_a = drain(&mut a);
    assert!(
        matches!(
            frames(&from_a)[..],
            [
                Frame::Auth { .. },
                Frame::GoAway {
                    code: CloseCode::AuthFailed,
                    ..
                }
            ]
        ),
        "{:?}",
        frames(&from_a)
    );
    b.handle_input(0, &from_a);
    assert_eq!(closed_with(&mut b), Some(ConnectionError::AuthFailed));
    assert_eq!(last_goaway(&drain(&mut b)), Some(CloseCode::AuthFailed));
}

#[test]
fn a_peer_of_an_unexpected_cluster_is_refused() {
    let mut ca = Config::new("a-relay0", "a");
    ca.expected_peer_cluster = Some("c".into());
    let mut p = Pair::new(
        ca,
        Config::new("b-relay0", "b"),
        key(1),
        key(1),
        LinkParams::wan(),
        3,
    );
    assert!(!p.handshake());
    assert!(p.events_a.contains(&Event::Closed {
        error: Some(ConnectionError::WrongPeerCluster {
            found: "b".into(),
            expected: "c".into()
        })
    }));
}

/// A garbled HELLO length byte may announce a longer HELLO that is still
/// allowed (a resuming one carries 16 more bytes): the connection then
/// waits for bytes that never come, holding no more than the largest
/// HELLO, and its handshake timer ends it.
fn settle_garbled_length(b: &mut TrunkConnection, i: usize, bit: u8) {
    if b.is_closed() {
        return;
    }
    assert!((6..10).contains(&i), "byte {i} bit {bit:#x}: still waiting");
    assert!(
        b.pending_input_bytes()
            <= wanproto::frame::FRAME_HEADER_LEN + wanproto::frame::MAX_HELLO_LEN
    );
    b.handle_timeout(60 * 1_000_000_000);
}

#[test]
fn every_garbled_handshake_byte_is_refused() {
    // The initiator's handshake bytes (HELLO then AUTH) as sent.
    let mut a = conn(Role::Initiator, 5, 1);
    let mut b = conn(Role::Acceptor, 5, 2);
    let hello_a = drain(&mut a);
    b.handle_input(0, &hello_a);
    let from_b = drain(&mut b);
    a.handle_input(0, &from_b);
    let auth_a = drain(&mut a);
    assert!(a.is_established());
    let sent_a = [hello_a.clone(), auth_a].concat();
    for i in 0..sent_a.len() {
        for bit in [0x01u8, 0x80] {
            let mut garbled = sent_a.clone();
            garbled[i] ^= bit;
            let mut b = conn(Role::Acceptor, 5, 2);
            b.handle_input(0, &garbled[..hello_a.len()]);
            drain(&mut b);
            b.handle_input(0, &garbled[hello_a.len()..]);
            assert!(!b.is_established(), "byte {i} bit {bit:#x} accepted");
            settle_garbled_length(&mut b, i, bit);
            assert!(b.is_closed(), "byte {i} bit {bit:#x}: still waiting");
            assert!(!events(&mut b)
                .iter()
                .any(|e| matches!(e, Event::Authenticated(_))));
        }
    }
    // The same for what the acceptor sends.
    for i in 0..from_b.len() {
        let mut garbled = from_b.clone();
        garbled[i] ^= 0x04;
        let mut a = conn(Role::Initiator, 5, 1);
        drain(&mut a);
        a.handle_input(0, &garbled);
        assert!(!a.is_established(), "acceptor byte {i} accepted");
    }
}

#[test]
fn a_replayed_handshake_is_refused() {
    // Record a full, successful session.
    let mut p = Pair::with_link(LinkParams::wan(), 4);
    assert!(p.handshake());
    let recorded_a = p.ab.record.clone();
    let recorded_b = p.ba.record.clone();
    // Replay the initiator's bytes to a fresh acceptor (new nonce).
    let mut b = TrunkConnection::new(
        Config::new("b-relay0", "b"),
        Role::Acceptor,
        key(7),
        [9; 32],
        0,
    )
    .unwrap();
    drain(&mut b);
    b.handle_input(0, &recorded_a);
    assert!(!b.is_established());
    assert_eq!(closed_with(&mut b), Some(ConnectionError::AuthFailed));
    assert_eq!(last_goaway(&drain(&mut b)), Some(CloseCode::AuthFailed));
    // And the acceptor's bytes to a fresh initiator.
    let mut a = TrunkConnection::new(
        Config::new("a-relay0", "a"),
        Role::Initiator,
        key(7),
        [8; 32],
        0,
    )
    .unwrap();
    drain(&mut a);
    a.handle_input(0, &recorded_b);
    assert!(!a.is_established());
    assert_eq!(closed_with(&mut a), Some(ConnectionError::AuthFailed));
}

#[test]
fn a_reflected_handshake_is_refused() {
    let mut a = conn(Role::Initiator, 5, 1);
    let hello = drain(&mut a);
    a.handle_input(0, &hello);
    assert_eq!(
        closed_with(&mut a),
        Some(ConnectionError::Protocol("both ends claim the same role"))
    );
    // A HELLO with the right role but our own nonce.
    let mut a = conn(Role::Initiator, 5, 1);
    let hello = drain(&mut a);
    let Decoded::Complete(Frame::Hello(mut h), _) = frame::decode(&hello).unwrap() else {
        panic!()
    };
    h.role = Role::Acceptor;
    let mut echoed = Vec::new();
    Frame::Hello(h).encode(&mut echoed);
    a.handle_input(0, &echoed);
    assert_eq!(
        closed_with(&mut a),
        Some(ConnectionError::Protocol("peer echoed our nonce"))
    );
}

#[test]
fn frames_before_auth_and_non_hello_first_frames_are_refused() {
    let mut a = conn(Role::Initiator, 5, 1);
    let mut b = conn(Role::Acceptor, 5, 2);
    let hello_a = drain(&mut a);
    b.handle_input(0, &hello_a);
    let mut open = Vec::new();
    Frame::Open {
        stream: 1,
        destination: "10.1.0.1:1".parse().unwrap(),
        source: "10.0.0.1:1".parse().unwrap(),
        blast: None,
    }
    .encode(&mut open);
    b.handle_input(0, &open);
    assert_eq!(
        closed_with(&mut b),
        Some(ConnectionError::Protocol("frame before AUTH"))
    );

    let mut b = conn(Role::Acceptor, 5, 2);
    b.handle_input(0, &open);
    assert_eq!(
        closed_with(&mut b),
        Some(ConnectionError::Protocol("first frame is not HELLO"))
    );

    let mut b = conn(Role::Acceptor, 5, 2);
    b.handle_input(0, b"GET / HTTP/1.1\r\n\r\n");
    assert!(matches!(
        closed_with(&mut b),
        Some(ConnectionError::Frame(_))
    ));
}

#[test]
fn an_unsupported_version_is_refused_with_the_version_code() {
    let mut a = conn(Role::Initiator, 5, 1);
    let mut hello = drain(&mut a);
    hello[FRAME_HEADER_LEN + 4] = 2;
    let mut b = conn(Role::Acceptor, 5, 2);
    b.handle_input(0, &hello);
    assert!(matches!(
        closed_with(&mut b),
        Some(ConnectionError::Frame(
            frame::FrameError::UnsupportedVersion(2)
        ))
    ));
    assert_eq!(last_goaway(&drain(&mut b)), Some(CloseCode::Version));
}

#[test]
fn a_silent_peer_fails_the_handshake_at_the_timeout() {
    let mut b = conn(Role::Acceptor, 5, 2);
    drain(&mut b);
    let t = b.poll_timeout().unwrap();
    assert_eq!(t, 10 * SEC);
    b.handle_timeout(t - 1);
    assert!(!b.is_closed());
    b.handle_timeout(t);
    assert_eq!(closed_with(&mut b), Some(ConnectionError::HandshakeTimeout));
    assert_eq!(last_goaway(&drain(&mut b)), Some(CloseCode::Timeout));
    assert_eq!(b.poll_timeout(), None);
}

// ----- malicious frames on an established trunk ---------------------------

fn established() -> Pair {
    let mut p = Pair::with_link(LinkParams::instant(), 42);
    assert!(p.handshake());
    p.events_a.clear();
    p.events_b.clear();
    // Flush what is in flight so injected bytes are whole frames for b.
    p.run_until(p.now + SEC, |_| false);
    p
}

fn enc(frames: &[Frame<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        f.encode(&mut out);
    }
    out
}

fn open(stream: u32) -> Frame<'static> {
    Frame::Open {
        stream,
        destination: SocketAddr::from(([10, 1, 0, 1], 4000)),
        source: SocketAddr::from(([10, 0, 0, 1], 5000)),
        blast: None,
    }
}

/// Injects `bytes` into `b` as if from `a`; returns b's close error and the
/// GOAWAY code it sends.
fn inject(bytes: &[u8]) -> (Option<ConnectionError>, Option<CloseCode>) {
    let mut p = established();
    p.b.handle_input(p.now, bytes);
    let err = closed_with(&mut p.b);
    let out = drain(&mut p.b);
    (err, last_goaway(&out))
}

#[test]
fn a_huge_length_closes_with_frame_size_without_waiting_for_it() {
    let mut h = vec![0x12, 0, 0, 0, 0, 1];
    h.extend_from_slice(&u32::MAX.to_be_bytes());
    let mut p = established();
    p.b.handle_input(p.now, &h[..FRAME_HEADER_LEN]);
    assert!(p.b.is_closed());
    assert!(p.b.pending_input_bytes() == 0);
    assert_eq!(last_goaway(&drain(&mut p.b)), Some(CloseCode::FrameSize));
}

#[test]
fn an_unknown_frame_type_closes_with_protocol_error() {
    let (err, code) = inject(&[0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        err,
        Some(ConnectionError::Frame(frame::FrameError::UnknownType(0x7f)))
    );
    assert_eq!(code, Some(CloseCode::Protocol));
}

#[test]
fn stream_id_reuse_and_wrong_parity_are_refused() {
    let (err, code) = inject(&enc(&[
        open(1),
        Frame::Reset {
            stream: 1,
            reason: Reason::Internal,
        },
        open(1),
    ]));
    assert_eq!(err, Some(ConnectionError::Protocol("stream id reused")));
    assert_eq!(code, Some(CloseCode::Protocol));
    let (err, _) = inject(&enc(&[open(5), open(3)]));
    assert_eq!(err, Some(ConnectionError::Protocol("stream id reused")));
    let (err, _) = inject(&enc(&[open(2)]));
    assert_eq!(
        err,
        Some(ConnectionError::Protocol("OPEN with one of our stream ids"))
    );
}

#[test]
fn window_overflow_is_a_flow_control_error() {
    let (err, code) = inject(&enc(&[
        open(1),
        Frame::WindowUpdate {
            stream: 1,
            increment: MAX_WINDOW,
        },
    ]));
    assert_eq!(err, Some(ConnectionError::FlowControl(1)));
    assert_eq!(code, Some(CloseCode::FlowControl));
}

#[test]
fn data_beyond_the_credit_is_a_flow_control_error() {
    let window = Config::new("x", "y").min_stream_window as usize;
    let chunk = vec![0u8; 16 * 1024];
    let mut frames = vec![open(1)];
    for _ in 0..window / chunk.len() {
        frames.push(Frame::Data {
            stream: 1,
            payload: &chunk,
        });
    }
    let mut p = established();
    p.b.handle_input(p.now, &enc(&frames));
    assert!(p.b.is_established(), "exactly the window is fine");
    p.b.handle_input(
        p.now,
        &enc(&[Frame::Data {
            stream: 1,
            payload: b"x",
        }]),
    );
    assert_eq!(closed_with(&mut p.b), Some(ConnectionError::FlowControl(1)));
}

#[test]
fn frames_on_never_opened_streams_are_refused_and_on_closed_ones_ignored() {
    let (err, _) = inject(&enc(&[Frame::Data {
        stream: 7,
        payload: b"x",
    }]));
    assert_eq!(
        err,
        Some(ConnectionError::Protocol(
            "frame on a stream that was never opened"
        ))
    );
    let (err, _) = inject(&enc(&[Frame::WindowUpdate {
        stream: 4,
        increment: 1,
    }]));
    assert_eq!(
        err,
        Some(ConnectionError::Protocol(
            "frame on a stream that was never opened"
        ))
    );
    // In flight after a reset: dropped, counted.
    let mut p = established();
    p.b.handle_input(
        p.now,
        &enc(&[
            open(1),
            Frame::Reset {
                stream: 1,
                reason: Reason::Internal,
            },
        ]),
    );
    p.b.handle_input(
        p.now,
        &enc(&[
            Frame::Data {
                stream: 1,
                payload: b"late",
            },
            Frame::Fin { stream: 1 },
        ]),
    );
    assert!(p.b.is_established());
    assert_eq!(p.b.stats().frames_ignored, 2);
}

#[test]
fn data_after_fin_and_unexpected_open_ok_are_refused() {
    let (err, _) = inject(&enc(&[
        open(1),
        Frame::Fin { stream: 1 },
        Frame::Data {
            stream: 1,
            payload: b"x",
        },
    ]));
    assert_eq!(err, Some(ConnectionError::Protocol("DATA after FIN")));
    let (err, _) = inject(&enc(&[open(1), Frame::OpenOk { stream: 1 }]));
    assert_eq!(err, Some(ConnectionError::Protocol("unexpected OPEN_OK")));
    let (err, _) = inject(&enc(&[Frame::Hello(wanproto::frame::Hello {
        role: Role::Initiator,
        nonce: [0; 32],
        max_streams: 1,
        initial_window: 4096,
        name: "x".into(),
        cluster: "y".into(),
        resumable: false,
        resume: None,
    })]));
    assert_eq!(
        err,
        Some(ConnectionError::Protocol(
            "handshake frame after the handshake"
        ))
    );
}

#[test]
fn opening_more_streams_than_allowed_closes_with_stream_limit() {
    let max = Config::new("x", "y").max_streams;
    let frames: Vec<Frame> = (0..=max).map(|i| open(2 * i + 1)).collect();
    let (err, code) = inject(&enc(&frames));
    assert_eq!(err, Some(ConnectionError::StreamLimit(max)));
    assert_eq!(code, Some(CloseCode::StreamLimit));
}

#[test]
fn a_peer_that_floods_without_reading_is_cut_off_with_bounded_memory() {
    let mut p = established();
    p.b.handle_input(p.now, &enc(&[open(1)])); // keeps b from draining at once
    p.b.go_away(); // every further OPEN is answered with a RESET
    assert!(p.b.is_established());
    let cap = Config::new("x", "y").max_control_queue;
    let mut id = 3u32;
    let mut closed = false;
    for _ in 0..2000 {
        let frames: Vec<Frame> = (0..64).map(|k| open(id + 2 * k)).collect();
        id += 128;
        // Pings are answered with one coalesced PONG, whatever their number.
        let mut bytes = enc(&frames);
        bytes.extend(enc(&vec![Frame::Ping { payload: [1; 8] }; 16]));
        p.b.handle_input(p.now, &bytes);
        assert!(p.b.queued_control_bytes() <= cap + 64);
        if p.b.is_closed() {
            closed = true;
            break;
        }
    }
    assert!(closed);
    assert_eq!(closed_with(&mut p.b), Some(ConnectionError::ControlFlood));
    assert_eq!(last_goaway(&drain(&mut p.b)), Some(CloseCode::Flood));
}

#[test]
fn pings_are_answered_with_their_payload() {
    let mut p = established();
    p.b.handle_input(
        p.now,
        &enc(&[Frame::Ping {
            payload: *b"12345678",
        }]),
    );
    let out = drain(&mut p.b);
    assert_eq!(
        frames(&out),
        [Frame::Pong {
            payload: *b"12345678"
        }]
    );
}
