//! The dedup window of an implicit cohort (R28).
//!
//! Owns: `DedupWindow`, the last N dedup keys (chunk address, or the wrapped CAC address for
//! ANCHOR, as `bps_verify` reports them) in arrival order with O(1) lookup.
//! Never does: compute keys or grow past its bound. Replay of an evicted key is accepted;
//! R28 calls that an accepted risk.

use std::collections::{HashSet, VecDeque};

use bps_proto::Hash;

/// A FIFO set of the most recent dedup keys.
#[derive(Debug)]
pub struct DedupWindow {
    capacity: usize,
    order: VecDeque<Hash>,
    present: HashSet<Hash>,
}

impl DedupWindow {
    /// An empty window of `capacity` keys.
    ///
    /// # Panics
    /// If `capacity` is 0 (the config validation rules it out).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "dedup window needs room for one key");
        DedupWindow {
            capacity,
            order: VecDeque::new(),
            present: HashSet::new(),
        }
    }

    /// Records `key`; false when it is already in the window (a retransmit).
    pub fn insert(&mut self, key: Hash) -> bool {
        if !self.present.insert(key) {
            return false;
        }
        if self.order.len() == self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.present.remove(&oldest);
        }
        self.order.push_back(key);
        true
    }

    /// Keys held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::DedupWindow;

    #[test]
    fn duplicates_are_refused_until_evicted() {
        let mut window = DedupWindow::new(2);
        assert!(window.insert([1; 32]));
        assert!(!window.insert([1; 32]));
        assert!(window.insert([2; 32]));
        assert!(window.insert([3; 32]));
        assert_eq!(window.len(), 2);
        assert!(
            window.insert([1; 32]),
            "an evicted key is accepted again (R28)"
        );
        assert!(
            window.insert([2; 32]),
            "evicted by the re-insertion of the first key"
        );
        assert!(!window.insert([1; 32]));
    }
}
