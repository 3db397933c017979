//! The libp2p swarm the host runs: TCP, TLS and Noise (TLS first, as bee's go-libp2p dialer
//! offers them; a listener takes either), yamux, and the behaviours: the connection bounds,
//! the pending-per-IP bound, identify, ping and the raw streams.
//! Never does: run it (`host` does) or look at a stream's bytes.

use std::convert::Infallible;

use libp2p::{
    Swarm, SwarmBuilder, connection_limits, identify, identity::Keypair, noise, ping,
    swarm::NetworkBehaviour, tcp, tls, yamux,
};

use crate::{config::P2pConfig, pending::PendingPerIp, streams::Streams};

/// Connections per peer: one, so the per-connection stream bound is the per-peer bound
/// `pipe::StreamCounts` keeps. A second connection (both sides dialing at once) is denied.
pub const CONNECTIONS_PER_PEER: u32 = 1;

/// Inbound connections in the upgrade from all addresses together, in connections: the
/// Noise or TLS handshakes the host runs at once.
pub const PENDING_INBOUND_MAX: u32 = 128;

/// Yamux's own stream bound per connection. Yamux answers a stream over it by ending the
/// whole connection, so it sits well above `max_streams_per_connection`, which resets the
/// one stream instead.
pub const YAMUX_STREAMS_MAX: usize = 512;

/// The identify protocol version go-libp2p (bee) announces.
pub const IDENTIFY_PROTOCOL_VERSION: &str = "ipfs/0.1.0";

#[derive(NetworkBehaviour)]
#[behaviour(prelude = "libp2p::swarm::derive_prelude")]
pub struct Behaviour {
    pub limits: connection_limits::Behaviour,
    pub pending: PendingPerIp,
    pub identify: identify::Behaviour,
    pub ping: ping::Behaviour,
    pub streams: Streams,
}

/// Why the swarm could not be built.
pub type BuildError = Box<dyn std::error::Error + Send + Sync>;

/// A swarm for `key` with `config`'s bounds and `streams` handing out the raw streams; to be
/// polled on a tokio runtime.
pub fn build(
    config: &P2pConfig,
    key: Keypair,
    streams: Streams,
) -> Result<Swarm<Behaviour>, BuildError> {
    let idle = config.idle_connection_timeout;
    let swarm = SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            (tls::Config::new, noise::Config::new),
            yamux_config,
        )?
        .with_behaviour(|key| behaviour(config, key, streams))
        .map_err(|e: Infallible| -> BuildError { match e {} })?
        .with_swarm_config(|swarm| swarm.with_idle_connection_timeout(idle))
        .build();
    Ok(swarm)
}

fn yamux_config() -> yamux::Config {
    let mut yamux = yamux::Config::default();
    yamux.set_max_num_streams(YAMUX_STREAMS_MAX);
    yamux
}

fn behaviour(config: &P2pConfig, key: &Keypair, streams: Streams) -> Behaviour {
    let limits = connection_limits::ConnectionLimits::default()
        .with_max_established(Some(config.max_connections.get()))
        .with_max_established_per_peer(Some(CONNECTIONS_PER_PEER))
        .with_max_pending_incoming(Some(PENDING_INBOUND_MAX));
    let identify = identify::Config::new(IDENTIFY_PROTOCOL_VERSION.to_string(), key.public())
        .with_agent_version(config.agent_version.clone());
    Behaviour {
        limits: connection_limits::Behaviour::new(limits),
        pending: PendingPerIp::new(config.max_pending_per_ip.get()),
        identify: identify::Behaviour::new(identify),
        ping: ping::Behaviour::new(ping::Config::new()),
        streams,
    }
}
