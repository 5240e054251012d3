//! A budget for the log lines that peers and member nodes can cause one per
//! connection (refusals): a flood of bad connections must not become a flood
//! of log lines. Within a second the first [`LogBudget::PER_SECOND`] lines
//! are written; the rest are counted, and the next line written says how
//! many were left out. The counters (metrics) still count every event.

use std::sync::Mutex;

const SECOND_NS: u64 = 1_000_000_000;

#[derive(Default)]
struct Window {
    start: u64,
    used: u32,
    skipped: u64,
}

/// The log budget of one kind of line.
#[derive(Default)]
pub struct LogBudget {
    window: Mutex<Window>,
}

impl LogBudget {
    /// Lines written per second at most.
    pub const PER_SECOND: u32 = 10;

    /// Whether a line may be written at relay time `now` (ns): `Some(n)`
    /// with the number of lines left out since the last one written, or
    /// `None` (left out, counted).
    pub fn admit(&self, now: u64) -> Option<u64> {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_sub(w.start) >= SECOND_NS {
            w.start = now;
            w.used = 0;
        }
        if w.used >= Self::PER_SECOND {
            w.skipped += 1;
            return None;
        }
        w.used += 1;
        Some(std::mem::take(&mut w.skipped))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_ten_lines_a_second_and_the_rest_counted() {
        let b = LogBudget::default();
        let written: Vec<_> = (0..25).map(|i| b.admit(1_000 + i)).collect();
        assert_eq!(written.iter().filter(|w| w.is_some()).count(), 10);
        assert!(written[..10].iter().all(|w| *w == Some(0)));
        assert_eq!(b.admit(SECOND_NS + 2_000), Some(15));
        assert_eq!(b.admit(SECOND_NS + 3_000), Some(0));
    }
}
