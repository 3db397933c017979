//! What one core's carriers and its shard share: the table of its streams and the read gate
//! a stream passes before each frame it hands over and before each read.
//!
//! Owns: `CoreLink`: the ports of this core's streams, stream ids, admission at accept
//! (draining, blocklist, `limits.connections_max`, the per-peer pre-Join cap), the read
//! gate (`gate`, passed in `carrier::read_loop`, the one place every carrier reads: by every
//! frame once, right before `hand_over`, for the router's pause, the stream's read-window
//! credit and this core's frames in flight; by every read before it is issued, for the
//! router's pause, frame memory and the credit; readers waiting for this core's frames in
//! flight are woken one cohort after another, oldest first within a cohort, so a cohort
//! whose readers hold every slot cannot keep another cohort's reader out), the Join and
//! flush deadlines of this core's connections, the listeners a drain shuts, and the rate
//! limit of log lines a peer can trigger.
//! The carrier side (`admit`, `gate`, `hand_over`, `written`, `ended`, `frame_error`) is all
//! a carrier may call: it sees ports, frames and credits, never the shard, the machine or
//! another carrier. The shard side (`port`, `credit`, `expire_deadlines`, `start_drain`) is
//! the shard's.
//! Never does: decide a protocol question, or block: every wait is a future that a ring, a
//! credit or a release wakes.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::poll_fn;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::Instant;

use bps_proto::{CohortKey, Frame, FrameError, Hash, RelayId};
use bps_verify::fair::FairQueue;

use super::Shared;
use super::frame_memory::FrameMemory;
use super::held::HeldBytes;
use super::log_gate::LogGate;
use super::notify::LocalNotify;
use super::port::{Closing, Life, Port, QueueBounds, Transport, WriteReport};
use super::router::{HomeMsg, RelayFrames, Router};
pub use crate::labels::Refusal;
use crate::limits::SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX;
use crate::metrics::CoreMetrics;
use crate::protocol::CoreId;
use crate::protocol::{
    Arrival, ClosedBy, CohortSerial, Millis, PeerId, RelayOutcome, RelayReply, SpliceOutcome,
    StreamId, WriteNotice,
};

/// Deadlines this core keeps for its own connections, in the order they fall due (each
/// kind has one fixed duration, so appending keeps them sorted).
#[derive(Debug, Default)]
struct DeadlineQueue {
    entries: VecDeque<(Millis, StreamId)>,
}

impl DeadlineQueue {
    fn push(&mut self, at: Millis, stream: StreamId) {
        self.entries.push_back((at, stream));
    }

    fn pop_due(&mut self, now: Millis) -> Option<StreamId> {
        if self.entries.front().is_some_and(|(at, _)| *at <= now) {
            return self.entries.pop_front().map(|(_, stream)| stream);
        }
        None
    }

    fn next(&self) -> Option<Millis> {
        self.entries.front().map(|(at, _)| *at)
    }
}

/// Deadlines of this core's connections handled in one turn at most, so that a burst of
/// expiries is spread over turns.
const DEADLINES_PER_TURN_MAX: usize = 1024;

/// What a stream asks of the read gate (`CoreLink::gate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// A frame in the read buffer, handed over right after the gate (`CoreLink::hand_over`).
    Frame,
    /// A read for the next frame: issued only when the gate lets it (the core's frames in
    /// flight are a frame's term only).
    Read,
}

/// Why a stream waited at the read gate.
#[derive(Clone, Copy, Debug)]
enum Wait {
    Overflow,
    Memory,
    Credit,
    InFlight,
}

/// The causes one pass of the read gate waited for, each counted once per pass.
#[derive(Debug, Default)]
struct Waited {
    overflow: bool,
    memory: bool,
    credit: bool,
    in_flight: bool,
}

impl Waited {
    fn note(&mut self, wait: Wait, metrics: &CoreMetrics) {
        let (seen, counter) = match wait {
            Wait::Overflow => (&mut self.overflow, &metrics.read_paused_overflow),
            Wait::Memory => (&mut self.memory, &metrics.read_paused_memory),
            Wait::Credit => (&mut self.credit, &metrics.read_paused),
            Wait::InFlight => (&mut self.in_flight, &metrics.read_paused_core),
        };
        if !std::mem::replace(seen, true) {
            counter.inc();
        }
    }
}

/// One core's streams and gates; see the module documentation.
pub struct CoreLink {
    pub core: CoreId,
    pub shared: Arc<Shared>,
    pub router: Router,
    metrics: Arc<CoreMetrics>,
    ports: RefCell<HashMap<StreamId, Rc<Port>>>,
    /// What this core's ports hold queued towards their peers, together.
    held: Rc<HeldBytes>,
    next_stream: Cell<u64>,
    /// Frames this core's readers handed over and the machine has not consumed yet (a frame
    /// being verified stays consumed-not until its result is back, even when its stream
    /// closed meanwhile, so verification jobs are bounded by this too).
    in_flight: Cell<usize>,
    /// Readers waiting for room among the frames in flight, by their cohort (`read_classes`).
    /// An entry counts only while its stream is in `in_flight_queued` (a reader that got in
    /// some other way leaves it), so each stream has at most one live entry.
    in_flight_waiting: RefCell<FairQueue<(StreamId, Waker)>>,
    in_flight_queued: RefCell<HashSet<StreamId>>,
    /// The cohort class of each stream that sent its Join (a hash of the cohort's key).
    read_classes: RefCell<HashMap<StreamId, u64>>,
    memory_waiting: RefCell<Vec<Waker>>,
    join_deadlines: RefCell<DeadlineQueue>,
    flush_deadlines: RefCell<DeadlineQueue>,
    draining: Cell<bool>,
    listeners: RefCell<Vec<RawFd>>,
    log_gate: LogGate,
    /// Ports queued to in the current turn, written directly at its end.
    touched: RefCell<Vec<Rc<Port>>>,
    /// W5 relays waiting for their home core's answer (one per POST connection at most,
    /// `SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX` in all).
    relays: RefCell<HashMap<u64, Rc<RelaySlot>>>,
    next_relay: Cell<u64>,
}

/// How long a relayed service chunk waits for its home core: a core that does not answer
/// in this time is stuck, and the POST is answered 503 rather than held.
const RELAY_ANSWER_DEADLINE: std::time::Duration = std::time::Duration::from_secs(5);

/// What became of a relay this core asked for.
#[derive(Debug)]
pub enum Relayed {
    /// The home core's outcome.
    Answered(RelayOutcome),
    /// No answer within `RELAY_ANSWER_DEADLINE`.
    TimedOut,
    /// `SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX` relays of this core are waiting already.
    Busy,
}

/// Where the answer of one relay lands.
#[derive(Default)]
struct RelaySlot {
    outcome: RefCell<Option<RelayOutcome>>,
    answered: LocalNotify,
}

impl std::fmt::Debug for CoreLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreLink")
            .field("core", &self.core)
            .field("ports", &self.ports.borrow().len())
            .field("in_flight", &self.in_flight.get())
            .finish_non_exhaustive()
    }
}

impl CoreLink {
    pub fn new(core: CoreId, shared: Arc<Shared>) -> CoreLink {
        let metrics = Arc::clone(&shared.metrics[core.index()]);
        // One live entry per stream at most, and stale ones are dropped as they come up.
        let waiters_max = shared.settings.connections_max.max(1) * 2;
        CoreLink {
            router: Router::new(
                core,
                Arc::clone(&shared.lanes),
                Arc::clone(&metrics),
                shared.settings.overflow_messages_max,
            ),
            log_gate: LogGate::new(shared.settings.log_peer_lines_per_s_max),
            core,
            shared,
            metrics,
            ports: RefCell::new(HashMap::new()),
            held: Rc::default(),
            next_stream: Cell::new(0),
            in_flight: Cell::new(0),
            in_flight_waiting: RefCell::new(FairQueue::new(waiters_max, waiters_max)),
            in_flight_queued: RefCell::new(HashSet::new()),
            read_classes: RefCell::new(HashMap::new()),
            memory_waiting: RefCell::new(Vec::new()),
            join_deadlines: RefCell::new(DeadlineQueue::default()),
            flush_deadlines: RefCell::new(DeadlineQueue::default()),
            draining: Cell::new(false),
            listeners: RefCell::new(Vec::new()),
            touched: RefCell::new(Vec::new()),
            relays: RefCell::new(HashMap::new()),
            next_relay: Cell::new(0),
        }
    }

    pub fn metrics(&self) -> &CoreMetrics {
        &self.metrics
    }

    pub fn settings(&self) -> &super::Settings {
        &self.shared.settings
    }

    pub fn memory(&self) -> &Arc<FrameMemory> {
        &self.shared.frame_memory
    }

    fn now(&self) -> Millis {
        self.shared.now()
    }

    // ----- the carrier side -----

    /// A listener this core accepts on; a drain shuts it.
    pub fn register_listener(&self, fd: RawFd) {
        self.listeners.borrow_mut().push(fd);
    }

    pub fn draining(&self) -> bool {
        self.draining.get()
    }

    /// A new connection from `ip`: its port, or why it is refused.
    pub fn admit(&self, ip: IpAddr, transport: Transport) -> Result<Rc<Port>, Refusal> {
        self.admit_peer(PeerId::of(ip), transport)
    }

    /// A new stream of `peer` (a bee node's overlay, on the libp2p carrier): its port, or why
    /// it is refused.
    pub fn admit_peer(&self, peer: PeerId, transport: Transport) -> Result<Rc<Port>, Refusal> {
        let refusal = self.admission(peer);
        if let Err(refusal) = refusal {
            self.metrics.refused(refusal);
            return Err(refusal);
        }
        Ok(self.open_port(peer, transport, true))
    }

    /// A new connection from a trusted reverse proxy, whose peer is named in the request
    /// (`name_proxied_peer`): counted against `limits.connections_max` now, against the
    /// peer's bounds once it is named.
    pub fn admit_proxied(&self, ip: IpAddr, transport: Transport) -> Result<Rc<Port>, Refusal> {
        let refusal = self.admit_connection();
        if let Err(refusal) = refusal {
            self.metrics.refused(refusal);
            return Err(refusal);
        }
        Ok(self.open_port(PeerId::of(ip), transport, false))
    }

    /// Edge mode: a connection this core opened to a cohort's root (`upstream`), counted
    /// against `limits.connections_max` like any other; its peer is the root.
    pub fn admit_upstream(&self, ip: IpAddr) -> Result<Rc<Port>, Refusal> {
        let refusal = self.admit_connection();
        if let Err(refusal) = refusal {
            self.metrics.refused(refusal);
            return Err(refusal);
        }
        Ok(self.open_port(PeerId::of(ip), Transport::Tcp, false))
    }

    /// Edge mode: the root answered the upstream Join on `port` OK (naming itself as `root`
    /// if it is an edge); its frames go to this core's machine as the upstream stream of the
    /// cohort `cohort` (homed here: the cohort's home core opened it).
    pub fn attach_upstream(&self, port: &Port, cohort: CohortSerial, root: Option<RelayId>) {
        port.set_home(self.core);
        self.router.to_home(
            self.core,
            HomeMsg::Upstream {
                stream: port.id,
                cohort,
                root,
            },
        );
    }

    /// Edge mode: the root answered a spliced stream's upstream Join; with `Joined`, `port`
    /// (this core's, like the local stream's home) carries the root's side from now on.
    pub fn spliced(&self, port: Option<&Port>, stream: StreamId, outcome: SpliceOutcome) {
        if let Some(port) = port {
            port.set_home(self.core);
        }
        self.router
            .to_home(self.core, HomeMsg::Spliced { stream, outcome });
    }

    /// The peer a trusted proxy named for `port`: the blocklist and the pre-Join cap apply
    /// to it from now on.
    pub fn name_proxied_peer(&self, port: &Port, ip: IpAddr) -> Result<(), Refusal> {
        let peer = PeerId::of(ip);
        let refusal = if self.shared.ledger.is_blocked(peer, self.now()) {
            Err(Refusal::Blocklisted)
        } else if !self.shared.ledger.try_enter_prejoin(peer) {
            Err(Refusal::PrejoinMax)
        } else {
            port.set_proxied_peer(peer);
            Ok(())
        };
        if let Err(refusal) = refusal {
            self.metrics.refused(refusal);
        }
        refusal
    }

    fn open_port(&self, peer: PeerId, transport: Transport, prejoin: bool) -> Rc<Port> {
        let stream = StreamId::new(self.core.stream_byte(), self.next_stream.get());
        self.next_stream.set(self.next_stream.get() + 1);
        let settings = self.settings();
        let bounds = QueueBounds {
            frames_max: settings.outbound_queue_frames_max,
            bytes_max: settings.outbound_queue_bytes_max,
        };
        let port = Rc::new(Port::new(
            stream,
            peer,
            transport,
            bounds,
            settings.frames_in_flight_per_stream_max,
            Rc::clone(&self.held),
        ));
        if !prejoin {
            port.leave_prejoin();
        }
        self.ports.borrow_mut().insert(stream, Rc::clone(&port));
        self.metrics.accepted(transport);
        // A WebSocket connection is no pre-Join stream until it upgrades (`await_join`): a
        // plain HTTP request on it has its own head deadline, and misses no Join.
        if transport != Transport::WebSocket {
            self.await_join(&port);
        }
        port
    }

    /// Starts `port`'s Join deadline (`server.join_deadline_ms`, a missed one counts towards
    /// the blocklist): at accept for TCP, at the upgrade for WebSocket.
    pub fn await_join(&self, port: &Port) {
        let deadline = self.now().plus_ms(self.settings().join_deadline_ms);
        self.join_deadlines.borrow_mut().push(deadline, port.id);
        // The loop may be parked on a later timer (or none): it re-arms at its next turn.
        self.router.inbound().doorbell.ring();
    }

    /// A WebSocket connection routed to a plain HTTP answer: it will send no Join, so its
    /// pre-Join slot goes back to its peer now.
    pub fn routed(&self, port: &Port) {
        self.release_prejoin(port);
    }

    fn admission(&self, peer: PeerId) -> Result<(), Refusal> {
        let shared = &self.shared;
        if !self.draining.get() && shared.ledger.is_blocked(peer, self.now()) {
            return Err(Refusal::Blocklisted);
        }
        self.admit_connection()?;
        if !shared.ledger.try_enter_prejoin(peer) {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            return Err(Refusal::PrejoinMax);
        }
        Ok(())
    }

    /// Draining and `limits.connections_max`; on success the connection is counted.
    fn admit_connection(&self) -> Result<(), Refusal> {
        if self.draining.get() {
            return Err(Refusal::Draining);
        }
        let shared = &self.shared;
        let open = shared.connections.fetch_add(1, Ordering::Relaxed);
        if open >= shared.settings.connections_max {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            return Err(Refusal::ConnectionsMax);
        }
        Ok(())
    }

    /// The read gate, the one a stream passes before each frame it hands to its core and
    /// before each read (see `Admit`). Completes when the stream may go on: this core's
    /// overflow towards other cores is empty (the router's pause), frame memory has room
    /// (asked of a read only: a frame in the buffer was charged when it was read, by the
    /// read's reservation or the per-connection idle-sized read), and, once the stream has
    /// joined, it has a read-window credit and, for a frame, this core has room among its
    /// frames in flight (readers waiting for that room are woken one cohort after another).
    /// A read does not queue for that room: it would take no slot when woken, so each frame
    /// would queue twice and every slot freed would wake a read that leaves it to the next
    /// (measured under bench/flood: the live cohort's latency went from 0.2 s to seconds);
    /// a frame read while the core is full waits in its buffer, at most one read's worth.
    /// Every wait is backpressure: the peer's bytes stay in the kernel. `false` when the
    /// stream closed.
    pub async fn gate(&self, port: &Port, admit: Admit) -> bool {
        let mut waited = Waited::default();
        loop {
            if !port.is_open() {
                return false;
            }
            if self.router.reads_paused() {
                waited.note(Wait::Overflow, &self.metrics);
                poll_fn(|cx| self.router.poll_reads_unpaused(cx)).await;
                continue;
            }
            if admit == Admit::Read && !self.memory().has_room() {
                waited.note(Wait::Memory, &self.metrics);
                self.wait_memory_room().await;
                continue;
            }
            if port.home().is_none() {
                return true;
            }
            if port.credits() == 0 {
                waited.note(Wait::Credit, &self.metrics);
                port.read_changed().await;
                continue;
            }
            if admit == Admit::Frame && !self.core_has_room() {
                waited.note(Wait::InFlight, &self.metrics);
                self.wait_core_room(port).await;
                continue;
            }
            return true;
        }
    }

    /// Waits for a release of frame memory (or the room that came meanwhile).
    async fn wait_memory_room(&self) {
        poll_fn(|cx| {
            if self.memory().has_room() {
                return Poll::Ready(());
            }
            self.memory().wait_for_room(self.core);
            self.memory_waiting.borrow_mut().push(cx.waker().clone());
            // A release between the check and the registration must not be missed.
            if self.memory().has_room() {
                return Poll::Ready(());
            }
            Poll::Pending
        })
        .await;
    }

    /// Waits, in its cohort's turn, for room among this core's frames in flight.
    async fn wait_core_room(&self, port: &Port) {
        poll_fn(|cx| {
            if self.core_has_room() || !port.is_open() {
                return Poll::Ready(());
            }
            self.wait_in_flight_room(port.id, cx.waker());
            Poll::Pending
        })
        .await;
    }

    /// Gives one frame that passed the gate (`gate` with `Admit::Frame`, in the same turn) to
    /// the home core: a stream's first frame is its Join; a later one takes a read-window
    /// credit and a place among this core's frames in flight.
    pub fn hand_over(&self, port: &Port, frame: Frame) {
        self.metrics.frame_in(port.transport);
        let Some(home) = port.home() else {
            self.hand_over_join(port, frame);
            return;
        };
        let credited = port.take_credit();
        assert!(
            credited,
            "a frame passes the read gate before it is handed over"
        );
        self.in_flight.set(self.in_flight.get() + 1);
        let mut queued = self.in_flight_queued.borrow_mut();
        if !queued.is_empty() {
            // In: a queued entry of this stream is stale now.
            queued.remove(&port.id);
        }
        drop(queued);
        self.router.to_home(
            home,
            HomeMsg::Frame {
                stream: port.id,
                frame,
                read_at: Instant::now(),
            },
        );
    }

    fn hand_over_join(&self, port: &Port, frame: Frame) {
        let (home, class) = self.home_of_join(&frame);
        self.read_classes.borrow_mut().insert(port.id, class);
        port.set_home(home);
        self.release_prejoin(port);
        self.router.to_home(
            home,
            HomeMsg::Join {
                stream: port.id,
                arrival: Arrival {
                    peer: port.peer(),
                    anonymous: port.is_anonymous(),
                    carrier: port.transport.name(),
                    spliceable: !port.is_bridged(),
                },
                frame,
            },
        );
    }

    /// Queues a reader for a frame in flight freed, behind its cohort's earlier ones; a
    /// reader already queued keeps its place (its waker wakes the same task).
    fn wait_in_flight_room(&self, stream: StreamId, waker: &Waker) {
        if !self.in_flight_queued.borrow_mut().insert(stream) {
            return;
        }
        let class = self
            .read_classes
            .borrow()
            .get(&stream)
            .copied()
            .unwrap_or(0);
        let mut waiting = self.in_flight_waiting.borrow_mut();
        let Err(refused) = waiting.push(class, (stream, waker.clone())) else {
            return;
        };
        // At the bound: drop the cohort's stale entries and try again; past that (cannot
        // happen, live entries are one per stream), never strand the reader.
        let live = self.in_flight_queued.borrow();
        waiting.cancel(class, |(queued, _)| {
            !live.contains(queued) || *queued == stream
        });
        drop(live);
        if let Err(refused) = waiting.push(class, refused.job) {
            self.in_flight_queued.borrow_mut().remove(&stream);
            refused.job.1.wake();
        }
    }

    /// Whether this core may take one more frame in flight.
    fn core_has_room(&self) -> bool {
        self.in_flight.get() < self.settings().frames_in_flight_per_core_max
    }

    /// Waits until the home core has finished every frame handed over (or closed the
    /// stream): what a peer sent before closing its side still counts.
    pub async fn wait_consumed(&self, port: &Port) {
        let window = self.settings().frames_in_flight_per_stream_max;
        while port.is_open() && port.home().is_some() && port.credits() < window {
            port.read_changed().await;
        }
    }

    /// The home core of the cohort a Join names (its canonical key's hash), or this core for
    /// a Join that does not validate (its own machine answers REJECTED).
    fn home_of_join(&self, frame: &Frame) -> (CoreId, u64) {
        let Ok(join) = bps_proto::decode_join(frame.body()) else {
            return (self.core, 0);
        };
        match bps_proto::validate_join(&join) {
            Ok(valid) => (
                self.home_of_key(&valid.key),
                self.shared.home_hash.hash_one(valid.key.as_bytes()),
            ),
            Err(_) => (self.core, 0),
        }
    }

    /// The home core of the cohort with canonical key `key`.
    fn home_of_key(&self, key: &CohortKey) -> CoreId {
        let cores = self.shared.lanes.len();
        if cores == 1 {
            return CoreId::new(0);
        }
        CoreId::new((self.shared.home_hash.hash_one(key.as_bytes()) % cores as u64) as usize)
    }

    /// A write completed and `frames` frames of `bytes` bytes are on the wire.
    pub fn written(&self, port: &Port, frames: u64, bytes: u64) {
        self.metrics.frames_out(port.transport, frames, bytes);
        let WriteReport { notices, sample_us } = port.written(frames);
        if let Some(sample_us) = sample_us {
            self.metrics.accept_to_write_us.record(sample_us);
        }
        if let Some(home) = port.home() {
            for notice in notices {
                self.router.to_home(
                    home,
                    HomeMsg::Written {
                        stream: port.id,
                        notice,
                    },
                );
            }
        }
    }

    /// A frame queued with `notice` was never written because its carrier passes nothing
    /// on for it (a bridge session's Ack): it counts as written now.
    pub fn notice_written(&self, port: &Port, notice: WriteNotice) {
        if let Some(home) = port.home() {
            self.router.to_home(
                home,
                HomeMsg::Written {
                    stream: port.id,
                    notice,
                },
            );
        }
    }

    /// W5: relays a service chunk to the home core of the cohort `key`, naming the admin
    /// stream challenge it was signed under if the POST did, and waits for the outcome.
    pub async fn relay(&self, key: CohortKey, named: Option<Hash>, frames: RelayFrames) -> Relayed {
        if self.relays.borrow().len() >= SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX {
            return Relayed::Busy;
        }
        let relay = self.next_relay.get();
        self.next_relay.set(relay + 1);
        let slot = Rc::new(RelaySlot::default());
        self.relays.borrow_mut().insert(relay, Rc::clone(&slot));
        let home = self.home_of_key(&key);
        self.router.to_home(
            home,
            HomeMsg::Relay {
                key,
                named,
                frames,
                reply: RelayReply {
                    core: self.core,
                    relay,
                },
            },
        );
        let answered = monoio::time::timeout(RELAY_ANSWER_DEADLINE, slot.answered.notified()).await;
        self.relays.borrow_mut().remove(&relay);
        let outcome = slot.outcome.borrow_mut().take();
        match (answered, outcome) {
            (Ok(()), Some(outcome)) => Relayed::Answered(outcome),
            _ => Relayed::TimedOut,
        }
    }

    /// The outcome of a relay this core asked for (a late one finds no slot and is dropped).
    pub fn relayed(&self, relay: u64, outcome: RelayOutcome) {
        let slot = self.relays.borrow().get(&relay).cloned();
        if let Some(slot) = slot {
            *slot.outcome.borrow_mut() = Some(outcome);
            slot.answered.notify();
        }
    }

    /// A frame could not be split off: the stream ends (no blocklist for a framing fault).
    pub fn frame_error(&self, port: &Port, error: &FrameError) {
        self.metrics.frame_errors.inc();
        if self.log_gate.allow(Instant::now()) {
            tracing::debug!(stream = %port.id, peer = %port.peer(), %error, "bad frame");
        } else {
            self.metrics.log_lines_suppressed.inc();
        }
    }

    /// The carrier is done with the stream: both directions ended and the socket closed.
    pub fn ended(&self, port: &Port, cause: ClosedBy) {
        self.ports.borrow_mut().remove(&port.id);
        self.read_classes.borrow_mut().remove(&port.id);
        self.in_flight_queued.borrow_mut().remove(&port.id);
        self.release_prejoin(port);
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.metrics.closed(port.transport);
        if port.end_unreported()
            && let Some(home) = port.home()
        {
            port.mark_reported();
            self.router.to_home(
                home,
                HomeMsg::Closed {
                    stream: port.id,
                    cause,
                },
            );
        }
        if self.draining.get() && self.ports.borrow().is_empty() {
            self.router.inbound().doorbell.ring();
        }
    }

    fn release_prejoin(&self, port: &Port) {
        if port.leave_prejoin() {
            self.shared.ledger.leave_prejoin(port.peer());
        }
    }

    /// Whether a peer-triggered log line may be written now (counted when it may not).
    pub fn may_log(&self) -> bool {
        let allowed = self.log_gate.allow(Instant::now());
        if !allowed {
            self.metrics.log_lines_suppressed.inc();
        }
        allowed
    }

    // ----- the shard side -----

    /// The port of one of this core's streams, if it is still open.
    pub fn port(&self, stream: StreamId) -> Option<Rc<Port>> {
        self.ports.borrow().get(&stream).cloned()
    }

    /// Bytes this core's ports hold queued towards their peers.
    pub fn held_bytes(&self) -> usize {
        self.held.total()
    }

    /// A turn starts at `at`: what ports stamp the moves of their bytes with.
    pub fn start_turn(&self, at: Instant) {
        self.held.set_turn_at(at);
    }

    /// Calls `f` with every port of this core (`f` must not open or drop ports).
    pub fn each_port(&self, f: impl FnMut(&Rc<Port>)) {
        self.ports.borrow().values().for_each(f);
    }

    /// Ports open on this core.
    pub fn ports_open(&self) -> usize {
        self.ports.borrow().len()
    }

    /// Frames read here and not yet consumed.
    pub fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Wakes the next reader waiting for room among the frames in flight, the cohorts in
    /// turn, skipping stale entries (the stream got in otherwise, or ended).
    fn wake_core_waiter(&self) {
        loop {
            let next = self.in_flight_waiting.borrow_mut().pop();
            let Some((_, (stream, waker))) = next else {
                return;
            };
            let waiting = self.in_flight_queued.borrow_mut().remove(&stream);
            if waiting && self.ports.borrow().contains_key(&stream) {
                waker.wake();
                return;
            }
        }
    }

    /// The machine consumed one frame of this core's stream `stream` (R: exactly one per
    /// frame handed over; the stream may be gone by now).
    pub fn credit(&self, stream: StreamId) {
        let in_flight = self.in_flight.get();
        assert!(in_flight > 0, "a credit for a frame never handed over");
        self.in_flight.set(in_flight - 1);
        if let Some(port) = self.port(stream) {
            port.credit();
        }
        self.wake_core_waiter();
    }

    /// The core queued a frame on `port` since the last flush.
    pub fn touched(&self, port: &Rc<Port>) {
        if port.touch() {
            self.touched.borrow_mut().push(Rc::clone(port));
        }
    }

    /// Writes what was queued since the last flush straight to the sockets (see
    /// `Port::flush_now`).
    pub fn flush_touched(&self) {
        let touched = std::mem::take(&mut *self.touched.borrow_mut());
        let frames_max = self.settings().write_batch_frames_max;
        for port in &touched {
            let flushed = port.flush_now(frames_max);
            if flushed.failed {
                port.reset();
            } else if flushed.frames > 0 {
                self.metrics.writes.inc();
                self.metrics.frames_per_write.record(flushed.frames);
                self.written(port, flushed.frames, flushed.bytes);
            }
        }
        let mut touched = touched;
        touched.clear();
        // Nothing is queued while flushing, so the list is still empty: keep its allocation.
        *self.touched.borrow_mut() = touched;
    }

    /// Wakes readers that wait for frame memory, once there is room.
    pub fn wake_memory_waiters(&self) {
        if self.memory().has_room() {
            for waker in self.memory_waiting.borrow_mut().drain(..) {
                waker.wake();
            }
        }
    }

    /// A stream the home core closes gracefully: it flushes, within the flush deadline.
    pub fn flush(&self, port: &Port) {
        if port.is_open() {
            port.flush_and_close();
            let deadline = self.now().plus_ms(self.shared.flush_deadline_ms());
            self.flush_deadlines.borrow_mut().push(deadline, port.id);
            self.router.inbound().doorbell.ring();
        }
    }

    /// Resets connections that sent no Join in time (their misses count towards the
    /// blocklist) and flushing streams past their flush deadline; at most
    /// `DEADLINES_PER_TURN_MAX` of them. Returns whether more are due.
    pub fn expire_deadlines(&self, now: Millis) -> bool {
        let mut handled = 0;
        while handled < DEADLINES_PER_TURN_MAX {
            let Some(stream) = self.join_deadlines.borrow_mut().pop_due(now) else {
                break;
            };
            handled += 1;
            if let Some(port) = self.port(stream)
                && port.home().is_none()
                && port.is_open()
            {
                self.metrics.join_timeouts.inc();
                port.note_closing(Closing::JoinDeadline);
                port.reset();
                let blocklisted = self.shared.ledger.note_join_timeout(port.peer(), now);
                if blocklisted.is_some() {
                    self.metrics.join_timeout_blocklistings.inc();
                }
                if let Some(until) = blocklisted
                    && self.may_log()
                {
                    tracing::info!(peer = %port.peer(), until_ms = until.as_ms(), "peer blocklisted for missed Join deadlines");
                }
            }
        }
        while handled < DEADLINES_PER_TURN_MAX {
            let Some(stream) = self.flush_deadlines.borrow_mut().pop_due(now) else {
                break;
            };
            handled += 1;
            if let Some(port) = self.port(stream)
                && port.life() == Life::Flushing
            {
                self.metrics.flush_timeouts.inc();
                port.reset();
            }
        }
        handled == DEADLINES_PER_TURN_MAX
    }

    /// The earliest deadline of this core's connections.
    pub fn next_deadline(&self) -> Option<Millis> {
        let join = self.join_deadlines.borrow().next();
        let flush = self.flush_deadlines.borrow().next();
        match (join, flush) {
            (Some(join), Some(flush)) => Some(join.min(flush)),
            (join, flush) => join.or(flush),
        }
    }

    /// Stops accepting and closes every stream cleanly (each within the flush deadline).
    pub fn start_drain(&self) {
        if self.draining.replace(true) {
            return;
        }
        for fd in self.listeners.borrow().iter() {
            // Wakes the pending accept with an error; the accept loop sees `draining`.
            // SAFETY: a listener's fd stays open until its accept loop returns, which it
            // does only after seeing `draining`.
            unsafe {
                libc::shutdown(*fd, libc::SHUT_RDWR);
            }
        }
        let ports: Vec<Rc<Port>> = self.ports.borrow().values().cloned().collect();
        for port in ports {
            port.note_closing(Closing::Drain);
            self.flush(&port);
        }
        self.router.inbound().doorbell.ring();
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{IpAddr, Ipv4Addr};
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::CoreLink;
    use crate::io::carrier::configure;
    use crate::io::harness::{self, GUARD};
    use crate::io::port::Transport;
    use crate::io::tcp::run;
    use crate::protocol::CoreId;

    /// Where the test's log lines go.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let mut lines = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            lines.extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Captured {
        fn lines_with(&self, text: &str) -> usize {
            let lines = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            String::from_utf8_lossy(&lines).matches(text).count()
        }
    }

    const PEERS: u64 = 12;
    const LINES_PER_S: u32 = 3;

    #[test]
    fn peer_triggered_log_lines_beyond_the_rate_are_dropped_and_counted() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let written = std::cell::Cell::new(0);
        harness::on_each_driver(|driver| {
            let written = &written;
            let captured = captured.clone();
            async move {
                let (shared, _) = harness::shared(1, |config| {
                    config.log.peer_lines_per_s_max = LINES_PER_S;
                });
                let link = Rc::new(CoreLink::new(CoreId::new(0), shared));
                let started = Instant::now();
                let (listener, addr) = harness::listener();
                let mut carriers = Vec::new();
                let mut peers = Vec::new();
                for _ in 0..PEERS {
                    let (accepted, mut peer) = harness::tcp_pair(&listener, addr, None).await;
                    let port = link
                        .admit(IpAddr::V4(Ipv4Addr::LOCALHOST), Transport::Tcp)
                        .expect("admitted");
                    configure(&accepted, link.settings());
                    carriers.push(monoio::spawn(run(Rc::clone(&link), port, accepted)));
                    // A length prefix far above `frame_bytes_max`: a bad frame, worth a line.
                    let oversize = vec![0xff, 0xff, 0x7f];
                    let (sent, _) =
                        monoio::io::AsyncWriteRentExt::write_all(&mut peer, oversize).await;
                    sent.expect("peer writes");
                    peers.push(peer);
                }
                for carrier in carriers {
                    monoio::time::timeout(GUARD, carrier)
                        .await
                        .expect("a bad frame ends its stream");
                }
                let elapsed_s = started.elapsed().as_secs_f64();
                let metrics = link.metrics();
                assert_eq!(metrics.frame_errors.get(), PEERS, "{driver}");
                let suppressed = metrics.log_lines_suppressed.get();
                let allowed = PEERS - suppressed;
                // The burst, and what refilled while the test ran (nothing, unless it ran slow).
                let refilled = (elapsed_s * f64::from(LINES_PER_S)).ceil() as u64;
                assert!(
                    allowed >= u64::from(LINES_PER_S)
                        && allowed <= u64::from(LINES_PER_S) + refilled,
                    "{driver}: {allowed} lines allowed in {elapsed_s} s"
                );
                written.set(written.get() + allowed);
                assert_eq!(
                    captured.lines_with("bad frame") as u64,
                    written.get(),
                    "{driver}: a suppressed line was written, or an allowed one was not"
                );
                drop(peers);
            }
        });
    }
}

/// The read gate on its own, without sockets: ports admitted as the accept loop admits
/// them, futures polled by hand, the shard's crediting played by the test.
#[cfg(test)]
mod gate_tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::pin::pin;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use bps_proto::{Ack, Frame};

    use super::{Admit, CoreLink};
    use crate::io::harness;
    use crate::io::port::{Port, Transport};
    use crate::protocol::CoreId;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Wakes {
        fn count(&self) -> usize {
            self.0.load(Ordering::Relaxed)
        }
    }

    fn link_with(edit: impl FnOnce(&mut crate::config::BrokerConfig)) -> CoreLink {
        let (shared, _) = harness::shared(1, edit);
        CoreLink::new(CoreId::new(0), shared)
    }

    fn frame() -> Frame {
        Frame::encode(&Ack {
            status: 1,
            challenge: vec![7; 32].into(),
        })
    }

    /// A stream that joined cohort class `class` (its Join passed the gate and went home).
    fn joined(link: &CoreLink, class: u64) -> Rc<Port> {
        let port = link
            .admit(IpAddr::V4(Ipv4Addr::LOCALHOST), Transport::Tcp)
            .expect("admitted");
        assert!(
            passes(link, &port, Admit::Frame),
            "a Join waits for nothing"
        );
        link.hand_over(&port, frame());
        link.read_classes.borrow_mut().insert(port.id, class);
        port
    }

    /// Whether the gate lets `port` through at once.
    fn passes(link: &CoreLink, port: &Port, admit: Admit) -> bool {
        let gate = pin!(link.gate(port, admit));
        let mut cx = Context::from_waker(Waker::noop());
        gate.poll(&mut cx) == Poll::Ready(true)
    }

    /// Hands one frame of `port` over through the gate.
    fn send(link: &CoreLink, port: &Port) {
        assert!(passes(link, port, Admit::Frame));
        link.hand_over(port, frame());
    }

    #[test]
    fn a_stream_out_of_credit_neither_reads_nor_hands_over_until_a_credit() {
        let link = link_with(|config| config.protocol.frames_in_flight_per_stream_max = 2);
        let port = joined(&link, 1);
        send(&link, &port);
        send(&link, &port);
        assert_eq!((port.credits(), link.in_flight()), (0, 2));
        assert!(!passes(&link, &port, Admit::Frame));
        // One reader task per stream: the last to wait is the one a credit wakes.
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut read = pin!(link.gate(&port, Admit::Read));
        assert_eq!(
            read.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Pending,
            "no read while the next frame could not go"
        );
        assert_eq!(
            link.metrics().read_paused.get(),
            2,
            "each pass counts its wait once"
        );
        link.credit(port.id);
        assert_eq!(wakes.count(), 1, "the credit wakes the waiting reader");
        assert_eq!(
            read.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(true)
        );
        send(&link, &port);
    }

    #[test]
    fn frames_in_flight_at_the_core_bound_hold_every_stream_of_the_core() {
        let link = link_with(|config| config.limits.frames_in_flight_per_core_max = 1);
        let first = joined(&link, 1);
        let second = joined(&link, 2);
        send(&link, &first);
        assert!(!passes(&link, &second, Admit::Frame));
        assert!(
            passes(&link, &second, Admit::Read),
            "a read does not queue for a slot it would not take"
        );
        assert!(link.metrics().read_paused_core.get() >= 1);
        link.credit(first.id);
        send(&link, &second);
    }

    #[test]
    fn readers_waiting_for_frames_in_flight_are_woken_cohort_by_cohort() {
        let link = link_with(|config| config.limits.frames_in_flight_per_core_max = 1);
        let holder = joined(&link, 9);
        let flood: Vec<Rc<Port>> = (0..3).map(|_| joined(&link, 1)).collect();
        let quiet = joined(&link, 2);
        send(&link, &holder);
        let wakes: Vec<Arc<Wakes>> = (0..4).map(|_| Arc::new(Wakes::default())).collect();
        let mut gates: Vec<_> = flood
            .iter()
            .chain(std::iter::once(&quiet))
            .map(|port| Box::pin(link.gate(port, Admit::Frame)))
            .collect();
        // The flood's three readers queue first, the quiet cohort's one after them.
        for (gate, wakes) in gates.iter_mut().zip(&wakes) {
            let waker = Waker::from(Arc::clone(wakes));
            assert_eq!(
                gate.as_mut().poll(&mut Context::from_waker(&waker)),
                Poll::Pending
            );
        }
        link.credit(holder.id);
        let woken: Vec<usize> = wakes.iter().map(|wakes| wakes.count()).collect();
        assert_eq!(woken, [1, 0, 0, 0], "the oldest of the first cohort");
        drop(gates.remove(0));
        link.hand_over(&flood[0], frame());
        link.credit(flood[0].id);
        let woken: Vec<usize> = wakes.iter().map(|wakes| wakes.count()).collect();
        assert_eq!(
            woken,
            [1, 0, 0, 1],
            "then the quiet cohort, not the flood's next"
        );
    }

    #[test]
    fn full_frame_memory_holds_reads_but_not_frames_already_read() {
        // Small, yet with room for one cohort's history ring (as the config requires).
        const MEMORY_BYTES: usize = 32 * 1024;
        let link = link_with(|config| {
            config.limits.frame_memory_bytes_max = MEMORY_BYTES;
            config.protocol.cohorts_max = 1;
        });
        let port = joined(&link, 1);
        let filler = link.memory().frame(&[0; MEMORY_BYTES]);
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut read = pin!(link.gate(&port, Admit::Read));
        assert!(
            read.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        assert_eq!(link.metrics().read_paused_memory.get(), 1);
        send(&link, &port);
        drop(filler);
        link.wake_memory_waiters();
        assert_eq!(wakes.count(), 1);
        assert_eq!(
            read.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(true)
        );
    }

    #[test]
    fn a_closed_stream_is_told_at_the_gate() {
        let link = link_with(|config| config.protocol.frames_in_flight_per_stream_max = 1);
        let port = joined(&link, 1);
        send(&link, &port);
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut read = pin!(link.gate(&port, Admit::Read));
        assert!(
            read.as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
        );
        port.reset();
        assert_eq!(
            read.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(false)
        );
    }
}
