//! A small driver for the machine: real keys, real signed chunks, real verification.
//!
//! Owns: `Rig` (a machine, its ledger and the clock), `Client` (a key with its stream, peer
//! and challenge) and helpers that build the actions a test expects.
//! Never does: anything the machine should do. `Rig::publish` runs the `Verify` actions
//! through `bps_verify::verify` synchronously and feeds the results back, exactly as the
//! verification pool would, and checks after every input that no frame is consumed twice.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use bps_proto::{
    Ack, Address, Broadcast, Frame, Hash, Kind, Spec, Status, encode_frame, encode_roster,
    next_frame,
};
use bps_verify::{SignedFrame, SigningKey, sign_broadcast};
use bytes::{Bytes, BytesMut};
use prost::Message;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::{
    Action, Arrival, ChunkFacts, CloseReason, Counter, Machine, Millis, PeerId, PeerLedger,
    ProtocolConfig, StreamId, Targets, Violation, WriteNotice,
};

/// The peer at 10.0.0.`n`.
pub fn peer(n: u8) -> PeerId {
    PeerId::of(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n)))
}

/// Stream `n` of core 0.
pub fn sid(n: u64) -> StreamId {
    StreamId::new(0, n)
}

/// A deterministic key (seed bytes all `n`).
pub fn key(n: u8) -> SigningKey {
    SigningKey::from_bytes(&[n; 32]).expect("a small non-zero scalar is a valid key")
}

/// The body of an encoded frame (its varint length removed).
pub fn body_of(frame: &Bytes) -> Bytes {
    let mut buf = BytesMut::from(&frame[..]);
    next_frame(&mut buf, 1 << 20)
        .expect("valid frame")
        .expect("complete frame")
}

/// An encoded frame (varint length and body) as the machine takes it.
pub fn frame(encoded: &Bytes) -> Frame {
    Frame::parse_exact(encoded.clone(), 1 << 20).expect("one whole frame")
}

/// A raw body (not necessarily valid protobuf) framed with its varint length.
pub fn framed_body(body: &[u8]) -> Frame {
    let mut encoded = BytesMut::new();
    prost::encoding::encode_varint(body.len() as u64, &mut encoded);
    encoded.extend_from_slice(body);
    frame(&encoded.freeze())
}

/// A delivery with its exclusions applied: the form `Rig::drain` gives every `Deliver`,
/// so that a test states the streams that receive a frame and nothing else.
pub fn expanded(targets: &Targets) -> Targets {
    Targets {
        all: targets.iter().collect(),
        except: Arc::from([]),
    }
}

/// The explicit spec of a test cohort on topic `[topic; 32]` with `admin`.
pub fn explicit(topic: u8, admin: &SigningKey, closed: bool) -> Spec {
    Spec {
        topic: [topic; 32],
        binding: bps_proto::Binding::FeedTopic,
        admin: Some(admin.address()),
        all: false,
        history: false,
        closed,
    }
}

/// An ALL + MNEMONIC spec.
pub fn all(topic: u8, admin: &SigningKey) -> Spec {
    Spec {
        topic: [topic; 32],
        binding: bps_proto::Binding::Mnemonic,
        admin: Some(admin.address()),
        all: true,
        history: false,
        closed: false,
    }
}

/// An implicit spec.
pub fn implicit(topic: Hash, binding: bps_proto::Binding) -> Spec {
    Spec {
        topic,
        binding,
        admin: None,
        all: false,
        history: false,
        closed: false,
    }
}

/// The encoded body of a Join for `spec` declaring `addr`.
pub fn join_body(spec: &Spec, addr: &Address) -> Bytes {
    Bytes::from(spec.to_join(addr).encode_to_vec())
}

pub fn ack_ok(stream: StreamId, challenge: &Hash) -> Action {
    let frame = encode_frame(&Ack {
        status: Status::Ok as i32,
        challenge: Bytes::copy_from_slice(challenge),
    });
    Action::Send {
        stream,
        frame,
        notice: None,
    }
}

pub fn ack(stream: StreamId, status: Status) -> Action {
    Action::Send {
        stream,
        frame: encode_frame(&Ack {
            status: status as i32,
            challenge: Bytes::new(),
        }),
        notice: None,
    }
}

pub fn send(stream: StreamId, frame: &Bytes) -> Action {
    Action::Send {
        stream,
        frame: frame.clone(),
        notice: None,
    }
}

pub fn send_noticed(stream: StreamId, frame: &Bytes, notice: u64) -> Action {
    Action::Send {
        stream,
        frame: frame.clone(),
        notice: Some(WriteNotice(notice)),
    }
}

/// The delivery of `frame` to `targets`, with the facts recovered from its chunk here (by
/// full recovery, independently of the verifier's paths).
pub fn deliver(frame: &Bytes, targets: &[StreamId]) -> Action {
    Action::Deliver {
        frame: frame.clone(),
        targets: Targets {
            all: targets.into(),
            except: Arc::from([]),
        },
        facts: Arc::new(facts_of(frame)),
    }
}

fn facts_of(frame: &Bytes) -> ChunkFacts {
    let mut buffer = BytesMut::from(&frame[..]);
    let body = next_frame(&mut buffer, usize::MAX)
        .expect("a delivered frame is delimited")
        .expect("a delivered frame is whole");
    let broadcast = Broadcast::decode(body).expect("a delivered frame is a Broadcast");
    let recovered = bps_verify::validate_soc(&broadcast.soc).expect("a delivered chunk is valid");
    ChunkFacts {
        owner: recovered.owner,
        address: recovered.address,
        wrapped: recovered.cac_address,
        public_key: recovered.public_key,
    }
}

pub fn consumed(stream: StreamId) -> Action {
    Action::Consumed { stream }
}

pub fn close(stream: StreamId, reason: CloseReason) -> Action {
    Action::Close { stream, reason }
}

pub fn violation(stream: StreamId, violation: Violation) -> Action {
    Action::Close {
        stream,
        reason: CloseReason::Violation(violation),
    }
}

pub fn blocklist(peer: PeerId, until: u64) -> Action {
    Action::Blocklist {
        peer,
        until: Millis(until),
    }
}

pub fn arm(at: u64) -> Action {
    Action::ArmTimer { at: Millis(at) }
}

/// A participant: a key, the stream it joined on, its peer address and its challenge.
#[derive(Debug)]
pub struct Client {
    pub key: SigningKey,
    pub addr: Address,
    pub stream: StreamId,
    pub peer: PeerId,
    pub challenge: Hash,
    pub topic: Hash,
}

impl Client {
    /// A signed Broadcast of `kind` at `index` under this stream's challenge.
    pub fn sign(&self, kind: Kind, index: u64, payload: &[u8]) -> SignedFrame {
        sign_broadcast(
            &self.key,
            kind,
            &self.topic,
            &self.challenge,
            index,
            payload,
        )
    }

    pub fn data(&self, index: u64, payload: &[u8]) -> Bytes {
        self.sign(Kind::Data, index, payload).frame
    }

    pub fn auth(&self) -> Bytes {
        self.sign(Kind::Auth, 0, &[]).frame
    }

    pub fn roster(&self, index: u64, publishers: &[Address]) -> Bytes {
        self.sign(Kind::Roster, index, &encode_roster(publishers))
            .frame
    }

    pub fn eos(&self) -> Bytes {
        self.sign(Kind::Eos, 0, &[]).frame
    }
}

/// A machine under test with its clock.
#[derive(Debug)]
pub struct Rig {
    pub machine: Machine,
    pub ledger: Arc<PeerLedger>,
    pub now: Millis,
    /// Frames fed and not yet consumed, per stream.
    outstanding: HashMap<StreamId, usize>,
    /// Verifications run by `publish`.
    pub verifications: usize,
    /// Whether `drain` expands deliveries (see `expanded`); a test of the target lists
    /// themselves turns it off.
    pub expand: bool,
}

impl Rig {
    pub fn new() -> Rig {
        Rig::with_config(ProtocolConfig::default())
    }

    pub fn with_config(config: ProtocolConfig) -> Rig {
        let ledger = Arc::new(PeerLedger::new(&config));
        Rig::with_ledger(config, ledger, 7)
    }

    pub fn with_ledger(config: ProtocolConfig, ledger: Arc<PeerLedger>, seed: u64) -> Rig {
        let machine = Machine::new(config, Arc::clone(&ledger), StdRng::seed_from_u64(seed));
        Rig {
            machine,
            ledger,
            now: Millis(0),
            outstanding: HashMap::new(),
            verifications: 0,
            expand: true,
        }
    }

    /// Drains the machine, checking the `Consumed` bookkeeping; every `Deliver` comes back
    /// `expanded`.
    pub fn drain(&mut self) -> Vec<Action> {
        let mut actions = Vec::new();
        self.machine.drain_actions(&mut actions);
        for action in &mut actions {
            if let Action::Deliver { targets, .. } = action
                && self.expand
            {
                *targets = expanded(targets);
            }
        }
        for action in &actions {
            if let Action::Consumed { stream } = action {
                let held = self
                    .outstanding
                    .get_mut(stream)
                    .expect("Consumed for a frame never fed");
                assert!(
                    *held > 0,
                    "stream {stream} consumed more frames than it sent"
                );
                *held -= 1;
            }
        }
        actions
    }

    /// Whether every frame fed so far has been consumed.
    pub fn all_consumed(&self) -> bool {
        self.outstanding.values().all(|held| *held == 0)
    }

    pub fn count(&self, counter: Counter) -> u64 {
        self.machine.counters().totals().get(counter)
    }

    /// Feeds a raw Join body.
    pub fn join_raw(&mut self, peer: PeerId, stream: StreamId, body: Bytes) -> Vec<Action> {
        self.join_as(Arrival::declared(peer, "tcp"), stream, body)
    }

    /// Feeds a raw Join body of a stream that arrived as `arrival` says.
    pub fn join_as(&mut self, arrival: Arrival, stream: StreamId, body: Bytes) -> Vec<Action> {
        self.machine
            .on_join(self.now, stream, arrival, framed_body(&body));
        self.drain()
    }

    /// Joins `spec` as `key` and returns the client (challenge from the OK Ack, or zeros)
    /// with the actions.
    pub fn join(
        &mut self,
        key: SigningKey,
        spec: &Spec,
        stream: StreamId,
        peer: PeerId,
    ) -> (Client, Vec<Action>) {
        let addr = key.address();
        let actions = self.join_raw(peer, stream, join_body(spec, &addr));
        let challenge = actions
            .iter()
            .find_map(|action| match action {
                Action::Send {
                    stream: to, frame, ..
                } if *to == stream => {
                    let ack = bps_proto::decode_ack(body_of(frame)).ok()?;
                    (ack.status == Status::Ok as i32).then(|| {
                        <[u8; 32]>::try_from(ack.challenge.as_ref())
                            .expect("an OK Ack carries 32 bytes")
                    })
                }
                _ => None,
            })
            .unwrap_or([0; 32]);
        (
            Client {
                key,
                addr,
                stream,
                peer,
                challenge,
                topic: spec.topic,
            },
            actions,
        )
    }

    /// Joins and asserts the answer was OK; returns the client.
    pub fn joined(
        &mut self,
        key: SigningKey,
        spec: &Spec,
        stream: StreamId,
        peer: PeerId,
    ) -> Client {
        let (client, actions) = self.join(key, spec, stream, peer);
        assert!(
            actions.contains(&ack_ok(stream, &client.challenge)),
            "join was not OK: {actions:?}"
        );
        client
    }

    /// Feeds one frame (encoded, with its varint length) without running verifications.
    pub fn feed(&mut self, stream: StreamId, frame: &Bytes) -> Vec<Action> {
        *self.outstanding.entry(stream).or_insert(0) += 1;
        self.machine.on_frame(self.now, stream, self::frame(frame));
        self.drain()
    }

    /// Feeds a raw body (not necessarily a Broadcast).
    pub fn feed_body(&mut self, stream: StreamId, body: Bytes) -> Vec<Action> {
        *self.outstanding.entry(stream).or_insert(0) += 1;
        self.machine.on_frame(self.now, stream, framed_body(&body));
        self.drain()
    }

    /// Runs every `Verify` in `actions` (and in what they cause) through `bps_verify`;
    /// returns all resulting actions except the `Verify`s, in order.
    pub fn run_verifications(&mut self, actions: Vec<Action>) -> Vec<Action> {
        let mut out = Vec::new();
        let mut batch = actions;
        loop {
            let mut jobs = Vec::new();
            for action in batch {
                match action {
                    Action::Verify { ticket, request } => jobs.push((ticket, request)),
                    other => out.push(other),
                }
            }
            if jobs.is_empty() {
                return out;
            }
            batch = Vec::new();
            for (ticket, request) in jobs {
                self.verifications += 1;
                let result = bps_verify::verify(&request);
                self.machine.on_verified(self.now, ticket, result);
                batch.extend(self.drain());
            }
        }
    }

    /// Feeds a frame and runs its verification: every action but `Verify`, in order.
    pub fn publish(&mut self, stream: StreamId, frame: &Bytes) -> Vec<Action> {
        let actions = self.feed(stream, frame);
        self.run_verifications(actions)
    }

    /// Moves the clock to `now` and ticks.
    pub fn tick_at(&mut self, now: u64) -> Vec<Action> {
        self.now = Millis(now);
        self.machine.on_tick(self.now);
        self.drain()
    }

    pub fn written(&mut self, stream: StreamId, notice: u64) -> Vec<Action> {
        self.machine
            .on_written(self.now, stream, WriteNotice(notice));
        self.drain()
    }

    pub fn closed(&mut self, stream: StreamId, by: crate::ClosedBy) -> Vec<Action> {
        self.machine.on_closed(self.now, stream, by);
        self.drain()
    }

    /// The counter of the single live cohort with key `spec`.
    pub fn cohort_count(&self, spec: &Spec, counter: Counter) -> u64 {
        let key = spec.key().to_hex();
        self.machine
            .counters()
            .live_cohorts()
            .iter()
            .find(|cohort| cohort.key_hex() == key)
            .map_or(0, |cohort| cohort.counters().get(counter))
    }

    /// Stream ids per role name of the cohort with key `spec` (empty when it is gone).
    pub fn roles(&self, spec: &Spec) -> HashMap<&'static str, Vec<StreamId>> {
        let mut roles: HashMap<&'static str, Vec<StreamId>> = HashMap::new();
        if let Some(page) = self
            .machine
            .cohort_streams(&spec.key(), (0, usize::MAX), Millis(0))
        {
            for name in crate::Role::ALL.map(crate::Role::name) {
                roles.insert(name, Vec::new());
            }
            for stream in page.streams {
                roles.entry(stream.role.name()).or_default().push(stream.id);
            }
        }
        roles
    }

    /// The summary of the one live cohort.
    pub fn only_cohort(&self) -> crate::CohortSummary {
        let mut summaries = self.machine.summaries(Millis(0));
        assert_eq!(summaries.len(), 1, "one live cohort");
        summaries.remove(0)
    }

    /// The role of `stream` in the cohort of `spec`.
    pub fn role_of(&self, spec: &Spec, stream: StreamId) -> Option<&'static str> {
        self.roles(spec)
            .into_iter()
            .find(|(_, streams)| streams.contains(&stream))
            .map(|(role, _)| role)
    }
}
