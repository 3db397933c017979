//! The outbound queue of one receiving stream (R26).
//!
//! Owns: `OutboundQueue`, a bounded FIFO of encoded frames (shared `Bytes`, so a delivery to
//! many streams is one allocation and a refcount per stream), drained in batches for
//! vectored writes.
//! Never does: I/O, track write notices (the I/O layer keys them by frame sequence), or grow
//! past its bound: a push into a full queue is a typed `QueueFull`, which the I/O layer
//! answers by resetting the stream and reporting `ClosedBy::QueueOverflow` to the machine
//! (counted as `queue_reset`).

use std::collections::VecDeque;
use std::fmt;

use bytes::Bytes;

/// A push into a full queue: the stream must be reset (R26).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFull {
    /// The queue's bound in frames.
    pub frames_max: usize,
}

impl fmt::Display for QueueFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "outbound queue full at {} frames", self.frames_max)
    }
}

impl std::error::Error for QueueFull {}

/// A bounded queue of frames towards one stream; single writer, single reader.
#[derive(Debug)]
pub struct OutboundQueue {
    frames_max: usize,
    queued: VecDeque<Bytes>,
    bytes_queued: usize,
}

impl OutboundQueue {
    /// An empty queue of at most `frames_max` frames (`outbound_queue_frames_max`).
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
            queued: VecDeque::with_capacity(frames_max),
            bytes_queued: 0,
        }
    }

    /// Appends a frame, or reports that the queue is full (nothing is queued then).
    pub fn push(&mut self, frame: Bytes) -> Result<(), QueueFull> {
        if self.queued.len() >= self.frames_max {
            return Err(QueueFull {
                frames_max: self.frames_max,
            });
        }
        self.bytes_queued += frame.len();
        self.queued.push_back(frame);
        Ok(())
    }

    /// Hands up to `frames_max` frames from the front to `sink`, in order (for a `Vec`:
    /// `|frame| frames.push(frame)`); returns how many.
    pub fn drain_into(&mut self, frames_max: usize, mut sink: impl FnMut(Bytes)) -> usize {
        let moved = frames_max.min(self.queued.len());
        for frame in self.queued.drain(..moved) {
            self.bytes_queued -= frame.len();
            sink(frame);
        }
        moved
    }

    /// Drops everything queued (the stream is being reset).
    pub fn clear(&mut self) {
        self.queued.clear();
        self.bytes_queued = 0;
    }

    /// Frames queued.
    #[must_use]
    pub fn len(&self) -> usize {
        self.queued.len()
    }

    /// Whether nothing is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// Bytes queued, for gauges.
    #[must_use]
    pub fn bytes_queued(&self) -> usize {
        self.bytes_queued
    }

    /// The bound in frames.
    #[must_use]
    pub fn frames_max(&self) -> usize {
        self.frames_max
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{OutboundQueue, QueueFull};

    #[test]
    fn push_is_refused_at_the_bound() {
        let mut queue = OutboundQueue::new(2);
        assert_eq!(queue.push(Bytes::from_static(b"a")), Ok(()));
        assert_eq!(queue.push(Bytes::from_static(b"bc")), Ok(()));
        assert_eq!(
            queue.push(Bytes::from_static(b"d")),
            Err(QueueFull { frames_max: 2 })
        );
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.bytes_queued(), 3);
    }

    #[test]
    fn drain_moves_frames_in_order_up_to_the_limit() {
        let mut queue = OutboundQueue::new(4);
        for body in [b"a", b"b", b"c"] {
            assert_eq!(queue.push(Bytes::from_static(body)), Ok(()));
        }
        let mut out = Vec::new();
        assert_eq!(queue.drain_into(2, |frame| out.push(frame)), 2);
        assert_eq!(
            out,
            vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")]
        );
        assert_eq!(queue.drain_into(8, |frame| out.push(frame)), 1);
        assert!(queue.is_empty());
        assert_eq!(queue.bytes_queued(), 0);
        assert_eq!(queue.frames_max(), 4);
    }
}
