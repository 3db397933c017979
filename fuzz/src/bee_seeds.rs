//! The bee control-protocol targets' fixed world and their seeds: our node and a peer (keys,
//! nonces, peer ids of bee's handshake tests), the clock, and valid handshakes, records and
//! hive, headers and pricing messages made by `bps_bee` between them.
//!
//! Owns: [`us`], [`them`], [`NOW`], [`NETWORK_ID`], the input layouts' role and stream bytes
//! and [`all`]. Never: writes files, or computes what a target expects.

use std::sync::{Arc, OnceLock};

use bps_bee::pb::{AnnouncePaymentThreshold, BzzAddress, Header, Headers, Peers};
use bps_bee::{
    Handshake, Identity, LocalNode, Multiaddr, PeerId, Step, UNDERLAY_LIST_PREFIX, write_message,
};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};
use prost::Message;

use crate::seeds::Seed;

/// The clock every handshake target runs at, unix seconds.
pub const NOW: i64 = 1_800_000_000;
/// The network both nodes are on (bee's mainnet).
pub const NETWORK_ID: u64 = 1;

/// `bee_handshake` role byte: bit 0 set, we dial and read a `SynAck`; clear, we respond and
/// read a `Syn`, then an `Ack`.
pub const ROLE_DIALER: u8 = 1;
/// `bee_streams` selector byte (modulo 3): headers, pricing, hive.
pub const STREAM_HEADERS: u8 = 0;
/// See [`STREAM_HEADERS`].
pub const STREAM_PRICING: u8 = 1;
/// See [`STREAM_HEADERS`].
pub const STREAM_HIVE: u8 = 2;

/// Peer ids of bee's handshake tests (bee pkg/p2p/libp2p/internal/handshake/handshake_test.go).
const PEER_IDS: [&str; 2] = [
    "16Uiu2HAkx8ULY8cTXhdVAcMmLcH9AsTKz6uBQ7DPLKRjMLgBVYkA",
    "16Uiu2HAkx8ULY8cTXhdVAcMmLcH9AsTKz6uBQ7DPLKRjMLgBVYkS",
];

/// A peer id of the fixture (0: ours, 1: theirs); the strings above are valid.
pub fn peer_id(which: usize) -> PeerId {
    PEER_IDS[which].parse().expect("a fixed valid peer id")
}

fn address(text: &str) -> Multiaddr {
    text.parse().expect("a fixed valid multiaddr")
}

fn node(seed: u8, which: usize, full_node: bool) -> Arc<LocalNode> {
    let key = SigningKey::from_bytes(&[seed; 32]).expect("a fixed valid key");
    let identity = Identity::new(&key, [seed; 32], NETWORK_ID).expect("a fixed valid key");
    let listen = address(&format!("/ip4/10.0.0.{seed}/tcp/1634"));
    Arc::new(
        LocalNode::new(
            identity,
            peer_id(which),
            full_node,
            "bps".to_owned(),
            &[listen],
        )
        .expect("a short welcome message"),
    )
}

/// The broker's side of every fuzzed handshake (made once: a key costs a scalar
/// multiplication, which would dominate every execution).
pub fn us() -> Arc<LocalNode> {
    static US: OnceLock<Arc<LocalNode>> = OnceLock::new();
    Arc::clone(US.get_or_init(|| node(1, 0, false)))
}

/// The peer's side, which makes the seeds.
pub fn them() -> Arc<LocalNode> {
    static THEM: OnceLock<Arc<LocalNode>> = OnceLock::new();
    Arc::clone(THEM.get_or_init(|| node(2, 1, true)))
}

fn sent(step: Step) -> Bytes {
    match step {
        Step::Send(bytes) => bytes,
        Step::Done(done) => done.send.unwrap_or_default(),
        Step::NeedMore => Bytes::new(),
    }
}

fn feed(handshake: &mut Handshake, bytes: &[u8]) -> Bytes {
    sent(
        handshake
            .feed(&mut BytesMut::from(bytes), NOW)
            .expect("the fixture's handshake succeeds"),
    )
}

/// What a peer sends us when we dial it (its `SynAck`), and when it dials us (`Syn`, `Ack`).
fn handshakes() -> (Bytes, Vec<u8>) {
    let ours = address("/ip4/10.0.0.1/tcp/40000");
    let theirs = address("/ip4/10.0.0.2/tcp/1634");
    let (_, our_syn) = Handshake::dial(us(), peer_id(1), std::slice::from_ref(&theirs));
    let mut responder = Handshake::respond(them(), peer_id(0), std::slice::from_ref(&ours));
    let syn_ack = feed(&mut responder, &our_syn);
    let (mut dialer, their_syn) = Handshake::dial(them(), peer_id(0), &[ours]);
    let mut we_respond = Handshake::respond(us(), peer_id(1), &[theirs]);
    let our_syn_ack = feed(&mut we_respond, &their_syn);
    let their_ack = feed(&mut dialer, &our_syn_ack);
    (syn_ack, [&their_syn[..], &their_ack[..]].concat())
}

/// `role ‖ cut count ‖ cuts (u16 LE) ‖ stream`.
fn handshake_input(role: u8, cuts: &[u16], stream: &[u8]) -> Vec<u8> {
    let mut input = vec![role, u8::try_from(cuts.len()).expect("few cuts")];
    for cut in cuts {
        input.extend_from_slice(&cut.to_le_bytes());
    }
    input.extend_from_slice(stream);
    input
}

/// A record of the peer's, signed now.
pub fn their_record() -> BzzAddress {
    let underlay = address("/ip4/10.0.0.2/tcp/1634");
    them().identity().sign(&[underlay], NOW, Some([0xcb; 20]))
}

fn bee_handshake() -> Vec<Seed> {
    let target = "bee_handshake";
    let (syn_ack, syn_then_ack) = handshakes();
    vec![
        seed(
            target,
            "dialer-syn-ack",
            handshake_input(ROLE_DIALER, &[], &syn_ack),
        ),
        seed(
            target,
            "dialer-syn-ack-in-pieces",
            handshake_input(ROLE_DIALER, &[1, 7, 100], &syn_ack),
        ),
        seed(
            target,
            "responder-syn-ack",
            handshake_input(0, &[], &syn_then_ack),
        ),
        seed(
            target,
            "responder-in-pieces",
            handshake_input(0, &[2, 40], &syn_then_ack),
        ),
        seed(
            target,
            "oversize-length",
            handshake_input(0, &[], &[0x81, 0x80, 0x08]),
        ),
    ]
}

fn bee_address() -> Vec<Seed> {
    let target = "bee_address";
    let with_network =
        |record: &BzzAddress| [&NETWORK_ID.to_le_bytes()[..], &record.encode_to_vec()].concat();
    let record = their_record();
    let list = BzzAddress {
        underlay: Bytes::from_static(&[UNDERLAY_LIST_PREFIX, 5, 0x04, 10, 0, 0, 2]),
        ..record.clone()
    };
    vec![
        seed(target, "valid", with_network(&record)),
        seed(target, "underlay-list", with_network(&list)),
        seed(
            target,
            "other-network",
            [&7u64.to_le_bytes()[..], &record.encode_to_vec()].concat(),
        ),
    ]
}

fn bee_streams() -> Vec<Seed> {
    let target = "bee_streams";
    let framed = |selector: u8, message: Bytes| [&[selector][..], &message[..]].concat();
    let headers = Headers {
        headers: vec![Header {
            key: Bytes::from_static(b"exchange"),
            value: Bytes::from_static(&[1, 2, 3]),
        }],
    };
    let threshold = AnnouncePaymentThreshold {
        payment_threshold: Bytes::from_static(&[0x01, 0x3f, 0xbe, 0x85, 0xed, 0xc9, 0x00, 0x00]),
    };
    let peers = Peers {
        peers: vec![their_record(), BzzAddress::default()],
    };
    vec![
        seed(
            target,
            "headers",
            framed(STREAM_HEADERS, write_message(&headers)),
        ),
        seed(
            target,
            "headers-empty",
            framed(STREAM_HEADERS, write_message(&Headers::default())),
        ),
        seed(
            target,
            "pricing",
            framed(STREAM_PRICING, write_message(&threshold)),
        ),
        seed(target, "hive", framed(STREAM_HIVE, write_message(&peers))),
    ]
}

fn seed(target: &'static str, name: &'static str, input: Vec<u8>) -> Seed {
    Seed {
        target,
        name,
        input,
    }
}

/// Every seed of the bee targets.
pub fn all() -> Vec<Seed> {
    [bee_handshake(), bee_address(), bee_streams()].concat()
}
