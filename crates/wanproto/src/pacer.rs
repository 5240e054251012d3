//! A token-bucket pacer for the WAN side of a relay.
//!
//! Tokens are bytes; they accrue at `rate` bytes per second up to `burst`.
//! The daemon asks [`Pacer::available`] how many bytes it may send now,
//! passes that as `max_len` to
//! [`TrunkConnection::poll_transmit`](crate::TrunkConnection::poll_transmit),
//! reports what it sent with [`Pacer::consume`] (which may overdraw: a
//! frame that did not fit becomes debt), and sleeps until
//! [`Pacer::ready_at`]. Arithmetic is exact integers: tokens are counted in
//! byte-nanoseconds-per-second units, so no rounding drift accumulates.

use thiserror::Error;

const NS_PER_SEC: i128 = 1_000_000_000;

/// Token bucket. Time is nanoseconds, as everywhere in this crate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pacer {
    /// Bytes per second; `None` is unlimited.
    rate: Option<u64>,
    burst: u64,
    /// Tokens times 10^9 (may be negative: debt).
    tokens: i128,
    last: u64,
}

/// Invalid pacer settings.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum PacerError {
    /// Rate 0.
    #[error("pacing rate must be > 0 bytes/s")]
    ZeroRate,
    /// Burst 0.
    #[error("pacing burst must be > 0 bytes")]
    ZeroBurst,
}

impl Pacer {
    /// A pacer at `rate` bytes/s with a bucket of `burst` bytes, full at `now`.
    ///
    /// # Errors
    /// [`PacerError`] if `rate` or `burst` is 0.
    pub fn new(rate: u64, burst: u64, now: u64) -> Result<Pacer, PacerError> {
        if rate == 0 {
            return Err(PacerError::ZeroRate);
        }
        if burst == 0 {
            return Err(PacerError::ZeroBurst);
        }
        Ok(Pacer {
            rate: Some(rate),
            burst,
            tokens: i128::from(burst) * NS_PER_SEC,
            last: now,
        })
    }

    /// A pacer that never limits.
    pub fn unlimited() -> Pacer {
        Pacer {
            rate: None,
            burst: u64::MAX,
            tokens: 0,
            last: 0,
        }
    }

    /// The suggested burst for `rate`: one millisecond of sending, at least
    /// 64 KiB (a full DATA frame).
    pub fn default_burst(rate: u64) -> u64 {
        (rate / 1000).max(64 * 1024 + 16)
    }

    /// The rate in bytes/s (`None`: unlimited).
    pub fn rate(&self) -> Option<u64> {
        self.rate
    }

    fn refill(&mut self, now: u64) {
        if let Some(rate) = self.rate {
            let dt = now.saturating_sub(self.last);
            let cap = i128::from(self.burst) * NS_PER_SEC;
            self.tokens = (self.tokens + i128::from(rate) * i128::from(dt)).min(cap);
        }
        self.last = self.last.max(now);
    }

    /// Bytes that may be sent at `now`.
    pub fn available(&mut self, now: u64) -> u64 {
        if self.rate.is_none() {
            return u64::MAX;
        }
        self.refill(now);
        if self.tokens <= 0 {
            0
        } else {
            u64::try_from(self.tokens / NS_PER_SEC).unwrap_or(u64::MAX)
        }
    }

    /// Records `bytes` sent at `now`; may overdraw the bucket.
    pub fn consume(&mut self, now: u64, bytes: u64) {
        if self.rate.is_none() {
            return;
        }
        self.refill(now);
        self.tokens -= i128::from(bytes) * NS_PER_SEC;
    }

    /// The earliest time at or after `now` when `bytes` (clamped to the
    /// burst) may be sent.
    pub fn ready_at(&mut self, now: u64, bytes: u64) -> u64 {
        let Some(rate) = self.rate else { return now };
        self.refill(now);
        let need = i128::from(bytes.min(self.burst)) * NS_PER_SEC;
        if self.tokens >= need {
            return now;
        }
        let rate = i128::from(rate);
        let wait = (need - self.tokens + rate - 1) / rate;
        now.saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    /// Changes the rate (and burst) from `now` on; tokens earned so far are
    /// kept up to the new burst.
    ///
    /// # Errors
    /// [`PacerError`] if `rate` or `burst` is 0.
    pub fn set_rate(&mut self, now: u64, rate: u64, burst: u64) -> Result<(), PacerError> {
        if rate == 0 {
            return Err(PacerError::ZeroRate);
        }
        if burst == 0 {
            return Err(PacerError::ZeroBurst);
        }
        if self.rate.is_none() {
            *self = Pacer::new(rate, burst, now)?;
            return Ok(());
        }
        self.refill(now);
        self.rate = Some(rate);
        self.burst = burst;
        self.tokens = self.tokens.min(i128::from(burst) * NS_PER_SEC);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn starts_full_and_refills_at_rate() {
        let mut p = Pacer::new(1_000_000, 10_000, 0).unwrap();
        assert_eq!(p.available(0), 10_000);
        p.consume(0, 10_000);
        assert_eq!(p.available(0), 0);
        assert_eq!(p.available(MS), 1_000);
        assert_eq!(p.available(100 * MS), 10_000, "capped at the burst");
    }

    #[test]
    fn debt_delays_the_next_send_exactly() {
        let mut p = Pacer::new(1_000_000, 10_000, 0).unwrap();
        p.consume(0, 15_000);
        assert_eq!(p.available(0), 0);
        assert_eq!(p.ready_at(0, 1), 5 * MS + 1_000);
        assert_eq!(p.available(5 * MS), 0);
        assert_eq!(p.available(5 * MS + 1_000), 1);
    }

    #[test]
    fn long_run_rate_is_exact() {
        // 3 bytes/s with sends of 1 byte whenever allowed: no drift.
        let mut p = Pacer::new(3, 1, 0).unwrap();
        p.consume(0, 1);
        let mut now = 0;
        let mut sent = 0;
        while now < 10 * 1_000_000_000 {
            now = p.ready_at(now, 1);
            p.consume(now, 1);
            sent += 1;
        }
        assert_eq!(sent, 30);
    }

    #[test]
    fn unlimited_and_rate_changes() {
        let mut p = Pacer::unlimited();
        assert_eq!(p.available(5), u64::MAX);
        assert_eq!(p.ready_at(5, 1 << 40), 5);
        p.set_rate(10, 1000, 100).unwrap();
        assert_eq!(p.available(10), 100);
        p.consume(10, 100);
        p.set_rate(10, 2000, 50).unwrap();
        assert_eq!(p.ready_at(10, 50), 10 + 25_000_000);
        assert_eq!(Pacer::new(0, 1, 0), Err(PacerError::ZeroRate));
        assert_eq!(Pacer::new(1, 0, 0), Err(PacerError::ZeroBurst));
    }
}
