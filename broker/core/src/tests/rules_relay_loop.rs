//! Edge mode's loop refusal when two edges' Joins cross (docs/SCALING.md, "Trees and
//! loops"): an edge names itself in its OK to another edge's Join, and an edge whose
//! upstream reached edge X refuses X's upstream Join, now and later.
//!
//! Owns: the machine's side of the Ack's relay id and of the refusal it allows.
//! Never does: the relay path's own refusals (`rules_edge`).

use bps_proto::{Status, decode_ack, encode_relayed_join, relay_id_of_ack};

use super::driver::{Rig, body_of, explicit, join_body, key, peer, sid};
use super::rules_edge::{BELOW, RELAY_ID, edge, rejected, upstream};
use crate::{Action, CloseReason, ClosedBy, CohortSerial, Counter, RejectCause};

/// The Ack's body among `actions` (the first Send; a creating Join's OpenUpstream may come
/// before it).
fn ack_body(actions: &[Action]) -> bytes::Bytes {
    actions
        .iter()
        .find_map(|action| match action {
            Action::Send { frame, .. } => Some(body_of(frame)),
            _ => None,
        })
        .expect("an Ack")
}

/// Another edge's upstream Join (its path ends with `BELOW`) on `stream`.
fn relayed_join(rig: &mut Rig, stream: u64) -> Vec<Action> {
    let spec = explicit(1, &key(1), false);
    let join = encode_relayed_join(&spec.to_join(&key(30).address()), &[BELOW]);
    rig.join_raw(peer(9), sid(stream), body_of(&join))
}

#[test]
fn an_edge_names_itself_only_in_its_ok_to_another_edges_join() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let ordinary = rig.join_raw(peer(1), sid(1), join_body(&spec, &key(2).address()));
    assert_eq!(relay_id_of_ack(ack_body(&ordinary)), None);
    let relayed = relayed_join(&mut rig, 2);
    let body = ack_body(&relayed);
    assert_eq!(
        decode_ack(body.clone()).expect("an Ack").status,
        Status::Ok as i32
    );
    assert_eq!(relay_id_of_ack(body), Some(RELAY_ID));
    // A broker that is no edge names nothing, whatever the Join carried.
    let mut root = Rig::new();
    assert_eq!(relay_id_of_ack(ack_body(&relayed_join(&mut root, 1))), None);
}

#[test]
fn crossed_joins_of_two_edges_are_refused_once_the_upstream_names_the_other() {
    let mut rig = edge();
    let spec = explicit(1, &key(1), false);
    let created = rig.join_raw(peer(1), sid(1), join_body(&spec, &key(2).address()));
    let serial: CohortSerial = created
        .iter()
        .find_map(|action| match action {
            Action::OpenUpstream { cohort, .. } => Some(*cohort),
            _ => None,
        })
        .expect("an upstream asked for");
    // The other edge's upstream Join arrives before this edge's own Ack: served.
    relayed_join(&mut rig, 2);
    // This edge's upstream reached that very edge: its stream here closes the loop.
    rig.machine
        .on_upstream(rig.now, (upstream(), serial), Some(BELOW));
    assert_eq!(
        rig.drain(),
        vec![Action::Close {
            stream: sid(2),
            reason: CloseReason::RelayLoop
        }]
    );
    assert_eq!(rig.count(Counter::RelayLoopsRefused), 1);
    // Its rejoin is refused at once; the local spectator stays.
    assert_eq!(
        relayed_join(&mut rig, 3),
        rejected(sid(3), RejectCause::RelayLoop)
    );
    assert_eq!(rig.count(Counter::RelayLoopsRefused), 2);
    assert_eq!(rig.machine.stream_count(), 1);
    // Once this edge's upstream is gone, the next root may differ: nothing is refused then.
    rig.closed(upstream(), ClosedBy::Peer);
    let served = relayed_join(&mut rig, 4);
    assert_eq!(
        decode_ack(ack_body(&served)).expect("an Ack").status,
        Status::Ok as i32
    );
}
