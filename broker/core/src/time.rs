//! Protocol time.
//!
//! Owns: `Millis`, the monotonic millisecond instant the I/O layer passes into every input of
//! the machine, and the saturating arithmetic on it.
//! Never does: read a clock. The machine only ever sees the `now` it is given, which is what
//! makes every deadline reproducible in tests and in the simulation.
//!
//! Convention: a function taking two instants takes `now` first, then the other one (the
//! deadline `at` that came due, the `until` of a blocklist entry).

use serde::Serialize;

/// A monotonic instant in milliseconds since an origin the I/O layer chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Millis(pub u64);

impl Millis {
    /// The instant `duration_ms` after this one, saturating at the end of time.
    #[must_use]
    pub fn plus_ms(self, duration_ms: u64) -> Millis {
        Millis(self.0.saturating_add(duration_ms))
    }

    /// The raw number of milliseconds.
    #[must_use]
    pub fn as_ms(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Millis;

    #[test]
    fn plus_saturates() {
        assert_eq!(Millis(5).plus_ms(7), Millis(12));
        assert_eq!(Millis(u64::MAX - 1).plus_ms(7), Millis(u64::MAX));
    }
}
