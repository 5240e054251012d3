//! Relay time: nanoseconds since the relay started (CLOCK_MONOTONIC), the
//! time base of every `wanproto` state machine.

use std::time::{Duration, Instant};

/// The relay's clock.
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose time 0 is now.
    pub fn start() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds since the relay started (CLOCK_MONOTONIC).
    pub fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Sleeps until `at` (relay time in ns); forever for `None`.
    pub async fn sleep_until(&self, at: Option<u64>) {
        match at {
            Some(t) => {
                let when = self.epoch + Duration::from_nanos(t);
                tokio::time::sleep_until(when.into()).await;
            }
            None => std::future::pending().await,
        }
    }
}
