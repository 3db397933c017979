//! The protocol core alone: how many publications per second the state machine accepts and
//! fans out, with verification stubbed as already valid and no I/O.
//!
//! Shape: one live-stream cohort (admin publisher, N spectators), 4 KiB DATA frames. Each
//! publication is `on_frame` (cheap checks, id derivation) + `on_verified(Ok)` + draining the
//! `Deliver` action; the cost per delivery is the publication cost divided by N. The target
//! (issue 3): well under the ~1 µs a batched socket write costs per delivery.
//!
//! Run: `cargo bench -p bps-core --bench core`.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use bps_core::{Action, Arrival, Machine, Millis, PeerId, PeerLedger, ProtocolConfig, StreamId};
use bps_proto::{Ack, Binding, Broadcast, Frame, Kind, Spec, next_frame, session_chunk_id};
use bps_verify::{Expect, SigningKey, Verified};
use bytes::{Bytes, BytesMut};
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// Publications timed per subscriber count (after warm-up).
const PUBLICATIONS: u64 = 20_000;
const WARMUP_PUBLICATIONS: u64 = 2_000;
const PAYLOAD_BYTES: usize = 4096;

fn body_of(frame: &Bytes) -> Bytes {
    let mut buffer = BytesMut::from(&frame[..]);
    next_frame(&mut buffer, 1 << 20)
        .expect("a frame the machine encoded")
        .expect("a complete frame")
}

fn challenge_of(actions: &[Action], stream: StreamId) -> [u8; 32] {
    actions
        .iter()
        .find_map(|action| match action {
            Action::Send {
                stream: to, frame, ..
            } if *to == stream => {
                let ack = Ack::decode(body_of(frame)).expect("an Ack");
                <[u8; 32]>::try_from(&ack.challenge[..]).ok()
            }
            _ => None,
        })
        .expect("the Join was answered OK")
}

/// A chunk with the right id and span; the signature is never checked (stubbed).
fn frame(topic: &[u8; 32], challenge: &[u8; 32], index: u64) -> Frame {
    let id = session_chunk_id(Kind::Data, topic, challenge, index);
    let mut soc = Vec::with_capacity(105 + PAYLOAD_BYTES);
    soc.extend_from_slice(&id);
    soc.extend_from_slice(&[0x1b; 65]);
    soc.extend_from_slice(&(PAYLOAD_BYTES as u64).to_le_bytes());
    soc.resize(105 + PAYLOAD_BYTES, 0xab);
    let broadcast = Broadcast {
        soc: soc.into(),
        kind: Kind::Data as i32,
        challenge: Bytes::copy_from_slice(challenge),
        index,
    };
    Frame::encode(&broadcast)
}

fn run(subscribers: u64) -> (f64, f64) {
    let config = ProtocolConfig {
        streams_per_cohort_max: 20_000,
        streams_per_peer_per_cohort_max: 20_000,
        ..ProtocolConfig::default()
    };
    let ledger = Arc::new(PeerLedger::new(&config));
    let mut machine = Machine::new(config, ledger, StdRng::seed_from_u64(7));
    let admin = SigningKey::from_bytes(&[1; 32]).expect("valid key");
    let spec = Spec {
        topic: [9; 32],
        binding: Binding::FeedTopic,
        admin: Some(admin.address()),
        all: false,
        history: false,
        closed: false,
    };
    let peer = PeerId::of(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let mut actions = Vec::new();
    let publisher = StreamId::new(0, 0);
    let join = |addr| Frame::encode(&spec.to_join(&addr));
    machine.on_join(
        Millis(0),
        publisher,
        Arrival::declared(peer, "tcp"),
        join(admin.address()),
    );
    machine.drain_actions(&mut actions);
    let challenge = challenge_of(&actions, publisher);
    for n in 1..=subscribers {
        let mut addr = [0u8; 20];
        addr[..8].copy_from_slice(&n.to_be_bytes());
        machine.on_join(
            Millis(0),
            StreamId::new(1, n),
            Arrival::declared(peer, "tcp"),
            join(addr),
        );
    }
    actions.clear();
    machine.drain_actions(&mut actions);

    let frames: Vec<Frame> = (0..WARMUP_PUBLICATIONS + PUBLICATIONS)
        .map(|index| frame(&spec.topic, &challenge, index))
        .collect();
    let mut delivered = 0u64;
    let mut started = Instant::now();
    for (index, frame) in frames.into_iter().enumerate() {
        if index as u64 == WARMUP_PUBLICATIONS {
            delivered = 0;
            started = Instant::now();
        }
        let now = Millis(1 + index as u64 / 1000);
        machine.on_frame(now, publisher, frame);
        actions.clear();
        machine.drain_actions(&mut actions);
        let mut verifications = Vec::new();
        for action in actions.drain(..) {
            if let Action::Verify { ticket, request } = action {
                verifications.push((ticket, request));
            }
        }
        for (ticket, request) in verifications {
            let Expect::At { owner } = request.expect else {
                panic!("a live-stream chunk is verified at its owner");
            };
            machine.on_verified(
                now,
                ticket,
                Ok(Verified {
                    owner,
                    address: [0; 32],
                    dedup_key: [0; 32],
                    wrapped: [0; 32],
                    public_key: [0; 33],
                }),
            );
        }
        machine.drain_actions(&mut actions);
        for action in actions.drain(..) {
            if let Action::Deliver { targets, .. } = action {
                delivered += targets.len() as u64;
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(
        delivered,
        PUBLICATIONS * subscribers,
        "every publication reaches every subscriber"
    );
    let publications_per_s = PUBLICATIONS as f64 / seconds;
    let ns_per_delivery = seconds * 1e9 / delivered as f64;
    (publications_per_s, ns_per_delivery)
}

fn main() {
    println!(
        "| subscribers | publications/s | deliveries/s | ns per delivery | ns per publication |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for subscribers in [1u64, 100, 10_000] {
        let (per_s, ns_per_delivery) = run(subscribers);
        println!(
            "| {subscribers} | {per_s:.0} | {:.0} | {ns_per_delivery:.2} | {:.0} |",
            per_s * subscribers as f64,
            1e9 / per_s
        );
    }
}
