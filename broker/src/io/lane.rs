//! Bounded cross-thread queues into one core, and the doorbell that wakes it.
//!
//! Owns: `Doorbell` (the waker of one core's main loop: any thread may ring it, and a ring
//! before the loop parks is not lost) and `Lane<T>` (a bounded MPMC queue whose pushes ring
//! the consuming core's doorbell). The router builds a core's inbound lanes from these, the
//! control plane its mailbox, the verification pool its result lane.
//! Never does: block, or grow. A push into a full lane hands the value back (`Err`), and
//! what the sender does then is the sender's design (overflow and pause, see `router`).
//!
//! A woken waker is consumed, so a burst of pushes costs one wake; with monoio's `sync`
//! feature a waker may be woken from any thread (it writes the target runtime's eventfd).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use atomic_waker::AtomicWaker;
use crossbeam::queue::ArrayQueue;

/// Wakes one core's main loop from any thread.
#[derive(Debug, Default)]
pub struct Doorbell {
    waker: AtomicWaker,
    rung: AtomicBool,
}

impl Doorbell {
    /// Wakes the loop, now or at its next wait.
    pub fn ring(&self) {
        self.rung.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// `Ready` once rung since the last `Ready`; registers `cx` otherwise.
    pub fn poll_rung(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.rung.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        if self.rung.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// A bounded queue into one core; a push rings that core's doorbell.
#[derive(Debug)]
pub struct Lane<T> {
    queue: ArrayQueue<T>,
    consumer: Arc<Doorbell>,
}

impl<T> Lane<T> {
    /// A lane holding at most `capacity` values, consumed by the core behind `consumer`.
    pub fn new(capacity: usize, consumer: Arc<Doorbell>) -> Self {
        Lane {
            queue: ArrayQueue::new(capacity),
            consumer,
        }
    }

    /// Queues `value` and rings the consumer, or hands `value` back at the bound.
    pub fn push(&self, value: T) -> Result<(), T> {
        self.queue.push(value)?;
        self.consumer.ring();
        Ok(())
    }

    /// Takes the oldest value.
    pub fn pop(&self) -> Option<T> {
        self.queue.pop()
    }

    /// Values queued now.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The bound.
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    use super::{Doorbell, Lane};

    #[test]
    fn a_full_lane_hands_the_value_back() {
        let lane = Lane::new(2, Arc::new(Doorbell::default()));
        assert_eq!(lane.push(1), Ok(()));
        assert_eq!(lane.push(2), Ok(()));
        assert_eq!(lane.push(3), Err(3));
        assert_eq!(lane.len(), 2);
        assert_eq!(lane.pop(), Some(1));
        assert_eq!(lane.push(3), Ok(()));
        assert_eq!(lane.capacity(), 2);
    }

    #[test]
    fn a_ring_before_the_wait_is_not_lost() {
        let bell = Arc::new(Doorbell::default());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(bell.poll_rung(&mut cx), Poll::Pending);
        let lane = Lane::new(1, Arc::clone(&bell));
        lane.push(7).expect("room");
        assert_eq!(bell.poll_rung(&mut cx), Poll::Ready(()));
        assert_eq!(bell.poll_rung(&mut cx), Poll::Pending);
    }
}
