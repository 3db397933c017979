//! The systemd notifications.
//!
//! Owns: `notify` (READY, STOPPING, STATUS, WATCHDOG on the notify socket, nothing when not
//! run by systemd) and the `Watchdog` thread that pets only when every core answers.
//! Never does: decide when the daemon is ready or stopping (`run` and `drain` do).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{self, RecvTimeoutError, Sender};

use crate::admin::AdminBackend;

/// Sends a state to systemd's notify socket (nothing when not run by systemd).
pub fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if let Err(error) = sd_notify::notify(false, states) {
        tracing::debug!(%error, "sd_notify failed");
    }
}

/// Pets systemd's watchdog every `WATCHDOG_USEC / 2`, but only when every core answered a
/// ping: a wedged core stops the petting and systemd restarts the service.
#[derive(Debug)]
pub struct Watchdog {
    stop: Sender<()>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts petting when systemd asked for a watchdog (`WATCHDOG_USEC`); `None` otherwise.
    #[must_use]
    pub fn start(backend: Arc<dyn AdminBackend>) -> Option<Watchdog> {
        let mut usec = 0_u64;
        if !sd_notify::watchdog_enabled(false, &mut usec) || usec == 0 {
            return None;
        }
        let interval = Duration::from_micros(usec / 2);
        // A ping must finish well before the next petting is due.
        let ping_deadline = Duration::from_micros(usec / 4);
        let (stop, stopped) = channel::bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("bps-watchdog".to_owned())
            .spawn(move || {
                loop {
                    let answers = backend.ping(ping_deadline);
                    if !answers.is_empty() && answers.iter().all(|answered| *answered) {
                        notify(&[sd_notify::NotifyState::Watchdog]);
                    } else {
                        tracing::warn!(?answers, "a core did not answer; watchdog not petted");
                    }
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            })
            .ok()?;
        Some(Watchdog {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.stop.try_send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
