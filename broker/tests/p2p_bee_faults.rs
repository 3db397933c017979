//! Black-box: bad input on the libp2p carrier (issue 20) against the real binary, with bee
//! nodes played in-process (`p2p::bee`). Each case asserts the broker's documented answer
//! (the stream reset, the connection closed or kept) and its counter on /metrics, and that
//! only the culprit pays: a bystander bee node handshaken before the fault keeps its
//! connection and publishes on a new stream afterwards, or the culprit's other streams keep
//! working when the fault costs one stream.
//!
//! Handshake faults (a peer on another network, a record signed in the future, a record
//! whose signature does not recover to its overlay, a message over bee's cap, a SynAck that
//! observed another peer id, silence until the deadline) reset the handshake stream and
//! close that connection, as does a connection with no handshake at the deadline; a
//! pubsub frame over `limits.frame_bytes_max` resets its stream alone; streams beyond
//! `p2p.streams_per_connection_max` on one connection are reset and counted, the
//! connection's others untouched.

mod p2p;
mod support;

use std::sync::Arc;

use bps_bee::pb::{Ack, Syn, SynAck};
use bps_bee::{
    CLOCK_SKEW_MAX_SECS, HANDSHAKE_PROTOCOL, Handshake, Identity, MESSAGE_BYTES_MAX, read_message,
    serialize_underlays, write_message,
};
use bps_p2p::{HostEvent, Multiaddr, PeerId, Protocol, StreamProtocol};
use bps_proto::{Status, decode_ack, encode_frame};
use bytes::{Bytes, BytesMut};
use p2p::bee::{Bee, publish_and_check, publish_over_p2p, read_until};
use p2p::{NETWORK, P2pBroker, PUBSUB, start_broker, unix_now};
use support::{body_of, explicit, key, recv};

/// The frame cap the pubsub case runs with (the broker's default, stated here so the
/// oversize frame is one byte over it whatever the default becomes).
const FRAME_BYTES_MAX: usize = 8192;
/// Streams one connection may hold in the flood case: few, so the flood is short.
const STREAMS_PER_CONNECTION_MAX: usize = 4;
/// The handshake deadline of the silent case: short, so the test is, yet ample for the
/// bystander's handshake right after its connection.
const HANDSHAKE_DEADLINE_MS: u64 = 1000;
/// The Swarm key of every bystander bee node (culprits use `Bee::start`'s).
const BYSTANDER_KEY: u8 = 76;

fn handshakes(outcome_reason: &str) -> String {
    format!("bps_p2p_handshakes_total{{{outcome_reason}}}")
}

fn failed(reason: &str) -> String {
    handshakes(&format!("outcome=\"failed\",reason=\"{reason}\""))
}

const HANDSHAKES_OK: &str = "bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}";

/// A bee node that dialed the broker (full mode) and completed bee's handshake.
fn bystander(broker: &P2pBroker, name: &str) -> Bee {
    let mut bee = Bee::start_as(name, BYSTANDER_KEY, NETWORK, Vec::new());
    bee.dial_once(broker);
    bee.dial_handshake(broker);
    broker.broker.wait_metric(HANDSHAKES_OK, 1);
    bee
}

/// The bystander still has its connection: no close reported, a new stream publishes, and
/// its handshake is the only one that succeeded.
fn only_the_culprit_paid(broker: &P2pBroker, bystander: &mut Bee, topic: u8) {
    publish_and_check(broker, bystander, topic);
    assert!(
        !bystander.lost(broker.peer),
        "the bystander's connection was closed"
    );
    assert_eq!(
        broker.broker.metric(HANDSHAKES_OK),
        1,
        "{}",
        broker.broker.log()
    );
}

/// Waits for the culprit's connection to the broker to close.
fn closed(bee: &mut Bee, broker: PeerId) {
    bee.wait_for(|event| match event {
        HostEvent::ConnectionClosed { peer, .. } if peer == broker => Some(()),
        _ => None,
    });
}

/// A bee record of `identity` for the culprit's peer id, signed at `timestamp`, in an Ack.
fn ack_of(identity: &Identity, peer: PeerId, timestamp: i64) -> Ack {
    let underlay: Multiaddr = "/ip4/127.0.0.1/tcp/1634".parse().expect("multiaddr");
    Ack {
        address: Some(identity.sign(&[underlay.with(Protocol::P2p(peer))], timestamp, None)),
        network_id: identity.network_id(),
        full_node: true,
        welcome_message: Bytes::new(),
    }
}

/// A culprit dials the broker (full mode), sends bee's Syn, reads the SynAck and answers
/// with the Ack `make_ack` builds: the broker resets the handshake stream, counts `reason`
/// and closes that connection; the bystander keeps its own.
fn a_bad_ack_costs_its_connection_alone(
    name: &str,
    reason: &str,
    make_ack: impl FnOnce(&Bee) -> Ack,
) {
    let broker = start_broker(name, "full", &[], "");
    let mut bystander = bystander(&broker, &format!("{name}-ok"));
    let mut bee = Bee::start(&format!("{name}-bad"), NETWORK, Vec::new());
    bee.dial_once(&broker);
    let mut pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    let (_, syn) = Handshake::dial(
        Arc::clone(&bee.node),
        broker.peer,
        std::slice::from_ref(&broker.addr),
    );
    bee.send(&pipe, syn);
    let mut buf = BytesMut::new();
    let syn_ack: SynAck = bee.runtime.block_on(read_until(&mut pipe, &mut buf, |buf| {
        read_message(buf, "SynAck").expect("a SynAck")
    }));
    assert_eq!(syn_ack.ack.expect("the broker's Ack").network_id, NETWORK);
    bee.send(&pipe, write_message(&make_ack(&bee)));
    assert!(bee.ends(&mut pipe), "the handshake stream was reset");
    broker.broker.wait_metric(&failed(reason), 1);
    closed(&mut bee, broker.peer);
    only_the_culprit_paid(&broker, &mut bystander, 1);
}

#[test]
fn a_peer_on_another_network_is_refused() {
    a_bad_ack_costs_its_connection_alone("network", "network_id", |bee| {
        // Signed for network 11, so only the network id is wrong.
        let elsewhere = Identity::new(&key(77), [3; 32], 11).expect("identity");
        ack_of(&elsewhere, bee.host.peer_id(), unix_now())
    });
}

#[test]
fn a_record_signed_in_the_future_is_refused() {
    a_bad_ack_costs_its_connection_alone("future", "timestamp_in_future", |bee| {
        let ahead = unix_now() + CLOCK_SKEW_MAX_SECS + 600;
        ack_of(bee.node.identity(), bee.host.peer_id(), ahead)
    });
}

#[test]
fn a_record_whose_signature_does_not_recover_to_its_overlay_is_refused() {
    a_bad_ack_costs_its_connection_alone("signature", "signature", |bee| {
        let mut ack = ack_of(bee.node.identity(), bee.host.peer_id(), unix_now());
        // Another node's overlay under our signature: it recovers to our key, not theirs.
        let other = Identity::new(&key(79), [3; 32], NETWORK).expect("identity");
        let record = ack.address.as_mut().expect("a record");
        record.overlay = Bytes::copy_from_slice(&other.overlay());
        ack
    });
}

#[test]
fn a_connection_without_a_handshake_is_closed_at_the_deadline() {
    let deadline = format!("handshake_deadline_ms = {HANDSHAKE_DEADLINE_MS}");
    let broker = start_broker("silent", "full", &[], &deadline);
    let mut bystander = bystander(&broker, "silent-ok");
    let mut bee = Bee::start(
        "silent-bad",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    // A handshake stream that never says anything is reset at the deadline too.
    let mut pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    assert!(bee.ends(&mut pipe), "the silent handshake was reset");
    broker.broker.wait_metric(&failed("deadline"), 1);
    closed(&mut bee, broker.peer);
    // The bee node redials (it is configured to); doing nothing, it is closed again.
    bee.connected(broker.peer);
    closed(&mut bee, broker.peer);
    broker.broker.wait_metric(&failed("unhandshaken"), 1);
    only_the_culprit_paid(&broker, &mut bystander, 5);
}

#[test]
fn a_handshake_message_over_bees_cap_is_refused() {
    let broker = start_broker("oversize", "full", &[], "");
    let mut bystander = bystander(&broker, "oversize-ok");
    let mut bee = Bee::start("oversize-bad", NETWORK, Vec::new());
    bee.dial_once(&broker);
    let pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    // The length alone: refused before any body byte is awaited.
    let mut prefix = Vec::new();
    prost::encoding::encode_varint(MESSAGE_BYTES_MAX as u64 + 1, &mut prefix);
    bee.send(&pipe, Bytes::from(prefix));
    let mut pipe = pipe;
    assert!(bee.ends(&mut pipe), "the handshake stream was reset");
    broker.broker.wait_metric(&failed("framing"), 1);
    closed(&mut bee, broker.peer);
    only_the_culprit_paid(&broker, &mut bystander, 2);
}

#[test]
fn a_syn_ack_that_observed_another_peer_id_is_refused_by_a_light_broker() {
    let mut bystander = Bee::start_as("observed-ok", BYSTANDER_KEY, NETWORK, Vec::new());
    let mut bee = Bee::start("observed-bad", NETWORK, Vec::new());
    let dial = [bystander.listening(), bee.listening()];
    let broker = start_broker("observed", "light", &dial, "");
    bystander.respond_handshake(&broker);
    broker.broker.wait_metric(HANDSHAKES_OK, 1);
    // The culprit answers the broker's Syn as if it had reached someone else.
    let mut pipe = bee.handshake_stream();
    let mut buf = BytesMut::new();
    let _: Syn = bee.runtime.block_on(read_until(&mut pipe, &mut buf, |buf| {
        read_message(buf, "Syn").expect("a Syn")
    }));
    let someone_else = broker.addr.clone().with(Protocol::P2p(PeerId::random()));
    let observed = serialize_underlays(&[someone_else]).expect("one underlay");
    let syn_ack = SynAck {
        syn: Some(Syn {
            observed_underlay: Bytes::from(observed),
        }),
        ack: Some(ack_of(bee.node.identity(), bee.host.peer_id(), unix_now())),
    };
    bee.send(&pipe, write_message(&syn_ack));
    assert!(bee.ends(&mut pipe), "the handshake stream was reset");
    broker.broker.wait_metric(&failed("observed_peer_id"), 1);
    closed(&mut bee, broker.peer);
    only_the_culprit_paid(&broker, &mut bystander, 3);
}

#[test]
fn a_pubsub_frame_over_the_frame_cap_costs_its_stream_alone() {
    let limits = format!("[limits]\nframe_bytes_max = {FRAME_BYTES_MAX}");
    let broker = start_broker("frame", "full", &[], &limits);
    let mut bee = Bee::start("frame-bee", NETWORK, Vec::new());
    bee.dial_once(&broker);
    bee.dial_handshake(&broker);
    let admin = key(1);
    let spec = explicit(4, &admin.address(), false);
    let mut viewer = broker.broker.join(&spec, &key(11).address());
    let (mut sub, mut sub_buf) = bee.pubsub(broker.peer);
    bee.send(&sub, encode_frame(&spec.to_join(&key(20).address())));
    let ack = decode_ack(bee.frame(&mut sub, &mut sub_buf)).expect("an Ack");
    assert_eq!(ack.status, Status::Ok as i32);
    let (mut bad, _) = bee.pubsub(broker.peer);
    let mut prefix = Vec::new();
    prost::encoding::encode_varint(FRAME_BYTES_MAX as u64 + 1, &mut prefix);
    bee.send(&bad, Bytes::from(prefix));
    assert!(bee.ends(&mut bad), "the oversize stream was reset");
    broker.broker.wait_metric("bps_frame_errors_total", 1);
    // The same connection: its subscriber stream, and a publisher on a new stream.
    let (mut publisher, mut buf) = bee.pubsub(broker.peer);
    let sent = publish_over_p2p(&bee, &mut publisher, &mut buf, &spec, &admin, &[b"on"]);
    assert_eq!(bee.frame(&mut sub, &mut sub_buf), body_of(&sent[0]));
    assert_eq!(recv(&mut viewer), body_of(&sent[0]));
    assert!(!bee.lost(broker.peer), "the connection was closed");
    broker.broker.assert_metrics(&[
        ("bps_frame_errors_total", 1),
        ("bps_p2p_connections_total{direction=\"inbound\"}", 1),
        (HANDSHAKES_OK, 1),
        ("bps_blocklisted_total", 0),
    ]);
}

#[test]
fn streams_over_the_per_connection_cap_are_reset_and_the_others_keep_working() {
    let cap = format!("streams_per_connection_max = {STREAMS_PER_CONNECTION_MAX}");
    let broker = start_broker("flood", "full", &[], &cap);
    let mut bee = Bee::start("flood-bee", NETWORK, Vec::new());
    bee.dial_once(&broker);
    bee.dial_handshake(&broker);
    let admin = key(1);
    let spec = explicit(5, &admin.address(), false);
    let mut viewer = broker.broker.join(&spec, &key(11).address());
    // Subscribers up to the cap, less the publisher's stream below.
    let subscribers: Vec<_> = (0..STREAMS_PER_CONNECTION_MAX - 1)
        .map(|n| {
            let (mut pipe, mut buf) = bee.pubsub(broker.peer);
            let join = spec.to_join(&key(20 + n as u8).address());
            bee.send(&pipe, encode_frame(&join));
            let ack = decode_ack(bee.frame(&mut pipe, &mut buf)).expect("an Ack");
            assert_eq!(ack.status, Status::Ok as i32, "subscriber {n}");
            (pipe, buf)
        })
        .collect();
    let (mut publisher, mut publisher_buf) = bee.pubsub(broker.peer);
    let flood = 3;
    for extra in 0..flood {
        let opened = bee.runtime.block_on(
            bee.host
                .handle()
                .open_stream(broker.peer, StreamProtocol::new(PUBSUB)),
        );
        // Reset by the broker's host, during negotiation or right after.
        if let Ok(mut pipe) = opened {
            assert!(bee.ends(&mut pipe), "extra stream {extra} was reset");
        }
    }
    broker
        .broker
        .wait_metric("bps_p2p_host_streams_refused_total", flood);
    let sent = publish_over_p2p(
        &bee,
        &mut publisher,
        &mut publisher_buf,
        &spec,
        &admin,
        &[b"through the flood"],
    );
    for (index, (mut pipe, mut buf)) in subscribers.into_iter().enumerate() {
        let got = bee.frame(&mut pipe, &mut buf);
        assert_eq!(got, body_of(&sent[0]), "subscriber {index}");
    }
    assert_eq!(recv(&mut viewer), body_of(&sent[0]));
    assert!(!bee.lost(broker.peer), "the connection was closed");
    broker.broker.assert_metrics(&[
        ("bps_p2p_connections_total{direction=\"inbound\"}", 1),
        (HANDSHAKES_OK, 1),
    ]);
}
