//! Latency recording: an HdrHistogram of microseconds per thread, merged at the end, and
//! the percentiles every report prints.
//!
//! Owns: [`Latency`] (a histogram from 1 µs to 60 s at 3 significant digits, so every
//! percentile is within 0.1 % of the recorded value) and [`LatencySummary`] (p50, p90, p99,
//! p99.9, max and the count, in µs).
//!
//! Never: reads a clock; callers pass durations in nanoseconds, already computed from the
//! intended send time.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest latency tracked; anything above is recorded as this (and the max says so).
pub const LATENCY_MAX_US: u64 = 60_000_000;

/// Significant decimal digits kept by the histogram.
const SIGNIFICANT_DIGITS: u8 = 3;

/// One thread's latencies.
#[derive(Debug, Clone)]
pub struct Latency {
    histogram: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty recorder.
    pub fn new() -> Self {
        // Bounds are constants that hdrhistogram accepts (low ≥ 1, high ≥ 2 × low,
        // digits ≤ 5), so creation cannot fail.
        let histogram = Histogram::new_with_bounds(1, LATENCY_MAX_US, SIGNIFICANT_DIGITS)
            .unwrap_or_else(|error| panic!("histogram bounds are constants: {error}"));
        Self { histogram }
    }

    /// Records one latency in nanoseconds (rounded to the nearest µs, at least 1 µs).
    pub fn record_ns(&mut self, latency_ns: u64) {
        let micros = latency_ns.saturating_add(500) / 1000;
        self.histogram
            .saturating_record(micros.clamp(1, LATENCY_MAX_US));
    }

    /// Adds another recorder's values (same bounds, so this cannot fail).
    pub fn merge(&mut self, other: &Self) {
        if let Err(error) = self.histogram.add(&other.histogram) {
            panic!("histograms share bounds: {error}");
        }
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The percentiles, or all zeros when nothing was recorded.
    pub fn summary(&self) -> LatencySummary {
        let at = |quantile: f64| {
            if self.histogram.is_empty() {
                0
            } else {
                self.histogram.value_at_quantile(quantile)
            }
        };
        LatencySummary {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            p999: at(0.999),
            max: if self.histogram.is_empty() {
                0
            } else {
                self.histogram.max()
            },
            count: self.histogram.len(),
        }
    }
}

/// Percentiles in microseconds (the report's `latency_us`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct LatencySummary {
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest value.
    pub max: u64,
    /// Values behind the percentiles.
    pub count: u64,
}

impl LatencySummary {
    /// The value of a named percentile (`p50`, `p90`, `p99`, `p999`, `max`).
    pub fn get(&self, name: Percentile) -> u64 {
        match name {
            Percentile::P50 => self.p50,
            Percentile::P90 => self.p90,
            Percentile::P99 => self.p99,
            Percentile::P999 => self.p999,
            Percentile::Max => self.max,
        }
    }
}

/// The percentiles a report has and an SLO may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Percentile {
    /// Median.
    P50,
    /// 90th.
    P90,
    /// 99th.
    P99,
    /// 99.9th.
    P999,
    /// Maximum.
    Max,
}

impl Percentile {
    /// Every percentile, in report order.
    pub const ALL: [Self; 5] = [Self::P50, Self::P90, Self::P99, Self::P999, Self::Max];

    /// The report's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::P50 => "p50",
            Self::P90 => "p90",
            Self::P99 => "p99",
            Self::P999 => "p999",
            Self::Max => "max",
        }
    }

    /// Parses a report name; `p99.9` is accepted for `p999`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "p50" => Some(Self::P50),
            "p90" => Some(Self::P90),
            "p99" => Some(Self::P99),
            "p999" | "p99.9" => Some(Self::P999),
            "max" => Some(Self::Max),
            _ => None,
        }
    }
}
