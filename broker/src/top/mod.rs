//! `bps-broker top`: a live terminal view of a running broker, from its admin endpoints.
//!
//! Owns: the pieces of `top`, one file each: `client` (one HTTP GET on the admin address),
//! `exposition` (the Prometheus text format read back), `scrape` (the figures of one
//! scrape), `model` (rates between two scrapes, the cohort order), `render` (a screen as
//! lines), `terminal` (raw mode, keys, restoring) and `app` (the loop and `--once`); plus
//! the parsing of `--interval`.
//! Never does: touch a running broker other than by `GET /metrics` and `GET /cohortz` on
//! its admin address; `top` is an operator's client, not part of the daemon.
//!
//! docs/TOP.md explains every figure, key and flag.

mod app;
mod client;
mod exposition;
mod model;
mod render;
mod scrape;
mod terminal;

use std::time::Duration;

pub use app::{Options, run};
pub use model::SortKey;

/// The shortest refresh interval: every refresh asks every core of the broker for its
/// cohorts, which an operator's view should not turn into load.
pub const INTERVAL_MIN: Duration = Duration::from_millis(100);

/// The longest refresh interval: beyond an hour a dashboard is the better tool.
pub const INTERVAL_MAX: Duration = Duration::from_secs(3600);

/// Parses `--interval`: seconds (`1`, `0.5`) or a number with `ms` or `s` (`500ms`, `2s`),
/// from `INTERVAL_MIN` to `INTERVAL_MAX`.
///
/// # Errors
/// A sentence naming the value and what is expected.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let expected = || {
        format!(
            "{text:?}: expected seconds or a number with ms or s (e.g. 1, 0.5, 500ms, 2s), from {}ms to {}s",
            INTERVAL_MIN.as_millis(),
            INTERVAL_MAX.as_secs()
        )
    };
    let trimmed = text.trim();
    let (number, scale) = if let Some(number) = trimmed.strip_suffix("ms") {
        (number, 0.001)
    } else if let Some(number) = trimmed.strip_suffix('s') {
        (number, 1.0)
    } else {
        (trimmed, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| expected())?;
    let seconds = value * scale;
    if !seconds.is_finite()
        || seconds < INTERVAL_MIN.as_secs_f64()
        || seconds > INTERVAL_MAX.as_secs_f64()
    {
        return Err(expected());
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("1"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
        for bad in ["", "s", "fast", "10ms", "-1", "NaN", "inf", "7200"] {
            let error = parse_interval(bad).expect_err(bad);
            assert!(error.contains("expected seconds"), "{bad}: {error}");
        }
    }
}
