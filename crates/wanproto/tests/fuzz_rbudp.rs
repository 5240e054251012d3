//! proptest fuzzing of the RBUDP decoders and session: arbitrary and
//! mutated input never panics, decoded values re-encode to their exact
//! bytes, and a session's memory stays within its window whatever the peer
//! sends.

use proptest::prelude::*;
use wanproto::frame::Role;
use wanproto::rbudp::{
    Control, DatagramHeader, RbudpConfig, RbudpSession, DATAGRAM_HEADER_LEN, MAX_BITMAP_LEN,
};

fn control() -> impl Strategy<Value = Control> {
    prop_oneof![
        (
            any::<u32>(),
            proptest::option::of(any::<[u8; 4]>()),
            1u16..,
            64u16..=1472,
            1u64..(64 << 20)
        )
            .prop_map(
                |(session, a, port, max_datagram, window)| Control::Session {
                    session,
                    addr: a
                        .map(std::net::IpAddr::from)
                        .filter(|a| !a.is_unspecified()),
                    port,
                    max_datagram,
                    window,
                }
            ),
        (0u32..6, 1u32..4, any::<u64>(), 1u32..(8 << 20), 1u16..1500).prop_map(
            |(blast, stream, offset, length, chunk)| Control::BlastStart {
                blast,
                stream,
                offset,
                length,
                chunk
            }
        ),
        (0u32..6, 0u32..4).prop_map(|(blast, round)| Control::BlastDone { blast, round }),
        (
            0u32..6,
            0u32..4,
            0u32..64,
            proptest::collection::vec(any::<u8>(), 1..40)
        )
            .prop_map(|(blast, round, first, bitmap)| Control::Missing {
                blast,
                round,
                first,
                bitmap
            }),
        (0u32..6).prop_map(|blast| Control::Complete { blast }),
        (0u32..6).prop_map(|blast| Control::Release { blast }),
    ]
}

fn mutate(mut b: Vec<u8>, flips: &[(usize, u8)], cut: usize) -> Vec<u8> {
    for &(i, x) in flips {
        if !b.is_empty() {
            let n = b.len();
            b[i % n] ^= x;
        }
    }
    b.truncate(b.len().saturating_sub(cut % 3));
    b
}

fn session(window: u64) -> RbudpSession {
    let mut c = RbudpConfig::new(10_000_000, 1472);
    c.receive_window = window;
    RbudpSession::new(c, Role::Acceptor, [9; 32], 0x42, None, 7000, 0).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn control_decoder_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(c) = Control::decode(&bytes) {
            prop_assert_eq!(c.encode(), bytes);
        }
    }

    #[test]
    fn valid_controls_round_trip_and_mutations_are_safe(
        c in control(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let b = c.encode();
        if let Ok(d) = Control::decode(&b) {
            prop_assert_eq!(&d, &c);
        }
        let m = mutate(b, &flips, cut);
        if let Ok(d) = Control::decode(&m) {
            prop_assert_eq!(d.encode(), m);
        }
    }

    #[test]
    fn datagram_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok((h, data)) = DatagramHeader::parse(&bytes) {
            let mut out = vec![0u8; DATAGRAM_HEADER_LEN];
            h.write(&mut out);
            prop_assert_eq!(&out[..], &bytes[..DATAGRAM_HEADER_LEN]);
            prop_assert_eq!(data, &bytes[DATAGRAM_HEADER_LEN..]);
            prop_assert!(!data.is_empty());
        }
    }

    #[test]
    fn session_survives_any_peer(
        msgs in proptest::collection::vec(
            (control(), proptest::collection::vec((any::<usize>(), any::<u8>()), 0..2), any::<usize>(), any::<bool>()),
            0..24),
        datagrams in proptest::collection::vec(
            (0u32..6, 0u32..64, 1usize..1500, any::<bool>(), any::<bool>()), 0..64),
        window in 2000u64..(32 << 20),
    ) {
        let mut s = session(window);
        let token = {
            // The token of session 0x42 of the acceptor under secret [9; 32].
            wanproto::rbudp::session_token(&[9; 32], Role::Acceptor, 0x42)
        };
        let mut now = 0;
        let mut buf = vec![0u8; 1472];
        for (c, flips, cut, raw) in msgs {
            let b = if raw { mutate(c.encode(), &flips, cut) } else { c.encode() };
            let _ = s.handle_control(now, &b);
            prop_assert!(s.receive_window_used() <= window);
            while s.poll_event().is_some() {}
            while s.poll_control().is_some() {}
            now += 1_000_000;
            s.handle_timeout(now);
            let mut k = 0;
            while s.poll_datagram(now, &mut buf).is_some() {
                k += 1;
                prop_assert!(k < 100_000);
            }
        }
        for (blast, seq, len, good_token, good_session) in datagrams {
            let mut d = vec![0xa5u8; DATAGRAM_HEADER_LEN + len];
            DatagramHeader {
                session: if good_session { 0x42 } else { 0x43 },
                token: if good_token { token } else { token ^ 1 },
                blast,
                seq,
            }
            .write(&mut d);
            let _ = s.handle_datagram(now, &d);
            if let Some(b) = s.take(blast) {
                prop_assert!(b.len() as u64 <= window);
            }
            s.handle_timeout(now + 10_000_000);
            while let Some(m) = s.poll_control() {
                prop_assert!(m.len() <= 16 + MAX_BITMAP_LEN);
                prop_assert!(Control::decode(&m).is_ok(), "session emits only valid control");
            }
        }
        prop_assert!(s.receive_window_used() <= window);
    }
}
