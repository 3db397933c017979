//! Black-box: FULL at each resource bound (R30, R31, R32, R33), FULL meaning capacity and
//! nothing else (R37: room again once a stream leaves), and the per-address publisher-stream
//! bound resetting the oldest stream (R29).

mod support;

use std::net::Ipv4Addr;

use bps_client::publisher::PublisherConfig;
use bps_proto::{Ack, Spec, Status};
use support::{
    Broker, bodies, expect_closed, expect_frames, expect_nothing, explicit, flush, group, key,
    publish, publisher, publisher_with,
};

/// A second peer (R32, R33 count per remote IP).
const OTHER_PEER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

fn ok(ack: &Ack) -> bool {
    ack.status == Status::Ok as i32 && ack.challenge.len() == 32
}

fn full(ack: &Ack) -> bool {
    ack.status == Status::Full as i32 && ack.challenge.is_empty()
}

/// A Join from another peer address; returns the Ack and keeps the stream open with it.
fn join_from_other_peer(broker: &Broker, spec: &Spec, n: u8) -> (Ack, support::Raw) {
    let mut raw = broker.raw_from(OTHER_PEER);
    let ack = raw.join(&spec.to_join(&key(n).address()));
    (ack, raw)
}

#[test]
fn r30_full_at_streams_per_cohort_max_pending_admin_exempt_room_again_after_a_leave() {
    let broker = Broker::start(&[
        "limits.streams_per_cohort_max=2",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let first = broker.join(&spec, &key(10).address());
    let _second = broker.join(&spec, &key(11).address());
    assert_eq!(broker.join_refused(&spec, &key(12).address()), Status::Full);
    // The admin's pending stream is outside the fan-out bound (R6, R30).
    let _admin_session = broker.join(&spec, &admin.address());
    broker.assert_metrics(&[
        ("bps_joins_ok_total", 3),
        ("bps_joins_full_total", 1),
        ("bps_joins_rejected_total", 0),
    ]);
    // FULL is capacity and nothing else: once a spectator leaves there is room again.
    first
        .finish(std::time::Duration::from_secs(2))
        .expect("clean close");
    broker.wait_gauge("bps_connections_open", 2);
    let _third = broker.join(&spec, &key(12).address());
    assert_eq!(broker.join_refused(&spec, &key(13).address()), Status::Full);
    broker.assert_metrics(&[("bps_joins_ok_total", 4), ("bps_joins_full_total", 2)]);
}

#[test]
fn r31_full_to_a_creating_join_at_cohorts_max_attaching_still_works() {
    let broker = Broker::start(&["limits.cohorts_max=2"]);
    let admin = key(1).address();
    let _one = broker.join(&explicit(1, &admin, false), &key(10).address());
    let two = broker.join(&explicit(2, &admin, false), &key(10).address());
    assert_eq!(
        broker.join_refused(&explicit(3, &admin, false), &key(10).address()),
        Status::Full
    );
    // Attaching to a live cohort creates nothing.
    let _one_again = broker.join(&explicit(1, &admin, false), &key(11).address());
    broker.assert_metrics(&[
        ("bps_cohorts_live", 2),
        ("bps_cohorts_created_total", 2),
        ("bps_joins_full_total", 1),
    ]);
    // The last stream of cohort 2 leaves: it is reclaimed (R36) and a new cohort fits.
    drop(two);
    broker.wait_gauge("bps_cohorts_live", 1);
    let _three = broker.join(&explicit(3, &admin, false), &key(10).address());
    broker.assert_metrics(&[
        ("bps_cohorts_live", 2),
        ("bps_cohorts_created_total", 3),
        ("bps_cohorts_reclaimed_empty_total", 1),
        ("bps_joins_full_total", 1),
    ]);
}

#[test]
fn r32_full_at_cohorts_per_peer_max_for_that_peer_only() {
    let broker = Broker::start(&["limits.cohorts_per_peer_max=2"]);
    let admin = key(1).address();
    let _one = broker.join(&explicit(1, &admin, false), &key(10).address());
    let _two = broker.join(&explicit(2, &admin, false), &key(10).address());
    assert_eq!(
        broker.join_refused(&explicit(3, &admin, false), &key(10).address()),
        Status::Full
    );
    // Another stream in a cohort the peer is already in is not one more cohort.
    let _one_again = broker.join(&explicit(1, &admin, false), &key(11).address());
    // Another peer address may create and join cohort 3.
    let (ack, _other) = join_from_other_peer(&broker, &explicit(3, &admin, false), 12);
    assert!(ok(&ack), "{ack:?}");
    // Cohort 3 now exists, yet this peer is still at its bound.
    assert_eq!(
        broker.join_refused(&explicit(3, &admin, false), &key(10).address()),
        Status::Full
    );
    broker.assert_metrics(&[
        ("bps_joins_ok_total", 4),
        ("bps_joins_full_total", 2),
        ("bps_cohorts_live", 3),
    ]);
}

#[test]
fn r33_full_at_streams_per_peer_per_cohort_max_for_that_peer_only() {
    let broker = Broker::start(&["limits.streams_per_peer_per_cohort_max=2"]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let _first = broker.join(&spec, &key(10).address());
    let _second = broker.join(&spec, &key(11).address());
    assert_eq!(broker.join_refused(&spec, &key(12).address()), Status::Full);
    // Pending admin streams count here too: the bound is per peer, whatever the role.
    assert_eq!(broker.join_refused(&spec, &admin.address()), Status::Full);
    let (first_ack, _other_first) = join_from_other_peer(&broker, &spec, 13);
    let (second_ack, _other_second) = join_from_other_peer(&broker, &spec, 14);
    let (third_ack, _other_third) = join_from_other_peer(&broker, &spec, 15);
    assert!(
        ok(&first_ack) && ok(&second_ack),
        "{first_ack:?} {second_ack:?}"
    );
    assert!(full(&third_ack), "{third_ack:?}");
    broker.assert_metrics(&[("bps_joins_ok_total", 4), ("bps_joins_full_total", 3)]);
}

#[test]
fn r29_a_claim_beyond_publisher_streams_per_address_max_resets_the_oldest() {
    let broker = Broker::start(&[
        "limits.publisher_streams_per_address_max=2",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(10).address());
    let mut streams = Vec::new();
    for (claims, start) in [(1u64, 0u64), (2, 10), (3, 20)] {
        let mut session = broker.join(&spec, &admin.address());
        let mut admin_publisher = publisher_with(
            &spec,
            &admin,
            PublisherConfig {
                data_index_start: start,
                ..PublisherConfig::default()
            },
            &session,
        );
        assert_eq!(flush(&mut admin_publisher, &mut session).len(), 1, "AUTH");
        broker.wait_metric("bps_claims_total", claims);
        streams.push((session, admin_publisher));
    }
    // The third claim reset the oldest publisher stream of the address (R29).
    let (mut oldest, _) = streams.remove(0);
    // Reset or not, it ends (the broker's reset shuts the socket down before the RST, so a
    // client may see EOF first).
    expect_closed(&mut oldest);
    broker.wait_metric("bps_superseded_total", 1);
    // The two newer ones still publish, and neither receives the other's frames (R25).
    for (session, admin_publisher) in &mut streams {
        let sent = bodies(&publish(admin_publisher, session, &[b"still here"]));
        expect_frames(&mut spectator, &sent);
    }
    for (session, _) in &mut streams {
        expect_nothing(session);
    }

    // Under ALL every Join is a publisher stream at once (R10): the third Join of one
    // address resets that address's oldest stream.
    let spec = group(2, &admin.address());
    let member = key(20);
    let mut first = broker.join(&spec, &member.address());
    let _second = broker.join(&spec, &member.address());
    let mut third = broker.join(&spec, &member.address());
    expect_closed(&mut first);
    broker.wait_metric("bps_superseded_total", 2);
    let mut third_publisher = publisher(&spec, &member, &third);
    let mut listener = broker.join(&spec, &key(21).address());
    let sent = bodies(&publish(&mut third_publisher, &mut third, &[b"all"]));
    expect_frames(&mut listener, &sent);
    broker.assert_metrics(&[("bps_accepted_data_total", 3), ("bps_joins_full_total", 0)]);
}
