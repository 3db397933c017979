//! The cheap, stateless part of frame validation, in exactly the order of R13..R17.
//!
//! Owns: `check_frame`, which turns a Broadcast frame plus the stream's context into a
//! `Verdict`: drop (with the counter to bump), violation, or a verification job with the
//! frame it is for.
//! Never does: signature checks (the verification pool's), or change state. R16 for a
//! stream that has not claimed, the dedup window of R28 and the stateful re-checks happen in
//! the machine once the chunk is verified.

use bps_proto::{
    Address, Authorship, Binding, Broadcast, Frame, Hash, Spec, decode_broadcast, feed_id,
    kind_from_i32, session_chunk_id,
};
use bps_verify::{Expect, SOC_MIN_CHUNK_SIZE, SocRef, VerifyRequest};

use super::action::{InvalidSoc, Violation, WrongStream};
use super::counters::Counter;
use super::stream::{Checked, FrameKind};

/// What the machine knows about the stream a frame came from.
#[derive(Debug)]
pub(crate) struct FrameContext<'a> {
    pub spec: &'a Spec,
    pub addr: &'a Address,
    pub challenge: &'a Hash,
    /// R13 by role: `Err` when the stream's role may send nothing at all.
    pub may_send: Result<(), WrongStream>,
    /// Whether the stream's addr is the admin's.
    pub is_admin: bool,
    /// Whether the stream is a publisher already: R16 runs before verification only then.
    pub claimed: bool,
    /// The cursor of the stream's addr (R27).
    pub data_cursor: u64,
    /// The cohort's roster cursor (R20).
    pub roster_cursor: u64,
}

/// The outcome of the cheap checks.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Drop the frame and bump the counter (not a violation).
    Drop(Counter),
    /// Reset the stream (R39).
    Violation(Violation),
    /// Verify the chunk; apply the frame when the result is back.
    Verify {
        frame: Checked,
        request: VerifyRequest,
    },
}

/// R13..R17 before any signature is checked.
pub(crate) fn check_frame(frame: Frame, context: &FrameContext<'_>) -> Verdict {
    // R13, by role: a spectator or silent stream may send nothing until a roster names it.
    if let Err(wrong) = context.may_send {
        return Verdict::Violation(Violation::WrongStream(wrong));
    }
    let Ok(broadcast) = decode_broadcast(frame.body()) else {
        return Verdict::Violation(Violation::Malformed);
    };
    // R14: unknown or unspecified kinds are dropped, never fatal (D12).
    let Some(kind) = kind_from_i32(broadcast.kind).and_then(FrameKind::from_kind) else {
        return Verdict::Drop(Counter::UnknownKind);
    };
    if let Err(wrong) = check_kind_sender(kind, context) {
        return Verdict::Violation(Violation::WrongStream(wrong));
    }
    if let Some(counter) = check_sequence(kind, &broadcast, context) {
        return Verdict::Drop(counter);
    }
    verification(frame, broadcast, kind, context)
}

/// R13, by kind: service kinds only from the admin's stream; AUTH means nothing without a
/// claim.
fn check_kind_sender(kind: FrameKind, context: &FrameContext<'_>) -> Result<(), WrongStream> {
    let implicit = context.spec.authorship() == Authorship::Implicit;
    match kind {
        FrameKind::Roster | FrameKind::Eos if !context.is_admin || implicit => {
            Err(WrongStream::ServiceKindFromNonAdmin)
        }
        FrameKind::Auth if implicit => Err(WrongStream::AuthInImplicitCohort),
        _ => Ok(()),
    }
}

/// R15 and, for a publisher stream, R16: the drop counter of a frame of another session or
/// below its cursor. A stream that has not claimed gets R16 after verification.
fn check_sequence(
    kind: FrameKind,
    broadcast: &Broadcast,
    context: &FrameContext<'_>,
) -> Option<Counter> {
    if context.spec.authorship() == Authorship::Implicit {
        // No salt and no cursor under implicit authorship (R28 deduplicates instead).
        return None;
    }
    // R15: the frame must carry the stream's challenge.
    if broadcast.challenge.as_ref() != context.challenge.as_slice() {
        return Some(Counter::WrongChallenge);
    }
    let below = context.claimed
        && match kind {
            FrameKind::Data => broadcast.index < context.data_cursor,
            FrameKind::Roster => broadcast.index < context.roster_cursor,
            _ => false,
        };
    below.then_some(Counter::Retransmit)
}

/// R17, the cheap part, then the verification job of a frame that passed it.
fn verification(
    frame: Frame,
    broadcast: Broadcast,
    kind: FrameKind,
    context: &FrameContext<'_>,
) -> Verdict {
    let soc = match SocRef::parse(&broadcast.soc) {
        Ok(soc) => soc,
        Err(error) => return Verdict::Violation(Violation::InvalidSoc(InvalidSoc::Length(error))),
    };
    if let Err(invalid) = check_shape(kind, broadcast.index, &soc, context) {
        return Verdict::Violation(Violation::InvalidSoc(invalid));
    }
    let expect = match context.spec.authorship() {
        Authorship::Implicit => Expect::Implicit {
            binding: context.spec.binding,
            topic: context.spec.topic,
            index: broadcast.index,
        },
        // Service kinds come only from the admin's stream, so the stream's addr is the
        // expected owner in every case: the admin's for service kinds (R17, R41).
        Authorship::Explicit | Authorship::All => Expect::At {
            owner: *context.addr,
        },
    };
    let payload = broadcast.soc.slice(SOC_MIN_CHUNK_SIZE..);
    let request = VerifyRequest {
        chunk: broadcast.soc,
        expect,
    };
    Verdict::Verify {
        frame: Checked {
            frame,
            payload,
            kind,
            index: broadcast.index,
        },
        request,
    }
}

/// The id derivation and the service-chunk rules of R17 (and R18, R21 on indices).
fn check_shape(
    kind: FrameKind,
    index: u64,
    soc: &SocRef<'_>,
    context: &FrameContext<'_>,
) -> Result<(), InvalidSoc> {
    let spec = context.spec;
    if spec.authorship() == Authorship::Implicit {
        // R11 shapes that need no owner; the rest are checked by the verifier.
        let expected_id = match spec.binding {
            Binding::SocId => Some(spec.topic),
            Binding::FeedTopic => Some(feed_id(spec.topic, index)),
            Binding::Anchor | Binding::Owner | Binding::Mnemonic => None,
        };
        return match expected_id {
            Some(id) if id != *soc.id => Err(InvalidSoc::IdMismatch),
            _ => Ok(()),
        };
    }
    if session_chunk_id(kind.kind(), spec.topic, context.challenge, index) != *soc.id {
        return Err(InvalidSoc::IdMismatch);
    }
    match kind {
        FrameKind::Auth | FrameKind::Eos if soc.span_value() != 0 || !soc.payload.is_empty() => {
            Err(InvalidSoc::ServiceChunkNotEmpty)
        }
        FrameKind::Eos if index != 0 => Err(InvalidSoc::EosIndexNotZero),
        FrameKind::Data | FrameKind::Roster if index == u64::MAX => Err(InvalidSoc::IndexMax),
        _ => Ok(()),
    }
}

/// Edge mode: the cheap checks of a frame from the cohort's root, as a subscriber makes them
/// (R41): the chunk id derived from the frame's own challenge (a subscriber compares it with
/// nothing), AUTH never delivered, EOS at index 0 and empty; then the verification job:
/// service kinds signed by the admin, DATA by whoever recovery says (admitted by owner once
/// verified), implicit DATA by the binding's shape. Anything else is `upstream_invalid`.
pub(crate) fn check_upstream_frame(frame: Frame, spec: &Spec) -> Verdict {
    let Ok(broadcast) = decode_broadcast(frame.body()) else {
        return Verdict::Drop(Counter::UpstreamInvalid);
    };
    let Some(kind) = kind_from_i32(broadcast.kind).and_then(FrameKind::from_kind) else {
        return Verdict::Drop(Counter::UnknownKind);
    };
    let implicit = spec.authorship() == Authorship::Implicit;
    let admin = match (kind, spec.admin) {
        (FrameKind::Auth, _) => return Verdict::Drop(Counter::UpstreamInvalid),
        (FrameKind::Roster | FrameKind::Eos, None) => {
            return Verdict::Drop(Counter::UpstreamInvalid);
        }
        (_, admin) => admin.unwrap_or_default(),
    };
    let challenge: Hash = if implicit {
        Hash::default()
    } else {
        match broadcast.challenge.as_ref().try_into() {
            Ok(challenge) => challenge,
            Err(_) => return Verdict::Drop(Counter::UpstreamInvalid),
        }
    };
    let context = FrameContext {
        spec,
        addr: &admin,
        challenge: &challenge,
        may_send: Ok(()),
        is_admin: true,
        claimed: false,
        data_cursor: 0,
        roster_cursor: 0,
    };
    match verification(frame, broadcast, kind, &context) {
        Verdict::Verify { frame, mut request } => {
            if kind == FrameKind::Data && !implicit {
                request.expect = Expect::Recover;
            }
            Verdict::Verify { frame, request }
        }
        Verdict::Drop(_) | Verdict::Violation(_) => Verdict::Drop(Counter::UpstreamInvalid),
    }
}
