//! R19..R24: service kinds, the roster, first delivery, grant and revocation.

use bps_proto::Kind;

use super::driver::{
    Client, Rig, ack_ok, blocklist, close, consumed, deliver, explicit, key, peer, send,
    send_noticed, sid, violation,
};
use crate::{CloseReason, Counter, ProtocolConfig, Violation, WrongStream};

/// An explicit cohort (open or closed) with its admin claimed on stream 1.
fn cohort(rig: &mut Rig, closed: bool) -> (bps_proto::Spec, Client) {
    let spec = explicit(1, &key(1), closed);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    (spec, admin)
}

#[test]
fn r19_roster_and_eos_are_accepted_only_on_the_admins_pending_or_publisher_stream() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    // A pending admin stream may claim with a ROSTER; each kind is its own feed, so DATA 0
    // and AUTH 0 are accepted after ROSTER 0.
    let roster = admin.roster(0, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2)])]
    );
    let data = admin.data(0, b"data 0");
    assert_eq!(
        rig.publish(sid(1), &data),
        vec![consumed(sid(1)), deliver(&data, &[sid(2)])]
    );
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    // A rostered publisher may not send them.
    let rostered = rig.joined(key(4), &spec, sid(4), peer(4));
    rig.publish(sid(4), &rostered.auth());
    assert_eq!(
        rig.feed(sid(4), &rostered.eos()),
        vec![
            consumed(sid(4)),
            violation(
                sid(4),
                Violation::WrongStream(WrongStream::ServiceKindFromNonAdmin)
            ),
            blocklist(peer(4), 600_000)
        ]
    );
    // EOS as the claim of another pending admin stream.
    let second = rig.joined(key(1), &spec, sid(3), peer(3));
    let eos = second.eos();
    assert_eq!(
        rig.publish(sid(3), &eos),
        vec![
            consumed(sid(3)),
            deliver(&eos, &[sid(2)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
            close(sid(3), CloseReason::EndOfStream),
        ]
    );
    assert_eq!(rig.count(Counter::AcceptedRoster), 1);
    assert_eq!(rig.count(Counter::AcceptedEos), 1);
}

#[test]
fn r20_a_roster_is_accepted_at_or_above_its_cursor_and_an_undecodable_payload_is_invalid_roster() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    let roster = admin.roster(3, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2)])]
    );
    let snapshot = |rig: &Rig| {
        let page = rig
            .machine
            .cohort_streams(&spec.key(), (0, 0), crate::Millis(0))
            .expect("live cohort");
        (page.summary.roster_cursor, page.roster)
    };
    assert_eq!(snapshot(&rig), (4, vec![hex::encode(key(4).address())]));
    // Valid chunks whose payload is not a Roster of 20-byte entries: dropped, cursor unchanged.
    for payload in [&[0x0a, 0x03, 1, 2, 3][..], &[0xff][..]] {
        let invalid = admin.sign(Kind::Roster, 4, payload).frame;
        assert_eq!(rig.publish(sid(1), &invalid), vec![consumed(sid(1))]);
    }
    assert_eq!(snapshot(&rig), (4, vec![hex::encode(key(4).address())]));
    // The admin's own entry and repeats are ignored: the roster excludes the admin.
    let roster = admin.roster(4, &[key(5).address(), key(1).address(), key(5).address()]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2)])]
    );
    assert_eq!(snapshot(&rig), (5, vec![hex::encode(key(5).address())]));
    // An invalid roster still claims a pending stream.
    let second = rig.joined(key(1), &spec, sid(3), peer(3));
    let invalid = second.sign(Kind::Roster, 10, &[0x0a, 0x01, 0x07]).frame;
    assert_eq!(rig.publish(sid(3), &invalid), vec![consumed(sid(3))]);
    assert_eq!(rig.role_of(&spec, sid(3)), Some("publisher"));
    assert_eq!(snapshot(&rig).0, 5);
    assert_eq!(rig.cohort_count(&spec, Counter::InvalidRoster), 3);
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedRoster), 2);
}

#[test]
fn r21_eos_at_index_zero_with_an_empty_chunk_is_delivered_then_the_cohort_is_reclaimed() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.joined(key(3), &spec, sid(3), peer(3));
    let eos = admin.eos();
    assert_eq!(
        rig.publish(sid(1), &eos),
        vec![
            consumed(sid(1)),
            deliver(&eos, &[sid(2), sid(3)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
            close(sid(3), CloseReason::EndOfStream),
        ]
    );
    assert!(
        CloseReason::EndOfStream.graceful(),
        "the EOS must reach the subscribers first"
    );
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.count(Counter::CohortsReclaimedEos), 1);
    assert_eq!(rig.ledger.snapshot().cohorts_live, 0);
    // A later Join starts a fresh cohort (R37). The timer armed for the first admin's claim
    // deadline is earlier than the new cohort's deadline, so no new timer is asked for.
    let (fresh, actions) = rig.join(key(2), &spec, sid(4), peer(2));
    assert_eq!(actions, vec![ack_ok(sid(4), &fresh.challenge)]);
    assert_eq!(rig.machine.cohort_count(), 1);
}

#[test]
fn r22_the_latest_roster_comes_first_on_entering_the_fanout_and_at_once_to_named_pending_streams() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, false);
    rig.joined(key(3), &spec, sid(2), peer(2));
    // No roster yet: nothing first.
    let (early, actions) = rig.join(key(6), &spec, sid(7), peer(7));
    assert_eq!(actions, vec![ack_ok(sid(7), &early.challenge)]);
    let roster = admin.roster(0, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2), sid(7)])]
    );
    // A spectator entering the fan-out set gets the roster first.
    let (late, actions) = rig.join(key(5), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![ack_ok(sid(3), &late.challenge), send(sid(3), &roster)]
    );
    // A named pending stream gets it at once; the admin's own streams never do (D5).
    let (named, actions) = rig.join(key(4), &spec, sid(4), peer(4));
    assert_eq!(
        actions,
        vec![ack_ok(sid(4), &named.challenge), send(sid(4), &roster)]
    );
    let (second_admin, actions) = rig.join(key(1), &spec, sid(5), peer(5));
    assert_eq!(actions, vec![ack_ok(sid(5), &second_admin.challenge)]);
    // The claim does not repeat a roster the stream already has.
    assert_eq!(rig.publish(sid(4), &named.auth()), vec![consumed(sid(4))]);
    let newer = admin.roster(1, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &newer),
        vec![
            consumed(sid(1)),
            deliver(&newer, &[sid(2), sid(3), sid(4), sid(7)])
        ]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 2 + 1 + 1 + 4);
}

#[test]
fn r22_a_pending_stream_that_missed_the_latest_roster_gets_it_when_it_enters_the_fanout() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, true);
    let named = rig.joined(key(4), &spec, sid(2), peer(2));
    // The silent stream is named by roster 0, then roster 1 names someone else too.
    let first = admin.roster(0, &[key(4).address()]);
    assert_eq!(
        rig.publish(sid(1), &first),
        vec![consumed(sid(1)), send(sid(2), &first)]
    );
    let second = admin.roster(1, &[key(4).address(), key(5).address()]);
    assert_eq!(
        rig.publish(sid(1), &second),
        vec![consumed(sid(1)), send(sid(2), &second)]
    );
    assert_eq!(rig.publish(sid(2), &named.auth()), vec![consumed(sid(2))]);
    // A rostered pending stream joining after both has only the latest.
    let (late, actions) = rig.join(key(5), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![ack_ok(sid(3), &late.challenge), send(sid(3), &second)]
    );
}

#[test]
fn r23_grant_lets_a_rostered_peer_claim_on_its_current_stream_or_on_a_new_one() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, false);
    let current = rig.joined(key(3), &spec, sid(2), peer(2));
    let roster = admin.roster(0, &[current.addr]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![consumed(sid(1)), deliver(&roster, &[sid(2)])]
    );
    assert_eq!(rig.publish(sid(2), &current.auth()), vec![consumed(sid(2))]);
    let fresh = rig.joined(key(3), &spec, sid(3), peer(3));
    assert_eq!(rig.role_of(&spec, sid(3)), Some("pending"));
    let data = fresh.data(0, b"from the new stream");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(1)])]
    );
    assert_eq!(rig.roles(&spec)["publisher"], vec![sid(1), sid(2), sid(3)]);
}

#[test]
fn r24_revoked_frames_tolerated_until_grace_then_violation() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.publish(sid(1), &admin.roster(0, &[key(3).address()]));
    let revoked = rig.joined(key(3), &spec, sid(3), peer(3));
    let data = revoked.data(0, b"while granted");
    assert_eq!(
        rig.publish(sid(3), &data),
        vec![consumed(sid(3)), deliver(&data, &[sid(1), sid(2)])]
    );
    rig.now.0 = 1_000;
    let reduced = admin.roster(1, &[]);
    assert_eq!(
        rig.publish(sid(1), &reduced),
        vec![
            consumed(sid(1)),
            deliver(&reduced, &[sid(2)]),
            send_noticed(sid(3), &reduced, 0)
        ]
    );
    assert_eq!(rig.role_of(&spec, sid(3)), Some("spectator"));
    // Phase 1: until the reduced roster is written, and for the grace after, frames are dropped.
    let verifications = rig.verifications;
    rig.now.0 = 2_000;
    assert_eq!(
        rig.publish(sid(3), &revoked.data(1, b"in flight")),
        vec![consumed(sid(3))]
    );
    rig.now.0 = 3_000;
    assert_eq!(rig.written(sid(3), 0), vec![]);
    rig.now.0 = 7_999;
    assert_eq!(
        rig.publish(sid(3), &revoked.data(2, b"late")),
        vec![consumed(sid(3))]
    );
    assert_eq!(rig.verifications, verifications);
    assert_eq!(rig.cohort_count(&spec, Counter::DropRevokedInGrace), 2);
    // Phase 2: a violation.
    rig.now.0 = 8_000;
    assert_eq!(
        rig.publish(sid(3), &revoked.data(3, b"too late")),
        vec![
            consumed(sid(3)),
            violation(
                sid(3),
                Violation::WrongStream(WrongStream::RevokedAfterGrace)
            ),
            blocklist(peer(3), 608_000)
        ]
    );
}

#[test]
fn r24_a_frame_in_flight_at_revocation_is_dropped_and_a_closed_cohort_makes_the_stream_silent() {
    let mut rig = Rig::new();
    let (spec, admin) = cohort(&mut rig, true);
    rig.publish(sid(1), &admin.roster(0, &[key(3).address()]));
    let member = rig.joined(key(3), &spec, sid(2), peer(2));
    rig.publish(sid(2), &member.auth());
    let in_flight = rig.feed(sid(2), &member.data(0, b"racing the revocation"));
    rig.now.0 = 1_000;
    let reduced = admin.roster(1, &[]);
    assert_eq!(
        rig.publish(sid(1), &reduced),
        vec![consumed(sid(1)), send_noticed(sid(2), &reduced, 0)]
    );
    assert_eq!(rig.role_of(&spec, sid(2)), Some("silent"));
    assert_eq!(rig.run_verifications(in_flight), vec![consumed(sid(2))]);
    assert_eq!(rig.cohort_count(&spec, Counter::DropRevokedInGrace), 1);
    // Granted again: the revocation is lifted and the stream may claim again.
    let regrant = admin.roster(2, &[key(3).address()]);
    assert_eq!(
        rig.publish(sid(1), &regrant),
        vec![consumed(sid(1)), send(sid(2), &regrant)]
    );
    assert_eq!(rig.publish(sid(2), &member.auth()), vec![consumed(sid(2))]);
    let data = member.data(1, b"back");
    assert_eq!(
        rig.publish(sid(2), &data),
        vec![consumed(sid(2)), deliver(&data, &[sid(1)])]
    );
}

#[test]
fn r24_an_exempt_revoked_stream_without_room_leaves_after_its_reduced_roster() {
    let mut rig = Rig::with_config(ProtocolConfig {
        streams_per_cohort_max: 1,
        ..ProtocolConfig::default()
    });
    let (spec, admin) = cohort(&mut rig, false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.publish(sid(1), &admin.roster(0, &[key(3).address()]));
    rig.joined(key(3), &spec, sid(3), peer(3));
    let reduced = admin.roster(1, &[]);
    assert_eq!(
        rig.publish(sid(1), &reduced),
        vec![
            consumed(sid(1)),
            deliver(&reduced, &[sid(2)]),
            send(sid(3), &reduced),
            close(sid(3), CloseReason::RevokedWithoutRoom)
        ]
    );
    assert!(CloseReason::RevokedWithoutRoom.graceful());
}
