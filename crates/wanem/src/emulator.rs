//! All links of one wanem process and the control operations on them.
//! Pure: the runtime passes `now` and does the I/O.

use serde::Serialize;

use crate::config::{Config, Dir, SettingsPatch};
use crate::impair::{Counters, Direction, Settings};
use crate::monitor::Bin;

/// One link: its two directions, indexed by [`Dir::index`].
#[derive(Debug)]
pub struct Link {
    /// Unique name.
    pub name: String,
    /// Largest packet expected (bytes).
    pub mtu: u64,
    /// `[a_to_b, b_to_a]`.
    pub dirs: [Direction; 2],
}

/// Which directions a `set` touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirSelect {
    /// One direction.
    One(Dir),
    /// Both directions.
    Both,
}

impl DirSelect {
    /// Parses `a_to_b`, `b_to_a` or `both`.
    pub fn parse(s: &str) -> Option<DirSelect> {
        match s {
            "a_to_b" => Some(DirSelect::One(Dir::AToB)),
            "b_to_a" => Some(DirSelect::One(Dir::BToA)),
            "both" => Some(DirSelect::Both),
            _ => None,
        }
    }

    fn dirs(self) -> &'static [Dir] {
        match self {
            DirSelect::One(Dir::AToB) => &[Dir::AToB],
            DirSelect::One(Dir::BToA) => &[Dir::BToA],
            DirSelect::Both => &Dir::BOTH,
        }
    }
}

/// Counters of one direction as reported by `show`.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct ShownCounters {
    /// Packets read from the ingress TUN.
    pub rx_packets: u64,
    /// Bytes read from the ingress TUN.
    pub rx_bytes: u64,
    /// Packets written to the egress TUN after the delay.
    pub tx_packets: u64,
    /// Bytes written to the egress TUN after the delay.
    pub tx_bytes: u64,
    /// Drop-tail drops.
    pub drop_queue: u64,
    /// Random-loss drops.
    pub drop_loss: u64,
    /// Link-down drops.
    pub drop_down: u64,
    /// Bytes waiting for the bottleneck now.
    pub queue_bytes: u64,
    /// Releases more than 0.2 ms late.
    pub late_200us: u64,
    /// Releases more than 1 ms late.
    pub late_1ms: u64,
    /// Packets that left the bottleneck (the monitor's `packets`).
    pub dep_packets: u64,
    /// Bytes that left the bottleneck (the monitor's `bytes`).
    pub dep_bytes: u64,
    /// Released packets the egress TUN refused.
    pub drop_tx: u64,
    /// Sum of release lateness (ns); divide by tx_packets + drop_tx for the mean.
    pub late_sum_ns: u64,
    /// Largest release lateness (ns).
    pub late_max_ns: u64,
}

impl ShownCounters {
    fn new(c: Counters, queue_bytes: u64) -> Self {
        ShownCounters {
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            drop_queue: c.drop_queue,
            drop_loss: c.drop_loss,
            drop_down: c.drop_down,
            queue_bytes,
            late_200us: c.late_200us,
            late_1ms: c.late_1ms,
            dep_packets: c.dep_packets,
            dep_bytes: c.dep_bytes,
            drop_tx: c.drop_tx,
            late_sum_ns: c.late_sum_ns,
            late_max_ns: c.late_max_ns,
        }
    }
}

/// One direction as reported by `show`: settings, then counters.
#[derive(Debug, Serialize)]
pub struct ShownDirection {
    /// The direction's settings, shown as top-level fields.
    #[serde(flatten)]
    pub settings: Settings,
    /// Counters since start or the last `reset_counters`.
    pub counters: ShownCounters,
}

/// One link as reported by `show`.
#[derive(Debug, Serialize)]
pub struct ShownLink {
    /// Link name.
    pub name: String,
    /// MTU (bytes).
    pub mtu: u64,
    /// a -> b.
    pub a_to_b: ShownDirection,
    /// b -> a.
    pub b_to_a: ShownDirection,
}

/// The `show` reply.
#[derive(Debug, Serialize)]
pub struct ShowReply {
    /// Always true.
    pub ok: bool,
    /// Seconds since wanem started.
    pub uptime_s: f64,
    /// Path of the running monitor CSV, or null.
    pub monitor: Option<String>,
    /// Every link, in config order.
    pub links: Vec<ShownLink>,
}

/// Every link of one process.
#[derive(Debug)]
pub struct Emulator {
    links: Vec<Link>,
    started: u64,
}

impl Emulator {
    /// Builds the links of `config` with empty queues at time `now`.
    pub fn new(config: &Config, now: u64) -> Self {
        let links = config
            .links
            .iter()
            .map(|l| Link {
                name: l.name.clone(),
                mtu: l.mtu,
                dirs: [
                    Direction::new(l.a_to_b.clone(), now),
                    Direction::new(l.b_to_a.clone(), now),
                ],
            })
            .collect();
        Emulator {
            links,
            started: now,
        }
    }

    /// The links, in config order.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The links, mutable (the runtime feeds and drains their directions).
    pub fn links_mut(&mut self) -> &mut [Link] {
        &mut self.links
    }

    /// Earliest release time over all directions.
    pub fn next_wakeup(&self) -> Option<u64> {
        self.links
            .iter()
            .flat_map(|l| l.dirs.iter())
            .filter_map(Direction::next_wakeup)
            .min()
    }

    /// The `show` reply as of `now`.
    pub fn show(&mut self, now: u64, monitor: Option<String>) -> ShowReply {
        let links = self
            .links
            .iter_mut()
            .map(|l| {
                let mut shown = l.dirs.iter_mut().map(|d| {
                    d.advance(now);
                    ShownDirection {
                        settings: d.settings().clone(),
                        counters: ShownCounters::new(d.counters(), d.queue_bytes()),
                    }
                });
                let a_to_b = shown.next().expect("two directions");
                let b_to_a = shown.next().expect("two directions");
                ShownLink {
                    name: l.name.clone(),
                    mtu: l.mtu,
                    a_to_b,
                    b_to_a,
                }
            })
            .collect();
        ShowReply {
            ok: true,
            uptime_s: now.saturating_sub(self.started) as f64 / 1e9,
            monitor,
            links,
        }
    }

    /// Applies `patch` to the selected directions of `link` at `now`, all
    /// or nothing.
    ///
    /// # Errors
    /// Unknown link, or the first invalid setting (naming link, direction
    /// and field); nothing is changed then.
    pub fn set(
        &mut self,
        now: u64,
        link: &str,
        select: DirSelect,
        patch: &SettingsPatch,
    ) -> Result<(), String> {
        let l = self
            .links
            .iter_mut()
            .find(|l| l.name == link)
            .ok_or_else(|| format!("unknown link {link:?}"))?;
        let mut new = Vec::with_capacity(2);
        for &dir in select.dirs() {
            let s = patch
                .apply(l.dirs[dir.index()].settings(), l.mtu)
                .map_err(|e| format!("link {} {dir}: {e}", l.name))?;
            new.push((dir, s));
        }
        for (dir, s) in new {
            let d = &mut l.dirs[dir.index()];
            d.advance(now);
            d.set_settings(s);
        }
        Ok(())
    }

    /// Zeroes all counters.
    pub fn reset_counters(&mut self, now: u64) {
        for d in self.links.iter_mut().flat_map(|l| l.dirs.iter_mut()) {
            d.advance(now);
            d.reset_counters();
        }
    }

    /// Starts the monitor of every direction at `now`.
    pub fn start_monitor(&mut self, now: u64) {
        for d in self.links.iter_mut().flat_map(|l| l.dirs.iter_mut()) {
            d.start_monitor(now);
        }
    }

    /// Finished bins of every direction up to `now` (or, with `stop`, all
    /// bins, ending the monitor), as `out[link * 2 + dir]`.
    pub fn collect_bins(&mut self, now: u64, stop: bool, out: &mut [Vec<Bin>]) {
        let dirs = self.links.iter_mut().flat_map(|l| l.dirs.iter_mut());
        for (d, bins) in dirs.zip(out.iter_mut()) {
            if stop {
                d.stop_monitor(now, bins);
            } else {
                d.drain_bins(now, bins);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn emulator() -> Emulator {
        let text = r#"{"links":[{"name":"a-b","a":{"netns":"/n1","dev":"d1"},"b":{"netns":"/n2","dev":"d2"},
            "a_to_b":{"rate_bps":12000000,"delay_us":1000,"queue_bytes":3000},
            "b_to_a":{"rate_bps":12000000,"delay_us":1000,"queue_bytes":3000}}]}"#;
        Emulator::new(&Config::parse(text, Path::new("t")).unwrap(), 0)
    }

    fn patch(json: &str) -> SettingsPatch {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn set_both_changes_both_directions() {
        let mut e = emulator();
        e.set(0, "a-b", DirSelect::Both, &patch(r#"{"delay_us":7}"#)).unwrap();
        assert!(e.links()[0].dirs.iter().all(|d| d.settings().delay_us == 7));
    }

    #[test]
    fn invalid_set_changes_nothing_and_names_the_field() {
        let mut e = emulator();
        let err = e
            .set(0, "a-b", DirSelect::Both, &patch(r#"{"delay_us":5,"queue_bytes":1000}"#))
            .unwrap_err();
        assert_eq!(err, "link a-b a_to_b: queue_bytes 1000 is smaller than one MTU (1500)");
        assert!(e.links()[0].dirs.iter().all(|d| d.settings().delay_us == 1000));
        let err = e.set(0, "x", DirSelect::Both, &patch("{}")).unwrap_err();
        assert_eq!(err, "unknown link \"x\"");
    }

    #[test]
    fn show_reports_settings_and_counters() {
        let mut e = emulator();
        for _ in 0..3 {
            e.links_mut()[0].dirs[0].enqueue(0, vec![0; 1500]);
        }
        let v = serde_json::to_value(e.show(500_000, None)).unwrap();
        let d = &v["links"][0]["a_to_b"];
        assert_eq!(d["delay_us"], 1000);
        assert_eq!(d["counters"]["rx_packets"], 3);
        assert_eq!(d["counters"]["drop_queue"], 1);
        assert_eq!(d["counters"]["queue_bytes"], 3000);
        assert_eq!(v["links"][0]["name"], "a-b");
        assert_eq!(v["ok"], true);
        e.reset_counters(500_000);
        let v = serde_json::to_value(e.show(500_000, None)).unwrap();
        assert_eq!(v["links"][0]["a_to_b"]["counters"]["rx_packets"], 0);
        assert_eq!(v["links"][0]["a_to_b"]["counters"]["queue_bytes"], 3000);
    }
}
