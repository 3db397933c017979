//! Adversarial tests of the key checks (`bps_verify::batch`): a signature passes the single
//! or batched check against a known key exactly when recovery yields that key, bad
//! signatures are singled out, and crafted signatures whose errors cancel under fixed
//! weights do not pass together.

use bps_proto::keccak256;
use bps_verify::{
    Hash, KeyedSignature, KnownKey, KnownKeysBatch, SignatureError, SignedDigest, SigningKey,
    address_of, eip191_hash, recover_public_key_eth, verify_with_key,
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

/// The signatures as a batch of the one key at index 0.
fn one_key(signatures: &[SignedDigest]) -> Vec<KeyedSignature> {
    signatures
        .iter()
        .map(|signature| KeyedSignature {
            key: 0,
            signature: *signature,
        })
        .collect()
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
    with_nonce_point(&ProjectivePoint::mul_by_generator(nonce), s)
}

/// A signature with nonce point `point` (whose x must be below N) and the given `s`.
fn with_nonce_point(point: &ProjectivePoint, s: &Scalar) -> [u8; 65] {
    let point = point.to_affine();
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
    let mut batch = KnownKeysBatch::new();
    let all_valid = expected.iter().all(|valid| *valid);
    assert_eq!(
        batch.check(&[known], &one_key(&parsed_all)),
        all_valid,
        "batch check"
    );
    let mut verdicts = vec![false; signatures.len()];
    assert_eq!(
        batch.check_each(&[known], &one_key(&parsed_all), &mut verdicts),
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
        let mut batch = KnownKeysBatch::new();
        assert!(!batch.check(&[known_key], &one_key(&[parsed(&twin, &data(index))])));
        // And the twin does pass against the key it recovers to.
        let recovered_known = KnownKey::new(&recovered);
        assert_eq!(recovered_known.address(), address_of(&recovered));
        assert!(verify_with_key(
            &recovered_known,
            &parsed(&twin, &data(index))
        ));
        assert!(batch.check(&[recovered_known], &one_key(&[parsed(&twin, &data(index))])));
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

/// A signature with recovery id 2 or 3 (`v` in 29, 30, 33, 34) whose nonce point exists:
/// `r = t` small, so that `x = N + t` is below P and on the curve.
fn x_reduced_signature(v: u8) -> [u8; 65] {
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
    let mut signature = [0u8; 65];
    signature[31] = t;
    signature[32..64].copy_from_slice(&keccak256(&[v]));
    signature[64] = v;
    signature
}

/// Recovery ids 2 and 3 (x = r + N): a constructed nonce point R with x in [N, P), as in
/// `signatures.rs`. The key recovered from (r, s, v) passes both checks with that v, and
/// fails with the other parity or without the x overflow.
#[test]
fn x_reduced_recovery_ids_match_recovery() {
    for (index, v) in [29u8, 30, 33, 34].into_iter().enumerate() {
        let signature = x_reduced_signature(v);
        let message = data(index);
        let recovered = recover_public_key_eth(&signature, &message).expect("R exists");
        let recovered_known = KnownKey::new(&recovered);
        let digest = parsed(&signature, &message);
        assert!(verify_with_key(&recovered_known, &digest), "v = {v}");
        let mut batch = KnownKeysBatch::new();
        // The batch arithmetic on one signature, and on a duplicate pair.
        assert!(
            batch.check(&[recovered_known], &one_key(&[digest])),
            "v = {v}"
        );
        assert!(
            batch.check(&[recovered_known], &one_key(&[digest, digest])),
            "v = {v}"
        );
        for other_v in [27 + ((v - 27) ^ 1), v - 2] {
            let mut other = signature;
            other[64] = other_v;
            let agrees = recovers_to(&other, &message, &recovered);
            let other_digest = parsed(&other, &message);
            assert_eq!(verify_with_key(&recovered_known, &other_digest), agrees);
            assert_eq!(
                batch.check(&[recovered_known], &one_key(&[other_digest])),
                agrees
            );
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
    let mut batch = KnownKeysBatch::new();
    for _ in 0..32 {
        assert!(!batch.check(&[known_key], &one_key(&pair)));
    }
    let mut verdicts = [true; 2];
    assert!(!batch.check_each(&[known_key], &one_key(&pair), &mut verdicts));
    assert_eq!(verdicts, [false, false]);
    // Among valid ones, too.
    let mut signatures: Vec<SignedDigest> = (10..40)
        .map(|index| parsed(&signer.sign_eth(&data(index)), &data(index)))
        .collect();
    signatures.insert(3, pair[0]);
    signatures.push(pair[1]);
    assert!(!batch.check(&[known_key], &one_key(&signatures)));
}

#[test]
fn an_empty_batch_passes_and_a_single_uses_the_single_check() {
    let signer = key(13);
    let known_key = known(&signer);
    let mut batch = KnownKeysBatch::new();
    assert!(batch.check(&[known_key], &one_key(&[])));
    let mut none: [bool; 0] = [];
    assert!(batch.check_each(&[known_key], &one_key(&[]), &mut none));
    let signature = signer.sign_eth(&data(0));
    let mut verdict = [false];
    assert!(batch.check_each(
        &[known_key],
        &one_key(&[parsed(&signature, &data(0))]),
        &mut verdict
    ));
    assert_eq!(verdict, [true]);
}

// ---- several keys in one batch ----

/// Keys of the multi-key batches.
const MANY_KEYS: usize = 16;

fn many_keys() -> Vec<SigningKey> {
    (0..MANY_KEYS).map(|index| key(100 + index as u8)).collect()
}

/// One signature of a multi-key batch: the key it must recover to (an index into the
/// batch's keys), the signature and the data it signs.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: usize,
    signature: [u8; 65],
    data: Hash,
}

/// Signature `index` of a round-robin stream over `keys`, each signed by the key it names.
fn round_robin(keys: &[SigningKey], count: usize) -> Vec<Entry> {
    (0..count)
        .map(|index| Entry {
            key: index % keys.len(),
            signature: keys[index % keys.len()].sign_eth(&data(index)),
            data: data(index),
        })
        .collect()
}

fn public_keys(keys: &[SigningKey]) -> Vec<PublicKey> {
    keys.iter().map(SigningKey::public_key).collect()
}

/// Checks `entries` against `keys` singly, as one batch and per item, and asserts that
/// each verdict is recovery's: does the signature recover to the key its entry names?
fn assert_multi_key_verdicts_match_recovery(keys: &[PublicKey], entries: &[Entry]) -> Vec<bool> {
    let known: Vec<KnownKey> = keys.iter().map(KnownKey::new).collect();
    let expected: Vec<bool> = entries
        .iter()
        .map(|entry| recovers_to(&entry.signature, &entry.data, &keys[entry.key]))
        .collect();
    let keyed: Vec<KeyedSignature> = entries
        .iter()
        .map(|entry| KeyedSignature {
            key: entry.key,
            signature: parsed(&entry.signature, &entry.data),
        })
        .collect();
    for (index, signature) in keyed.iter().enumerate() {
        assert_eq!(
            verify_with_key(&known[signature.key], &signature.signature),
            expected[index],
            "single check of {index}"
        );
    }
    let mut batch = KnownKeysBatch::new();
    let all_valid = expected.iter().all(|valid| *valid);
    assert_eq!(batch.check(&known, &keyed), all_valid, "batch check");
    let mut verdicts = vec![false; entries.len()];
    assert_eq!(batch.check_each(&known, &keyed, &mut verdicts), all_valid);
    assert_eq!(verdicts, expected, "per-signature verdicts");
    verdicts
}

#[test]
fn a_valid_batch_of_64_signatures_of_16_keys_passes() {
    let keys = many_keys();
    let verdicts =
        assert_multi_key_verdicts_match_recovery(&public_keys(&keys), &round_robin(&keys, 64));
    assert!(verdicts.iter().all(|valid| *valid));
}

#[test]
fn one_bad_signature_among_64_of_16_keys_is_the_only_one_rejected() {
    let keys = many_keys();
    let public = public_keys(&keys);
    type Spoil = fn(&Entry, &[SigningKey]) -> Entry;
    let spoilers: [(&str, Spoil); 8] = [
        ("signs other data", |entry, keys| Entry {
            signature: keys[entry.key].sign_eth(&data(9999)),
            ..*entry
        }),
        ("a key outside the batch", |entry, _| Entry {
            signature: key(3).sign_eth(&entry.data),
            ..*entry
        }),
        ("valid for another key of the batch", |entry, keys| Entry {
            signature: keys[(entry.key + 1) % keys.len()].sign_eth(&entry.data),
            ..*entry
        }),
        ("presented as another key of the batch", |entry, keys| {
            Entry {
                key: (entry.key + 5) % keys.len(),
                ..*entry
            }
        }),
        ("flipped v", |entry, _| Entry {
            signature: flipped_v_twin(&entry.signature),
            ..*entry
        }),
        ("high S with the original v", |entry, _| {
            let mut spoiled = high_s_twin(&entry.signature);
            spoiled[64] = entry.signature[64];
            Entry {
                signature: spoiled,
                ..*entry
            }
        }),
        ("s + 1", |entry, _| {
            let mut spoiled = entry.signature;
            let bumped: [u8; 32] = (scalar(&spoiled[32..64]) + Scalar::ONE).to_repr().into();
            spoiled[32..64].copy_from_slice(&bumped);
            Entry {
                signature: spoiled,
                ..*entry
            }
        }),
        ("x-reduced v", |entry, _| {
            let mut spoiled = entry.signature;
            spoiled[64] += 2;
            Entry {
                signature: spoiled,
                ..*entry
            }
        }),
    ];
    for (round, (name, spoil)) in spoilers.iter().enumerate() {
        let position = [0usize, 17, 63][round % 3];
        let mut entries = round_robin(&keys, 64);
        entries[position] = spoil(&entries[position], &keys);
        let verdicts = assert_multi_key_verdicts_match_recovery(&public, &entries);
        for (index, valid) in verdicts.iter().enumerate() {
            assert_eq!(*valid, index != position, "{name}: signature {index}");
        }
    }
}

/// Two valid signatures of keys A and B, each presented as the other's: both rejected,
/// alone and together, and among valid ones.
#[test]
fn signatures_of_a_presented_as_b_are_rejected() {
    let keys = many_keys();
    let public = public_keys(&keys);
    let mut entries = round_robin(&keys, 32);
    entries.swap(3, 4);
    let swapped: Vec<Entry> = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| Entry {
            key: index % keys.len(),
            ..*entry
        })
        .collect();
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &swapped);
    for (index, valid) in verdicts.iter().enumerate() {
        assert_eq!(*valid, index != 3 && index != 4, "signature {index}");
    }
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &swapped[3..5]);
    assert_eq!(verdicts, [false, false]);
}

/// An attacker who holds key A only forges a chunk for owner B (any signature: its error
/// `E_B` is a public point) and signs one of his own with error exactly `−E_B`: under unit
/// weights the two cancel, so B's forgery would be accepted. The random weights catch it.
#[test]
fn cancelling_errors_across_keys_do_not_pass_together() {
    let attacker = key(20);
    let victim = key(21);
    let d_attacker = secret(&attacker);
    let (q_attacker, q_victim) = (
        ProjectivePoint::from(&attacker.public_key()),
        ProjectivePoint::from(&victim.public_key()),
    );
    let error = |entry: &Entry, q: &ProjectivePoint| {
        let parsed_r = r_of(&entry.signature);
        let s_inv = scalar(&entry.signature[32..64])
            .invert()
            .into_option()
            .expect("non-zero");
        let nonce = recover_nonce(&entry.signature);
        ProjectivePoint::mul_by_generator(&(prehash(&entry.data) * s_inv)) + *q * (parsed_r * s_inv)
            - nonce
    };
    // The forgery: an arbitrary nonce and s, claimed for the victim (key index 1).
    let forged = Entry {
        key: 1,
        signature: with_nonce(&prehash(&data(301)), &prehash(&data(302))),
        data: data(300),
    };
    let victim_error = error(&forged, &q_victim);
    // The attacker's own signature: nonce R = t·G + E_B, s = (z + r·d_A) / t, so that its
    // error is t·G − R = −E_B.
    let t = prehash(&data(303));
    let nonce = ProjectivePoint::mul_by_generator(&t) + victim_error;
    let r = scalar(&nonce.to_affine().x());
    let z = prehash(&data(304));
    let s = (z + r * d_attacker) * t.invert().into_option().expect("non-zero");
    let own = Entry {
        key: 0,
        signature: with_nonce_point(&nonce, &s),
        data: data(304),
    };
    assert_ne!(victim_error, ProjectivePoint::IDENTITY);
    assert_eq!(
        error(&own, &q_attacker) + victim_error,
        ProjectivePoint::IDENTITY,
        "the errors cancel under unit weights"
    );
    let public = [attacker.public_key(), victim.public_key()];
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &[own, forged]);
    assert_eq!(verdicts, [false, false]);
    // Every time, and among valid signatures of both keys and others.
    let known: Vec<KnownKey> = public.iter().map(KnownKey::new).collect();
    let pair = [own, forged].map(|entry| KeyedSignature {
        key: entry.key,
        signature: parsed(&entry.signature, &entry.data),
    });
    let mut batch = KnownKeysBatch::new();
    for _ in 0..32 {
        assert!(!batch.check(&known, &pair));
    }
    let mut keys = vec![attacker, victim];
    keys.extend(many_keys());
    let mut entries = round_robin(&keys, 40);
    entries.insert(7, own);
    entries.push(forged);
    let verdicts = assert_multi_key_verdicts_match_recovery(&public_keys(&keys), &entries);
    assert_eq!(verdicts.iter().filter(|valid| !**valid).count(), 2);
    assert!(!verdicts[7] && !verdicts[entries.len() - 1]);
}

/// Recovery's nonce point of a signature with recovery id 0 or 1.
fn recover_nonce(signature: &[u8; 65]) -> ProjectivePoint {
    let x = FieldBytes::from(<[u8; 32]>::try_from(&signature[..32]).expect("32 bytes"));
    let odd = (signature[64] - 27) & 1;
    ProjectivePoint::from(
        AffinePoint::decompress(&x, odd.into())
            .into_option()
            .expect("on the curve"),
    )
}

#[test]
fn an_all_invalid_batch_of_many_keys_is_rejected_item_by_item() {
    let keys = many_keys();
    let entries: Vec<Entry> = round_robin(&keys, 64)
        .into_iter()
        .enumerate()
        .map(|(index, entry)| match index % 3 {
            0 => Entry {
                data: data(index + 7000),
                ..entry
            },
            1 => Entry {
                signature: flipped_v_twin(&entry.signature),
                ..entry
            },
            _ => Entry {
                key: (entry.key + 1) % keys.len(),
                ..entry
            },
        })
        .collect();
    let verdicts = assert_multi_key_verdicts_match_recovery(&public_keys(&keys), &entries);
    assert!(verdicts.iter().all(|valid| !*valid));
}

/// A key listed twice, a key no signature names, and a signature listed twice: the sums
/// are the same, valid batches pass and a duplicated bad signature is rejected both times.
#[test]
fn duplicate_keys_and_signatures_in_one_batch() {
    let signers = [key(30), key(31)];
    let unused = key(32);
    let public = [
        signers[0].public_key(),
        signers[1].public_key(),
        signers[0].public_key(),
        unused.public_key(),
    ];
    let mut entries: Vec<Entry> = (0..12)
        .map(|index| Entry {
            // Key 0's signatures name index 0 or its duplicate, index 2.
            key: [0, 1, 2][index % 3],
            signature: signers[[0, 1, 0][index % 3]].sign_eth(&data(index)),
            data: data(index),
        })
        .collect();
    entries.push(entries[4]);
    entries.push(entries[4]);
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &entries);
    assert!(verdicts.iter().all(|valid| *valid));
    let bad = Entry {
        data: data(8000),
        ..entries[5]
    };
    entries.push(bad);
    entries.insert(0, bad);
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &entries);
    for (index, valid) in verdicts.iter().enumerate() {
        assert_eq!(*valid, index != 0 && index != entries.len() - 1, "{index}");
    }
}

/// High-S twins, flipped-v twins (named as their signer, and as the key they recover to)
/// and x-reduced recovery ids, each with its own key, in one batch with other keys.
#[test]
fn twins_and_x_reduced_ids_across_keys_match_recovery() {
    let keys = many_keys();
    let mut public = public_keys(&keys);
    let mut entries = Vec::new();
    for (index, entry) in round_robin(&keys, 32).into_iter().enumerate() {
        match index % 4 {
            0 => entries.push(entry),
            1 => entries.push(Entry {
                signature: high_s_twin(&entry.signature),
                ..entry
            }),
            2 => {
                let twin = flipped_v_twin(&entry.signature);
                let recovered = recover_public_key_eth(&twin, &entry.data).expect("a key");
                public.push(recovered);
                entries.push(Entry {
                    key: public.len() - 1,
                    signature: twin,
                    data: entry.data,
                });
            }
            _ => {
                let signature = x_reduced_signature([29, 30, 33, 34][index / 4 % 4]);
                let recovered = recover_public_key_eth(&signature, &entry.data).expect("R exists");
                public.push(recovered);
                entries.push(Entry {
                    key: public.len() - 1,
                    signature,
                    data: entry.data,
                });
            }
        }
    }
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &entries);
    assert!(verdicts.iter().all(|valid| *valid));
    // The flipped-v twins named as their signer instead: exactly those fail.
    let renamed: Vec<Entry> = entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            if index % 4 == 2 {
                Entry {
                    key: index % keys.len(),
                    ..*entry
                }
            } else {
                *entry
            }
        })
        .collect();
    let verdicts = assert_multi_key_verdicts_match_recovery(&public, &renamed);
    for (index, valid) in verdicts.iter().enumerate() {
        assert_eq!(*valid, index % 4 != 2, "{index}");
    }
}

#[test]
fn empty_batches_pass_with_or_without_keys() {
    let mut batch = KnownKeysBatch::new();
    assert!(batch.check(&[], &[]));
    assert!(batch.check(&[known(&key(40))], &[]));
    assert!(batch.check_each(&[], &[], &mut []));
}

#[test]
#[should_panic(expected = "outside the batch")]
fn a_signature_naming_a_missing_key_is_a_caller_bug() {
    let signer = key(41);
    let signature = KeyedSignature {
        key: 1,
        signature: parsed(&signer.sign_eth(&data(0)), &data(0)),
    };
    KnownKeysBatch::new().check(&[known(&signer)], &[signature]);
}
