//! What a [`TrunkConnection`](crate::TrunkConnection) reports: events for
//! the daemon, why it closed, misuses of its API, and counters.

use std::net::SocketAddr;

use thiserror::Error;

use crate::blast_request::BlastRequest;
use crate::frame::FrameError;
use crate::reason::{CloseCode, Reason};
use crate::wire::StreamId;

/// Why a connection closed.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConnectionError {
    /// A frame that does not decode.
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    /// A well-formed frame that the protocol does not allow here.
    #[error("protocol violation: {0}")]
    Protocol(&'static str),
    /// The peer sent more than its credit on a stream, or granted more than
    /// [`MAX_WINDOW`](crate::wire::MAX_WINDOW).
    #[error("flow control violation on stream {0}")]
    FlowControl(StreamId),
    /// The peer opened more streams than we allow.
    #[error("peer exceeded the stream limit of {0}")]
    StreamLimit(u32),
    /// The peer's AUTH did not verify: wrong key, or a replayed or altered
    /// handshake.
    #[error("peer failed authentication")]
    AuthFailed,
    /// The peer authenticated but belongs to a cluster we do not expect.
    #[error("peer is of cluster {found:?}, expected {expected:?}")]
    WrongPeerCluster {
        /// What the peer announced.
        found: String,
        /// What [`Config::expected_peer_cluster`](crate::Config::expected_peer_cluster) says.
        expected: String,
    },
    /// No authenticated peer within [`Config::handshake_timeout`](crate::Config::handshake_timeout).
    #[error("handshake timed out")]
    HandshakeTimeout,
    /// Nothing received within [`Config::idle_timeout`](crate::Config::idle_timeout).
    #[error("peer silent for longer than the idle timeout")]
    IdleTimeout,
    /// The peer closed with GOAWAY and a non-zero code.
    #[error("peer closed the connection: {0}")]
    PeerClosed(CloseCode),
    /// [`TrunkConnection::close`](crate::TrunkConnection::close) was called.
    #[error("closed locally: {0}")]
    LocallyClosed(CloseCode),
    /// The TCP connection ended before a graceful close.
    #[error("transport closed")]
    TransportClosed,
    /// Control frames queued beyond [`Config::max_control_queue`](crate::Config::max_control_queue).
    #[error("control frames queued beyond the limit (peer does not read)")]
    ControlFlood,
    /// A resumption the peer does not know (it restarted, or the session
    /// expired there); or a fresh connection asked to resume.
    #[error("the session to resume is unknown")]
    UnknownSession,
    /// A suspended session was not resumed within `resume_timeout`; the
    /// error that suspended it.
    #[error("not resumed in time after: {0}")]
    ResumeTimeout(Box<ConnectionError>),
}

impl ConnectionError {
    /// The code sent in the closing GOAWAY.
    pub fn close_code(&self) -> CloseCode {
        match self {
            ConnectionError::Frame(e) => e.close_code(),
            ConnectionError::Protocol(_) | ConnectionError::WrongPeerCluster { .. } => {
                CloseCode::Protocol
            }
            ConnectionError::FlowControl(_) => CloseCode::FlowControl,
            ConnectionError::StreamLimit(_) => CloseCode::StreamLimit,
            ConnectionError::AuthFailed => CloseCode::AuthFailed,
            ConnectionError::HandshakeTimeout | ConnectionError::IdleTimeout => CloseCode::Timeout,
            ConnectionError::PeerClosed(c) | ConnectionError::LocallyClosed(c) => *c,
            ConnectionError::TransportClosed => CloseCode::Internal,
            ConnectionError::ControlFlood => CloseCode::Flood,
            ConnectionError::UnknownSession => CloseCode::UnknownSession,
            ConnectionError::ResumeTimeout(_) => CloseCode::Timeout,
        }
    }
}

/// Misuse of a stream through the API (never caused by peer input alone).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum StreamError {
    /// No such stream: never opened, or already closed or reset.
    #[error("no stream {0}")]
    UnknownStream(StreamId),
    /// A stream the peer opened that has not been accepted yet.
    #[error("stream {0} is not accepted yet")]
    NotAccepted(StreamId),
    /// A write after [`TrunkConnection::finish`](crate::TrunkConnection::finish).
    #[error("stream {0} is finished")]
    Finished(StreamId),
    /// An accept of a stream already accepted or opened by us.
    #[error("stream {0} cannot be accepted")]
    NotAcceptable(StreamId),
    /// The connection is closed.
    #[error("connection closed")]
    ConnectionClosed,
}

/// Why a stream could not be opened.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum OpenError {
    /// The handshake is not complete.
    #[error("trunk not established yet")]
    NotEstablished,
    /// A GOAWAY was sent or received: open the stream on another trunk.
    #[error("trunk is going away")]
    GoingAway,
    /// As many streams are open as the peer (or our config) allows.
    #[error("stream limit {0} reached")]
    StreamLimit(u32),
    /// All 2^31 stream ids of this side are used: open a new trunk.
    #[error("stream ids exhausted")]
    IdsExhausted,
    /// The connection is closed.
    #[error("connection closed")]
    ConnectionClosed,
}

/// What the authenticated peer announced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    /// Peer relay name.
    pub name: String,
    /// Peer cluster name.
    pub cluster: String,
    /// Streams we may have open that we opened.
    pub max_streams: u32,
    /// Credit of every stream we send on, at its start.
    pub initial_window: u32,
}

/// Something the daemon must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The handshake completed: the peer proved the key. Streams may be
    /// opened now.
    Authenticated(PeerInfo),
    /// The peer opened a stream: connect to `destination` (if it is a node
    /// of our cluster), then [`TrunkConnection::accept_stream`](crate::TrunkConnection::accept_stream), or
    /// [`TrunkConnection::reset_stream`](crate::TrunkConnection::reset_stream) with the reason of the failure.
    StreamOpened {
        /// Stream id.
        stream: StreamId,
        /// Where to connect.
        destination: SocketAddr,
        /// The original source, for the delivery preamble.
        source: SocketAddr,
        /// The ranks' request that the stream's bulk data be blasted, if
        /// its OPEN carried one (the daemon's policy decides).
        blast: Option<BlastRequest>,
    },
    /// A stream we opened was accepted: the far relay is connected to the
    /// destination (send the ok reply to the shim).
    StreamAccepted {
        /// Stream id.
        stream: StreamId,
    },
    /// Data or the end of a stream can be read: call
    /// [`TrunkConnection::read`](crate::TrunkConnection::read) until it returns `Blocked` or `Finished`.
    StreamReadable {
        /// Stream id.
        stream: StreamId,
    },
    /// A stream whose [`TrunkConnection::write`](crate::TrunkConnection::write) took less than offered
    /// has room again.
    StreamWritable {
        /// Stream id.
        stream: StreamId,
    },
    /// The peer reset a stream; it is gone. For a stream we opened and that
    /// was not accepted yet, this is the refusal (reply `Refused(reason)`).
    StreamReset {
        /// Stream id.
        stream: StreamId,
        /// Why.
        reason: Reason,
    },
    /// A stream ended gracefully in both directions (our FIN sent, the
    /// peer's FIN read); it is gone.
    StreamClosed {
        /// Stream id.
        stream: StreamId,
    },
    /// The peer sent a graceful GOAWAY: open no more streams here.
    GoAway,
    /// An RBUDP control message from the peer (hand it to
    /// [`crate::rbudp::RbudpSession::handle_control`]).
    Rbudp {
        /// The message bytes.
        message: Vec<u8>,
    },
    /// The connection is closed: `None` after a graceful drain. Every stream
    /// still open is gone (reset the sockets that carried them). Keep
    /// calling `poll_transmit` until it returns nothing, then close the
    /// socket.
    Closed {
        /// Why, unless graceful.
        error: Option<ConnectionError>,
    },
    /// The transport was lost (or a resumption attempt failed) but the
    /// session is kept: streams stay, writes are buffered, and the
    /// connection waits for [`crate::TrunkConnection::begin_resume`] on a
    /// new transport until `resume_timeout` (then [`Event::Closed`]).
    Suspended {
        /// What ended the transport.
        error: ConnectionError,
    },
    /// A suspended session resumed on a new transport; `replayed` bytes of
    /// sequenced frames are sent again.
    Resumed {
        /// Bytes replayed to the peer.
        replayed: u64,
    },
}

/// What [`TrunkConnection::read`](crate::TrunkConnection::read) found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes were copied (> 0 unless the buffer was empty).
    Data(usize),
    /// Nothing to read now; a [`Event::StreamReadable`] will follow.
    Blocked,
    /// The peer finished its side and every byte has been read.
    Finished,
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Bytes handed to `handle_input`.
    pub bytes_received: u64,
    /// Bytes returned by `poll_transmit`.
    pub bytes_sent: u64,
    /// Frames decoded.
    pub frames_received: u64,
    /// Frames encoded.
    pub frames_sent: u64,
    /// Stream payload bytes received.
    pub data_received: u64,
    /// Stream payload bytes sent.
    pub data_sent: u64,
    /// Streams we opened.
    pub streams_opened_local: u64,
    /// Streams the peer opened.
    pub streams_opened_remote: u64,
    /// RESET frames sent.
    pub resets_sent: u64,
    /// RESET frames received.
    pub resets_received: u64,
    /// Frames for streams already closed, dropped.
    pub frames_ignored: u64,
    /// Times the session was suspended (transport lost, kept for resumption).
    pub suspends: u64,
    /// Times the session resumed on a new transport.
    pub resumes: u64,
    /// Bytes of sequenced frames sent again after resumptions.
    pub replayed: u64,
}

/// Counters of one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Payload bytes sent to the peer.
    pub bytes_sent: u64,
    /// Payload bytes received from the peer.
    pub bytes_received: u64,
}
