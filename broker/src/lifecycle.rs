//! The daemon's life: logging, startup checks, signals, systemd notifications, reload, drain.
//!
//! Owns: `init_logging` (tracing, text or JSON, level reloadable, through a non-blocking
//! writer so that no runtime thread ever waits for stderr), `startup_checks` (refuse clear
//! misconfiguration of the host with a message naming the fix, and a configuration whose
//! worst-case memory exceeds its budget), `SignalWatcher` (a
//! dedicated signal-hook thread: SIGTERM/SIGINT drain, a second one exits at once with code 1,
//! SIGHUP reloads), `plan_reload` (which changes a SIGHUP applies), the systemd notifications
//! (READY, STOPPING, STATUS and a `Watchdog` that pets only when every core answers), and
//! `serve`, the main thread's loop from "listening" to "drained".
//! Never does: I/O on the broker's sockets or protocol decisions. It drives the running broker
//! only through the `Service` trait, which `main.rs` implements over `io::Broker`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{self, Receiver, RecvTimeoutError, Sender};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle as SignalHandle, Signals};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

use crate::admin::{AdminBackend, AdminServer};
use crate::budget::MemoryBudget;
use crate::config::{
    BrokerConfig, ConfigError, ConfigSources, LimitsConfig, LogConfig, LogFormat, apply_reloadable,
    reloadable_diff,
};
use crate::limits::LOG_BUFFERED_LINES_MAX;
use crate::protocol::CoreId;

/// File descriptors the broker needs besides its streams: stdio, the admin listener and its
/// connections, the notify socket, the verification pool's wakes, log files.
pub const NOFILE_BASE_MARGIN: u64 = 64;

/// File descriptors each core needs besides its streams: its listener, its io_uring or epoll
/// instance, its eventfd and timer.
pub const NOFILE_PER_CORE_MARGIN: u64 = 8;

/// What the daemon needs from the running broker (implemented over `io::Broker` in main.rs).
pub trait Service {
    /// The BPS listen address actually bound.
    fn listen_addr(&self) -> SocketAddr;
    /// The WebSocket listen address actually bound, when `ws.enabled`.
    fn ws_addr(&self) -> Option<SocketAddr>;
    /// What the admin endpoints read.
    fn admin_backend(&self) -> Arc<dyn AdminBackend>;
    /// Applies the reloadable keys of `config` (whose worst case is `budget`) on every core,
    /// without waiting for any; returns the cores that did not take it.
    fn reload(&self, config: &BrokerConfig, budget: MemoryBudget) -> Vec<CoreId>;
    /// Stops accepting, closes every stream cleanly, and waits for the cores up to `deadline`.
    fn drain(self, deadline: Duration) -> DrainSummary;
    /// `io_uring` or `epoll`.
    fn driver(&self) -> &'static str;
    /// Cores running.
    fn cores(&self) -> usize;
}

/// What a drain did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainSummary {
    /// Streams open when the drain began (all closed by it unless it timed out).
    pub streams_closed: u64,
    /// Whether some core was still busy at the deadline.
    pub timed_out: bool,
}

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

/// What the startup checks need to know about the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// Cores this process may run on.
    pub available_cores: usize,
    /// `RLIMIT_NOFILE` soft limit after `raise_nofile_limit`, if it could be read.
    pub nofile_soft: Option<u64>,
    /// The host's memory (or its cgroup's limit), for the default memory budget.
    pub memory_bytes: u64,
}

impl HostFacts {
    /// Reads the host: the affinity mask's cores, the current `RLIMIT_NOFILE`, the memory.
    #[must_use]
    pub fn probe() -> HostFacts {
        HostFacts {
            available_cores: available_cores(),
            nofile_soft: nofile_limits().map(|(soft, _)| soft),
            memory_bytes: crate::budget::host_memory_bytes(),
        }
    }

    /// The worst case of `config` on this host.
    #[must_use]
    pub fn budget_of(&self, config: &BrokerConfig) -> MemoryBudget {
        let cores = config.effective_cores(self.available_cores);
        MemoryBudget::of(
            config,
            cores,
            config.effective_verify_workers(cores),
            self.memory_bytes,
        )
    }
}

/// Cores this process may run on (its affinity mask, as the I/O layer pins to).
#[must_use]
pub fn available_cores() -> usize {
    core_affinity::get_core_ids()
        .map(|ids| ids.len())
        .filter(|count| *count > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// File descriptors the configuration needs on `cores` cores.
#[must_use]
pub fn nofile_needed(config: &BrokerConfig, cores: usize) -> u64 {
    let streams = u64::try_from(config.limits.connections_max).unwrap_or(u64::MAX);
    let cores = u64::try_from(cores).unwrap_or(u64::MAX);
    streams
        .saturating_mul(config.server.nofile_per_stream)
        .saturating_add(NOFILE_BASE_MARGIN)
        .saturating_add(cores.saturating_mul(NOFILE_PER_CORE_MARGIN))
}

/// The `RLIMIT_NOFILE` (soft, hard) limits.
fn nofile_limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusively borrowed `limit`.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) };
    (status == 0).then_some((limit.rlim_cur, limit.rlim_max))
}

/// Raises the `RLIMIT_NOFILE` soft limit towards `needed` (up to the hard limit, which only
/// the service manager may raise) and returns the soft limit in force afterwards.
pub fn raise_nofile_limit(needed: u64) -> Option<u64> {
    let (soft, hard) = nofile_limits()?;
    if soft >= needed {
        return Some(soft);
    }
    let target = needed.min(hard);
    if target <= soft {
        return Some(soft);
    }
    let limit = libc::rlimit {
        rlim_cur: target,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the valid `limit`.
    let status = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) };
    if status == 0 {
        tracing::info!(
            from = soft,
            to = target,
            "raised the RLIMIT_NOFILE soft limit"
        );
        Some(target)
    } else {
        Some(soft)
    }
}

/// Refuses clear misconfiguration of the host, each message naming the fix. Returns the
/// configuration to run with and its worst-case memory: when `limits.connections_max` is
/// left at its default and the file-descriptor limit or the memory budget cannot hold it,
/// the default is lowered to what fits (with a warning from the caller); an explicit value
/// that does not fit is refused.
///
/// # Errors
/// Every refusal, one message each.
pub fn startup_checks(
    config: &BrokerConfig,
    host: &HostFacts,
) -> Result<(BrokerConfig, Vec<String>, MemoryBudget), Vec<String>> {
    let mut refusals = Vec::new();
    let mut warnings = Vec::new();
    let mut effective = config.clone();
    check_cores(config, host, (&mut refusals, &mut warnings));
    let cores = config.effective_cores(host.available_cores);
    let is_default = config.limits.connections_max == LimitsConfig::default().connections_max;
    fit_nofile(
        &mut effective,
        host,
        cores,
        is_default,
        (&mut refusals, &mut warnings),
    );
    let budget = fit_budget(
        &mut effective,
        host,
        is_default,
        (&mut refusals, &mut warnings),
    );
    check_verify_queue(config, cores, &mut refusals);
    if refusals.is_empty() {
        Ok((effective, warnings, budget))
    } else {
        Err(refusals)
    }
}

/// The `server.cores` part of `startup_checks`: no more cores than the host offers, and a
/// warning when "all of them" is more than a broker runs.
fn check_cores(
    config: &BrokerConfig,
    host: &HostFacts,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) {
    if config.server.cores > host.available_cores {
        refusals.push(format!(
            "server.cores = {} but only {} cores are available to this process: lower \
             --cores / server.cores, or set it to 0 to use all of them",
            config.server.cores, host.available_cores
        ));
    }
    if config.server.cores == 0 && host.available_cores > crate::config::CORES_MAX {
        warnings.push(format!(
            "{} cores are available but a broker runs at most {} (a stream id names its core \
             in 8 bits); running on {}",
            host.available_cores,
            crate::config::CORES_MAX,
            crate::config::CORES_MAX
        ));
    }
}

/// The `verify.queue_jobs_max` part of `startup_checks`: an explicit queue holds every job
/// that may be in flight.
fn check_verify_queue(config: &BrokerConfig, cores: usize, refusals: &mut Vec<String>) {
    let jobs_needed = config.verify_jobs_in_flight_max(cores);
    if config.verify.queue_jobs_max != 0 && config.verify.queue_jobs_max < jobs_needed {
        refusals.push(format!(
            "verify.queue_jobs_max = {} is below the {cores} cores x \
             (limits.frames_in_flight_per_core_max = {} + {} W5 relays) = {jobs_needed} jobs \
             that may be in flight: raise it, or set it to 0 to size it so",
            config.verify.queue_jobs_max,
            config.limits.frames_in_flight_per_core_max,
            crate::limits::SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX
        ));
    }
}

/// The `RLIMIT_NOFILE` part of `startup_checks`.
fn fit_nofile(
    effective: &mut BrokerConfig,
    host: &HostFacts,
    cores: usize,
    is_default: bool,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) {
    let needed = nofile_needed(effective, cores);
    let Some(soft) = host.nofile_soft.filter(|soft| *soft < needed) else {
        return;
    };
    let margin = needed
        - u64::try_from(effective.limits.connections_max)
            .unwrap_or(u64::MAX)
            .saturating_mul(effective.server.nofile_per_stream);
    let fitting = soft.saturating_sub(margin) / effective.server.nofile_per_stream.max(1);
    if is_default && fitting > 0 {
        warnings.push(format!(
            "RLIMIT_NOFILE is {soft}, too low for the default limits.connections_max = {} \
             (needs {needed}); running with limits.connections_max = {fitting}. Raise \
             LimitNOFILE= in the unit or `ulimit -n` to get the default",
            effective.limits.connections_max
        ));
        effective.limits.connections_max = usize::try_from(fitting).unwrap_or(usize::MAX);
    } else {
        refusals.push(format!(
            "RLIMIT_NOFILE is {soft} but limits.connections_max = {} x \
             server.nofile_per_stream = {} plus {margin} for listeners and runtimes needs \
             {needed}: raise LimitNOFILE= in the unit or `ulimit -n`, or lower \
             limits.connections_max to at most {fitting}",
            effective.limits.connections_max, effective.server.nofile_per_stream
        ));
    }
}

/// The memory-budget part of `startup_checks`: the worst case must fit; a default
/// `limits.connections_max` is lowered until it does.
fn fit_budget(
    effective: &mut BrokerConfig,
    host: &HostFacts,
    is_default: bool,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) -> MemoryBudget {
    let mut budget = host.budget_of(effective);
    if budget.fits() || !is_default {
        if !budget.fits() {
            refusals.push(budget.refusal());
        }
        return budget;
    }
    let wanted = effective.limits.connections_max;
    while !budget.fits() && effective.limits.connections_max > 1 {
        effective.limits.connections_max /= 2;
        budget = host.budget_of(effective);
    }
    if budget.fits() {
        warnings.push(format!(
            "the default limits.connections_max = {wanted} does not fit the memory budget \
             (limits.memory_bytes_max); running with limits.connections_max = {} ({budget})",
            effective.limits.connections_max
        ));
    } else {
        refusals.push(budget.refusal());
    }
    budget
}

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

/// What a SIGHUP does, decided from the running configuration and the freshly loaded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadPlan {
    /// The new configuration did not load or validate: keep running with the old one.
    Invalid(Vec<ConfigError>),
    /// Nothing changed.
    Unchanged,
    /// Apply `config`: `changes` lists the reloadable keys applied
    /// (`"timeouts.claim_deadline_ms: 30000 -> 5000"`), `restart_required` the changed keys
    /// kept at their old value until a restart.
    Apply {
        /// The configuration to run with from now on.
        config: Box<BrokerConfig>,
        /// Reloadable changes applied.
        changes: Vec<String>,
        /// Changed keys that need a restart, ignored.
        restart_required: Vec<String>,
    },
}

/// Decides a reload: validate the new configuration, apply its reloadable keys, and report the
/// others.
#[must_use]
pub fn plan_reload(
    current: &BrokerConfig,
    loaded: Result<BrokerConfig, Vec<ConfigError>>,
) -> ReloadPlan {
    let new = match loaded {
        Ok(new) => new,
        Err(errors) => return ReloadPlan::Invalid(errors),
    };
    let errors = new.validate();
    if !errors.is_empty() {
        return ReloadPlan::Invalid(errors);
    }
    let (config, restart_required) = match reloadable_diff(current, &new) {
        Ok(_) => (new, Vec::new()),
        Err(restart_required) => (apply_reloadable(current, &new), restart_required),
    };
    // `config` differs from `current` in reloadable keys only, so this diff is always `Ok`.
    let changes = reloadable_diff(current, &config).unwrap_or_default();
    if changes.is_empty() && restart_required.is_empty() {
        ReloadPlan::Unchanged
    } else {
        ReloadPlan::Apply {
            config: Box::new(config),
            changes,
            restart_required,
        }
    }
}

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

/// The main thread's loop once the broker listens: SIGHUP reloads through `load` (the same
/// sources re-read), SIGTERM/SIGINT (or the signal thread going away) drains. Returns the
/// drain's summary.
pub fn serve<S, L>(
    service: S,
    (admin, log, host): (&AdminServer, &LogControl, &HostFacts),
    events: &Receiver<Event>,
    mut config: BrokerConfig,
    mut load: L,
) -> DrainSummary
where
    S: Service,
    L: FnMut() -> Result<BrokerConfig, Vec<ConfigError>>,
{
    // Anything but a reload (a drain, or the signal thread gone) ends serving.
    while let Ok(Event::Reload) = events.recv() {
        match plan_reload(&config, load()) {
            ReloadPlan::Invalid(errors) => {
                for error in &errors {
                    tracing::error!(%error, "reload refused; keeping the running config");
                }
            }
            ReloadPlan::Unchanged => tracing::info!("reload: nothing changed"),
            ReloadPlan::Apply {
                config: new,
                changes,
                restart_required,
            } => {
                let budget = host.budget_of(&new);
                if !budget.fits() {
                    tracing::error!(
                        "reload refused; keeping the running config: {}",
                        budget.refusal()
                    );
                    continue;
                }
                // Applied first, so "reload applied" in the log means it is in force.
                for core in service.reload(&new, budget) {
                    tracing::warn!(
                        core = core.index(),
                        "core did not take the reload (it is not answering)"
                    );
                }
                for change in &changes {
                    tracing::info!(change, "reload applied");
                }
                for key in &restart_required {
                    tracing::warn!(key, "changed key needs a restart; keeping the old value");
                }
                admin.set_healthz_deadline(Duration::from_millis(new.timeouts.healthz_deadline_ms));
                if new.log.level != config.log.level {
                    log.set_level(&new.log.level);
                }
                config = *new;
            }
        }
    }
    drain(service, admin, &config)
}

/// `serve`'s end: tells systemd and the admin server, then drains within
/// `server.drain_deadline_ms`.
fn drain<S: Service>(service: S, admin: &AdminServer, config: &BrokerConfig) -> DrainSummary {
    let deadline = Duration::from_millis(config.server.drain_deadline_ms);
    tracing::info!(deadline_ms = config.server.drain_deadline_ms, "draining");
    notify(&[
        sd_notify::NotifyState::Stopping,
        sd_notify::NotifyState::Status("draining"),
    ]);
    admin.set_draining();
    let summary = service.drain(deadline);
    if summary.timed_out {
        tracing::warn!(
            streams = summary.streams_closed,
            "drain deadline reached with cores still busy"
        );
    } else {
        tracing::info!(streams = summary.streams_closed, "drained");
    }
    summary
}

/// The machine-parseable start line tests and scripts read from stderr (`ws=off` when the
/// WebSocket listener is disabled).
#[must_use]
pub fn listening_line(
    (listen, admin, ws): (SocketAddr, SocketAddr, Option<SocketAddr>),
    driver: &str,
    cores: usize,
) -> String {
    let ws = ws.map_or_else(|| "off".to_owned(), |ws| ws.to_string());
    format!(
        "bps-broker listening listen={listen} admin={admin} ws={ws} driver={driver} cores={cores}"
    )
}

/// Everything `run` needs from `main.rs`: how to start the broker with a configuration and
/// its worst-case memory.
pub type Start<S> = fn(&BrokerConfig, MemoryBudget) -> Result<S, String>;

/// The whole `run` path after the command line is parsed: load and validate the config, start
/// logging, check the host, start the broker and the admin server, tell systemd, serve until a
/// drain. Returns the process exit code (0 after a drain, 1 on any refusal).
#[must_use]
pub fn run<S: Service>(sources: &ConfigSources, start: Start<S>) -> u8 {
    match start_and_serve(sources, start) {
        Ok(()) => 0,
        Err(Refused) => 1,
    }
}

/// A start-up step refused; it has said why (on stderr, or in the log once there is one).
struct Refused;

/// `run`'s sequence, one named step each, stopping at the first refusal.
fn start_and_serve<S: Service>(sources: &ConfigSources, start: Start<S>) -> Result<(), Refused> {
    let config = load_config(sources)?;
    let log = start_logging(&config)?;
    let host = host_facts(&config);
    let (config, budget) = check_host(&config, &host)?;
    // Handlers first, so a SIGTERM during start is a drain and not a kill mid-bind.
    let (signals, events) = install_signal_handlers()?;
    let (service, admin) = start_service(&config, budget, start)?;
    announce_listening(&service, &admin);
    let watchdog = Watchdog::start(service.admin_backend());
    // A reload re-reads the same sources and fits them to the host the same way, so a
    // default lowered at start is not mistaken for a change.
    let summary = serve(service, (&admin, &log, &host), &events, config, || {
        BrokerConfig::load_from_process_env(sources)
            .map(|loaded| startup_checks(&loaded, &host).map_or(loaded, |(fitted, _, _)| fitted))
    });
    if log.lines_dropped() > 0 {
        eprintln!(
            "bps-broker: {} log lines were dropped while stderr was not keeping up",
            log.lines_dropped()
        );
    }
    drop(watchdog);
    admin.stop();
    drop(signals);
    tracing::info!(
        streams_closed = summary.streams_closed,
        timed_out = summary.timed_out,
        "stopped"
    );
    Ok(())
}

/// Step 1: the config from every source, validated; errors on stderr (no log yet).
fn load_config(sources: &ConfigSources) -> Result<BrokerConfig, Refused> {
    let config = BrokerConfig::load_from_process_env(sources).map_err(|errors| {
        refuse_config(&errors);
        Refused
    })?;
    let errors = config.validate();
    if !errors.is_empty() {
        refuse_config(&errors);
        return Err(Refused);
    }
    Ok(config)
}

/// Step 2: the log, as configured (`RUST_LOG` wins).
fn start_logging(config: &BrokerConfig) -> Result<LogControl, Refused> {
    init_logging(&config.log, std::env::var("RUST_LOG").ok()).map_err(|message| {
        eprintln!("error: {message}");
        Refused
    })
}

/// Step 3: what the host offers, raising the file-descriptor soft limit to what the config
/// needs on the cores it will run on.
fn host_facts(config: &BrokerConfig) -> HostFacts {
    let available = available_cores();
    let needed = nofile_needed(config, config.effective_cores(available));
    HostFacts {
        available_cores: available,
        nofile_soft: raise_nofile_limit(needed),
        memory_bytes: crate::budget::host_memory_bytes(),
    }
}

/// Step 4: [`startup_checks`], its warnings and refusals logged: the config fitted to the
/// host and its worst-case memory.
fn check_host(
    config: &BrokerConfig,
    host: &HostFacts,
) -> Result<(BrokerConfig, MemoryBudget), Refused> {
    match startup_checks(config, host) {
        Ok((config, warnings, budget)) => {
            for warning in warnings {
                tracing::warn!("{warning}");
            }
            tracing::info!("memory budget: {budget}");
            Ok((config, budget))
        }
        Err(refusals) => {
            for refusal in refusals {
                tracing::error!("refusing to start: {refusal}");
            }
            Err(Refused)
        }
    }
}

/// Step 5: the signal handlers, and the events they send.
fn install_signal_handlers() -> Result<(SignalWatcher, Receiver<Event>), Refused> {
    SignalWatcher::start().map_err(|error| {
        tracing::error!("cannot install signal handlers: {error}");
        Refused
    })
}

/// Step 6: the admin listener bound, the broker started, the admin server serving it. A
/// broker whose admin server cannot start is drained at once.
fn start_service<S: Service>(
    config: &BrokerConfig,
    budget: MemoryBudget,
    start: Start<S>,
) -> Result<(S, AdminServer), Refused> {
    let admin_listener =
        crate::admin::AdminListener::bind(config.server.admin_listen).map_err(|error| {
            tracing::error!(
                "cannot listen on {} (server.admin_listen): {error}",
                config.server.admin_listen
            );
            Refused
        })?;
    let service = start(config, budget).map_err(|message| {
        tracing::error!("cannot start: {message}");
        Refused
    })?;
    let healthz_deadline = Duration::from_millis(config.timeouts.healthz_deadline_ms);
    match admin_listener.serve(service.admin_backend(), healthz_deadline) {
        Ok(admin) => Ok((service, admin)),
        Err(error) => {
            tracing::error!("cannot start the admin server: {error}");
            let _ = service.drain(Duration::ZERO);
            Err(Refused)
        }
    }
}

/// Step 7: the listening line on stderr and in the log, and "ready" to systemd.
fn announce_listening<S: Service>(service: &S, admin: &AdminServer) {
    let line = listening_line(
        (service.listen_addr(), admin.local_addr(), service.ws_addr()),
        service.driver(),
        service.cores(),
    );
    eprintln!("{line}");
    tracing::info!(
        listen = %service.listen_addr(),
        admin = %admin.local_addr(),
        driver = service.driver(),
        cores = service.cores(),
        "listening"
    );
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(&line),
    ]);
}

/// Prints every config error, one per line, and returns exit code 1.
fn refuse_config(errors: &[ConfigError]) -> u8 {
    for error in errors {
        eprintln!("error: {error}");
    }
    1
}

/// `check-config`: 0 with "config ok" and the effective config on stdout, or 1 with every
/// error on stderr, one per line. Host checks that would refuse `run` here are printed as
/// warnings: the config may be meant for another host.
#[must_use]
pub fn check_config(sources: &ConfigSources) -> u8 {
    let config = match BrokerConfig::load_from_process_env(sources) {
        Ok(config) => config,
        Err(errors) => return refuse_config(&errors),
    };
    let errors = config.validate();
    if !errors.is_empty() {
        return refuse_config(&errors);
    }
    match startup_checks(&config, &HostFacts::probe()) {
        Ok((_, warnings, budget)) => {
            for warning in warnings {
                eprintln!("warning: {warning}");
            }
            eprintln!("memory budget: {budget}");
        }
        Err(refusals) => {
            for refusal in refusals {
                eprintln!("warning: on this host, run would refuse: {refusal}");
            }
        }
    }
    println!("config ok");
    print!("{}", config.to_toml());
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(cores: usize, nofile: u64) -> HostFacts {
        HostFacts {
            available_cores: cores,
            nofile_soft: Some(nofile),
            memory_bytes: 64 << 30,
        }
    }

    #[test]
    fn startup_checks_pass_with_room() {
        let config = BrokerConfig::default();
        let Ok((effective, warnings, _)) = startup_checks(&config, &host(4, 1 << 20)) else {
            panic!("refused");
        };
        assert_eq!(effective, config);
        assert!(warnings.is_empty());
    }

    #[test]
    fn startup_checks_refuse_too_many_cores_and_explicit_connections() {
        let mut config = BrokerConfig::default();
        config.server.cores = 8;
        config.limits.connections_max = 10_000;
        let Err(refusals) = startup_checks(&config, &host(2, 1024)) else {
            panic!("accepted");
        };
        assert_eq!(refusals.len(), 2);
        assert!(refusals[0].contains("server.cores = 8"));
        assert!(refusals[1].contains("LimitNOFILE="));
        assert!(refusals[1].contains("ulimit -n"));
        assert!(refusals[1].contains("limits.connections_max"));
    }

    #[test]
    fn startup_checks_fit_the_default_connection_bound() {
        let config = BrokerConfig::default();
        let Ok((effective, warnings, _)) = startup_checks(&config, &host(2, 20_000)) else {
            panic!("refused");
        };
        // 20000 minus 64 base minus 2 x 8 per core.
        assert_eq!(effective.limits.connections_max, 19_920);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("LimitNOFILE="));
    }

    #[test]
    fn more_cpus_than_a_stream_id_names_run_on_the_most_it_can() {
        let config = BrokerConfig::default();
        let Ok((_, warnings, _)) = startup_checks(&config, &host(300, 1 << 20)) else {
            panic!("refused");
        };
        assert_eq!(config.effective_cores(300), crate::config::CORES_MAX);
        assert!(
            warnings
                .iter()
                .any(|warning| warning.contains("running on 256")),
            "{warnings:?}"
        );
    }

    #[test]
    fn the_memory_budget_lowers_a_default_and_refuses_an_explicit_bound() {
        let mut small = host(2, 1 << 20);
        small.memory_bytes = 4 << 30;
        let config = BrokerConfig::default();
        let Ok((effective, warnings, budget)) = startup_checks(&config, &small) else {
            panic!("refused");
        };
        assert!(effective.limits.connections_max < config.limits.connections_max);
        assert!(budget.fits(), "{budget}");
        assert!(warnings[0].contains("memory budget"), "{warnings:?}");
        let mut explicit = config.clone();
        explicit.limits.connections_max = config.limits.connections_max - 1;
        let Err(refusals) = startup_checks(&explicit, &small) else {
            panic!("accepted");
        };
        assert!(
            refusals[0].contains("limits.memory_bytes_max"),
            "{refusals:?}"
        );
    }

    #[test]
    fn a_verification_queue_too_small_for_the_frames_in_flight_is_refused() {
        let mut config = BrokerConfig::default();
        config.verify.queue_jobs_max = 100;
        let Err(refusals) = startup_checks(&config, &host(2, 1 << 20)) else {
            panic!("accepted");
        };
        assert!(
            refusals[0].contains("verify.queue_jobs_max = 100"),
            "{refusals:?}"
        );
    }

    #[test]
    fn nofile_needed_counts_margins() {
        let mut config = BrokerConfig::default();
        config.limits.connections_max = 1000;
        config.server.nofile_per_stream = 2;
        assert_eq!(nofile_needed(&config, 4), 2000 + 64 + 32);
    }

    #[test]
    fn reload_plans() {
        let current = BrokerConfig::default();
        assert_eq!(
            plan_reload(&current, Ok(current.clone())),
            ReloadPlan::Unchanged
        );

        let mut new = current.clone();
        new.timeouts.claim_deadline_ms = 5000;
        new.server.cores = 3;
        new.limits.frame_bytes_max = 20_000;
        let ReloadPlan::Apply {
            config,
            changes,
            restart_required,
        } = plan_reload(&current, Ok(new))
        else {
            panic!("expected apply");
        };
        assert_eq!(config.timeouts.claim_deadline_ms, 5000);
        assert_eq!(config.server.cores, 0);
        assert_eq!(
            config.limits.frame_bytes_max,
            current.limits.frame_bytes_max
        );
        assert_eq!(
            changes,
            vec!["timeouts.claim_deadline_ms: 30000 -> 5000".to_owned()]
        );
        assert_eq!(
            restart_required,
            vec![
                "limits.frame_bytes_max".to_owned(),
                "server.cores".to_owned()
            ]
        );

        let mut invalid = current.clone();
        invalid.limits.cohorts_max = 0;
        let ReloadPlan::Invalid(errors) = plan_reload(&current, Ok(invalid)) else {
            panic!("expected invalid");
        };
        assert_eq!(errors[0].key, "limits.cohorts_max");
    }

    #[test]
    fn listening_line_is_stable() {
        assert_eq!(
            listening_line(
                (
                    SocketAddr::from(([127, 0, 0, 1], 5)),
                    SocketAddr::from(([127, 0, 0, 1], 6)),
                    Some(SocketAddr::from(([127, 0, 0, 1], 7)))
                ),
                "epoll",
                2
            ),
            "bps-broker listening listen=127.0.0.1:5 admin=127.0.0.1:6 ws=127.0.0.1:7 driver=epoll cores=2"
        );
    }
}
