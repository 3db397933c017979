//! The daemon's log.
//!
//! Owns: `init_logging` (tracing, text or JSON, level reloadable, through a non-blocking
//! writer so that no runtime thread ever waits for stderr) and `LogControl` (the reload
//! handle, the `RUST_LOG` override and the writer's flush guard and count of dropped lines).
//! Never does: decide what is logged, or when the level changes (`serve` applies a reloaded
//! `log.level`).

use std::fmt;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

use crate::config::{LogConfig, LogFormat};
use crate::limits::LOG_BUFFERED_LINES_MAX;

/// Controls the log filter after start (SIGHUP changes `log.level`).
pub struct LogControl {
    handle: Option<reload::Handle<EnvFilter, Registry>>,
    rust_log: Option<String>,
    /// The non-blocking writer's flush guard and its count of dropped lines.
    writer: Option<(
        tracing_appender::non_blocking::WorkerGuard,
        tracing_appender::non_blocking::ErrorCounter,
    )>,
}

impl fmt::Debug for LogControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogControl")
            .field("reloadable", &self.handle.is_some())
            .field("rust_log", &self.rust_log)
            .finish()
    }
}

impl LogControl {
    /// A control that changes nothing (tests, or logging set up elsewhere).
    #[must_use]
    pub fn detached() -> LogControl {
        LogControl {
            handle: None,
            rust_log: None,
            writer: None,
        }
    }

    /// Log lines dropped because the writer's buffer was full.
    #[must_use]
    pub fn lines_dropped(&self) -> u64 {
        self.writer
            .as_ref()
            .map_or(0, |(_, dropped)| dropped.dropped_lines() as u64)
    }

    /// Applies a new `log.level`, unless `RUST_LOG` overrides it.
    pub fn set_level(&self, level: &str) {
        if let Some(rust_log) = &self.rust_log {
            tracing::warn!(%rust_log, level, "RUST_LOG is set and wins over log.level");
            return;
        }
        let Some(handle) = &self.handle else {
            return;
        };
        match EnvFilter::try_new(level) {
            Ok(filter) => {
                if let Err(error) = handle.reload(filter) {
                    tracing::warn!(%error, "could not apply log.level");
                }
            }
            Err(error) => tracing::warn!(%error, level, "invalid log.level ignored"),
        }
    }
}

/// Installs the global tracing subscriber: `RUST_LOG` (when set and non-empty) or `log.level`
/// as the filter, text or JSON lines on stderr (journald takes stderr under systemd),
/// written by a thread of its own from a bounded buffer of `LOG_BUFFERED_LINES_MAX` lines.
/// The returned control must live as long as logging: dropping it flushes the buffer.
///
/// # Errors
/// When the filter does not parse or a subscriber is already installed.
pub fn init_logging(log: &LogConfig, rust_log: Option<String>) -> Result<LogControl, String> {
    let rust_log = rust_log.filter(|value| !value.trim().is_empty());
    let directives = rust_log.as_deref().unwrap_or(&log.level);
    let filter = EnvFilter::try_new(directives)
        .map_err(|error| format!("invalid log filter {directives:?}: {error}"))?;
    let (filter, handle) = reload::Layer::new(filter);
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_BUFFERED_LINES_MAX)
        .lossy(true)
        .thread_name("bps-log")
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    let format = match log.format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(writer)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(format)
        .try_init()
        .map_err(|error| format!("cannot install the logger: {error}"))?;
    Ok(LogControl {
        handle: Some(handle),
        rust_log,
        writer: Some((guard, dropped)),
    })
}
