//! End-to-end verification of every received `Broadcast` (R41, SWIP-60 conformance items 2
//! and 10, SWIP-74 item 10).
//!
//! Owns: [`Subscriber`], the receiving side's state for one cohort — the roster and its
//! cursor, a bounded table of per-publisher DATA cursors ([`crate::cursor_table`], per
//! owner under implicit FEED_TOPIC too), and
//! (implicit authorship) a bounded window of recently seen chunks
//! ([`crate::dedup_window`]), both sized by [`SubscriberLimits`] — and what each frame
//! becomes: a typed [`Event`], within a [`Received`] that also carries what the subscriber
//! learnt from it. For every frame:
//! 1. the kind must be known (else dropped, R14, D12);
//! 2. explicit and ALL: the id is derived from the frame's own kind, the cohort topic, the
//!    frame's challenge and index (docs/PROTOCOL.md §1.1) and must equal the chunk's id; the
//!    subscriber compares the challenge with nothing;
//! 3. the owner is recovered and admitted: admin or rostered under explicit authorship,
//!    anyone under ALL; under implicit authorship the binding's shape decides (anyone under
//!    MNEMONIC and FEED_TOPIC, the fixed owner under OWNER and ANCHOR, PO under SOC_ID, via
//!    `bps_verify::check_implicit`); service chunks (ROSTER, EOS) must validate at
//!    keccak256(id ‖ admin);
//! 4. cursors: a DATA index below its publisher's cursor and a ROSTER index below the roster
//!    cursor are retransmits; a ROSTER index above the cursor, once a roster has been seen,
//!    is a liveness fault (reported on the event, the roster still applies); a DATA index
//!    above the cursor of a publisher already held is a gap ([`Received::gap`]: updates
//!    were skipped or missed, which R27 allows), while a publisher's first frame, or its
//!    first after an eviction, is never one. Under implicit FEED_TOPIC each owner (the
//!    recovered signer of a graffiti-feed update) has a cursor in the same table, one past
//!    the highest feed index seen from it, and an index above it is a gap in the same way;
//!    a lower index is no retransmit there (dedup is the R28 window, and a writer may
//!    publish out of order): it is delivered, without a gap, and leaves the cursor where it
//!    was. The other implicit bindings have no index sequence, so no cursor and no gap;
//! 5. an accepted DATA or ROSTER names where the next update of its feed will be
//!    ([`Received::next`], [`NextUpdate`]), the SOC address an application can wait for or
//!    fetch from Swarm storage. With `n` = index + 1: on a session feed (explicit and ALL)
//!    keccak256(keccak256(topic_s ‖ be64(n)) ‖ owner), topic_s =
//!    keccak256(prefix ‖ topic ‖ challenge) with the frame's own kind (DATA: no prefix;
//!    ROSTER: the service prefix and owner = admin) and the frame's own challenge, so it is
//!    the next update *on the same stream* (a publisher that reconnects signs under a new
//!    challenge); under implicit FEED_TOPIC keccak256(keccak256(topic ‖ be64(n)) ‖ owner),
//!    the feed update at n. None under the other implicit bindings (no sequence of ids), for
//!    EOS, or when n would be 2^64 − 1, which no publisher may use (D13).
//!
//! Bounds: every table that grows with what peers send is bounded. The cursor table keeps at
//! most [`SubscriberLimits::cursors_max`] publishers or feed writers (default
//! [`CURSORS_PER_SUBSCRIBER_MAX`]); a new publisher in a full table evicts the least
//! recently advanced one, reported on [`Received::evicted`] and counted
//! ([`Subscriber::cursors_evicted`]). An evicted publisher's cursor restarts: its next frame
//! is accepted at any index, so a retransmit of its older frames could be shown again. The
//! dedup window keeps [`SubscriberLimits::implicit_dedup_chunks_max`] chunks (default
//! [`IMPLICIT_DEDUP_CHUNKS_MAX`]); a forgotten chunk is accepted again (R28). The roster is
//! bounded by the chunk that carries it (at most 186 addresses).
//!
//! Never: reads a socket or a clock, or looks at its own stream's challenge. The state lives
//! as long as the `Subscriber` value: keep one per (topic, admin) across reconnects so the
//! cursors survive sessions (R41); nothing is persisted to disk.

use std::fmt;

use bps_proto::{
    Address, Authorship, Binding, Broadcast, DecodeError, Hash, Kind, RosterError, Spec,
    decode_broadcast, decode_roster, feed_id, session_chunk_id, soc_address,
};
use bps_verify::{
    Expect, SocError, SocRef, VerifyError, VerifyRequest, validate_soc, validate_soc_at, verify,
};
use bytes::Bytes;

use crate::cursor_table::{CURSORS_PER_SUBSCRIBER_MAX, CursorTable, EvictedCursor};
use crate::dedup_window::{DedupWindow, IMPLICIT_DEDUP_CHUNKS_MAX};

/// The bounds of a subscriber's tables (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriberLimits {
    /// Per-publisher DATA cursors kept under explicit authorship, ALL and implicit
    /// FEED_TOPIC (at least 1).
    pub cursors_max: usize,
    /// Chunks remembered for dedup under implicit authorship (at least 1).
    pub implicit_dedup_chunks_max: usize,
}

impl Default for SubscriberLimits {
    fn default() -> Self {
        Self {
            cursors_max: CURSORS_PER_SUBSCRIBER_MAX,
            implicit_dedup_chunks_max: IMPLICIT_DEDUP_CHUNKS_MAX,
        }
    }
}

/// One received frame: what it was, and what the subscriber learnt from it (module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The verdict.
    pub event: Event,
    /// An accepted DATA (explicit, ALL, implicit FEED_TOPIC) above its publisher's cursor:
    /// the indices from `expected` to `got − 1` never arrived (module docs, item 4). A
    /// ROSTER's gap is on [`Event::Roster`].
    pub gap: Option<IndexGap>,
    /// An accepted DATA or ROSTER: where the next update of its feed will be.
    pub next: Option<NextUpdate>,
    /// An accepted DATA whose publisher was new to a full cursor table pushed this cursor
    /// out (module docs): that publisher's frames restart at any index.
    pub evicted: Option<EvictedCursor>,
}

impl From<Event> for Received {
    fn from(event: Event) -> Self {
        Self {
            event,
            gap: None,
            next: None,
            evicted: None,
        }
    }
}

/// What one received frame turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A verified publication.
    Data {
        /// The recovered, admitted signer.
        owner: Address,
        /// The frame's index (its publisher's DATA feed index; 0 when unset under implicit
        /// authorship).
        index: u64,
        /// The chunk's payload.
        payload: Bytes,
    },
    /// A verified ROSTER from the admin, now in force.
    Roster {
        /// Its index in the admin's ROSTER feed.
        index: u64,
        /// The new roster.
        publishers: Vec<Address>,
        /// Set when rosters were missed (a liveness fault, R41).
        gap: Option<IndexGap>,
    },
    /// A verified end of stream from the admin: the channel is over (R21).
    Eos,
    /// The frame was not admitted.
    Dropped {
        /// Why.
        reason: DropReason,
    },
}

/// An index above the one expected on a feed already seen: updates were skipped or missed
/// (for ROSTER a liveness fault, R41; for DATA allowed, R27, and worth knowing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexGap {
    /// The index the subscriber expected next (the feed's cursor).
    pub expected: u64,
    /// The index that arrived.
    pub got: u64,
}

impl fmt::Display for IndexGap {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "expected index {}, got {} ({} missed)",
            self.expected,
            self.got,
            self.got - self.expected
        )
    }
}

/// Where the next update of a delivery's feed will be (module docs, item 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextUpdate {
    /// Its index on the feed.
    pub index: u64,
    /// Its SOC address keccak256(id ‖ owner).
    pub address: Hash,
}

/// Why a frame was dropped. None of these is fatal to the subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DropReason {
    /// The body is not a `Broadcast`.
    Malformed(DecodeError),
    /// `KIND_UNSPECIFIED` or a value outside the enum.
    UnknownKind {
        /// The value on the wire.
        value: i32,
    },
    /// An AUTH frame: brokers never deliver one.
    AuthDelivered,
    /// A service kind under implicit authorship, where there is no admin to hold it to.
    ServiceWithoutAdmin {
        /// The kind.
        kind: Kind,
    },
    /// The frame's challenge is not 32 bytes, so no id can be derived.
    ChallengeLength {
        /// Its length.
        bytes: usize,
    },
    /// The chunk is not a SOC (length), so it has no id.
    Chunk(SocError),
    /// The chunk's id is not the one derived from the frame.
    IdMismatch {
        /// Derived from kind, topic, challenge and index.
        expected: Hash,
        /// Carried by the chunk.
        actual: Hash,
    },
    /// The signature, the replicas rule, the expected address or the implicit shape failed.
    Invalid(VerifyError),
    /// A valid chunk whose owner may not publish here (not the admin, not rostered).
    NotAdmitted {
        /// The recovered owner.
        owner: Address,
    },
    /// Below the cursor of its feed: already seen (R16, R27).
    Retransmit {
        /// The frame's kind.
        kind: Kind,
        /// The frame's index.
        index: u64,
        /// The cursor it fell below.
        cursor: u64,
    },
    /// Implicit authorship: a chunk already in the dedup window (R28).
    Duplicate {
        /// The dedup key (chunk address, or the wrapped CAC address under ANCHOR).
        key: Hash,
    },
    /// DATA or ROSTER at index 2^64 − 1, which bee rejects (R18).
    IndexMax {
        /// The frame's kind.
        kind: Kind,
    },
    /// A ROSTER whose payload is not a list of 20-byte addresses (R20).
    InvalidRoster(RosterError),
    /// An EOS that is not an empty chunk at index 0 (R17, R21).
    MalformedEos {
        /// The frame's index.
        index: u64,
        /// The chunk's span.
        span: u64,
        /// The chunk's payload length.
        payload_len: usize,
    },
}

impl fmt::Display for DropReason {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(error) => write!(formatter, "{error}"),
            Self::UnknownKind { value } => write!(formatter, "unknown kind {value}"),
            Self::AuthDelivered => write!(formatter, "AUTH frames are never delivered"),
            Self::ServiceWithoutAdmin { kind } => write!(
                formatter,
                "{} under implicit authorship (no admin)",
                kind.as_str_name()
            ),
            Self::ChallengeLength { bytes } => {
                write!(formatter, "challenge of {bytes} bytes, expected 32")
            }
            Self::Chunk(error) => write!(formatter, "not a SOC: {error}"),
            Self::IdMismatch { expected, actual } => write!(
                formatter,
                "chunk id {} is not the id {} derived from the frame",
                hex::encode(actual),
                hex::encode(expected)
            ),
            Self::Invalid(error) => write!(formatter, "{error}"),
            Self::NotAdmitted { owner } => write!(
                formatter,
                "owner 0x{} is neither the admin nor rostered",
                hex::encode(owner)
            ),
            Self::Retransmit {
                kind,
                index,
                cursor,
            } => write!(
                formatter,
                "{} index {index} is below the cursor {cursor} (retransmit)",
                kind.as_str_name()
            ),
            Self::Duplicate { key } => {
                write!(formatter, "chunk {} already seen", hex::encode(key))
            }
            Self::IndexMax { kind } => {
                write!(
                    formatter,
                    "{} index 2^64-1 is not allowed",
                    kind.as_str_name()
                )
            }
            Self::InvalidRoster(error) => write!(formatter, "{error}"),
            Self::MalformedEos {
                index,
                span,
                payload_len,
            } => write!(
                formatter,
                "EOS must be an empty chunk at index 0, got index {index}, span {span}, \
                 {payload_len} payload bytes"
            ),
        }
    }
}

/// The receiving side of one cohort (module docs).
#[derive(Debug, Clone)]
pub struct Subscriber {
    spec: Spec,
    roster: Vec<Address>,
    roster_cursor: u64,
    roster_seen: bool,
    cursors: CursorTable,
    cursors_evicted: u64,
    seen: DedupWindow,
}

impl Subscriber {
    /// A subscriber for `spec` with empty roster and cursors at 0, and the default limits.
    pub fn new(spec: Spec) -> Self {
        Self::with_limits(spec, SubscriberLimits::default())
    }

    /// A subscriber for `spec` whose tables hold at most `limits` (each at least 1).
    pub fn with_limits(spec: Spec, limits: SubscriberLimits) -> Self {
        Self {
            spec,
            roster: Vec::new(),
            roster_cursor: 0,
            roster_seen: false,
            cursors: CursorTable::new(limits.cursors_max),
            cursors_evicted: 0,
            seen: DedupWindow::new(limits.implicit_dedup_chunks_max),
        }
    }

    /// The cohort spec.
    pub fn spec(&self) -> &Spec {
        &self.spec
    }

    /// The roster in force (empty until the first ROSTER).
    pub fn roster(&self) -> &[Address] {
        &self.roster
    }

    /// The next ROSTER index expected.
    pub fn roster_cursor(&self) -> u64 {
        self.roster_cursor
    }

    /// The next DATA index expected from `owner` (0 if never seen, or evicted; under
    /// implicit FEED_TOPIC one past the highest feed index seen from it).
    pub fn cursor(&self, owner: &Address) -> u64 {
        self.cursors.get(owner).unwrap_or(0)
    }

    /// Publishers whose cursor is held (at most [`SubscriberLimits::cursors_max`]).
    pub fn cursor_count(&self) -> usize {
        self.cursors.len()
    }

    /// Cursors evicted from the full table so far (module docs).
    pub fn cursors_evicted(&self) -> u64 {
        self.cursors_evicted
    }

    /// Whether `owner` may publish DATA now (explicit: admin or rostered; ALL: anyone;
    /// implicit: the binding shape decides per chunk, so anyone here).
    pub fn admits(&self, owner: &Address) -> bool {
        match self.spec.authorship() {
            Authorship::Explicit => self.spec.admin == Some(*owner) || self.roster.contains(owner),
            Authorship::All | Authorship::Implicit => true,
        }
    }

    /// Whether `event` is the roster in force delivered again: a verified ROSTER from the
    /// admin (id derived, signature valid at keccak256(id ‖ admin)) dropped as a retransmit
    /// at the index of the last roster accepted. The broker sends the latest roster first on
    /// every new stream (R22), and the admin never reuses a ROSTER index (R41), so this is
    /// the roster [`Subscriber::roster`] already holds: for a rostered publisher it is the
    /// grant on the new stream (R23).
    pub fn repeats_roster_in_force(&self, event: &Event) -> bool {
        matches!(
            event,
            Event::Dropped {
                reason: DropReason::Retransmit {
                    kind: Kind::Roster,
                    index,
                    cursor,
                },
            } if self.roster_seen && index.checked_add(1) == Some(*cursor)
        )
    }

    /// Decodes and verifies one frame body; the verdict only ([`Subscriber::receive`] tells
    /// more).
    pub fn on_frame(&mut self, body: Bytes) -> Event {
        self.receive(body).event
    }

    /// Verifies one `Broadcast` and applies it; the verdict only.
    pub fn on_broadcast(&mut self, broadcast: &Broadcast) -> Event {
        self.receive_broadcast(broadcast).event
    }

    /// Decodes and verifies one frame body.
    pub fn receive(&mut self, body: Bytes) -> Received {
        match decode_broadcast(body) {
            Ok(broadcast) => self.receive_broadcast(&broadcast),
            Err(error) => dropped(DropReason::Malformed(error)).into(),
        }
    }

    /// Verifies one `Broadcast` (module docs) and applies it.
    pub fn receive_broadcast(&mut self, broadcast: &Broadcast) -> Received {
        match self.admit(broadcast) {
            Ok(received) => received,
            Err(reason) => dropped(reason).into(),
        }
    }

    fn admit(&mut self, broadcast: &Broadcast) -> Result<Received, DropReason> {
        let kind = bps_proto::kind_from_i32(broadcast.kind).ok_or(DropReason::UnknownKind {
            value: broadcast.kind,
        })?;
        let admin = match (kind, self.spec.admin) {
            (Kind::Auth | Kind::Unspecified, _) => return Err(DropReason::AuthDelivered),
            (Kind::Data, None) => return self.admit_implicit(broadcast),
            (_, None) => return Err(DropReason::ServiceWithoutAdmin { kind }),
            (_, Some(admin)) => admin,
        };
        let challenge = Hash::try_from(broadcast.challenge.as_ref()).map_err(|_| {
            DropReason::ChallengeLength {
                bytes: broadcast.challenge.len(),
            }
        })?;
        let soc = SocRef::parse(&broadcast.soc).map_err(DropReason::Chunk)?;
        let expected = session_chunk_id(kind, self.spec.topic, challenge, broadcast.index);
        if *soc.id != expected {
            return Err(DropReason::IdMismatch {
                expected,
                actual: *soc.id,
            });
        }
        match kind {
            Kind::Roster => self.admit_roster(&admin, broadcast, &soc, &challenge),
            Kind::Eos => admit_eos(&admin, broadcast, &soc).map(Received::from),
            // DATA: AUTH and UNSPECIFIED were dropped above.
            _ => self.admit_data(broadcast, &challenge),
        }
    }

    fn admit_data(
        &mut self,
        broadcast: &Broadcast,
        challenge: &Hash,
    ) -> Result<Received, DropReason> {
        let recovered = validate_soc(&broadcast.soc).map_err(|error| invalid(error.into()))?;
        let owner = recovered.owner;
        if !self.admits(&owner) {
            return Err(DropReason::NotAdmitted { owner });
        }
        let index = broadcast.index;
        if index == u64::MAX {
            return Err(DropReason::IndexMax { kind: Kind::Data });
        }
        let known = self.cursors.get(&owner);
        if let Some(cursor) = known
            && index < cursor
        {
            return Err(DropReason::Retransmit {
                kind: Kind::Data,
                index,
                cursor,
            });
        }
        let evicted = self.cursors.advance(owner, index + 1);
        self.cursors_evicted += u64::from(evicted.is_some());
        Ok(Received {
            event: Event::Data {
                owner,
                index,
                payload: payload_of(&broadcast.soc),
            },
            gap: gap_above(known, index),
            next: self.next_on_session_feed(Kind::Data, challenge, index, &owner),
            evicted,
        })
    }

    /// The next update after `index` on the session feed of `kind` under `challenge`,
    /// signed by `owner` (module docs, item 5).
    fn next_on_session_feed(
        &self,
        kind: Kind,
        challenge: &Hash,
        index: u64,
        owner: &Address,
    ) -> Option<NextUpdate> {
        next_index(index).map(|next| NextUpdate {
            index: next,
            address: soc_address(
                session_chunk_id(kind, self.spec.topic, *challenge, next),
                owner,
            ),
        })
    }

    fn admit_roster(
        &mut self,
        admin: &Address,
        broadcast: &Broadcast,
        soc: &SocRef<'_>,
        challenge: &Hash,
    ) -> Result<Received, DropReason> {
        validate_soc_at(&broadcast.soc, &soc_address(soc.id, admin))
            .map_err(|error| invalid(error.into()))?;
        let index = broadcast.index;
        if index == u64::MAX {
            return Err(DropReason::IndexMax { kind: Kind::Roster });
        }
        if index < self.roster_cursor {
            return Err(DropReason::Retransmit {
                kind: Kind::Roster,
                index,
                cursor: self.roster_cursor,
            });
        }
        let publishers = decode_roster(soc.payload).map_err(DropReason::InvalidRoster)?;
        // The first roster a subscriber sees is the latest one (R22), whatever its index;
        // after that, every index must follow the last.
        let gap = (self.roster_seen && index > self.roster_cursor).then_some(IndexGap {
            expected: self.roster_cursor,
            got: index,
        });
        self.roster_seen = true;
        self.roster_cursor = index + 1;
        self.roster.clone_from(&publishers);
        Ok(Received {
            next: self.next_on_session_feed(Kind::Roster, challenge, index, admin),
            ..Event::Roster {
                index,
                publishers,
                gap,
            }
            .into()
        })
    }

    fn admit_implicit(&mut self, broadcast: &Broadcast) -> Result<Received, DropReason> {
        let verified = verify(&VerifyRequest {
            chunk: broadcast.soc.clone(),
            expect: Expect::Implicit {
                binding: self.spec.binding,
                topic: self.spec.topic,
                index: broadcast.index,
            },
        })
        .map_err(invalid)?;
        if !self.seen.insert(verified.dedup_key) {
            return Err(DropReason::Duplicate {
                key: verified.dedup_key,
            });
        }
        let index = broadcast.index;
        let event = Event::Data {
            owner: verified.owner,
            index,
            payload: payload_of(&broadcast.soc),
        };
        if self.spec.binding != Binding::FeedTopic {
            return Ok(event.into());
        }
        let (gap, evicted) = self.follow_feed_writer(verified.owner, index);
        Ok(Received {
            event,
            gap,
            next: next_index(index).map(|next| NextUpdate {
                index: next,
                address: soc_address(feed_id(self.spec.topic, next), verified.owner),
            }),
            evicted,
        })
    }

    /// Implicit FEED_TOPIC: moves `owner`'s cursor past the highest index seen and returns
    /// the gap above the cursor it had and the cursor its arrival evicted (module docs,
    /// item 4). A lower index leaves the cursor where it was (the owner still becomes the
    /// most recent in the table: it is writing).
    fn follow_feed_writer(
        &mut self,
        owner: Address,
        index: u64,
    ) -> (Option<IndexGap>, Option<EvictedCursor>) {
        let known = self.cursors.get(&owner);
        // Index 2^64 − 1 passes the implicit shape; no index lies above it, so a cursor
        // held there reports no gap and needs no room past it.
        let cursor = known.unwrap_or(0).max(index.saturating_add(1));
        let evicted = self.cursors.advance(owner, cursor);
        self.cursors_evicted += u64::from(evicted.is_some());
        (gap_above(known, index), evicted)
    }
}

fn admit_eos(
    admin: &Address,
    broadcast: &Broadcast,
    soc: &SocRef<'_>,
) -> Result<Event, DropReason> {
    if broadcast.index != 0 || soc.span_value() != 0 || !soc.payload.is_empty() {
        return Err(DropReason::MalformedEos {
            index: broadcast.index,
            span: soc.span_value(),
            payload_len: soc.payload.len(),
        });
    }
    validate_soc_at(&broadcast.soc, &soc_address(soc.id, admin))
        .map_err(|error| invalid(error.into()))?;
    Ok(Event::Eos)
}

/// The gap `index` makes above the cursor `known` of its publisher; none for a publisher
/// not held (its first frame, or its first after an eviction).
fn gap_above(known: Option<u64>, index: u64) -> Option<IndexGap> {
    known
        .filter(|cursor| index > *cursor)
        .map(|expected| IndexGap {
            expected,
            got: index,
        })
}

/// The index after `index` on a feed, unless it would be 2^64 − 1, which no publisher may
/// use (D13).
fn next_index(index: u64) -> Option<u64> {
    index.checked_add(1).filter(|next| *next != u64::MAX)
}

fn invalid(error: VerifyError) -> DropReason {
    DropReason::Invalid(error)
}

fn dropped(reason: DropReason) -> Event {
    Event::Dropped { reason }
}

/// The payload of a chunk already parsed once (a zero-copy slice of the frame).
fn payload_of(chunk: &Bytes) -> Bytes {
    chunk.slice(bps_verify::SOC_MIN_CHUNK_SIZE.min(chunk.len())..)
}

#[cfg(test)]
mod tests {
    use bps_proto::{Binding, encode_frame, encode_roster, feed_id, keccak256};
    use bps_verify::{
        PO_MIN, ShapeError, SigningKey, proximity, sign_broadcast, sign_implicit, sign_soc,
    };

    use super::*;
    use crate::publisher::{Publisher, PublisherConfig};
    use crate::testkit::{TOPIC, explicit, key, spec};

    fn all(admin: &SigningKey) -> Spec {
        spec(Some(admin.address()), Binding::Mnemonic, true)
    }

    fn publisher(spec: Spec, signer: &SigningKey, data: u64, roster: u64) -> Publisher {
        let config = PublisherConfig {
            data_index_start: data,
            roster_index_start: roster,
            anchor_id: None,
        };
        Publisher::new(spec, signer.clone(), config).expect("fits")
    }

    /// Every frame the publisher writes on a stream with `challenge`, as the broker would
    /// deliver them (AUTH never is).
    fn delivered(publisher: &mut Publisher, challenge: Hash) -> Vec<Broadcast> {
        publisher.begin_session(challenge);
        let mut frames = Vec::new();
        while let Some(outgoing) = publisher.next_frame().expect("signs") {
            publisher.mark_sent();
            if outgoing.kind != Kind::Auth {
                frames.push(outgoing.signed.broadcast);
            }
        }
        frames
    }

    fn data(owner: &SigningKey, index: u64, payload: &[u8]) -> Event {
        Event::Data {
            owner: owner.address(),
            index,
            payload: Bytes::copy_from_slice(payload),
        }
    }

    fn reason(event: Event) -> DropReason {
        match event {
            Event::Dropped { reason } => reason,
            other => panic!("expected a drop, got {other:?}"),
        }
    }

    #[test]
    fn r41_subscriber_accepts_what_the_publisher_produces() {
        let admin = key(1);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let mut publisher = publisher(explicit(&admin), &admin, 10, 0);
        publisher.enqueue_data(&b"first"[..]).expect("data");
        publisher.enqueue_roster(&[[5; 20]]).expect("roster");
        publisher.enqueue_data(&b"second"[..]).expect("data");
        publisher.enqueue_eos().expect("eos");
        let events: Vec<Event> = delivered(&mut publisher, [1; 32])
            .iter()
            .map(|broadcast| subscriber.on_broadcast(broadcast))
            .collect();
        assert_eq!(
            events,
            [
                data(&admin, 10, b"first"),
                Event::Roster {
                    index: 0,
                    publishers: vec![[5; 20]],
                    gap: None
                },
                data(&admin, 11, b"second"),
                Event::Eos,
            ]
        );
        assert_eq!(subscriber.cursor(&admin.address()), 12);
        assert_eq!(subscriber.roster_cursor(), 1);
        assert_eq!(subscriber.roster(), [[5; 20]]);
    }

    #[test]
    fn r41_subscriber_compares_the_challenge_with_nothing() {
        let admin = key(1);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let mut publisher = publisher(explicit(&admin), &admin, 0, 0);
        // Two publisher streams with unrelated challenges; the subscriber has none at all
        // and derives each id from the frame's own challenge.
        publisher.enqueue_data(&b"a"[..]).expect("data");
        let first = delivered(&mut publisher, [0xaa; 32]);
        publisher.enqueue_data(&b"b"[..]).expect("data");
        let second = delivered(&mut publisher, [0xbb; 32]);
        assert_eq!(subscriber.on_broadcast(&first[0]), data(&admin, 0, b"a"));
        assert_eq!(subscriber.on_broadcast(&second[0]), data(&admin, 1, b"b"));
        // The wire form decodes to the same verdicts.
        let mut fresh = Subscriber::new(explicit(&admin));
        let mut wire = bytes::BytesMut::from(&encode_frame(&first[0])[..]);
        let body = bps_proto::next_frame(&mut wire, bps_proto::FRAME_BYTES_MAX_DEFAULT)
            .expect("frame")
            .expect("complete");
        assert_eq!(fresh.on_frame(body), data(&admin, 0, b"a"));
    }

    #[test]
    fn r41_subscriber_derives_the_id_from_kind_topic_challenge_and_index() {
        let admin = key(1);
        let mut publisher = publisher(explicit(&admin), &admin, 4, 0);
        publisher.enqueue_data(&b"x"[..]).expect("data");
        let genuine = delivered(&mut publisher, [1; 32]).remove(0);
        let tampered = [
            Broadcast {
                index: 5,
                ..genuine.clone()
            },
            Broadcast {
                challenge: Bytes::from(vec![2; 32]),
                ..genuine.clone()
            },
            Broadcast {
                kind: Kind::Roster as i32,
                ..genuine.clone()
            },
        ];
        for broadcast in tampered {
            let mut subscriber = Subscriber::new(explicit(&admin));
            assert!(
                matches!(
                    reason(subscriber.on_broadcast(&broadcast)),
                    DropReason::IdMismatch { .. }
                ),
                "{broadcast:?}"
            );
        }
        // Another cohort's topic derives other ids.
        let mut elsewhere = Subscriber::new(Spec {
            topic: [0x43; 32],
            ..explicit(&admin)
        });
        assert!(matches!(
            reason(elsewhere.on_broadcast(&genuine)),
            DropReason::IdMismatch { .. }
        ));
        let mut subscriber = Subscriber::new(explicit(&admin));
        let short = Broadcast {
            challenge: Bytes::from(vec![1; 31]),
            ..genuine
        };
        assert_eq!(
            reason(subscriber.on_broadcast(&short)),
            DropReason::ChallengeLength { bytes: 31 }
        );
    }

    #[test]
    fn r41_forged_and_other_key_frames_are_dropped_with_a_reason() {
        let admin = key(1);
        let stranger = key(9);
        let mut subscriber = Subscriber::new(explicit(&admin));

        // A stranger's valid session-feed chunk: not admitted under explicit authorship.
        let mut intruder = publisher(all(&admin), &stranger, 0, 0);
        intruder.enqueue_data(&b"spam"[..]).expect("data");
        let spam = delivered(&mut intruder, [1; 32]).remove(0);
        assert_eq!(
            reason(subscriber.on_broadcast(&spam)),
            DropReason::NotAdmitted {
                owner: stranger.address()
            }
        );

        // A forged signature: one flipped bit in s.
        let mut publisher = publisher(explicit(&admin), &admin, 0, 0);
        publisher.enqueue_data(&b"pay"[..]).expect("data");
        let genuine = delivered(&mut publisher, [1; 32]).remove(0);
        let mut forged_soc = genuine.soc.to_vec();
        forged_soc[32 + 40] ^= 0x01;
        let forged = Broadcast {
            soc: Bytes::from(forged_soc),
            ..genuine.clone()
        };
        match reason(subscriber.on_broadcast(&forged)) {
            DropReason::Invalid(_) | DropReason::NotAdmitted { .. } => {}
            other => panic!("forged signature: {other:?}"),
        }
        // A tampered payload changes the wrapped chunk and so the recovered owner.
        let mut tampered_soc = genuine.soc.to_vec();
        let last = tampered_soc.len() - 1;
        tampered_soc[last] ^= 0x01;
        let tampered = Broadcast {
            soc: Bytes::from(tampered_soc),
            ..genuine.clone()
        };
        match reason(subscriber.on_broadcast(&tampered)) {
            DropReason::Invalid(_) | DropReason::NotAdmitted { .. } => {}
            other => panic!("tampered payload: {other:?}"),
        }
        // Not a SOC at all.
        let stub = Broadcast {
            soc: Bytes::from(vec![0; 50]),
            ..genuine.clone()
        };
        assert!(matches!(
            reason(subscriber.on_broadcast(&stub)),
            DropReason::Chunk(SocError::TooShort { .. })
        ));
        // The genuine one still passes after all that.
        assert_eq!(subscriber.on_broadcast(&genuine), data(&admin, 0, b"pay"));
    }

    #[test]
    fn r41_unknown_kinds_auth_and_garbage_are_dropped() {
        let admin = key(1);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let mut publisher = publisher(explicit(&admin), &admin, 0, 0);
        publisher.begin_session([1; 32]);
        let auth = publisher
            .next_frame()
            .expect("signs")
            .expect("claim")
            .signed
            .broadcast;
        assert_eq!(auth.kind, Kind::Auth as i32);
        assert_eq!(
            reason(subscriber.on_broadcast(&auth)),
            DropReason::AuthDelivered
        );
        for value in [0, 5, 99, -1] {
            let unknown = Broadcast {
                kind: value,
                ..auth.clone()
            };
            assert_eq!(
                reason(subscriber.on_broadcast(&unknown)),
                DropReason::UnknownKind { value }
            );
        }
        assert!(matches!(
            reason(subscriber.on_frame(Bytes::from_static(&[0x0a, 0x05, 0x01]))),
            DropReason::Malformed(_)
        ));
    }

    #[test]
    fn r41_roster_grant_and_revoke_change_admission() {
        let admin = key(1);
        let member = key(2);
        let spec = explicit(&admin);
        let mut subscriber = Subscriber::new(spec);
        let mut admin_side = publisher(spec, &admin, 0, 0);
        let mut member_side = publisher(spec, &member, 0, 0);

        member_side.enqueue_data(&b"before"[..]).expect("data");
        // The member is not rostered: a broker would not let it publish, but if it did the
        // subscriber would still refuse it. Sign it directly, as a rogue broker could relay.
        let rogue = sign_broadcast(&member, Kind::Data, &TOPIC, &[7; 32], 0, b"before");
        assert_eq!(
            reason(subscriber.on_broadcast(&rogue.broadcast)),
            DropReason::NotAdmitted {
                owner: member.address()
            }
        );
        assert!(!subscriber.admits(&member.address()));

        // Grant.
        admin_side
            .enqueue_roster(&[member.address()])
            .expect("roster");
        let grant = delivered(&mut admin_side, [1; 32]).remove(0);
        assert!(matches!(
            subscriber.on_broadcast(&grant),
            Event::Roster { index: 0, .. }
        ));
        assert!(subscriber.admits(&member.address()));
        member_side.begin_session([2; 32]);
        member_side.on_roster(&[member.address()]);
        let mut frames = Vec::new();
        while let Some(outgoing) = member_side.next_frame().expect("signs") {
            member_side.mark_sent();
            frames.push(outgoing.signed.broadcast);
        }
        assert_eq!(frames.len(), 2, "claim, then DATA");
        assert_eq!(
            subscriber.on_broadcast(&frames[1]),
            data(&member, 0, b"before")
        );

        // Revoke.
        admin_side.enqueue_roster(&[]).expect("roster");
        let revoke = delivered(&mut admin_side, [3; 32]).remove(0);
        assert!(matches!(
            subscriber.on_broadcast(&revoke),
            Event::Roster { index: 1, .. }
        ));
        let after = sign_broadcast(&member, Kind::Data, &TOPIC, &[2; 32], 1, b"after");
        assert_eq!(
            reason(subscriber.on_broadcast(&after.broadcast)),
            DropReason::NotAdmitted {
                owner: member.address()
            }
        );
        // The admin itself is always admitted.
        let own = sign_broadcast(&admin, Kind::Data, &TOPIC, &[3; 32], 0, b"own");
        assert_eq!(
            subscriber.on_broadcast(&own.broadcast),
            data(&admin, 0, b"own")
        );
    }

    #[test]
    fn r41_service_chunks_must_validate_at_the_admin() {
        let admin = key(1);
        let member = key(2);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let grant = sign_broadcast(
            &admin,
            Kind::Roster,
            &TOPIC,
            &[1; 32],
            0,
            &encode_roster(&[member.address()]),
        );
        assert!(matches!(
            subscriber.on_broadcast(&grant.broadcast),
            Event::Roster { .. }
        ));
        // A rostered publisher signs a ROSTER and an EOS with correctly derived ids.
        let roster = sign_broadcast(
            &member,
            Kind::Roster,
            &TOPIC,
            &[2; 32],
            1,
            &encode_roster(&[member.address(), [8; 20]]),
        );
        assert!(matches!(
            reason(subscriber.on_broadcast(&roster.broadcast)),
            DropReason::Invalid(VerifyError::Soc(SocError::AddressMismatch { .. }))
        ));
        let eos = sign_broadcast(&member, Kind::Eos, &TOPIC, &[2; 32], 0, b"");
        assert!(matches!(
            reason(subscriber.on_broadcast(&eos.broadcast)),
            DropReason::Invalid(VerifyError::Soc(SocError::AddressMismatch { .. }))
        ));
        assert_eq!(subscriber.roster(), [member.address()]);
        assert_eq!(subscriber.roster_cursor(), 1);

        // EOS: an empty chunk at index 0 only.
        for (index, payload) in [(1u64, &b""[..]), (0, b"x")] {
            let malformed = sign_broadcast(&admin, Kind::Eos, &TOPIC, &[3; 32], index, payload);
            assert!(matches!(
                reason(subscriber.on_broadcast(&malformed.broadcast)),
                DropReason::MalformedEos { .. }
            ));
        }
        // A ROSTER that is not a Roster.
        let garbage = sign_broadcast(
            &admin,
            Kind::Roster,
            &TOPIC,
            &[3; 32],
            1,
            &[0x0a, 0x02, 1, 2],
        );
        assert!(matches!(
            reason(subscriber.on_broadcast(&garbage.broadcast)),
            DropReason::InvalidRoster(RosterError::EntryLength { .. })
        ));
        assert_eq!(
            subscriber.roster_cursor(),
            1,
            "an invalid roster moves no cursor"
        );
        let eos = sign_broadcast(&admin, Kind::Eos, &TOPIC, &[3; 32], 0, b"");
        assert_eq!(subscriber.on_broadcast(&eos.broadcast), Event::Eos);
    }

    #[test]
    fn r41_roster_index_gap_is_a_liveness_fault() {
        let admin = key(1);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let roster = |index: u64| {
            sign_broadcast(
                &admin,
                Kind::Roster,
                &TOPIC,
                &[index as u8; 32],
                index,
                &encode_roster(&[[index as u8; 20]]),
            )
            .broadcast
        };
        let gap = |event: Event| match event {
            Event::Roster { gap, .. } => gap,
            other => panic!("expected a roster, got {other:?}"),
        };
        // Joining late: the first roster seen is the latest, whatever its index.
        assert_eq!(gap(subscriber.on_broadcast(&roster(5))), None);
        assert_eq!(gap(subscriber.on_broadcast(&roster(6))), None);
        assert_eq!(
            gap(subscriber.on_broadcast(&roster(9))),
            Some(IndexGap {
                expected: 7,
                got: 9
            })
        );
        assert_eq!(
            subscriber.roster(),
            [[9; 20]],
            "the newer roster still applies"
        );
        assert_eq!(
            reason(subscriber.on_broadcast(&roster(8))),
            DropReason::Retransmit {
                kind: Kind::Roster,
                index: 8,
                cursor: 10
            }
        );
    }

    #[test]
    fn r22_the_roster_in_force_sent_again_is_recognised() {
        let admin = key(1);
        let member = key(2);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let roster = |signer: &SigningKey, challenge: u8, index: u64| {
            sign_broadcast(
                signer,
                Kind::Roster,
                &TOPIC,
                &[challenge; 32],
                index,
                &encode_roster(&[member.address()]),
            )
            .broadcast
        };
        let retransmit = |event: &Event| {
            matches!(
                event,
                Event::Dropped {
                    reason: DropReason::Retransmit { .. }
                }
            )
        };
        let first = subscriber.on_broadcast(&roster(&admin, 1, 3));
        assert!(matches!(first, Event::Roster { index: 3, .. }), "{first:?}");
        assert!(!subscriber.repeats_roster_in_force(&first), "a new roster");
        // The broker sends roster 3 again first on a new stream: the same frame.
        let again = subscriber.on_broadcast(&roster(&admin, 1, 3));
        assert!(retransmit(&again), "{again:?}");
        assert!(subscriber.repeats_roster_in_force(&again));
        // Once roster 4 is in force, roster 3 is a retransmit but not the one in force.
        let next = subscriber.on_broadcast(&roster(&admin, 2, 4));
        assert!(matches!(next, Event::Roster { index: 4, .. }), "{next:?}");
        let stale = subscriber.on_broadcast(&roster(&admin, 1, 3));
        assert!(retransmit(&stale), "{stale:?}");
        assert!(!subscriber.repeats_roster_in_force(&stale));
        let repeat = subscriber.on_broadcast(&roster(&admin, 3, 4));
        assert!(subscriber.repeats_roster_in_force(&repeat));
        // A non-admin's chunk at the index in force is no roster at all.
        let forged = subscriber.on_broadcast(&roster(&member, 3, 4));
        assert!(matches!(
            forged,
            Event::Dropped {
                reason: DropReason::Invalid(_)
            }
        ));
        assert!(!subscriber.repeats_roster_in_force(&forged));
        // A DATA retransmit just below its cursor is not a roster.
        let data = sign_broadcast(&admin, Kind::Data, &TOPIC, &[1; 32], 4, b"x").broadcast;
        assert!(matches!(subscriber.on_broadcast(&data), Event::Data { .. }));
        let data_again = subscriber.on_broadcast(&data);
        assert!(retransmit(&data_again), "{data_again:?}");
        assert!(!subscriber.repeats_roster_in_force(&data_again));
    }

    #[test]
    fn r41_cursors_drop_retransmits_and_survive_sessions() {
        let admin = key(1);
        let spec = explicit(&admin);
        let mut subscriber = Subscriber::new(spec);
        let mut publisher = publisher(spec, &admin, 20, 0);
        publisher.enqueue_data(&b"a"[..]).expect("data");
        publisher.enqueue_data(&b"b"[..]).expect("data");
        let first = delivered(&mut publisher, [1; 32]);
        for broadcast in &first {
            assert!(matches!(
                subscriber.on_broadcast(broadcast),
                Event::Data { .. }
            ));
        }
        // The same frames again (a replay), and the same index re-signed on a new stream.
        assert_eq!(
            reason(subscriber.on_broadcast(&first[1])),
            DropReason::Retransmit {
                kind: Kind::Data,
                index: 21,
                cursor: 22
            }
        );
        let resigned = sign_broadcast(&admin, Kind::Data, &TOPIC, &[2; 32], 21, b"b");
        assert!(matches!(
            reason(subscriber.on_broadcast(&resigned.broadcast)),
            DropReason::Retransmit { .. }
        ));
        // Gaps are fine for DATA; the next session continues the sequence.
        publisher.enqueue_data(&b"c"[..]).expect("data");
        let second = delivered(&mut publisher, [2; 32]);
        assert_eq!(subscriber.on_broadcast(&second[0]), data(&admin, 22, b"c"));
        let far = sign_broadcast(&admin, Kind::Data, &TOPIC, &[2; 32], 1000, b"d");
        assert_eq!(
            subscriber.on_broadcast(&far.broadcast),
            data(&admin, 1000, b"d")
        );
        let max = sign_broadcast(&admin, Kind::Data, &TOPIC, &[2; 32], u64::MAX, b"e");
        assert_eq!(
            reason(subscriber.on_broadcast(&max.broadcast)),
            DropReason::IndexMax { kind: Kind::Data }
        );
    }

    #[test]
    fn r27_a_full_cursor_table_evicts_the_least_recent_publisher_and_says_so() {
        let cohort = all(&key(1));
        let limits = SubscriberLimits {
            cursors_max: 2,
            ..SubscriberLimits::default()
        };
        let mut subscriber = Subscriber::with_limits(cohort, limits);
        let (first, second, third) = (key(2), key(3), key(4));
        let frame = |signer: &SigningKey, index: u64| {
            sign_broadcast(signer, Kind::Data, &TOPIC, &[7; 32], index, b"x").broadcast
        };
        let mut evicted = |broadcast: &Broadcast| {
            let received = subscriber.receive_broadcast(broadcast);
            assert!(
                matches!(received.event, Event::Data { .. }),
                "{:?}",
                received.event
            );
            received.evicted
        };
        assert_eq!(evicted(&frame(&first, 0)), None);
        assert_eq!(evicted(&frame(&second, 0)), None);
        // `first` advances again, so `second` is the least recent when `third` arrives.
        assert_eq!(evicted(&frame(&first, 1)), None);
        assert_eq!(
            evicted(&frame(&third, 0)),
            Some(EvictedCursor {
                owner: second.address(),
                cursor: 1
            })
        );
        // The evicted publisher's cursor restarts: its old frame is shown again.
        assert_eq!(
            evicted(&frame(&second, 0)),
            Some(EvictedCursor {
                owner: first.address(),
                cursor: 2
            })
        );
        assert_eq!(subscriber.cursors_evicted(), 2);
        assert_eq!(subscriber.cursor_count(), 2);
        assert_eq!(subscriber.cursor(&first.address()), 0, "forgotten");
        assert_eq!(
            reason(subscriber.on_broadcast(&frame(&third, 0))),
            DropReason::Retransmit {
                kind: Kind::Data,
                index: 0,
                cursor: 1
            },
            "a held cursor still drops retransmits"
        );
        assert_eq!(subscriber.cursors_evicted(), 2);
    }

    #[test]
    fn r41_all_admits_anyone_with_a_session_feed_chunk() {
        let admin = key(1);
        let cohort = all(&admin);
        let mut subscriber = Subscriber::new(cohort);
        for (byte, signer) in [(2u8, key(2)), (3, key(3)), (1, admin.clone())] {
            let mut member = publisher(cohort, &signer, 0, 0);
            member.enqueue_data(vec![byte]).expect("data");
            let frame = delivered(&mut member, [byte; 32]).remove(0);
            assert_eq!(subscriber.on_broadcast(&frame), data(&signer, 0, &[byte]));
        }
        // Under ALL an implicit-style chunk (the binding's own id, no challenge) is not a
        // session-feed chunk.
        let implicit = sign_implicit(&key(2), &feed_id(TOPIC, 0), None, b"x");
        assert_eq!(
            reason(subscriber.on_broadcast(&implicit.broadcast)),
            DropReason::ChallengeLength { bytes: 0 }
        );
    }

    fn soc_id_topic_for(owner: &Address) -> Hash {
        (0u64..)
            .map(|nonce| keccak256(&nonce.to_be_bytes()))
            .find(|topic| proximity(&soc_address(topic, owner), topic) >= PO_MIN)
            .expect("a topic within 2^64 tries")
    }

    #[test]
    fn r41_implicit_admission_follows_the_binding_shape() {
        let signer = key(3);
        let other = key(4);
        let address = signer.address();

        // MNEMONIC and FEED_TOPIC: anyone.
        for binding in [Binding::Mnemonic, Binding::FeedTopic] {
            let spec = spec(None, binding, false);
            let mut subscriber = Subscriber::new(spec);
            for who in [&signer, &other] {
                let mut publisher = publisher(spec, who, 0, 0);
                publisher.enqueue_data(&b"hi"[..]).expect("data");
                let frame = delivered(&mut publisher, [0; 32]).remove(0);
                assert!(
                    matches!(subscriber.on_broadcast(&frame), Event::Data { owner, .. } if owner == who.address()),
                    "{binding:?}"
                );
                assert_eq!(
                    reason(subscriber.on_broadcast(&frame)),
                    DropReason::Duplicate {
                        key: soc_address(SocRef::parse(&frame.soc).expect("soc").id, who.address())
                    }
                );
            }
        }
        // FEED_TOPIC: the id must be the feed id of the frame's index (D4).
        let feed = spec(None, Binding::FeedTopic, false);
        let mut subscriber = Subscriber::new(feed);
        let wrong = sign_implicit(&signer, &feed_id(TOPIC, 3), Some(4), b"x");
        assert!(matches!(
            reason(subscriber.on_broadcast(&wrong.broadcast)),
            DropReason::Invalid(VerifyError::Shape(ShapeError::FeedIdMismatch { .. }))
        ));

        // OWNER: only the fixed owner, with PO ≥ 16.
        let owner = Spec {
            topic: keccak256(&address),
            ..spec(None, Binding::Owner, false)
        };
        let mut subscriber = Subscriber::new(owner);
        let mut publisher = publisher(owner, &signer, 0, 0);
        publisher.enqueue_data(&b"mic"[..]).expect("data");
        let frame = delivered(&mut publisher, [0; 32]).remove(0);
        assert_eq!(subscriber.on_broadcast(&frame), data(&signer, 0, b"mic"));
        let id = *SocRef::parse(&frame.soc).expect("soc").id;
        let impostor = sign_implicit(&other, &id, None, b"mic");
        assert!(matches!(
            reason(subscriber.on_broadcast(&impostor.broadcast)),
            DropReason::Invalid(VerifyError::Shape(ShapeError::OwnerNotTopic { .. }))
        ));

        // ANCHOR: keccak256(id ‖ owner) must be the topic; dedup on the wrapped chunk.
        let anchor_id = [0x77; 32];
        let anchor = Spec {
            topic: soc_address(anchor_id, address),
            ..spec(None, Binding::Anchor, false)
        };
        let mut subscriber = Subscriber::new(anchor);
        for payload in [&b"one"[..], b"two"] {
            let gsoc = sign_implicit(&signer, &anchor_id, None, payload);
            assert_eq!(
                subscriber.on_broadcast(&gsoc.broadcast),
                data(&signer, 0, payload)
            );
        }
        let impostor = sign_implicit(&other, &anchor_id, None, b"three");
        assert!(matches!(
            reason(subscriber.on_broadcast(&impostor.broadcast)),
            DropReason::Invalid(VerifyError::Shape(ShapeError::AddressNotTopic { .. }))
        ));

        // SOC_ID: id = topic and PO ≥ 16 (a key that does not fit is dropped).
        let topic = soc_id_topic_for(&address);
        let soc_id = Spec {
            topic,
            ..spec(None, Binding::SocId, false)
        };
        let mut subscriber = Subscriber::new(soc_id);
        let fits = sign_implicit(&signer, &topic, None, b"moc");
        assert_eq!(
            subscriber.on_broadcast(&fits.broadcast),
            data(&signer, 0, b"moc")
        );
        if proximity(&soc_address(topic, other.address()), &topic) < PO_MIN {
            let far = sign_implicit(&other, &topic, None, b"moc");
            assert!(matches!(
                reason(subscriber.on_broadcast(&far.broadcast)),
                DropReason::Invalid(VerifyError::Shape(ShapeError::ProximityTooLow { .. }))
            ));
        }

        // No admin, no service kinds.
        let mut subscriber = Subscriber::new(spec(None, Binding::Mnemonic, false));
        let roster = sign_broadcast(&signer, Kind::Roster, &TOPIC, &[1; 32], 0, b"");
        assert_eq!(
            reason(subscriber.on_broadcast(&roster.broadcast)),
            DropReason::ServiceWithoutAdmin { kind: Kind::Roster }
        );
        // A chunk with a bad signature under implicit authorship.
        let mut broken = sign_soc(&signer, &feed_id(TOPIC, 0), 1, b"x").to_vec();
        broken[32 + 64] = 0;
        let bad = Broadcast {
            soc: Bytes::from(broken),
            kind: Kind::Data as i32,
            challenge: Bytes::new(),
            index: 0,
        };
        assert!(matches!(
            reason(subscriber.on_broadcast(&bad)),
            DropReason::Invalid(VerifyError::Soc(SocError::Signature(_)))
        ));
    }

    #[test]
    fn implicit_dedup_window_is_bounded() {
        let signer = key(3);
        let spec = spec(None, Binding::Mnemonic, false);
        let mut subscriber = Subscriber::new(spec);
        let first = sign_implicit(&signer, &feed_id(TOPIC, 0), None, b"x");
        assert!(matches!(
            subscriber.on_broadcast(&first.broadcast),
            Event::Data { .. }
        ));
        for index in 1..=IMPLICIT_DEDUP_CHUNKS_MAX as u64 {
            let next = sign_implicit(&signer, &feed_id(TOPIC, index), None, b"");
            assert!(matches!(
                subscriber.on_broadcast(&next.broadcast),
                Event::Data { .. }
            ));
        }
        // The first chunk fell out of the window: accepted again (R28's accepted risk).
        assert!(matches!(
            subscriber.on_broadcast(&first.broadcast),
            Event::Data { .. }
        ));
    }

    /// The SOC address of a produced chunk, from its own id and the signer, by hand: the
    /// check must not lean on the helpers the subscriber uses.
    fn address_of(chunk: &[u8], owner: &Address) -> Hash {
        keccak256(&[&chunk[..32], &owner[..]].concat())
    }

    fn next(received: &Received) -> NextUpdate {
        received
            .next
            .unwrap_or_else(|| panic!("no next update for {:?}", received.event))
    }

    #[test]
    fn r27_data_gaps_are_reported_per_publisher() {
        let admin = key(1);
        for cohort in [explicit(&admin), all(&admin)] {
            let member = key(2);
            let mut subscriber = Subscriber::new(cohort);
            let frame = |signer: &SigningKey, index: u64| {
                sign_broadcast(signer, Kind::Data, &TOPIC, &[7; 32], index, b"x").broadcast
            };
            let mut gap = |broadcast: &Broadcast| subscriber.receive_broadcast(broadcast).gap;
            for index in [0, 1, 2] {
                assert_eq!(gap(&frame(&admin, index)), None, "{index}");
            }
            assert_eq!(
                gap(&frame(&admin, 5)),
                Some(IndexGap {
                    expected: 3,
                    got: 5
                })
            );
            assert_eq!(gap(&frame(&admin, 6)), None);
            // A retransmit is no gap; neither is the first frame of a publisher not yet seen.
            assert_eq!(gap(&frame(&admin, 4)), None);
            if cohort.all {
                assert_eq!(gap(&frame(&member, 7)), None, "first frame of a publisher");
                assert_eq!(
                    gap(&frame(&member, 10)),
                    Some(IndexGap {
                        expected: 8,
                        got: 10
                    }),
                    "per publisher"
                );
            }
        }
        // After an eviction the publisher is not yet seen again: no gap.
        let limits = SubscriberLimits {
            cursors_max: 1,
            ..SubscriberLimits::default()
        };
        let mut subscriber = Subscriber::with_limits(all(&admin), limits);
        for (signer, index) in [(key(2), 0), (key(3), 0)] {
            let frame = sign_broadcast(&signer, Kind::Data, &TOPIC, &[7; 32], index, b"x");
            assert_eq!(subscriber.receive_broadcast(&frame.broadcast).gap, None);
        }
        let back = sign_broadcast(&key(2), Kind::Data, &TOPIC, &[7; 32], 9, b"x");
        let received = subscriber.receive_broadcast(&back.broadcast);
        assert_eq!(received.gap, None);
        assert!(received.evicted.is_some());
    }

    #[test]
    fn next_address_is_where_the_publisher_signs_its_next_update() {
        let admin = key(1);
        let member = key(2);
        for (cohort, signer) in [(explicit(&admin), &admin), (all(&admin), &member)] {
            let owner = signer.address();
            let challenge = [0x5c; 32];
            let mut subscriber = Subscriber::new(cohort);
            let produced = |start: u64, count: usize| {
                let mut publisher = publisher(cohort, signer, start, 0);
                for _ in 0..count {
                    publisher.enqueue_data(&b"update"[..]).expect("data");
                }
                delivered(&mut publisher, challenge)
            };
            // Published: 0, 1, 2 and then 5 (a gap); 3 and 6 are what the publisher would
            // sign next on the same stream.
            let first = produced(0, 4);
            let later = produced(5, 2);
            for (delivery, upcoming) in [
                (&first[0], &first[1]),
                (&first[1], &first[2]),
                (&first[2], &first[3]),
                (&later[0], &later[1]),
            ] {
                let received = subscriber.receive_broadcast(delivery);
                assert!(matches!(received.event, Event::Data { .. }));
                let expected = next(&received);
                assert_eq!(expected.index, upcoming.index);
                assert_eq!(expected.index, delivery.index + 1);
                assert_eq!(expected.address, address_of(&upcoming.soc, &owner));
            }
            // On another stream (another challenge) the next update is elsewhere.
            let elsewhere = {
                let mut publisher = publisher(cohort, signer, 6, 0);
                publisher.enqueue_data(&b"update"[..]).expect("data");
                delivered(&mut publisher, [0x5d; 32]).remove(0)
            };
            let after_five = subscriber.receive_broadcast(&later[1]);
            assert_ne!(
                next(&after_five).address,
                address_of(&elsewhere.soc, &owner)
            );
        }
        // The admin's ROSTER feed: the next roster on the same stream.
        let mut subscriber = Subscriber::new(explicit(&admin));
        let mut publisher = publisher(explicit(&admin), &admin, 0, 8);
        publisher
            .enqueue_roster(&[member.address()])
            .expect("roster");
        publisher.enqueue_roster(&[]).expect("roster");
        let rosters = delivered(&mut publisher, [0x6e; 32]);
        let received = subscriber.receive_broadcast(&rosters[0]);
        assert!(matches!(received.event, Event::Roster { index: 8, .. }));
        assert_eq!(
            next(&received),
            NextUpdate {
                index: 9,
                address: address_of(&rosters[1].soc, &admin.address())
            }
        );
        // EOS ends the channel: nothing comes next.
        publisher.enqueue_eos().expect("eos");
        let eos = delivered(&mut publisher, [0x6e; 32]).remove(0);
        let received = subscriber.receive_broadcast(&eos);
        assert_eq!((received.event, received.next), (Event::Eos, None));
    }

    #[test]
    fn d13_no_next_update_at_the_end_of_the_index_space() {
        let admin = key(1);
        let mut subscriber = Subscriber::new(explicit(&admin));
        let at = |index: u64| {
            sign_broadcast(&admin, Kind::Data, &TOPIC, &[7; 32], index, b"x").broadcast
        };
        let before_last = subscriber.receive_broadcast(&at(u64::MAX - 2));
        assert_eq!(next(&before_last).index, u64::MAX - 1);
        let last = subscriber.receive_broadcast(&at(u64::MAX - 1));
        assert!(matches!(last.event, Event::Data { .. }));
        assert_eq!(last.next, None, "2^64 - 1 is never used");

        let feed = spec(None, Binding::FeedTopic, false);
        let mut subscriber = Subscriber::new(feed);
        let last = sign_implicit(
            &admin,
            &feed_id(TOPIC, u64::MAX - 1),
            Some(u64::MAX - 1),
            b"x",
        );
        let received = subscriber.receive_broadcast(&last.broadcast);
        assert!(matches!(received.event, Event::Data { .. }));
        assert_eq!(received.next, None);
    }

    #[test]
    fn implicit_feed_topic_names_the_next_feed_update() {
        let signer = key(3);
        let owner = signer.address();
        let feed = spec(None, Binding::FeedTopic, false);
        let mut subscriber = Subscriber::new(feed);
        let mut writer = publisher(feed, &signer, 40, 0);
        for _ in 0..3 {
            writer.enqueue_data(&b"feed"[..]).expect("data");
        }
        let frames = delivered(&mut writer, [0; 32]);
        for pair in frames.windows(2) {
            let received = subscriber.receive_broadcast(&pair[0]);
            assert!(matches!(received.event, Event::Data { .. }));
            assert_eq!(
                next(&received),
                NextUpdate {
                    index: pair[1].index,
                    address: address_of(&pair[1].soc, &owner)
                }
            );
            assert_eq!(received.gap, None, "consecutive feed updates");
        }
        // Any owner may write a graffiti feed: the next update is the same signer's.
        let other = key(4);
        let theirs = sign_implicit(&other, &feed_id(TOPIC, 7), Some(7), b"x");
        let received = subscriber.receive_broadcast(&theirs.broadcast);
        let upcoming = sign_implicit(&other, &feed_id(TOPIC, 8), Some(8), b"y");
        assert_eq!(
            next(&received).address,
            address_of(&upcoming.chunk, &other.address())
        );
        // No sequence of ids under the other implicit bindings.
        let mnemonic = spec(None, Binding::Mnemonic, false);
        let mut subscriber = Subscriber::new(mnemonic);
        let mut publisher = publisher(mnemonic, &signer, 0, 0);
        publisher.enqueue_data(&b"any"[..]).expect("data");
        let frame = delivered(&mut publisher, [0; 32]).remove(0);
        let received = subscriber.receive_broadcast(&frame);
        assert!(matches!(received.event, Event::Data { .. }));
        assert_eq!(received.next, None);
    }

    /// Update `index` of the implicit FEED_TOPIC feed on [`TOPIC`], written by `writer`.
    fn feed_update(writer: &SigningKey, index: u64) -> Broadcast {
        sign_implicit(writer, &feed_id(TOPIC, index), Some(index), b"update").broadcast
    }

    fn gap(expected: u64, got: u64) -> Option<IndexGap> {
        Some(IndexGap { expected, got })
    }

    #[test]
    fn implicit_feed_topic_gaps_are_reported_per_owner() {
        let feed = spec(None, Binding::FeedTopic, false);
        let mut subscriber = Subscriber::new(feed);
        let (first, second) = (key(3), key(4));
        // Two graffiti writers interleaved on one feed, each skipping on its own.
        let deliveries = [
            (&first, 0, None),
            (&second, 10, None),
            (&first, 1, None),
            (&second, 12, gap(11, 12)),
            (&first, 4, gap(2, 4)),
            (&second, 13, None),
            (&first, 5, None),
            (&second, 20, gap(14, 20)),
        ];
        for (writer, index, expected) in deliveries {
            let received = subscriber.receive_broadcast(&feed_update(writer, index));
            assert_eq!(
                received.event,
                data(writer, index, b"update"),
                "{index} delivered"
            );
            assert_eq!(received.gap, expected, "index {index}");
            assert_eq!(received.evicted, None);
        }
        assert_eq!(subscriber.cursor(&first.address()), 6);
        assert_eq!(subscriber.cursor(&second.address()), 21);
        assert_eq!(subscriber.cursor_count(), 2);
        // The other implicit bindings have no index sequence: no cursor, no gap.
        let mnemonic = spec(None, Binding::Mnemonic, false);
        let mut subscriber = Subscriber::new(mnemonic);
        for index in [0, 5, 9] {
            let received = subscriber.receive_broadcast(&feed_update(&first, index));
            assert!(matches!(received.event, Event::Data { .. }));
            assert_eq!((received.gap, received.evicted), (None, None));
        }
        assert_eq!(subscriber.cursor_count(), 0);
    }

    #[test]
    fn implicit_feed_topic_a_lower_index_is_delivered_without_a_gap_and_keeps_the_cursor() {
        let writer = key(3);
        let feed = spec(None, Binding::FeedTopic, false);
        let mut subscriber = Subscriber::new(feed);
        for index in [5, 6] {
            subscriber.receive_broadcast(&feed_update(&writer, index));
        }
        // Out of order: not a retransmit under implicit authorship (R28 dedups).
        let late = subscriber.receive_broadcast(&feed_update(&writer, 2));
        assert_eq!(late.event, data(&writer, 2, b"update"));
        assert_eq!(late.gap, None);
        assert_eq!(next(&late).index, 3, "the update after the one delivered");
        assert_eq!(subscriber.cursor(&writer.address()), 7, "not moved back");
        assert!(matches!(
            reason(subscriber.on_broadcast(&feed_update(&writer, 2))),
            DropReason::Duplicate { .. }
        ));
        assert_eq!(
            subscriber.receive_broadcast(&feed_update(&writer, 9)).gap,
            gap(7, 9),
            "measured from the highest index seen"
        );
        // The last index the shape admits: no index lies above a cursor held there.
        for index in [u64::MAX - 1, u64::MAX, 3] {
            let received = subscriber.receive_broadcast(&feed_update(&writer, index));
            assert!(matches!(received.event, Event::Data { .. }), "{index}");
            let expected = (index == u64::MAX - 1).then_some(IndexGap {
                expected: 10,
                got: index,
            });
            assert_eq!(received.gap, expected, "index {index}");
        }
        assert_eq!(subscriber.cursor(&writer.address()), u64::MAX);
    }

    #[test]
    fn implicit_feed_topic_an_evicted_writer_restarts_without_a_gap() {
        let feed = spec(None, Binding::FeedTopic, false);
        let limits = SubscriberLimits {
            cursors_max: 1,
            ..SubscriberLimits::default()
        };
        let mut subscriber = Subscriber::with_limits(feed, limits);
        let (first, second) = (key(3), key(4));
        assert_eq!(
            subscriber
                .receive_broadcast(&feed_update(&first, 0))
                .evicted,
            None
        );
        let newcomer = subscriber.receive_broadcast(&feed_update(&second, 4));
        assert_eq!(
            (newcomer.gap, newcomer.evicted),
            (
                None,
                Some(EvictedCursor {
                    owner: first.address(),
                    cursor: 1
                })
            )
        );
        let back = subscriber.receive_broadcast(&feed_update(&first, 9));
        assert_eq!(back.gap, None, "first frame after the eviction");
        assert_eq!(
            back.evicted,
            Some(EvictedCursor {
                owner: second.address(),
                cursor: 5
            })
        );
        assert_eq!(subscriber.cursors_evicted(), 2);
        assert_eq!(
            subscriber.receive_broadcast(&feed_update(&first, 11)).gap,
            gap(10, 11),
            "held again"
        );
    }

    /// The whole DATA admission of a small cohort against the obvious model: a cursor per
    /// publisher in least-recently-advanced order, at most `CURSORS` of them.
    #[test]
    fn r27_random_deliveries_agree_with_a_model_of_cursors_gaps_and_evictions() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};

        const CURSORS: usize = 3;
        const INDICES: u64 = 12;
        let cohort = all(&key(1));
        let signers: Vec<SigningKey> = (2..7).map(key).collect();
        // Every (publisher, index) signed once, each publisher under its own challenge.
        let frames: Vec<Vec<Broadcast>> = signers
            .iter()
            .enumerate()
            .map(|(seat, signer)| {
                (0..INDICES)
                    .map(|index| {
                        sign_broadcast(signer, Kind::Data, &TOPIC, &[seat as u8; 32], index, b"")
                            .broadcast
                    })
                    .collect()
            })
            .collect();
        let limits = SubscriberLimits {
            cursors_max: CURSORS,
            ..SubscriberLimits::default()
        };
        let mut subscriber = Subscriber::with_limits(cohort, limits);
        let mut model: Vec<(Address, u64)> = Vec::new();
        let mut rng = StdRng::seed_from_u64(27);
        let (mut gaps, mut evictions, mut retransmits) = (0, 0u64, 0);
        for step in 0..3_000 {
            let seat = rng.random_range(0..signers.len());
            let index = rng.random_range(0..INDICES);
            let owner = signers[seat].address();
            let known = model
                .iter()
                .position(|(held, _)| *held == owner)
                .map(|position| (position, model[position].1));
            let received = subscriber.receive_broadcast(&frames[seat][index as usize]);
            if let Some((_, cursor)) = known.filter(|(_, cursor)| index < *cursor) {
                retransmits += 1;
                assert_eq!(
                    reason(received.event),
                    DropReason::Retransmit {
                        kind: Kind::Data,
                        index,
                        cursor
                    },
                    "step {step}"
                );
                continue;
            }
            let gap = known
                .map(|(_, cursor)| cursor)
                .filter(|cursor| index > *cursor)
                .map(|expected| IndexGap {
                    expected,
                    got: index,
                });
            let evicted = match known {
                Some((position, _)) => {
                    model.remove(position);
                    None
                }
                None if model.len() == CURSORS => {
                    let (oldest, cursor) = model.remove(0);
                    Some(EvictedCursor {
                        owner: oldest,
                        cursor,
                    })
                }
                None => None,
            };
            model.push((owner, index + 1));
            gaps += usize::from(gap.is_some());
            assert_eq!(received.gap, gap, "step {step}");
            assert_eq!(received.evicted, evicted, "step {step}");
            assert_eq!(next(&received).index, index + 1);
            assert!(matches!(received.event, Event::Data { owner: got, .. } if got == owner));
            evictions += u64::from(evicted.is_some());
            assert_eq!(subscriber.cursors_evicted(), evictions);
            assert_eq!(subscriber.cursor_count(), model.len());
        }
        assert!(
            gaps > 100 && evictions > 100 && retransmits > 100,
            "all paths exercised"
        );
    }
}
