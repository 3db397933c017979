//! The libp2p carrier: BPS over bee's libp2p stack (issue 20), so Swarm's bee nodes use the
//! broker as their broker. A carrier like TCP and WebSocket: bytes (a stream's channels of
//! the libp2p host, `reader` and `writer`), a decoder (length-delimited frames, as TCP) and
//! no encoder (frames go as they are); plus what bee needs before a BPS stream: its
//! handshake and the headers exchange in front of every other stream.
//!
//! Owns, by module: `identity` (the Swarm key file), `peers` (who is connected and
//! handshaken, pending handshakes per IP), `exchange` (bee's control messages on a stream,
//! the headers exchange, the faults of a stream), `handshake` (bee's handshake in both
//! roles around bps-bee's state machine), `side` (pricing and hive streams), `reader` (a
//! stream's inbound channel as a monoio reader), `writer` (the writer task: the port's
//! frames onto the outbound channel as shared `Bytes`), `stream` (one pubsub stream as a BPS
//! stream), `dispatch` (the host's events, by kind and protocol), and here the start: the
//! keys, the host and the hand-off to a core.
//!
//! How streams cross from the host's thread to a core: the host's one bounded event channel
//! (`bps_p2p::EVENTS_QUEUED` events; at the bound the host waits and reads nothing, so
//! nothing is dropped and the peers' yamux windows stop them) is taken by core 0, which owns
//! every p2p stream. One core, because the channel has one consumer and the cores have no
//! cross-thread hand-off of connections (their lanes carry frames and deliveries, not
//! streams); a broker serves a handful of bee nodes, so one core's reading is ample, and
//! every frame still goes to its cohort's home core through the router like any stream's.
//! Never does: touch the shard or the machine, or run on the host's thread (every byte
//! crosses on the stream's bounded channels).

mod dispatch;
mod exchange;
mod handshake;
mod identity;
mod peers;
mod reader;
mod side;
mod stream;
mod writer;

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bps_bee::{Identity, LocalNode, NONCE_BYTES, with_peer_id};
use bps_p2p::{HostEvent, Multiaddr, P2pHost, PeerId};
use tokio::sync::mpsc;

use crate::config::{BrokerConfig, P2pMode, P2pSection};
use crate::io::link::CoreLink;
use crate::metrics::P2pIdentity;
use dispatch::Dispatcher;
use peers::Peers;

/// What core 0 takes over: the host's events and what it answers them with.
pub struct P2pService {
    events: mpsc::Receiver<HostEvent>,
    handle: bps_p2p::HostHandle,
    node: Arc<LocalNode>,
    network_id: u64,
    deadline: std::time::Duration,
    pending_max: u32,
}

impl std::fmt::Debug for P2pService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("P2pService")
            .field("network_id", &self.network_id)
            .finish_non_exhaustive()
    }
}

/// The broker's two libp2p-side identities, read from their key files.
struct Keys {
    keypair: bps_p2p::Keypair,
    identity: Identity,
    /// The key files this load created (they were absent), to report.
    created: Vec<String>,
}

/// Reads the libp2p key and the Swarm key of `section`, creating each (mode 0600) when its
/// file is absent.
fn load_keys(section: &P2pSection) -> Result<Keys, String> {
    let host_config = section.host_config();
    let mut created = Vec::new();
    let (keypair, new_libp2p) =
        bps_p2p::load_or_create(&host_config.key_path).map_err(|error| error.to_string())?;
    if new_libp2p {
        created.push(host_config.key_path.display().to_string());
    }
    let (swarm_key, new_swarm) =
        identity::load_or_create_swarm_key(Path::new(&section.swarm_key_file))?;
    if new_swarm {
        created.push(section.swarm_key_file.clone());
    }
    let identity = Identity::new(&swarm_key, [0; NONCE_BYTES], section.network_id)
        .map_err(|error| format!("swarm key: {error}"))?;
    Ok(Keys {
        keypair,
        identity,
        created,
    })
}

/// The addresses a bee node is given for `addrs`: each with `/p2p/<peer id>`.
pub fn dial_addresses(addrs: &[Multiaddr], peer_id: PeerId) -> Vec<String> {
    addrs
        .iter()
        .map(|addr| with_peer_id(addr, peer_id).to_string())
        .collect()
}

/// `bps-broker p2p-identity`: the peer id, the overlay and the addresses to give bee nodes,
/// from the configured key files (created when absent, as at start), one `name value` line
/// each; the files it created on stderr.
pub fn describe_identity(config: &BrokerConfig) -> Result<String, String> {
    let section = &config.p2p;
    let keys = load_keys(section)?;
    for path in &keys.created {
        eprintln!("created {path} (mode 0600)");
    }
    let peer_id = keys.keypair.public().to_peer_id();
    let mut text = format!(
        "peer_id {peer_id}\noverlay {}\nnetwork_id {}\nmode {}\nenabled {}\n",
        hex::encode(keys.identity.overlay()),
        section.network_id,
        section.mode.name(),
        section.enabled,
    );
    for address in dial_addresses(&section.host_config().listen, peer_id) {
        text.push_str(&format!("address {address}\n"));
    }
    Ok(text)
}

/// Starts the libp2p host when `p2p.enabled`: the keys (created when absent), the host on its
/// thread, and the service core 0 runs. Logs the peer id, the overlay and the addresses.
pub fn start(config: &BrokerConfig) -> Result<Option<(P2pHost, P2pService, P2pIdentity)>, String> {
    let section = &config.p2p;
    if !section.enabled {
        return Ok(None);
    }
    let Keys {
        keypair,
        identity,
        created,
    } = load_keys(section)?;
    for path in created {
        tracing::info!(%path, "p2p: created a key file");
    }
    let host_config = section.host_config();
    let overlay = hex::encode(identity.overlay());
    let peer_id = keypair.public().to_peer_id();
    let node = LocalNode::new(
        identity,
        peer_id,
        section.mode == P2pMode::Full,
        section.welcome_message.clone(),
        &host_config.listen,
    )
    .map_err(|error| format!("p2p.welcome_message: {error}"))?;
    let (host, events) =
        P2pHost::start(&host_config, keypair).map_err(|error| error.to_string())?;
    tracing::info!(
        %peer_id,
        overlay = %overlay,
        network_id = section.network_id,
        listen = %dial_addresses(&host_config.listen, peer_id).join(","),
        mode = section.mode.name(),
        "p2p host started"
    );
    let service = P2pService {
        events,
        handle: host.handle(),
        node: Arc::new(node),
        network_id: section.network_id,
        deadline: section.handshake_deadline(),
        pending_max: section.pending_handshakes_per_ip_max,
    };
    let labels = P2pIdentity {
        mode: section.mode.name(),
        network_id: section.network_id,
        peer_id: peer_id.to_string(),
        overlay,
    };
    Ok(Some((host, service, labels)))
}

/// Takes the host's events on this core until the host stops.
pub async fn serve(link: Rc<CoreLink>, service: P2pService) {
    let P2pService {
        mut events,
        handle,
        node,
        network_id,
        deadline,
        pending_max,
    } = service;
    let dispatcher = Rc::new(Dispatcher {
        link,
        handle,
        node,
        peers: RefCell::new(Peers::new(pending_max)),
        network_id,
        deadline,
        handshakes_ended: tokio::sync::Notify::new(),
    });
    while let Some(event) = events.recv().await {
        dispatcher.on_event(event);
    }
}
