//! The five configurations of SWIP-60 end to end through the machine: jam, spectator-jam,
//! live-stream, group-chat and implicit (each binding), with join, claim, publish, receive,
//! roster grant and revoke, and EOS where they apply.

use bps_proto::{Binding, Hash, feed_id, keccak256, soc_address};
use bps_verify::{proximity, sign_implicit};
use bytes::Bytes;

use super::driver::{
    Rig, ack_ok, all, blocklist, close, consumed, deliver, explicit, implicit, key, peer, send,
    send_noticed, sid, violation,
};
use crate::{CloseReason, Counter, Violation, WrongStream};

#[test]
fn jam_explicit_closed_with_a_roster() {
    let mut rig = Rig::new();
    let spec = explicit(1, &key(1), true);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let first = rig.joined(key(2), &spec, sid(2), peer(2));
    let second = rig.joined(key(3), &spec, sid(3), peer(3));
    rig.joined(key(9), &spec, sid(9), peer(9));
    assert_eq!(rig.roles(&spec)["silent"], vec![sid(2), sid(3), sid(9)]);
    // The admin claims with the roster; the named silent streams get it at once.
    let r0 = admin.roster(0, &[first.addr, second.addr]);
    assert_eq!(
        rig.publish(sid(1), &r0),
        vec![consumed(sid(1)), send(sid(2), &r0), send(sid(3), &r0)]
    );
    assert_eq!(rig.publish(sid(2), &first.auth()), vec![consumed(sid(2))]);
    let d = second.data(0, b"second's riff");
    assert_eq!(
        rig.publish(sid(3), &d),
        vec![consumed(sid(3)), deliver(&d, &[sid(1), sid(2)])]
    );
    let d = admin.data(0, b"admin's riff");
    assert_eq!(
        rig.publish(sid(1), &d),
        vec![consumed(sid(1)), deliver(&d, &[sid(2), sid(3)])]
    );
    let d = first.data(0, b"first's riff");
    assert_eq!(
        rig.publish(sid(2), &d),
        vec![consumed(sid(2)), deliver(&d, &[sid(1), sid(3)])]
    );
    // Revoke the second member: it goes silent and its frames are dropped during the grace.
    let r1 = admin.roster(1, &[first.addr]);
    assert_eq!(
        rig.publish(sid(1), &r1),
        vec![
            consumed(sid(1)),
            deliver(&r1, &[sid(2)]),
            send_noticed(sid(3), &r1, 0)
        ]
    );
    assert_eq!(rig.role_of(&spec, sid(3)), Some("silent"));
    assert_eq!(
        rig.publish(sid(3), &second.data(1, b"too late")),
        vec![consumed(sid(3))]
    );
    // Grant a newcomer, who joins on a new stream and claims.
    let newcomer_key = key(4);
    let r2 = admin.roster(2, &[first.addr, newcomer_key.address()]);
    assert_eq!(
        rig.publish(sid(1), &r2),
        vec![consumed(sid(1)), deliver(&r2, &[sid(2)])]
    );
    let (newcomer, actions) = rig.join(newcomer_key, &spec, sid(4), peer(4));
    assert_eq!(
        actions,
        vec![ack_ok(sid(4), &newcomer.challenge), send(sid(4), &r2)]
    );
    let d = newcomer.data(0, b"newcomer's riff");
    assert_eq!(
        rig.publish(sid(4), &d),
        vec![consumed(sid(4)), deliver(&d, &[sid(1), sid(2)])]
    );
    // EOS ends the jam for everyone attached.
    let eos = admin.eos();
    assert_eq!(
        rig.publish(sid(1), &eos),
        vec![
            consumed(sid(1)),
            deliver(&eos, &[sid(2), sid(4)]),
            close(sid(1), CloseReason::EndOfStream),
            close(sid(2), CloseReason::EndOfStream),
            close(sid(3), CloseReason::EndOfStream),
            close(sid(4), CloseReason::EndOfStream),
            close(sid(9), CloseReason::EndOfStream),
        ]
    );
    assert!(rig.all_consumed());
    assert_eq!(rig.count(Counter::Claims), 4);
}

#[test]
fn spectator_jam_explicit_open_with_a_roster() {
    let mut rig = Rig::new();
    let spec = explicit(2, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    rig.joined(key(5), &spec, sid(5), peer(5));
    rig.joined(key(6), &spec, sid(6), peer(6));
    let r0 = admin.roster(0, &[key(2).address()]);
    assert_eq!(
        rig.publish(sid(1), &r0),
        vec![consumed(sid(1)), deliver(&r0, &[sid(5), sid(6)])]
    );
    let (member, actions) = rig.join(key(2), &spec, sid(2), peer(2));
    assert_eq!(
        actions,
        vec![ack_ok(sid(2), &member.challenge), send(sid(2), &r0)]
    );
    let d = member.data(0, b"member plays");
    assert_eq!(
        rig.publish(sid(2), &d),
        vec![consumed(sid(2)), deliver(&d, &[sid(1), sid(5), sid(6)])]
    );
    let d = admin.data(0, b"admin plays");
    assert_eq!(
        rig.publish(sid(1), &d),
        vec![consumed(sid(1)), deliver(&d, &[sid(2), sid(5), sid(6)])]
    );
    let (late, actions) = rig.join(key(7), &spec, sid(7), peer(7));
    assert_eq!(
        actions,
        vec![ack_ok(sid(7), &late.challenge), send(sid(7), &r0)]
    );
    // Revoked, the member becomes a spectator and keeps listening.
    let r1 = admin.roster(1, &[]);
    assert_eq!(
        rig.publish(sid(1), &r1),
        vec![
            consumed(sid(1)),
            deliver(&r1, &[sid(5), sid(6), sid(7)]),
            send_noticed(sid(2), &r1, 0)
        ]
    );
    assert_eq!(rig.role_of(&spec, sid(2)), Some("spectator"));
    let d = admin.data(1, b"admin alone");
    assert_eq!(
        rig.publish(sid(1), &d),
        vec![
            consumed(sid(1)),
            deliver(&d, &[sid(2), sid(5), sid(6), sid(7)])
        ]
    );
    let eos = admin.eos();
    let actions = rig.publish(sid(1), &eos);
    assert_eq!(
        actions[..2],
        [
            consumed(sid(1)),
            deliver(&eos, &[sid(2), sid(5), sid(6), sid(7)])
        ]
    );
    assert_eq!(actions.len(), 2 + 5);
    assert_eq!(rig.machine.cohort_count(), 0);
}

#[test]
fn live_stream_explicit_admin_only_with_spectators() {
    let mut rig = Rig::new();
    let spec = explicit(3, &key(1), false);
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    for n in 2..=5 {
        rig.joined(key(n as u8), &spec, sid(n), peer(n as u8));
    }
    let audience = [sid(2), sid(3), sid(4), sid(5)];
    // Our clients send AUTH at index 0 first (D3), then DATA.
    assert_eq!(rig.publish(sid(1), &admin.auth()), vec![consumed(sid(1))]);
    for index in 0..3 {
        let d = admin.data(index, format!("frame {index}").as_bytes());
        assert_eq!(
            rig.publish(sid(1), &d),
            vec![consumed(sid(1)), deliver(&d, &audience)]
        );
    }
    let heckler = rig.joined(key(6), &spec, sid(6), peer(6));
    assert_eq!(
        rig.publish(sid(6), &heckler.data(0, b"me too")),
        vec![
            consumed(sid(6)),
            violation(sid(6), Violation::WrongStream(WrongStream::Spectator)),
            blocklist(peer(6), 600_000)
        ]
    );
    assert_eq!(rig.cohort_count(&spec, Counter::Deliveries), 12);
    let eos = admin.eos();
    let actions = rig.publish(sid(1), &eos);
    assert_eq!(actions[1], deliver(&eos, &audience));
}

#[test]
fn group_chat_all_mnemonic() {
    let mut rig = Rig::new();
    let spec = all(4, &key(1));
    let admin = rig.joined(key(1), &spec, sid(1), peer(1));
    let members: Vec<_> = (2..=4)
        .map(|n| rig.joined(key(n as u8), &spec, sid(n), peer(n as u8)))
        .collect();
    for (position, member) in members.iter().enumerate() {
        let d = member.data(0, format!("hello from {position}").as_bytes());
        let others: Vec<_> = (1..=4)
            .map(sid)
            .filter(|stream| *stream != member.stream)
            .collect();
        assert_eq!(
            rig.publish(member.stream, &d),
            vec![consumed(member.stream), deliver(&d, &others)]
        );
    }
    // The admin's roster grants nothing under ALL but is delivered like any service chunk.
    let roster = admin.roster(0, &[members[0].addr]);
    assert_eq!(
        rig.publish(sid(1), &roster),
        vec![
            consumed(sid(1)),
            deliver(&roster, &[sid(2), sid(3), sid(4)])
        ]
    );
    let (late, actions) = rig.join(key(5), &spec, sid(5), peer(5));
    assert_eq!(
        actions,
        vec![ack_ok(sid(5), &late.challenge), send(sid(5), &roster)]
    );
    let eos = admin.eos();
    let actions = rig.publish(sid(1), &eos);
    assert_eq!(actions[1], deliver(&eos, &[sid(2), sid(3), sid(4), sid(5)]));
    assert_eq!(actions.len(), 2 + 5);
}

/// Three implicit publishers; stream n publishes `frames[n - 1]`, the others receive it,
/// and a duplicate of the first, carried by `duplicate_on`, is caught by the dedup window.
fn implicit_round(spec: &bps_proto::Spec, frames: &[Bytes], duplicate_on: u64) {
    let mut rig = Rig::new();
    for n in 1..=3 {
        rig.joined(key(n + 10), spec, sid(u64::from(n)), peer(n));
    }
    for (position, frame) in frames.iter().enumerate() {
        let stream = sid(position as u64 + 1);
        let others: Vec<_> = (1..=3).map(sid).filter(|other| *other != stream).collect();
        assert_eq!(
            rig.publish(stream, frame),
            vec![consumed(stream), deliver(frame, &others)],
            "{}",
            spec.binding
        );
    }
    let carrier = sid(duplicate_on);
    assert_eq!(
        rig.publish(carrier, &frames[0]),
        vec![consumed(carrier)],
        "{}",
        spec.binding
    );
    assert_eq!(rig.cohort_count(spec, Counter::Retransmit), 1);
    assert_eq!(
        rig.cohort_count(spec, Counter::AcceptedData),
        frames.len() as u64
    );
    assert!(rig.all_consumed());
}

#[test]
fn implicit_with_each_binding() {
    // MNEMONIC: any chunk, any owner.
    let frames: Vec<Bytes> = (1..=3)
        .map(|n| sign_implicit(&key(n + 10), &[n; 32], None, b"m").frame)
        .collect();
    implicit_round(&implicit([1; 32], Binding::Mnemonic), &frames, 2);
    // ANCHOR (GSOC): one shared key, many payloads at one address.
    let gsoc = key(30);
    let id: Hash = [7; 32];
    let frames: Vec<Bytes> = (1..=3)
        .map(|n| sign_implicit(&gsoc, &id, None, &[n; 8]).frame)
        .collect();
    implicit_round(
        &implicit(soc_address(id, gsoc.address()), Binding::Anchor),
        &frames,
        3,
    );
    // FEED_TOPIC: graffiti feed, the frame's index carries the feed index.
    let topic: Hash = [6; 32];
    let frames: Vec<Bytes> = (1..=3u8)
        .map(|n| {
            let index = u64::from(n) * 10;
            sign_implicit(&key(n + 10), &feed_id(topic, index), Some(index), b"f").frame
        })
        .collect();
    implicit_round(&implicit(topic, Binding::FeedTopic), &frames, 2);
    // OWNER (MIC): the owner is fixed by the topic and publishes from its own stream (key 11),
    // the only stream that may carry its chunks (R11).
    let owner = key(11);
    let topic = keccak256(&owner.address());
    let id = (0u64..)
        .map(|nonce| keccak256(&nonce.to_be_bytes()))
        .find(|id| proximity(&soc_address(id, owner.address()), &topic) >= bps_verify::PO_MIN)
        .expect("a mined id");
    implicit_round(
        &implicit(topic, Binding::Owner),
        &[sign_implicit(&owner, &id, None, b"mic").frame],
        1,
    );
    // SOC_ID (MOC): the topic is the id, mined so that key 11's chunk lands within PO 16 of it.
    let miner = key(11);
    let topic = (0u64..)
        .map(|nonce| keccak256(&nonce.to_le_bytes()))
        .find(|topic| proximity(&soc_address(topic, miner.address()), topic) >= bps_verify::PO_MIN)
        .expect("a mined topic");
    implicit_round(
        &implicit(topic, Binding::SocId),
        &[sign_implicit(&miner, &topic, None, b"moc").frame],
        3,
    );
}
