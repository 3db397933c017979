//! The broker's configuration: every key, its default and why, loading and validation.
//!
//! Owns: `BrokerConfig` and its sections (the TOML schema, `deny_unknown_fields` throughout),
//! the layering of sources (defaults < TOML file < env `BPS_BROKER__SECTION__KEY` <
//! `--set section.key=value` < the dedicated flags), validation that reports every error at
//! once with its key, the mapping onto the protocol core's `ProtocolConfig`, and the
//! classification of a SIGHUP reload into reloadable changes and restart-only changes.
//! Never does: read the process environment implicitly (the caller passes it in, so tests
//! never race on `std::env`), start anything, or check the host (that is `lifecycle`'s
//! startup check).
//!
//! Layering works on a `toml::Table`: the defaults are serialized into one, each source
//! overwrites the keys it names (an unknown section or key is an error naming it), and the
//! result is deserialized once. Override values from env and `--set` are parsed as TOML
//! scalars (`64`, `true`, `"x"`) and fall back to a plain string (`0.0.0.0:1637`, `prefer`);
//! a key whose default is a string always takes the text as written, and a list key takes a
//! TOML array (`["a", "b"]`) or a comma-separated list (`a,b`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use toml::{Table, Value};

use crate::protocol::{HistoryPolicy, ProtocolConfig};

/// Prefix of the environment variables that set config keys:
/// `BPS_BROKER__SECTION__KEY=value`, e.g. `BPS_BROKER__LIMITS__COHORTS_MAX=2048`.
pub const ENV_PREFIX: &str = "BPS_BROKER__";

/// Separator between the section and the key in an environment variable name.
const ENV_SEPARATOR: &str = "__";

/// Largest `server.cores`: a `StreamId` keeps the owning core in 8 bits.
pub const CORES_MAX: usize = 256;

/// Largest `server.write_batch_frames_max`: Linux's `IOV_MAX`, the most buffers one vectored
/// write may carry.
pub const WRITE_BATCH_FRAMES_MAX: usize = 1024;

/// Largest `server.write_coalesce_us`: past 10 ms the wait costs more latency than the
/// fuller writes save.
pub const WRITE_COALESCE_US_MAX: u64 = 10_000;

/// Largest `ws.service_posts_per_peer_per_s`: an admin posts a roster when its roster
/// changes; more than this per second is a flood, not a use.
pub const SERVICE_POSTS_PER_PEER_PER_S_MAX: u32 = 1_000;

/// The whole configuration of one broker process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrokerConfig {
    /// Sockets, cores, the I/O driver and the process-level bounds.
    pub server: ServerConfig,
    /// Protocol bounds (R26..R33) and the broker-wide connection bound.
    pub limits: LimitsConfig,
    /// Protocol deadlines (R24, R34, R35, R39) and the health-check deadline.
    pub timeouts: TimeoutsConfig,
    /// Protocol policies where the spec lets the broker choose (D11). The section is
    /// `[protocol]`; the field has another name because `protocol()` maps the whole config.
    #[serde(rename = "protocol")]
    pub policy: PolicyConfig,
    /// The verification pool.
    pub verify: VerifyConfig,
    /// Logging.
    pub log: LogConfig,
    /// The WebSocket listener: the native endpoint and the SWIP-60 bridge (docs/PROTOCOL.md §9).
    pub ws: WsConfig,
}

/// `[server]`: sockets, cores, the I/O driver and process-level bounds. None is reloadable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// BPS listener for the native TCP transport (docs/PROTOCOL.md §2); the broker's port is 1637.
    #[serde(with = "socket_addr")]
    pub listen: SocketAddr,
    /// Admin HTTP listener (/metrics, /healthz, /readyz, /cohortz); loopback so it is private.
    #[serde(with = "socket_addr")]
    pub admin_listen: SocketAddr,
    /// Runtimes, one pinned thread each (0 = every available core): the unit of parallelism.
    pub cores: usize,
    /// io_uring `required`, `prefer` (epoll fallback: containers often block io_uring), `off`.
    pub io_uring: IoUringMode,
    /// Time a drain may take to close every stream cleanly; keep it below `TimeoutStopSec`.
    pub drain_deadline_ms: u64,
    /// Time a connection has to send its Join (R2), so idle sockets cannot hold descriptors.
    pub join_deadline_ms: u64,
    /// Bound of each core's two cross-core lanes (home and owner messages); beyond it a
    /// sender keeps messages in its overflow and pauses its readers, so memory is bounded.
    pub inbox_messages_max: usize,
    /// Owner-direction messages (deliveries, sends, closes) a core keeps in its overflows
    /// before it stops taking work that makes more, so backpressure is transitive.
    pub overflow_messages_max: usize,
    /// Frames per vectored write (at most `IOV_MAX`); many per syscall makes fan-out cheap.
    pub write_batch_frames_max: usize,
    /// Longest a core's writes wait for more results while verifications are in flight, so
    /// one write carries several batches (0: write at the end of every turn).
    pub write_coalesce_us: u64,
    /// Descriptors one stream costs, so the startup check can size `RLIMIT_NOFILE` for it.
    pub nofile_per_stream: u64,
    /// Idle time before TCP keepalive probes a silent peer (three probes follow, one per
    /// third of it), so a vanished peer's connection ends even when nothing is sent to it.
    pub tcp_keepalive_ms: u64,
    /// `TCP_USER_TIMEOUT`: how long sent data (or probes) may stay unacknowledged before the
    /// kernel drops the connection, so a vanished subscriber frees its slot.
    pub tcp_user_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: SocketAddr::from(([0, 0, 0, 0], 1637)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 1638)),
            cores: 0,
            io_uring: IoUringMode::Prefer,
            drain_deadline_ms: 10_000,
            join_deadline_ms: 10_000,
            inbox_messages_max: 16_384,
            overflow_messages_max: 16_384,
            write_batch_frames_max: 64,
            write_coalesce_us: 1_000,
            nofile_per_stream: 1,
            tcp_keepalive_ms: 30_000,
            tcp_user_timeout_ms: 60_000,
        }
    }
}

/// How the broker picks its I/O driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IoUringMode {
    /// io_uring or refuse to start.
    Required,
    /// io_uring when the kernel allows it, else epoll (logged and exported as a metric).
    Prefer,
    /// epoll only.
    Off,
}

/// Where publications are verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    /// On the worker pool (`verify.workers` threads): verification runs beside the I/O.
    Pool,
    /// On each core's own runtime thread, one batch per loop turn: no thread hand-offs.
    /// Measured on one core (docs/BENCHMARKS.md): higher ingest (44 k vs 37 k
    /// publications/s at N = 1), same fan-out at N = 100, higher latency (p50 1.4 vs 0.85 ms).
    Inline,
}

/// `[limits]`: the protocol's bounds (R26..R33) and the broker-wide connection bound.
/// Reloadable on SIGHUP except `frame_bytes_max`, `connections_max`,
/// `outbound_queue_frames_max` and `frames_in_flight_per_stream_max` (sized per connection).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// R30: fan-out streams per cohort, FULL beyond it, so one topic cannot take the broker.
    pub streams_per_cohort_max: usize,
    /// Pending streams per cohort: anyone may declare the admin, so R30's exemption is capped.
    pub pending_streams_per_cohort_max: usize,
    /// R31: live cohorts per broker, FULL to a creating Join, so cohort state stays bounded.
    pub cohorts_max: usize,
    /// R32: cohorts one peer address may attach to, so one host cannot hog the cohort table.
    pub cohorts_per_peer_max: usize,
    /// R32: cohort attachments of all /64s within one IPv6 prefix of `ipv6_prefix_bits`
    /// together, so one site's 65,536 /64s cannot fill the cohort table (IPv4 is not grouped).
    pub cohorts_per_ipv6_prefix_max: usize,
    /// R32: the IPv6 prefix length `cohorts_per_ipv6_prefix_max` counts by (16..=64; 48 is a
    /// site).
    pub ipv6_prefix_bits: u32,
    /// R33: streams one peer address may hold per cohort (D10), so one host cannot fill it.
    pub streams_per_peer_per_cohort_max: usize,
    /// R29: publisher streams per address per cohort (D10); a newer claim resets the oldest.
    pub publisher_streams_per_address_max: usize,
    /// R26: frames queued per stream before it is reset, so a slow reader never slows others.
    pub outbound_queue_frames_max: usize,
    /// Bytes one stream may hold queued, its history backlog included, before it is reset as
    /// a slow consumer, so a backlog or large renderings cannot hide behind a frame count.
    pub outbound_queue_bytes_max: usize,
    /// R28: dedup entries per implicit cohort; replay of evicted ones is the spec's known risk.
    pub dedup_window_entries: usize,
    /// R27: publisher cursors per cohort; the least recently used is evicted, bounding memory.
    pub cursors_per_cohort_max: usize,
    /// Largest frame body read (a BPS frame is ~4.3 KB); a longer prefix costs the stream.
    pub frame_bytes_max: usize,
    /// Frames read from one stream but not yet processed: backpressure towards verification.
    pub frames_in_flight_per_stream_max: usize,
    /// R39: blocklisted addresses kept, so a flood of violators cannot grow memory.
    pub blocklist_entries_max: usize,
    /// D11: DATA frames a history cohort retains (a minute of a live stream at 4/s).
    pub history_frames_max: usize,
    /// D11: frame bytes a history cohort retains; `cohorts_max` rings must fit in half of
    /// `frame_memory_bytes_max`, so retained frames never starve live traffic (0 = the
    /// largest that does, at most 256 KiB: see `effective_history_bytes`).
    pub history_bytes_max: usize,
    /// Open connections for the whole broker, checked against `RLIMIT_NOFILE` at start.
    pub connections_max: usize,
    /// R15/R16: frames one stream may have dropped without penalty per second before it is
    /// reset (0 = no limit); a redundant publisher (R29) drops its twin's duplicates.
    pub dropped_frames_per_stream_per_s_max: u32,
    /// Connections per peer that have not sent their Join yet, so idle sockets from one
    /// address cannot take every connection slot.
    pub prejoin_connections_per_peer_max: usize,
    /// Missed Join deadlines per peer before it is blocklisted for
    /// `timeouts.blocklist_join_timeout_ms`.
    pub join_timeouts_per_peer_max: usize,
    /// W11: bridge sessions without `addr` one peer may hold on all cohorts together (they
    /// are outside R33, so viewers behind one NAT are not refused at the third tab).
    pub spectator_sessions_per_peer_max: usize,
    /// W11: anonymous sessions one peer may hold in one cohort, so a few addresses cannot
    /// fill a cohort's R30 slots.
    pub spectator_sessions_per_peer_per_cohort_max: usize,
    /// W11: the percent of `streams_per_cohort_max` anonymous sessions may hold; the rest
    /// stays for streams with an address.
    pub spectator_slots_percent: usize,
    /// Cohorts exported with series of their own (the largest by subscribers); the rest are
    /// summed, so a scrape stays bounded whatever the number of cohorts.
    pub cohort_series_max: usize,
    /// The memory budget: the worst case of every configured bound must fit, checked at start
    /// and on reload (0 = half of the host's memory or of its cgroup limit).
    pub memory_bytes_max: u64,
    /// Frame bytes the broker holds at most (frames read and not released yet, grown read
    /// buffers); at the bound readers wait, so TCP pushes back instead of memory growing.
    pub frame_memory_bytes_max: usize,
    /// Frames one core has read and not had consumed yet (each may hold a verification job);
    /// at the bound that core's readers wait.
    pub frames_in_flight_per_core_max: usize,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        let protocol = ProtocolConfig::default();
        LimitsConfig {
            streams_per_cohort_max: protocol.streams_per_cohort_max,
            pending_streams_per_cohort_max: protocol.pending_streams_per_cohort_max,
            cohorts_max: protocol.cohorts_max,
            cohorts_per_peer_max: protocol.cohorts_per_peer_max,
            cohorts_per_ipv6_prefix_max: protocol.cohorts_per_ipv6_prefix_max,
            ipv6_prefix_bits: protocol.ipv6_prefix_bits,
            streams_per_peer_per_cohort_max: protocol.streams_per_peer_per_cohort_max,
            publisher_streams_per_address_max: protocol.publisher_streams_per_address_max,
            outbound_queue_frames_max: protocol.outbound_queue_frames_max,
            outbound_queue_bytes_max: 1 << 20,
            dedup_window_entries: protocol.dedup_window_entries,
            cursors_per_cohort_max: protocol.cursors_per_cohort_max,
            frame_bytes_max: protocol.frame_bytes_max,
            frames_in_flight_per_stream_max: protocol.frames_in_flight_per_stream_max,
            blocklist_entries_max: protocol.blocklist_entries_max,
            history_frames_max: protocol.history_frames_max,
            history_bytes_max: 0,
            connections_max: 65_536,
            dropped_frames_per_stream_per_s_max: protocol.dropped_frames_per_stream_per_s_max,
            prejoin_connections_per_peer_max: protocol.prejoin_connections_per_peer_max,
            join_timeouts_per_peer_max: protocol.join_timeouts_per_peer_max,
            spectator_sessions_per_peer_max: protocol.spectator_sessions_per_peer_max,
            spectator_sessions_per_peer_per_cohort_max: protocol
                .spectator_sessions_per_peer_per_cohort_max,
            spectator_slots_percent: protocol.spectator_slots_percent,
            cohort_series_max: 100,
            memory_bytes_max: 0,
            frame_memory_bytes_max: 512 << 20,
            frames_in_flight_per_core_max: 4096,
        }
    }
}

/// `[timeouts]`: protocol deadlines and the health-check deadline, all in milliseconds and
/// all reloadable on SIGHUP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsConfig {
    /// R35: time a pending or silent stream has to claim, so squatters leave (D10: 30 s).
    pub claim_deadline_ms: u64,
    /// R34: time without an accepted publisher frame before the cohort is reclaimed.
    pub inactivity_deadline_ms: u64,
    /// R31: time a cohort with nobody receiving (only pending or silent streams) must have
    /// been so before it is reclaimed to make room in a full cohort table.
    pub idle_cohort_reclaim_ms: u64,
    /// R24: grace after the reduced roster is written; frames in flight are not punished.
    pub revocation_grace_ms: u64,
    /// R39: blocklist time after a violation, so a bad peer cannot retry at once; 0 disables.
    pub blocklist_violation_ms: u64,
    /// R39: blocklist time after a claim timeout (shorter: may be honest); 0 disables.
    pub blocklist_claim_timeout_ms: u64,
    /// Blocklist time after `limits.join_timeouts_per_peer_max` missed Join deadlines; 0
    /// disables.
    pub blocklist_join_timeout_ms: u64,
    /// Time each core has to answer /healthz (and /cohortz), so a wedged core is reported.
    pub healthz_deadline_ms: u64,
    /// Time a closing stream has to take what is queued for it (an Ack refusal, EOS, a
    /// drain) before it is reset, so a peer that never reads cannot hold its slot.
    pub flush_deadline_ms: u64,
    /// Time an open stream holding queued bytes may go without its socket taking any before
    /// it is reset as a slow consumer, whatever its frame count.
    pub write_progress_deadline_ms: u64,
}

impl Default for TimeoutsConfig {
    fn default() -> TimeoutsConfig {
        let protocol = ProtocolConfig::default();
        TimeoutsConfig {
            claim_deadline_ms: protocol.claim_deadline_ms,
            inactivity_deadline_ms: protocol.inactivity_deadline_ms,
            idle_cohort_reclaim_ms: protocol.idle_cohort_reclaim_ms,
            revocation_grace_ms: protocol.revocation_grace_ms,
            blocklist_violation_ms: protocol.blocklist_violation_ms,
            blocklist_claim_timeout_ms: protocol.blocklist_claim_timeout_ms,
            blocklist_join_timeout_ms: protocol.blocklist_join_timeout_ms,
            healthz_deadline_ms: 1_000,
            flush_deadline_ms: 5_000,
            write_progress_deadline_ms: 20_000,
        }
    }
}

/// `[protocol]`: what the broker decides where the spec lets it choose. Reloadable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PolicyConfig {
    /// D11: `serve` Joins with `history = true` from a ring per cohort, or `refuse` them
    /// (REJECTED, which R3 allows); streams already attached carry on after a reload.
    pub history: HistoryPolicy,
}

/// `[verify]`: the verification pool (ARCHITECTURE.md section 3). Needs a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VerifyConfig {
    /// `pool` (worker threads) or `inline` (each core verifies its own jobs between I/O).
    pub mode: VerifyMode,
    /// Worker threads of the pool (0 = one per core): a SOC check bounds publications/s.
    pub workers: usize,
    /// Jobs the pool's queue holds (0 = every core's `limits.frames_in_flight_per_core_max`,
    /// the most that can exist: each job belongs to a frame in flight, so it never fills).
    pub queue_jobs_max: usize,
    /// Jobs a worker takes at once: a batch is the unit of work, amortising wake-ups and
    /// letting same-owner signatures be checked together.
    pub batch_jobs_max: usize,
    /// Microseconds a batch may wait for more jobs before closing (0 = never wait): the
    /// latency a lone publication pays so that bursts verify as one batched check.
    pub batch_wait_us: u64,
    /// Owners whose public key each worker keeps (LRU): a warm owner skips key recovery.
    pub key_cache_keys_max: usize,
}

impl Default for VerifyConfig {
    fn default() -> VerifyConfig {
        VerifyConfig {
            mode: VerifyMode::Pool,
            workers: 0,
            queue_jobs_max: 0,
            batch_jobs_max: 64,
            batch_wait_us: 200,
            key_cache_keys_max: 4096,
        }
    }
}

/// `[log]`: structured logs through `tracing`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter such as `info` or `bps_broker=debug`; `RUST_LOG`, when set, wins.
    pub level: String,
    /// `text` for people reading a terminal, `json` for log pipelines.
    pub format: LogFormat,
    /// Log lines per second (and per core) that peers can trigger (a bad frame, a missed Join
    /// deadline, a blocklisting); the rest are counted, not written.
    pub peer_lines_per_s_max: u32,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            level: "info".to_owned(),
            format: LogFormat::Text,
            peer_lines_per_s_max: 20,
        }
    }
}

/// The log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[ws]`: the WebSocket listener (docs/WEBSOCKET.md). None is reloadable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WsConfig {
    /// Serve WebSocket sessions at all.
    pub enabled: bool,
    /// The WebSocket listener, one per core like `server.listen`; 1639 follows the BPS port
    /// (1637) and the admin port (1638).
    #[serde(with = "socket_addr")]
    pub listen: SocketAddr,
    /// Origins a browser session may come from (`scheme://host[:port]`); empty or `"*"`
    /// allows any (docs/PROTOCOL.md W10: the API carries no ambient credentials). A request without
    /// an `Origin` header (not a browser) is always allowed.
    pub allowed_origins: Vec<String>,
    /// Reverse proxies (IP addresses or CIDR ranges such as `10.0.0.0/8`) whose `Forwarded`
    /// or `X-Forwarded-For` names the real peer; the peer of a connection from any other
    /// address is that address (R32, R33, R39, W11).
    pub trusted_proxies: Vec<String>,
    /// Period of the broker's pings on a native session (a bridge session uses its
    /// `swarm-keep-alive`, W7), so proxies and NATs keep an idle session open.
    pub ping_interval_ms: u64,
    /// A session that sends nothing at all (not even a pong) for this long is closed, so a
    /// vanished browser frees its slot even behind a proxy that keeps the TCP connection.
    pub idle_deadline_ms: u64,
    /// A directory whose files the listener serves at `GET /` and below (the demo page);
    /// empty serves none. Read once at start, at most 16 MiB.
    pub static_dir: String,
    /// W5 POSTs one peer may make per second (a burst of as many, then this rate), all
    /// cores together; beyond it a POST is answered 429 with `Retry-After` before its body
    /// is read. Each may cost a signature check.
    pub service_posts_per_peer_per_s: u32,
}

impl Default for WsConfig {
    fn default() -> WsConfig {
        WsConfig {
            enabled: true,
            listen: SocketAddr::from(([0, 0, 0, 0], 1639)),
            allowed_origins: Vec::new(),
            trusted_proxies: Vec::new(),
            ping_interval_ms: 30_000,
            idle_deadline_ms: 90_000,
            static_dir: String::new(),
            service_posts_per_peer_per_s: 4,
        }
    }
}

impl WsConfig {
    /// The trusted proxies, parsed (`validate` reports the ones that do not parse).
    #[must_use]
    pub fn trusted_proxy_ranges(&self) -> bps_ws::TrustedProxies {
        bps_ws::TrustedProxies::new(
            self.trusted_proxies
                .iter()
                .filter_map(|text| text.parse().ok())
                .collect(),
        )
    }
}

/// Serde for socket addresses with an error that says what a valid value looks like.
mod socket_addr {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        addr: &SocketAddr,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_str(addr)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SocketAddr, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|_| {
            serde::de::Error::custom(
                "expected an IP:PORT socket address such as 0.0.0.0:1637 or [::1]:1637",
            )
        })
    }
}

/// One configuration problem, naming the key it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The dotted key (`limits.cohorts_max`), or the source that failed (`--config`).
    pub key: String,
    /// The offending value as TOML, when there is one.
    pub value: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, value: Option<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {}: {}", self.key, value, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Where the configuration comes from, besides the defaults and the environment: what the
/// command line said. Kept so that SIGHUP can redo the same layering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// `--set section.key=value`, in command-line order (a later one wins).
    pub sets: Vec<(String, String)>,
    /// `--listen ADDR` (wins over `--set server.listen=`).
    pub listen: Option<SocketAddr>,
    /// `--admin-listen ADDR`.
    pub admin_listen: Option<SocketAddr>,
    /// `--ws-listen ADDR`.
    pub ws_listen: Option<SocketAddr>,
    /// `--cores N`.
    pub cores: Option<usize>,
}

/// Where an overridden key got its value, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    File(PathBuf),
    Env(String),
    Set,
    Flag(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "in {}", path.display()),
            Origin::Env(name) => write!(f, "from env {name}"),
            Origin::Set => write!(f, "from --set"),
            Origin::Flag(flag) => write!(f, "from {flag}"),
        }
    }
}

/// The defaults as a two-level TOML table (section -> key -> value).
fn default_table() -> Table {
    match Table::try_from(BrokerConfig::default()) {
        Ok(table) => table,
        // Every field serializes to a TOML scalar; failing here is a bug in this file.
        Err(error) => panic!("default config does not serialize to TOML: {error}"),
    }
}

/// The table being layered, with the origin of every key set by a source.
struct Layers {
    table: Table,
    origins: BTreeMap<String, Origin>,
    errors: Vec<ConfigError>,
}

impl Layers {
    fn new() -> Layers {
        Layers {
            table: default_table(),
            origins: BTreeMap::new(),
            errors: Vec::new(),
        }
    }

    /// The names of the keys of `section`, for "known keys" hints.
    fn known_keys(&self, section: &str) -> String {
        match self.table.get(section) {
            Some(Value::Table(keys)) => keys.keys().cloned().collect::<Vec<_>>().join(", "),
            _ => String::new(),
        }
    }

    fn known_sections(&self) -> String {
        self.table.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    /// The default value at `section.key`, or an error naming the unknown part.
    fn check_key(&self, section: &str, key: &str, origin: &Origin) -> Result<&Value, ConfigError> {
        let full = format!("{section}.{key}");
        match self.table.get(section) {
            Some(Value::Table(keys)) => keys.get(key).ok_or_else(|| {
                ConfigError::new(
                    full,
                    None,
                    format!(
                        "unknown key ({origin}); [{section}] has: {}",
                        self.known_keys(section)
                    ),
                )
            }),
            _ => Err(ConfigError::new(
                full,
                None,
                format!(
                    "unknown section [{section}] ({origin}); sections are: {}",
                    self.known_sections()
                ),
            )),
        }
    }

    /// Sets `section.key` to `value`, recording its origin, or records an unknown-key error.
    fn set(&mut self, section: &str, key: &str, value: Value, origin: Origin) {
        if let Err(error) = self.check_key(section, key, &origin) {
            self.errors.push(error);
            return;
        }
        if let Some(Value::Table(keys)) = self.table.get_mut(section) {
            keys.insert(key.to_owned(), value);
            self.origins.insert(format!("{section}.{key}"), origin);
        }
    }

    /// Sets `section.key` from override text (env or `--set`), typed by the key's default.
    fn set_text(&mut self, section: &str, key: &str, text: &str, origin: Origin) {
        match self.check_key(section, key, &origin) {
            Ok(default) => {
                let value = parse_override(text, default);
                self.set(section, key, value, origin);
            }
            Err(error) => self.errors.push(error),
        }
    }

    /// Layers a parsed TOML file over the table.
    fn merge_file(&mut self, file: Table, path: &Path) {
        for (section, keys) in file {
            let origin = Origin::File(path.to_owned());
            match keys {
                Value::Table(keys) => {
                    for (key, value) in keys {
                        self.set(&section, &key, value, origin.clone());
                    }
                }
                other => {
                    let message = if self.table.contains_key(&section) {
                        format!("expected a [{section}] table ({origin})")
                    } else {
                        format!(
                            "unknown section [{section}] ({origin}); sections are: {}",
                            self.known_sections()
                        )
                    };
                    self.errors
                        .push(ConfigError::new(section, Some(other.to_string()), message));
                }
            }
        }
    }

    /// Layers the `BPS_BROKER__SECTION__KEY` variables of `env` over the table.
    fn merge_env<I, K, V>(&mut self, env: I)
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut variables: Vec<(String, String)> = env
            .into_iter()
            .filter(|(name, _)| name.as_ref().starts_with(ENV_PREFIX))
            .map(|(name, value)| (name.as_ref().to_owned(), value.as_ref().to_owned()))
            .collect();
        // Process order must not depend on how the caller iterates the environment.
        variables.sort();
        for (name, value) in variables {
            let rest = &name[ENV_PREFIX.len()..];
            match rest.split_once(ENV_SEPARATOR) {
                Some((section, key))
                    if !section.is_empty() && !key.is_empty() && !key.contains(ENV_SEPARATOR) =>
                {
                    let section = section.to_ascii_lowercase();
                    let key = key.to_ascii_lowercase();
                    self.set_text(&section, &key, &value, Origin::Env(name.clone()));
                }
                _ => self.errors.push(ConfigError::new(
                    name.clone(),
                    Some(quote(&value)),
                    format!("expected an environment variable named {ENV_PREFIX}SECTION__KEY"),
                )),
            }
        }
    }

    /// Layers `--set` pairs and the dedicated flags over the table.
    fn merge_command_line(&mut self, sources: &ConfigSources) {
        for (dotted, text) in &sources.sets {
            match split_dotted_key(dotted) {
                Some((section, key)) => self.set_text(section, key, text, Origin::Set),
                None => self.errors.push(ConfigError::new(
                    dotted.clone(),
                    Some(quote(text)),
                    "expected --set SECTION.KEY=VALUE",
                )),
            }
        }
        if let Some(listen) = sources.listen {
            self.set(
                "server",
                "listen",
                Value::String(listen.to_string()),
                Origin::Flag("--listen"),
            );
        }
        if let Some(admin_listen) = sources.admin_listen {
            self.set(
                "server",
                "admin_listen",
                Value::String(admin_listen.to_string()),
                Origin::Flag("--admin-listen"),
            );
        }
        if let Some(ws_listen) = sources.ws_listen {
            self.set(
                "ws",
                "listen",
                Value::String(ws_listen.to_string()),
                Origin::Flag("--ws-listen"),
            );
        }
        if let Some(cores) = sources.cores {
            let value = i64::try_from(cores)
                .map_or_else(|_| Value::String(cores.to_string()), Value::Integer);
            self.set("server", "cores", value, Origin::Flag("--cores"));
        }
    }

    /// Deserializes the layered table. Every overridden key is first checked on its own, so a
    /// bad value is reported with its key, its value and its origin, and all of them at once.
    fn finish(mut self) -> Result<BrokerConfig, Vec<ConfigError>> {
        for (full, origin) in &self.origins {
            let Some((section, key)) = split_dotted_key(full) else {
                continue;
            };
            let Some(value) = self
                .table
                .get(section)
                .and_then(|keys| keys.get(key))
                .cloned()
            else {
                continue;
            };
            let mut single = Table::new();
            single.insert(key.to_owned(), value.clone());
            let result = match section {
                "server" => check_section::<ServerConfig>(single),
                "limits" => check_section::<LimitsConfig>(single),
                "timeouts" => check_section::<TimeoutsConfig>(single),
                "protocol" => check_section::<PolicyConfig>(single),
                "verify" => check_section::<VerifyConfig>(single),
                "log" => check_section::<LogConfig>(single),
                "ws" => check_section::<WsConfig>(single),
                _ => Ok(()),
            };
            if let Err(message) = result {
                self.errors.push(ConfigError::new(
                    full.clone(),
                    Some(value.to_string()),
                    format!("{message} ({origin})"),
                ));
            }
        }
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        BrokerConfig::deserialize(self.table)
            .map_err(|error| vec![ConfigError::new("config", None, error.to_string())])
    }
}

/// Deserializes a one-key table into a section (the other keys take their defaults) and returns
/// serde's message on failure.
fn check_section<T: DeserializeOwned>(single: Table) -> Result<(), String> {
    T::deserialize(single)
        .map(drop)
        .map_err(|error| error.message().trim().to_owned())
}

/// `section.key` split at its one dot.
fn split_dotted_key(dotted: &str) -> Option<(&str, &str)> {
    let (section, key) = dotted.trim().split_once('.')?;
    (!section.is_empty() && !key.is_empty() && !key.contains('.')).then_some((section, key))
}

/// Override text as a TOML value: a TOML scalar when it parses as one (and the key is not a
/// string key), otherwise the text itself as a string.
fn parse_override(text: &str, default: &Value) -> Value {
    let parsed = format!("value = {text}")
        .parse::<Table>()
        .ok()
        .and_then(|mut table| table.remove("value"));
    match (parsed, default) {
        (Some(list @ Value::Array(_)), Value::Array(_)) => list,
        // A list key also takes `a,b` (what a shell-friendly --set or env value looks like).
        (_, Value::Array(_)) => Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect(),
        ),
        (Some(Value::String(string)), _) => Value::String(string),
        (_, Value::String(_)) => Value::String(text.to_owned()),
        (Some(value @ (Value::Integer(_) | Value::Float(_) | Value::Boolean(_))), _) => value,
        _ => Value::String(text.to_owned()),
    }
}

/// A TOML syntax error on one line: where it is and what is wrong.
fn syntax_message(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', "; ");
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .map_or(0, |last| last.chars().count())
                + 1;
            format!("not valid TOML at line {line}, column {column}: {message}")
        }
        None => format!("not valid TOML: {message}"),
    }
}

/// A string as a TOML literal, for error messages.
fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

impl BrokerConfig {
    /// Loads the configuration: defaults < `sources.file` < the `BPS_BROKER__SECTION__KEY`
    /// variables of `env` < `sources.sets` < the dedicated flags. Every unknown key and bad
    /// value of every source is reported, each naming its key. Does not validate relations
    /// between values: call `validate` for that.
    ///
    /// # Errors
    /// Every problem found, in source order.
    pub fn load<I, K, V>(sources: &ConfigSources, env: I) -> Result<BrokerConfig, Vec<ConfigError>>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut layers = Layers::new();
        if let Some(path) = &sources.file {
            match std::fs::read_to_string(path) {
                Ok(text) => match text.parse::<Table>() {
                    Ok(file) => layers.merge_file(file, path),
                    Err(error) => layers.errors.push(ConfigError::new(
                        "--config",
                        Some(quote(&path.display().to_string())),
                        syntax_message(&text, &error),
                    )),
                },
                Err(error) => layers.errors.push(ConfigError::new(
                    "--config",
                    Some(quote(&path.display().to_string())),
                    format!("cannot read the file: {error}"),
                )),
            }
        }
        layers.merge_env(env);
        layers.merge_command_line(sources);
        layers.finish()
    }

    /// Loads the configuration with the process environment (see `load`). Variables that are
    /// not valid Unicode cannot name a key and are skipped.
    ///
    /// # Errors
    /// Every problem found, in source order.
    pub fn load_from_process_env(
        sources: &ConfigSources,
    ) -> Result<BrokerConfig, Vec<ConfigError>> {
        let env = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        BrokerConfig::load(sources, env)
    }

    /// Parses a TOML document over the defaults (no environment, no command line).
    ///
    /// # Errors
    /// Every unknown key and bad value, each naming its key.
    pub fn from_toml_str(text: &str) -> Result<BrokerConfig, Vec<ConfigError>> {
        let mut layers = Layers::new();
        match text.parse::<Table>() {
            Ok(file) => layers.merge_file(file, Path::new("<toml>")),
            Err(error) => layers.errors.push(ConfigError::new(
                "config",
                None,
                syntax_message(text, &error),
            )),
        }
        layers.finish()
    }

    /// The effective configuration as a TOML document (what `check-config` prints).
    #[must_use]
    pub fn to_toml(&self) -> String {
        match toml::to_string(self) {
            Ok(text) => text,
            // Every field serializes to a TOML scalar; failing here is a bug in this file.
            Err(error) => panic!("config does not serialize to TOML: {error}"),
        }
    }

    /// The effective number of cores: `server.cores`, or all of `available` when it is 0,
    /// never more than `CORES_MAX` (a `StreamId` names its core in 8 bits; the startup check
    /// warns when it clamps).
    #[must_use]
    pub fn effective_cores(&self, available: usize) -> usize {
        if self.server.cores == 0 {
            available.clamp(1, CORES_MAX)
        } else {
            self.server.cores
        }
    }

    /// Verification workers on `cores` cores (`verify.workers`, or one per core when 0).
    #[must_use]
    pub fn effective_verify_workers(&self, cores: usize) -> usize {
        if self.verify.workers == 0 {
            cores
        } else {
            self.verify.workers
        }
    }

    /// The pool's queue on `cores` cores: `verify.queue_jobs_max`, or every job the cores may
    /// have in flight when it is 0.
    #[must_use]
    pub fn effective_queue_jobs(&self, cores: usize) -> usize {
        if self.verify.queue_jobs_max == 0 {
            self.verify_jobs_in_flight_max(cores)
        } else {
            self.verify.queue_jobs_max
        }
    }

    /// Verification jobs `cores` cores may have in flight at once: their streams' frames
    /// (`limits.frames_in_flight_per_core_max`) and their W5 relays' one check each.
    #[must_use]
    pub fn verify_jobs_in_flight_max(&self, cores: usize) -> usize {
        cores.saturating_mul(
            self.limits
                .frames_in_flight_per_core_max
                .saturating_add(crate::limits::SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX),
        )
    }

    /// The protocol core's policy, from `[limits]`, `[timeouts]` and `[protocol]`.
    #[must_use]
    pub fn protocol(&self) -> ProtocolConfig {
        let limits = &self.limits;
        let timeouts = &self.timeouts;
        ProtocolConfig {
            streams_per_cohort_max: limits.streams_per_cohort_max,
            pending_streams_per_cohort_max: limits.pending_streams_per_cohort_max,
            cohorts_max: limits.cohorts_max,
            cohorts_per_peer_max: limits.cohorts_per_peer_max,
            cohorts_per_ipv6_prefix_max: limits.cohorts_per_ipv6_prefix_max,
            ipv6_prefix_bits: limits.ipv6_prefix_bits,
            streams_per_peer_per_cohort_max: limits.streams_per_peer_per_cohort_max,
            publisher_streams_per_address_max: limits.publisher_streams_per_address_max,
            outbound_queue_frames_max: limits.outbound_queue_frames_max,
            dedup_window_entries: limits.dedup_window_entries,
            cursors_per_cohort_max: limits.cursors_per_cohort_max,
            frame_bytes_max: limits.frame_bytes_max,
            claim_deadline_ms: timeouts.claim_deadline_ms,
            inactivity_deadline_ms: timeouts.inactivity_deadline_ms,
            idle_cohort_reclaim_ms: timeouts.idle_cohort_reclaim_ms,
            revocation_grace_ms: timeouts.revocation_grace_ms,
            blocklist_violation_ms: timeouts.blocklist_violation_ms,
            blocklist_claim_timeout_ms: timeouts.blocklist_claim_timeout_ms,
            blocklist_entries_max: limits.blocklist_entries_max,
            frames_in_flight_per_stream_max: limits.frames_in_flight_per_stream_max,
            dropped_frames_per_stream_per_s_max: limits.dropped_frames_per_stream_per_s_max,
            prejoin_connections_per_peer_max: limits.prejoin_connections_per_peer_max,
            join_timeouts_per_peer_max: limits.join_timeouts_per_peer_max,
            blocklist_join_timeout_ms: timeouts.blocklist_join_timeout_ms,
            spectator_sessions_per_peer_max: limits.spectator_sessions_per_peer_max,
            spectator_sessions_per_peer_per_cohort_max: limits
                .spectator_sessions_per_peer_per_cohort_max,
            spectator_slots_percent: limits.spectator_slots_percent,
            history: self.policy.history,
            history_frames_max: limits.history_frames_max,
            history_bytes_max: self.effective_history_bytes(),
        }
    }

    /// Every problem with this configuration (empty when it is usable), each naming its key:
    /// the protocol core's checks plus the broker's own bounds and relations.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        let auto_history_bytes = self.limits.history_bytes_max == 0;
        let mut errors: Vec<ConfigError> = self
            .protocol()
            .validate()
            .into_iter()
            .map(|error| {
                let derived = auto_history_bytes && error.key == "history_bytes_max";
                ConfigError::new(
                    protocol_key(error.key),
                    Some(error.value),
                    if derived {
                        format!(
                            "expected {} (derived from limits.history_bytes_max = 0: half of limits.frame_memory_bytes_max over limits.cohorts_max; raise the one or lower the other)",
                            error.expected
                        )
                    } else {
                        format!("expected {}", error.expected)
                    },
                )
            })
            .collect();
        let server = &self.server;
        let at_least_one: [(&str, u64); 16] = [
            ("server.drain_deadline_ms", server.drain_deadline_ms),
            ("server.join_deadline_ms", server.join_deadline_ms),
            (
                "server.inbox_messages_max",
                to_u64(server.inbox_messages_max),
            ),
            (
                "server.write_batch_frames_max",
                to_u64(server.write_batch_frames_max),
            ),
            ("server.nofile_per_stream", server.nofile_per_stream),
            (
                "limits.connections_max",
                to_u64(self.limits.connections_max),
            ),
            (
                "timeouts.healthz_deadline_ms",
                self.timeouts.healthz_deadline_ms,
            ),
            ("verify.batch_jobs_max", to_u64(self.verify.batch_jobs_max)),
            (
                "server.overflow_messages_max",
                to_u64(server.overflow_messages_max),
            ),
            ("server.tcp_keepalive_ms", server.tcp_keepalive_ms),
            ("server.tcp_user_timeout_ms", server.tcp_user_timeout_ms),
            (
                "limits.frame_memory_bytes_max",
                to_u64(self.limits.frame_memory_bytes_max),
            ),
            (
                "limits.frames_in_flight_per_core_max",
                to_u64(self.limits.frames_in_flight_per_core_max),
            ),
            (
                "timeouts.flush_deadline_ms",
                self.timeouts.flush_deadline_ms,
            ),
            (
                "timeouts.write_progress_deadline_ms",
                self.timeouts.write_progress_deadline_ms,
            ),
            (
                "verify.key_cache_keys_max",
                to_u64(self.verify.key_cache_keys_max),
            ),
        ];
        for (key, value) in at_least_one {
            if value < 1 {
                errors.push(ConfigError::new(
                    key,
                    Some(value.to_string()),
                    "expected >= 1",
                ));
            }
        }
        if server.cores > CORES_MAX {
            errors.push(ConfigError::new(
                "server.cores",
                Some(server.cores.to_string()),
                format!(
                    "expected 0 (all) or at most {CORES_MAX} (a stream id keeps the core in 8 bits)"
                ),
            ));
        }
        if server.write_batch_frames_max > WRITE_BATCH_FRAMES_MAX {
            errors.push(ConfigError::new(
                "server.write_batch_frames_max",
                Some(server.write_batch_frames_max.to_string()),
                format!("expected at most {WRITE_BATCH_FRAMES_MAX} (IOV_MAX, buffers per vectored write)"),
            ));
        }
        if server.write_coalesce_us > WRITE_COALESCE_US_MAX {
            errors.push(ConfigError::new(
                "server.write_coalesce_us",
                Some(server.write_coalesce_us.to_string()),
                format!("expected at most {WRITE_COALESCE_US_MAX} (microseconds of latency)"),
            ));
        }
        if addresses_collide(server.listen, server.admin_listen) {
            errors.push(ConfigError::new(
                "server.admin_listen",
                Some(quote(&server.admin_listen.to_string())),
                format!(
                    "expected a port other than server.listen's ({})",
                    server.listen
                ),
            ));
        }
        errors.extend(self.ws_errors());
        if self.verify.batch_wait_us > bps_verify::pool::BATCH_WAIT_US_MAX {
            errors.push(ConfigError::new(
                "verify.batch_wait_us",
                Some(self.verify.batch_wait_us.to_string()),
                format!(
                    "expected at most {} (a longer wait adds latency without filling batches)",
                    bps_verify::pool::BATCH_WAIT_US_MAX
                ),
            ));
        }
        if self.verify.queue_jobs_max != 0
            && self.verify.batch_jobs_max > self.verify.queue_jobs_max
        {
            errors.push(ConfigError::new(
                "verify.batch_jobs_max",
                Some(self.verify.batch_jobs_max.to_string()),
                format!(
                    "expected at most verify.queue_jobs_max ({})",
                    self.verify.queue_jobs_max
                ),
            ));
        }
        errors.extend(self.history_memory_error());
        errors.extend(self.queue_bytes_error());
        if let Err(error) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            errors.push(ConfigError::new(
                "log.level",
                Some(quote(&self.log.level)),
                format!(
                    "expected a tracing filter such as info or bps_broker=debug,warn ({error})"
                ),
            ));
        }
        errors
    }
}

impl BrokerConfig {
    /// The problems of the `[ws]` section.
    fn ws_errors(&self) -> Vec<ConfigError> {
        let ws = &self.ws;
        let mut errors = Vec::new();
        if !ws.enabled {
            return errors;
        }
        for (other, name) in [
            (self.server.listen, "server.listen"),
            (self.server.admin_listen, "server.admin_listen"),
        ] {
            if addresses_collide(ws.listen, other) {
                errors.push(ConfigError::new(
                    "ws.listen",
                    Some(quote(&ws.listen.to_string())),
                    format!("expected a port other than {name}'s ({other})"),
                ));
            }
        }
        for proxy in &ws.trusted_proxies {
            if let Err(error) = proxy.parse::<bps_ws::IpRange>() {
                errors.push(ConfigError::new(
                    "ws.trusted_proxies",
                    Some(quote(proxy)),
                    format!(
                        "{error}: expected IP addresses or CIDR ranges such as \"127.0.0.1\", \
                         \"::1\", \"10.0.0.0/8\" or \"fd00::/8\""
                    ),
                ));
            }
        }
        for origin in &ws.allowed_origins {
            let well_formed = origin == "*"
                || ((origin.starts_with("http://") || origin.starts_with("https://"))
                    && !origin.ends_with('/'));
            if !well_formed {
                errors.push(ConfigError::new(
                    "ws.allowed_origins",
                    Some(quote(origin)),
                    "expected \"*\" or origins such as \"https://app.example\" (scheme://host[:port], no path)",
                ));
            }
        }
        if ws.ping_interval_ms < 1 {
            errors.push(ConfigError::new(
                "ws.ping_interval_ms",
                Some(ws.ping_interval_ms.to_string()),
                "expected >= 1",
            ));
        }
        if ws.idle_deadline_ms <= ws.ping_interval_ms {
            errors.push(ConfigError::new(
                "ws.idle_deadline_ms",
                Some(ws.idle_deadline_ms.to_string()),
                format!(
                    "expected more than ws.ping_interval_ms ({}): a session answers pings",
                    ws.ping_interval_ms
                ),
            ));
        }
        if !(1..=SERVICE_POSTS_PER_PEER_PER_S_MAX).contains(&ws.service_posts_per_peer_per_s) {
            errors.push(ConfigError::new(
                "ws.service_posts_per_peer_per_s",
                Some(ws.service_posts_per_peer_per_s.to_string()),
                format!("expected 1..={SERVICE_POSTS_PER_PEER_PER_S_MAX}"),
            ));
        }
        errors
    }

    /// D11: the history ring bound in force: `limits.history_bytes_max`, or when it is 0 the
    /// largest that keeps `limits.cohorts_max` full rings within half of
    /// `limits.frame_memory_bytes_max`, at most the protocol core's default (256 KiB). So
    /// raising `cohorts_max` or lowering frame memory shrinks the default instead of refusing
    /// to start.
    #[must_use]
    pub fn effective_history_bytes(&self) -> usize {
        let limits = &self.limits;
        if limits.history_bytes_max != 0 {
            return limits.history_bytes_max;
        }
        let share = limits.frame_memory_bytes_max / 2 / limits.cohorts_max.max(1);
        share.min(ProtocolConfig::default().history_bytes_max)
    }

    /// D11: every cohort's full history ring together must leave at least half of frame
    /// memory to live traffic. Retained frames are frame bytes (charged to frame memory while
    /// a ring holds them); if rings could fill it, readers would wait for room that only a
    /// reclaim gives back. (The derived bound fits by construction.)
    fn history_memory_error(&self) -> Option<ConfigError> {
        let limits = &self.limits;
        let rings = limits.cohorts_max.saturating_mul(limits.history_bytes_max);
        let half = limits.frame_memory_bytes_max / 2;
        (rings > half).then(|| {
            ConfigError::new(
                "limits.history_bytes_max",
                Some(limits.history_bytes_max.to_string()),
                format!(
                    "expected at most {} (limits.cohorts_max = {} full history rings may hold at most half of limits.frame_memory_bytes_max = {})",
                    half / limits.cohorts_max.max(1),
                    limits.cohorts_max,
                    limits.frame_memory_bytes_max
                ),
            )
        })
    }
}

impl BrokerConfig {
    /// The least `limits.outbound_queue_bytes_max` may be: a full history backlog and one
    /// largest frame behind it, so a late joiner that reads is never reset for its backlog.
    #[must_use]
    pub fn outbound_queue_bytes_min(&self) -> usize {
        self.effective_history_bytes() + 2 * self.limits.frame_bytes_max
    }

    fn queue_bytes_error(&self) -> Option<ConfigError> {
        let least = self.outbound_queue_bytes_min();
        (self.limits.outbound_queue_bytes_max < least).then(|| {
            ConfigError::new(
                "limits.outbound_queue_bytes_max",
                Some(self.limits.outbound_queue_bytes_max.to_string()),
                format!(
                    "expected at least {least} (a full history backlog, limits.history_bytes_max in effect = {}, and two frames of limits.frame_bytes_max = {})",
                    self.effective_history_bytes(),
                    self.limits.frame_bytes_max
                ),
            )
        })
    }
}

/// The dotted key of a field of `ProtocolConfig` (its names are the config's key names).
fn protocol_key(field: &str) -> String {
    let table = default_table();
    let section = ["limits", "timeouts", "protocol"]
        .into_iter()
        .find(|section| {
            table
                .get(*section)
                .and_then(|keys| keys.get(field))
                .is_some()
        })
        .unwrap_or("limits");
    format!("{section}.{field}")
}

/// A `usize` as `u64` (lossless on every platform Rust supports today; saturates otherwise).
fn to_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// Whether two listeners would fight over one port: same non-zero port, and the same IP or
/// either one on the wildcard address.
fn addresses_collide(first: SocketAddr, second: SocketAddr) -> bool {
    first.port() != 0
        && first.port() == second.port()
        && (first.ip() == second.ip()
            || first.ip().is_unspecified()
            || second.ip().is_unspecified())
}

/// The keys a SIGHUP may change in a running broker.
#[must_use]
pub fn is_reloadable(key: &str) -> bool {
    match split_dotted_key(key) {
        Some(("timeouts", _)) => true,
        // Sizes the I/O layer fixes at start (per connection, per core) need a restart.
        Some(("limits", field)) => !matches!(
            field,
            "frame_bytes_max"
                | "connections_max"
                | "outbound_queue_frames_max"
                | "outbound_queue_bytes_max"
                | "frames_in_flight_per_stream_max"
                | "frame_memory_bytes_max"
                | "frames_in_flight_per_core_max"
        ),
        Some(("log", "level")) => true,
        Some(("protocol", "history")) => true,
        _ => false,
    }
}

/// Every `section.key` with its value, in section order.
fn flatten(config: &BrokerConfig) -> Vec<(String, Value)> {
    let table = match Table::try_from(config) {
        Ok(table) => table,
        Err(error) => panic!("config does not serialize to TOML: {error}"),
    };
    let mut flat = Vec::new();
    for (section, keys) in table {
        if let Value::Table(keys) = keys {
            for (key, value) in keys {
                flat.push((format!("{section}.{key}"), value));
            }
        }
    }
    flat
}

/// What a reload from `old` to `new` changes. `Ok` lists every change as
/// `"timeouts.claim_deadline_ms: 30000 -> 5000"` when all of them are reloadable; `Err` lists
/// the changed keys that need a restart (the reloadable ones can still be applied with
/// `apply_reloadable`).
///
/// # Errors
/// The changed keys that a running broker cannot take.
pub fn reloadable_diff(old: &BrokerConfig, new: &BrokerConfig) -> Result<Vec<String>, Vec<String>> {
    let new_values: BTreeMap<String, Value> = flatten(new).into_iter().collect();
    let mut changes = Vec::new();
    let mut restart = Vec::new();
    for (key, old_value) in flatten(old) {
        let Some(new_value) = new_values.get(&key) else {
            continue;
        };
        if *new_value == old_value {
            continue;
        }
        if is_reloadable(&key) {
            changes.push(format!("{key}: {old_value} -> {new_value}"));
        } else {
            restart.push(key);
        }
    }
    if restart.is_empty() {
        Ok(changes)
    } else {
        Err(restart)
    }
}

/// `old` with the reloadable keys of `new` applied and every other key kept.
#[must_use]
pub fn apply_reloadable(old: &BrokerConfig, new: &BrokerConfig) -> BrokerConfig {
    let mut merged = old.clone();
    merged.timeouts = new.timeouts.clone();
    merged.limits = LimitsConfig {
        frame_bytes_max: old.limits.frame_bytes_max,
        connections_max: old.limits.connections_max,
        outbound_queue_frames_max: old.limits.outbound_queue_frames_max,
        outbound_queue_bytes_max: old.limits.outbound_queue_bytes_max,
        frames_in_flight_per_stream_max: old.limits.frames_in_flight_per_stream_max,
        frame_memory_bytes_max: old.limits.frame_memory_bytes_max,
        frames_in_flight_per_core_max: old.limits.frames_in_flight_per_core_max,
        ..new.limits.clone()
    };
    merged.log.level = new.log.level.clone();
    merged.policy = new.policy.clone();
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        assert_eq!(BrokerConfig::default().validate(), Vec::new());
    }

    #[test]
    fn defaults_match_the_protocol_core() {
        assert_eq!(
            BrokerConfig::default().protocol(),
            ProtocolConfig::default()
        );
    }

    #[test]
    fn override_text_is_typed_by_the_default() {
        let integer = Value::Integer(1);
        let string = Value::String(String::new());
        assert_eq!(parse_override("64", &integer), Value::Integer(64));
        assert_eq!(parse_override("1_000", &integer), Value::Integer(1000));
        assert_eq!(parse_override("true", &integer), Value::Boolean(true));
        assert_eq!(parse_override("abc", &integer), Value::String("abc".into()));
        assert_eq!(parse_override("[1]", &integer), Value::String("[1]".into()));
        assert_eq!(parse_override("5", &string), Value::String("5".into()));
        assert_eq!(parse_override("\"q\"", &string), Value::String("q".into()));
        assert_eq!(
            parse_override("0.0.0.0:1", &string),
            Value::String("0.0.0.0:1".into())
        );
    }

    #[test]
    fn dotted_keys_split_once() {
        assert_eq!(split_dotted_key("a.b"), Some(("a", "b")));
        assert_eq!(split_dotted_key("a"), None);
        assert_eq!(split_dotted_key("a.b.c"), None);
        assert_eq!(split_dotted_key(".b"), None);
    }

    #[test]
    fn reloadable_keys() {
        assert!(is_reloadable("timeouts.claim_deadline_ms"));
        assert!(is_reloadable("timeouts.healthz_deadline_ms"));
        assert!(is_reloadable("limits.cohorts_max"));
        assert!(!is_reloadable("limits.frame_bytes_max"));
        assert!(!is_reloadable("limits.connections_max"));
        assert!(is_reloadable("log.level"));
        assert!(is_reloadable("protocol.history"));
        assert!(is_reloadable("limits.history_frames_max"));
        assert!(is_reloadable("limits.history_bytes_max"));
        assert!(!is_reloadable("log.format"));
        assert!(!is_reloadable("server.cores"));
        assert!(!is_reloadable("verify.workers"));
    }

    #[test]
    fn the_derived_history_bound_keeps_the_rings_within_half_of_frame_memory() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.limits.history_bytes_max, 0);
        assert_eq!(config.effective_history_bytes(), 256 << 10);
        // More cohorts, or less frame memory: a smaller ring, never a refusal.
        config.limits.cohorts_max = 2_000;
        let derived = config.effective_history_bytes();
        assert_eq!(derived, (512 << 20) / 2 / 2_000);
        assert!(config.limits.cohorts_max * derived <= config.limits.frame_memory_bytes_max / 2);
        assert_eq!(config.validate(), Vec::new());
        assert_eq!(config.protocol().history_bytes_max, derived);
        // Too little to hold the largest frame: refused, saying where the value came from.
        config.limits.frame_memory_bytes_max = 8 << 20;
        let errors = config.validate();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "limits.history_bytes_max");
        assert!(
            errors[0]
                .message
                .contains("derived from limits.history_bytes_max = 0")
        );
    }

    #[test]
    fn history_rings_may_take_at_most_half_of_frame_memory() {
        let mut config = BrokerConfig::default();
        config.limits.cohorts_max = 4;
        config.limits.frame_memory_bytes_max = 8 << 20;
        config.limits.history_bytes_max = 1 << 20;
        config.limits.outbound_queue_bytes_max = 2 << 20;
        assert_eq!(config.validate(), Vec::new());
        config.limits.history_bytes_max = (1 << 20) + 1;
        let messages: Vec<String> = config.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "limits.history_bytes_max = 1048577: expected at most 1048576 (limits.cohorts_max = 4 full history rings may hold at most half of limits.frame_memory_bytes_max = 8388608)"
                    .to_string()
            ]
        );
        // The core's own bound names the key in its section.
        config.limits.history_bytes_max = 100;
        assert_eq!(config.validate()[0].key, "limits.history_bytes_max");
        config.limits.history_bytes_max = 1 << 20;
        config.limits.history_frames_max = 0;
        assert_eq!(config.validate()[0].key, "limits.history_frames_max");
    }

    #[test]
    fn a_stream_may_hold_at_least_a_full_backlog_and_two_frames() {
        let mut config = BrokerConfig::default();
        config.limits.history_bytes_max = 100_000;
        config.limits.outbound_queue_bytes_max = 100_000 + 2 * 8192;
        assert_eq!(config.validate(), Vec::new());
        config.limits.outbound_queue_bytes_max -= 1;
        let errors = config.validate();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].key, "limits.outbound_queue_bytes_max");
        assert!(
            errors[0].to_string().contains("expected at least 116384"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn the_history_policy_reloads_and_maps_onto_the_core() {
        let old = BrokerConfig::default();
        let new = BrokerConfig::from_toml_str("[protocol]\nhistory = \"refuse\"\n")
            .expect("a valid [protocol] section");
        assert_eq!(old.protocol().history, HistoryPolicy::Serve);
        assert_eq!(new.protocol().history, HistoryPolicy::Refuse);
        assert_eq!(
            reloadable_diff(&old, &new),
            Ok(vec![
                "protocol.history: \"serve\" -> \"refuse\"".to_string()
            ])
        );
        assert_eq!(apply_reloadable(&old, &new), new);
        let errors =
            BrokerConfig::from_toml_str("[protocol]\nhistory = \"sometimes\"\n").unwrap_err();
        assert_eq!(errors[0].key, "protocol.history", "{errors:?}");
    }

    #[test]
    fn collisions() {
        let any = |port| SocketAddr::from(([0, 0, 0, 0], port));
        let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let other = |port| SocketAddr::from(([127, 0, 0, 2], port));
        assert!(addresses_collide(any(5), local(5)));
        assert!(addresses_collide(local(5), local(5)));
        assert!(!addresses_collide(local(5), other(5)));
        assert!(!addresses_collide(local(0), local(0)));
        assert!(!addresses_collide(any(5), any(6)));
    }
}
