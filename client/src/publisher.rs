//! The publishing side of one identity in one cohort: roles, the claim, index sequences and
//! signing (R7, R10, R11, R19–R23, R41, D3, D4).
//!
//! Owns: [`Publisher`], an I/O-free state machine. Per stream ([`Publisher::begin_session`])
//! it knows its role: under explicit authorship the admin's stream is pending and claims
//! at once with an AUTH at index 0 under its own challenge (D3: the claim may be any valid
//! frame, but bee insists on AUTH at 0 first, so we always send it); a non-admin stream
//! sends nothing until a roster naming it arrives ([`Publisher::on_roster`], R23), then
//! claims the same way, and stops when a later roster drops it (R24). Under ALL and
//! implicit authorship the stream publishes from the Join, with no claim (R10, R11).
//!
//! Indices: DATA and ROSTER each have their own sequence, starting where the caller says
//! ([`PublisherConfig`]); an index is bound to its publication when it is queued and never
//! given to another one. EOS is always index 0 (R21); the claim is AUTH 0 on every stream
//! (a new challenge makes it a new chunk). Nothing is persisted: a process that publishes
//! again in the same cohort must start above every index it used before (the `bps` CLI
//! starts at the current Unix time in milliseconds unless told otherwise), or its
//! publications are retransmits to the broker's and subscribers' cursors (R16, R27, R41).
//!
//! Signing: every chunk is signed when it is about to be written, under the current
//! stream's challenge (R41). A publication that was queued, or written but not known to be
//! delivered, when a stream was reset is signed again under the next stream's challenge,
//! with the same kind, index and payload, so the broker's cursor turns a copy it already
//! accepted into a harmless retransmit. Under implicit authorship there is no challenge and
//! the chunk carries the binding's own id (R11): FEED_TOPIC `feed_id(topic, index)` with
//! the frame's index set (D4), MNEMONIC `feed_id(topic, index)` with the index unset, ANCHOR
//! the caller's GSOC id, SOC_ID the topic, OWNER an id mined so that the chunk address is
//! within PO 16 of the topic.
//!
//! Never: reads a socket or a clock, verifies what it receives (the subscriber does and
//! hands verified rosters in), or retries (the caller reconnects with [`crate::backoff`]).

use std::collections::VecDeque;
use std::fmt;

use bps_proto::{
    Address, Authorship, Binding, Hash, Kind, Spec, encode_roster, feed_id, keccak256, soc_address,
};
use bps_verify::{
    CHUNK_SIZE, PO_MIN, PayloadTooLarge, SignedFrame, SigningKey, proximity, try_sign_broadcast,
    try_sign_implicit,
};
use bytes::Bytes;

/// Where the index sequences start, and the GSOC id for implicit ANCHOR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PublisherConfig {
    /// The first DATA index (also the first id index under implicit MNEMONIC, FEED_TOPIC and
    /// OWNER).
    pub data_index_start: u64,
    /// The first ROSTER index (the admin's).
    pub roster_index_start: u64,
    /// Implicit ANCHOR only: the chunk id, with keccak256(id ‖ address) = topic.
    pub anchor_id: Option<Hash>,
}

/// What this stream may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Must claim: the next frame is AUTH at index 0 (admin, or rostered after the roster).
    Pending,
    /// Explicit authorship, not the admin: nothing may be sent until a roster names us.
    AwaitingRoster,
    /// Publishes the queue.
    Publisher,
    /// A roster dropped us after we published: nothing more may be sent (R24).
    Revoked,
}

/// Why a key cannot publish in a cohort at all (checked once, by [`Publisher::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublisherError {
    /// Implicit OWNER: keccak256(address) is not the topic.
    OwnerNotTopic {
        /// The key's address.
        address: Address,
    },
    /// Implicit ANCHOR needs the GSOC id.
    AnchorWithoutId,
    /// Implicit ANCHOR: keccak256(id ‖ address) is not the topic.
    AnchorMismatch {
        /// The key's address.
        address: Address,
        /// The id given.
        id: Hash,
    },
    /// Implicit SOC_ID: keccak256(topic ‖ address) is too far from the topic.
    SocIdProximity {
        /// The key's address.
        address: Address,
        /// The proximity found.
        po: u8,
    },
}

impl fmt::Display for PublisherError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OwnerNotTopic { address } => write!(
                formatter,
                "binding OWNER needs topic = keccak256(owner); keccak256(0x{}) is {}",
                hex::encode(address),
                hex::encode(keccak256(address))
            ),
            Self::AnchorWithoutId => write!(
                formatter,
                "binding ANCHOR without admin needs the GSOC id (keccak256(id ‖ owner) = topic)"
            ),
            Self::AnchorMismatch { address, id } => write!(
                formatter,
                "binding ANCHOR: keccak256(id ‖ 0x{}) is {}, not the topic",
                hex::encode(address),
                hex::encode(soc_address(id, address))
            ),
            Self::SocIdProximity { address, po } => write!(
                formatter,
                "binding SOC_ID: keccak256(topic ‖ 0x{}) has proximity {po} to the topic, \
                 below {PO_MIN}; this key cannot publish here (mine one that fits)",
                hex::encode(address)
            ),
        }
    }
}

impl std::error::Error for PublisherError {}

/// Why one publication cannot be queued or signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishError {
    /// More than 4096 bytes of payload.
    PayloadTooLarge(PayloadTooLarge),
    /// ROSTER and EOS are the admin's (R19).
    NotAdmin,
    /// ROSTER and EOS need an admin; implicit cohorts have none.
    NoAdmin,
    /// The sequence reached 2^64 − 1, which bee rejects (R18).
    IndexExhausted {
        /// The feed.
        kind: Kind,
    },
}

impl fmt::Display for PublishError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PayloadTooLarge(error) => write!(formatter, "{error}"),
            Self::NotAdmin => write!(formatter, "only the admin publishes ROSTER and EOS"),
            Self::NoAdmin => write!(
                formatter,
                "ROSTER and EOS need an admin (implicit authorship has none)"
            ),
            Self::IndexExhausted { kind } => write!(
                formatter,
                "the {} index sequence is exhausted",
                kind.as_str_name()
            ),
        }
    }
}

impl std::error::Error for PublishError {}

/// A signed frame ready for the stream, with what the CLI reports about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// The frame's kind.
    pub kind: Kind,
    /// The frame's index as sent (`None`: unset, implicit bindings other than FEED_TOPIC).
    pub index: Option<u64>,
    /// The chunk id.
    pub id: Hash,
    /// The SOC address keccak256(id ‖ owner).
    pub address: Hash,
    /// Payload bytes in the chunk.
    pub payload_len: usize,
    /// The chunk, the `Broadcast` and its encoded frame.
    pub signed: SignedFrame,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Queued {
    kind: Kind,
    index: u64,
    payload: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Claim,
    Head,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stream {
    challenge: Hash,
    role: Role,
    in_flight: Option<InFlight>,
}

/// One identity publishing in one cohort (module docs).
#[derive(Debug, Clone)]
pub struct Publisher {
    spec: Spec,
    key: SigningKey,
    anchor_id: Option<Hash>,
    next_data_index: u64,
    next_roster_index: u64,
    queue: VecDeque<Queued>,
    stream: Option<Stream>,
}

impl Publisher {
    /// A publisher for `key` in `spec`; under implicit authorship the key (and for ANCHOR the
    /// id) must fit the binding's shape.
    pub fn new(
        spec: Spec,
        key: SigningKey,
        config: PublisherConfig,
    ) -> Result<Self, PublisherError> {
        let address = key.address();
        if spec.authorship() == Authorship::Implicit {
            match spec.binding {
                Binding::Owner if keccak256(&address) != spec.topic => {
                    return Err(PublisherError::OwnerNotTopic { address });
                }
                Binding::Anchor => {
                    let id = config.anchor_id.ok_or(PublisherError::AnchorWithoutId)?;
                    if soc_address(id, address) != spec.topic {
                        return Err(PublisherError::AnchorMismatch { address, id });
                    }
                }
                Binding::SocId => {
                    let po = proximity(&soc_address(spec.topic, address), &spec.topic);
                    if po < PO_MIN {
                        return Err(PublisherError::SocIdProximity { address, po });
                    }
                }
                _ => {}
            }
        }
        Ok(Self {
            spec,
            key,
            anchor_id: config.anchor_id,
            next_data_index: config.data_index_start,
            next_roster_index: config.roster_index_start,
            queue: VecDeque::new(),
            stream: None,
        })
    }

    /// The identity's address (the `Join` addr).
    pub fn addr(&self) -> Address {
        self.key.address()
    }

    /// The cohort spec.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// Whether this key is the cohort's admin.
    pub fn is_admin(&self) -> bool {
        self.spec.admin == Some(self.addr())
    }

    /// The role on the current stream (`None` between streams).
    pub fn role(&self) -> Option<Role> {
        self.stream.map(|stream| stream.role)
    }

    /// The index the next queued DATA will get.
    pub fn next_data_index(&self) -> u64 {
        self.next_data_index
    }

    /// The index the next queued ROSTER will get.
    pub fn next_roster_index(&self) -> u64 {
        self.next_roster_index
    }

    /// Publications not yet written.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// A new stream answered OK with `challenge`: everything from now on is signed under it.
    pub fn begin_session(&mut self, challenge: Hash) {
        let role = match self.spec.authorship() {
            Authorship::Implicit | Authorship::All => Role::Publisher,
            Authorship::Explicit if self.is_admin() => Role::Pending,
            Authorship::Explicit => Role::AwaitingRoster,
        };
        self.stream = Some(Stream {
            challenge,
            role,
            in_flight: None,
        });
    }

    /// The stream ended; queued publications wait for the next one.
    pub fn end_session(&mut self) {
        self.stream = None;
    }

    /// A verified roster arrived (from [`crate::subscriber::Subscriber`]): under explicit
    /// authorship a non-admin is granted (then claims) or revoked by it. On a new stream the
    /// broker sends the roster in force again (R22), which the subscriber drops as a
    /// retransmit: hand that one in too
    /// ([`crate::subscriber::Subscriber::repeats_roster_in_force`]), or the stream waits
    /// forever.
    pub fn on_roster(&mut self, publishers: &[Address]) {
        if self.spec.authorship() != Authorship::Explicit || self.is_admin() {
            return;
        }
        let named = publishers.contains(&self.addr());
        if let Some(stream) = self.stream.as_mut() {
            stream.role = match (stream.role, named) {
                (Role::AwaitingRoster | Role::Revoked, true) => Role::Pending,
                (Role::Pending | Role::Publisher, false) => Role::Revoked,
                (role, _) => role,
            };
        }
    }

    /// Queues a DATA publication; its index is taken now.
    pub fn enqueue_data(&mut self, payload: impl Into<Bytes>) -> Result<u64, PublishError> {
        let payload = check_size(payload.into())?;
        let index = take_index(&mut self.next_data_index, Kind::Data)?;
        self.queue.push_back(Queued {
            kind: Kind::Data,
            index,
            payload,
        });
        Ok(index)
    }

    /// Queues a ROSTER naming `publishers` (admin only); its index is taken now.
    pub fn enqueue_roster(&mut self, publishers: &[Address]) -> Result<u64, PublishError> {
        self.check_admin()?;
        let payload = check_size(Bytes::from(encode_roster(publishers)))?;
        let index = take_index(&mut self.next_roster_index, Kind::Roster)?;
        self.queue.push_back(Queued {
            kind: Kind::Roster,
            index,
            payload,
        });
        Ok(index)
    }

    /// Queues the end of stream (admin only): an empty chunk at index 0 (R21).
    pub fn enqueue_eos(&mut self) -> Result<(), PublishError> {
        self.check_admin()?;
        self.queue.push_back(Queued {
            kind: Kind::Eos,
            index: 0,
            payload: Bytes::new(),
        });
        Ok(())
    }

    /// The next frame to write on the current stream, signed under its challenge: the claim
    /// if pending, else the oldest queued publication; `None` when there is nothing to send
    /// or nothing may be sent. Call [`Publisher::mark_sent`] once it is written.
    pub fn next_frame(&mut self) -> Result<Option<Outgoing>, PublishError> {
        let Some(stream) = self.stream else {
            return Ok(None);
        };
        let (queued, in_flight) = match stream.role {
            Role::AwaitingRoster | Role::Revoked => return Ok(None),
            Role::Pending => (
                Queued {
                    kind: Kind::Auth,
                    index: 0,
                    payload: Bytes::new(),
                },
                InFlight::Claim,
            ),
            Role::Publisher => match self.queue.front() {
                Some(head) => (head.clone(), InFlight::Head),
                None => return Ok(None),
            },
        };
        let outgoing = self.sign(&stream.challenge, &queued)?;
        if let Some(stream) = self.stream.as_mut() {
            stream.in_flight = Some(in_flight);
        }
        Ok(Some(outgoing))
    }

    /// The frame from [`Publisher::next_frame`] is written: a claim makes the stream a
    /// publisher stream, a publication leaves the queue.
    pub fn mark_sent(&mut self) {
        let Some(stream) = self.stream.as_mut() else {
            return;
        };
        match stream.in_flight.take() {
            Some(InFlight::Claim) => stream.role = Role::Publisher,
            Some(InFlight::Head) => {
                self.queue.pop_front();
            }
            None => {}
        }
    }

    fn check_admin(&self) -> Result<(), PublishError> {
        match self.spec.admin {
            None => Err(PublishError::NoAdmin),
            Some(admin) if admin != self.addr() => Err(PublishError::NotAdmin),
            Some(_) => Ok(()),
        }
    }

    fn sign(&self, challenge: &Hash, queued: &Queued) -> Result<Outgoing, PublishError> {
        let (signed, index) = if self.spec.authorship() == Authorship::Implicit {
            let id = self.implicit_id(queued.index);
            let index = (self.spec.binding == Binding::FeedTopic).then_some(queued.index);
            let signed = try_sign_implicit(&self.key, &id, index, &queued.payload)
                .map_err(PublishError::PayloadTooLarge)?;
            (signed, index)
        } else {
            let signed = try_sign_broadcast(
                &self.key,
                queued.kind,
                &self.spec.topic,
                challenge,
                queued.index,
                &queued.payload,
            )
            .map_err(PublishError::PayloadTooLarge)?;
            (signed, Some(queued.index))
        };
        let mut id = [0u8; 32];
        id.copy_from_slice(&signed.chunk[..32]);
        Ok(Outgoing {
            kind: queued.kind,
            index,
            id,
            address: soc_address(id, self.addr()),
            payload_len: queued.payload.len(),
            signed,
        })
    }

    /// The binding's own id for the publication at `index` (implicit authorship, R11).
    fn implicit_id(&self, index: u64) -> Hash {
        let topic = self.spec.topic;
        match self.spec.binding {
            Binding::FeedTopic | Binding::Mnemonic => feed_id(topic, index),
            Binding::SocId => topic,
            Binding::Anchor => self.anchor_id.unwrap_or(topic),
            Binding::Owner => mine_owner_id(&topic, &self.addr(), index),
        }
    }
}

/// An id for implicit OWNER whose chunk address has PO ≥ 16 with the topic: the first
/// `feed_id(feed_id(topic, index), nonce)` that fits (about 65 536 tries on average).
fn mine_owner_id(topic: &Hash, owner: &Address, index: u64) -> Hash {
    let base = feed_id(topic, index);
    let mut nonce = 0u64;
    loop {
        let id = feed_id(base, nonce);
        if proximity(&soc_address(id, owner), topic) >= PO_MIN {
            return id;
        }
        nonce = nonce.wrapping_add(1);
    }
}

fn check_size(payload: Bytes) -> Result<Bytes, PublishError> {
    if payload.len() > CHUNK_SIZE {
        return Err(PublishError::PayloadTooLarge(PayloadTooLarge {
            len: payload.len(),
            max: CHUNK_SIZE,
        }));
    }
    Ok(payload)
}

fn take_index(next: &mut u64, kind: Kind) -> Result<u64, PublishError> {
    let index = *next;
    if index == u64::MAX {
        return Err(PublishError::IndexExhausted { kind });
    }
    *next = index + 1;
    Ok(index)
}

#[cfg(test)]
mod tests {
    use bps_proto::{Broadcast, session_chunk_id};
    use bps_verify::{Expect, SocRef, VerifyRequest, check_implicit, validate_soc, verify};

    use super::*;
    use crate::testkit::{TOPIC, explicit, key, spec};

    const CHALLENGE_1: Hash = [0x01; 32];
    const CHALLENGE_2: Hash = [0x02; 32];

    fn starting_at(data: u64, roster: u64) -> PublisherConfig {
        PublisherConfig {
            data_index_start: data,
            roster_index_start: roster,
            anchor_id: None,
        }
    }

    /// Everything the publisher would write now, as if every write succeeded.
    fn written(publisher: &mut Publisher) -> Vec<Outgoing> {
        let mut frames = Vec::new();
        while let Some(outgoing) = publisher.next_frame().expect("signs") {
            publisher.mark_sent();
            frames.push(outgoing);
        }
        frames
    }

    fn chunk_id(outgoing: &Outgoing) -> Hash {
        *SocRef::parse(&outgoing.signed.chunk).expect("soc").id
    }

    fn summary(frames: &[Outgoing]) -> Vec<(Kind, Option<u64>)> {
        frames
            .iter()
            .map(|outgoing| (outgoing.kind, outgoing.index))
            .collect()
    }

    #[test]
    fn d3_admin_claims_with_an_empty_auth_at_index_0_first() {
        let admin = key(1);
        let mut publisher =
            Publisher::new(explicit(&admin), admin.clone(), starting_at(7, 0)).expect("fits");
        publisher.enqueue_data(&b"hello"[..]).expect("queued");
        assert_eq!(publisher.next_frame(), Ok(None), "no stream yet");
        publisher.begin_session(CHALLENGE_1);
        assert_eq!(publisher.role(), Some(Role::Pending));
        let frames = written(&mut publisher);
        assert_eq!(
            summary(&frames),
            [(Kind::Auth, Some(0)), (Kind::Data, Some(7))]
        );
        assert_eq!(publisher.role(), Some(Role::Publisher));
        let auth = &frames[0];
        assert_eq!(auth.payload_len, 0);
        assert_eq!(
            chunk_id(auth),
            session_chunk_id(Kind::Auth, TOPIC, CHALLENGE_1, 0)
        );
        let soc = SocRef::parse(&auth.signed.chunk).expect("soc");
        assert_eq!(soc.span_value(), 0);
        assert!(soc.payload.is_empty());
        let recovered = validate_soc(&auth.signed.chunk).expect("valid");
        assert_eq!(recovered.owner, admin.address());
        assert_eq!(auth.address, recovered.address);
        // The frame on the wire is the Broadcast, varint-delimited.
        let mut wire = bytes::BytesMut::from(&auth.signed.frame[..]);
        let body = bps_proto::next_frame(&mut wire, bps_proto::FRAME_BYTES_MAX_DEFAULT)
            .expect("frame")
            .expect("complete");
        assert!(wire.is_empty());
        assert_eq!(
            bps_proto::decode_broadcast(body).expect("broadcast"),
            auth.signed.broadcast
        );
    }

    #[test]
    fn r41_publisher_signs_every_chunk_under_the_current_challenge() {
        let admin = key(1);
        let mut publisher =
            Publisher::new(explicit(&admin), admin, starting_at(0, 0)).expect("fits");
        for payload in [&b"a"[..], b"b", b"c"] {
            publisher.enqueue_data(payload).expect("queued");
        }
        publisher.begin_session(CHALLENGE_1);
        let claim = publisher.next_frame().expect("signs").expect("claim");
        publisher.mark_sent();
        assert_eq!(
            chunk_id(&claim),
            session_chunk_id(Kind::Auth, TOPIC, CHALLENGE_1, 0)
        );
        let first = publisher.next_frame().expect("signs").expect("a");
        publisher.mark_sent();
        assert_eq!(
            chunk_id(&first),
            session_chunk_id(Kind::Data, TOPIC, CHALLENGE_1, 0)
        );
        // "b" is signed, then the write fails: the stream is reset.
        let lost = publisher.next_frame().expect("signs").expect("b");
        assert_eq!(lost.index, Some(1));
        publisher.end_session();
        assert_eq!(publisher.queued(), 2);

        publisher.begin_session(CHALLENGE_2);
        let frames = written(&mut publisher);
        assert_eq!(
            summary(&frames),
            [
                (Kind::Auth, Some(0)),
                (Kind::Data, Some(1)),
                (Kind::Data, Some(2))
            ]
        );
        for outgoing in &frames {
            let index = outgoing.index.expect("session feed");
            assert_eq!(
                chunk_id(outgoing),
                session_chunk_id(outgoing.kind, TOPIC, CHALLENGE_2, index),
                "{:?} {index} re-signed under the new challenge",
                outgoing.kind
            );
            assert_eq!(outgoing.signed.broadcast.challenge.as_ref(), &CHALLENGE_2);
        }
        assert_ne!(frames[1].signed.chunk, lost.signed.chunk);
        assert_eq!(
            SocRef::parse(&frames[1].signed.chunk).expect("soc").payload,
            b"b"
        );
    }

    #[test]
    fn r41_publisher_never_reuses_a_data_or_roster_index_across_sessions() {
        let admin = key(1);
        let mut publisher =
            Publisher::new(explicit(&admin), admin, starting_at(100, 5)).expect("fits");
        let mut data = Vec::new();
        let mut rosters = Vec::new();
        for (session, challenge) in [CHALLENGE_1, CHALLENGE_2, [3; 32]].into_iter().enumerate() {
            publisher.begin_session(challenge);
            data.push(publisher.enqueue_data(vec![session as u8]).expect("data"));
            data.push(publisher.enqueue_data(vec![session as u8]).expect("data"));
            rosters.push(publisher.enqueue_roster(&[[9; 20]]).expect("roster"));
            let frames = written(&mut publisher);
            assert_eq!(frames[0].kind, Kind::Auth, "every stream claims");
            publisher.end_session();
        }
        assert_eq!(data, [100, 101, 102, 103, 104, 105]);
        assert_eq!(rosters, [5, 6, 7]);
        assert_eq!(publisher.next_data_index(), 106);
        assert_eq!(publisher.next_roster_index(), 8);

        let mut exhausted = Publisher::new(
            explicit(&key(1)),
            key(1),
            starting_at(u64::MAX - 1, u64::MAX),
        )
        .expect("fits");
        assert_eq!(exhausted.enqueue_data(&b"last"[..]), Ok(u64::MAX - 1));
        assert_eq!(
            exhausted.enqueue_data(&b"none"[..]),
            Err(PublishError::IndexExhausted { kind: Kind::Data })
        );
        assert_eq!(
            exhausted.enqueue_roster(&[]),
            Err(PublishError::IndexExhausted { kind: Kind::Roster })
        );
    }

    #[test]
    fn all_and_implicit_publish_from_the_join_without_a_claim() {
        let admin = key(1);
        let member = key(2);
        let all = spec(Some(admin.address()), Binding::Mnemonic, true);
        for signer in [&admin, &member] {
            let mut publisher =
                Publisher::new(all, signer.clone(), starting_at(3, 0)).expect("fits");
            publisher.begin_session(CHALLENGE_1);
            assert_eq!(publisher.role(), Some(Role::Publisher));
            publisher.enqueue_data(&b"x"[..]).expect("queued");
            assert_eq!(summary(&written(&mut publisher)), [(Kind::Data, Some(3))]);
        }
        let mut implicit = Publisher::new(
            spec(None, Binding::Mnemonic, false),
            member,
            starting_at(0, 0),
        )
        .expect("fits");
        implicit.begin_session(CHALLENGE_1);
        implicit.enqueue_data(&b"x"[..]).expect("queued");
        let frames = written(&mut implicit);
        assert_eq!(summary(&frames), [(Kind::Data, None)]);
        assert!(frames[0].signed.broadcast.challenge.is_empty(), "no salt");
        assert_eq!(frames[0].signed.broadcast.index, 0, "index unset");
    }

    #[test]
    fn rostered_publisher_waits_for_a_roster_naming_it_then_claims() {
        let admin = key(1);
        let member = key(2);
        let mut publisher =
            Publisher::new(explicit(&admin), member.clone(), starting_at(0, 0)).expect("fits");
        publisher.enqueue_data(&b"hi"[..]).expect("queued");
        publisher.begin_session(CHALLENGE_1);
        assert_eq!(publisher.role(), Some(Role::AwaitingRoster));
        assert_eq!(
            publisher.next_frame(),
            Ok(None),
            "R23: nothing before the roster"
        );
        publisher.on_roster(&[[7; 20]]);
        assert_eq!(publisher.role(), Some(Role::AwaitingRoster));
        publisher.on_roster(&[[7; 20], member.address()]);
        assert_eq!(publisher.role(), Some(Role::Pending));
        assert_eq!(
            summary(&written(&mut publisher)),
            [(Kind::Auth, Some(0)), (Kind::Data, Some(0))]
        );
        publisher.on_roster(&[[7; 20]]);
        assert_eq!(publisher.role(), Some(Role::Revoked));
        publisher.enqueue_data(&b"late"[..]).expect("queued");
        assert_eq!(
            publisher.next_frame(),
            Ok(None),
            "R24: nothing after revocation"
        );
        // A new stream waits for a naming roster again.
        publisher.begin_session(CHALLENGE_2);
        assert_eq!(publisher.role(), Some(Role::AwaitingRoster));
    }

    #[test]
    fn service_kinds_are_the_admins() {
        let admin = key(1);
        let mut member = Publisher::new(explicit(&admin), key(2), starting_at(0, 0)).expect("fits");
        assert_eq!(member.enqueue_roster(&[]), Err(PublishError::NotAdmin));
        assert_eq!(member.enqueue_eos(), Err(PublishError::NotAdmin));
        let mut implicit = Publisher::new(
            spec(None, Binding::Mnemonic, false),
            key(2),
            starting_at(0, 0),
        )
        .expect("fits");
        assert_eq!(implicit.enqueue_eos(), Err(PublishError::NoAdmin));
        assert!(matches!(
            implicit.enqueue_data(vec![0; CHUNK_SIZE + 1]),
            Err(PublishError::PayloadTooLarge(_))
        ));

        let mut publisher =
            Publisher::new(explicit(&admin), admin, starting_at(0, 0)).expect("fits");
        publisher.enqueue_eos().expect("eos");
        publisher.begin_session(CHALLENGE_1);
        let frames = written(&mut publisher);
        assert_eq!(
            summary(&frames),
            [(Kind::Auth, Some(0)), (Kind::Eos, Some(0))]
        );
        let eos = SocRef::parse(&frames[1].signed.chunk).expect("soc");
        assert_eq!((eos.span_value(), eos.payload.len()), (0, 0));
    }

    fn implicit_check(spec: &Spec, outgoing: &Outgoing) -> Result<Hash, String> {
        let broadcast: &Broadcast = &outgoing.signed.broadcast;
        verify(&VerifyRequest {
            chunk: broadcast.soc.clone(),
            expect: Expect::Implicit {
                binding: spec.binding,
                topic: spec.topic,
                index: broadcast.index,
            },
        })
        .map(|verified| verified.dedup_key)
        .map_err(|error| error.to_string())
    }

    /// A topic for implicit SOC_ID that `owner` fits: PO(keccak256(topic ‖ owner), topic)
    /// ≥ 16 (mined, about 65 536 tries).
    fn soc_id_topic_for(owner: &Address) -> Hash {
        (0u64..)
            .map(|nonce| keccak256(&nonce.to_be_bytes()))
            .find(|topic| proximity(&soc_address(topic, owner), topic) >= PO_MIN)
            .expect("a topic within 2^64 tries")
    }

    #[test]
    fn implicit_bindings_sign_their_own_ids() {
        let signer = key(3);
        let address = signer.address();
        let anchor_id = [0x77; 32];
        let cases = [
            (spec(None, Binding::FeedTopic, false), None),
            (spec(None, Binding::Mnemonic, false), None),
            (
                Spec {
                    topic: keccak256(&address),
                    ..spec(None, Binding::Owner, false)
                },
                None,
            ),
            (
                Spec {
                    topic: soc_address(anchor_id, address),
                    ..spec(None, Binding::Anchor, false)
                },
                Some(anchor_id),
            ),
            (
                Spec {
                    topic: soc_id_topic_for(&address),
                    ..spec(None, Binding::SocId, false)
                },
                None,
            ),
        ];
        for (spec, anchor_id) in cases {
            let config = PublisherConfig {
                data_index_start: 40,
                roster_index_start: 0,
                anchor_id,
            };
            let mut publisher = Publisher::new(spec, signer.clone(), config).expect("fits");
            publisher.begin_session(CHALLENGE_1);
            publisher.enqueue_data(&b"one"[..]).expect("queued");
            publisher.enqueue_data(&b"two"[..]).expect("queued");
            let frames = written(&mut publisher);
            assert_eq!(frames.len(), 2, "{:?}", spec.binding);
            for outgoing in &frames {
                assert!(outgoing.signed.broadcast.challenge.is_empty());
                implicit_check(&spec, outgoing)
                    .unwrap_or_else(|error| panic!("{:?}: {error}", spec.binding));
            }
            match spec.binding {
                Binding::FeedTopic => {
                    assert_eq!(
                        summary(&frames),
                        [(Kind::Data, Some(40)), (Kind::Data, Some(41))]
                    );
                    assert_eq!(chunk_id(&frames[0]), feed_id(TOPIC, 40));
                }
                Binding::Mnemonic => {
                    assert_eq!(summary(&frames), [(Kind::Data, None), (Kind::Data, None)]);
                    assert_ne!(chunk_id(&frames[0]), chunk_id(&frames[1]));
                }
                Binding::Owner => assert_ne!(chunk_id(&frames[0]), chunk_id(&frames[1])),
                Binding::Anchor => assert_eq!(chunk_id(&frames[0]), anchor_id.unwrap_or_default()),
                Binding::SocId => assert_eq!(chunk_id(&frames[1]), spec.topic),
            }
        }
        // The broker's own shape check agrees (dedup keys differ per publication).
        let owner_spec = Spec {
            topic: keccak256(&address),
            ..spec(None, Binding::Owner, false)
        };
        let mut publisher = Publisher::new(owner_spec, signer, starting_at(0, 0)).expect("fits");
        publisher.begin_session(CHALLENGE_1);
        publisher.enqueue_data(&b"x"[..]).expect("queued");
        let frame = written(&mut publisher).remove(0);
        let recovered = validate_soc(&frame.signed.chunk).expect("valid");
        assert!(check_implicit(Binding::Owner, &owner_spec.topic, 0, &recovered).is_ok());
    }

    #[test]
    fn keys_that_do_not_fit_an_implicit_shape_are_refused_up_front() {
        let signer = key(3);
        let address = signer.address();
        let owner = spec(None, Binding::Owner, false);
        assert_eq!(
            Publisher::new(owner, signer.clone(), starting_at(0, 0)).err(),
            Some(PublisherError::OwnerNotTopic { address })
        );
        let anchor = spec(None, Binding::Anchor, false);
        assert_eq!(
            Publisher::new(anchor, signer.clone(), starting_at(0, 0)).err(),
            Some(PublisherError::AnchorWithoutId)
        );
        let config = PublisherConfig {
            anchor_id: Some([1; 32]),
            ..starting_at(0, 0)
        };
        assert_eq!(
            Publisher::new(anchor, signer.clone(), config).err(),
            Some(PublisherError::AnchorMismatch {
                address,
                id: [1; 32]
            })
        );
        let soc_id = spec(None, Binding::SocId, false);
        let po = proximity(&soc_address(TOPIC, address), &TOPIC);
        assert!(po < PO_MIN, "the fixed topic happens to fit; pick another");
        assert_eq!(
            Publisher::new(soc_id, signer, starting_at(0, 0)).err(),
            Some(PublisherError::SocIdProximity { address, po })
        );
    }
}
