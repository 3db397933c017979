//! The machine's surface besides the rules: the admin snapshot, reload, and the invariants
//! it asserts about its caller.

use bps_proto::Status;
use bytes::Bytes;

use super::driver::{Rig, ack, close, consumed, explicit, join_body, key, peer, sid};
use crate::{CloseReason, FullCause, Millis, ProtocolConfig, Ticket};

#[test]
fn summaries_and_stream_pages_describe_cohorts_for_the_admin_view() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.joined(key(4), &spec, sid(3), peer(3));
    rig.now = Millis(500);
    rig.publish(sid(1), &admin.roster(0, &[key(3).address()]));
    let cohort = rig.only_cohort();
    assert_eq!(cohort.key, spec.key().to_hex());
    assert_eq!(cohort.id.len(), 16);
    assert_eq!(cohort.topic, hex::encode([1; 32]));
    assert_eq!(cohort.binding, "FEED_TOPIC");
    assert_eq!(cohort.admin, Some(hex::encode(key(1).address())));
    assert_eq!(cohort.authorship, "explicit");
    assert!(!cohort.closed);
    assert_eq!(cohort.created_ms, 0);
    assert_eq!(cohort.last_activity_ms, 500);
    assert_eq!(cohort.roster_entries, 1);
    assert_eq!(cohort.roster_cursor, 1);
    assert_eq!(cohort.subscribers, 3);
    assert_eq!(cohort.streams["publisher"], 1);
    assert_eq!(cohort.streams["spectator"], 2);
    assert_eq!(cohort.streams["pending"], 0);
    assert_eq!(cohort.counters["accepted_roster"], 1);
    let page = rig
        .machine
        .cohort_streams(&spec.key(), (1, 1), Millis(0))
        .expect("live cohort");
    assert_eq!(page.summary, cohort);
    assert_eq!(page.roster, vec![hex::encode(key(3).address())]);
    assert_eq!(page.streams_total, 3);
    assert_eq!(page.offset, 1);
    assert_eq!(page.streams.len(), 1);
    assert_eq!(page.streams[0].id, sid(2));
    assert_eq!(page.streams[0].addr, hex::encode(key(2).address()));
    assert_eq!(page.streams[0].role, crate::Role::Spectator);
    let other = explicit(2, &key(1), false);
    assert!(
        rig.machine
            .cohort_streams(&other.key(), (0, 10), Millis(0))
            .is_none()
    );
}

#[test]
fn reconfigure_applies_new_bounds_to_later_decisions() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    let smaller = ProtocolConfig {
        streams_per_cohort_max: 1,
        ..ProtocolConfig::default()
    };
    rig.ledger.reconfigure(&smaller);
    rig.machine.reconfigure(smaller.clone());
    assert_eq!(rig.machine.config(), &smaller);
    let actions = rig.join_raw(peer(2), sid(2), join_body(&spec, &key(3).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(2), Status::Full),
            close(sid(2), CloseReason::Full(FullCause::CohortStreams))
        ]
    );
}

#[test]
fn a_lowered_read_window_does_not_trip_streams_holding_the_old_one() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(2), peer(2));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let first = rig.feed(sid(1), &admin.data(0, b"a"));
    rig.feed(sid(1), &admin.data(1, b"b"));
    rig.machine.reconfigure(ProtocolConfig {
        frames_in_flight_per_stream_max: 1,
        ..ProtocolConfig::default()
    });
    rig.feed(sid(1), &admin.data(2, b"c"));
    assert_eq!(
        rig.run_verifications(first)
            .iter()
            .filter(|action| **action == consumed(sid(1)))
            .count(),
        3
    );
}

#[test]
#[should_panic(expected = "exceeded its read window")]
fn a_frame_beyond_the_read_window_is_a_caller_bug() {
    let mut rig = Rig::with_config(ProtocolConfig {
        frames_in_flight_per_stream_max: 1,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.feed(sid(1), &admin.data(0, b"a"));
    rig.feed(sid(1), &admin.data(1, b"b"));
}

#[test]
#[should_panic(expected = "was never issued")]
fn a_result_for_a_ticket_never_issued_is_a_caller_bug() {
    let mut rig = Rig::new();
    rig.machine.on_verified(
        Millis(0),
        Ticket(77),
        Err(bps_verify::VerifyError::Soc(
            bps_verify::SocError::TooShort { len: 0, min: 105 },
        )),
    );
}

#[test]
#[should_panic(expected = "joined twice")]
fn a_stream_id_joining_twice_is_a_caller_bug() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.join_raw(peer(2), sid(1), join_body(&spec, &key(3).address()));
}

#[test]
fn reports_about_forgotten_streams_are_ignored() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    assert_eq!(rig.closed(sid(1), crate::ClosedBy::Peer), vec![]);
    assert_eq!(rig.closed(sid(1), crate::ClosedBy::Io), vec![]);
    assert_eq!(rig.written(sid(1), 3), vec![]);
    assert_eq!(
        rig.feed_body(sid(1), Bytes::from_static(b"late")),
        vec![consumed(sid(1))]
    );
    assert_eq!(rig.machine.stream_count(), 1);
}

#[test]
fn a_tick_runs_a_bounded_number_of_deadlines_and_asks_to_run_again_at_once() {
    let streams = crate::machine::DEADLINES_PER_TICK_MAX as u64 + 100;
    let mut rig = Rig::with_config(ProtocolConfig {
        streams_per_cohort_max: 4096,
        blocklist_claim_timeout_ms: 0,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), true);
    for stream in 0..streams {
        let octets = (stream as u32 + 1).to_be_bytes();
        let peer = crate::PeerId::of(std::net::IpAddr::from([
            10, octets[1], octets[2], octets[3],
        ]));
        rig.joined(key(2), &spec, sid(stream), peer);
    }
    let deadline = ProtocolConfig::default().claim_deadline_ms;
    let first = rig.tick_at(deadline);
    let closed = |actions: &[crate::Action]| {
        actions
            .iter()
            .filter(|action| {
                matches!(
                    action,
                    crate::Action::Close {
                        reason: CloseReason::ClaimTimeout,
                        ..
                    }
                )
            })
            .count() as u64
    };
    assert_eq!(closed(&first), streams - 100);
    assert_eq!(
        first.last(),
        Some(&super::driver::arm(deadline)),
        "run again at once"
    );
    let second = rig.tick_at(deadline);
    assert_eq!(closed(&second), 100);
    assert_eq!(rig.machine.stream_count(), 0);
}

#[test]
fn a_frame_under_verification_is_consumed_when_its_result_arrives_even_after_the_close() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.publish(sid(1), &admin.auth());
    let first = rig.feed(sid(1), &admin.data(0, b"first"));
    let second = rig.feed(sid(1), &admin.data(1, b"second"));
    let jobs: Vec<_> = first
        .into_iter()
        .chain(second)
        .filter_map(|action| match action {
            crate::Action::Verify { ticket, request } => Some((ticket, request)),
            _ => None,
        })
        .collect();
    assert_eq!(jobs.len(), 2, "a proven stream verifies frames in parallel");
    // The second result arrives first; it waits for the first (read order).
    rig.machine
        .on_verified(rig.now, jobs[1].0, bps_verify::verify(&jobs[1].1));
    assert_eq!(rig.drain(), vec![]);
    // The stream closes: the verified frame is consumed now, the one in verification is not.
    assert_eq!(
        rig.closed(sid(1), crate::ClosedBy::Peer),
        vec![consumed(sid(1))]
    );
    assert!(!rig.all_consumed());
    rig.machine
        .on_verified(rig.now, jobs[0].0, bps_verify::verify(&jobs[0].1));
    assert_eq!(rig.drain(), vec![consumed(sid(1))]);
    assert!(rig.all_consumed());
}

#[test]
fn a_closed_streams_job_taken_back_unverified_consumes_its_frame() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.publish(sid(1), &admin.auth());
    let tickets: Vec<Ticket> = rig
        .feed(sid(1), &admin.data(0, b"queued"))
        .into_iter()
        .filter_map(|action| match action {
            crate::Action::Verify { ticket, .. } => Some(ticket),
            _ => None,
        })
        .collect();
    assert_eq!(tickets.len(), 1);
    let origin = rig.machine.job_origin(tickets[0]).expect("in flight");
    assert_eq!(origin.stream, Some(sid(1)));
    assert_eq!(rig.closed(sid(1), crate::ClosedBy::Peer), vec![]);
    assert_eq!(
        rig.machine.job_origin(tickets[0]),
        None,
        "the stream is gone"
    );
    rig.machine.on_cancelled(rig.now, tickets[0]);
    assert_eq!(rig.drain(), vec![consumed(sid(1))]);
    assert!(rig.all_consumed());
    assert_eq!(rig.machine.verifications_in_flight(), 0);
}

#[test]
#[should_panic(expected = "of the attached stream")]
fn taking_back_a_live_streams_job_is_a_caller_bug() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.publish(sid(1), &admin.auth());
    let ticket = rig
        .feed(sid(1), &admin.data(0, b"queued"))
        .into_iter()
        .find_map(|action| match action {
            crate::Action::Verify { ticket, .. } => Some(ticket),
            _ => None,
        })
        .expect("a job");
    rig.machine.on_cancelled(rig.now, ticket);
}
