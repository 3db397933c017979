//! The label values the metrics export and the I/O layer records: which carrier a stream
//! travels on and why a connection was refused at accept. A leaf, so that `metrics` and
//! the I/O layer share them without importing each other.

/// What a stream's bytes travel on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The native transport: one stream per TCP connection (docs/PROTOCOL.md §2).
    Tcp,
    /// A WebSocket session (docs/PROTOCOL.md §9).
    WebSocket,
    /// A libp2p stream of bee's `/swarm/pubsub/1.0.0/pubsub` protocol (issue 20).
    P2p,
}

impl Transport {
    /// Every transport, in export order.
    pub const ALL: [Transport; 3] = [Transport::Tcp, Transport::WebSocket, Transport::P2p];

    /// The exported name.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::WebSocket => "websocket",
            Transport::P2p => "p2p",
        }
    }
}

/// Why a connection was closed at accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The broker is draining.
    Draining,
    /// The peer is blocklisted (R39).
    Blocklisted,
    /// `limits.connections_max` connections are open.
    ConnectionsMax,
    /// The peer holds `limits.prejoin_connections_per_peer_max` connections without a Join.
    PrejoinMax,
}
