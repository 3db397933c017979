//! The fast path (multi-lane BMT, key cache, batched ECDSA: `Verifier`, `verify_batch`
//! and the pool) gives exactly the naive path's result (`verify`, one chunk at a time, by
//! recovery) on a randomized corpus of valid, invalid and mutated chunks, cold and warm,
//! and on bee's vectors.

use std::sync::Mutex;
use std::sync::mpsc;

use bps_proto::{Binding, keccak256};
use bps_verify::pool::{Done, Pool, PoolConfig};
use bps_verify::{
    CHUNK_SIZE, Expect, Hash, KeyedSignature, KnownKey, KnownKeysBatch, REPLICAS_OWNER,
    SignedDigest, SigningKey, Verified, Verifier, VerifyError, VerifyRequest, address_of,
    cac_address, recover_public_key_eth, sign_soc, verify, verify_batch, verify_with_key,
};
use bytes::Bytes;
use k256::elliptic_curve::PrimeField;
use k256::{FieldBytes, Scalar};
use proptest::prelude::*;
use proptest::strategy::ValueTree;

/// Owners of the corpus.
const KEYS: usize = 3;

fn keys() -> Vec<SigningKey> {
    (0..KEYS)
        .map(|index| {
            SigningKey::from_bytes(&keccak256(
                &[b"exactness".as_slice(), &[index as u8]].concat(),
            ))
            .expect("valid key")
        })
        .collect()
}

/// How a signed chunk is spoiled (or not) before it is verified.
#[derive(Clone, Debug)]
enum Mutation {
    None,
    FlipId(usize),
    FlipSignature(usize),
    FlipSpan(usize),
    FlipPayload(prop::sample::Index, u8),
    SetV(u8),
    HighSTwin,
    FlippedV,
    /// Expect another corpus owner (the same one when the index says so).
    ExpectOwner(usize),
    Truncate(prop::sample::Index),
    Append(Vec<u8>),
    RandomSignature([u8; 32], [u8; 32], u8),
    /// An implicit-authorship (MNEMONIC) request instead of `Expect::At`.
    Implicit,
}

#[derive(Clone, Debug)]
struct Case {
    key: usize,
    id: Hash,
    payload: Vec<u8>,
    span: Option<u64>,
    mutation: Mutation,
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => Just(Mutation::None),
        1 => (0..256usize).prop_map(Mutation::FlipId),
        2 => (0..520usize).prop_map(Mutation::FlipSignature),
        1 => (0..64usize).prop_map(Mutation::FlipSpan),
        1 => (any::<prop::sample::Index>(), 0..8u8).prop_map(|(at, bit)| Mutation::FlipPayload(at, bit)),
        1 => any::<u8>().prop_map(Mutation::SetV),
        1 => (25u8..=36).prop_map(Mutation::SetV),
        2 => Just(Mutation::HighSTwin),
        2 => Just(Mutation::FlippedV),
        1 => (0..KEYS).prop_map(Mutation::ExpectOwner),
        1 => any::<prop::sample::Index>().prop_map(Mutation::Truncate),
        1 => proptest::collection::vec(any::<u8>(), 1..8).prop_map(Mutation::Append),
        1 => (any::<[u8; 32]>(), any::<[u8; 32]>(), any::<u8>())
            .prop_map(|(r, s, v)| Mutation::RandomSignature(r, s, v)),
        1 => Just(Mutation::Implicit),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let payload = prop_oneof![
        proptest::sample::select(vec![0usize, 1, 31, 32, 33, 64, 65, 4095, 4096]),
        0..=CHUNK_SIZE,
    ]
    .prop_flat_map(|len| proptest::collection::vec(any::<u8>(), len));
    (
        0..KEYS,
        any::<Hash>(),
        payload,
        prop::option::weighted(0.1, any::<u64>()),
        mutation_strategy(),
    )
        .prop_map(|(key, id, payload, span, mutation)| Case {
            key,
            id,
            payload,
            span,
            mutation,
        })
}

fn flip(bytes: &mut [u8], bit: usize) {
    bytes[bit / 8] ^= 1 << (bit % 8);
}

fn negate_s(signature: &mut [u8]) {
    let s: [u8; 32] = signature[32..64].try_into().expect("32 bytes");
    let s = Scalar::from_repr(FieldBytes::from(s))
        .into_option()
        .expect("our own s is below N");
    signature[32..64].copy_from_slice(&(-s).to_repr());
}

fn flip_recovery_parity(signature: &mut [u8]) {
    signature[64] = 27 + ((signature[64] - 27) ^ 1);
}

fn request_of(case: &Case, keys: &[SigningKey]) -> VerifyRequest {
    let key = &keys[case.key];
    let span = case.span.unwrap_or(case.payload.len() as u64);
    let mut chunk = sign_soc(key, &case.id, span, &case.payload).to_vec();
    let mut owner = key.address();
    let mut expect_implicit = false;
    match &case.mutation {
        Mutation::None => {}
        Mutation::FlipId(bit) => flip(&mut chunk[..32], *bit),
        Mutation::FlipSignature(bit) => flip(&mut chunk[32..97], *bit),
        Mutation::FlipSpan(bit) => flip(&mut chunk[97..105], *bit),
        Mutation::FlipPayload(at, bit) => {
            if !case.payload.is_empty() {
                let offset = 105 + at.index(case.payload.len());
                chunk[offset] ^= 1 << bit;
            }
        }
        Mutation::SetV(v) => chunk[96] = *v,
        Mutation::HighSTwin => {
            negate_s(&mut chunk[32..97]);
            flip_recovery_parity(&mut chunk[32..97]);
        }
        Mutation::FlippedV => flip_recovery_parity(&mut chunk[32..97]),
        Mutation::ExpectOwner(other) => owner = keys[*other].address(),
        Mutation::Truncate(at) => chunk.truncate(at.index(chunk.len())),
        Mutation::Append(extra) => chunk.extend_from_slice(extra),
        Mutation::RandomSignature(r, s, v) => {
            chunk[32..64].copy_from_slice(r);
            chunk[64..96].copy_from_slice(s);
            chunk[96] = *v;
        }
        Mutation::Implicit => expect_implicit = true,
    }
    let expect = if expect_implicit {
        Expect::Implicit {
            binding: Binding::Mnemonic,
            topic: case.id,
            index: 0,
        }
    } else {
        Expect::At { owner }
    };
    VerifyRequest {
        chunk: Bytes::from(chunk),
        expect,
    }
}

fn naive(requests: &[VerifyRequest]) -> Vec<Result<Verified, VerifyError>> {
    requests.iter().map(verify).collect()
}

/// A verifier whose cache already holds every corpus owner.
fn warm_verifier(keys: &[SigningKey]) -> Verifier {
    let mut verifier = Verifier::new(16);
    let warm_up: Vec<VerifyRequest> = keys
        .iter()
        .map(|key| VerifyRequest {
            chunk: sign_soc(key, &[0xaa; 32], 3, b"hot"),
            expect: Expect::At {
                owner: key.address(),
            },
        })
        .collect();
    let mut results = Vec::new();
    verifier.verify_batch(&warm_up, &mut results);
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(verifier.keys().len(), keys.len());
    verifier
}

fn pool_results(
    requests: &[VerifyRequest],
    config: PoolConfig,
) -> Vec<Result<Verified, VerifyError>> {
    let (sender, receiver) = mpsc::channel();
    let sender = Mutex::new(sender);
    let pool = Pool::start(
        config,
        |_| {},
        move |batch: Vec<Done<usize>>| {
            let sender = sender.lock().expect("test channel");
            for done in batch {
                sender
                    .send((done.tag, done.result))
                    .expect("receiver alive");
            }
        },
    );
    for (tag, request) in requests.iter().enumerate() {
        let mut job = Some(request.clone());
        while let Some(next) = job.take() {
            // Three classes, so the results are exact whatever order the queue serves.
            if let Err(full) = pool.submit(tag as u64 % 3, tag, next) {
                std::thread::yield_now();
                job = Some(full.request);
            }
        }
    }
    let mut results: Vec<(usize, Result<Verified, VerifyError>)> = (0..requests.len())
        .map(|_| receiver.recv().expect("one result per job"))
        .collect();
    results.sort_by_key(|(tag, _)| *tag);
    results.into_iter().map(|(_, result)| result).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Cold and warm verifiers and `verify_batch` agree with `verify` on every chunk; a
    /// warm verifier accepts every valid `Expect::At` chunk by key, without recovery.
    #[test]
    fn fast_path_equals_naive_path(cases in proptest::collection::vec(case_strategy(), 1..40)) {
        let keys = keys();
        let requests: Vec<VerifyRequest> = cases.iter().map(|case| request_of(case, &keys)).collect();
        let expected = naive(&requests);

        let mut cold = Verifier::new(16);
        let mut results = Vec::new();
        cold.verify_batch(&requests, &mut results);
        prop_assert_eq!(&results, &expected);

        let mut warm = warm_verifier(&keys);
        let before = warm.stats();
        let mut results = Vec::new();
        warm.verify_batch(&requests, &mut results);
        prop_assert_eq!(&results, &expected);
        let valid_at = requests
            .iter()
            .zip(&expected)
            .filter(|(request, result)| matches!(request.expect, Expect::At { .. }) && result.is_ok())
            .count() as u64;
        let stats = warm.stats();
        prop_assert_eq!(stats.key_accepts - before.key_accepts, valid_at);
        prop_assert_eq!(
            stats.recoveries - before.recoveries,
            requests.len() as u64 - valid_at
        );

        // The same verifier again, with results appended after earlier ones.
        let mut appended = vec![Err(VerifyError::Soc(bps_verify::SocError::TooShort { len: 0, min: 0 }))];
        warm.verify_batch(&requests, &mut appended);
        prop_assert_eq!(&appended[1..], &expected[..]);

        let mut results = Vec::new();
        verify_batch(&requests, &mut results);
        prop_assert_eq!(&results, &expected);
    }
}

/// The pool, with batches of every size from one job to many, gives `verify`'s result per
/// job (matched by tag).
#[test]
fn pool_equals_naive_path() {
    let keys = keys();
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let cases: Vec<Case> = (0..120)
        .map(|_| {
            case_strategy()
                .new_tree(&mut runner)
                .expect("a case")
                .current()
        })
        .collect();
    let requests: Vec<VerifyRequest> = cases.iter().map(|case| request_of(case, &keys)).collect();
    let expected = naive(&requests);
    for (batch_jobs_max, batch_wait_us) in [(1, 0), (7, 0), (64, 200)] {
        let results = pool_results(
            &requests,
            PoolConfig {
                workers: 2,
                queue_jobs_max: 32,
                queue_jobs_per_class_max: 16,
                batch_jobs_max,
                batch_wait_us,
                key_cache_keys_max: 2,
            },
        );
        assert_eq!(results, expected, "batches of up to {batch_jobs_max}");
    }
}

// ---- bee's vectors (sources in bee_vectors.rs) through the fast path ----

const OWNER: &str = "8d3766440f0d7b949a5e32995d09619a7f86e632";
const FOO_SIG: &str = "5acd384febc133b7b245e5ddc62d82d2cded9182d2716126cd8844509af65a053deb418208027f548e3e88343af6f84a8772fb3cebc0a1833a0ea7ec0c1348311b";
const OWNER_KEY: &str = "634fb5a872396d9693e5c9f9d7233cfa93f395c093371017ff44aa9ae6564cdd";

fn bee_owner() -> [u8; 20] {
    hex::decode(OWNER)
        .expect("hex")
        .try_into()
        .expect("20 bytes")
}

/// bee's "foo" SOC (soc_test.go, validator_test.go): id 0, FOO_SIG, span 3, "foo".
fn foo_chunk() -> Vec<u8> {
    let mut chunk = vec![0u8; 32];
    chunk.extend_from_slice(&hex::decode(FOO_SIG).expect("hex"));
    chunk.extend_from_slice(&3u64.to_le_bytes());
    chunk.extend_from_slice(b"foo");
    chunk
}

fn at(chunk: Vec<u8>, owner: [u8; 20]) -> VerifyRequest {
    VerifyRequest {
        chunk: Bytes::from(chunk),
        expect: Expect::At { owner },
    }
}

/// Runs `requests` through a cold verifier, then twice more through the same (now warm)
/// one, and through `verify_batch`; all must equal `verify`. Returns the verifier.
fn assert_agrees(requests: &[VerifyRequest]) -> Verifier {
    let expected = naive(requests);
    let mut verifier = Verifier::new(4);
    for round in 0..3 {
        let mut results = Vec::new();
        verifier.verify_batch(requests, &mut results);
        assert_eq!(results, expected, "round {round}");
    }
    let mut results = Vec::new();
    verify_batch(requests, &mut results);
    assert_eq!(results, expected);
    verifier
}

#[test]
fn bee_foo_chunk_is_accepted_by_key_once_warm() {
    let owner = bee_owner();
    let requests = vec![at(foo_chunk(), owner), at(foo_chunk(), owner)];
    let verifier = assert_agrees(&requests);
    assert!(naive(&requests).iter().all(Result::is_ok));
    let stats = verifier.stats();
    // Round 0: one recovery fills the cache, the second chunk is checked by key; rounds 1
    // and 2: both by key, as one batch.
    assert_eq!(stats.recoveries, 1);
    assert_eq!(stats.key_accepts, 5);
    assert_eq!(stats.batch_checks, 2);
    assert_eq!(stats.batch_failures, 0);
}

/// validator_test.go TestInvalid's mutations, plus the signature twins, warm and cold.
#[test]
fn bee_invalid_vectors_agree() {
    let owner = bee_owner();
    let mut requests = vec![at(foo_chunk(), owner)];
    for (offset, value) in [
        (97usize, 0x01u8),
        (0, 0x01),
        (32, 0x01),
        (96, 28),
        (96, 31),
        (96, 29),
        (96, 0),
    ] {
        let mut chunk = foo_chunk();
        chunk[offset] = value;
        requests.push(at(chunk, owner));
    }
    // High S with the other parity: valid, as bee accepts it.
    let mut high_s = foo_chunk();
    negate_s(&mut high_s[32..97]);
    flip_recovery_parity(&mut high_s[32..97]);
    requests.push(at(high_s, owner));
    // Wrong owner, short, long.
    requests.push(at(foo_chunk(), [0x11; 20]));
    requests.push(at(b"small".to_vec(), owner));
    requests.push(at(vec![b'a'; CHUNK_SIZE + 8 + 1], owner));
    requests.push(at(vec![b'a'; 4202], owner));
    let verifier = assert_agrees(&requests);
    let accepted = naive(&requests)
        .iter()
        .filter(|result| result.is_ok())
        .count();
    assert_eq!(
        accepted, 3,
        "the chunk, its v = 31 form and its high-S twin"
    );
    assert!(verifier.stats().key_accepts >= 2);
}

/// validator_test.go TestValidDispersedReplica: the replicas owner's rule holds on the
/// fast path too.
#[test]
fn bee_dispersed_replica_rule_agrees() {
    let mut secret = [0u8; 32];
    secret[0] = 1;
    let key = SigningKey::from_bytes(&secret).expect("valid key");
    assert_eq!(key.address(), REPLICAS_OWNER);
    let payload: Vec<u8> = (0..CHUNK_SIZE).map(|i| (i * 31 + 7) as u8).collect();
    let cac = cac_address((payload.len() as u64).to_le_bytes(), &payload);
    let mut id = cac;
    id[0] = 1;
    let valid = sign_soc(&key, &id, payload.len() as u64, &payload).to_vec();
    id[2] = id[2].wrapping_add(1);
    let invalid = sign_soc(&key, &id, payload.len() as u64, &payload).to_vec();
    let requests = vec![
        at(valid.clone(), REPLICAS_OWNER),
        at(invalid, REPLICAS_OWNER),
        at(valid, REPLICAS_OWNER),
    ];
    let expected = naive(&requests);
    assert!(expected[0].is_ok() && expected[2].is_ok());
    assert!(matches!(
        expected[1],
        Err(VerifyError::Soc(
            bps_verify::SocError::ReplicaIdMismatch { .. }
        ))
    ));
    assert_agrees(&requests);
}

/// bee's signer-test key signing "foo" reproduces bee's chunk; many chunks of that owner
/// in one batch are checked together.
#[test]
fn bee_owner_stream_batches() {
    let key = SigningKey::from_bytes(
        &hex::decode(OWNER_KEY)
            .expect("hex")
            .try_into()
            .expect("32 bytes"),
    )
    .expect("valid key");
    assert_eq!(sign_soc(&key, &[0; 32], 3, b"foo").to_vec(), foo_chunk());
    let requests: Vec<VerifyRequest> = (0..32u8)
        .map(|index| {
            at(
                sign_soc(&key, &[index; 32], 3, &[index; 3]).to_vec(),
                bee_owner(),
            )
        })
        .collect();
    let verifier = assert_agrees(&requests);
    let stats = verifier.stats();
    assert_eq!(stats.recoveries, 1);
    assert_eq!(stats.batch_checks, 3);
    assert_eq!(stats.key_accepts, 3 * 32 - 1);
}

/// signer_test.go TestDefaultSignerDeterministic's signature, checked by key singly and in
/// a batch, agrees with recovery; so do its flipped-v and high-S twins.
#[test]
fn bee_signer_vector_checks_by_key() {
    let key = SigningKey::from_bytes(
        &hex::decode(OWNER_KEY)
            .expect("hex")
            .try_into()
            .expect("32 bytes"),
    )
    .expect("valid key");
    let digest: Hash =
        hex::decode("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae")
            .expect("hex")
            .try_into()
            .expect("32 bytes");
    let signature: [u8; 65] = hex::decode("336d24afef78c5883b96ad9a62552a8db3d236105cb059ddd04dc49680869dc16234f6852c277087f025d4114c4fac6b40295ecffd1194a84cdb91bd571769491b")
        .expect("hex")
        .try_into()
        .expect("65 bytes");
    let known = KnownKey::new(&key.public_key());
    let mut high_s = signature;
    negate_s(&mut high_s);
    flip_recovery_parity(&mut high_s);
    let mut flipped = signature;
    flip_recovery_parity(&mut flipped);
    let mut batch = KnownKeysBatch::new();
    for (candidate, valid) in [(signature, true), (high_s, true), (flipped, false)] {
        let recovered =
            recover_public_key_eth(&candidate, &digest).map(|public| address_of(&public));
        assert_eq!(recovered == Ok(key.address()), valid);
        let parsed = SignedDigest::parse(&candidate, &digest).expect("in range");
        assert_eq!(verify_with_key(&known, &parsed), valid);
        assert_eq!(
            batch.check(
                &[known],
                &[KeyedSignature {
                    key: 0,
                    signature: parsed
                }; 2]
            ),
            valid
        );
    }
}

/// Owners interleaved in one batch: results stay in job order, all owners' warm chunks go
/// into one check per round, then into the bisection's halves, and one bad chunk per owner
/// is singled out.
#[test]
fn interleaved_owners_keep_job_order() {
    let keys = keys();
    let mut requests = Vec::new();
    for index in 0..60u8 {
        let key = &keys[usize::from(index) % KEYS];
        let mut chunk = sign_soc(key, &[index; 32], 1, &[index]).to_vec();
        if index % 20 == 7 {
            chunk[104 + 1] ^= 0xff;
        }
        requests.push(at(chunk, key.address()));
    }
    let verifier = assert_agrees(&requests);
    let rejected = naive(&requests)
        .iter()
        .filter(|result| result.is_err())
        .count();
    assert_eq!(rejected, 3);
    // Round 0 recovers each owner's first chunk; then, in every round, the one batch of
    // all warm chunks fails on the bad ones and is bisected: at most two checks per level
    // (six levels for up to 64 chunks) for each of the three bad chunks.
    let stats = verifier.stats();
    assert!(stats.batch_failures >= 3, "{stats:?}");
    assert!(stats.batch_checks <= 3 * (1 + 2 * 3 * 6), "{stats:?}");
    assert!(stats.bisections >= 3 * 6, "{stats:?}");
    assert_eq!(stats.recoveries, KEYS as u64 + 3 * 3);
}
