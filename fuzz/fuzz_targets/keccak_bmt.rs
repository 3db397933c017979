//! Fuzz target `keccak_bmt`: differential test of the BMT and the multi-lane keccak
//! against `keccak_reference` (tiny-keccak, pair by pair over the zero-padded 4096 bytes;
//! layout: `bps_fuzz::bmt_input`).
//!
//! Asserts, on every `Lanes` path this CPU runs (`Lanes::available()`):
//! - `bmt_root_with` and `cac_address_with` equal the reference root and
//!   `keccak256(span ‖ root)`, and so do `bmt_root` and `cac_address` (the fastest path);
//! - `validate_cac` accepts `span ‖ payload` at the reference address and returns it;
//! - `hash_pairs` over a run of 64-byte messages writes, for each, tiny-keccak's digest of
//!   exactly that message.

#![no_main]

use bps_fuzz::bmt_input::{BmtInput, MESSAGE_BYTES};
use bps_fuzz::keccak_reference as reference;
use bps_verify::keccak::hash_pairs;
use bps_verify::{Lanes, bmt_root, bmt_root_with, cac_address, cac_address_with, validate_cac};
use libfuzzer_sys::fuzz_target;

/// Bytes of one digest written by `hash_pairs`.
const DIGEST_BYTES: usize = 32;

fn check_bmt(input: &BmtInput<'_>) {
    let root = reference::bmt_root(input.payload);
    let address = reference::keccak256(&[&input.span, &root]);
    assert_eq!(address, reference::cac_address(input.span, input.payload));
    for lanes in Lanes::available() {
        assert_eq!(bmt_root_with(lanes, input.payload), root, "{lanes} root");
        assert_eq!(
            cac_address_with(lanes, input.span, input.payload),
            address,
            "{lanes} CAC address"
        );
    }
    assert_eq!(bmt_root(input.payload), root, "fastest root");
    assert_eq!(
        cac_address(input.span, input.payload),
        address,
        "fastest address"
    );
    let data = [&input.span[..], input.payload].concat();
    assert_eq!(validate_cac(&data, &address), Ok(address));
}

fn check_hash_pairs(messages: &[u8]) {
    let expected: Vec<u8> = messages
        .chunks_exact(MESSAGE_BYTES)
        .flat_map(|message| reference::keccak256(&[message]))
        .collect();
    for lanes in Lanes::available() {
        // Filled with a non-digest pattern so an unwritten digest cannot pass.
        let mut output = vec![0xa5; messages.len() / MESSAGE_BYTES * DIGEST_BYTES];
        hash_pairs(lanes, messages, &mut output);
        for (position, (digest, expected)) in output
            .chunks_exact(DIGEST_BYTES)
            .zip(expected.chunks_exact(DIGEST_BYTES))
            .enumerate()
        {
            assert_eq!(digest, expected, "{lanes} message {position}");
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let input = BmtInput::parse(input);
    check_bmt(&input);
    check_hash_pairs(input.messages);
});
