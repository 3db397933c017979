//! Publisher cursors of an explicit or ALL cohort (R27).
//!
//! Owns: `CursorTable`, the next acceptable DATA index per publisher address, bounded with
//! least-recently-advanced eviction in O(1) (an intrusive list over a slab).
//! Never does: decide what a below-cursor frame means (the machine counts it as a retransmit,
//! R16) or keep a cursor per stream or per session (R27: per address per cohort).
//!
//! An evicted publisher's cursor restarts at 0 (R27 allows it): its next frames at any index
//! are accepted again, which subscribers, who keep their own cursors (R41), filter.

use std::collections::HashMap;

use bps_proto::Address;

const NIL: usize = usize::MAX;

#[derive(Debug)]
struct Entry {
    addr: Address,
    cursor: u64,
    /// Towards the more recently advanced end.
    newer: usize,
    /// Towards the less recently advanced end.
    older: usize,
}

/// Bounded map from publisher address to its cursor (the next index it may publish).
#[derive(Debug)]
pub struct CursorTable {
    capacity: usize,
    slots: HashMap<Address, usize>,
    entries: Vec<Entry>,
    newest: usize,
    oldest: usize,
}

impl CursorTable {
    /// An empty table holding at most `capacity` cursors.
    ///
    /// # Panics
    /// If `capacity` is 0 (the config validation rules it out).
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "cursor table needs room for one cursor");
        CursorTable {
            capacity,
            slots: HashMap::new(),
            entries: Vec::new(),
            newest: NIL,
            oldest: NIL,
        }
    }

    /// The cursor of `addr`: 0 when it never published or was evicted.
    #[must_use]
    pub fn get(&self, addr: &Address) -> u64 {
        self.slots
            .get(addr)
            .map_or(0, |slot| self.entries[*slot].cursor)
    }

    /// Cursors held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Moves the cursor of `addr` to `next` and marks it most recently advanced. When a new
    /// address does not fit, the least recently advanced one is evicted; its address is
    /// returned.
    ///
    /// # Panics
    /// If `next` is not above the current cursor (the machine checks R16 first).
    pub fn advance(&mut self, addr: &Address, next: u64) -> Option<Address> {
        if let Some(&slot) = self.slots.get(addr) {
            assert!(
                next > self.entries[slot].cursor,
                "cursor may only move forward"
            );
            self.entries[slot].cursor = next;
            self.unlink(slot);
            self.link_newest(slot);
            return None;
        }
        let mut evicted = None;
        let slot = if self.entries.len() < self.capacity {
            self.entries.push(Entry {
                addr: *addr,
                cursor: next,
                newer: NIL,
                older: NIL,
            });
            self.entries.len() - 1
        } else {
            let slot = self.oldest;
            self.unlink(slot);
            let old = std::mem::replace(&mut self.entries[slot].addr, *addr);
            self.slots.remove(&old);
            self.entries[slot].cursor = next;
            evicted = Some(old);
            slot
        };
        self.slots.insert(*addr, slot);
        self.link_newest(slot);
        evicted
    }

    fn unlink(&mut self, slot: usize) {
        let (newer, older) = (self.entries[slot].newer, self.entries[slot].older);
        if newer == NIL {
            self.newest = older;
        } else {
            self.entries[newer].older = older;
        }
        if older == NIL {
            self.oldest = newer;
        } else {
            self.entries[older].newer = newer;
        }
    }

    fn link_newest(&mut self, slot: usize) {
        self.entries[slot].newer = NIL;
        self.entries[slot].older = self.newest;
        if self.newest == NIL {
            self.oldest = slot;
        } else {
            self.entries[self.newest].newer = slot;
        }
        self.newest = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::CursorTable;

    fn addr(byte: u8) -> [u8; 20] {
        [byte; 20]
    }

    #[test]
    fn cursors_start_at_zero_and_move_forward() {
        let mut table = CursorTable::new(4);
        assert_eq!(table.get(&addr(1)), 0);
        assert_eq!(table.advance(&addr(1), 5), None);
        assert_eq!(table.get(&addr(1)), 5);
        assert_eq!(table.advance(&addr(1), 9), None);
        assert_eq!(table.get(&addr(1)), 9);
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn least_recently_advanced_is_evicted() {
        let mut table = CursorTable::new(3);
        for byte in 1..=3 {
            assert_eq!(table.advance(&addr(byte), 1), None);
        }
        // 1 becomes the newest; 2 is now the oldest.
        assert_eq!(table.advance(&addr(1), 2), None);
        assert_eq!(table.advance(&addr(4), 1), Some(addr(2)));
        assert_eq!(table.get(&addr(2)), 0);
        assert_eq!(table.advance(&addr(5), 1), Some(addr(3)));
        assert_eq!(table.advance(&addr(6), 1), Some(addr(1)));
        assert_eq!(table.len(), 3);
        assert_eq!(table.get(&addr(4)), 1);
        assert_eq!(table.get(&addr(5)), 1);
        assert_eq!(table.get(&addr(6)), 1);
    }

    #[test]
    fn capacity_one_replaces_every_time() {
        let mut table = CursorTable::new(1);
        assert_eq!(table.advance(&addr(1), 1), None);
        assert_eq!(table.advance(&addr(1), 3), None);
        assert_eq!(table.advance(&addr(2), 1), Some(addr(1)));
        assert_eq!(table.get(&addr(1)), 0);
        assert_eq!(table.get(&addr(2)), 1);
    }

    #[test]
    #[should_panic(expected = "cursor may only move forward")]
    fn moving_back_is_a_bug() {
        let mut table = CursorTable::new(2);
        let _ = table.advance(&addr(1), 5);
        let _ = table.advance(&addr(1), 5);
    }
}
