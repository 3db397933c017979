//! The broker-wide gauges of a scrape: frame memory and resident memory against their bounds,
//! the memory budget's worst case per term, each core's heartbeat and CPU time, readiness,
//! the peer ledger's counts (peers attached and blocklisted, trusted relays), the verification
//! pool's totals and the libp2p host's.
//!
//! Owns: `BrokerGauges`, `VerifyPoolFigures`, `P2pHostFigures` and `P2pIdentity`, the figures the I/O
//! layer reads at scrape.
//! Never does: render; `render::broker` writes these families.

use bps_core::LedgerSnapshot;

use crate::budget::MemoryBudget;

/// Broker-wide gauges of one scrape: memory against its bounds, and each core's heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerGauges {
    /// Frame bytes in use now, and their bound.
    pub frame_memory_bytes: u64,
    pub frame_memory_bytes_max: u64,
    /// The process's resident memory.
    pub rss_bytes: u64,
    /// The worst case of the running configuration, per term, and its budget.
    pub budget: MemoryBudget,
    /// Milliseconds since each core last began a turn.
    pub heartbeats_ms: Vec<u64>,
    /// CPU time each core's thread has used (`None`: its thread is not running).
    pub core_busy: Vec<Option<std::time::Duration>>,
    /// Whether `/readyz` answers 200 (not draining).
    pub ready: bool,
    /// The peer ledger's counts, broker-wide (R31..R33, R39, trusted relays).
    pub peers: LedgerSnapshot,
    /// The verification pool's totals; `None` when every core verifies inline.
    pub verify_pool: Option<VerifyPoolFigures>,
    /// The libp2p host's totals; `None` when `p2p.enabled` is off.
    pub p2p_host: Option<P2pHostFigures>,
}

/// The libp2p host's totals since start, read from its shared counters at scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P2pHostFigures {
    pub streams_inbound: u64,
    pub streams_outbound: u64,
    /// Streams refused at `p2p.streams_per_connection_max`.
    pub streams_refused: u64,
    /// Negotiated inbound streams reset at the host's queue of them.
    pub streams_dropped: u64,
    /// Connections closed because their ping timed out.
    pub ping_timeouts: u64,
    /// Inbound connections refused at `p2p.connections_max`.
    pub connections_refused_limit: u64,
    /// Inbound connections refused at `p2p.pending_handshakes_per_ip_max`.
    pub connections_refused_pending_per_ip: u64,
    /// Who the host is, for `bps_p2p_info`.
    pub identity: std::sync::Arc<P2pIdentity>,
}

/// The libp2p identity and mode the broker runs with (`bps_p2p_info`'s labels).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct P2pIdentity {
    pub mode: &'static str,
    pub network_id: u64,
    pub peer_id: String,
    /// The overlay, 64 hex digits.
    pub overlay: String,
}

/// The verification pool's totals since start, read from its shared statistics at scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyPoolFigures {
    pub jobs: u64,
    pub batches: u64,
    pub full: u64,
    pub recoveries: u64,
    pub key_accepts: u64,
    pub batch_checks: u64,
    pub batch_failures: u64,
    pub class_full: u64,
    pub cancelled: u64,
    pub bisections: u64,
}
