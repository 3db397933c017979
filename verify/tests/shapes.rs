//! Implicit-authorship shapes (docs/PROTOCOL.md R11, D4, D8) through the verification job: each
//! binding accepts its shape with the right dedup key and rejects the near misses.

use bps_proto::{Binding, feed_id, keccak256, soc_address};
use bps_verify::{
    Expect, Hash, PO_MIN, ShapeError, SigningKey, Verified, VerifyError, VerifyRequest,
    cac_address, proximity, sign_implicit, sign_soc, verify, verify_batch,
};
use bytes::Bytes;
use proptest::prelude::*;

fn implicit(chunk: Bytes, binding: Binding, topic: Hash, index: u64) -> VerifyRequest {
    VerifyRequest {
        chunk,
        expect: Expect::Implicit {
            binding,
            topic,
            index,
        },
    }
}

fn shape_error(result: Result<Verified, VerifyError>) -> ShapeError {
    match result {
        Err(VerifyError::Shape(error)) => error,
        other => panic!("expected a shape error, got {other:?}"),
    }
}

/// An id whose SOC address under `owner` has PO >= PO_MIN to `topic` (MIC mining).
fn mine_id(owner: &[u8; 20], topic: &Hash) -> Hash {
    (0u64..)
        .map(|nonce| keccak256(&nonce.to_be_bytes()))
        .find(|id| proximity(&soc_address(id, owner), topic) >= PO_MIN)
        .expect("found within ~2^16 tries")
}

/// A topic t with PO(keccak256(t ‖ owner), t) >= PO_MIN, so that id = topic fits SOC_ID.
fn mine_soc_id_topic(owner: &[u8; 20]) -> Hash {
    (0u64..)
        .map(|nonce| keccak256(&[b"moc".as_slice(), &nonce.to_be_bytes()].concat()))
        .find(|topic| proximity(&soc_address(topic, owner), topic) >= PO_MIN)
        .expect("found within ~2^16 tries")
}

#[test]
fn owner_binding_mic() {
    let key = SigningKey::random();
    let topic = keccak256(&key.address());
    let id = mine_id(&key.address(), &topic);
    let chunk = sign_implicit(&key, &id, None, b"mic").chunk;
    let verified = verify(&implicit(chunk.clone(), Binding::Owner, topic, 0)).expect("fits");
    assert_eq!(verified.owner, key.address());
    assert_eq!(verified.dedup_key, soc_address(id, key.address()));

    // Another signer: keccak256(owner) is not the topic.
    let stranger = SigningKey::random();
    let chunk = sign_implicit(&stranger, &id, None, b"mic").chunk;
    assert!(matches!(
        shape_error(verify(&implicit(chunk, Binding::Owner, topic, 0))),
        ShapeError::OwnerNotTopic { .. }
    ));

    // The right owner, an id that was not mined: too far from the topic.
    let unmined = (0u8..)
        .map(|n| keccak256(&[n]))
        .find(|id| proximity(&soc_address(id, key.address()), &topic) < PO_MIN)
        .expect("almost every id");
    let chunk = sign_implicit(&key, &unmined, None, b"mic").chunk;
    assert!(matches!(
        shape_error(verify(&implicit(chunk, Binding::Owner, topic, 0))),
        ShapeError::ProximityTooLow {
            binding: Binding::Owner,
            min: PO_MIN,
            ..
        }
    ));
}

#[test]
fn soc_id_binding_moc() {
    let key = SigningKey::random();
    let topic = mine_soc_id_topic(&key.address());
    let chunk = sign_implicit(&key, &topic, None, b"moc").chunk;
    let verified = verify(&implicit(chunk, Binding::SocId, topic, 0)).expect("fits");
    assert_eq!(verified.dedup_key, soc_address(topic, key.address()));

    // id is not the topic
    let other_id = keccak256(b"other");
    let chunk = sign_implicit(&key, &other_id, None, b"moc").chunk;
    assert_eq!(
        shape_error(verify(&implicit(chunk, Binding::SocId, topic, 0))),
        ShapeError::IdNotTopic {
            id: other_id,
            topic
        }
    );

    // id is the topic, but this owner lands far from it (D8: the anchor is the topic).
    let far = (0u8..)
        .map(|_| SigningKey::random())
        .find(|other| proximity(&soc_address(topic, other.address()), &topic) < PO_MIN)
        .expect("almost every key");
    let chunk = sign_implicit(&far, &topic, None, b"moc").chunk;
    assert!(matches!(
        shape_error(verify(&implicit(chunk, Binding::SocId, topic, 0))),
        ShapeError::ProximityTooLow {
            binding: Binding::SocId,
            ..
        }
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// MNEMONIC: any owner, any id; dedup on the SOC address.
    #[test]
    fn mnemonic_accepts_anything_valid(id in any::<[u8; 32]>(), topic in any::<[u8; 32]>(), payload in proptest::collection::vec(any::<u8>(), 0..=128)) {
        let key = SigningKey::random();
        let chunk = sign_implicit(&key, &id, None, &payload).chunk;
        let verified = verify(&implicit(chunk, Binding::Mnemonic, topic, 0)).expect("fits");
        prop_assert_eq!(verified.owner, key.address());
        prop_assert_eq!(verified.dedup_key, soc_address(id, key.address()));
    }

    /// ANCHOR (GSOC): the SOC address must be the topic; many payloads share it and are
    /// told apart by the wrapped CAC address.
    #[test]
    fn anchor_dedups_on_wrapped_chunk(id in any::<[u8; 32]>(), first in proptest::collection::vec(any::<u8>(), 1..=64), second in proptest::collection::vec(any::<u8>(), 1..=64)) {
        prop_assume!(first != second);
        let key = SigningKey::random();
        let topic = soc_address(id, key.address());
        let mut keys = Vec::new();
        for payload in [&first, &second] {
            let chunk = sign_implicit(&key, &id, None, payload).chunk;
            let verified = verify(&implicit(chunk, Binding::Anchor, topic, 0)).expect("fits");
            prop_assert_eq!(verified.address, topic);
            prop_assert_eq!(verified.dedup_key, cac_address((payload.len() as u64).to_le_bytes(), payload));
            keys.push(verified.dedup_key);
        }
        prop_assert_ne!(keys[0], keys[1]);

        // Another holder of another key is at another address.
        let stranger = SigningKey::random();
        let chunk = sign_implicit(&stranger, &id, None, &first).chunk;
        let error = shape_error(verify(&implicit(chunk, Binding::Anchor, topic, 0)));
        prop_assert!(matches!(error, ShapeError::AddressNotTopic { .. }), "{:?}", error);
    }

    /// FEED_TOPIC (D4): id = keccak256(topic ‖ be64(index)), any owner; the frame's index
    /// must be the one the id was made from.
    #[test]
    fn feed_topic_checks_index(topic in any::<[u8; 32]>(), index in any::<u64>(), other in any::<u64>()) {
        prop_assume!(index != other);
        let key = SigningKey::random();
        let id = feed_id(topic, index);
        let frame = sign_implicit(&key, &id, Some(index), b"update");
        prop_assert_eq!(frame.broadcast.index, index);
        let verified = verify(&implicit(frame.chunk.clone(), Binding::FeedTopic, topic, index)).expect("fits");
        prop_assert_eq!(verified.dedup_key, soc_address(id, key.address()));
        let error = shape_error(verify(&implicit(frame.chunk, Binding::FeedTopic, topic, other)));
        prop_assert_eq!(error, ShapeError::FeedIdMismatch { id, expected: feed_id(topic, other), index: other });
    }

    /// OWNER and SOC_ID with random topics are rejected (the shapes need mining).
    #[test]
    fn unmined_owner_and_soc_id_are_rejected(id in any::<[u8; 32]>(), topic in any::<[u8; 32]>()) {
        let key = SigningKey::random();
        let chunk = sign_soc(&key, &id, 2, b"hi");
        prop_assert!(matches!(verify(&implicit(chunk.clone(), Binding::Owner, topic, 0)), Err(VerifyError::Shape(_))));
        prop_assert!(matches!(verify(&implicit(chunk, Binding::SocId, topic, 0)), Err(VerifyError::Shape(_))));
    }
}

/// A shape check never rescues an invalid SOC: corruption is a SOC error first.
#[test]
fn invalid_soc_is_a_soc_error_under_every_binding() {
    let key = SigningKey::random();
    let id = keccak256(b"id");
    let mut chunk = sign_soc(&key, &id, 3, b"abc").to_vec();
    chunk[33] ^= 0x80;
    let chunk = Bytes::from(chunk);
    for binding in [
        Binding::Anchor,
        Binding::SocId,
        Binding::Owner,
        Binding::FeedTopic,
        Binding::Mnemonic,
    ] {
        let result = verify(&implicit(chunk.clone(), binding, id, 0));
        // A flipped r either has no point or names another owner; MNEMONIC then accepts
        // a chunk "by" that other owner, exactly as bee would store it.
        if binding == Binding::Mnemonic {
            if let Ok(verified) = result {
                assert_ne!(verified.owner, key.address());
            }
        } else {
            assert!(result.is_err(), "{binding:?}");
        }
    }
}

#[test]
fn batch_preserves_order() {
    let key = SigningKey::random();
    let good = sign_soc(&key, &[1; 32], 1, b"x");
    let requests = vec![
        VerifyRequest {
            chunk: good.clone(),
            expect: Expect::At {
                owner: key.address(),
            },
        },
        VerifyRequest {
            chunk: Bytes::from_static(b"short"),
            expect: Expect::At {
                owner: key.address(),
            },
        },
        VerifyRequest {
            chunk: good,
            expect: Expect::At { owner: [0; 20] },
        },
    ];
    let mut results = Vec::new();
    verify_batch(&requests, &mut results);
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(VerifyError::Soc(_))));
    assert!(matches!(results[2], Err(VerifyError::Soc(_))));
    verify_batch(&requests[..1], &mut results);
    assert_eq!(results.len(), 4, "appends");
}
