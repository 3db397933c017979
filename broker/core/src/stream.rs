//! One attached stream as the machine sees it.
//!
//! Owns: `Role` (R6..R10), `Stream` (peer, declared addr, challenge, role, claim deadline,
//! revocation phase, the frames it holds: verifications in flight in read order and the
//! backlog of an unproven stream, and how much of its cohort's history it has had, D11)
//! and `Revocation` (R24).
//! Never does: decide transitions. The machine moves a stream between roles and keeps the
//! cohort's membership in step.

use std::collections::VecDeque;

use bps_proto::{Address, Frame, Hash, Kind, RelayId};
use bps_verify::{Verified, VerifyError};
use bytes::Bytes;
use serde::Serialize;

use super::ids::{CohortSerial, PeerId, Ticket, WriteNotice};
use super::time::Millis;

/// A stream role, as a gauge per cohort (R6..R10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Admin or rostered, not yet claimed: outside R30, in no fan-out set (R6).
    Pending,
    /// Claimed (or ALL/implicit from the Join): may publish, in the fan-out set (R7, R10, R11).
    Publisher,
    /// Read-only member of the fan-out set (R8).
    Spectator,
    /// Attached to a closed cohort, receiving nothing but a roster naming it (R9).
    Silent,
}

impl Role {
    /// Every role, in export order.
    pub const ALL: [Role; 4] = [
        Role::Pending,
        Role::Publisher,
        Role::Spectator,
        Role::Silent,
    ];

    /// The exported name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Role::Pending => "pending",
            Role::Publisher => "publisher",
            Role::Spectator => "spectator",
            Role::Silent => "silent",
        }
    }
}

/// The R24 phase of a stream whose address left the roster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Revocation {
    /// The notice attached to the reduced roster sent to this stream.
    pub notice: WriteNotice,
    /// When the reduced roster was reported written.
    pub written_at: Option<Millis>,
}

impl Revocation {
    /// Whether a frame read at `now` is still tolerated (phase 1 of R24).
    pub fn tolerates(&self, now: Millis, grace_ms: u64) -> bool {
        self.written_at
            .is_none_or(|written_at| now < written_at.plus_ms(grace_ms))
    }
}

/// A known, specified frame kind (R14 filtered out the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameKind {
    Data,
    Auth,
    Roster,
    Eos,
}

impl FrameKind {
    /// The frame kind of a wire kind; `None` for `KIND_UNSPECIFIED` (R14).
    pub fn from_kind(kind: Kind) -> Option<FrameKind> {
        match kind {
            Kind::Unspecified => None,
            Kind::Data => Some(FrameKind::Data),
            Kind::Auth => Some(FrameKind::Auth),
            Kind::Roster => Some(FrameKind::Roster),
            Kind::Eos => Some(FrameKind::Eos),
        }
    }

    /// The wire kind.
    pub fn kind(self) -> Kind {
        match self {
            FrameKind::Data => Kind::Data,
            FrameKind::Auth => Kind::Auth,
            FrameKind::Roster => Kind::Roster,
            FrameKind::Eos => Kind::Eos,
        }
    }
}

/// A frame that passed the cheap checks (R13..R17) and waits for its signature check.
#[derive(Clone, Debug)]
pub(crate) struct Checked {
    /// The whole frame as read, delivered unchanged if accepted (section 1).
    pub frame: Frame,
    /// The chunk's payload (a slice of `body`): the roster of a ROSTER frame.
    pub payload: Bytes,
    pub kind: FrameKind,
    pub index: u64,
}

/// A verification in flight for one frame of a stream.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub ticket: Ticket,
    pub frame: Checked,
    /// Filled when the result arrives; results are applied in read order.
    pub result: Option<Result<Verified, VerifyError>>,
}

/// Length of the window in which a stream's dropped frames are counted.
const DROP_WINDOW_MS: u64 = 1_000;

/// Frames one stream had dropped without penalty (R14..R16) in the current window.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DropWindow {
    started: Millis,
    count: u32,
}

impl DropWindow {
    /// Counts one drop at `now`; true once the window holds more than `max` (0: no limit).
    pub fn exceeded(&mut self, now: Millis, max: u32) -> bool {
        if max == 0 {
            return false;
        }
        if now >= self.started.plus_ms(DROP_WINDOW_MS) {
            self.started = now;
            self.count = 0;
        }
        self.count = self.count.saturating_add(1);
        self.count > max
    }
}

/// One attached stream.
#[derive(Debug)]
pub(crate) struct Stream {
    pub peer: PeerId,
    /// A W11 anonymous spectator session.
    pub anonymous: bool,
    /// What carries it (the I/O layer's label).
    pub carrier: &'static str,
    /// The serial of the cohort it is attached to.
    pub cohort: CohortSerial,
    /// The declared identity (Join.addr).
    pub addr: Address,
    /// The Ack's challenge (R4).
    pub challenge: Hash,
    pub role: Role,
    /// Joined as pending (admin or rostered): outside the R30 count.
    pub exempt: bool,
    /// Whether a frame of this stream has passed verification; until then at most one
    /// verification is in flight and later frames wait in `backlog`.
    pub proven: bool,
    pub joined_at: Millis,
    /// When a pending or silent stream must have claimed (R35).
    pub claim_deadline: Option<Millis>,
    /// The time of this stream's queued claim timer, if one is queued.
    pub claim_timer: Option<Millis>,
    pub revocation: Option<Revocation>,
    /// The roster version last sent to this stream on its own (pre-claim or first delivery).
    pub roster_seen: u64,
    /// D11: the acceptance sequence of its cohort's history ring up to which this stream has
    /// had every frame (by backlog or live, while in the fan-out set); 0: none.
    pub history_seen: u64,
    pub in_flight: VecDeque<InFlight>,
    pub backlog: VecDeque<Frame>,
    /// Frames dropped without penalty in the current window (R15, R16).
    pub drops: DropWindow,
    /// Edge mode: the relay path its Join carried (another edge's upstream stream), empty
    /// for every other stream.
    pub relay_path: Vec<RelayId>,
}

impl Stream {
    /// Frames the machine holds for this stream (each owes one `Consumed`).
    pub fn frames_held(&self) -> usize {
        self.in_flight.len() + self.backlog.len()
    }

    /// Frames held that are not being verified: the backlog, and verified frames waiting
    /// for an earlier one (results are applied in read order).
    pub fn frames_unverified(&self) -> usize {
        self.backlog.len()
            + self
                .in_flight
                .iter()
                .filter(|in_flight| in_flight.result.is_some())
                .count()
    }
}
