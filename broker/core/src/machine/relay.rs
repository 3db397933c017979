//! Relayed service chunks (W5): a ROSTER or EOS posted outside any stream, tried on one
//! live admin stream of its cohort and accepted as that stream's frame.
//!
//! Owns: choosing the admin stream (named by challenge, else the newest claimed, else the
//! only pending one), checking the chunk as that stream's frame (R13..R17), its one
//! signature check, and the outcome the I/O layer returns to the POST.
//! Never does: consume a read credit, close a stream or blocklist a peer for a relayed
//! chunk (a rule it breaks is counted and answered, nothing more).

use std::sync::Arc;

use bps_proto::{CohortKey, Frame, Hash};
use bps_verify::{Verified, VerifyError, VerifyRequest};

use super::Machine;
use super::frame::Acceptance;
use super::outbox::Outbox;
use crate::action::{Action, Violation};
use crate::cohort::Cohort;
use crate::counters::{CohortCounters, Counter};
use crate::ids::{CohortSerial, StreamId, Ticket};
use crate::relay::{RelayOutcome, RelayReply};
use crate::stream::{Checked, FrameKind, Role, Stream};
use crate::time::Millis;
use crate::validation::{FrameContext, Verdict, check_frame};

impl Machine {
    /// W5: a relayed chunk checked as a frame of the admin stream it is tried on; `None`
    /// once its signature check is asked for (see `Machine::on_relay`).
    pub(super) fn relay(
        &mut self,
        key: &CohortKey,
        named: Option<&Hash>,
        frame_for: &mut dyn FnMut(&Hash) -> Frame,
        reply: RelayReply,
    ) -> Option<RelayOutcome> {
        let Some(serial) = self.cohorts.serial_of(key) else {
            return Some(RelayOutcome::NoCohort);
        };
        let (stream_id, challenge) = match self.relay_stream(serial, named) {
            Ok(chosen) => chosen,
            Err(outcome) => return Some(outcome),
        };
        let counters = Arc::clone(&self.cohorts.live(serial).counters);
        let frame = frame_for(&challenge);
        let verdict = {
            let stream = self.streams.attached(stream_id);
            check_frame(frame, &relay_context(self.cohorts.live(serial), stream))
        };
        let (checked, request) = match verdict {
            Verdict::Drop(counter) => {
                self.out.count(&counters, counter);
                return Some(RelayOutcome::NotAccepted { counter });
            }
            Verdict::Violation(violation) => {
                return Some(refused_relay(&self.out, &counters, &violation));
            }
            Verdict::Verify { frame, request } => (frame, request),
        };
        if !matches!(checked.kind, FrameKind::Roster | FrameKind::Eos) {
            let counter = Counter::WrongStream;
            self.out.count(&counters, counter);
            return Some(RelayOutcome::Invalid {
                counter,
                reason: "only ROSTER and EOS are relayed".into(),
            });
        }
        let pending = PendingRelay {
            stream: stream_id,
            cohort: serial,
            frame: checked,
            reply,
        };
        self.verify_relay(pending, request);
        None
    }

    /// The one signature check of a relayed chunk; `relayed` takes its result.
    fn verify_relay(&mut self, pending: PendingRelay, request: VerifyRequest) {
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        let counters = &self.cohorts.live(pending.cohort).counters;
        self.out.count(counters, Counter::VerifyRequests);
        self.relays.insert(ticket, pending);
        self.out.push(Action::Verify { ticket, request });
    }

    /// The one admin stream a relayed chunk is tried on, with its challenge (`on_relay`).
    pub(super) fn relay_stream(
        &self,
        serial: CohortSerial,
        named: Option<&Hash>,
    ) -> Result<(StreamId, Hash), RelayOutcome> {
        let admin_streams = self.admin_streams(serial);
        if let Some(named) = named {
            return admin_streams
                .into_iter()
                .find(|(_, challenge, _)| challenge == named)
                .map(|(id, challenge, _)| (id, challenge))
                .ok_or(RelayOutcome::NoAdminStream);
        }
        let newest_claimed = admin_streams
            .iter()
            .rev()
            .find(|(_, _, claimed)| *claimed)
            .map(|(id, challenge, _)| (*id, *challenge));
        match (newest_claimed, admin_streams.as_slice()) {
            (Some(chosen), _) => Ok(chosen),
            (None, []) => Err(RelayOutcome::NoAdminStream),
            (None, [(id, challenge, _)]) => Ok((*id, *challenge)),
            (None, pending) => Err(RelayOutcome::Unnamed {
                pending: pending.len(),
            }),
        }
    }

    /// The signature check of a relayed chunk is done: accepted on its admin stream if that
    /// stream is still live, and the outcome goes back to the I/O layer.
    pub(super) fn relayed(
        &mut self,
        now: Millis,
        pending: PendingRelay,
        result: Result<Verified, VerifyError>,
    ) {
        let PendingRelay {
            stream: stream_id,
            frame,
            reply,
            ..
        } = pending;
        let counters = self
            .streams
            .get(stream_id)
            .map(|stream| Arc::clone(&self.cohorts.live(stream.cohort).counters));
        let outcome = match (result, counters) {
            (Err(error), counters) => {
                if let Some(counters) = &counters {
                    self.out.count(counters, Counter::InvalidSoc);
                }
                RelayOutcome::Invalid {
                    counter: Counter::InvalidSoc,
                    reason: format!(
                        "the chunk does not validate under the admin session's challenge: {error}"
                    ),
                }
            }
            // The admin stream ended while the chunk was being checked.
            (Ok(_), None) => RelayOutcome::NoAdminStream,
            (Ok(verified), Some(counters)) => {
                match self.accept(now, stream_id, &frame, &verified) {
                    Acceptance::Accepted => RelayOutcome::Accepted,
                    Acceptance::Refused => RelayOutcome::NotAccepted {
                        counter: Counter::InvalidRoster,
                    },
                    Acceptance::Retransmit => {
                        self.out.count(&counters, Counter::Retransmit);
                        RelayOutcome::NotAccepted {
                            counter: Counter::Retransmit,
                        }
                    }
                    Acceptance::Violation(violation) => {
                        refused_relay(&self.out, &counters, &violation)
                    }
                }
            }
        };
        self.out.push(Action::Relayed { reply, outcome });
    }

    /// The admin's live streams of a cohort that may carry a service chunk, with their
    /// challenges and whether they have claimed, oldest first.
    pub(super) fn admin_streams(&self, serial: CohortSerial) -> Vec<(StreamId, Hash, bool)> {
        let cohort = self.cohorts.live(serial);
        let Some(admin) = cohort.spec.admin else {
            return Vec::new();
        };
        let mut streams: Vec<(StreamId, Hash, bool)> = cohort
            .streams_by_addr
            .get(&admin)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                let stream = self.streams.attached(*id);
                matches!(stream.role, Role::Pending | Role::Publisher).then_some((
                    *id,
                    stream.challenge,
                    stream.role == Role::Publisher,
                ))
            })
            .collect();
        streams.sort_unstable_by_key(|(id, _, _)| *id);
        streams
    }
}

/// A relayed service chunk waiting for its signature check: the admin stream it is tried
/// on, the checked frame, and where its outcome goes.
#[derive(Debug)]
pub(super) struct PendingRelay {
    pub(super) stream: StreamId,
    /// The cohort it is for, kept so the I/O layer can class the job even if the stream
    /// closes before the job is queued.
    pub(super) cohort: CohortSerial,
    frame: Checked,
    reply: RelayReply,
}

/// The validation context of a relayed chunk on one of the admin's streams.
fn relay_context<'a>(cohort: &'a Cohort, stream: &'a Stream) -> FrameContext<'a> {
    FrameContext {
        spec: &cohort.spec,
        addr: &stream.addr,
        challenge: &stream.challenge,
        may_send: Ok(()),
        is_admin: true,
        claimed: stream.role == Role::Publisher,
        data_cursor: cohort.cursors.get(&stream.addr),
        roster_cursor: cohort.roster.cursor,
    }
}

/// A relayed chunk that breaks a rule: counted like the violation, answered as invalid.
fn refused_relay(out: &Outbox, counters: &CohortCounters, violation: &Violation) -> RelayOutcome {
    let counter = violation.counter();
    out.count(counters, counter);
    RelayOutcome::Invalid {
        counter,
        reason: violation.to_string(),
    }
}
