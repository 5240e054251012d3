//! The settings of an RBUDP session and their checks.

use thiserror::Error;

use crate::wire::{
    DATAGRAM_HEADER_LEN, IPV4_UDP_OVERHEAD, MAX_DATAGRAM, MIN_DATAGRAM,
    RBUDP_MAX_WINDOW as MAX_WINDOW,
};

/// Settings of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbudpConfig {
    /// Sending rate in bytes per second on the wire: datagram bytes plus
    /// `overhead` per datagram. Explicit, never adapted to loss.
    pub rate: u64,
    /// Pacer bucket in bytes (bursts up to this much); at least one datagram.
    pub burst: u64,
    /// Size of a full datagram (UDP payload, the 24-byte header included):
    /// [`MIN_DATAGRAM`]..=[`MAX_DATAGRAM`]. Also the largest this end
    /// accepts (announced in SESSION); the sender uses the smaller of its
    /// own and the peer's.
    pub datagram_size: usize,
    /// Bytes per datagram the pacer adds for headers below UDP
    /// ([`IPV4_UDP_OVERHEAD`]).
    pub overhead: u64,
    /// Bytes of the peer's blasts this end holds at most (announced in
    /// SESSION; the peer may not start a blast beyond it).
    pub receive_window: u64,
    /// After a BLAST_DONE, how long the receiver waits for datagrams still
    /// in flight before it reports the missing ones (ns).
    pub report_delay: u64,
}

impl RbudpConfig {
    /// Settings for `rate` bytes/s on the wire and `datagram_size`-byte
    /// datagrams; burst 2 ms of sending (at least 4 datagrams), window
    /// 16 MiB, report delay 1 ms.
    pub fn new(rate: u64, datagram_size: usize) -> RbudpConfig {
        let per = datagram_size as u64 + IPV4_UDP_OVERHEAD;
        RbudpConfig {
            rate,
            burst: (rate / 500).max(4 * per),
            datagram_size,
            overhead: IPV4_UDP_OVERHEAD,
            receive_window: 16 << 20,
            report_delay: 1_000_000,
        }
    }

    /// Checks the settings.
    ///
    /// # Errors
    /// [`RbudpConfigError`] naming the setting at fault.
    pub fn validate(&self) -> Result<(), RbudpConfigError> {
        if self.rate == 0 {
            return Err(RbudpConfigError::Rate);
        }
        if !(MIN_DATAGRAM..=MAX_DATAGRAM).contains(&self.datagram_size) {
            return Err(RbudpConfigError::DatagramSize(self.datagram_size));
        }
        if self.burst < self.datagram_size as u64 + self.overhead {
            return Err(RbudpConfigError::Burst);
        }
        if self.receive_window < (self.datagram_size - DATAGRAM_HEADER_LEN) as u64
            || self.receive_window > MAX_WINDOW
        {
            return Err(RbudpConfigError::Window(self.receive_window));
        }
        Ok(())
    }
}

/// Invalid settings.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum RbudpConfigError {
    /// Rate 0.
    #[error("rbudp rate must be above 0")]
    Rate,
    /// Datagram size out of range.
    #[error("rbudp datagram size {0} out of range {MIN_DATAGRAM}..={MAX_DATAGRAM} bytes")]
    DatagramSize(usize),
    /// Burst below one datagram.
    #[error("rbudp burst must hold at least one datagram")]
    Burst,
    /// Window out of range.
    #[error("rbudp receive window {0} must hold one datagram's data and be below 4 GiB")]
    Window(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        assert!(RbudpConfig::new(25_000_000, 1472).validate().is_ok());
        assert_eq!(
            RbudpConfig::new(0, 1472).validate(),
            Err(RbudpConfigError::Rate)
        );
        assert_eq!(
            RbudpConfig::new(1000, 10).validate(),
            Err(RbudpConfigError::DatagramSize(10))
        );
    }
}
