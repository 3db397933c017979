//! The progress line of a load run on a terminal: elapsed time, the rates the mode
//! measures and the loss so far, redrawn in place about once a second on stderr.
//!
//! Owns: [`ProgressMode`] (`--progress auto|always|never`: auto draws only when stderr is a
//! terminal, so a run whose stderr is a file or a pipe writes none of it), [`Sample`] and
//! its one-line rendering ([`Sample::line`]), [`LineWriter`] (carriage return, the line,
//! blanks over a longer previous one; the line wiped at the end), [`RunProgress`], which
//! samples the counters a run already keeps in [`Shared`] (atomics, read `Relaxed`: the hot
//! path takes no lock for it), and for `conns` [`JoinSample`] and [`watch`].
//!
//! Never: writes to stdout (the summary and the JSON report are a contract), or decides
//! anything about the run.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::load::schedule::now_ns;
use crate::load::shared::Shared;

/// Time between two redraws: often enough to watch, rarely enough to read.
pub const REDRAW_INTERVAL: Duration = Duration::from_secs(1);

/// Longest sleep of one [`RunProgress::tick`], so the run's loop looks at its own end
/// conditions often.
const TICK_SLEEP: Duration = Duration::from_millis(100);

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// Only when stderr is a terminal.
    #[default]
    Auto,
    /// Always (a test or a log that wants it).
    Always,
    /// Never.
    Never,
}

impl ProgressMode {
    /// Whether the line is drawn, given whether stderr is a terminal.
    pub fn enabled(self, stderr_is_terminal: bool) -> bool {
        match self {
            Self::Auto => stderr_is_terminal,
            Self::Always => true,
            Self::Never => false,
        }
    }
}

/// What one redraw shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the traffic started (`t0`).
    pub elapsed_s: f64,
    /// Seconds the traffic lasts at most: warm-up, measured phase and drain.
    pub total_s: f64,
    /// `start`, `warmup`, `measure` or `drain`.
    pub phase: &'static str,
    /// Messages written per second since the last redraw (`None`: the mode publishes
    /// nothing here).
    pub publications_per_s: Option<f64>,
    /// Deliveries received per second since the last redraw (`None`: nothing is received
    /// here).
    pub deliveries_per_s: Option<f64>,
    /// Fraction of the deliveries owed for messages published by the last redraw that has
    /// not arrived (`None`: unknown here, e.g. `sub` mode, or nothing owed yet). A delivery
    /// late by more than a redraw counts here until it arrives; the report's loss, after
    /// the drain, is exact.
    pub loss: Option<f64>,
    /// Streams the server closed so far.
    pub resets: u64,
    /// Frames that failed verification or comparison so far.
    pub invalid: u64,
}

impl Sample {
    /// The line, without a newline; resets and invalid frames only once there are any.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{:.1}/{:.1} s {:<7}",
            self.elapsed_s.max(0.0),
            self.total_s,
            self.phase
        );
        if let Some(rate) = self.publications_per_s {
            line.push_str(&format!("  {rate:.0} pub/s"));
        }
        if let Some(rate) = self.deliveries_per_s {
            line.push_str(&format!("  {rate:.0} deliveries/s"));
        }
        match self.loss {
            Some(loss) => line.push_str(&format!("  loss {:.2}%", loss * 100.0)),
            None => line.push_str("  loss -"),
        }
        if self.resets > 0 {
            line.push_str(&format!("  resets {}", self.resets));
        }
        if self.invalid > 0 {
            line.push_str(&format!("  invalid {}", self.invalid));
        }
        line
    }
}

/// One line redrawn in place: `\r`, the text, blanks where a longer previous text was.
#[derive(Debug)]
pub struct LineWriter<W: Write> {
    out: W,
    enabled: bool,
    /// Characters of the line on screen (0: none).
    shown: usize,
}

impl<W: Write> LineWriter<W> {
    /// A writer to `out` that writes nothing unless `enabled`.
    pub fn new(out: W, enabled: bool) -> Self {
        Self {
            out,
            enabled,
            shown: 0,
        }
    }

    /// Replaces the line on screen with `text`. Best effort: a closed stderr must not end
    /// a run.
    pub fn show(&mut self, text: &str) {
        if !self.enabled {
            return;
        }
        let width = text.chars().count();
        let blanks = self.shown.saturating_sub(width);
        let _ = write!(self.out, "\r{text}{:blanks$}", "");
        let _ = self.out.flush();
        self.shown = width;
    }

    /// Wipes the line, leaving the cursor at the start of it.
    pub fn clear(&mut self) {
        if self.shown == 0 {
            return;
        }
        let _ = write!(self.out, "\r{:width$}\r", "", width = self.shown);
        let _ = self.out.flush();
        self.shown = 0;
    }

    /// What was written (for tests).
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The timeline and shape a run's progress is read against.
#[derive(Debug, Clone, Copy)]
pub struct RunTimeline {
    /// When the traffic starts (Unix ns).
    pub t0_ns: u64,
    /// Start of the measured phase (Unix ns).
    pub measure_from_ns: u64,
    /// End of the measured phase (Unix ns).
    pub measure_to_ns: u64,
    /// The drain after it.
    pub drain: Duration,
    /// Whether publishers run here.
    pub publishes: bool,
    /// Whether deliveries are received here.
    pub receives: bool,
    /// Deliveries this process's streams receive per message published, on average over
    /// the publishers (0: loss is not known here).
    pub deliveries_per_message: f64,
}

impl RunTimeline {
    fn phase(&self, now_ns: u64) -> &'static str {
        if now_ns < self.t0_ns {
            "start"
        } else if now_ns < self.measure_from_ns {
            "warmup"
        } else if now_ns < self.measure_to_ns {
            "measure"
        } else {
            "drain"
        }
    }
}

/// Counter values at one redraw.
#[derive(Debug, Clone, Copy, Default)]
struct Reading {
    published: u64,
    delivered: u64,
}

impl Reading {
    fn of(shared: &Shared) -> Self {
        Self {
            published: shared.published.load(Ordering::Relaxed),
            delivered: shared.delivered.load(Ordering::Relaxed)
                + shared.counted_frames.load(Ordering::Relaxed),
        }
    }
}

/// A run's progress line on stderr (module docs).
#[derive(Debug)]
pub struct RunProgress {
    timeline: RunTimeline,
    line: LineWriter<io::Stderr>,
    last_at: Instant,
    last: Reading,
}

impl RunProgress {
    /// Starts sampling now; draws only if `mode` says so for this process's stderr.
    pub fn new(mode: ProgressMode, timeline: RunTimeline) -> Self {
        let stderr = io::stderr();
        let enabled = mode.enabled(stderr.is_terminal());
        Self {
            timeline,
            line: LineWriter::new(stderr, enabled),
            last_at: Instant::now(),
            last: Reading::default(),
        }
    }

    /// Sleeps a little; redraws when [`REDRAW_INTERVAL`] has passed since the last redraw.
    pub fn tick(&mut self, shared: &Shared) {
        thread::sleep(TICK_SLEEP);
        let elapsed = self.last_at.elapsed();
        if elapsed < REDRAW_INTERVAL {
            return;
        }
        let now = Reading::of(shared);
        let sample = self.sample(now, elapsed, shared, now_ns());
        self.line.show(&sample.line());
        self.last_at = Instant::now();
        self.last = now;
    }

    /// Wipes the line (the run is over; what follows is the summary).
    pub fn finish(&mut self) {
        self.line.clear();
    }

    fn sample(&self, now: Reading, elapsed: Duration, shared: &Shared, now_ns: u64) -> Sample {
        let timeline = &self.timeline;
        let seconds = elapsed.as_secs_f64();
        let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / seconds;
        Sample {
            elapsed_s: (now_ns as f64 - timeline.t0_ns as f64) / 1e9,
            total_s: (timeline.measure_to_ns.saturating_sub(timeline.t0_ns) as f64) / 1e9
                + timeline.drain.as_secs_f64(),
            phase: timeline.phase(now_ns),
            publications_per_s: timeline
                .publishes
                .then(|| rate(now.published, self.last.published)),
            deliveries_per_s: timeline
                .receives
                .then(|| rate(now.delivered, self.last.delivered)),
            loss: loss_so_far(
                self.last.published,
                now.delivered,
                timeline.deliveries_per_message,
            ),
            resets: shared.resets.load(Ordering::Relaxed),
            invalid: shared.invalid.load(Ordering::Relaxed),
        }
    }
}

/// What one redraw of `conns` shows: streams opening.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSample {
    /// Seconds since the joins started.
    pub elapsed_s: f64,
    /// Streams answered OK so far.
    pub open: u64,
    /// Streams asked for.
    pub requested: u64,
    /// Streams opened per second since the last redraw.
    pub joins_per_s: f64,
    /// Joins answered FULL or REJECTED so far.
    pub refused: u64,
    /// Joins that failed otherwise so far.
    pub failed: u64,
}

impl JoinSample {
    /// The line, without a newline.
    pub fn line(&self) -> String {
        format!(
            "{:.1} s joining  {}/{} open  {:.0} joins/s  refused {}  failed {}",
            self.elapsed_s, self.open, self.requested, self.joins_per_s, self.refused, self.failed
        )
    }
}

/// Redraws a line from `sample` about once a second while `running` holds, then wipes it
/// (`conns`: the counters are its joining threads' atomics).
pub fn watch(
    mode: ProgressMode,
    running: &dyn Fn() -> bool,
    sample: &mut dyn FnMut(f64) -> String,
) {
    let stderr = io::stderr();
    let enabled = mode.enabled(stderr.is_terminal());
    let mut line = LineWriter::new(stderr, enabled);
    let mut last_at = Instant::now();
    while running() {
        thread::sleep(TICK_SLEEP);
        let elapsed = last_at.elapsed();
        if enabled && elapsed >= REDRAW_INTERVAL {
            line.show(&sample(elapsed.as_secs_f64()));
            last_at = Instant::now();
        }
    }
    line.clear();
}

/// The loss so far: of the deliveries owed for the `published` messages (those out by the
/// previous redraw, so a message in flight is not counted lost), the fraction not among
/// `delivered`. `None` when nothing is owed here.
pub fn loss_so_far(published: u64, delivered: u64, deliveries_per_message: f64) -> Option<f64> {
    let owed = published as f64 * deliveries_per_message;
    (owed > 0.0).then(|| (1.0 - delivered as f64 / owed).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Sample {
        Sample {
            elapsed_s: 3.04,
            total_s: 14.0,
            phase: "measure",
            publications_per_s: Some(1000.4),
            deliveries_per_s: Some(9999.6),
            loss: Some(0.0125),
            resets: 0,
            invalid: 0,
        }
    }

    #[test]
    fn the_line_shows_elapsed_phase_rates_and_loss() {
        assert_eq!(
            sample().line(),
            "3.0/14.0 s measure  1000 pub/s  10000 deliveries/s  loss 1.25%"
        );
        let sub = Sample {
            elapsed_s: -0.2,
            phase: "start",
            publications_per_s: None,
            loss: None,
            resets: 2,
            invalid: 1,
            ..sample()
        };
        assert_eq!(
            sub.line(),
            "0.0/14.0 s start    10000 deliveries/s  loss -  resets 2  invalid 1"
        );
    }

    #[test]
    fn the_joining_line_shows_streams_open_the_rate_and_refusals() {
        let sample = JoinSample {
            elapsed_s: 2.31,
            open: 1500,
            requested: 10000,
            joins_per_s: 750.4,
            refused: 0,
            failed: 2,
        };
        assert_eq!(
            sample.line(),
            "2.3 s joining  1500/10000 open  750 joins/s  refused 0  failed 2"
        );
    }

    #[test]
    fn auto_draws_only_on_a_terminal() {
        assert!(!ProgressMode::Auto.enabled(false));
        assert!(ProgressMode::Auto.enabled(true));
        assert!(ProgressMode::Always.enabled(false));
        assert!(!ProgressMode::Never.enabled(true));
        let mut quiet = LineWriter::new(Vec::new(), ProgressMode::Auto.enabled(false));
        quiet.show(&sample().line());
        quiet.clear();
        assert!(quiet.into_inner().is_empty(), "not a terminal: not a byte");
    }

    #[test]
    fn the_line_is_redrawn_in_place_and_wiped_at_the_end() {
        let mut line = LineWriter::new(Vec::new(), true);
        line.show("abcdef");
        line.show("xyz");
        line.clear();
        line.clear();
        assert_eq!(
            String::from_utf8(line.into_inner()).expect("utf-8"),
            "\rabcdef\rxyz   \r   \r",
            "the blanks after xyz are blank already"
        );
    }

    #[test]
    fn loss_counts_what_is_owed_for_messages_out_by_the_last_redraw() {
        assert_eq!(loss_so_far(0, 0, 10.0), None, "nothing owed yet");
        assert_eq!(loss_so_far(100, 5, 0.0), None, "no receivers here");
        assert_eq!(loss_so_far(100, 1000, 10.0), Some(0.0));
        assert_eq!(
            loss_so_far(100, 1200, 10.0),
            Some(0.0),
            "newer ones arrived too"
        );
        assert_eq!(loss_so_far(100, 750, 10.0), Some(0.25));
    }
}
