//! R13..R18 (the validation order) and R25..R29 (delivery, queues, cursors, dedup, streams
//! per identity).

use std::sync::Arc;

use bps_proto::{Binding, Broadcast, Kind};
use bps_verify::{SocError, sign_broadcast, sign_implicit};
use bytes::Bytes;
use prost::Message;

use super::driver::{
    Client, Rig, ack_ok, all, blocklist, body_of, close, consumed, deliver, explicit, implicit,
    key, peer, sid, violation,
};
use crate::{
    Action, CloseReason, ClosedBy, Counter, InvalidSoc, Millis, ProtocolConfig, StreamId,
    Violation, WrongStream,
};

fn encoded(broadcast: &Broadcast) -> Bytes {
    Bytes::from(broadcast.encode_to_vec())
}

/// An explicit open cohort with a claimed admin on stream 1 and a spectator on stream 2.
fn live_stream(rig: &mut Rig) -> (bps_proto::Spec, Client) {
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    (spec, admin)
}

#[test]
fn r13_frames_a_role_may_not_send_are_violations_before_any_signature_check() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    let roster = admin.roster(0, &[key(4).address()]);
    rig.publish(sid(1), &roster);
    let rostered = rig.joined(key(4), &spec, sid(3), peer(3));
    rig.publish(sid(3), &rostered.auth());
    let verifications = rig.verifications;
    let service = Violation::WrongStream(WrongStream::ServiceKindFromNonAdmin);
    // A rostered publisher may not send ROSTER or EOS.
    let second = rig.joined(key(4), &spec, sid(4), peer(4));
    assert_eq!(
        rig.feed(sid(3), &rostered.roster(0, &[])),
        vec![
            consumed(sid(3)),
            violation(sid(3), service.clone()),
            blocklist(peer(3), 600_000)
        ]
    );
    assert_eq!(
        rig.feed(sid(4), &second.eos()),
        vec![
            consumed(sid(4)),
            violation(sid(4), service.clone()),
            blocklist(peer(4), 600_000)
        ]
    );
    // Nor may a non-admin publisher under ALL.
    let all_spec = all(2, &key(1));
    let member = rig.joined(key(5), &all_spec, sid(5), peer(5));
    assert_eq!(
        rig.feed(sid(5), &member.eos()),
        vec![
            consumed(sid(5)),
            violation(sid(5), service.clone()),
            blocklist(peer(5), 600_000)
        ]
    );
    // Under implicit authorship there is no admin and no claim: ROSTER and AUTH are refused.
    let implicit_spec = implicit([3; 32], Binding::Mnemonic);
    rig.joined(key(6), &implicit_spec, sid(6), peer(6));
    rig.joined(key(7), &implicit_spec, sid(7), peer(7));
    let mut frame = sign_implicit(&key(6), &[1; 32], None, b"").broadcast;
    frame.kind = Kind::Roster as i32;
    assert_eq!(
        rig.feed_body(sid(6), encoded(&frame)),
        vec![
            consumed(sid(6)),
            violation(sid(6), service),
            blocklist(peer(6), 600_000)
        ]
    );
    frame.kind = Kind::Auth as i32;
    assert_eq!(
        rig.feed_body(sid(7), encoded(&frame)),
        vec![
            consumed(sid(7)),
            violation(
                sid(7),
                Violation::WrongStream(WrongStream::AuthInImplicitCohort)
            ),
            blocklist(peer(7), 600_000)
        ]
    );
    assert_eq!(rig.verifications, verifications);
    assert_eq!(rig.count(Counter::WrongStream), 5);
}

#[test]
fn r14_unknown_or_unspecified_kinds_are_dropped_and_counted_never_fatal() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    let verifications = rig.verifications;
    for kind in [7, 0, -3] {
        let mut frame = admin.sign(Kind::Data, 0, b"x").broadcast;
        frame.kind = kind;
        assert_eq!(
            rig.feed_body(sid(1), encoded(&frame)),
            vec![consumed(sid(1))]
        );
    }
    // A pending stream stays pending.
    let pending = rig.joined(key(1), &spec, sid(3), peer(3));
    let mut frame = pending.sign(Kind::Auth, 0, b"").broadcast;
    frame.kind = 99;
    assert_eq!(
        rig.feed_body(sid(3), encoded(&frame)),
        vec![consumed(sid(3))]
    );
    assert_eq!(rig.role_of(&spec, sid(3)), Some("pending"));
    assert_eq!(rig.cohort_count(&spec, Counter::UnknownKind), 4);
    assert_eq!(rig.verifications, verifications);
    let data = admin.data(0, b"still publishing");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2)])]
    );
}

#[test]
fn r15_a_wrong_challenge_is_dropped_and_a_pending_stream_stays_pending() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    let elsewhere = sign_broadcast(&admin.key, Kind::Auth, &spec.topic, &[9; 32], 0, b"");
    assert_eq!(
        rig.publish(sid(1), &elsewhere.frame),
        vec![consumed(sid(1))]
    );
    assert_eq!(rig.role_of(&spec, sid(1)), Some("pending"));
    assert_eq!(rig.cohort_count(&spec, Counter::WrongChallenge), 1);
    assert_eq!(rig.verifications, 0);
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    assert_eq!(rig.role_of(&spec, sid(1)), Some("publisher"));
    // A publisher's wrong-challenge frame is dropped too.
    let stale = sign_broadcast(&admin.key, Kind::Data, &spec.topic, &[9; 32], 0, b"x");
    assert_eq!(rig.publish(sid(1), &stale.frame), vec![consumed(sid(1))]);
    // Implicit cohorts have no salt: whatever the challenge field says is ignored.
    let implicit_spec = implicit([3; 32], Binding::Mnemonic);
    rig.joined(key(6), &implicit_spec, sid(6), peer(6));
    rig.joined(key(7), &implicit_spec, sid(7), peer(7));
    let mut frame = sign_implicit(&key(6), &[1; 32], None, b"salted?").broadcast;
    frame.challenge = Bytes::from(vec![5; 32]);
    let actions = rig.feed_body(sid(6), encoded(&frame));
    let actions = rig.run_verifications(actions);
    assert_eq!(
        actions,
        vec![
            consumed(sid(6)),
            deliver(&bps_proto::encode_frame(&frame), &[sid(7)])
        ]
    );
}

#[test]
fn r16_below_the_cursor_is_a_retransmit_dropped_before_verification() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    let data = admin.data(5, b"five");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2)])]
    );
    let verifications = rig.verifications;
    assert_eq!(
        rig.publish(sid(1), &admin.data(3, b"three")),
        vec![consumed(sid(1))]
    );
    assert_eq!(rig.publish(sid(1), &data), vec![consumed(sid(1))]);
    assert_eq!(rig.verifications, verifications);
    let roster = admin.roster(4, &[]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2)])]
    );
    let verifications = rig.verifications;
    assert_eq!(
        rig.publish(sid(1), &admin.roster(2, &[])),
        vec![consumed(sid(1))]
    );
    assert_eq!(rig.verifications, verifications);
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 3);
}

#[test]
fn r15_r16_drops_beyond_the_per_stream_rate_reset_that_stream_without_blocklisting() {
    let mut rig = Rig::with_config(ProtocolConfig {
        dropped_frames_per_stream_per_s_max: 3,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    assert_eq!(rig.publish(sid(1), &admin.data(10, b"ten")).len(), 2);
    let stale = admin.data(3, b"old");
    for _ in 0..3 {
        assert_eq!(rig.publish(sid(1), &stale), vec![consumed(sid(1))]);
    }
    // A new window: the count starts over.
    rig.now = Millis(1_000);
    for _ in 0..3 {
        assert_eq!(rig.publish(sid(1), &stale), vec![consumed(sid(1))]);
    }
    let unknown = {
        let mut broadcast = bps_proto::decode_broadcast(body_of(&stale)).expect("broadcast");
        broadcast.kind = 42;
        encoded(&broadcast)
    };
    assert_eq!(
        rig.feed_body(sid(1), unknown),
        vec![consumed(sid(1)), close(sid(1), CloseReason::DropRate)]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::DropRateResets), 1);
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 6);
    assert_eq!(rig.cohort_count(&spec, Counter::UnknownKind), 1);
    assert!(!rig.ledger.is_blocked(peer(1), rig.now), "no blocklist");
    assert!(rig.all_consumed());
}

#[test]
fn r16_on_a_pending_stream_a_valid_below_cursor_frame_still_claims() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    rig.publish(sid(1), &admin.data(5, b"five"));
    let reconnect = rig.joined(key(1), &spec, sid(3), peer(3));
    let verifications = rig.verifications;
    assert_eq!(
        rig.publish(sid(3), &reconnect.data(2, b"old index")),
        vec![consumed(sid(3))]
    );
    assert_eq!(
        rig.verifications,
        verifications + 1,
        "checked after verification"
    );
    assert_eq!(rig.role_of(&spec, sid(3)), Some("publisher"));
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
    assert_eq!(rig.cohort_count(&spec, Counter::Claims), 2);
    // An invalid one is a violation, not a retransmit (R17 before R16).
    let other = rig.joined(key(1), &spec, sid(4), peer(4));
    let forged = sign_broadcast(
        &key(8),
        Kind::Data,
        &spec.topic,
        &other.challenge,
        1,
        b"forged",
    );
    let actions = rig.publish(sid(4), &forged.frame);
    assert!(matches!(
        &actions[1],
        Action::Close {
            reason: CloseReason::Violation(Violation::InvalidSoc(InvalidSoc::Verify(_))),
            ..
        }
    ));
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
}

/// Builds a frame body for a client's stream.
type MakeFrame = Box<dyn Fn(&Client) -> Bytes>;

#[test]
fn r17_cheap_chunk_checks_fail_as_invalid_soc_without_a_signature_check() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(100), peer(100));
    let cases: Vec<(MakeFrame, InvalidSoc)> = vec![
        (
            Box::new(|client: &Client| {
                let mut frame = client.sign(Kind::Data, 1, b"x").broadcast;
                frame.index = 2;
                encoded(&frame)
            }),
            InvalidSoc::IdMismatch,
        ),
        (
            Box::new(|client: &Client| {
                client
                    .sign(Kind::Auth, 0, b"payload")
                    .broadcast
                    .encode_to_vec()
                    .into()
            }),
            InvalidSoc::ServiceChunkNotEmpty,
        ),
        (
            Box::new(|client: &Client| {
                client
                    .sign(Kind::Eos, 0, b"payload")
                    .broadcast
                    .encode_to_vec()
                    .into()
            }),
            InvalidSoc::ServiceChunkNotEmpty,
        ),
        (
            Box::new(|client: &Client| {
                client
                    .sign(Kind::Eos, 1, b"")
                    .broadcast
                    .encode_to_vec()
                    .into()
            }),
            InvalidSoc::EosIndexNotZero,
        ),
        (
            Box::new(|client: &Client| {
                client
                    .sign(Kind::Data, u64::MAX, b"x")
                    .broadcast
                    .encode_to_vec()
                    .into()
            }),
            InvalidSoc::IndexMax,
        ),
        (
            Box::new(|client: &Client| {
                client
                    .sign(Kind::Roster, u64::MAX, b"")
                    .broadcast
                    .encode_to_vec()
                    .into()
            }),
            InvalidSoc::IndexMax,
        ),
        (
            Box::new(|client: &Client| {
                let mut frame = client.sign(Kind::Data, 0, b"x").broadcast;
                frame.soc = frame.soc.slice(..50);
                frame.encode_to_vec().into()
            }),
            InvalidSoc::Length(SocError::TooShort { len: 50, min: 105 }),
        ),
    ];
    for (position, (make, invalid)) in cases.into_iter().enumerate() {
        let number = position as u64 + 1;
        let stream = sid(number);
        let client = rig.joined(key(1), &spec, stream, peer(position as u8 + 1));
        assert_eq!(
            rig.feed_body(stream, make(&client)),
            vec![
                consumed(stream),
                violation(stream, Violation::InvalidSoc(invalid)),
                blocklist(client.peer, 600_000)
            ],
            "case {position}"
        );
    }
    assert_eq!(rig.verifications, 0);
    assert_eq!(rig.cohort_count(&spec, Counter::InvalidSoc), 7);
}

#[test]
fn r17_a_bad_signature_is_invalid_soc_and_one_connection_buys_at_most_one_wasted_check() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let forged: Vec<Bytes> = (0..3)
        .map(|index| {
            sign_broadcast(
                &key(8),
                Kind::Data,
                &spec.topic,
                &admin.challenge,
                index,
                b"forged",
            )
            .frame
        })
        .collect();
    let first = rig.feed(sid(1), &forged[0]);
    assert!(matches!(first.as_slice(), [Action::Verify { .. }]));
    assert_eq!(rig.feed(sid(1), &forged[1]), vec![]);
    assert_eq!(rig.feed(sid(1), &forged[2]), vec![]);
    let actions = rig.run_verifications(first);
    assert_eq!(actions.len(), 5);
    assert_eq!(
        &actions[..3],
        &[consumed(sid(1)), consumed(sid(1)), consumed(sid(1))]
    );
    assert!(matches!(
        &actions[3],
        Action::Close { stream, reason: CloseReason::Violation(Violation::InvalidSoc(InvalidSoc::Verify(_))) }
            if *stream == sid(1)
    ));
    assert_eq!(actions[4], blocklist(peer(1), 600_000));
    assert_eq!(rig.verifications, 1);
    assert!(rig.all_consumed());
}

#[test]
fn r17_frames_behind_a_valid_first_check_are_verified_in_order_afterwards() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let frames: Vec<Bytes> = (0..3).map(|index| admin.data(index, b"in order")).collect();
    let first = rig.feed(sid(1), &frames[0]);
    assert_eq!(rig.feed(sid(1), &frames[1]), vec![]);
    assert_eq!(rig.feed(sid(1), &frames[2]), vec![]);
    let actions = rig.run_verifications(first);
    assert_eq!(
        actions,
        vec![
            consumed(sid(1)),
            deliver(&frames[0], &[sid(2)]),
            consumed(sid(1)),
            deliver(&frames[1], &[sid(2)]),
            consumed(sid(1)),
            deliver(&frames[2], &[sid(2)]),
        ]
    );
    assert_eq!(rig.verifications, 3);
}

#[test]
fn r18_accepted_data_sets_the_cursor_and_is_delivered_byte_for_byte() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    let seven = admin.data(7, b"seven");
    let actions = rig.publish(sid(1), &seven);
    assert_eq!(actions, vec![consumed(sid(1)), deliver(&seven, &[sid(2)])]);
    let Action::Deliver { frame, .. } = &actions[1] else {
        unreachable!("asserted above")
    };
    assert_eq!(frame, &seven, "the publisher's frame, unchanged");
    assert_eq!(rig.publish(sid(1), &seven), vec![consumed(sid(1))]);
    let eight = admin.data(8, b"eight");
    assert_eq!(
        rig.publish(sid(1), &eight),
        vec![consumed(sid(1)), deliver(&eight, &[sid(2)])]
    );
    // Gaps are allowed; below the cursor is not.
    let twenty = admin.data(20, b"twenty");
    assert_eq!(
        rig.publish(sid(1), &twenty),
        vec![consumed(sid(1)), deliver(&twenty, &[sid(2)])]
    );
    assert_eq!(
        rig.publish(sid(1), &admin.data(15, b"fifteen")),
        vec![consumed(sid(1))]
    );
    assert_eq!(rig.only_cohort().cursors, 1);
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 3);
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 3);
}

#[test]
fn r25_never_echo_to_any_stream_of_the_publishing_identity_with_shared_sorted_targets() {
    let mut rig = Rig::new();
    let spec = all(1, &key(1));
    let alice = rig.joined(key(2), &spec, StreamId::new(0, 1), peer(1));
    let alice_again = rig.joined(key(2), &spec, StreamId::new(1, 2), peer(2));
    let bob = rig.joined(key(3), &spec, StreamId::new(1, 1), peer(3));
    rig.joined(key(4), &spec, StreamId::new(0, 5), peer(4));
    let first = alice.data(0, b"one");
    rig.expand = false;
    let actions = rig.publish(alice.stream, &first);
    let second = alice_again.data(1, b"two");
    let again = rig.publish(alice_again.stream, &second);
    rig.expand = true;
    let (Action::Deliver { targets: one, .. }, Action::Deliver { targets: two, .. }) =
        (&actions[1], &again[1])
    else {
        unreachable!("two deliveries")
    };
    assert_eq!(
        one.iter().collect::<Vec<_>>(),
        vec![StreamId::new(0, 5), StreamId::new(1, 1)]
    );
    assert!(
        Arc::ptr_eq(&one.all, &two.all),
        "one member list is shared by every delivery"
    );
    assert!(
        Arc::ptr_eq(&one.except, &two.except),
        "an identity's exclusions are built once"
    );
    assert_eq!(
        &*one.except,
        &[StreamId::new(0, 1), StreamId::new(1, 2)],
        "every stream of the publishing identity is excluded"
    );
    let reply = bob.data(0, b"three");
    assert_eq!(
        rig.publish(bob.stream, &reply),
        vec![
            consumed(bob.stream),
            deliver(
                &reply,
                &[
                    StreamId::new(0, 1),
                    StreamId::new(0, 5),
                    StreamId::new(1, 2)
                ]
            )
        ]
    );
}

#[test]
fn r26_a_stream_reset_for_its_queue_is_counted_and_the_rest_still_receive() {
    let mut rig = Rig::new();
    let (spec, admin) = live_stream(&mut rig);
    rig.joined(key(3), &spec, sid(3), peer(3));
    assert_eq!(rig.closed(sid(2), ClosedBy::QueueOverflow), vec![]);
    assert_eq!(rig.cohort_count(&spec, Counter::QueueReset), 1);
    let data = admin.data(0, b"the rest still get it");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(3)])]
    );
}

#[test]
fn r27_one_cursor_per_publisher_address_shared_by_its_streams_in_a_bounded_table() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cursors_per_cohort_max: 1,
        ..ProtocolConfig::default()
    });
    let (spec, admin) = live_stream(&mut rig);
    let five = admin.data(5, b"five");
    assert_eq!(
        rig.publish(sid(1), &five),
        vec![consumed(sid(1)), deliver(&five, &[sid(2)])]
    );
    let second = rig.joined(key(1), &spec, sid(3), peer(3));
    rig.publish(sid(3), &second.auth());
    assert_eq!(
        rig.publish(sid(3), &second.data(5, b"five again")),
        vec![consumed(sid(3))]
    );
    let six = second.data(6, b"six");
    assert_eq!(
        rig.publish(sid(3), &six),
        vec![consumed(sid(3)), deliver(&six, &[sid(2)])]
    );
    // Another address has its own cursor; with room for one, the admin's is evicted.
    rig.publish(sid(1), &admin.roster(0, &[key(4).address()]));
    let other = rig.joined(key(4), &spec, sid(4), peer(4));
    let zero = other.data(0, b"zero");
    assert_eq!(
        rig.publish(sid(4), &zero),
        vec![consumed(sid(4)), deliver(&zero, &[sid(1), sid(2), sid(3)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::CursorEvictions), 1);
    let restarted = admin.data(1, b"below the evicted cursor");
    assert_eq!(
        rig.publish(sid(1), &restarted),
        vec![consumed(sid(1)), deliver(&restarted, &[sid(2), sid(4)])]
    );
}

#[test]
fn r28_implicit_dedup_is_a_bounded_window_on_the_chunk_address() {
    let mut rig = Rig::with_config(ProtocolConfig {
        dedup_window_entries: 2,
        ..ProtocolConfig::default()
    });
    let spec = implicit([5; 32], Binding::Mnemonic);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    let chunks: Vec<Bytes> = (1..=3)
        .map(|n| sign_implicit(&key(2), &[n; 32], None, b"chunk").frame)
        .collect();
    assert_eq!(
        rig.publish(sid(1), &chunks[0]),
        vec![consumed(sid(1)), deliver(&chunks[0], &[sid(2)])]
    );
    // The same chunk from another stream is a duplicate (after verification: the key needs the owner).
    let verifications = rig.verifications;
    assert_eq!(rig.publish(sid(2), &chunks[0]), vec![consumed(sid(2))]);
    assert_eq!(rig.verifications, verifications + 1);
    rig.publish(sid(1), &chunks[1]);
    rig.publish(sid(1), &chunks[2]);
    // Evicted from the window: accepted again (R28's accepted risk).
    assert_eq!(
        rig.publish(sid(2), &chunks[0]),
        vec![consumed(sid(2)), deliver(&chunks[0], &[sid(1)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
    assert_eq!(rig.only_cohort().dedup_entries, 2);
}

#[test]
fn r29_a_publisher_stream_beyond_the_per_address_bound_resets_the_oldest() {
    let mut rig = Rig::new();
    let spec = all(1, &key(1));
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    let (third, actions) = rig.join(key(2), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(3), &third.challenge),
            close(sid(1), CloseReason::Superseded)
        ]
    );
    assert!(!CloseReason::Superseded.graceful());
    assert_eq!(rig.roles(&spec)["publisher"], vec![sid(2), sid(3)]);
    // Explicit: the claim beyond the bound resets the oldest claim.
    let explicit_spec = explicit(2, &key(1), false);
    let admins: Vec<Client> = (4..=6)
        .map(|n| rig.joined(key(1), &explicit_spec, sid(n), peer(n as u8)))
        .collect();
    assert_eq!(
        rig.publish(sid(5), &admins[1].auth()),
        vec![consumed(sid(5))]
    );
    assert_eq!(
        rig.publish(sid(4), &admins[0].auth()),
        vec![consumed(sid(4))]
    );
    assert_eq!(
        rig.publish(sid(6), &admins[2].auth()),
        vec![consumed(sid(6)), close(sid(5), CloseReason::Superseded)]
    );
    assert_eq!(rig.cohort_count(&explicit_spec, Counter::Superseded), 1);
    assert_eq!(rig.count(Counter::Superseded), 2);
}

/// Two verification workers may finish a stream's frames in any order (the pool splits one
/// owner's burst between them): results that come back late-first are held until every
/// earlier frame's result is in, then applied in read order.
#[test]
fn results_finished_out_of_order_are_applied_in_read_order() {
    let mut rig = Rig::new();
    let (_spec, admin) = live_stream(&mut rig);
    let frames: Vec<Bytes> = (0..4).map(|index| admin.data(index, b"split")).collect();
    let mut jobs = Vec::new();
    for frame in &frames {
        for action in rig.feed(sid(1), frame) {
            match action {
                Action::Verify { ticket, request } => jobs.push((ticket, request)),
                other => panic!("only a verification is due yet: {other:?}"),
            }
        }
    }
    assert_eq!(
        jobs.len(),
        frames.len(),
        "a proven stream's frames verify at once"
    );
    let mut later_half = jobs.split_off(2);
    later_half.reverse();
    for (ticket, request) in later_half {
        let result = bps_verify::verify(&request);
        rig.machine.on_verified(rig.now, ticket, result);
        assert_eq!(
            rig.drain(),
            vec![],
            "nothing before the first frame's result"
        );
    }
    let mut applied = Vec::new();
    for (ticket, request) in jobs.into_iter().rev() {
        let result = bps_verify::verify(&request);
        rig.machine.on_verified(rig.now, ticket, result);
        applied.push(rig.drain());
    }
    assert_eq!(applied[0], vec![], "frame 1 still waits for frame 0");
    let mut in_order = Vec::new();
    for frame in &frames {
        in_order.extend([consumed(sid(1)), deliver(frame, &[sid(2)])]);
    }
    assert_eq!(applied[1], in_order);
    assert!(rig.all_consumed());
}
