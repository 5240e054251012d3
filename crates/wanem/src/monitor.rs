//! The 1 ms traffic monitor, computed from departure and drop events.
//!
//! Pure: no clock, no I/O. A [`BinRecorder`] belongs to one direction and is
//! fed by [`crate::impair::Direction`] in time order; finished bins are
//! collected until the runtime drains them into the CSV file.

/// Width of one monitor bin in nanoseconds (1 ms).
pub const BIN_NS: u64 = 1_000_000;

/// What one direction did during one 1 ms bin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bin {
    /// Bin number: milliseconds since monitoring started.
    pub index: u64,
    /// Bytes that left the bottleneck (finished serialization) in this bin.
    pub bytes: u64,
    /// Packets that left the bottleneck in this bin.
    pub packets: u64,
    /// Packets dropped on arrival in this bin (queue + loss + down).
    pub drops: u64,
    /// Largest queue occupancy (bytes waiting for the bottleneck) seen in this bin.
    pub max_queue: u64,
}

/// Accumulates events of one direction into consecutive 1 ms bins.
#[derive(Debug)]
pub struct BinRecorder {
    start_ns: u64,
    current: Bin,
    finished: Vec<Bin>,
}

impl BinRecorder {
    /// Starts recording at `now`; `queue` is the occupancy at that moment.
    pub fn new(now: u64, queue: u64) -> Self {
        BinRecorder {
            start_ns: now,
            current: Bin {
                max_queue: queue,
                ..Bin::default()
            },
            finished: Vec::new(),
        }
    }

    fn bin_of(&self, t: u64) -> u64 {
        t.saturating_sub(self.start_ns) / BIN_NS
    }

    /// Closes every bin that ends at or before `t`. `queue` is the occupancy
    /// between the last event and `t`; it is the starting maximum of each new bin.
    pub fn roll_to(&mut self, t: u64, queue: u64) {
        let target = self.bin_of(t);
        while self.current.index < target {
            let next = Bin {
                index: self.current.index + 1,
                max_queue: queue,
                ..Bin::default()
            };
            self.finished.push(std::mem::replace(&mut self.current, next));
        }
    }

    /// A packet left the bottleneck (caller has rolled to its departure time).
    pub fn departure(&mut self, bytes: u64) {
        self.current.bytes += bytes;
        self.current.packets += 1;
    }

    /// A packet was dropped on arrival (caller has rolled to the arrival time).
    pub fn drop_packet(&mut self) {
        self.current.drops += 1;
    }

    /// The queue grew to `queue` bytes (caller has rolled to the arrival time).
    pub fn queue_level(&mut self, queue: u64) {
        self.current.max_queue = self.current.max_queue.max(queue);
    }

    /// Hands out every finished bin, oldest first.
    pub fn drain_finished(&mut self, out: &mut Vec<Bin>) {
        out.append(&mut self.finished);
    }

    /// Ends recording: finished bins plus the current, possibly partial, bin.
    pub fn finish(mut self, out: &mut Vec<Bin>) {
        out.append(&mut self.finished);
        out.push(self.current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_bins_are_emitted_for_idle_time() {
        let mut rec = BinRecorder::new(500, 0);
        rec.roll_to(500 + 3 * BIN_NS + 1, 0);
        let mut out = Vec::new();
        rec.drain_finished(&mut out);
        assert_eq!(out.iter().map(|b| b.index).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(out.iter().all(|b| b.bytes == 0 && b.packets == 0 && b.drops == 0));
    }

    #[test]
    fn events_land_in_the_bin_of_their_time() {
        let mut rec = BinRecorder::new(0, 0);
        rec.roll_to(10, 0);
        rec.departure(100);
        rec.roll_to(2 * BIN_NS, 0);
        rec.drop_packet();
        let mut out = Vec::new();
        rec.finish(&mut out);
        assert_eq!(out.len(), 3);
        assert_eq!((out[0].bytes, out[0].packets), (100, 1));
        assert_eq!(out[1], Bin { index: 1, ..Bin::default() });
        assert_eq!(out[2].drops, 1);
    }

    #[test]
    fn queue_carried_into_new_bin_counts_as_its_maximum() {
        let mut rec = BinRecorder::new(0, 0);
        rec.queue_level(3000);
        rec.roll_to(BIN_NS + 5, 3000);
        let mut out = Vec::new();
        rec.finish(&mut out);
        assert_eq!(out[0].max_queue, 3000);
        assert_eq!(out[1].max_queue, 3000);
    }
}
