//! A rate limit for the log lines peers can trigger.
//!
//! Owns: `LogGate`, a token bucket of `log.peer_lines_per_s_max` lines per second (with as
//! many in a burst) per core. A bad frame, a missed Join deadline, a blocklisting are worth a
//! line each, but a peer that makes them by the thousand must not turn logging into work:
//! beyond the rate lines are dropped and counted (`bps_log_lines_suppressed_total`).
//! Never does: write anything itself, or block. (The writer behind `tracing` is
//! non-blocking too, see `lifecycle::init_logging`.)

use std::cell::Cell;
use std::time::Instant;

/// Lines allowed per second, and their burst, on one core.
#[derive(Debug)]
pub struct LogGate {
    lines_per_s: u32,
    tokens: Cell<f64>,
    refilled: Cell<Option<Instant>>,
}

impl LogGate {
    /// A gate of `lines_per_s` lines per second (0 lets nothing through).
    pub fn new(lines_per_s: u32) -> LogGate {
        LogGate {
            lines_per_s,
            tokens: Cell::new(f64::from(lines_per_s)),
            refilled: Cell::new(None),
        }
    }

    /// Whether one more line may be written at `now`.
    pub fn allow(&self, now: Instant) -> bool {
        let rate = f64::from(self.lines_per_s);
        let elapsed = self
            .refilled
            .get()
            .map_or(0.0, |at| now.saturating_duration_since(at).as_secs_f64());
        self.refilled.set(Some(now));
        let tokens = (self.tokens.get() + elapsed * rate).min(rate);
        if tokens >= 1.0 {
            self.tokens.set(tokens - 1.0);
            true
        } else {
            self.tokens.set(tokens);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::LogGate;

    #[test]
    fn a_burst_beyond_the_rate_is_held_back_until_tokens_refill() {
        let gate = LogGate::new(3);
        let start = Instant::now();
        let allowed = (0..10).filter(|_| gate.allow(start)).count();
        assert_eq!(allowed, 3);
        assert!(!gate.allow(start + Duration::from_millis(100)));
        assert!(gate.allow(start + Duration::from_millis(500)));
        let quiet = LogGate::new(0);
        assert!(!quiet.allow(start));
    }
}
