//! bps-p2p: the broker's libp2p host, and nothing of the BPS protocol.
//!
//! A host runs on its own thread with a tokio current-thread runtime (never a core's
//! runtime): TCP with TLS and Noise, yamux, identify and ping, and raw streams on a
//! configured set of protocol ids, each handed to the caller as a `StreamPipe` (bounded
//! channels of `Bytes`). The broker's libp2p carrier decodes and encodes what crosses.
//!
//! Owns, by module: `config` (what the host is started with), `identity` (the key file),
//! `swarm` (the transports and behaviours), `pending` (inbound upgrades per IP), `host` (the
//! thread, its loop and the caller's handle), `pipe` (a stream as channels), `dial` (the
//! redial backoff of the configured peers), `event` (what the host reports), `stats` (its
//! counters), `streams` (the behaviour that hands out raw protocol streams).

mod config;
mod dial;
mod event;
mod host;
mod identity;
mod pending;
mod pipe;
mod stats;
mod streams;
mod swarm;

pub use config::{
    ConfigError, DEFAULT_IDLE_CONNECTION_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_PENDING_PER_IP, DEFAULT_MAX_STREAMS_PER_CONNECTION, DEFAULT_PORT, P2pConfig,
    PUBSUB_PROTOCOL, SWARM_PROTOCOLS, dial_target,
};
pub use dial::{REDIAL_BACKOFF_MAX, REDIAL_BACKOFF_MIN};
pub use event::{EVENTS_QUEUED, HostEvent};
pub use host::{COMMANDS_QUEUED, HostGone, HostHandle, OpenError, P2pHost, StartError};
pub use identity::{KEY_FILE_MODE, KeyError, load, load_or_create};
pub use libp2p::{Multiaddr, PeerId, StreamProtocol, identity::Keypair, multiaddr::Protocol};
pub use pending::PendingPerIpExceeded;
pub use pipe::{
    Direction, INBOUND_CHUNKS_PER_STREAM, OUTBOUND_MESSAGES_PER_STREAM, READ_CHUNK_BYTES,
    StreamPipe, StreamReset,
};
pub use stats::HostStats;
