//! What the machine asks the I/O layer to do, and what the I/O layer reports back about a
//! stream's end.
//!
//! Owns: `Action` and its typed reasons (`CloseReason`, `RejectCause`, `FullCause`,
//! `Violation`, `WrongStream`, `InvalidSoc`) and `ClosedBy`.
//! Never does: carry out anything. The machine decides; the I/O layer only executes, in the
//! order the actions were drained.

use std::fmt;
use std::sync::Arc;

use bps_proto::{Address, CohortKey, Hash, Join, RejectReason, RelayId, RelayPathError, Spec};
use bps_verify::{CompressedKey, SocError, Verified, VerifyError, VerifyRequest};
use bytes::Bytes;

use super::counters::Counter;
use super::fanout::Targets;
use super::ids::{CohortSerial, PeerId, StreamId, Ticket, WriteNotice};
use super::relay::{RelayOutcome, RelayReply};
use super::time::Millis;

/// One thing for the I/O layer to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Queue `frame` (varint length + body) on one stream: an `Ack`, or a single-stream
    /// Broadcast (roster first-delivery, pre-claim roster, reduced roster to a revoked stream).
    /// With a `notice`, report `on_written(stream, notice)` once the frame is on the wire.
    Send {
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
    },
    /// D11: queue `frames` (never empty) on one stream, in order, after everything already
    /// queued for it and before anything queued later: the retained DATA of a history
    /// cohort, for a stream entering its fan-out set (right after the latest roster, R22).
    /// Not an R26 matter: the I/O layer never resets a stream for the size of its backlog.
    Backlog {
        stream: StreamId,
        frames: Vec<Delivered>,
    },
    /// Queue the same encoded frame on every stream of `targets.all` except those in
    /// `targets.except` (both ascending, so grouped by core; `except` holds the publishing
    /// identity's streams, R25, and streams that get the frame on their own). `facts` are
    /// what verification established about its chunk, for carriers that deliver fields of
    /// it rather than the frame (the WebSocket bridge, docs/PROTOCOL.md W6).
    Deliver {
        frame: Bytes,
        targets: Targets,
        facts: Arc<ChunkFacts>,
    },
    /// Verify a chunk and report the result through `on_verified(ticket, ..)`.
    Verify {
        ticket: Ticket,
        request: VerifyRequest,
    },
    /// What became of a relayed service chunk (W5) whose signature check `on_relay` asked
    /// for; `reply` is what `on_relay` was given.
    Relayed {
        reply: RelayReply,
        outcome: RelayOutcome,
    },
    /// The machine is done with one frame body of this stream (read-window credit).
    Consumed { stream: StreamId },
    /// Close the stream. The machine has forgotten it already; later reports about it are
    /// ignored. `reason.graceful()` says whether queued frames go out first.
    Close {
        stream: StreamId,
        reason: CloseReason,
    },
    /// Refuse connections from `peer` until `until` (R39).
    Blocklist { peer: PeerId, until: Millis },
    /// Call `on_tick` at (or after) `at`; replaces any later timer asked for before.
    ArmTimer { at: Millis },
    /// Edge mode: keep one upstream subscriber stream to the root of the cohort `cohort`
    /// (its `key` placed over the broker's upstream list), joined with `join` (the spec and
    /// this edge's addr) and `path` (the relay path of the Join that created the cohort, to
    /// which the I/O layer adds this broker's relay id), reconnecting with backoff until a
    /// `DropUpstream` for it; each stream it opens is reported with `on_upstream`.
    OpenUpstream {
        cohort: CohortSerial,
        key: CohortKey,
        spec: Spec,
        path: Vec<RelayId>,
    },
    /// Edge mode: the cohort is gone; stop keeping its upstream (its stream, if attached,
    /// is closed by a `Close` of its own).
    DropUpstream { cohort: CohortSerial },
    /// Edge mode: splice the local stream `stream` to the root of the cohort `key`: join it
    /// with `join` and `path` (plus this broker's relay id) and report with `on_splice`.
    OpenSplice {
        stream: StreamId,
        key: CohortKey,
        join: Join,
        path: Vec<RelayId>,
    },
}

/// An accepted frame as the machine hands it out again (a backlog, D11), with its facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub frame: Bytes,
    pub facts: Arc<ChunkFacts>,
}

/// What verification established about an accepted chunk, beyond its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkFacts {
    /// The recovered signer.
    pub owner: Address,
    /// The SOC address `keccak256(id ‖ owner)`.
    pub address: Hash,
    /// The wrapped CAC's address.
    pub wrapped: Hash,
    /// The signer's key, compressed.
    pub public_key: CompressedKey,
}

impl From<&Verified> for ChunkFacts {
    fn from(verified: &Verified) -> ChunkFacts {
        ChunkFacts {
            owner: verified.owner,
            address: verified.address,
            wrapped: verified.wrapped,
            public_key: verified.public_key,
        }
    }
}

/// Why the machine closes a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The Join was answered REJECTED (R3, R5).
    Rejected(RejectCause),
    /// The Join was answered FULL (R30..R33, R37).
    Full(FullCause),
    /// The peer is blocklisted; no Ack was sent (R39).
    Blocklisted,
    /// The stream broke a rule (R39); its peer is blocklisted unless that is disabled.
    Violation(Violation),
    /// A pending or silent stream did not claim in time (R35).
    ClaimTimeout,
    /// A newer publisher stream of the same address took this one's place (R29).
    Superseded,
    /// The cohort saw no accepted publisher frame for the inactivity deadline (R34).
    Inactive,
    /// The admin ended the cohort (R21).
    EndOfStream,
    /// A revoked stream that was exempt from R30 found no room in the fan-out bound; it
    /// leaves after its reduced roster.
    RevokedWithoutRoom,
    /// The stream's frames were dropped without penalty (unknown kind, wrong challenge,
    /// retransmit) faster than the configured rate; R15 and R16 allow the reset.
    DropRate,
    /// Edge mode: a ROSTER named this spectator's addr, so it may now publish, which it can
    /// only do at the root: it ends after that roster, and its client's rejoin is spliced.
    RosteredAtEdge,
    /// Edge mode: an upstream stream for a cohort that is gone, or that has one already.
    UpstreamUnwanted,
    /// Edge mode: the other side of a spliced stream ended (the root's, or the client's).
    UpstreamEnded,
    /// Edge mode: the root answered a spliced stream's Join FULL or REJECTED (that Ack was
    /// handed on).
    RootRefused,
    /// Edge mode: no broker of the list answered a spliced stream's Join in time.
    RootUnreachable,
    /// Edge mode: another edge's upstream stream whose relay path holds the edge this
    /// cohort's own upstream reached: the two edges feed each other.
    RelayLoop,
}

impl CloseReason {
    /// True when the queued frames (the Ack, the EOS, a reduced roster) must be flushed
    /// before the stream ends; false for a reset.
    #[must_use]
    pub fn graceful(&self) -> bool {
        match self {
            CloseReason::Rejected(_)
            | CloseReason::Full(_)
            | CloseReason::EndOfStream
            | CloseReason::RevokedWithoutRoom
            | CloseReason::RosteredAtEdge
            | CloseReason::UpstreamEnded
            | CloseReason::RootRefused => true,
            CloseReason::Blocklisted
            | CloseReason::Violation(_)
            | CloseReason::ClaimTimeout
            | CloseReason::Superseded
            | CloseReason::Inactive
            | CloseReason::DropRate
            | CloseReason::UpstreamUnwanted
            | CloseReason::RootUnreachable
            | CloseReason::RelayLoop => false,
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Rejected(cause) => write!(f, "rejected: {cause}"),
            CloseReason::Full(cause) => write!(f, "full: {cause}"),
            CloseReason::Blocklisted => f.write_str("peer is blocklisted"),
            CloseReason::Violation(violation) => write!(f, "violation: {violation}"),
            CloseReason::ClaimTimeout => f.write_str("claim deadline passed"),
            CloseReason::Superseded => {
                f.write_str("superseded by a newer stream of the same address")
            }
            CloseReason::Inactive => f.write_str("cohort inactive"),
            CloseReason::EndOfStream => f.write_str("end of stream"),
            CloseReason::RevokedWithoutRoom => {
                f.write_str("revoked, and the cohort has no room for another reader")
            }
            CloseReason::DropRate => f.write_str("too many dropped frames per second"),
            CloseReason::RosteredAtEdge => f.write_str(
                "a roster named this address: it may publish, which it does at the root; rejoin",
            ),
            CloseReason::UpstreamUnwanted => f.write_str("no cohort wants this upstream stream"),
            CloseReason::UpstreamEnded => f.write_str("the other side of the spliced stream ended"),
            CloseReason::RootRefused => f.write_str("the cohort's root refused the Join"),
            CloseReason::RootUnreachable => {
                f.write_str("no broker of relay.upstreams answered the Join in time")
            }
            CloseReason::RelayLoop => f.write_str("the relay path returns to this broker's root"),
        }
    }
}

/// Why a Join was REJECTED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectCause {
    /// The body is not a `Join`.
    Undecodable,
    /// The spec or addr breaks R3, D6 or D7.
    Invalid(RejectReason),
    /// `history = true` and the broker refuses history (D11, `HistoryPolicy::Refuse`).
    HistoryRefused,
    /// W11: an anonymous spectator session of a closed cohort, which has no audience.
    AnonymousInClosed,
    /// Edge mode: the Join's addr may publish (admin, rostered, `ALL`, implicit, closed) on a
    /// carrier the edge cannot splice (a W-API bridge session): it joins the root's bridge.
    PublisherAtEdge,
    /// Edge mode: the Join's relay path names this broker: its edges form a loop.
    RelayLoop,
    /// The Join's relay path is malformed.
    RelayPath(RelayPathError),
}

impl fmt::Display for RejectCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectCause::Undecodable => f.write_str("the first frame is not a Join"),
            RejectCause::Invalid(reason) => write!(f, "{reason}"),
            RejectCause::HistoryRefused => f.write_str("history is refused by this broker"),
            RejectCause::AnonymousInClosed => {
                f.write_str("a closed cohort has no audience: join with an addr")
            }
            RejectCause::PublisherAtEdge => f.write_str(
                "this broker is an edge: a bridge session that may publish joins the root's bridge",
            ),
            RejectCause::RelayLoop => f.write_str("the relay path returns to this broker (a loop)"),
            RejectCause::RelayPath(error) => write!(f, "{error}"),
        }
    }
}

/// Which bound a FULL answer hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FullCause {
    /// R30: fan-out streams per cohort.
    CohortStreams,
    /// Pending streams per cohort (the guard of the R30 exemption).
    CohortPendingStreams,
    /// R31: live cohorts per broker.
    Cohorts,
    /// R32: cohorts per peer.
    PeerCohorts,
    /// R32: cohorts of all peers within one IPv6 prefix (`ipv6_prefix_bits`) together.
    Ipv6PrefixCohorts,
    /// R33: streams per peer per cohort.
    PeerStreams,
    /// W11: anonymous spectator sessions per peer.
    PeerAnonymousSessions,
    /// W11: anonymous spectator sessions of one peer in one cohort.
    PeerAnonymousSessionsInCohort,
    /// W11: the share of a cohort's R30 slots anonymous sessions may hold.
    CohortAnonymousSessions,
}

impl fmt::Display for FullCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FullCause::CohortStreams => "streams per cohort (R30)",
            FullCause::CohortPendingStreams => "pending streams per cohort",
            FullCause::Cohorts => "cohorts per broker (R31)",
            FullCause::PeerCohorts => "cohorts per peer (R32)",
            FullCause::Ipv6PrefixCohorts => "cohorts per IPv6 prefix (R32)",
            FullCause::PeerStreams => "streams per peer per cohort (R33)",
            FullCause::PeerAnonymousSessions => "anonymous sessions per peer (W11)",
            FullCause::PeerAnonymousSessionsInCohort => {
                "anonymous sessions per peer per cohort (W11)"
            }
            FullCause::CohortAnonymousSessions => "anonymous share of a cohort's streams (W11)",
        })
    }
}

/// A rule broken by a stream (R39): the stream is reset and its peer blocklisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// R13: the stream's role may not send this frame.
    WrongStream(WrongStream),
    /// The frame body is not a `Broadcast`.
    Malformed,
    /// R17: the chunk is not what the frame claims.
    InvalidSoc(InvalidSoc),
}

impl Violation {
    /// The counter this violation bumps.
    #[must_use]
    pub fn counter(&self) -> Counter {
        match self {
            Violation::WrongStream(_) => Counter::WrongStream,
            Violation::Malformed => Counter::Malformed,
            Violation::InvalidSoc(_) => Counter::InvalidSoc,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::WrongStream(what) => write!(f, "wrong stream: {what}"),
            Violation::Malformed => f.write_str("frame is not a Broadcast"),
            Violation::InvalidSoc(what) => write!(f, "invalid chunk: {what}"),
        }
    }
}

/// The R13 cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrongStream {
    /// A spectator whose address no accepted roster names sent a frame (R8).
    Spectator,
    /// A silent stream whose address no accepted roster names sent a frame (R9).
    Silent,
    /// ROSTER or EOS from a stream that is not the admin's (R13, R19).
    ServiceKindFromNonAdmin,
    /// AUTH, which has no meaning without a claim, in an implicit cohort (R11).
    AuthInImplicitCohort,
    /// A revoked stream sent a frame after its reduced roster was written plus the grace (R24).
    RevokedAfterGrace,
}

impl fmt::Display for WrongStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WrongStream::Spectator => "frame from a spectator",
            WrongStream::Silent => "frame from a silent stream",
            WrongStream::ServiceKindFromNonAdmin => "service kind from a non-admin stream",
            WrongStream::AuthInImplicitCohort => "AUTH in an implicit cohort",
            WrongStream::RevokedAfterGrace => "frame from a revoked stream after the grace period",
        })
    }
}

/// The R17 cases.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidSoc {
    /// The SOC bytes are too short or too long.
    Length(SocError),
    /// The chunk id is not the id the frame's kind, challenge and index derive (§1.1), or
    /// not the binding's id (implicit SOC_ID and FEED_TOPIC).
    IdMismatch,
    /// AUTH or EOS with a non-zero span or a payload.
    ServiceChunkNotEmpty,
    /// EOS at an index other than 0 (R21).
    EosIndexNotZero,
    /// DATA or ROSTER at index 2^64-1, whose successor cursor does not exist (bee rejects it).
    IndexMax,
    /// The signature check or the binding shape failed.
    Verify(VerifyError),
    /// Implicit OWNER: the chunk's owner is not the stream's declared address (R11).
    OwnerNotAddr,
}

impl fmt::Display for InvalidSoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidSoc::Length(error) => write!(f, "{error}"),
            InvalidSoc::IdMismatch => f.write_str("chunk id is not the derived id"),
            InvalidSoc::ServiceChunkNotEmpty => {
                f.write_str("AUTH or EOS chunk with span or payload")
            }
            InvalidSoc::EosIndexNotZero => f.write_str("EOS at an index other than 0"),
            InvalidSoc::IndexMax => f.write_str("index 2^64-1"),
            InvalidSoc::Verify(error) => write!(f, "{error}"),
            InvalidSoc::OwnerNotAddr => f.write_str("chunk owner is not the stream's address"),
        }
    }
}

/// How a stream ended, as the I/O layer saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClosedBy {
    /// The peer closed its side (EOF).
    Peer,
    /// A read or write failed.
    Io,
    /// The outbound queue was full and the stream was reset (R26, counted as `queue_reset`).
    QueueOverflow,
}
