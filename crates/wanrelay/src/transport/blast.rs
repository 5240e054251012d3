//! How one stream's bulk data goes to the peer: the setting a stream task
//! reads before each bulk decision ([`StreamBlast`], `None`: everything on
//! the trunk), changeable while the stream runs ([`BlastSwitch`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use wanproto::rbudp::BlastParams;

/// How long a bulk reader waits for more bytes before it sends what it has.
pub const GATHER_WAIT: Duration = Duration::from_millis(2);

/// How one stream's bulk data goes to the peer by RBUDP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamBlast {
    /// Largest blast gathered from the socket, bytes.
    pub blast: usize,
    /// A bulk read gathering less goes over the trunk.
    pub bulk_threshold: usize,
    /// Rate and datagram size of its blasts.
    pub params: BlastParams,
}

/// A stream's [`StreamBlast`] setting for the data this relay sends,
/// changeable while the stream runs (kind-4 preamble, [`super::TrunkStream::update_blast`]).
/// The stream task checks a version number before each bulk decision and
/// takes the lock only when it changed.
#[derive(Debug)]
pub struct BlastSwitch {
    version: AtomicU64,
    setting: Mutex<Option<StreamBlast>>,
    /// What the stream opened with (its OPEN or preamble, `rbudp_streams`):
    /// a withdrawal goes back to it.
    original: Option<StreamBlast>,
}

impl BlastSwitch {
    /// A switch holding `original` (the stream's policy when it opened).
    pub fn new(original: Option<StreamBlast>) -> BlastSwitch {
        BlastSwitch {
            version: AtomicU64::new(0),
            setting: Mutex::new(original),
            original,
        }
    }

    /// The setting the stream opened with.
    pub fn original(&self) -> Option<StreamBlast> {
        self.original
    }

    /// Sets the stream's setting from its next bulk decision on.
    pub fn set(&self, setting: Option<StreamBlast>) {
        *self.setting.lock().unwrap_or_else(|e| e.into_inner()) = setting;
        self.version.fetch_add(1, Ordering::Release);
    }

    /// Puts the current setting in `current` if it changed since version
    /// `seen` (0 and the original setting to begin with).
    pub fn refresh(&self, seen: &mut u64, current: &mut Option<StreamBlast>) {
        let v = self.version.load(Ordering::Acquire);
        if v != *seen {
            *seen = v;
            *current = *self.setting.lock().unwrap_or_else(|e| e.into_inner());
        }
    }
}
