//! keccak256, the only hash of the BPS wire (chunk ids, SOC addresses, feed ids).
//!
//! Owns: the one-shot [`keccak256`] and the incremental [`Keccak256`] over tiny-keccak, so
//! that every crate hashes the same way. Never: any other hash function, and never SHA3-256
//! (which pads differently: Swarm and Ethereum use the original Keccak padding).

use tiny_keccak::{Hasher, Keccak};

use crate::Hash;

/// keccak256 of `data` (Ethereum/Swarm Keccak, not SHA3-256).
pub fn keccak256(data: &[u8]) -> Hash {
    let mut hasher = Keccak256::new();
    hasher.update(data);
    hasher.finalize()
}

/// Incremental keccak256: hash a concatenation without building it in memory.
#[derive(Clone)]
pub struct Keccak256(Keccak);

impl Keccak256 {
    /// A hasher with nothing absorbed yet.
    pub fn new() -> Self {
        Self(Keccak::v256())
    }

    /// Absorbs `data`; calls concatenate.
    pub fn update(&mut self, data: &[u8]) -> &mut Self {
        self.0.update(data);
        self
    }

    /// The hash of everything absorbed so far.
    pub fn finalize(self) -> Hash {
        let mut output = [0u8; 32];
        self.0.finalize(&mut output);
        output
    }
}

impl Default for Keccak256 {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Keccak256 {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Keccak256").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_matches_the_known_keccak256_digest() {
        // The well-known Keccak-256 of the empty string (not SHA3-256's a7ffc6f8...).
        assert_eq!(
            hex::encode(keccak256(b"")),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
        );
    }

    #[test]
    fn incremental_equals_one_shot_over_the_concatenation() {
        let mut hasher = Keccak256::new();
        hasher.update(b"bps-").update(b"service:").update(b"v1");
        assert_eq!(hasher.finalize(), keccak256(b"bps-service:v1"));
    }
}
