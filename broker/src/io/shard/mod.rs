//! One core's loop: the protocol state machine of the cohorts homed here, fed from the
//! core's lanes and its control mailbox, and the execution of the machine's actions.
//!
//! Owns: `Shard`: the `Machine`, the verification of its jobs (submitted to the pool, or
//! verified here: every job when `verify.mode = "inline"`, a turn's first few while the
//! pool is idle otherwise), the machine's timer, and the turn: the control mailbox first
//! (so a busy core always answers), credits, then the home lane, the jobs held here and the
//! verification results (unless the router says work is paused), then the
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
//! Writes coalesce under load (`coalesce`). A closed-loop publisher's frames arrive in
//! dribbles, and a turn often applies one or two results while dozens are still being
//! verified; written at once, each would cost every subscriber a `sendmsg` of its own
//! (measured at N = 100: a third of all writes carried one or two frames). So once a turn has
//! applied results, the flush waits while this core has enough verifications in flight to
//! fill what is left of the budget (their results ring the doorbell), until the budget is
//! spent, the core drains, or `server.write_coalesce_us` has passed. A core with fewer in
//! flight writes at the end of the turn: after a flush the whole budget is left, so a wait
//! needs a budget's worth of results on their way, which a moderate load never has (issue
//! 23: at 1 000 and 2 000 publications/s to N = 100 no flush waited). The budget counts
//! every fan-out since the last flush, so the R26 reasoning above holds unchanged.
//! Whenever the writes do not wait, a result applied in a turn is written in that same turn:
//! its fan-out is queued on the receiving ports while it is applied and the flush at the end
//! of the turn writes it to their sockets (a receiver on another core gets it in that
//! core's next turn, through its owner lane).
//!
//! Each stage of a publication's way through the core is timed into the core's stage
//! histograms (`metrics::Stage`) from instants the core has anyway (the read, the pool's
//! batch end, the start of the turn) and at most two more per turn that queued fan-outs.
//!
//! Verification is fair between cohorts (issue 19): every job names its cohort as its class,
//! the pool (or this core's inline queue) serves the classes round robin, and finished
//! results wait here in a queue of the same kind, applied one class after another within
//! the fan-out budget. So a cohort that floods this core delays another cohort's frame by
//! at most one of its own frames per round at each step, not by the thousands it has in
//! flight; it gets everything the others leave. The queued jobs of a stream that closed
//! (for an invalid chunk, R17, or any other reason) are taken back unverified.
//!
//! The files: this one holds the turn, the waiting between turns and the gauges; `coalesce`
//! the coalescing of writes, the flush and its timing; `intake` takes what the mailbox and the lanes bring; `jobs` submits,
//! verifies inline, applies and takes back verification jobs; `actions` carries out what the
//! machine decided.

mod actions;
mod coalesce;
mod intake;
mod jobs;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use bps_verify::fair::FairQueue;
use bps_verify::verifier::Verifier;

use super::link::CoreLink;
use super::notify::yield_turn;
use super::receivers::Receivers;
use super::router::VerifyDone;
use super::upstream::Upstreams;
use crate::protocol::CoreId;
use crate::protocol::{Action, Machine, Millis, StreamId, Ticket};
use jobs::{InlineJob, JobOrigin};

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

/// One core's state machine and its execution; see the module documentation.
pub struct Shard {
    link: Rc<CoreLink>,
    machine: RefCell<Machine>,
    actions: RefCell<Vec<Action>>,
    /// This core's own verifier: when `verify.mode = "inline"`, or for the jobs a core keeps
    /// while the pool is idle (`verify.idle_inline_jobs_max`).
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
    /// How large the pool's batches for this core are lately: the largest of the last turn
    /// that took results, or the previous figure less one. The small batches at the end of a
    /// burst do not hide it, and lone results bring it down one by one (from a whole batch,
    /// 64 by default, within about as many publications). Above
    /// `verify.idle_inline_jobs_max` the pool is idle only between batches, and the jobs go
    /// on to it (`holds_here`).
    pool_batch_recent: Cell<usize>,
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
    /// When the current turn started: the end of the stages timed up to the turn.
    turn_at: Cell<Instant>,
    /// Edge mode: the upstream streams kept for the cohorts homed here.
    upstreams: Upstreams,
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
            verifier: (inline || link.settings().verify_idle_inline_jobs_max > 0)
                .then(|| RefCell::new(Verifier::new(keys))),
            link,
            machine: RefCell::new(machine),
            actions: RefCell::new(Vec::new()),
            inline_jobs: RefCell::new(FairQueue::new(in_flight_max, in_flight_max)),
            results: RefCell::new(FairQueue::new(in_flight_max, in_flight_max)),
            verifications: Cell::new(0),
            pool_batch_recent: Cell::new(0),
            jobs: RefCell::new(HashMap::new()),
            stream_jobs: RefCell::new(HashMap::new()),
            cancelled: RefCell::new(Vec::new()),
            current_read_at: Cell::new(None),
            machine_deadline: Cell::new(None),
            receivers: Receivers::default(),
            unflushed_fanouts: Cell::new(0),
            coalescing_since: Cell::new(None),
            turn_deliveries: Cell::new(0),
            turn_at: Cell::new(Instant::now()),
            upstreams: Upstreams::default(),
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
        self.turn_at.set(at);
        self.link.start_turn(at);
        self.turn_deliveries.set(0);
        self.take_control();
        self.take_credits();
        let budget = self.fanout_budget_left();
        let mut applied = 0;
        if !self.link.router.work_paused() {
            self.take_home(now);
            // Jobs held here are verified before the results are applied, so their frames
            // are written in this turn.
            self.verify_inline();
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
        self.end_writes(at, applied, fanouts);
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

    /// What is left of the fan-out budget until the next flush.
    fn fanout_budget_left(&self) -> usize {
        self.fanout_frames_per_flush()
            .saturating_sub(self.unflushed_fanouts.get())
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
