//! One core's loop: the protocol state machine of the cohorts homed here, fed from the
//! core's lanes and its control mailbox, and the execution of the machine's actions.
//!
//! Owns: `Shard`: the `Machine`, the verification of its jobs (submitted to the pool, or
//! verified here between turns when `verify.mode = "inline"`), the machine's timer, and the
//! turn: the control mailbox first (so a busy core always answers), credits, then the home
//! lane and the verification results (unless the router says work is paused), then the
//! owner lane, then deadlines, overflow and gauges; then every other task of the runtime
//! (the carriers' readers and writers) gets a turn before the next one.
//! Never does: touch a socket (carriers do, through their ports), or decide anything about
//! the protocol: it executes the machine's actions as they come.
//!
//! Fan-out between two flushes is bounded to half the R26 bound (`fanout_frames_per_flush`):
//! each applied publication and each delivery from another core puts at most one frame on a
//! stream, and what is queued is written when the budget is spent, so a subscriber that
//! keeps up never finds more than that queued by our own batching (see `outbound` for what
//! a queue beyond its bound means). Control messages, Joins, credits and closes do not
//! count against it and are taken every turn. Nothing waits on a timer for work that is
//! ready: the loop parks on its doorbell (rung by every lane, the mailbox, frame memory and
//! the senders waiting for room) and on the earliest deadline, nothing else.
//!
//! Writes coalesce under load. A closed-loop publisher's frames arrive in dribbles, and a
//! turn often applies one or two results while dozens are still being verified; written at
//! once, each would cost every subscriber a `sendmsg` of its own (measured at N = 100: a
//! third of all writes carried one or two frames). So once a turn has applied results, the
//! flush waits while this core has enough verifications in flight to fill what is left of
//! the budget (their results ring the doorbell), until the budget is spent, the core drains,
//! or `server.write_coalesce_us` has passed. A core with fewer in flight writes at the end
//! of the turn, so a moderate load pays no latency for it. The budget counts every fan-out
//! since the last flush, so the R26 reasoning above holds unchanged.
//!
//! Verification is fair between cohorts (issue 19): every job names its cohort as its class,
//! the pool (or this core's inline queue) serves the classes round robin, and finished
//! results wait here in a queue of the same kind, applied one class after another within
//! the fan-out budget. So a cohort that floods this core delays another cohort's frame by
//! at most one of its own frames per round at each step, not by the thousands it has in
//! flight; it gets everything the others leave. The queued jobs of a stream that closed
//! (for an invalid chunk, R17, or any other reason) are taken back unverified.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use std::sync::Arc;

use bps_proto::{CohortKey, Hash};
use bps_verify::VerifyRequest;
use bps_verify::fair::FairQueue;
use bps_verify::verifier::Verifier;
use bytes::Bytes;

use super::control::Control;
use super::encoding::Renditions;
use super::link::CoreLink;
use super::notify::yield_turn;
use super::outbound::Queued;
use super::outgoing::Outgoing;
use super::port::{Closing, Port};
use super::receivers::{self, Receivers};
use super::router::{HomeMsg, OwnerMsg, RelayFrames, VerifyDone};
use crate::protocol::CoreId;
use crate::protocol::{
    Action, ChunkFacts, CloseReason, CohortSerial, Delivered, Machine, Millis, RelayOutcome,
    RelayReply, StreamId, Targets, Ticket, TicketOrigin, WriteNotice,
};

/// Home and owner messages one turn takes at most, each, before the other tasks run.
const MESSAGES_PER_TURN: usize = 1024;

/// Deliveries one turn queues at most before the other tasks run (it may finish the
/// publication it is at): a publication to a large cohort is hundreds of deliveries, and
/// a turn that applied the whole fan-out budget of such publications ran for 100 ms and
/// more, during which no reader of any other cohort was polled. At a few hundred thousand
/// deliveries per second this keeps a turn to a few milliseconds.
const DELIVERIES_PER_TURN_MAX: usize = 4096;

/// The longest an idle core sleeps between turns: its heartbeat then stays this fresh, so a
/// heartbeat older than a few of these means a stuck core, never a quiet one.
const IDLE_TURN_INTERVAL: Duration = Duration::from_secs(1);

/// A verification job waiting to be verified on this core (inline mode), with when it was
/// queued.
type InlineJob = (Ticket, VerifyRequest, Instant);

/// Where a verification job in flight came from.
#[derive(Clone, Copy, Debug)]
struct JobOrigin {
    /// The stream whose frame it checks; `None` for a W5 relay's (no stream owns it).
    stream: Option<StreamId>,
    /// Its fairness class: the cohort (`fairness_class`).
    class: u64,
    /// When its frame was read (for the latency sample).
    read_at: Option<Instant>,
}

/// The fairness class of cohort `serial` of core `core`: the pool is shared by every core,
/// and serials are per core (a core index fits 8 bits, a `StreamId`'s core byte).
fn fairness_class(core: CoreId, serial: CohortSerial) -> u64 {
    serial.get() << 8 | core.index() as u64
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// One core's state machine and its execution; see the module documentation.
pub struct Shard {
    link: Rc<CoreLink>,
    machine: RefCell<Machine>,
    actions: RefCell<Vec<Action>>,
    /// This core's own verifier when `verify.mode = "inline"`.
    verifier: Option<RefCell<Verifier>>,
    /// Inline mode's jobs, by cohort (bounded like the results, below).
    inline_jobs: RefCell<FairQueue<InlineJob>>,
    /// Finished verifications not applied yet, by cohort: at most the frames in flight of
    /// every core (`limits.frames_in_flight_per_core_max` each, counted where the frame was
    /// read), of one cohort as of all.
    results: RefCell<FairQueue<VerifyDone>>,
    /// Verification jobs issued and not answered yet (for the gauge; each belongs to a frame
    /// still in flight, so it is bounded by the frames in flight of every core).
    verifications: Cell<usize>,
    /// Where each verification in flight came from.
    jobs: RefCell<HashMap<Ticket, JobOrigin>>,
    /// The tickets in flight of each stream that has some, with its class (at most the
    /// stream's read window each).
    stream_jobs: RefCell<HashMap<StreamId, (u64, Vec<Ticket>)>>,
    /// Jobs taken back unverified, to report to the machine once the actions at hand are
    /// carried out.
    cancelled: RefCell<Vec<Ticket>>,
    /// The read time of the frame whose processing is producing actions right now.
    current_read_at: Cell<Option<Instant>>,
    machine_deadline: Cell<Option<Millis>>,
    /// When this core next looks for receivers that do not take their bytes.
    receivers: Receivers,
    /// Fan-outs queued since the last flush (the budget counts these).
    unflushed_fanouts: Cell<usize>,
    /// Since when the writes wait for the next results, while they do.
    coalescing_since: Cell<Option<Instant>>,
    /// Deliveries queued in the current turn (`DELIVERIES_PER_TURN_MAX`).
    turn_deliveries: Cell<usize>,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("core", &self.link.core)
            .finish_non_exhaustive()
    }
}

impl Shard {
    pub fn new(link: Rc<CoreLink>, machine: Machine) -> Shard {
        let inline = link.shared.pool.is_none();
        let keys = link.settings().key_cache_keys_max;
        // A core's cohorts verify the frames that every core's readers took in flight.
        let in_flight_max = link.settings().frames_in_flight_per_core_max * link.shared.lanes.len();
        Shard {
            verifier: inline.then(|| RefCell::new(Verifier::new(keys))),
            link,
            machine: RefCell::new(machine),
            actions: RefCell::new(Vec::new()),
            inline_jobs: RefCell::new(FairQueue::new(in_flight_max, in_flight_max)),
            results: RefCell::new(FairQueue::new(in_flight_max, in_flight_max)),
            verifications: Cell::new(0),
            jobs: RefCell::new(HashMap::new()),
            stream_jobs: RefCell::new(HashMap::new()),
            cancelled: RefCell::new(Vec::new()),
            current_read_at: Cell::new(None),
            machine_deadline: Cell::new(None),
            receivers: Receivers::default(),
            unflushed_fanouts: Cell::new(0),
            coalescing_since: Cell::new(None),
            turn_deliveries: Cell::new(0),
        }
    }

    /// Runs until a drain has closed every stream of this core.
    pub async fn run(self: Rc<Self>) {
        loop {
            self.wait_for_work().await;
            let now = self.link.shared.now();
            self.link.shared.mailboxes[self.link.core.index()].beat(now.as_ms());
            self.turn(now);
            if self.link.draining() && self.link.ports_open() == 0 && !self.link.router.has_home() {
                return;
            }
            // Every reader and writer of this core runs before the next turn.
            yield_turn().await;
        }
    }

    fn turn(&self, now: Millis) {
        let at = Instant::now();
        self.link.start_turn(at);
        self.turn_deliveries.set(0);
        self.take_control();
        self.take_credits();
        let budget = self.fanout_budget_left();
        let mut applied = 0;
        if !self.link.router.work_paused() {
            self.take_home(now);
            applied = self.apply_results(now, budget);
        }
        let fanouts = applied + self.take_owner(budget - applied);
        if self.machine_deadline.get().is_some_and(|at| at <= now) {
            self.machine_deadline.set(None);
            self.machine.borrow_mut().on_tick(now);
            self.execute();
        }
        self.unflushed_fanouts
            .set(self.unflushed_fanouts.get() + fanouts);
        if !self.coalesce(applied) {
            self.coalescing_since.set(None);
            self.unflushed_fanouts.set(0);
            self.link.flush_touched();
        }
        self.link.expire_deadlines(now);
        self.receivers.check(&self.link, at);
        self.verify_inline();
        self.link.router.retry_overflow();
        let lanes = self.link.router.lanes();
        lanes[self.link.core.index()].ring_waiting_senders(lanes);
        self.link.wake_memory_waiters();
        self.update_gauges();
    }

    /// Parks until a lane, the mailbox or a deadline has something for this core.
    async fn wait_for_work(&self) {
        if self.has_work(self.link.shared.now()) {
            return;
        }
        let doorbell = &self.link.router.inbound().doorbell;
        let now = self.link.shared.now();
        let until = [self.machine_deadline.get(), self.link.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        let until = until.map(|at| Duration::from_millis(at.as_ms().saturating_sub(now.as_ms())));
        let flush_in = self.coalesce_left();
        let sleep = [until, flush_in, Some(IDLE_TURN_INTERVAL)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(IDLE_TURN_INTERVAL);
        let mut sleep = Box::pin(monoio::time::sleep(sleep));
        poll_fn(|cx| {
            if doorbell.poll_rung(cx).is_ready() || self.has_work(self.link.shared.now()) {
                return Poll::Ready(());
            }
            sleep.as_mut().poll(cx)
        })
        .await;
    }

    fn has_work(&self, now: Millis) -> bool {
        let lanes = self.link.router.inbound();
        let paused = self.link.router.work_paused();
        let (credits, results) = lanes.has_credits_or_results();
        !self.link.shared.mailboxes[self.link.core.index()].is_empty()
            || credits
            || !lanes.owner.is_empty()
            || (!paused
                && (self.link.router.has_home() || results || !self.results.borrow().is_empty()))
            || !self.inline_jobs.borrow().is_empty()
            || self.machine_deadline.get().is_some_and(|at| at <= now)
            || self.link.next_deadline().is_some_and(|at| at <= now)
            || (self.link.draining() && self.link.ports_open() == 0)
            || self.coalesce_left() == Some(Duration::ZERO)
    }

    /// Whether this turn's writes wait for more results (see the module documentation): a
    /// turn that applied results starts the wait, and it ends when the budget is spent,
    /// fewer results are in flight than would fill it, the core drains or the wait reached
    /// its deadline.
    fn coalesce(&self, applied: usize) -> bool {
        let budget_left = self.fanout_budget_left();
        let may_wait = self.link.settings().write_coalesce_us > 0
            && budget_left > 0
            && (self.verifications.get() >= budget_left || self.cut_short())
            && !self.link.draining()
            && self.coalesce_left() != Some(Duration::ZERO);
        if !may_wait {
            return false;
        }
        if self.coalescing_since.get().is_none() {
            if applied == 0 {
                return false;
            }
            self.coalescing_since.set(Some(Instant::now()));
        }
        true
    }

    /// Whether this turn stopped at `DELIVERIES_PER_TURN_MAX` with results left: the next
    /// turn applies them as soon as the other tasks ran, so the writes wait for them too (a
    /// flush at every cut would split a large cohort's writes into a few frames each).
    fn cut_short(&self) -> bool {
        self.turn_deliveries.get() >= DELIVERIES_PER_TURN_MAX && !self.results.borrow().is_empty()
    }

    /// How long the writes may still wait, while they wait.
    fn coalesce_left(&self) -> Option<Duration> {
        let since = self.coalescing_since.get()?;
        let wait = Duration::from_micros(self.link.settings().write_coalesce_us);
        Some(wait.saturating_sub(since.elapsed()))
    }

    /// What is left of the fan-out budget until the next flush.
    fn fanout_budget_left(&self) -> usize {
        self.fanout_frames_per_flush()
            .saturating_sub(self.unflushed_fanouts.get())
    }

    // ----- inputs -----

    fn take_control(&self) {
        let mailbox = &self.link.shared.mailboxes[self.link.core.index()];
        while let Some(message) = mailbox.take() {
            match message {
                Control::Ping { reply } => {
                    let _ = reply.send(());
                }
                Control::Reload(config) => self.machine.borrow_mut().reconfigure(*config),
                Control::Drain => self.link.start_drain(),
                Control::Cohorts { reply } => {
                    let _ = reply.send(self.machine.borrow().summaries(self.link.shared.now()));
                }
                Control::CohortStreams {
                    key,
                    offset,
                    limit,
                    reply,
                } => {
                    let page = self.machine.borrow().cohort_streams(
                        &key,
                        (offset, limit),
                        self.link.shared.now(),
                    );
                    let _ = reply.send(page);
                }
            }
            self.execute();
        }
    }

    fn take_credits(&self) {
        let lanes = self.link.router.inbound();
        while let Some(stream) = lanes.pop_credit() {
            self.link.credit(stream);
        }
    }

    fn take_home(&self, now: Millis) {
        for _ in 0..MESSAGES_PER_TURN {
            let Some(msg) = self.link.router.pop_home() else {
                return;
            };
            match msg {
                HomeMsg::Join {
                    stream,
                    arrival,
                    frame,
                } => self
                    .machine
                    .borrow_mut()
                    .on_join(now, stream, arrival, frame),
                HomeMsg::Frame {
                    stream,
                    frame,
                    read_at,
                } => {
                    self.current_read_at.set(Some(read_at));
                    self.machine.borrow_mut().on_frame(now, stream, frame);
                }
                HomeMsg::Closed { stream, cause } => {
                    self.machine.borrow_mut().on_closed(now, stream, cause);
                    self.cancel_queued(stream);
                }
                HomeMsg::Written { stream, notice } => {
                    self.machine.borrow_mut().on_written(now, stream, notice);
                }
                HomeMsg::Relay {
                    key,
                    named,
                    frames,
                    reply,
                } => self.relay(now, (&key, named.as_ref()), &frames, reply),
            }
            self.execute();
            self.current_read_at.set(None);
        }
    }

    /// W5: a service chunk posted for a cohort of this core. Its one signature check, if
    /// the machine asks for it, goes to the pool like a stream frame's; the outcome goes back
    /// now when no check is needed, else when the result is applied (`Action::Relayed`).
    fn relay(
        &self,
        now: Millis,
        target: (&CohortKey, Option<&Hash>),
        frames: &RelayFrames,
        reply: RelayReply,
    ) {
        let decided = self.machine.borrow_mut().on_relay(
            now,
            target,
            &mut |challenge| (frames.0)(challenge),
            reply,
        );
        self.execute();
        if let Some(outcome) = decided {
            self.answer_relay(reply, outcome);
        }
    }

    /// The outcome of a relay, to the core that holds its POST.
    fn answer_relay(&self, reply: RelayReply, outcome: RelayOutcome) {
        let core = reply.core;
        if core == self.link.core {
            self.link.relayed(reply.relay, outcome);
        } else {
            self.link.router.to_owner(
                core,
                OwnerMsg::Relayed {
                    relay: reply.relay,
                    outcome,
                },
            );
        }
    }

    /// Applies up to `budget` verification results, the cohorts in turn; returns how many.
    fn apply_results(&self, now: Millis, budget: usize) -> usize {
        let lanes = self.link.router.inbound();
        while let Some(done) = lanes.pop_result() {
            self.queue_result(done);
        }
        let mut applied = 0;
        while applied < budget && self.turn_deliveries.get() < DELIVERIES_PER_TURN_MAX {
            let next = self.results.borrow_mut().pop();
            let Some((_, done)) = next else {
                break;
            };
            self.verified(now, done);
            applied += 1;
        }
        applied
    }

    /// A finished verification, queued behind its cohort's earlier ones.
    fn queue_result(&self, done: VerifyDone) {
        let (_, ticket) = done.tag;
        let class = self
            .jobs
            .borrow()
            .get(&ticket)
            .map_or(0, |origin| origin.class);
        let queued = self.results.borrow_mut().push(class, done);
        assert!(
            queued.is_ok(),
            "results are bounded by every core's frames in flight"
        );
    }

    fn verified(&self, now: Millis, done: VerifyDone) {
        let (_, ticket) = done.tag;
        self.verifications.set(self.verifications.get() - 1);
        let metrics = self.link.metrics();
        metrics.verify_jobs.inc();
        metrics.verify_latency_us.record(done.latency_us);
        let read_at = self.forget_job(ticket).and_then(|origin| origin.read_at);
        self.current_read_at.set(read_at);
        self.machine
            .borrow_mut()
            .on_verified(now, ticket, done.result);
        self.execute();
        self.current_read_at.set(None);
    }

    /// Owner messages from other cores; deliveries count against `budget` (what is left of
    /// the fan-out budget), the rest only against `MESSAGES_PER_TURN`. Returns the
    /// deliveries taken.
    fn take_owner(&self, budget: usize) -> usize {
        let owner = &self.link.router.inbound().owner;
        let mut fanouts = 0;
        for _ in 0..MESSAGES_PER_TURN {
            if fanouts >= budget || self.turn_deliveries.get() >= DELIVERIES_PER_TURN_MAX {
                break;
            }
            let Some(msg) = owner.pop() else {
                break;
            };
            match msg {
                OwnerMsg::Send {
                    stream,
                    frame,
                    notice,
                } => self.enqueue_single(stream, &frame, notice),
                OwnerMsg::Backlog { stream, frames } => self.enqueue_backlog(stream, frames),
                OwnerMsg::Deliver {
                    frame,
                    targets,
                    facts,
                    from,
                    to,
                    read_at,
                } => {
                    fanouts += 1;
                    let mut renditions = Renditions::new(&frame, &facts, self.link.memory());
                    for stream in &targets.all[from..to] {
                        if !targets.excludes(*stream) {
                            self.enqueue_delivery(*stream, &mut renditions, read_at);
                        }
                    }
                }
                OwnerMsg::Close { stream, reason } => self.close_local(stream, &reason),
                OwnerMsg::Relayed { relay, outcome } => self.link.relayed(relay, outcome),
            }
        }
        fanouts
    }

    // ----- actions -----

    /// Carries out what the machine decided, in order.
    fn execute(&self) {
        let mut actions = std::mem::take(&mut *self.actions.borrow_mut());
        self.machine.borrow_mut().drain_actions(&mut actions);
        for action in actions.drain(..) {
            match action {
                Action::Send {
                    stream,
                    frame,
                    notice,
                } => self.send(stream, frame, notice),
                Action::Backlog { stream, frames } => self.backlog(stream, frames),
                Action::Deliver {
                    frame,
                    targets,
                    facts,
                } => self.deliver(frame, targets, facts),
                Action::Verify { ticket, request } => self.verify(ticket, request),
                Action::Relayed { reply, outcome } => self.answer_relay(reply, outcome),
                Action::Consumed { stream } => self.consumed(stream),
                Action::Close { stream, reason } => {
                    self.cancel_queued(stream);
                    let owner = CoreId::of_stream(stream);
                    if owner == self.link.core {
                        self.close_local(stream, &reason);
                    } else {
                        self.link
                            .router
                            .to_owner(owner, OwnerMsg::Close { stream, reason });
                    }
                }
                Action::Blocklist { peer, until } => {
                    if self.link.may_log() {
                        tracing::info!(%peer, until_ms = until.as_ms(), "peer blocklisted");
                    }
                }
                Action::ArmTimer { at } => {
                    if self
                        .machine_deadline
                        .get()
                        .is_none_or(|current| at < current)
                    {
                        self.machine_deadline.set(Some(at));
                    }
                }
            }
        }
        *self.actions.borrow_mut() = actions;
        self.report_cancelled();
    }

    /// Takes back the queued verification jobs of `stream` once the machine has forgotten
    /// it (their results would only be ignored); they are reported at the end of `execute`.
    fn cancel_queued(&self, stream: StreamId) {
        let stream_jobs = self.stream_jobs.borrow();
        let Some((class, tickets)) = stream_jobs.get(&stream) else {
            return;
        };
        let forgotten = tickets
            .first()
            .is_some_and(|ticket| self.machine.borrow().job_origin(*ticket).is_none());
        if !forgotten {
            return;
        }
        let ours = |ticket: &Ticket| tickets.contains(ticket);
        let taken: Vec<Ticket> = match &self.link.shared.pool {
            Some(pool) => pool
                .cancel(*class, |(_, ticket)| ours(ticket))
                .into_iter()
                .map(|(_, ticket)| ticket)
                .collect(),
            None => self
                .inline_jobs
                .borrow_mut()
                .cancel(*class, |(ticket, ..)| ours(ticket))
                .into_iter()
                .map(|(ticket, ..)| ticket)
                .collect(),
        };
        self.cancelled.borrow_mut().extend(taken);
    }

    /// Tells the machine about the jobs taken back; each frame is consumed now.
    fn report_cancelled(&self) {
        let cancelled = std::mem::take(&mut *self.cancelled.borrow_mut());
        if cancelled.is_empty() {
            return;
        }
        let now = self.link.shared.now();
        for ticket in cancelled {
            self.forget_job(ticket);
            self.verifications.set(self.verifications.get() - 1);
            self.link.metrics().verify_cancelled.inc();
            self.machine.borrow_mut().on_cancelled(now, ticket);
        }
        self.execute();
    }

    /// Forgets a job that was answered or taken back; where it came from.
    fn forget_job(&self, ticket: Ticket) -> Option<JobOrigin> {
        let origin = self.jobs.borrow_mut().remove(&ticket)?;
        let Some(stream) = origin.stream else {
            return Some(origin);
        };
        let mut stream_jobs = self.stream_jobs.borrow_mut();
        if let Some((_, tickets)) = stream_jobs.get_mut(&stream) {
            tickets.retain(|queued| *queued != ticket);
            if tickets.is_empty() {
                stream_jobs.remove(&stream);
            }
        }
        Some(origin)
    }

    /// Closes one of this core's streams as its home core decided (the home knows already).
    fn close_local(&self, stream: StreamId, reason: &CloseReason) {
        if let Some(port) = self.link.port(stream) {
            port.mark_reported();
            port.note_closing(Closing::Decided(reason.clone()));
            if reason.graceful() {
                self.link.flush(&port);
            } else {
                port.reset();
            }
        }
    }

    fn send(&self, stream: StreamId, frame: Bytes, notice: Option<WriteNotice>) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.enqueue_single(stream, &frame, notice);
        } else {
            self.link.router.to_owner(
                owner,
                OwnerMsg::Send {
                    stream,
                    frame,
                    notice,
                },
            );
        }
    }

    /// D11: a history backlog, queued here or sent to the stream's own core.
    fn backlog(&self, stream: StreamId, frames: Vec<Delivered>) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.enqueue_backlog(stream, frames);
        } else {
            self.link
                .router
                .to_owner(owner, OwnerMsg::Backlog { stream, frames });
        }
    }

    /// A backlog, each frame framed for the stream's carrier like a delivery.
    fn enqueue_backlog(&self, stream: StreamId, frames: Vec<Delivered>) {
        let Some(port) = self.link.port(stream) else {
            return;
        };
        let memory = self.link.memory();
        let messages = frames
            .iter()
            .filter_map(|delivered| {
                port.rendition(&mut Renditions::new(
                    &delivered.frame,
                    &delivered.facts,
                    memory,
                ))
            })
            .collect();
        match port.enqueue_backlog(messages) {
            Ok(()) => self.link.touched(&port),
            Err(unread) => self.slow_consumer(&port, &unread),
        }
    }

    /// Fans one frame out: local targets directly, one message per other core.
    fn deliver(&self, frame: Bytes, targets: Targets, facts: Arc<ChunkFacts>) {
        let read_at = self.current_read_at.get();
        let all = Arc::clone(&targets.all);
        let mut from = 0;
        while from < all.len() {
            let core = CoreId::of_stream(all[from]);
            let to =
                from + all[from..].partition_point(|stream| CoreId::of_stream(*stream) == core);
            if core == self.link.core {
                let mut renditions = Renditions::new(&frame, &facts, self.link.memory());
                for stream in &all[from..to] {
                    if !targets.excludes(*stream) {
                        self.enqueue_delivery(*stream, &mut renditions, read_at);
                    }
                }
            } else {
                self.link.router.to_owner(
                    core,
                    OwnerMsg::Deliver {
                        frame: frame.clone(),
                        targets: targets.clone(),
                        facts: Arc::clone(&facts),
                        from,
                        to,
                        read_at,
                    },
                );
            }
            from = to;
        }
    }

    /// One stream's share of a delivery, framed for its carrier.
    fn enqueue_delivery(
        &self,
        stream: StreamId,
        renditions: &mut Renditions<'_>,
        read_at: Option<Instant>,
    ) {
        self.turn_deliveries.set(self.turn_deliveries.get() + 1);
        let Some(port) = self.link.port(stream) else {
            return;
        };
        if let Some(message) = port.rendition(renditions) {
            self.enqueue(&port, message, None, read_at);
        }
    }

    /// A frame for one stream (an Ack, a roster on its own), framed for its carrier; one
    /// that its carrier does not pass on is written at once, as far as notices go.
    fn enqueue_single(&self, stream: StreamId, frame: &Bytes, notice: Option<WriteNotice>) {
        let Some(port) = self.link.port(stream) else {
            return;
        };
        match port.single(frame, self.link.memory()) {
            Some(message) => self.enqueue(&port, message, notice, None),
            None => {
                if let Some(notice) = notice {
                    self.link.notice_written(&port, notice);
                }
            }
        }
    }

    fn enqueue(
        &self,
        port: &Rc<Port>,
        message: Outgoing,
        notice: Option<WriteNotice>,
        read_at: Option<Instant>,
    ) {
        match port.enqueue(message, notice, read_at) {
            Ok(Queued::Within) => self.link.touched(port),
            Ok(Queued::InSlack) => {
                self.link.metrics().queue_slack.inc();
                self.link.touched(port);
            }
            Err(full) => self.slow_consumer(port, &full),
        }
    }

    /// Resets a stream that does not keep up (R26) and tells its home core.
    fn slow_consumer(&self, port: &Port, why: &dyn std::fmt::Display) {
        receivers::reset_slow(&self.link, port, why);
    }

    fn consumed(&self, stream: StreamId) {
        let owner = CoreId::of_stream(stream);
        if owner == self.link.core {
            self.link.credit(stream);
        } else {
            self.link.router.credit(owner, stream);
        }
    }

    fn verify(&self, ticket: Ticket, request: VerifyRequest) {
        self.verifications.set(self.verifications.get() + 1);
        let origin = self.machine.borrow().job_origin(ticket);
        let Some(TicketOrigin { stream, cohort }) = origin else {
            // The machine closed the stream in the same input: nothing to verify.
            self.cancelled.borrow_mut().push(ticket);
            return;
        };
        let class = fairness_class(self.link.core, cohort);
        self.jobs.borrow_mut().insert(
            ticket,
            JobOrigin {
                stream,
                class,
                read_at: self.current_read_at.get(),
            },
        );
        if let Some(stream) = stream {
            self.stream_jobs
                .borrow_mut()
                .entry(stream)
                .or_insert_with(|| (class, Vec::new()))
                .1
                .push(ticket);
        }
        let queued = match &self.link.shared.pool {
            Some(pool) => pool
                .submit(class, (self.link.core, ticket), request)
                .is_ok(),
            None => self
                .inline_jobs
                .borrow_mut()
                .push(class, (ticket, request, Instant::now()))
                .is_ok(),
        };
        assert!(
            queued,
            "the verification queues hold every job the cores may have in flight"
        );
    }

    /// Inline mode: verifies one batch of this core's jobs; the results are applied like the
    /// pool's, within the fan-out budget.
    fn verify_inline(&self) {
        let Some(verifier) = &self.verifier else {
            return;
        };
        let batch: Vec<InlineJob> = {
            let mut jobs = self.inline_jobs.borrow_mut();
            let take = jobs.len().min(self.link.settings().verify_batch_jobs_max);
            (0..take)
                .filter_map(|_| jobs.pop())
                .map(|(_, job)| job)
                .collect()
        };
        if batch.is_empty() {
            return;
        }
        let requests: Vec<&VerifyRequest> = batch.iter().map(|(_, request, _)| request).collect();
        let mut results = Vec::with_capacity(batch.len());
        verifier.borrow_mut().verify_batch(&requests, &mut results);
        for ((ticket, _, queued_at), result) in batch.into_iter().zip(results) {
            self.queue_result(VerifyDone {
                tag: (self.link.core, ticket),
                result,
                latency_us: micros(queued_at),
            });
        }
    }

    /// Half the R26 bound: see the module documentation.
    fn fanout_frames_per_flush(&self) -> usize {
        (self.link.settings().outbound_queue_frames_max / 2).max(1)
    }

    fn update_gauges(&self) {
        let metrics = self.link.metrics();
        let lanes = self.link.router.inbound();
        metrics.inbox_depth.set(lanes.depth() as u64);
        metrics
            .overflow_messages
            .set(self.link.router.overflowed() as u64);
        metrics.frames_in_flight.set(self.link.in_flight() as u64);
        metrics.held_bytes.set(self.link.held_bytes() as u64);
        metrics
            .verifications_in_flight
            .set(self.verifications.get() as u64);
        match &self.link.shared.pool_stats {
            // The pool is shared: one core reports it, so the merged gauge is not multiplied.
            Some(stats) if self.link.core == CoreId::new(0) => metrics
                .verify_queue_depth
                .set(stats.depth.load(Ordering::Relaxed) as u64),
            Some(_) => {}
            None => metrics
                .verify_queue_depth
                .set(self.inline_jobs.borrow().len() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::Duration;

    use super::Shard;
    use crate::io::control::{Control, ask_all};
    use crate::io::harness::{self, GUARD};
    use crate::io::link::CoreLink;
    use crate::io::router::{HomeMsg, OwnerMsg};
    use crate::protocol::CoreId;
    use crate::protocol::{CloseReason, ClosedBy, StreamId};

    /// Messages per lane and overflow: small, so a few messages fill them.
    const LANE_MESSAGES_MAX: usize = 4;

    #[test]
    fn a_core_whose_data_lane_is_full_and_whose_work_is_paused_answers_control_at_once() {
        let (shared, mut machines) = harness::shared(2, |config| {
            config.server.inbox_messages_max = LANE_MESSAGES_MAX;
            config.server.overflow_messages_max = LANE_MESSAGES_MAX;
        });
        let machine = machines.remove(0);
        let (paused, core_paused) = crossbeam::channel::bounded(1);
        let (ended, core_ended) = crossbeam::channel::bounded(1);
        let core_shared = Arc::clone(&shared);
        let core = std::thread::spawn(move || {
            let runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
                .enable_timer()
                .build();
            runtime.expect("runtime").block_on(async move {
                let link = Rc::new(CoreLink::new(CoreId::new(0), core_shared));
                // Core 1 never runs (it is stuck): what core 0 owes it overflows until core 0
                // stops taking work that produces more (transitive backpressure).
                for local in 0..2 * LANE_MESSAGES_MAX as u64 {
                    link.router.to_owner(
                        CoreId::new(1),
                        OwnerMsg::Close {
                            stream: StreamId::new(1, local),
                            reason: CloseReason::Inactive,
                        },
                    );
                }
                assert!(link.router.work_paused());
                let shard = Rc::new(Shard::new(link, machine));
                paused.send(()).expect("the test waits");
                shard.run().await;
            });
            let _ = ended.send(());
        });
        core_paused.recv_timeout(GUARD).expect("core 0 started");
        // Core 0's data lane fills, as other cores' traffic fills it under load.
        let lane = &shared.lanes[0].home;
        let mut local = 0;
        while lane
            .push(HomeMsg::Closed {
                stream: StreamId::new(1, local),
                cause: ClosedBy::Peer,
            })
            .is_ok()
        {
            local += 1;
        }
        assert_eq!(lane.len(), lane.capacity());
        // The busy core answers; the stuck one is reported at the deadline.
        let answers = ask_all(
            &shared.mailboxes,
            |reply| Control::Ping { reply },
            Duration::from_millis(300),
        );
        assert_eq!(answers, vec![Some(()), None]);
        for _ in 0..3 {
            let answers = ask_all(
                &shared.mailboxes[..1],
                |reply| Control::Ping { reply },
                GUARD,
            );
            assert_eq!(answers, vec![Some(())]);
            assert_eq!(
                lane.len(),
                lane.capacity(),
                "the data waited, the pings did not"
            );
        }
        // Core 0 ends at a drain once its lane is empty (nothing is lost on the way out).
        while lane.pop().is_some() {}
        assert!(shared.mailboxes[0].send(Control::Drain));
        core_ended.recv_timeout(GUARD).expect("core 0 drained");
        core.join().expect("core 0 thread");
    }
}
