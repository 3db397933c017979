//! The handshake between two of our state machines, in pieces and whole, and each bad input
//! with its documented answer (issue 20: wrong network id, a signature that does not recover
//! to the overlay, a timestamp in the future, an observed address naming another peer, an
//! oversize message, missing parts).

use std::sync::Arc;

use bps_bee::pb::{Ack, BzzAddress, Syn, SynAck};
use bps_bee::{
    AddressError, CLOCK_SKEW_MAX_SECS, ConfigError, HANDSHAKE_DEADLINE_SECS, Handshake,
    HandshakeError, Identity, LocalNode, MESSAGE_BYTES_MAX, Multiaddr, PeerId, ReadError, Step,
    WELCOME_MESSAGE_BYTES_MAX, serialize_underlays, write_message,
};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};

/// A fixed clock, unix seconds.
const NOW: i64 = 1_800_000_000;
/// Bee's mainnet.
const NETWORK: u64 = 1;

/// Peer ids of bee's handshake tests (bee `pkg/p2p/libp2p/internal/handshake/handshake_test.go`).
fn peer_id(which: usize) -> PeerId {
    let text = [
        "16Uiu2HAkx8ULY8cTXhdVAcMmLcH9AsTKz6uBQ7DPLKRjMLgBVYkA",
        "16Uiu2HAkx8ULY8cTXhdVAcMmLcH9AsTKz6uBQ7DPLKRjMLgBVYkS",
        "QmWqeeHEqG2db37JsuKUxyJ2JF8LtVJMGohKVT8h3aeCVH",
    ][which];
    text.parse().expect("valid peer id")
}

fn multiaddr(text: &str) -> Multiaddr {
    text.parse().expect("valid multiaddr")
}

fn node(seed: u8, which: usize, network_id: u64, full_node: bool) -> Arc<LocalNode> {
    let key = SigningKey::from_bytes(&[seed; 32]).expect("valid key");
    let identity = Identity::new(&key, [seed; 32], network_id).expect("identity");
    let listen = multiaddr(&format!("/ip4/10.0.0.{seed}/tcp/1634"));
    let welcome = format!("node {seed}");
    Arc::new(
        LocalNode::new(identity, peer_id(which), full_node, welcome, &[listen])
            .expect("valid settings"),
    )
}

fn dialer_node() -> Arc<LocalNode> {
    node(1, 0, NETWORK, false)
}

fn responder_node() -> Arc<LocalNode> {
    node(2, 1, NETWORK, true)
}

fn feed(handshake: &mut Handshake, bytes: &[u8]) -> Result<Step, HandshakeError> {
    handshake.feed(&mut BytesMut::from(bytes), NOW)
}

fn sent(step: Step) -> Bytes {
    match step {
        Step::Send(bytes) => bytes,
        other => panic!("expected bytes to send, got {other:?}"),
    }
}

/// The dialer's `Syn` and the responder, having read it, with its `SynAck`.
fn first_half() -> (Handshake, Handshake, Bytes) {
    let (dialer, syn) = Handshake::dial(
        dialer_node(),
        peer_id(1),
        &[multiaddr("/ip4/10.0.0.2/tcp/1634")],
    );
    let mut responder = Handshake::respond(
        responder_node(),
        peer_id(0),
        &[multiaddr("/ip4/10.0.0.1/tcp/40000")],
    );
    let syn_ack = sent(feed(&mut responder, &syn).expect("valid Syn"));
    (dialer, responder, syn_ack)
}

#[test]
fn both_roles_complete_and_learn_each_other() {
    let (mut dialer, mut responder, syn_ack) = first_half();
    let Step::Done(dialed) = feed(&mut dialer, &syn_ack).expect("valid SynAck") else {
        panic!("the dialer finishes on the SynAck");
    };
    let ack = dialed.send.clone().expect("the dialer's Ack");
    let Step::Done(accepted) = feed(&mut responder, &ack).expect("valid Ack") else {
        panic!("the responder finishes on the Ack");
    };
    assert_eq!(accepted.send, None);
    assert_eq!(
        dialed.peer.address.overlay,
        responder_node().identity().overlay()
    );
    assert_eq!(
        accepted.peer.address.overlay,
        dialer_node().identity().overlay()
    );
    assert!(dialed.peer.full_node);
    assert!(!accepted.peer.full_node);
    assert_eq!(&dialed.peer.welcome_message[..], b"node 2");
    assert_eq!(
        dialed.peer.observed,
        vec![multiaddr(&format!(
            "/ip4/10.0.0.1/tcp/40000/p2p/{}",
            peer_id(0)
        ))]
    );
    // The dialer advertises its configured address, then how the responder saw it.
    assert_eq!(
        accepted.peer.address.underlays,
        vec![
            multiaddr(&format!("/ip4/10.0.0.1/tcp/1634/p2p/{}", peer_id(0))),
            multiaddr(&format!("/ip4/10.0.0.1/tcp/40000/p2p/{}", peer_id(0))),
        ]
    );
    assert_eq!(accepted.peer.address.timestamp, NOW);
    assert_eq!(feed(&mut dialer, &[]), Err(HandshakeError::Finished));
}

#[test]
fn messages_may_arrive_a_byte_at_a_time_and_leftovers_stay() {
    let (mut dialer, _, syn_ack) = first_half();
    let mut buf = BytesMut::new();
    for &byte in &syn_ack[..syn_ack.len() - 1] {
        buf.extend_from_slice(&[byte]);
        assert_eq!(dialer.feed(&mut buf, NOW), Ok(Step::NeedMore));
    }
    buf.extend_from_slice(&syn_ack[syn_ack.len() - 1..]);
    buf.extend_from_slice(b"next");
    assert!(matches!(dialer.feed(&mut buf, NOW), Ok(Step::Done(_))));
    assert_eq!(&buf[..], b"next");
}

/// The responder's `SynAck` decoded, changed by `change`, fed to a fresh dialer.
fn dialer_reads(change: impl FnOnce(&mut SynAck)) -> Result<Step, HandshakeError> {
    let (mut dialer, _, syn_ack) = first_half();
    let mut message: SynAck = bps_bee::read_message(&mut BytesMut::from(&syn_ack[..]), "SynAck")
        .expect("valid")
        .expect("whole");
    change(&mut message);
    feed(&mut dialer, &write_message(&message))
}

fn record(message: &mut SynAck) -> &mut BzzAddress {
    message
        .ack
        .as_mut()
        .and_then(|ack| ack.address.as_mut())
        .expect("a record")
}

/// A record for the responder's key signed over other values.
fn resigned(network_id: u64, timestamp: i64) -> BzzAddress {
    let key = SigningKey::from_bytes(&[2; 32]).expect("valid key");
    let identity = Identity::new(&key, [2; 32], network_id).expect("identity");
    identity.sign(&[multiaddr("/ip4/10.0.0.2/tcp/1634")], timestamp, None)
}

#[test]
fn a_peer_on_another_network_is_refused() {
    let result = dialer_reads(|message| {
        let ack = message.ack.as_mut().expect("ack");
        ack.network_id = 10;
        ack.address = Some(resigned(10, NOW));
    });
    assert_eq!(
        result,
        Err(HandshakeError::NetworkIdMismatch {
            ours: NETWORK,
            theirs: 10
        })
    );
    assert_eq!(result.expect_err("refused").reason(), "network_id");
}

#[test]
fn a_record_signed_for_another_network_does_not_recover_to_its_overlay() {
    let result = dialer_reads(|message| *record(message) = resigned(10, NOW));
    assert!(matches!(
        result,
        Err(HandshakeError::Address(
            AddressError::OverlayMismatch { .. }
        ))
    ));
}

#[test]
fn a_signature_by_another_key_does_not_recover_to_the_overlay() {
    let result = dialer_reads(|message| {
        let stranger = SigningKey::from_bytes(&[9; 32]).expect("valid key");
        let forged = Identity::new(&stranger, [9; 32], NETWORK)
            .expect("identity")
            .sign(&[multiaddr("/ip4/10.0.0.2/tcp/1634")], NOW, None);
        record(message).signature = forged.signature;
    });
    let error = result.expect_err("refused");
    assert!(matches!(
        error,
        HandshakeError::Address(AddressError::OverlayMismatch { .. })
    ));
    assert_eq!(error.reason(), "signature");
}

#[test]
fn a_timestamp_in_the_future_is_refused_past_the_skew() {
    let at_edge = dialer_reads(|message| *record(message) = resigned(NETWORK, NOW + 60));
    assert!(matches!(at_edge, Ok(Step::Done(_))));
    let future = NOW + CLOCK_SKEW_MAX_SECS + 1;
    let result = dialer_reads(|message| *record(message) = resigned(NETWORK, future));
    assert_eq!(
        result,
        Err(HandshakeError::Address(AddressError::TimestampInFuture {
            timestamp: future,
            now: NOW
        }))
    );
    let old = dialer_reads(|message| *record(message) = resigned(NETWORK, 1));
    assert!(
        matches!(old, Ok(Step::Done(_))),
        "bee accepts an old record"
    );
}

#[test]
fn an_observed_address_naming_another_peer_is_refused() {
    let result = dialer_reads(|message| {
        let elsewhere = multiaddr(&format!("/ip4/10.0.0.1/tcp/40000/p2p/{}", peer_id(2)));
        message.syn = Some(Syn {
            observed_underlay: Bytes::from(serialize_underlays(&[elsewhere]).expect("fits")),
        });
    });
    assert_eq!(
        result,
        Err(HandshakeError::ObservedPeerIdMismatch {
            ours: Box::new(peer_id(0)),
            theirs: Box::new(peer_id(2))
        })
    );
    let bare = dialer_reads(|message| {
        let bare = multiaddr("/ip4/10.0.0.1/tcp/40000");
        message.syn = Some(Syn {
            observed_underlay: Bytes::from(serialize_underlays(&[bare]).expect("fits")),
        });
    });
    assert!(matches!(
        bare,
        Err(HandshakeError::ObservedWithoutPeerId { .. })
    ));
    let garbage = dialer_reads(|message| {
        message.syn = Some(Syn {
            observed_underlay: Bytes::from_static(&[0xde, 0xad]),
        });
    });
    assert!(matches!(garbage, Err(HandshakeError::ObservedUnderlay(_))));
}

#[test]
fn missing_parts_are_refused_not_defaulted() {
    assert_eq!(
        dialer_reads(|message| message.syn = None),
        Err(HandshakeError::MissingSyn)
    );
    assert_eq!(
        dialer_reads(|message| message.ack = None),
        Err(HandshakeError::MissingAck)
    );
    assert_eq!(
        dialer_reads(|message| message.ack.as_mut().expect("ack").address = None),
        Err(HandshakeError::MissingAddress)
    );
    let (_, mut responder, _) = first_half();
    let empty_ack = write_message(&Ack::default());
    assert_eq!(
        feed(&mut responder, &empty_ack),
        Err(HandshakeError::MissingAddress)
    );
}

#[test]
fn the_responder_checks_the_ack_as_the_dialer_checks_the_syn_ack() {
    let (_, mut responder, _) = first_half();
    let ack = Ack {
        address: Some(resigned(NETWORK, NOW + CLOCK_SKEW_MAX_SECS + 1)),
        network_id: NETWORK,
        full_node: false,
        welcome_message: Bytes::new(),
    };
    assert!(matches!(
        feed(&mut responder, &write_message(&ack)),
        Err(HandshakeError::Address(
            AddressError::TimestampInFuture { .. }
        ))
    ));
    let (_, mut responder, _) = first_half();
    let other_network = Ack {
        network_id: 5,
        ..ack
    };
    assert!(matches!(
        feed(&mut responder, &write_message(&other_network)),
        Err(HandshakeError::NetworkIdMismatch { ours: 1, theirs: 5 })
    ));
}

#[test]
fn an_oversize_message_is_refused_from_its_length_alone() {
    let (mut dialer, _) = Handshake::dial(dialer_node(), peer_id(1), &[]);
    // A declared length of MESSAGE_BYTES_MAX + 1, and no body.
    let over = u32::try_from(MESSAGE_BYTES_MAX + 1).expect("fits");
    let prefix = [
        (over & 0x7f) as u8 | 0x80,
        ((over >> 7) & 0x7f) as u8 | 0x80,
        (over >> 14) as u8,
    ];
    let error = feed(&mut dialer, &prefix).expect_err("refused");
    assert!(matches!(error, HandshakeError::Read(ReadError::Frame(_))));
    assert_eq!(error.reason(), "framing");
}

#[test]
fn a_responder_refuses_a_syn_it_cannot_parse() {
    let mut responder = Handshake::respond(responder_node(), peer_id(0), &[]);
    let syn = Syn {
        observed_underlay: Bytes::new(),
    };
    assert!(matches!(
        feed(&mut responder, &write_message(&syn)),
        Err(HandshakeError::ObservedUnderlay(_))
    ));
    let mut responder = Handshake::respond(responder_node(), peer_id(0), &[]);
    assert!(matches!(
        feed(&mut responder, &[3, 0x0a, 0x05, 0]),
        Err(HandshakeError::Read(ReadError::Decode { .. }))
    ));
}

#[test]
fn our_settings_have_bees_bounds() {
    assert_eq!(HANDSHAKE_DEADLINE_SECS, 15);
    let key = SigningKey::from_bytes(&[1; 32]).expect("valid key");
    let identity = Identity::new(&key, [1; 32], NETWORK).expect("identity");
    let long = "x".repeat(WELCOME_MESSAGE_BYTES_MAX + 1);
    assert_eq!(
        LocalNode::new(identity.clone(), peer_id(0), false, long, &[]).map(|_| ()),
        Err(ConfigError::WelcomeMessageTooLong {
            bytes: WELCOME_MESSAGE_BYTES_MAX + 1
        })
    );
    let at_bound = "x".repeat(WELCOME_MESSAGE_BYTES_MAX);
    let local = LocalNode::new(identity, peer_id(0), false, at_bound, &[]).expect("valid");
    assert!(local.underlays().is_empty());
}

#[test]
fn a_syn_and_its_ack_in_one_read_finish_after_a_second_feed() {
    let (mut dialer, syn) = Handshake::dial(
        node(3, 2, NETWORK, false),
        peer_id(0),
        &[multiaddr("/ip4/10.0.0.1/tcp/1634")],
    );
    let mut first = Handshake::respond(dialer_node(), peer_id(2), &[]);
    let syn_ack = sent(feed(&mut first, &syn).expect("valid Syn"));
    let Step::Done(dialed) = feed(&mut dialer, &syn_ack).expect("valid SynAck") else {
        panic!("the dialer finishes on the SynAck");
    };
    let ack = dialed.send.expect("the dialer's Ack");
    // A second responder gets the Syn and the Ack in one read (the Ack does not depend on
    // which responder's SynAck the dialer checked).
    let mut responder = Handshake::respond(dialer_node(), peer_id(2), &[]);
    let mut buf = BytesMut::from(&[&syn[..], &ack[..]].concat()[..]);
    assert!(matches!(responder.feed(&mut buf, NOW), Ok(Step::Send(_))));
    assert!(matches!(responder.feed(&mut buf, NOW), Ok(Step::Done(_))));
    assert!(buf.is_empty());
}
