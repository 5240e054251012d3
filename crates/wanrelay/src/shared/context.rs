//! What every part of the relay reads: the configuration, the clock, the
//! counters, whether shutdown has begun, and the state shared by every
//! trunk to one peer (its pacer) or by every stream to it (a blast request
//! that could not be honoured is logged once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use wanproto::Pacer;

use super::busy_poll::BusyPoll;
use super::clock::Clock;
use super::log_budget::LogBudget;
use super::metrics::Registry;
use crate::config::Config;

/// What the trunks and streams to one peer share.
struct PeerShared {
    /// Shared pacer of every trunk to this peer (if paced).
    pacer: Option<Mutex<Pacer>>,
    /// A blast request to this peer was ignored (logged once).
    ignored_request: AtomicBool,
}

/// The relay's context, shared by every task.
pub struct Context {
    /// Configuration.
    pub config: Config,
    /// Relay time.
    pub clock: Clock,
    /// Counters.
    pub metrics: Registry,
    /// The log lines of refused connections and streams (a few a second).
    pub refusal_log: LogBudget,
    /// Polling without sleeping after traffic (`busy_poll`).
    pub busy_poll: Arc<BusyPoll>,
    peers: Vec<PeerShared>,
    shutting_down: AtomicBool,
    shutdown_tx: watch::Sender<bool>,
}

impl Context {
    /// The context of a relay with `config`; its clock starts now.
    pub fn new(config: Config) -> Arc<Context> {
        let clock = Clock::start();
        let peers = config
            .peers
            .iter()
            .map(|p| PeerShared {
                pacer: p.pacing_rate.map(|r| {
                    Mutex::new(
                        Pacer::new(r, p.pacing_burst, 0).unwrap_or_else(|_| Pacer::unlimited()),
                    )
                }),
                ignored_request: AtomicBool::new(false),
            })
            .collect();
        let (shutdown_tx, _) = watch::channel(false);
        let busy_poll = Arc::new(BusyPoll::new(config.busy_poll));
        Arc::new(Context {
            busy_poll,
            config,
            clock,
            metrics: Registry::default(),
            refusal_log: LogBudget::default(),
            peers,
            shutting_down: AtomicBool::new(false),
            shutdown_tx,
        })
    }

    /// Nanoseconds since the relay started (CLOCK_MONOTONIC).
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// The relay moved bytes now: with `busy_poll`, it keeps polling for
    /// that long (see [`BusyPoll`]).
    pub fn traffic(&self) {
        if self.busy_poll.enabled() {
            self.busy_poll.traffic(self.now());
        }
    }

    /// Sleeps until `at` (relay time in ns); forever for `None`.
    pub async fn sleep_until(&self, at: Option<u64>) {
        self.clock.sleep_until(at).await;
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// A receiver that turns true when shutdown begins.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown_tx.subscribe()
    }

    /// Begins shutdown: [`Context::is_shutting_down`] from now on, and
    /// every [`Context::shutdown_signal`] turns true.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
        let _ = self.shutdown_tx.send(true);
    }

    /// Whether a refusal may be logged now: `Some(n)`, n refusals left out
    /// of the log since the last one logged (see [`LogBudget`]).
    pub fn log_refusal(&self) -> Option<u64> {
        self.refusal_log.admit(self.now())
    }

    /// The pacer of peer `index`, if paced.
    pub fn pacer(&self, index: usize) -> Option<&Mutex<Pacer>> {
        self.peers[index].pacer.as_ref()
    }

    /// Whether this is the first blast request to peer `index` that
    /// cannot be honoured (it is logged once per peer).
    pub fn first_ignored_request(&self, index: usize) -> bool {
        !self.peers[index]
            .ignored_request
            .swap(true, Ordering::Relaxed)
    }
}
