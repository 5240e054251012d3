//! The preambles' tests: byte-exact layouts, each bad field refused at
//! its byte, truncation.

use super::*;

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn connect_preamble_layout_is_byte_exact() {
    let p = Preamble::connect(sa("10.1.0.3:40000"), sa("10.0.0.2:1024"));
    let b = p.encode();
    let expected: [u8; 48] = [
        0x57, 0x53, 0x48, 0x50, 1, 1, 0, 0, // magic, version, kind, reserved
        4, 4, 0x9c, 0x40, 0x04, 0x00, 0, 0, // families, ports, reserved
        10, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // destination
        10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // source
    ];
    assert_eq!(b, expected);
    assert_eq!(Preamble::decode_connect(&b), Ok(Decoded::Complete(p, 48)));
}

#[test]
fn ipv6_preamble_round_trips() {
    let p = Preamble::deliver(sa("[fd00::1:2]:5000"), sa("10.0.0.2:1024"));
    let b = p.encode();
    assert_eq!(b[8], 6);
    assert_eq!(Preamble::decode_deliver(&b), Ok(Decoded::Complete(p, 48)));
    assert_eq!(
        Preamble::decode_connect(&b),
        Err(PreambleError::WrongKind {
            found: 2,
            expected: 1
        })
    );
}

#[test]
fn partial_preamble_needs_more_and_bad_prefix_fails_early() {
    let b = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2")).encode();
    for n in 0..48 {
        assert_eq!(
            Preamble::decode_connect(&b[..n]),
            Ok(Decoded::NeedMore(48 - n))
        );
    }
    assert_eq!(
        Preamble::decode_connect(b"GE"),
        Err(PreambleError::BadMagic)
    );
    assert_eq!(
        Preamble::decode_connect(b"WSHP\x02"),
        Err(PreambleError::UnsupportedVersion(2))
    );
}

#[test]
fn preamble_rejects_padding_zero_port_and_unspecified() {
    let good = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2")).encode();
    let mut b = good.clone();
    b[25] = 1;
    assert_eq!(
        Preamble::decode_connect(&b),
        Err(PreambleError::NonZeroReserved { offset: 25 })
    );
    let mut b = good.clone();
    b[10] = 0;
    b[11] = 0;
    assert_eq!(
        Preamble::decode_connect(&b),
        Err(PreambleError::ZeroPort("destination"))
    );
    let mut b = good.clone();
    b[32..36].fill(0);
    assert_eq!(
        Preamble::decode_connect(&b),
        Err(PreambleError::UnspecifiedAddress("source"))
    );
    let mut b = good.clone();
    b[9] = 5;
    assert_eq!(
        Preamble::decode_connect(&b),
        Err(PreambleError::BadFamily(5))
    );
}

/// The test vector of docs/wanproto.md, section 1.
const BLAST_VECTOR: [u8; 64] = [
    0x57, 0x53, 0x48, 0x50, 1, 3, 0, 0, // magic, version, kind 3, reserved
    4, 4, 0x9c, 0x40, 0x04, 0x00, 0, 0, // families, ports, reserved
    10, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // destination
    10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // source
    0, 0, 0, 0, 0, 0xbe, 0xbc, 0x20, // rate 12500000 bytes/s (100 Mbit/s)
    0x05, 0xc0, 0, 0, 0, 0, 0, 0, // payload 1472, reserved
];

#[test]
fn blast_request_preamble_layout_is_byte_exact() {
    let r = BlastRequest::new(12_500_000, 1472).unwrap();
    let p = Preamble::connect_with_blast(sa("10.1.0.3:40000"), sa("10.0.0.2:1024"), r);
    assert_eq!(p.encode(), BLAST_VECTOR);
    assert_eq!(p.encoded_len(), 64);
    assert_eq!(
        Preamble::decode_connect(&BLAST_VECTOR),
        Ok(Decoded::Complete(p, 64))
    );
    // Bytes after the 64 are the application's.
    let mut more = BLAST_VECTOR.to_vec();
    more.extend_from_slice(b"early");
    assert_eq!(
        Preamble::decode_connect(&more),
        Ok(Decoded::Complete(p, 64))
    );
    assert_eq!(BlastRequest::decode(&BLAST_VECTOR[48..]), Ok(r));
    assert_eq!(r.encode()[..], BLAST_VECTOR[48..]);
}

#[test]
fn partial_blast_preamble_needs_all_64_bytes() {
    for n in 0..64 {
        assert_eq!(
            Preamble::decode_connect(&BLAST_VECTOR[..n]),
            Ok(Decoded::NeedMore(if n < 48 { 48 - n } else { 64 - n })),
            "prefix of {n} bytes"
        );
    }
}

#[test]
fn every_bad_blast_request_field_is_refused_at_its_byte() {
    // (change, bytes needed to see the error, the error)
    type Change = fn(&mut [u8; 64]);
    let cases: Vec<(Change, usize, PreambleError)> = vec![
        (
            |b| b[48..56].fill(0),
            56,
            PreambleError::BlastRequest(BlastRequestError::ZeroRate),
        ),
        (
            |b| b[56..58].copy_from_slice(&63u16.to_be_bytes()),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(63)),
        ),
        (
            |b| b[56..58].fill(0),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(0)),
        ),
        (
            |b| b[56..58].copy_from_slice(&65508u16.to_be_bytes()),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(65508)),
        ),
        (
            |b| b[58] = 1,
            59,
            PreambleError::NonZeroReserved { offset: 58 },
        ),
        (
            |b| b[63] = 0x80,
            64,
            PreambleError::NonZeroReserved { offset: 63 },
        ),
    ];
    for (change, at, error) in cases {
        let mut b = BLAST_VECTOR;
        change(&mut b);
        assert_eq!(
            Preamble::decode_connect(&b[..at - 1]),
            Ok(Decoded::NeedMore(65 - at)),
            "{error}: not detectable before byte {}",
            at - 1
        );
        assert_eq!(Preamble::decode_connect(&b[..at]), Err(error));
        assert_eq!(Preamble::decode_connect(&b), Err(error));
        assert_eq!(error.reason(), Reason::Protocol);
    }
    // The smallest and largest payloads and rate 1 are valid.
    for (rate, payload) in [(1u64, 64u16), (u64::MAX, 65507)] {
        let mut b = BLAST_VECTOR;
        b[48..56].copy_from_slice(&rate.to_be_bytes());
        b[56..58].copy_from_slice(&payload.to_be_bytes());
        let Ok(Decoded::Complete(p, 64)) = Preamble::decode_connect(&b) else {
            panic!("rate {rate} payload {payload} refused");
        };
        assert_eq!(p.blast, Some(BlastRequest { rate, payload }));
    }
    // The messages name the problem.
    assert_eq!(
        PreambleError::BlastRequest(BlastRequestError::Payload(63)).to_string(),
        "blast request payload 63 bytes out of range 64..=65507"
    );
    assert_eq!(BlastRequest::new(0, 1472), Err(BlastRequestError::ZeroRate));
}

#[test]
fn a_blast_request_is_only_for_connect_preambles() {
    assert_eq!(
        Preamble::decode_deliver(&BLAST_VECTOR),
        Err(PreambleError::WrongKind {
            found: 3,
            expected: 2
        })
    );
    let mut b = BLAST_VECTOR;
    b[5] = 4;
    let e = Preamble::decode_connect(&b[..6]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "preamble kind 4, expected 1 (connect) or 3 (connect with a blast request)"
    );
    // A kind-1 preamble stays 48 bytes, without a request.
    let p = Preamble::connect(sa("10.1.0.3:1"), sa("10.0.0.2:2"));
    let Ok(Decoded::Complete(d, 48)) = Preamble::decode_connect(&p.encode()) else {
        panic!("kind 1 refused");
    };
    assert_eq!(d.blast, None);
}

#[test]
#[should_panic(expected = "never carries a blast request")]
fn encoding_a_delivery_preamble_with_a_request_is_a_bug() {
    let mut p = Preamble::deliver(sa("10.1.0.3:1"), sa("10.0.0.2:2"));
    p.blast = Some(BlastRequest::new(1000, 1472).unwrap());
    let _ = p.encode();
}

/// The kind-4 test vector of docs/wanproto.md, section 1: node
/// 10.0.0.2:1024's open connection through its relay's inside listener
/// 10.0.0.254:7000, asking for 100 Mbit/s in 1472-byte datagrams.
const UPDATE_VECTOR: [u8; 64] = [
    0x57, 0x53, 0x48, 0x50, 1, 4, 0, 0, // magic, version, kind 4, reserved
    4, 4, 0x1b, 0x58, 0x04, 0x00, 0, 0, // families, ports, reserved
    10, 0, 0, 254, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // relay's endpoint
    10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // node's endpoint
    0, 0, 0, 0, 0, 0xbe, 0xbc, 0x20, // rate 12500000 bytes/s (100 Mbit/s)
    0x05, 0xc0, 0, 0, 0, 0, 0, 0, // payload 1472, reserved
];

fn update() -> BlastUpdate {
    BlastUpdate {
        relay_end: sa("10.0.0.254:7000"),
        node_end: sa("10.0.0.2:1024"),
        blast: Some(BlastRequest::new(12_500_000, 1472).unwrap()),
    }
}

#[test]
fn blast_update_layout_is_byte_exact() {
    let u = update();
    assert_eq!(u.encode(), UPDATE_VECTOR);
    assert_eq!(
        Inside::decode(&UPDATE_VECTOR),
        Ok(Decoded::Complete(Inside::BlastUpdate(u), 64))
    );
    for n in 0..64 {
        assert_eq!(
            Inside::decode(&UPDATE_VECTOR[..n]),
            Ok(Decoded::NeedMore(if n < 48 { 48 - n } else { 64 - n })),
            "prefix of {n} bytes"
        );
    }
    // Withdrawal: the same header and 16 zero bytes.
    let w = BlastUpdate { blast: None, ..u };
    let mut b = UPDATE_VECTOR;
    b[48..].fill(0);
    assert_eq!(w.encode(), b);
    assert_eq!(
        Inside::decode(&b),
        Ok(Decoded::Complete(Inside::BlastUpdate(w), 64))
    );
    // The connect preamble decoder does not take kind 4; the inside
    // decoder takes kinds 1 and 3 as it does.
    assert_eq!(
        Preamble::decode_connect(&UPDATE_VECTOR),
        Err(PreambleError::WrongKind {
            found: 4,
            expected: 1
        })
    );
    let p = Preamble::connect(sa("10.1.0.3:40000"), sa("10.0.0.2:1024"));
    assert_eq!(
        Inside::decode(&p.encode()),
        Ok(Decoded::Complete(Inside::Connect(p), 48))
    );
    let mut more = BLAST_VECTOR.to_vec();
    more.extend_from_slice(b"early");
    let Ok(Decoded::Complete(Inside::Connect(p3), 64)) = Inside::decode(&more) else {
        panic!("kind 3 refused by the inside decoder");
    };
    assert_eq!(p3.encode(), BLAST_VECTOR);
    let e = Inside::decode(b"WSHP\x01\x02").unwrap_err();
    assert_eq!(
        e.to_string(),
        "preamble kind 2, expected 1 (connect), 3 (connect with a blast request) or 4 (blast request for an open connection)"
    );
}

#[test]
fn every_bad_blast_update_field_is_refused_at_its_byte() {
    type Change = fn(&mut [u8; 64]);
    let cases: Vec<(Change, usize, PreambleError)> = vec![
        // Rate 0 with a payload: not a withdrawal.
        (
            |b| b[48..56].fill(0),
            58,
            PreambleError::BlastRequest(BlastRequestError::WithdrawPayload(1472)),
        ),
        (
            |b| {
                b[48..56].fill(0);
                b[56..58].copy_from_slice(&[0, 1]);
            },
            58,
            PreambleError::BlastRequest(BlastRequestError::WithdrawPayload(1)),
        ),
        // A rate with payload 0 or out of range.
        (
            |b| b[56..58].fill(0),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(0)),
        ),
        (
            |b| b[56..58].copy_from_slice(&63u16.to_be_bytes()),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(63)),
        ),
        (
            |b| b[56..58].copy_from_slice(&65508u16.to_be_bytes()),
            58,
            PreambleError::BlastRequest(BlastRequestError::Payload(65508)),
        ),
        (
            |b| b[60] = 1,
            61,
            PreambleError::NonZeroReserved { offset: 60 },
        ),
        // Reserved bytes of a withdrawal too.
        (
            |b| {
                b[48..63].fill(0);
                b[63] = 1;
            },
            64,
            PreambleError::NonZeroReserved { offset: 63 },
        ),
        // The header is checked as for kind 1.
        (
            |b| b[7] = 1,
            8,
            PreambleError::NonZeroReserved { offset: 7 },
        ),
        (|b| b[8] = 5, 9, PreambleError::BadFamily(5)),
        (|b| b[12..14].fill(0), 48, PreambleError::ZeroPort("source")),
        (
            |b| b[16..20].fill(0),
            48,
            PreambleError::UnspecifiedAddress("destination"),
        ),
    ];
    for (change, at, error) in cases {
        let mut b = UPDATE_VECTOR;
        change(&mut b);
        let need = if at - 1 < 48 {
            48 - (at - 1)
        } else {
            64 - (at - 1)
        };
        assert_eq!(
            Inside::decode(&b[..at - 1]),
            Ok(Decoded::NeedMore(need)),
            "{error}: not detectable before byte {}",
            at - 1
        );
        assert_eq!(Inside::decode(&b[..at]), Err(error));
        assert_eq!(Inside::decode(&b), Err(error));
        assert_eq!(error.reason(), Reason::Protocol);
    }
    assert_eq!(
        PreambleError::BlastRequest(BlastRequestError::WithdrawPayload(1472)).to_string(),
        "blast request with rate 0 and payload 1472: a withdrawal (rate 0) has payload 0"
    );
    // Kind 3 still refuses rate 0 at its last byte, payload 0 or not.
    let mut b = BLAST_VECTOR;
    b[48..58].fill(0);
    assert_eq!(
        Inside::decode(&b[..56]),
        Err(PreambleError::BlastRequest(BlastRequestError::ZeroRate))
    );
}

#[test]
fn reply_layout_and_decode() {
    assert_eq!(Reply::Ok.encode(), [0x57, 0x52, 1, 0]);
    assert_eq!(Reply::Refused(Reason::Refused).encode(), [0x57, 0x52, 1, 1]);
    assert_eq!(
        Reply::decode(&[0x57, 0x52, 1, 0]),
        Ok(Decoded::Complete(Reply::Ok, 4))
    );
    assert_eq!(
        Reply::decode(&[0x57, 0x52, 1, 6]),
        Ok(Decoded::Complete(Reply::Refused(Reason::NoRoute), 4))
    );
    assert_eq!(Reply::decode(&[0x57]), Ok(Decoded::NeedMore(3)));
    assert_eq!(Reply::decode(&[0x57, 0x53]), Err(PreambleError::BadMagic));
}
