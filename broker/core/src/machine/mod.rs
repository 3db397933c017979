//! The protocol state machine of one broker core.
//!
//! Owns: `Machine`, every cohort homed on this core and every stream attached to them, and
//! the rules of docs/PROTOCOL.md §5 that connect them: Join and its answers (R1..R5, R30..R33,
//! R37), roles and claims (R6..R12, R29), the validation order (R13..R18, in `validation`),
//! rosters and revocation (R19..R24), delivery (R25) and history backlogs (D11, see
//! `history`), deadlines (R34..R36) and violations (R39). Inputs are method calls carrying
//! `now`; outputs are `Action`s the I/O layer drains.
//! Never does: I/O, read a clock, verify a signature (it asks for it with `Action::Verify`),
//! or block. Per accepted publication it does a constant amount of work: the frame is
//! re-framed once and the target list is a cached `Arc` (see `fanout`).
//!
//! Streams of a cohort may live on other cores (the `StreamId` says which); the machine does
//! not care. The only state shared with other cores' machines is the `PeerLedger` (R31, R32,
//! R39), touched at Join, when a peer leaves a cohort, and on violations.
//!
//! Decisions where the spec is silent are recorded where they are made, and summarised in the
//! `protocol` module's documentation.
//!
//! This file keeps the `Machine` struct, its construction, its accessors and the inputs
//! (`on_*`), which dispatch to one rule family each; every family is one `impl Machine` block
//! in its own file: `join` (R1..R5, R29..R33, R37), `frame` (R7, R11, R13..R18, R20, R21,
//! R25, R28), `relay` (W5), `upstream` (edge mode), `roster` (R19..R24), `violation` (R39), `reclaim` (R21, R31,
//! R34, R36) and `deadline` (R31, R34, R35). `cohorts` is the cohort table, `streams` the
//! stream table (which hands out a stream with its cohort), `outbox` where the outputs go.
//! A family calls another's methods through `Machine`; the few items one file imports from
//! another run one way (relay to frame and outbox, frame to deadline and reclaim, join and
//! roster to deadline, deadline to reclaim, streams to cohorts), so there is no cycle.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bps_proto::{CohortKey, Frame, Hash, RelayId};
use bps_verify::{Verified, VerifyError};
use rand::rngs::StdRng;

use crate::action::{Action, ClosedBy};
use crate::arrival::Arrival;
use crate::cohort::Cohort;
use crate::config::ProtocolConfig;
use crate::counters::{Counter, CounterRegistry};
use crate::deadlines::{DeadlineKey, Deadlines};
use crate::ids::{CohortSerial, StreamId, Ticket, WriteNotice};
use crate::ledger::PeerLedger;
use crate::relay::{RelayOutcome, RelayReply};
use crate::snapshot::{CohortStreams, CohortSummary, page_of_streams, summarize};
use crate::time::Millis;

use cohorts::Cohorts;
use outbox::Outbox;
use relay::PendingRelay;
pub use splice::SpliceOutcome;
use splice::Splices;
use streams::Streams;
use upstream::Upstream;

mod cohorts;
mod deadline;
mod frame;
mod join;
mod outbox;
mod reclaim;
mod relay;
mod roster;
mod splice;
mod streams;
mod upstream;
mod violation;

/// Deadlines one `on_tick` runs at most: a burst of expiring streams (ten thousand claims
/// timing out together) is spread over turns, so the core keeps answering in between.
pub const DEADLINES_PER_TICK_MAX: usize = 1024;

/// Where a verification job came from (`Machine::job_origin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TicketOrigin {
    /// The stream whose frame it checks; `None` for a W5 relayed chunk.
    pub stream: Option<StreamId>,
    /// The cohort it is for.
    pub cohort: CohortSerial,
}

/// The I/O-free protocol core of one broker core. See the module documentation.
#[derive(Debug)]
pub struct Machine {
    config: ProtocolConfig,
    /// The largest read window ever configured: streams may still hold that many frames
    /// after a reload lowered it.
    read_window_frames_max: usize,
    ledger: Arc<PeerLedger>,
    rng: StdRng,
    cohorts: Cohorts,
    streams: Streams,
    /// Verifications in flight, by ticket. A ticket of a closed stream stays until its
    /// result arrives, which is then ignored, and only then is its frame consumed: so the
    /// I/O layer's frames in flight also bound the verification jobs, closed streams' ones
    /// included.
    tickets: HashMap<Ticket, StreamId>,
    /// Relayed service chunks (W5) whose one signature check is in flight, by ticket. The
    /// I/O layer bounds how many it asks for at once.
    relays: HashMap<Ticket, PendingRelay>,
    /// Edge mode: the upstream streams, one per cohort at most (see `upstream`).
    upstreams: HashMap<StreamId, Upstream>,
    /// Edge mode: the streams spliced to their cohort's root (see `splice`).
    splices: Splices,
    deadlines: Deadlines,
    /// R31: the idle cohorts (empty fan-out set), oldest first, as (idle since, serial).
    idle: BTreeSet<(Millis, CohortSerial)>,
    /// Cohorts whose membership or roles changed during the current input; their idleness
    /// is settled before the input returns (`rearm`).
    unsettled: Vec<CohortSerial>,
    out: Outbox,
    next_ticket: u64,
    next_notice: u64,
}

impl Machine {
    /// A machine with no cohorts. `rng` makes the challenges (R4): production seeds it from
    /// the OS (`StdRng` is a CSPRNG), a simulation from a fixed seed.
    /// `config` is valid: the broker's config loader validated it.
    #[must_use]
    pub fn new(config: ProtocolConfig, ledger: Arc<PeerLedger>, rng: StdRng) -> Machine {
        Machine {
            read_window_frames_max: config.frames_in_flight_per_stream_max,
            config,
            ledger,
            rng,
            cohorts: Cohorts::new(),
            streams: Streams::new(),
            tickets: HashMap::new(),
            relays: HashMap::new(),
            upstreams: HashMap::new(),
            splices: Splices::default(),
            deadlines: Deadlines::default(),
            idle: BTreeSet::new(),
            unsettled: Vec::new(),
            out: Outbox {
                actions: Vec::new(),
                registry: Arc::new(CounterRegistry::default()),
            },
            next_ticket: 0,
            next_notice: 0,
        }
    }

    /// The policy this machine enforces.
    #[must_use]
    pub fn config(&self) -> &ProtocolConfig {
        &self.config
    }

    /// Applies a reloaded policy (SIGHUP). Bounds and durations apply to decisions from now on:
    /// existing cohorts keep the size of their cursor table and dedup window but take the new
    /// history bounds at once (D11: a lowered bound drops the oldest retained frames now, so
    /// the budget of the new configuration holds), the history policy applies to the next
    /// Joins (streams already attached carry on), queued deadlines keep their times (an
    /// inactivity deadline is recomputed with the new duration when its timer comes due), and
    /// a lowered read window is enforced by the I/O layer's credits as streams drain. The
    /// broker-wide bounds live in the `PeerLedger` (`PeerLedger::reconfigure`). `config` is
    /// valid: the broker's config loader validated it.
    pub fn reconfigure(&mut self, config: ProtocolConfig) {
        self.read_window_frames_max = self
            .read_window_frames_max
            .max(config.frames_in_flight_per_stream_max);
        for cohort in self.cohorts.iter_mut() {
            cohort.bound_history(&config);
        }
        self.config = config;
    }

    /// This machine's counters (totals and live cohorts), for a scraper on another thread.
    #[must_use]
    pub fn counters(&self) -> Arc<CounterRegistry> {
        Arc::clone(&self.out.registry)
    }

    /// Live cohorts homed here.
    #[must_use]
    pub fn cohort_count(&self) -> usize {
        self.cohorts.len()
    }

    /// Streams attached to cohorts homed here.
    #[must_use]
    pub fn stream_count(&self) -> usize {
        self.streams.len()
    }

    /// Deadline entries queued (live ones and dead ones not yet swept), for a memory gauge;
    /// sweeping keeps it below twice the streams and cohorts plus a small constant.
    #[must_use]
    pub fn timers_queued(&self) -> usize {
        self.deadlines.len()
    }

    /// Verification jobs issued and not yet answered.
    #[must_use]
    pub fn verifications_in_flight(&self) -> usize {
        self.tickets.len()
    }

    /// Moves every pending action, in order, to the end of `out`.
    pub fn drain_actions(&mut self, out: &mut Vec<Action>) {
        out.append(&mut self.out.actions);
    }

    /// One summary per cohort homed here at `now`, oldest first (for `/cohortz`):
    /// O(cohorts), no stream is visited.
    #[must_use]
    pub fn summaries(&self, now: Millis) -> Vec<CohortSummary> {
        let mut cohorts: Vec<&Cohort> = self.cohorts.iter().collect();
        cohorts.sort_by_key(|cohort| cohort.serial);
        cohorts
            .into_iter()
            .map(|cohort| summarize(cohort, now))
            .collect()
    }

    /// Up to `limit` streams of the cohort with canonical key `key`, from the `offset`-th
    /// (ascending ids), with its summary at `now`; `None` when no such cohort is homed here.
    #[must_use]
    pub fn cohort_streams(
        &self,
        key: &CohortKey,
        (offset, limit): (usize, usize),
        now: Millis,
    ) -> Option<CohortStreams> {
        let serial = self.cohorts.serial_of(key)?;
        let mut page = page_of_streams(
            self.cohorts.live(serial),
            |id| self.streams.attached(id),
            (offset, limit),
            now,
        );
        for stream in &mut page.streams {
            stream.trusted_relay = self.ledger.is_trusted(stream.peer);
        }
        Some(page)
    }

    /// The first frame of a new stream (R2). The answer is an `Ack` (OK, FULL or REJECTED,
    /// R5), or, for a blocklisted peer, a `Close` without one.
    ///
    /// # Panics
    /// If `stream` is already attached (the I/O layer never reuses a stream id).
    pub fn on_join(&mut self, now: Millis, stream: StreamId, arrival: Arrival, join: Frame) {
        assert!(
            !self.streams.contains(stream),
            "stream {stream} joined twice"
        );
        self.join(now, arrival, stream, join);
        self.rearm(now);
    }

    /// A later frame of a stream: always a Broadcast. Exactly one `Consumed` follows for
    /// it, now or once its verification is done.
    ///
    /// # Panics
    /// If the stream already has `frames_in_flight_per_stream_max` frames not yet consumed
    /// (the I/O layer's read window forbids it).
    pub fn on_frame(&mut self, now: Millis, stream: StreamId, frame: Frame) {
        if self.upstream_cohort(stream).is_some() {
            self.upstream_frame(stream, frame);
        } else if self.is_spliced(stream) {
            self.spliced_frame(stream, frame);
        } else {
            self.frame(now, stream, frame);
        }
        self.rearm(now);
    }

    /// The result of an `Action::Verify`.
    ///
    /// # Panics
    /// If the ticket was never issued or was already answered.
    pub fn on_verified(
        &mut self,
        now: Millis,
        ticket: Ticket,
        result: Result<Verified, VerifyError>,
    ) {
        if let Some(pending) = self.relays.remove(&ticket) {
            self.relayed(now, pending, result);
            self.rearm(now);
            return;
        }
        let stream_id = self
            .tickets
            .remove(&ticket)
            .unwrap_or_else(|| panic!("ticket {} was never issued", ticket.value()));
        if self.upstream_cohort(stream_id).is_some() {
            self.upstream_verified(now, stream_id, ticket, result);
            self.rearm(now);
            return;
        }
        match self.streams.get_mut(stream_id) {
            Some(stream) => {
                let slot = stream
                    .in_flight
                    .iter_mut()
                    .find(|in_flight| in_flight.ticket == ticket)
                    .expect("an issued ticket of a live stream is in its flight list");
                slot.result = Some(result);
                self.apply_ready(now, stream_id);
            }
            // The stream closed while its frame was being verified: the frame is done now.
            None => self.out.consumed(stream_id),
        }
        self.rearm(now);
    }

    /// Where a verification job (an `Action::Verify`) came from, for the I/O layer, which
    /// queues jobs fairly by cohort and takes back the jobs of a stream that closed: a
    /// stream's frame while that stream is attached, or a W5 relayed chunk (no stream owns
    /// it: its POST waits for the result, which `on_verified` answers whatever became of the
    /// admin stream). `None` once the job's stream is gone or the ticket answered.
    #[must_use]
    pub fn job_origin(&self, ticket: Ticket) -> Option<TicketOrigin> {
        if let Some(relay) = self.relays.get(&ticket) {
            return Some(TicketOrigin {
                stream: None,
                cohort: relay.cohort,
            });
        }
        let stream_id = *self.tickets.get(&ticket)?;
        if let Some(cohort) = self.upstream_cohort(stream_id) {
            return Some(TicketOrigin {
                stream: Some(stream_id),
                cohort,
            });
        }
        let stream = self.streams.get(stream_id)?;
        Some(TicketOrigin {
            stream: Some(stream_id),
            cohort: stream.cohort,
        })
    }

    /// An `Action::Verify` of a stream the machine closed was taken back unverified: the
    /// frame is done, as if its result had come and been ignored.
    ///
    /// # Panics
    /// If the ticket was never issued or was already answered, or its stream is still
    /// attached (only a closed stream's jobs may be taken back).
    pub fn on_cancelled(&mut self, now: Millis, ticket: Ticket) {
        let stream_id = self
            .tickets
            .remove(&ticket)
            .unwrap_or_else(|| panic!("ticket {} was never issued", ticket.value()));
        assert!(
            !self.streams.contains(stream_id) && self.upstream_cohort(stream_id).is_none(),
            "ticket {} of the attached stream {stream_id} taken back",
            ticket.value()
        );
        self.out.consumed(stream_id);
        self.rearm(now);
    }

    /// A frame sent with a `WriteNotice` is on the wire (R24: the revocation grace starts).
    pub fn on_written(&mut self, now: Millis, stream: StreamId, notice: WriteNotice) {
        if self.splice_written(notice) {
            return;
        }
        if let Some(stream) = self.streams.get_mut(stream)
            && let Some(revocation) = stream.revocation.as_mut()
            && revocation.notice == notice
            && revocation.written_at.is_none()
        {
            revocation.written_at = Some(now);
        }
    }

    /// W5: a service chunk posted for the cohort with canonical key `key`, outside any
    /// stream. It is tried on one live admin stream only, so that a POST costs at most one
    /// signature check: the one whose challenge `named` is when the POST names one, else the
    /// newest claimed one, else the only pending one (several pending and none named is
    /// `Unnamed`). It is made into that stream's frame by `frame_for` and checked as a frame
    /// of it (R13..R17). `Some` is the outcome when it is decided without a signature check;
    /// `None` when an `Action::Verify` went out, and then the outcome comes as
    /// `Action::Relayed` with `reply` once the result is in (`on_verified`). Nothing is
    /// consumed (it holds no read credit), and no stream is closed for it.
    pub fn on_relay(
        &mut self,
        now: Millis,
        (key, named): (&CohortKey, Option<&Hash>),
        frame_for: &mut dyn FnMut(&Hash) -> Frame,
        reply: RelayReply,
    ) -> Option<RelayOutcome> {
        let outcome = self.relay(key, named, frame_for, reply);
        self.rearm(now);
        outcome
    }

    /// The I/O layer ended a stream (a stream the machine closed itself is already forgotten).
    pub fn on_closed(&mut self, now: Millis, stream: StreamId, by: ClosedBy) {
        if self.upstream_closed(stream) || self.splice_closed(stream) {
            self.rearm(now);
            return;
        }
        let Some(attached) = self.streams.get(stream) else {
            return;
        };
        if by == ClosedBy::QueueOverflow {
            let counters = Arc::clone(&self.cohorts.live(attached.cohort).counters);
            self.out.count(&counters, Counter::QueueReset);
        }
        self.close_stream(stream, None);
        self.rearm(now);
    }

    /// Edge mode: the I/O layer joined the root for the cohort `cohort` (an
    /// `Action::OpenUpstream`), and `stream`'s frames are that cohort's publications from now
    /// on. The machine sends nothing on it. Its Join and Ack were the I/O layer's; `root` is
    /// the relay id the Ack named (the root is itself an edge). A cohort that is gone, or has
    /// an upstream already, closes it (`CloseReason::UpstreamUnwanted`); local streams of
    /// other edges whose relay path holds `root` form a loop and are closed
    /// (`CloseReason::RelayLoop`).
    pub fn on_upstream(
        &mut self,
        now: Millis,
        (stream, cohort): (StreamId, CohortSerial),
        root: Option<RelayId>,
    ) {
        self.attach_upstream(stream, cohort, root);
        self.rearm(now);
    }

    /// Edge mode: what became of the root's Join for the spliced stream `stream` (an
    /// `Action::OpenSplice`): OK hands the root's Ack on and relays frames both ways from
    /// now on; FULL or REJECTED hands it on and ends the stream; unreachable ends it.
    pub fn on_splice(&mut self, now: Millis, stream: StreamId, outcome: SpliceOutcome) {
        self.spliced(stream, outcome);
        self.rearm(now);
    }

    /// Time passed: runs the deadlines due at `now` (R34, R35), at most
    /// `DEADLINES_PER_TICK_MAX` of them; when more are due it arms a timer at `now`, so the
    /// I/O layer ticks again on its next turn instead of stalling one turn on a long list.
    pub fn on_tick(&mut self, now: Millis) {
        self.deadlines.timer_fired(now);
        for _ in 0..DEADLINES_PER_TICK_MAX {
            let Some((at, key)) = self.deadlines.pop_due(now) else {
                break;
            };
            match key {
                DeadlineKey::Claim(stream_id) => self.claim_deadline_due(now, at, stream_id),
                DeadlineKey::Inactivity(serial) => self.inactivity_deadline_due(now, at, serial),
                DeadlineKey::Idle(serial) => self.idle_deadline_due(now, at, serial),
                DeadlineKey::Linger(serial) => self.linger_deadline_due(at, serial),
            }
        }
        self.rearm(now);
    }
}
