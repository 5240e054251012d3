//! Counters, the names of every metric, and the Prometheus text format
//! (the endpoint that serves it is the daemon's, [`crate::daemon::endpoint`]).
//!
//! Counters live in a registry keyed by name and labels; hot paths fetch
//! the `Arc<AtomicU64>` of their counter once (per stream or trunk) and add
//! to it without locking. Gauges (trunks up, live streams, RTT) are read
//! from the trunks when the endpoint is scraped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wanproto::Reason;

/// Name, help and type of every metric the relay exposes.
pub const METRICS: &[(&str, &str, &str)] = &[
    ("wanrelay_inside_connections_total", "counter", "Inside (shim) connections accepted by the listener."),
    ("wanrelay_inside_refused_total", "counter", "Inside connections refused before a stream was opened (or a kind-4 blast request refused), by reason."),
    ("wanrelay_inside_active", "gauge", "Inside connections open now."),
    ("wanrelay_streams_opened_total", "counter", "Streams opened, by peer, trunk and side (out: opened by this relay for a shim; in: opened by the peer)."),
    ("wanrelay_streams_refused_total", "counter", "Streams refused, by peer, side and reason (out: the far relay refused; in: this relay refused the peer's OPEN)."),
    ("wanrelay_streams_reset_total", "counter", "Streams that ended by a reset after being accepted, by peer, trunk and who reset (local endpoint, peer, trunk lost)."),
    ("wanrelay_streams_closed_total", "counter", "Streams that ended gracefully (both directions finished), by peer and trunk."),
    ("wanrelay_stream_bytes_total", "counter", "Stream payload bytes, by peer, trunk and direction (to_wan: read from a local socket; from_wan: written to a local socket)."),
    ("wanrelay_trunk_bytes_total", "counter", "Bytes on trunk sockets (frames included), by peer, trunk and direction."),
    ("wanrelay_trunk_connects_total", "counter", "Trunk connections that authenticated, by peer and trunk."),
    ("wanrelay_trunk_closes_total", "counter", "Trunk connections that closed, by peer, trunk and reason."),
    ("wanrelay_trunk_suspends_total", "counter", "Times a trunk's transport was lost and its session kept for a resumption, by peer and trunk."),
    ("wanrelay_trunk_resumes_total", "counter", "Times a trunk's session resumed on a new connection (streams intact), by peer and trunk."),
    ("wanrelay_trunk_dial_failures_total", "counter", "Failed TCP connects to a peer relay, by peer."),
    ("wanrelay_trunk_refused_total", "counter", "Trunk connections refused during or after the handshake, by reason (auth: wrong key; unknown_peer; wrong_cluster; dial_conflict; protocol; timeout; limit)."),
    ("wanrelay_trunk_up", "gauge", "1 if the trunk is authenticated and open, by peer and trunk."),
    ("wanrelay_trunk_streams", "gauge", "Streams live on the trunk now."),
    ("wanrelay_trunk_rtt_seconds", "gauge", "Last round-trip time measured with PING on the trunk."),
    ("wanrelay_trunk_send_buffered_bytes", "gauge", "Stream bytes written to the trunk and not yet sent."),
    ("wanrelay_busy_poll_nanoseconds_total", "counter", "Time the relay spent polling without sleeping after traffic (busy_poll)."),
    ("wanrelay_errors_total", "counter", "Internal errors by kind (accept failures and the like)."),
    ("wanrelay_rbudp_up", "gauge", "1 if the trunk's RBUDP session is up (both SESSION messages exchanged), by peer and trunk."),
    ("wanrelay_rbudp_datagrams_total", "counter", "RBUDP datagrams by peer and kind (sent: all sent, first or resent; resent: resends; received: with new data)."),
    ("wanrelay_rbudp_bytes_total", "counter", "RBUDP datagram bytes sent (UDP payload) and data bytes received, by peer."),
    ("wanrelay_rbudp_blasts_total", "counter", "RBUDP blasts started (sent) and received complete, by peer."),
    ("wanrelay_rbudp_reports_total", "counter", "RBUDP missing-packet reports sent and received, by peer."),
    ("wanrelay_rbudp_session_dropped_total", "counter", "Datagrams a session dropped, by peer and reason (duplicate, malformed, stray, forged, stale, early)."),
    ("wanrelay_rbudp_dropped_total", "counter", "Datagrams dropped before reaching a session, by reason (stray: no live session has its id; malformed: not RBUDP)."),
    ("wanrelay_rbudp_stream_bytes_total", "counter", "Stream payload bytes carried by blasts, by peer and direction (to_wan, from_wan); the rest went over the trunk."),
    ("wanrelay_rbudp_window_bytes", "gauge", "Bytes of blasts not yet released: side=sent ours held by the peer, side=received the peer's held here."),
    ("wanrelay_rbudp_protocol_errors_total", "counter", "Trunks closed for an RBUDP protocol violation of the peer."),
    ("wanrelay_rbudp_requests_total", "counter", "Blast requests of MPI rank pairs (kind-3 preamble, the peer's OPEN, or kind-4 preamble for an open connection), by peer, side (out: from a local shim; in: in the peer's OPEN; update: kind 4) and outcome (blasted; clamped: blasted within the peer's rate and payload; no_rbudp: tcp peer or RBUDP session not up, the stream stays on the trunk; withdrawn: kind 4 withdrawing a request)."),
    ("wanrelay_rbudp_control_ignored_total", "counter", "RBUDP control messages from a peer configured here with transport tcp (ignored: everything stays on the trunk)."),
    ("wanrelay_rbudp_test_dropped_total", "counter", "TEST ONLY (peer.test_drop): datagrams dropped on purpose before sending."),
];

/// Labels as (key, value) pairs.
pub type Labels<'a> = &'a [(&'a str, &'a str)];

/// The counter registry.
#[derive(Default)]
pub struct Registry {
    counters: Mutex<BTreeMap<(String, String), Arc<AtomicU64>>>,
}

fn render_labels(labels: Labels<'_>) -> String {
    let mut s = String::new();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let v = v
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let _ = write!(s, "{k}=\"{v}\"");
    }
    s
}

impl Registry {
    /// The counter `name{labels}`, created at 0 on first use.
    pub fn counter(&self, name: &str, labels: Labels<'_>) -> Arc<AtomicU64> {
        let key = (name.to_owned(), render_labels(labels));
        let mut m = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(key).or_default().clone()
    }

    /// Adds 1 to `name{labels}`.
    pub fn inc(&self, name: &str, labels: Labels<'_>) {
        self.counter(name, labels).fetch_add(1, Ordering::Relaxed);
    }

    /// Renders every counter plus `gauges` (name, labels, value) in the
    /// Prometheus text format.
    pub fn render(&self, gauges: &[(String, String, f64)]) -> String {
        let mut lines: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let m = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        for ((name, labels), v) in m.iter() {
            lines.entry(name.as_str()).or_default().push(sample(
                name,
                labels,
                v.load(Ordering::Relaxed) as f64,
            ));
        }
        for (name, labels, v) in gauges {
            lines
                .entry(name.as_str())
                .or_default()
                .push(sample(name, labels, *v));
        }
        let mut out = String::new();
        for (name, kind, help) in METRICS {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            if let Some(l) = lines.get(name) {
                for s in l {
                    out.push_str(s);
                }
            }
        }
        out
    }
}

fn sample(name: &str, labels: &str, v: f64) -> String {
    if labels.is_empty() {
        format!("{name} {v}\n")
    } else {
        format!("{name}{{{labels}}} {v}\n")
    }
}

/// A gauge sample for [`Registry::render`].
pub fn gauge(name: &str, labels: Labels<'_>, v: f64) -> (String, String, f64) {
    (name.to_owned(), render_labels(labels), v)
}

/// The label of a reason code in logs and metrics.
pub fn reason_label(r: Reason) -> &'static str {
    match r {
        Reason::Refused => "refused",
        Reason::Unreachable => "unreachable",
        Reason::TimedOut => "timed_out",
        Reason::NotMember => "not_member",
        Reason::SourceMismatch => "source_mismatch",
        Reason::NoRoute => "no_route",
        Reason::ConnectionReset => "connection_reset",
        Reason::Overloaded => "overloaded",
        Reason::ShuttingDown => "shutting_down",
        Reason::Protocol => "protocol",
        Reason::UnsupportedVersion => "unsupported_version",
        Reason::TrunkLost => "trunk_lost",
        Reason::Internal => "internal",
        Reason::NoSuchConnection => "no_such_connection",
        Reason::Other(_) => "other",
    }
}
