//! The libp2p carrier's counters of one core (only the core that owns p2p streams writes
//! them): connections by direction, handshakes by outcome and reason, streams by protocol,
//! and streams refused or failed by reason. Every label value comes from a fixed list, with
//! `other` last, so the series are bounded whatever a peer sends.
//! Never does: judge a stream (the carrier names the reason).

use bps_p2p::{Direction, SWARM_PROTOCOLS};

use super::instruments::Counter;

/// Connection directions, in export order.
pub const P2P_DIRECTIONS: [&str; 2] = ["inbound", "outbound"];

/// Why a handshake or a stream failed, in export order (`other` is counted after them):
/// the carrier's faults and bps-bee's handshake reasons.
pub const P2P_REASONS: [&str; 20] = [
    "deadline",
    "ended",
    "malformed",
    "framing",
    "protobuf",
    "missing_field",
    "observed_underlay",
    "observed_peer_id",
    "network_id",
    "timestamp_in_future",
    "signature",
    "underlay",
    "address",
    "finished",
    "unknown_peer",
    "running",
    "pending_per_ip",
    "no_handshake",
    "admission",
    "unhandshaken",
];

/// The p2p counters of one core.
#[derive(Debug, Default)]
pub struct P2pMetrics {
    /// Connections established, per direction.
    pub connections: [Counter; P2P_DIRECTIONS.len()],
    /// Handshakes completed.
    pub handshakes_ok: Counter,
    /// Handshakes failed, per reason (the last is `other`).
    pub handshakes_failed: [Counter; P2P_REASONS.len() + 1],
    /// Inbound streams, per protocol (`bps_p2p::SWARM_PROTOCOLS`, the last is `other`).
    pub streams: [Counter; SWARM_PROTOCOLS.len() + 1],
    /// Streams reset before or instead of their exchange, per reason (the last is `other`).
    pub streams_refused: [Counter; P2P_REASONS.len() + 1],
}

fn reason_index(reason: &str) -> usize {
    P2P_REASONS
        .iter()
        .position(|known| *known == reason)
        .unwrap_or(P2P_REASONS.len())
}

impl P2pMetrics {
    /// A connection came up.
    pub fn connection(&self, direction: Direction) {
        let index = match direction {
            Direction::Inbound => 0,
            Direction::Outbound => 1,
        };
        self.connections[index].inc();
    }

    /// A handshake ended: `None` when it completed, else why it failed.
    pub fn handshake(&self, failed: Option<&str>) {
        match failed {
            None => self.handshakes_ok.inc(),
            Some(reason) => self.handshakes_failed[reason_index(reason)].inc(),
        }
    }

    /// A peer opened a stream of `protocol`.
    pub fn stream(&self, protocol: &str) {
        let index = SWARM_PROTOCOLS
            .iter()
            .position(|known| *known == protocol)
            .unwrap_or(SWARM_PROTOCOLS.len());
        self.streams[index].inc();
    }

    /// A stream was reset for `reason`.
    pub fn stream_refused(&self, reason: &str) {
        self.streams_refused[reason_index(reason)].inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_labels_count_as_other() {
        let metrics = P2pMetrics::default();
        metrics.handshake(Some("network_id"));
        metrics.handshake(Some("made up"));
        metrics.stream(bps_p2p::PUBSUB_PROTOCOL);
        metrics.stream("/not/ours");
        assert_eq!(metrics.handshakes_failed[8].get(), 1);
        assert_eq!(metrics.handshakes_failed[P2P_REASONS.len()].get(), 1);
        assert_eq!(metrics.streams[1].get(), 1);
        assert_eq!(metrics.streams[SWARM_PROTOCOLS.len()].get(), 1);
    }
}
