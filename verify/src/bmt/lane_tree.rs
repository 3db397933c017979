//! The BMT on AVX2 with every level kept lane-major: the [`Lanes::Avx2`] path of
//! [`crate::bmt_root_with`].
//!
//! Owns: [`bmt_root`], which hashes a payload's tree level by level in groups of four
//! nodes, each group one [`keccak256_x4`] call, from the leaves (straight from the payload
//! bytes) to the two nodes below the root, without ever leaving the lane-major form in
//! between, and then the root.
//!
//! Never: runs without AVX2 ([`bmt_root`] asserts [`Lanes::Avx2`] is available first),
//! allocates, or decides the tree's shape: the zero-subtree hashes and the level count
//! come from [`crate::bmt`].
//!
//! The form: a [`Group`] is four consecutive nodes of one level, as the four digest
//! words of [`keccak256_x4`] (register `w` holds word `w` of nodes 0..4 in lanes 0..4).
//! Nodes `4g..4g + 4` of a level are group `g`, so the live nodes of a short payload are a
//! prefix of the groups. The parents of groups `2h` and `2h + 1` are group `h` of the next
//! level: their message words are the children's words interleaved (`vpunpck{l,h}qdq`, then
//! `vpermq` to put the pairs of the first group in lanes 0-1 and of the second in 2-3),
//! eight shuffles per call instead of a transpose out and a transpose back in. A level is
//! written over the one it is read from (group `h` is written after groups `2h` and
//! `2h + 1` are read, and `h ≤ 2h`).
//!
//! Padding: lanes past the payload's nodes hold the hash of an all-zero subtree of their
//! height, which is exactly what bee's tree has there. At the leaves they are the digests
//! of zero messages (the payload is zero-padded to a whole group); a missing right-hand
//! group is the splatted zero-subtree hash of its height. So the odd node out of a level
//! needs no special case, and neither do the narrow top levels: 4 and 2 pairs are one call
//! each, the other lanes hashing zero subtrees.
//!
//! A full chunk is 16 + 8 + 4 + 2 + 1 + 1 calls and the root: 127 hashes in 32 calls and
//! one scalar hash, the least a 4-lane schedule allows (the two nodes below the root have
//! a call to themselves, and the root is alone). Alone, the root is faster as one keccak on
//! the integer units with BMI: 0.27 µs against 0.37 µs for a 4-lane call (AMD EPYC,
//! Zen 3). A 4-lane call hashes four nodes in about the time tiny-keccak hashes one, so the
//! tree is about 4 times as fast as the scalar one with its 127 tiny-keccak hashes; of its
//! time the permutation is 95 %, the scalar root 2 %, the shuffles and loads here 2 %.

use core::arch::x86_64::{
    _mm256_permute4x64_epi64, _mm256_set1_epi64x, _mm256_setzero_si256, _mm256_unpackhi_epi64,
    _mm256_unpacklo_epi64,
};

use crate::bmt::{CHUNK_SIZE, LEVELS, Lanes};
use crate::keccak::{
    self, Avx2Words, DIGEST_SIZE, DIGEST_WORDS, MESSAGE_WORDS, PAIR_SIZE, keccak256_bmi,
    keccak256_x4, load_messages_x4, store_digests_x4,
};
use crate::wire::Hash;

/// Nodes per group: the lanes of one AVX2 keccak call.
const GROUP_NODES: usize = 4;
/// Payload bytes under one leaf-level group: four 64-byte segment pairs.
const GROUP_PAYLOAD_BYTES: usize = GROUP_NODES * PAIR_SIZE;
/// Groups of the widest level (64 parents of the 128 segments of a full chunk).
const LEVEL_GROUPS_MAX: usize = CHUNK_SIZE / GROUP_PAYLOAD_BYTES;
/// `vpermq` selector `[0, 2, 1, 3]`: lanes 0, 2 of the first interleaved group, then 1, 3.
const PAIRS_IN_ORDER: i32 = 0b11_01_10_00;
const _: () = assert!(LEVEL_GROUPS_MAX == 16 && 1 << LEVELS == 2 * GROUP_NODES * 16);

/// Four nodes of one level, lane-major (module docs).
type Group = Avx2Words<DIGEST_WORDS>;

/// The BMT root of a payload of 1..=[`CHUNK_SIZE`] bytes; `zero_subtrees[h]` is the hash
/// of an all-zero subtree of height `h`.
///
/// # Panics
/// If the CPU lacks AVX2, or the payload is empty or longer than a chunk: caller bugs
/// ([`crate::bmt_root_with`] checks all three first).
pub(crate) fn bmt_root(payload: &[u8], zero_subtrees: &[Hash; LEVELS + 1]) -> Hash {
    assert!(
        Lanes::Avx2.is_available(),
        "lane tree: this CPU has no AVX2"
    );
    assert!(
        !payload.is_empty() && payload.len() <= CHUNK_SIZE,
        "lane tree: payload of {} bytes is not 1..={CHUNK_SIZE}",
        payload.len()
    );
    // SAFETY: asserted above: `Lanes::Avx2.is_available()`, so
    // `is_x86_feature_detected!("avx2")` held, which `root`'s target feature needs.
    unsafe { root(payload, zero_subtrees) }
}

#[target_feature(enable = "avx2")]
fn root(payload: &[u8], zero_subtrees: &[Hash; LEVELS + 1]) -> Hash {
    // Every group is written before it is read; zeros are as good a start as any.
    let mut level = [[_mm256_setzero_si256(); DIGEST_WORDS]; LEVEL_GROUPS_MAX];
    let mut groups = hash_leaves(payload, &mut level);
    for zero_subtree in &zero_subtrees[1..LEVELS - 1] {
        groups = hash_level(&mut level[..], groups, &zero_group(zero_subtree));
    }
    root_of(&level[0], true)
}

/// The root from the group holding its two children in lanes 0 and 1. One hash alone
/// shares its call with nothing: on a CPU with BMI the integer units do it faster than a
/// 4-lane call (`scalar_if_bmi`: the tree always asks; the tests try both ways), else it
/// is one more 4-lane call.
#[target_feature(enable = "avx2")]
fn root_of(children: &Group, scalar_if_bmi: bool) -> Hash {
    let mut digests = [0u8; GROUP_NODES * DIGEST_SIZE];
    let mut root = [0u8; DIGEST_SIZE];
    if scalar_if_bmi && keccak::bmi_available() {
        store_digests_x4(children, &mut digests);
        let message: [u64; MESSAGE_WORDS] = core::array::from_fn(|word| {
            u64::from_le_bytes(digests[8 * word..8 * word + 8].try_into().expect("8 bytes"))
        });
        // SAFETY: `bmi_available()` held: the CPU has BMI1 and BMI2, which
        // `keccak256_bmi`'s target features need.
        let words = unsafe { keccak256_bmi(&message) };
        for (bytes, word) in root.chunks_exact_mut(8).zip(words) {
            bytes.copy_from_slice(&word.to_le_bytes());
        }
    } else {
        store_digests_x4(&keccak256_x4(&pair_up(children, children)), &mut digests);
        root.copy_from_slice(&digests[..DIGEST_SIZE]);
    }
    root
}

/// Hashes the segment pairs of `payload` (zero-padded to a whole group) into the first
/// groups of `level`; returns how many groups that is.
///
/// # Panics
/// If `level` has fewer groups than the payload needs.
#[target_feature(enable = "avx2")]
fn hash_leaves(payload: &[u8], level: &mut [Group]) -> usize {
    let groups = payload.len().div_ceil(GROUP_PAYLOAD_BYTES);
    assert!(
        groups <= level.len(),
        "lane tree: {} payload bytes need {groups} groups, the level holds {}",
        payload.len(),
        level.len()
    );
    let blocks = payload.chunks_exact(GROUP_PAYLOAD_BYTES);
    let rest = blocks.remainder();
    let mut slots = level.iter_mut();
    // The blocks lead the zip, so that it never takes a slot it does not fill.
    for (block, slot) in blocks.zip(&mut slots) {
        let block = block.try_into().expect("chunks_exact of a group's bytes");
        *slot = keccak256_x4(&load_messages_x4(block));
    }
    if !rest.is_empty() {
        let mut block = [0u8; GROUP_PAYLOAD_BYTES];
        block[..rest.len()].copy_from_slice(rest);
        let slot = slots
            .next()
            .expect("a slot for the last group, checked above");
        *slot = keccak256_x4(&load_messages_x4(&block));
    }
    groups
}

/// Replaces the first `groups` groups of `level` by their parents (the first
/// `groups.div_ceil(2)` groups); a missing right-hand group is `zero` (the zero-subtree
/// hash of the children's height). Returns the parents' group count.
///
/// # Panics
/// If `groups` is zero or more than `level` holds.
#[target_feature(enable = "avx2")]
fn hash_level(level: &mut [Group], groups: usize, zero: &Group) -> usize {
    assert!(
        (1..=level.len()).contains(&groups),
        "lane tree: {groups} groups in a level of {}",
        level.len()
    );
    let parents = groups.div_ceil(2);
    for parent in 0..parents {
        let left = level[2 * parent];
        let right = if 2 * parent + 1 < groups {
            level[2 * parent + 1]
        } else {
            *zero
        };
        level[parent] = keccak256_x4(&pair_up(&left, &right));
    }
    parents
}

/// The messages of the parents of `left` and `right`'s nodes, lane-major: lanes 0, 1 pair
/// `left`'s nodes 0-1 and 2-3, lanes 2, 3 pair `right`'s.
#[target_feature(enable = "avx2")]
fn pair_up(left: &Group, right: &Group) -> Avx2Words<MESSAGE_WORDS> {
    let mut message = [left[0]; MESSAGE_WORDS];
    for word in 0..DIGEST_WORDS {
        // [l0, r0, l2, r2] and [l1, r1, l3, r3]: left children, right children.
        let lefts = _mm256_unpacklo_epi64(left[word], right[word]);
        let rights = _mm256_unpackhi_epi64(left[word], right[word]);
        message[word] = _mm256_permute4x64_epi64::<PAIRS_IN_ORDER>(lefts);
        message[DIGEST_WORDS + word] = _mm256_permute4x64_epi64::<PAIRS_IN_ORDER>(rights);
    }
    message
}

/// A group whose four nodes are all `hash`.
#[target_feature(enable = "avx2")]
fn zero_group(hash: &Hash) -> Group {
    core::array::from_fn(|word| {
        let mut le = [0u8; 8];
        le.copy_from_slice(&hash[8 * word..8 * word + 8]);
        _mm256_set1_epi64x(i64::from_le_bytes(le))
    })
}

/// The nodes of the first `groups` groups of `level`, in order (tests).
#[cfg(test)]
#[target_feature(enable = "avx2")]
fn nodes(level: &[Group], groups: usize) -> Vec<Hash> {
    let mut out = Vec::with_capacity(groups * GROUP_NODES);
    for group in &level[..groups] {
        let mut digests = [0u8; GROUP_NODES * DIGEST_SIZE];
        store_digests_x4(group, &mut digests);
        for digest in digests.chunks_exact(DIGEST_SIZE) {
            out.push(digest.try_into().expect("chunks_exact(32)"));
        }
    }
    out
}

/// A level holding `hashes` (then `fill` up to whole groups), lane-major (tests).
#[cfg(test)]
#[target_feature(enable = "avx2")]
fn level_of(hashes: &[Hash], fill: &Hash) -> Vec<Group> {
    let groups = hashes.len().div_ceil(GROUP_NODES);
    let mut bytes = vec![0u8; groups * GROUP_PAYLOAD_BYTES / 2];
    for (index, digest) in bytes.chunks_exact_mut(DIGEST_SIZE).enumerate() {
        digest.copy_from_slice(hashes.get(index).unwrap_or(fill));
    }
    bytes
        .chunks_exact(GROUP_PAYLOAD_BYTES / 2)
        .map(|chunk| {
            let words: [[u64; 4]; 4] = core::array::from_fn(|word| {
                core::array::from_fn(|node| {
                    let at = DIGEST_SIZE * node + 8 * word;
                    u64::from_le_bytes(chunk[at..at + 8].try_into().expect("8 bytes"))
                })
            });
            words.map(|lanes| {
                let mut register = [0u8; 32];
                for (bytes, lane) in register.chunks_exact_mut(8).zip(lanes) {
                    bytes.copy_from_slice(&lane.to_le_bytes());
                }
                // SAFETY: `register` is 32 readable bytes; the load is unaligned.
                unsafe { core::arch::x86_64::_mm256_loadu_si256(register.as_ptr().cast()) }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::keccak256;

    fn seeded_hashes(count: usize, seed: u64) -> Vec<Hash> {
        (0..count as u64)
            .map(|index| keccak256(&[seed.to_le_bytes(), index.to_le_bytes()].concat()))
            .collect()
    }

    fn pair_hash(left: &Hash, right: &Hash) -> Hash {
        keccak256(&[left.as_slice(), right.as_slice()].concat())
    }

    /// The tests below need the instructions; on a CPU without them there is nothing here
    /// to test (the scalar path is tested everywhere else).
    fn avx2() -> bool {
        Lanes::Avx2.is_available()
    }

    #[test]
    fn level_of_and_nodes_round_trip() {
        if !avx2() {
            return;
        }
        let hashes = seeded_hashes(13, 7);
        let fill = keccak256(b"fill");
        // SAFETY: `avx2()` held: the CPU has AVX2.
        let back = unsafe { nodes(&level_of(&hashes, &fill), 4) };
        assert_eq!(&back[..13], &hashes[..]);
        assert_eq!(&back[13..], &[fill; 3]);
    }

    /// Every pair count a level can have (and up to 64, the widest level's 32 groups of
    /// input): the parents equal scalar pair hashes, and the lanes past them hold the next
    /// zero-subtree hash.
    #[test]
    fn hash_level_matches_scalar_pairs_for_every_count() {
        if !avx2() {
            return;
        }
        let zero = keccak256(b"a zero subtree of some height");
        let zero_parent = pair_hash(&zero, &zero);
        for pairs in 1..=64 {
            let children = seeded_hashes(2 * pairs, pairs as u64);
            // SAFETY (all three calls): `avx2()` held: the CPU has AVX2.
            let mut level = unsafe { level_of(&children, &zero) };
            let groups = level.len();
            let parents = unsafe { hash_level(&mut level, groups, &zero_group(&zero)) };
            assert_eq!(parents, groups.div_ceil(2), "{pairs} pairs");
            let got = unsafe { nodes(&level, parents) };
            for (index, node) in got.iter().enumerate() {
                let expected = if index < pairs {
                    pair_hash(&children[2 * index], &children[2 * index + 1])
                } else {
                    zero_parent
                };
                assert_eq!(*node, expected, "{pairs} pairs, parent {index}");
            }
        }
    }

    /// Both ways to the root: the scalar hash (where the CPU has BMI) and the 4-lane call.
    #[test]
    fn root_of_hashes_lanes_0_and_1_either_way() {
        if !avx2() {
            return;
        }
        for seed in 0..8 {
            let children = seeded_hashes(4, 100 + seed);
            let expected = pair_hash(&children[0], &children[1]);
            // SAFETY (all calls): `avx2()` held: the CPU has AVX2; `with_bmi` is true only
            // where `bmi_available()` held.
            let group = unsafe { level_of(&children, &children[0]) }[0];
            assert_eq!(unsafe { root_of(&group, false) }, expected, "4-lane call");
            if keccak::bmi_available() {
                assert_eq!(
                    unsafe { root_of(&group, true) },
                    expected,
                    "scalar with BMI"
                );
            }
        }
    }

    /// Every segment-pair count 1..=64, whole and with a ragged last pair: the leaf groups
    /// equal scalar hashes of the zero-padded pairs, and the lanes past them hold the hash
    /// of a zero pair.
    #[test]
    fn hash_leaves_matches_scalar_pairs_for_every_count() {
        if !avx2() {
            return;
        }
        let zero_pair = keccak256(&[0u8; PAIR_SIZE]);
        let data: Vec<u8> = (0..CHUNK_SIZE).map(|at| (at * 151 + 29) as u8).collect();
        for pairs in 1..=CHUNK_SIZE / PAIR_SIZE {
            for len in [
                PAIR_SIZE * pairs - 63,
                PAIR_SIZE * pairs - 32,
                PAIR_SIZE * pairs,
            ] {
                let payload = &data[..len];
                // SAFETY (all three calls): `avx2()` held: the CPU has AVX2.
                let mut level = unsafe { level_of(&[[0u8; 32]; 64], &[0u8; 32]) };
                let groups = unsafe { hash_leaves(payload, &mut level) };
                assert_eq!(groups, pairs.div_ceil(GROUP_NODES), "{len} bytes");
                let got = unsafe { nodes(&level, groups) };
                for (index, node) in got.iter().enumerate() {
                    let mut pair = [0u8; PAIR_SIZE];
                    let start = (PAIR_SIZE * index).min(len);
                    let end = (PAIR_SIZE * (index + 1)).min(len);
                    pair[..end - start].copy_from_slice(&payload[start..end]);
                    let expected = if index < pairs {
                        keccak256(&pair)
                    } else {
                        zero_pair
                    };
                    assert_eq!(*node, expected, "{len} bytes, leaf pair {index}");
                }
            }
        }
    }
}
