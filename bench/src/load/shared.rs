//! What the threads of one run share: the measurement window, the published frames for
//! byte-for-byte comparison, closed-loop send times, the stop flag and the counters the
//! progress line reads.
//!
//! Owns: [`Shared`] and [`PublisherShared`]. Everything is written before the sending and
//! receiving threads start except the atomics, so no lock is ever taken on the hot path;
//! counters are `Relaxed` (they are statistics), the closed-loop send times are stored
//! before the frame is written and loaded after it arrived (`Release`/`Acquire`).
//!
//! Never: decides anything; the sender and receiver do.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;

/// One publisher's shared facts.
#[derive(Debug)]
pub struct PublisherShared {
    /// Its cohort.
    pub cohort: u32,
    /// The DATA index of sequence 0 (index = base + sequence), when known.
    pub base_index: Option<u64>,
    /// Its presigned frames by sequence (varint and body), for byte-for-byte comparison by
    /// subscribers that do not verify the signature; empty when not known (NATS, `sub`).
    pub frames: Vec<Bytes>,
    /// Closed loop: when each sequence was written (Unix ns, 0 = not yet); empty in open
    /// loop, where the stamp carries the intended time.
    pub sent_ns: Vec<AtomicU64>,
}

impl PublisherShared {
    /// When `sequence` was sent: the stamp's intended time if it has one, else the recorded
    /// write time (closed loop), else `None`.
    pub fn sent_at(&self, sequence: u64, intended_ns: u64) -> Option<u64> {
        if intended_ns != 0 {
            return Some(intended_ns);
        }
        let slot = self.sent_ns.get(usize::try_from(sequence).ok()?)?;
        match slot.load(Ordering::Acquire) {
            0 => None,
            at => Some(at),
        }
    }
}

/// A run's shared state.
#[derive(Debug)]
pub struct Shared {
    /// Messages sent at or after this time (Unix ns) are measured...
    pub measure_from_ns: u64,
    /// ...and before this one.
    pub measure_to_ns: u64,
    /// Every publisher, by global number.
    pub publishers: Vec<PublisherShared>,
    /// Set when the receivers should stop.
    pub stop: AtomicBool,
    /// Messages written by all publishers.
    pub published: AtomicU64,
    /// Deliveries received by all subscribers.
    pub delivered: AtomicU64,
    /// Deliveries of measured messages to subscribers that read every frame.
    pub delivered_measured: AtomicU64,
    /// Frames completed on streams that only count bytes (all, warm-up included).
    pub counted_frames: AtomicU64,
    /// Frames that failed verification or comparison.
    pub invalid: AtomicU64,
    /// Subscriber streams the broker closed.
    pub resets: AtomicU64,
    /// Deliveries received per cohort (all, warm-up included): the closed loop's window.
    pub cohort_delivered: Vec<AtomicU64>,
    /// Subscribers per cohort running in this process (0: none, the window is off).
    pub cohort_subscribers: Vec<u64>,
    /// Publishers per cohort (the window is per publisher).
    pub cohort_publishers: Vec<u64>,
}

impl Shared {
    /// Shared state for a run measuring `[from, to)`.
    pub fn new(
        measure_from_ns: u64,
        measure_to_ns: u64,
        publishers: Vec<PublisherShared>,
        cohort_subscribers: Vec<u64>,
    ) -> Self {
        let mut cohort_publishers = vec![0u64; cohort_subscribers.len()];
        for publisher in &publishers {
            if let Some(count) = cohort_publishers.get_mut(publisher.cohort as usize) {
                *count += 1;
            }
        }
        Self {
            cohort_publishers,
            cohort_delivered: cohort_subscribers
                .iter()
                .map(|_| AtomicU64::new(0))
                .collect(),
            cohort_subscribers,
            measure_from_ns,
            measure_to_ns,
            publishers,
            stop: AtomicBool::new(false),
            published: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            delivered_measured: AtomicU64::new(0),
            counted_frames: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            resets: AtomicU64::new(0),
        }
    }

    /// Whether a message sent at `sent_ns` is inside the measurement window.
    pub fn measured(&self, sent_ns: u64) -> bool {
        (self.measure_from_ns..self.measure_to_ns).contains(&sent_ns)
    }

    /// Closed loop with a window of `window` messages: the number of messages of a
    /// publisher of `cohort` that may have been sent, given its subscribers' deliveries
    /// so far (`None`: no subscribers here, no window). The window is the cohort's: with
    /// several publishers each may be `window / publishers` (at least 1) ahead, since every
    /// subscriber's queue holds all of their messages (R26 bounds it).
    pub fn window_limit(&self, cohort: u32, window: u64) -> Option<u64> {
        let subscribers = *self.cohort_subscribers.get(cohort as usize)?;
        let publishers = self.cohort_publishers.get(cohort as usize)?.max(&1);
        if subscribers == 0 || window == 0 {
            return None;
        }
        let delivered = self
            .cohort_delivered
            .get(cohort as usize)?
            .load(Ordering::Relaxed);
        Some(delivered / subscribers / publishers + (window / publishers).max(1))
    }

    /// Whether the receivers should stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Adds `count` to a counter.
    pub fn add(counter: &AtomicU64, count: u64) {
        if count > 0 {
            counter.fetch_add(count, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publisher(cohort: u32) -> PublisherShared {
        PublisherShared {
            cohort,
            base_index: None,
            frames: Vec::new(),
            sent_ns: Vec::new(),
        }
    }

    #[test]
    fn the_window_is_per_publisher_of_the_cohort() {
        // Cohort 0: one publisher, 10 subscribers; cohort 1: 50 publishers, 4 subscribers.
        let publishers = std::iter::once(publisher(0))
            .chain((0..50).map(|_| publisher(1)))
            .collect();
        let shared = Shared::new(0, 1, publishers, vec![10, 4]);
        assert_eq!(shared.window_limit(0, 8), Some(8), "nothing delivered yet");
        Shared::add(&shared.cohort_delivered[0], 10 * 30);
        assert_eq!(shared.window_limit(0, 8), Some(30 + 8));
        // 4 subscribers got 200 messages each, 4 from each of the 50 publishers; a window of
        // 100 for the cohort is 2 per publisher, and never less than 1.
        Shared::add(&shared.cohort_delivered[1], 4 * 200);
        assert_eq!(shared.window_limit(1, 100), Some(4 + 2));
        assert_eq!(shared.window_limit(1, 8), Some(4 + 1));
        assert_eq!(shared.window_limit(1, 0), None, "window 0: unbounded");
        assert_eq!(shared.window_limit(2, 8), None, "no such cohort");
    }
}
