//! The daemon: what runs the relay, on top of the streams and the
//! transports.
//!
//! * [`run`]: starts the tasks and shuts them down (GOAWAY, grace,
//!   resets);
//! * [`listeners`]: binds every listener at start; the inside and outside
//!   accept loops;
//! * [`dial`]: keeps the trunks this relay dials to its peers;
//! * [`session`]: a trunk's life over its sockets: resumption after a
//!   lost transport;
//! * [`events`]: what the relay decides when a trunk reports (the peer
//!   authenticated, opened a stream, sent RBUDP control, closed);
//! * [`metrics_page`] and [`endpoint`]: the gauges read from the trunks,
//!   and the HTTP endpoint that serves them with the counters;
//! * [`relay`]: the relay's state (context, key, trunks, streams, the
//!   trunks shutdown works through, totals of closed trunks).
//!
//! Each file uses only those listed after it, and everything below the
//! daemon ([`crate::streams`], [`crate::transport`], [`crate::shared`],
//! [`crate::config`]).

pub mod dial;
pub mod endpoint;
pub mod events;
pub mod listeners;
pub mod metrics_page;
pub mod relay;
pub mod run;
pub mod session;
