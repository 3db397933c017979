//! A bounded least-recently-used map from owner address to public key (ARCHITECTURE.md §3:
//! "after one full recovery, cache addr → public key").
//!
//! Owns: [`KeyCache`]. One per verification worker, so it needs no lock.
//!
//! Never: holds a key that recovery did not produce for its address. Only
//! [`crate::verifier`] inserts, and only the key recovered from a chunk that passed bee's
//! `soc.Valid` at `keccak256(id ‖ owner)`, so `address(key) == owner` for every entry and a
//! peer cannot plant a key under someone else's address. Never grows past its capacity:
//! inserting into a full cache evicts the least recently used entry.
//!
//! Layout: a slab of entries linked in recency order (indices, no pointers) plus a hash
//! index; lookup, touch, insert and evict are O(1).

use std::collections::HashMap;

use crate::batch::KnownKey;
use crate::wire::Address;

/// No entry: the end of the recency list.
const NONE: usize = usize::MAX;

#[derive(Debug)]
struct Entry {
    key: KnownKey,
    /// More recently used neighbour, or [`NONE`] for the most recent.
    newer: usize,
    /// Less recently used neighbour, or [`NONE`] for the least recent.
    older: usize,
}

/// Owner address → public key, at most `capacity` entries, least recently used evicted.
#[derive(Debug)]
pub struct KeyCache {
    capacity: usize,
    index: HashMap<Address, usize>,
    entries: Vec<Entry>,
    newest: usize,
    oldest: usize,
}

impl KeyCache {
    /// An empty cache for up to `capacity` keys.
    ///
    /// # Panics
    /// If `capacity` is zero (config validation keeps it positive).
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0, "a key cache holds at least one key");
        Self {
            capacity,
            index: HashMap::new(),
            entries: Vec::new(),
            newest: NONE,
            oldest: NONE,
        }
    }

    /// Keys held now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Most keys ever held at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The key of `address`, marked most recently used.
    pub fn get(&mut self, address: &Address) -> Option<KnownKey> {
        let slot = *self.index.get(address)?;
        self.touch(slot);
        Some(self.entries[slot].key)
    }

    /// Whether `address` has a key, without touching its recency.
    pub fn contains(&self, address: &Address) -> bool {
        self.index.contains_key(address)
    }

    /// Stores `key` under its own address as the most recently used entry, evicting the
    /// least recently used one if the cache is full.
    pub fn insert(&mut self, key: KnownKey) {
        let address = key.address();
        if let Some(&slot) = self.index.get(&address) {
            self.entries[slot].key = key;
            self.touch(slot);
            return;
        }
        let slot = if self.entries.len() < self.capacity {
            self.entries.push(Entry {
                key,
                newer: NONE,
                older: NONE,
            });
            self.entries.len() - 1
        } else {
            let slot = self.oldest;
            self.unlink(slot);
            self.index.remove(&self.entries[slot].key.address());
            self.entries[slot].key = key;
            slot
        };
        self.index.insert(address, slot);
        self.push_newest(slot);
    }

    fn touch(&mut self, slot: usize) {
        if self.newest != slot {
            self.unlink(slot);
            self.push_newest(slot);
        }
    }

    fn unlink(&mut self, slot: usize) {
        let Entry { newer, older, .. } = self.entries[slot];
        match newer {
            NONE => self.newest = older,
            newer => self.entries[newer].older = older,
        }
        match older {
            NONE => self.oldest = newer,
            older => self.entries[older].newer = newer,
        }
        self.entries[slot].newer = NONE;
        self.entries[slot].older = NONE;
    }

    fn push_newest(&mut self, slot: usize) {
        self.entries[slot].older = self.newest;
        self.entries[slot].newer = NONE;
        match self.newest {
            NONE => self.oldest = slot,
            newest => self.entries[newest].newer = slot,
        }
        self.newest = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::SigningKey;

    fn key(seed: u8) -> KnownKey {
        let signing = SigningKey::from_bytes(&[seed; 32]).expect("valid key");
        KnownKey::new(&signing.public_key())
    }

    #[test]
    fn evicts_the_least_recently_used() {
        let keys: Vec<KnownKey> = (1..=4).map(key).collect();
        let mut cache = KeyCache::new(3);
        for known in &keys[..3] {
            cache.insert(*known);
        }
        assert_eq!(cache.len(), 3);
        // Touch the oldest; the second becomes the least recently used.
        assert_eq!(cache.get(&keys[0].address()), Some(keys[0]));
        cache.insert(keys[3]);
        assert_eq!(cache.len(), 3);
        assert!(!cache.contains(&keys[1].address()));
        for known in [keys[0], keys[2], keys[3]] {
            assert_eq!(cache.get(&known.address()), Some(known));
        }
    }

    #[test]
    fn reinserting_refreshes_without_growing() {
        let mut cache = KeyCache::new(2);
        let (first, second, third) = (key(1), key(2), key(3));
        cache.insert(first);
        cache.insert(second);
        cache.insert(first);
        assert_eq!(cache.len(), 2);
        cache.insert(third);
        assert!(cache.contains(&first.address()));
        assert!(!cache.contains(&second.address()));
    }

    #[test]
    fn capacity_one_keeps_the_last() {
        let mut cache = KeyCache::new(1);
        for seed in 1..=5 {
            cache.insert(key(seed));
            assert_eq!(cache.len(), 1);
            assert!(cache.contains(&key(seed).address()));
        }
        assert!(!cache.is_empty());
        assert_eq!(cache.capacity(), 1);
    }

    #[test]
    fn long_random_sequence_matches_a_naive_model() {
        let keys: Vec<KnownKey> = (1..=12).map(key).collect();
        let mut cache = KeyCache::new(5);
        // The model: addresses from least to most recently used.
        let mut model: Vec<Address> = Vec::new();
        let mut state = 0x1234_5678u32;
        for _ in 0..2000 {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let known = keys[(state >> 16) as usize % keys.len()];
            let address = known.address();
            if state & 1 == 0 {
                let got = cache.get(&address);
                let held = model.iter().position(|held| *held == address);
                assert_eq!(got.is_some(), held.is_some());
                if let Some(position) = held {
                    model.remove(position);
                    model.push(address);
                }
            } else {
                cache.insert(known);
                if let Some(position) = model.iter().position(|held| *held == address) {
                    model.remove(position);
                } else if model.len() == 5 {
                    model.remove(0);
                }
                model.push(address);
            }
            assert_eq!(cache.len(), model.len());
            for held in &model {
                assert!(cache.contains(held));
            }
        }
    }
}
