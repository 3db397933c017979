//! The daemon's life, from the parsed command line to the exit code.
//!
//! Owns: `run` and its start-up as named steps (`start_and_serve`: config, logging, host
//! facts, host checks, signal handlers, the broker and its admin server, the listening line),
//! `serve` (the main thread's loop from "listening" to "drained": SIGHUP reloads,
//! SIGTERM/SIGINT drains), `drain`, `listening_line`, `check_config`, `p2p_identity`, and the `Service` trait
//! through which it drives the running broker (`main.rs` implements it over `io::Broker`).
//! The concepts those steps use are one file each: `logging` (the tracing subscriber),
//! `host` (the host's facts and the startup checks), `signals` (the signal thread), `reload`
//! (which changes a SIGHUP applies), `systemd` (notifications and the watchdog); their public
//! items are re-exported here, so every path is `lifecycle::X`.
//! Never does: I/O on the broker's sockets or protocol decisions.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crossbeam::channel::Receiver;

use crate::admin::{AdminBackend, AdminServer};
use crate::budget::MemoryBudget;
use crate::config::{BrokerConfig, ConfigError, ConfigSources};
use crate::protocol::CoreId;

mod host;
mod logging;
mod reload;
mod signals;
mod systemd;

pub use host::{
    HostFacts, NOFILE_BASE_MARGIN, NOFILE_PER_CORE_MARGIN, available_cores, nofile_needed,
    raise_nofile_limit, startup_checks,
};
pub use logging::{LogControl, init_logging};
pub use reload::{ReloadPlan, plan_reload};
pub use signals::{Event, SignalWatcher};
pub use systemd::{Watchdog, notify};

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
    /// The libp2p addresses bee nodes dial, each ending in `/p2p/<peer id>`, when
    /// `p2p.enabled`.
    fn p2p_addrs(&self) -> Option<Vec<String>>;
}

/// What a drain did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainSummary {
    /// Streams open when the drain began (all closed by it unless it timed out).
    pub streams_closed: u64,
    /// Whether some core was still busy at the deadline.
    pub timed_out: bool,
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
/// WebSocket listener is disabled; `p2p=` the libp2p addresses, comma-separated, or `off`).
#[must_use]
pub fn listening_line(
    (listen, admin, ws): (SocketAddr, SocketAddr, Option<SocketAddr>),
    driver: &str,
    cores: usize,
    p2p: Option<&[String]>,
) -> String {
    let ws = ws.map_or_else(|| "off".to_owned(), |ws| ws.to_string());
    let p2p = p2p.map_or_else(|| "off".to_owned(), |addrs| addrs.join(","));
    format!(
        "bps-broker listening listen={listen} admin={admin} ws={ws} driver={driver} cores={cores} p2p={p2p}"
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
        service.p2p_addrs().as_deref(),
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

/// The configuration of `sources` when it loads and validates; else every error on stderr
/// and the exit code 1.
fn valid_config(sources: &ConfigSources) -> Result<BrokerConfig, u8> {
    let config = BrokerConfig::load_from_process_env(sources).map_err(|e| refuse_config(&e))?;
    let errors = config.validate();
    if errors.is_empty() {
        Ok(config)
    } else {
        Err(refuse_config(&errors))
    }
}

/// `check-config`: 0 with "config ok" and the effective config on stdout, or 1 with every
/// error on stderr, one per line. Host checks that would refuse `run` here are printed as
/// warnings: the config may be meant for another host.
#[must_use]
pub fn check_config(sources: &ConfigSources) -> u8 {
    let config = match valid_config(sources) {
        Ok(config) => config,
        Err(code) => return code,
    };
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

/// `p2p-identity`: 0 with the libp2p identity on stdout (`io::describe_identity`), or 1 with
/// the config's errors or the key files' on stderr.
#[must_use]
pub fn p2p_identity(sources: &ConfigSources) -> u8 {
    let config = match valid_config(sources) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match crate::io::describe_identity(&config) {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(error) => {
            eprintln!("error: {error}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                2,
                None,
            ),
            "bps-broker listening listen=127.0.0.1:5 admin=127.0.0.1:6 ws=127.0.0.1:7 driver=epoll cores=2 p2p=off"
        );
        assert_eq!(
            listening_line(
                (
                    SocketAddr::from(([127, 0, 0, 1], 5)),
                    SocketAddr::from(([127, 0, 0, 1], 6)),
                    None
                ),
                "io_uring",
                1,
                Some(&[
                    "/ip4/127.0.0.1/tcp/9/p2p/Qm1".to_owned(),
                    "/ip6/::1/tcp/9/p2p/Qm1".to_owned()
                ]),
            ),
            "bps-broker listening listen=127.0.0.1:5 admin=127.0.0.1:6 ws=off driver=io_uring cores=1 p2p=/ip4/127.0.0.1/tcp/9/p2p/Qm1,/ip6/::1/tcp/9/p2p/Qm1"
        );
    }
}
