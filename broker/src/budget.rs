//! The memory budget: the broker's worst-case memory, summed from its configured bounds, and
//! the one limit it must fit (TigerBeetle sizes its message pool the same way).
//!
//! Owns: `MemoryBudget` (every term, each with the config keys that size it, and the total),
//! the per-entry sizes the terms multiply (one named constant each, with why), the default
//! budget (`limits.memory_bytes_max = 0`: half of the host's memory, or of the cgroup limit
//! when that is lower), and the check `bps-broker` runs at start and on every reload: a
//! configuration whose worst case exceeds the budget is refused, naming its largest terms.
//! Never does: measure anything at run time (the gauges do that); the figures here are
//! upper bounds derived from the configuration alone.
//!
//! Every structure that grows with peer input is bounded and appears here:
//! - connections: each one's fixed state (what an idle stream holds: port, stream, tasks,
//!   idle read buffer), and its outbound queue and write batch at their largest (both grow
//!   to what the stream has held so far), `limits.connections_max` of them;
//! - frame memory: every frame read and not yet released, grown read buffers and their
//!   reads, bounded at run time by `limits.frame_memory_bytes_max` (readers wait at the
//!   bound), plus one idle-sized unreserved read per connection;
//! - frames in flight: what the router, the machine and the verification pool keep per frame
//!   read and not consumed, `limits.frames_in_flight_per_core_max` per core;
//! - fairness between cohorts: the per-cohort queues of the verification pool and of each
//!   core's results, one entry per frame in flight;
//! - cross-core lanes and overflows: `server.inbox_messages_max` and
//!   `server.overflow_messages_max` messages per core and destination;
//! - WebSocket sessions: each connection of the WebSocket listener may hold a request head
//!   and a fragmented message being assembled (rendered bridge messages are frame memory);
//!   `ws.static_dir`'s files with their answer heads, `STATIC_BYTES_MAX` at most, shared by
//!   every answer (a static answer in flight holds only handles to them and a two-entry
//!   write batch, within its connection's share);
//! - W5 service POSTs: the relays waiting for their one signature check
//!   (`SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX` per core, each a body, its assembled frame and
//!   a verification job) and the per-peer rate table (`POST_RATE_PEERS_MAX` buckets);
//! - WebSocket refusals at accept: `REFUSALS_IN_FLIGHT_PER_CORE_MAX` answers per core, each
//!   its task, its answer and its linger buffer;
//! - cohorts: cursor tables, dedup windows and rosters, `limits.cohorts_max` of them;
//! - history (D11): the entries of every cohort's ring, and the backlog every connection may
//!   hold unwritten (one at most, `limits.history_frames_max` handles). The retained frames
//!   themselves are frame bytes, inside the frame memory term: they are charged to frame
//!   memory while a ring or a queue holds them, and validation keeps `limits.cohorts_max`
//!   full rings within half of `limits.frame_memory_bytes_max`, so they never starve live
//!   traffic;
//! - libp2p (`p2p.enabled`): every connection's security session and yamux state, and every
//!   stream's yamux receive window and pipe chunks, `p2p.connections_max` connections of
//!   `p2p.streams_per_connection_max` streams (a BPS stream over libp2p is also one of
//!   `limits.connections_max` and counted there);
//! - the verification key caches, the peer ledger (blocklist, per-peer counts), metric
//!   series of a scrape, the admin server's requests and responses, the log buffer;
//! - a fixed base for the process itself (runtimes, rings, thread stacks in use, binary).
//!
//! The per-entry sizes are estimates from the types' sizes with their collections' overhead,
//! rounded up; `bps_rss_bytes` and the budget black-box test check them against the process.

use std::fmt;

use crate::config::{BrokerConfig, VerifyMode};
use crate::limits::{
    BRIDGE_MESSAGE_BYTES_MAX, LOG_BUFFERED_LINES_MAX, PORT_CONTROL_MESSAGES_MAX,
    QUEUE_SLACK_FACTOR, READ_BUFFER_IDLE_BYTES, STATIC_BYTES_MAX, WS_HEAD_BYTES_MAX,
    native_message_bytes_max,
};

/// The process before any connection: heap of the runtimes and pools, io_uring rings,
/// touched thread stacks, the binary's own pages.
pub const BASE_BYTES: u64 = 64 << 20;

/// What one idle connection holds besides its read buffer: its port (592 bytes) and the
/// machine's stream record, both tasks (futures of about 750 bytes each), the table entries
/// that name it, its cancellers, the io_uring operation state, the queue and batch slots
/// its Ack took, and the allocator's rounding of each. Measured rather than summed:
/// `bench/conns-check` reads 4.6–4.7 KB of RSS per idle TCP stream, read buffer included
/// (docs/benchmarks/HISTORY.md, "Memory per idle stream back under 8 KiB"); this plus
/// `READ_BUFFER_IDLE_BYTES` keeps a fifth above that.
pub const CONNECTION_STATE_BYTES: u64 = 5 << 10;

/// One slot of an outbound queue: an `Outgoing`, a `Bytes` handle (32 bytes) and its inline
/// prefix (`PREFIX_BYTES_MAX` bytes and a length), aligned.
pub const QUEUE_SLOT_BYTES: u64 = 48;

/// One slot of a write batch: the body's `Bytes` handle (32 bytes), its inline prefix (11)
/// and two `iovec`s (32), rounded up.
pub const BATCH_SLOT_BYTES: u64 = 80;

/// Per frame in flight: its router message, the machine's record of it, the verification
/// request and job, the pool's result and the ticket maps.
pub const FRAME_IN_FLIGHT_BYTES: u64 = 768;

/// Per frame in flight, for fairness between cohorts: its place in a per-cohort queue of
/// the pool and of its core's results (a deque slot, and at worst a map entry and a
/// round-robin slot of a cohort of its own in each), its job-origin entry and its ticket in
/// its stream's list.
pub const FAIR_QUEUE_ENTRY_BYTES: u64 = 256;

/// Allocator overhead on frame allocations (size classes and the shared header of each
/// frame), in percent.
pub const FRAME_ALLOCATOR_OVERHEAD_PERCENT: u64 = 25;

/// One cross-core message slot (the largest message, an owner `Deliver`, with its padding).
pub const MESSAGE_SLOT_BYTES: u64 = 128;

/// A cohort's fixed state: spec, counters, role gauges, membership tables, timers.
pub const COHORT_STATE_BYTES: u64 = 8 << 10;

/// One entry of a cohort's cursor table (R27): address, cursor, LRU links, hash slot.
pub const CURSOR_ENTRY_BYTES: u64 = 96;

/// One entry of an implicit cohort's dedup window (R28): the 32-byte key in a set and a queue.
pub const DEDUP_ENTRY_BYTES: u64 = 96;

/// The largest roster a cohort keeps: a 4096-byte payload holds 204 addresses, each kept in
/// a list and a set, plus the latest ROSTER frame itself (counted in frame memory).
pub const ROSTER_STATE_BYTES: u64 = 204 * 96;

/// One entry of a history ring (D11): its slot (sequence, publisher, `Bytes` handle) and the
/// frame's shared owner header, which a small frame's allocator overhead does not cover.
pub const HISTORY_ENTRY_BYTES: u64 = 128;

/// One frame of a connection's history backlog (D11): a `Bytes` handle in its queue.
pub const BACKLOG_SLOT_BYTES: u64 = 32;

/// One cached verification key: the affine point, its address, LRU links, hash slot.
pub const KEY_ENTRY_BYTES: u64 = 256;

/// One cached key's quarters for the vector checks (`Q`, `2^64·Q`, `2^128·Q`, `2^192·Q`,
/// affine, kept beside the key where the CPU has AVX-512 IFMA): four affine points of 88
/// bytes (release build) and the option tag, rounded up.
pub const KEY_QUARTERS_BYTES: u64 = 384;

/// One entry of the peer ledger (blocklist entry and its expiry, strike record, per-peer
/// counts).
pub const PEER_ENTRY_BYTES: u64 = 192;

/// One exported series line of a scrape, with its labels.
pub const SERIES_LINE_BYTES: u64 = 192;

/// Series lines a cohort with its own series exports (R40 and the other protocol counters,
/// role gauges).
pub const SERIES_LINES_PER_COHORT: u64 = 40;

/// Series lines of a scrape besides per-cohort ones, per core (core families) and in total.
pub const SERIES_LINES_PER_CORE: u64 = 200;

/// The admin server's worst case: its connections' request heads and the largest responses
/// (a `/cohortz` page) being written.
pub const ADMIN_BYTES: u64 = 16 << 20;

/// Log lines the non-blocking writer buffers at most, and their largest size.
pub const LOG_BUFFER_BYTES: u64 = LOG_BUFFERED_LINES_MAX as u64 * 1024;

/// What a WebSocket connection may hold beyond a TCP one: its request head while it is
/// read, the message its decoder assembles (a frame, or the largest bridge message), and the
/// session's own state (the inline headers of its write batch are in `BATCH_SLOT_BYTES`).
pub fn ws_connection_bytes(frame_bytes_max: usize) -> u64 {
    let message = native_message_bytes_max(frame_bytes_max).max(BRIDGE_MESSAGE_BYTES_MAX);
    to_u64(WS_HEAD_BYTES_MAX) + to_u64(message) + WS_SESSION_STATE_BYTES
}

/// One bucket of the W5 rate table: the peer, its tokens and time, the hash slot.
pub const POST_RATE_ENTRY_BYTES: u64 = 64;

/// One refusal answer of the WebSocket listener in flight: its task, the answer's bytes and
/// the buffer its linger reads into.
pub const WS_REFUSAL_BYTES: u64 = 8 << 10;

/// A WebSocket session's own state: its bridge session, keepalive task and decoder.
pub const WS_SESSION_STATE_BYTES: u64 = 1 << 10;

/// What one libp2p connection holds below its streams: its Noise or TLS session with a
/// record buffer each way (Noise's records are up to 64 KiB), yamux's session state and frame
/// buffer, and the host's connection entry and handler. An estimate, rounded up.
pub const P2P_CONNECTION_BYTES: u64 = 256 << 10;

/// What one libp2p stream holds before its core reads it: the yamux receive window a peer
/// may fill unread (yamux's default credit, 256 KiB) and the pipe's inbound chunks.
pub const P2P_STREAM_BYTES: u64 =
    (256 << 10) + (bps_p2p::INBOUND_CHUNKS_PER_STREAM * bps_p2p::READ_CHUNK_BYTES) as u64;

/// The default budget, in percent of the host's memory.
pub const DEFAULT_BUDGET_PERCENT_OF_HOST: u64 = 50;

/// One term of the worst case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// What it bounds.
    pub name: &'static str,
    /// The config keys that size it.
    pub keys: &'static str,
    pub bytes: u64,
}

/// The worst case of a configuration on a number of cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    pub terms: Vec<Term>,
    pub total_bytes: u64,
    /// The budget it must fit.
    pub budget_bytes: u64,
}

impl MemoryBudget {
    /// The worst case of `config` on `cores` cores with `verify_workers` verification
    /// threads, against its budget (`limits.memory_bytes_max`, or the host default from
    /// `host_memory_bytes`).
    #[must_use]
    pub fn of(
        config: &BrokerConfig,
        cores: usize,
        verify_workers: usize,
        host_memory_bytes: u64,
    ) -> MemoryBudget {
        let terms = terms(config, to_u64(cores), to_u64(verify_workers));
        let total_bytes = terms
            .iter()
            .fold(0_u64, |sum, term| sum.saturating_add(term.bytes));
        let budget_bytes = match config.limits.memory_bytes_max {
            0 => default_budget(host_memory_bytes),
            explicit => explicit,
        };
        MemoryBudget {
            terms,
            total_bytes,
            budget_bytes,
        }
    }

    /// Whether the worst case fits.
    #[must_use]
    pub fn fits(&self) -> bool {
        self.total_bytes <= self.budget_bytes
    }

    /// The `count` largest terms, largest first.
    #[must_use]
    pub fn largest(&self, count: usize) -> Vec<&Term> {
        let mut terms: Vec<&Term> = self.terms.iter().collect();
        terms.sort_by_key(|term| std::cmp::Reverse(term.bytes));
        terms.truncate(count);
        terms
    }

    /// The refusal when the worst case does not fit: the totals and the largest terms.
    #[must_use]
    pub fn refusal(&self) -> String {
        let largest: Vec<String> = self
            .largest(3)
            .iter()
            .map(|term| format!("{} {} ({})", term.name, mib(term.bytes), term.keys))
            .collect();
        format!(
            "the configured bounds need up to {} of memory but limits.memory_bytes_max allows {}; \
             largest terms: {}. Lower those bounds or raise limits.memory_bytes_max",
            mib(self.total_bytes),
            mib(self.budget_bytes),
            largest.join(", ")
        )
    }
}

impl fmt::Display for MemoryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worst case {} of {}",
            mib(self.total_bytes),
            mib(self.budget_bytes)
        )
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn to_u64(value: usize) -> u64 {
    u64::try_from(value).unwrap_or(u64::MAX)
}

/// Half the host's memory.
#[must_use]
pub fn default_budget(host_memory_bytes: u64) -> u64 {
    host_memory_bytes / 100 * DEFAULT_BUDGET_PERCENT_OF_HOST
}

/// One term of the worst case: what it bounds, the config keys that size it, and its bytes
/// from the configuration's `Sizing`.
struct TermRow {
    name: &'static str,
    keys: &'static str,
    bytes: fn(&Sizing) -> u64,
}

/// The terms of the worst case, one row each, in report order.
const TERMS: [TermRow; 20] = [
    TermRow {
        name: "process base",
        keys: "fixed",
        bytes: |_| BASE_BYTES,
    },
    TermRow {
        name: "connections",
        keys: "limits.connections_max, limits.outbound_queue_frames_max, server.write_batch_frames_max",
        bytes: |s| s.connections * s.connection_bytes,
    },
    TermRow {
        name: "frame memory",
        keys: "limits.frame_memory_bytes_max, limits.connections_max",
        bytes: |s| {
            (s.frame_memory + s.connections * s.idle_read)
                * (100 + FRAME_ALLOCATOR_OVERHEAD_PERCENT)
                / 100
        },
    },
    TermRow {
        name: "frames in flight",
        keys: "limits.frames_in_flight_per_core_max, server.cores",
        bytes: |s| s.frames_in_flight * FRAME_IN_FLIGHT_BYTES,
    },
    TermRow {
        name: "fair queues",
        keys: "limits.frames_in_flight_per_core_max, server.cores",
        bytes: |s| s.frames_in_flight * FAIR_QUEUE_ENTRY_BYTES,
    },
    TermRow {
        name: "cross-core lanes",
        keys: "server.inbox_messages_max, limits.frames_in_flight_per_core_max",
        bytes: |s| s.lanes,
    },
    TermRow {
        name: "cross-core overflow",
        keys: "server.overflow_messages_max, limits.connections_max",
        bytes: |s| s.overflow,
    },
    TermRow {
        name: "WebSocket sessions",
        keys: "ws.enabled, limits.connections_max, limits.frame_bytes_max, ws.static_dir",
        bytes: ws_sessions_bytes,
    },
    TermRow {
        name: "libp2p",
        keys: "p2p.enabled, p2p.connections_max, p2p.streams_per_connection_max",
        bytes: |s| {
            s.p2p_connections
                * (P2P_CONNECTION_BYTES + s.p2p_streams_per_connection * P2P_STREAM_BYTES)
        },
    },
    TermRow {
        name: "W5 service POSTs",
        keys: "ws.enabled, server.cores (fixed per core and per peer)",
        bytes: service_posts_bytes,
    },
    TermRow {
        name: "WebSocket refusals",
        keys: "ws.enabled, server.cores (fixed per core)",
        bytes: ws_refusals_bytes,
    },
    TermRow {
        name: "cohorts",
        keys: "limits.cohorts_max, limits.cursors_per_cohort_max, limits.dedup_window_entries",
        bytes: |s| s.cohorts * s.cohort_bytes,
    },
    TermRow {
        name: "history rings",
        keys: "limits.cohorts_max, limits.history_frames_max (frames: in frame memory)",
        bytes: |s| s.cohorts * s.history_frames * HISTORY_ENTRY_BYTES,
    },
    TermRow {
        name: "history backlogs",
        keys: "limits.connections_max, limits.history_frames_max",
        bytes: |s| s.connections * s.history_frames * BACKLOG_SLOT_BYTES,
    },
    TermRow {
        name: "key caches",
        keys: "verify.key_cache_keys_max, verify.workers, verify.idle_inline_jobs_max",
        bytes: |s| s.verifiers * s.key_cache_keys * KEY_ENTRY_BYTES,
    },
    TermRow {
        name: "key quarters",
        keys: "verify.key_cache_keys_max, verify.workers, verify.idle_inline_jobs_max",
        bytes: |s| s.verifiers * s.key_cache_keys * KEY_QUARTERS_BYTES,
    },
    TermRow {
        name: "peer ledger",
        keys: "limits.blocklist_entries_max, limits.connections_max",
        bytes: |s| (s.blocklist_entries + s.connections) * PEER_ENTRY_BYTES,
    },
    TermRow {
        name: "metric series",
        keys: "limits.cohort_series_max",
        bytes: |s| s.series_lines * SERIES_LINE_BYTES,
    },
    TermRow {
        name: "admin server",
        keys: "fixed",
        bytes: |_| ADMIN_BYTES,
    },
    TermRow {
        name: "log buffer",
        keys: "fixed",
        bytes: |_| LOG_BUFFER_BYTES,
    },
];

fn terms(config: &BrokerConfig, cores: u64, workers: u64) -> Vec<Term> {
    let sizing = Sizing::of(config, cores, workers);
    TERMS
        .iter()
        .map(|row| Term {
            name: row.name,
            keys: row.keys,
            bytes: (row.bytes)(&sizing),
        })
        .collect()
}

/// The counts and per-entry sizes the terms multiply, derived from a configuration once.
struct Sizing {
    cores: u64,
    /// Verifiers with a key cache: the pool's workers and, when cores verify too (inline
    /// mode, or `verify.idle_inline_jobs_max`), one per core.
    verifiers: u64,
    connections: u64,
    /// One connection's fixed state, idle read buffer, and queue and batch at their largest.
    connection_bytes: u64,
    frames_in_flight: u64,
    frame_memory: u64,
    idle_read: u64,
    cohorts: u64,
    /// One cohort's state with its cursor table, dedup window and roster at their largest.
    cohort_bytes: u64,
    lanes: u64,
    overflow: u64,
    series_lines: u64,
    history_frames: u64,
    key_cache_keys: u64,
    blocklist_entries: u64,
    ws_enabled: bool,
    ws_static: bool,
    /// What a WebSocket connection may hold beyond a TCP one.
    ws_connection_bytes: u64,
    /// libp2p connections (none when `p2p.enabled` is off) and the streams of each.
    p2p_connections: u64,
    p2p_streams_per_connection: u64,
}

impl Sizing {
    fn of(config: &BrokerConfig, cores: u64, workers: u64) -> Sizing {
        let limits = &config.limits;
        let protocol = &config.protocol;
        let server = &config.server;
        let connections = to_u64(limits.connections_max);
        // A queue doubles as it fills, up to its bound and slack; a batch grows to the largest
        // write, control messages included.
        let queue_slots = (to_u64(protocol.outbound_queue_frames_max) * to_u64(QUEUE_SLACK_FACTOR))
            .next_power_of_two();
        let batch_slots = to_u64(server.write_batch_frames_max) + to_u64(PORT_CONTROL_MESSAGES_MAX);
        let frames_in_flight = cores * to_u64(limits.frames_in_flight_per_core_max);
        let inline = config.verify.mode == VerifyMode::Inline;
        let cores_verify = inline || config.verify.idle_inline_jobs_max > 0;
        Sizing {
            cores,
            verifiers: if inline { 0 } else { workers } + if cores_verify { cores } else { 0 },
            connections,
            connection_bytes: CONNECTION_STATE_BYTES
                + to_u64(READ_BUFFER_IDLE_BYTES)
                + queue_slots * QUEUE_SLOT_BYTES
                + batch_slots * BATCH_SLOT_BYTES,
            frames_in_flight,
            frame_memory: to_u64(limits.frame_memory_bytes_max),
            idle_read: to_u64(READ_BUFFER_IDLE_BYTES),
            cohorts: to_u64(protocol.cohorts_max),
            cohort_bytes: COHORT_STATE_BYTES
                + to_u64(protocol.cursors_per_cohort_max) * CURSOR_ENTRY_BYTES
                + to_u64(protocol.dedup_window_entries) * DEDUP_ENTRY_BYTES
                + ROSTER_STATE_BYTES,
            // Home and owner lanes are preallocated; credits and results hold at most one
            // entry each per frame in flight.
            lanes: cores * 2 * to_u64(server.inbox_messages_max) * MESSAGE_SLOT_BYTES
                + 2 * frames_in_flight * MESSAGE_SLOT_BYTES,
            // Owner overflow per core, plus at most one home message per reader and stream end.
            overflow: cores * to_u64(server.overflow_messages_max) * MESSAGE_SLOT_BYTES
                + 2 * connections * MESSAGE_SLOT_BYTES,
            series_lines: cores * SERIES_LINES_PER_CORE
                + to_u64(limits.cohort_series_max) * SERIES_LINES_PER_COHORT,
            history_frames: to_u64(protocol.history_frames_max),
            key_cache_keys: to_u64(config.verify.key_cache_keys_max),
            blocklist_entries: to_u64(protocol.blocklist_entries_max),
            ws_enabled: config.ws.enabled,
            ws_static: !config.ws.static_dir.is_empty(),
            ws_connection_bytes: ws_connection_bytes(protocol.frame_bytes_max),
            p2p_connections: if config.p2p.enabled {
                u64::from(config.p2p.connections_max)
            } else {
                0
            },
            p2p_streams_per_connection: u64::from(config.p2p.streams_per_connection_max),
        }
    }
}

/// Every connection's WebSocket share, and the static files when a directory is served.
fn ws_sessions_bytes(s: &Sizing) -> u64 {
    if !s.ws_enabled {
        return 0;
    }
    let static_files = if s.ws_static { STATIC_BYTES_MAX } else { 0 };
    s.connections * s.ws_connection_bytes + static_files
}

/// The W5 relays waiting for their signature check on every core, each a body, its assembled
/// frame and a verification job, and the per-peer rate table.
fn service_posts_bytes(s: &Sizing) -> u64 {
    if !s.ws_enabled {
        return 0;
    }
    s.cores
        * to_u64(crate::limits::SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX)
        * (FRAME_IN_FLIGHT_BYTES + 2 * to_u64(bps_ws::bridge::INBOUND_BYTES_MAX))
        + to_u64(crate::limits::POST_RATE_PEERS_MAX) * POST_RATE_ENTRY_BYTES
}

/// The refusal answers every core may have in flight at accept.
fn ws_refusals_bytes(s: &Sizing) -> u64 {
    if !s.ws_enabled {
        return 0;
    }
    s.cores * crate::limits::REFUSALS_IN_FLIGHT_PER_CORE_MAX * WS_REFUSAL_BYTES
}

/// The host's memory: physical memory, or the cgroup's limit when that is lower (a
/// container or a systemd `MemoryMax=`).
#[must_use]
pub fn host_memory_bytes() -> u64 {
    let physical = physical_memory_bytes();
    match cgroup_memory_max_bytes() {
        Some(limit) if limit < physical => limit,
        _ => physical,
    }
}

fn physical_memory_bytes() -> u64 {
    // SAFETY: sysconf takes a valid name and has no other preconditions.
    let (pages, page_bytes) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    u64::try_from(pages)
        .unwrap_or(0)
        .saturating_mul(u64::try_from(page_bytes).unwrap_or(0))
}

fn cgroup_memory_max_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
    text.trim().parse().ok()
}

/// The process's resident memory now, from `/proc/self/statm`.
#[must_use]
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let resident_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: as above.
    let page_bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(resident_pages.saturating_mul(u64::try_from(page_bytes).ok()?))
}

#[cfg(test)]
mod tests {
    use super::{
        BATCH_SLOT_BYTES, CONNECTION_STATE_BYTES, MemoryBudget, P2P_CONNECTION_BYTES,
        P2P_STREAM_BYTES, QUEUE_SLOT_BYTES, default_budget,
    };
    use crate::config::BrokerConfig;
    use crate::limits::READ_BUFFER_IDLE_BYTES;

    #[test]
    fn the_defaults_fit_half_of_a_small_host_and_every_term_is_sized_by_keys() {
        let config = BrokerConfig::default();
        let budget = MemoryBudget::of(&config, 2, 2, 8 << 30);
        assert_eq!(budget.budget_bytes, default_budget(8 << 30));
        assert!(budget.fits(), "{budget}: {:?}", budget.largest(3));
        // Every term but libp2p's, which is off by default.
        assert!(
            budget
                .terms
                .iter()
                .all(|term| (term.bytes > 0) == (term.name != "libp2p"))
        );
        let summed: u64 = budget.terms.iter().map(|term| term.bytes).sum();
        assert_eq!(summed, budget.total_bytes);
    }

    #[test]
    fn a_budget_too_small_is_refused_naming_the_largest_terms() {
        let mut config = BrokerConfig::default();
        config.limits.memory_bytes_max = 256 << 20;
        config.limits.connections_max = 200_000;
        // Without the WebSocket listener, whose per-connection term would be the largest.
        config.ws.enabled = false;
        let budget = MemoryBudget::of(&config, 2, 2, 64 << 30);
        assert!(!budget.fits());
        let message = budget.refusal();
        assert!(
            message.contains("limits.memory_bytes_max allows 256.0 MiB"),
            "{message}"
        );
        assert!(message.contains("connections"), "{message}");
        assert_eq!(budget.largest(1)[0].name, "connections");
    }

    #[test]
    fn a_connection_counts_its_idle_state_and_its_queue_and_batch_grown_to_their_bounds() {
        let mut config = BrokerConfig::default();
        config.limits.connections_max = 1000;
        config.protocol.outbound_queue_frames_max = 100;
        config.server.write_batch_frames_max = 50;
        let connections = MemoryBudget::of(&config, 2, 2, 64 << 30)
            .terms
            .into_iter()
            .find(|term| term.name == "connections")
            .map(|term| term.bytes);
        // A queue doubles up to its bound and slack (200 frames: 256 slots); a batch holds
        // the largest write and the two control messages.
        let per_connection = CONNECTION_STATE_BYTES
            + READ_BUFFER_IDLE_BYTES as u64
            + 256 * QUEUE_SLOT_BYTES
            + 52 * BATCH_SLOT_BYTES;
        assert_eq!(connections, Some(1000 * per_connection));
    }

    #[test]
    fn every_bound_moves_its_term() {
        let base = BrokerConfig::default();
        let before = MemoryBudget::of(&base, 2, 2, 64 << 30).total_bytes;
        let mut bigger = base.clone();
        bigger.protocol.dedup_window_entries *= 2;
        bigger.limits.frame_memory_bytes_max *= 2;
        bigger.limits.cohort_series_max *= 2;
        bigger.server.overflow_messages_max *= 2;
        assert!(MemoryBudget::of(&bigger, 2, 2, 64 << 30).total_bytes > before);
        let mut longer = base.clone();
        longer.protocol.history_frames_max *= 2;
        let term = |config: &BrokerConfig, name: &str| {
            MemoryBudget::of(config, 2, 2, 64 << 30)
                .terms
                .into_iter()
                .find(|term| term.name == name)
                .map(|term| term.bytes)
        };
        let mut p2p = base.clone();
        p2p.p2p.enabled = true;
        p2p.p2p.connections_max = 10;
        p2p.p2p.streams_per_connection_max = 4;
        assert_eq!(
            term(&p2p, "libp2p"),
            Some(10 * (P2P_CONNECTION_BYTES + 4 * P2P_STREAM_BYTES))
        );
        for name in ["history rings", "history backlogs"] {
            assert_eq!(
                term(&longer, name),
                term(&base, name).map(|bytes| 2 * bytes)
            );
        }
    }
}
