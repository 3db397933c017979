//! R6..R12: roles, claims, ALL and implicit authorship.

use bps_proto::{Address, Binding, Hash, Kind, Status, feed_id, keccak256, soc_address};
use bps_verify::{
    Expect, ShapeError, SigningKey, VerifyError, VerifyRequest, proximity, sign_broadcast,
    sign_implicit,
};
use bytes::Bytes;

use super::driver::{
    Client, Rig, ack, ack_ok, all, arm, blocklist, close, consumed, deliver, explicit, implicit,
    join_body, key, peer, send, sid, violation,
};
use crate::{CloseReason, Counter, FullCause, InvalidSoc, ProtocolConfig, Violation, WrongStream};

#[test]
fn r06_admin_and_rostered_streams_are_pending_outside_the_bound_and_get_only_their_roster() {
    let mut rig = Rig::with_config(ProtocolConfig {
        streams_per_cohort_max: 1,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    let admin = rig.joined(key(1), &spec, sid(2), peer(2));
    let actions = rig.join_raw(peer(3), sid(3), join_body(&spec, &key(3).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(FullCause::CohortStreams))
        ]
    );
    // A second admin stream is pending as well, despite the full bound.
    rig.joined(key(1), &spec, sid(4), peer(4));
    let roster = admin.roster(0, &[key(5).address()]);
    assert_eq!(
        rig.publish(sid(2), &roster),
        vec![consumed(sid(2)), deliver(&roster, &[sid(1)])]
    );
    // A rostered stream is pending too, and its one pre-claim delivery is the roster naming it.
    rig.now.0 = 1_000;
    let (rostered, actions) = rig.join(key(5), &spec, sid(5), peer(5));
    assert_eq!(
        actions,
        vec![ack_ok(sid(5), &rostered.challenge), send(sid(5), &roster)]
    );
    // Pending streams are in no fan-out set.
    let data = admin.data(0, b"only the spectator");
    assert_eq!(
        rig.publish(sid(2), &data),
        vec![consumed(sid(2)), deliver(&data, &[sid(1)])]
    );
    assert_eq!(rig.roles(&spec)["pending"], vec![sid(4), sid(5)]);
    // The claim deadline disconnects a pending stream: claim_timeout and a short blocklist.
    assert_eq!(
        rig.tick_at(30_000),
        vec![
            close(sid(4), CloseReason::ClaimTimeout),
            blocklist(peer(4), 90_000),
            arm(31_000)
        ]
    );
    assert_eq!(
        rig.tick_at(31_000),
        vec![
            close(sid(5), CloseReason::ClaimTimeout),
            blocklist(peer(5), 91_000),
            arm(600_000)
        ]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::ClaimTimeout), 2);
}

#[test]
fn r07_the_first_valid_frame_claims_without_a_reply_auth_is_never_delivered_data_is() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    assert_eq!(rig.role_of(&spec, sid(1)), Some("publisher"));
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedAuth), 1);
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 0);
    let data = admin.data(0, b"first");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2)])]
    );
    // D3: any allowed kind at any index claims; here DATA at index 9 on a second admin stream.
    let second = rig.joined(key(1), &spec, sid(3), peer(3));
    let data = second.data(9, b"claim by data");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Claims), 2);
    assert_eq!(rig.roles(&spec)["publisher"], vec![sid(1), sid(3)]);
}

#[test]
fn r08_a_spectator_frame_is_a_violation_until_a_roster_names_it_then_it_claims_on_the_same_stream()
{
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let early = rig.joined(key(3), &spec, sid(2), peer(2));
    let granted = rig.joined(key(4), &spec, sid(3), peer(3));
    rig.publish(sid(1), &admin.auth());
    let verifications = rig.verifications;
    assert_eq!(
        rig.publish(sid(2), &early.auth()),
        vec![
            consumed(sid(2)),
            violation(sid(2), Violation::WrongStream(WrongStream::Spectator)),
            blocklist(peer(2), 600_000)
        ]
    );
    assert_eq!(
        rig.verifications, verifications,
        "a spectator's frame costs no signature check"
    );
    let roster = admin.roster(0, &[granted.addr]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(3)])]
    );
    assert_eq!(rig.publish(sid(3), &granted.auth()), vec![consumed(sid(3))]);
    assert_eq!(rig.role_of(&spec, sid(3)), Some("publisher"));
    let data = granted.data(0, b"granted");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(1)])]
    );
}

#[test]
fn r09_a_closed_cohort_keeps_other_addresses_silent_until_a_roster_names_them() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), true);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    let named = rig.joined(key(4), &spec, sid(3), peer(3));
    assert_eq!(rig.roles(&spec)["silent"], vec![sid(2), sid(3)]);
    rig.publish(sid(1), &admin.auth());
    // No audience: nobody receives the admin's DATA.
    assert_eq!(
        rig.publish(sid(1), &admin.data(0, b"to nobody")),
        vec![consumed(sid(1))]
    );
    rig.now.0 = 10_000;
    let roster = admin.roster(0, &[named.addr]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), send(sid(3), &roster)]
    );
    // The named stream's claim deadline restarted at the roster; the other one expires.
    assert_eq!(
        rig.tick_at(30_000),
        vec![
            close(sid(2), CloseReason::ClaimTimeout),
            blocklist(peer(2), 90_000),
            arm(40_000)
        ]
    );
    assert_eq!(rig.publish(sid(3), &named.auth()), vec![consumed(sid(3))]);
    let data = admin.data(1, b"to the jam");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(3)])]
    );
    let unnamed = rig.joined(key(5), &spec, sid(4), peer(4));
    assert_eq!(
        rig.feed(sid(4), &unnamed.data(0, b"x")),
        vec![
            consumed(sid(4)),
            violation(sid(4), Violation::WrongStream(WrongStream::Silent)),
            blocklist(peer(4), 630_000)
        ]
    );
}

#[test]
fn r10_under_all_every_declared_address_publishes_from_the_join_without_a_claim() {
    let mut rig = Rig::new();
    let spec = all(1, &key(1));
    let (alice, actions) = rig.join(key(2), &spec, sid(1), peer(1));
    assert_eq!(
        actions,
        vec![ack_ok(sid(1), &alice.challenge), arm(600_000)]
    );
    let bob = rig.joined(key(3), &spec, sid(2), peer(2));
    let admin = rig.joined(key(1), &spec, sid(3), peer(3));
    assert_eq!(rig.roles(&spec)["publisher"], vec![sid(1), sid(2), sid(3)]);
    let data = alice.data(0, b"hi");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2), sid(3)])]
    );
    let data = bob.data(0, b"hello");
    assert_eq!(
        rig.publish(sid(2), &data),
        vec![consumed(sid(2)), deliver(&data, &[sid(1), sid(3)])]
    );
    let data = admin.data(0, b"admin too");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(1), sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Claims), 0);
    // Each DATA must be valid at keccak256(id ‖ stream addr): bob's key on alice's stream is not.
    let forged = sign_broadcast(
        &bob.key,
        Kind::Data,
        &spec.topic,
        &alice.challenge,
        1,
        b"as alice",
    );
    let error = bps_verify::verify(&VerifyRequest {
        chunk: forged.chunk.clone(),
        expect: Expect::At { owner: alice.addr },
    })
    .expect_err("wrong owner");
    assert_eq!(
        rig.publish(sid(1), &forged.frame),
        vec![
            consumed(sid(1)),
            violation(sid(1), Violation::InvalidSoc(InvalidSoc::Verify(error))),
            blocklist(peer(1), 600_000)
        ]
    );
}

/// Joins two implicit publishers (keys 2 and 3) and returns them.
fn implicit_pair(rig: &mut Rig, spec: &bps_proto::Spec) -> (Client, Client) {
    let first = rig.joined(key(2), spec, sid(1), peer(1));
    let second = rig.joined(key(3), spec, sid(2), peer(2));
    (first, second)
}

fn implicit_frame(signer: &SigningKey, id: &Hash, index: Option<u64>, payload: &[u8]) -> Bytes {
    sign_implicit(signer, id, index, payload).frame
}

/// An id whose SOC address under `owner` is within PO 16 of `anchor`.
fn mine_id(owner: &Address, anchor: &Hash) -> Hash {
    (0u64..)
        .map(|nonce| keccak256(&nonce.to_be_bytes()))
        .find(|id| proximity(&soc_address(id, owner), anchor) >= bps_verify::PO_MIN)
        .expect("a nonce exists")
}

#[test]
fn r11_implicit_mnemonic_anyone_publishes_any_chunk_without_claim_or_challenge() {
    let mut rig = Rig::new();
    let spec = implicit([5; 32], Binding::Mnemonic);
    let (alice, _) = implicit_pair(&mut rig, &spec);
    let frame = implicit_frame(&alice.key, &[1; 32], None, b"any id");
    assert_eq!(
        rig.publish(sid(1), &frame),
        vec![consumed(sid(1)), deliver(&frame, &[sid(2)])]
    );
    // Any owner: a chunk signed by a third key, carried by bob's stream.
    let frame = implicit_frame(&key(9), &[2; 32], None, b"any owner");
    assert_eq!(
        rig.publish(sid(2), &frame),
        vec![consumed(sid(2)), deliver(&frame, &[sid(1)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Claims), 0);
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 2);
}

#[test]
fn r11_implicit_anchor_chunks_must_sit_at_the_topic_address() {
    let gsoc = key(9);
    let id: Hash = [7; 32];
    let mut rig = Rig::new();
    let spec = implicit(soc_address(id, gsoc.address()), Binding::Anchor);
    implicit_pair(&mut rig, &spec);
    // Holders of the shared key declare their own addresses and hear each other.
    let first = implicit_frame(&gsoc, &id, None, b"from alice");
    assert_eq!(
        rig.publish(sid(1), &first),
        vec![consumed(sid(1)), deliver(&first, &[sid(2)])]
    );
    let second = implicit_frame(&gsoc, &id, None, b"from bob");
    assert_eq!(
        rig.publish(sid(2), &second),
        vec![consumed(sid(2)), deliver(&second, &[sid(1)])]
    );
    let elsewhere = implicit_frame(&gsoc, &[8; 32], None, b"wrong id");
    let actions = rig.publish(sid(1), &elsewhere);
    assert!(matches!(
        &actions[1],
        crate::Action::Close {
            reason: CloseReason::Violation(Violation::InvalidSoc(InvalidSoc::Verify(
                VerifyError::Shape(ShapeError::AddressNotTopic { .. })
            ))),
            ..
        }
    ));
    assert_eq!(actions.len(), 3);
}

#[test]
fn r11_implicit_owner_chunks_come_from_the_topic_owner_within_po_16_on_its_own_stream() {
    let owner = key(9);
    let topic = keccak256(&owner.address());
    let mut rig = Rig::new();
    let spec = implicit(topic, Binding::Owner);
    let publisher = rig.joined(key(9), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    let id = mine_id(&owner.address(), &topic);
    let frame = implicit_frame(&owner, &id, None, b"mined");
    assert_eq!(
        rig.publish(publisher.stream, &frame),
        vec![consumed(sid(1)), deliver(&frame, &[sid(2)])]
    );
    // Too far from the topic.
    let far = (0u64..)
        .map(|nonce| keccak256(&nonce.to_le_bytes()))
        .find(|id| proximity(&soc_address(id, owner.address()), &topic) < bps_verify::PO_MIN)
        .expect("most ids are far");
    let actions = rig.publish(sid(1), &implicit_frame(&owner, &far, None, b"far"));
    assert!(matches!(
        &actions[1],
        crate::Action::Close {
            reason: CloseReason::Violation(Violation::InvalidSoc(InvalidSoc::Verify(
                VerifyError::Shape(ShapeError::ProximityTooLow { .. })
            ))),
            ..
        }
    ));
    // The owner's chunk on a stream that declared another address.
    let other = rig.joined(key(4), &spec, sid(3), peer(3));
    let frame = implicit_frame(&owner, &id, None, b"relayed");
    assert_eq!(
        rig.publish(other.stream, &frame),
        vec![
            consumed(sid(3)),
            violation(sid(3), Violation::InvalidSoc(InvalidSoc::OwnerNotAddr)),
            blocklist(peer(3), 600_000)
        ]
    );
}

#[test]
fn r11_implicit_feed_topic_ids_follow_the_frame_index_with_any_owner() {
    let mut rig = Rig::new();
    let spec = implicit([6; 32], Binding::FeedTopic);
    implicit_pair(&mut rig, &spec);
    let frame = implicit_frame(&key(9), &feed_id(spec.topic, 3), Some(3), b"graffiti");
    assert_eq!(
        rig.publish(sid(1), &frame),
        vec![consumed(sid(1)), deliver(&frame, &[sid(2)])]
    );
    // The id for index 3 carried at index 4 fails the cheap check: no signature is checked.
    let verifications = rig.verifications;
    let mut moved = sign_implicit(&key(9), &feed_id(spec.topic, 3), Some(3), b"moved").broadcast;
    moved.index = 4;
    let body = Bytes::from(prost::Message::encode_to_vec(&moved));
    assert_eq!(
        rig.feed_body(sid(2), body),
        vec![
            consumed(sid(2)),
            violation(sid(2), Violation::InvalidSoc(InvalidSoc::IdMismatch)),
            blocklist(peer(2), 600_000)
        ]
    );
    assert_eq!(rig.verifications, verifications);
}

#[test]
fn r11_implicit_soc_id_chunks_carry_the_topic_as_id_within_po_16() {
    let owner = key(9);
    // Mine a topic whose SOC address under this owner is within PO 16 of the topic itself (D8).
    let topic = (0u64..)
        .map(|nonce| keccak256(&nonce.to_be_bytes()))
        .find(|topic| proximity(&soc_address(topic, owner.address()), topic) >= bps_verify::PO_MIN)
        .expect("a nonce exists");
    let mut rig = Rig::new();
    let spec = implicit(topic, Binding::SocId);
    implicit_pair(&mut rig, &spec);
    let frame = implicit_frame(&owner, &topic, None, b"moc");
    assert_eq!(
        rig.publish(sid(1), &frame),
        vec![consumed(sid(1)), deliver(&frame, &[sid(2)])]
    );
    assert_eq!(
        rig.publish(sid(2), &implicit_frame(&owner, &[1; 32], None, b"other id")),
        vec![
            consumed(sid(2)),
            violation(sid(2), Violation::InvalidSoc(InvalidSoc::IdMismatch)),
            blocklist(peer(2), 600_000)
        ]
    );
    let other_owner = rig.joined(key(4), &spec, sid(3), peer(3));
    let actions = rig.publish(
        other_owner.stream,
        &implicit_frame(&key(4), &topic, None, b"wrong owner"),
    );
    assert!(matches!(
        &actions[1],
        crate::Action::Close {
            reason: CloseReason::Violation(Violation::InvalidSoc(InvalidSoc::Verify(
                VerifyError::Shape(ShapeError::ProximityTooLow { .. })
            ))),
            ..
        }
    ));
}

#[test]
fn r12_explicit_legitimacy_is_admin_or_roster_with_session_chunks_and_no_po_or_anchor_check() {
    for binding in [
        Binding::Anchor,
        Binding::SocId,
        Binding::Owner,
        Binding::Mnemonic,
        Binding::FeedTopic,
    ] {
        let mut rig = Rig::new();
        let spec = bps_proto::Spec {
            binding,
            ..explicit(1, &key(1), false)
        };
        let admin = rig.joined(key(1), &spec, sid(1), peer(1));
        let listener = rig.joined(key(3), &spec, sid(2), peer(2));
        let data = admin.data(0, b"session chunk");
        assert_eq!(
            rig.publish(sid(1), &data),
            vec![consumed(sid(1)), deliver(&data, &[sid(2)])],
            "{binding}"
        );
        let roster = admin.roster(0, &[key(4).address()]);
        rig.publish(sid(1), &roster);
        let rostered = rig.joined(key(4), &spec, sid(3), peer(3));
        let data = rostered.data(0, b"rostered");
        assert_eq!(
            rig.publish(sid(3), &data),
            vec![consumed(sid(3)), deliver(&data, &[sid(1), sid(2)])],
            "{binding}"
        );
        // Neither admin nor rostered: read-only.
        assert_eq!(rig.role_of(&spec, listener.stream), Some("spectator"));
    }
}
