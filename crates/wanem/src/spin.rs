//! When to spin instead of sleep before a release.
//!
//! A timed sleep on this kind of machine (a VM whose idle vCPUs halt) wakes
//! 12-18 µs late even when short, so each delayed packet of an idle link left
//! late by that much twice per round trip. Polling without a timeout for the
//! last few microseconds before a deadline removes that, at the price of CPU.
//! [`SpinBudget`] bounds the price: spinning earns credit at a fixed share of
//! wall time and spends it one nanosecond per nanosecond spun, so wanem never
//! spins more than that share of a core however busy the link is (a busy link
//! needs no spinning anyway: its packets keep the loop awake).
//!
//! Pure: it takes `now` and returns decisions, so it is tested on virtual time.

/// Spin for at most this long before a deadline; sleep until then.
pub const SPIN_BEFORE_NS: u64 = 40_000;
/// Share of wall time that may be spent spinning, in parts per thousand.
pub const SPIN_SHARE_PERMILLE: u64 = 20;
/// Credit saved up at most (so a long idle period buys no long spin spree).
pub const SPIN_CREDIT_MAX_NS: u64 = 2_000_000;

/// How the loop waits for its next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Poll the devices without blocking and come back: the deadline is close.
    Spin,
    /// Block in poll for this many nanoseconds (then spin the rest, if allowed).
    Sleep(u64),
    /// Nothing is scheduled: block until a device or the control socket wakes us.
    Forever,
}

/// Spin-time accounting (see the module comment).
#[derive(Clone, Debug)]
pub struct SpinBudget {
    credit_ns: u64,
    last_ns: u64,
    spinning_since: Option<u64>,
    spun_ns: u64,
}

impl SpinBudget {
    /// A budget that starts with full credit at time `now`.
    #[must_use]
    pub fn new(now: u64) -> Self {
        Self { credit_ns: SPIN_CREDIT_MAX_NS, last_ns: now, spinning_since: None, spun_ns: 0 }
    }

    /// Decides how to wait at `now` for the deadline `wake` (`None`: nothing
    /// scheduled). `sleep_for` turns a remaining time into the sleep to ask
    /// for (the runtime's early wake-up for long sleeps).
    pub fn wait(&mut self, now: u64, wake: Option<u64>, sleep_for: impl Fn(u64) -> u64) -> Wait {
        self.account(now);
        let Some(wake) = wake else { return Wait::Forever };
        let left = wake.saturating_sub(now);
        if left == 0 {
            return Wait::Spin;
        }
        if left <= SPIN_BEFORE_NS && self.credit_ns >= left {
            self.spinning_since = Some(now);
            return Wait::Spin;
        }
        if left > SPIN_BEFORE_NS && self.credit_ns >= SPIN_BEFORE_NS {
            return Wait::Sleep(sleep_for(left - SPIN_BEFORE_NS).max(1));
        }
        Wait::Sleep(sleep_for(left))
    }

    /// Total nanoseconds spent spinning.
    #[must_use]
    pub fn spun_ns(&self) -> u64 {
        self.spun_ns
    }

    fn account(&mut self, now: u64) {
        let elapsed = now.saturating_sub(self.last_ns);
        self.last_ns = now.max(self.last_ns);
        self.credit_ns = self
            .credit_ns
            .saturating_add(elapsed.saturating_mul(SPIN_SHARE_PERMILLE) / 1000)
            .min(SPIN_CREDIT_MAX_NS);
        if let Some(since) = self.spinning_since.take() {
            let spun = now.saturating_sub(since);
            self.spun_ns = self.spun_ns.saturating_add(spun);
            self.credit_ns = self.credit_ns.saturating_sub(spun);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    fn same(t: u64) -> u64 {
        t
    }

    #[test]
    fn sleeps_until_shortly_before_a_far_deadline_then_spins() {
        let mut b = SpinBudget::new(0);
        assert_eq!(b.wait(0, Some(10 * MS), same), Wait::Sleep(10 * MS - SPIN_BEFORE_NS));
        assert_eq!(b.wait(10 * MS - 30 * US, Some(10 * MS), same), Wait::Spin);
        assert_eq!(b.wait(10 * MS, Some(10 * MS), same), Wait::Spin);
        assert_eq!(b.spun_ns(), 30 * US);
    }

    #[test]
    fn nothing_scheduled_blocks_forever() {
        let mut b = SpinBudget::new(0);
        assert_eq!(b.wait(5, None, same), Wait::Forever);
    }

    #[test]
    fn spinning_never_exceeds_its_share_of_wall_time() {
        // A deadline every 50 µs: an always-spin policy would spin 80 % of the time.
        let mut b = SpinBudget::new(0);
        let mut now = 0;
        let end = 2_000 * MS;
        while now < end {
            let deadline = (now / (50 * US) + 1) * 50 * US;
            match b.wait(now, Some(deadline), same) {
                Wait::Spin => now += US,          // one poll round
                Wait::Sleep(t) => now += t,
                Wait::Forever => unreachable!(),
            }
        }
        b.wait(now, None, same);
        let allowed = end * SPIN_SHARE_PERMILLE / 1000 + SPIN_CREDIT_MAX_NS + SPIN_BEFORE_NS;
        assert!(b.spun_ns() <= allowed, "spun {} ns > {allowed}", b.spun_ns());
        assert!(b.spun_ns() > 0);
    }

    #[test]
    fn an_idle_link_with_rare_packets_always_gets_its_spin() {
        // Two releases per 50 ms (a ping): every one is spun up to.
        let mut b = SpinBudget::new(0);
        for i in 1..=200u64 {
            let deadline = i * 25 * MS;
            let before = deadline - SPIN_BEFORE_NS;
            assert_eq!(b.wait(deadline - 25 * MS + US, Some(deadline), same), Wait::Sleep(before - (deadline - 25 * MS + US)));
            assert_eq!(b.wait(before, Some(deadline), same), Wait::Spin, "release {i}");
        }
    }

    #[test]
    fn without_credit_it_sleeps_to_the_deadline() {
        let mut b = SpinBudget::new(0);
        // Spend everything: spin for the whole saved credit.
        assert_eq!(b.wait(0, Some(10 * US), same), Wait::Spin);
        b.wait(SPIN_CREDIT_MAX_NS, Some(SPIN_CREDIT_MAX_NS + MS), same);
        let now = SPIN_CREDIT_MAX_NS + 10;
        assert_eq!(b.wait(now, Some(now + 20 * US), same), Wait::Sleep(20 * US));
    }
}
