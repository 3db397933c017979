//! Cross-core routing: the messages cores exchange, the bounded lanes they travel in, the
//! overflow a sender keeps per destination, and the pausing and waking that keep every one of
//! them bounded.
//!
//! Owns: `HomeMsg` (stream to machine: Join, Frame, Closed, Written, and a relayed service
//! chunk, towards a cohort's home core), `OwnerMsg` (machine to stream: Send, Backlog,
//! Deliver, Close, and the outcome of a relay, towards the core that owns the connection),
//! `CoreLanes` (one core's inbound lanes: home, owner, credits, verification
//! results, and its doorbell), `Overflow` (one direction's waiting messages, a queue per
//! destination, the same for both directions) and `Router` (one core's sending side: lanes to
//! every core, an overflow per direction, and the local queue for messages to itself).
//!
//! Why two directions: a Join, a Credit or a Close must not wait behind a turn's worth of
//! deliveries, and order only matters within a direction (a stream's Join before its frames
//! before its end; an Ack before the deliveries and the Close that follow it). Credits need
//! no order at all and travel in a lane of their own; so do verification results.
//!
//! Bounds, and what happens at each:
//! - A full home or owner lane hands the message back; it waits in the sender's overflow
//!   for that destination, in order (later messages to that destination join it), and the
//!   destination rings the sender when it has taken messages, so nothing waits on a timer.
//! - While any home-direction overflow is non-empty, this core's readers pause (they are
//!   the only producers of home messages besides a few per stream end), so TCP pushes back.
//! - While its owner-direction overflows hold `owner_overflow_messages_max` messages in
//!   all, the core stops taking work that produces owner messages (Joins, frames,
//!   verification results), so backpressure is transitive: its own lanes fill, and its
//!   senders pause. (One step of work may add a bounded burst beyond it: the Closes of one
//!   reclaimed cohort, the deliveries of one publication, one per core.)
//!   Owner lanes are consumed unconditionally, and consuming them produces only a few home
//!   messages per stream (a queue reset, a write notice), so two cores waiting on each other
//!   always make progress.
//! - Credits and verification results travel in unbounded segment queues that allocate only
//!   what they hold: there is one credit and at most one result per frame in flight, so
//!   together they never hold more than the broker's frames in flight (every core's
//!   `frames_in_flight_per_core_max`), and a push never fails. (A preallocated lane per
//!   core would cost cores x frames in flight slots for each core.)
//!
//! Invariants of the I/O layer (checked here, in `link`, and by the simulation in
//! `bps_core::sim`):
//! - **Exactly one `Consumed` per credited frame.** A reader hands a frame over only with a
//!   credit; the machine answers every frame it is fed with exactly one `Consumed` (at once,
//!   after verification, or when the stream closes), which comes back here as one credit.
//! - **The RefCell borrow rule.** A core's state lives in `RefCell`s on its runtime thread.
//!   No borrow is held across an `.await`, nor across a call that can reach another
//!   `RefCell` of the same object (a port's close hook, the machine): borrow, copy or clone
//!   out what is needed, drop the borrow, then act. A double borrow is a panic, which ends
//!   the process (crash means crash).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bps_proto::{CohortKey, Frame, Hash, RelayId};
use bps_verify::pool::Done;
use bytes::Bytes;
use crossbeam::queue::SegQueue;

use super::lane::{Doorbell, Lane};
use crate::metrics::CoreMetrics;
use crate::protocol::CoreId;
use crate::protocol::{
    Arrival, ChunkFacts, CloseReason, ClosedBy, CohortSerial, Delivered, RelayOutcome, RelayReply,
    SpliceOutcome, StreamId, Targets, Ticket, WriteNotice,
};

/// Makes the frame of a relayed service chunk under the chosen admin stream's challenge
/// (docs/PROTOCOL.md W5); built by the carrier that read the request, run on the home core.
pub struct RelayFrames(pub Box<dyn Fn(&Hash) -> Frame + Send>);

impl std::fmt::Debug for RelayFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelayFrames")
    }
}

/// A verification result on its way back to the core that asked for it.
pub type VerifyDone = Done<(CoreId, Ticket)>;

/// To the home core of a stream's cohort: what the stream did.
#[derive(Debug)]
pub enum HomeMsg {
    /// The stream's first frame.
    Join {
        stream: StreamId,
        arrival: Arrival,
        frame: Frame,
    },
    /// A later frame, with when it was read.
    Frame {
        stream: StreamId,
        frame: Frame,
        read_at: Instant,
    },
    /// The stream ended for a reason the machine did not decide.
    Closed { stream: StreamId, cause: ClosedBy },
    /// W5: a service chunk for the cohort `key`, outside any stream, signed under the admin
    /// stream challenge `named` if the POST names one; the outcome goes back to `reply`.
    Relay {
        key: CohortKey,
        named: Option<Hash>,
        frames: RelayFrames,
        reply: RelayReply,
    },
    /// A frame sent with a notice is on the wire.
    Written {
        stream: StreamId,
        notice: WriteNotice,
    },
    /// Edge mode: `stream` is the cohort `cohort`'s upstream stream, joined OK at the root
    /// (`root`: the relay id its Ack named).
    Upstream {
        stream: StreamId,
        cohort: CohortSerial,
        root: Option<RelayId>,
    },
    /// Edge mode: the root's answer to the spliced stream `stream`'s Join.
    Spliced {
        stream: StreamId,
        outcome: SpliceOutcome,
    },
}

/// To the core that owns a stream's connection: what the machine decided for it.
#[derive(Debug)]
pub enum OwnerMsg {
    /// Queue one frame on one stream.
    Send {
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
    },
    /// D11: queue a history backlog on one stream (in this direction, so it stays in order
    /// with that stream's Send, Deliver and Close).
    Backlog {
        stream: StreamId,
        frames: Vec<Delivered>,
    },
    /// Queue one frame on `targets.all[from..to]` (all of them this core's), except the
    /// excluded ones.
    Deliver {
        frame: Bytes,
        targets: Targets,
        facts: Arc<ChunkFacts>,
        from: usize,
        to: usize,
        read_at: Option<Instant>,
    },
    /// End the stream.
    Close {
        stream: StreamId,
        reason: CloseReason,
    },
    /// What became of relay `relay` this core asked for.
    Relayed { relay: u64, outcome: RelayOutcome },
}

/// One core's inbound lanes, shared by every thread that sends to it.
#[derive(Debug)]
pub struct CoreLanes {
    pub doorbell: Arc<Doorbell>,
    pub home: Lane<HomeMsg>,
    pub owner: Lane<OwnerMsg>,
    credits: SegQueue<StreamId>,
    verified: SegQueue<VerifyDone>,
    /// Senders (by core) whose overflow towards this core waits for room.
    space_wanted: Box<[AtomicBool]>,
}

impl CoreLanes {
    /// The lanes of one core of `cores`: home and owner lanes of `messages_max` each.
    pub fn new(cores: usize, messages_max: usize) -> CoreLanes {
        let doorbell = Arc::new(Doorbell::default());
        CoreLanes {
            home: Lane::new(messages_max, Arc::clone(&doorbell)),
            owner: Lane::new(messages_max, Arc::clone(&doorbell)),
            credits: SegQueue::new(),
            verified: SegQueue::new(),
            space_wanted: (0..cores).map(|_| AtomicBool::new(false)).collect(),
            doorbell,
        }
    }

    /// A verification result for this core (from a pool worker).
    pub fn push_result(&self, done: VerifyDone) {
        self.verified.push(done);
        self.doorbell.ring();
    }

    /// The next verification result.
    pub fn pop_result(&self) -> Option<VerifyDone> {
        self.verified.pop()
    }

    /// The next credit for one of this core's streams.
    pub fn pop_credit(&self) -> Option<StreamId> {
        self.credits.pop()
    }

    /// Whether credits or results wait.
    pub fn has_credits_or_results(&self) -> (bool, bool) {
        (!self.credits.is_empty(), !self.verified.is_empty())
    }

    /// Messages waiting in the home and owner lanes.
    pub fn depth(&self) -> usize {
        self.home.len() + self.owner.len()
    }

    /// Rings every sender that waits for room here (after this core took messages).
    pub fn ring_waiting_senders(&self, all: &[CoreLanes]) {
        for (sender, wanted) in self.space_wanted.iter().enumerate() {
            if wanted.swap(false, Ordering::AcqRel) {
                all[sender].doorbell.ring();
            }
        }
    }
}

/// One core's sending side.
#[derive(Debug)]
pub struct Router {
    core: CoreId,
    lanes: Arc<[CoreLanes]>,
    metrics: Arc<CoreMetrics>,
    /// Home messages to this core itself, in order.
    local_home: RefCell<VecDeque<HomeMsg>>,
    overflow_home: RefCell<Overflow<HomeMsg>>,
    overflow_owner: RefCell<Overflow<OwnerMsg>>,
    owner_overflow_messages_max: usize,
    readers_waiting: RefCell<Vec<Waker>>,
}

impl Router {
    pub fn new(
        core: CoreId,
        lanes: Arc<[CoreLanes]>,
        metrics: Arc<CoreMetrics>,
        owner_overflow_messages_max: usize,
    ) -> Router {
        let cores = lanes.len();
        Router {
            core,
            lanes,
            metrics,
            local_home: RefCell::new(VecDeque::new()),
            overflow_home: RefCell::new(Overflow::new(cores, home_lane)),
            overflow_owner: RefCell::new(Overflow::new(cores, owner_lane)),
            owner_overflow_messages_max,
            readers_waiting: RefCell::new(Vec::new()),
        }
    }

    /// Every core's lanes.
    pub fn lanes(&self) -> &[CoreLanes] {
        &self.lanes
    }

    /// This core's own lanes.
    pub fn inbound(&self) -> &CoreLanes {
        &self.lanes[self.core.index()]
    }

    /// Sends towards a home core (this one included).
    pub fn to_home(&self, core: CoreId, msg: HomeMsg) {
        if core == self.core {
            self.local_home.borrow_mut().push_back(msg);
            self.inbound().doorbell.ring();
            return;
        }
        self.send_or_hold(&self.overflow_home, core, msg);
    }

    /// Sends towards another core that owns a stream (messages to this core's own streams
    /// are executed where they are decided, never routed).
    pub fn to_owner(&self, core: CoreId, msg: OwnerMsg) {
        assert_ne!(core, self.core, "a core executes its own streams' actions");
        self.send_or_hold(&self.overflow_owner, core, msg);
    }

    /// Sends `msg` through `overflow` towards `core`; a message that has to wait counts as
    /// a full inbox and asks `core` to ring this one when it has room.
    fn send_or_hold<T>(&self, overflow: &RefCell<Overflow<T>>, core: CoreId, msg: T) {
        let mut overflow = overflow.borrow_mut();
        if overflow.send(&self.lanes, core, msg) == Sent::Held {
            self.metrics.inbox_full.inc();
            self.want_space(core);
        }
    }

    /// One read-window credit for a stream of another core.
    pub fn credit(&self, core: CoreId, stream: StreamId) {
        assert_ne!(core, self.core, "a core credits its own streams directly");
        let lanes = &self.lanes[core.index()];
        lanes.credits.push(stream);
        lanes.doorbell.ring();
    }

    /// The next home message for this core: its own first, then the lane's.
    pub fn pop_home(&self) -> Option<HomeMsg> {
        let local = self.local_home.borrow_mut().pop_front();
        local.or_else(|| self.inbound().home.pop())
    }

    /// Whether home messages wait for this core.
    pub fn has_home(&self) -> bool {
        !self.local_home.borrow().is_empty() || !self.inbound().home.is_empty()
    }

    /// Moves overflowed messages into their lanes, in order, as far as there is room.
    pub fn retry_overflow(&self) {
        if self.overflowed() == 0 {
            return;
        }
        let want_space = |core| self.want_space(core);
        self.overflow_home
            .borrow_mut()
            .retry(&self.lanes, want_space);
        self.overflow_owner
            .borrow_mut()
            .retry(&self.lanes, want_space);
        if !self.reads_paused() {
            for waker in self.readers_waiting.borrow_mut().drain(..) {
                waker.wake();
            }
        }
    }

    /// Messages waiting in this core's overflows.
    pub fn overflowed(&self) -> usize {
        self.overflow_home.borrow().held + self.overflow_owner.borrow().held
    }

    /// Whether readers must wait: some home-direction overflow is non-empty.
    pub fn reads_paused(&self) -> bool {
        self.overflow_home.borrow().held > 0
    }

    /// Whether the core must not take work that produces owner messages.
    pub fn work_paused(&self) -> bool {
        self.overflow_owner.borrow().held >= self.owner_overflow_messages_max
    }

    /// `Ready` while reads are not paused; registers the reader's waker otherwise.
    pub fn poll_reads_unpaused(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.reads_paused() {
            self.readers_waiting.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    fn want_space(&self, core: CoreId) {
        self.lanes[core.index()].space_wanted[self.core.index()].store(true, Ordering::Release);
    }
}

/// Whether a message went into its lane or waits in the overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sent {
    Laned,
    Held,
}

/// One direction's overflow (home or owner): per destination core, the messages its full
/// lane handed back, in order. A destination with waiting messages gets later ones queued
/// behind them, never pushed past them into its lane.
#[derive(Debug)]
struct Overflow<T> {
    queues: Vec<VecDeque<T>>,
    /// Messages waiting in all of `queues`.
    held: usize,
    /// This direction's lane in a core's inbound lanes.
    lane: fn(&CoreLanes) -> &Lane<T>,
}

impl<T> Overflow<T> {
    fn new(cores: usize, lane: fn(&CoreLanes) -> &Lane<T>) -> Self {
        Overflow {
            queues: (0..cores).map(|_| VecDeque::new()).collect(),
            held: 0,
            lane,
        }
    }

    /// Pushes `msg` into `core`'s lane, or behind the messages already waiting for it.
    fn send(&mut self, lanes: &[CoreLanes], core: CoreId, msg: T) -> Sent {
        let queue = &mut self.queues[core.index()];
        let msg = if queue.is_empty() {
            match (self.lane)(&lanes[core.index()]).push(msg) {
                Ok(()) => return Sent::Laned,
                Err(msg) => msg,
            }
        } else {
            msg
        };
        queue.push_back(msg);
        self.held += 1;
        Sent::Held
    }

    /// Moves waiting messages into their lanes, in order, as far as there is room; calls
    /// `want_space` for every destination that still has messages waiting.
    fn retry(&mut self, lanes: &[CoreLanes], want_space: impl Fn(CoreId)) {
        for (core, queue) in CoreId::all(lanes.len()).zip(self.queues.iter_mut()) {
            let lane = (self.lane)(&lanes[core.index()]);
            while let Some(msg) = queue.pop_front() {
                if let Err(msg) = lane.push(msg) {
                    queue.push_front(msg);
                    break;
                }
                self.held -= 1;
            }
            if !queue.is_empty() {
                want_space(core);
            }
        }
    }
}

fn home_lane(lanes: &CoreLanes) -> &Lane<HomeMsg> {
    &lanes.home
}

fn owner_lane(lanes: &CoreLanes) -> &Lane<OwnerMsg> {
    &lanes.owner
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll, Wake, Waker};

    use super::{CoreLanes, HomeMsg, OwnerMsg, Router};
    use crate::metrics::CoreMetrics;
    use crate::protocol::CoreId;
    use crate::protocol::{CloseReason, ClosedBy, StreamId};

    fn lanes(messages_max: usize) -> Arc<[CoreLanes]> {
        (0..2).map(|_| CoreLanes::new(2, messages_max)).collect()
    }

    fn closed(local: u64) -> HomeMsg {
        HomeMsg::Closed {
            stream: StreamId::new(0, local),
            cause: ClosedBy::Peer,
        }
    }

    fn close(local: u64) -> OwnerMsg {
        OwnerMsg::Close {
            stream: StreamId::new(1, local),
            reason: CloseReason::Inactive,
        }
    }

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_full_lane_overflows_in_order_pauses_readers_and_the_consumer_wakes_the_sender() {
        let lanes = lanes(2);
        let router = Router::new(
            CoreId::new(0),
            Arc::clone(&lanes),
            CoreMetrics::new_shared(),
            100,
        );
        for local in 0..5 {
            router.to_home(CoreId::new(1), closed(local));
        }
        assert_eq!(router.overflowed(), 3);
        assert!(router.reads_paused());
        let woken = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        assert_eq!(router.poll_reads_unpaused(&mut cx), Poll::Pending);
        // The destination takes messages and rings the waiting sender's doorbell.
        assert!(lanes[1].home.pop().is_some());
        assert!(lanes[1].home.pop().is_some());
        lanes[1].ring_waiting_senders(&lanes);
        let mut bell = Context::from_waker(Waker::noop());
        assert_eq!(lanes[0].doorbell.poll_rung(&mut bell), Poll::Ready(()));
        router.retry_overflow();
        assert_eq!(router.overflowed(), 1);
        assert_eq!(woken.0.load(Ordering::Relaxed), 0, "still paused");
        let mut order = Vec::new();
        while let Some(HomeMsg::Closed { stream, .. }) = lanes[1].home.pop() {
            order.push(stream.local());
        }
        lanes[1].ring_waiting_senders(&lanes);
        router.retry_overflow();
        assert_eq!(router.overflowed(), 0);
        assert!(!router.reads_paused());
        assert_eq!(
            woken.0.load(Ordering::Relaxed),
            1,
            "readers woken once room came"
        );
        while let Some(HomeMsg::Closed { stream, .. }) = lanes[1].home.pop() {
            order.push(stream.local());
        }
        assert_eq!(order, vec![2, 3, 4], "overflow keeps the order");
    }

    #[test]
    fn owner_overflow_at_its_bound_pauses_work_not_reads() {
        let lanes = lanes(1);
        let router = Router::new(
            CoreId::new(0),
            Arc::clone(&lanes),
            CoreMetrics::new_shared(),
            2,
        );
        let other = CoreId::new(1);
        router.to_owner(other, close(0));
        router.to_owner(other, close(1));
        assert!(!router.work_paused());
        router.to_owner(other, close(2));
        assert!(router.work_paused());
        assert!(!router.reads_paused());
        while lanes[1].owner.pop().is_some() {}
        router.retry_overflow();
        assert!(!router.work_paused());
    }
}
