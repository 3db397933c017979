//! Edge mode's spliced streams (docs/SCALING.md, "Publishers at an edge"): a Join at an edge
//! that may publish is joined at the root on its behalf, and its frames pass through.
//!
//! Owns: which Joins are spliced, the root's answer handed on, frames relayed both ways in
//! order with the local side's credit held until its frame is written upstream, each side's
//! end ending the other, and the edge's per-peer bounds on spliced streams (R32, R33).
//! Never does: the root's checks of spliced frames (the root is a machine of its own).

use bps_proto::{Binding, RelayId, Spec, Status, encode_frame, encode_relayed_join};
use bytes::Bytes;

use super::driver::{
    Rig, ack, all, body_of, close, consumed, explicit, implicit, join_body, key, peer, send,
    send_noticed, sid,
};
use super::rules_edge::{
    BELOW, at_root, declared, edge, edge_config, explicit_edge, from_root, rejected,
};
use crate::{
    Action, Arrival, CloseReason, ClosedBy, Counter, ProtocolConfig, RejectCause, SpliceOutcome,
    StreamId,
};

/// The stream the I/O layer reads a splice's root side on.
fn root_side() -> StreamId {
    sid(300)
}

/// The `OpenSplice` the machine asks for a Join of `spec` by `addr` on `stream`.
fn open_splice(stream: StreamId, spec: &Spec, addr: &[u8; 20], path: Vec<RelayId>) -> Action {
    Action::OpenSplice {
        stream,
        key: spec.key(),
        join: spec.to_join(addr),
        path,
    }
}

/// The root's Ack of a spliced Join, as a whole frame.
fn root_ack(status: Status) -> Bytes {
    encode_frame(&bps_proto::Ack {
        status: status as i32,
        challenge: if status == Status::Ok {
            Bytes::from_static(&[0x5a; 32])
        } else {
            Bytes::new()
        },
    })
}

fn spliced(rig: &mut Rig, stream: StreamId, outcome: SpliceOutcome) -> Vec<Action> {
    rig.machine.on_splice(rig.now, stream, outcome);
    rig.drain()
}

#[test]
fn every_join_that_may_publish_is_spliced_and_creates_nothing_at_the_edge() {
    let (mut rig, spec, _) = explicit_edge();
    let admin = key(1).address();
    assert_eq!(
        rig.join_raw(peer(5), sid(5), join_body(&spec, &admin)),
        vec![open_splice(sid(5), &spec, &admin, vec![])]
    );
    // A rostered addr, known from the roster the root delivered.
    let rostered = key(4).address();
    from_root(&mut rig, &at_root(key(1), &spec, 9).roster(0, &[rostered]));
    assert_eq!(
        rig.join_raw(peer(5), sid(6), join_body(&spec, &rostered)),
        vec![open_splice(sid(6), &spec, &rostered, vec![])]
    );
    // Any declared addr of an ALL, an implicit or a closed cohort, with the path it came
    // with; and a creating Join by an admin: no cohort is created for any of them.
    let others = [
        all(2, &key(1)),
        implicit([3; 32], Binding::Mnemonic),
        explicit(4, &key(1), true),
        explicit(5, &key(1), false),
    ];
    for (n, other) in (7..).zip(&others) {
        let addr = if n == 10 { admin } else { key(5).address() };
        let join = encode_relayed_join(&other.to_join(&addr), &[BELOW]);
        assert_eq!(
            rig.join_raw(peer(5), sid(n), body_of(&join)),
            vec![open_splice(sid(n), other, &addr, vec![BELOW])]
        );
    }
    assert_eq!(rig.machine.cohort_count(), 1);
}

#[test]
fn a_bridge_session_that_may_publish_is_refused_and_one_that_watches_is_served() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let bridged = Arrival {
        spliceable: false,
        ..declared(5)
    };
    assert_eq!(
        rig.join_as(bridged, sid(5), join_body(&spec, &key(1).address())),
        rejected(sid(5), RejectCause::PublisherAtEdge)
    );
    let served = rig.join_as(bridged, sid(6), join_body(&spec, &key(6).address()));
    assert!(
        served
            .iter()
            .any(|action| matches!(action, Action::OpenUpstream { .. })),
        "{served:?}"
    );
}

#[test]
fn the_roots_ack_goes_first_then_frames_pass_both_ways_byte_for_byte() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let admin = key(1).address();
    rig.join_raw(peer(5), sid(5), join_body(&spec, &admin));
    // Read before the root answered: held (its credit too) until the splice is up.
    let early = at_root(key(1), &spec, 0x5a).auth();
    assert_eq!(rig.feed(sid(5), &early), vec![]);
    let ok = root_ack(Status::Ok);
    let upstream = root_side();
    let actions = spliced(
        &mut rig,
        sid(5),
        SpliceOutcome::Joined {
            upstream,
            ack: ok.clone(),
        },
    );
    assert_eq!(
        actions,
        vec![send(sid(5), &ok), send_noticed(upstream, &early, 0)]
    );
    // Its credit comes back once the frame is written towards the root.
    assert_eq!(rig.written(upstream, 0), vec![consumed(sid(5))]);
    let data = at_root(key(1), &spec, 0x5a).data(0, b"hi");
    assert_eq!(
        rig.feed(sid(5), &data),
        vec![send_noticed(upstream, &data, 1)]
    );
    assert_eq!(rig.written(upstream, 1), vec![consumed(sid(5))]);
    // From the root: to the local stream as it came, consumed at once.
    let roster = at_root(key(1), &spec, 0x5a).roster(0, &[key(4).address()]);
    assert_eq!(
        rig.feed(upstream, &roster),
        vec![send(sid(5), &roster), consumed(upstream)]
    );
    // Three frames passed through, two up and one down.
    assert_eq!(rig.count(Counter::RelaySplicedFrames), 3);
    // The root ends it: the local stream ends after what is queued for it.
    assert_eq!(
        rig.closed(upstream, ClosedBy::Peer),
        vec![close(sid(5), CloseReason::UpstreamEnded)]
    );
    assert!(rig.all_consumed());
}

#[test]
fn a_local_stream_that_ends_ends_its_root_side_and_gives_back_its_frames() {
    let mut rig = edge();
    let spec = all(1, &key(1));
    let member = key(6).address();
    rig.join_raw(peer(5), sid(5), join_body(&spec, &member));
    let upstream = root_side();
    let ack = root_ack(Status::Ok);
    spliced(&mut rig, sid(5), SpliceOutcome::Joined { upstream, ack });
    let data = at_root(key(6), &spec, 0x5a).data(0, b"hi");
    rig.feed(sid(5), &data);
    // Closed with a frame not yet written upstream: it is consumed as the stream goes.
    assert_eq!(
        rig.closed(sid(5), ClosedBy::Peer),
        vec![
            close(upstream, CloseReason::UpstreamEnded),
            consumed(sid(5))
        ]
    );
    assert_eq!(rig.written(upstream, 0), vec![]);
    assert!(rig.all_consumed());
}

#[test]
fn a_refused_or_unreachable_root_ends_the_local_stream_and_a_late_ok_is_closed() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let admin = key(1).address();
    rig.join_raw(peer(5), sid(5), join_body(&spec, &admin));
    let full = root_ack(Status::Full);
    let ack = full.clone();
    assert_eq!(
        spliced(&mut rig, sid(5), SpliceOutcome::Refused { ack }),
        vec![send(sid(5), &full), close(sid(5), CloseReason::RootRefused)]
    );
    rig.join_raw(peer(5), sid(6), join_body(&spec, &admin));
    assert_eq!(
        spliced(&mut rig, sid(6), SpliceOutcome::Unreachable),
        vec![close(sid(6), CloseReason::RootUnreachable)]
    );
    // The local stream left while the root was being joined: the root side is not wanted.
    rig.join_raw(peer(5), sid(7), join_body(&spec, &admin));
    assert_eq!(rig.closed(sid(7), ClosedBy::Peer), vec![]);
    let ack = root_ack(Status::Ok);
    let upstream = root_side();
    assert_eq!(
        spliced(&mut rig, sid(7), SpliceOutcome::Joined { upstream, ack }),
        vec![close(upstream, CloseReason::UpstreamUnwanted)]
    );
    assert!(rig.all_consumed());
}

#[test]
fn r33_and_r32_bound_a_peers_spliced_streams_at_the_edge() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cohorts_per_peer_max: 2,
        ..edge_config()
    });
    let spec = explicit(1, &key(1), false);
    let admin = key(1).address();
    // R33: two streams of one peer in one cohort (the default), the third FULL.
    rig.join_raw(peer(5), sid(1), join_body(&spec, &admin));
    rig.join_raw(peer(5), sid(2), join_body(&spec, &admin));
    assert_eq!(
        rig.join_raw(peer(5), sid(3), join_body(&spec, &admin)),
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(crate::FullCause::PeerStreams)),
        ]
    );
    // R32: a second cohort, then the third FULL; one left makes room again.
    let other = all(2, &key(1));
    rig.join_raw(peer(5), sid(4), join_body(&other, &key(6).address()));
    let third = implicit([3; 32], Binding::Mnemonic);
    assert_eq!(
        rig.join_raw(peer(5), sid(5), join_body(&third, &key(6).address())),
        vec![
            ack(sid(5), Status::Full),
            close(sid(5), CloseReason::Full(crate::FullCause::PeerCohorts)),
        ]
    );
    rig.closed(sid(4), ClosedBy::Peer);
    let retried = rig.join_raw(peer(5), sid(6), join_body(&third, &key(6).address()));
    assert_eq!(
        retried,
        vec![open_splice(sid(6), &third, &key(6).address(), vec![])]
    );
}
