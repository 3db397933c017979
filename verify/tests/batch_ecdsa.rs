//! Adversarial tests of the key checks (`bps_verify::batch`): a signature passes the single
//! or batched check against a known key exactly when recovery yields that key, bad
//! signatures are singled out, and crafted signatures whose errors cancel under fixed
//! weights do not pass together.

use bps_proto::keccak256;
use bps_verify::{
    Hash, KnownKey, SameKeyBatch, SignatureError, SignedDigest, SigningKey, address_of,
    eip191_hash, recover_public_key_eth, verify_with_key,
};
use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::Reduce;
use k256::elliptic_curve::point::{AffineCoordinates, DecompressPoint};
use k256::{AffinePoint, FieldBytes, ProjectivePoint, PublicKey, Scalar};

/// The secp256k1 group order N.
const ORDER: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";

fn order() -> [u8; 32] {
    hex::decode(ORDER)
        .expect("hex")
        .try_into()
        .expect("32 bytes")
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&keccak256(&[b"batch key".as_slice(), &[seed]].concat()))
        .expect("valid key")
}

fn known(key: &SigningKey) -> KnownKey {
    KnownKey::new(&key.public_key())
}

fn data(index: usize) -> Hash {
    keccak256(&(index as u64).to_be_bytes())
}

fn parsed(signature: &[u8; 65], data: &Hash) -> SignedDigest {
    SignedDigest::parse(signature, data).expect("in range")
}

/// What bee decides: recovery yields this key.
fn recovers_to(signature: &[u8; 65], data: &Hash, key: &PublicKey) -> bool {
    recover_public_key_eth(signature, data).as_ref() == Ok(key)
}

fn scalar(bytes: &[u8]) -> Scalar {
    let array: [u8; 32] = bytes.try_into().expect("32 bytes");
    Scalar::from_repr(FieldBytes::from(array))
        .into_option()
        .expect("below N")
}

fn prehash(data: &Hash) -> Scalar {
    <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(eip191_hash(data)))
}

/// `(r, N - s, v ^ 1)`: the same key recovers from it.
fn high_s_twin(signature: &[u8; 65]) -> [u8; 65] {
    let mut twin = *signature;
    let negated: [u8; 32] = (-scalar(&signature[32..64])).to_repr().into();
    twin[32..64].copy_from_slice(&negated);
    twin[64] = 27 + ((signature[64] - 27) ^ 1);
    twin
}

/// `(r, s, v ^ 1)`: valid plain ECDSA for the same key, but recovery gives another key.
fn flipped_v_twin(signature: &[u8; 65]) -> [u8; 65] {
    let mut twin = *signature;
    twin[64] = 27 + ((signature[64] - 27) ^ 1);
    twin
}

/// A signature with nonce point `t·G` and the given `s`, valid or not: `r = x(tG)`,
/// `v` from the parity of `y(tG)`.
fn with_nonce(nonce: &Scalar, s: &Scalar) -> [u8; 65] {
    let point = ProjectivePoint::mul_by_generator(nonce).to_affine();
    let r = scalar(&point.x());
    let mut signature = [0u8; 65];
    signature[..32].copy_from_slice(&r.to_repr());
    signature[32..64].copy_from_slice(&s.to_repr());
    signature[64] = 27 + u8::from(bool::from(point.y_is_odd()));
    signature
}

fn secret(key: &SigningKey) -> Scalar {
    scalar(&key.to_bytes())
}

fn r_of(signature: &[u8; 65]) -> Scalar {
    scalar(&signature[..32])
}

/// Checks `signatures` (over `data(i)`) against `key` singly, batched and per item, and
/// asserts each verdict is recovery's.
fn assert_verdicts_match_recovery(key: &PublicKey, signatures: &[[u8; 65]]) -> Vec<bool> {
    let known = KnownKey::new(key);
    let expected: Vec<bool> = signatures
        .iter()
        .enumerate()
        .map(|(index, signature)| recovers_to(signature, &data(index), key))
        .collect();
    let parsed_all: Vec<SignedDigest> = signatures
        .iter()
        .enumerate()
        .map(|(index, signature)| parsed(signature, &data(index)))
        .collect();
    for (index, signature) in parsed_all.iter().enumerate() {
        assert_eq!(
            verify_with_key(&known, signature),
            expected[index],
            "single check of {index}"
        );
    }
    let mut batch = SameKeyBatch::new();
    let all_valid = expected.iter().all(|valid| *valid);
    assert_eq!(batch.check(&known, &parsed_all), all_valid, "batch check");
    let mut verdicts = vec![false; signatures.len()];
    assert_eq!(
        batch.check_each(&known, &parsed_all, &mut verdicts),
        all_valid
    );
    assert_eq!(verdicts, expected, "per-signature verdicts");
    verdicts
}

fn valid_batch(key: &SigningKey, count: usize) -> Vec<[u8; 65]> {
    (0..count).map(|index| key.sign_eth(&data(index))).collect()
}

#[test]
fn a_valid_batch_of_64_passes() {
    let signer = key(1);
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &valid_batch(&signer, 64));
    assert!(verdicts.iter().all(|valid| *valid));
}

#[test]
fn one_bad_signature_among_64_is_the_only_one_rejected() {
    let signer = key(2);
    let other = key(3);
    let public = signer.public_key();
    type Spoil = fn(&[u8; 65], &SigningKey, usize) -> [u8; 65];
    let spoilers: [(&str, Spoil); 6] = [
        ("signs other data", |_, signer, index| {
            signer.sign_eth(&data(index + 1000))
        }),
        ("another key", |_, _, index| key(3).sign_eth(&data(index))),
        ("flipped v", |signature, _, _| flipped_v_twin(signature)),
        ("high S with the original v", |signature, _, _| {
            let mut spoiled = high_s_twin(signature);
            spoiled[64] = signature[64];
            spoiled
        }),
        ("s + 1", |signature, _, _| {
            let mut spoiled = *signature;
            let bumped: [u8; 32] = (scalar(&signature[32..64]) + Scalar::ONE).to_repr().into();
            spoiled[32..64].copy_from_slice(&bumped);
            spoiled
        }),
        ("x-reduced v", |signature, _, _| {
            let mut spoiled = *signature;
            spoiled[64] += 2;
            spoiled
        }),
    ];
    for (round, (name, spoil)) in spoilers.iter().enumerate() {
        let position = [0usize, 17, 63][round % 3];
        let mut signatures = valid_batch(&signer, 64);
        signatures[position] = spoil(&signatures[position], &signer, position);
        if *name == "x-reduced v" {
            // No point has x = r + N for this r (r + N is past P, or not on the curve):
            // recovery fails, and so do the checks.
            assert!(recover_public_key_eth(&signatures[position], &data(position)).is_err());
        }
        let verdicts = assert_verdicts_match_recovery(&public, &signatures);
        for (index, valid) in verdicts.iter().enumerate() {
            assert_eq!(*valid, index != position, "{name}: signature {index}");
        }
    }
    // The other key's own signatures all pass against the other key.
    assert_verdicts_match_recovery(&other.public_key(), &valid_batch(&other, 8));
}

#[test]
fn high_s_twins_are_accepted_as_bee_does() {
    let signer = key(4);
    let signatures: Vec<[u8; 65]> = valid_batch(&signer, 64)
        .iter()
        .enumerate()
        .map(|(index, signature)| {
            if index % 2 == 0 {
                high_s_twin(signature)
            } else {
                *signature
            }
        })
        .collect();
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &signatures);
    assert!(verdicts.iter().all(|valid| *valid));
    // The "compressed" flag (v + 4) changes nothing either.
    let flagged: Vec<[u8; 65]> = signatures
        .iter()
        .map(|signature| {
            let mut flagged = *signature;
            flagged[64] += 4;
            flagged
        })
        .collect();
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &flagged);
    assert!(verdicts.iter().all(|valid| *valid));
}

/// The flipped-v twin verifies as plain ECDSA (same r, s, key), but bee recovers another
/// key from it; both of our checks reject it.
#[test]
fn flipped_v_twin_is_rejected_by_both_checks() {
    let signer = key(5);
    let known_key = known(&signer);
    for index in 0..16 {
        let signature = signer.sign_eth(&data(index));
        let twin = flipped_v_twin(&signature);
        let recovered = recover_public_key_eth(&twin, &data(index)).expect("recovers a key");
        assert_ne!(recovered, signer.public_key());
        assert!(!verify_with_key(&known_key, &parsed(&twin, &data(index))));
        let mut batch = SameKeyBatch::new();
        assert!(!batch.check(&known_key, &[parsed(&twin, &data(index))]));
        // And the twin does pass against the key it recovers to.
        let recovered_known = KnownKey::new(&recovered);
        assert_eq!(recovered_known.address(), address_of(&recovered));
        assert!(verify_with_key(
            &recovered_known,
            &parsed(&twin, &data(index))
        ));
        assert!(batch.check(&recovered_known, &[parsed(&twin, &data(index))]));
    }
}

#[test]
fn an_all_invalid_batch_is_rejected_item_by_item() {
    let signer = key(6);
    let signatures: Vec<[u8; 65]> = (0..64)
        .map(|index| signer.sign_eth(&data(index + 5000)))
        .collect();
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &signatures);
    assert!(verdicts.iter().all(|valid| !*valid));
}

#[test]
fn a_batch_signed_by_another_key_is_rejected() {
    let signer = key(7);
    let other = key(8);
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &valid_batch(&other, 16));
    assert!(verdicts.iter().all(|valid| !*valid));
}

/// Mixed: valid, high-S twins, flipped v, other data and other keys, interleaved.
#[test]
fn mixed_batches_match_recovery() {
    let signer = key(9);
    let other = key(10);
    let signatures: Vec<[u8; 65]> = (0..48)
        .map(|index| {
            let valid = signer.sign_eth(&data(index));
            match index % 6 {
                0 | 1 => valid,
                2 => high_s_twin(&valid),
                3 => flipped_v_twin(&valid),
                4 => other.sign_eth(&data(index)),
                _ => signer.sign_eth(&data(index + 1)),
            }
        })
        .collect();
    let verdicts = assert_verdicts_match_recovery(&signer.public_key(), &signatures);
    assert_eq!(verdicts.iter().filter(|valid| **valid).count(), 24);
}

/// Range checks come first and give recovery's own errors.
#[test]
fn out_of_range_signatures_fail_to_parse_with_recoverys_errors() {
    let signer = key(11);
    let base = signer.sign_eth(&data(0));
    let mut cases: Vec<[u8; 65]> = Vec::new();
    for offset in [0usize, 32] {
        for value in [[0u8; 32], order(), [0xff; 32]] {
            let mut signature = base;
            signature[offset..offset + 32].copy_from_slice(&value);
            cases.push(signature);
        }
    }
    for v in [0u8, 1, 4, 26, 35, 36, 255] {
        let mut signature = base;
        signature[64] = v;
        cases.push(signature);
    }
    for signature in cases {
        let parse = SignedDigest::parse(&signature, &data(0));
        let recovery = recover_public_key_eth(&signature, &data(0));
        let parse_error = parse.expect_err("out of range");
        assert_eq!(Err::<(), SignatureError>(parse_error), recovery.map(|_| ()));
    }
    // N - 1 is in range for s (a high S).
    let mut n_minus_one = order();
    n_minus_one[31] -= 1;
    let mut signature = base;
    signature[32..64].copy_from_slice(&n_minus_one);
    assert!(SignedDigest::parse(&signature, &data(0)).is_ok());
}

/// Recovery ids 2 and 3 (x = r + N): a constructed nonce point R with x in [N, P), as in
/// `signatures.rs`. The key recovered from (r, s, v) passes both checks with that v, and
/// fails with the other parity or without the x overflow.
#[test]
fn x_reduced_recovery_ids_match_recovery() {
    let order = order();
    // N ends in 0x41: adding t <= 0xbe to its last byte does not carry.
    let t = (1u8..=0xbe)
        .find(|t| {
            let mut x = order;
            x[31] += t;
            AffinePoint::decompress(&FieldBytes::from(x), 0.into())
                .into_option()
                .is_some()
        })
        .expect("some x in [N, N + 0xbe] is on the curve");
    for (index, v) in [29u8, 30, 33, 34].into_iter().enumerate() {
        let mut signature = [0u8; 65];
        signature[31] = t;
        signature[32..64].copy_from_slice(&keccak256(&[v]));
        signature[64] = v;
        let message = data(index);
        let recovered = recover_public_key_eth(&signature, &message).expect("R exists");
        let recovered_known = KnownKey::new(&recovered);
        let digest = parsed(&signature, &message);
        assert!(verify_with_key(&recovered_known, &digest), "v = {v}");
        let mut batch = SameKeyBatch::new();
        // The batch arithmetic on one signature, and on a duplicate pair.
        assert!(batch.check(&recovered_known, &[digest]), "v = {v}");
        assert!(batch.check(&recovered_known, &[digest, digest]), "v = {v}");
        for other_v in [27 + ((v - 27) ^ 1), v - 2] {
            let mut other = signature;
            other[64] = other_v;
            let agrees = recovers_to(&other, &message, &recovered);
            let other_digest = parsed(&other, &message);
            assert_eq!(verify_with_key(&recovered_known, &other_digest), agrees);
            assert_eq!(batch.check(&recovered_known, &[other_digest]), agrees);
            assert!(!agrees, "v = {other_v} names another nonce point");
        }
    }
}

/// Two invalid signatures crafted so that their errors cancel: with unit weights the sum
/// check would pass; with random weights it fails, and each is rejected on its own.
#[test]
fn cancelling_errors_do_not_pass_together() {
    let signer = key(12);
    let d = secret(&signer);
    let public = signer.public_key();
    let known_key = known(&signer);
    let (m1, m2) = (data(1), data(2));
    let (z1, z2) = (prehash(&m1), prehash(&m2));
    let (t1, t2) = (prehash(&data(101)), prehash(&data(102)));
    // Signature 1: nonce t1·G, an arbitrary s; its error is e1·G.
    let s1 = prehash(&data(201));
    let first = with_nonce(&t1, &s1);
    let r1 = r_of(&first);
    let s1_inv = s1.invert().into_option().expect("non-zero");
    let e1 = s1_inv * (z1 + r1 * d) - t1;
    // Signature 2: nonce t2·G, with s chosen so that its error is exactly -e1·G.
    let r2 = r_of(&with_nonce(&t2, &Scalar::ONE));
    let s2 = (z2 + r2 * d)
        * (t2 - e1)
            .invert()
            .into_option()
            .expect("t2 differs from e1");
    let second = with_nonce(&t2, &s2);

    // Neither is valid...
    assert!(!recovers_to(&first, &m1, &public));
    assert!(!recovers_to(&second, &m2, &public));
    // ...but with unit weights their errors cancel.
    let q = ProjectivePoint::from(&public);
    let error = |signature: &[u8; 65], z: Scalar, nonce: &Scalar| {
        let s_inv = scalar(&signature[32..64])
            .invert()
            .into_option()
            .expect("non-zero");
        ProjectivePoint::mul_by_generator(&(z * s_inv)) + q * (r_of(signature) * s_inv)
            - ProjectivePoint::mul_by_generator(nonce)
    };
    assert_ne!(error(&first, z1, &t1), ProjectivePoint::IDENTITY);
    assert_eq!(
        error(&first, z1, &t1) + error(&second, z2, &t2),
        ProjectivePoint::IDENTITY
    );
    // The random weights catch it, every time.
    let pair = [parsed(&first, &m1), parsed(&second, &m2)];
    let mut batch = SameKeyBatch::new();
    for _ in 0..32 {
        assert!(!batch.check(&known_key, &pair));
    }
    let mut verdicts = [true; 2];
    assert!(!batch.check_each(&known_key, &pair, &mut verdicts));
    assert_eq!(verdicts, [false, false]);
    // Among valid ones, too.
    let mut signatures: Vec<SignedDigest> = (10..40)
        .map(|index| parsed(&signer.sign_eth(&data(index)), &data(index)))
        .collect();
    signatures.insert(3, pair[0]);
    signatures.push(pair[1]);
    assert!(!batch.check(&known_key, &signatures));
}

#[test]
fn an_empty_batch_passes_and_a_single_uses_the_single_check() {
    let signer = key(13);
    let known_key = known(&signer);
    let mut batch = SameKeyBatch::new();
    assert!(batch.check(&known_key, &[]));
    let mut none: [bool; 0] = [];
    assert!(batch.check_each(&known_key, &[], &mut none));
    let signature = signer.sign_eth(&data(0));
    let mut verdict = [false];
    assert!(batch.check_each(&known_key, &[parsed(&signature, &data(0))], &mut verdict));
    assert_eq!(verdict, [true]);
}
