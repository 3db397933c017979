//! The Swarm hashes written out the slow, obvious way on tiny-keccak, as the oracle the
//! `soc` and `keccak_bmt` targets compare `bps_verify` and `bps_proto` against.
//!
//! Owns: [`keccak256`] of concatenated parts, the BMT root [`bmt_root`] (zero-pad to 4096
//! bytes, then hash pair by pair, level by level, with no shortcut for padding), the CAC and
//! SOC addresses, the feed id and bee's proximity order, bit by bit. Never: calls into the
//! crates under test, or takes any shortcut they take (zero-subtree hashes, multi-lane
//! keccak, `leading_zeros`), so agreement means something.

use tiny_keccak::{Hasher, Keccak};

/// Bytes of a full chunk payload (bee `swarm.ChunkSize`).
pub const CHUNK_BYTES: usize = 4096;
/// Bytes of one BMT segment and of every hash.
pub const SEGMENT_BYTES: usize = 32;
/// Bytes bee's proximity compares: `MaxPO / 8 + 1` with `MaxPO = 31`.
const PROXIMITY_BYTES: usize = 4;
/// Bee's proximity when no differing bit is found in the compared bytes.
const PROXIMITY_MAX: u8 = 31;

/// keccak256 (the original Keccak padding, not SHA3) of `parts` concatenated.
pub fn keccak256(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Keccak::v256();
    for part in parts {
        hasher.update(part);
    }
    let mut digest = [0u8; 32];
    hasher.finalize(&mut digest);
    digest
}

/// The BMT root of `payload` (at most 4096 bytes): 128 zero-padded 32-byte segments, each
/// level the keccak256 of every adjacent pair, until one hash is left.
pub fn bmt_root(payload: &[u8]) -> [u8; 32] {
    assert!(
        payload.len() <= CHUNK_BYTES,
        "reference BMT of an oversize payload"
    );
    let mut padded = payload.to_vec();
    padded.resize(CHUNK_BYTES, 0);
    let mut level: Vec<[u8; 32]> = padded
        .chunks_exact(SEGMENT_BYTES)
        .map(|segment| {
            let mut node = [0u8; 32];
            node.copy_from_slice(segment);
            node
        })
        .collect();
    while level.len() > 1 {
        level = level
            .chunks_exact(2)
            .map(|pair| keccak256(&[&pair[0], &pair[1]]))
            .collect();
    }
    level[0]
}

/// `keccak256(span ‖ bmt_root(payload))`.
pub fn cac_address(span: [u8; 8], payload: &[u8]) -> [u8; 32] {
    keccak256(&[&span, &bmt_root(payload)])
}

/// `keccak256(id ‖ owner)`.
pub fn soc_address(id: &[u8; 32], owner: &[u8; 20]) -> [u8; 32] {
    keccak256(&[id, owner])
}

/// `keccak256(topic ‖ be64(index))`.
pub fn feed_id(topic: &[u8; 32], index: u64) -> [u8; 32] {
    keccak256(&[topic, &index.to_be_bytes()])
}

/// Bee's `swarm.Proximity`: the position of the first differing bit, most significant bit
/// first, within the first four bytes; 31 if none differs there.
pub fn proximity(one: &[u8; 32], other: &[u8; 32]) -> u8 {
    for byte in 0..PROXIMITY_BYTES {
        for bit in 0..8u8 {
            let mask = 0x80u8 >> bit;
            if (one[byte] ^ other[byte]) & mask != 0 {
                return byte as u8 * 8 + bit;
            }
        }
    }
    PROXIMITY_MAX
}
