//! The instruments of one core: `CoreMetrics` (shared by `Arc` with the scraper, written only
//! by the core that owns it), its WebSocket carrier's `WsMetrics` and per-transport counters.
//!
//! Owns: the fields a core records into, the histograms' bucket counts, the WebSocket label
//! sets (statuses, close codes, endpoints) in export order, and the recording helpers
//! (`accepted`, `closed`, `refused`, `frame_in`, ...).
//! Never does: name or render a family; the exported names and help texts are
//! `render::core_families`'.

use super::p2p::P2pMetrics;
use std::sync::Arc;

use crate::labels::{Refusal, Transport};
use crate::metrics::{Counter, Gauge, Histogram, StageLatencies};

/// Buckets of the latency histograms: upper bounds 1 µs .. 2^25 µs (about 34 s), which covers
/// everything from one keccak to a stalled verification pool.
pub const LATENCY_BUCKETS: usize = 26;

/// Buckets of the frames-per-write histogram: upper bounds 1 .. 1024 frames, the kernel's
/// `IOV_MAX`, so no vectored write can land past the last finite bucket.
pub const FRAMES_PER_WRITE_BUCKETS: usize = 11;

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
    /// Verification jobs this core verified itself, in pool mode, because the pool was idle.
    pub verify_idle_inline: Counter,
    /// Microseconds from submitting a verification job to receiving its result.
    pub verify_latency_us: Histogram,
    /// Microseconds from reading a frame to writing it to a receiver's socket, sampled.
    pub accept_to_write_us: Histogram,
    /// Microseconds spent in each stage of a publication's way through the broker.
    pub stage_latency_us: StageLatencies,
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
    /// Edge mode: upstream streams joined OK at a root (docs/SCALING.md, "Edges").
    pub relay_upstream_joins: Counter,
    /// Edge mode: upstream attempts that failed (connection, timeout, FULL or REJECTED).
    pub relay_upstream_failures: Counter,
    /// Edge mode: upstream streams joined again for a cohort that had one.
    pub relay_upstream_reconnects: Counter,
    /// Edge mode: cohorts whose upstream stream is attached.
    pub relay_upstreams_attached: Gauge,
    /// Edge mode: cohorts whose upstream is connecting or backing off.
    pub relay_upstreams_waiting: Gauge,
    /// Edge mode: streams spliced to their root (joined OK there).
    pub relay_splices: Counter,
    /// Edge mode: spliced Joins the root refused, or no broker of the list answered.
    pub relay_splice_failures: Counter,
    /// Edge mode: spliced streams open.
    pub relay_splices_open: Gauge,
    /// The WebSocket carrier's labelled counters.
    pub ws: WsMetrics,
    /// The libp2p carrier's counters (core 0's only: it owns p2p streams).
    pub p2p: P2pMetrics,
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
            verify_idle_inline: Counter::default(),
            verify_latency_us: Histogram::new(LATENCY_BUCKETS),
            accept_to_write_us: Histogram::new(LATENCY_BUCKETS),
            stage_latency_us: StageLatencies::default(),
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
            relay_upstream_joins: Counter::default(),
            relay_upstream_failures: Counter::default(),
            relay_upstream_reconnects: Counter::default(),
            relay_upstreams_attached: Gauge::default(),
            relay_upstreams_waiting: Gauge::default(),
            relay_splices: Counter::default(),
            relay_splice_failures: Counter::default(),
            relay_splices_open: Gauge::default(),
            ws: WsMetrics::default(),
            p2p: P2pMetrics::default(),
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
}
