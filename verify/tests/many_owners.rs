//! The verifier with many cached owners in one batch (one multi-key ECDSA check for all of
//! them) gives exactly the naive path's result (`verify`, by recovery, error and all) on
//! randomized corpora mixing many owners, and on adversarial batches: one bad chunk among
//! many owners, errors of two owners crafted to cancel, a chunk of one owner presented as
//! another's, all-invalid batches, duplicates, and batches where only some owners are
//! cached.

use bps_proto::keccak256;
use bps_verify::{
    Expect, Hash, SigningKey, SocRef, Verified, Verifier, VerifierStats, VerifyError,
    VerifyRequest, eip191_hash, sign_soc, verify,
};
use bytes::Bytes;
use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::Reduce;
use k256::elliptic_curve::point::{AffineCoordinates, DecompressPoint};
use k256::{AffinePoint, FieldBytes, ProjectivePoint, Scalar};
use proptest::prelude::*;

/// Owners of the corpus.
const OWNERS: usize = 16;

/// The secp256k1 group order N, big-endian.
const ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

fn owners() -> Vec<SigningKey> {
    (0..OWNERS)
        .map(|index| {
            SigningKey::from_bytes(&keccak256(
                &[b"many owners".as_slice(), &[index as u8]].concat(),
            ))
            .expect("valid key")
        })
        .collect()
}

/// How a chunk is spoiled (or not) before it is verified.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    FlipId(usize),
    FlipSignature(usize),
    FlipPayload(prop::sample::Index, u8),
    HighSTwin,
    FlippedV,
    /// Expect another owner of the corpus (the same one when the index says so).
    SwapOwner(usize),
    /// Replace r with an out-of-range or edge value.
    SetR([u8; 32]),
    /// Replace s with an out-of-range or edge value.
    SetS([u8; 32]),
    SetV(u8),
}

#[derive(Clone, Debug)]
struct Case {
    owner: usize,
    id: Hash,
    payload: Vec<u8>,
    mutation: Mutation,
}

fn scalar_edge() -> impl Strategy<Value = [u8; 32]> {
    let mut above = ORDER;
    above[31] += 1;
    let mut below = ORDER;
    below[31] -= 1;
    prop_oneof![
        Just([0u8; 32]),
        Just(ORDER),
        Just(above),
        Just([0xff; 32]),
        // N - 1: in range (a high S, or a large r).
        Just(below),
    ]
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        8 => Just(Mutation::None),
        1 => (0..256usize).prop_map(Mutation::FlipId),
        2 => (0..520usize).prop_map(Mutation::FlipSignature),
        1 => (any::<prop::sample::Index>(), 0..8u8)
            .prop_map(|(at, bit)| Mutation::FlipPayload(at, bit)),
        2 => Just(Mutation::HighSTwin),
        2 => Just(Mutation::FlippedV),
        2 => (0..OWNERS).prop_map(Mutation::SwapOwner),
        1 => scalar_edge().prop_map(Mutation::SetR),
        1 => scalar_edge().prop_map(Mutation::SetS),
        1 => prop_oneof![0u8..27, 35u8..=255, 27u8..=34].prop_map(Mutation::SetV),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let payload = prop_oneof![
        4 => 0usize..=64,
        1 => proptest::sample::select(vec![4095usize, 4096]),
    ]
    .prop_flat_map(|len| proptest::collection::vec(any::<u8>(), len));
    (0..OWNERS, any::<Hash>(), payload, mutation_strategy()).prop_map(
        |(owner, id, payload, mutation)| Case {
            owner,
            id,
            payload,
            mutation,
        },
    )
}

fn flip_recovery_parity(signature: &mut [u8]) {
    signature[64] = 27 + ((signature[64] - 27) ^ 1);
}

fn request_of(case: &Case, owners: &[SigningKey]) -> VerifyRequest {
    let key = &owners[case.owner];
    let mut chunk = sign_soc(key, &case.id, case.payload.len() as u64, &case.payload).to_vec();
    let mut owner = key.address();
    match &case.mutation {
        Mutation::None => {}
        Mutation::FlipId(bit) => chunk[bit / 8] ^= 1 << (bit % 8),
        Mutation::FlipSignature(bit) => chunk[32 + bit / 8] ^= 1 << (bit % 8),
        Mutation::FlipPayload(at, bit) => {
            if !case.payload.is_empty() {
                chunk[105 + at.index(case.payload.len())] ^= 1 << bit;
            }
        }
        Mutation::HighSTwin => {
            let s = scalar(&chunk[64..96]);
            chunk[64..96].copy_from_slice(&(-s).to_repr());
            flip_recovery_parity(&mut chunk[32..97]);
        }
        Mutation::FlippedV => flip_recovery_parity(&mut chunk[32..97]),
        Mutation::SwapOwner(other) => owner = owners[*other].address(),
        Mutation::SetR(value) => chunk[32..64].copy_from_slice(value),
        Mutation::SetS(value) => chunk[64..96].copy_from_slice(value),
        Mutation::SetV(v) => chunk[96] = *v,
    }
    at(chunk, owner)
}

fn at(chunk: Vec<u8>, owner: [u8; 20]) -> VerifyRequest {
    VerifyRequest {
        chunk: Bytes::from(chunk),
        expect: Expect::At { owner },
    }
}

fn scalar(bytes: &[u8]) -> Scalar {
    let array: [u8; 32] = bytes.try_into().expect("32 bytes");
    Scalar::from_repr(FieldBytes::from(array))
        .into_option()
        .expect("below N")
}

fn naive(requests: &[VerifyRequest]) -> Vec<Result<Verified, VerifyError>> {
    requests.iter().map(verify).collect()
}

/// A verifier with room for `keys_max` keys that has seen one valid chunk of each of
/// `cached` (so their keys are cached, if they fit).
fn verifier_knowing(cached: &[&SigningKey], keys_max: usize) -> Verifier {
    let mut verifier = Verifier::new(keys_max);
    let warm_up: Vec<VerifyRequest> = cached
        .iter()
        .map(|key| {
            at(
                sign_soc(key, &[0xaa; 32], 3, b"hot").to_vec(),
                key.address(),
            )
        })
        .collect();
    let mut results = Vec::new();
    verifier.verify_batch(&warm_up, &mut results);
    assert!(results.iter().all(Result::is_ok));
    verifier
}

/// Runs `requests` through `verifier`, asserts the results are `verify`'s, and returns
/// what the verifier did for them.
fn assert_exact(verifier: &mut Verifier, requests: &[VerifyRequest]) -> VerifierStats {
    let before = verifier.stats();
    let mut results = Vec::new();
    verifier.verify_batch(requests, &mut results);
    assert_eq!(results, naive(requests));
    let after = verifier.stats();
    VerifierStats {
        recoveries: after.recoveries - before.recoveries,
        key_accepts: after.key_accepts - before.key_accepts,
        batch_checks: after.batch_checks - before.batch_checks,
        batch_failures: after.batch_failures - before.batch_failures,
        bisections: after.bisections - before.bisections,
    }
}

/// Chunk `index` of a round-robin stream over `owners`, valid.
fn round_robin(owners: &[SigningKey], count: usize) -> Vec<VerifyRequest> {
    (0..count)
        .map(|index| {
            let key = &owners[index % owners.len()];
            let id = keccak256(&(index as u64).to_be_bytes());
            at(
                sign_soc(key, &id, 2, &[index as u8, 7]).to_vec(),
                key.address(),
            )
        })
        .collect()
}

/// For a batch and its naive results, what a verifier that knows the keys of `cached`
/// owners must do: every invalid chunk is recovered, and so is the first valid chunk of
/// each owner it does not know; the other valid chunks are accepted by key.
fn expected_work(
    requests: &[VerifyRequest],
    expected: &[Result<Verified, VerifyError>],
    cached: &[[u8; 20]],
) -> (u64, u64) {
    let mut learned: Vec<[u8; 20]> = cached.to_vec();
    let (mut recoveries, mut key_accepts) = (0, 0);
    for (request, result) in requests.iter().zip(expected) {
        let Expect::At { owner } = request.expect else {
            unreachable!("the corpus is all explicit authorship");
        };
        match result {
            Err(_) => recoveries += 1,
            Ok(_) if learned.contains(&owner) => key_accepts += 1,
            Ok(_) => {
                recoveries += 1;
                learned.push(owner);
            }
        }
    }
    (recoveries, key_accepts)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Warm, partly warm, cold and undersized-cache verifiers all give `verify`'s results
    /// on a corpus of many owners; a verifier runs one batch check per batch (plus one per
    /// owner after a failure), accepts by key exactly the valid chunks of owners it knows,
    /// and passes the one check of the valid chunks alone.
    #[test]
    fn many_owner_batches_equal_naive_verify(
        cases in proptest::collection::vec(case_strategy(), 1..96),
        cached_mask in any::<u16>(),
    ) {
        let owners = owners();
        let requests: Vec<VerifyRequest> =
            cases.iter().map(|case| request_of(case, &owners)).collect();
        let expected = naive(&requests);
        let cached: Vec<&SigningKey> = owners
            .iter()
            .enumerate()
            .filter(|(index, _)| cached_mask >> index & 1 == 1)
            .map(|(_, key)| key)
            .collect();
        let all: Vec<&SigningKey> = owners.iter().collect();
        for (name, known, keys_max) in [
            ("warm", all.clone(), OWNERS),
            ("partly warm", cached.clone(), OWNERS),
            ("cold", Vec::new(), OWNERS),
            ("cache of 2", all.clone(), 2),
        ] {
            let mut verifier = verifier_knowing(&known, keys_max);
            let stats = assert_exact(&mut verifier, &requests);
            let bad = expected.iter().filter(|result| result.is_err()).count() as u64;
            prop_assert!(
                stats.batch_checks <= bisection_checks_max(bad, requests.len()),
                "{name}: {stats:?}"
            );
            if stats.batch_failures == 0 {
                prop_assert!(stats.batch_checks <= 1, "{name}: {stats:?}");
            }
            if keys_max == OWNERS {
                let addresses: Vec<[u8; 20]> = known.iter().map(|key| key.address()).collect();
                let (recoveries, key_accepts) = expected_work(&requests, &expected, &addresses);
                prop_assert_eq!(stats.recoveries, recoveries, "{}", name);
                prop_assert_eq!(stats.key_accepts, key_accepts, "{}", name);
            }
            // Again, now that the verifier has seen this corpus.
            assert_exact(&mut verifier, &requests);
        }
        // The valid chunks alone, all owners warm: the one multi-key check passes.
        let valid: Vec<VerifyRequest> = requests
            .iter()
            .zip(&expected)
            .filter(|(_, result)| result.is_ok())
            .map(|(request, _)| request.clone())
            .collect();
        let stats = assert_exact(&mut verifier_knowing(&all, OWNERS), &valid);
        prop_assert_eq!(stats.key_accepts, valid.len() as u64);
        prop_assert_eq!(stats.batch_failures, 0);
        prop_assert_eq!(stats.batch_checks, u64::from(valid.len() > 1));
    }
}

#[test]
fn one_bad_chunk_among_64_of_16_owners_is_the_only_one_rejected() {
    let owners = owners();
    let all: Vec<&SigningKey> = owners.iter().collect();
    type Spoil = fn(&mut Vec<u8>, &mut [u8; 20], &[SigningKey]);
    let spoilers: [(&str, Spoil); 5] = [
        ("payload byte", |chunk, _, _| chunk[105] ^= 1),
        ("flipped v", |chunk, _, _| {
            flip_recovery_parity(&mut chunk[32..97])
        }),
        (
            "signed by another owner of the batch",
            |chunk, _, owners| {
                let id: Hash = chunk[..32].try_into().expect("32 bytes");
                *chunk = sign_soc(&owners[9], &id, 2, &chunk[105..]).to_vec();
            },
        ),
        ("presented as another owner", |_, owner, owners| {
            *owner = owners[3].address();
        }),
        ("s = 0", |chunk, _, _| chunk[64..96].fill(0)),
    ];
    for (round, (name, spoil)) in spoilers.iter().enumerate() {
        let position = [0usize, 17, 63, 40, 5][round];
        let mut requests = round_robin(&owners, 64);
        let mut chunk = requests[position].chunk.to_vec();
        let Expect::At { mut owner } = requests[position].expect else {
            unreachable!("round_robin is explicit authorship");
        };
        spoil(&mut chunk, &mut owner, &owners);
        requests[position] = at(chunk, owner);
        let mut verifier = verifier_knowing(&all, OWNERS);
        let stats = assert_exact(&mut verifier, &requests);
        let expected = naive(&requests);
        for (index, result) in expected.iter().enumerate() {
            assert_eq!(result.is_ok(), index != position, "{name}: chunk {index}");
        }
        assert_eq!(stats.key_accepts, 63, "{name}");
        assert_eq!(stats.recoveries, 1, "{name}");
        if *name == "s = 0" {
            // Refused before any curve arithmetic: the batch of the others passes.
            assert_eq!((stats.batch_checks, stats.batch_failures), (1, 0), "{name}");
        } else {
            // The batch fails and is bisected: a failed half per level at most, and never
            // more checks than the bound of one bad chunk among 64.
            assert!(stats.batch_failures >= 1, "{name}: {stats:?}");
            assert!(stats.batch_failures <= 1 + 6, "{name}: {stats:?}");
            assert!(
                stats.batch_checks <= bisection_checks_max(1, 64),
                "{name}: {stats:?}"
            );
            assert_eq!(
                stats.bisections, 6,
                "{name}: one split per level down to the chunk"
            );
        }
    }
}

/// The most batch checks the bisection runs for `bad` bad chunks among `chunks`: the
/// first check, then at most two per level for each bad chunk.
fn bisection_checks_max(bad: u64, chunks: usize) -> u64 {
    let levels = u64::from(chunks.max(1).next_power_of_two().trailing_zeros());
    1 + 2 * bad * levels
}

/// A bad chunk among one big publisher's chunks and a few small ones: the bisection finds
/// it with a few checks of halves, and every other chunk, of its owner too, is accepted by
/// key.
#[test]
fn a_bad_chunk_is_found_by_bisection() {
    let owners = owners();
    let all: Vec<&SigningKey> = owners.iter().collect();
    let mut requests = round_robin(&owners[..1], 40);
    requests.extend(round_robin(&owners[1..9], 24));
    let bad_at = 40 + 4;
    let mut bad = requests[bad_at].chunk.to_vec();
    bad[105] ^= 1;
    requests[bad_at] = at(bad, owners[5].address());
    let mut verifier = verifier_knowing(&all, OWNERS);
    let stats = assert_exact(&mut verifier, &requests);
    assert_eq!((stats.recoveries, stats.key_accepts), (1, 63));
    assert!(
        stats.batch_checks <= bisection_checks_max(1, 64),
        "{stats:?}"
    );
    assert_eq!(stats.bisections, 6, "{stats:?}");
}

/// Bad chunks among many good ones, at every density: each good chunk is still accepted by
/// key, each bad one rejected with `verify`'s error, and the checks stay within
/// `1 + 2·k·log2 n` (far below one per chunk while bad chunks are few).
#[test]
fn bisection_accepts_every_good_chunk_with_logarithmic_checks() {
    let owners = owners();
    let all: Vec<&SigningKey> = owners.iter().collect();
    for bad_count in [1usize, 2, 3, 8, 64] {
        let mut requests = round_robin(&owners, 64);
        let positions: Vec<usize> = (0..bad_count).map(|n| (n * 37 + 11) % 64).collect();
        for &position in &positions {
            let mut chunk = requests[position].chunk.to_vec();
            chunk[105] ^= 1;
            let Expect::At { owner } = requests[position].expect else {
                unreachable!("round_robin is explicit authorship");
            };
            requests[position] = at(chunk, owner);
        }
        let mut verifier = verifier_knowing(&all, OWNERS);
        let stats = assert_exact(&mut verifier, &requests);
        let bad = positions.len() as u64;
        assert_eq!(stats.recoveries, bad, "{bad_count} bad");
        assert_eq!(stats.key_accepts, 64 - bad, "{bad_count} bad");
        assert!(
            stats.batch_checks <= bisection_checks_max(bad, 64).min(63),
            "{bad_count} bad: {stats:?}"
        );
    }
}

/// `(r, s, v)` of EIP-191 over `digest` with nonce point `nonce` (x below N) and `s`.
fn signature_with(nonce: &ProjectivePoint, s: &Scalar) -> [u8; 65] {
    let nonce = nonce.to_affine();
    let mut signature = [0u8; 65];
    signature[..32].copy_from_slice(&nonce.x());
    signature[32..64].copy_from_slice(&s.to_repr());
    signature[64] = 27 + u8::from(bool::from(nonce.y_is_odd()));
    signature
}

fn prehash(digest: &Hash) -> Scalar {
    <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(eip191_hash(digest)))
}

/// A chunk of `payload` under `id` whose signature is replaced by `make(digest)`.
fn chunk_signed_with(id: &Hash, payload: &[u8], make: impl FnOnce(&Hash) -> [u8; 65]) -> Vec<u8> {
    let placeholder = SigningKey::from_bytes(&[1; 32]).expect("valid key");
    let mut chunk = sign_soc(&placeholder, id, payload.len() as u64, payload).to_vec();
    let digest = SocRef::parse(&chunk).expect("a SOC").signing_digest();
    chunk[32..97].copy_from_slice(&make(&digest));
    chunk
}

/// The error point `(z·s⁻¹)·G + (r·s⁻¹)·Q − R` of `signature` over `digest` for key `key`.
fn error_point(signature: &[u8; 65], digest: &Hash, key: &ProjectivePoint) -> ProjectivePoint {
    let (r, s) = (scalar(&signature[..32]), scalar(&signature[32..64]));
    let s_inv = s.invert().into_option().expect("non-zero");
    let x = FieldBytes::from(<[u8; 32]>::try_from(&signature[..32]).expect("32 bytes"));
    let nonce = AffinePoint::decompress(&x, ((signature[64] - 27) & 1).into())
        .into_option()
        .expect("on the curve");
    ProjectivePoint::mul_by_generator(&(prehash(digest) * s_inv)) + *key * (r * s_inv)
        - ProjectivePoint::from(nonce)
}

/// An attacker holding only his own key forges a chunk for a victim owner and signs one
/// of his own whose error cancels the forgery's under unit weights; the verifier, alone or
/// among honest chunks of many owners, rejects both with bee's own errors, every time.
#[test]
fn chunks_of_two_owners_with_cancelling_errors_are_both_rejected() {
    let owners = owners();
    let (attacker, victim) = (&owners[0], &owners[1]);
    let victim_key = ProjectivePoint::from(&victim.public_key());
    let mut forged_digest = [0u8; 32];
    let forged = chunk_signed_with(&[0x66; 32], b"forged", |digest| {
        forged_digest = *digest;
        signature_with(
            &ProjectivePoint::mul_by_generator(&prehash(&[1; 32])),
            &prehash(&[2; 32]),
        )
    });
    let forged_signature: [u8; 65] = forged[32..97].try_into().expect("65 bytes");
    let victim_error = error_point(&forged_signature, &forged_digest, &victim_key);
    assert_ne!(victim_error, ProjectivePoint::IDENTITY);
    let secret = scalar(&attacker.to_bytes());
    let own = chunk_signed_with(&[0x77; 32], b"own", |digest| {
        // Nonce t·G + E, s = (z + r·d) / t: the error is t·G − (t·G + E) = −E.
        let t = prehash(&[3; 32]);
        let nonce = ProjectivePoint::mul_by_generator(&t) + victim_error;
        let r = scalar(&nonce.to_affine().x());
        let s = (prehash(digest) + r * secret) * t.invert().into_option().expect("non-zero");
        let signature = signature_with(&nonce, &s);
        let attacker_key = ProjectivePoint::from(&attacker.public_key());
        assert_eq!(
            error_point(&signature, digest, &attacker_key) + victim_error,
            ProjectivePoint::IDENTITY,
            "the errors cancel under unit weights"
        );
        signature
    });
    let pair = vec![at(own, attacker.address()), at(forged, victim.address())];
    assert!(naive(&pair).iter().all(Result::is_err));
    let all: Vec<&SigningKey> = owners.iter().collect();
    let mut verifier = verifier_knowing(&all, OWNERS);
    for _ in 0..16 {
        let stats = assert_exact(&mut verifier, &pair);
        // One chunk per owner: after the failed batch, single checks.
        assert_eq!((stats.batch_checks, stats.batch_failures), (1, 1));
    }
    let mut mixed = round_robin(&owners, 48);
    mixed.insert(11, pair[0].clone());
    mixed.push(pair[1].clone());
    let stats = assert_exact(&mut verifier, &mixed);
    assert_eq!(stats.key_accepts, 48);
    assert_eq!(stats.recoveries, 2);
}

#[test]
fn an_all_invalid_batch_of_many_owners_gets_naives_errors() {
    let owners = owners();
    let all: Vec<&SigningKey> = owners.iter().collect();
    let requests: Vec<VerifyRequest> = round_robin(&owners, 64)
        .into_iter()
        .enumerate()
        .map(|(index, request)| {
            let mut chunk = request.chunk.to_vec();
            let Expect::At { mut owner } = request.expect else {
                unreachable!("round_robin is explicit authorship");
            };
            match index % 4 {
                0 => chunk[106] ^= 0x80,
                1 => flip_recovery_parity(&mut chunk[32..97]),
                2 => owner = owners[(index + 1) % OWNERS].address(),
                _ => chunk[96] = 35,
            }
            at(chunk, owner)
        })
        .collect();
    assert!(naive(&requests).iter().all(Result::is_err));
    let mut verifier = verifier_knowing(&all, OWNERS);
    let stats = assert_exact(&mut verifier, &requests);
    assert_eq!(stats.key_accepts, 0);
    assert_eq!(stats.recoveries, 64);
    // The batch fails, and so does every half the bisection checks: the warm chunks (the
    // ones whose signature parses) form a tree of failed checks, one per inner node.
    assert_eq!(stats.batch_checks, stats.batch_failures);
    assert!(stats.batch_checks < 64, "{stats:?}");
}

/// The same chunk several times, and every owner's chunks twice, in one batch: one check
/// accepts them all; a duplicated bad chunk is rejected each time.
#[test]
fn duplicates_in_one_batch() {
    let owners = owners();
    let all: Vec<&SigningKey> = owners.iter().collect();
    let stream = round_robin(&owners, 32);
    let mut requests: Vec<VerifyRequest> = stream.iter().chain(&stream).cloned().collect();
    requests.extend(std::iter::repeat_n(stream[5].clone(), 4));
    let mut verifier = verifier_knowing(&all, OWNERS);
    let stats = assert_exact(&mut verifier, &requests);
    assert_eq!(stats.key_accepts, requests.len() as u64);
    assert_eq!((stats.batch_checks, stats.batch_failures), (1, 0));
    let mut bad = stream[6].chunk.to_vec();
    bad[105] ^= 1;
    let Expect::At { owner } = stream[6].expect else {
        unreachable!("round_robin is explicit authorship");
    };
    requests.insert(3, at(bad.clone(), owner));
    requests.push(at(bad, owner));
    let stats = assert_exact(&mut verifier, &requests);
    assert_eq!(stats.recoveries, 2);
    assert_eq!(stats.key_accepts, requests.len() as u64 - 2);
}

/// Half the owners cached: the others' first chunks are recovered (a bad first chunk
/// first, then the next), and everything after joins the one batch check.
#[test]
fn only_some_owners_cached() {
    let owners = owners();
    let cached: Vec<&SigningKey> = owners.iter().step_by(2).collect();
    let mut requests = round_robin(&owners, 64);
    // Owner 1 (not cached) starts with a chunk it did not sign.
    let id = keccak256(b"not owner 1's");
    requests[1] = at(
        sign_soc(&owners[2], &id, 1, b"x").to_vec(),
        owners[1].address(),
    );
    let mut verifier = verifier_knowing(&cached, OWNERS);
    let stats = assert_exact(&mut verifier, &requests);
    // 8 cold owners: owner 1's bad chunk and its next, one chunk of each of the other 7.
    assert_eq!(stats.recoveries, 9);
    assert_eq!(stats.key_accepts, 55);
    assert_eq!((stats.batch_checks, stats.batch_failures), (1, 0));
    assert_eq!(verifier.keys().len(), OWNERS);
    // Now all are warm.
    let stats = assert_exact(&mut verifier, &requests);
    assert_eq!((stats.recoveries, stats.key_accepts), (1, 63));
}

/// More owners in a batch than the cache holds: keys are evicted while the batch is
/// gathered, and every result is still `verify`'s.
#[test]
fn a_cache_smaller_than_the_batchs_owners_stays_exact() {
    let owners = owners();
    let mut requests = round_robin(&owners, 64);
    let mut bad = requests[20].chunk.to_vec();
    bad[106] ^= 1;
    requests[20] = at(bad, owners[4].address());
    let mut verifier = Verifier::new(4);
    for _ in 0..3 {
        assert_exact(&mut verifier, &requests);
        assert_eq!(verifier.keys().len(), 4);
    }
}
