//! Busy polling after traffic (`busy_poll` in the configuration).
//!
//! Between events the runtime sleeps in `epoll_wait`, so the next message
//! through the relay costs one process wake-up: 3.7-29 us on the testbed's
//! VM, most of what a relay pass adds (docs/benchmarks.md, "Where the
//! latency goes"). For `busy_poll` after the relay last moved bytes, one
//! task keeps the runtime awake instead: it yields in a loop, and a
//! current-thread tokio runtime whose only runnable task has yielded polls
//! its I/O driver without blocking (`epoll_wait` with a zero timeout)
//! before running it again, so a message that arrives meanwhile is read at
//! once. Every turn of the loop also gives the CPU to any other runnable
//! thread (`sched_yield`): the relay stays runnable, so no wake-up is
//! needed when a message arrives, but it holds no core from the processes
//! beside it. Without that yield, two spinning relays on the loaded 2-core
//! machine made a relay pass 4-5x slower (loopback, 1-byte ping-pong: 66.8
//! and 78.3 us per pass against 16.4-23.6 sleeping); with it 5.4 us against
//! 14.9 (`cargo test --release -p wanrelay --test measure busy`). After the
//! window the task sleeps until the next traffic, and the relay costs no
//! CPU while idle. With `threads` above 1 the task keeps one worker awake.
//!
//! The hot paths call [`BusyPoll::traffic`]: a relaxed store, and a notify
//! only when the spinner sleeps.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// `last` before any traffic.
const NEVER: u64 = u64::MAX;

/// The busy-polling window and the time of the last traffic.
pub struct BusyPoll {
    window_ns: u64,
    last: AtomicU64,
    asleep: AtomicBool,
    wake: Notify,
}

impl BusyPoll {
    /// A window of `window` (zero: never busy-poll).
    pub fn new(window: Duration) -> BusyPoll {
        BusyPoll {
            window_ns: u64::try_from(window.as_nanos()).unwrap_or(u64::MAX),
            last: AtomicU64::new(NEVER),
            asleep: AtomicBool::new(true),
            wake: Notify::new(),
        }
    }

    /// Whether the relay busy-polls at all.
    pub fn enabled(&self) -> bool {
        self.window_ns > 0
    }

    /// The relay moved bytes at `now` (relay ns): poll for the window from here.
    pub fn traffic(&self, now: u64) {
        if self.window_ns == 0 {
            return;
        }
        self.last.store(now, Ordering::Relaxed);
        if self.asleep.load(Ordering::Relaxed) && self.asleep.swap(false, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    fn within(&self, now: u64) -> bool {
        let last = self.last.load(Ordering::Relaxed);
        last != NEVER && now.saturating_sub(last) < self.window_ns
    }

    /// The spinner: yields while within the window of the last traffic,
    /// sleeps otherwise; adds the nanoseconds it spent spinning to `spun`.
    /// `now` is the relay's clock. Runs until its task is dropped.
    pub async fn run(self: Arc<Self>, now: impl Fn() -> u64, spun: Arc<AtomicU64>) {
        loop {
            self.asleep.store(true, Ordering::Release);
            if self.within(now()) {
                self.asleep.store(false, Ordering::Release);
            } else {
                // traffic() after the store above finds it asleep and
                // notifies: the permit is kept for this await
                self.wake.notified().await;
            }
            let start = now();
            let mut t = start;
            while self.within(t) {
                // the CPU to any other runnable thread first (sched_yield):
                // the spinner stays runnable, so its vCPU never halts, but it
                // does not hold a core the ranks or the other relay need
                std::thread::yield_now();
                tokio::task::yield_now().await;
                t = now();
            }
            spun.fetch_add(t - start, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn zero_window_is_off_and_traffic_is_ignored() {
        let b = BusyPoll::new(Duration::ZERO);
        assert!(!b.enabled());
        b.traffic(5);
        assert!(b.asleep.load(Ordering::Relaxed));
        assert!(!b.within(5));
    }

    #[test]
    fn window_counts_from_the_last_traffic() {
        let b = BusyPoll::new(Duration::from_micros(50));
        assert!(b.enabled());
        b.traffic(1_000_000);
        assert!(b.within(1_000_000 + 49_999));
        assert!(!b.within(1_000_000 + 50_000));
        assert!(
            !b.asleep.load(Ordering::Relaxed),
            "traffic wakes the spinner"
        );
    }

    /// The spinner spins for about the window after traffic, then sleeps
    /// (costs nothing) until the next traffic.
    #[tokio::test(flavor = "current_thread")]
    async fn spins_after_traffic_then_sleeps() {
        let t0 = Instant::now();
        let now = move || t0.elapsed().as_nanos() as u64;
        let b = Arc::new(BusyPoll::new(Duration::from_millis(20)));
        let spun = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(b.clone().run(now, spun.clone()));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(spun.load(Ordering::Relaxed), 0, "no traffic: no spinning");
        b.traffic(now());
        // a timer still fires while the spinner spins (the driver is polled)
        tokio::time::sleep(Duration::from_millis(60)).await;
        let first = spun.load(Ordering::Relaxed);
        // the window from the traffic (less if the spinner woke late on a
        // busy machine, a little more if it was descheduled at the end)
        assert!(
            (1..40_000_000).contains(&first),
            "spun {first} ns for a 20 ms window"
        );
        assert!(b.asleep.load(Ordering::Relaxed), "asleep after the window");
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            spun.load(Ordering::Relaxed),
            first,
            "asleep: no more spinning"
        );
        task.abort();
    }
}
