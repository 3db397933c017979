//! Cross-core inboxes: the only way one core (or a verification worker, or the admin
//! thread) talks to another core's runtime.
//!
//! Owns the message type and the bounded queue with its wake-up. An inbox never blocks
//! its consumer and never grows: `push` hands the message back at the bound and the
//! sender keeps it in its own overflow queue (see `shard.rs`), which pauses that sender's
//! socket reads until the overflow drains. Verification workers are plain threads and may
//! spin-wait instead (`push_blocking`).
//!
//! Waking: the consumer registers its task waker; a producer wakes it after a push. With
//! monoio's `sync` feature a waker may be woken from any thread (it writes the target
//! runtime's eventfd), and a woken waker is consumed, so a burst of pushes costs one wake.

use std::task::Waker;
use std::time::{Duration, Instant};

use atomic_waker::AtomicWaker;
use bps_proto::Frame;
use bps_verify::pool::Done;
use bytes::Bytes;
use crossbeam::queue::ArrayQueue;

use crate::protocol::{
    CloseReason, ClosedBy, PeerId, ProtocolConfig, StreamId, Targets, Ticket, WriteNotice,
};

/// A verification result on its way back to the core that asked for it.
pub type VerifyDone = Done<(usize, Ticket)>;

/// Everything that crosses between cores.
#[derive(Debug)]
pub enum Msg {
    /// To the cohort's home core: a stream's first frame.
    Join {
        stream: StreamId,
        peer: PeerId,
        frame: Frame,
    },
    /// To the home core: a later frame of a joined stream.
    Frame {
        stream: StreamId,
        frame: Frame,
        read_at: Instant,
    },
    /// To the home core: the stream ended for a reason the protocol core did not decide.
    Closed { stream: StreamId, cause: ClosedBy },
    /// To the home core: a frame sent with a notice is on the wire.
    Written {
        stream: StreamId,
        notice: WriteNotice,
    },
    /// To the core that asked: a batch of verification results.
    Verified(Vec<VerifyDone>),
    /// To the owning core: queue one frame on one stream.
    Send {
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
    },
    /// To the owning core: queue one frame on `targets.all[from..to]` (all of them its own)
    /// except the excluded ones.
    Deliver {
        frame: Bytes,
        targets: Targets,
        from: usize,
        to: usize,
        read_at: Option<Instant>,
    },
    /// To the owning core: the home core finished one frame of this stream.
    Credit { stream: StreamId },
    /// To the owning core: end this stream.
    Close {
        stream: StreamId,
        reason: CloseReason,
    },
    /// From the admin thread: answer to show the core is alive.
    Ping {
        reply: crossbeam::channel::Sender<usize>,
    },
    /// From the admin thread: describe the cohorts homed here.
    Snapshot {
        reply: crossbeam::channel::Sender<Vec<serde_json::Value>>,
    },
    /// From the signal thread: apply reloaded protocol settings.
    Reload(Box<ProtocolConfig>),
    /// From the signal thread: stop accepting and close every stream cleanly.
    Drain,
}

/// One core's inbox.
#[derive(Debug)]
pub struct Inbox {
    queue: ArrayQueue<Msg>,
    waker: AtomicWaker,
}

/// How long a blocking pusher sleeps between attempts at a full inbox.
const BLOCKING_PUSH_BACKOFF: Duration = Duration::from_micros(50);

impl Inbox {
    /// An inbox holding at most `capacity` messages.
    pub fn new(capacity: usize) -> Self {
        Self {
            queue: ArrayQueue::new(capacity),
            waker: AtomicWaker::new(),
        }
    }

    /// Queues `msg` and wakes the consumer, or returns `msg` at the bound.
    pub fn push(&self, msg: Msg) -> Result<(), Msg> {
        self.queue.push(msg)?;
        self.waker.wake();
        Ok(())
    }

    /// For threads outside the runtimes (verification workers): waits for room.
    /// The consumer never waits on a producer, so this always ends.
    pub fn push_blocking(&self, mut msg: Msg) {
        loop {
            match self.push(msg) {
                Ok(()) => return,
                Err(back) => {
                    msg = back;
                    self.waker.wake();
                    std::thread::sleep(BLOCKING_PUSH_BACKOFF);
                }
            }
        }
    }

    /// Takes the oldest message.
    pub fn pop(&self) -> Option<Msg> {
        self.queue.pop()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Messages queued now.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Registers the consumer's waker (call before re-checking `is_empty`).
    pub fn register(&self, waker: &Waker) {
        self.waker.register(waker);
    }
}

/// Sends to an inbox from the admin or signal thread and waits for a reply with a deadline.
pub fn ask<T>(
    inbox: &Inbox,
    make: impl FnOnce(crossbeam::channel::Sender<T>) -> Msg,
    deadline: Duration,
) -> Option<T> {
    let (reply, answer) = crossbeam::channel::bounded(1);
    if inbox.push(make(reply)).is_err() {
        return None;
    }
    answer.recv_timeout(deadline).ok()
}
