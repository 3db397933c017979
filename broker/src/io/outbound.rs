//! The outbound queue of one receiving stream, and when it means the stream is a slow
//! consumer (R26).
//!
//! Owns: `OutboundQueue`, a bounded FIFO of outgoing messages (shared bodies: a delivery to
//! many streams is one allocation and a refcount per stream), drained in batches for
//! vectored writes, and the R26 decision.
//! Never does: I/O, or grow past `QUEUE_SLACK_FACTOR` times its bound.
//!
//! R26 is for subscribers that do not keep up, not for the broker's own batching. A core
//! queues a turn's deliveries before the stream's writer gets to run, so a queue can reach
//! its bound while the writer has simply not had its turn yet; measured at 1b5c89d, a member
//! of a flooded `ALL` cohort that read everything was reset 296 ms in. So the bound is
//! measured against what the writer could not hand to the kernel: a push beyond
//! `frames_max` resets the stream only while the kernel is refusing bytes (the writer's last
//! write was partial: the socket's send buffer is full, so the peer is at least a send
//! buffer plus `frames_max` frames behind). Otherwise the frame goes into the slack, up to
//! `QUEUE_SLACK_FACTOR * frames_max`, which a core's per-turn fan-out budget keeps a writer
//! that runs every turn from ever reaching; reaching it resets the stream all the same.

use std::collections::VecDeque;
use std::fmt;

use super::outgoing::Outgoing;
use crate::limits::QUEUE_SLACK_FACTOR;

/// Why a push was refused: the stream must be reset (R26, counted as `queue_reset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueFull {
    /// At the bound while the kernel refuses bytes: the peer does not keep up.
    SlowConsumer {
        /// The R26 bound in frames.
        frames_max: usize,
    },
    /// At the slack's end, whatever the kernel says.
    SlackExhausted {
        /// Frames the queue may hold at most.
        frames_hard_max: usize,
    },
    /// The stream would hold more than `limits.outbound_queue_bytes_max` (the port's check).
    OverBytes {
        /// Bytes the stream may hold at most.
        bytes_max: usize,
    },
}

impl fmt::Display for QueueFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueFull::SlowConsumer { frames_max } => write!(
                f,
                "outbound queue at {frames_max} frames while the peer's socket is full"
            ),
            QueueFull::SlackExhausted { frames_hard_max } => {
                write!(
                    f,
                    "outbound queue at its hard bound of {frames_hard_max} frames"
                )
            }
            QueueFull::OverBytes { bytes_max } => {
                write!(f, "outbound queue at its bound of {bytes_max} bytes")
            }
        }
    }
}

impl std::error::Error for QueueFull {}

/// What a successful push did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Queued {
    /// Within the R26 bound.
    Within,
    /// Beyond it, in the slack (the writer had not been refused by the kernel).
    InSlack,
}

/// A bounded queue of frames towards one stream; single writer, single reader.
#[derive(Debug)]
pub struct OutboundQueue {
    frames_max: usize,
    queued: VecDeque<Outgoing>,
    /// Whether the writer's last completed write was partial (the kernel refused bytes).
    kernel_full: bool,
}

impl OutboundQueue {
    /// An empty queue with the R26 bound `frames_max` (`outbound_queue_frames_max`).
    ///
    /// # Panics
    /// If `frames_max` is 0.
    #[must_use]
    pub fn new(frames_max: usize) -> Self {
        assert!(
            frames_max >= 1,
            "an outbound queue needs room for one frame"
        );
        OutboundQueue {
            frames_max,
            // Grows by doubling to what the stream ever held (an idle subscriber's Ack and
            // roster, a busy one's bound and slack), then keeps it: a few allocations per
            // stream, none per frame, and an idle stream does not hold its whole bound.
            queued: VecDeque::new(),
            kernel_full: false,
        }
    }

    /// Appends a frame, or says why the stream must be reset (nothing is queued then).
    pub fn push(&mut self, frame: Outgoing) -> Result<Queued, QueueFull> {
        let queued = self.queued.len();
        let placed = if queued < self.frames_max {
            Queued::Within
        } else if self.kernel_full {
            return Err(QueueFull::SlowConsumer {
                frames_max: self.frames_max,
            });
        } else if queued < self.frames_hard_max() {
            Queued::InSlack
        } else {
            return Err(QueueFull::SlackExhausted {
                frames_hard_max: self.frames_hard_max(),
            });
        };
        self.queued.push_back(frame);
        Ok(placed)
    }

    /// Hands up to `frames_max` frames from the front to `sink`, in order, until it gives
    /// one back (it has no room); returns how many it took.
    pub fn drain_into(
        &mut self,
        frames_max: usize,
        mut sink: impl FnMut(Outgoing) -> Result<(), Outgoing>,
    ) -> usize {
        let mut moved = 0;
        while moved < frames_max {
            let Some(frame) = self.queued.pop_front() else {
                break;
            };
            if let Err(refused) = sink(frame) {
                self.queued.push_front(refused);
                break;
            }
            moved += 1;
        }
        moved
    }

    /// The writer's write completed: `partial` when the kernel took less than offered.
    pub fn wrote(&mut self, partial: bool) {
        self.kernel_full = partial;
    }

    /// Drops everything queued (the stream is being reset).
    pub fn clear(&mut self) {
        self.queued.clear();
    }

    /// Frames queued.
    #[must_use]
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// The most frames the queue ever holds.
    #[must_use]
    pub fn frames_hard_max(&self) -> usize {
        self.frames_max * QUEUE_SLACK_FACTOR
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{OutboundQueue, QueueFull, Queued};
    use crate::io::outgoing::{Body, Outgoing};

    fn frame() -> Outgoing {
        Outgoing::bare(Bytes::from_static(b"frame"))
    }

    #[test]
    fn beyond_the_bound_a_writer_the_kernel_takes_from_gets_slack() {
        let mut queue = OutboundQueue::new(2);
        assert_eq!(queue.push(frame()), Ok(Queued::Within));
        assert_eq!(queue.push(frame()), Ok(Queued::Within));
        assert_eq!(queue.push(frame()), Ok(Queued::InSlack));
        assert_eq!(queue.push(frame()), Ok(Queued::InSlack));
        assert_eq!(
            queue.push(frame()),
            Err(QueueFull::SlackExhausted { frames_hard_max: 4 })
        );
        assert_eq!(queue.len(), 4);
    }

    #[test]
    fn beyond_the_bound_a_peer_whose_socket_is_full_is_a_slow_consumer() {
        let mut queue = OutboundQueue::new(2);
        queue.push(frame()).expect("room");
        queue.wrote(true);
        queue.push(frame()).expect("room");
        assert_eq!(
            queue.push(frame()),
            Err(QueueFull::SlowConsumer { frames_max: 2 })
        );
        // A complete write: the kernel takes bytes again, the slack is open again.
        queue.wrote(false);
        assert_eq!(queue.push(frame()), Ok(Queued::InSlack));
    }

    #[test]
    fn drain_moves_frames_in_order_up_to_the_limit() {
        let mut queue = OutboundQueue::new(4);
        for body in [b"a", b"b", b"c"] {
            queue
                .push(Outgoing::bare(Bytes::from_static(body)))
                .expect("room");
        }
        let mut out = Vec::new();
        assert_eq!(
            queue.drain_into(2, |frame| {
                out.push(frame.body);
                Ok(())
            }),
            2
        );
        assert_eq!(
            out,
            vec![
                Body::One(Bytes::from_static(b"a")),
                Body::One(Bytes::from_static(b"b"))
            ]
        );
        assert_eq!(
            queue.drain_into(8, |frame| {
                out.push(frame.body);
                Ok(())
            }),
            1
        );
        assert_eq!(queue.len(), 0);
        queue.push(frame()).expect("room");
        queue.clear();
        assert_eq!(queue.len(), 0);
    }
}
