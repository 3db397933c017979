//! Black-box: the five configurations of SWIP-60 end to end through the real binary
//! (live-stream, jam, spectator-jam, group-chat, implicit with every binding), and never-echo
//! (R25) across two streams of one identity.

mod support;

use bps_client::publisher::PublisherConfig;
use bps_client::subscriber::Subscriber;
use bps_proto::{Binding, Hash, keccak256, soc_address};
use bps_verify::{PO_MIN, proximity};
use support::{
    Broker, bodies, expect_data, expect_frames, expect_nothing, expect_roster, explicit, flush,
    group, implicit, key, publish, publisher, publisher_with, recv, send_forged_claim,
};

/// Enough streams per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

#[test]
fn live_stream_admin_publishes_and_every_spectator_gets_each_frame_byte_for_byte() {
    live_stream_round(&[MANY_STREAMS_PER_PEER]);
}

#[test]
fn live_stream_with_inline_verification_on_one_core() {
    live_stream_round(&[
        MANY_STREAMS_PER_PEER,
        "verify.mode=inline",
        "server.cores=1",
    ]);
}

#[test]
fn inline_verification_rejects_a_forged_chunk() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, "verify.mode=inline"]);
    let mut spectator = send_forged_claim(&broker);
    expect_nothing(&mut spectator);
}

fn live_stream_round(settings: &[&str]) {
    let broker = Broker::start(settings);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectators: Vec<_> = (0..3u8)
        .map(|n| {
            (
                broker.join(&spec, &key(10 + n).address()),
                Subscriber::new(spec),
            )
        })
        .collect();
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let payloads: [&[u8]; 4] = [b"first", b"", &[7u8; 4096], b"last"];
    let sent = publish(&mut admin_publisher, &mut admin_session, &payloads);
    assert_eq!(sent.len(), 4);
    let expected = bodies(&sent);

    for (session, subscriber) in &mut spectators {
        for (index, (body, payload)) in expected.iter().zip(payloads).enumerate() {
            let got = recv(session);
            assert_eq!(&got, body, "spectator frame {index}");
            expect_data(subscriber, got, &admin.address(), index as u64, payload);
        }
    }
    // The claim (AUTH) is never delivered, nothing comes twice, the publisher gets nothing.
    for (session, _) in &mut spectators {
        expect_nothing(session);
    }
    expect_nothing(&mut admin_session);
    // The operator's view: one cohort, 3 spectators and the admin's publisher stream.
    let (status, body) = broker.get("/cohortz");
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(page["cohorts_total"], 1, "{body}");
    let cohort = &page["cohorts"][0];
    assert_eq!(cohort["key"], spec.key().to_hex(), "{body}");
    assert_eq!(cohort["streams"]["spectator"], 3, "{body}");
    assert_eq!(cohort["streams"]["publisher"], 1, "{body}");
    assert_eq!(cohort["subscribers"], 4, "{body}");
    broker.assert_metrics(&[
        ("bps_joins_ok_total", 4),
        ("bps_claims_total", 1),
        ("bps_accepted_auth_total", 1),
        ("bps_accepted_data_total", 4),
        ("bps_deliveries_total", 12),
        ("bps_wrong_stream_total", 0),
        ("bps_invalid_soc_total", 0),
    ]);
}

#[test]
fn jam_closed_cohort_rostered_publishers_exchange_and_a_stranger_stays_silent() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let (p1, p2, stranger) = (key(2), key(3), key(9));
    let spec = explicit(2, &admin.address(), true);

    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher
        .enqueue_roster(&[p1.address(), p2.address()])
        .expect("roster");
    let written = flush(&mut admin_publisher, &mut admin_session);
    broker.wait_metric("bps_accepted_roster_total", 1);
    // The admin's own stream never gets its roster (D5): its subscriber takes it from what
    // it wrote, to admit the members' frames below.
    let mut admin_subscriber = Subscriber::new(spec);
    let roster_written = written.last().expect("the roster was written");
    expect_roster(
        &mut admin_subscriber,
        support::body_of(&roster_written.signed.frame),
    );

    // A non-rostered joiner of a closed cohort is silent (R9).
    let mut stranger_session = broker.join(&spec, &stranger.address());

    // Each rostered member is pending and gets the roster naming it at once (R22), claims.
    let mut members = Vec::new();
    for member in [&p1, &p2] {
        let mut session = broker.join(&spec, &member.address());
        let mut subscriber = Subscriber::new(spec);
        let roster = expect_roster(&mut subscriber, recv(&mut session));
        assert_eq!(roster, vec![p1.address(), p2.address()]);
        let mut member_publisher = publisher(&spec, member, &session);
        member_publisher.on_roster(&roster);
        let claim = flush(&mut member_publisher, &mut session);
        assert_eq!(claim.len(), 1, "the claim is one AUTH");
        members.push((session, subscriber, member_publisher, member.address()));
    }
    // The admin claimed with AUTH, then each member.
    broker.wait_metric("bps_claims_total", 3);

    // Each member publishes; the admin and the other member receive, the publisher does not.
    for from in 0..2 {
        let (session, _, member_publisher, member_addr) = &mut members[from];
        let member_addr = *member_addr;
        let payload = format!("riff of member {from}");
        let sent = publish(member_publisher, session, &[payload.as_bytes()]);
        let body = bodies(&sent).remove(0);
        let got = recv(&mut admin_session);
        assert_eq!(got, body);
        expect_data(
            &mut admin_subscriber,
            got,
            &member_addr,
            0,
            payload.as_bytes(),
        );
        let other = &mut members[1 - from];
        let got = recv(&mut other.0);
        assert_eq!(got, body);
        expect_data(&mut other.1, got, &member_addr, 0, payload.as_bytes());
    }
    // The admin publishes: both members receive.
    let sent = publish(&mut admin_publisher, &mut admin_session, &[b"admin's riff"]);
    let body = bodies(&sent).remove(0);
    for (session, subscriber, _, _) in &mut members {
        let got = recv(session);
        assert_eq!(got, body);
        expect_data(subscriber, got, &admin.address(), 0, b"admin's riff");
    }
    for (session, _, _, _) in &mut members {
        expect_nothing(session);
    }
    expect_nothing(&mut admin_session);
    // Not the roster (it does not name the stranger), not a single publication.
    expect_nothing(&mut stranger_session);
    broker.assert_metrics(&[
        ("bps_accepted_data_total", 3),
        ("bps_accepted_roster_total", 1),
        ("bps_claims_total", 3),
        // Two pre-claim rosters, then 2 receivers for each of the 3 publications.
        ("bps_deliveries_total", 8),
        ("bps_wrong_stream_total", 0),
    ]);
}

#[test]
fn spectator_jam_open_cohort_spectators_get_everything_publishers_never_their_own() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let (p1, p2) = (key(2), key(3));
    let spec = explicit(3, &admin.address(), false);
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher
        .enqueue_roster(&[p1.address(), p2.address()])
        .expect("roster");
    let roster_frame = flush(&mut admin_publisher, &mut admin_session)
        .pop()
        .expect("the roster was written");
    broker.wait_metric("bps_accepted_roster_total", 1);
    let roster_body = support::body_of(&roster_frame.signed.frame);

    // Spectators joining after the roster get it first (R22).
    let mut spectators: Vec<_> = (0..2u8)
        .map(|n| {
            let mut session = broker.join(&spec, &key(20 + n).address());
            let mut subscriber = Subscriber::new(spec);
            let got = recv(&mut session);
            assert_eq!(got, roster_body, "the roster comes first, byte for byte");
            assert_eq!(
                expect_roster(&mut subscriber, got),
                vec![p1.address(), p2.address()]
            );
            (session, subscriber)
        })
        .collect();

    let mut members = Vec::new();
    for member in [&p1, &p2] {
        let mut session = broker.join(&spec, &member.address());
        let mut subscriber = Subscriber::new(spec);
        let roster = expect_roster(&mut subscriber, recv(&mut session));
        let mut member_publisher = publisher(&spec, member, &session);
        member_publisher.on_roster(&roster);
        flush(&mut member_publisher, &mut session);
        members.push((session, subscriber, member_publisher, member.address()));
    }
    broker.wait_metric("bps_claims_total", 3);

    for from in 0..2 {
        let payloads: [&[u8]; 2] = [b"one", b"two"];
        let (session, _, member_publisher, member_addr) = &mut members[from];
        let member_addr = *member_addr;
        let expected = bodies(&publish(member_publisher, session, &payloads));
        for (session, subscriber) in &mut spectators {
            for (index, (body, payload)) in expected.iter().zip(payloads).enumerate() {
                let got = recv(session);
                assert_eq!(&got, body);
                expect_data(subscriber, got, &member_addr, index as u64, payload);
            }
        }
        let other = &mut members[1 - from];
        expect_frames(&mut other.0, &expected);
        // The admin's publisher stream is in the fan-out too.
        expect_frames(&mut admin_session, &expected);
    }
    for (session, _, _, _) in &mut members {
        expect_nothing(session);
    }
    for (session, _) in &mut spectators {
        expect_nothing(session);
    }
    expect_nothing(&mut admin_session);
    broker.assert_metrics(&[
        ("bps_accepted_data_total", 4),
        ("bps_claims_total", 3),
        // 2 first rosters to spectators + 2 pre-claim rosters + 4 frames x 4 receivers.
        ("bps_deliveries_total", 20),
    ]);
}

#[test]
fn group_chat_every_member_publishes_and_every_other_member_receives() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = group(4, &admin.address());
    let keys = [key(2), key(3), key(4)];
    let mut members: Vec<_> = keys
        .iter()
        .map(|member| {
            let session = broker.join(&spec, &member.address());
            let member_publisher = publisher(&spec, member, &session);
            (session, member_publisher, Subscriber::new(spec))
        })
        .collect();

    for from in 0..members.len() {
        let payload = format!("hello from member {from}");
        let (session, member_publisher, _) = &mut members[from];
        // Under ALL there is no claim: the first frame is the DATA (R10).
        let written = flush(member_publisher, session);
        assert!(written.is_empty(), "nothing to claim under ALL");
        let sent = publish(member_publisher, session, &[payload.as_bytes()]);
        let body = bodies(&sent).remove(0);
        for (to, (session, _, subscriber)) in members.iter_mut().enumerate() {
            if to == from {
                continue;
            }
            let got = recv(session);
            assert_eq!(got, body);
            expect_data(
                subscriber,
                got,
                &keys[from].address(),
                0,
                payload.as_bytes(),
            );
        }
    }
    for (session, _, _) in &mut members {
        expect_nothing(session);
    }
    broker.assert_metrics(&[
        ("bps_accepted_data_total", 3),
        ("bps_claims_total", 0),
        ("bps_deliveries_total", 6),
    ]);
}

/// One implicit cohort: `owner` publishes `payloads` and then the first frame again (a
/// duplicate), `other` (a second identity) receives each publication once and nothing else,
/// `owner` receives nothing. When `both` is set the other identity publishes too (bindings
/// that admit any owner).
fn implicit_round(
    broker: &Broker,
    spec: &bps_proto::Spec,
    owner: &bps_verify::SigningKey,
    config: PublisherConfig,
    other: &bps_verify::SigningKey,
    payloads: &[&[u8]],
    both: bool,
) {
    let mut owner_session = broker.join(spec, &owner.address());
    let mut other_session = broker.join(spec, &other.address());
    let mut owner_publisher = publisher_with(spec, owner, config, &owner_session);
    let mut subscriber = Subscriber::new(*spec);
    let sent = publish(&mut owner_publisher, &mut owner_session, payloads);
    let expected = bodies(&sent);
    for (body, (payload, outgoing)) in expected.iter().zip(payloads.iter().zip(&sent)) {
        let got = recv(&mut other_session);
        assert_eq!(&got, body, "{} frame", spec.binding);
        expect_data(
            &mut subscriber,
            got,
            &owner.address(),
            outgoing.index.unwrap_or(0),
            payload,
        );
    }
    // The same chunk again is a duplicate (R28): dropped, counted, not delivered.
    owner_session
        .send(&sent[0].signed.frame)
        .expect("resend the first frame");
    if both {
        let mut other_publisher = publisher_with(
            spec,
            other,
            PublisherConfig {
                data_index_start: 100,
                ..PublisherConfig::default()
            },
            &other_session,
        );
        let sent = publish(&mut other_publisher, &mut other_session, &[b"reply"]);
        expect_frames(&mut owner_session, &bodies(&sent));
    }
    expect_nothing(&mut owner_session);
    expect_nothing(&mut other_session);
}

/// A short payload and a full chunk.
const TWO: [&[u8]; 2] = [b"implicit one", &[9u8; 4096]];

#[test]
fn implicit_every_binding_publishes_from_the_join_without_claim_or_challenge() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let (owner, other) = (key(5), key(6));

    // MNEMONIC and FEED_TOPIC: any owner publishes.
    implicit_round(
        &broker,
        &implicit(support::topic(10), Binding::Mnemonic),
        &owner,
        PublisherConfig::default(),
        &other,
        &TWO,
        true,
    );
    broker.wait_metric("bps_retransmit_total", 1);
    implicit_round(
        &broker,
        &implicit(support::topic(11), Binding::FeedTopic),
        &owner,
        PublisherConfig::default(),
        &other,
        &TWO,
        true,
    );
    broker.wait_metric("bps_retransmit_total", 2);

    // ANCHOR (GSOC): keccak256(id ‖ owner) is the topic.
    let anchor_id: Hash = keccak256(b"gsoc id");
    implicit_round(
        &broker,
        &implicit(soc_address(anchor_id, owner.address()), Binding::Anchor),
        &owner,
        PublisherConfig {
            anchor_id: Some(anchor_id),
            ..PublisherConfig::default()
        },
        &other,
        &TWO,
        false,
    );
    broker.wait_metric("bps_retransmit_total", 3);

    // OWNER (MIC): the topic is keccak256(owner); the publisher mines ids within PO 16.
    implicit_round(
        &broker,
        &implicit(keccak256(&owner.address()), Binding::Owner),
        &owner,
        PublisherConfig::default(),
        &other,
        &TWO,
        false,
    );
    broker.wait_metric("bps_retransmit_total", 4);

    // SOC_ID (MOC): the id is the topic; mine a topic whose SOC address for this owner is
    // within PO 16 of it. Every chunk of one owner sits at that one address, which is the
    // dedup key (R28), so one publication per owner gets through.
    let soc_topic = (0u64..)
        .map(|n| keccak256(&n.to_be_bytes()))
        .find(|topic| proximity(&soc_address(*topic, owner.address()), topic) >= PO_MIN)
        .expect("a topic within PO 16");
    implicit_round(
        &broker,
        &implicit(soc_topic, Binding::SocId),
        &owner,
        PublisherConfig::default(),
        &other,
        &TWO[..1],
        false,
    );
    broker.wait_metric("bps_retransmit_total", 5);
    broker.assert_metrics(&[
        // 2 per binding but SOC_ID's 1, plus the other identity's reply under MNEMONIC and
        // FEED_TOPIC.
        ("bps_accepted_data_total", 11),
        ("bps_claims_total", 0),
        ("bps_invalid_soc_total", 0),
        ("bps_wrong_stream_total", 0),
        ("bps_cohorts_created_total", 5),
    ]);
}

#[test]
fn never_echo_to_any_stream_of_the_publishing_identity() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);

    // Group chat: one member on two streams, another member on one.
    let spec = group(5, &admin.address());
    let (twice, once) = (key(2), key(3));
    let mut first = broker.join(&spec, &twice.address());
    let mut second = broker.join(&spec, &twice.address());
    let mut other = broker.join(&spec, &once.address());
    let mut first_publisher = publisher(&spec, &twice, &first);
    let sent = bodies(&publish(&mut first_publisher, &mut first, &[b"a", b"b"]));
    expect_frames(&mut other, &sent);
    // Its second stream shares the cursor (R27): an index it used is a retransmit there.
    let mut second_publisher = publisher_with(
        &spec,
        &twice,
        PublisherConfig {
            data_index_start: 2,
            ..PublisherConfig::default()
        },
        &second,
    );
    let sent = bodies(&publish(&mut second_publisher, &mut second, &[b"c"]));
    expect_frames(&mut other, &sent);
    let mut other_publisher = publisher(&spec, &once, &other);
    let sent = bodies(&publish(&mut other_publisher, &mut other, &[b"reply"]));
    // The other member's frame reaches both streams of the first identity.
    expect_frames(&mut first, &sent);
    expect_frames(&mut second, &sent);
    expect_nothing(&mut first);
    expect_nothing(&mut second);
    expect_nothing(&mut other);

    // Live-stream: the admin on two claimed streams, a spectator.
    let spec = explicit(6, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(7).address());
    let mut admin_a = broker.join(&spec, &admin.address());
    let mut admin_b = broker.join(&spec, &admin.address());
    let mut publisher_a = publisher(&spec, &admin, &admin_a);
    let sent_a = bodies(&publish(&mut publisher_a, &mut admin_a, &[b"from a"]));
    expect_frames(&mut spectator, &sent_a);
    let mut publisher_b = publisher_with(
        &spec,
        &admin,
        PublisherConfig {
            data_index_start: 1,
            ..PublisherConfig::default()
        },
        &admin_b,
    );
    let sent_b = bodies(&publish(&mut publisher_b, &mut admin_b, &[b"from b"]));
    expect_frames(&mut spectator, &sent_b);
    expect_nothing(&mut admin_a);
    expect_nothing(&mut admin_b);
    expect_nothing(&mut spectator);
    broker.assert_metrics(&[
        ("bps_accepted_data_total", 6),
        // 2 + 1 + 2 in the group, 1 + 1 in the live-stream.
        ("bps_deliveries_total", 7),
        ("bps_superseded_total", 0),
    ]);
}
