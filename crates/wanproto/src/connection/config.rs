//! The settings of a trunk connection, their documented defaults and
//! their checks.

use thiserror::Error;

use crate::frame::valid_name;
use crate::wire::{MAX_DATA_PAYLOAD, MAX_WINDOW, MIN_INITIAL_WINDOW};

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000 * MS;
/// Smallest replay buffer: a few of the largest frames.
pub const MIN_RESUME_BUFFER: u64 = 1024 * 1024;

/// Settings of one trunk connection. [`Config::new`](crate::Config::new) gives the documented
/// defaults; [`TrunkConnection::new`](crate::TrunkConnection::new) validates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// This relay's name, sent in HELLO (1-64 of `A-Z a-z 0-9 . _ -`).
    pub name: String,
    /// This relay's cluster, sent in HELLO.
    pub cluster: String,
    /// If set, a peer announcing another cluster is refused after
    /// authentication. Default: none.
    pub expected_peer_cluster: Option<String>,
    /// Streams the peer may have open that it opened (and the most we open
    /// ourselves). Default 1024.
    pub max_streams: u32,
    /// Guaranteed receive window of every stream, announced as
    /// `initial_window`. Default 32 KiB.
    pub min_stream_window: u32,
    /// Largest receive window a stream grows to. Default 8 MiB.
    pub max_stream_window: u32,
    /// Receive memory budget of the connection: at least
    /// `2 * max_streams * min_stream_window`. Default 128 MiB.
    pub receive_buffer: u64,
    /// Bytes written but not yet transmitted that one stream may hold.
    /// Default 256 KiB.
    pub stream_send_buffer: u32,
    /// Largest DATA payload this side sends. Default 16 KiB, at most
    /// [`MAX_DATA_PAYLOAD`].
    pub max_data_frame: u32,
    /// Time allowed from creation to an authenticated peer. Default 10 s.
    pub handshake_timeout: u64,
    /// Silence after which a PING is sent. Default 5 s.
    pub keepalive_interval: u64,
    /// Silence after which the connection is declared dead. Default 20 s
    /// (so a dead relay ends its MPI job well within 30 s).
    pub idle_timeout: u64,
    /// How long a session whose transport was lost (or went silent for
    /// `idle_timeout`) is kept for a resumption on a new transport, its
    /// streams intact; 0 disables resumption (the connection closes at
    /// once, as before). Both ends must enable it. Default 15 min (as
    /// long as a direct WAN connection survives an outage).
    pub resume_timeout: u64,
    /// Sent sequenced frames kept until the peer acknowledges them (the
    /// replay buffer): at most this much is unacknowledged at once.
    /// Must exceed the trunk's bandwidth-delay product. Default 64 MiB.
    pub resume_buffer: u64,
    /// Bytes of control frames (RESET, GOAWAY, handshake) allowed to wait
    /// for transmission; beyond it the peer is flooding us without
    /// reading and the connection is closed. Default 1 MiB.
    pub max_control_queue: usize,
}

impl Config {
    /// The defaults for a relay `name` of cluster `cluster`.
    pub fn new(name: &str, cluster: &str) -> Config {
        Config {
            name: name.to_owned(),
            cluster: cluster.to_owned(),
            expected_peer_cluster: None,
            max_streams: 1024,
            min_stream_window: 32 * 1024,
            max_stream_window: 8 * 1024 * 1024,
            receive_buffer: 128 * 1024 * 1024,
            stream_send_buffer: 256 * 1024,
            max_data_frame: 16 * 1024,
            handshake_timeout: 10 * SEC,
            keepalive_interval: 5 * SEC,
            idle_timeout: 20 * SEC,
            resume_timeout: 15 * 60 * SEC,
            resume_buffer: 64 * 1024 * 1024,
            max_control_queue: 1024 * 1024,
        }
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// The first [`ConfigError`] found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for n in [
            Some(&self.name),
            Some(&self.cluster),
            self.expected_peer_cluster.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            if !valid_name(n) {
                return Err(ConfigError::BadName(n.clone()));
            }
        }
        if self.max_streams == 0 {
            return Err(ConfigError::ZeroStreams);
        }
        if self.min_stream_window < MIN_INITIAL_WINDOW
            || self.max_stream_window > MAX_WINDOW
            || self.min_stream_window > self.max_stream_window
        {
            return Err(ConfigError::Windows {
                min: self.min_stream_window,
                max: self.max_stream_window,
            });
        }
        let floors = 2 * u64::from(self.max_streams) * u64::from(self.min_stream_window);
        if self.receive_buffer < floors {
            return Err(ConfigError::ReceiveBuffer {
                given: self.receive_buffer,
                needed: floors,
            });
        }
        if self.stream_send_buffer == 0 {
            return Err(ConfigError::SendBuffer);
        }
        if self.max_data_frame == 0 || self.max_data_frame as usize > MAX_DATA_PAYLOAD {
            return Err(ConfigError::DataFrame(self.max_data_frame));
        }
        if self.handshake_timeout == 0
            || self.keepalive_interval == 0
            || self.keepalive_interval >= self.idle_timeout
        {
            return Err(ConfigError::Timeouts);
        }
        if self.resume_timeout > 0 && self.resume_buffer < MIN_RESUME_BUFFER {
            return Err(ConfigError::ResumeBuffer(self.resume_buffer));
        }
        if self.max_control_queue < 4096 {
            return Err(ConfigError::ControlQueue(self.max_control_queue));
        }
        Ok(())
    }

    /// The receive memory beyond every stream's reserved floor.
    pub(super) fn growth_pool(&self) -> u64 {
        self.receive_buffer - 2 * u64::from(self.max_streams) * u64::from(self.min_stream_window)
    }
}

/// A [`Config`] that cannot be used.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A relay or cluster name is empty, too long or has a forbidden character.
    #[error("name {0:?}: must be 1-64 characters from A-Z a-z 0-9 . _ -")]
    BadName(String),
    /// `max_streams` is 0.
    #[error("max_streams must be at least 1")]
    ZeroStreams,
    /// Windows out of order or out of range.
    #[error("stream windows min {min} max {max}: need 1024 <= min <= max <= 2^31-1")]
    Windows {
        /// `min_stream_window`.
        min: u32,
        /// `max_stream_window`.
        max: u32,
    },
    /// Budget below the reserved floors.
    #[error("receive_buffer {given} is below 2 * max_streams * min_stream_window = {needed}")]
    ReceiveBuffer {
        /// `receive_buffer`.
        given: u64,
        /// The floor.
        needed: u64,
    },
    /// `stream_send_buffer` is 0.
    #[error("stream_send_buffer must be at least 1")]
    SendBuffer,
    /// `max_data_frame` out of range.
    #[error("max_data_frame {0} must be 1..=65536")]
    DataFrame(u32),
    /// A zero timeout, or keepalive not shorter than the idle timeout.
    #[error("timeouts must be non-zero and keepalive_interval < idle_timeout")]
    Timeouts,
    /// `resume_buffer` below [`MIN_RESUME_BUFFER`] with resumption on.
    #[error("resume_buffer {0} must be at least 1 MiB")]
    ResumeBuffer(u64),
    /// `max_control_queue` below 4096.
    #[error("max_control_queue {0} must be at least 4096")]
    ControlQueue(usize),
}
