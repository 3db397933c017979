//! `HostEvent`: what the host tells its caller, in the order it happened, on one bounded
//! channel (`EVENTS_QUEUED`).
//! Never does: carry a stream's bytes (those go on the stream's own pipe).

use std::time::Duration;

use libp2p::{Multiaddr, PeerId, swarm::ConnectionId};

use crate::pipe::{Direction, StreamPipe};

/// Events the host queued and the caller has not taken, in events. At the bound the host
/// waits for room and polls nothing meanwhile (no connection is read, no stream accepted):
/// an event is never dropped, and a caller that stops taking events stops the host.
pub const EVENTS_QUEUED: usize = 1024;

/// Something that happened on the host.
#[derive(Debug)]
pub enum HostEvent {
    /// A listener is bound to `address` (with the port the kernel chose for port 0).
    Listening { address: Multiaddr },
    /// A connection is up: Noise or TLS authenticated `peer`, yamux runs.
    ConnectionEstablished {
        peer: PeerId,
        connection: ConnectionId,
        remote: Multiaddr,
        direction: Direction,
    },
    /// A connection ended; `cause` is `None` when it was closed in order.
    ConnectionClosed {
        peer: PeerId,
        connection: ConnectionId,
        remote: Multiaddr,
        direction: Direction,
        cause: Option<String>,
    },
    /// A dial failed before a connection was up (refused, wrong peer id, no common security).
    DialFailed { peer: Option<PeerId>, error: String },
    /// An inbound connection failed or was denied before it was up (a bound, a bad upgrade).
    IncomingFailed { remote: Multiaddr, error: String },
    /// The peer opened a stream on one of the configured protocols.
    StreamOpened(StreamPipe),
    /// The peer's identify answer: what it says it runs.
    Identified {
        peer: PeerId,
        agent_version: String,
        protocol_version: String,
        protocols: Vec<String>,
    },
    /// The host answered the peer's identify request.
    IdentifySent { peer: PeerId },
    /// The peer answered the host's ping after `rtt`.
    Pong { peer: PeerId, rtt: Duration },
}
