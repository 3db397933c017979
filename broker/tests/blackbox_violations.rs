//! Black-box: violations and what they cost (R13, R15, R17, R39), drops that cost nothing
//! (R14, R15, R16), and framing faults (an oversize length prefix, garbage after the Join)
//! that cost exactly one stream.

mod support;

use std::net::Ipv4Addr;

use bps_client::session::JoinOutcome;
use bps_proto::{Broadcast, Kind, Spec, Status, encode_frame};
use bps_verify::{SigningKey, sign_broadcast};
use bytes::Bytes;
use support::{
    Broker, End, WAIT, bodies, expect_closed, expect_frames, expect_nothing, explicit, flush, key,
    publish, publisher, publisher_with, session_config,
};

/// A DATA frame for `spec` signed by `signer` under `challenge`.
fn data(
    signer: &SigningKey,
    spec: &Spec,
    challenge: &[u8; 32],
    index: u64,
    payload: &[u8],
) -> Bytes {
    sign_broadcast(signer, Kind::Data, &spec.topic, challenge, index, payload).frame
}

/// `frame`'s Broadcast with its chunk changed by `change`, re-encoded.
fn tampered(
    signer: &SigningKey,
    spec: &Spec,
    challenge: &[u8; 32],
    change: impl FnOnce(&mut Vec<u8>),
) -> Bytes {
    let signed = sign_broadcast(
        signer,
        Kind::Data,
        &spec.topic,
        challenge,
        0,
        b"genuine payload",
    );
    let mut soc = signed.chunk.to_vec();
    change(&mut soc);
    encode_frame(&Broadcast {
        soc: Bytes::from(soc),
        ..signed.broadcast
    })
}

#[test]
fn a_spectator_frame_is_wrong_stream_resets_it_and_blocklists_the_peer() {
    let broker = Broker::start(&[
        "timeouts.blocklist_violation_ms=60000",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    flush(&mut admin_publisher, &mut admin_session);
    broker.wait_metric("bps_claims_total", 1);
    let mut bystander = broker.join(&spec, &key(11).address());
    let violator_key = key(10);
    let mut violator = broker.join(&spec, &violator_key.address());

    // A perfectly signed chunk under its own challenge: a spectator may send nothing (R8, R13).
    let frame = data(
        &violator_key,
        &spec,
        violator.challenge(),
        0,
        b"let me talk",
    );
    violator.send(&frame).expect("send");
    expect_closed(&mut violator);
    broker.wait_metric("bps_wrong_stream_total", 1);
    broker.assert_metrics(&[
        ("bps_blocklisted_total", 1),
        ("bps_accepted_data_total", 0),
        ("bps_verify_requests_total", 1),
    ]);
    expect_nothing(&mut bystander);

    // The peer is blocklisted (R39): a new connection from it is closed without an Ack.
    match bps_client::session::Session::join(
        &broker.target(),
        &spec,
        &key(12).address(),
        session_config(),
    ) {
        Err(_) => {}
        Ok(JoinOutcome::Joined(_)) => panic!("a blocklisted peer joined"),
        Ok(JoinOutcome::Refused(status)) => panic!("a blocklisted peer got an Ack: {status:?}"),
    }
    broker.wait_metric("bps_connections_refused_blocklist_total", 1);
    // Another peer address is not affected.
    let mut other_peer = broker.raw_from(Ipv4Addr::new(127, 0, 0, 2));
    let ack = other_peer.join(&spec.to_join(&key(13).address()));
    assert_eq!(ack.status, Status::Ok as i32);
    // The blocklist refuses new connections; the peer's streams already open keep working.
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"on air"],
    ));
    expect_frames(&mut bystander, &sent);
    assert_eq!(other_peer.recv(WAIT).expect("open"), Some(sent[0].clone()));
    broker.assert_metrics(&[
        ("bps_wrong_stream_total", 1),
        ("bps_blocklisted_total", 1),
        ("bps_connections_refused_blocklist_total", 1),
        ("bps_accepted_data_total", 1),
    ]);
}

#[test]
fn invalid_or_forged_chunks_are_invalid_soc_and_reset_the_stream() {
    let broker = Broker::start(&[
        "timeouts.blocklist_violation_ms=0",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let forger = key(66);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(10).address());

    type Forge = fn(&SigningKey, &SigningKey, &Spec, &[u8; 32]) -> Bytes;
    let cases: [(&str, Forge); 5] = [
        ("signed by another key", |_, forger, spec, challenge| {
            data(forger, spec, challenge, 0, b"forged")
        }),
        (
            "payload changed after signing",
            |admin, _, spec, challenge| {
                tampered(admin, spec, challenge, |soc| {
                    let last = soc.len() - 1;
                    soc[last] ^= 1;
                })
            },
        ),
        ("signature changed", |admin, _, spec, challenge| {
            tampered(admin, spec, challenge, |soc| soc[40] ^= 0x55)
        }),
        ("id of another index", |admin, _, spec, challenge| {
            let mut broadcast =
                sign_broadcast(admin, Kind::Data, &spec.topic, challenge, 1, b"x").broadcast;
            broadcast.index = 0;
            encode_frame(&broadcast)
        }),
        ("AUTH with a payload", |admin, _, spec, challenge| {
            sign_broadcast(admin, Kind::Auth, &spec.topic, challenge, 0, b"not empty").frame
        }),
    ];
    for (n, (what, forge)) in cases.iter().enumerate() {
        // The forged frame is the first frame of a pending admin stream (it would be the claim).
        let mut session = broker.join(&spec, &admin.address());
        let frame = forge(&admin, &forger, &spec, session.challenge());
        session.send(&frame).expect("send");
        expect_closed(&mut session);
        broker.wait_metric("bps_invalid_soc_total", n as u64 + 1);
        eprintln!("{what}: reset and counted");
    }
    // On a stream that has claimed, a forged frame costs it too.
    let mut claimed = broker.join(&spec, &admin.address());
    let mut claimed_publisher = publisher(&spec, &admin, &claimed);
    flush(&mut claimed_publisher, &mut claimed);
    broker.wait_metric("bps_claims_total", 1);
    let frame = data(
        &forger,
        &spec,
        claimed.challenge(),
        5,
        b"forged after the claim",
    );
    claimed.send(&frame).expect("send");
    expect_closed(&mut claimed);
    broker.wait_metric("bps_invalid_soc_total", 6);

    // Nothing forged reached the spectator; a genuine publisher still gets through.
    let mut genuine = broker.join(&spec, &admin.address());
    let mut genuine_publisher = publisher_with(
        &spec,
        &admin,
        bps_client::publisher::PublisherConfig {
            data_index_start: 10,
            ..Default::default()
        },
        &genuine,
    );
    let sent = bodies(&publish(
        &mut genuine_publisher,
        &mut genuine,
        &[b"genuine"],
    ));
    expect_frames(&mut spectator, &sent);
    expect_nothing(&mut spectator);
    broker.assert_metrics(&[
        ("bps_invalid_soc_total", 6),
        ("bps_wrong_stream_total", 0),
        ("bps_accepted_data_total", 1),
        ("bps_claims_total", 2),
        ("bps_blocklisted_total", 0),
    ]);
}

#[test]
fn wrong_challenge_unknown_kind_and_retransmit_are_dropped_and_the_stream_stays_open() {
    let broker = Broker::start(&["limits.streams_per_peer_per_cohort_max=16"]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(10).address());
    let mut session = broker.join(&spec, &admin.address());
    let foreign_challenge = [7u8; 32];

    // A pending stream's claim under another challenge: dropped, still pending (R15).
    let wrong_claim = sign_broadcast(&admin, Kind::Auth, &spec.topic, &foreign_challenge, 0, b"");
    session.send(&wrong_claim.frame).expect("send");
    broker.wait_metric("bps_wrong_challenge_total", 1);
    expect_nothing(&mut session);
    let mut admin_publisher = publisher(&spec, &admin, &session);
    flush(&mut admin_publisher, &mut session);
    broker.wait_metric("bps_claims_total", 1);

    // A publisher's DATA under another challenge: dropped, not delivered, stream open.
    session
        .send(&data(&admin, &spec, &foreign_challenge, 0, b"elsewhere"))
        .expect("send");
    broker.wait_metric("bps_wrong_challenge_total", 2);
    // An unknown kind: dropped and counted, never fatal (R14, D12).
    let mut unknown = sign_broadcast(
        &admin,
        Kind::Data,
        &spec.topic,
        session.challenge(),
        0,
        b"?",
    )
    .broadcast;
    unknown.kind = 9;
    session.send(&encode_frame(&unknown)).expect("send");
    broker.wait_metric("bps_unknown_kind_total", 1);

    let sent = publish(&mut admin_publisher, &mut session, &[b"real"]);
    expect_frames(&mut spectator, &bodies(&sent));
    // The same frame again is below the cursor: a retransmit, dropped (R16).
    session.send(&sent[0].signed.frame).expect("send");
    broker.wait_metric("bps_retransmit_total", 1);
    expect_nothing(&mut spectator);
    expect_nothing(&mut session);
    // R40: the counters exist per cohort too.
    let label = bps_broker::protocol::CohortLabel::of(&spec.key(), &spec);
    let label = format!(
        "cohort=\"{}\",binding=\"{}\",admin=\"{}\"",
        label.id, label.binding, label.admin
    );
    broker.assert_metrics(&[
        (&format!("bps_cohort_wrong_challenge_total{{{label}}}"), 2),
        (&format!("bps_cohort_unknown_kind_total{{{label}}}"), 1),
        (&format!("bps_cohort_retransmit_total{{{label}}}"), 1),
        ("bps_wrong_challenge_total", 2),
        ("bps_unknown_kind_total", 1),
        ("bps_retransmit_total", 1),
        ("bps_accepted_data_total", 1),
        ("bps_deliveries_total", 1),
        ("bps_blocklisted_total", 0),
        ("bps_invalid_soc_total", 0),
        ("bps_wrong_stream_total", 0),
    ]);
}

#[test]
fn garbage_after_the_join_costs_that_stream_and_nothing_else() {
    let broker = Broker::start(&[
        "timeouts.blocklist_violation_ms=0",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(10).address());
    let mut first = broker.join(&spec, &admin.address());
    let mut first_publisher = publisher(&spec, &admin, &first);
    flush(&mut first_publisher, &mut first);
    let mut second = broker.join(&spec, &admin.address());
    let mut second_publisher = publisher_with(
        &spec,
        &admin,
        bps_client::publisher::PublisherConfig {
            data_index_start: 100,
            ..Default::default()
        },
        &second,
    );
    flush(&mut second_publisher, &mut second);
    broker.wait_metric("bps_claims_total", 2);

    // A well-delimited frame whose body is not a Broadcast.
    first
        .send(&[8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
        .expect("send");
    expect_closed(&mut first);
    broker.wait_metric("bps_malformed_total", 1);

    let sent = bodies(&publish(&mut second_publisher, &mut second, &[b"unharmed"]));
    expect_frames(&mut spectator, &sent);
    expect_nothing(&mut spectator);
    broker.assert_metrics(&[
        ("bps_malformed_total", 1),
        ("bps_accepted_data_total", 1),
        ("bps_frame_errors_total", 0),
    ]);
}

#[test]
fn an_oversize_length_prefix_costs_that_stream_and_nothing_else() {
    // Violations blocklist here; a framing fault must not.
    let broker = Broker::start(&[
        "timeouts.blocklist_violation_ms=60000",
        "limits.frame_bytes_max=8192",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    flush(&mut admin_publisher, &mut admin_session);
    let mut victim = broker.join(&spec, &key(10).address());
    let mut survivor = broker.join(&spec, &key(11).address());

    // One byte over the cap: refused on the length alone, before the body exists.
    let mut prefix = Vec::new();
    prost::encoding::encode_varint(8193, &mut prefix);
    victim.send(&prefix).expect("send the prefix");
    assert_eq!(
        expect_closed(&mut victim),
        End::Reset,
        "a peer fault ends the stream with a TCP reset, not a clean close"
    );
    broker.wait_metric("bps_frame_errors_total", 1);

    // A huge length as the very first frame (instead of a Join).
    let mut raw = broker.raw();
    let mut huge = Vec::new();
    prost::encoding::encode_varint(1 << 40, &mut huge);
    raw.send(&huge).expect("send");
    let (_, frames) = raw.expect_end();
    assert!(frames.is_empty(), "no Ack for a frame that was never read");
    broker.wait_metric("bps_frame_errors_total", 2);

    // A length varint that never ends.
    let mut raw = broker.raw();
    raw.send(&[0xff; 11]).expect("send");
    let (_, frames) = raw.expect_end();
    assert!(frames.is_empty());
    broker.wait_metric("bps_frame_errors_total", 3);

    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"still on"],
    ));
    expect_frames(&mut survivor, &sent);
    expect_nothing(&mut survivor);
    // No penalty for the peer: it joins again at once.
    let mut again = broker.join(&spec, &key(12).address());
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"welcome"],
    ));
    expect_frames(&mut again, &sent);
    expect_frames(&mut survivor, &sent);
    broker.assert_metrics(&[
        ("bps_frame_errors_total", 3),
        ("bps_blocklisted_total", 0),
        ("bps_wrong_stream_total", 0),
        ("bps_malformed_total", 0),
        ("bps_accepted_data_total", 2),
    ]);
}
