//! Edge mode (docs/SCALING.md, "Edges"): a cohort at an edge takes its publications from one
//! upstream subscriber stream to the cohort's root, and fans them out here byte for byte.
//!
//! Owns: who may join at an edge (a stream that may publish belongs at the root; a relay
//! path that names this broker is a loop), asking the I/O layer for a cohort's upstream and
//! giving it up, the upstream stream's attachment, its frames in read order, and what a
//! verified upstream frame does. Such a frame is checked as a subscriber checks it (R41: the
//! id from the frame's own challenge, the owner recovered and admitted by the spec and the
//! roster the edge holds) and then takes the same path as a local publication: cursors
//! (R16, R18, R27) or the dedup window (R28), the roster (R19..R22), EOS (R21), delivery
//! without the publishing identity's streams (R25) and history (D11).
//! Never does: open a socket, pick the root (the I/O layer places the cohort's key over
//! its upstream list), or penalise the root: a frame it drops is counted (`upstream_invalid`
//! or `retransmit`), and the upstream stream carries on.

use std::collections::VecDeque;
use std::sync::Arc;

use bps_proto::{Address, Authorship, Frame, RelayId, ValidJoin, relay_path_of};
use bps_verify::{Verified, VerifyError};

use super::Machine;
use super::frame::{Acceptance, issue_job};
use super::reclaim::Reclaim;
use crate::action::{Action, CloseReason, RejectCause};
use crate::arrival::Arrival;
use crate::counters::Counter;
use crate::ids::{CohortSerial, StreamId, Ticket};
use crate::stream::{Checked, FrameKind, InFlight, Role};
use crate::time::Millis;
use crate::validation::{Verdict, check_upstream_frame};

/// How an edge takes a Join (`Machine::edge_admission`).
#[derive(Debug, Default)]
pub(super) struct EdgeJoin {
    /// The relay path it carried (empty but for another edge's).
    pub path: Vec<RelayId>,
    /// Whether it is spliced to the root rather than served here.
    pub splice: bool,
}

/// One cohort's upstream stream: its frames whose verification is in flight, in read order.
#[derive(Debug)]
pub(super) struct Upstream {
    pub cohort: CohortSerial,
    in_flight: VecDeque<InFlight>,
}

impl Machine {
    /// How this edge takes a Join, or why it is REJECTED: a malformed relay path, a path
    /// that already holds this broker (a loop), or a stream that may publish on a carrier
    /// it cannot splice. A stream that may publish is spliced: only the root can check its
    /// frames against the challenge it signs under. Not an edge: served here, no path.
    pub(super) fn edge_admission(
        &self,
        arrival: Arrival,
        join: &Frame,
        valid: &ValidJoin,
    ) -> Result<EdgeJoin, RejectCause> {
        let Some(edge) = self.config.edge else {
            return Ok(EdgeJoin::default());
        };
        let path = relay_path_of(join.body()).map_err(RejectCause::RelayPath)?;
        // A loop: the path holds this edge, or the edge this cohort's upstream reached.
        let root = self
            .cohorts
            .serial_of(&valid.key)
            .and_then(|serial| self.cohorts.live(serial).upstream_root);
        if path.contains(&edge.relay_id) || root.is_some_and(|root| path.contains(&root)) {
            self.out.registry.add_total(Counter::RelayLoopsRefused, 1);
            return Err(RejectCause::RelayLoop);
        }
        let splice = !arrival.anonymous && self.may_publish(valid);
        if splice && !arrival.spliceable {
            return Err(RejectCause::PublisherAtEdge);
        }
        Ok(EdgeJoin { path, splice })
    }

    /// Whether a stream declaring `valid.addr` would be a publisher or could claim: R6, R9,
    /// R10, R11 against the live cohort's roster, or an empty one for a new cohort.
    fn may_publish(&self, valid: &ValidJoin) -> bool {
        let spec = &valid.spec;
        match spec.authorship() {
            Authorship::Implicit | Authorship::All => true,
            Authorship::Explicit => {
                spec.closed
                    || spec.admin == Some(valid.addr)
                    || self
                        .cohorts
                        .serial_of(&valid.key)
                        .is_some_and(|serial| self.cohorts.live(serial).roster.names(&valid.addr))
            }
        }
    }

    /// A cohort was created at an edge: ask for its upstream stream.
    pub(super) fn want_upstream(&mut self, serial: CohortSerial, path: Vec<RelayId>) {
        if self.config.edge.is_none() {
            return;
        }
        let cohort = self.cohorts.live(serial);
        self.out.push(Action::OpenUpstream {
            cohort: serial,
            key: cohort.key.clone(),
            spec: cohort.spec,
            path,
        });
    }

    /// The I/O layer joined the root for the cohort `serial` (its Ack was OK, naming the
    /// edge it reached as `root` if it was one) and reads the stream as `stream` from now on.
    /// A cohort that is gone, or that has an upstream already, closes it.
    pub(super) fn attach_upstream(
        &mut self,
        stream: StreamId,
        serial: CohortSerial,
        root: Option<RelayId>,
    ) {
        let Some(cohort) = self.cohorts.get_mut(serial) else {
            return self.out.push(Action::Close {
                stream,
                reason: CloseReason::UpstreamUnwanted,
            });
        };
        if cohort.upstream.is_some() {
            return self.out.push(Action::Close {
                stream,
                reason: CloseReason::UpstreamUnwanted,
            });
        }
        cohort.upstream = Some(stream);
        cohort.upstream_root = root;
        if let Some(root) = root {
            self.end_looping_relays(serial, &root);
        }
        self.upstreams.insert(
            stream,
            Upstream {
                cohort: serial,
                in_flight: VecDeque::new(),
            },
        );
    }

    /// A frame of an upstream stream; false when `stream` is not one.
    pub(super) fn upstream_frame(&mut self, stream: StreamId, frame: Frame) -> bool {
        let Some(upstream) = self.upstreams.get_mut(&stream) else {
            return false;
        };
        let cohort = self.cohorts.live(upstream.cohort);
        match check_upstream_frame(frame, &cohort.spec) {
            Verdict::Drop(counter) => {
                self.out.consumed(stream);
                self.out.count(&cohort.counters, counter);
            }
            Verdict::Violation(_) => {
                self.out.consumed(stream);
                self.out.count(&cohort.counters, Counter::UpstreamInvalid);
            }
            Verdict::Verify { frame, request } => {
                let jobs = (&mut self.tickets, &mut self.next_ticket);
                let ticket = issue_job(jobs, &mut self.out, &cohort.counters, (stream, request));
                upstream.in_flight.push_back(InFlight {
                    ticket,
                    frame,
                    result: None,
                });
            }
        }
        true
    }

    /// The result of an upstream frame's verification; false when `stream` is not an
    /// upstream stream. Frames are applied in read order, so the roster a later DATA is
    /// admitted by is in force first.
    pub(super) fn upstream_verified(
        &mut self,
        now: Millis,
        stream: StreamId,
        ticket: Ticket,
        result: Result<Verified, VerifyError>,
    ) -> bool {
        let Some(upstream) = self.upstreams.get_mut(&stream) else {
            return false;
        };
        let slot = upstream
            .in_flight
            .iter_mut()
            .find(|in_flight| in_flight.ticket == ticket)
            .expect("an issued ticket of an upstream stream is in its flight list");
        slot.result = Some(result);
        while let Some(upstream) = self.upstreams.get_mut(&stream)
            && upstream
                .in_flight
                .front()
                .is_some_and(|front| front.result.is_some())
        {
            let serial = upstream.cohort;
            let InFlight { frame, result, .. } =
                upstream.in_flight.pop_front().expect("front exists");
            self.out.consumed(stream);
            self.apply_upstream(now, serial, &frame, result.expect("front has its result"));
        }
        true
    }

    fn apply_upstream(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        frame: &Checked,
        result: Result<Verified, VerifyError>,
    ) {
        let counters = Arc::clone(&self.cohorts.live(serial).counters);
        let counter = match result {
            Err(_) => Some(Counter::UpstreamInvalid),
            Ok(verified) => match self.accept_upstream(now, serial, frame, &verified) {
                Acceptance::Accepted => Some(Counter::RelayForwarded),
                Acceptance::Refused => None,
                Acceptance::Retransmit => Some(Counter::Retransmit),
                Acceptance::Violation(_) => Some(Counter::UpstreamInvalid),
            },
        };
        if let Some(counter) = counter {
            self.out.count(&counters, counter);
        }
    }

    /// A verified upstream frame, taken as a subscriber admits it (R41) and delivered as a
    /// local publication would be.
    fn accept_upstream(
        &mut self,
        now: Millis,
        serial: CohortSerial,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let owner = verified.owner;
        let cohort = self.cohorts.live_mut(serial);
        match (frame.kind, cohort.authorship()) {
            (FrameKind::Data, Authorship::Implicit) => {
                let dedup = cohort
                    .dedup
                    .as_mut()
                    .expect("implicit cohorts keep a dedup window");
                if !dedup.insert(verified.dedup_key) {
                    return Acceptance::Retransmit;
                }
                self.publish_data(now, serial, &owner, frame, verified);
                Acceptance::Accepted
            }
            (FrameKind::Data, Authorship::Explicit)
                if !cohort.is_admin(&owner) && !cohort.roster.names(&owner) =>
            {
                self.out.count(&cohort.counters, Counter::UpstreamInvalid);
                Acceptance::Refused
            }
            (FrameKind::Data, _) => self.accept_data(now, serial, &owner, frame, verified),
            (FrameKind::Roster, _) => {
                let acceptance = self.accept_roster_frame(now, serial, frame, verified);
                self.end_rostered_spectators(serial);
                acceptance
            }
            (FrameKind::Eos, _) => {
                self.publish(now, serial, &owner, frame, verified, Counter::AcceptedEos);
                self.reclaim(serial, Reclaim::EndOfStream);
                Acceptance::Accepted
            }
            (FrameKind::Auth, _) => unreachable!("check_upstream_frame drops AUTH"),
        }
    }

    /// R8 at an edge: a spectator whose addr the roster now names may claim, which only the
    /// root can accept; it ends once the roster is out (graceful), and its rejoin is a Join
    /// that may publish.
    fn end_rostered_spectators(&mut self, serial: CohortSerial) {
        let cohort = self.cohorts.live(serial);
        let named: Vec<StreamId> = cohort
            .roster
            .ordered
            .iter()
            .flat_map(|addr: &Address| cohort.streams_by_addr.get(addr).into_iter().flatten())
            .copied()
            .filter(|stream| self.streams.attached(*stream).role == Role::Spectator)
            .collect();
        for stream in named {
            self.close_stream(stream, Some(CloseReason::RosteredAtEdge));
        }
    }

    /// A loop that formed while two edges' Joins crossed: the local streams of other edges
    /// whose relay path holds the edge this cohort's upstream reached are ended (their
    /// rejoin is then refused at once, `edge_admission`).
    fn end_looping_relays(&mut self, serial: CohortSerial, root: &RelayId) {
        let cohort = self.cohorts.live(serial);
        let looping: Vec<StreamId> = cohort
            .members
            .iter()
            .copied()
            .filter(|member| self.streams.attached(*member).relay_path.contains(root))
            .collect();
        for stream in looping {
            self.out.registry.add_total(Counter::RelayLoopsRefused, 1);
            self.close_stream(stream, Some(CloseReason::RelayLoop));
        }
    }

    /// The I/O layer ended an upstream stream (the root closed it or it broke); false when
    /// `stream` is not one. The cohort keeps its streams; the I/O layer reconnects while the
    /// cohort wants an upstream. Its frames still being verified are consumed when their
    /// results come.
    pub(super) fn upstream_closed(&mut self, stream: StreamId) -> bool {
        let Some(upstream) = self.upstreams.remove(&stream) else {
            return false;
        };
        self.forget_upstream(stream, &upstream);
        if let Some(cohort) = self.cohorts.get_mut(upstream.cohort) {
            cohort.upstream = None;
            cohort.upstream_root = None;
        }
        true
    }

    /// A reclaimed cohort's upstream: closed, and no longer kept.
    pub(super) fn drop_upstream(&mut self, serial: CohortSerial, stream: Option<StreamId>) {
        if self.config.edge.is_none() {
            return;
        }
        self.out.push(Action::DropUpstream { cohort: serial });
        let Some(stream) = stream else {
            return;
        };
        if let Some(upstream) = self.upstreams.remove(&stream) {
            self.forget_upstream(stream, &upstream);
        }
        self.out.push(Action::Close {
            stream,
            reason: CloseReason::UpstreamUnwanted,
        });
    }

    /// Consumes the frames of a closed upstream whose results are in and not yet applied.
    fn forget_upstream(&mut self, stream: StreamId, upstream: &Upstream) {
        for _ in upstream
            .in_flight
            .iter()
            .filter(|in_flight| in_flight.result.is_some())
        {
            self.out.consumed(stream);
        }
    }

    /// Whether `stream` is an upstream stream (for `job_origin` and `on_cancelled`).
    pub(super) fn upstream_cohort(&self, stream: StreamId) -> Option<CohortSerial> {
        self.upstreams.get(&stream).map(|upstream| upstream.cohort)
    }

    /// Edge mode keeps a cohort whose last stream left for `linger_ms`, with its upstream:
    /// a viewer who reloads finds it live. Due: reclaimed if still empty.
    pub(super) fn linger_deadline_due(&mut self, at: Millis, serial: CohortSerial) {
        let Some(cohort) = self.cohorts.get_mut(serial) else {
            return;
        };
        if cohort.linger_timer != Some(at) {
            return;
        }
        cohort.linger_timer = None;
        if cohort.members.is_empty() {
            self.reclaim(serial, Reclaim::Empty);
        }
    }
}
