//! The host: its thread with a tokio current-thread runtime polling the swarm, the loop
//! that turns swarm events into `HostEvent`s and commands into swarm calls, one accept
//! task per configured protocol, and the caller's side (`P2pHost`, `HostHandle`).
//! Never does: run on a core's runtime, or know what a stream carries.

use std::{
    fmt, io,
    sync::Arc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use futures::{FutureExt as _, StreamExt as _};
use libp2p::{
    Multiaddr, PeerId, StreamProtocol, Swarm,
    core::ConnectedPoint,
    identify,
    identity::Keypair,
    ping,
    swarm::{
        ListenError, SwarmEvent,
        dial_opts::{DialOpts, PeerCondition},
    },
};
use tokio::sync::{mpsc, oneshot};

use crate::{
    config::{ConfigError, P2pConfig},
    dial::{REDIAL_TICK, Redial},
    event::{EVENTS_QUEUED, HostEvent},
    pending::PendingPerIpExceeded,
    pipe::{self, Direction, StreamCounts, StreamPipe},
    stats::HostStats,
    streams::{Inbound, OpenFailure, Streams},
    swarm::{self, Behaviour, BehaviourEvent},
};

/// How long start-up waits for the listeners to report their addresses: a TCP listener
/// reports at once, so this only bounds a surprise.
const LISTEN_ADDRESS_DEADLINE: Duration = Duration::from_secs(5);

/// Commands (stream opens, dials) queued for the host's thread, in commands: the callers
/// wait for room at the bound (`HostHandle`'s calls are async), nothing is dropped.
pub const COMMANDS_QUEUED: usize = 256;

/// How long opening an outbound stream may take (a dial if needed, multistream-select):
/// a stream the peer never answers must not hold its slot forever.
pub const OPEN_STREAM_TIMEOUT: Duration = Duration::from_secs(20);

enum Command {
    OpenStream {
        peer: PeerId,
        protocol: StreamProtocol,
        reply: oneshot::Sender<Result<StreamPipe, OpenError>>,
    },
    Dial {
        addr: Multiaddr,
    },
    Disconnect {
        peer: PeerId,
    },
}

/// The running host, owned by the caller; dropping it stops the host and joins its thread.
#[derive(Debug)]
pub struct P2pHost {
    handle: HostHandle,
    peer_id: PeerId,
    /// The addresses the listeners reported by the end of start-up.
    listening: Vec<Multiaddr>,
    stats: Arc<HostStats>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Asks the host for streams and dials; cheap to clone, usable from any thread or runtime.
#[derive(Debug, Clone)]
pub struct HostHandle {
    commands: mpsc::Sender<Command>,
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OpenStream { peer, protocol, .. } => write!(f, "OpenStream({peer}, {protocol})"),
            Self::Dial { addr } => write!(f, "Dial({addr})"),
            Self::Disconnect { peer } => write!(f, "Disconnect({peer})"),
        }
    }
}

impl P2pHost {
    /// Starts the host: the thread, the swarm, its listeners (bound before this returns, so
    /// a busy port is an error here, and their addresses known: `listen_addrs`) and the
    /// dials of `config.dial`. Events arrive on the returned receiver, which the caller must
    /// keep taking (`EVENTS_QUEUED`).
    pub fn start(
        config: &P2pConfig,
        key: Keypair,
    ) -> Result<(Self, mpsc::Receiver<HostEvent>), StartError> {
        let targets = config.dial_targets().map_err(StartError::Config)?;
        let protocols = stream_protocols(&config.protocols).map_err(StartError::Config)?;
        let peer_id = key.public().to_peer_id();
        let (commands_tx, commands) = mpsc::channel(COMMANDS_QUEUED);
        let (events, events_rx) = mpsc::channel(EVENTS_QUEUED);
        let (stop, stopped) = oneshot::channel();
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let stats = Arc::new(HostStats::default());
        let setup = Setup {
            config: config.clone(),
            key,
            protocols,
            targets,
            events,
            stats: Arc::clone(&stats),
        };
        let thread = std::thread::Builder::new()
            .name("bps-p2p".into())
            .spawn(move || run_thread(setup, commands, stopped, ready_tx))
            .map_err(StartError::Thread)?;
        let mut host = Self {
            handle: HostHandle {
                commands: commands_tx,
            },
            peer_id,
            listening: Vec::new(),
            stats,
            stop: Some(stop),
            thread: Some(thread),
        };
        match ready.recv() {
            Ok(Ok(listening)) => {
                host.listening = listening;
                Ok((host, events_rx))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                host.stop_and_join();
                Err(StartError::Thread(io::Error::other(
                    "the p2p thread ended before it started",
                )))
            }
        }
    }

    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// The addresses the listeners reported while starting (a port 0 resolved, 0.0.0.0 as
    /// each interface), each without the peer id; later ones arrive as `Listening` events.
    pub fn listen_addrs(&self) -> &[Multiaddr] {
        &self.listening
    }

    pub fn handle(&self) -> HostHandle {
        self.handle.clone()
    }

    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// The counters, for a reader that outlives this borrow (a metrics scraper).
    pub fn shared_stats(&self) -> Arc<HostStats> {
        Arc::clone(&self.stats)
    }

    /// Stops the host (every connection dropped) and waits for its thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for P2pHost {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

impl HostHandle {
    /// Opens a stream to `peer` (dialing it if the host knows an address of it and is not
    /// connected), counted against the connection's stream bound.
    pub async fn open_stream(
        &self,
        peer: PeerId,
        protocol: StreamProtocol,
    ) -> Result<StreamPipe, OpenError> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::OpenStream {
            peer,
            protocol,
            reply,
        })
        .await
        .map_err(|HostGone| OpenError::HostGone)?;
        answer.await.map_err(|_| OpenError::HostGone)?
    }

    /// Dials `addr` once (a failure comes as `HostEvent::DialFailed`); with `/p2p/<peer id>`
    /// the security handshake checks the peer is that one.
    pub async fn dial(&self, addr: Multiaddr) -> Result<(), HostGone> {
        self.send(Command::Dial { addr }).await
    }

    /// Closes every connection to `peer` (a peer that failed, or never finished, the
    /// protocol the caller runs first); `ConnectionClosed` follows for each. A configured
    /// peer is redialed after its backoff as after any lost connection.
    pub async fn disconnect(&self, peer: PeerId) -> Result<(), HostGone> {
        self.send(Command::Disconnect { peer }).await
    }

    async fn send(&self, command: Command) -> Result<(), HostGone> {
        self.commands.send(command).await.map_err(|_| HostGone)
    }
}

fn stream_protocols(ids: &[String]) -> Result<Vec<StreamProtocol>, ConfigError> {
    ids.iter()
        .map(|id| {
            StreamProtocol::try_from_owned(id.clone())
                .map_err(|_| ConfigError::BadProtocol(id.clone()))
        })
        .collect()
}

/// What the thread starts from.
struct Setup {
    config: P2pConfig,
    key: Keypair,
    protocols: Vec<StreamProtocol>,
    targets: Vec<(PeerId, Multiaddr)>,
    events: mpsc::Sender<HostEvent>,
    stats: Arc<HostStats>,
}

type Ready = std::sync::mpsc::Sender<Result<Vec<Multiaddr>, StartError>>;

fn run_thread(
    setup: Setup,
    commands: mpsc::Receiver<Command>,
    stopped: oneshot::Receiver<()>,
    ready: Ready,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(StartError::Runtime(e)));
            return;
        }
    };
    runtime.block_on(async move {
        let listeners = setup.config.listen.len();
        match Host::new(setup) {
            Ok(mut host) => {
                let listening = host.first_addresses(listeners).await;
                let _ = ready.send(Ok(listening));
                host.run(commands, stopped).await;
            }
            Err(e) => {
                let _ = ready.send(Err(e));
            }
        }
    });
}

/// The host's state on its thread.
struct Host {
    swarm: Swarm<Behaviour>,
    events: mpsc::Sender<HostEvent>,
    redial: Redial,
    counts: Arc<StreamCounts>,
    stats: Arc<HostStats>,
}

impl Host {
    /// The swarm with its listeners bound and the acceptor task of its inbound streams (on
    /// the runtime this is called on).
    fn new(setup: Setup) -> Result<Self, StartError> {
        let (streams, inbound) = Streams::new(
            setup.protocols,
            Arc::clone(&setup.stats),
            OPEN_STREAM_TIMEOUT,
        );
        let mut swarm = swarm::build(&setup.config, setup.key, streams)
            .map_err(|e| StartError::Build(e.to_string()))?;
        for addr in &setup.config.listen {
            swarm
                .listen_on(addr.clone())
                .map_err(|e| StartError::Listen {
                    addr: addr.clone(),
                    error: e.to_string(),
                })?;
        }
        let counts = StreamCounts::new(setup.config.max_streams_per_connection.get());
        let acceptor = Acceptor {
            counts: Arc::clone(&counts),
            events: setup.events.clone(),
            stats: Arc::clone(&setup.stats),
        };
        tokio::spawn(acceptor.run(inbound));
        let redial = Redial::new(setup.targets, Instant::now());
        Ok(Self {
            swarm,
            events: setup.events,
            redial,
            counts,
            stats: setup.stats,
        })
    }

    /// Runs the swarm until each of `listeners` reported an address, within
    /// `LISTEN_ADDRESS_DEADLINE`; the addresses reported (every event is handled as usual).
    async fn first_addresses(&mut self, listeners: usize) -> Vec<Multiaddr> {
        let mut reported = std::collections::HashSet::new();
        let mut addresses = Vec::new();
        let wait = async {
            while reported.len() < listeners {
                let event = self.swarm.select_next_some().await;
                if let SwarmEvent::NewListenAddr {
                    listener_id,
                    address,
                } = &event
                {
                    reported.insert(*listener_id);
                    addresses.push(address.clone());
                }
                self.on_swarm_event(event).await;
            }
        };
        // A listener silent for that long is reported by its events later, not here.
        let _ = tokio::time::timeout(LISTEN_ADDRESS_DEADLINE, wait).await;
        // A wildcard listener reports each interface: take those already there.
        while let Some(event) = self.swarm.select_next_some().now_or_never() {
            if let SwarmEvent::NewListenAddr { address, .. } = &event {
                addresses.push(address.clone());
            }
            self.on_swarm_event(event).await;
        }
        addresses
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        let mut tick = tokio::time::interval(REDIAL_TICK);
        loop {
            tokio::select! {
                event = self.swarm.select_next_some() => self.on_swarm_event(event).await,
                command = commands.recv() => match command {
                    Some(command) => self.on_command(command),
                    None => return,
                },
                _ = tick.tick() => self.redial_due().await,
                _ = &mut stopped => return,
            }
        }
    }

    /// Queues `event` for the caller, waiting for room (`EVENTS_QUEUED`). A caller that
    /// dropped its receiver wants no events: they are discarded.
    async fn emit(&self, event: HostEvent) {
        let _ = self.events.send(event).await;
    }

    /// Counts an inbound connection a bound refused: the pending-per-IP bound or one of the
    /// connection limits (`p2p.connections_max`, the pending inbound cap).
    fn count_denial(&self, error: &ListenError) {
        let ListenError::Denied { cause } = error else {
            return;
        };
        let counter = if cause.downcast_ref::<PendingPerIpExceeded>().is_some() {
            &self.stats.connections_refused_pending_per_ip
        } else {
            &self.stats.connections_refused_limit
        };
        HostStats::bump(counter);
    }

    async fn on_swarm_event(&mut self, event: SwarmEvent<BehaviourEvent>) {
        let reported = match event {
            SwarmEvent::Behaviour(BehaviourEvent::Identify(event)) => identified(event),
            SwarmEvent::Behaviour(BehaviourEvent::Ping(event)) => self.on_ping(event),
            other => self.on_connection_event(other),
        };
        if let Some(event) = reported {
            self.emit(event).await;
        }
    }

    /// Listeners, connections and dials: the redial schedule follows them, the caller hears.
    fn on_connection_event(&mut self, event: SwarmEvent<BehaviourEvent>) -> Option<HostEvent> {
        let now = Instant::now();
        Some(match event {
            SwarmEvent::NewListenAddr { address, .. } => HostEvent::Listening { address },
            SwarmEvent::ConnectionEstablished {
                peer_id: peer,
                connection_id: connection,
                endpoint,
                ..
            } => {
                self.redial.connected(peer);
                let (remote, direction) = remote_of(&endpoint);
                HostEvent::ConnectionEstablished {
                    peer,
                    connection,
                    remote,
                    direction,
                }
            }
            SwarmEvent::ConnectionClosed {
                peer_id: peer,
                connection_id: connection,
                endpoint,
                num_established,
                cause,
            } => {
                if num_established == 0 {
                    self.redial.lost(peer, now);
                }
                let (remote, direction) = remote_of(&endpoint);
                let cause = cause.map(|c| c.to_string());
                HostEvent::ConnectionClosed {
                    peer,
                    connection,
                    remote,
                    direction,
                    cause,
                }
            }
            SwarmEvent::OutgoingConnectionError { peer_id, error, .. } => {
                if let Some(peer) = peer_id {
                    self.redial.lost(peer, now);
                }
                HostEvent::DialFailed {
                    peer: peer_id,
                    error: error.to_string(),
                }
            }
            SwarmEvent::IncomingConnectionError {
                send_back_addr,
                error,
                ..
            } => {
                self.count_denial(&error);
                HostEvent::IncomingFailed {
                    remote: send_back_addr,
                    error: error.to_string(),
                }
            }
            _ => return None,
        })
    }

    /// A pong is reported; a ping that timed out closes its connection: the peer is gone
    /// or stuck, and the idle timeout (`DEFAULT_IDLE_CONNECTION_TIMEOUT`) will not close it.
    fn on_ping(&mut self, event: ping::Event) -> Option<HostEvent> {
        match event.result {
            Ok(rtt) => Some(HostEvent::Pong {
                peer: event.peer,
                rtt,
            }),
            Err(ping::Failure::Timeout) => {
                HostStats::bump(&self.stats.ping_timeouts);
                self.swarm.close_connection(event.connection);
                None
            }
            // A peer without ping, or a stream error: the connection's own state tells.
            Err(_) => None,
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::OpenStream {
                peer,
                protocol,
                reply,
            } => self.open_stream(peer, protocol, reply),
            Command::Disconnect { peer } => {
                // Not connected (any more): nothing to close.
                let _ = self.swarm.disconnect_peer_id(peer);
            }
            Command::Dial { addr } => {
                if let Err(error) = self.swarm.dial(addr) {
                    let _ = self.events.try_send(HostEvent::DialFailed {
                        peer: None,
                        error: error.to_string(),
                    });
                }
            }
        }
    }

    /// Opens the stream in a task of its own: the loop keeps polling the swarm meanwhile.
    fn open_stream(
        &mut self,
        peer: PeerId,
        protocol: StreamProtocol,
        reply: oneshot::Sender<Result<StreamPipe, OpenError>>,
    ) {
        let Some(slot) = self.counts.acquire(peer) else {
            HostStats::bump(&self.stats.streams_refused);
            let _ = reply.send(Err(OpenError::TooManyStreams));
            return;
        };
        let (opened_tx, opened) = oneshot::channel();
        self.swarm
            .behaviour_mut()
            .streams
            .open(peer, protocol.clone(), opened_tx);
        let stats = Arc::clone(&self.stats);
        tokio::spawn(async move {
            // The handler's own timeout answers first; this one bounds a lost answer.
            let opened = tokio::time::timeout(OPEN_STREAM_TIMEOUT * 2, opened).await;
            let result = match opened {
                Err(_) | Ok(Ok(Err(OpenFailure::Timeout))) => Err(OpenError::Timeout),
                Ok(Err(_)) => Err(OpenError::Io("the connection closed".into())),
                Ok(Ok(Err(OpenFailure::NotConnected))) => {
                    Err(OpenError::Io("not connected".into()))
                }
                Ok(Ok(Err(OpenFailure::Unsupported(p)))) => Err(OpenError::Unsupported(p)),
                Ok(Ok(Err(OpenFailure::Io(e)))) => Err(OpenError::Io(e)),
                Ok(Ok(Ok(stream))) => {
                    HostStats::bump(&stats.streams_outbound);
                    Ok(pipe::spawn(
                        stream,
                        peer,
                        protocol,
                        Direction::Outbound,
                        slot,
                    ))
                }
            };
            let _ = reply.send(result);
        });
    }

    async fn redial_due(&mut self) {
        let now = Instant::now();
        for (peer, addr) in self.redial.due(now) {
            let opts = DialOpts::peer_id(peer)
                .addresses(vec![addr])
                .condition(PeerCondition::DisconnectedAndNotDialing)
                .build();
            if let Err(error) = self.swarm.dial(opts) {
                self.redial.lost(peer, now);
                self.emit(HostEvent::DialFailed {
                    peer: Some(peer),
                    error: error.to_string(),
                })
                .await;
            }
        }
    }
}

/// The peer's identify answer, and our answer sent to it.
fn identified(event: identify::Event) -> Option<HostEvent> {
    match event {
        identify::Event::Received { peer_id, info, .. } => Some(HostEvent::Identified {
            peer: peer_id,
            agent_version: info.agent_version,
            protocol_version: info.protocol_version,
            protocols: info.protocols.iter().map(|p| p.to_string()).collect(),
        }),
        identify::Event::Sent { peer_id, .. } => Some(HostEvent::IdentifySent { peer: peer_id }),
        _ => None,
    }
}

fn remote_of(endpoint: &ConnectedPoint) -> (Multiaddr, Direction) {
    let direction = if endpoint.is_dialer() {
        Direction::Outbound
    } else {
        Direction::Inbound
    };
    (endpoint.get_remote_address().clone(), direction)
}

/// Hands the inbound streams of one protocol to the caller.
struct Acceptor {
    counts: Arc<StreamCounts>,
    events: mpsc::Sender<HostEvent>,
    stats: Arc<HostStats>,
}

impl Acceptor {
    /// A stream over its connection's bound is dropped unclosed, which yamux answers with a
    /// reset of that stream alone, and counted (`HostStats::streams_refused`).
    async fn run(self, mut inbound: mpsc::Receiver<Inbound>) {
        while let Some(Inbound {
            peer,
            protocol,
            stream,
        }) = inbound.recv().await
        {
            let Some(slot) = self.counts.acquire(peer) else {
                HostStats::bump(&self.stats.streams_refused);
                drop(stream);
                continue;
            };
            HostStats::bump(&self.stats.streams_inbound);
            let pipe = pipe::spawn(stream, peer, protocol, Direction::Inbound, slot);
            if self
                .events
                .send(HostEvent::StreamOpened(pipe))
                .await
                .is_err()
            {
                return;
            }
        }
    }
}

/// Why the host did not start.
#[derive(Debug)]
pub enum StartError {
    Config(ConfigError),
    Thread(io::Error),
    Runtime(io::Error),
    Build(String),
    Listen { addr: Multiaddr, error: String },
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Thread(e) => write!(f, "p2p thread: {e}"),
            Self::Runtime(e) => write!(f, "p2p runtime: {e}"),
            Self::Build(e) => write!(f, "p2p swarm: {e}"),
            Self::Listen { addr, error } => write!(f, "p2p listen on {addr}: {error}"),
        }
    }
}

impl std::error::Error for StartError {}

/// Why no stream was opened.
#[derive(Debug)]
pub enum OpenError {
    /// The connection to the peer has `max_streams_per_connection` streams open.
    TooManyStreams,
    /// The peer does not speak the protocol (multistream-select said no).
    Unsupported(StreamProtocol),
    /// Not opened within `OPEN_STREAM_TIMEOUT`.
    Timeout,
    /// No connection, or it failed while the stream was negotiated.
    Io(String),
    HostGone,
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyStreams => write!(f, "the connection has its maximum of streams open"),
            Self::Unsupported(p) => write!(f, "the peer does not support {p}"),
            Self::Timeout => write!(f, "no stream within {OPEN_STREAM_TIMEOUT:?}"),
            Self::Io(e) => write!(f, "{e}"),
            Self::HostGone => write!(f, "{HostGone}"),
        }
    }
}

impl std::error::Error for OpenError {}

/// The host stopped: nothing can be asked of it any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostGone;

impl fmt::Display for HostGone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the p2p host stopped")
    }
}

impl std::error::Error for HostGone {}
