//! Every public path of the crate that its users name (wanrelay, these
//! tests) keeps resolving when modules move inside the crate: a
//! compile-time check, one `use` block per path the users know.

#![allow(unused_imports)]

#[test]
fn crate_root_names_resolve() {
    use wanproto::{
        BlastRequest, BlastRequestError, BlastUpdate, CloseCode, Config, ConfigError,
        ConnectionError, ConnectionStats, Decoded, Event, Inside, KeyError, OpenError, Pacer,
        PeerInfo, Policy, Preamble, PreambleError, PresharedKey, RbudpConfig, RbudpEvent,
        RbudpSession, RbudpStats, ReadOutcome, Reason, Reply, Role, StreamError, StreamId,
        StreamStats, TrunkCandidate, TrunkConnection, TrunkSelector,
    };
    let d: Decoded<u8> = Decoded::NeedMore(1);
    assert_eq!(d, wanproto::Decoded::NeedMore(1));
    assert_eq!(Role::Initiator, wanproto::frame::Role::Initiator);
}

#[test]
fn frame_and_auth_paths_resolve() {
    use wanproto::auth::{KeyError, PresharedKey, MAX_KEY_LEN, MIN_KEY_LEN};
    use wanproto::frame::{
        decode, valid_name, Frame, FrameError, Hello, Role, StreamId, FRAME_HEADER_LEN, MAC_LEN,
        MAX_DATA_PAYLOAD, MAX_HELLO_LEN, MAX_NAME_LEN, MAX_WINDOW, MIN_INITIAL_WINDOW, NONCE_LEN,
        TRUNK_MAGIC, TRUNK_VERSION,
    };
    let _: fn(&str) -> bool = valid_name;
    assert_eq!(MAX_WINDOW, (1 << 31) - 1);
}

#[test]
fn connection_paths_resolve() {
    use wanproto::connection::{
        Config, ConfigError, ConnectionError, ConnectionStats, Event, OpenError, PeerInfo,
        ReadOutcome, StreamError, StreamStats, TrunkConnection,
    };
    use wanproto::pacer::{Pacer, PacerError};
    use wanproto::reason::{CloseCode, Reason};
    use wanproto::select::{
        fnv1a64, host_hash, mix64, score, Policy, TrunkCandidate, TrunkSelector,
    };
}

#[test]
fn preamble_paths_resolve() {
    use wanproto::preamble::{
        BlastRequest, BlastRequestError, BlastUpdate, Inside, Kind, Preamble, PreambleError, Reply,
        BLAST_PREAMBLE_LEN, BLAST_REQUEST_LEN, KIND_BLAST_UPDATE, KIND_CONNECT_BLAST, PREAMBLE_LEN,
        PREAMBLE_MAGIC, PREAMBLE_VERSION, REPLY_LEN, REPLY_MAGIC,
    };
}

#[test]
fn rbudp_paths_resolve() {
    use wanproto::rbudp::{
        datagram_session, session_token, BlastError, BlastParams, Control, ControlError,
        DatagramError, DatagramHeader, DatagramOutcome, RbudpConfig, RbudpConfigError, RbudpError,
        RbudpEvent, RbudpSession, RbudpStats, DATAGRAM_HEADER_LEN, DATAGRAM_MAGIC,
        IPV4_UDP_OVERHEAD, MAX_BITMAP_LEN, MAX_BLAST_PACKETS, MAX_DATAGRAM, MAX_WINDOW,
        MIN_DATAGRAM, RBUDP_VERSION,
    };
    assert_eq!(MAX_WINDOW, u64::from(u32::MAX));
}
