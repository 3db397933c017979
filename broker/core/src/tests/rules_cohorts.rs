//! R1..R5, R30..R37, R39, R40: cohorts, the handshake, bounds, deadlines, violations and
//! counters.

use std::sync::Arc;

use bps_proto::{Binding, CohortSpec, Join, RejectReason, Status};
use bytes::Bytes;
use prost::Message;

use super::driver::{
    Rig, ack, ack_ok, all, arm, blocklist, close, consumed, deliver, explicit, implicit, join_body,
    key, peer, sid, violation,
};
use crate::{
    Action, CloseReason, ClosedBy, Counter, FullCause, HistoryPolicy, PeerLedger, ProtocolConfig,
    RejectCause, StreamId, Violation, WrongStream,
};

#[test]
fn r01_the_spec_is_the_identity_and_unknown_fields_or_encoded_defaults_do_not_split_it() {
    let mut rig = Rig::new();
    let admin = key(1);
    let spec = explicit(1, &admin, false);
    let mut expected_key = vec![0x0a, 0x20];
    expected_key.extend_from_slice(&[1; 32]);
    expected_key.extend_from_slice(&[0x10, 0x04, 0x1a, 0x14]);
    expected_key.extend_from_slice(&admin.address());
    assert_eq!(spec.key().as_bytes(), expected_key.as_slice());

    let first = rig.joined(key(2), &spec, sid(1), peer(1));
    // The same spec, encoded with an explicit default and an unknown field.
    let mut cohort = spec.to_pb().encode_to_vec();
    cohort.extend_from_slice(&[0x28, 0x00]);
    cohort.extend_from_slice(&[0xf8, 0x01, 0x01]);
    let mut body = vec![0x0a, u8::try_from(cohort.len()).expect("short spec")];
    body.extend_from_slice(&cohort);
    body.extend_from_slice(&[0x12, 20]);
    body.extend_from_slice(&key(3).address());
    let actions = rig.join_raw(peer(2), sid(2), Bytes::from(body));
    assert_eq!(actions.len(), 1);
    assert!(matches!(&actions[0], Action::Send { stream, .. } if *stream == sid(2)));
    assert_eq!(rig.machine.cohort_count(), 1);
    assert_eq!(rig.roles(&spec)["spectator"], vec![first.stream, sid(2)]);

    // Any field that differs is another cohort.
    let closed = explicit(1, &admin, true);
    rig.joined(key(4), &closed, sid(3), peer(3));
    assert_eq!(rig.machine.cohort_count(), 2);
    assert_eq!(rig.count(Counter::CohortsCreated), 2);
}

#[test]
fn r02_the_first_join_creates_the_cohort_and_a_matching_join_attaches() {
    let mut rig = Rig::new();
    let admin = key(1);
    let spec = explicit(1, &admin, false);
    // A spectator may create the cohort before its admin arrives.
    let (spectator, actions) = rig.join(key(2), &spec, sid(1), peer(1));
    assert_eq!(
        actions,
        vec![ack_ok(sid(1), &spectator.challenge), arm(600_000)]
    );
    let (admin_client, actions) = rig.join(admin, &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![ack_ok(sid(2), &admin_client.challenge), arm(30_000)]
    );
    assert_eq!(rig.machine.cohort_count(), 1);
    assert_eq!(rig.roles(&spec)["pending"], vec![sid(2)]);
    assert_eq!(rig.roles(&spec)["spectator"], vec![sid(1)]);
    assert_eq!(rig.cohort_count(&spec, Counter::JoinsOk), 2);
    assert_eq!(rig.cohort_count(&spec, Counter::CohortsCreated), 1);
}

fn join_with(cohort: Option<CohortSpec>, addr: &[u8]) -> Bytes {
    Bytes::from(
        Join {
            cohort,
            addr: Bytes::copy_from_slice(addr),
        }
        .encode_to_vec(),
    )
}

#[test]
fn r03_rejected_for_a_malformed_join_or_a_spec_outside_the_swip() {
    // D11: a broker may refuse history (R3); this one does.
    let mut rig = Rig::with_config(ProtocolConfig {
        history: HistoryPolicy::Refuse,
        ..ProtocolConfig::default()
    });
    let good = explicit(1, &key(1), false).to_pb();
    let addr = key(2).address();
    let with = |edit: &dyn Fn(&mut CohortSpec)| {
        let mut spec = good.clone();
        edit(&mut spec);
        join_with(Some(spec), &addr)
    };
    let cases: Vec<(Bytes, RejectCause)> = vec![
        (
            Bytes::from_static(&[0x0a, 0x05, 0x01]),
            RejectCause::Undecodable,
        ),
        (
            join_with(None, &addr),
            RejectCause::Invalid(RejectReason::MissingCohort),
        ),
        (
            with(&|spec| spec.binding = 0),
            RejectCause::Invalid(RejectReason::BindingUnspecified),
        ),
        (
            with(&|spec| spec.binding = 9),
            RejectCause::Invalid(RejectReason::BindingUnknown { value: 9 }),
        ),
        (
            with(&|spec| spec.publishers = 2),
            RejectCause::Invalid(RejectReason::PublishersUnknown { value: 2 }),
        ),
        (
            with(&|spec| spec.topic = Bytes::from(vec![1; 31])),
            RejectCause::Invalid(RejectReason::TopicLength { bytes: 31 }),
        ),
        (
            with(&|spec| spec.admin = Bytes::from(vec![1; 19])),
            RejectCause::Invalid(RejectReason::AdminLength { bytes: 19 }),
        ),
        (
            join_with(Some(good.clone()), &[]),
            RejectCause::Invalid(RejectReason::AddrLength { bytes: 0 }),
        ),
        (
            join_with(Some(good.clone()), &[7; 21]),
            RejectCause::Invalid(RejectReason::AddrLength { bytes: 21 }),
        ),
        (
            with(&|spec| {
                spec.binding = Binding::Mnemonic.to_pb() as i32;
                spec.publishers = 1;
                spec.closed = true;
            }),
            RejectCause::Invalid(RejectReason::ClosedWithAll),
        ),
        (
            with(&|spec| {
                spec.admin = Bytes::new();
                spec.closed = true;
            }),
            RejectCause::Invalid(RejectReason::ClosedImplicit),
        ),
        (
            with(&|spec| {
                spec.admin = Bytes::new();
                spec.binding = Binding::Mnemonic.to_pb() as i32;
                spec.publishers = 1;
            }),
            RejectCause::Invalid(RejectReason::AllWithoutAdmin),
        ),
        (
            with(&|spec| spec.publishers = 1),
            RejectCause::Invalid(RejectReason::AllWithoutMnemonic {
                binding: Binding::FeedTopic,
            }),
        ),
        (
            with(&|spec| spec.history = true),
            RejectCause::HistoryRefused,
        ),
    ];
    let total = cases.len() as u64;
    for (position, (body, cause)) in cases.into_iter().enumerate() {
        let stream = sid(position as u64);
        let actions = rig.join_raw(peer(1), stream, body);
        assert_eq!(
            actions,
            vec![
                ack(stream, Status::Rejected),
                close(stream, CloseReason::Rejected(cause))
            ],
            "case {position}"
        );
        assert!(
            CloseReason::Rejected(cause).graceful(),
            "the REJECTED Ack must be flushed"
        );
    }
    assert_eq!(rig.count(Counter::JoinsRejected), total);
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.machine.stream_count(), 0);
    assert_eq!(rig.ledger.snapshot().cohorts_live, 0);
}

#[test]
fn r04_every_ok_stream_gets_its_own_32_byte_challenge_from_the_seeded_csprng() {
    let specs = [
        explicit(1, &key(1), false),
        explicit(2, &key(1), true),
        all(3, &key(1)),
        implicit([4; 32], Binding::Mnemonic),
    ];
    let run = |seed: u64| {
        let mut rig = Rig::with_ledger(
            ProtocolConfig::default(),
            Arc::new(PeerLedger::new(&ProtocolConfig::default())),
            seed,
        );
        let mut challenges = Vec::new();
        let mut next = 0;
        for spec in &specs {
            // The admin (pending or publisher) and a subscriber (spectator, silent or publisher).
            for seed_byte in [1, 2] {
                let client = rig.joined(key(seed_byte), spec, sid(next), peer(seed_byte));
                next += 1;
                challenges.push(client.challenge);
            }
        }
        challenges
    };
    let challenges = run(11);
    for (position, challenge) in challenges.iter().enumerate() {
        assert_ne!(challenge, &[0; 32]);
        assert!(
            !challenges[position + 1..].contains(challenge),
            "challenge reused"
        );
    }
    assert_eq!(
        run(11),
        challenges,
        "the same seed replays the same challenges"
    );
    assert_ne!(run(12), challenges);
}

#[test]
fn r05_only_ok_full_and_rejected_are_sent_and_a_non_ok_ack_ends_the_stream() {
    let mut rig = Rig::with_config(ProtocolConfig {
        streams_per_cohort_max: 1,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    let actions = rig.join_raw(peer(2), sid(2), join_body(&spec, &key(3).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(2), Status::Full),
            close(sid(2), CloseReason::Full(FullCause::CohortStreams))
        ]
    );
    assert!(CloseReason::Full(FullCause::CohortStreams).graceful());
    // The refused stream is not attached: a frame on it is only consumed.
    let actions = rig.feed_body(sid(2), Bytes::from_static(b"\x08\x01"));
    assert_eq!(actions, vec![consumed(sid(2))]);
    assert_eq!(rig.count(Counter::DropStreamGone), 1);
    assert_eq!(rig.cohort_count(&spec, Counter::JoinsFull), 1);
    assert_eq!(rig.roles(&spec)["spectator"], vec![sid(1)]);
}

#[test]
fn r30_fanout_bound_answers_full_and_pending_streams_are_exempt() {
    let config = ProtocolConfig {
        streams_per_cohort_max: 2,
        pending_streams_per_cohort_max: 2,
        ..ProtocolConfig::default()
    };
    let mut rig = Rig::with_config(config);
    let admin = key(1);
    let spec = explicit(1, &admin, false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    let actions = rig.join_raw(peer(3), sid(3), join_body(&spec, &key(4).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(FullCause::CohortStreams))
        ]
    );
    // Admin streams are pending, outside the bound, with their own guard.
    let first_admin = rig.joined(key(1), &spec, sid(4), peer(4));
    rig.joined(key(1), &spec, sid(5), peer(5));
    let actions = rig.join_raw(peer(6), sid(6), join_body(&spec, &admin.address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(6), Status::Full),
            close(sid(6), CloseReason::Full(FullCause::CohortPendingStreams))
        ]
    );
    // A claim keeps the exemption: the bound still has no room, and the admin publishes to both.
    let auth = first_admin.auth();
    assert_eq!(
        rig.publish(first_admin.stream, &auth),
        vec![consumed(first_admin.stream)]
    );
    let actions = rig.join_raw(peer(7), sid(7), join_body(&spec, &key(5).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(7), Status::Full),
            close(sid(7), CloseReason::Full(FullCause::CohortStreams))
        ]
    );
    let data = first_admin.data(0, b"to both spectators");
    assert_eq!(
        rig.publish(first_admin.stream, &data),
        vec![consumed(sid(4)), deliver(&data, &[sid(1), sid(2)])]
    );
    // A leaving spectator makes room.
    assert_eq!(rig.closed(sid(1), ClosedBy::Peer), vec![]);
    rig.joined(key(5), &spec, sid(8), peer(8));
    assert_eq!(rig.cohort_count(&spec, Counter::JoinsFull), 3);
}

#[test]
fn r31_live_cohorts_are_bounded_broker_wide_and_full_goes_to_a_creating_join() {
    let config = ProtocolConfig {
        cohorts_max: 2,
        ..ProtocolConfig::default()
    };
    let ledger = Arc::new(PeerLedger::new(&config));
    // Two cores, one ledger.
    let mut core_a = Rig::with_ledger(config.clone(), Arc::clone(&ledger), 1);
    let mut core_b = Rig::with_ledger(config, Arc::clone(&ledger), 2);
    let one = explicit(1, &key(1), false);
    let two = explicit(2, &key(1), false);
    let three = explicit(3, &key(1), false);
    core_a.joined(key(2), &one, sid(1), peer(1));
    core_b.joined(key(2), &two, StreamId::new(1, 1), peer(2));
    let actions = core_a.join_raw(peer(3), sid(2), join_body(&three, &key(2).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(2), Status::Full),
            close(sid(2), CloseReason::Full(FullCause::Cohorts))
        ]
    );
    assert_eq!(core_a.count(Counter::JoinsFull), 1);
    // Attaching to a live cohort is not creating one.
    core_a.joined(key(3), &one, sid(3), peer(3));
    // After a reclaim there is room again, and the refused peer was not left counted.
    assert_eq!(core_b.closed(StreamId::new(1, 1), ClosedBy::Peer), vec![]);
    assert_eq!(ledger.cohorts_of(peer(2)), 0);
    core_a.joined(key(2), &three, sid(4), peer(3));
    assert_eq!(ledger.snapshot().cohorts_live, 2);
    assert_eq!(ledger.cohorts_of(peer(3)), 2);
}

#[test]
fn r32_cohorts_per_peer_are_bounded() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cohorts_per_peer_max: 2,
        ..ProtocolConfig::default()
    });
    let specs: Vec<_> = (1..=3)
        .map(|topic| explicit(topic, &key(1), false))
        .collect();
    rig.joined(key(2), &specs[0], sid(1), peer(1));
    rig.joined(key(2), &specs[1], sid(2), peer(1));
    // A third cohort, existing or new, is refused.
    rig.joined(key(3), &specs[2], sid(3), peer(2));
    let actions = rig.join_raw(peer(1), sid(4), join_body(&specs[2], &key(2).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(4), Status::Full),
            close(sid(4), CloseReason::Full(FullCause::PeerCohorts))
        ]
    );
    let four = explicit(4, &key(1), false);
    let actions = rig.join_raw(peer(1), sid(5), join_body(&four, &key(2).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(5), Status::Full),
            close(sid(5), CloseReason::Full(FullCause::PeerCohorts))
        ]
    );
    assert_eq!(rig.machine.cohort_count(), 3);
    // Another stream in a cohort the peer is already in is fine.
    rig.joined(key(4), &specs[0], sid(6), peer(1));
    assert_eq!(rig.ledger.cohorts_of(peer(1)), 2);
}

#[test]
fn r33_streams_per_peer_per_cohort_are_bounded() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(1));
    let actions = rig.join_raw(peer(1), sid(3), join_body(&spec, &key(4).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(FullCause::PeerStreams))
        ]
    );
    // Admin streams count too: the bound is per peer, whatever the role.
    let actions = rig.join_raw(peer(1), sid(4), join_body(&spec, &key(1).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(4), Status::Full),
            close(sid(4), CloseReason::Full(FullCause::PeerStreams))
        ]
    );
    rig.joined(key(4), &spec, sid(5), peer(2));
}

#[test]
fn r34_inactivity_reclaims_the_cohort_and_resets_every_stream() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let spectator = rig.joined(key(2), &spec, sid(2), peer(2));
    assert_eq!(
        rig.publish(admin.stream, &admin.auth()),
        vec![consumed(sid(1))]
    );
    // The claimed stream's deadline passes without effect.
    assert_eq!(rig.tick_at(30_000), vec![arm(600_000)]);
    let data = admin.data(0, b"hello");
    rig.now.0 = 100_000;
    assert_eq!(
        rig.publish(admin.stream, &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2)])]
    );
    // A retransmit is not activity.
    rig.now.0 = 200_000;
    assert_eq!(rig.publish(admin.stream, &data), vec![consumed(sid(1))]);
    // The inactivity deadline moved to 700 s.
    assert_eq!(rig.tick_at(600_000), vec![arm(700_000)]);
    assert_eq!(rig.tick_at(699_999), vec![]);
    assert_eq!(
        rig.tick_at(700_000),
        vec![
            close(sid(1), CloseReason::Inactive),
            close(spectator.stream, CloseReason::Inactive)
        ]
    );
    assert!(!CloseReason::Inactive.graceful(), "R34 resets the streams");
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.count(Counter::CohortsReclaimedInactive), 1);
    assert_eq!(rig.ledger.snapshot().cohorts_live, 0);
    assert_eq!(rig.ledger.cohorts_of(peer(2)), 0);
}

#[test]
fn r35_claim_deadline_disconnects_pending_and_silent_streams_with_a_short_blocklist() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), true);
    rig.joined(key(1), &spec, sid(1), peer(1));
    rig.now.0 = 1_000;
    rig.joined(key(2), &spec, sid(2), peer(2));
    assert_eq!(rig.role_of(&spec, sid(2)), Some("silent"));
    assert_eq!(rig.tick_at(29_999), vec![]);
    assert_eq!(
        rig.tick_at(30_000),
        vec![
            close(sid(1), CloseReason::ClaimTimeout),
            blocklist(peer(1), 90_000),
            arm(31_000)
        ]
    );
    assert_eq!(
        rig.tick_at(31_000),
        vec![
            close(sid(2), CloseReason::ClaimTimeout),
            blocklist(peer(2), 91_000)
        ]
    );
    assert!(!CloseReason::ClaimTimeout.graceful());
    assert_eq!(rig.count(Counter::ClaimTimeout), 2);
    assert!(rig.ledger.is_blocked(peer(1), rig.now));

    // A duration of 0 disables the blocklist; the timeout itself stays.
    let mut rig = Rig::with_config(ProtocolConfig {
        blocklist_claim_timeout_ms: 0,
        ..ProtocolConfig::default()
    });
    rig.joined(key(1), &spec, sid(1), peer(1));
    assert_eq!(
        rig.tick_at(30_000),
        vec![close(sid(1), CloseReason::ClaimTimeout)]
    );
    assert!(!rig.ledger.is_blocked(peer(1), rig.now));
}

#[test]
fn r36_a_cohort_whose_last_stream_leaves_is_reclaimed_at_once() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    assert_eq!(rig.closed(sid(1), ClosedBy::Peer), vec![]);
    assert_eq!(rig.machine.cohort_count(), 1);
    assert_eq!(rig.closed(sid(2), ClosedBy::Io), vec![]);
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.count(Counter::CohortsReclaimedEmpty), 1);
    assert!(rig.machine.counters().live_cohorts().is_empty());
    assert_eq!(
        rig.ledger.snapshot(),
        crate::LedgerSnapshot {
            cohorts_live: 0,
            peers_attached: 0,
            peers_blocked: 0,
            prejoin_connections: 0,
            peers_with_join_timeouts: 0,
            anonymous_sessions: 0,
            trusted_relays_attached: 0,
            trusted_relay_cohorts: 0,
            blocklistings_waived: 0,
        }
    );
    // The stale inactivity timer of the reclaimed cohort does nothing.
    assert_eq!(rig.tick_at(600_000), vec![]);
}

#[test]
fn r37_after_a_reclaim_a_join_creates_a_fresh_cohort_with_zero_cursors_and_new_challenges() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let old_admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    let old_data = old_admin.data(5, b"old session");
    assert_eq!(
        rig.publish(sid(1), &old_data),
        vec![consumed(sid(1)), deliver(&old_data, &[sid(2)])]
    );
    rig.closed(sid(1), ClosedBy::Peer);
    rig.closed(sid(2), ClosedBy::Peer);
    assert_eq!(rig.machine.cohort_count(), 0);

    let admin = rig.joined(key(1), &spec, sid(3), peer(1));
    rig.joined(key(2), &spec, sid(4), peer(2));
    assert_ne!(admin.challenge, old_admin.challenge);
    // Nothing signed for the old session is accepted: it carries the old challenge.
    let replay = old_admin.data(6, b"replayed");
    assert_eq!(rig.publish(sid(3), &replay), vec![consumed(sid(3))]);
    assert_eq!(rig.cohort_count(&spec, Counter::WrongChallenge), 1);
    // The cursor restarted: index 0 is accepted again.
    let data = admin.data(0, b"new session");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(4)])]
    );
    assert_eq!(rig.count(Counter::CohortsCreated), 2);
}

#[test]
fn r39_violations_reset_and_blocklist_and_a_zero_duration_disables_the_blocklist() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let spectator = rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    rig.now.0 = 5;
    let frame = spectator.data(0, b"not allowed");
    assert_eq!(
        rig.feed(sid(1), &frame),
        vec![
            consumed(sid(1)),
            violation(sid(1), Violation::WrongStream(WrongStream::Spectator)),
            blocklist(peer(1), 600_005)
        ]
    );
    assert!(!CloseReason::Violation(Violation::Malformed).graceful());
    // The blocklisted peer is closed at its next Join, without an Ack.
    assert_eq!(
        rig.join_raw(peer(1), sid(3), join_body(&spec, &key(2).address())),
        vec![close(sid(3), CloseReason::Blocklisted)]
    );
    assert_eq!(rig.count(Counter::JoinsBlocked), 1);
    assert_eq!(rig.count(Counter::Blocklisted), 1);
    rig.now.0 = 600_005;
    rig.joined(key(2), &spec, sid(4), peer(1));

    // A malformed frame is a violation too; with a zero duration nobody is blocklisted.
    let mut rig = Rig::with_config(ProtocolConfig {
        blocklist_violation_ms: 0,
        ..ProtocolConfig::default()
    });
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    assert_eq!(
        rig.feed_body(admin.stream, Bytes::from_static(&[0xff, 0xff])),
        vec![consumed(sid(1)), violation(sid(1), Violation::Malformed)]
    );
    assert_eq!(rig.count(Counter::Malformed), 1);
    rig.joined(key(1), &spec, sid(2), peer(1));
}

#[test]
fn r40_every_required_counter_is_exposed_per_cohort_and_in_total_and_readable_elsewhere() {
    let mut rig = Rig::with_config(ProtocolConfig {
        blocklist_violation_ms: 0,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    let bystander = rig.joined(key(3), &spec, sid(3), peer(3));
    let silent_spec = explicit(2, &key(1), true);
    rig.joined(key(4), &silent_spec, sid(9), peer(4));
    // wrong_challenge (the admin stays pending), then the claim.
    let mut stranger = admin.sign(bps_proto::Kind::Data, 0, b"x").broadcast;
    stranger.challenge = Bytes::from(vec![9; 32]);
    rig.feed_body(sid(1), Bytes::from(stranger.encode_to_vec()));
    rig.publish(sid(1), &admin.data(3, b"claim"));
    // retransmit, unknown_kind, invalid_roster.
    rig.publish(sid(1), &admin.data(2, b"old"));
    let mut unknown = admin.sign(bps_proto::Kind::Data, 4, b"x").broadcast;
    unknown.kind = 42;
    rig.feed_body(sid(1), Bytes::from(unknown.encode_to_vec()));
    rig.publish(
        sid(1),
        &admin
            .sign(bps_proto::Kind::Roster, 0, &[0x0a, 0x01, 0x07])
            .frame,
    );
    // wrong_stream, invalid_soc (forged), queue_reset.
    rig.feed(bystander.stream, &bystander.data(0, b"x"));
    let second_admin = rig.joined(key(1), &spec, sid(4), peer(5));
    let forged = bps_verify::sign_broadcast(
        &key(8),
        bps_proto::Kind::Data,
        &spec.topic,
        &second_admin.challenge,
        0,
        b"f",
    );
    rig.publish(sid(4), &forged.frame);
    rig.closed(sid(2), ClosedBy::QueueOverflow);
    // claim_timeout on the other cohort.
    rig.tick_at(30_000);

    let required = [
        "wrong_stream",
        "unknown_kind",
        "wrong_challenge",
        "invalid_soc",
        "claim_timeout",
        "retransmit",
        "queue_reset",
        "invalid_roster",
    ];
    let summaries = rig.machine.summaries(crate::Millis(0));
    let cohort = summaries
        .iter()
        .find(|cohort| cohort.key == spec.key().to_hex())
        .expect("live cohort");
    let totals = rig.machine.counters().totals().snapshot();
    for name in required {
        let expected = u64::from(name != "claim_timeout");
        assert_eq!(cohort.counters[name], expected, "{name} per cohort");
        assert_eq!(totals[name], 1, "{name} in total");
    }
    // A scraper on another thread reads the same values, and totals survive the reclaim.
    let registry = rig.machine.counters();
    let scraped = std::thread::spawn(move || {
        let live: Vec<u64> = registry
            .live_cohorts()
            .iter()
            .map(|cohort| cohort.counters().get(Counter::Retransmit))
            .collect();
        (live, registry.totals().get(Counter::ClaimTimeout))
    })
    .join()
    .expect("scraper thread");
    assert_eq!(scraped, (vec![1], 1));
    assert_eq!(
        rig.machine.counters().live_cohorts().len(),
        1,
        "the silent cohort was reclaimed when emptied"
    );
}

#[test]
fn r40_role_gauges_follow_every_transition() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    let gauges = |rig: &Rig| {
        let live = rig.machine.counters().live_cohorts();
        live[0].roles_snapshot().into_values().collect::<Vec<u64>>()
    };
    // Ordered pending, publisher, silent, spectator (by name).
    assert_eq!(gauges(&rig), vec![1, 0, 0, 1]);
    rig.publish(sid(1), &admin.auth());
    assert_eq!(gauges(&rig), vec![0, 1, 0, 1]);
    rig.closed(sid(2), ClosedBy::Peer);
    assert_eq!(gauges(&rig), vec![0, 1, 0, 0]);
    let all_spec = all(2, &key(1));
    rig.joined(key(3), &all_spec, sid(3), peer(3));
    assert_eq!(rig.roles(&all_spec)["publisher"], vec![sid(3)]);
}

/// A peer in /64 number `n` of the IPv6 /48 `2001:db8:site::`.
fn v6_peer(site: u16, n: u16) -> crate::PeerId {
    let ip = std::net::Ipv6Addr::new(0x2001, 0xdb8, site, n, 0, 0, 0, 1);
    crate::PeerId::of(std::net::IpAddr::V6(ip))
}

#[test]
fn r32_cohorts_per_ipv6_prefix_are_bounded_and_a_refusal_leaves_no_ledger_entry() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cohorts_per_ipv6_prefix_max: 3,
        ..ProtocolConfig::default()
    });
    let specs: Vec<_> = (1..=5)
        .map(|topic| explicit(topic, &key(1), false))
        .collect();
    // Three /64s of one /48 take three cohorts: the bound.
    for n in 1..=3 {
        rig.joined(
            key(2),
            &specs[usize::from(n) - 1],
            sid(u64::from(n)),
            v6_peer(1, n),
        );
    }
    // A fourth /64 of it may neither create a cohort nor attach to one.
    for (stream, spec) in [(4, &specs[3]), (5, &specs[0])] {
        let actions = rig.join_raw(
            v6_peer(1, 4),
            sid(stream),
            join_body(spec, &key(3).address()),
        );
        assert_eq!(
            actions,
            vec![
                ack(sid(stream), Status::Full),
                close(sid(stream), CloseReason::Full(FullCause::Ipv6PrefixCohorts))
            ]
        );
    }
    assert_eq!(rig.ledger.cohorts_of(v6_peer(1, 4)), 0);
    assert_eq!(rig.ledger.snapshot().cohorts_live, 3);
    assert_eq!(rig.machine.cohort_count(), 3);
    assert_eq!(
        FullCause::Ipv6PrefixCohorts.to_string(),
        "cohorts per IPv6 prefix (R32)"
    );
    // A /64 already in a cohort adds a stream there; another /48 and IPv4 are unaffected.
    rig.joined(key(4), &specs[0], sid(6), v6_peer(1, 1));
    rig.joined(key(2), &specs[3], sid(7), v6_peer(2, 1));
    rig.joined(key(2), &specs[4], sid(8), peer(1));
    // One /64 leaving makes room for another.
    assert_eq!(rig.closed(sid(2), ClosedBy::Peer), vec![]);
    rig.joined(key(3), &specs[1], sid(9), v6_peer(1, 4));
}

#[test]
fn r32_at_ipv6_prefix_bits_64_the_prefix_bound_is_per_peer() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cohorts_per_ipv6_prefix_max: 1,
        ipv6_prefix_bits: 64,
        ..ProtocolConfig::default()
    });
    let one = explicit(1, &key(1), false);
    let two = explicit(2, &key(1), false);
    rig.joined(key(2), &one, sid(1), v6_peer(1, 1));
    rig.joined(key(2), &two, sid(2), v6_peer(1, 2));
    let actions = rig.join_raw(v6_peer(1, 1), sid(3), join_body(&two, &key(3).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(FullCause::Ipv6PrefixCohorts))
        ]
    );
}

/// Long claim deadlines, so pending streams stay and only the idle reclaim acts.
fn idle_config(cohorts_max: usize) -> ProtocolConfig {
    ProtocolConfig {
        cohorts_max,
        idle_cohort_reclaim_ms: 10_000,
        claim_deadline_ms: 600_000,
        ..ProtocolConfig::default()
    }
}

#[test]
fn r31_a_full_table_reclaims_the_oldest_idle_cohort_for_a_creating_join() {
    let mut rig = Rig::with_config(idle_config(3));
    let specs: Vec<_> = (1..=8)
        .map(|topic| explicit(topic, &key(1), false))
        .collect();
    // Two cohorts held by a pending admin stream only (nobody receives), one with a viewer.
    rig.joined(key(1), &specs[0], sid(1), peer(1));
    rig.now.0 = 1_000;
    rig.joined(key(1), &specs[1], sid(2), peer(2));
    rig.joined(key(2), &specs[2], sid(3), peer(3));
    let refused = |rig: &mut Rig, spec: &bps_proto::Spec, stream: u64| {
        let actions = rig.join_raw(peer(8), sid(stream), join_body(spec, &key(2).address()));
        assert_eq!(
            actions,
            vec![
                ack(sid(stream), Status::Full),
                close(sid(stream), CloseReason::Full(FullCause::Cohorts))
            ]
        );
        assert_eq!(rig.ledger.cohorts_of(peer(8)), 0);
        assert_eq!(rig.ledger.snapshot().cohorts_live, 3);
    };
    // Not idle for long enough yet: FULL, and nothing is reclaimed.
    rig.now.0 = 9_999;
    refused(&mut rig, &specs[3], 4);
    assert_eq!(rig.count(Counter::CohortsReclaimedIdle), 0);
    // At 10 s the oldest idle cohort makes room; the younger one does not qualify yet.
    rig.now.0 = 10_000;
    let (_, actions) = rig.join(key(2), &specs[3], sid(5), peer(9));
    assert_eq!(actions[0], close(sid(1), CloseReason::Inactive));
    assert!(matches!(&actions[1], Action::Send { stream, .. } if *stream == sid(5)));
    assert_eq!(rig.count(Counter::CohortsReclaimedIdle), 1);
    assert_eq!(rig.ledger.cohorts_of(peer(1)), 0);
    refused(&mut rig, &specs[4], 6);
    // A cohort that gets a viewer is no longer idle; when the viewer leaves it starts over.
    rig.joined(key(3), &specs[1], sid(7), peer(4));
    rig.now.0 = 20_000;
    refused(&mut rig, &specs[4], 8);
    assert_eq!(rig.closed(sid(7), ClosedBy::Peer), vec![]);
    rig.now.0 = 29_999;
    refused(&mut rig, &specs[4], 9);
    rig.now.0 = 30_000;
    rig.joined(key(2), &specs[4], sid(10), peer(9));
    assert_eq!(rig.count(Counter::CohortsReclaimedIdle), 2);
    // Every cohort left has someone receiving: none is ever reclaimed for room.
    rig.now.0 = 500_000;
    refused(&mut rig, &specs[5], 11);
    assert_eq!(rig.count(Counter::CohortsReclaimedIdle), 2);
    assert_eq!(rig.machine.cohort_count(), 3);
}

#[test]
fn r31_an_idle_cohort_is_shed_by_its_timer_only_while_the_table_is_full() {
    let config = idle_config(2);
    let ledger = Arc::new(PeerLedger::new(&config));
    let mut core_a = Rig::with_ledger(config.clone(), Arc::clone(&ledger), 1);
    let mut core_b = Rig::with_ledger(config, Arc::clone(&ledger), 2);
    let one = explicit(1, &key(1), false);
    let two = explicit(2, &key(1), false);
    let three = explicit(3, &key(1), false);
    let (_, actions) = core_a.join(key(1), &one, sid(1), peer(1));
    assert_eq!(actions.last(), Some(&arm(10_000)));
    // Idle long enough, but there is room: it stays, and is looked at again 10 s later.
    assert_eq!(core_a.tick_at(10_000), vec![arm(20_000)]);
    core_b.now.0 = 10_000;
    core_b.joined(key(2), &two, StreamId::new(1, 1), peer(2));
    // The table is full; the idle cohort is on the other core, so this Join is refused...
    let actions = core_b.join_raw(
        peer(3),
        StreamId::new(1, 2),
        join_body(&three, &key(2).address()),
    );
    assert_eq!(
        actions,
        vec![
            ack(StreamId::new(1, 2), Status::Full),
            close(StreamId::new(1, 2), CloseReason::Full(FullCause::Cohorts))
        ]
    );
    // ...and that core sheds it at its next look, so the retry finds room.
    assert_eq!(
        core_a.tick_at(20_000),
        vec![close(sid(1), CloseReason::Inactive)]
    );
    assert_eq!(core_a.count(Counter::CohortsReclaimedIdle), 1);
    assert_eq!(ledger.snapshot().cohorts_live, 1);
    core_b.now.0 = 20_000;
    core_b.joined(key(2), &three, StreamId::new(1, 3), peer(3));
    // The live cohort of the other core was never a candidate.
    assert_eq!(core_b.machine.cohort_count(), 2);
}
