//! The bottom of the relay: what every layer reads and none owns.
//!
//! * [`clock`]: relay time (nanoseconds since start) and sleeping until
//!   a relay time;
//! * [`metrics`]: the counter registry, the metric names, the labels of
//!   reason codes;
//! * [`context`]: the configuration, the clock, the counters, whether
//!   shutdown has begun, and the per-peer state trunks and streams share
//!   (pacers, logged-once flags);
//! * [`log_budget`]: at most a few refusal lines a second, the rest counted;
//! * [`busy_poll`]: the runtime kept polling for a while after traffic.
//!
//! These files use the configuration ([`crate::config`]) and `wanproto`,
//! nothing above.

pub mod busy_poll;
pub mod clock;
pub mod context;
pub mod log_budget;
pub mod metrics;
