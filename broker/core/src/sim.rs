//! A simulation of many peers around one machine: joining, claiming, publishing valid,
//! duplicate, stale, forged and malformed frames, leaving and timing out, with the machine's
//! invariants checked after every step. Compiled for the crate's tests and, with the `sim`
//! feature, for the fuzz target that drives it from arbitrary bytes.
//!
//! Owns: `Simulation`, generic over `Choices`, where every decision comes from (a seeded
//! `StdRng` in the seeded test, fuzz input in the fuzz target), and the invariants: nothing
//! forged, malformed or unaccepted is delivered, nothing twice, nothing echoed (R25), only
//! to live streams of the cohort; history backlogs (D11) hold only frames accepted before
//! them, and every stream receives its DATA (backlogs and live deliveries together) in
//! acceptance order, none twice: a backlog comes before the live frames that follow its
//! entry into the fan-out set, and nothing is lost or duplicated at that seam (a stream that
//! entered with a backlog gets every later DATA of other identities while it stays in the
//! set); history rings stay
//! within their bounds; only OK, FULL and REJECTED are sent (R5); every counter
//! equals the events it counts; every bound holds (R29, R30, R31, R33); timers are never in
//! the past and stay bounded; and **exactly one `Consumed` per frame fed** (the read-window
//! credit the I/O layer hands back: never more than fed while the stream lives, and at the
//! end every fed frame consumed).
//! Never does: compute signatures. Chunks carry a dummy signature and an oracle plays the
//! verification pool, answering from what the simulation knows it signed (genuine) or
//! forged, in any order and batches. Everything else (ids, challenges, cursors, rosters) is
//! real.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use bps_proto::{
    Ack, Address, Binding, Broadcast, Frame, Hash, Kind, Spec, Status, decode_ack, encode_frame,
    encode_roster, feed_id, session_chunk_id, soc_address,
};
use bps_verify::{Expect, SocError, Verified, VerifyError, VerifyRequest};
use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{
    Action, Arrival, CloseReason, ClosedBy, Counter, Delivered, Machine, Millis, PeerId,
    PeerLedger, ProtocolConfig, StreamId, Targets, Ticket, WriteNotice,
};

/// Where the simulation's decisions come from.
pub trait Choices {
    /// A number in `0..bound` (`bound >= 1`).
    fn below(&mut self, bound: u64) -> u64;

    /// True in about `percent` of 100 calls.
    fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A number in `low..high` (`low < high`).
    fn range(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low)
    }
}

impl Choices for StdRng {
    fn below(&mut self, bound: u64) -> u64 {
        self.random_range(0..bound)
    }
}

/// Choices read from fuzz input, two bytes per decision; once the input is used up every
/// choice is 0 and `exhausted` says so (the fuzz target then stops stepping).
#[derive(Debug)]
pub struct InputChoices<'a> {
    input: &'a [u8],
}

impl<'a> InputChoices<'a> {
    /// Choices from `input`.
    #[must_use]
    pub fn new(input: &'a [u8]) -> Self {
        InputChoices { input }
    }

    /// Whether every byte has been used.
    #[must_use]
    pub fn exhausted(&self) -> bool {
        self.input.is_empty()
    }
}

impl Choices for InputChoices<'_> {
    fn below(&mut self, bound: u64) -> u64 {
        let take = self.input.len().min(2);
        let (head, rest) = self.input.split_at(take);
        self.input = rest;
        let value = head
            .iter()
            .fold(0_u64, |value, byte| (value << 8) | u64::from(*byte));
        value % bound
    }
}

fn body_of(frame: &Bytes) -> Bytes {
    Frame::parse_exact(frame.clone(), usize::MAX)
        .expect("the machine sends whole frames")
        .body()
}

fn framed(body: &Bytes) -> Frame {
    let mut encoded = BytesMut::new();
    prost::encoding::encode_varint(body.len() as u64, &mut encoded);
    encoded.extend_from_slice(body);
    Frame::parse_exact(encoded.freeze(), usize::MAX).expect("one whole frame")
}

const PEERS: u16 = 2_000;
const ADDRESSES: u8 = 12;
/// DATA payload sizes, so that history rings meet their byte bound as well as their frame
/// bound.
const DATA_PAYLOAD_BYTES: Range<u64> = 4..1_200;

fn config() -> ProtocolConfig {
    ProtocolConfig {
        streams_per_cohort_max: 6,
        pending_streams_per_cohort_max: 4,
        cohorts_max: 9,
        cohorts_per_peer_max: 3,
        streams_per_peer_per_cohort_max: 2,
        publisher_streams_per_address_max: 2,
        // Large enough that nothing is evicted: then no frame may ever be delivered twice.
        dedup_window_entries: 1 << 20,
        cursors_per_cohort_max: 64,
        claim_deadline_ms: 20_000,
        inactivity_deadline_ms: 60_000,
        revocation_grace_ms: 1_000,
        blocklist_violation_ms: 5_000,
        blocklist_claim_timeout_ms: 2_000,
        frames_in_flight_per_stream_max: 4,
        dropped_frames_per_stream_per_s_max: 3,
        history_frames_max: 12,
        // The least allowed (the largest frame read): a dozen of the larger DATA fill it.
        history_bytes_max: bps_proto::FRAME_BYTES_MAX_DEFAULT + 2,
        ..ProtocolConfig::default()
    }
}

fn address(n: u8) -> Address {
    [n; 20]
}

fn specs() -> Vec<Spec> {
    let admin = Some(address(1));
    let base = Spec {
        topic: [0; 32],
        binding: Binding::FeedTopic,
        admin,
        all: false,
        history: false,
        closed: false,
    };
    vec![
        Spec {
            topic: [1; 32],
            ..base
        },
        Spec {
            topic: [2; 32],
            closed: true,
            ..base
        },
        Spec {
            topic: [3; 32],
            binding: Binding::Mnemonic,
            all: true,
            ..base
        },
        Spec {
            topic: [4; 32],
            admin: None,
            binding: Binding::Mnemonic,
            ..base
        },
        Spec {
            topic: [5; 32],
            admin: None,
            ..base
        },
        // D11: the open, closed, ALL and an implicit shape again, with history.
        Spec {
            topic: [6; 32],
            history: true,
            ..base
        },
        Spec {
            topic: [7; 32],
            closed: true,
            history: true,
            ..base
        },
        Spec {
            topic: [8; 32],
            binding: Binding::Mnemonic,
            all: true,
            history: true,
            ..base
        },
        Spec {
            topic: [9; 32],
            admin: None,
            binding: Binding::Mnemonic,
            history: true,
            ..base
        },
    ]
}

/// What the simulation knows about one stream.
#[derive(Debug)]
struct SimStream {
    spec: usize,
    addr: Address,
    challenge: Option<Hash>,
    /// The machine has not closed it and the simulation has not reported it closed.
    live: bool,
    next_index: u64,
    /// The last Broadcast body this stream sent, to resend as a duplicate.
    last_body: Option<Bytes>,
    /// DATA bodies it received (backlogs and live deliveries).
    received: HashSet<Bytes>,
    /// The acceptance position of the last DATA it received whose position is known.
    last_position: Option<u64>,
    /// It received a backlog and no ROSTER has been delivered in its cohort since: it is in
    /// the fan-out set (short of closing, only a roster moves a stream out of it), so every
    /// later DATA of another identity must reach it (nothing lost at the seam).
    entered_by_backlog: bool,
}

/// The attached streams, for picking one at random in O(1).
#[derive(Debug, Default)]
struct LiveSet {
    ids: Vec<StreamId>,
    positions: HashMap<StreamId, usize>,
}

impl LiveSet {
    fn insert(&mut self, stream: StreamId) {
        self.positions.insert(stream, self.ids.len());
        self.ids.push(stream);
    }

    fn remove(&mut self, stream: StreamId) {
        let Some(position) = self.positions.remove(&stream) else {
            return;
        };
        self.ids.swap_remove(position);
        if let Some(moved) = self.ids.get(position) {
            self.positions.insert(*moved, position);
        }
    }
}

#[derive(Debug, Default)]
struct Observed {
    acks_ok: u64,
    acks_full: u64,
    acks_rejected: u64,
    closes_blocklisted: u64,
    verifies: u64,
    blocklists: u64,
    deliveries: u64,
    claim_timeouts: u64,
    superseded: u64,
    violations: u64,
    queue_resets: u64,
    drop_rate_resets: u64,
    history_served: u64,
}

/// The peers, the machine and what the simulation knows; see the module documentation.
#[derive(Debug)]
pub struct Simulation<C: Choices> {
    rng: C,
    machine: Machine,
    ledger: Arc<PeerLedger>,
    config: ProtocolConfig,
    specs: Vec<Spec>,
    now: Millis,
    armed: Option<Millis>,
    streams: HashMap<StreamId, SimStream>,
    live: LiveSet,
    next_stream: u64,
    /// Frames fed and not yet consumed, per stream.
    held: HashMap<StreamId, usize>,
    /// Chunks the simulation "signed": chunk -> owner. Anything else is forged.
    genuine: HashMap<Bytes, Address>,
    /// The stream each fed Broadcast body came from.
    sender: HashMap<Bytes, StreamId>,
    /// DATA bodies delivered live, with their acceptance position (the machine delivers a
    /// DATA when it accepts it, so live deliveries give the acceptance order).
    delivered: HashMap<Bytes, u64>,
    /// DATA bodies first seen in a backlog: accepted while nobody else received them, so
    /// their position is unknown, and they must never be delivered live afterwards.
    backlog_only: HashSet<Bytes>,
    verifications: Vec<(Ticket, VerifyRequest)>,
    notices: Vec<(StreamId, WriteNotice)>,
    observed: Observed,
    /// Makes every chunk distinct unless a step resends one on purpose.
    next_tag: u64,
}

impl<C: Choices> Simulation<C> {
    /// A machine with no cohorts; `choices` decides every step, `seed` makes the challenges.
    pub fn new(choices: C, seed: u64) -> Simulation<C> {
        let config = config();
        let ledger = Arc::new(PeerLedger::new(&config));
        let machine = Machine::new(
            config.clone(),
            Arc::clone(&ledger),
            StdRng::seed_from_u64(seed ^ 0x5eed),
        );
        Simulation {
            rng: choices,
            machine,
            ledger,
            config,
            specs: specs(),
            now: Millis(0),
            armed: None,
            streams: HashMap::new(),
            live: LiveSet::default(),
            next_stream: 0,
            held: HashMap::new(),
            genuine: HashMap::new(),
            sender: HashMap::new(),
            delivered: HashMap::new(),
            backlog_only: HashSet::new(),
            verifications: Vec::new(),
            notices: Vec::new(),
            observed: Observed::default(),
            next_tag: 0,
        }
    }

    /// Verifications the machine asked for and the simulation has not answered yet.
    #[must_use]
    pub fn verifications_pending(&self) -> usize {
        self.verifications.len()
    }

    /// The choice source (the fuzz target asks it whether its input is used up).
    pub fn choices(&self) -> &C {
        &self.rng
    }

    /// One random input to the machine, then every invariant.
    pub fn step(&mut self) {
        match self.rng.below(100) {
            0..20 => self.join(),
            20..65 => self.publish(),
            65..82 => self.answer_verifications(),
            82..87 => self.close(),
            87..92 => self.write_notices(),
            _ => self.advance_time(),
        }
        self.check();
    }

    fn join(&mut self) {
        let [high, low] = u16::try_from(self.rng.range(1, u64::from(PEERS) + 1))
            .expect("a u16 peer")
            .to_be_bytes();
        let peer = PeerId::of(std::net::IpAddr::from([10, 1, high, low]));
        let stream = StreamId::new(u8::from(self.rng.percent(50)), self.next_stream);
        self.next_stream += 1;
        let spec = self.pick(self.specs.len());
        let addr = if self.rng.percent(25) {
            address(1)
        } else {
            self.member_address()
        };
        let body = if self.rng.percent(3) {
            Bytes::from_static(&[0x0a, 0x7f])
        } else {
            Bytes::from(self.specs[spec].to_join(&addr).encode_to_vec())
        };
        self.streams.insert(
            stream,
            SimStream {
                spec,
                addr,
                challenge: None,
                live: true,
                next_index: 0,
                last_body: None,
                received: HashSet::new(),
                last_position: None,
                entered_by_backlog: false,
            },
        );
        self.machine.on_join(
            self.now,
            stream,
            Arrival::declared(peer, "tcp"),
            framed(&body),
        );
        self.drain();
        let attached = self
            .streams
            .get(&stream)
            .is_some_and(|s| s.live && s.challenge.is_some());
        if attached {
            self.live.insert(stream);
        } else {
            self.streams.remove(&stream);
        }
    }

    /// An index in `0..len` (`len >= 1`).
    fn pick(&mut self, len: usize) -> usize {
        usize::try_from(self.rng.below(len as u64)).expect("below a usize")
    }

    fn pick_live(&mut self) -> Option<StreamId> {
        if self.live.ids.is_empty() {
            return None;
        }
        let position = self.pick(self.live.ids.len());
        Some(self.live.ids[position])
    }

    fn chunk(&mut self, id: Hash, span: u64, payload: &[u8], owner: Option<Address>) -> Bytes {
        let mut chunk = BytesMut::with_capacity(105 + payload.len());
        chunk.put_slice(&id);
        // A dummy signature whose last bytes are a tag, so that every chunk is distinct.
        chunk.put_slice(&[0x1b; 57]);
        self.next_tag += 1;
        chunk.put_u64(self.next_tag);
        chunk.put_u64_le(span);
        chunk.put_slice(payload);
        let chunk = chunk.freeze();
        if let Some(owner) = owner {
            self.genuine.insert(chunk.clone(), owner);
        }
        chunk
    }

    fn publish(&mut self) {
        let Some(stream_id) = self.pick_live() else {
            return;
        };
        if self.held.get(&stream_id).copied().unwrap_or(0)
            >= self.config.frames_in_flight_per_stream_max
        {
            return;
        }
        let stream = &self.streams[&stream_id];
        let (addr, challenge, spec) = (
            stream.addr,
            stream.challenge.expect("attached"),
            self.specs[stream.spec],
        );
        let forged = self.rng.percent(5);
        let owner = (!forged).then_some(addr);
        let roll = self.rng.below(100);
        let body = if spec.admin.is_none() {
            self.implicit_body(stream_id, &spec, roll, owner)
        } else {
            self.session_body(stream_id, &spec, (challenge, roll), owner)
        };
        let body = if self.rng.percent(1) {
            Bytes::from_static(&[0xff, 0x01])
        } else {
            body
        };
        self.streams.get_mut(&stream_id).expect("picked").last_body = Some(body.clone());
        self.sender.entry(body.clone()).or_insert(stream_id);
        *self.held.entry(stream_id).or_insert(0) += 1;
        self.machine.on_frame(self.now, stream_id, framed(&body));
        self.drain();
    }

    /// Implicit: DATA with the binding's id; sometimes a duplicate of an earlier frame.
    fn implicit_body(
        &mut self,
        stream_id: StreamId,
        spec: &Spec,
        roll: u64,
        owner: Option<Address>,
    ) -> Bytes {
        if roll < 10
            && let Some(old) = self.streams[&stream_id].last_body.clone()
        {
            return old;
        }
        let index = self.rng.below(1_000);
        let id = if spec.binding == Binding::FeedTopic {
            feed_id(spec.topic, index)
        } else {
            let mut id = [0; 32];
            id[..8].copy_from_slice(&self.rng.below(u64::MAX).to_be_bytes());
            id
        };
        let payload = self.data_payload();
        let soc = self.chunk(id, payload.len() as u64, &payload, owner);
        Bytes::from(
            Broadcast {
                soc,
                kind: Kind::Data as i32,
                challenge: Bytes::new(),
                index,
            }
            .encode_to_vec(),
        )
    }

    /// A session-salted frame of any kind (explicit and ALL cohorts): sometimes below the
    /// cursor, with a wrong challenge or of an unknown kind.
    fn session_body(
        &mut self,
        stream_id: StreamId,
        spec: &Spec,
        (challenge, roll): (Hash, u64),
        owner: Option<Address>,
    ) -> Bytes {
        let (kind, payload) = self.session_kind(roll);
        let index = match kind {
            Kind::Eos => 0,
            _ if self.rng.percent(20) => {
                let next = self.streams[&stream_id].next_index;
                self.rng.below(next + 1)
            }
            _ => {
                let stream = self.streams.get_mut(&stream_id).expect("picked");
                stream.next_index += self.rng.range(1, 3);
                stream.next_index
            }
        };
        let wrong_challenge = self.rng.percent(3);
        let challenge = if wrong_challenge {
            [0xee; 32]
        } else {
            challenge
        };
        let id = session_chunk_id(kind, spec.topic, challenge, index);
        let soc = self.chunk(id, payload.len() as u64, &payload, owner);
        let kind = if self.rng.percent(2) { 9 } else { kind as i32 };
        Bytes::from(
            Broadcast {
                soc,
                kind,
                challenge: Bytes::copy_from_slice(&challenge),
                index,
            }
            .encode_to_vec(),
        )
    }

    /// The kind and payload of a session frame by `roll`: mostly DATA, some AUTH, ROSTER
    /// (sometimes undecodable) and a rare EOS.
    fn session_kind(&mut self, roll: u64) -> (Kind, Vec<u8>) {
        match roll {
            0..60 => (Kind::Data, self.data_payload()),
            60..70 => (Kind::Auth, Vec::new()),
            70..85 => {
                let count = self.rng.below(4);
                let roster: Vec<Address> = (0..count).map(|_| self.member_address()).collect();
                (
                    Kind::Roster,
                    if self.rng.percent(10) {
                        vec![0x0a, 1, 7]
                    } else {
                        encode_roster(&roster)
                    },
                )
            }
            85..87 => (Kind::Eos, Vec::new()),
            _ => (Kind::Data, self.data_payload()),
        }
    }

    /// Any address but the admin's.
    fn member_address(&mut self) -> Address {
        address(
            2 + u8::try_from(self.rng.below(u64::from(ADDRESSES) - 1)).expect("an address byte"),
        )
    }

    fn data_payload(&mut self) -> Vec<u8> {
        let bytes = self
            .rng
            .range(DATA_PAYLOAD_BYTES.start, DATA_PAYLOAD_BYTES.end);
        vec![b'd'; usize::try_from(bytes).expect("a small payload")]
    }

    fn answer_verifications(&mut self) {
        let count = self.pick(self.verifications.len() + 1);
        for _ in 0..count {
            let position = self.pick(self.verifications.len());
            self.answer_verification(position);
        }
    }

    /// Answers every outstanding verification, oldest first: at the end the choices may
    /// be used up (fuzz input), and a choice of "none this time" must not loop forever.
    fn answer_every_verification(&mut self) {
        while !self.verifications.is_empty() {
            self.answer_verification(0);
        }
    }

    fn answer_verification(&mut self, position: usize) {
        let (ticket, request) = self.verifications.swap_remove(position);
        let id: Hash = request.chunk[..32].try_into().expect("chunk has an id");
        let result = match (self.genuine.get(&request.chunk), request.expect) {
            (Some(owner), Expect::At { owner: expected }) if *owner == expected => {
                Ok(verified(id, *owner))
            }
            (Some(owner), Expect::Implicit { .. } | Expect::Recover) => Ok(verified(id, *owner)),
            _ => Err(VerifyError::Soc(SocError::TooShort { len: 0, min: 105 })),
        };
        self.machine.on_verified(self.now, ticket, result);
        self.drain();
    }

    fn close(&mut self) {
        let Some(stream_id) = self.pick_live() else {
            return;
        };
        let by = match self.rng.below(3) {
            0 => ClosedBy::Peer,
            1 => ClosedBy::Io,
            _ => {
                self.observed.queue_resets += 1;
                ClosedBy::QueueOverflow
            }
        };
        self.streams.get_mut(&stream_id).expect("picked").live = false;
        self.live.remove(stream_id);
        self.machine.on_closed(self.now, stream_id, by);
        self.drain();
    }

    fn write_notices(&mut self) {
        for (stream, notice) in std::mem::take(&mut self.notices) {
            self.machine.on_written(self.now, stream, notice);
        }
        self.drain();
    }

    fn advance_time(&mut self) {
        self.now = self.now.plus_ms(self.rng.below(8_000));
        if self.armed.is_some_and(|armed| armed <= self.now) || self.rng.percent(10) {
            if self.armed.is_some_and(|armed| armed <= self.now) {
                self.armed = None;
            }
            self.machine.on_tick(self.now);
            self.drain();
        }
    }

    fn drain(&mut self) {
        let mut actions = Vec::new();
        self.machine.drain_actions(&mut actions);
        for action in actions {
            self.observe(action);
        }
    }

    fn observe(&mut self, action: Action) {
        match action {
            Action::Send {
                stream,
                frame,
                notice,
            } => self.observe_send(stream, &frame, notice),
            Action::Deliver { frame, targets, .. } => self.observe_deliver(&frame, &targets),
            Action::Backlog { stream, frames } => self.observe_backlog(stream, &frames),
            Action::Verify { ticket, request } => {
                self.observed.verifies += 1;
                self.verifications.push((ticket, request));
            }
            Action::Consumed { stream } => {
                let held = self
                    .held
                    .get_mut(&stream)
                    .expect("Consumed for a stream that sent frames");
                assert!(*held > 0, "more Consumed than frames");
                *held -= 1;
            }
            Action::Close { stream, reason } => self.observe_close(stream, &reason),
            Action::Blocklist { .. } => self.observed.blocklists += 1,
            Action::Relayed { .. } => panic!("the simulation posts no service chunk (W5)"),
            Action::OpenUpstream { .. }
            | Action::DropUpstream { .. }
            | Action::OpenSplice { .. } => {
                panic!("the simulation runs no edge (ProtocolConfig::edge is None)")
            }
            Action::ArmTimer { at } => {
                assert!(at >= self.now, "a timer in the past");
                self.armed = Some(self.armed.map_or(at, |armed| armed.min(at)));
            }
        }
    }

    /// A stream's first Send is its canonical Ack (R5); any later one a delivery.
    fn observe_send(&mut self, stream: StreamId, frame: &Bytes, notice: Option<WriteNotice>) {
        let sim = self
            .streams
            .get_mut(&stream)
            .expect("Send to a stream that joined");
        assert!(sim.live, "Send to a closed stream");
        if sim.challenge.is_none() {
            let ack = decode_ack(body_of(frame)).expect("the first frame is an Ack");
            match Status::try_from(ack.status) {
                Ok(Status::Ok) => {
                    self.observed.acks_ok += 1;
                    sim.challenge = Some(
                        ack.challenge
                            .as_ref()
                            .try_into()
                            .expect("32-byte challenge"),
                    );
                }
                Ok(Status::Full) => self.observed.acks_full += 1,
                Ok(Status::Rejected) => self.observed.acks_rejected += 1,
                _ => panic!("only OK, FULL and REJECTED are sent (R5)"),
            }
            assert_eq!(
                *frame,
                encode_frame(&Ack {
                    status: ack.status,
                    challenge: ack.challenge.clone()
                }),
                "a canonical Ack"
            );
        } else {
            self.observed.deliveries += 1;
            self.check_published(frame, &[stream], Receipt::Live);
        }
        if let Some(notice) = notice {
            self.notices.push((stream, notice));
        }
    }

    /// A fan-out delivery: well-formed target lists, then what each receiver got.
    fn observe_deliver(&mut self, frame: &Bytes, targets: &Targets) {
        assert!(!targets.is_empty(), "an empty delivery");
        for list in [&targets.all, &targets.except] {
            assert!(
                list.windows(2).all(|pair| pair[0] < pair[1]),
                "target lists sorted and unique"
            );
        }
        assert!(
            targets
                .except
                .iter()
                .all(|stream| targets.all.binary_search(stream).is_ok()),
            "every exclusion is a member"
        );
        self.observed.deliveries += targets.len() as u64;
        let receivers: Vec<StreamId> = targets.iter().collect();
        self.check_published(frame, &receivers, Receipt::Live);
        self.check_seam(frame, &receivers);
    }

    /// D11: a history backlog, only in a history cohort.
    fn observe_backlog(&mut self, stream: StreamId, frames: &[Delivered]) {
        assert!(!frames.is_empty(), "an empty backlog");
        let spec = self.streams[&stream].spec;
        assert!(
            self.specs[spec].history,
            "a backlog outside a history cohort"
        );
        self.observed.deliveries += frames.len() as u64;
        self.observed.history_served += frames.len() as u64;
        for delivered in frames {
            self.check_published(&delivered.frame, &[stream], Receipt::Backlog);
        }
        self.streams
            .get_mut(&stream)
            .expect("a backlog to a stream that joined")
            .entered_by_backlog = true;
    }

    fn observe_close(&mut self, stream: StreamId, reason: &CloseReason) {
        let sim = self
            .streams
            .get_mut(&stream)
            .expect("Close of a stream that joined");
        assert!(sim.live, "Close of a stream already closed");
        sim.live = false;
        self.live.remove(stream);
        match reason {
            CloseReason::Blocklisted => self.observed.closes_blocklisted += 1,
            CloseReason::ClaimTimeout => self.observed.claim_timeouts += 1,
            CloseReason::Superseded => self.observed.superseded += 1,
            CloseReason::Violation(_) => self.observed.violations += 1,
            CloseReason::DropRate => self.observed.drop_rate_resets += 1,
            _ => {}
        }
    }

    /// Nothing forged, malformed or unaccepted is delivered, nothing twice, nothing echoed,
    /// and only to live streams of the publisher's cohort; every stream's DATA in acceptance
    /// order.
    fn check_published(&mut self, frame: &Bytes, targets: &[StreamId], receipt: Receipt) {
        let body = body_of(frame);
        let broadcast =
            bps_proto::decode_broadcast(body.clone()).expect("a delivery is a Broadcast");
        let owner = *self
            .genuine
            .get(&broadcast.soc)
            .expect("a delivered chunk is genuine");
        let publisher = self.sender[&body];
        let publisher_spec = self.streams[&publisher].spec;
        assert_eq!(
            self.streams[&publisher].addr, owner,
            "delivered under its stream's identity"
        );
        let is_data = broadcast.kind == Kind::Data as i32;
        assert!(
            is_data || receipt == Receipt::Live,
            "a backlog holds DATA only"
        );
        let position = if is_data {
            self.data_position(&body, receipt)
        } else {
            None
        };
        for target in targets {
            let sim = self.streams.get_mut(target).expect("a target joined");
            assert!(sim.live, "delivery to a closed stream");
            assert_eq!(sim.spec, publisher_spec, "delivery outside the cohort");
            assert_ne!(sim.addr, owner, "echo to the publishing identity (R25)");
            if !is_data {
                continue;
            }
            assert!(
                sim.received.insert(body.clone()),
                "a DATA frame reached one stream twice (backlog and live, or two backlogs)"
            );
            if let Some(position) = position {
                assert!(
                    sim.last_position.is_none_or(|last| last < position),
                    "a stream received DATA out of acceptance order (a backlog after live \
                     frames of the same entry, or out of order)"
                );
                sim.last_position = Some(position);
            }
        }
    }

    /// D11's seam: a live DATA reaches every stream that entered the fan-out set with a
    /// backlog and is still there, except the publishing identity's (R25); a live ROSTER may
    /// move streams out of the set, so it ends what is known of theirs.
    fn check_seam(&mut self, frame: &Bytes, receivers: &[StreamId]) {
        let body = body_of(frame);
        let broadcast =
            bps_proto::decode_broadcast(body.clone()).expect("a delivery is a Broadcast");
        let spec = self.streams[&self.sender[&body]].spec;
        let in_cohort = |sim: &SimStream| sim.live && sim.spec == spec && sim.entered_by_backlog;
        if broadcast.kind == Kind::Roster as i32 {
            for stream in &self.live.ids {
                let sim = self.streams.get_mut(stream).expect("a live stream joined");
                if in_cohort(sim) {
                    sim.entered_by_backlog = false;
                }
            }
            return;
        }
        if broadcast.kind != Kind::Data as i32 {
            return;
        }
        let owner = self.genuine[&broadcast.soc];
        for stream in &self.live.ids {
            let sim = &self.streams[stream];
            if in_cohort(sim) && sim.addr != owner {
                assert!(
                    receivers.contains(stream),
                    "a DATA accepted after a stream's backlog missed it (lost at the seam)"
                );
            }
        }
    }

    /// The acceptance position of a DATA body (`None` when it was accepted unobserved and is
    /// seen first in a backlog), checking that each is delivered live once at most and that a
    /// backlog never holds a frame accepted after it.
    fn data_position(&mut self, body: &Bytes, receipt: Receipt) -> Option<u64> {
        match receipt {
            Receipt::Live => {
                assert!(
                    !self.backlog_only.contains(body),
                    "a frame was in a backlog before it was accepted"
                );
                let position = self.delivered.len() as u64;
                assert!(
                    self.delivered.insert(body.clone(), position).is_none(),
                    "a DATA frame delivered twice"
                );
                Some(position)
            }
            Receipt::Backlog => {
                let position = self.delivered.get(body).copied();
                if position.is_none() {
                    self.backlog_only.insert(body.clone());
                }
                position
            }
        }
    }

    fn check(&mut self) {
        let totals = self.machine.counters();
        let totals = totals.totals();
        let observed = &self.observed;
        assert_eq!(totals.get(Counter::JoinsOk), observed.acks_ok);
        assert_eq!(totals.get(Counter::JoinsFull), observed.acks_full);
        assert_eq!(totals.get(Counter::JoinsRejected), observed.acks_rejected);
        assert_eq!(
            totals.get(Counter::JoinsBlocked),
            observed.closes_blocklisted
        );
        assert_eq!(totals.get(Counter::VerifyRequests), observed.verifies);
        assert_eq!(totals.get(Counter::Blocklisted), observed.blocklists);
        assert_eq!(totals.get(Counter::Deliveries), observed.deliveries);
        assert_eq!(totals.get(Counter::ClaimTimeout), observed.claim_timeouts);
        assert_eq!(totals.get(Counter::Superseded), observed.superseded);
        assert_eq!(
            totals.get(Counter::WrongStream)
                + totals.get(Counter::InvalidSoc)
                + totals.get(Counter::Malformed),
            observed.violations
        );
        assert_eq!(totals.get(Counter::QueueReset), observed.queue_resets);
        assert_eq!(
            totals.get(Counter::DropRateResets),
            observed.drop_rate_resets
        );
        assert_eq!(
            totals.get(Counter::HistoryFramesServed),
            observed.history_served
        );
        // Bounds and memory.
        let live = self.live.ids.len();
        assert_eq!(self.machine.stream_count(), live);
        assert!(self.machine.cohort_count() <= self.config.cohorts_max);
        assert_eq!(
            self.ledger.snapshot().cohorts_live,
            self.machine.cohort_count()
        );
        assert_eq!(
            self.machine.verifications_in_flight(),
            self.verifications.len()
        );
        assert!(self.machine.timers_queued() <= 2 * (live + self.machine.cohort_count()) + 64);
        if self.rng.percent(1) {
            self.check_snapshot();
        }
    }

    fn check_snapshot(&self) {
        for summary in self.machine.summaries(self.now) {
            let key = bps_proto::CohortKey::from_bytes(Bytes::from(
                hex::decode(&summary.key).expect("hex key"),
            ));
            let page = self
                .machine
                .cohort_streams(&key, (0, usize::MAX), self.now)
                .expect("a summarised cohort is live");
            let role = |name: &str| summary.streams[name];
            assert!(
                role("spectator") + role("silent") <= self.config.streams_per_cohort_max as u64,
                "R30"
            );
            assert!(role("pending") <= self.config.pending_streams_per_cohort_max as u64);
            assert!(summary.history_frames <= self.config.history_frames_max);
            assert!(summary.history_bytes <= self.config.history_bytes_max);
            assert!(summary.history || summary.history_frames == 0);
            assert_eq!(page.streams_total, page.streams.len());
            let mut per_peer: HashMap<PeerId, usize> = HashMap::new();
            let mut publishers: HashMap<&str, usize> = HashMap::new();
            for stream in &page.streams {
                *per_peer.entry(stream.peer).or_default() += 1;
                if stream.role == crate::Role::Publisher {
                    *publishers.entry(stream.addr.as_str()).or_default() += 1;
                }
            }
            assert!(
                per_peer
                    .values()
                    .all(|count| *count <= self.config.streams_per_peer_per_cohort_max),
                "R33"
            );
            assert!(
                publishers
                    .values()
                    .all(|count| *count <= self.config.publisher_streams_per_address_max),
                "R29"
            );
        }
    }

    /// Everyone leaves and every verification returns: nothing may be left behind.
    pub fn finish(&mut self) {
        self.answer_every_verification();
        while let Some(stream) = self.live.ids.last().copied() {
            self.streams.get_mut(&stream).expect("live").live = false;
            self.live.remove(stream);
            self.machine.on_closed(self.now, stream, ClosedBy::Peer);
            self.drain();
        }
        self.answer_every_verification();
        self.check();
        assert!(
            self.held.values().all(|held| *held == 0),
            "every frame consumed exactly once"
        );
        assert_eq!(self.machine.stream_count(), 0);
        assert_eq!(self.machine.cohort_count(), 0);
        assert_eq!(self.machine.verifications_in_flight(), 0);
        let ledger = self.ledger.snapshot();
        assert_eq!((ledger.cohorts_live, ledger.peers_attached), (0, 0));
        assert!(self.machine.counters().live_cohorts().is_empty());
    }
}

/// Counters a long enough run must have reached, or it did not exercise the machine.
pub const COUNTERS_REACHED: [Counter; 6] = [
    Counter::AcceptedData,
    Counter::Claims,
    Counter::CohortsReclaimedEos,
    Counter::ClaimTimeout,
    Counter::DropRateResets,
    Counter::HistoryFramesServed,
];

/// How a frame reached a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Receipt {
    /// A `Send` or `Deliver`, at acceptance (or a roster's first delivery).
    Live,
    /// A history backlog (D11).
    Backlog,
}

impl<C: Choices> Simulation<C> {
    /// The machine's counter totals.
    #[must_use]
    pub fn totals(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.machine.counters().totals().snapshot()
    }
}

fn verified(id: Hash, owner: Address) -> Verified {
    let address = soc_address(id, owner);
    // The simulation checks the machine, not the chunk: the wrapped address and key are
    // carried to deliveries but never looked at by the machine.
    Verified {
        owner,
        address,
        dedup_key: address,
        wrapped: [0; 32],
        public_key: [0; 33],
    }
}
