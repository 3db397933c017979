//! The broker's fixed sizing constants: what the memory budget (`budget.rs`), the I/O layer
//! and the lifecycle size things by. A leaf: it imports no module of the broker, so that the
//! budget can count what the I/O layer holds without importing the I/O layer.
//!
//! Owns: every compiled-in bound that the budget multiplies. Configurable bounds live in
//! `config.rs`; bounds that only one module uses stay beside their use.

/// Frames a queue holds at most, as a multiple of its R26 bound, while its writer has not
/// been refused by the kernel: one turn of fan-out (at most half the bound) plus what a
/// write in flight holds back.
pub const QUEUE_SLACK_FACTOR: usize = 2;

/// The longest prefix a carrier puts before a body: an unmasked WebSocket frame header
/// with a 64-bit length (RFC 6455 section 5.2).
pub const PREFIX_BYTES_MAX: usize = 10;

/// Parts of one gathered message at most: a bridge session's fields, each listed once
/// (W6), adjacent ones merged.
pub const GATHER_PARTS_MAX: usize = bps_ws::bridge::FIELD_KINDS;

/// Control messages a port holds at most: one pong (a newer ping replaces an unanswered
/// one, RFC 6455 section 5.5.3) and one ping of our own.
pub const PORT_CONTROL_MESSAGES_MAX: usize = 2;

/// Read buffer of a stream that is not sending: enough for a Join and a few small frames.
pub const READ_BUFFER_IDLE_BYTES: usize = 512;

/// Bytes of a WebSocket request head read at most: a browser's upgrade request is about 500
/// bytes, cookies of the page's origin may add a few KiB (nginx's default bound is 8 KiB too).
pub const WS_HEAD_BYTES_MAX: usize = 8 * 1024;

/// The longest message a bridge session takes: a whole SOC (W4, W10), longer than any
/// `kind ‖ index ‖ sig ‖ span ‖ payload`.
pub const BRIDGE_MESSAGE_BYTES_MAX: usize = bps_ws::bridge::INBOUND_BYTES_MAX;

/// The largest native WebSocket message: one whole frame, a `frame_bytes_max` body and its
/// varint length, so that every frame TCP takes fits one WebSocket message too (review C13).
pub fn native_message_bytes_max(frame_bytes_max: usize) -> usize {
    frame_bytes_max + prost::encoding::encoded_len_varint(frame_bytes_max as u64)
}

/// All static files together with their answer heads, held in memory for the broker's life
/// (counted in the memory budget).
pub const STATIC_BYTES_MAX: u64 = 16 << 20;

/// Log lines the non-blocking writer buffers; beyond it lines are dropped (and counted)
/// rather than a runtime thread waiting for a slow stderr (a full journald pipe).
pub const LOG_BUFFERED_LINES_MAX: usize = 16_384;

/// W5 POSTs one core holds waiting for their home core at once: each may hold one slot of
/// the verification queue, which is sized for them (`verify_jobs_in_flight_max`); beyond it a
/// POST is answered 503 with `Retry-After`.
pub const SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX: usize = 16;

/// Peers whose W5 rate buckets are kept at once: a bucket that has refilled is forgotten, so
/// the table holds only peers that posted within the last second; beyond this many such
/// peers a new one is refused like a peer over its rate (4096 distinct peers posting within
/// one second is a flood).
pub const POST_RATE_PEERS_MAX: usize = 4096;

/// Refusal answers at accept being written at once on one WebSocket core: each holds a
/// descriptor for up to its write deadline and its linger; beyond this a refused connection
/// is closed at once, like TCP's, so a flood of refused connections holds a few descriptors.
pub const REFUSALS_IN_FLIGHT_PER_CORE_MAX: u64 = 16;
