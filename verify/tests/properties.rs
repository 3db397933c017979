//! Property tests: sign/validate round trips over keys, ids and every payload length
//! class; single-bit corruption; arbitrary bytes never panic.

use bps_proto::{Binding, soc_address};
use bps_verify::{
    CHUNK_SIZE, Expect, SOC_MAX_CHUNK_SIZE, SigningKey, SocError, SocRef, VerifyRequest,
    recover_soc, sign_soc, validate_cac, validate_soc, validate_soc_at, verify,
};
use bytes::Bytes;
use proptest::prelude::*;

/// Payload lengths at every boundary of the BMT (segment, pair, chunk), always included.
const EDGE_LENGTHS: [usize; 7] = [0, 1, 31, 32, 33, 4095, 4096];

fn key_strategy() -> impl Strategy<Value = SigningKey> {
    any::<[u8; 32]>().prop_filter_map("valid secp256k1 key", |bytes| {
        SigningKey::from_bytes(&bytes).ok()
    })
}

fn payload_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::sample::select(EDGE_LENGTHS.to_vec()),
        0..=CHUNK_SIZE,
    ]
    .prop_flat_map(|len| proptest::collection::vec(any::<u8>(), len))
}

fn payload_of(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

fn check_round_trip(key: &SigningKey, id: &[u8; 32], payload: &[u8]) {
    let chunk = sign_soc(key, id, payload.len() as u64, payload);
    assert_eq!(chunk.len(), 105 + payload.len());
    let at = soc_address(id, key.address());
    let recovered = validate_soc_at(&chunk, &at).expect("own signature validates");
    assert_eq!(recovered.owner, key.address());
    assert_eq!(recovered.id, *id);
    let verified = verify(&VerifyRequest {
        chunk,
        expect: Expect::At {
            owner: key.address(),
        },
    })
    .expect("job agrees");
    assert_eq!(verified.address, at);
    assert_eq!(verified.dedup_key, at);
}

/// The edge lengths, always, with a fresh key each.
#[test]
fn round_trip_at_edge_lengths() {
    for (seed, len) in EDGE_LENGTHS.into_iter().enumerate() {
        let key = SigningKey::random();
        let id = [seed as u8; 32];
        check_round_trip(&key, &id, &payload_of(len, seed as u8));
    }
}

/// Which part of the chunk a flipped bit lands in.
#[derive(Clone, Copy, Debug)]
enum Field {
    Id,
    Signature,
    Span,
    Payload,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn sign_then_validate(key in key_strategy(), id in any::<[u8; 32]>(), payload in payload_strategy()) {
        check_round_trip(&key, &id, &payload);
    }

    /// Flipping any one bit of id, signature, span or payload makes validation at the
    /// original address fail, with one exception that bee shares: v = 27 with bit 2 flipped
    /// is v = 31, btcec's "compressed" spelling of the same recovery id, which stays valid.
    #[test]
    fn single_bit_flip_invalidates(
        key in key_strategy(),
        id in any::<[u8; 32]>(),
        payload in payload_strategy(),
        field in prop_oneof![Just(Field::Id), Just(Field::Signature), Just(Field::Span), Just(Field::Payload)],
        position in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let chunk = sign_soc(&key, &id, payload.len() as u64, &payload);
        let at = soc_address(id, key.address());
        let (start, len) = match field {
            Field::Id => (0, 32),
            Field::Signature => (32, 65),
            Field::Span => (97, 8),
            Field::Payload => (105, payload.len()),
        };
        prop_assume!(len > 0);
        let offset = start + position.index(len);
        let mut corrupted = chunk.to_vec();
        corrupted[offset] ^= 1 << bit;
        let result = validate_soc_at(&corrupted, &at);
        if offset == 96 && chunk[96] == 27 && bit == 2 {
            prop_assert!(result.is_ok(), "v 27 -> 31 is the same signature in bee");
        } else {
            prop_assert!(result.is_err(), "flip at byte {offset} bit {bit} still validated");
        }
    }

    /// Arbitrary bytes, including lengths around both SOC bounds, never panic anywhere.
    #[test]
    fn random_bytes_never_panic(
        data in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..=200),
            proptest::collection::vec(any::<u8>(), 100..=110),
            proptest::collection::vec(any::<u8>(), SOC_MAX_CHUNK_SIZE - 4..=SOC_MAX_CHUNK_SIZE + 4),
        ],
        address in any::<[u8; 32]>(),
        owner in any::<[u8; 20]>(),
        index in any::<u64>(),
    ) {
        exercise_everything(&data, &address, &owner, index);
    }

    /// Structurally plausible SOCs (v in 27..=34, lengths in range, random r and s) reach
    /// the curve arithmetic; still no panic, and never valid at a random address.
    #[test]
    fn plausible_socs_never_panic(
        id in any::<[u8; 32]>(),
        rs in proptest::collection::vec(any::<u8>(), 64),
        v in 25u8..=36,
        payload in proptest::collection::vec(any::<u8>(), 0..=64),
        span in any::<u64>(),
        address in any::<[u8; 32]>(),
        owner in any::<[u8; 20]>(),
        index in any::<u64>(),
    ) {
        let mut data = id.to_vec();
        data.extend_from_slice(&rs);
        data.push(v);
        data.extend_from_slice(&span.to_le_bytes());
        data.extend_from_slice(&payload);
        exercise_everything(&data, &address, &owner, index);
        prop_assert!(validate_soc_at(&data, &address).is_err());
    }
}

fn exercise_everything(data: &[u8], address: &[u8; 32], owner: &[u8; 20], index: u64) {
    if let Ok(soc) = SocRef::parse(data) {
        let _ = soc.span_value();
        let _ = soc.signing_digest();
        let _ = soc.recover();
    }
    let _ = recover_soc(data);
    let _ = validate_soc(data);
    let _ = validate_soc_at(data, address);
    let _ = validate_cac(data, address);
    let chunk = Bytes::copy_from_slice(data);
    let _ = verify(&VerifyRequest {
        chunk: chunk.clone(),
        expect: Expect::At { owner: *owner },
    });
    for binding in [
        Binding::Anchor,
        Binding::SocId,
        Binding::Owner,
        Binding::FeedTopic,
        Binding::Mnemonic,
    ] {
        if let Err(error) = verify(&VerifyRequest {
            chunk: chunk.clone(),
            expect: Expect::Implicit {
                binding,
                topic: *address,
                index,
            },
        }) {
            // Every error renders with context.
            assert!(!error.to_string().is_empty());
        }
    }
}

#[test]
fn length_errors_name_the_bounds() {
    let short = SocError::TooShort { len: 10, min: 105 }.to_string();
    assert!(short.contains("10") && short.contains("105"), "{short}");
    let long = validate_soc(&vec![0u8; 5000]).expect_err("too long");
    assert_eq!(
        long,
        SocError::TooLong {
            len: 5000,
            max: 4201
        }
    );
}
