//! The control plane: a small mailbox per core beside its data lanes, for the admin and
//! signal threads.
//!
//! Owns: `Control` (ping, reload, drain, the cohort summaries, one cohort's streams),
//! `Mailbox` (one core's bounded control queue, which rings the same doorbell as its data
//! lanes), the core's heartbeat (the time its loop last began a turn) and `ask` (send and
//! wait for the answer with a deadline).
//! Never does: share a bound with data. A core takes its whole control mailbox at the start
//! of every turn, before any data and whatever its data lanes hold, so a core that is only
//! busy (full lanes are the designed backpressure state) always answers, and only a core
//! that is stuck or dead stays silent, which `/healthz` and the watchdog report within their
//! deadline. Senders never block: a push into a full mailbox fails at once (a core that has
//! not taken `CONTROL_MESSAGES_MAX` messages is not answering anyway), so drain and reload
//! finish even when a core is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bps_proto::CohortKey;
use crossbeam::channel::{self, Receiver, Sender};
use crossbeam::queue::ArrayQueue;

use super::lane::Doorbell;
use crate::protocol::{CohortStreams, CohortSummary, ProtocolConfig};

/// Control messages one core's mailbox holds: a few admin requests and signals at a time.
pub const CONTROL_MESSAGES_MAX: usize = 64;

/// What the admin and signal threads ask of a core.
#[derive(Debug)]
pub enum Control {
    /// Answer, to show the core is alive.
    Ping { reply: Sender<()> },
    /// Apply reloaded protocol settings.
    Reload(Box<ProtocolConfig>),
    /// Stop accepting and close every stream cleanly.
    Drain,
    /// One summary per cohort homed here.
    Cohorts { reply: Sender<Vec<CohortSummary>> },
    /// A page of the streams of one cohort, if it is homed here.
    CohortStreams {
        key: CohortKey,
        offset: usize,
        limit: usize,
        reply: Sender<Option<CohortStreams>>,
    },
}

/// One core's control mailbox.
#[derive(Debug)]
pub struct Mailbox {
    queue: ArrayQueue<Control>,
    doorbell: Arc<Doorbell>,
    /// Milliseconds since the broker's start when the core last began a turn.
    heartbeat_ms: AtomicU64,
}

impl Mailbox {
    /// The mailbox of the core behind `doorbell`.
    pub fn new(doorbell: Arc<Doorbell>) -> Mailbox {
        Mailbox {
            queue: ArrayQueue::new(CONTROL_MESSAGES_MAX),
            doorbell,
            heartbeat_ms: AtomicU64::new(0),
        }
    }

    /// Queues `message` and rings the core; `false` when the mailbox is full.
    pub fn send(&self, message: Control) -> bool {
        if self.queue.push(message).is_err() {
            return false;
        }
        self.doorbell.ring();
        true
    }

    /// The next message, for the core.
    pub fn take(&self) -> Option<Control> {
        self.queue.pop()
    }

    /// Whether messages wait.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The core began a turn at `now_ms`.
    pub fn beat(&self, now_ms: u64) {
        self.heartbeat_ms.store(now_ms, Ordering::Relaxed);
    }

    /// When the core last began a turn.
    pub fn heartbeat_ms(&self) -> u64 {
        self.heartbeat_ms.load(Ordering::Relaxed)
    }
}

/// Sends a request made by `make` to every mailbox at once and waits up to `deadline` in all
/// for the answers; `None` for a core whose mailbox was full or that did not answer in time.
pub fn ask_all<T>(
    mailboxes: &[Mailbox],
    make: impl Fn(Sender<T>) -> Control,
    deadline: Duration,
) -> Vec<Option<T>> {
    let until = Instant::now() + deadline;
    let pending: Vec<Option<Receiver<T>>> = mailboxes
        .iter()
        .map(|mailbox| {
            let (reply, answer) = channel::bounded(1);
            mailbox.send(make(reply)).then_some(answer)
        })
        .collect();
    pending
        .into_iter()
        .map(|answer| {
            answer.and_then(|answer| {
                answer
                    .recv_timeout(until.saturating_duration_since(Instant::now()))
                    .ok()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{CONTROL_MESSAGES_MAX, Control, Mailbox, ask_all};
    use crate::io::lane::Doorbell;

    #[test]
    fn a_full_or_silent_core_is_reported_at_the_deadline_and_the_others_answer() {
        let mailboxes: Arc<[Mailbox]> = (0..3)
            .map(|_| Mailbox::new(Arc::new(Doorbell::default())))
            .collect();
        for _ in 0..CONTROL_MESSAGES_MAX {
            assert!(mailboxes[0].send(Control::Drain));
        }
        assert!(!mailboxes[0].send(Control::Drain), "full");
        let answering = Arc::clone(&mailboxes);
        let responder = std::thread::spawn(move || {
            loop {
                if let Some(Control::Ping { reply }) = answering[1].take() {
                    let _ = reply.send(());
                    return;
                }
                std::thread::yield_now();
            }
        });
        let started = Instant::now();
        let answers = ask_all(
            &mailboxes,
            |reply| Control::Ping { reply },
            Duration::from_millis(300),
        );
        assert_eq!(answers, vec![None, Some(()), None]);
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "one deadline for all"
        );
        responder.join().expect("responder");
    }
}
