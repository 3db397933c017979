//! `HostStats`: the host's counters, written by its thread and read by anyone (the broker's
//! metrics later); relaxed atomics, each a monotonic count.
//! Never does: decide anything from them.

use std::sync::atomic::{AtomicU64, Ordering};

/// What the host counted since it started.
#[derive(Debug, Default)]
pub struct HostStats {
    /// Inbound streams handed to the caller.
    pub streams_inbound: AtomicU64,
    /// Outbound streams opened for the caller.
    pub streams_outbound: AtomicU64,
    /// Streams refused because their connection had `max_streams_per_connection` open: an
    /// inbound one is reset, an outbound one is not opened (`OpenError::TooManyStreams`).
    pub streams_refused: AtomicU64,
    /// Connections closed because their ping timed out (the peer is gone or stuck).
    pub ping_timeouts: AtomicU64,
    /// Negotiated inbound streams dropped (reset) because the queue to the acceptor was full
    /// (`streams::INBOUND_STREAMS_QUEUED`).
    pub inbound_dropped: AtomicU64,
    /// Inbound connections refused at `max_connections` or the pending inbound cap.
    pub connections_refused_limit: AtomicU64,
    /// Inbound connections refused at `max_pending_per_ip` (one IP's upgrades).
    pub connections_refused_pending_per_ip: AtomicU64,
}

impl HostStats {
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The value of one counter now.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
