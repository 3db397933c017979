//! The lock-free instruments: `Counter`, `Gauge`, `Histogram` and its mergeable
//! `HistogramSnapshot`.
//!
//! Owns: the atomics an event is recorded into (one relaxed atomic add per event, three for a
//! histogram) and the power-of-two bucketing of histograms.
//! Never does: take a lock, allocate or format; names, labels and the exposition are the
//! renderers' (`metrics::render`).

use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing count. One relaxed atomic add per event.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `amount`.
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (open connections, queue depths). `inc`/`dec` pairs must
/// balance; a `dec` below zero is a bug in the caller and shows as a huge value.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Subtracts one.
    pub fn dec(&self) {
        self.sub(1);
    }

    /// Adds `amount`.
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// Subtracts `amount`.
    pub fn sub(&self, amount: u64) {
        self.0.fetch_sub(amount, Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A histogram with fixed power-of-two buckets: bucket `i` counts values `v` with
/// `2^(i-1) < v <= 2^i` (bucket 0 takes 0 and 1), and one overflow bucket takes the rest.
/// Recording is three relaxed atomic adds; cumulating for Prometheus happens at scrape time.
#[derive(Debug)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts; the last entry is the overflow (`+Inf`) bucket.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// A histogram with `finite_buckets` buckets of upper bounds `1, 2, 4, .., 2^(n-1)`.
    ///
    /// # Panics
    /// If `finite_buckets` is 0 or above 63: the bounds must fit in a `u64`.
    #[must_use]
    pub fn new(finite_buckets: usize) -> Histogram {
        assert!(
            (1..=63).contains(&finite_buckets),
            "histogram bucket count out of range: {finite_buckets}"
        );
        Histogram {
            buckets: (0..=finite_buckets).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn record(&self, value: u64) {
        let index = bucket_index(value).min(self.buckets.len() - 1);
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the current figures. Concurrent recording may make `count` and the bucket
    /// total differ by the few observations in flight; Prometheus tolerates that.
    #[must_use]
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|bucket| bucket.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// The bucket of `value`: the smallest `i` with `value <= 2^i`.
fn bucket_index(value: u64) -> usize {
    if value <= 1 {
        0
    } else {
        // ceil(log2(value)) for value >= 2; at most 64, so the cast is lossless.
        (u64::BITS - (value - 1).leading_zeros()) as usize
    }
}

/// A copied histogram, mergeable across cores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts; the last entry is the overflow bucket.
    pub buckets: Vec<u64>,
    /// Sum of all observations.
    pub sum: u64,
    /// Number of observations.
    pub count: u64,
}

impl HistogramSnapshot {
    /// Adds another snapshot's figures to this one (an empty snapshot takes the other's shape).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine = mine.wrapping_add(*theirs);
        }
        self.sum = self.sum.wrapping_add(other.sum);
        self.count = self.count.wrapping_add(other.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_index_is_ceil_log2() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(1), 0);
        assert_eq!(bucket_index(2), 1);
        assert_eq!(bucket_index(3), 2);
        assert_eq!(bucket_index(4), 2);
        assert_eq!(bucket_index(5), 3);
        assert_eq!(bucket_index(1024), 10);
        assert_eq!(bucket_index(1025), 11);
        assert_eq!(bucket_index(u64::MAX), 64);
    }

    #[test]
    fn histogram_records_and_overflows() {
        let histogram = Histogram::new(3);
        for value in [0, 1, 2, 3, 4, 5, 1000] {
            histogram.record(value);
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.buckets, vec![2, 1, 2, 2]);
        assert_eq!(snapshot.count, 7);
        assert_eq!(snapshot.sum, 1015);
    }

    #[test]
    fn snapshots_merge() {
        let first = Histogram::new(2);
        let second = Histogram::new(2);
        first.record(1);
        second.record(2);
        second.record(9);
        let mut merged = HistogramSnapshot::default();
        merged.merge(&first.snapshot());
        merged.merge(&second.snapshot());
        assert_eq!(merged.buckets, vec![1, 1, 1]);
        assert_eq!(merged.sum, 12);
        assert_eq!(merged.count, 3);
    }

    #[test]
    fn gauge_goes_both_ways() {
        let gauge = Gauge::default();
        gauge.inc();
        gauge.inc();
        gauge.dec();
        gauge.add(5);
        gauge.sub(2);
        assert_eq!(gauge.get(), 4);
        gauge.set(7);
        assert_eq!(gauge.get(), 7);
    }
}
