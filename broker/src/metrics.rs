//! Metrics: lock-free per-core instruments and the Prometheus text rendering of a scrape.
//!
//! Owns: `Counter`, `Gauge`, `Histogram` (atomics only), `CoreMetrics` (one per core, shared by
//! `Arc`, written only by the core that owns it), the protocol figures a scrape carries
//! (`ProtocolMetric`, `CohortSeries`), the `MetricsSnapshot` the admin backend hands over,
//! and `render_prometheus`, which merges the per-core figures at scrape time and writes the
//! text exposition format 0.0.4.
//! Never does: take a lock, allocate or format on the hot path. Recording is one relaxed
//! atomic add; all the merging, summing and formatting is paid by the scraper.
//!
//! Naming: every family starts with `bps_`. Counters end in `_total`. Figures kept per core
//! are exported twice: merged as `bps_<name>` and per core as `bps_core_<name>{core="N"}`, in
//! separate families so that `sum()` over either never double counts. Protocol counters are
//! exported broker-wide as `bps_<name>_total` and per cohort as
//! `bps_cohort_<name>_total{cohort,binding,admin}`, where `cohort` is 16 hex digits of
//! keccak256 of the whole canonical key (R1), so two cohorts never share a series. Per-cohort
//! series are bounded: the `limits.cohort_series_max` cohorts with the most subscribers at
//! the scrape get their own; the rest are summed into `bps_cohort_other_<name>` gauges (a
//! sum over a set that changes between scrapes may go down, so it is not a counter; use the
//! broker-wide totals for rates) and counted by `bps_cohorts_other`. The cohorts' gauges (their
//! history rings, D11) follow the same split: `bps_cohort_<name>` for the shown cohorts,
//! `bps_cohort_other_<name>` for the rest, and `bps_<name>` summed over every live cohort.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::budget::MemoryBudget;
use crate::labels::{Refusal, Transport};
use crate::protocol::counters::{
    CohortCounters, CohortLabel, Counter as ProtocolCounter, CounterRegistry,
};

/// The counters every cohort MUST expose (R40: SWIP-74's seven plus SWIP-60's
/// `invalid_roster`), with their help text. Rendered per cohort and in total even when zero,
/// so that a dashboard never sees a family appear out of nowhere.
pub const R40_COUNTERS: [(&str, &str); 8] = [
    (
        "wrong_stream",
        "Frames from a spectator or silent stream, or service kinds from a non-admin (R13).",
    ),
    ("unknown_kind", "Frames of an unknown kind, dropped (R14)."),
    (
        "wrong_challenge",
        "Frames under another stream's challenge, dropped (R15).",
    ),
    (
        "invalid_soc",
        "Frames whose chunk failed id derivation or SOC validation (R17).",
    ),
    (
        "claim_timeout",
        "Pending or silent streams disconnected at the claim deadline (R35).",
    ),
    ("retransmit", "Frames below the cursor, dropped (R16)."),
    (
        "queue_reset",
        "Streams reset because their outbound queue was full (R26).",
    ),
    (
        "invalid_roster",
        "Valid ROSTER chunks whose payload did not decode (R20).",
    ),
];

/// The gauges every cohort exports (D11: the size of its history ring, zero without history),
/// with their help text.
pub const COHORT_GAUGES: [(&str, &str); 2] = [
    (
        "history_frames",
        "Retained DATA frames in the history ring (D11; limits.history_frames_max per cohort).",
    ),
    (
        "history_bytes",
        "Frame bytes in the history ring (D11; limits.history_bytes_max per cohort).",
    ),
];

/// Buckets of the latency histograms: upper bounds 1 µs .. 2^25 µs (about 34 s), which covers
/// everything from one keccak to a stalled verification pool.
pub const LATENCY_BUCKETS: usize = 26;

/// Buckets of the frames-per-write histogram: upper bounds 1 .. 1024 frames, the kernel's
/// `IOV_MAX`, so no vectored write can land past the last finite bucket.
pub const FRAMES_PER_WRITE_BUCKETS: usize = 11;

/// A monotonically increasing count. One relaxed atomic add per event.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `amount`.
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A value that goes up and down (open connections, queue depths). `inc`/`dec` pairs must
/// balance; a `dec` below zero is a bug in the caller and shows as a huge value.
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets the value.
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Relaxed);
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Subtracts one.
    pub fn dec(&self) {
        self.sub(1);
    }

    /// Adds `amount`.
    pub fn add(&self, amount: u64) {
        self.0.fetch_add(amount, Ordering::Relaxed);
    }

    /// Subtracts `amount`.
    pub fn sub(&self, amount: u64) {
        self.0.fetch_sub(amount, Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A histogram with fixed power-of-two buckets: bucket `i` counts values `v` with
/// `2^(i-1) < v <= 2^i` (bucket 0 takes 0 and 1), and one overflow bucket takes the rest.
/// Recording is three relaxed atomic adds; cumulating for Prometheus happens at scrape time.
#[derive(Debug)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts; the last entry is the overflow (`+Inf`) bucket.
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    /// A histogram with `finite_buckets` buckets of upper bounds `1, 2, 4, .., 2^(n-1)`.
    ///
    /// # Panics
    /// If `finite_buckets` is 0 or above 63: the bounds must fit in a `u64`.
    #[must_use]
    pub fn new(finite_buckets: usize) -> Histogram {
        assert!(
            (1..=63).contains(&finite_buckets),
            "histogram bucket count out of range: {finite_buckets}"
        );
        Histogram {
            buckets: (0..=finite_buckets).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn record(&self, value: u64) {
        let index = bucket_index(value).min(self.buckets.len() - 1);
        self.buckets[index].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// A copy of the current figures. Concurrent recording may make `count` and the bucket
    /// total differ by the few observations in flight; Prometheus tolerates that.
    #[must_use]
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            buckets: self
                .buckets
                .iter()
                .map(|bucket| bucket.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
            count: self.count.load(Ordering::Relaxed),
        }
    }
}

/// The bucket of `value`: the smallest `i` with `value <= 2^i`.
fn bucket_index(value: u64) -> usize {
    if value <= 1 {
        0
    } else {
        // ceil(log2(value)) for value >= 2; at most 64, so the cast is lossless.
        (u64::BITS - (value - 1).leading_zeros()) as usize
    }
}

/// A copied histogram, mergeable across cores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Per-bucket counts; the last entry is the overflow bucket.
    pub buckets: Vec<u64>,
    /// Sum of all observations.
    pub sum: u64,
    /// Number of observations.
    pub count: u64,
}

impl HistogramSnapshot {
    /// Adds another snapshot's figures to this one (an empty snapshot takes the other's shape).
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), 0);
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine = mine.wrapping_add(*theirs);
        }
        self.sum = self.sum.wrapping_add(other.sum);
        self.count = self.count.wrapping_add(other.count);
    }
}

/// A counter per transport (`Transport::ALL` order), exported with a `transport` label.
#[derive(Debug, Default)]
pub struct PerTransport([Counter; Transport::ALL.len()]);

impl PerTransport {
    fn add(&self, transport: Transport, amount: u64) {
        self.0[transport as usize].add(amount);
    }

    /// The count of one transport.
    #[must_use]
    pub fn get(&self, transport: Transport) -> u64 {
        self.0[transport as usize].get()
    }
}

/// HTTP statuses the WebSocket listener answers with (besides 101), in export order; any
/// other is counted as `other`.
pub const WS_HTTP_STATUSES: [u16; 15] = [
    200, 204, 304, 400, 403, 404, 405, 409, 411, 413, 422, 426, 429, 431, 503,
];
/// Close codes of the sessions the WebSocket carrier itself ends (faults of the peer and
/// idle sessions; closes the machine decides are counted by the protocol counters), in
/// export order.
pub const WS_CARRIER_CLOSES: [u16; 6] = [1002, 1003, 1007, 1008, 1009, 4010];
/// The endpoints of the WebSocket listener, in export order.
pub const WS_ENDPOINTS: [&str; 2] = ["native", "bridge"];

/// The WebSocket carrier's counters of one core.
#[derive(Debug, Default)]
pub struct WsMetrics {
    /// Upgrades, per endpoint.
    pub upgrades: [Counter; WS_ENDPOINTS.len()],
    /// HTTP answers, per status (the last is `other`).
    pub http_answers: [Counter; WS_HTTP_STATUSES.len() + 1],
    /// Sessions the carrier closed, per close code (the last is `other`).
    pub carrier_closes: [Counter; WS_CARRIER_CLOSES.len() + 1],
    /// Static-file answers being written (bounded by `STATIC_IN_FLIGHT_PER_CORE_MAX`).
    pub static_in_flight: Gauge,
    /// Static-file requests answered 503 because the core was at that bound.
    pub static_busy: Counter,
    /// W5 POSTs answered 429: their peer was over `ws.service_posts_per_peer_per_s`.
    pub service_posts_limited: Counter,
    /// W5 POSTs answered 503: `SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX` were waiting already.
    pub service_busy: Counter,
    /// W5 POSTs that did not validate, each a blocklist strike against its peer.
    pub service_strikes: Counter,
    /// Refusal answers at accept being written (bounded by `REFUSALS_IN_FLIGHT_PER_CORE_MAX`).
    pub refusals_in_flight: Gauge,
    /// Connections refused at accept and closed at once, without an answer: no refusal slot
    /// was free (the core's bound, `limits.connections_max` or the peer's pre-Join cap).
    pub refusals_closed: Counter,
    /// Connections closed because their request head did not arrive within
    /// `HEAD_READ_DEADLINE` (no blocklist strike).
    pub head_timeouts: Counter,
}

/// The instruments of one core. Shared by `Arc` with the scraper; only the owning core writes.
/// Aligned to two cache lines so that two cores' instruments never share a line.
#[derive(Debug)]
#[repr(align(128))]
pub struct CoreMetrics {
    /// Connections accepted by this core's listeners.
    pub connections_accepted: Counter,
    /// Connections closed at accept because the peer was blocklisted (R39).
    pub connections_refused_blocklist: Counter,
    /// Connections closed at accept because `limits.connections_max` was reached.
    pub connections_refused_limit: Counter,
    /// Connections closed at accept because the peer held
    /// `limits.prejoin_connections_per_peer_max` connections without a Join.
    pub connections_refused_prejoin: Counter,
    /// Connections closed at accept because the broker was draining.
    pub connections_refused_draining: Counter,
    /// Connections closed because no Join arrived within `server.join_deadline_ms`.
    pub join_timeouts: Counter,
    /// Peers blocklisted for missing `limits.join_timeouts_per_peer_max` Join deadlines.
    pub join_timeout_blocklistings: Counter,
    /// Flushing closes that did not finish within `timeouts.flush_deadline_ms` and were reset.
    pub flush_timeouts: Counter,
    /// Connections closed, for any reason.
    pub connections_closed: Counter,
    /// Connections currently open on this core.
    pub connections_open: Gauge,
    /// Frames read from peers.
    pub frames_in: Counter,
    /// Frames written to peers.
    pub frames_out: Counter,
    /// Bytes read from peers.
    pub bytes_in: Counter,
    /// Bytes written to peers.
    pub bytes_out: Counter,
    /// Connections accepted, per transport.
    pub transport_connections_accepted: PerTransport,
    /// Connections closed, per transport.
    pub transport_connections_closed: PerTransport,
    /// Frames read, per transport.
    pub transport_frames_in: PerTransport,
    /// Frames written, per transport.
    pub transport_frames_out: PerTransport,
    /// Streams closed because a frame could not be split off (length above
    /// `limits.frame_bytes_max`, malformed varint).
    pub frame_errors: Counter,
    /// Vectored write operations (syscalls or SQEs).
    pub writes: Counter,
    /// Frames carried by each vectored write: the fan-out batching at work.
    pub frames_per_write: Histogram,
    /// Messages that found another core's lane full and waited in this core's overflow.
    pub inbox_full: Counter,
    /// Messages waiting in this core's home and owner lanes at the last turn.
    pub inbox_depth: Gauge,
    /// Messages waiting in this core's overflows at the last turn.
    pub overflow_messages: Gauge,
    /// Frames read by this core and not yet consumed by their home core.
    pub frames_in_flight: Gauge,
    /// Bytes this core's streams hold queued towards their peers (each stream its own).
    pub held_bytes: Gauge,
    /// Verification jobs this core's machine has issued and not had answered.
    pub verifications_in_flight: Gauge,
    /// Verification jobs waiting in the pool's queue (reported by core 0 for the whole pool),
    /// or in this core's own queue when verifying inline.
    pub verify_queue_depth: Gauge,
    /// Verification results this core applied.
    pub verify_jobs: Counter,
    /// Verification jobs of this core taken back unverified because their stream closed.
    pub verify_cancelled: Counter,
    /// Microseconds from submitting a verification job to receiving its result.
    pub verify_latency_us: Histogram,
    /// Microseconds from reading a frame to writing it to a receiver's socket, sampled.
    pub accept_to_write_us: Histogram,
    /// Streams reset because their outbound queue was full while the kernel refused bytes,
    /// or at the queue's hard bound (R26).
    pub queue_resets: Counter,
    /// Frames queued beyond the R26 bound while the stream's writer was still handing every
    /// byte to the kernel (the writer had not had its turn yet).
    pub queue_slack: Counter,
    /// Streams reset because their socket took none of their queued bytes for
    /// `timeouts.write_progress_deadline_ms`.
    pub write_progress_timeouts: Counter,
    /// Streams reset, largest holders first, because frame memory was full while they held
    /// queued bytes their sockets did not take.
    pub memory_pressure_resets: Counter,
    /// Times a reader waited for its stream's read window (the home core's backpressure).
    pub read_paused: Counter,
    /// Times a reader waited because this core had `limits.frames_in_flight_per_core_max`
    /// frames in flight.
    pub read_paused_core: Counter,
    /// Times a reader waited because this core's overflow towards another core was not empty.
    pub read_paused_overflow: Counter,
    /// Times a reader waited for frame memory (`limits.frame_memory_bytes_max`).
    pub read_paused_memory: Counter,
    /// Log lines peers triggered beyond `log.peer_lines_per_s_max`, not written.
    pub log_lines_suppressed: Counter,
    /// W11: data messages from bridge sessions without `addr`, each of which closed its
    /// session.
    pub ws_spectator_sends: Counter,
    /// The WebSocket carrier's labelled counters.
    pub ws: WsMetrics,
}

impl Default for CoreMetrics {
    fn default() -> CoreMetrics {
        CoreMetrics {
            connections_accepted: Counter::default(),
            connections_refused_blocklist: Counter::default(),
            connections_refused_limit: Counter::default(),
            connections_refused_prejoin: Counter::default(),
            connections_refused_draining: Counter::default(),
            join_timeouts: Counter::default(),
            join_timeout_blocklistings: Counter::default(),
            flush_timeouts: Counter::default(),
            connections_closed: Counter::default(),
            connections_open: Gauge::default(),
            frames_in: Counter::default(),
            frames_out: Counter::default(),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            transport_connections_accepted: PerTransport::default(),
            transport_connections_closed: PerTransport::default(),
            transport_frames_in: PerTransport::default(),
            transport_frames_out: PerTransport::default(),
            frame_errors: Counter::default(),
            writes: Counter::default(),
            frames_per_write: Histogram::new(FRAMES_PER_WRITE_BUCKETS),
            inbox_full: Counter::default(),
            inbox_depth: Gauge::default(),
            overflow_messages: Gauge::default(),
            frames_in_flight: Gauge::default(),
            held_bytes: Gauge::default(),
            verifications_in_flight: Gauge::default(),
            verify_queue_depth: Gauge::default(),
            verify_jobs: Counter::default(),
            verify_cancelled: Counter::default(),
            verify_latency_us: Histogram::new(LATENCY_BUCKETS),
            accept_to_write_us: Histogram::new(LATENCY_BUCKETS),
            queue_resets: Counter::default(),
            queue_slack: Counter::default(),
            write_progress_timeouts: Counter::default(),
            memory_pressure_resets: Counter::default(),
            read_paused: Counter::default(),
            read_paused_core: Counter::default(),
            read_paused_overflow: Counter::default(),
            read_paused_memory: Counter::default(),
            log_lines_suppressed: Counter::default(),
            ws_spectator_sends: Counter::default(),
            ws: WsMetrics::default(),
        }
    }
}

impl CoreMetrics {
    /// A fresh, zeroed set of instruments behind an `Arc`, ready to share with the scraper.
    #[must_use]
    pub fn new_shared() -> Arc<CoreMetrics> {
        Arc::new(CoreMetrics::default())
    }

    /// A connection was refused at accept.
    pub fn refused(&self, refusal: Refusal) {
        match refusal {
            Refusal::Blocklisted => self.connections_refused_blocklist.inc(),
            Refusal::ConnectionsMax => self.connections_refused_limit.inc(),
            Refusal::PrejoinMax => self.connections_refused_prejoin.inc(),
            Refusal::Draining => self.connections_refused_draining.inc(),
        }
    }

    /// A connection was admitted.
    pub fn accepted(&self, transport: Transport) {
        self.connections_accepted.inc();
        self.transport_connections_accepted.add(transport, 1);
        self.connections_open.inc();
    }

    /// An admitted connection closed.
    pub fn closed(&self, transport: Transport) {
        self.connections_closed.inc();
        self.transport_connections_closed.add(transport, 1);
        self.connections_open.dec();
    }

    /// A WebSocket upgrade on `endpoint` (one of `WS_ENDPOINTS`).
    pub fn ws_upgrade(&self, endpoint: &str) {
        if let Some(index) = WS_ENDPOINTS.iter().position(|known| *known == endpoint) {
            self.ws.upgrades[index].inc();
        }
    }

    /// An HTTP answer of the WebSocket listener.
    pub fn ws_http_answer(&self, status: u16) {
        let index = WS_HTTP_STATUSES
            .iter()
            .position(|known| *known == status)
            .unwrap_or(WS_HTTP_STATUSES.len());
        self.ws.http_answers[index].inc();
    }

    /// A session the WebSocket carrier closed with `code`.
    pub fn ws_closed(&self, code: u16) {
        let index = WS_CARRIER_CLOSES
            .iter()
            .position(|known| *known == code)
            .unwrap_or(WS_CARRIER_CLOSES.len());
        self.ws.carrier_closes[index].inc();
    }

    /// A frame was read.
    pub fn frame_in(&self, transport: Transport) {
        self.frames_in.inc();
        self.transport_frames_in.add(transport, 1);
    }

    /// A write put `frames` frames of `bytes` bytes on the wire.
    pub fn frames_out(&self, transport: Transport, frames: u64, bytes: u64) {
        self.frames_out.add(frames);
        self.bytes_out.add(bytes);
        self.transport_frames_out.add(transport, frames);
    }

    /// The counters with their exported names (without `bps_` and `_total`) and help texts.
    fn counters(&self) -> [(&'static str, &'static str, &Counter); 28] {
        [
            (
                "connections_accepted",
                "Connections accepted.",
                &self.connections_accepted,
            ),
            (
                "connections_refused_blocklist",
                "Connections refused at accept because the peer is blocklisted.",
                &self.connections_refused_blocklist,
            ),
            (
                "connections_refused_limit",
                "Connections refused at accept because limits.connections_max was reached.",
                &self.connections_refused_limit,
            ),
            (
                "connections_refused_prejoin",
                "Connections refused at accept because the peer held limits.prejoin_connections_per_peer_max connections without a Join.",
                &self.connections_refused_prejoin,
            ),
            (
                "connections_refused_draining",
                "Connections refused at accept because the broker was draining.",
                &self.connections_refused_draining,
            ),
            (
                "join_timeouts",
                "Connections closed for sending no Join within server.join_deadline_ms.",
                &self.join_timeouts,
            ),
            (
                "join_timeout_blocklistings",
                "Peers blocklisted for missing limits.join_timeouts_per_peer_max Join deadlines (timeouts.blocklist_join_timeout_ms).",
                &self.join_timeout_blocklistings,
            ),
            (
                "flush_timeouts",
                "Flushing closes reset after timeouts.flush_deadline_ms (a peer that does not read).",
                &self.flush_timeouts,
            ),
            (
                "connections_closed",
                "Connections closed.",
                &self.connections_closed,
            ),
            ("frames_in", "Frames read from peers.", &self.frames_in),
            ("frames_out", "Frames written to peers.", &self.frames_out),
            ("bytes_in", "Bytes read from peers.", &self.bytes_in),
            ("bytes_out", "Bytes written to peers.", &self.bytes_out),
            (
                "frame_errors",
                "Streams closed for a frame that could not be split off (too large, bad length).",
                &self.frame_errors,
            ),
            ("writes", "Vectored write operations.", &self.writes),
            (
                "inbox_full",
                "Cross-core messages that found the target lane full and waited in the sender's overflow.",
                &self.inbox_full,
            ),
            (
                "verify_jobs",
                "Verification results applied.",
                &self.verify_jobs,
            ),
            (
                "verify_cancelled",
                "Queued verification jobs taken back unverified because their stream closed.",
                &self.verify_cancelled,
            ),
            (
                "queue_resets",
                "Streams reset because their outbound queue was full while the kernel refused bytes, or at its hard bound (R26).",
                &self.queue_resets,
            ),
            (
                "queue_slack",
                "Frames queued beyond the R26 bound while the writer still handed every byte to the kernel.",
                &self.queue_slack,
            ),
            (
                "write_progress_timeouts",
                "Streams reset because their socket took none of their queued bytes for timeouts.write_progress_deadline_ms.",
                &self.write_progress_timeouts,
            ),
            (
                "memory_pressure_resets",
                "Streams reset, largest holders first, because frame memory was full while their sockets took none of their queued bytes.",
                &self.memory_pressure_resets,
            ),
            (
                "read_paused",
                "Times a reader waited for its stream's read window.",
                &self.read_paused,
            ),
            (
                "read_paused_core",
                "Times a reader waited because its core had limits.frames_in_flight_per_core_max frames in flight.",
                &self.read_paused_core,
            ),
            (
                "read_paused_overflow",
                "Times a reader waited because its core's overflow towards another core was not empty.",
                &self.read_paused_overflow,
            ),
            (
                "read_paused_memory",
                "Times a reader waited for frame memory (limits.frame_memory_bytes_max).",
                &self.read_paused_memory,
            ),
            (
                "log_lines_suppressed",
                "Peer-triggered log lines beyond log.peer_lines_per_s_max, not written.",
                &self.log_lines_suppressed,
            ),
            (
                "ws_spectator_sends",
                "Data messages from WebSocket bridge sessions without addr (W11); each closed its session and blocklisted nobody.",
                &self.ws_spectator_sends,
            ),
        ]
    }

    /// The gauges with their exported names and help texts.
    fn gauges(&self) -> [(&'static str, &'static str, &Gauge); 7] {
        [
            (
                "connections_open",
                "Connections currently open.",
                &self.connections_open,
            ),
            (
                "inbox_depth",
                "Messages waiting in the cross-core home and owner lanes.",
                &self.inbox_depth,
            ),
            (
                "overflow_messages",
                "Cross-core messages waiting in the senders' overflows.",
                &self.overflow_messages,
            ),
            (
                "frames_in_flight",
                "Frames read and not yet consumed by their home core.",
                &self.frames_in_flight,
            ),
            (
                "held_bytes",
                "Bytes streams hold queued towards their peers, each stream counting its own.",
                &self.held_bytes,
            ),
            (
                "verifications_in_flight",
                "Verification jobs issued and not yet answered.",
                &self.verifications_in_flight,
            ),
            (
                "verify_queue_depth",
                "Verification jobs waiting in the pool's queue.",
                &self.verify_queue_depth,
            ),
        ]
    }

    /// The histograms with their exported names and help texts.
    fn histograms(&self) -> [(&'static str, &'static str, &Histogram); 3] {
        [
            (
                "frames_per_write",
                "Frames carried by one vectored write.",
                &self.frames_per_write,
            ),
            (
                "verify_latency_us",
                "Microseconds from submitting a verification job to receiving its result (every job).",
                &self.verify_latency_us,
            ),
            (
                "accept_to_write_us",
                "Microseconds from reading a frame to writing it to a receiving stream's socket. Sampled: at most one frame in flight per receiving stream is timed, so a burst counts once per stream.",
                &self.accept_to_write_us,
            ),
        ]
    }

    /// The per-transport counters with their exported names and help texts.
    fn per_transport(&self) -> [(&'static str, &'static str, &PerTransport); 4] {
        [
            (
                "transport_connections_accepted",
                "Connections accepted, by transport.",
                &self.transport_connections_accepted,
            ),
            (
                "transport_connections_closed",
                "Connections closed, by transport.",
                &self.transport_connections_closed,
            ),
            (
                "transport_frames_in",
                "Frames read, by transport.",
                &self.transport_frames_in,
            ),
            (
                "transport_frames_out",
                "Frames written, by transport.",
                &self.transport_frames_out,
            ),
        ]
    }
}

/// The kind of a broker-wide protocol figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Monotonic; exported with the `_total` suffix.
    Counter,
    /// Goes up and down (live cohorts, attached streams).
    Gauge,
}

/// One broker-wide figure of the protocol core (for instance a total of an R40 counter, or the
/// number of live cohorts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolMetric {
    /// Exported name without the `bps_` prefix and without `_total`, e.g. `wrong_stream`.
    pub name: &'static str,
    /// One-line help text.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// The value, summed over every home core.
    pub value: u64,
}

/// The protocol counters and role gauges of one live cohort, or of the cohorts summed into
/// `other`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortSeries {
    /// The series' labels (a hash of the key, the binding, the admin).
    pub label: CohortLabel,
    /// Streams receiving its deliveries: the order in which cohorts get their own series.
    pub subscribers: u64,
    /// Counter name (as in `ProtocolMetric::name`) and value. The R40 names missing here are
    /// exported as zero.
    pub counters: Vec<(&'static str, u64)>,
    /// Attached streams by role name (`pending`, `publisher`, `spectator`, `silent`),
    /// exported as `bps_cohort_streams{cohort,role}`.
    pub streams_by_role: Vec<(&'static str, u64)>,
    /// The cohort's gauges by name (see `COHORT_GAUGES`); missing names are exported as zero.
    pub gauges: Vec<(&'static str, u64)>,
}

impl CohortSeries {
    fn of(cohort: &CohortCounters) -> CohortSeries {
        CohortSeries {
            label: cohort.label().clone(),
            subscribers: cohort.subscribers(),
            counters: cohort.counters().snapshot().into_iter().collect(),
            streams_by_role: cohort.roles_snapshot().into_iter().collect(),
            gauges: cohort.gauges_snapshot().into_iter().collect(),
        }
    }
}

/// The cohorts beyond `limits.cohort_series_max`, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherCohorts {
    /// How many cohorts are summed here.
    pub cohorts: u64,
    /// Their counters, summed per name.
    pub counters: Vec<(&'static str, u64)>,
    /// Their streams by role, summed.
    pub streams_by_role: Vec<(&'static str, u64)>,
    /// Their gauges, summed.
    pub gauges: Vec<(&'static str, u64)>,
}

impl OtherCohorts {
    fn add(&mut self, series: &CohortSeries) {
        self.cohorts += 1;
        add_into(&mut self.counters, &series.counters);
        add_into(&mut self.streams_by_role, &series.streams_by_role);
        add_into(&mut self.gauges, &series.gauges);
    }
}

fn add_into(sums: &mut Vec<(&'static str, u64)>, values: &[(&'static str, u64)]) {
    for (name, value) in values {
        match sums.iter_mut().find(|(known, _)| known == name) {
            Some((_, sum)) => *sum = sum.wrapping_add(*value),
            None => sums.push((name, *value)),
        }
    }
}

/// The per-cohort figures of one scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CohortFigures {
    /// The cohorts with their own series, most subscribers first (ties by id).
    pub shown: Vec<CohortSeries>,
    /// The rest, summed.
    pub other: OtherCohorts,
}

/// The protocol figures of a scrape, from the counter registries of every core's machine: the
/// totals summed (they survive cohort reclaim, so they stay monotonic), a `cohorts_live`
/// gauge, and the per-cohort figures with at most `series_max` cohorts shown on their own.
#[must_use]
pub fn protocol_figures<'a>(
    registries: impl IntoIterator<Item = &'a CounterRegistry>,
    series_max: usize,
) -> (Vec<ProtocolMetric>, CohortFigures) {
    let mut totals: Vec<ProtocolMetric> = ProtocolCounter::ALL
        .iter()
        .map(|counter| ProtocolMetric {
            name: counter.name(),
            help: protocol_help(counter.name()),
            kind: MetricKind::Counter,
            value: 0,
        })
        .collect();
    let mut all = Vec::new();
    for registry in registries {
        for (total, counter) in totals.iter_mut().zip(ProtocolCounter::ALL) {
            total.value = total.value.wrapping_add(registry.totals().get(counter));
        }
        all.extend(
            registry
                .live_cohorts()
                .iter()
                .map(|cohort| CohortSeries::of(cohort)),
        );
    }
    totals.push(ProtocolMetric {
        name: "cohorts_live",
        help: "Live cohorts (R31).",
        kind: MetricKind::Gauge,
        value: all.len() as u64,
    });
    for (name, help) in COHORT_GAUGES {
        totals.push(ProtocolMetric {
            name,
            help,
            kind: MetricKind::Gauge,
            value: all
                .iter()
                .map(|series| value_of(&series.gauges, name))
                .fold(0, u64::wrapping_add),
        });
    }
    all.sort_by(|first, second| {
        second
            .subscribers
            .cmp(&first.subscribers)
            .then_with(|| first.label.id.cmp(&second.label.id))
    });
    let mut figures = CohortFigures::default();
    for series in all {
        if figures.shown.len() < series_max {
            figures.shown.push(series);
        } else {
            figures.other.add(&series);
        }
    }
    (totals, figures)
}

/// The help text of a protocol counter: the R40 text, or one line per extra counter.
fn protocol_help(name: &str) -> &'static str {
    if let Some((_, help)) = R40_COUNTERS.iter().find(|(known, _)| *known == name) {
        return help;
    }
    match name {
        "malformed" => "Frame bodies that are not a Broadcast (violations).",
        "joins_ok" => "Joins answered OK.",
        "joins_full" => "Joins answered FULL (R30..R33).",
        "joins_rejected" => "Joins answered REJECTED (R3, D6, D7, D11).",
        "joins_blocked" => "Joins from a blocklisted peer, closed without an Ack (R39).",
        "accepted_data" => "Accepted DATA publications.",
        "accepted_auth" => "Accepted AUTH frames (never delivered).",
        "accepted_roster" => "Accepted ROSTER publications.",
        "accepted_eos" => "Accepted EOS publications.",
        "claims" => "Streams that claimed and became publishers (R7).",
        "deliveries" => "Frames handed to the I/O layer for receiving streams.",
        "drop_revoked_in_grace" => "Frames of revoked streams dropped within the grace (R24).",
        "drop_stream_gone" => "Frames for streams already closed, dropped.",
        "superseded" => "Publisher streams reset by a newer claim of the same address (R29).",
        "blocklisted" => "Blocklist entries issued (R39).",
        "verify_requests" => "Verification jobs issued by the protocol core.",
        "cursor_evictions" => {
            "Publisher cursors evicted from a full cursor table, least recently used first (R27)."
        }
        "drop_rate_resets" => {
            "Streams reset for dropping more than limits.dropped_frames_per_stream_per_s_max frames a second."
        }
        "cohorts_created" => "Cohorts created (R2).",
        "cohorts_reclaimed_empty" => "Cohorts reclaimed because their last stream left (R36).",
        "cohorts_reclaimed_inactive" => "Cohorts reclaimed for inactivity (R34).",
        "cohorts_reclaimed_eos" => "Cohorts reclaimed after an EOS (R21).",
        "cohorts_reclaimed_idle" => {
            "Cohorts with an empty fan-out set reclaimed to make room in a full cohort table (R31)."
        }
        "history_frames_served" => {
            "Retained DATA frames sent in history backlogs to streams entering a fan-out set (D11)."
        }
        _ => UNDESCRIBED_HELP,
    }
}

/// The help of a protocol counter this file has no line for (a test keeps it unused).
const UNDESCRIBED_HELP: &str = "Protocol event count.";

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
    /// The verification pool's totals; `None` when every core verifies inline.
    pub verify_pool: Option<VerifyPoolFigures>,
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

impl VerifyPoolFigures {
    /// Each figure with its family name and help text.
    fn families(&self) -> [(&'static str, &'static str, u64); 10] {
        [
            (
                "bps_verify_pool_jobs_total",
                "Verification jobs the pool finished; over batches, the mean batch size.",
                self.jobs,
            ),
            (
                "bps_verify_pool_batches_total",
                "Batches the pool's workers finished.",
                self.batches,
            ),
            (
                "bps_verify_pool_full_total",
                "Jobs refused at the pool's queue bound.",
                self.full,
            ),
            (
                "bps_verify_pool_recoveries_total",
                "Jobs settled by a full public-key recovery.",
                self.recoveries,
            ),
            (
                "bps_verify_pool_key_accepts_total",
                "Jobs accepted against a cached owner key, without recovery.",
                self.key_accepts,
            ),
            (
                "bps_verify_pool_batch_checks_total",
                "Batched signature checks run (two or more chunks of cached owners).",
                self.batch_checks,
            ),
            (
                "bps_verify_pool_batch_failures_total",
                "Batched checks that failed and were bisected.",
                self.batch_failures,
            ),
            (
                "bps_verify_pool_class_full_total",
                "Jobs refused at one cohort's bound in the pool's queue.",
                self.class_full,
            ),
            (
                "bps_verify_pool_cancelled_total",
                "Queued jobs taken back unverified because their stream closed.",
                self.cancelled,
            ),
            (
                "bps_verify_pool_bisections_total",
                "Failed batched checks split in two and checked again.",
                self.bisections,
            ),
        ]
    }
}

/// Everything one scrape exports, handed over by the admin backend.
#[derive(Clone, Debug)]
pub struct MetricsSnapshot {
    /// The I/O driver in use: `io_uring` or `epoll`.
    pub driver: &'static str,
    /// Every core's instruments, in core order.
    pub cores: Vec<Arc<CoreMetrics>>,
    /// Broker-wide protocol figures. The R40 counters missing here are exported as zero.
    pub protocol: Vec<ProtocolMetric>,
    /// Per-cohort protocol counters.
    pub cohorts: CohortFigures,
    /// Memory and heartbeats.
    pub broker: BrokerGauges,
}

impl MetricsSnapshot {
    /// The Prometheus text exposition of this snapshot.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = render_prometheus(&self.cores, &self.protocol, &self.cohorts, self.driver);
        render_broker(&mut out, &self.broker);
        out
    }
}

/// Memory against its bounds, the worst case per term, and the cores' heartbeats.
fn render_broker(out: &mut String, broker: &BrokerGauges) {
    let gauges = [
        (
            "bps_frame_memory_bytes",
            "Frame bytes held now (frames read and not released, grown read buffers).",
            broker.frame_memory_bytes,
        ),
        (
            "bps_frame_memory_bytes_max",
            "The bound of frame memory (limits.frame_memory_bytes_max); readers wait at it.",
            broker.frame_memory_bytes_max,
        ),
        (
            "bps_rss_bytes",
            "Resident memory of the broker process.",
            broker.rss_bytes,
        ),
        (
            "bps_memory_budget_bytes",
            "The memory budget (limits.memory_bytes_max or half the host's memory).",
            broker.budget.budget_bytes,
        ),
        (
            "bps_memory_worst_case_bytes",
            "The worst-case memory of the running configuration's bounds.",
            broker.budget.total_bytes,
        ),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        line(out, name, &[], &value.to_string());
    }
    family(
        out,
        "bps_memory_worst_case_term_bytes",
        "gauge",
        "The worst case of one term of the memory budget.",
    );
    for term in &broker.budget.terms {
        line(
            out,
            "bps_memory_worst_case_term_bytes",
            &[("term", term.name)],
            &term.bytes.to_string(),
        );
    }
    family(
        out,
        "bps_core_heartbeat_age_ms",
        "gauge",
        "Milliseconds since the core last began a turn (a stuck core's grows).",
    );
    for (core, age) in broker.heartbeats_ms.iter().enumerate() {
        line(
            out,
            "bps_core_heartbeat_age_ms",
            &[("core", &core.to_string())],
            &age.to_string(),
        );
    }
    family(
        out,
        "bps_core_busy_seconds_total",
        "counter",
        "CPU seconds the core's thread has used; its rate is the core's busy fraction.",
    );
    for (core, used) in broker.core_busy.iter().enumerate() {
        if let Some(used) = used {
            line(
                out,
                "bps_core_busy_seconds_total",
                &[("core", &core.to_string())],
                &format!("{:.6}", used.as_secs_f64()),
            );
        }
    }
    family(
        out,
        "bps_ready",
        "gauge",
        "1 while the broker takes new streams (/readyz answers 200), 0 while draining.",
    );
    line(out, "bps_ready", &[], if broker.ready { "1" } else { "0" });
    if let Some(pool) = &broker.verify_pool {
        for (name, help, value) in pool.families() {
            family(out, name, "counter", help);
            line(out, name, &[], &value.to_string());
        }
    }
}

/// Renders a scrape in the Prometheus text exposition format 0.0.4: per-core instruments merged
/// and per core, broker-wide protocol figures, per-cohort counters, and `bps_driver_info`.
#[must_use]
pub fn render_prometheus(
    cores: &[Arc<CoreMetrics>],
    protocol: &[ProtocolMetric],
    cohorts: &CohortFigures,
    driver: &str,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    family(
        &mut out,
        "bps_driver_info",
        "gauge",
        "The I/O driver in use (io_uring or epoll).",
    );
    line(
        &mut out,
        "bps_driver_info",
        &[("driver", driver)],
        &1_u64.to_string(),
    );
    family(
        &mut out,
        "bps_cores",
        "gauge",
        "Cores running a broker runtime.",
    );
    line(&mut out, "bps_cores", &[], &cores.len().to_string());

    render_core_counters(&mut out, cores);
    render_transports(&mut out, cores);
    render_ws(&mut out, cores);
    render_core_gauges(&mut out, cores);
    render_core_histograms(&mut out, cores);
    render_protocol(&mut out, protocol);
    render_cohorts(&mut out, protocol, cohorts);
    out
}

/// Core counters, merged and per core. The names come from a zeroed template so that a broker
/// with no cores yet still exports every family.
fn render_core_counters(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let template = CoreMetrics::default();
    let names = template.counters().map(|(name, help, _)| (name, help));
    render_core_scalars(out, cores, &names, ("counter", "_total"), |core, index| {
        core.counters()[index].2.get()
    });
}

/// Per-transport counters, summed over cores: `bps_<name>_total{transport="tcp"}`.
fn render_transports(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let template = CoreMetrics::default();
    for (index, (name, help, _)) in template.per_transport().iter().enumerate() {
        let full = format!("bps_{name}_total");
        family(out, &full, "counter", help);
        for transport in Transport::ALL {
            let total = cores.iter().fold(0_u64, |sum, core| {
                sum.wrapping_add(core.per_transport()[index].2.get(transport))
            });
            line(
                out,
                &full,
                &[("transport", transport.name())],
                &total.to_string(),
            );
        }
    }
}

/// The WebSocket carrier's labelled counters, summed over cores.
fn render_ws(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let sum = |pick: &dyn Fn(&CoreMetrics) -> u64| {
        cores
            .iter()
            .fold(0_u64, |total, core| total.wrapping_add(pick(core)))
    };
    let name = "bps_ws_upgrades_total";
    family(out, name, "counter", "WebSocket upgrades, by endpoint.");
    for (index, endpoint) in WS_ENDPOINTS.iter().enumerate() {
        let total = sum(&|core| core.ws.upgrades[index].get());
        line(out, name, &[("endpoint", endpoint)], &total.to_string());
    }
    let name = "bps_ws_http_answers_total";
    family(
        out,
        name,
        "counter",
        "HTTP answers of the WebSocket listener other than an upgrade, by status.",
    );
    let statuses = WS_HTTP_STATUSES.map(|status| status.to_string());
    for (index, status) in statuses
        .iter()
        .map(String::as_str)
        .chain(["other"])
        .enumerate()
    {
        let total = sum(&|core| core.ws.http_answers[index].get());
        line(out, name, &[("status", status)], &total.to_string());
    }
    let name = "bps_ws_carrier_closes_total";
    family(
        out,
        name,
        "counter",
        "WebSocket sessions the carrier closed (peer faults, idle sessions), by close code.",
    );
    let codes = WS_CARRIER_CLOSES.map(|code| code.to_string());
    for (index, code) in codes
        .iter()
        .map(String::as_str)
        .chain(["other"])
        .enumerate()
    {
        let total = sum(&|core| core.ws.carrier_closes[index].get());
        line(out, name, &[("code", code)], &total.to_string());
    }
    let name = "bps_ws_static_in_flight";
    family(
        out,
        name,
        "gauge",
        "Static-file answers of the WebSocket listener being written.",
    );
    let total = sum(&|core| core.ws.static_in_flight.get());
    line(out, name, &[], &total.to_string());
    let name = "bps_ws_refusals_in_flight";
    family(
        out,
        name,
        "gauge",
        "Refusal answers of the WebSocket listener being written at accept.",
    );
    let total = sum(&|core| core.ws.refusals_in_flight.get());
    line(out, name, &[], &total.to_string());
    let name = "bps_ws_static_busy_total";
    family(
        out,
        name,
        "counter",
        "Static-file requests answered 503 because their core had its bound of answers in flight.",
    );
    let total = sum(&|core| core.ws.static_busy.get());
    line(out, name, &[], &total.to_string());
    for (name, help, pick) in [
        (
            "bps_ws_service_posts_limited_total",
            "W5 POSTs answered 429 because their peer was over ws.service_posts_per_peer_per_s.",
            (|core: &CoreMetrics| core.ws.service_posts_limited.get()) as fn(&CoreMetrics) -> u64,
        ),
        (
            "bps_ws_service_busy_total",
            "W5 POSTs answered 503 because their core had its bound of relays waiting.",
            |core| core.ws.service_busy.get(),
        ),
        (
            "bps_ws_service_strikes_total",
            "W5 POSTs that did not validate, each a blocklist strike against its peer.",
            |core| core.ws.service_strikes.get(),
        ),
        (
            "bps_ws_refusals_closed_total",
            "Connections refused at accept and closed at once, no refusal answer slot being free.",
            |core| core.ws.refusals_closed.get(),
        ),
        (
            "bps_ws_head_timeouts_total",
            "Connections closed, without a blocklist strike, for sending no request head in time.",
            |core| core.ws.head_timeouts.get(),
        ),
    ] {
        family(out, name, "counter", help);
        let total = sum(&|core| pick(core));
        line(out, name, &[], &total.to_string());
    }
}

/// Core gauges, summed and per core.
fn render_core_gauges(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let template = CoreMetrics::default();
    let names = template.gauges().map(|(name, help, _)| (name, help));
    render_core_scalars(out, cores, &names, ("gauge", ""), |core, index| {
        core.gauges()[index].2.get()
    });
}

/// One merged family `bps_<name><suffix>` and one per-core family `bps_core_<name><suffix>`
/// for each (name, help), with the value of instrument `index` of a core from `value_of`.
fn render_core_scalars(
    out: &mut String,
    cores: &[Arc<CoreMetrics>],
    names: &[(&'static str, &'static str)],
    (kind, suffix): (&str, &str),
    value_of: impl Fn(&CoreMetrics, usize) -> u64,
) {
    for (index, (name, help)) in names.iter().enumerate() {
        let total: u64 = cores
            .iter()
            .fold(0_u64, |sum, core| sum.wrapping_add(value_of(core, index)));
        let merged = format!("bps_{name}{suffix}");
        family(out, &merged, kind, help);
        line(out, &merged, &[], &total.to_string());
        let per_core = format!("bps_core_{name}{suffix}");
        family(out, &per_core, kind, help);
        for (core_index, core) in cores.iter().enumerate() {
            line(
                out,
                &per_core,
                &[("core", &core_index.to_string())],
                &value_of(core, index).to_string(),
            );
        }
    }
}

/// Core histograms, merged and per core.
fn render_core_histograms(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let template = CoreMetrics::default();
    for (index, (name, help, histogram)) in template.histograms().iter().enumerate() {
        let snapshots: Vec<HistogramSnapshot> = cores
            .iter()
            .map(|core| core.histograms()[index].2.snapshot())
            .collect();
        // Start from the zeroed template so the merged figure has every bucket even with no
        // cores.
        let mut merged = histogram.snapshot();
        for snapshot in &snapshots {
            merged.merge(snapshot);
        }
        let merged_name = format!("bps_{name}");
        family(out, &merged_name, "histogram", help);
        histogram_lines(out, &merged_name, None, &merged);
        let per_core = format!("bps_core_{name}");
        family(out, &per_core, "histogram", help);
        for (core_index, snapshot) in snapshots.iter().enumerate() {
            histogram_lines(out, &per_core, Some(core_index), snapshot);
        }
    }
}

/// The `_bucket`, `_sum` and `_count` series of one histogram (buckets cumulative).
fn histogram_lines(
    out: &mut String,
    name: &str,
    core: Option<usize>,
    snapshot: &HistogramSnapshot,
) {
    let core_label = core.map(|index| index.to_string());
    let bucket_name = format!("{name}_bucket");
    let mut cumulative = 0_u64;
    let finite = snapshot.buckets.len().saturating_sub(1);
    for (index, count) in snapshot.buckets.iter().enumerate() {
        cumulative = cumulative.wrapping_add(*count);
        let bound = if index < finite {
            (1_u64 << index).to_string()
        } else {
            "+Inf".to_owned()
        };
        let mut labels: Vec<(&str, &str)> = Vec::with_capacity(2);
        if let Some(core_label) = &core_label {
            labels.push(("core", core_label));
        }
        labels.push(("le", &bound));
        line(out, &bucket_name, &labels, &cumulative.to_string());
    }
    let labels: Vec<(&str, &str)> = core_label
        .as_deref()
        .map(|core_label| vec![("core", core_label)])
        .unwrap_or_default();
    line(
        out,
        &format!("{name}_sum"),
        &labels,
        &snapshot.sum.to_string(),
    );
    // The +Inf bucket and `_count` must agree; take the bucket total, which is what was
    // cumulated above, so a scrape racing a `record` stays self-consistent.
    line(
        out,
        &format!("{name}_count"),
        &labels,
        &cumulative.to_string(),
    );
}

/// Broker-wide protocol figures, with every R40 counter present.
fn render_protocol(out: &mut String, protocol: &[ProtocolMetric]) {
    for (name, help) in R40_COUNTERS {
        if !protocol
            .iter()
            .any(|metric| metric.name == name && metric.kind == MetricKind::Counter)
        {
            let full = format!("bps_{name}_total");
            family(out, &full, "counter", help);
            line(out, &full, &[], "0");
        }
    }
    for metric in protocol {
        let base = sanitize_name(metric.name);
        let (full, kind) = match metric.kind {
            MetricKind::Counter => (format!("bps_{base}_total"), "counter"),
            MetricKind::Gauge => (format!("bps_{base}"), "gauge"),
        };
        family(out, &full, kind, metric.help);
        line(out, &full, &[], &metric.value.to_string());
    }
}

/// Per-cohort families: the R40 names always, plus any other name a cohort reports; the
/// shown cohorts as counters, the rest summed into `bps_cohort_other_*` gauges.
fn render_cohorts(out: &mut String, protocol: &[ProtocolMetric], cohorts: &CohortFigures) {
    let mut names: Vec<(&str, &str)> = R40_COUNTERS.to_vec();
    for counters in cohorts
        .shown
        .iter()
        .map(|series| &series.counters)
        .chain([&cohorts.other.counters])
    {
        for (name, _) in counters {
            if !names.iter().any(|(known, _)| known == name) {
                let help = protocol
                    .iter()
                    .find(|metric| metric.name == *name)
                    .map_or("Per-cohort protocol counter.", |metric| metric.help);
                names.push((name, help));
            }
        }
    }
    family(
        out,
        "bps_cohort_streams",
        "gauge",
        "Streams attached to the cohort, by role.",
    );
    for series in &cohorts.shown {
        for (role, count) in &series.streams_by_role {
            let mut labels = series_labels(&series.label);
            labels.push(("role", role));
            line(out, "bps_cohort_streams", &labels, &count.to_string());
        }
    }
    for (name, help) in COHORT_GAUGES {
        let full = format!("bps_cohort_{name}");
        family(out, &full, "gauge", help);
        for series in &cohorts.shown {
            line(
                out,
                &full,
                &series_labels(&series.label),
                &value_of(&series.gauges, name).to_string(),
            );
        }
    }
    for (name, help) in &names {
        let full = format!("bps_cohort_{}_total", sanitize_name(name));
        family(out, &full, "counter", help);
        for series in &cohorts.shown {
            line(
                out,
                &full,
                &series_labels(&series.label),
                &value_of(&series.counters, name).to_string(),
            );
        }
    }
    render_other_cohorts(out, &names, &cohorts.other);
}

/// The cohorts without their own series, summed.
fn render_other_cohorts(out: &mut String, names: &[(&str, &str)], other: &OtherCohorts) {
    family(
        out,
        "bps_cohorts_other",
        "gauge",
        "Live cohorts beyond limits.cohort_series_max, summed into the bps_cohort_other_* families.",
    );
    line(out, "bps_cohorts_other", &[], &other.cohorts.to_string());
    family(
        out,
        "bps_cohort_other_streams",
        "gauge",
        "Streams of the cohorts without their own series, by role.",
    );
    for (role, count) in &other.streams_by_role {
        line(
            out,
            "bps_cohort_other_streams",
            &[("role", role)],
            &count.to_string(),
        );
    }
    for (name, help) in COHORT_GAUGES {
        let full = format!("bps_cohort_other_{name}");
        family(
            out,
            &full,
            "gauge",
            &format!("Sum over the cohorts without their own series: {help}"),
        );
        line(out, &full, &[], &value_of(&other.gauges, name).to_string());
    }
    for (name, help) in names {
        let full = format!("bps_cohort_other_{}", sanitize_name(name));
        let help = format!(
            "Sum over the cohorts without their own series (may go down as that set changes): {help}"
        );
        family(out, &full, "gauge", &help);
        line(
            out,
            &full,
            &[],
            &value_of(&other.counters, name).to_string(),
        );
    }
}

fn value_of(counters: &[(&'static str, u64)], name: &str) -> u64 {
    counters
        .iter()
        .find(|(counter, _)| *counter == name)
        .map_or(0, |(_, value)| *value)
}

/// The labels of one cohort's series.
fn series_labels(label: &CohortLabel) -> Vec<(&'static str, &str)> {
    vec![
        ("cohort", label.id.as_str()),
        ("binding", label.binding.as_str()),
        ("admin", label.admin.as_str()),
    ]
}

/// Writes the `# HELP` and `# TYPE` lines of a family.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    for character in help.chars() {
        match character {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            other => out.push(other),
        }
    }
    out.push('\n');
    out.push_str("# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Writes one sample line with its labels (values escaped as the format requires).
fn line(out: &mut String, name: &str, labels: &[(&str, &str)], value: &str) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (index, (label, label_value)) in labels.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            for character in label_value.chars() {
                match character {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    other => out.push(other),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// A metric name made of the characters Prometheus allows (`[a-zA-Z0-9_:]`); anything else
/// becomes `_`. Names come from code, so this only guards against a typo breaking a scrape.
fn sanitize_name(name: &str) -> String {
    name.chars()
        .map(|character| {
            if character.is_ascii_alphanumeric() || character == '_' || character == ':' {
                character
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_counter_has_its_own_help() {
        let undescribed: Vec<&str> = crate::protocol::counters::Counter::ALL
            .iter()
            .map(|counter| counter.name())
            .filter(|name| protocol_help(name) == UNDESCRIBED_HELP)
            .collect();
        assert!(undescribed.is_empty(), "no help line for {undescribed:?}");
    }

    #[test]
    fn bucket_index_is_ceil_log2() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(1), 0);
        assert_eq!(bucket_index(2), 1);
        assert_eq!(bucket_index(3), 2);
        assert_eq!(bucket_index(4), 2);
        assert_eq!(bucket_index(5), 3);
        assert_eq!(bucket_index(1024), 10);
        assert_eq!(bucket_index(1025), 11);
        assert_eq!(bucket_index(u64::MAX), 64);
    }

    #[test]
    fn histogram_records_and_overflows() {
        let histogram = Histogram::new(3);
        for value in [0, 1, 2, 3, 4, 5, 1000] {
            histogram.record(value);
        }
        let snapshot = histogram.snapshot();
        assert_eq!(snapshot.buckets, vec![2, 1, 2, 2]);
        assert_eq!(snapshot.count, 7);
        assert_eq!(snapshot.sum, 1015);
    }

    #[test]
    fn snapshots_merge() {
        let first = Histogram::new(2);
        let second = Histogram::new(2);
        first.record(1);
        second.record(2);
        second.record(9);
        let mut merged = HistogramSnapshot::default();
        merged.merge(&first.snapshot());
        merged.merge(&second.snapshot());
        assert_eq!(merged.buckets, vec![1, 1, 1]);
        assert_eq!(merged.sum, 12);
        assert_eq!(merged.count, 3);
    }

    #[test]
    fn gauge_goes_both_ways() {
        let gauge = Gauge::default();
        gauge.inc();
        gauge.inc();
        gauge.dec();
        gauge.add(5);
        gauge.sub(2);
        assert_eq!(gauge.get(), 4);
        gauge.set(7);
        assert_eq!(gauge.get(), 7);
    }

    fn label(id: &str) -> CohortLabel {
        CohortLabel {
            id: id.to_owned(),
            binding: "mnemonic".to_owned(),
            admin: "none".to_owned(),
        }
    }

    fn sample() -> String {
        let first = CoreMetrics::new_shared();
        let second = CoreMetrics::new_shared();
        first.frames_in.add(3);
        second.frames_in.add(4);
        first.connections_open.set(2);
        second.connections_open.set(5);
        first.verify_latency_us.record(100);
        second.verify_latency_us.record(3);
        second.frames_per_write.record(16);
        let protocol = vec![
            ProtocolMetric {
                name: "wrong_stream",
                help: "R13 violations.",
                kind: MetricKind::Counter,
                value: 9,
            },
            ProtocolMetric {
                name: "cohorts_live",
                help: "Live cohorts.",
                kind: MetricKind::Gauge,
                value: 2,
            },
        ];
        let cohorts = CohortFigures {
            shown: vec![
                CohortSeries {
                    label: label("aabbccddeeff0011"),
                    subscribers: 4,
                    counters: vec![("wrong_stream", 4), ("joins", 7)],
                    streams_by_role: vec![("spectator", 3), ("publisher", 1)],
                    gauges: vec![("history_frames", 20), ("history_bytes", 86_000)],
                },
                CohortSeries {
                    label: label("ffff000000000000"),
                    subscribers: 0,
                    counters: vec![],
                    streams_by_role: vec![],
                    gauges: vec![],
                },
            ],
            other: OtherCohorts {
                cohorts: 3,
                counters: vec![("wrong_stream", 5)],
                streams_by_role: vec![("spectator", 6)],
                gauges: vec![("history_frames", 7)],
            },
        };
        render_prometheus(&[first, second], &protocol, &cohorts, "io_uring")
    }

    #[test]
    fn renders_merged_and_per_core_series() {
        let text = sample();
        assert!(text.contains("bps_driver_info{driver=\"io_uring\"} 1\n"));
        assert!(text.contains("bps_cores 2\n"));
        assert!(text.contains("# TYPE bps_frames_in_total counter\n"));
        assert!(text.contains("bps_frames_in_total 7\n"));
        assert!(text.contains("bps_core_frames_in_total{core=\"0\"} 3\n"));
        assert!(text.contains("bps_core_frames_in_total{core=\"1\"} 4\n"));
        assert!(text.contains("bps_connections_open 7\n"));
        assert!(text.contains("bps_core_connections_open{core=\"1\"} 5\n"));
    }

    #[test]
    fn renders_the_history_ring_gauges_per_cohort_and_for_the_others() {
        let text = sample();
        assert!(text.contains("# TYPE bps_cohort_history_frames gauge\n"));
        assert!(text.contains(
            "bps_cohort_history_frames{cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"} 20\n"
        ));
        assert!(text.contains(
            "bps_cohort_history_bytes{cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"} 86000\n"
        ));
        // A cohort without the gauges exports zero, not nothing.
        assert!(text.contains(
            "bps_cohort_history_bytes{cohort=\"ffff000000000000\",binding=\"mnemonic\",admin=\"none\"} 0\n"
        ));
        assert!(text.contains("# TYPE bps_cohort_other_history_frames gauge\n"));
        assert!(text.contains("bps_cohort_other_history_frames 7\n"));
        assert!(text.contains("bps_cohort_other_history_bytes 0\n"));
    }

    #[test]
    fn renders_histograms_cumulatively() {
        let text = sample();
        assert!(text.contains("# TYPE bps_verify_latency_us histogram\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"2\"} 0\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"4\"} 1\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"128\"} 2\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("bps_verify_latency_us_sum 103\n"));
        assert!(text.contains("bps_verify_latency_us_count 2\n"));
        assert!(text.contains("bps_core_verify_latency_us_bucket{core=\"0\",le=\"128\"} 1\n"));
        assert!(text.contains("bps_core_verify_latency_us_count{core=\"1\"} 1\n"));
        assert!(text.contains("bps_frames_per_write_bucket{le=\"16\"} 1\n"));
        assert!(text.contains("bps_frames_per_write_bucket{le=\"1024\"} 1\n"));
    }

    #[test]
    fn renders_every_r40_counter_in_total_and_per_cohort() {
        let text = sample();
        for (name, _) in R40_COUNTERS {
            assert!(
                text.contains(&format!("# TYPE bps_{name}_total counter\n")),
                "{name}"
            );
            assert!(
                text.contains(&format!(
                    "bps_cohort_{name}_total{{cohort=\"ffff000000000000\",binding=\"mnemonic\",admin=\"none\"}}"
                )),
                "{name}"
            );
        }
        assert!(text.contains("bps_wrong_stream_total 9\n"));
        assert!(text.contains("bps_unknown_kind_total 0\n"));
        assert!(text.contains("bps_cohorts_live 2\n"));
        let labels = "cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"";
        assert!(text.contains(&format!("bps_cohort_wrong_stream_total{{{labels}}} 4\n")));
        assert!(text.contains(&format!("bps_cohort_joins_total{{{labels}}} 7\n")));
        assert!(text.contains(&format!(
            "bps_cohort_streams{{{labels},role=\"spectator\"}} 3\n"
        )));
        assert!(text.contains("bps_cohorts_other 3\n"));
        assert!(text.contains("bps_cohort_other_wrong_stream 5\n"));
        assert!(text.contains("bps_cohort_other_joins 0\n"));
        assert!(text.contains("bps_cohort_other_streams{role=\"spectator\"} 6\n"));
    }

    #[test]
    fn exposition_is_well_formed() {
        let text = sample();
        let mut declared: Vec<String> = Vec::new();
        for text_line in text.lines() {
            if let Some(rest) = text_line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default().to_owned();
                assert!(!declared.contains(&name), "family declared twice: {name}");
                declared.push(name);
                continue;
            }
            if text_line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = text_line.rsplit_once(' ').expect("sample has a value");
            assert!(value.parse::<f64>().is_ok(), "bad value in {text_line}");
            let name = series.split('{').next().unwrap_or_default();
            assert!(
                name.chars()
                    .all(|character| character.is_ascii_alphanumeric() || character == '_'),
                "bad name in {text_line}"
            );
            let family = declared.last().expect("a sample follows its TYPE line");
            assert!(
                name == family
                    || name
                        .strip_prefix(family.as_str())
                        .is_some_and(|suffix| ["_bucket", "_sum", "_count"].contains(&suffix)),
                "sample {name} outside its family {family}"
            );
        }
    }

    fn registered(registry: &CounterRegistry, serial: u64, topic: u8) -> Arc<CohortCounters> {
        let spec = bps_proto::Spec {
            topic: [topic; 32],
            binding: bps_proto::Binding::Mnemonic,
            admin: None,
            all: false,
            history: false,
            closed: false,
        };
        let cohort = Arc::new(CohortCounters::new(&spec.key(), &spec));
        registry.register(serial, Arc::clone(&cohort));
        cohort
    }

    #[test]
    fn protocol_figures_sum_registries_and_bound_the_cohorts_shown() {
        let first = CounterRegistry::default();
        let second = CounterRegistry::default();
        let one = registered(&first, 1, 1);
        first.add(&one, ProtocolCounter::Retransmit, 2);
        let two = registered(&second, 1, 2);
        second.add(&two, ProtocolCounter::Retransmit, 4);
        // Equal subscriber counts: the lower id is shown.
        let (shown, hidden_retransmits) = if one.label().id < two.label().id {
            (one, 4)
        } else {
            (two, 2)
        };
        let shown_retransmits = 6 - hidden_retransmits;
        second.add_total(ProtocolCounter::Retransmit, 3);
        second.add_total(ProtocolCounter::JoinsOk, 1);
        let (totals, cohorts) = protocol_figures([&first, &second], 1);
        let value = |name: &str| {
            totals
                .iter()
                .find(|metric| metric.name == name)
                .map(|metric| metric.value)
        };
        assert_eq!(value("retransmit"), Some(9));
        assert_eq!(value("joins_ok"), Some(1));
        assert_eq!(value("cohorts_live"), Some(2));
        // No ring holds anything, and the broker-wide ring gauges are there all the same.
        assert_eq!(value("history_frames"), Some(0));
        assert_eq!(value("history_bytes"), Some(0));
        assert_eq!(value("history_frames_served"), Some(0));
        assert_eq!(cohorts.shown.len(), 1);
        assert_eq!(cohorts.shown[0].label, *shown.label());
        assert!(
            cohorts.shown[0]
                .counters
                .contains(&("retransmit", shown_retransmits))
        );
        assert_eq!(cohorts.other.cohorts, 1);
        assert!(
            cohorts
                .other
                .counters
                .contains(&("retransmit", hidden_retransmits))
        );
        let text = render_prometheus(&[], &totals, &cohorts, "epoll");
        assert!(text.contains("bps_retransmit_total 9\n"));
        assert!(text.contains("# TYPE bps_history_frames gauge\nbps_history_frames 0\n"));
        assert!(text.contains("# TYPE bps_history_frames_served_total counter\n"));
        assert!(text.contains("# HELP bps_joins_ok_total Joins answered OK.\n"));
        assert!(text.contains(&format!(
            "bps_cohort_retransmit_total{{cohort=\"{}\",binding=\"mnemonic\",admin=\"none\"}} {shown_retransmits}\n",
            shown.label().id
        )));
        assert!(text.contains(&format!(
            "bps_cohort_other_retransmit {hidden_retransmits}\n"
        )));
    }

    #[test]
    fn label_values_and_names_are_escaped() {
        let mut out = String::new();
        line(&mut out, "m", &[("l", "a\"b\\c\nd")], "1");
        assert_eq!(out, "m{l=\"a\\\"b\\\\c\\nd\"} 1\n");
        assert_eq!(sanitize_name("a-b.c:d_e"), "a_b_c:d_e");
    }
}
