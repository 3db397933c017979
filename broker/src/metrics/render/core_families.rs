//! The families of a core's instruments: for each, its exported name (without `bps_`, and
//! without `_total` for counters) and help text, in export order.
//!
//! Owns: the mapping from a `CoreMetrics` field to its family; a new instrument is exported by
//! adding its row here.
//! Never does: write text; `render::core` renders these rows merged and per core.

use crate::metrics::{CoreMetrics, Counter, Gauge, Histogram, PerTransport};

/// One row: the exported name, the help text, and the instrument read off a core.
type Family<I> = (&'static str, &'static str, fn(&CoreMetrics) -> &I);

/// The counters with their exported names (without `bps_` and `_total`) and help texts.
pub(super) const CORE_COUNTERS: [Family<Counter>; 34] = [
    ("connections_accepted", "Connections accepted.", |core| {
        &core.connections_accepted
    }),
    (
        "connections_refused_blocklist",
        "Connections refused at accept because the peer is blocklisted.",
        |core| &core.connections_refused_blocklist,
    ),
    (
        "connections_refused_limit",
        "Connections refused at accept because limits.connections_max was reached.",
        |core| &core.connections_refused_limit,
    ),
    (
        "connections_refused_prejoin",
        "Connections refused at accept because the peer held limits.prejoin_connections_per_peer_max connections without a Join.",
        |core| &core.connections_refused_prejoin,
    ),
    (
        "connections_refused_draining",
        "Connections refused at accept because the broker was draining.",
        |core| &core.connections_refused_draining,
    ),
    (
        "join_timeouts",
        "Connections closed for sending no Join within server.join_deadline_ms.",
        |core| &core.join_timeouts,
    ),
    (
        "join_timeout_blocklistings",
        "Peers blocklisted for missing limits.join_timeouts_per_peer_max Join deadlines (timeouts.blocklist_join_timeout_ms).",
        |core| &core.join_timeout_blocklistings,
    ),
    (
        "flush_timeouts",
        "Flushing closes reset after timeouts.flush_deadline_ms (a peer that does not read).",
        |core| &core.flush_timeouts,
    ),
    ("connections_closed", "Connections closed.", |core| {
        &core.connections_closed
    }),
    ("frames_in", "Frames read from peers.", |core| {
        &core.frames_in
    }),
    ("frames_out", "Frames written to peers.", |core| {
        &core.frames_out
    }),
    ("bytes_in", "Bytes read from peers.", |core| &core.bytes_in),
    ("bytes_out", "Bytes written to peers.", |core| {
        &core.bytes_out
    }),
    (
        "frame_errors",
        "Streams closed for a frame that could not be split off (too large, bad length).",
        |core| &core.frame_errors,
    ),
    ("writes", "Vectored write operations.", |core| &core.writes),
    (
        "inbox_full",
        "Cross-core messages that found the target lane full and waited in the sender's overflow.",
        |core| &core.inbox_full,
    ),
    ("verify_jobs", "Verification results applied.", |core| {
        &core.verify_jobs
    }),
    (
        "verify_cancelled",
        "Queued verification jobs taken back unverified because their stream closed.",
        |core| &core.verify_cancelled,
    ),
    (
        "verify_idle_inline",
        "Verification jobs a core verified itself because the pool was idle (verify.idle_inline_jobs_max).",
        |core| &core.verify_idle_inline,
    ),
    (
        "queue_resets",
        "Streams reset because their outbound queue was full while the kernel refused bytes, or at its hard bound (R26).",
        |core| &core.queue_resets,
    ),
    (
        "queue_slack",
        "Frames queued beyond the R26 bound while the writer still handed every byte to the kernel.",
        |core| &core.queue_slack,
    ),
    (
        "write_progress_timeouts",
        "Streams reset because their socket took none of their queued bytes for timeouts.write_progress_deadline_ms.",
        |core| &core.write_progress_timeouts,
    ),
    (
        "memory_pressure_resets",
        "Streams reset, largest holders first, because frame memory was full while their sockets took none of their queued bytes.",
        |core| &core.memory_pressure_resets,
    ),
    (
        "read_paused",
        "Times a reader waited for its stream's read window.",
        |core| &core.read_paused,
    ),
    (
        "read_paused_core",
        "Times a reader waited because its core had limits.frames_in_flight_per_core_max frames in flight.",
        |core| &core.read_paused_core,
    ),
    (
        "read_paused_overflow",
        "Times a reader waited because its core's overflow towards another core was not empty.",
        |core| &core.read_paused_overflow,
    ),
    (
        "read_paused_memory",
        "Times a reader waited for frame memory (limits.frame_memory_bytes_max).",
        |core| &core.read_paused_memory,
    ),
    (
        "log_lines_suppressed",
        "Peer-triggered log lines beyond log.peer_lines_per_s_max, not written.",
        |core| &core.log_lines_suppressed,
    ),
    (
        "ws_spectator_sends",
        "Data messages from WebSocket bridge sessions without addr (W11); each closed its session and blocklisted nobody.",
        |core| &core.ws_spectator_sends,
    ),
    (
        "relay_upstream_joins",
        "Edge mode: upstream streams joined OK at a cohort's root (relay.upstreams).",
        |core| &core.relay_upstream_joins,
    ),
    (
        "relay_upstream_failures",
        "Edge mode: upstream attempts that failed: no connection or Ack within relay.connect_timeout_ms, or FULL or REJECTED (a loop of edges is REJECTED).",
        |core| &core.relay_upstream_failures,
    ),
    (
        "relay_upstream_reconnects",
        "Edge mode: upstream streams joined again for a cohort that had one (after a lost stream or a failed attempt).",
        |core| &core.relay_upstream_reconnects,
    ),
    (
        "relay_splices",
        "Edge mode: streams that may publish, spliced to their cohort's root (joined OK there).",
        |core| &core.relay_splices,
    ),
    (
        "relay_splice_failures",
        "Edge mode: spliced Joins the root answered FULL or REJECTED, or that no broker of relay.upstreams answered in time.",
        |core| &core.relay_splice_failures,
    ),
];

/// The gauges with their exported names and help texts.
pub(super) const CORE_GAUGES: [Family<Gauge>; 10] = [
    ("connections_open", "Connections currently open.", |core| {
        &core.connections_open
    }),
    (
        "inbox_depth",
        "Messages waiting in the cross-core home and owner lanes.",
        |core| &core.inbox_depth,
    ),
    (
        "overflow_messages",
        "Cross-core messages waiting in the senders' overflows.",
        |core| &core.overflow_messages,
    ),
    (
        "frames_in_flight",
        "Frames read and not yet consumed by their home core.",
        |core| &core.frames_in_flight,
    ),
    (
        "held_bytes",
        "Bytes streams hold queued towards their peers, each stream counting its own.",
        |core| &core.held_bytes,
    ),
    (
        "verifications_in_flight",
        "Verification jobs issued and not yet answered.",
        |core| &core.verifications_in_flight,
    ),
    (
        "verify_queue_depth",
        "Verification jobs waiting in the pool's queue.",
        |core| &core.verify_queue_depth,
    ),
    (
        "relay_upstreams_attached",
        "Edge mode: cohorts whose upstream stream to their root is attached.",
        |core| &core.relay_upstreams_attached,
    ),
    (
        "relay_upstreams_waiting",
        "Edge mode: cohorts whose upstream is connecting or backing off (relay.reconnect_backoff_*).",
        |core| &core.relay_upstreams_waiting,
    ),
    (
        "relay_splices_open",
        "Edge mode: spliced streams open.",
        |core| &core.relay_splices_open,
    ),
];

/// The histograms with their exported names and help texts.
pub(super) const CORE_HISTOGRAMS: [Family<Histogram>; 3] = [
    (
        "frames_per_write",
        "Frames carried by one vectored write.",
        |core| &core.frames_per_write,
    ),
    (
        "verify_latency_us",
        "Microseconds from submitting a verification job to receiving its result (every job).",
        |core| &core.verify_latency_us,
    ),
    (
        "accept_to_write_us",
        "Microseconds from reading a frame to writing it to a receiving stream's socket. Sampled: at most one frame in flight per receiving stream is timed, so a burst counts once per stream.",
        |core| &core.accept_to_write_us,
    ),
];

/// The per-transport counters with their exported names and help texts.
pub(super) const CORE_PER_TRANSPORT: [Family<PerTransport>; 4] = [
    (
        "transport_connections_accepted",
        "Connections accepted, by transport.",
        |core| &core.transport_connections_accepted,
    ),
    (
        "transport_connections_closed",
        "Connections closed, by transport.",
        |core| &core.transport_connections_closed,
    ),
    (
        "transport_frames_in",
        "Frames read, by transport.",
        |core| &core.transport_frames_in,
    ),
    (
        "transport_frames_out",
        "Frames written, by transport.",
        |core| &core.transport_frames_out,
    ),
];
