//! What one core's streams hold queued towards their peers, together: the ledger behind the
//! bound that keeps slow receivers from taking the frame memory readers need.
//!
//! Owns: `HeldBytes`, the sum of every port's held bytes on this core (queued, in a
//! backlog, or in a batch not yet written whole; each stream counts its own, so a frame
//! queued to a thousand counts a thousand times, an upper bound of what the queues pin).
//! Ports add and take away as they queue and write; the core compares the sum with its
//! share of `limits.queued_bytes_max` after it queues, and past it resets the streams
//! holding the most (see `shard`).
//! It also carries the time of the core's current turn, which ports stamp the moves of
//! their bytes with: a clock read per write would cost more than the rest of a delivery's
//! bookkeeping, and a stamp at most one turn old is exact enough for deadlines of seconds
//! and a stall threshold of hundreds of milliseconds.
//! Never does: decide whom to reset, or know a port.

use std::cell::Cell;
use std::time::Instant;

/// Bytes this core's ports hold, and the core's turn time.
#[derive(Debug)]
pub struct HeldBytes {
    total: Cell<usize>,
    turn_at: Cell<Instant>,
}

impl Default for HeldBytes {
    fn default() -> HeldBytes {
        HeldBytes {
            total: Cell::new(0),
            turn_at: Cell::new(Instant::now()),
        }
    }
}

impl HeldBytes {
    /// The time of the core's current turn.
    pub fn turn_at(&self) -> Instant {
        self.turn_at.get()
    }

    /// A turn starts at `at`.
    pub fn set_turn_at(&self, at: Instant) {
        self.turn_at.set(at);
    }

    /// Bytes held now.
    pub fn total(&self) -> usize {
        self.total.get()
    }

    pub fn add(&self, bytes: usize) {
        self.total.set(self.total.get() + bytes);
    }

    /// # Panics
    /// When more is given back than was held (a port's bug).
    pub fn release(&self, bytes: usize) {
        let total = self.total.get();
        assert!(total >= bytes, "held bytes released more than were held");
        self.total.set(total - bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::HeldBytes;

    #[test]
    fn adds_and_releases() {
        let held = HeldBytes::default();
        held.add(10);
        held.add(5);
        held.release(12);
        assert_eq!(held.total(), 3);
    }
}
