//! The typed configuration: `BrokerConfig`, its sections, and what is derived from them.
//!
//! Owns: the structs a running broker reads (one field per row of `keys::KEYS`, which says
//! what each is, its default, unit, bounds and whether a reload may change it): the broker's
//! own keys in one struct per section, the protocol core's keys in bps-core's
//! `ProtocolConfig` (declared there once); their defaults (deserialized from the table's),
//! and the effective values derived from a `0 = auto` key, the machines' `ProtocolConfig`
//! among them.
//! Never does: parse sources (`layers`), place keys in their TOML sections (`sections`),
//! judge values (`rules`) or compare two configurations (`reload`).

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::keys::{self, CORES_MAX};
use super::p2p::P2pSection;
use super::relay::RelaySection;
use crate::protocol::ProtocolConfig;

/// The whole configuration of one broker process. Its TOML form (`Serialize` and
/// `Deserialize`, in `sections`) has a section per struct; the protocol core's keys are in
/// `[limits]`, `[timeouts]` and `[protocol]`, where `keys::KEYS` places them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerConfig {
    /// Sockets, cores, the I/O driver and the process-level bounds.
    pub server: ServerConfig,
    /// The broker's own bounds in `[limits]` (connections, memory, metrics).
    pub limits: LimitsConfig,
    /// The broker's own deadlines in `[timeouts]` (health check, flush, write progress).
    pub timeouts: TimeoutsConfig,
    /// The protocol core's keys: its bounds (R26..R33) in `[limits]`, its deadlines (R24,
    /// R34, R35, R39) in `[timeouts]`, its policy where the spec lets the broker choose
    /// (D11) in `[protocol]`. As configured: `effective_protocol()` is what the machines get.
    pub protocol: ProtocolConfig,
    /// The verification pool.
    pub verify: VerifyConfig,
    /// Logging.
    pub log: LogConfig,
    /// The WebSocket listener: the native endpoint and the SWIP-60 bridge (docs/PROTOCOL.md §9).
    pub ws: WsConfig,
    /// The libp2p carrier: bee nodes speaking BPS (issue 20).
    pub p2p: P2pSection,
    /// Edge mode: the brokers this one relays from (docs/SCALING.md, "Edges").
    pub relay: RelaySection,
}

impl Default for BrokerConfig {
    /// Every key at its default from `keys::KEYS`.
    fn default() -> BrokerConfig {
        match BrokerConfig::deserialize(keys::default_table()) {
            Ok(config) => config,
            // The table has one row per field; a test deserializes it on every build.
            Err(error) => panic!("the key table does not match BrokerConfig: {error}"),
        }
    }
}

/// `[server]`: sockets, cores, the I/O driver and process-level bounds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    #[serde(with = "socket_addr")]
    pub listen: SocketAddr,
    #[serde(with = "socket_addr")]
    pub admin_listen: SocketAddr,
    pub cores: usize,
    pub io_uring: IoUringMode,
    pub drain_deadline_ms: u64,
    pub join_deadline_ms: u64,
    pub inbox_messages_max: usize,
    pub overflow_messages_max: usize,
    pub write_batch_frames_max: usize,
    pub write_coalesce_us: u64,
    pub nofile_per_stream: u64,
    pub tcp_keepalive_ms: u64,
    pub tcp_user_timeout_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        BrokerConfig::default().server
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

/// `[limits]`, the broker's own keys (the protocol core's are in `BrokerConfig::protocol`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub outbound_queue_bytes_max: usize,
    pub connections_max: usize,
    pub cohort_series_max: usize,
    pub memory_bytes_max: u64,
    pub frame_memory_bytes_max: usize,
    pub frames_in_flight_per_core_max: usize,
}

impl Default for LimitsConfig {
    fn default() -> LimitsConfig {
        BrokerConfig::default().limits
    }
}

/// `[timeouts]`, the broker's own keys (the protocol core's are in `BrokerConfig::protocol`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsConfig {
    pub healthz_deadline_ms: u64,
    pub flush_deadline_ms: u64,
    pub write_progress_deadline_ms: u64,
}

impl Default for TimeoutsConfig {
    fn default() -> TimeoutsConfig {
        BrokerConfig::default().timeouts
    }
}

/// `[verify]`: the verification pool (ARCHITECTURE.md section 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    pub mode: VerifyMode,
    pub workers: usize,
    pub queue_jobs_max: usize,
    pub batch_jobs_max: usize,
    pub batch_wait_us: u64,
    pub idle_inline_jobs_max: usize,
    pub key_cache_keys_max: usize,
}

impl Default for VerifyConfig {
    fn default() -> VerifyConfig {
        BrokerConfig::default().verify
    }
}

/// `[log]`: structured logs through `tracing`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    pub level: String,
    pub format: LogFormat,
    pub peer_lines_per_s_max: u32,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        BrokerConfig::default().log
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

/// `[ws]`: the WebSocket listener (docs/WEBSOCKET.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WsConfig {
    pub enabled: bool,
    #[serde(with = "socket_addr")]
    pub listen: SocketAddr,
    pub allowed_origins: Vec<String>,
    pub trusted_proxies: Vec<String>,
    pub ping_interval_ms: u64,
    pub idle_deadline_ms: u64,
    pub static_dir: String,
    pub service_posts_per_peer_per_s: u32,
}

impl Default for WsConfig {
    fn default() -> WsConfig {
        BrokerConfig::default().ws
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

impl BrokerConfig {
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

    /// The protocol core's policy as the machines get it: the configured keys with
    /// `limits.history_bytes_max = 0` resolved (`effective_history_bytes`), and edge mode
    /// with this process's relay id when `relay.upstreams` is set.
    #[must_use]
    pub fn effective_protocol(&self) -> ProtocolConfig {
        ProtocolConfig {
            history_bytes_max: self.effective_history_bytes(),
            edge: self.relay.edge_policy(crate::edge::relay_id()),
            ..self.protocol.clone()
        }
    }
}
