//! One core of the broker: its monoio runtime's state and main loop.
//!
//! Owns the core's connections, the protocol state machine of the cohorts homed here, the
//! routing of messages to other cores (with an overflow per destination that pauses this
//! core's socket reads while it is non-empty), the verification jobs waiting for room in
//! the pool, and the timers. Executes the state machine's actions and nothing more: every
//! protocol decision is `protocol::Machine`'s.
//!
//! The loop takes at most `MESSAGES_PER_TURN` messages, and at most half the outbound
//! queue bound of fan-outs (verification results applied, deliveries from other cores),
//! then lets the connection tasks run: their writers flush everything queued in that turn
//! with one vectored write each. The fan-out budget is why a batch of 64 verified
//! publications cannot overflow the 64-frame queue of a subscriber that keeps up (measured:
//! without it, a stall followed by one full batch reset 64 of 100 subscribers at once).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use bps_proto::Frame;
use bps_verify::VerifyRequest;
use bps_verify::verifier::Verifier;
use bytes::Bytes;
use monoio::net::{TcpListener, TcpStream};

use super::conn::{self, Conn};
use super::inbox::{Msg, VerifyDone};
use super::notify::{LocalNotify, yield_turn};
use super::{Settings, Shared};
use crate::metrics::CoreMetrics;
use crate::protocol::{
    Action, ClosedBy, Machine, Millis, PeerId, StreamId, Targets, Ticket, WriteNotice,
};

/// Messages one loop turn takes before the connection tasks get a turn.
const MESSAGES_PER_TURN: usize = 1024;
/// Housekeeping period: pre-join deadlines, retries, gauges, even when nothing happens.
const HOUSEKEEPING_MS: u64 = 250;
/// The owning core of a stream.
fn core_of(stream: StreamId) -> usize {
    usize::from(stream.core())
}

/// A verification job waiting here: its pool tag (this core, the ticket), the request, and
/// when it was queued.
type PendingJob = ((usize, Ticket), VerifyRequest, Instant);

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// One core's state. Lives on its runtime thread only.
pub struct Shard {
    core: usize,
    shared: Arc<Shared>,
    machine: RefCell<Machine>,
    actions: RefCell<Vec<Action>>,
    conns: RefCell<HashMap<StreamId, Rc<Conn>>>,
    next_stream: Cell<u64>,
    local: RefCell<VecDeque<Msg>>,
    wake: LocalNotify,
    /// Messages another core's inbox had no room for, per destination core.
    overflow: RefCell<Vec<VecDeque<Msg>>>,
    unpaused: RefCell<Vec<std::task::Waker>>,
    /// Jobs not yet handed to the pool (or, inline, not yet verified), with when they queued.
    pending_verify: RefCell<VecDeque<PendingJob>>,
    /// This core's own verifier when `verify.mode = "inline"`.
    verifier: Option<RefCell<Verifier>>,
    /// Verification results not yet applied (bounded by the jobs in flight).
    results: RefCell<VecDeque<VerifyDone>>,
    /// When the frame behind each verification in flight was read (for latency).
    ticket_read_at: RefCell<HashMap<Ticket, Instant>>,
    /// The read time of the frame whose processing is producing actions right now.
    current_read_at: Cell<Option<Instant>>,
    prejoin: RefCell<VecDeque<(Millis, StreamId)>>,
    machine_deadline: Cell<Option<Millis>>,
    draining: Cell<bool>,
    listener_fd: Cell<Option<i32>>,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("core", &self.core).finish()
    }
}

impl Shard {
    pub fn new(core: usize, shared: Arc<Shared>, machine: Machine) -> Self {
        let cores = shared.inboxes.len();
        Self {
            verifier: shared
                .pool
                .is_none()
                .then(|| RefCell::new(Verifier::new(shared.settings.key_cache_keys_max))),
            core,
            shared,
            machine: RefCell::new(machine),
            actions: RefCell::new(Vec::new()),
            conns: RefCell::new(HashMap::new()),
            next_stream: Cell::new(0),
            local: RefCell::new(VecDeque::new()),
            wake: LocalNotify::default(),
            overflow: RefCell::new((0..cores).map(|_| VecDeque::new()).collect()),
            unpaused: RefCell::new(Vec::new()),
            pending_verify: RefCell::new(VecDeque::new()),
            results: RefCell::new(VecDeque::new()),
            ticket_read_at: RefCell::new(HashMap::new()),
            current_read_at: Cell::new(None),
            prejoin: RefCell::new(VecDeque::new()),
            machine_deadline: Cell::new(None),
            draining: Cell::new(false),
            listener_fd: Cell::new(None),
        }
    }

    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    pub fn metrics(&self) -> &CoreMetrics {
        &self.shared.metrics[self.core]
    }

    fn core_byte(&self) -> u8 {
        u8::try_from(self.core).expect("config validation caps server.cores at 256")
    }

    fn now(&self) -> Millis {
        self.shared.now()
    }

    // ----- accepting -----

    /// Accepts until the listener is shut down by a drain.
    pub async fn accept_loop(self: Rc<Self>, listener: TcpListener) {
        self.listener_fd.set(Some(listener.as_raw_fd()));
        loop {
            let (stream, addr) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    if self.draining.get() {
                        return;
                    }
                    // EMFILE and friends: back off briefly rather than spin.
                    tracing::warn!(core = self.core, %error, "accept failed");
                    monoio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            if self.draining.get() {
                return;
            }
            self.admit(stream, addr);
        }
    }

    fn admit(self: &Rc<Self>, stream: TcpStream, addr: SocketAddr) {
        let metrics = self.metrics();
        let peer = PeerId::of(addr.ip());
        let now = self.now();
        if self.shared.ledger.is_blocked(peer, now) {
            metrics.connections_refused_blocklist.inc();
            return;
        }
        let open = self.shared.connections.fetch_add(1, Ordering::Relaxed);
        if open >= self.shared.settings.connections_max {
            self.shared.connections.fetch_sub(1, Ordering::Relaxed);
            metrics.connections_refused_limit.inc();
            return;
        }
        metrics.connections_accepted.inc();
        metrics.connections_open.add(1);
        // Nagle would hold back small Acks; the writer already batches.
        let _ = stream.set_nodelay(true);
        let id = StreamId::new(self.core_byte(), self.next_stream.get());
        self.next_stream.set(self.next_stream.get() + 1);
        let conn = Rc::new(Conn::new(
            id,
            peer,
            stream.as_raw_fd(),
            self.settings().outbound_queue_frames_max,
            self.settings().frames_in_flight_per_stream_max,
        ));
        self.conns.borrow_mut().insert(id, Rc::clone(&conn));
        let deadline = Millis(now.0 + self.settings().join_deadline_ms);
        self.prejoin.borrow_mut().push_back((deadline, id));
        monoio::spawn(conn::run(Rc::clone(self), conn, stream));
    }

    /// Called by a connection task when both its halves are done.
    pub fn connection_ended(&self, conn: &Conn, report: Option<ClosedBy>) {
        self.conns.borrow_mut().remove(&conn.id);
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        let metrics = self.metrics();
        metrics.connections_closed.inc();
        metrics.connections_open.sub(1);
        if let (Some(cause), Some(home)) = (report, conn.home()) {
            self.route(
                home,
                Msg::Closed {
                    stream: conn.id,
                    cause,
                },
            );
        }
        if self.draining.get() && self.conns.borrow().is_empty() {
            self.wake.notify();
        }
    }

    pub fn note_frame_error(&self, conn: &Conn, error: &bps_proto::FrameError) {
        tracing::debug!(stream = conn.id.0, peer = %conn.peer, %error, "bad frame");
        self.metrics().frame_errors.inc();
    }

    // ----- routing -----

    /// The home core of the cohort a Join names (its canonical key's hash), or this core
    /// for a Join that does not validate (the local state machine answers REJECTED).
    pub fn home_of_join(&self, frame: &Frame) -> usize {
        let cores = self.shared.inboxes.len();
        if cores == 1 {
            return 0;
        }
        let Ok(join) = bps_proto::decode_join(frame.body()) else {
            return self.core;
        };
        match bps_proto::validate_join(&join) {
            Ok(valid) => {
                let mut hasher = std::hash::DefaultHasher::new();
                valid.key.as_bytes().hash(&mut hasher);
                (hasher.finish() % cores as u64) as usize
            }
            Err(_) => self.core,
        }
    }

    pub fn send_join(&self, home: usize, conn: &Conn, frame: Frame) {
        self.route(
            home,
            Msg::Join {
                stream: conn.id,
                peer: conn.peer,
                frame,
            },
        );
    }

    pub fn send_frame(&self, home: usize, stream: StreamId, frame: Frame) {
        self.route(
            home,
            Msg::Frame {
                stream,
                frame,
                read_at: Instant::now(),
            },
        );
    }

    pub fn report_written(&self, conn: &Conn, notice: WriteNotice) {
        if let Some(home) = conn.home() {
            self.route(
                home,
                Msg::Written {
                    stream: conn.id,
                    notice,
                },
            );
        }
    }

    fn route(&self, core: usize, msg: Msg) {
        if core == self.core {
            self.local.borrow_mut().push_back(msg);
            self.wake.notify();
            return;
        }
        let mut overflow = self.overflow.borrow_mut();
        let queue = &mut overflow[core];
        if !queue.is_empty() {
            queue.push_back(msg);
            return;
        }
        if let Err(msg) = self.shared.inboxes[core].push(msg) {
            self.metrics().inbox_full.inc();
            queue.push_back(msg);
        }
    }

    fn retry_overflow(&self) {
        let mut drained_all = true;
        {
            let mut overflow = self.overflow.borrow_mut();
            for (core, queue) in overflow.iter_mut().enumerate() {
                while let Some(msg) = queue.pop_front() {
                    if let Err(msg) = self.shared.inboxes[core].push(msg) {
                        queue.push_front(msg);
                        drained_all = false;
                        break;
                    }
                }
            }
        }
        if drained_all {
            for waker in self.unpaused.borrow_mut().drain(..) {
                waker.wake();
            }
        }
    }

    fn paused(&self) -> bool {
        self.overflow.borrow().iter().any(|queue| !queue.is_empty())
    }

    /// Waits while another core's inbox is full: reading more would only queue more here.
    pub async fn wait_unpaused(&self) {
        poll_fn(|cx| {
            if self.paused() {
                self.unpaused.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }

    // ----- the loop -----

    /// Runs until a drain has closed every connection.
    pub async fn main_loop(self: Rc<Self>) {
        loop {
            self.wait_for_work().await;
            let now = self.now();
            let mut taken = 0;
            let fanout_budget = self.fanout_frames_per_turn();
            let mut fanouts = self.apply_results(now, fanout_budget);
            while taken < MESSAGES_PER_TURN && fanouts < fanout_budget {
                let next = self.local.borrow_mut().pop_front();
                let msg = match next {
                    Some(msg) => msg,
                    None => match self.shared.inboxes[self.core].pop() {
                        Some(msg) => msg,
                        None => break,
                    },
                };
                if matches!(msg, Msg::Deliver { .. }) {
                    fanouts += 1;
                }
                self.handle(now, msg);
                taken += 1;
            }
            self.expire_prejoin(now);
            if self.machine_deadline.get().is_some_and(|at| at <= now) {
                self.machine_deadline.set(None);
                self.machine.borrow_mut().on_tick(now);
                self.execute();
            }
            if self.results.borrow().is_empty() {
                self.verify_inline();
            }
            self.submit_pending_verify();
            self.retry_overflow();
            let metrics = self.metrics();
            metrics
                .inbox_depth
                .set(self.shared.inboxes[self.core].len() as u64);
            match &self.shared.pool_stats {
                // The pool is shared: one core reports it, so the merged gauge is not multiplied.
                Some(stats) if self.core == 0 => {
                    metrics
                        .verify_queue_depth
                        .set(stats.depth.load(Ordering::Relaxed) as u64);
                }
                Some(_) => {}
                None => metrics
                    .verify_queue_depth
                    .set(self.pending_verify.borrow().len() as u64),
            }
            if self.draining.get()
                && self.conns.borrow().is_empty()
                && self.local.borrow().is_empty()
            {
                return;
            }
            if taken == MESSAGES_PER_TURN
                || fanouts >= fanout_budget
                || self.paused()
                || self.has_own_work()
            {
                yield_turn().await;
            }
        }
    }

    async fn wait_for_work(&self) {
        let now = self.now();
        let housekeeping = Millis(now.0 + HOUSEKEEPING_MS);
        let until = match self.machine_deadline.get() {
            Some(at) if at < housekeeping => at,
            _ => housekeeping,
        };
        let sleep = monoio::time::sleep(Duration::from_millis(until.0.saturating_sub(now.0)));
        let mut sleep = std::pin::pin!(sleep);
        let inbox = &self.shared.inboxes[self.core];
        poll_fn(|cx| {
            if !self.local.borrow().is_empty() || self.has_own_work() {
                return Poll::Ready(());
            }
            if self.wake.poll_notified(cx).is_ready() {
                return Poll::Ready(());
            }
            inbox.register(cx.waker());
            if !inbox.is_empty() {
                return Poll::Ready(());
            }
            sleep.as_mut().poll(cx)
        })
        .await;
    }

    fn handle(&self, now: Millis, msg: Msg) {
        match msg {
            Msg::Join {
                stream,
                peer,
                frame,
            } => {
                self.machine.borrow_mut().on_join(now, peer, stream, frame);
            }
            Msg::Frame {
                stream,
                frame,
                read_at,
            } => {
                self.current_read_at.set(Some(read_at));
                self.machine.borrow_mut().on_frame(now, stream, frame);
            }
            Msg::Closed { stream, cause } => {
                self.machine.borrow_mut().on_closed(now, stream, cause)
            }
            Msg::Written { stream, notice } => {
                self.machine.borrow_mut().on_written(now, stream, notice)
            }
            // Applied a few per turn (`apply_results`), so one batch cannot overfill queues.
            Msg::Verified(batch) => self.results.borrow_mut().extend(batch),
            Msg::Send {
                stream,
                frame,
                notice,
            } => self.enqueue(stream, frame, notice, None),
            Msg::Deliver {
                frame,
                targets,
                from,
                to,
                read_at,
            } => {
                for stream in &targets.all[from..to] {
                    if !targets.excludes(*stream) {
                        self.enqueue(*stream, frame.clone(), None, read_at);
                    }
                }
            }
            Msg::Credit { stream } => {
                if let Some(conn) = self.conns.borrow().get(&stream) {
                    conn.credit();
                }
            }
            Msg::Close { stream, reason } => {
                let conn = self.conns.borrow().get(&stream).cloned();
                if let Some(conn) = conn {
                    conn.close_by_home(reason);
                }
            }
            Msg::Ping { reply } => {
                let _ = reply.send(self.core);
            }
            Msg::Snapshot { reply } => {
                let _ = reply.send(snapshot_json(&self.machine.borrow(), now));
            }
            Msg::Reload(config) => self.machine.borrow_mut().reconfigure(*config),
            Msg::Drain => self.start_drain(),
        }
        self.execute();
        self.current_read_at.set(None);
    }

    fn verified(&self, now: Millis, done: VerifyDone) {
        let (_, ticket) = done.tag;
        self.metrics().verify_jobs.inc();
        self.metrics().verify_latency_us.record(done.latency_us);
        let read_at = self.ticket_read_at.borrow_mut().remove(&ticket);
        self.current_read_at.set(read_at);
        self.machine
            .borrow_mut()
            .on_verified(now, ticket, done.result);
        self.execute();
    }

    /// Carries out what the state machine decided.
    fn execute(&self) {
        let mut actions = std::mem::take(&mut *self.actions.borrow_mut());
        self.machine.borrow_mut().drain_actions(&mut actions);
        for action in actions.drain(..) {
            match action {
                Action::Send {
                    stream,
                    frame,
                    notice,
                } => {
                    let owner = core_of(stream);
                    if owner == self.core {
                        self.enqueue(stream, frame, notice, None);
                    } else {
                        self.route(
                            owner,
                            Msg::Send {
                                stream,
                                frame,
                                notice,
                            },
                        );
                    }
                }
                Action::Deliver { frame, targets } => self.deliver(frame, targets),
                Action::Verify { ticket, request } => {
                    if let Some(at) = self.current_read_at.get() {
                        self.ticket_read_at.borrow_mut().insert(ticket, at);
                    }
                    self.pending_verify.borrow_mut().push_back((
                        (self.core, ticket),
                        request,
                        Instant::now(),
                    ));
                }
                Action::Consumed { stream } => {
                    let owner = core_of(stream);
                    if owner == self.core {
                        if let Some(conn) = self.conns.borrow().get(&stream) {
                            conn.credit();
                        }
                    } else {
                        self.route(owner, Msg::Credit { stream });
                    }
                }
                Action::Close { stream, reason } => {
                    let owner = core_of(stream);
                    if owner == self.core {
                        let conn = self.conns.borrow().get(&stream).cloned();
                        if let Some(conn) = conn {
                            conn.close_by_home(reason);
                        }
                    } else {
                        self.route(owner, Msg::Close { stream, reason });
                    }
                }
                Action::Blocklist { peer, until } => {
                    tracing::info!(peer = %peer, until_ms = until.0, "peer blocklisted");
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
        self.submit_pending_verify();
    }

    /// Fans one frame out: local targets directly, one message per other core.
    fn deliver(&self, frame: Bytes, targets: Targets) {
        let read_at = self.current_read_at.get();
        let all = &targets.all;
        let mut from = 0;
        while from < all.len() {
            let core = core_of(all[from]);
            let to = from + all[from..].partition_point(|stream| core_of(*stream) == core);
            if core == self.core {
                for stream in &all[from..to] {
                    if !targets.excludes(*stream) {
                        self.enqueue(*stream, frame.clone(), None, read_at);
                    }
                }
            } else {
                self.route(
                    core,
                    Msg::Deliver {
                        frame: frame.clone(),
                        targets: targets.clone(),
                        from,
                        to,
                        read_at,
                    },
                );
            }
            from = to;
        }
    }

    fn enqueue(
        &self,
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
        read_at: Option<Instant>,
    ) {
        let conn = self.conns.borrow().get(&stream).cloned();
        let Some(conn) = conn else { return };
        if !conn.enqueue(frame, notice, read_at) {
            self.metrics().queue_resets.inc();
            conn.mark_reported();
            if let Some(home) = conn.home() {
                self.route(
                    home,
                    Msg::Closed {
                        stream,
                        cause: ClosedBy::QueueOverflow,
                    },
                );
            }
        }
    }

    fn submit_pending_verify(&self) {
        let Some(pool) = &self.shared.pool else {
            return;
        };
        let mut pending = self.pending_verify.borrow_mut();
        while let Some((tag, request, queued_at)) = pending.pop_front() {
            if let Err(full) = pool.submit(tag, request) {
                pending.push_front((full.tag, full.request, queued_at));
                break;
            }
        }
    }

    /// Inline mode: verifies one batch of this core's pending jobs; the results are applied
    /// like the pool's, a few per turn.
    fn verify_inline(&self) {
        let Some(verifier) = &self.verifier else {
            return;
        };
        let batch: Vec<_> = {
            let mut pending = self.pending_verify.borrow_mut();
            let take = pending.len().min(self.settings().verify_batch_jobs_max);
            pending.drain(..take).collect()
        };
        if batch.is_empty() {
            return;
        }
        let requests: Vec<&VerifyRequest> = batch.iter().map(|(_, request, _)| request).collect();
        let mut results = Vec::with_capacity(batch.len());
        verifier.borrow_mut().verify_batch(&requests, &mut results);
        let mut done = self.results.borrow_mut();
        for ((tag, _, queued_at), result) in batch.into_iter().zip(results) {
            done.push_back(VerifyDone {
                tag,
                result,
                latency_us: micros(queued_at),
            });
        }
    }

    /// Each accepted publication may put one frame on every subscriber's queue, and the
    /// writers drain the queues only between turns. Half the queue bound per turn keeps a
    /// subscriber that keeps up from ever being reset by our own batching (R26 is for
    /// subscribers that do not keep up).
    fn fanout_frames_per_turn(&self) -> usize {
        (self.settings().outbound_queue_frames_max / 2).max(1)
    }

    /// Applies up to `budget` verification results; returns how many.
    fn apply_results(&self, now: Millis, budget: usize) -> usize {
        let mut applied = 0;
        while applied < budget {
            let next = self.results.borrow_mut().pop_front();
            let Some(done) = next else { break };
            self.verified(now, done);
            applied += 1;
        }
        applied
    }

    /// Work this core gives itself: results to apply, or inline jobs to verify.
    fn has_own_work(&self) -> bool {
        !self.results.borrow().is_empty()
            || (self.verifier.is_some() && !self.pending_verify.borrow().is_empty())
    }

    fn expire_prejoin(&self, now: Millis) {
        loop {
            let front = self.prejoin.borrow().front().copied();
            let Some((deadline, stream)) = front else {
                return;
            };
            let conn = self.conns.borrow().get(&stream).cloned();
            match conn {
                Some(conn) if conn.home().is_none() => {
                    if deadline > now {
                        return;
                    }
                    self.metrics().join_timeouts.inc();
                    conn.reset();
                }
                _ => {}
            }
            self.prejoin.borrow_mut().pop_front();
        }
    }

    fn start_drain(&self) {
        if self.draining.replace(true) {
            return;
        }
        if let Some(fd) = self.listener_fd.get() {
            // Wakes the pending accept with an error; the accept loop sees `draining`.
            // SAFETY: the listener fd stays open until the accept loop returns.
            unsafe {
                libc::shutdown(fd, libc::SHUT_RDWR);
            }
        }
        let conns: Vec<Rc<Conn>> = self.conns.borrow().values().cloned().collect();
        for conn in conns {
            conn.flush_and_close();
        }
        self.wake.notify();
    }
}

/// The machine's cohorts as JSON objects, each with `age_ms` and `idle_ms` at `now`.
fn snapshot_json(machine: &Machine, now: Millis) -> Vec<serde_json::Value> {
    machine
        .summaries()
        .into_iter()
        .map(|cohort| {
            let (age_ms, idle_ms) = (
                now.as_ms().saturating_sub(cohort.created_ms),
                now.as_ms().saturating_sub(cohort.last_activity_ms),
            );
            let mut value = serde_json::to_value(cohort).expect("a snapshot is plain data");
            if let serde_json::Value::Object(fields) = &mut value {
                fields.insert("age_ms".into(), age_ms.into());
                fields.insert("idle_ms".into(), idle_ms.into());
            }
            value
        })
        .collect()
}
