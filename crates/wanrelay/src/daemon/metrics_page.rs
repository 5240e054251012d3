//! The metrics page: every counter, plus the gauges read from the trunks
//! (and their RBUDP sessions) when it is scraped.

use std::collections::HashMap;
use std::sync::Arc;

use super::relay::Relay;
use crate::config::PeerConfig;
use crate::shared::metrics::gauge;
use crate::transport::rbudp::stats::{add_stats, stats_samples};
use crate::transport::trunk::Trunk;

/// A gauge sample (name, labels, value).
type Sample = (String, String, f64);

/// Bytes (sent, received) of the live trunk connections, by (peer, slot).
type LiveBytes = HashMap<(usize, usize), (u64, u64)>;

impl Relay {
    /// The metrics page.
    pub fn render_metrics(&self) -> String {
        let mut gauges = Vec::new();
        gauges.push(gauge(
            "wanrelay_inside_active",
            &[],
            (self.ctx.config.max_inside_connections - self.inside_permits.available_permits())
                as f64,
        ));
        let mut live_bytes = LiveBytes::new();
        for (i, p) in self.ctx.config.peers.iter().enumerate() {
            let slots = self.trunks.snapshot(i);
            if p.rbudp.is_some() {
                self.rbudp_gauges(i, p, &slots, &mut gauges);
            }
            trunk_gauges(i, p, &slots, &mut gauges, &mut live_bytes);
        }
        self.trunk_bytes(&live_bytes, &mut gauges);
        self.ctx.metrics.render(&gauges)
    }

    /// The RBUDP gauges of peer `i` (`p`) with trunks `slots`: each
    /// session's state and windows, then the counters of every session of
    /// the peer, live or closed.
    fn rbudp_gauges(
        &self,
        i: usize,
        p: &PeerConfig,
        slots: &[Option<Arc<Trunk>>],
        gauges: &mut Vec<Sample>,
    ) {
        let mut total = self.closed_rbudp.total(i);
        for (s, t) in slots.iter().enumerate() {
            let Some(t) = t else { continue };
            let g = t.lock();
            let Some(link) = g.rbudp.as_ref() else {
                continue;
            };
            add_stats(&mut total, &link.session.stats());
            let slot = s.to_string();
            let labels = [("peer", p.name.as_str()), ("trunk", slot.as_str())];
            gauges.push(gauge(
                "wanrelay_rbudp_up",
                &labels,
                f64::from(u8::from(
                    link.peer_addr.is_some() && link.session.is_ready(),
                )),
            ));
            for (side, used) in [
                ("sent", link.session.peer_window_used()),
                ("received", link.session.receive_window_used()),
            ] {
                gauges.push(gauge(
                    "wanrelay_rbudp_window_bytes",
                    &[
                        ("peer", p.name.as_str()),
                        ("trunk", slot.as_str()),
                        ("side", side),
                    ],
                    used as f64,
                ));
            }
        }
        gauges.extend(stats_samples(&p.name, &total));
    }

    /// Trunk bytes: closed connections of each slot plus the live one.
    fn trunk_bytes(&self, live_bytes: &LiveBytes, gauges: &mut Vec<Sample>) {
        let closed = self.closed_bytes();
        for (i, p) in self.ctx.config.peers.iter().enumerate() {
            for s in 0..p.trunks {
                let (cs, cr) = closed.get(&(i, s)).copied().unwrap_or_default();
                let (ls, lr) = live_bytes.get(&(i, s)).copied().unwrap_or_default();
                let slot = s.to_string();
                for (d, v) in [("sent", cs + ls), ("received", cr + lr)] {
                    gauges.push(gauge(
                        "wanrelay_trunk_bytes_total",
                        &[
                            ("peer", p.name.as_str()),
                            ("trunk", &slot),
                            ("direction", d),
                        ],
                        v as f64,
                    ));
                }
            }
        }
    }
}

/// The gauges of the trunks `slots` of peer `i` (`p`), and their live
/// byte counts into `live_bytes`.
fn trunk_gauges(
    i: usize,
    p: &PeerConfig,
    slots: &[Option<Arc<Trunk>>],
    gauges: &mut Vec<Sample>,
    live_bytes: &mut LiveBytes,
) {
    for (s, t) in slots.iter().enumerate() {
        let slot = s.to_string();
        let labels = [("peer", p.name.as_str()), ("trunk", slot.as_str())];
        let Some(t) = t else {
            gauges.push(gauge("wanrelay_trunk_up", &labels, 0.0));
            continue;
        };
        let g = t.lock();
        let up = g.conn.is_established();
        gauges.push(gauge("wanrelay_trunk_up", &labels, f64::from(u8::from(up))));
        gauges.push(gauge(
            "wanrelay_trunk_streams",
            &labels,
            g.conn.stream_count() as f64,
        ));
        gauges.push(gauge(
            "wanrelay_trunk_send_buffered_bytes",
            &labels,
            g.conn.buffered_send_bytes() as f64,
        ));
        if let Some(rtt) = g.conn.rtt() {
            gauges.push(gauge(
                "wanrelay_trunk_rtt_seconds",
                &labels,
                rtt as f64 / 1e9,
            ));
        }
        let st = g.conn.stats();
        live_bytes.insert((i, s), (st.bytes_sent, st.bytes_received));
    }
}
