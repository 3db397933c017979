//! When messages are due: the open-loop schedule `t0 + k / rate`, and the clock it is read
//! against.
//!
//! Owns: [`Schedule`] (open loop with a rate, or closed loop), the mapping between a
//! sequence number and its intended send time, the number of messages due at an instant,
//! and [`now_ns`], the one clock of the generator (Unix nanoseconds, so a stamp written by
//! `bps-bench pub` on one host can be read by `bps-bench sub` on another with synchronised
//! clocks).
//!
//! Open loop means the generator never waits for the system under test before scheduling
//! the next message: message `k` is due at `t0 + k / rate` whether or not message `k − 1` has
//! been written, and latency is counted from that intended time. A stalled broker therefore
//! shows up as latency for every message that was due during the stall, instead of silently
//! lowering the offered rate (coordinated omission).
//!
//! Never: sleeps or sends; the sender decides how to wait.

use std::time::{SystemTime, UNIX_EPOCH};

const NANOS_PER_SECOND: u128 = 1_000_000_000;

/// The current time as Unix nanoseconds (CLOCK_REALTIME, a vDSO read).
pub fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        })
}

/// How a publisher paces its messages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Schedule {
    /// Message `k` is due at `t0_ns + k / rate` (rate in messages per second, > 0).
    Open {
        /// Intended send time of message 0, Unix ns.
        t0_ns: u64,
        /// Messages per second.
        rate: f64,
    },
    /// As fast as the stream accepts: the next message is written as soon as the previous
    /// one was (`--rate 0`).
    Closed,
}

impl Schedule {
    /// Open loop at `rate` messages per second from `t0_ns`; `rate` ≤ 0 (or not finite)
    /// means closed loop.
    pub fn new(t0_ns: u64, rate: f64) -> Self {
        if rate.is_finite() && rate > 0.0 {
            Self::Open { t0_ns, rate }
        } else {
            Self::Closed
        }
    }

    /// Whether this is the closed loop.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed)
    }

    /// The intended send time of message `sequence` (`None` in closed loop). Computed from
    /// `t0` for every message, never by adding intervals, so rounding never accumulates.
    pub fn intended_ns(&self, sequence: u64) -> Option<u64> {
        match *self {
            Self::Open { t0_ns, rate } => {
                let offset = (sequence as f64 / rate * 1e9).round();
                Some(t0_ns.saturating_add(offset as u64))
            }
            Self::Closed => None,
        }
    }

    /// How many messages are due at `now` (messages `0..n` have intended times ≤ `now`);
    /// `None` in closed loop.
    pub fn due(&self, now_ns: u64) -> Option<u64> {
        match *self {
            Self::Open { t0_ns, rate } => {
                if now_ns < t0_ns {
                    return Some(0);
                }
                let elapsed = u128::from(now_ns - t0_ns);
                // floor(elapsed * rate) + 1, corrected so that it agrees exactly with
                // intended_ns (whose rounding may differ from this product by one).
                let estimate = (elapsed as f64 * rate / NANOS_PER_SECOND as f64).floor() as u64;
                let mut due = estimate.saturating_add(1);
                while due > 0 && self.intended_ns(due - 1).is_some_and(|at| at > now_ns) {
                    due -= 1;
                }
                while self.intended_ns(due).is_some_and(|at| at <= now_ns) {
                    due += 1;
                }
                Some(due)
            }
            Self::Closed => None,
        }
    }

    /// Messages with intended times in `[from_ns, to_ns)`, as a range of sequence numbers
    /// (`None` in closed loop).
    pub fn window(&self, from_ns: u64, to_ns: u64) -> Option<std::ops::Range<u64>> {
        let first = self.due_before(from_ns)?;
        let end = self.due_before(to_ns)?;
        Some(first..end.max(first))
    }

    /// How many messages have intended times strictly before `at_ns`.
    fn due_before(&self, at_ns: u64) -> Option<u64> {
        match at_ns.checked_sub(1) {
            Some(last) => self.due(last),
            None => self.due(0).map(|_| 0),
        }
    }
}
