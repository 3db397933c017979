//! Frames and claims: a stream's frames after its Join, from arrival to acceptance.
//!
//! Owns: the read order of a stream's frames (one unproven signature check at a time), the
//! revocation grace on arrival (R24), the stateless checks' outcome (R13..R17, done by
//! `validation`), the signature-check tickets, and what a verified frame does: R7 (claim),
//! R11 (OWNER binding), R16 and R18 (cursors), R28 (implicit dedup), R20 (an undecodable
//! roster), R21 (EOS), R25 (never back to its own identity) and D11 (retaining DATA).
//! Never does: change a roster (that is `roster`), decide a violation's penalty (that is
//! `violation`), or run a deadline.

use std::collections::HashMap;
use std::sync::Arc;

use bps_proto::{Address, Authorship, Binding, Frame, decode_roster};
use bps_verify::{Verified, VerifyError, VerifyRequest};

use super::Machine;
use super::deadline::clear_claim_deadline;
use super::outbox::Outbox;
use super::reclaim::Reclaim;
use crate::action::{Action, ChunkFacts, Delivered, InvalidSoc, Violation, WrongStream};
use crate::counters::{CohortCounters, Counter};
use crate::ids::{CohortSerial, StreamId, Ticket};
use crate::stream::{Checked, FrameKind, InFlight, Role};
use crate::time::Millis;
use crate::validation::{FrameContext, Verdict, check_frame};

/// What became of a verified frame (`Machine::accept`).
#[derive(Debug)]
pub(super) enum Acceptance {
    Accepted,
    /// Not accepted, and counted already (a revoked stream's frame in its grace, an
    /// undecodable roster).
    Refused,
    /// Below its cursor or in the dedup window (R16, R28): the caller counts the drop.
    Retransmit,
    Violation(Violation),
}

impl Machine {
    pub(super) fn frame(&mut self, now: Millis, stream_id: StreamId, frame: Frame) {
        let Some(stream) = self.streams.get_mut(stream_id) else {
            // Closed by this machine while the frame was on its way.
            self.out.consumed(stream_id);
            self.out.registry.add_total(Counter::DropStreamGone, 1);
            return;
        };
        assert!(
            stream.frames_held() < self.read_window_frames_max,
            "stream {stream_id} exceeded its read window"
        );
        if let Some(revocation) = stream.revocation {
            self.out.consumed(stream_id);
            if revocation.tolerates(now, self.config.revocation_grace_ms) {
                let cohort = self.cohorts.live(stream.cohort);
                self.out
                    .count(&cohort.counters, Counter::DropRevokedInGrace);
            } else {
                self.violate(
                    now,
                    stream_id,
                    Violation::WrongStream(WrongStream::RevokedAfterGrace),
                );
            }
            return;
        }
        // One connection buys at most one wasted signature check: until a frame of this
        // stream has verified, later frames wait for that result.
        if !stream.proven && !stream.in_flight.is_empty() {
            stream.backlog.push_back(frame);
            return;
        }
        self.check(now, stream_id, frame);
    }

    pub(super) fn check(&mut self, now: Millis, stream_id: StreamId, frame: Frame) {
        let (stream, cohort) = self.streams.with_cohort(&mut self.cohorts, stream_id);
        let named =
            cohort.authorship() == Authorship::Explicit && cohort.roster.names(&stream.addr);
        let context = FrameContext {
            spec: &cohort.spec,
            addr: &stream.addr,
            challenge: &stream.challenge,
            may_send: match stream.role {
                Role::Pending | Role::Publisher => Ok(()),
                Role::Spectator | Role::Silent if named => Ok(()),
                Role::Spectator => Err(WrongStream::Spectator),
                Role::Silent => Err(WrongStream::Silent),
            },
            is_admin: cohort.is_admin(&stream.addr),
            claimed: stream.role == Role::Publisher,
            data_cursor: cohort.cursors.get(&stream.addr),
            roster_cursor: cohort.roster.cursor,
        };
        match check_frame(frame, &context) {
            Verdict::Drop(counter) => {
                self.out.consumed(stream_id);
                self.dropped(now, stream_id, counter);
            }
            Verdict::Violation(violation) => {
                self.out.consumed(stream_id);
                self.violate(now, stream_id, violation);
            }
            Verdict::Verify { frame, request } => {
                let jobs = (&mut self.tickets, &mut self.next_ticket);
                let ticket = issue_job(jobs, &mut self.out, &cohort.counters, (stream_id, request));
                stream.in_flight.push_back(InFlight {
                    ticket,
                    frame,
                    result: None,
                });
            }
        }
    }

    /// Applies verified frames of a stream in read order, then releases its backlog.
    pub(super) fn apply_ready(&mut self, now: Millis, stream_id: StreamId) {
        loop {
            let Some(stream) = self.streams.get_mut(stream_id) else {
                return;
            };
            if stream
                .in_flight
                .front()
                .is_some_and(|front| front.result.is_some())
            {
                let InFlight { frame, result, .. } =
                    stream.in_flight.pop_front().expect("front exists");
                self.apply(now, stream_id, frame, result.expect("front has its result"));
                continue;
            }
            if !stream.backlog.is_empty() && (stream.proven || stream.in_flight.is_empty()) {
                let frame = stream.backlog.pop_front().expect("backlog is not empty");
                self.frame(now, stream_id, frame);
                continue;
            }
            return;
        }
    }

    /// The stateful part, once the chunk is known to be valid (or not).
    pub(super) fn apply(
        &mut self,
        now: Millis,
        stream_id: StreamId,
        frame: Checked,
        result: Result<Verified, VerifyError>,
    ) {
        self.out.consumed(stream_id);
        let verified = match result {
            Ok(verified) => verified,
            Err(error) => {
                return self.violate(
                    now,
                    stream_id,
                    Violation::InvalidSoc(InvalidSoc::Verify(error)),
                );
            }
        };
        match self.accept(now, stream_id, &frame, &verified) {
            Acceptance::Accepted | Acceptance::Refused => {}
            Acceptance::Retransmit => self.dropped(now, stream_id, Counter::Retransmit),
            Acceptance::Violation(violation) => self.violate(now, stream_id, violation),
        }
    }

    /// A verified frame of a stream: claims, cursors, dedup, rosters and delivery. What is
    /// not accepted is left to the caller, except what is counted here already.
    pub(super) fn accept(
        &mut self,
        now: Millis,
        stream_id: StreamId,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let (stream, cohort) = self.streams.with_cohort(&mut self.cohorts, stream_id);
        stream.proven = true;
        let (serial, addr, role) = (stream.cohort, stream.addr, stream.role);
        // Revoked while the frame was being verified: it was read within the grace (R24).
        if stream.revocation.is_some() {
            self.out
                .count(&cohort.counters, Counter::DropRevokedInGrace);
            return Acceptance::Refused;
        }
        if cohort.authorship() == Authorship::Implicit {
            return self.accept_implicit(now, serial, &addr, frame, verified);
        }
        if role != Role::Publisher {
            self.claim(stream_id);
        }
        // The claim may have reset another stream of this address (R29), never this one.
        match frame.kind {
            FrameKind::Data => self.accept_data(now, serial, &addr, frame, verified),
            FrameKind::Auth => {
                let cohort = self.cohorts.live_mut(serial);
                cohort.last_activity = now;
                self.out.count(&cohort.counters, Counter::AcceptedAuth);
                Acceptance::Accepted
            }
            FrameKind::Roster => self.accept_roster_frame(now, serial, frame, verified),
            FrameKind::Eos => {
                // R21: deliver to every fan-out stream, then reclaim.
                self.publish(now, serial, &addr, frame, verified, Counter::AcceptedEos);
                self.reclaim(serial, Reclaim::EndOfStream);
                Acceptance::Accepted
            }
        }
    }

    /// A verified frame of an implicit cohort (ALL, or where the binding names the
    /// publisher): no claim, no cursor, deduplicated instead (R28).
    fn accept_implicit(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        addr: &Address,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let cohort = self.cohorts.live_mut(serial);
        // R11: where the binding fixes the owner (OWNER), it must be the declared addr.
        if cohort.spec.binding == Binding::Owner && verified.owner != *addr {
            return Acceptance::Violation(Violation::InvalidSoc(InvalidSoc::OwnerNotAddr));
        }
        let dedup = cohort
            .dedup
            .as_mut()
            .expect("implicit cohorts keep a dedup window");
        // R28.
        if !dedup.insert(verified.dedup_key) {
            return Acceptance::Retransmit;
        }
        self.publish_data(now, serial, addr, frame, verified);
        Acceptance::Accepted
    }

    /// A verified DATA of a claimed stream of an explicit cohort: its cursor moves (R18).
    pub(super) fn accept_data(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        addr: &Address,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let cohort = self.cohorts.live_mut(serial);
        // R16 again: another stream of the same address may have moved the cursor.
        if frame.index < cohort.cursors.get(addr) {
            return Acceptance::Retransmit;
        }
        // R18. The table's eviction (R27) restarts the evicted publisher's cursor.
        if cohort.cursors.advance(addr, frame.index + 1).is_some() {
            self.out.count(&cohort.counters, Counter::CursorEvictions);
        }
        self.publish_data(now, serial, addr, frame, verified);
        Acceptance::Accepted
    }

    /// A verified ROSTER of the admin's claimed stream: a retransmission, an undecodable
    /// roster (R20: it still claimed and moves no cursor), or the new roster (`roster`).
    pub(super) fn accept_roster_frame(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let cohort = self.cohorts.live(serial);
        if frame.index < cohort.roster.cursor {
            return Acceptance::Retransmit;
        }
        match decode_roster(&frame.payload) {
            Err(_) => {
                self.out.count(&cohort.counters, Counter::InvalidRoster);
                Acceptance::Refused
            }
            Ok(entries) => {
                self.accept_roster(now, serial, frame, &entries, verified);
                Acceptance::Accepted
            }
        }
    }

    /// Delivers an accepted publication, unchanged and framed once, to the fan-out set
    /// without the publishing identity's streams (R18, R25).
    pub(super) fn publish(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        identity: &Address,
        frame: &Checked,
        verified: &Verified,
        counter: Counter,
    ) -> Arc<ChunkFacts> {
        let cohort = self.cohorts.live_mut(serial);
        cohort.last_activity = now;
        self.out.count(&cohort.counters, counter);
        let targets = cohort.fanout.targets(identity);
        let facts = Arc::new(ChunkFacts::from(verified));
        self.out.deliver(
            &cohort.counters,
            frame.frame.bytes().clone(),
            targets,
            Arc::clone(&facts),
        );
        facts
    }

    /// An accepted DATA (R18): delivered, then retained when the cohort keeps history (D11),
    /// so a stream entering the fan-out set later gets it in its backlog and every stream in
    /// it now has had it live.
    pub(super) fn publish_data(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        identity: &Address,
        frame: &Checked,
        verified: &Verified,
    ) {
        let facts = self.publish(
            now,
            serial,
            identity,
            frame,
            verified,
            Counter::AcceptedData,
        );
        self.cohorts.live_mut(serial).retain(
            *identity,
            Delivered {
                frame: frame.frame.bytes().clone(),
                facts,
            },
        );
    }

    /// R7: a pending, silent or granted spectator stream's first valid frame.
    pub(super) fn claim(&mut self, stream_id: StreamId) {
        let (stream, cohort) = self.streams.with_cohort(&mut self.cohorts, stream_id);
        let serial = stream.cohort;
        let entering_fanout = matches!(stream.role, Role::Pending | Role::Silent);
        cohort.change_role(stream_id, stream, Role::Publisher);
        self.unsettled.push(serial);
        clear_claim_deadline(stream);
        self.out.count(&cohort.counters, Counter::Claims);
        // R22 and D5: the latest roster first, unless this stream already has it or is the admin's.
        if entering_fanout
            && !cohort.is_admin(&stream.addr)
            && stream.roster_seen != cohort.roster.version
            && let Some(frame) = cohort.roster.latest.clone()
        {
            stream.roster_seen = cohort.roster.version;
            self.out
                .send_broadcast(&cohort.counters, stream_id, frame, None);
        }
        // D11: then the history it has not had.
        if entering_fanout {
            self.out.backlog(cohort, stream_id, stream);
        }
        let addr = stream.addr;
        self.enforce_publisher_streams(serial, &addr);
    }
}

/// Issues the verification job of a frame read on `stream`: a fresh ticket, kept against the
/// stream until its result comes, counted and asked for (`Action::Verify`).
pub(super) fn issue_job(
    (tickets, next_ticket): (&mut HashMap<Ticket, StreamId>, &mut u64),
    out: &mut Outbox,
    counters: &CohortCounters,
    (stream, request): (StreamId, VerifyRequest),
) -> Ticket {
    let ticket = Ticket(*next_ticket);
    *next_ticket += 1;
    tickets.insert(ticket, stream);
    out.count(counters, Counter::VerifyRequests);
    out.push(Action::Verify { ticket, request });
    ticket
}
