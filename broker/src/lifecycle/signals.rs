//! The signal thread.
//!
//! Owns: `SignalWatcher` (a dedicated signal-hook thread: SIGTERM/SIGINT drain, a second one
//! exits at once with code 1, SIGHUP reloads) and the `Event`s it sends the main thread.
//! Never does: act on an event (the main thread's `serve` does), except the second
//! termination signal's immediate exit.

use std::thread::JoinHandle;

use crossbeam::channel::{self, Receiver, Sender};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle as SignalHandle, Signals};

/// A signal the main thread acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// SIGHUP: re-read the configuration.
    Reload,
    /// SIGTERM or SIGINT: drain and exit.
    Drain,
}

/// The signal thread. SIGTERM/SIGINT send one `Event::Drain`; a second one exits the process
/// at once with code 1 (the operator insists). SIGHUP sends `Event::Reload`.
#[derive(Debug)]
pub struct SignalWatcher {
    handle: SignalHandle,
    thread: Option<JoinHandle<()>>,
}

impl SignalWatcher {
    /// Installs the handlers and starts the thread; events arrive on the returned receiver.
    ///
    /// # Errors
    /// When a handler cannot be installed or the thread cannot start.
    pub fn start() -> std::io::Result<(SignalWatcher, Receiver<Event>)> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        let handle = signals.handle();
        let (sender, receiver) = channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("bps-signals".to_owned())
            .spawn(move || watch(&mut signals, &sender))?;
        Ok((
            SignalWatcher {
                handle,
                thread: Some(thread),
            },
            receiver,
        ))
    }
}

impl Drop for SignalWatcher {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn watch(signals: &mut Signals, events: &Sender<Event>) {
    let mut draining = false;
    for signal in signals.forever() {
        match signal {
            SIGHUP => {
                let _ = events.send(Event::Reload);
            }
            _ if draining => {
                eprintln!("bps-broker: second termination signal, exiting now");
                std::process::exit(1);
            }
            _ => {
                draining = true;
                let _ = events.send(Event::Drain);
            }
        }
    }
}
