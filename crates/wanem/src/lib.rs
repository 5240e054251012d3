//! wanem: a software WAN emulator between TUN devices in network namespaces.
//!
//! The impairment core ([`impair`], [`monitor`], [`emulator`]) does no I/O
//! and reads no clock; [`runtime`] owns the devices, sockets and timers.
//! See docs/wanem.md for the CLI, config, control protocol and model.

#![warn(missing_docs)]

pub mod config;
pub mod control;
pub mod emulator;
pub mod impair;
pub mod monitor;
pub mod runtime;
pub mod spin;
pub mod sys;
