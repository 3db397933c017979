//! Service-level objectives: `--slo p99=2ms,p999=5ms` and `--max-loss 0`, and whether a
//! run met them.
//!
//! Owns: parsing an objective ([`Slo::parse`]; durations with a unit: `ns`, `us`, `µs`,
//! `ms`, `s`), checking a run's latency summary and loss against the objectives
//! ([`Slo::check`]) and the verdict's lines ([`Miss`]).
//!
//! Never: exits the process; the binary maps a miss to [`crate::load::EXIT_SLO_MISSED`].

use std::fmt;

use crate::load::latency::{LatencySummary, Percentile};

/// One latency bound: a percentile must be at most `limit_us`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyBound {
    /// Which percentile.
    pub percentile: Percentile,
    /// The bound in microseconds (fractions allowed: `500ns` is 0.5 µs).
    pub limit_us: f64,
}

/// Every objective of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slo {
    /// Latency bounds, in the order given.
    pub latency: Vec<LatencyBound>,
    /// The largest acceptable loss fraction (0 = no message may be lost).
    pub max_loss: Option<f64>,
}

/// An objective that was not met.
#[derive(Debug, Clone, PartialEq)]
pub enum Miss {
    /// A latency percentile above its bound.
    Latency {
        /// Which percentile.
        percentile: Percentile,
        /// Measured, µs.
        measured_us: u64,
        /// The bound, µs.
        limit_us: f64,
    },
    /// More loss than allowed.
    Loss {
        /// Measured fraction.
        measured: f64,
        /// The bound.
        limit: f64,
    },
    /// A latency bound was set but no latency was measured.
    NoSamples,
}

impl fmt::Display for Miss {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Latency {
                percentile,
                measured_us,
                limit_us,
            } => write!(
                formatter,
                "SLO missed: {} = {measured_us} us > {limit_us} us",
                percentile.name()
            ),
            Self::Loss { measured, limit } => {
                write!(formatter, "SLO missed: loss = {measured} > {limit}")
            }
            Self::NoSamples => write!(formatter, "SLO missed: no latency was measured"),
        }
    }
}

/// Why an objective did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SloError(pub String);

impl fmt::Display for SloError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for SloError {}

impl Slo {
    /// Adds the bounds in `text`: comma-separated `PERCENTILE=DURATION` pairs, e.g.
    /// `p99=2ms` or `p50=300us,p999=5ms`. Percentiles: p50, p90, p99, p999 (or p99.9), max.
    pub fn parse_latency(&mut self, text: &str) -> Result<(), SloError> {
        for item in text
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
        {
            let Some((name, value)) = item.split_once('=') else {
                return Err(SloError(format!(
                    "--slo: expected PERCENTILE=DURATION (e.g. p99=2ms), got {item:?}"
                )));
            };
            let percentile = Percentile::parse(name.trim()).ok_or_else(|| {
                SloError(format!(
                    "--slo: unknown percentile {name:?}, expected p50, p90, p99, p999 or max"
                ))
            })?;
            let limit_us = parse_duration_us(value.trim())
                .map_err(|reason| SloError(format!("--slo: {name}={value}: {reason}")))?;
            self.latency.push(LatencyBound {
                percentile,
                limit_us,
            });
        }
        Ok(())
    }

    /// Sets the loss bound, a fraction in [0, 1].
    pub fn set_max_loss(&mut self, max_loss: f64) -> Result<(), SloError> {
        if !(0.0..=1.0).contains(&max_loss) {
            return Err(SloError(format!(
                "--max-loss: expected a fraction from 0 to 1, got {max_loss}"
            )));
        }
        self.max_loss = Some(max_loss);
        Ok(())
    }

    /// Whether any objective is set.
    pub fn is_empty(&self) -> bool {
        self.latency.is_empty() && self.max_loss.is_none()
    }

    /// The objectives a run missed (empty: all met).
    pub fn check(&self, latency: &LatencySummary, loss: f64) -> Vec<Miss> {
        let mut misses = Vec::new();
        if !self.latency.is_empty() && latency.count == 0 {
            misses.push(Miss::NoSamples);
        } else {
            for bound in &self.latency {
                let measured_us = latency.get(bound.percentile);
                if measured_us as f64 > bound.limit_us {
                    misses.push(Miss::Latency {
                        percentile: bound.percentile,
                        measured_us,
                        limit_us: bound.limit_us,
                    });
                }
            }
        }
        if let Some(limit) = self.max_loss
            && loss > limit
        {
            misses.push(Miss::Loss {
                measured: loss,
                limit,
            });
        }
        misses
    }
}

/// A duration with a unit, in microseconds: `250us`, `2ms`, `1.5s`, `800ns`.
pub fn parse_duration_us(text: &str) -> Result<f64, String> {
    let split = text
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .ok_or_else(|| format!("{text:?} has no unit (ns, us, ms or s)"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{number:?} is not a number"))?;
    let scale = match unit {
        "ns" => 1e-3,
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        other => return Err(format!("unknown unit {other:?}, expected ns, us, ms or s")),
    };
    if !value.is_finite() {
        return Err(format!("{number:?} is not a finite number"));
    }
    Ok(value * scale)
}
