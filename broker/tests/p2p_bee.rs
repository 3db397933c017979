//! Black-box: the libp2p carrier (issue 20) against the real binary, with a bee node played
//! in-process by bps-p2p (its libp2p host) and bps-bee (its handshake and headers): the bee
//! node dials the broker (full mode) or the broker dials it (light mode), bee's handshake
//! runs, a `/swarm/pubsub/1.0.0/pubsub` stream does bee's headers exchange and then BPS as
//! TCP carries it, and a TCP subscriber of the same cohort receives the bee node's
//! publication byte for byte. Also: a pubsub stream before the handshake is reset, one
//! opened while the handshake runs waits for it, a subscriber that reads nothing is reset, and
//! a bee node is a peer by its overlay (R32 counts it apart from others at its IP; /cohortz
//! names it so).
//! The refusals of bad input, each costing its culprit alone, are in `p2p_bee_faults`.

mod p2p;
mod support;

use std::sync::Arc;

use bps_bee::pb::{AnnouncePaymentThreshold, Peers};
use bps_bee::{
    HANDSHAKE_PROTOCOL, HIVE_PROTOCOL, Handshake, PRICING_PROTOCOL, Step, empty_headers,
    read_headers, write_message,
};
use bps_p2p::Protocol;
use bps_proto::{Status, decode_ack, encode_frame};
use bytes::{Bytes, BytesMut};
use p2p::bee::{Bee, publish_and_check, publish_over_p2p, read_until};
use p2p::{NETWORK, PUBSUB, start_broker, unix_now};
use support::{body_of, explicit, key, recv};

#[test]
fn full_mode_a_bee_node_dials_handshakes_and_publishes_to_a_tcp_subscriber() {
    let broker = start_broker("full", "full", &[], "");
    let mut bee = Bee::start(
        "full-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let peer = bee.dial_handshake(&broker);
    assert!(
        peer.full_node,
        "the broker says it is a full node in full mode"
    );
    assert_eq!(&peer.welcome_message[..], b"bps");
    publish_and_check(&broker, &bee, 1);
    let threshold = AnnouncePaymentThreshold {
        payment_threshold: Bytes::from_static(&[0x01, 0x00]),
    };
    bee.control_stream(broker.peer, PRICING_PROTOCOL, write_message(&threshold));
    let record = bee.node.identity().sign(
        &[broker.addr.clone().with(Protocol::P2p(broker.peer))],
        unix_now(),
        None,
    );
    let peers = Peers {
        peers: vec![record],
    };
    bee.control_stream(broker.peer, HIVE_PROTOCOL, write_message(&peers));
    let log = broker.broker.log();
    assert!(log.contains("p2p host started"), "{log}");
    let dialable = broker.addr.clone().with(Protocol::P2p(broker.peer));
    assert!(
        log.lines()
            .any(|line| line.starts_with("bps-broker listening ")
                && line.ends_with(&format!(" p2p={dialable}"))),
        "the listening line names the address to dial: {log}"
    );
    assert!(
        log.contains(&broker.peer.to_string()),
        "the peer id is logged: {log}"
    );
    // The Swarm key the broker created, readable by its owner alone.
    let swarm_key = std::fs::metadata(broker.dir.join("swarm.key")).expect("created");
    assert_eq!(swarm_key.len(), 32);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&swarm_key.permissions()) & 0o777,
        0o600
    );
    broker
        .broker
        .wait_metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}", 1);
    let metrics = broker.broker.metrics();
    assert_eq!(
        metrics["bps_p2p_connections_total{direction=\"inbound\"}"],
        1.0
    );
    for protocol in [PUBSUB, PRICING_PROTOCOL, HIVE_PROTOCOL] {
        let series = format!("bps_p2p_streams_total{{protocol=\"{protocol}\"}}");
        assert_eq!(metrics[&series], 1.0, "{series}");
    }
    assert_eq!(
        metrics["bps_p2p_streams_refused_total{reason=\"other\"}"],
        0.0
    );
    // The host handed over the four streams the bee node opened and opened none itself.
    assert_eq!(metrics["bps_p2p_host_streams_inbound_total"], 4.0);
    assert_eq!(metrics["bps_p2p_host_streams_outbound_total"], 0.0);
    assert_eq!(metrics["bps_p2p_host_streams_refused_total"], 0.0);
}

#[test]
fn light_mode_the_broker_dials_a_listening_bee_node() {
    let mut bee = Bee::start("light-bee", NETWORK, Vec::new());
    let bee_addr = bee.listening();
    let broker = start_broker("light", "light", &[bee_addr], "");
    // The broker dials and leads the handshake; the bee node responds.
    let peer = bee.respond_handshake(&broker);
    assert!(!peer.full_node, "a light broker says so");
    broker
        .broker
        .wait_metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}", 1);
    publish_and_check(&broker, &bee, 2);
    let metrics = broker.broker.metrics();
    assert_eq!(
        metrics["bps_p2p_connections_total{direction=\"outbound\"}"],
        1.0
    );
}

#[test]
fn a_pubsub_stream_before_the_handshake_is_reset() {
    let broker = start_broker("early", "full", &[], "");
    let mut bee = Bee::start(
        "early-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let mut pipe = bee.open(broker.peer, PUBSUB);
    bee.send(&pipe, empty_headers());
    assert!(bee.ends(&mut pipe), "the early pubsub stream was reset");
    broker
        .broker
        .wait_metric("bps_p2p_streams_refused_total{reason=\"no_handshake\"}", 1);
    // The handshake still works afterwards, and then a pubsub stream does too.
    bee.dial_handshake(&broker);
    publish_and_check(&broker, &bee, 3);
}

#[test]
fn a_pubsub_stream_opened_while_the_handshake_runs_waits_for_its_end() {
    let broker = start_broker("racing", "full", &[], "");
    let mut bee = Bee::start(
        "racing-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let mut handshake_pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    let (mut handshake, syn) = Handshake::dial(
        Arc::clone(&bee.node),
        broker.peer,
        std::slice::from_ref(&broker.addr),
    );
    bee.send(&handshake_pipe, syn);
    let ack = bee.runtime.block_on(async {
        let mut buf = BytesMut::new();
        loop {
            match handshake
                .feed(&mut buf, unix_now())
                .expect("the broker's SynAck")
            {
                Step::NeedMore => {
                    let chunk = handshake_pipe.inbound.recv().await.expect("open");
                    buf.extend_from_slice(&chunk);
                }
                Step::Done(done) => return done.send.expect("the dialer's Ack"),
                other @ Step::Send(_) => panic!("the dialer sends nothing here: {other:?}"),
            }
        }
    });
    // The pubsub stream comes before our last handshake message.
    let mut pipe = bee.open(broker.peer, PUBSUB);
    bee.send(&pipe, empty_headers());
    std::thread::sleep(support::QUIET);
    bee.send(&handshake_pipe, ack);
    let mut buf = BytesMut::new();
    bee.runtime.block_on(read_until(&mut pipe, &mut buf, |buf| {
        read_headers(buf).expect("headers")
    }));
    let admin = key(1);
    let spec = explicit(5, &admin.address(), false);
    let mut viewer = broker.broker.join(&spec, &key(11).address());
    let sent = publish_over_p2p(&bee, &mut pipe, &mut buf, &spec, &admin, &[b"raced"]);
    assert_eq!(recv(&mut viewer), body_of(&sent[0]));
    assert_eq!(
        broker
            .broker
            .metric("bps_p2p_streams_refused_total{reason=\"no_handshake\"}"),
        0
    );
}

#[test]
fn a_bee_subscriber_that_reads_nothing_is_reset_as_a_slow_consumer() {
    let broker = start_broker(
        "slow",
        "full",
        &[],
        "[limits]\noutbound_queue_frames_max = 8",
    );
    let mut bee = Bee::start(
        "slow-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    bee.dial_handshake(&broker);
    let admin = key(1);
    let spec = explicit(4, &admin.address(), false);
    let (mut pipe, mut buf) = bee.pubsub(broker.peer);
    bee.send(&pipe, encode_frame(&spec.to_join(&key(12).address())));
    let ack = decode_ack(bee.frame(&mut pipe, &mut buf)).expect("an Ack");
    assert_eq!(ack.status, Status::Ok as i32);
    // The bee node reads nothing more: its host's chunks, yamux's window, the broker's
    // outbound channel and then the port's queue fill, and R26 resets the stream.
    let mut session = broker.broker.join(&spec, &admin.address());
    let mut sender = support::publisher(&spec, &admin, &session);
    let payload = [5u8; 4000];
    let mut published = 0;
    while broker.broker.metric("bps_queue_resets_total") == 0 {
        assert!(published < 5000, "never reset\n{}", broker.broker.log());
        support::publish(&mut sender, &mut session, &[&payload[..]; 50]);
        published += 50;
    }
    assert!(
        bee.ends(&mut pipe),
        "the slow bee subscriber's stream was reset"
    );
    broker.broker.wait_metric(
        "bps_transport_connections_closed_total{transport=\"p2p\"}",
        1,
    );
}

/// Joins `spec` as a subscriber declaring `addr` on a new pubsub stream; the Ack's status and
/// the stream (kept open by the caller while it should count).
fn join_over_p2p(
    bee: &Bee,
    broker: &p2p::P2pBroker,
    spec: &bps_proto::Spec,
    addr: &bps_proto::Address,
) -> (i32, bps_p2p::StreamPipe) {
    let (pipe, mut buf) = bee.pubsub(broker.peer);
    bee.send(&pipe, encode_frame(&spec.to_join(addr)));
    let mut pipe = pipe;
    let ack = decode_ack(bee.frame(&mut pipe, &mut buf)).expect("an Ack");
    (ack.status, pipe)
}

#[test]
fn a_bee_node_is_a_peer_by_its_overlay_in_the_bounds_and_in_cohortz() {
    // R32 at one cohort per peer: two bee nodes and a TCP client, all from 127.0.0.1.
    let broker = start_broker(
        "overlay",
        "full",
        &[],
        "\n[limits]\ncohorts_per_peer_max = 1",
    );
    let dial = vec![broker.addr.clone().with(Protocol::P2p(broker.peer))];
    let bees = [21, 22].map(|swarm_key| {
        let mut bee = Bee::start_as(
            &format!("overlay-{swarm_key}"),
            swarm_key,
            NETWORK,
            dial.clone(),
        );
        bee.connected(broker.peer);
        bee.dial_handshake(&broker);
        bee
    });
    let admin = key(1).address();
    let (one, two) = (explicit(41, &admin, false), explicit(42, &admin, false));
    let (status, _held) = join_over_p2p(&bees[0], &broker, &one, &key(30).address());
    assert_eq!(status, Status::Ok as i32);
    // That bee node is at its bound; the other one, and the TCP client, are not.
    let (status, _) = join_over_p2p(&bees[0], &broker, &two, &key(31).address());
    assert_eq!(status, Status::Full as i32, "one overlay, one cohort");
    let (status, _held_too) = join_over_p2p(&bees[1], &broker, &two, &key(32).address());
    assert_eq!(status, Status::Ok as i32, "another overlay at the same IP");
    let _tcp = broker.broker.join(&two, &key(33).address());
    let overlays: Vec<String> = bees
        .iter()
        .map(|bee| hex::encode(bee.node.identity().overlay()))
        .collect();
    let key_hex = hex::encode(two.key().as_bytes());
    let mut peers = support::eventually("two streams in /cohortz", || {
        let (status, body) = broker.broker.get(&format!("/cohortz?key={key_hex}"));
        assert_eq!(status, 200, "{body}");
        let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let streams = page["streams"].as_array().expect("streams").clone();
        (streams.len() == 2).then_some(streams)
    })
    .iter()
    .map(|stream| (stream["transport"].to_string(), stream["peer"].to_string()))
    .collect::<Vec<_>>();
    peers.sort();
    assert_eq!(
        peers,
        [
            ("\"p2p\"".to_owned(), format!("\"{}\"", overlays[1])),
            ("\"tcp\"".to_owned(), "\"127.0.0.1\"".to_owned()),
        ]
    );
    let metrics = broker.broker.metrics();
    let info = format!(
        "bps_p2p_info{{mode=\"full\",network_id=\"{NETWORK}\",peer_id=\"{}\",overlay=",
        broker.peer
    );
    assert!(
        metrics.keys().any(|series| series.starts_with(&info)),
        "{info} in {:?}",
        metrics
            .keys()
            .filter(|series| series.starts_with("bps_p2p_info"))
            .collect::<Vec<_>>()
    );
    assert_eq!(metrics["bps_joins_full_total"], 1.0);
}
