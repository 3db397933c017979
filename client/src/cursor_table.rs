//! The per-publisher DATA cursors of one cohort (R27 mirrored on the client, R41; under
//! implicit FEED_TOPIC the feed's writers): the next index expected from each owner, for at
//! most a fixed number of owners, the least recently advanced evicted first.
//!
//! Owns: [`CursorTable`] (look up, advance with the eviction it caused),
//! [`EvictedCursor`] and the default bound [`CURSORS_PER_SUBSCRIBER_MAX`].
//!
//! Never: decides what is a retransmit or a gap (the subscriber compares), or persists.
//! An evicted owner is unknown again: its next frame is taken at any index, so a retransmit
//! of its older frames can be accepted once more (the risk R27 accepts for the broker's
//! table, taken on the client for the same reason: a flood of fresh keys under ALL or on a
//! graffiti feed must not grow memory).

use std::collections::{BTreeMap, HashMap};

use bps_proto::Address;

/// Per-publisher cursors a subscriber keeps by default: as many as a broker with its default
/// table does per cohort (R27), more than one roster can name (a ROSTER chunk holds at most
/// 186 addresses), and a flood of fresh keys under ALL costs at most about 130 KiB.
pub const CURSORS_PER_SUBSCRIBER_MAX: usize = 1024;

/// A cursor pushed out of the table by a newer owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictedCursor {
    /// The owner whose cursor is gone: its next frame restarts at any index.
    pub owner: Address,
    /// The next index it had.
    pub cursor: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    next: u64,
    /// When it was last advanced (the key in `order`).
    stamp: u64,
}

/// Owner → next expected DATA index, at most `capacity` owners (module docs).
#[derive(Debug, Clone)]
pub struct CursorTable {
    capacity: usize,
    entries: HashMap<Address, Entry>,
    /// Stamp → owner: the first entry is the least recently advanced.
    order: BTreeMap<u64, Address>,
    /// The next stamp; one per advance, so 2^64 of them never run out.
    clock: u64,
}

impl CursorTable {
    /// An empty table for at most `capacity` owners (at least 1).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 1, "a cursor table holds at least one owner");
        Self {
            capacity,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// The most owners kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Owners held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no owner is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The next index expected from `owner`; `None` if never seen or evicted.
    pub fn get(&self, owner: &Address) -> Option<u64> {
        self.entries.get(owner).map(|entry| entry.next)
    }

    /// Sets `owner`'s cursor to `next` and makes it the most recent; a new owner in a full
    /// table evicts the least recently advanced one, which is returned.
    pub fn advance(&mut self, owner: Address, next: u64) -> Option<EvictedCursor> {
        let stamp = self.clock;
        self.clock += 1;
        if let Some(entry) = self.entries.get_mut(&owner) {
            self.order.remove(&entry.stamp);
            *entry = Entry { next, stamp };
            self.order.insert(stamp, owner);
            return None;
        }
        let evicted = if self.entries.len() >= self.capacity {
            self.evict_oldest()
        } else {
            None
        };
        self.entries.insert(owner, Entry { next, stamp });
        self.order.insert(stamp, owner);
        assert!(
            self.entries.len() <= self.capacity && self.order.len() == self.entries.len(),
            "the table and its order hold the same owners, within the bound"
        );
        evicted
    }

    fn evict_oldest(&mut self) -> Option<EvictedCursor> {
        let (_, oldest) = self.order.pop_first()?;
        let entry = self.entries.remove(&oldest)?;
        Some(EvictedCursor {
            owner: oldest,
            cursor: entry.next,
        })
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The obvious model: (owner, next) pairs, least recently advanced first.
    struct Model {
        capacity: usize,
        pairs: Vec<(Address, u64)>,
    }

    impl Model {
        fn advance(&mut self, owner: Address, next: u64) -> Option<EvictedCursor> {
            let mut evicted = None;
            if let Some(position) = self.pairs.iter().position(|(known, _)| *known == owner) {
                self.pairs.remove(position);
            } else if self.pairs.len() == self.capacity {
                let (oldest, cursor) = self.pairs.remove(0);
                evicted = Some(EvictedCursor {
                    owner: oldest,
                    cursor,
                });
            }
            self.pairs.push((owner, next));
            evicted
        }

        fn get(&self, owner: &Address) -> Option<u64> {
            self.pairs
                .iter()
                .find(|(known, _)| known == owner)
                .map(|(_, next)| *next)
        }
    }

    fn owner(byte: u8) -> Address {
        [byte; 20]
    }

    #[test]
    fn r27_a_long_random_sequence_agrees_with_the_model() {
        for (capacity, owners) in [(1usize, 3u8), (4, 9), (16, 20), (32, 48)] {
            let mut rng = StdRng::seed_from_u64(capacity as u64);
            let mut table = CursorTable::new(capacity);
            let mut model = Model {
                capacity,
                pairs: Vec::new(),
            };
            let mut evictions = 0;
            for step in 0..20_000u64 {
                let who = owner(rng.random_range(0..owners));
                let next = rng.random_range(0..1_000u64);
                let evicted = table.advance(who, next);
                assert_eq!(evicted, model.advance(who, next), "step {step}");
                evictions += usize::from(evicted.is_some());
                assert!(table.len() <= capacity);
                assert_eq!(table.len(), model.pairs.len());
                let probe = owner(rng.random_range(0..owners));
                assert_eq!(table.get(&probe), model.get(&probe), "step {step}");
            }
            assert!(evictions > 1_000, "the sequence exercised eviction");
            for byte in 0..owners {
                assert_eq!(table.get(&owner(byte)), model.get(&owner(byte)));
            }
        }
    }

    #[test]
    fn r27_the_least_recently_advanced_owner_is_evicted() {
        let mut table = CursorTable::new(2);
        assert!(table.is_empty());
        assert_eq!(table.advance(owner(1), 5), None);
        assert_eq!(table.advance(owner(2), 7), None);
        // Advancing 1 again makes 2 the oldest.
        assert_eq!(table.advance(owner(1), 6), None);
        assert_eq!(
            table.advance(owner(3), 1),
            Some(EvictedCursor {
                owner: owner(2),
                cursor: 7
            })
        );
        assert_eq!(table.get(&owner(2)), None, "evicted means unknown");
        assert_eq!(table.get(&owner(1)), Some(6));
        assert_eq!((table.len(), table.capacity()), (2, 2));
    }
}
