//! Property tests (proptest) of every decoder and of the connection state
//! machine: arbitrary bytes, mutated valid messages, arbitrary chunking.
//! Nothing panics, memory stays bounded, and a decoded value re-encodes to
//! exactly the bytes it came from.

mod harness;

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use harness::{LinkParams, Pair};
use proptest::prelude::*;
use wanproto::frame::{self, Frame, Hello, FRAME_HEADER_LEN, MAX_DATA_PAYLOAD};
use wanproto::{
    BlastRequest, BlastUpdate, CloseCode, Config, Decoded, Event, Inside, Preamble, Reason, Reply,
    Role, TrunkConnection,
};

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
        (any::<[u8; 16]>(), any::<u16>())
            .prop_map(|(ip, port)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(ip)), port)),
    ]
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,64}"
}

fn frame_strategy() -> impl Strategy<Value = (u8, u32, Vec<u8>, SocketAddr, SocketAddr, u32, Hello)>
{
    (
        0u8..12,
        1u32..40,
        proptest::collection::vec(any::<u8>(), 1..300),
        socket_addr(),
        socket_addr(),
        1u32..=frame::MAX_WINDOW,
        (
            any::<[u8; 32]>(),
            1u32..5000,
            1024u32..=frame::MAX_WINDOW,
            name(),
            name(),
            any::<bool>(),
        )
            .prop_map(
                |(nonce, max_streams, initial_window, name, cluster, init)| Hello {
                    role: if init {
                        Role::Initiator
                    } else {
                        Role::Acceptor
                    },
                    nonce,
                    max_streams,
                    initial_window,
                    name,
                    cluster,
                    resumable: init,
                    resume: (nonce[0] & 1 == 1).then_some([nonce[1]; 16]),
                },
            ),
    )
}

fn build(
    kind: u8,
    stream: u32,
    data: &[u8],
    d: SocketAddr,
    s: SocketAddr,
    inc: u32,
    hello: Hello,
) -> Frame<'_> {
    match kind {
        0 => Frame::Hello(hello),
        1 => Frame::Auth { mac: [data[0]; 32] },
        2 => Frame::Open {
            stream,
            destination: d,
            source: s,
            // Every other OPEN carries a (valid) blast request.
            blast: (data[0] & 1 == 1).then(|| BlastRequest {
                rate: u64::from(inc),
                payload: 64 + u16::from(data[0]) * 250,
            }),
        },
        3 => Frame::OpenOk { stream },
        4 => Frame::Data {
            stream,
            payload: data,
        },
        5 => Frame::WindowUpdate {
            stream,
            increment: inc,
        },
        6 => Frame::Fin { stream },
        7 => Frame::Reset {
            stream,
            reason: Reason::from_code(data[0].max(1)).unwrap(),
        },
        8 => Frame::Ping {
            payload: [data[0]; 8],
        },
        9 => Frame::Pong {
            payload: [data[0]; 8],
        },
        10 => Frame::Rbudp { payload: data },
        _ => Frame::GoAway {
            code: CloseCode::from_code(data[0]),
            last_stream: stream,
        },
    }
}

/// The decoder's contract on any input.
fn check_frame_decode(bytes: &[u8]) {
    match frame::decode(bytes) {
        Ok(Decoded::Complete(f, n)) => {
            assert!(n <= bytes.len());
            let mut again = Vec::new();
            f.encode(&mut again);
            assert_eq!(&again[..], &bytes[..n], "not canonical");
        }
        Ok(Decoded::NeedMore(k)) => {
            assert!(k >= 1);
            assert!(bytes.len() + k <= FRAME_HEADER_LEN + MAX_DATA_PAYLOAD);
        }
        Err(_) => {}
    }
}

fn check_preamble_decode(bytes: &[u8]) {
    for decode in [Preamble::decode_connect, Preamble::decode_deliver] {
        match decode(bytes) {
            Ok(Decoded::Complete(p, n)) => {
                // 64 bytes exactly for kind 3 (a connect with a blast request).
                assert_eq!(n, if p.blast.is_some() { 64 } else { 48 });
                assert_eq!(p.blast.is_some(), bytes[5] == 3);
                assert_eq!(&p.encode()[..], &bytes[..n]);
            }
            Ok(Decoded::NeedMore(k)) => {
                let want = if bytes.len() >= 48 { 64 } else { 48 };
                assert_eq!(bytes.len() + k, want);
            }
            Err(_) => {}
        }
    }
    // The inside listener's decoder: kinds 1 and 3 exactly as the connect
    // decoder, kind 4 always 64 bytes that re-encode exactly.
    match Inside::decode(bytes) {
        Ok(Decoded::Complete(Inside::Connect(p), n)) => {
            assert_eq!(Preamble::decode_connect(bytes), Ok(Decoded::Complete(p, n)));
        }
        Ok(Decoded::Complete(Inside::BlastUpdate(u), n)) => {
            assert_eq!(n, 64);
            assert_eq!(bytes[5], 4);
            assert_eq!(&u.encode()[..], &bytes[..64]);
            assert_eq!(u.blast.is_none(), bytes[48..64].iter().all(|&b| b == 0));
        }
        Ok(Decoded::NeedMore(k)) => {
            let want = if bytes.len() >= 48 { 64 } else { 48 };
            assert_eq!(bytes.len() + k, want);
        }
        Err(_) => {}
    }
    match Reply::decode(bytes) {
        Ok(Decoded::Complete(r, 4)) => assert_eq!(&r.encode()[..], &bytes[..4]),
        Ok(Decoded::Complete(..)) => panic!("reply length"),
        Ok(Decoded::NeedMore(k)) => assert_eq!(bytes.len() + k, 4),
        Err(_) => {}
    }
}

fn established_acceptor() -> (Pair, u64) {
    let mut p = Pair::with_link(LinkParams::instant(), 3);
    assert!(p.handshake());
    p.run_until(p.now + 1_000_000_000, |_| false);
    p.events_b.clear();
    let now = p.now;
    (p, now)
}

/// Feeds `bytes` to `c` cut at `cuts`; checks the bounds after each piece;
/// returns the events.
fn feed(c: &mut TrunkConnection, now: u64, bytes: &[u8], cuts: &[usize]) -> Vec<Event> {
    let cfg = Config::new("x", "y");
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let mut events = Vec::new();
    for cut in cuts {
        c.handle_input(now, &bytes[at..cut]);
        at = cut;
        assert!(c.pending_input_bytes() <= FRAME_HEADER_LEN + MAX_DATA_PAYLOAD);
        assert!(c.committed_receive_bytes() <= cfg.receive_buffer);
        assert!(c.queued_control_bytes() <= cfg.max_control_queue + 64);
        events.extend(std::iter::from_fn(|| c.poll_event()));
        // Whatever it sends is well-formed.
        while let Some(out) = c.poll_transmit(now, 1 << 16) {
            let mut rest = &out[..];
            while !rest.is_empty() {
                match frame::decode(rest) {
                    Ok(Decoded::Complete(_, n)) => rest = &rest[n..],
                    other => panic!("bad output {other:?}"),
                }
            }
        }
    }
    events
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn frame_decoder_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check_frame_decode(&bytes);
    }

    #[test]
    fn frame_decoder_handles_mutated_valid_frames(
        f in frame_strategy(),
        muts in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let (kind, stream, data, d, s, inc, hello) = f;
        let frame = build(kind, stream, &data, d, s, inc, hello);
        let mut bytes = Vec::new();
        frame.encode(&mut bytes);
        if muts.is_empty() && !matches!(frame, Frame::Open { .. }) {
            // Valid frames decode to themselves (OPEN may carry port 0 or an
            // unspecified address from the strategy, which is refused).
            prop_assert_eq!(frame::decode(&bytes), Ok(Decoded::Complete(frame.clone(), bytes.len())));
        }
        for (at, x) in muts {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        check_frame_decode(&bytes);
        check_frame_decode(&bytes[..cut % (bytes.len() + 1)]);
    }

    #[test]
    fn preamble_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        check_preamble_decode(&bytes);
    }

    #[test]
    fn preamble_decoders_never_panic_on_blast_request_tails(
        d in socket_addr(), s in socket_addr(),
        tail in proptest::collection::vec(any::<u8>(), 0..24),
    ) {
        // A valid kind-3 header with arbitrary request bytes.
        let mut bytes = Preamble::connect(d, s).encode();
        bytes[5] = 3;
        bytes.extend_from_slice(&tail);
        check_preamble_decode(&bytes);
        // The same as a kind 4 (blast request for an open connection).
        bytes[5] = 4;
        check_preamble_decode(&bytes);
    }

    #[test]
    fn inside_decoder_handles_mutated_blast_updates(
        d in socket_addr(), s in socket_addr(), withdraw in any::<bool>(),
        rate in 1u64.., payload in 64u16..=65507,
        muts in proptest::collection::vec((0usize..64, any::<u8>()), 0..3),
        cut in 0usize..=64,
    ) {
        let u = BlastUpdate {
            relay_end: d,
            node_end: s,
            blast: (!withdraw).then_some(BlastRequest { rate, payload }),
        };
        let mut bytes = u.encode();
        if !d.ip().is_unspecified() && !s.ip().is_unspecified() && d.port() != 0 && s.port() != 0 {
            prop_assert_eq!(Inside::decode(&bytes), Ok(Decoded::Complete(Inside::BlastUpdate(u), 64)));
        }
        for (i, x) in muts {
            bytes[i] ^= x;
        }
        check_preamble_decode(&bytes);
        check_preamble_decode(&bytes[..cut]);
    }

    #[test]
    fn preamble_decoders_handle_mutated_valid_preambles(
        d in socket_addr(), s in socket_addr(), kind in 0u8..3,
        rate in 1u64.., payload in 64u16..=65507,
        muts in proptest::collection::vec((0usize..64, any::<u8>()), 0..3),
        cut in 0usize..=64,
    ) {
        let p = match kind {
            0 => Preamble::deliver(d, s),
            1 => Preamble::connect(d, s),
            _ => Preamble::connect_with_blast(d, s, BlastRequest { rate, payload }),
        };
        let mut bytes = p.encode();
        if muts.is_empty() && !d.ip().is_unspecified() && !s.ip().is_unspecified() && d.port() != 0 && s.port() != 0 {
            let decoded = if kind == 0 { Preamble::decode_deliver(&bytes) } else { Preamble::decode_connect(&bytes) };
            prop_assert_eq!(decoded, Ok(Decoded::Complete(p, bytes.len())));
        }
        for (i, x) in muts {
            let i = i % bytes.len();
            bytes[i] ^= x;
        }
        check_preamble_decode(&bytes);
        check_preamble_decode(&bytes[..cut.min(bytes.len())]);
    }

    #[test]
    fn a_fresh_connection_survives_arbitrary_input(
        bytes in proptest::collection::vec(any::<u8>(), 0..2000),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut c = TrunkConnection::new(Config::new("b-relay0", "b"), Role::Acceptor, harness::key(1), [3; 32], 0).unwrap();
        let events = feed(&mut c, 0, &bytes, &cuts);
        prop_assert!(!events.iter().any(|e| matches!(e, Event::Authenticated(_))));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, .. ProptestConfig::default() })]

    #[test]
    fn an_established_connection_survives_arbitrary_input(
        bytes in proptest::collection::vec(any::<u8>(), 0..3000),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let (mut p, now) = established_acceptor();
        feed(&mut p.b, now, &bytes, &cuts);
    }

    /// Sequences of well-formed frames (mostly legal, some not), cut
    /// anywhere: the connection reaches the same events and state however
    /// the byte stream is chunked.
    #[test]
    fn chunking_does_not_change_the_outcome(
        frames in proptest::collection::vec(frame_strategy(), 1..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..30),
    ) {
        let mut bytes = Vec::new();
        let (d0, s0): (SocketAddr, SocketAddr) = ("10.1.0.1:1".parse().unwrap(), "10.0.0.1:1".parse().unwrap());
        for id in (1..40).step_by(2) {
            Frame::Open { stream: id, destination: d0, source: s0, blast: None }.encode(&mut bytes);
        }
        for (kind, stream, data, d, s, inc, hello) in frames {
            // Mostly stream frames on peer (odd) ids, sized within credit.
            let kind = if kind == 0 || kind == 1 { 4 } else { kind };
            let stream = stream | 1;
            let d = if d.port() == 0 || d.ip().is_unspecified() { "10.1.0.1:1".parse().unwrap() } else { d };
            let s = if s.port() == 0 || s.ip().is_unspecified() { "10.0.0.1:1".parse().unwrap() } else { s };
            build(kind, stream, &data, d, s, inc, hello).encode(&mut bytes);
        }
        let (mut p1, now) = established_acceptor();
        let whole = feed(&mut p1.b, now, &bytes, &[]);
        let (mut p2, now2) = established_acceptor();
        let cut = feed(&mut p2.b, now2, &bytes, &cuts);
        prop_assert_eq!(whole, cut);
        prop_assert_eq!(p1.b.is_closed(), p2.b.is_closed());
        prop_assert_eq!(p1.b.stats().frames_received, p2.b.stats().frames_received);
        prop_assert_eq!(p1.b.buffered_receive_bytes(), p2.b.buffered_receive_bytes());
    }
}
