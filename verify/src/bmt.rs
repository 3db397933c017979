//! The Binary Merkle Tree hash of a chunk payload and the content-addressed chunk (CAC)
//! address built on it, bit for bit as bee computes them (`pkg/bmt/reference`,
//! `pkg/cac`; docs/PROTOCOL.md §3).
//!
//! Owns: [`bmt_root`], [`cac_address`] and bee's `cac.Valid` as [`validate_cac`], and their
//! `_with` forms that take the keccak implementation ([`Lanes`]) explicitly.
//!
//! Never: checks the span against the payload length (bee takes the span as given, and so
//! do we), allocates, or touches signatures. A payload longer than [`CHUNK_SIZE`] is a
//! caller bug for [`bmt_root`]/[`cac_address`] (callers parse lengths first, e.g.
//! [`crate::SocRef::parse`]); [`validate_cac`] takes raw peer bytes and returns an error.
//!
//! The tree: the payload is zero-padded to 4096 bytes, cut into 128 segments of 32 bytes,
//! and pairs are hashed upward with `keccak256(left ‖ right)` for 7 levels (128 → 1).
//! Subtrees that hold only padding have a fixed hash per height, computed once; a short
//! payload therefore costs only the hashes on its own path, with the same result as
//! hashing the zeros.
//!
//! The pair hashes of one level are independent, so they go several per keccak-f\[1600\]
//! call. With AVX2 the whole tree runs in `bmt/lane_tree.rs`: each level stays in the SIMD
//! registers' lane-major form (four nodes per call) from the payload up, with
//! zero-subtree hashes in the lanes past the payload, so nothing is transposed between
//! levels and no level falls back to hashing one by one; the lone root is one scalar
//! keccak with BMI. A full chunk is 32 calls and that root, against 127 scalar hashes:
//! about 4 times as fast on an AVX2-only CPU (docs/BENCHMARKS.md, issue 12). Otherwise a
//! level goes through [`crate::keccak::hash_pairs`] in one call: 8 pairs per call with
//! AVX-512, one by one with the scalar reference (a full chunk: 64 + 32 + 16 + 8 + 4 + 2 +
//! 1 pairs), hashing only the live nodes. The implementation is chosen once per process
//! ([`Lanes::fastest`]); all of them give the same bytes (tests compare every available
//! one with the scalar one at every payload length).

use std::sync::OnceLock;

pub use crate::keccak::Lanes;

use crate::hexfmt::Hex;
use crate::keccak::hash_pairs;
use crate::wire::{Hash, keccak256};

// The AVX2 tree: a part of this module's hashing, not a module beside it.
#[cfg(target_arch = "x86_64")]
mod lane_tree;

/// Bytes in one BMT leaf segment (one keccak output).
pub const SEGMENT_SIZE: usize = 32;
/// Leaf segments in a full chunk: `CHUNK_SIZE / SEGMENT_SIZE`.
pub const BRANCHES: usize = 128;
/// Largest chunk payload in bytes (bee `swarm.ChunkSize`).
pub const CHUNK_SIZE: usize = SEGMENT_SIZE * BRANCHES;
/// Bytes of the little-endian span that precedes a CAC payload (bee `swarm.SpanSize`).
pub const SPAN_SIZE: usize = 8;

/// Hashing levels from 128 leaves to the root.
pub(crate) const LEVELS: usize = BRANCHES.trailing_zeros() as usize;
const _: () = assert!(1 << LEVELS == BRANCHES && CHUNK_SIZE == 4096 && LEVELS == 7);

/// `ZERO_SUBTREE[h]` is the hash of a subtree of height `h` over zero bytes
/// (`h = 0`: one zero segment).
fn zero_subtrees() -> &'static [Hash; LEVELS + 1] {
    static ZERO_SUBTREE: OnceLock<[Hash; LEVELS + 1]> = OnceLock::new();
    ZERO_SUBTREE.get_or_init(|| {
        let mut hashes = [[0u8; 32]; LEVELS + 1];
        for height in 1..=LEVELS {
            let child = hashes[height - 1];
            let mut pair = [0u8; 2 * SEGMENT_SIZE];
            pair[..SEGMENT_SIZE].copy_from_slice(&child);
            pair[SEGMENT_SIZE..].copy_from_slice(&child);
            hashes[height] = keccak256(&pair);
        }
        hashes
    })
}

/// The BMT root of `payload` (bee `bmt/reference.RefHasher(keccak256, 128)`), without the
/// span, with the widest keccak this CPU runs ([`Lanes::fastest`]).
///
/// # Panics
/// If `payload` is longer than [`CHUNK_SIZE`]: that is the caller's length check missing,
/// never a peer fault (peer bytes go through [`crate::SocRef::parse`] or
/// [`validate_cac`], which return errors).
pub fn bmt_root(payload: &[u8]) -> Hash {
    bmt_root_with(Lanes::fastest(), payload)
}

/// [`bmt_root`] with a chosen keccak implementation (tests and benchmarks compare them;
/// every available one gives the same root).
///
/// # Panics
/// If `payload` is longer than [`CHUNK_SIZE`] (see [`bmt_root`]), or if `lanes` is not
/// available on this CPU ([`Lanes::is_available`]): both caller bugs.
pub fn bmt_root_with(lanes: Lanes, payload: &[u8]) -> Hash {
    assert!(
        payload.len() <= CHUNK_SIZE,
        "bmt_root: payload of {} bytes exceeds the chunk size {CHUNK_SIZE}",
        payload.len()
    );
    assert!(
        lanes.is_available(),
        "bmt_root: keccak lanes {lanes} are not available on this CPU"
    );
    let zero = zero_subtrees();
    if payload.is_empty() {
        return zero[LEVELS];
    }
    #[cfg(target_arch = "x86_64")]
    if lanes == Lanes::Avx2 {
        return lane_tree::bmt_root(payload, zero);
    }

    // Two buffers, alternately read and written level by level. Only the nodes whose
    // subtree holds payload bytes ("live") are hashed; a live pair whose right child is
    // padding gets that child's zero-subtree hash written next to it.
    let mut padded = [0u8; CHUNK_SIZE];
    let mut parents_buffer = [0u8; CHUNK_SIZE / 2];
    let mut live = payload.len().div_ceil(SEGMENT_SIZE);
    let live_parents = live.div_ceil(2);
    // A payload of whole pairs is read in place; otherwise its last pair needs zeros.
    let leaves: &[u8] = if payload.len() == 2 * SEGMENT_SIZE * live_parents {
        payload
    } else {
        padded[..payload.len()].copy_from_slice(payload);
        &padded[..2 * SEGMENT_SIZE * live_parents]
    };
    hash_pairs(
        lanes,
        leaves,
        &mut parents_buffer[..SEGMENT_SIZE * live_parents],
    );
    live = live_parents;
    let mut nodes: &mut [u8] = &mut parents_buffer;
    let mut parents: &mut [u8] = &mut padded;
    let mut width = BRANCHES / 2;
    for zero_child in &zero[1..LEVELS] {
        if live % 2 == 1 && live < width {
            nodes[SEGMENT_SIZE * live..SEGMENT_SIZE * (live + 1)].copy_from_slice(zero_child);
        }
        let live_parents = live.div_ceil(2);
        hash_pairs(
            lanes,
            &nodes[..2 * SEGMENT_SIZE * live_parents],
            &mut parents[..SEGMENT_SIZE * live_parents],
        );
        core::mem::swap(&mut nodes, &mut parents);
        live = live_parents;
        width /= 2;
    }
    let mut root = [0u8; 32];
    root.copy_from_slice(&nodes[..SEGMENT_SIZE]);
    root
}

/// The CAC address `keccak256(span ‖ bmt_root(payload))`. The span is taken as given.
///
/// # Panics
/// If `payload` is longer than [`CHUNK_SIZE`] (see [`bmt_root`]).
pub fn cac_address(span: [u8; SPAN_SIZE], payload: &[u8]) -> Hash {
    cac_address_with(Lanes::fastest(), span, payload)
}

/// [`cac_address`] with a chosen keccak implementation for the BMT.
///
/// # Panics
/// As [`bmt_root_with`].
pub fn cac_address_with(lanes: Lanes, span: [u8; SPAN_SIZE], payload: &[u8]) -> Hash {
    let root = bmt_root_with(lanes, payload);
    let mut preimage = [0u8; SPAN_SIZE + SEGMENT_SIZE];
    preimage[..SPAN_SIZE].copy_from_slice(&span);
    preimage[SPAN_SIZE..].copy_from_slice(&root);
    keccak256(&preimage)
}

/// Why raw bytes are not the CAC at an expected address (bee `cac.Valid`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacError {
    /// Fewer bytes than the span.
    TooShort { len: usize, min: usize },
    /// More bytes than span plus a full payload.
    TooLong { len: usize, max: usize },
    /// The bytes hash to `computed`, which is not the expected address.
    AddressMismatch { computed: Hash },
}

impl core::fmt::Display for CacError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooShort { len, min } => {
                write!(
                    f,
                    "CAC data of {len} bytes is shorter than its {min}-byte span"
                )
            }
            Self::TooLong { len, max } => {
                write!(f, "CAC data of {len} bytes exceeds the maximum {max}")
            }
            Self::AddressMismatch { computed } => write!(
                f,
                "CAC data hashes to {}, not to the expected address",
                Hex(computed)
            ),
        }
    }
}

impl std::error::Error for CacError {}

/// Bee's `cac.Valid`: `data = span(8) ‖ payload(≤ 4096)` must hash to `expected`
/// (compared as raw bytes, so an expected address of the wrong length never matches).
/// Returns the computed address.
pub fn validate_cac(data: &[u8], expected: &[u8]) -> Result<Hash, CacError> {
    let Some((span, payload)) = data.split_first_chunk::<SPAN_SIZE>() else {
        return Err(CacError::TooShort {
            len: data.len(),
            min: SPAN_SIZE,
        });
    };
    if payload.len() > CHUNK_SIZE {
        return Err(CacError::TooLong {
            len: data.len(),
            max: SPAN_SIZE + CHUNK_SIZE,
        });
    }
    let computed = cac_address(*span, payload);
    if computed.as_slice() == expected {
        Ok(computed)
    } else {
        Err(CacError::AddressMismatch { computed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The obvious recursive definition over the zero-padded buffer, to check the
    /// zero-subtree shortcut against.
    fn reference_root(payload: &[u8]) -> Hash {
        fn node(data: &[u8]) -> Hash {
            if data.len() == 2 * SEGMENT_SIZE {
                return keccak256(data);
            }
            let (left, right) = data.split_at(data.len() / 2);
            let mut pair = [0u8; 64];
            pair[..32].copy_from_slice(&node(left));
            pair[32..].copy_from_slice(&node(right));
            keccak256(&pair)
        }
        let mut padded = vec![0u8; CHUNK_SIZE];
        padded[..payload.len()].copy_from_slice(payload);
        node(&padded)
    }

    #[test]
    fn shortcut_matches_reference_at_every_boundary() {
        let data: Vec<u8> = (0..CHUNK_SIZE).map(|i| (i * 7 + 3) as u8).collect();
        for len in [
            0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000, 2047, 2048, 2049, 4064, 4095, 4096,
        ] {
            assert_eq!(
                bmt_root(&data[..len]),
                reference_root(&data[..len]),
                "len {len}"
            );
        }
    }

    #[test]
    fn zero_payload_equals_empty_payload() {
        assert_eq!(bmt_root(&[]), bmt_root(&[0u8; CHUNK_SIZE]));
        assert_eq!(bmt_root(&[0u8; 5]), bmt_root(&[]));
    }

    #[test]
    #[should_panic(expected = "exceeds the chunk size")]
    fn oversized_payload_is_an_invariant_violation() {
        let _ = bmt_root(&[0u8; CHUNK_SIZE + 1]);
    }
}
