//! The I/O layer: monoio runtimes, one per core, pinned; the router between them; the
//! carriers that move a stream's bytes; the control plane; the verification pool's wiring;
//! and the handle the daemon's main thread holds.
//!
//! Owns threads, sockets and the clock. Never decides a protocol question: every frame goes
//! to `bps_core::Machine` on the cohort's home core and its actions are executed as they
//! come (ARCHITECTURE.md section 2).
//!
//! Shape: core `k` runs a runtime with its own `SO_REUSEPORT` listener, a `CoreLink` (its
//! streams' ports and the gates its carriers pass) and a `Shard` (the state machine of the
//! cohorts whose canonical key hashes to `k`, and its turn loop). A connection stays on the
//! core that accepted it; its frames travel to the home core through the `router`'s bounded
//! lanes, and deliveries travel back as one message per core per accepted frame, never one
//! per subscriber. The modules, by what they own:
//! - `carrier`: what every carrier shares (accept with backoff, socket options, the read
//!   loop, the writer task, cancellation and the close hook) and the contract a carrier
//!   fulfils (a decoder, an encoder, a way to read and write bytes); `tcp` (the TCP
//!   carrier), `ws` (the WebSocket carrier) and `p2p` (the libp2p carrier: bee's handshake,
//!   then BPS on bee's pubsub streams, all of them owned by core 0) are thin carriers on it
//!   and never import each other; `read_buffer`, `iovec`: bytes on sockets;
//! - `port`: one stream's side of the carrier boundary (it knows no carrier), `outbound` its
//!   queue (R26), `outgoing` one message of it, and `encoding` how a delivery becomes each
//!   carrier's messages (the `Encoder` a carrier puts on the port);
//! - `link`: a core's streams and the gates of its carriers; `shard`: a core's machine and
//!   its turn; `router`, `lane`: what crosses between cores (a core is a `protocol::CoreId`);
//!   `control`: the control plane;
//! - `frame_memory`: the broker-wide bound on frame bytes; `log_gate`: peers' log lines.
//!
//! Crash means crash: a broken invariant is a panic, and the daemon's panic hook ends the
//! process (`main.rs`; `panic = "abort"` in release), so systemd restarts it and no core is
//! left half alive.

mod carrier;
mod control;
mod encoding;
mod frame_memory;
#[cfg(test)]
mod harness;
mod held;
mod iovec;
mod lane;
pub mod link;
mod listener;
mod log_gate;
mod notify;
mod outbound;
mod outgoing;
mod p2p;
pub mod port;
mod read_buffer;
mod receivers;
mod root_join;
mod router;
mod shard;
mod splice;
mod tcp;
mod thread_cpu;
mod upstream;
mod ws;

pub use p2p::describe_identity;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bps_proto::CohortKey;
use bps_verify::pool::{Pool, PoolConfig, PoolStats};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::admin::{AdminBackend, MetricsSnapshot};
use crate::budget::MemoryBudget;
use crate::config::{BrokerConfig, IoUringMode, VerifyMode};
use crate::metrics::{BrokerGauges, CoreMetrics, protocol_figures};
use crate::protocol::CoreId;
use crate::protocol::{
    CohortStreams, CohortSummary, CounterRegistry, HistoryPolicy, Machine, Millis, PeerLedger,
    Ticket,
};
use control::{Control, Mailbox, ask_all};
use frame_memory::FrameMemory;
use link::CoreLink;
use router::{CoreLanes, VerifyDone};
use shard::Shard;

/// Environment variable (debug builds only) that makes one core panic shortly after start,
/// so the crash semantics (the whole process ends) can be tested on the real binary.
pub const PANIC_CORE_ENV: &str = "BPS_BROKER_TEST_PANIC_CORE";

/// What the I/O layer needs from the configuration, fixed at start.
#[derive(Debug, Clone)]
pub struct Settings {
    pub frame_bytes_max: usize,
    pub join_deadline_ms: u64,
    pub write_batch_frames_max: usize,
    pub write_coalesce_us: u64,
    pub outbound_queue_frames_max: usize,
    pub outbound_queue_bytes_max: usize,
    pub frames_in_flight_per_stream_max: usize,
    pub frames_in_flight_per_core_max: usize,
    pub connections_max: usize,
    pub overflow_messages_max: usize,
    pub tcp_keepalive_ms: u64,
    pub tcp_user_timeout_ms: u64,
    pub log_peer_lines_per_s_max: u32,
    /// Jobs verified per loop turn when verifying inline.
    pub verify_batch_jobs_max: usize,
    /// Pool mode: jobs of one turn a core verifies itself while the pool is idle.
    pub verify_idle_inline_jobs_max: usize,
    /// Owners whose key a core's own verifier keeps.
    pub key_cache_keys_max: usize,
    pub ws: ws::WsSettings,
    pub relay: root_join::RelaySettings,
}

impl Settings {
    fn of(config: &BrokerConfig, statics: Arc<ws::StaticFiles>) -> Settings {
        let protocol = config.effective_protocol();
        Settings {
            frame_bytes_max: protocol.frame_bytes_max,
            join_deadline_ms: config.server.join_deadline_ms,
            write_batch_frames_max: config.server.write_batch_frames_max,
            write_coalesce_us: config.server.write_coalesce_us,
            outbound_queue_frames_max: protocol.outbound_queue_frames_max,
            outbound_queue_bytes_max: config.limits.outbound_queue_bytes_max,
            frames_in_flight_per_stream_max: protocol.frames_in_flight_per_stream_max,
            frames_in_flight_per_core_max: config.limits.frames_in_flight_per_core_max,
            connections_max: config.limits.connections_max,
            overflow_messages_max: config.server.overflow_messages_max,
            tcp_keepalive_ms: config.server.tcp_keepalive_ms,
            tcp_user_timeout_ms: config.server.tcp_user_timeout_ms,
            log_peer_lines_per_s_max: config.log.peer_lines_per_s_max,
            verify_batch_jobs_max: config.verify.batch_jobs_max,
            verify_idle_inline_jobs_max: config.verify.idle_inline_jobs_max,
            key_cache_keys_max: config.verify.key_cache_keys_max,
            ws: ws::WsSettings::of(&config.ws, statics),
            relay: root_join::RelaySettings {
                upstreams: config.relay.upstreams.clone().into(),
                connect_timeout_ms: config.relay.connect_timeout_ms,
                reconnect_backoff_min_ms: config.relay.reconnect_backoff_min_ms,
                reconnect_backoff_max_ms: config.relay.reconnect_backoff_max_ms,
            },
        }
    }
}

/// What every core shares.
pub struct Shared {
    pub lanes: Arc<[CoreLanes]>,
    pub mailboxes: Arc<[Mailbox]>,
    pub metrics: Vec<Arc<CoreMetrics>>,
    /// Every core's protocol counters, read at scrape time.
    pub registries: Vec<Arc<CounterRegistry>>,
    pub ledger: Arc<PeerLedger>,
    /// The verification pool; `None` when every core verifies inline.
    pub pool: Option<Pool<(CoreId, Ticket)>>,
    pub pool_stats: Option<Arc<PoolStats>>,
    pub frame_memory: Arc<FrameMemory>,
    pub settings: Settings,
    epoch: Instant,
    pub connections: AtomicUsize,
    draining: AtomicBool,
    /// `limits.cohort_series_max`, reloadable.
    cohort_series_max: AtomicUsize,
    /// `timeouts.flush_deadline_ms`, reloadable.
    flush_deadline_ms: AtomicU64,
    /// `timeouts.write_progress_deadline_ms`, reloadable.
    write_progress_deadline_ms: AtomicU64,
    /// D11: whether `history = true` is served (`protocol.history`, reloadable); a bridge
    /// request for it is refused before the upgrade otherwise (W10).
    history_served: AtomicBool,
    /// The worst case of the running configuration and its budget.
    budget: std::sync::Mutex<MemoryBudget>,
    /// Each core's thread CPU clock, for the busy figure of a scrape.
    cpu_clocks: Vec<thread_cpu::ThreadCpuClock>,
    /// The keys of the home-core hash, random per process so that no one can aim cohorts at
    /// one core by choosing their keys.
    pub home_hash: std::hash::RandomState,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("cores", &self.lanes.len())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// Milliseconds since the broker started: the state machine's clock.
    pub fn now(&self) -> Millis {
        Millis(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// The flush deadline in force.
    pub fn flush_deadline_ms(&self) -> u64 {
        self.flush_deadline_ms.load(Ordering::Relaxed)
    }

    /// The write-progress deadline in force.
    pub fn write_progress_deadline_ms(&self) -> u64 {
        self.write_progress_deadline_ms.load(Ordering::Relaxed)
    }

    /// D11: whether history is served now.
    pub fn history_served(&self) -> bool {
        self.history_served.load(Ordering::Relaxed)
    }
}

/// Why the broker did not start.
#[derive(Debug)]
pub enum StartError {
    /// `io_uring = "required"` and the kernel (or a seccomp filter) refuses it.
    IoUringUnavailable,
    /// `ws.static_dir` cannot be served.
    Static(String),
    /// A listen address could not be bound (`key` names its config key).
    Bind {
        key: &'static str,
        addr: SocketAddr,
        error: std::io::Error,
    },
    /// A core's thread or runtime could not be created.
    Runtime(std::io::Error),
    /// The libp2p carrier did not start (a key file, a listen address).
    P2p(String),
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
            Self::Bind { key, addr, error } => {
                write!(f, "cannot listen on {addr} ({key}): {error}")
            }
            Self::Runtime(error) => write!(f, "cannot start a core runtime: {error}"),
            Self::Static(error) => write!(f, "cannot serve ws.static_dir: {error}"),
            Self::P2p(error) => write!(f, "cannot start the p2p host: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

/// What a drain did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    /// Connections open when the drain began.
    pub streams_closed: u64,
    /// Whether some core was still busy (or silent) at the deadline.
    pub timed_out: bool,
}

/// The running broker.
pub struct Broker {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    exited: crossbeam::channel::Receiver<CoreId>,
    listen_addr: SocketAddr,
    ws_addr: Option<SocketAddr>,
    driver: &'static str,
    /// The libp2p host when `p2p.enabled` and who it is; dropped (stopped) with the broker.
    p2p: Option<(bps_p2p::P2pHost, Arc<crate::metrics::P2pIdentity>)>,
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
    /// Binds, starts one pinned runtime per core and the verification pool. `budget` is the
    /// worst case the startup check computed for `config`.
    pub fn start(config: &BrokerConfig, budget: MemoryBudget) -> Result<Self, StartError> {
        let core_ids = core_affinity::get_core_ids().unwrap_or_default();
        let available = core_ids.len().max(1);
        let cores = config.effective_cores(available);
        let uring = use_io_uring(config.server.io_uring)?;
        let driver = if uring { "io_uring" } else { "epoll" };

        let statics = static_files(config)?;
        let (listeners, listen_addr) = bind("server.listen", config.server.listen, cores)?;
        let (ws_listeners, ws_addr) = bind_ws(config, cores)?;
        let (p2p_host, mut p2p_service) = match p2p::start(config).map_err(StartError::P2p)? {
            Some((host, service, identity)) => (Some((host, Arc::new(identity))), Some(service)),
            None => (None, None),
        };

        let protocol = config.effective_protocol();
        let ledger = Arc::new(PeerLedger::new(&protocol));
        let mut machines: Vec<Machine> = (0..cores)
            .map(|_| Machine::new(protocol.clone(), Arc::clone(&ledger), StdRng::from_os_rng()))
            .collect();
        let registries = machines.iter().map(Machine::counters).collect();
        let shared = Arc::new(shared_state(
            config,
            (cores, &core_ids),
            (budget, Arc::new(statics)),
            ledger,
            registries,
        ));

        let (exit_tx, exited) = crossbeam::channel::unbounded();
        let mut threads = Vec::with_capacity(cores);
        let per_core = listeners
            .into_iter()
            .zip(ws_listeners)
            .zip(machines.drain(..));
        for (core, (listeners, machine)) in CoreId::all(cores).zip(per_core) {
            let pin = core_ids.get(core.index() % available).copied();
            // Core 0 owns the p2p streams (`p2p`'s header says why).
            let p2p = p2p_service.take();
            let thread = spawn_core(
                core,
                (Arc::clone(&shared), (listeners, p2p), machine),
                (pin, uring),
                exit_tx.clone(),
            )?;
            threads.push(thread);
        }
        Ok(Self {
            shared,
            threads,
            exited,
            listen_addr,
            ws_addr,
            driver,
            p2p: p2p_host,
        })
    }

    /// The address streams connect to (the real port when configured with port 0).
    pub fn listen_addr(&self) -> SocketAddr {
        self.listen_addr
    }

    /// The WebSocket listener's address, when `ws.enabled`.
    pub fn ws_addr(&self) -> Option<SocketAddr> {
        self.ws_addr
    }

    /// `io_uring` or `epoll`.
    pub fn driver(&self) -> &'static str {
        self.driver
    }

    /// Cores running.
    pub fn cores(&self) -> usize {
        self.threads.len()
    }

    /// The libp2p addresses bee nodes dial (the listeners' as bound, with `/p2p/<peer id>`),
    /// when `p2p.enabled`.
    pub fn p2p_addrs(&self) -> Option<Vec<String>> {
        let (host, _) = self.p2p.as_ref()?;
        Some(p2p::dial_addresses(host.listen_addrs(), host.peer_id()))
    }

    /// What the admin endpoints read.
    pub fn admin_backend(&self) -> Arc<dyn AdminBackend> {
        Arc::new(Backend {
            shared: Arc::clone(&self.shared),
            driver: self.driver,
            p2p: self
                .p2p
                .as_ref()
                .map(|(host, identity)| (host.shared_stats(), Arc::clone(identity))),
        })
    }

    /// Applies reloadable settings on every core; never waits for a core. Returns the cores
    /// that did not take the reload (their mailbox was full: they are not answering).
    pub fn reload(&self, config: &BrokerConfig, budget: MemoryBudget) -> Vec<CoreId> {
        let shared = &self.shared;
        // The broker-wide bounds (R31, R32, the blocklist, pre-Join caps) live in the ledger.
        shared.ledger.reconfigure(&config.effective_protocol());
        shared
            .cohort_series_max
            .store(config.limits.cohort_series_max, Ordering::Relaxed);
        shared
            .flush_deadline_ms
            .store(config.timeouts.flush_deadline_ms, Ordering::Relaxed);
        shared.write_progress_deadline_ms.store(
            config.timeouts.write_progress_deadline_ms,
            Ordering::Relaxed,
        );
        shared.history_served.store(
            config.effective_protocol().history == HistoryPolicy::Serve,
            Ordering::Relaxed,
        );
        *shared
            .budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = budget;
        shared
            .mailboxes
            .iter()
            .enumerate()
            .filter(|(_, mailbox)| {
                !mailbox.send(Control::Reload(Box::new(config.effective_protocol())))
            })
            .map(|(core, _)| CoreId::new(core))
            .collect()
    }

    /// Stops accepting, closes every stream cleanly, and waits for the cores up to
    /// `deadline`; never waits on a core that does not answer.
    pub fn drain(self, deadline: Duration) -> DrainReport {
        self.shared.draining.store(true, Ordering::Relaxed);
        let streams_closed = self.shared.connections.load(Ordering::Relaxed) as u64;
        for (core, mailbox) in self.shared.mailboxes.iter().enumerate() {
            if !mailbox.send(Control::Drain) {
                tracing::warn!(core, "core did not take the drain (its mailbox is full)");
            }
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

/// Everything the cores share.
fn shared_state(
    config: &BrokerConfig,
    (cores, core_ids): (usize, &[core_affinity::CoreId]),
    (budget, statics): (MemoryBudget, Arc<ws::StaticFiles>),
    ledger: Arc<PeerLedger>,
    registries: Vec<Arc<CounterRegistry>>,
) -> Shared {
    let settings = Settings::of(config, statics);
    let lanes: Arc<[CoreLanes]> = (0..cores)
        .map(|_| CoreLanes::new(cores, config.server.inbox_messages_max))
        .collect();
    let doorbells: Arc<[Arc<lane::Doorbell>]> = lanes
        .iter()
        .map(|lanes| Arc::clone(&lanes.doorbell))
        .collect();
    let mailboxes: Arc<[Mailbox]> = doorbells
        .iter()
        .map(|doorbell| Mailbox::new(Arc::clone(doorbell)))
        .collect();
    let pool = match config.verify.mode {
        VerifyMode::Pool => Some(start_pool(config, cores, core_ids, Arc::clone(&lanes))),
        VerifyMode::Inline => None,
    };
    Shared {
        lanes,
        mailboxes,
        metrics: (0..cores).map(|_| CoreMetrics::new_shared()).collect(),
        registries,
        ledger,
        pool_stats: pool.as_ref().map(Pool::stats),
        pool,
        frame_memory: Arc::new(FrameMemory::new(
            config.limits.frame_memory_bytes_max,
            doorbells,
        )),
        settings,
        epoch: Instant::now(),
        connections: AtomicUsize::new(0),
        draining: AtomicBool::new(false),
        cohort_series_max: AtomicUsize::new(config.limits.cohort_series_max),
        flush_deadline_ms: AtomicU64::new(config.timeouts.flush_deadline_ms),
        write_progress_deadline_ms: AtomicU64::new(config.timeouts.write_progress_deadline_ms),
        history_served: AtomicBool::new(
            config.effective_protocol().history == HistoryPolicy::Serve,
        ),
        budget: std::sync::Mutex::new(budget),
        cpu_clocks: (0..cores)
            .map(|_| thread_cpu::ThreadCpuClock::default())
            .collect(),
        home_hash: std::hash::RandomState::new(),
    }
}

/// The libp2p host's totals for a scrape.
fn p2p_host_figures(
    stats: &bps_p2p::HostStats,
    identity: &Arc<crate::metrics::P2pIdentity>,
) -> crate::metrics::P2pHostFigures {
    let read = bps_p2p::HostStats::get;
    crate::metrics::P2pHostFigures {
        streams_inbound: read(&stats.streams_inbound),
        streams_outbound: read(&stats.streams_outbound),
        streams_refused: read(&stats.streams_refused),
        streams_dropped: read(&stats.inbound_dropped),
        ping_timeouts: read(&stats.ping_timeouts),
        connections_refused_limit: read(&stats.connections_refused_limit),
        connections_refused_pending_per_ip: read(&stats.connections_refused_pending_per_ip),
        identity: Arc::clone(identity),
    }
}

/// The pool's totals for a scrape.
fn pool_figures(stats: &PoolStats) -> crate::metrics::VerifyPoolFigures {
    let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    crate::metrics::VerifyPoolFigures {
        jobs: read(&stats.jobs),
        batches: read(&stats.batches),
        full: read(&stats.full),
        recoveries: read(&stats.recoveries),
        key_accepts: read(&stats.key_accepts),
        batch_checks: read(&stats.batch_checks),
        batch_failures: read(&stats.batch_failures),
        class_full: read(&stats.class_full),
        cancelled: read(&stats.cancelled),
        bisections: read(&stats.bisections),
    }
}

fn start_pool(
    config: &BrokerConfig,
    cores: usize,
    core_ids: &[core_affinity::CoreId],
    lanes: Arc<[CoreLanes]>,
) -> Pool<(CoreId, Ticket)> {
    let pins: Vec<core_affinity::CoreId> = core_ids.iter().copied().take(cores).collect();
    Pool::start(
        PoolConfig {
            workers: config.effective_verify_workers(cores),
            queue_jobs_max: config.effective_queue_jobs(cores),
            // A cohort's frames are read on every core, each core holding at most
            // `limits.frames_in_flight_per_core_max`: the per-cohort bound is the frames in
            // flight of every core, and the total bound, at least that, is never met.
            queue_jobs_per_class_max: config.limits.frames_in_flight_per_core_max * cores,
            batch_jobs_max: config.verify.batch_jobs_max,
            batch_wait_us: config.verify.batch_wait_us,
            key_cache_keys_max: config.verify.key_cache_keys_max,
        },
        move |worker| {
            if !pins.is_empty() {
                core_affinity::set_for_current(pins[worker % pins.len()]);
            }
        },
        move |batch: Vec<VerifyDone>| {
            for done in batch {
                lanes[done.tag.0.index()].push_result(done);
            }
        },
    )
}

/// One core's listeners: BPS over TCP, and WebSocket when enabled.
type CoreListeners = (std::net::TcpListener, Option<std::net::TcpListener>);

/// What one core serves: its listeners, and the libp2p host's events on the core that owns
/// p2p streams.
type CoreServes = (CoreListeners, Option<p2p::P2pService>);

/// Whether the cores run on io_uring: `server.io_uring` against what the kernel allows.
fn use_io_uring(mode: IoUringMode) -> Result<bool, StartError> {
    match mode {
        IoUringMode::Off => Ok(false),
        IoUringMode::Prefer => Ok(monoio::utils::detect_uring()),
        IoUringMode::Required if monoio::utils::detect_uring() => Ok(true),
        IoUringMode::Required => Err(StartError::IoUringUnavailable),
    }
}

/// The files of `ws.static_dir`, loaded once at start (none when it is empty).
fn static_files(config: &BrokerConfig) -> Result<ws::StaticFiles, StartError> {
    if config.ws.static_dir.is_empty() {
        return Ok(ws::StaticFiles::default());
    }
    ws::StaticFiles::load(std::path::Path::new(&config.ws.static_dir)).map_err(StartError::Static)
}

/// One WebSocket listener per core on `ws.listen`, with the address they got; one `None`
/// per core when the WebSocket listener is disabled.
fn bind_ws(
    config: &BrokerConfig,
    cores: usize,
) -> Result<(Vec<Option<std::net::TcpListener>>, Option<SocketAddr>), StartError> {
    if !config.ws.enabled {
        return Ok(((0..cores).map(|_| None).collect(), None));
    }
    let (listeners, addr) = bind("ws.listen", config.ws.listen, cores)?;
    Ok((listeners.into_iter().map(Some).collect(), Some(addr)))
}

/// Starts core `core`'s thread: pinned to `pin` if there is one, its CPU clock claimed, its
/// runtime run until it ends; its index goes to `exit_tx` when it does.
fn spawn_core(
    core: CoreId,
    (shared, listeners, machine): (Arc<Shared>, CoreServes, Machine),
    (pin, uring): (Option<core_affinity::CoreId>, bool),
    exit_tx: crossbeam::channel::Sender<CoreId>,
) -> Result<JoinHandle<()>, StartError> {
    std::thread::Builder::new()
        .name(format!("bps-core-{core}"))
        .spawn(move || {
            if let Some(id) = pin {
                core_affinity::set_for_current(id);
            }
            shared.cpu_clocks[core.index()].claim();
            let result = run_core(core, shared, listeners, machine, uring);
            if let Err(error) = result {
                tracing::error!(core = core.index(), %error, "core runtime failed");
            }
            let _ = exit_tx.send(core);
        })
        .map_err(StartError::Runtime)
}

/// Binds `cores` listeners on `addr` (the config key `key`); with the address they got.
fn bind(
    key: &'static str,
    addr: SocketAddr,
    cores: usize,
) -> Result<(Vec<std::net::TcpListener>, SocketAddr), StartError> {
    let failed = |error| StartError::Bind { key, addr, error };
    let listeners = listener::bind_all(addr, cores).map_err(failed)?;
    let bound = listeners[0].local_addr().map_err(failed)?;
    Ok((listeners, bound))
}

fn run_core(
    core: CoreId,
    shared: Arc<Shared>,
    listeners: CoreServes,
    machine: Machine,
    uring: bool,
) -> std::io::Result<()> {
    if uring {
        let mut runtime = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()?;
        runtime.block_on(serve(core, shared, listeners, machine))
    } else {
        let mut runtime = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .enable_timer()
            .build()?;
        runtime.block_on(serve(core, shared, listeners, machine))
    }
}

async fn serve(
    core: CoreId,
    shared: Arc<Shared>,
    ((listener, ws_listener), p2p_service): CoreServes,
    machine: Machine,
) -> std::io::Result<()> {
    let listener = monoio::net::TcpListener::from_std(listener)?;
    let link = Rc::new(CoreLink::new(core, shared));
    let shard = Rc::new(Shard::new(Rc::clone(&link), machine));
    monoio::spawn(tcp::accept_loop(Rc::clone(&link), listener));
    if let Some(ws_listener) = ws_listener {
        let ws_listener = monoio::net::TcpListener::from_std(ws_listener)?;
        monoio::spawn(ws::accept_loop(Rc::clone(&link), ws_listener));
    }
    if let Some(service) = p2p_service {
        monoio::spawn(p2p::serve(Rc::clone(&link), service));
    }
    inject_panic(core);
    shard.run().await;
    Ok(())
}

/// Debug builds only: panics core `BPS_BROKER_TEST_PANIC_CORE` a moment after start.
fn inject_panic(core: CoreId) {
    if !cfg!(debug_assertions) {
        return;
    }
    let chosen = std::env::var(PANIC_CORE_ENV)
        .ok()
        .and_then(|value| value.parse::<usize>().ok());
    if chosen == Some(core.index()) {
        monoio::spawn(async move {
            monoio::time::sleep(Duration::from_millis(500)).await;
            panic!("{PANIC_CORE_ENV}: core {core} panics as asked");
        });
    }
}

struct Backend {
    shared: Arc<Shared>,
    driver: &'static str,
    /// The libp2p host's counters and identity when it runs.
    p2p: Option<(Arc<bps_p2p::HostStats>, Arc<crate::metrics::P2pIdentity>)>,
}

impl Backend {
    /// Sends `make()` to every core at once and waits up to `deadline` for all answers.
    fn ask_all<T>(
        &self,
        make: impl Fn(crossbeam::channel::Sender<T>) -> Control,
        deadline: Duration,
    ) -> Vec<Option<T>> {
        ask_all(&self.shared.mailboxes, make, deadline)
    }
}

impl AdminBackend for Backend {
    fn ping(&self, deadline: Duration) -> Vec<bool> {
        self.ask_all(|reply| Control::Ping { reply }, deadline)
            .into_iter()
            .map(|answer| answer.is_some())
            .collect()
    }

    fn cohorts(&self, deadline: Duration) -> Option<Vec<CohortSummary>> {
        let answers = self.ask_all(|reply| Control::Cohorts { reply }, deadline);
        let mut all = Vec::new();
        for (core, answer) in answers.into_iter().enumerate() {
            all.extend(
                answer?
                    .into_iter()
                    .map(|summary| CohortSummary { core, ..summary }),
            );
        }
        Some(all)
    }

    fn cohort_streams(
        &self,
        key: &CohortKey,
        offset: usize,
        limit: usize,
        deadline: Duration,
    ) -> Option<Option<CohortStreams>> {
        let answers = self.ask_all(
            |reply| Control::CohortStreams {
                key: key.clone(),
                offset,
                limit,
                reply,
            },
            deadline,
        );
        let mut found = None;
        for answer in answers {
            if let Some(page) = answer? {
                found = Some(page);
            }
        }
        Some(found)
    }

    fn metrics(&self) -> MetricsSnapshot {
        let (protocol, cohorts) = protocol_figures(
            self.shared.registries.iter().map(|registry| &**registry),
            self.shared.cohort_series_max.load(Ordering::Relaxed),
        );
        let budget = self
            .shared
            .budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        MetricsSnapshot {
            cores: self.shared.metrics.clone(),
            driver: self.driver,
            protocol,
            cohorts,
            broker: BrokerGauges {
                frame_memory_bytes: self.shared.frame_memory.used() as u64,
                peers: self.shared.ledger.snapshot(),
                frame_memory_bytes_max: self.shared.frame_memory.bytes_max() as u64,
                rss_bytes: crate::budget::rss_bytes().unwrap_or(0),
                budget,
                heartbeats_ms: self
                    .shared
                    .mailboxes
                    .iter()
                    .map(|mailbox| {
                        self.shared
                            .now()
                            .as_ms()
                            .saturating_sub(mailbox.heartbeat_ms())
                    })
                    .collect(),
                core_busy: self
                    .shared
                    .cpu_clocks
                    .iter()
                    .map(thread_cpu::ThreadCpuClock::used)
                    .collect(),
                ready: self.ready(),
                verify_pool: self.shared.pool_stats.as_deref().map(pool_figures),
                p2p_host: self
                    .p2p
                    .as_ref()
                    .map(|(stats, identity)| p2p_host_figures(stats, identity)),
            },
        }
    }

    fn ready(&self) -> bool {
        !self.shared.draining.load(Ordering::Relaxed)
    }
}
