//! The I/O layer: monoio runtimes, one per core, pinned; listeners; connections; the
//! verification pool's wiring; and the handle the daemon's main thread holds.
//!
//! Owns threads, sockets and the clock. Never decides a protocol question: every frame
//! goes to `protocol::Machine` on the cohort's home core and its actions are executed as
//! they come (ARCHITECTURE.md section 2).
//!
//! Shape: core `k` runs a runtime with its own `SO_REUSEPORT` listener and a `Shard` that
//! owns its connections and the state machine of the cohorts whose canonical key hashes
//! to `k`. A connection stays on the core that accepted it; its frames travel to the home
//! core through bounded inboxes, and deliveries travel back as one message per core per
//! accepted frame, never one per subscriber.

mod conn;
pub mod inbox;
mod iovec;
mod listener;
mod notify;
mod shard;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bps_verify::pool::{Pool, PoolConfig, PoolStats};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::admin::{AdminBackend, MetricsSnapshot};
use crate::config::{BrokerConfig, IoUringMode, VerifyMode};
use crate::metrics::{CoreMetrics, protocol_figures};
use crate::protocol::{CounterRegistry, Machine, Millis, PeerLedger, Ticket};
use inbox::{Inbox, Msg, ask};
use shard::Shard;

/// What connections and the loop need from the configuration, fixed at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub frame_bytes_max: usize,
    pub join_deadline_ms: u64,
    pub write_batch_frames_max: usize,
    pub outbound_queue_frames_max: usize,
    pub frames_in_flight_per_stream_max: usize,
    pub connections_max: usize,
    /// Jobs verified per loop turn when verifying inline.
    pub verify_batch_jobs_max: usize,
    /// Owners whose key an inline verifier keeps.
    pub key_cache_keys_max: usize,
}

/// What every core shares.
pub struct Shared {
    pub inboxes: Arc<[Inbox]>,
    pub metrics: Vec<Arc<CoreMetrics>>,
    /// Every core's protocol counters, read at scrape time.
    pub registries: Vec<Arc<CounterRegistry>>,
    pub ledger: Arc<PeerLedger>,
    /// The verification pool; `None` when every core verifies inline.
    pub pool: Option<Pool<(usize, Ticket)>>,
    pub pool_stats: Option<Arc<PoolStats>>,
    pub settings: Settings,
    epoch: Instant,
    pub connections: AtomicUsize,
    draining: AtomicBool,
    /// `limits.cohort_series_max`, reloadable.
    cohort_series_max: AtomicUsize,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("cores", &self.inboxes.len())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Milliseconds since the broker started: the state machine's clock.
    pub fn now(&self) -> Millis {
        Millis(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }
}

/// Why the broker did not start.
#[derive(Debug)]
pub enum StartError {
    /// `io_uring = "required"` and the kernel (or a seccomp filter) refuses it.
    IoUringUnavailable,
    /// The listen address could not be bound.
    Bind {
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// A core's thread or runtime could not be created.
    Runtime(std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::IoUringUnavailable => write!(
                f,
                "server.io_uring = \"required\" but io_uring is unavailable (kernel too old, \
                 kernel.io_uring_disabled set, or blocked by seccomp); set it to \"prefer\" to \
                 fall back to epoll"
            ),
            Self::Bind { addr, error } => {
                write!(f, "cannot listen on {addr} (server.listen): {error}")
            }
            Self::Runtime(error) => write!(f, "cannot start a core runtime: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What a drain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Connections open when the drain began.
    pub streams_closed: u64,
    /// Whether some core was still busy at the deadline.
    pub timed_out: bool,
}

/// The running broker.
pub struct Broker {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    exited: crossbeam::channel::Receiver<usize>,
    listen_addr: SocketAddr,
    driver: &'static str,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("listen_addr", &self.listen_addr)
            .field("driver", &self.driver)
            .field("cores", &self.threads.len())
            .finish()
    }
}

impl Broker {
    /// Binds, starts one pinned runtime per core and the verification pool.
    pub fn start(config: &BrokerConfig) -> Result<Self, StartError> {
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        let available = core_ids.len().max(1);
        let cores = if config.server.cores == 0 {
            available
        } else {
            config.server.cores
        };
        let uring = match config.server.io_uring {
            IoUringMode::Off => false,
            IoUringMode::Prefer => monoio::utils::detect_uring(),
            IoUringMode::Required => {
                if !monoio::utils::detect_uring() {
                    return Err(StartError::IoUringUnavailable);
                }
                true
            }
        };
        let driver = if uring { "io_uring" } else { "epoll" };

        let listen = config.server.listen;
        let listeners = listener::bind_all(listen, cores).map_err(|error| StartError::Bind {
            addr: listen,
            error,
        })?;
        let listen_addr = listeners[0]
            .local_addr()
            .map_err(|error| StartError::Bind {
                addr: listen,
                error,
            })?;

        let protocol = config.protocol();
        let inboxes: Arc<[Inbox]> = (0..cores)
            .map(|_| Inbox::new(config.server.inbox_messages_max))
            .collect();
        let pool = match config.verify.mode {
            VerifyMode::Pool => Some(start_pool(config, cores, &core_ids, Arc::clone(&inboxes))),
            VerifyMode::Inline => None,
        };
        let ledger = Arc::new(PeerLedger::new(&protocol));
        let mut machines: Vec<Machine> = (0..cores)
            .map(|_| Machine::new(protocol.clone(), Arc::clone(&ledger), StdRng::from_os_rng()))
            .collect();
        let shared = Arc::new(Shared {
            inboxes,
            metrics: (0..cores)
                .map(|_| Arc::new(CoreMetrics::default()))
                .collect(),
            registries: machines.iter().map(Machine::counters).collect(),
            ledger,
            pool_stats: pool.as_ref().map(Pool::stats),
            pool,
            settings: Settings {
                frame_bytes_max: protocol.frame_bytes_max,
                join_deadline_ms: config.server.join_deadline_ms,
                write_batch_frames_max: config.server.write_batch_frames_max,
                outbound_queue_frames_max: protocol.outbound_queue_frames_max,
                frames_in_flight_per_stream_max: protocol.frames_in_flight_per_stream_max,
                connections_max: config.limits.connections_max,
                verify_batch_jobs_max: config.verify.batch_jobs_max,
                key_cache_keys_max: config.verify.key_cache_keys_max,
            },
            epoch: Instant::now(),
            connections: AtomicUsize::new(0),
            draining: AtomicBool::new(false),
            cohort_series_max: AtomicUsize::new(config.limits.cohort_series_max),
        });

        let (exit_tx, exited) = crossbeam::channel::unbounded();
        let mut threads = Vec::with_capacity(cores);
        for (core, (listener, machine)) in listeners.into_iter().zip(machines.drain(..)).enumerate()
        {
            let shared = Arc::clone(&shared);
            let pin = core_ids.get(core % available).copied();
            let exit_tx = exit_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("bps-core-{core}"))
                .spawn(move || {
                    if let Some(id) = pin {
                        core_affinity::set_for_current(id);
                    }
                    let result = run_core(core, shared, listener, machine, uring);
                    if let Err(error) = result {
                        tracing::error!(core, %error, "core runtime failed");
                    }
                    let _ = exit_tx.send(core);
                })
                .map_err(StartError::Runtime)?;
            threads.push(thread);
        }
        Ok(Self {
            shared,
            threads,
            exited,
            listen_addr,
            driver,
        })
    }

    /// The address streams connect to (the real port when configured with port 0).
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// `io_uring` or `epoll`.
    pub fn driver(&self) -> &'static str {
        self.driver
    }

    /// Cores running.
    pub fn cores(&self) -> usize {
        self.threads.len()
    }

    /// What the admin endpoints read.
    pub fn admin_backend(&self) -> Arc<dyn AdminBackend> {
        Arc::new(Backend {
            shared: Arc::clone(&self.shared),
            driver: self.driver,
        })
    }

    /// Applies reloadable settings on every core.
    pub fn reload(&self, config: &BrokerConfig) {
        // The broker-wide bounds (R31, R32, the blocklist's size) live in the shared ledger.
        self.shared.ledger.reconfigure(&config.protocol());
        self.shared
            .cohort_series_max
            .store(config.limits.cohort_series_max, Ordering::Relaxed);
        for inbox in self.shared.inboxes.iter() {
            inbox.push_blocking(Msg::Reload(Box::new(config.protocol())));
        }
    }

    /// Stops accepting, closes every stream cleanly, and waits for the cores up to
    /// `deadline`.
    pub fn drain(self, deadline: Duration) -> DrainReport {
        self.shared.draining.store(true, Ordering::Relaxed);
        let streams_closed = self.shared.connections.load(Ordering::Relaxed) as u64;
        for inbox in self.shared.inboxes.iter() {
            inbox.push_blocking(Msg::Drain);
        }
        let until = Instant::now() + deadline;
        let mut remaining = self.threads.len();
        while remaining > 0 {
            let left = until.saturating_duration_since(Instant::now());
            match self.exited.recv_timeout(left) {
                Ok(_) => remaining -= 1,
                Err(_) => break,
            }
        }
        let timed_out = remaining > 0;
        if !timed_out {
            for thread in self.threads {
                let _ = thread.join();
            }
        }
        DrainReport {
            streams_closed,
            timed_out,
        }
    }
}

fn start_pool(
    config: &BrokerConfig,
    cores: usize,
    core_ids: &[core_affinity::CoreId],
    inboxes: Arc<[Inbox]>,
) -> Pool<(usize, Ticket)> {
    let workers = if config.verify.workers == 0 {
        cores
    } else {
        config.verify.workers
    };
    let pins: Vec<core_affinity::CoreId> = core_ids.iter().copied().take(cores).collect();
    Pool::start(
        PoolConfig {
            workers,
            queue_jobs_max: config.verify.queue_jobs_max,
            batch_jobs_max: config.verify.batch_jobs_max,
            batch_wait_us: config.verify.batch_wait_us,
            key_cache_keys_max: config.verify.key_cache_keys_max,
        },
        move |worker| {
            if !pins.is_empty() {
                core_affinity::set_for_current(pins[worker % pins.len()]);
            }
        },
        move |batch: Vec<inbox::VerifyDone>| {
            // One inbox message per asking core per batch.
            let mut per_core: Vec<Vec<_>> = (0..inboxes.len()).map(|_| Vec::new()).collect();
            for done in batch {
                per_core[done.tag.0].push(done);
            }
            for (core, done) in per_core.into_iter().enumerate() {
                if !done.is_empty() {
                    inboxes[core].push_blocking(Msg::Verified(done));
                }
            }
        },
    )
}

fn run_core(
    core: usize,
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    machine: Machine,
    uring: bool,
) -> std::io::Result<()> {
    if uring {
        let mut runtime = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()?;
        runtime.block_on(serve(core, shared, listener, machine))
    } else {
        let mut runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()?;
        runtime.block_on(serve(core, shared, listener, machine))
    }
}

async fn serve(
    core: usize,
    shared: Arc<Shared>,
    listener: std::net::TcpListener,
    machine: Machine,
) -> std::io::Result<()> {
    let listener = monoio::net::TcpListener::from_std(listener)?;
    let shard = std::rc::Rc::new(Shard::new(core, shared, machine));
    monoio::spawn(std::rc::Rc::clone(&shard).accept_loop(listener));
    shard.main_loop().await;
    Ok(())
}

struct Backend {
    shared: Arc<Shared>,
    driver: &'static str,
}

impl AdminBackend for Backend {
    fn ping(&self, deadline: Duration) -> Vec<bool> {
        self.shared
            .inboxes
            .iter()
            .map(|inbox| ask(inbox, |reply| Msg::Ping { reply }, deadline).is_some())
            .collect()
    }

    fn cohorts(&self, deadline: Duration) -> Option<Vec<serde_json::Value>> {
        let mut all = Vec::new();
        for inbox in self.shared.inboxes.iter() {
            all.extend(ask(inbox, |reply| Msg::Snapshot { reply }, deadline)?);
        }
        Some(all)
    }

    fn metrics(&self) -> MetricsSnapshot {
        let (protocol, cohorts) = protocol_figures(
            self.shared.registries.iter().map(|registry| &**registry),
            self.shared.cohort_series_max.load(Ordering::Relaxed),
        );
        MetricsSnapshot {
            cores: self.shared.metrics.clone(),
            driver: self.driver,
            protocol,
            cohorts,
        }
    }

    fn ready(&self) -> bool {
        !self.shared.draining.load(Ordering::Relaxed)
    }
}
