//! The terminal loop of `bps-broker top`, and `--once`.
//!
//! Owns: the schedule (one scrape per interval), the keys (`d`/`p`/`s`/`r` sort, `q` or
//! Ctrl-C quits), what is shown while the broker is down (the problem, retried every
//! interval), and the exit codes (0 on quit, 1 when the terminal or, with `--once`, the
//! broker fails).
//! Never does: parse, compute or lay out (that is `scrape`, `model`, `render`).

use std::time::{Duration, Instant};

use super::client::AdminClient;
use super::model::{SortKey, View};
use super::render::{Frame, render};
use super::scrape::Scrape;
use super::terminal::{Input, RawTerminal, Signals, is_terminal, size_of};
use crate::admin::COHORTZ_LIMIT_MAX;

/// Ctrl-C and Ctrl-D as raw mode delivers them.
const CTRL_C: u8 = 0x03;
const CTRL_D: u8 = 0x04;
/// The first byte of an escape sequence (arrow and function keys), whose other bytes are
/// not keys of `top`.
const ESCAPE: u8 = 0x1b;

/// The shortest deadline of one scrape: a loaded broker's `/cohortz` waits for every core
/// (up to `timeouts.healthz_deadline_ms`), and a slow answer is better than a gap.
const SCRAPE_DEADLINE_MIN: Duration = Duration::from_secs(5);

/// What `top` does.
#[derive(Clone, Debug)]
pub struct Options {
    /// The admin address, `HOST:PORT`.
    pub admin: String,
    /// Time between scrapes.
    pub interval: Duration,
    /// The initial cohort order.
    pub sort: SortKey,
    /// Print one screen and exit.
    pub once: bool,
}

/// Runs `top`; returns the process's exit code.
#[must_use]
pub fn run(options: &Options) -> u8 {
    // A scrape may take up to the interval, and at least `SCRAPE_DEADLINE_MIN`.
    let client = AdminClient::new(&options.admin, options.interval.max(SCRAPE_DEADLINE_MIN));
    if options.once {
        once(&client, options)
    } else {
        interactive(&client, options)
    }
}

/// One scrape: `/metrics`, then `/cohortz` (whose failure only changes where the cohorts
/// come from).
fn scrape(client: &AdminClient) -> Result<Scrape, String> {
    let taken = Instant::now();
    let metrics = client.get("/metrics")?;
    let cohortz = client.get(&format!("/cohortz?limit={COHORTZ_LIMIT_MAX}"));
    Scrape::read(taken, &metrics, cohortz.as_deref().map_err(Clone::clone))
}

/// `--once`: two scrapes one interval apart, one screen on stdout.
fn once(client: &AdminClient, options: &Options) -> u8 {
    let first = match scrape(client) {
        Ok(first) => first,
        Err(error) => {
            eprintln!("bps-broker top: {error}");
            return 1;
        }
    };
    std::thread::sleep(options.interval);
    let second = match scrape(client) {
        Ok(second) => second,
        Err(error) => {
            eprintln!("bps-broker top: {error}");
            return 1;
        }
    };
    let view = View::new(&second, Some(&first), options.sort);
    // On a terminal the screen fits its width; into a pipe nothing is cut.
    let width = if is_terminal(libc::STDOUT_FILENO) {
        size_of(libc::STDOUT_FILENO).map_or(usize::MAX, |(width, _)| width)
    } else {
        usize::MAX
    };
    let lines = render(&Frame {
        admin: client.admin(),
        view: Some(&view),
        sort: options.sort,
        interval: options.interval,
        problem: None,
        width,
        height: None,
        keys: false,
    });
    for line in lines {
        println!("{line}");
    }
    0
}

/// The live screen until `q`, Ctrl-C or a signal.
fn interactive(client: &AdminClient, options: &Options) -> u8 {
    let signals = match Signals::register() {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("bps-broker top: cannot install signal handlers: {error}");
            return 1;
        }
    };
    let mut terminal = match RawTerminal::enter() {
        Ok(terminal) => terminal,
        Err(error) => {
            eprintln!("bps-broker top: {error}");
            return 1;
        }
    };
    let failure = watch(&mut terminal, &signals, client, options);
    // The terminal is restored before anything is printed.
    drop(terminal);
    match failure {
        None => 0,
        Some(error) => {
            eprintln!("bps-broker top: {error}");
            1
        }
    }
}

/// The loop: scrape on schedule, draw, take keys until it is time for the next scrape.
/// Returns why it failed, or `None` on a quit.
fn watch(
    terminal: &mut RawTerminal,
    signals: &Signals,
    client: &AdminClient,
    options: &Options,
) -> Option<String> {
    let mut screen = Screen {
        sort: options.sort,
        previous: None,
        view: None,
        problem: None,
    };
    let mut next_scrape = Instant::now();
    let mut redraw = true;
    loop {
        if signals.quit() {
            return None;
        }
        redraw |= signals.take_resized();
        if Instant::now() >= next_scrape {
            next_scrape = Instant::now() + options.interval;
            screen.rescrape(client, options.interval);
            redraw = true;
        }
        if redraw {
            if let Err(error) = screen.draw(terminal, client, options.interval) {
                return Some(format!("cannot write to the terminal: {error}"));
            }
            redraw = false;
        }
        let wait = next_scrape.saturating_duration_since(Instant::now());
        match terminal.keys(wait) {
            Ok(Input::Keys(keys)) => match screen.take_keys(&keys) {
                Keys::Quit => return None,
                Keys::Taken { resorted } => redraw |= resorted,
            },
            Ok(Input::Nothing) => {}
            Ok(Input::Closed) => return None,
            Err(error) => return Some(format!("cannot read the terminal: {error}")),
        }
    }
}

/// What the live screen shows: the order, the last scrape (for rates) and the view of it,
/// or the problem while the broker is down.
struct Screen {
    sort: SortKey,
    previous: Option<Scrape>,
    view: Option<View>,
    problem: Option<String>,
}

/// What a batch of keys asked for.
enum Keys {
    Quit,
    /// Taken; `resorted` when the order changed, so the screen is redrawn at once rather
    /// than at the next scrape.
    Taken {
        resorted: bool,
    },
}

impl Screen {
    /// Scrapes now: a new view with rates against the last scrape, or the problem.
    fn rescrape(&mut self, client: &AdminClient, interval: Duration) {
        match scrape(client) {
            Ok(current) => {
                self.view = Some(View::new(&current, self.previous.as_ref(), self.sort));
                self.previous = Some(current);
                self.problem = None;
            }
            Err(error) => {
                // Rates restart after an outage: the broker may have restarted.
                self.view = None;
                self.previous = None;
                self.problem = Some(format!("{error}; retrying every {interval:?}"));
            }
        }
    }

    fn draw(
        &self,
        terminal: &mut RawTerminal,
        client: &AdminClient,
        interval: Duration,
    ) -> std::io::Result<()> {
        let (width, height) = terminal.size();
        let lines = render(&Frame {
            admin: client.admin(),
            view: self.view.as_ref(),
            sort: self.sort,
            interval,
            problem: self.problem.as_deref(),
            width,
            height: Some(height),
            keys: true,
        });
        terminal.draw(&lines)
    }

    /// Takes `keys` in order: a sort key re-sorts, a quit key quits, an escape sequence
    /// ends the batch (its other bytes are not keys).
    fn take_keys(&mut self, keys: &[u8]) -> Keys {
        let mut resorted = false;
        for &key in keys {
            match key {
                ESCAPE => break,
                b'q' | b'Q' | CTRL_C | CTRL_D => return Keys::Quit,
                key => {
                    if let Some(chosen) = SortKey::of_key(char::from(key)) {
                        self.sort = chosen;
                        if let Some(view) = self.view.as_mut() {
                            view.sort(chosen);
                        }
                        resorted = true;
                    }
                }
            }
        }
        Keys::Taken { resorted }
    }
}
