//! The protocol rules of the WebSocket bridge (docs/PROTOCOL.md W5, W11): anonymous spectator
//! sessions and service chunks relayed on an admin stream.

use bps_proto::{Broadcast, Frame, Hash, Kind, Status, encode_frame, session_chunk_id};
use bps_verify::SigningKey;
use bytes::{BufMut, Bytes, BytesMut};

use super::driver::{
    Client, Rig, ack, all, close, consumed, deliver, explicit, join_body, key, peer, sid,
};
use crate::{
    Action, Arrival, CloseReason, CoreId, Counter, FullCause, ProtocolConfig, RejectCause,
    RelayOutcome, RelayReply, Violation, WrongStream,
};

/// A W11 session: the addr is what the broker drew for it.
fn anonymous(rig: &mut Rig, spec: &bps_proto::Spec, stream: u64, from: u8) -> Vec<Action> {
    let drawn = [0xa0 + u8::try_from(stream % 64).expect("small"); 20];
    rig.join_as(
        Arrival::anonymous(peer(from), "websocket"),
        sid(stream),
        join_body(spec, &drawn),
    )
}

fn is_ok_ack(actions: &[Action], stream: u64) -> bool {
    actions.iter().any(|action| match action {
        Action::Send {
            stream: to, frame, ..
        } if *to == sid(stream) => bps_proto::decode_ack(super::driver::body_of(frame))
            .is_ok_and(|ack| ack.status == Status::Ok as i32),
        _ => false,
    })
}

#[test]
fn w11_anonymous_sessions_are_spectators_outside_r33() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.joined(key(3), &spec, sid(3), peer(2));
    // R33 (2 per peer per cohort) is full for peer 2's declared streams, not for its tabs.
    for stream in 4..=8 {
        assert!(is_ok_ack(&anonymous(&mut rig, &spec, stream, 2), stream));
    }
    assert_eq!(
        rig.roles(&spec)["spectator"],
        vec![sid(2), sid(3), sid(4), sid(5), sid(6), sid(7), sid(8)]
    );
    assert_eq!(rig.ledger.snapshot().anonymous_sessions, 5);
    let d = admin.data(0, b"to every tab");
    assert_eq!(
        rig.publish(sid(1), &d),
        vec![
            consumed(sid(1)),
            deliver(
                &d,
                &[sid(2), sid(3), sid(4), sid(5), sid(6), sid(7), sid(8)]
            )
        ]
    );
    let streams = rig
        .machine
        .cohort_streams(&spec.key(), (0, 16), rig.now)
        .expect("cohort is live");
    let tab = streams
        .streams
        .iter()
        .find(|stream| stream.id == sid(4))
        .expect("the tab is listed");
    assert!(tab.anonymous);
    assert_eq!(tab.transport, "websocket");
}

#[test]
fn w11_anonymous_sessions_per_peer_are_bounded_across_cohorts() {
    let mut rig = Rig::with_config(ProtocolConfig {
        spectator_sessions_per_peer_max: 2,
        ..ProtocolConfig::default()
    });
    let one = explicit(1, &key(1), false);
    let two = explicit(2, &key(1), false);
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 1, 5), 1));
    assert!(is_ok_ack(&anonymous(&mut rig, &two, 2, 5), 2));
    // The third tab of the address, on either cohort, is FULL; another address is not.
    let refused = anonymous(&mut rig, &one, 3, 5);
    assert_eq!(
        refused,
        vec![
            ack(sid(3), Status::Full),
            close(sid(3), CloseReason::Full(FullCause::PeerAnonymousSessions))
        ]
    );
    let refused = anonymous(&mut rig, &explicit(3, &key(1), false), 4, 5);
    assert_eq!(
        refused[1],
        close(sid(4), CloseReason::Full(FullCause::PeerAnonymousSessions))
    );
    // A refused creation leaves no cohort and no ledger entry behind.
    assert_eq!(rig.machine.cohort_count(), 2);
    assert_eq!(rig.ledger.snapshot().cohorts_live, 2);
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 5, 6), 5));
    // A closed tab gives its slot back.
    rig.closed(sid(1), crate::ClosedBy::Peer);
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 6, 5), 6));
    assert_eq!(rig.ledger.snapshot().anonymous_sessions, 3);
}

#[test]
fn w11_one_peers_anonymous_sessions_in_one_cohort_are_bounded() {
    let mut rig = Rig::with_config(ProtocolConfig {
        spectator_sessions_per_peer_per_cohort_max: 2,
        ..ProtocolConfig::default()
    });
    let one = explicit(1, &key(1), false);
    let two = explicit(2, &key(1), false);
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 1, 5), 1));
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 2, 5), 2));
    assert_eq!(
        anonymous(&mut rig, &one, 3, 5)[1],
        close(
            sid(3),
            CloseReason::Full(FullCause::PeerAnonymousSessionsInCohort)
        )
    );
    // The same address in another cohort, and another address in this one, still get in.
    assert!(is_ok_ack(&anonymous(&mut rig, &two, 4, 5), 4));
    assert!(is_ok_ack(&anonymous(&mut rig, &one, 5, 6), 5));
    // The refusal left no ledger entry behind.
    assert_eq!(rig.ledger.snapshot().anonymous_sessions, 4);
}

#[test]
fn w11_anonymous_sessions_leave_a_share_of_r30_to_streams_with_an_addr() {
    let mut rig = Rig::with_config(ProtocolConfig {
        streams_per_cohort_max: 8,
        spectator_slots_percent: 50,
        ..ProtocolConfig::default()
    });
    let spec = explicit(1, &key(1), false);
    // Four peers take the four anonymous slots (half of R30's eight)...
    for stream in 1..=4u8 {
        assert!(is_ok_ack(
            &anonymous(&mut rig, &spec, u64::from(stream), 10 + stream),
            u64::from(stream)
        ));
    }
    // ...the fifth anonymous session is FULL, whoever sends it...
    assert_eq!(
        anonymous(&mut rig, &spec, 5, 20)[1],
        close(
            sid(5),
            CloseReason::Full(FullCause::CohortAnonymousSessions)
        )
    );
    // ...while the admin and named viewers still fill the rest of R30.
    rig.joined(key(1), &spec, sid(6), peer(1));
    for stream in 7..=9u8 {
        rig.joined(key(stream), &spec, sid(u64::from(stream)), peer(stream));
    }
    assert_eq!(rig.roles(&spec)["spectator"].len(), 7);
    // A closed anonymous session gives its slot back.
    rig.closed(sid(1), crate::ClosedBy::Peer);
    assert!(is_ok_ack(&anonymous(&mut rig, &spec, 10, 20), 10));
}

#[test]
fn w11_anonymous_sessions_spectate_under_all_and_are_refused_by_closed_cohorts() {
    let mut rig = Rig::new();
    let chat = all(1, &key(1));
    let member = rig.joined(key(2), &chat, sid(1), peer(1));
    assert!(is_ok_ack(&anonymous(&mut rig, &chat, 2, 3), 2));
    assert_eq!(rig.roles(&chat)["spectator"], vec![sid(2)]);
    let d = member.data(0, b"hello room");
    assert_eq!(
        rig.publish(sid(1), &d),
        vec![consumed(sid(1)), deliver(&d, &[sid(2)])]
    );
    let jam = explicit(2, &key(1), true);
    assert_eq!(
        anonymous(&mut rig, &jam, 3, 3),
        vec![
            ack(sid(3), Status::Rejected),
            close(
                sid(3),
                CloseReason::Rejected(RejectCause::AnonymousInClosed)
            )
        ]
    );
}

#[test]
fn w11_a_frame_from_an_anonymous_session_closes_it_without_a_blocklist() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    assert!(is_ok_ack(&anonymous(&mut rig, &spec, 2, 4), 2));
    let stray = admin.data(0, b"not yours to send");
    assert_eq!(
        rig.feed(sid(2), &stray),
        vec![
            consumed(sid(2)),
            close(
                sid(2),
                CloseReason::Violation(Violation::WrongStream(WrongStream::Spectator))
            )
        ]
    );
    assert_eq!(rig.count(Counter::WrongStream), 1);
    assert_eq!(rig.count(Counter::Blocklisted), 0);
    assert!(is_ok_ack(&anonymous(&mut rig, &spec, 3, 4), 3));
}

/// The parts a bridge client posts (W5): the chunk's signature, span and payload, signed
/// under `signer`'s challenge, re-assembled under any challenge as the bridge does.
struct Posted {
    kind: Kind,
    index: u64,
    topic: Hash,
    signature: Bytes,
    span_and_payload: Bytes,
}

impl Posted {
    fn signed(signer: &Client, kind: Kind, index: u64, payload: &[u8]) -> Posted {
        let signed = signer.sign(kind, index, payload);
        Posted {
            kind,
            index,
            topic: signer.topic,
            signature: signed.chunk.slice(32..97),
            span_and_payload: signed.chunk.slice(97..),
        }
    }

    fn frame_for(&self, challenge: &Hash) -> Frame {
        let mut soc = BytesMut::new();
        soc.put_slice(&session_chunk_id(
            self.kind, self.topic, challenge, self.index,
        ));
        soc.put_slice(&self.signature);
        soc.put_slice(&self.span_and_payload);
        let broadcast = Broadcast {
            soc: soc.freeze(),
            kind: self.kind as i32,
            challenge: Bytes::copy_from_slice(challenge),
            index: self.index,
        };
        super::driver::frame(&encode_frame(&broadcast))
    }
}

/// Relays `posted` (naming `named` as its challenge, if given) and runs its signature check:
/// the outcome, and what else the machine did, in order.
fn relay_named(
    rig: &mut Rig,
    spec: &bps_proto::Spec,
    posted: &Posted,
    named: Option<&Hash>,
) -> (RelayOutcome, Vec<Action>) {
    let now = rig.now;
    let reply = RelayReply {
        core: CoreId::new(0),
        relay: 7,
    };
    let decided = rig.machine.on_relay(
        now,
        (&spec.key(), named),
        &mut |challenge| posted.frame_for(challenge),
        reply,
    );
    let before = rig.verifications;
    let drained = rig.drain();
    let actions = rig.run_verifications(drained);
    let checks = rig.verifications - before;
    assert!(checks <= 1, "one relay, {checks} signature checks");
    let mut outcome = decided;
    let mut rest = Vec::new();
    for action in actions {
        match action {
            Action::Relayed {
                reply: got,
                outcome: relayed,
            } => {
                assert_eq!(got, reply);
                assert!(outcome.is_none(), "one outcome per relay");
                outcome = Some(relayed);
            }
            other => rest.push(other),
        }
    }
    (outcome.expect("every relay gets its outcome"), rest)
}

fn relay(rig: &mut Rig, spec: &bps_proto::Spec, posted: &Posted) -> RelayOutcome {
    let (outcome, rest) = relay_named(rig, spec, posted, None);
    assert_eq!(rest, vec![], "the relay did nothing else");
    outcome
}

#[test]
fn w5_a_roster_is_relayed_on_the_one_admin_stream_it_names_or_the_claimed_one() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let early = rig.joined(key(1), &spec, sid(1), peer(1));
    let late = rig.joined(key(1), &spec, sid(2), peer(1));
    let member = SigningKey::from_bytes(&[7; 32]).expect("key").address();
    rig.joined(key(3), &spec, sid(3), peer(3));
    rig.drain();
    let posted = Posted::signed(&late, Kind::Roster, 0, &bps_proto::encode_roster(&[member]));
    // Two pending admin streams and no name: no guess, no signature check.
    assert_eq!(
        relay(&mut rig, &spec, &posted),
        RelayOutcome::Unnamed { pending: 2 }
    );
    assert_eq!(rig.verifications, 0);
    // A challenge no admin stream has.
    assert_eq!(
        relay_named(&mut rig, &spec, &posted, Some(&[9; 32])).0,
        RelayOutcome::NoAdminStream
    );
    // Named: one check, on the second admin stream, whose challenge it was signed under.
    let (outcome, actions) = relay_named(&mut rig, &spec, &posted, Some(&late.challenge));
    assert_eq!(outcome, RelayOutcome::Accepted);
    let delivered = posted.frame_for(&late.challenge);
    assert_eq!(actions, vec![deliver(delivered.bytes(), &[sid(3)])]);
    assert_eq!(rig.role_of(&spec, sid(2)), Some("publisher"));
    assert_eq!(rig.verifications, 1);
    // Unnamed now goes to the claimed stream: the same chunk is a retransmit there, known
    // without a check; nothing is consumed or closed either way.
    assert_eq!(
        relay(&mut rig, &spec, &posted),
        RelayOutcome::NotAccepted {
            counter: Counter::Retransmit
        }
    );
    assert_eq!(rig.verifications, 1);
    assert_eq!(rig.drain(), vec![]);
    assert!(rig.all_consumed());
    assert_eq!(rig.role_of(&spec, early.stream), Some("pending"));
}

#[test]
fn w5_an_admin_stream_that_ends_during_the_check_gets_nothing() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.drain();
    let posted = Posted::signed(&admin, Kind::Eos, 0, &[]);
    let reply = RelayReply {
        core: CoreId::new(1),
        relay: 3,
    };
    let decided = rig.machine.on_relay(
        rig.now,
        (&spec.key(), None),
        &mut |challenge| posted.frame_for(challenge),
        reply,
    );
    assert_eq!(decided, None, "a signature check is asked for");
    let verify = rig.drain();
    rig.closed(sid(1), crate::ClosedBy::Peer);
    let actions = rig.run_verifications(verify);
    assert_eq!(
        actions,
        vec![Action::Relayed {
            reply,
            outcome: RelayOutcome::NoAdminStream
        }]
    );
    assert_eq!(rig.machine.cohort_count(), 1, "the EOS ended nothing");
}

#[test]
fn w5_a_relay_needs_a_live_cohort_and_a_live_admin_stream() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let (admin, _) = rig.join(key(1), &spec, sid(1), peer(1));
    let posted = Posted::signed(&admin, Kind::Eos, 0, &[]);
    assert_eq!(
        relay(&mut rig, &explicit(9, &key(1), false), &posted),
        RelayOutcome::NoCohort
    );
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.closed(sid(1), crate::ClosedBy::Peer);
    assert_eq!(relay(&mut rig, &spec, &posted), RelayOutcome::NoAdminStream);
}

#[test]
fn w5_an_invalid_post_is_counted_and_closes_nothing() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(2), &spec, sid(2), peer(2));
    rig.drain();
    // Signed by someone else than the admin: it does not validate on the admin stream.
    let mut forger = rig.joined(key(4), &explicit(5, &key(4), false), sid(4), peer(4));
    forger.challenge = admin.challenge;
    forger.topic = admin.topic;
    let forged = Posted::signed(&forger, Kind::Eos, 0, &[]);
    assert!(matches!(
        relay(&mut rig, &spec, &forged),
        RelayOutcome::Invalid {
            counter: Counter::InvalidSoc,
            ..
        }
    ));
    // DATA is not a service kind, even when the admin signed it.
    let data = Posted::signed(&admin, Kind::Data, 0, b"not a service chunk");
    assert!(matches!(
        relay(&mut rig, &spec, &data),
        RelayOutcome::Invalid {
            counter: Counter::WrongStream,
            ..
        }
    ));
    // An EOS with a payload breaks R17 before any signature is checked.
    let bloated = Posted::signed(&admin, Kind::Eos, 0, b"x");
    assert!(matches!(
        relay(&mut rig, &spec, &bloated),
        RelayOutcome::Invalid {
            counter: Counter::InvalidSoc,
            ..
        }
    ));
    assert_eq!(rig.drain(), vec![]);
    assert_eq!(rig.count(Counter::Blocklisted), 0);
    assert_eq!(rig.role_of(&spec, sid(1)), Some("pending"));
    // The admin's own EOS still goes through, and ends the channel (R21).
    let eos = Posted::signed(&admin, Kind::Eos, 0, &[]);
    let (outcome, actions) = relay_named(&mut rig, &spec, &eos, None);
    assert_eq!(outcome, RelayOutcome::Accepted);
    assert_eq!(
        actions[0],
        deliver(eos.frame_for(&admin.challenge).bytes(), &[sid(2)])
    );
    assert_eq!(rig.machine.cohort_count(), 1);
}
