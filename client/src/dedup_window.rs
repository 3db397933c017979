//! The implicit-authorship dedup window (R28 mirrored on the client): the keys of the most
//! recently accepted chunks (chunk address, or the wrapped CAC address under ANCHOR), at
//! most a fixed number of them, the oldest forgotten first.
//!
//! Owns: [`DedupWindow`] (insert-if-new with first-in-first-out forgetting) and the default
//! bound [`IMPLICIT_DEDUP_CHUNKS_MAX`].
//!
//! Never: computes keys (`bps_verify` does) or persists. A forgotten chunk delivered again
//! is accepted again: the risk R28 accepts.

use std::collections::{HashSet, VecDeque};

use bps_proto::Hash;

/// Chunks a subscriber remembers by default under implicit authorship: as many as a broker
/// with its default window does (R28), so the subscriber forgets no sooner than the broker;
/// about half a MiB.
pub const IMPLICIT_DEDUP_CHUNKS_MAX: usize = 4096;

/// A bounded set of recently seen keys (module docs).
#[derive(Debug, Clone)]
pub struct DedupWindow {
    capacity: usize,
    seen: HashSet<Hash>,
    /// Arrival order: the front is the oldest.
    order: VecDeque<Hash>,
}

impl DedupWindow {
    /// An empty window for at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "a dedup window holds at least one key");
        Self {
            capacity,
            seen: HashSet::new(),
            order: VecDeque::new(),
        }
    }

    /// The most keys kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Records `key`; `false` if it is already in the window. A new key in a full window
    /// forgets the oldest one.
    pub fn insert(&mut self, key: Hash) -> bool {
        if !self.seen.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.seen.remove(&oldest);
        }
        assert!(
            self.seen.len() == self.order.len() && self.order.len() <= self.capacity,
            "the window and its order hold the same keys, within the bound"
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn r28_a_long_random_sequence_agrees_with_the_model() {
        for (capacity, keys) in [(1usize, 3u8), (8, 20), (64, 100)] {
            let mut rng = StdRng::seed_from_u64(capacity as u64);
            let mut window = DedupWindow::new(capacity);
            // The model: the accepted keys in arrival order, the last `capacity` remembered.
            let mut accepted: Vec<Hash> = Vec::new();
            let mut refused = 0;
            for step in 0..20_000 {
                let key = [rng.random_range(0..keys); 32];
                let start = accepted.len().saturating_sub(capacity);
                let remembered = accepted[start..].contains(&key);
                assert_eq!(window.insert(key), !remembered, "step {step}");
                if remembered {
                    refused += 1;
                } else {
                    accepted.push(key);
                }
                assert_eq!(window.len(), accepted.len().min(capacity));
            }
            assert!(
                refused > 100 && accepted.len() > 1_000,
                "both outcomes seen"
            );
        }
    }

    #[test]
    fn r28_the_oldest_key_is_forgotten_first() {
        let mut window = DedupWindow::new(2);
        assert!(window.is_empty());
        assert!(window.insert([1; 32]));
        assert!(window.insert([2; 32]));
        assert!(!window.insert([1; 32]), "a duplicate does not refresh it");
        assert!(window.insert([3; 32]));
        assert!(window.insert([1; 32]), "1 was the oldest: forgotten");
        assert!(!window.insert([3; 32]));
        assert_eq!((window.len(), window.capacity()), (2, 2));
    }
}
