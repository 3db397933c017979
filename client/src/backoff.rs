//! Peer backoff after a refused Join or a reset stream (R38): randomised exponential,
//! 1–30 s, full jitter.
//!
//! Owns: [`Backoff`], the delay schedule. Attempt `n` (from 0) draws a delay uniformly from
//! `[1 s, min(30 s, 2^(n+1) s)]`: the ceiling doubles (2, 4, 8, 16, 30, 30, ... s) and the
//! whole range from the floor up to the ceiling is used (full jitter), so peers that lost a
//! broker together do not come back together. Every delay is within 1–30 s, never below the
//! floor a broker may enforce. [`Backoff::reset`] starts over after a session that worked.
//!
//! Never: sleeps or reads a clock (callers sleep for the returned duration); the RNG is the
//! caller's choice, so tests seed it and get the same schedule every time.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The shortest delay (R38).
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// The longest delay (R38).
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The R38 schedule: call [`Backoff::next_delay`] before each retry, [`Backoff::reset`]
/// after a Join that was answered OK.
#[derive(Debug, Clone)]
pub struct Backoff<R = StdRng> {
    rng: R,
    attempt: u32,
}

impl Backoff<StdRng> {
    /// A schedule with an RNG seeded from the operating system.
    pub fn new() -> Self {
        Self::with_rng(StdRng::from_rng(&mut rand::rng()))
    }

    /// A deterministic schedule (tests, reproducible runs).
    pub fn seeded(seed: u64) -> Self {
        Self::with_rng(StdRng::seed_from_u64(seed))
    }
}

impl Default for Backoff<StdRng> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Rng> Backoff<R> {
    /// A schedule drawing from `rng`.
    pub fn with_rng(rng: R) -> Self {
        Self { rng, attempt: 0 }
    }

    /// Retries since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The ceiling of attempt `attempt`: `min(30 s, 2^(attempt+1) s)`.
    pub fn ceiling(attempt: u32) -> Duration {
        // 2^5 s already exceeds the cap, so larger exponents need not be computed.
        let exponent = attempt.saturating_add(1).min(5);
        BACKOFF_MIN.saturating_mul(1 << exponent).min(BACKOFF_MAX)
    }

    /// The delay before the next retry; each call is one more attempt.
    pub fn next_delay(&mut self) -> Duration {
        let floor = millis(BACKOFF_MIN);
        let ceiling = millis(Self::ceiling(self.attempt));
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_millis(self.rng.random_range(floor..=ceiling))
    }

    /// Starts over at attempt 0 (after a Join answered OK).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r38_backoff_is_randomised_exponential_1_to_30s() {
        // Ceilings double from 2 s and stop at 30 s.
        let ceilings: Vec<u64> = (0..8)
            .map(|attempt| Backoff::<StdRng>::ceiling(attempt).as_secs())
            .collect();
        assert_eq!(ceilings, [2, 4, 8, 16, 30, 30, 30, 30]);
        assert_eq!(Backoff::<StdRng>::ceiling(u32::MAX), BACKOFF_MAX);

        // Every delay is within [1 s, ceiling(attempt)] and within 1–30 s.
        let mut backoff = Backoff::seeded(38);
        for attempt in 0..64 {
            assert_eq!(backoff.attempt(), attempt);
            let delay = backoff.next_delay();
            assert!(delay >= BACKOFF_MIN, "attempt {attempt}: {delay:?}");
            assert!(
                delay <= Backoff::<StdRng>::ceiling(attempt),
                "attempt {attempt}: {delay:?}"
            );
        }

        // Deterministic for a seed, different across seeds.
        let schedule = |seed: u64| -> Vec<Duration> {
            let mut backoff = Backoff::seeded(seed);
            (0..10).map(|_| backoff.next_delay()).collect()
        };
        assert_eq!(schedule(7), schedule(7));
        assert_ne!(schedule(7), schedule(8));

        // Full jitter: at the cap, draws spread over the whole [1 s, 30 s] range, roughly
        // uniformly (10 000 draws, 29 one-second buckets, each expected ~345).
        let mut capped = Backoff::seeded(1);
        let mut buckets = [0u32; 29];
        let mut sum_ms = 0u64;
        let draws = 10_000u32;
        for _ in 0..draws {
            for _ in 0..5 {
                capped.next_delay();
            }
            let delay = capped.next_delay();
            capped.reset();
            sum_ms += millis(delay);
            let bucket = usize::try_from((millis(delay) - 1000) / 1000).expect("small");
            buckets[bucket.min(28)] += 1;
        }
        for (second, count) in buckets.iter().enumerate() {
            assert!(
                (200..=500).contains(count),
                "bucket {second}: {count} draws"
            );
        }
        let mean_ms = sum_ms / u64::from(draws);
        assert!((15_000..=16_000).contains(&mean_ms), "mean {mean_ms} ms");

        // The first retry is jittered too (not a fixed 1 s), and reset starts over.
        let mut first = Backoff::seeded(3);
        let firsts: Vec<Duration> = (0..50)
            .map(|_| {
                let delay = first.next_delay();
                first.reset();
                delay
            })
            .collect();
        assert!(
            firsts
                .iter()
                .any(|delay| *delay > Duration::from_millis(1500))
        );
        assert!(
            firsts
                .iter()
                .any(|delay| *delay < Duration::from_millis(1500))
        );
        assert!(firsts.iter().all(|delay| *delay <= Duration::from_secs(2)));
    }
}
