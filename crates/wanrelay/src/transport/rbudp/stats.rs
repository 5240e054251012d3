//! The counters of RBUDP sessions: as metric samples, and the totals of
//! the sessions that closed.

use std::collections::HashMap;
use std::sync::Mutex;

use wanproto::rbudp::RbudpStats;

use crate::shared::metrics::gauge;

/// The counters of every closed RBUDP session, by peer index.
#[derive(Default)]
pub struct ClosedSessions {
    by_peer: Mutex<HashMap<usize, RbudpStats>>,
}

impl ClosedSessions {
    /// Adds the counters of a closed session of peer `peer`.
    pub fn add(&self, peer: usize, stats: RbudpStats) {
        let mut m = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
        add_stats(m.entry(peer).or_default(), &stats);
    }

    /// The totals of the closed sessions of peer `peer`.
    pub fn total(&self, peer: usize) -> RbudpStats {
        self.by_peer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&peer)
            .copied()
            .unwrap_or_default()
    }
}

/// The metric samples of the RBUDP sessions of one peer.
pub fn stats_samples(peer: &str, s: &RbudpStats) -> Vec<(String, String, f64)> {
    let mut out = Vec::new();
    for (kind, v) in [
        ("sent", s.datagrams_sent),
        ("resent", s.datagrams_resent),
        ("received", s.datagrams_received),
    ] {
        out.push(gauge(
            "wanrelay_rbudp_datagrams_total",
            &[("peer", peer), ("kind", kind)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.bytes_sent), ("received", s.bytes_received)] {
        out.push(gauge(
            "wanrelay_rbudp_bytes_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.blasts_sent), ("received", s.blasts_received)] {
        out.push(gauge(
            "wanrelay_rbudp_blasts_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (d, v) in [("sent", s.reports_sent), ("received", s.reports_received)] {
        out.push(gauge(
            "wanrelay_rbudp_reports_total",
            &[("peer", peer), ("direction", d)],
            v as f64,
        ));
    }
    for (r, v) in [
        ("duplicate", s.dropped_duplicate),
        ("malformed", s.dropped_malformed),
        ("stray", s.dropped_stray),
        ("forged", s.dropped_forged),
        ("stale", s.dropped_stale),
        ("early", s.dropped_early),
    ] {
        out.push(gauge(
            "wanrelay_rbudp_session_dropped_total",
            &[("peer", peer), ("reason", r)],
            v as f64,
        ));
    }
    out
}

/// Adds `b` to `a`.
pub fn add_stats(a: &mut RbudpStats, b: &RbudpStats) {
    a.datagrams_sent += b.datagrams_sent;
    a.datagrams_resent += b.datagrams_resent;
    a.bytes_sent += b.bytes_sent;
    a.blasts_sent += b.blasts_sent;
    a.blasts_delivered += b.blasts_delivered;
    a.reports_received += b.reports_received;
    a.datagrams_received += b.datagrams_received;
    a.bytes_received += b.bytes_received;
    a.blasts_received += b.blasts_received;
    a.reports_sent += b.reports_sent;
    a.dropped_duplicate += b.dropped_duplicate;
    a.dropped_malformed += b.dropped_malformed;
    a.dropped_stray += b.dropped_stray;
    a.dropped_forged += b.dropped_forged;
    a.dropped_stale += b.dropped_stale;
    a.dropped_early += b.dropped_early;
}
