//! R32, R33, R35 and R39 for a trusted relay (`limits.trusted_relays`): an edge's address
//! gets the raised per-peer bounds through the machine, is refused with the usual causes at
//! them, and is not blocklisted; its untrusted neighbour keeps the usual bounds. The admin
//! view marks its streams.

use bps_proto::Status;

use super::driver::{Rig, ack, close, explicit, join_body, key, peer, sid};
use crate::{CloseReason, FullCause, ProtocolConfig, TrustedRelays};

/// `peer(1)` (10.0.0.1) is a trusted relay; `peer(2)` (10.0.0.2) is not.
fn rig() -> Rig {
    Rig::with_config(ProtocolConfig {
        trusted_relays: TrustedRelays::parse(&["10.0.0.1/32"]).expect("valid prefix"),
        cohorts_per_peer_max: 1,
        trusted_relay_cohorts_max: 3,
        streams_per_peer_per_cohort_max: 1,
        trusted_relay_streams_per_cohort_max: 3,
        ..ProtocolConfig::default()
    })
}

#[test]
fn r32_a_trusted_relay_joins_cohorts_up_to_its_raised_bound() {
    let mut rig = rig();
    let specs: Vec<_> = (1..=4)
        .map(|topic| explicit(topic, &key(1), false))
        .collect();
    for (index, spec) in specs[..3].iter().enumerate() {
        rig.joined(key(2), spec, sid(index as u64 + 1), peer(1));
    }
    let actions = rig.join_raw(peer(1), sid(4), join_body(&specs[3], &key(2).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(4), Status::Full),
            close(sid(4), CloseReason::Full(FullCause::PeerCohorts))
        ]
    );
    // The neighbour has the usual bound of one cohort.
    rig.joined(key(3), &specs[0], sid(5), peer(2));
    let actions = rig.join_raw(peer(2), sid(6), join_body(&specs[1], &key(3).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(6), Status::Full),
            close(sid(6), CloseReason::Full(FullCause::PeerCohorts))
        ]
    );
    assert_eq!(rig.ledger.snapshot().trusted_relay_cohorts, 3);
}

#[test]
fn r33_a_trusted_relay_holds_streams_up_to_its_raised_bound() {
    let mut rig = rig();
    let spec = explicit(1, &key(1), false);
    for (stream, member) in [(1, 2), (2, 3), (3, 4)] {
        rig.joined(key(member), &spec, sid(stream), peer(1));
    }
    let actions = rig.join_raw(peer(1), sid(4), join_body(&spec, &key(5).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(4), Status::Full),
            close(sid(4), CloseReason::Full(FullCause::PeerStreams))
        ]
    );
    rig.joined(key(6), &spec, sid(5), peer(2));
    let actions = rig.join_raw(peer(2), sid(6), join_body(&spec, &key(7).address()));
    assert_eq!(
        actions,
        vec![
            ack(sid(6), Status::Full),
            close(sid(6), CloseReason::Full(FullCause::PeerStreams))
        ]
    );
}

#[test]
fn r35_a_trusted_relay_stream_that_does_not_claim_is_closed_and_its_peer_not_blocklisted() {
    let mut rig = rig();
    let spec = explicit(1, &key(1), true);
    rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(1), &spec, sid(2), peer(2));
    let actions = rig.tick_at(30_000);
    assert!(actions.contains(&close(sid(1), CloseReason::ClaimTimeout)));
    assert!(actions.contains(&close(sid(2), CloseReason::ClaimTimeout)));
    assert!(!rig.ledger.is_blocked(peer(1), rig.now));
    assert!(rig.ledger.is_blocked(peer(2), rig.now));
    assert_eq!(rig.ledger.snapshot().blocklistings_waived, 1);
}

#[test]
fn the_admin_view_marks_the_streams_of_trusted_relays() {
    let mut rig = rig();
    let spec = explicit(1, &key(1), false);
    rig.joined(key(2), &spec, sid(1), peer(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    let page = rig
        .machine
        .cohort_streams(&spec.key(), (0, 10), rig.now)
        .expect("the cohort is live");
    let marks: Vec<bool> = page
        .streams
        .iter()
        .map(|stream| stream.trusted_relay)
        .collect();
    assert_eq!(marks, [true, false]);
}
