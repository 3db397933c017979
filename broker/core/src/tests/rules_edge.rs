//! Edge mode (docs/SCALING.md, "Edges"): a cohort at an edge asks for one upstream stream
//! to its root, takes the root's Broadcasts on it as a subscriber does (R41) and fans them
//! out byte for byte with its own cursors, dedup window, roster (R19..R24), EOS (R21) and
//! history (D11); its linger, the upstream's attachment, and who an edge admits.
//!
//! Owns: the machine's edge mode driven through its inputs with real signed chunks. The
//! root is played by the test: its frames are signed under a challenge of the root's (the
//! edge compares it with nothing), or taken from a second machine acting as the root.
//! Never does: a stream at an edge that may publish (spliced to the root: `rules_splice`).

use bps_proto::{
    Binding, Kind, RELAY_ID_BYTES, RELAY_PATH_LEN_MAX, RelayId, RelayPathError, Spec, Status,
    encode_relayed_join, feed_id,
};
use bps_verify::{SigningKey, sign_implicit};
use bytes::Bytes;
use prost::Message;

use super::driver::{
    Client, Rig, ack, ack_ok, all, arm, backlog, body_of, close, consumed, deliver, explicit,
    implicit, join_body, key, peer, send, sid,
};
use crate::{
    Action, Arrival, CloseReason, ClosedBy, CohortSerial, Counter, EdgePolicy, Millis,
    ProtocolConfig, RejectCause, StreamId,
};

/// This edge's id on relay paths.
pub(super) const RELAY_ID: RelayId = [0xed; RELAY_ID_BYTES];

/// Another broker's id on relay paths (an edge below this one).
pub(super) const BELOW: RelayId = [0xb0; RELAY_ID_BYTES];

const LINGER_MS: u64 = 5_000;

pub(super) fn edge_config() -> ProtocolConfig {
    ProtocolConfig {
        edge: Some(EdgePolicy {
            relay_id: RELAY_ID,
            linger_ms: LINGER_MS,
        }),
        ..ProtocolConfig::default()
    }
}

pub(super) fn edge() -> Rig {
    Rig::with_config(edge_config())
}

/// The stream the I/O layer reads the cohort's upstream on.
pub(super) fn upstream() -> StreamId {
    sid(100)
}

fn history(spec: Spec) -> Spec {
    Spec {
        history: true,
        ..spec
    }
}

/// A publisher as the root sees it: `key` signing under the challenge `[n; 32]` the root
/// gave its stream there.
pub(super) fn at_root(key: SigningKey, spec: &Spec, n: u8) -> Client {
    Client {
        addr: key.address(),
        key,
        stream: sid(900),
        peer: peer(200),
        challenge: [n; 32],
        topic: spec.topic,
    }
}

/// The `OpenUpstream` among `actions` for the cohort of `spec`: its serial and path.
fn opened(actions: &[Action], spec: &Spec) -> Option<(CohortSerial, Vec<RelayId>)> {
    actions.iter().find_map(|action| match action {
        Action::OpenUpstream {
            cohort,
            key,
            spec: asked,
            path,
        } => {
            assert_eq!(
                (key, asked),
                (&spec.key(), spec),
                "the cohort's own key and spec"
            );
            Some((*cohort, path.clone()))
        }
        _ => None,
    })
}

/// The answer to a Join REJECTED for `cause`.
pub(super) fn rejected(stream: StreamId, cause: RejectCause) -> Vec<Action> {
    vec![
        ack(stream, Status::Rejected),
        close(stream, CloseReason::Rejected(cause)),
    ]
}

/// A cohort of `spec` created at the edge by key(2)'s ordinary Join on stream 1 (as
/// `arrival` says), with its upstream attached: its serial.
fn cohort_with_upstream(rig: &mut Rig, spec: &Spec, arrival: Arrival) -> CohortSerial {
    cohort_with_upstream_at(rig, spec, arrival, sid(1), upstream())
}

/// `cohort_with_upstream` created on `stream`, its upstream read on `up`.
fn cohort_with_upstream_at(
    rig: &mut Rig,
    spec: &Spec,
    arrival: Arrival,
    stream: StreamId,
    up: StreamId,
) -> CohortSerial {
    let actions = rig.join_as(arrival, stream, join_body(spec, &key(2).address()));
    let (serial, path) = opened(&actions, spec).expect("a new cohort asks for its upstream");
    assert_eq!(path, Vec::<RelayId>::new());
    rig.machine.on_upstream(rig.now, (up, serial), None);
    assert_eq!(rig.drain(), vec![]);
    serial
}

pub(super) fn declared(n: u8) -> Arrival {
    Arrival::declared(peer(n), "tcp")
}

/// An explicit open cohort at the edge with spectators key(2) on stream 1 and key(3) on
/// stream 2, its upstream attached.
pub(super) fn explicit_edge() -> (Rig, Spec, CohortSerial) {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let serial = cohort_with_upstream(&mut rig, &spec, declared(1));
    rig.joined(key(3), &spec, sid(2), peer(2));
    (rig, spec, serial)
}

/// Feeds a frame of the root on the upstream stream and runs its verification.
pub(super) fn from_root(rig: &mut Rig, frame: &Bytes) -> Vec<Action> {
    rig.publish(upstream(), frame)
}

fn closes_upstream(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|action| matches!(action, Action::Close { stream, .. } if *stream == upstream()))
}

#[test]
fn a_new_cohort_asks_for_one_upstream_with_the_creating_joins_relay_path() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let join = encode_relayed_join(&spec.to_join(&key(2).address()), &[BELOW]);
    let actions = rig.join_raw(peer(1), sid(1), body_of(&join));
    let (first, path) = opened(&actions, &spec).expect("the cohort asks for its upstream");
    assert_eq!(path, vec![BELOW]);
    // The upstream is asked for before the OK Ack; then the cohort's inactivity timer.
    assert!(matches!(actions[0], Action::OpenUpstream { .. }));
    assert!(matches!(&actions[1], Action::Send { stream, .. } if *stream == sid(1)));
    assert_eq!(actions[2..], [arm(600_000)]);
    // A second local stream joins the cohort: no second upstream.
    let (second, actions) = rig.join(key(3), &spec, sid(2), peer(2));
    assert_eq!(actions, vec![ack_ok(sid(2), &second.challenge)]);
    // Another cohort asks for its own, with an empty path for an ordinary Join.
    let other = explicit(2, &key(1), false);
    let actions = rig.join_raw(peer(3), sid(3), join_body(&other, &key(4).address()));
    let (serial, path) = opened(&actions, &other).expect("the other cohort asks too");
    assert_ne!(serial, first);
    assert!(path.is_empty());
}

#[test]
fn admin_data_from_upstream_reaches_every_local_stream_byte_for_byte_once() {
    let (mut rig, spec, _) = explicit_edge();
    // An anonymous bridge session is served by the edge too.
    let actions = rig.join_as(
        Arrival::anonymous(peer(3), "websocket"),
        sid(3),
        join_body(&spec, &key(30).address()),
    );
    assert!(matches!(actions[0], Action::Send { stream, .. } if stream == sid(3)));
    let admin = at_root(key(1), &spec, 9);
    let frames: Vec<Bytes> = (0..3)
        .map(|index| admin.data(index, format!("message {index}").as_bytes()))
        .collect();
    for frame in &frames {
        assert_eq!(
            from_root(&mut rig, frame),
            vec![
                consumed(upstream()),
                deliver(frame, &[sid(1), sid(2), sid(3)])
            ]
        );
    }
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 3);
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 9);
    // The same frame again, and the same index under the root's next challenge (as after a
    // reconnect): below the edge's cursor, dropped.
    assert_eq!(from_root(&mut rig, &frames[2]), vec![consumed(upstream())]);
    let again = at_root(key(1), &spec, 10).data(1, b"message 1");
    assert_eq!(from_root(&mut rig, &again), vec![consumed(upstream())]);
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 2);
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 3);
    assert_eq!(rig.cohort_count(&spec, Counter::RelayForwarded), 3);
    // The next index goes on.
    let next = at_root(key(1), &spec, 10).data(3, b"message 3");
    assert_eq!(
        from_root(&mut rig, &next),
        vec![
            consumed(upstream()),
            deliver(&next, &[sid(1), sid(2), sid(3)])
        ]
    );
    assert!(rig.all_consumed());
}

#[test]
fn upstream_frames_that_fail_are_counted_and_never_close_the_upstream() {
    let (mut rig, spec, _) = explicit_edge();
    let stranger = at_root(key(9), &spec, 9);
    let admin = at_root(key(1), &spec, 9);
    // DATA whose owner is neither the admin nor rostered.
    assert_eq!(
        from_root(&mut rig, &stranger.data(0, b"not admitted")),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::UpstreamInvalid), 1);
    let verifications = rig.verifications;
    // AUTH is never delivered to a subscriber.
    assert_eq!(
        from_root(&mut rig, &admin.auth()),
        vec![consumed(upstream())]
    );
    // A chunk id that is not the one of the frame's own challenge and index.
    let mut moved = admin.sign(Kind::Data, 0, b"moved").broadcast;
    moved.index = 1;
    assert_eq!(
        rig.feed_body(upstream(), Bytes::from(moved.encode_to_vec())),
        vec![consumed(upstream())]
    );
    // Not a Broadcast at all.
    assert_eq!(
        rig.feed_body(upstream(), Bytes::from_static(&[0xff, 0xff, 0xff])),
        vec![consumed(upstream())]
    );
    // ROSTER and EOS signed by someone else than the admin.
    assert_eq!(
        from_root(&mut rig, &stranger.roster(0, &[key(9).address()])),
        vec![consumed(upstream())]
    );
    assert_eq!(
        from_root(&mut rig, &stranger.eos()),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::UpstreamInvalid), 6);
    // A kind from a later version of the protocol is skipped (R14, D12).
    let mut unknown = admin.sign(Kind::Data, 0, b"later").broadcast;
    unknown.kind = 42;
    assert_eq!(
        rig.feed_body(upstream(), Bytes::from(unknown.encode_to_vec())),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::UnknownKind), 1);
    // AUTH, the moved id, the undecodable body and the unknown kind cost no signature check.
    assert_eq!(rig.verifications, verifications + 2);
    // The upstream carries on: the admin's DATA is delivered.
    let data = admin.data(0, b"still here");
    let actions = from_root(&mut rig, &data);
    assert_eq!(
        actions,
        vec![consumed(upstream()), deliver(&data, &[sid(1), sid(2)])]
    );
    assert!(!closes_upstream(&actions));
    assert_eq!(rig.count(Counter::UpstreamInvalid), 6);
    assert!(rig.all_consumed());
}

#[test]
fn r22_an_upstream_roster_goes_first_to_a_later_stream_and_admits_its_publishers() {
    let (mut rig, spec, _) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let roster = admin.roster(0, &[key(4).address()]);
    assert_eq!(
        from_root(&mut rig, &roster),
        vec![consumed(upstream()), deliver(&roster, &[sid(1), sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedRoster), 1);
    // R22: a stream joining later gets the latest roster right after its Ack.
    let (late, actions) = rig.join(key(5), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![ack_ok(sid(3), &late.challenge), send(sid(3), &roster)]
    );
    // The rostered publisher's DATA is admitted.
    let publisher = at_root(key(4), &spec, 8);
    let data = publisher.data(0, b"rostered");
    assert_eq!(
        from_root(&mut rig, &data),
        vec![
            consumed(upstream()),
            deliver(&data, &[sid(1), sid(2), sid(3)])
        ]
    );
    // The root sends the latest roster first to a reconnected upstream: not delivered twice.
    assert_eq!(from_root(&mut rig, &roster), vec![consumed(upstream())]);
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
    // R24: a roster without key(4); its later DATA is dropped.
    let reduced = admin.roster(1, &[]);
    assert_eq!(
        from_root(&mut rig, &reduced),
        vec![
            consumed(upstream()),
            deliver(&reduced, &[sid(1), sid(2), sid(3)])
        ]
    );
    assert_eq!(
        from_root(&mut rig, &publisher.data(1, b"revoked")),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::UpstreamInvalid), 1);
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 1);
    // A stream joining now gets the reduced roster.
    let (last, actions) = rig.join(key(6), &spec, sid(4), peer(4));
    assert_eq!(
        actions,
        vec![ack_ok(sid(4), &last.challenge), send(sid(4), &reduced)]
    );
}

#[test]
fn a_roster_naming_a_local_spectator_closes_it_after_the_roster() {
    let (mut rig, spec, _) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let roster = admin.roster(0, &[key(3).address()]);
    assert_eq!(
        from_root(&mut rig, &roster),
        vec![
            consumed(upstream()),
            deliver(&roster, &[sid(1), sid(2)]),
            close(sid(2), CloseReason::RosteredAtEdge)
        ]
    );
    assert!(CloseReason::RosteredAtEdge.graceful());
    assert_eq!(rig.roles(&spec)["spectator"], vec![sid(1)]);
    // The cohort carries on for the others.
    let data = admin.data(0, b"after");
    assert_eq!(
        from_root(&mut rig, &data),
        vec![consumed(upstream()), deliver(&data, &[sid(1)])]
    );
    // Named at last: the only stream left goes, and the cohort lingers with its upstream.
    let roster = admin.roster(1, &[key(3).address(), key(2).address()]);
    let actions = from_root(&mut rig, &roster);
    assert_eq!(
        actions,
        vec![
            consumed(upstream()),
            deliver(&roster, &[sid(1)]),
            close(sid(1), CloseReason::RosteredAtEdge),
            arm(LINGER_MS)
        ]
    );
    assert_eq!(rig.machine.cohort_count(), 1);
}

#[test]
fn r21_an_upstream_eos_is_delivered_then_the_cohort_and_its_upstream_go() {
    let (mut rig, spec, serial) = explicit_edge();
    let eos = at_root(key(1), &spec, 9).eos();
    assert_eq!(
        from_root(&mut rig, &eos),
        vec![
            consumed(upstream()),
            deliver(&eos, &[sid(1), sid(2)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
            Action::DropUpstream { cohort: serial },
            close(upstream(), CloseReason::UpstreamUnwanted)
        ]
    );
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.machine.stream_count(), 0);
    assert_eq!(rig.count(Counter::CohortsReclaimedEos), 1);
    // A reconnect the I/O layer finished meanwhile is closed: its cohort is gone.
    rig.machine.on_upstream(rig.now, (sid(101), serial), None);
    assert_eq!(
        rig.drain(),
        vec![close(sid(101), CloseReason::UpstreamUnwanted)]
    );
    // A new Join makes a new cohort with its own upstream.
    let actions = rig.join_raw(peer(1), sid(3), join_body(&spec, &key(2).address()));
    let (again, _) = opened(&actions, &spec).expect("a new cohort asks again");
    assert_ne!(again, serial);
    assert!(rig.all_consumed());
}

#[test]
fn d11_a_history_cohort_retains_upstream_data_for_a_late_joiner() {
    let mut rig = edge();
    let spec = history(explicit(1, &key(1), false));
    cohort_with_upstream(&mut rig, &spec, declared(1));
    let admin = at_root(key(1), &spec, 9);
    let roster = admin.roster(0, &[key(4).address()]);
    from_root(&mut rig, &roster);
    let publisher = at_root(key(4), &spec, 8);
    let retained = [
        admin.data(0, b"zero"),
        publisher.data(0, b"one"),
        admin.data(1, b"two"),
    ];
    for frame in &retained {
        assert_eq!(
            from_root(&mut rig, frame),
            vec![consumed(upstream()), deliver(frame, &[sid(1)])]
        );
    }
    let (late, actions) = rig.join(key(5), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(2), &late.challenge),
            send(sid(2), &roster),
            backlog(sid(2), &retained)
        ]
    );
    // The root's backlog for a reconnected upstream repeats what the edge has: dropped.
    for frame in &retained {
        assert_eq!(from_root(&mut rig, frame), vec![consumed(upstream())]);
    }
    // R24, R41: after a roster without key(4), a later joiner gets none of its frames.
    let reduced = admin.roster(1, &[]);
    from_root(&mut rig, &reduced);
    let (last, actions) = rig.join(key(6), &spec, sid(3), peer(3));
    assert_eq!(
        actions,
        vec![
            ack_ok(sid(3), &last.challenge),
            send(sid(3), &reduced),
            backlog(sid(3), &[retained[0].clone(), retained[2].clone()])
        ]
    );
}

#[test]
fn r28_an_implicit_cohort_at_an_edge_drops_a_repeated_chunk() {
    let mut rig = Rig::with_config(ProtocolConfig {
        dedup_window_entries: 2,
        ..edge_config()
    });
    let spec = implicit([5; 32], Binding::Mnemonic);
    let bridge = |n: u8| Arrival::anonymous(peer(n), "websocket");
    cohort_with_upstream(&mut rig, &spec, bridge(1));
    let actions = rig.join_as(bridge(2), sid(2), join_body(&spec, &key(3).address()));
    assert!(matches!(actions[0], Action::Send { stream, .. } if stream == sid(2)));
    let chunks: Vec<Bytes> = (1..=3)
        .map(|n| sign_implicit(&key(7), &[n; 32], None, b"chunk").frame)
        .collect();
    assert_eq!(
        from_root(&mut rig, &chunks[0]),
        vec![consumed(upstream()), deliver(&chunks[0], &[sid(1), sid(2)])]
    );
    assert_eq!(from_root(&mut rig, &chunks[0]), vec![consumed(upstream())]);
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
    from_root(&mut rig, &chunks[1]);
    from_root(&mut rig, &chunks[2]);
    // Out of the window of two: taken again (R28's accepted risk).
    assert_eq!(
        from_root(&mut rig, &chunks[0]),
        vec![consumed(upstream()), deliver(&chunks[0], &[sid(1), sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 4);
    // A chunk whose id is not the binding's is dropped, not delivered.
    let feed = implicit([6; 32], Binding::FeedTopic);
    cohort_with_upstream_at(&mut rig, &feed, bridge(3), sid(3), sid(103));
    let wrong = sign_implicit(&key(7), &[7; 32], Some(1), b"other id").frame;
    assert_eq!(rig.publish(sid(103), &wrong), vec![consumed(sid(103))]);
    assert_eq!(rig.cohort_count(&feed, Counter::UpstreamInvalid), 1);
    let right = sign_implicit(&key(7), &feed_id(feed.topic, 1), Some(1), b"its id").frame;
    assert_eq!(
        rig.publish(sid(103), &right),
        vec![consumed(sid(103)), deliver(&right, &[sid(3)])]
    );
}

#[test]
fn an_all_cohort_at_an_edge_takes_data_from_any_owner_with_a_cursor_each() {
    let mut rig = edge();
    let spec = all(1, &key(1));
    cohort_with_upstream(&mut rig, &spec, Arrival::anonymous(peer(1), "websocket"));
    let (one, two) = (at_root(key(4), &spec, 8), at_root(key(5), &spec, 9));
    for frame in [one.data(0, b"a"), two.data(0, b"b"), one.data(1, b"c")] {
        assert_eq!(
            from_root(&mut rig, &frame),
            vec![consumed(upstream()), deliver(&frame, &[sid(1)])]
        );
    }
    assert_eq!(
        from_root(&mut rig, &two.data(0, b"b")),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
}

/// The `Verify` jobs among `actions`, in order.
fn jobs(actions: Vec<Action>) -> Vec<(crate::Ticket, bps_verify::VerifyRequest)> {
    actions
        .into_iter()
        .map(|action| match action {
            Action::Verify { ticket, request } => (ticket, request),
            other => panic!("only a Verify was expected, got {other:?}"),
        })
        .collect()
}

#[test]
fn upstream_frames_apply_in_read_order_whatever_order_their_checks_finish_in() {
    let (mut rig, spec, _) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let publisher = at_root(key(4), &spec, 8);
    let roster = admin.roster(0, &[key(4).address()]);
    let data = publisher.data(0, b"admitted by the roster before it");
    let mut checks = jobs(rig.feed(upstream(), &roster));
    checks.extend(jobs(rig.feed(upstream(), &data)));
    assert_eq!(checks.len(), 2, "each upstream frame is checked at once");
    // The DATA's check finishes first: it waits for the roster read before it.
    let (data_ticket, data_request) = checks.pop().expect("two jobs");
    let (roster_ticket, roster_request) = checks.pop().expect("two jobs");
    rig.machine
        .on_verified(rig.now, data_ticket, bps_verify::verify(&data_request));
    assert_eq!(rig.drain(), vec![]);
    rig.machine
        .on_verified(rig.now, roster_ticket, bps_verify::verify(&roster_request));
    assert_eq!(
        rig.drain(),
        vec![
            consumed(upstream()),
            deliver(&roster, &[sid(1), sid(2)]),
            consumed(upstream()),
            deliver(&data, &[sid(1), sid(2)])
        ]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::UpstreamInvalid), 0);
    assert!(rig.all_consumed());
}

#[test]
fn an_upstream_the_io_layer_lost_leaves_the_cohort_and_a_new_one_attaches() {
    let (mut rig, spec, serial) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let first = admin.data(0, b"first");
    from_root(&mut rig, &first);
    // A frame still being checked when the stream breaks.
    let in_flight = jobs(rig.feed(upstream(), &admin.data(1, b"in flight")));
    assert_eq!(rig.closed(upstream(), ClosedBy::Io), vec![]);
    assert_eq!(rig.machine.cohort_count(), 1);
    assert_eq!(rig.roles(&spec)["spectator"], vec![sid(1), sid(2)]);
    // Its result is ignored, and its frame consumed.
    for (ticket, request) in in_flight {
        rig.machine
            .on_verified(rig.now, ticket, bps_verify::verify(&request));
    }
    assert_eq!(rig.drain(), vec![consumed(upstream())]);
    // The reconnected upstream (the root's next challenge) carries on from the cursor.
    rig.machine.on_upstream(rig.now, (sid(101), serial), None);
    assert_eq!(rig.drain(), vec![]);
    let admin = at_root(key(1), &spec, 10);
    assert_eq!(
        rig.publish(sid(101), &admin.data(0, b"first")),
        vec![consumed(sid(101))]
    );
    let next = admin.data(1, b"in flight");
    assert_eq!(
        rig.publish(sid(101), &next),
        vec![consumed(sid(101)), deliver(&next, &[sid(1), sid(2)])]
    );
    // A second upstream for a cohort that has one is closed; the first carries on.
    rig.machine.on_upstream(rig.now, (sid(102), serial), None);
    assert_eq!(
        rig.drain(),
        vec![close(sid(102), CloseReason::UpstreamUnwanted)]
    );
    let last = admin.data(2, b"last");
    assert_eq!(
        rig.publish(sid(101), &last),
        vec![consumed(sid(101)), deliver(&last, &[sid(1), sid(2)])]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Retransmit), 1);
    assert!(rig.all_consumed());
}

#[test]
fn the_last_local_stream_leaving_keeps_the_cohort_for_the_linger() {
    let (mut rig, spec, serial) = explicit_edge();
    rig.now = Millis(1_000);
    assert_eq!(rig.closed(sid(1), ClosedBy::Peer), vec![]);
    assert_eq!(
        rig.closed(sid(2), ClosedBy::Peer),
        vec![arm(1_000 + LINGER_MS)]
    );
    assert_eq!(rig.machine.cohort_count(), 1);
    // The upstream still delivers into the (empty) cohort: nothing to deliver to.
    let data = at_root(key(1), &spec, 9).data(0, b"nobody");
    assert_eq!(from_root(&mut rig, &data), vec![consumed(upstream())]);
    let actions = rig.tick_at(1_000 + LINGER_MS - 1);
    assert!(
        actions
            .iter()
            .all(|action| matches!(action, Action::ArmTimer { .. })),
        "{actions:?}"
    );
    assert_eq!(rig.machine.cohort_count(), 1);
    let actions = rig.tick_at(1_000 + LINGER_MS);
    assert_eq!(
        actions[..2],
        [
            Action::DropUpstream { cohort: serial },
            close(upstream(), CloseReason::UpstreamUnwanted)
        ]
    );
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.count(Counter::CohortsReclaimedEmpty), 1);
}

#[test]
fn a_stream_joining_within_the_linger_keeps_the_cohort_and_its_upstream() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let serial = cohort_with_upstream(&mut rig, &spec, declared(1));
    rig.now = Millis(1_000);
    rig.closed(sid(1), ClosedBy::Peer);
    rig.now = Millis(1_000 + LINGER_MS - 1);
    let (back, actions) = rig.join(key(2), &spec, sid(2), peer(1));
    assert_eq!(actions, vec![ack_ok(sid(2), &back.challenge)]);
    // The linger's timer finds the cohort in use.
    let actions = rig.tick_at(1_000 + LINGER_MS);
    assert!(
        !actions
            .iter()
            .any(|action| matches!(action, Action::DropUpstream { .. } | Action::Close { .. })),
        "{actions:?}"
    );
    let data = at_root(key(1), &spec, 9).data(0, b"still relayed");
    assert_eq!(
        from_root(&mut rig, &data),
        vec![consumed(upstream()), deliver(&data, &[sid(2)])]
    );
    // Leaving again starts a new linger from then.
    rig.now = Millis(10_000);
    assert_eq!(
        rig.closed(sid(2), ClosedBy::Io),
        vec![arm(10_000 + LINGER_MS)]
    );
    rig.tick_at(10_000 + LINGER_MS - 1);
    assert_eq!(rig.machine.cohort_count(), 1);
    let actions = rig.tick_at(10_000 + LINGER_MS);
    assert!(actions.contains(&Action::DropUpstream { cohort: serial }));
    assert!(closes_upstream(&actions));
    assert_eq!(rig.machine.cohort_count(), 0);
}

#[test]
fn an_empty_cohort_without_an_upstream_yet_is_dropped_after_the_linger() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let actions = rig.join_raw(peer(1), sid(1), join_body(&spec, &key(2).address()));
    let (serial, _) = opened(&actions, &spec).expect("asks for its upstream");
    rig.closed(sid(1), ClosedBy::Peer);
    let actions = rig.tick_at(LINGER_MS);
    assert_eq!(actions[..1], [Action::DropUpstream { cohort: serial }]);
    assert!(!closes_upstream(&actions));
    // The upstream the I/O layer opened too late is closed.
    rig.machine.on_upstream(rig.now, (upstream(), serial), None);
    assert_eq!(
        rig.drain(),
        vec![close(upstream(), CloseReason::UpstreamUnwanted)]
    );
}

#[test]
fn a_join_whose_relay_path_holds_this_edge_or_is_malformed_is_rejected() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let join = spec.to_join(&key(2).address());
    let looped = encode_relayed_join(&join, &[BELOW, RELAY_ID]);
    assert_eq!(
        rig.join_raw(peer(1), sid(1), body_of(&looped)),
        rejected(sid(1), RejectCause::RelayLoop)
    );
    let long = encode_relayed_join(&join, &[BELOW; RELAY_PATH_LEN_MAX + 1]);
    assert_eq!(
        rig.join_raw(peer(1), sid(2), body_of(&long)),
        rejected(
            sid(2),
            RejectCause::RelayPath(RelayPathError::TooLong {
                entries: RELAY_PATH_LEN_MAX + 1
            })
        )
    );
    // Field 15 holding an id of 15 bytes.
    let mut short = join.encode_to_vec();
    short.extend([15 << 3 | 2, 15]);
    short.extend([1; 15]);
    assert_eq!(
        rig.join_raw(peer(1), sid(3), Bytes::from(short)),
        rejected(
            sid(3),
            RejectCause::RelayPath(RelayPathError::IdLength { bytes: 15 })
        )
    );
    assert_eq!(rig.machine.cohort_count(), 0);
    assert_eq!(rig.count(Counter::JoinsRejected), 3);
    assert_eq!(rig.count(Counter::RelayLoopsRefused), 1);
    // The longest path that is not a loop is served.
    let deepest = encode_relayed_join(&join, &[BELOW; RELAY_PATH_LEN_MAX]);
    let actions = rig.join_raw(peer(1), sid(4), body_of(&deepest));
    let (_, path) = opened(&actions, &spec).expect("served");
    assert_eq!(path, vec![BELOW; RELAY_PATH_LEN_MAX]);
}

#[test]
fn a_broker_that_is_not_an_edge_never_opens_an_upstream() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    // A relay path is an edge's business: a root takes any, its own id included.
    let join = encode_relayed_join(&spec.to_join(&key(2).address()), &[BELOW, RELAY_ID]);
    let mut seen = rig.join_raw(peer(1), sid(1), body_of(&join));
    let admin = rig.joined(key(1), &spec, sid(2), peer(2));
    seen.extend(rig.publish(sid(2), &admin.auth()));
    seen.extend(rig.publish(sid(2), &admin.data(0, b"local")));
    seen.extend(rig.closed(sid(1), ClosedBy::Peer));
    seen.extend(rig.publish(sid(2), &admin.eos()));
    assert!(matches!(&seen[0], Action::Send { stream, .. } if *stream == sid(1)));
    assert!(
        !seen.iter().any(|action| matches!(
            action,
            Action::OpenUpstream { .. } | Action::DropUpstream { .. }
        )),
        "{seen:?}"
    );
    // R36 at once, no linger: the last stream leaving ends the cohort.
    let alone = implicit([7; 32], Binding::Mnemonic);
    rig.joined(key(3), &alone, sid(3), peer(3));
    assert_eq!(rig.machine.cohort_count(), 1);
    rig.closed(sid(3), ClosedBy::Peer);
    assert_eq!(rig.machine.cohort_count(), 0);
}

/// Takes every `Deliver` and `Send` to `to` among `actions`, in order.
fn frames_to(actions: &[Action], to: StreamId) -> Vec<Bytes> {
    actions
        .iter()
        .filter_map(|action| match action {
            Action::Deliver { frame, targets, .. } if targets.iter().any(|id| id == to) => {
                Some(frame.clone())
            }
            Action::Send { stream, frame, .. } if *stream == to => Some(frame.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_edge_relays_what_a_root_machine_delivers_to_its_upstream_stream() {
    let mut edge = edge();
    let mut root = Rig::new();
    let spec = history(explicit(1, &key(1), false));
    let actions = edge.join_raw(peer(1), sid(1), join_body(&spec, &key(2).address()));
    let (serial, mut path) = opened(&actions, &spec).expect("asks for its upstream");
    // What the I/O layer does: join the root as a spectator with this edge's id on the path.
    path.push(RELAY_ID);
    let join = encode_relayed_join(&spec.to_join(&key(20).address()), &path);
    let answer = root.join_raw(peer(9), sid(50), body_of(&join));
    assert!(matches!(&answer[0], Action::Send { stream, .. } if *stream == sid(50)));
    edge.machine
        .on_upstream(edge.now, (upstream(), serial), None);
    // The admin and a rostered publisher publish at the root.
    let admin = root.joined(key(1), &spec, sid(1), peer(1));
    let mut at_root = root.publish(sid(1), &admin.auth());
    let roster = admin.roster(0, &[key(4).address()]);
    at_root.extend(root.publish(sid(1), &roster));
    let publisher = root.joined(key(4), &spec, sid(2), peer(2));
    for index in 0..2 {
        at_root.extend(root.publish(sid(1), &admin.data(index, b"admin")));
        at_root.extend(root.publish(sid(2), &publisher.data(index, b"publisher")));
    }
    let relayed = frames_to(&at_root, sid(50));
    assert_eq!(relayed.len(), 5, "the roster and four DATA");
    let mut at_edge = Vec::new();
    for frame in &relayed {
        at_edge.extend(from_root(&mut edge, frame));
    }
    assert_eq!(frames_to(&at_edge, sid(1)), relayed);
    // A late joiner at the edge gets what the root's own late joiner gets.
    let at_edge = edge.join_raw(peer(3), sid(3), join_body(&spec, &key(6).address()));
    let at_root = root.join_raw(peer(3), sid(3), join_body(&spec, &key(6).address()));
    assert_eq!(at_edge[1..], at_root[1..]);
    assert!(edge.all_consumed());
}

#[test]
fn an_eos_ends_the_cohort_while_later_upstream_frames_are_being_checked() {
    let (mut rig, spec, serial) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let eos = admin.eos();
    let mut checks = jobs(rig.feed(upstream(), &eos));
    checks.extend(jobs(rig.feed(upstream(), &admin.data(0, b"checked"))));
    checks.extend(jobs(rig.feed(upstream(), &admin.data(1, b"unchecked"))));
    let unchecked = checks.pop().expect("three jobs");
    let (data_ticket, data_request) = checks.pop().expect("three jobs");
    let (eos_ticket, eos_request) = checks.pop().expect("three jobs");
    rig.machine
        .on_verified(rig.now, data_ticket, bps_verify::verify(&data_request));
    assert_eq!(rig.drain(), vec![]);
    rig.machine
        .on_verified(rig.now, eos_ticket, bps_verify::verify(&eos_request));
    assert_eq!(
        rig.drain(),
        vec![
            consumed(upstream()),
            deliver(&eos, &[sid(1), sid(2)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
            Action::DropUpstream { cohort: serial },
            consumed(upstream()),
            close(upstream(), CloseReason::UpstreamUnwanted)
        ]
    );
    // The last check may be taken back, as a closed stream's is.
    assert_eq!(rig.machine.job_origin(unchecked.0), None);
    rig.machine.on_cancelled(rig.now, unchecked.0);
    assert_eq!(rig.drain(), vec![consumed(upstream())]);
    // A frame the I/O layer had read before it closed the stream is done at once.
    assert_eq!(
        rig.feed(upstream(), &admin.data(2, b"late")),
        vec![consumed(upstream())]
    );
    assert_eq!(rig.machine.verifications_in_flight(), 0);
    assert!(rig.all_consumed());
}

#[test]
fn an_upstream_lost_with_frames_checked_and_unchecked_consumes_each_once() {
    let (mut rig, spec, serial) = explicit_edge();
    let admin = at_root(key(1), &spec, 9);
    let mut checks = jobs(rig.feed(upstream(), &admin.data(0, b"unchecked")));
    checks.extend(jobs(rig.feed(upstream(), &admin.data(1, b"checked"))));
    let (checked_ticket, checked_request) = checks.pop().expect("two jobs");
    let (unchecked_ticket, unchecked_request) = checks.pop().expect("two jobs");
    assert_eq!(
        rig.machine
            .job_origin(unchecked_ticket)
            .map(|origin| origin.cohort),
        Some(serial)
    );
    rig.machine.on_verified(
        rig.now,
        checked_ticket,
        bps_verify::verify(&checked_request),
    );
    assert_eq!(rig.drain(), vec![]);
    assert_eq!(
        rig.closed(upstream(), ClosedBy::Peer),
        vec![consumed(upstream())]
    );
    rig.machine.on_verified(
        rig.now,
        unchecked_ticket,
        bps_verify::verify(&unchecked_request),
    );
    assert_eq!(rig.drain(), vec![consumed(upstream())]);
    assert!(rig.all_consumed());
    // Neither was delivered: the reconnected upstream brings them (the root's backlog or
    // the publisher's next frames).
    assert_eq!(rig.cohort_count(&spec, Counter::AcceptedData), 0);
    rig.machine.on_upstream(rig.now, (sid(101), serial), None);
    let again = admin.data(0, b"unchecked");
    assert_eq!(
        rig.publish(sid(101), &again),
        vec![consumed(sid(101)), deliver(&again, &[sid(1), sid(2)])]
    );
}

#[test]
fn r31_a_lingering_cohort_makes_room_for_a_creating_join_when_the_table_is_full() {
    let mut rig = Rig::with_config(ProtocolConfig {
        cohorts_max: 1,
        edge: Some(EdgePolicy {
            relay_id: RELAY_ID,
            linger_ms: 100_000,
        }),
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    let serial = cohort_with_upstream(&mut rig, &spec, declared(1));
    rig.closed(sid(1), ClosedBy::Peer);
    rig.now = Millis(30_000);
    let other = explicit(2, &key(1), false);
    let actions = rig.join_raw(peer(2), sid(2), join_body(&other, &key(3).address()));
    assert_eq!(
        actions[..2],
        [
            Action::DropUpstream { cohort: serial },
            close(upstream(), CloseReason::UpstreamUnwanted)
        ]
    );
    assert!(opened(&actions, &other).is_some(), "{actions:?}");
    assert_eq!(rig.count(Counter::CohortsReclaimedIdle), 1);
    assert_eq!(rig.machine.cohort_count(), 1);
}

#[test]
fn r34_an_edge_cohort_without_upstream_publications_is_reclaimed_with_its_upstream() {
    let mut rig = Rig::with_config(ProtocolConfig {
        inactivity_deadline_ms: 10_000,
        ..edge_config()
    });
    let spec = explicit(1, &key(1), false);
    let serial = cohort_with_upstream(&mut rig, &spec, declared(1));
    rig.now = Millis(5_000);
    from_root(&mut rig, &at_root(key(1), &spec, 9).data(0, b"activity"));
    // An upstream publication keeps the cohort alive past its first deadline.
    rig.tick_at(10_000);
    assert_eq!(rig.machine.cohort_count(), 1);
    let actions = rig.tick_at(15_000);
    assert_eq!(
        actions[..3],
        [
            close(sid(1), CloseReason::Inactive),
            Action::DropUpstream { cohort: serial },
            close(upstream(), CloseReason::UpstreamUnwanted)
        ]
    );
    assert_eq!(rig.machine.cohort_count(), 0);
}
