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

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bps_proto::{
    Ack, Address, Authorship, Binding, CohortKey, Frame, Hash, Status, ValidJoin, decode_join,
    decode_roster, encode_frame, validate_join,
};
use bps_verify::{Verified, VerifyError};
use bytes::Bytes;
use rand::RngCore;
use rand::rngs::StdRng;

use super::action::{
    Action, ChunkFacts, CloseReason, ClosedBy, Delivered, FullCause, InvalidSoc, RejectCause,
    Violation, WrongStream,
};
use super::arrival::Arrival;
use super::cohort::Cohort;
use super::config::{HistoryPolicy, ProtocolConfig};
use super::counters::{CohortCounters, Counter, CounterRegistry};
use super::deadlines::{DeadlineKey, Deadlines};
use super::fanout::Targets;
use super::ids::{PeerId, StreamId, Ticket, WriteNotice};
use super::ledger::PeerLedger;
use super::relay::{RelayOutcome, RelayReply};
use super::snapshot::{CohortStreams, CohortSummary, page_of_streams, summarize};
use super::stream::{Checked, DropWindow, FrameKind, InFlight, Revocation, Role, Stream};
use super::time::Millis;
use super::validation::{FrameContext, Verdict, check_frame};

/// Deadlines one `on_tick` runs at most: a burst of expiring streams (ten thousand claims
/// timing out together) is spread over turns, so the core keeps answering in between.
pub const DEADLINES_PER_TICK_MAX: usize = 1024;

/// What became of a verified frame (`Machine::accept`).
#[derive(Debug)]
enum Acceptance {
    Accepted,
    /// Not accepted, and counted already (a revoked stream's frame in its grace, an
    /// undecodable roster).
    Refused,
    /// Below its cursor or in the dedup window (R16, R28): the caller counts the drop.
    Retransmit,
    Violation(Violation),
}

/// Why a cohort is reclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reclaim {
    /// R36: its last stream left.
    Empty,
    /// R34: no accepted publisher frame for the inactivity deadline.
    Inactive,
    /// R21: the admin's EOS was delivered.
    EndOfStream,
    /// R31: nobody in its fan-out set for `idle_cohort_reclaim_ms`, and the table is full.
    Idle,
}

impl Reclaim {
    fn counter(self) -> Counter {
        match self {
            Reclaim::Empty => Counter::CohortsReclaimedEmpty,
            Reclaim::Inactive => Counter::CohortsReclaimedInactive,
            Reclaim::EndOfStream => Counter::CohortsReclaimedEos,
            Reclaim::Idle => Counter::CohortsReclaimedIdle,
        }
    }

    fn close_reason(self) -> CloseReason {
        match self {
            // An empty cohort has no stream left to close; an idle one's streams are reset
            // as at R34.
            Reclaim::Empty | Reclaim::Inactive | Reclaim::Idle => CloseReason::Inactive,
            Reclaim::EndOfStream => CloseReason::EndOfStream,
        }
    }
}

/// Where actions and counter bumps go; a separate field so that it can be borrowed next to
/// a cohort or a stream.
#[derive(Debug)]
struct Outbox {
    actions: Vec<Action>,
    registry: Arc<CounterRegistry>,
}

impl Outbox {
    fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    fn consumed(&mut self, stream: StreamId) {
        self.actions.push(Action::Consumed { stream });
    }

    /// A single-stream Broadcast (counted as one delivery).
    fn send_broadcast(
        &mut self,
        counters: &CohortCounters,
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
    ) {
        self.registry.add(counters, Counter::Deliveries, 1);
        self.actions.push(Action::Send {
            stream,
            frame,
            notice,
        });
    }

    fn deliver(
        &mut self,
        counters: &CohortCounters,
        frame: Bytes,
        targets: Targets,
        facts: Arc<ChunkFacts>,
    ) {
        if targets.is_empty() {
            return;
        }
        self.registry
            .add(counters, Counter::Deliveries, targets.len() as u64);
        self.actions.push(Action::Deliver {
            frame,
            targets,
            facts,
        });
    }

    fn count(&self, counters: &CohortCounters, counter: Counter) {
        self.registry.add(counters, counter, 1);
    }

    /// D11: a stream of `cohort` entered its fan-out set (after its roster-first Send): the
    /// retained frames it has not had, without its own identity's (R25), as one backlog.
    fn backlog(&mut self, cohort: &Cohort, stream_id: StreamId, stream: &mut Stream) {
        let Some(ring) = cohort.history.as_ref() else {
            return;
        };
        let frames = ring.backlog(&stream.addr, stream.history_seen);
        stream.history_seen = ring.last_sequence();
        if frames.is_empty() {
            return;
        }
        let served = frames.len() as u64;
        self.registry
            .add(&cohort.counters, Counter::Deliveries, served);
        self.registry
            .add(&cohort.counters, Counter::HistoryFramesServed, served);
        self.actions.push(Action::Backlog {
            stream: stream_id,
            frames,
        });
    }
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
    cohorts: HashMap<u64, Cohort>,
    cohort_by_key: HashMap<CohortKey, u64>,
    streams: HashMap<StreamId, Stream>,
    /// Verifications in flight, by ticket. A ticket of a closed stream stays until its
    /// result arrives, which is then ignored, and only then is its frame consumed: so the
    /// I/O layer's frames in flight also bound the verification jobs, closed streams' ones
    /// included.
    tickets: HashMap<Ticket, StreamId>,
    /// Relayed service chunks (W5) whose one signature check is in flight, by ticket. The
    /// I/O layer bounds how many it asks for at once.
    relays: HashMap<Ticket, PendingRelay>,
    deadlines: Deadlines,
    /// R31: the idle cohorts (empty fan-out set), oldest first, as (idle since, serial).
    idle: BTreeSet<(Millis, u64)>,
    /// Cohorts whose membership or roles changed during the current input; their idleness
    /// is settled before the input returns (`rearm`).
    unsettled: Vec<u64>,
    out: Outbox,
    next_cohort_serial: u64,
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
            cohorts: HashMap::new(),
            cohort_by_key: HashMap::new(),
            streams: HashMap::new(),
            tickets: HashMap::new(),
            relays: HashMap::new(),
            deadlines: Deadlines::default(),
            idle: BTreeSet::new(),
            unsettled: Vec::new(),
            out: Outbox {
                actions: Vec::new(),
                registry: Arc::new(CounterRegistry::default()),
            },
            next_cohort_serial: 0,
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
        for cohort in self.cohorts.values_mut() {
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
        let mut cohorts: Vec<&Cohort> = self.cohorts.values().collect();
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
        let serial = self.cohort_by_key.get(key)?;
        Some(page_of_streams(
            self.cohort(*serial),
            &self.streams,
            (offset, limit),
            now,
        ))
    }

    /// The first frame of a new stream (R2). The answer is an `Ack` (OK, FULL or REJECTED,
    /// R5), or, for a blocklisted peer, a `Close` without one.
    ///
    /// # Panics
    /// If `stream` is already attached (the I/O layer never reuses a stream id).
    pub fn on_join(&mut self, now: Millis, stream: StreamId, arrival: Arrival, join: Frame) {
        assert!(
            !self.streams.contains_key(&stream),
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
        self.frame(now, stream, frame);
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
        match self.streams.get_mut(&stream_id) {
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

    /// Where a verification ticket's frame came from: its stream and the serial of that
    /// stream's cohort (the I/O layer queues jobs fairly by cohort and takes back the jobs
    /// of a stream that closed). `None` once the stream is gone or the ticket answered.
    #[must_use]
    pub fn ticket_origin(&self, ticket: Ticket) -> Option<(StreamId, u64)> {
        let stream_id = *self.tickets.get(&ticket)?;
        let stream = self.streams.get(&stream_id)?;
        Some((stream_id, stream.cohort))
    }

    /// The cohort of a W5 relay's job (`Action::Verify` of `on_relay`), while its admin
    /// stream is attached; `None` for any other ticket. No stream owns such a job: its POST
    /// waits for the result, which `on_verified` answers whatever became of the stream.
    #[must_use]
    pub fn relay_cohort(&self, ticket: Ticket) -> Option<u64> {
        let relay = self.relays.get(&ticket)?;
        Some(
            self.streams
                .get(&relay.stream)
                .map_or(0, |stream| stream.cohort),
        )
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
            !self.streams.contains_key(&stream_id),
            "ticket {} of the attached stream {stream_id} taken back",
            ticket.value()
        );
        self.out.consumed(stream_id);
        self.rearm(now);
    }

    /// A frame sent with a `WriteNotice` is on the wire (R24: the revocation grace starts).
    pub fn on_written(&mut self, now: Millis, stream: StreamId, notice: WriteNotice) {
        if let Some(stream) = self.streams.get_mut(&stream)
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
        let Some(attached) = self.streams.get(&stream) else {
            return;
        };
        if by == ClosedBy::QueueOverflow {
            let counters = Arc::clone(&self.cohort(attached.cohort).counters);
            self.out.count(&counters, Counter::QueueReset);
        }
        self.close_stream(stream, None);
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
            }
        }
        self.rearm(now);
    }

    fn cohort(&self, serial: u64) -> &Cohort {
        self.cohorts
            .get(&serial)
            .expect("a stream's cohort is live")
    }

    // ---- Join (R1..R5, R29..R33, R37) ----

    fn join(&mut self, now: Millis, arrival: Arrival, stream_id: StreamId, join: Frame) {
        let peer = arrival.peer;
        if self.ledger.is_blocked(peer, now) {
            self.out.registry.add_total(Counter::JoinsBlocked, 1);
            self.out.push(Action::Close {
                stream: stream_id,
                reason: CloseReason::Blocklisted,
            });
            return;
        }
        let valid = match decode_join(join.body()) {
            Err(_) => {
                return self.refuse(
                    stream_id,
                    None,
                    CloseReason::Rejected(RejectCause::Undecodable),
                );
            }
            Ok(join) => match validate_join(&join) {
                Err(reason) => {
                    return self.refuse(
                        stream_id,
                        None,
                        CloseReason::Rejected(RejectCause::Invalid(reason)),
                    );
                }
                Ok(valid) => valid,
            },
        };
        // D11: history is broker policy (R3 lets it refuse), for creating and attaching Joins.
        if valid.spec.history && self.config.history == HistoryPolicy::Refuse {
            return self.refuse(
                stream_id,
                None,
                CloseReason::Rejected(RejectCause::HistoryRefused),
            );
        }
        // W11: an anonymous session is an audience, which a closed cohort does not have.
        if arrival.anonymous && valid.spec.closed {
            return self.refuse(
                stream_id,
                None,
                CloseReason::Rejected(RejectCause::AnonymousInClosed),
            );
        }
        let serial = match self.cohort_by_key.get(&valid.key).copied() {
            Some(serial) => match self.admit(serial, arrival, &valid.addr) {
                Ok(()) => serial,
                Err(cause) => {
                    return self.refuse(stream_id, Some(serial), CloseReason::Full(cause));
                }
            },
            None => match self.create_cohort(now, arrival, &valid) {
                Ok(serial) => serial,
                Err(cause) => return self.refuse(stream_id, None, CloseReason::Full(cause)),
            },
        };
        self.attach(now, arrival, stream_id, serial, valid.addr);
    }

    /// The bounds of an existing cohort (R30, R32, R33, W11); on success the peer is
    /// counted in.
    fn admit(&self, serial: u64, arrival: Arrival, addr: &Address) -> Result<(), FullCause> {
        let cohort = self.cohort(serial);
        let peer = arrival.peer;
        let peer_streams = cohort.streams_of_peer(peer);
        // W11: R33 counts a peer's sessions with an addr of their own.
        if !arrival.anonymous
            && peer_streams - cohort.anonymous_of_peer(peer)
                >= self.config.streams_per_peer_per_cohort_max
        {
            return Err(FullCause::PeerStreams);
        }
        match initial_role(cohort, arrival, addr) {
            // R30 exempts pending streams; their own guard bounds what they can hold.
            Role::Pending if cohort.pending >= self.config.pending_streams_per_cohort_max => {
                return Err(FullCause::CohortPendingStreams);
            }
            Role::Pending => {}
            Role::Publisher | Role::Spectator | Role::Silent
                if cohort.counted >= self.config.streams_per_cohort_max =>
            {
                return Err(FullCause::CohortStreams);
            }
            Role::Publisher | Role::Spectator | Role::Silent => {}
        }
        if arrival.anonymous {
            self.admit_anonymous(cohort, peer)?;
        }
        if peer_streams == 0 {
            self.ledger.try_enter_cohort(peer)?;
        }
        if arrival.anonymous && !self.ledger.try_enter_anonymous(peer) {
            if peer_streams == 0 {
                self.ledger.leave_cohort(peer);
            }
            return Err(FullCause::PeerAnonymousSessions);
        }
        Ok(())
    }

    /// W11's bounds of a cohort on anonymous sessions: a few peers cannot fill its R30 slots,
    /// and part of them stays for streams with an address.
    fn admit_anonymous(&self, cohort: &Cohort, peer: PeerId) -> Result<(), FullCause> {
        if cohort.anonymous_of_peer(peer) >= self.config.spectator_sessions_per_peer_per_cohort_max
        {
            return Err(FullCause::PeerAnonymousSessionsInCohort);
        }
        if cohort.anonymous >= self.config.spectator_slots_per_cohort() {
            return Err(FullCause::CohortAnonymousSessions);
        }
        Ok(())
    }

    /// A new cohort for a Join with no live match (R2, R31, R37); the peer is counted in.
    fn create_cohort(
        &mut self,
        now: Millis,
        arrival: Arrival,
        valid: &ValidJoin,
    ) -> Result<u64, FullCause> {
        let peer = arrival.peer;
        self.ledger.try_enter_cohort(peer)?;
        let room = self.ledger.try_open_cohort()
            || (self.reclaim_oldest_idle(now) && self.ledger.try_open_cohort());
        if !room {
            self.ledger.leave_cohort(peer);
            return Err(FullCause::Cohorts);
        }
        if arrival.anonymous && !self.ledger.try_enter_anonymous(peer) {
            self.ledger.close_cohort();
            self.ledger.leave_cohort(peer);
            return Err(FullCause::PeerAnonymousSessions);
        }
        let serial = self.next_cohort_serial;
        self.next_cohort_serial += 1;
        let mut cohort = Cohort::new(serial, valid.key.clone(), valid.spec, now, &self.config);
        self.out
            .registry
            .register(serial, Arc::clone(&cohort.counters));
        self.out.count(&cohort.counters, Counter::CohortsCreated);
        let deadline = now.plus_ms(self.config.inactivity_deadline_ms);
        cohort.inactivity_timer = Some(deadline);
        self.deadlines
            .push(deadline, DeadlineKey::Inactivity(serial));
        self.cohort_by_key.insert(valid.key.clone(), serial);
        self.cohorts.insert(serial, cohort);
        Ok(serial)
    }

    /// R31: reclaims this core's cohort idle the longest, if it has been idle for
    /// `idle_cohort_reclaim_ms`, so a creating Join finds room. Other cores' idle cohorts are
    /// shed by their own machines when their idle timers find the table full.
    fn reclaim_oldest_idle(&mut self, now: Millis) -> bool {
        let Some(&(since, serial)) = self.idle.first() else {
            return false;
        };
        if since.plus_ms(self.config.idle_cohort_reclaim_ms) > now {
            return false;
        }
        self.reclaim(serial, Reclaim::Idle);
        true
    }

    /// Records whether each cohort changed during this input now has an empty fan-out set,
    /// and since when; a newly idle cohort gets an idle timer unless one is queued.
    fn settle_idle(&mut self, now: Millis) {
        for serial in std::mem::take(&mut self.unsettled) {
            let Some(cohort) = self.cohorts.get_mut(&serial) else {
                continue;
            };
            match (cohort.fanout.is_empty(), cohort.idle_since) {
                (true, None) => {
                    cohort.idle_since = Some(now);
                    self.idle.insert((now, serial));
                    if cohort.idle_timer.is_none() {
                        let at = now.plus_ms(self.config.idle_cohort_reclaim_ms);
                        cohort.idle_timer = Some(at);
                        self.deadlines.push(at, DeadlineKey::Idle(serial));
                    }
                }
                (false, Some(since)) => {
                    cohort.idle_since = None;
                    self.idle.remove(&(since, serial));
                }
                (true, Some(_)) | (false, None) => {}
            }
        }
    }

    /// Answers FULL or REJECTED and ends the stream (R5).
    fn refuse(&mut self, stream: StreamId, serial: Option<u64>, reason: CloseReason) {
        let (status, counter) = match reason {
            CloseReason::Full(_) => (Status::Full, Counter::JoinsFull),
            _ => (Status::Rejected, Counter::JoinsRejected),
        };
        match serial {
            Some(serial) => {
                let counters = Arc::clone(&self.cohort(serial).counters);
                self.out.count(&counters, counter);
            }
            None => self.out.registry.add_total(counter, 1),
        }
        let ack = encode_frame(&Ack {
            status: status as i32,
            challenge: Bytes::new(),
        });
        self.out.push(Action::Send {
            stream,
            frame: ack,
            notice: None,
        });
        self.out.push(Action::Close { stream, reason });
    }

    /// Answers OK with a fresh challenge (R4) and attaches the stream in its initial role.
    fn attach(
        &mut self,
        now: Millis,
        arrival: Arrival,
        stream_id: StreamId,
        serial: u64,
        addr: Address,
    ) {
        let mut challenge: Hash = [0; 32];
        self.rng.fill_bytes(&mut challenge);
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::copy_from_slice(&challenge),
        });
        self.out.push(Action::Send {
            stream: stream_id,
            frame: ack,
            notice: None,
        });

        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("cohort admitted the stream");
        let role = initial_role(cohort, arrival, &addr);
        let mut stream = Stream {
            peer: arrival.peer,
            anonymous: arrival.anonymous,
            carrier: arrival.carrier,
            cohort: serial,
            addr,
            challenge,
            role,
            exempt: role == Role::Pending,
            proven: false,
            joined_at: now,
            claim_deadline: None,
            claim_timer: None,
            revocation: None,
            roster_seen: 0,
            history_seen: 0,
            in_flight: Default::default(),
            backlog: Default::default(),
            drops: DropWindow::default(),
        };
        cohort.attach(stream_id, &stream);
        self.unsettled.push(serial);
        self.out.count(&cohort.counters, Counter::JoinsOk);
        if matches!(role, Role::Pending | Role::Silent) {
            set_claim_deadline(
                &mut self.deadlines,
                stream_id,
                &mut stream,
                now.plus_ms(self.config.claim_deadline_ms),
            );
        }
        // R22: the latest roster goes first to a stream entering the fan-out set, and at once
        // to a pending or silent stream it names; never to the admin's streams (D5).
        let roster_due = !cohort.is_admin(&addr)
            && match role {
                Role::Spectator | Role::Publisher => true,
                Role::Pending | Role::Silent => cohort.roster.names(&addr),
            };
        if roster_due && let Some(frame) = cohort.roster.latest.clone() {
            stream.roster_seen = cohort.roster.version;
            self.out
                .send_broadcast(&cohort.counters, stream_id, frame, None);
        }
        // D11: a stream entering the fan-out set gets the history after the roster.
        if matches!(role, Role::Spectator | Role::Publisher) {
            self.out.backlog(cohort, stream_id, &mut stream);
        }
        self.streams.insert(stream_id, stream);
        if role == Role::Publisher {
            self.enforce_publisher_streams(serial, &addr);
        }
    }

    /// R29: an address holds at most `publisher_streams_per_address_max` publisher streams
    /// in a cohort; the oldest claims are reset.
    fn enforce_publisher_streams(&mut self, serial: u64, addr: &Address) {
        loop {
            let cohort = self.cohort(serial);
            let Some(publishers) = cohort.publishers_by_addr.get(addr) else {
                return;
            };
            if publishers.len() <= self.config.publisher_streams_per_address_max {
                return;
            }
            let oldest = publishers[0];
            let counters = Arc::clone(&cohort.counters);
            self.out.count(&counters, Counter::Superseded);
            self.close_stream(oldest, Some(CloseReason::Superseded));
        }
    }

    // ---- Frames (R13..R18) ----

    fn frame(&mut self, now: Millis, stream_id: StreamId, frame: Frame) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
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
                let cohort = self
                    .cohorts
                    .get(&stream.cohort)
                    .expect("a stream's cohort is live");
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

    fn check(&mut self, now: Millis, stream_id: StreamId, frame: Frame) {
        let stream = self
            .streams
            .get_mut(&stream_id)
            .expect("checked stream is attached");
        let cohort = self
            .cohorts
            .get(&stream.cohort)
            .expect("a stream's cohort is live");
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
                let ticket = Ticket(self.next_ticket);
                self.next_ticket += 1;
                self.tickets.insert(ticket, stream_id);
                stream.in_flight.push_back(InFlight {
                    ticket,
                    frame,
                    result: None,
                });
                self.out.count(&cohort.counters, Counter::VerifyRequests);
                self.out.push(Action::Verify { ticket, request });
            }
        }
    }

    /// Applies verified frames of a stream in read order, then releases its backlog.
    fn apply_ready(&mut self, now: Millis, stream_id: StreamId) {
        loop {
            let Some(stream) = self.streams.get_mut(&stream_id) else {
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
    fn apply(
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
    fn accept(
        &mut self,
        now: Millis,
        stream_id: StreamId,
        frame: &Checked,
        verified: &Verified,
    ) -> Acceptance {
        let stream = self
            .streams
            .get_mut(&stream_id)
            .expect("applied stream is attached");
        stream.proven = true;
        let serial = stream.cohort;
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("a stream's cohort is live");
        // Revoked while the frame was being verified: it was read within the grace (R24).
        if stream.revocation.is_some() {
            self.out
                .count(&cohort.counters, Counter::DropRevokedInGrace);
            return Acceptance::Refused;
        }
        if cohort.authorship() == Authorship::Implicit {
            // R11: where the binding fixes the owner (OWNER), it must be the declared addr.
            if cohort.spec.binding == Binding::Owner && verified.owner != stream.addr {
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
            let addr = stream.addr;
            self.publish_data(now, serial, &addr, frame, verified);
            return Acceptance::Accepted;
        }
        let addr = stream.addr;
        if stream.role != Role::Publisher {
            self.claim(stream_id);
        }
        // The claim may have reset another stream of this address (R29), never this one.
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("a stream's cohort is live");
        match frame.kind {
            FrameKind::Data => {
                // R16 again: another stream of the same address may have moved the cursor.
                if frame.index < cohort.cursors.get(&addr) {
                    return Acceptance::Retransmit;
                }
                // R18. The table's eviction (R27) restarts the evicted publisher's cursor.
                if cohort.cursors.advance(&addr, frame.index + 1).is_some() {
                    self.out.count(&cohort.counters, Counter::CursorEvictions);
                }
                self.publish_data(now, serial, &addr, frame, verified);
            }
            FrameKind::Auth => {
                cohort.last_activity = now;
                self.out.count(&cohort.counters, Counter::AcceptedAuth);
            }
            FrameKind::Roster => {
                if frame.index < cohort.roster.cursor {
                    return Acceptance::Retransmit;
                }
                match decode_roster(&frame.payload) {
                    // R20: it still claimed (above) and moves no cursor.
                    Err(_) => {
                        self.out.count(&cohort.counters, Counter::InvalidRoster);
                        return Acceptance::Refused;
                    }
                    Ok(entries) => self.accept_roster(now, serial, frame, &entries, verified),
                }
            }
            FrameKind::Eos => {
                // R21: deliver to every fan-out stream, then reclaim.
                self.publish(now, serial, &addr, frame, verified, Counter::AcceptedEos);
                self.reclaim(serial, Reclaim::EndOfStream);
            }
        }
        Acceptance::Accepted
    }

    /// Delivers an accepted publication, unchanged and framed once, to the fan-out set
    /// without the publishing identity's streams (R18, R25).
    fn publish(
        &mut self,
        now: Millis,
        serial: u64,
        identity: &Address,
        frame: &Checked,
        verified: &Verified,
        counter: Counter,
    ) -> Arc<ChunkFacts> {
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("publishing cohort is live");
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
    fn publish_data(
        &mut self,
        now: Millis,
        serial: u64,
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
        self.cohorts
            .get_mut(&serial)
            .expect("publishing cohort is live")
            .retain(
                *identity,
                Delivered {
                    frame: frame.frame.bytes().clone(),
                    facts,
                },
            );
    }

    /// R7: a pending, silent or granted spectator stream's first valid frame.
    fn claim(&mut self, stream_id: StreamId) {
        let stream = self
            .streams
            .get_mut(&stream_id)
            .expect("claiming stream is attached");
        let serial = stream.cohort;
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("a stream's cohort is live");
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

    // ---- Relayed service chunks (W5) ----

    fn relay(
        &mut self,
        key: &CohortKey,
        named: Option<&Hash>,
        frame_for: &mut dyn FnMut(&Hash) -> Frame,
        reply: RelayReply,
    ) -> Option<RelayOutcome> {
        let Some(serial) = self.cohort_by_key.get(key).copied() else {
            return Some(RelayOutcome::NoCohort);
        };
        let (stream_id, challenge) = match self.relay_stream(serial, named) {
            Ok(chosen) => chosen,
            Err(outcome) => return Some(outcome),
        };
        let counters = Arc::clone(&self.cohort(serial).counters);
        let frame = frame_for(&challenge);
        let verdict = {
            let stream = &self.streams[&stream_id];
            check_frame(frame, &relay_context(self.cohort(serial), stream))
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
        let ticket = Ticket(self.next_ticket);
        self.next_ticket += 1;
        self.relays.insert(
            ticket,
            PendingRelay {
                stream: stream_id,
                frame: checked,
                reply,
            },
        );
        self.out.count(&counters, Counter::VerifyRequests);
        self.out.push(Action::Verify { ticket, request });
        None
    }

    /// The one admin stream a relayed chunk is tried on, with its challenge (`on_relay`).
    fn relay_stream(
        &self,
        serial: u64,
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
    fn relayed(
        &mut self,
        now: Millis,
        pending: PendingRelay,
        result: Result<Verified, VerifyError>,
    ) {
        let PendingRelay {
            stream: stream_id,
            frame,
            reply,
        } = pending;
        let counters = self
            .streams
            .get(&stream_id)
            .map(|stream| Arc::clone(&self.cohort(stream.cohort).counters));
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
    fn admin_streams(&self, serial: u64) -> Vec<(StreamId, Hash, bool)> {
        let cohort = self.cohort(serial);
        let Some(admin) = cohort.spec.admin else {
            return Vec::new();
        };
        let mut streams: Vec<(StreamId, Hash, bool)> = cohort
            .streams_by_addr
            .get(&admin)
            .into_iter()
            .flatten()
            .filter_map(|id| {
                let stream = &self.streams[id];
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

    // ---- Roster (R19..R24) ----

    fn accept_roster(
        &mut self,
        now: Millis,
        serial: u64,
        frame: &Checked,
        entries: &[Address],
        verified: &Verified,
    ) {
        let index = frame.index;
        let framed = frame.frame.bytes().clone();
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("roster cohort is live");
        let admin = cohort
            .spec
            .admin
            .expect("ROSTER is accepted only where there is an admin");
        let change = cohort
            .roster
            .replace(index, entries, &admin, framed.clone());
        cohort.last_activity = now;
        self.out.count(&cohort.counters, Counter::AcceptedRoster);
        // Under ALL the roster grants nothing, so nothing is revoked or granted by it.
        let explicit = cohort.authorship() == Authorship::Explicit;
        let mut revoked: Vec<StreamId> = Vec::new();
        if explicit {
            for addr in &change.removed {
                revoked.extend(cohort.streams_by_addr.get(addr).into_iter().flatten());
            }
            revoked.sort_unstable();
            // D11: a late joiner would reject their frames against this roster (R41).
            cohort.forget_publishers(&change.removed);
        }
        // The fan-out set gets it as a delivery; revoked streams get it on their own, with a
        // notice, below.
        let mut targets = cohort.fanout.targets(&admin);
        if revoked.iter().any(|id| cohort.fanout.contains(*id)) {
            let mut except: Vec<StreamId> = targets.except.to_vec();
            except.extend(revoked.iter().filter(|id| cohort.fanout.contains(**id)));
            except.sort_unstable();
            except.dedup();
            targets.except = except.into();
        }
        self.out.deliver(
            &cohort.counters,
            framed.clone(),
            targets,
            Arc::new(ChunkFacts::from(verified)),
        );
        for stream_id in revoked {
            self.revoke(now, serial, stream_id, &framed);
        }
        if explicit {
            self.grant(now, serial, &change.added, &framed);
        }
    }

    /// R22, R23: pending and silent streams named by the new roster get it at once; newly
    /// named streams lose any revocation, and newly named silent streams get a fresh claim
    /// deadline (they could not claim before).
    fn grant(&mut self, now: Millis, serial: u64, added: &[Address], framed: &Bytes) {
        let cohort = self.cohorts.get(&serial).expect("roster cohort is live");
        let claim_deadline = now.plus_ms(self.config.claim_deadline_ms);
        for addr in &cohort.roster.ordered {
            let newly_named = added.contains(addr);
            for stream_id in cohort.streams_by_addr.get(addr).into_iter().flatten() {
                let stream = self
                    .streams
                    .get_mut(stream_id)
                    .expect("member stream is attached");
                if newly_named {
                    stream.revocation = None;
                    if stream.role == Role::Silent {
                        set_claim_deadline(&mut self.deadlines, *stream_id, stream, claim_deadline);
                    }
                }
                if matches!(stream.role, Role::Pending | Role::Silent) {
                    stream.roster_seen = cohort.roster.version;
                    self.out
                        .send_broadcast(&cohort.counters, *stream_id, framed.clone(), None);
                }
            }
        }
    }

    /// R24: the stream's addr left the roster. It gets the reduced roster with a notice, its
    /// frames are dropped until that is written plus the grace, and it takes the role R8/R9
    /// give its addr.
    fn revoke(&mut self, now: Millis, serial: u64, stream_id: StreamId, framed: &Bytes) {
        let stream = self
            .streams
            .get_mut(&stream_id)
            .expect("revoked stream is attached");
        let cohort = self
            .cohorts
            .get_mut(&serial)
            .expect("roster cohort is live");
        if stream.exempt {
            if cohort.counted >= self.config.streams_per_cohort_max {
                // No room in R30 for it as a reader: it leaves after its reduced roster.
                self.out
                    .send_broadcast(&cohort.counters, stream_id, framed.clone(), None);
                self.close_stream(stream_id, Some(CloseReason::RevokedWithoutRoom));
                return;
            }
            cohort.stop_exemption(stream);
        }
        let role = cohort.audience_role();
        let was_receiving = cohort.fanout.contains(stream_id);
        if stream.role != role {
            cohort.change_role(stream_id, stream, role);
            self.unsettled.push(serial);
        }
        let receiving = cohort.fanout.contains(stream_id);
        if was_receiving
            && !receiving
            && let Some(ring) = cohort.history.as_ref()
        {
            // D11: it had everything live so far; a later entry continues from here.
            stream.history_seen = ring.last_sequence();
        }
        let notice = WriteNotice(self.next_notice);
        self.next_notice += 1;
        stream.revocation = Some(Revocation {
            notice,
            written_at: None,
        });
        stream.roster_seen = cohort.roster.version;
        clear_claim_deadline(stream);
        if role == Role::Silent {
            set_claim_deadline(
                &mut self.deadlines,
                stream_id,
                stream,
                now.plus_ms(self.config.claim_deadline_ms),
            );
        }
        self.out
            .send_broadcast(&cohort.counters, stream_id, framed.clone(), Some(notice));
        // D11: a pending stream that became a spectator entered the fan-out set; the reduced
        // roster is its roster-first delivery (R22), the history follows it.
        if !was_receiving && receiving {
            self.out.backlog(cohort, stream_id, stream);
        }
    }

    // ---- Violations, closing, reclaiming (R34..R36, R39) ----

    /// A frame dropped without penalty (R14, R15, R16): counted, and a stream that drops
    /// more than `dropped_frames_per_stream_per_s_max` per second is reset.
    fn dropped(&mut self, now: Millis, stream_id: StreamId, counter: Counter) {
        let stream = self
            .streams
            .get_mut(&stream_id)
            .expect("a dropping stream is attached");
        let exceeded = stream
            .drops
            .exceeded(now, self.config.dropped_frames_per_stream_per_s_max);
        let serial = stream.cohort;
        let counters = Arc::clone(&self.cohort(serial).counters);
        self.out.count(&counters, counter);
        if exceeded {
            self.out.count(&counters, Counter::DropRateResets);
            self.close_stream(stream_id, Some(CloseReason::DropRate));
        }
    }

    fn violate(&mut self, now: Millis, stream_id: StreamId, violation: Violation) {
        let stream = self
            .streams
            .get(&stream_id)
            .expect("violating stream is attached");
        let peer = stream.peer;
        // W11: one tab of a shared address must not blocklist everyone behind it.
        let blocklists = !stream.anonymous;
        let counters = Arc::clone(&self.cohort(stream.cohort).counters);
        self.out.count(&counters, violation.counter());
        self.close_stream(stream_id, Some(CloseReason::Violation(violation)));
        if blocklists {
            self.blocklist(now, peer, self.config.blocklist_violation_ms, &counters);
        }
    }

    fn blocklist(
        &mut self,
        now: Millis,
        peer: PeerId,
        duration_ms: u64,
        counters: &CohortCounters,
    ) {
        if duration_ms == 0 {
            return;
        }
        let until = now.plus_ms(duration_ms);
        self.ledger.block(peer, until, now);
        self.out.count(counters, Counter::Blocklisted);
        self.out.push(Action::Blocklist { peer, until });
    }

    /// Forgets a stream, consuming the frames it held that are not being verified (those are
    /// consumed when their result arrives); with a reason, tells the I/O layer to close it. The cohort goes when its last stream does (R36).
    fn close_stream(&mut self, stream_id: StreamId, reason: Option<CloseReason>) {
        let stream = self
            .streams
            .remove(&stream_id)
            .expect("closed stream is attached");
        for _ in 0..stream.frames_unverified() {
            self.out.consumed(stream_id);
        }
        if let Some(reason) = reason {
            self.out.push(Action::Close {
                stream: stream_id,
                reason,
            });
        }
        let cohort = self
            .cohorts
            .get_mut(&stream.cohort)
            .expect("a stream's cohort is live");
        leave(&self.ledger, cohort, stream_id, &stream);
        let serial = cohort.serial;
        if cohort.members.is_empty() {
            self.reclaim(serial, Reclaim::Empty);
        } else {
            self.unsettled.push(serial);
        }
    }

    /// Removes a cohort and closes every stream still attached (R21, R34, R36).
    fn reclaim(&mut self, serial: u64, why: Reclaim) {
        let mut cohort = self
            .cohorts
            .remove(&serial)
            .expect("reclaimed cohort is live");
        self.cohort_by_key.remove(&cohort.key);
        if let Some(since) = cohort.idle_since {
            self.idle.remove(&(since, serial));
        }
        let members: Vec<StreamId> = cohort.members.iter().copied().collect();
        for stream_id in members {
            let stream = self
                .streams
                .remove(&stream_id)
                .expect("member stream is attached");
            for _ in 0..stream.frames_unverified() {
                self.out.consumed(stream_id);
            }
            self.out.push(Action::Close {
                stream: stream_id,
                reason: why.close_reason(),
            });
            leave(&self.ledger, &mut cohort, stream_id, &stream);
        }
        self.ledger.close_cohort();
        self.out.count(&cohort.counters, why.counter());
        self.out.registry.deregister(serial);
    }

    // ---- Deadlines (R34, R35) ----

    fn claim_deadline_due(&mut self, now: Millis, at: Millis, stream_id: StreamId) {
        let Some(stream) = self.streams.get_mut(&stream_id) else {
            return;
        };
        if stream.claim_timer != Some(at) {
            return;
        }
        stream.claim_timer = None;
        match stream.claim_deadline {
            None => {}
            Some(deadline) if deadline > now => {
                stream.claim_timer = Some(deadline);
                self.deadlines.push(deadline, DeadlineKey::Claim(stream_id));
            }
            Some(_) => {
                let peer = stream.peer;
                let cohort = self
                    .cohorts
                    .get(&stream.cohort)
                    .expect("a stream's cohort is live");
                let counters = Arc::clone(&cohort.counters);
                self.out.count(&counters, Counter::ClaimTimeout);
                self.close_stream(stream_id, Some(CloseReason::ClaimTimeout));
                self.blocklist(now, peer, self.config.blocklist_claim_timeout_ms, &counters);
            }
        }
    }

    fn inactivity_deadline_due(&mut self, now: Millis, at: Millis, serial: u64) {
        let Some(cohort) = self.cohorts.get_mut(&serial) else {
            return;
        };
        if cohort.inactivity_timer != Some(at) {
            return;
        }
        let deadline = cohort
            .last_activity
            .plus_ms(self.config.inactivity_deadline_ms);
        if deadline > now {
            cohort.inactivity_timer = Some(deadline);
            self.deadlines
                .push(deadline, DeadlineKey::Inactivity(serial));
            return;
        }
        cohort.inactivity_timer = None;
        self.reclaim(serial, Reclaim::Inactive);
    }

    /// R31: an idle cohort's timer. Idle for `idle_cohort_reclaim_ms` while the table is full,
    /// it is reclaimed (a Join on another core may be waiting for room); otherwise the timer
    /// comes back after that long again while the cohort stays idle, so each idle cohort
    /// holds one timer.
    fn idle_deadline_due(&mut self, now: Millis, at: Millis, serial: u64) {
        let Some(cohort) = self.cohorts.get_mut(&serial) else {
            return;
        };
        if cohort.idle_timer != Some(at) {
            return;
        }
        cohort.idle_timer = None;
        let Some(since) = cohort.idle_since else {
            return;
        };
        let due = since.plus_ms(self.config.idle_cohort_reclaim_ms);
        if due <= now && self.ledger.cohorts_full() {
            self.reclaim(serial, Reclaim::Idle);
            return;
        }
        let next = if due > now {
            due
        } else {
            now.plus_ms(self.config.idle_cohort_reclaim_ms)
        };
        cohort.idle_timer = Some(next);
        self.deadlines.push(next, DeadlineKey::Idle(serial));
    }

    /// Settles the idleness of the cohorts this input changed, then asks for a timer when
    /// the earliest live deadline moved earlier. Dead entries (of closed streams, reclaimed
    /// cohorts, moved deadlines) are dropped from the top, and swept from the whole heap once
    /// they outnumber the live ones.
    fn rearm(&mut self, now: Millis) {
        self.settle_idle(now);
        let (streams, cohorts) = (&self.streams, &self.cohorts);
        let live = |at: Millis, key: DeadlineKey| match key {
            DeadlineKey::Claim(stream_id) => streams
                .get(&stream_id)
                .is_some_and(|stream| stream.claim_timer == Some(at)),
            DeadlineKey::Inactivity(serial) => cohorts
                .get(&serial)
                .is_some_and(|cohort| cohort.inactivity_timer == Some(at)),
            DeadlineKey::Idle(serial) => cohorts
                .get(&serial)
                .is_some_and(|cohort| cohort.idle_timer == Some(at)),
        };
        // Live entries: a claim per stream, an inactivity and an idle timer per cohort.
        if self.deadlines.len() > 2 * (streams.len() + 2 * cohorts.len()) + 64 {
            self.deadlines.sweep(live);
        }
        self.deadlines.drop_dead_top(live);
        if let Some(at) = self.deadlines.rearm(now) {
            self.out.push(Action::ArmTimer { at });
        }
    }
}

/// A relayed service chunk waiting for its signature check: the admin stream it is tried
/// on, the checked frame, and where its outcome goes.
#[derive(Debug)]
struct PendingRelay {
    stream: StreamId,
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

/// The role a new stream gets: R6..R11 for a declared addr; an anonymous session is a
/// spectator under every authorship (W11: it receives and never publishes).
fn initial_role(cohort: &Cohort, arrival: Arrival, addr: &Address) -> Role {
    if arrival.anonymous {
        Role::Spectator
    } else {
        cohort.initial_role(addr)
    }
}

/// Detaches a forgotten stream from its cohort and gives back what it held in the ledger.
fn leave(ledger: &PeerLedger, cohort: &mut Cohort, stream_id: StreamId, stream: &Stream) {
    if cohort.detach(stream_id, stream) {
        ledger.leave_cohort(stream.peer);
    }
    if stream.anonymous {
        ledger.leave_anonymous(stream.peer);
    }
}

/// Sets a claim deadline (R35), queueing a timer unless one is queued already (an earlier
/// one, which re-queues itself for the later deadline when it comes due).
fn set_claim_deadline(
    deadlines: &mut Deadlines,
    stream_id: StreamId,
    stream: &mut Stream,
    at: Millis,
) {
    stream.claim_deadline = Some(at);
    if stream.claim_timer.is_none() {
        stream.claim_timer = Some(at);
        deadlines.push(at, DeadlineKey::Claim(stream_id));
    }
}

/// Drops a claim deadline; its queued timer, if any, is dead from now on.
fn clear_claim_deadline(stream: &mut Stream) {
    stream.claim_deadline = None;
    stream.claim_timer = None;
}
