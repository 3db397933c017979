//! `P2pConfig`: what the libp2p host is told at start (listen addresses, the key file, the
//! peers to keep dialing, the bounds), its defaults, and the check that turns the peers to
//! dial into `(PeerId, Multiaddr)` pairs before the host starts.
//! Never does: read a file or parse TOML (the broker's config maps its `[p2p]` table here).

use std::{fmt, num::NonZeroU32, path::PathBuf, time::Duration};

use libp2p::{Multiaddr, PeerId, multiaddr::Protocol};

/// Bee's default p2p port (its `--p2p-addr` default `:1634`): a bee operator expects it.
pub const DEFAULT_PORT: u16 = 1634;

/// Connections the host keeps at once, both directions: each costs a yamux session and the
/// Noise or TLS state; a broker serves a handful of bee nodes, not a swarm.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 256;

/// Streams open at once on one connection (every protocol): bee opens a few per peer (its
/// handshake, pricing, hive, one BPS stream per topic it serves); more is a flood, reset.
pub const DEFAULT_MAX_STREAMS_PER_CONNECTION: u32 = 64;

/// Connections from one IP still in the libp2p upgrade (TCP accepted, Noise or TLS and yamux
/// not done): one address must not hold every upgrade slot.
pub const DEFAULT_MAX_PENDING_PER_IP: u32 = 8;

/// How long a connection with no stream open stays up. Bee keeps a connection to each peer
/// it knows for as long as both sides run, with no stream open between its protocol
/// exchanges, and the issue asks that a connection idle for 2 minutes stays usable: so an
/// idle connection is never closed for being idle; a dead one is closed by ping instead
/// (`host` closes a connection whose ping times out).
pub const DEFAULT_IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// What the host is started with.
#[derive(Debug, Clone)]
pub struct P2pConfig {
    /// Where to listen, e.g. `/ip4/0.0.0.0/tcp/1634`; empty listens nowhere (dial only).
    pub listen: Vec<Multiaddr>,
    /// The libp2p identity key file (created with mode 0600 when absent: `identity`).
    pub key_path: PathBuf,
    /// Peers to dial and redial with backoff while the host runs; each ends in
    /// `/p2p/<peer id>`.
    pub dial: Vec<Multiaddr>,
    /// Protocol ids the host accepts inbound streams for, e.g. `/swarm/pubsub/1.0.0/pubsub`.
    pub protocols: Vec<String>,
    /// The bounds; see their defaults' constants for the why of each.
    pub max_connections: NonZeroU32,
    pub max_streams_per_connection: NonZeroU32,
    pub max_pending_per_ip: NonZeroU32,
    pub idle_connection_timeout: Duration,
    /// The identify agent version, e.g. `bps-broker/0.1.0`.
    pub agent_version: String,
}

/// Bee's BPS stream protocol (SWIP-60): headers, then BPS frames as TCP carries them.
pub const PUBSUB_PROTOCOL: &str = "/swarm/pubsub/1.0.0/pubsub";

/// The protocols bee opens to a peer it keeps, which the broker answers (issue 20).
pub const SWARM_PROTOCOLS: [&str; 4] = [
    "/swarm/handshake/15.0.0/handshake",
    PUBSUB_PROTOCOL,
    "/swarm/pricing/1.0.0/pricing",
    "/swarm/hive/2.0.0/peers",
];

impl P2pConfig {
    /// Defaults: listen on every IPv4 address at bee's port, dial nobody, accept bee's
    /// protocols.
    pub fn new(key_path: PathBuf) -> Self {
        let listen = Multiaddr::empty()
            .with(Protocol::Ip4([0, 0, 0, 0].into()))
            .with(Protocol::Tcp(DEFAULT_PORT));
        Self {
            listen: vec![listen],
            key_path,
            dial: Vec::new(),
            protocols: SWARM_PROTOCOLS.iter().map(|p| p.to_string()).collect(),
            max_connections: nonzero(DEFAULT_MAX_CONNECTIONS),
            max_streams_per_connection: nonzero(DEFAULT_MAX_STREAMS_PER_CONNECTION),
            max_pending_per_ip: nonzero(DEFAULT_MAX_PENDING_PER_IP),
            idle_connection_timeout: DEFAULT_IDLE_CONNECTION_TIMEOUT,
            agent_version: concat!("bps-broker/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }

    /// The peers to dial, each split into its peer id and the address without it.
    pub fn dial_targets(&self) -> Result<Vec<(PeerId, Multiaddr)>, ConfigError> {
        self.dial.iter().map(dial_target).collect()
    }
}

/// `addr` without its trailing `/p2p/<peer id>`, and that peer id.
pub fn dial_target(addr: &Multiaddr) -> Result<(PeerId, Multiaddr), ConfigError> {
    let mut transport = addr.clone();
    match transport.pop() {
        Some(Protocol::P2p(peer)) => Ok((peer, transport)),
        _ => Err(ConfigError::DialWithoutPeerId(addr.clone())),
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

/// A configuration the host cannot start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A peer to dial without `/p2p/<peer id>`: the host could not tell it is the right
    /// peer (Noise and TLS authenticate the peer id they are given).
    DialWithoutPeerId(Multiaddr),
    /// A protocol id that is not a libp2p protocol id (must start with `/`).
    BadProtocol(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DialWithoutPeerId(addr) => {
                write!(f, "p2p dial address {addr} does not end in /p2p/<peer id>")
            }
            Self::BadProtocol(p) => write!(f, "p2p protocol id {p:?} does not start with '/'"),
        }
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dial_targets_need_a_peer_id() {
        let peer = PeerId::random();
        let mut config = P2pConfig::new(PathBuf::from("k"));
        let with: Multiaddr = format!("/ip4/127.0.0.1/tcp/1634/p2p/{peer}")
            .parse()
            .unwrap();
        config.dial = vec![with];
        let addr: Multiaddr = "/ip4/127.0.0.1/tcp/1634".parse().unwrap();
        assert_eq!(config.dial_targets(), Ok(vec![(peer, addr.clone())]));
        config.dial = vec![addr.clone()];
        assert_eq!(
            config.dial_targets(),
            Err(ConfigError::DialWithoutPeerId(addr))
        );
    }

    #[test]
    fn idle_connections_outlive_two_minutes() {
        // The check: a connection idle for 2 minutes is still usable.
        let config = P2pConfig::new(PathBuf::from("k"));
        assert!(config.idle_connection_timeout >= Duration::from_secs(120));
        assert_eq!(config.listen[0].to_string(), "/ip4/0.0.0.0/tcp/1634");
    }
}
