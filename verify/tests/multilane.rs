//! The multi-lane BMT is bit-identical to the scalar one: every length 0..=4096, every
//! segment/pair/level boundary with its own payload, random and sparse payloads of random
//! length, on every keccak implementation this CPU runs; and bee's CAC vectors on each.

use bps_proto::keccak256;
use bps_verify::keccak::{DIGEST_SIZE, PAIR_SIZE, hash_pairs};
use bps_verify::{CHUNK_SIZE, Lanes, bmt_root, bmt_root_with, cac_address_with};
use proptest::prelude::*;

/// Lengths where the tree's shape changes: segment (32), pair (64) and every subtree size
/// (128 … 4096), each with its neighbours.
fn boundary_lengths() -> Vec<usize> {
    let mut lengths: Vec<usize> = (0..=70).collect();
    let mut size = 32;
    while size <= CHUNK_SIZE {
        for multiple in [size, 3 * size] {
            for len in [multiple - 1, multiple, multiple + 1] {
                if (71..=CHUNK_SIZE).contains(&len) {
                    lengths.push(len);
                }
            }
        }
        size *= 2;
    }
    lengths.sort_unstable();
    lengths.dedup();
    lengths
}

fn seeded_payload(len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut block = 0u64;
    while out.len() < len {
        let digest = keccak256(&[seed.to_le_bytes(), block.to_le_bytes()].concat());
        out.extend_from_slice(&digest[..digest.len().min(len - out.len())]);
        block += 1;
    }
    out
}

fn assert_all_paths_agree(payload: &[u8]) {
    let scalar = bmt_root_with(Lanes::Scalar, payload);
    for lanes in Lanes::available() {
        assert_eq!(
            bmt_root_with(lanes, payload),
            scalar,
            "{lanes}, {} bytes",
            payload.len()
        );
    }
    assert_eq!(
        bmt_root(payload),
        scalar,
        "default path, {} bytes",
        payload.len()
    );
}

#[test]
fn the_machine_has_the_paths_we_expect_to_test() {
    // Not an assertion about every machine: a record, in the test output, of what ran.
    let available: Vec<String> = Lanes::available().map(|lanes| lanes.to_string()).collect();
    println!("keccak paths available: {}", available.join(", "));
    assert!(Lanes::fastest().is_available());
}

#[test]
fn every_boundary_length_agrees() {
    for (seed, len) in boundary_lengths().into_iter().enumerate() {
        assert_all_paths_agree(&seeded_payload(len, seed as u64));
    }
}

/// Every payload length, as prefixes of one random chunk: each length is its own tree
/// shape (live nodes per level, odd nodes, zero-subtree lanes, partial leaf groups).
#[test]
fn every_length_agrees() {
    let chunk = seeded_payload(CHUNK_SIZE, 4096);
    for len in 0..=CHUNK_SIZE {
        assert_all_paths_agree(&chunk[..len]);
    }
}

#[test]
fn structured_payloads_agree() {
    for len in [1, 32, 64, 2048, 4096] {
        for fill in [0x00u8, 0xff, 0x01, 0x80] {
            assert_all_paths_agree(&vec![fill; len]);
        }
        // One non-zero byte at the end: the live path runs along the right edge.
        let mut last = vec![0u8; len];
        last[len - 1] = 1;
        assert_all_paths_agree(&last);
    }
}

/// bee's `cac_test.go` vectors (see `bee_vectors.rs` for the source commit) on every path.
#[test]
fn bee_cac_vectors_on_every_path() {
    let foo = hex::decode("2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48")
        .expect("hex");
    let greater = hex::decode("27913f1bdb6e8e52cbd5a5fd4ab577c857287edf6969b41efe926b51de0f4f23")
        .expect("hex");
    let with_data_span =
        hex::decode("95022e6af5c6d6a564ee55a67f8455a3e18c511b5697c932d9e44f07f2fb8c53")
            .expect("hex");
    let data = b"greaterthanspan";
    let mut span = [0u8; 8];
    span.copy_from_slice(&data[..8]);
    for lanes in Lanes::available() {
        assert_eq!(
            cac_address_with(lanes, 3u64.to_le_bytes(), b"foo").as_slice(),
            foo.as_slice(),
            "{lanes}"
        );
        assert_eq!(
            cac_address_with(lanes, 15u64.to_le_bytes(), data).as_slice(),
            greater.as_slice(),
            "{lanes}"
        );
        assert_eq!(
            cac_address_with(lanes, span, &data[8..]).as_slice(),
            with_data_span.as_slice(),
            "{lanes}"
        );
    }
}

#[test]
fn hash_pairs_matches_keccak_for_every_count_up_to_a_level() {
    for count in 0..=64 {
        let input = seeded_payload(count * PAIR_SIZE, 1000 + count as u64);
        let expected: Vec<u8> = input.chunks_exact(PAIR_SIZE).flat_map(keccak256).collect();
        for lanes in Lanes::available() {
            let mut output = vec![0u8; count * DIGEST_SIZE];
            hash_pairs(lanes, &input, &mut output);
            assert_eq!(output, expected, "{lanes}, {count} pairs");
        }
    }
}

/// Forcing a path this CPU lacks is a caller bug, refused before any instruction runs.
#[test]
fn unavailable_paths_are_refused() {
    for lanes in Lanes::ALL.into_iter().filter(|lanes| !lanes.is_available()) {
        assert!(std::panic::catch_unwind(|| bmt_root_with(lanes, b"abc")).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random payloads of random length (every length class up to a full chunk).
    #[test]
    fn random_payloads_agree(payload in (0..=CHUNK_SIZE).prop_flat_map(|len| proptest::collection::vec(any::<u8>(), len))) {
        assert_all_paths_agree(&payload);
    }

    /// Random payloads that are mostly zeros, so the zero-subtree shortcut and real zero
    /// segments meet.
    #[test]
    fn sparse_payloads_agree(len in 0..=CHUNK_SIZE, ones in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let mut payload = vec![0u8; len];
        for (index, byte) in ones {
            if len > 0 {
                payload[index.index(len)] = byte;
            }
        }
        assert_all_paths_agree(&payload);
    }
}
