//! A Swarm light node, the client's libp2p carrier: a `bps_p2p` host of its own, one
//! connection to the broker at a `/ip4|/ip6|/dns4|/dns6|/dns/…/tcp/…/p2p/<peer id>` target,
//! bee's handshake on it as the dialer (light node, our network id), and
//! `/swarm/pubsub/1.0.0/pubsub` streams opened on it, each after bee's headers exchange,
//! carrying BPS frames exactly as a TCP stream does.
//!
//! Owns: [`BeeTarget`] (a target taken apart, DNS resolved here because the host has no DNS
//! transport), [`BeeNode`] (the host, the connection's state as the host reports it, the
//! handshake's outcome), [`BeeStream`] (one pubsub stream with blocking, bounded reads and
//! writes) and [`BeeError`] (every way the carrier fails, each with what to do about it).
//!
//! Never: a BPS frame's meaning (the session above reads the `Ack`), a listener (a light
//! node dials; the broker never dials it), or a retry (callers back off and join again).

use std::fmt;
use std::net::ToSocketAddrs;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bps_bee::{
    HANDSHAKE_PROTOCOL, Handshake, HandshakeError, Identity, LocalNode, NONCE_BYTES, Peer, Step,
    empty_headers, read_headers,
};
use bps_p2p::{
    HostEvent, HostHandle, Keypair, Multiaddr, OpenError, P2pConfig, P2pHost, PUBSUB_PROTOCOL,
    PeerId, Protocol, StreamPipe, StreamProtocol, dial_target,
};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};
use tokio::sync::{mpsc, watch};

/// Swarm's mainnet, bee's default network id: a broker on another network refuses us.
pub const DEFAULT_NETWORK_ID: u64 = 1;

/// Bound on the dial (TCP, Noise or TLS, yamux), in seconds: a broker that does not answer
/// must not hang a run; the host retries a refused dial itself meanwhile, from 1 s apart.
pub const DIAL_DEADLINE_SECS: u64 = 10;

/// Bound on bee's handshake, in seconds: bee's own `handshakeTimeout` (as `bps_bee` has
/// it), after which the broker resets a handshake anyway.
pub const HANDSHAKE_DEADLINE_SECS: u64 = bps_bee::HANDSHAKE_DEADLINE_SECS;

/// Bound on a pubsub stream's opening and headers exchange, in seconds; the broker allows
/// as long as the handshake.
pub const STREAM_OPEN_DEADLINE_SECS: u64 = bps_bee::HANDSHAKE_DEADLINE_SECS;

/// Streams our host lets us open on the one connection to the broker, in streams: the
/// broker's `p2p.streams_per_connection_max` is the bound that matters (we accept no
/// inbound stream), ours only has to stay out of its way for a load generator's many.
pub const STREAMS_PER_CONNECTION_MAX: u32 = 4096;

/// The greeting our handshake sends; bee logs a peer's.
const WELCOME_MESSAGE: &str = "bps client";

/// Why the libp2p carrier gave no stream, or lost one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BeeError {
    /// The target is not a multiaddr this carrier dials.
    Target(String),
    /// The host did not start.
    Host(String),
    /// The dial failed or took over [`DIAL_DEADLINE_SECS`].
    Dial { target: String, error: String },
    /// The broker is on another Swarm network.
    NetworkId { ours: u64, theirs: u64 },
    /// The broker failed one of bee's checks of a handshake (its record, our observed
    /// address, a malformed message).
    Handshake(String),
    /// The broker reset or closed the handshake stream, or the connection, before it ended.
    HandshakeRefused,
    /// A step (handshake, headers, a write) did not finish within its bound.
    Timeout { what: &'static str, after: Duration },
    /// A pubsub stream was not opened (the broker's stream bound, an unsupported protocol).
    Open(String),
    /// The stream or its connection ended.
    Closed,
    /// The node's connection to the broker closed, for this reason.
    ConnectionLost(String),
}

impl fmt::Display for BeeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Target(message) | Self::Host(message) => formatter.write_str(message),
            Self::Dial { target, error } => write!(
                formatter,
                "cannot dial {target}: {error} (a broker takes libp2p dials with \
                 p2p.enabled = true and a p2p.listen address reachable from here)"
            ),
            Self::NetworkId { ours, theirs } => write!(
                formatter,
                "the broker is on Swarm network {theirs}, we are on {ours}: \
                 pass --network-id {theirs}"
            ),
            Self::Handshake(error) => write!(formatter, "bee handshake: {error}"),
            Self::HandshakeRefused => formatter.write_str(
                "the broker ended bee's handshake (it refuses us: check its log, e.g. \
                 p2p.pending_handshakes_per_ip_max or p2p.connections_max)",
            ),
            Self::Timeout { what, after } => {
                write!(formatter, "no {what} within {} ms", after.as_millis())
            }
            Self::Open(error) => write!(
                formatter,
                "pubsub stream not opened: {error} (the broker bounds streams with \
                 p2p.streams_per_connection_max)"
            ),
            Self::Closed => formatter.write_str("the broker closed the libp2p stream"),
            Self::ConnectionLost(cause) => {
                write!(
                    formatter,
                    "the libp2p connection to the broker closed: {cause}"
                )
            }
        }
    }
}

impl std::error::Error for BeeError {}

/// A libp2p target: the broker's peer id and where to dial it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BeeTarget {
    /// The peer id the security handshake must find there.
    pub peer: PeerId,
    /// The address without `/p2p/…`, DNS resolved to `/ip4` or `/ip6`.
    pub addr: Multiaddr,
}

impl BeeTarget {
    /// Whether `target` names the libp2p carrier: a multiaddr starts with `/`, which no
    /// `HOST:PORT` or URL does.
    pub fn is_p2p(target: &str) -> bool {
        target.starts_with('/')
    }

    /// `target` taken apart: it must end in `/p2p/<peer id>` (the security handshake
    /// authenticates the broker by it) and start with an IP or DNS name and a TCP port.
    pub fn parse(target: &str) -> Result<Self, BeeError> {
        let bad = |why: &str| BeeError::Target(format!("{target}: {why}"));
        let full: Multiaddr = target
            .parse()
            .map_err(|error| bad(&format!("not a multiaddr ({error})")))?;
        let (peer, addr) = dial_target(&full)
            .map_err(|_| bad("must end in /p2p/<the broker's peer id> (its log names it)"))?;
        let mut parts = addr.iter();
        let (host, port) = match (parts.next(), parts.next(), parts.next()) {
            (Some(host), Some(Protocol::Tcp(port)), None) => (host, port),
            _ => {
                return Err(bad(
                    "expected /ip4|/ip6|/dns4|/dns6|/dns/HOST/tcp/PORT/p2p/ID",
                ));
            }
        };
        let (name, want_v6) = match host {
            Protocol::Ip4(_) | Protocol::Ip6(_) => return Ok(Self { peer, addr }),
            Protocol::Dns(name) => (name, None),
            Protocol::Dns4(name) => (name, Some(false)),
            Protocol::Dns6(name) => (name, Some(true)),
            _ => return Err(bad("the host must be /ip4, /ip6, /dns4, /dns6 or /dns")),
        };
        let resolved = (name.as_ref(), port)
            .to_socket_addrs()
            .map_err(|error| bad(&format!("cannot resolve {name}: {error}")))?
            .find(|socket| want_v6.is_none_or(|v6| socket.is_ipv6() == v6))
            .ok_or_else(|| bad(&format!("{name} resolves to no address of its kind")))?;
        let ip = match resolved.ip() {
            std::net::IpAddr::V4(ip) => Protocol::Ip4(ip),
            std::net::IpAddr::V6(ip) => Protocol::Ip6(ip),
        };
        Ok(Self {
            peer,
            addr: Multiaddr::empty().with(ip).with(Protocol::Tcp(port)),
        })
    }
}

/// Who we are to the broker.
#[derive(Debug, Clone)]
pub struct BeeSettings {
    /// Our Swarm network; the broker's must match.
    pub network_id: u64,
    /// Our libp2p identity (`None`: a fresh ECDSA P-256 key, as bee makes).
    pub libp2p_key: Option<Keypair>,
    /// Our Swarm (overlay) key (`None`: a fresh one).
    pub swarm_key: Option<SigningKey>,
}

impl BeeSettings {
    /// Fresh keys on `network_id`.
    pub fn new(network_id: u64) -> Self {
        Self {
            network_id,
            libp2p_key: None,
            swarm_key: None,
        }
    }
}

/// Where the connection to the broker stands, as the host's events tell.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Link {
    Dialing,
    Up,
    Down(String),
}

/// A running light node with a handshaken connection to one broker.
#[derive(Debug)]
pub struct BeeNode {
    /// Drives the waits on the host's channels with their deadlines.
    runtime: tokio::runtime::Runtime,
    handle: HostHandle,
    target: BeeTarget,
    link: watch::Receiver<Link>,
    /// Stops the host (and its connection) when the last stream on it is gone.
    _host: P2pHost,
}

fn unix_now() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
}

impl BeeNode {
    /// Starts a host, dials `target` and runs bee's handshake as a light node.
    pub fn connect(target: &BeeTarget, settings: &BeeSettings) -> Result<Arc<Self>, BeeError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map_err(|error| BeeError::Host(format!("p2p runtime: {error}")))?;
        // The key is given to the host, not read from a file: the path is never opened.
        let mut config = P2pConfig::new(PathBuf::new());
        config.listen = Vec::new();
        config.protocols = Vec::new();
        config.max_streams_per_connection =
            NonZeroU32::new(STREAMS_PER_CONNECTION_MAX).unwrap_or(NonZeroU32::MIN);
        config.dial = vec![target.addr.clone().with(Protocol::P2p(target.peer))];
        config.agent_version = concat!("bps-client/", env!("CARGO_PKG_VERSION")).to_owned();
        let key = settings
            .libp2p_key
            .clone()
            .unwrap_or_else(Keypair::generate_ecdsa);
        let (host, events) = P2pHost::start(&config, key)
            .map_err(|error| BeeError::Host(format!("p2p host: {error}")))?;
        let (link_tx, mut link) = watch::channel(Link::Dialing);
        watch_link(events, target.peer, link_tx)?;
        let shown = format!("{}/p2p/{}", target.addr, target.peer);
        let dial_deadline = Duration::from_secs(DIAL_DEADLINE_SECS);
        let dialed = runtime.block_on(async {
            tokio::time::timeout(dial_deadline, link.wait_for(|link| *link != Link::Dialing))
                .await
                .map(|seen| seen.map(|link| link.clone()))
        });
        match dialed {
            Ok(Ok(Link::Up)) => {}
            Ok(Ok(Link::Down(error))) => {
                return Err(BeeError::Dial {
                    target: shown,
                    error,
                });
            }
            Ok(_) => return Err(BeeError::Host("the p2p host stopped".to_owned())),
            Err(_) => {
                let error = format!("no connection within {DIAL_DEADLINE_SECS} s");
                return Err(BeeError::Dial {
                    target: shown,
                    error,
                });
            }
        }
        let handle = host.handle();
        runtime.block_on(handshake(&handle, (host.peer_id(), target), settings))?;
        Ok(Arc::new(Self {
            runtime,
            handle,
            target: target.clone(),
            link,
            _host: host,
        }))
    }

    /// Opens a pubsub stream and does bee's headers exchange (ours first: we opened it).
    pub fn open_pubsub(self: &Arc<Self>) -> Result<BeeStream, BeeError> {
        if let Link::Down(cause) = &*self.link.borrow() {
            return Err(BeeError::ConnectionLost(cause.clone()));
        }
        let protocol = StreamProtocol::new(PUBSUB_PROTOCOL);
        let open_deadline = Duration::from_secs(STREAM_OPEN_DEADLINE_SECS);
        let opening = async {
            let mut pipe = self
                .handle
                .open_stream(self.target.peer, protocol)
                .await
                .map_err(open_error)?;
            pipe.outbound
                .send(empty_headers())
                .await
                .map_err(|_| BeeError::Closed)?;
            let mut buf = BytesMut::new();
            loop {
                let headers = read_headers(&mut buf)
                    .map_err(|error| BeeError::Handshake(format!("headers: {error}")))?;
                if headers.is_some() {
                    return Ok((pipe, buf));
                }
                let chunk = pipe.inbound.recv().await.ok_or(BeeError::Closed)?;
                buf.extend_from_slice(&chunk);
            }
        };
        let (pipe, leftover) = self
            .runtime
            .block_on(async { tokio::time::timeout(open_deadline, opening).await })
            .map_err(|_| BeeError::Timeout {
                what: "pubsub stream",
                after: open_deadline,
            })??;
        Ok(BeeStream {
            node: Arc::clone(self),
            pipe: Some(pipe),
            leftover,
        })
    }
}

fn open_error(error: OpenError) -> BeeError {
    match error {
        OpenError::Io(_) | OpenError::HostGone => BeeError::Closed,
        other => BeeError::Open(other.to_string()),
    }
}

/// Takes the host's events on a thread of its own (the host stops when they are not
/// taken) and keeps `link` current for the broker; ends with the host.
fn watch_link(
    mut events: mpsc::Receiver<HostEvent>,
    broker: PeerId,
    link: watch::Sender<Link>,
) -> Result<(), BeeError> {
    std::thread::Builder::new()
        .name("bps-bee-events".into())
        .spawn(move || {
            while let Some(event) = events.blocking_recv() {
                let next = match event {
                    HostEvent::ConnectionEstablished { peer, .. } if peer == broker => Link::Up,
                    HostEvent::ConnectionClosed { peer, cause, .. } if peer == broker => {
                        Link::Down(cause.unwrap_or_else(|| "closed".to_owned()))
                    }
                    HostEvent::DialFailed { peer, error } if peer.is_none_or(|p| p == broker) => {
                        Link::Down(error)
                    }
                    _ => continue,
                };
                // Only a transition is news: a redial's failure after the first is not.
                link.send_if_modified(|link| {
                    let changed = *link != next;
                    *link = next;
                    changed
                });
            }
        })
        .map(drop)
        .map_err(|error| BeeError::Host(format!("p2p event thread: {error}")))
}

/// Bee's handshake as the dialer, within [`HANDSHAKE_DEADLINE_SECS`].
async fn handshake(
    handle: &HostHandle,
    (ours, target): (PeerId, &BeeTarget),
    settings: &BeeSettings,
) -> Result<Peer, BeeError> {
    let swarm_key = settings
        .swarm_key
        .clone()
        .unwrap_or_else(SigningKey::random);
    let nonce: [u8; NONCE_BYTES] = rand::random();
    let identity = Identity::new(&swarm_key, nonce, settings.network_id)
        .map_err(|error| BeeError::Host(format!("swarm key: {error}")))?;
    let local = LocalNode::new(identity, ours, false, WELCOME_MESSAGE.to_owned(), &[])
        .map_err(|error| BeeError::Host(error.to_string()))?;
    let mut pipe = handle
        .open_stream(target.peer, StreamProtocol::new(HANDSHAKE_PROTOCOL))
        .await
        .map_err(open_error)?;
    let (machine, syn) = Handshake::dial(
        Arc::new(local),
        target.peer,
        std::slice::from_ref(&target.addr),
    );
    let exchange = drive(&mut pipe, machine, syn, settings.network_id);
    let deadline = Duration::from_secs(HANDSHAKE_DEADLINE_SECS);
    tokio::time::timeout(deadline, exchange)
        .await
        .map_err(|_| BeeError::Timeout {
            what: "bee handshake",
            after: deadline,
        })?
}

/// Runs the dialer's handshake machine over `pipe`.
async fn drive(
    pipe: &mut StreamPipe,
    mut machine: Handshake,
    syn: Bytes,
    ours: u64,
) -> Result<Peer, BeeError> {
    pipe.outbound
        .send(syn)
        .await
        .map_err(|_| BeeError::HandshakeRefused)?;
    let mut buf = BytesMut::new();
    loop {
        let step = machine
            .feed(&mut buf, unix_now())
            .map_err(|error| match error {
                HandshakeError::NetworkIdMismatch { theirs, .. } => {
                    BeeError::NetworkId { ours, theirs }
                }
                other => BeeError::Handshake(other.to_string()),
            })?;
        match step {
            Step::NeedMore => {
                let chunk = pipe
                    .inbound
                    .recv()
                    .await
                    .ok_or(BeeError::HandshakeRefused)?;
                buf.extend_from_slice(&chunk);
            }
            Step::Send(bytes) => pipe
                .outbound
                .send(bytes)
                .await
                .map_err(|_| BeeError::HandshakeRefused)?,
            Step::Done(completed) => {
                if let Some(ack) = completed.send {
                    pipe.outbound
                        .send(ack)
                        .await
                        .map_err(|_| BeeError::HandshakeRefused)?;
                }
                return Ok(completed.peer);
            }
        }
    }
}

/// One pubsub stream after the headers exchange: blocking reads and writes with bounds.
/// It keeps its node (the host and connection) alive while it is open; one taken apart
/// ([`BeeStream::into_pipe`]) does not, its driver keeps the node.
#[derive(Debug)]
pub struct BeeStream {
    node: Arc<BeeNode>,
    /// `None` once finished.
    pipe: Option<StreamPipe>,
    /// What came after the broker's headers, before any read.
    leftover: BytesMut,
}

impl BeeStream {
    /// Bytes that came after the headers, taken once.
    pub fn take_leftover(&mut self) -> BytesMut {
        std::mem::take(&mut self.leftover)
    }

    /// Writes `bytes` as they are, waiting at most `wait` for room (the broker reads
    /// slowly: the stream's window and the host's queue are full).
    pub fn send(&mut self, bytes: Bytes, wait: Duration) -> Result<(), BeeError> {
        let pipe = self.pipe.as_ref().ok_or(BeeError::Closed)?;
        self.node
            .runtime
            .block_on(async { tokio::time::timeout(wait, pipe.outbound.send(bytes)).await })
            .map_err(|_| BeeError::Timeout {
                what: "room to write",
                after: wait,
            })?
            .map_err(|_| BeeError::Closed)
    }

    /// The next chunk the broker wrote, waiting at most `wait` (zero: only what is there);
    /// `Ok(None)`: nothing came; [`BeeError::Closed`]: the stream ended.
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Bytes>, BeeError> {
        let pipe = self.pipe.as_mut().ok_or(BeeError::Closed)?;
        if wait.is_zero() {
            return match pipe.inbound.try_recv() {
                Ok(chunk) => Ok(Some(chunk)),
                Err(mpsc::error::TryRecvError::Empty) => Ok(None),
                Err(mpsc::error::TryRecvError::Disconnected) => Err(BeeError::Closed),
            };
        }
        match self
            .node
            .runtime
            .block_on(async { tokio::time::timeout(wait, pipe.inbound.recv()).await })
        {
            Ok(Some(chunk)) => Ok(Some(chunk)),
            Ok(None) => Err(BeeError::Closed),
            Err(_) => Ok(None),
        }
    }

    /// Ends the stream cleanly: our write side closes once everything queued is out (a
    /// FIN), then what the broker still sends is read and dropped until it closes or
    /// `linger` passes.
    pub fn finish(mut self, linger: Duration) {
        let Some(StreamPipe { mut inbound, .. }) = self.pipe.take() else {
            return;
        };
        self.node.runtime.block_on(async {
            let _ = tokio::time::timeout(linger, async { while inbound.recv().await.is_some() {} })
                .await;
        });
    }

    /// The stream's channels, for a driver that moves the bytes itself (`bps-bench`).
    pub fn into_pipe(mut self) -> Option<(StreamPipe, BytesMut)> {
        let leftover = self.take_leftover();
        self.pipe.take().map(|pipe| (pipe, leftover))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_needs_an_address_a_tcp_port_and_the_peer_id() {
        let peer = PeerId::random();
        let ip = BeeTarget::parse(&format!("/ip4/127.0.0.1/tcp/1634/p2p/{peer}")).expect("ip4");
        assert_eq!(ip.peer, peer);
        assert_eq!(ip.addr.to_string(), "/ip4/127.0.0.1/tcp/1634");
        let v6 = BeeTarget::parse(&format!("/ip6/::1/tcp/9/p2p/{peer}")).expect("ip6");
        assert_eq!(v6.addr.to_string(), "/ip6/::1/tcp/9");
        let named = BeeTarget::parse(&format!("/dns4/localhost/tcp/1634/p2p/{peer}"))
            .expect("dns4 resolves here");
        assert_eq!(named.addr.to_string(), "/ip4/127.0.0.1/tcp/1634");
        for (bad, says) in [
            ("/ip4/127.0.0.1/tcp/1634".to_owned(), "must end in /p2p/"),
            (
                format!("/ip4/127.0.0.1/udp/1634/p2p/{peer}"),
                "expected /ip4",
            ),
            ("/ip4/300.0.0.1/tcp/1/p2p/x".to_owned(), "not a multiaddr"),
            (format!("/unix/x/p2p/{peer}"), "expected /ip4"),
        ] {
            let error = BeeTarget::parse(&bad).expect_err(&bad).to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
        assert!(BeeTarget::is_p2p("/ip4/1.2.3.4/tcp/1"));
        assert!(!BeeTarget::is_p2p("127.0.0.1:1637"));
        assert!(!BeeTarget::is_p2p("ws://h:1639/bps/v1"));
    }

    #[test]
    fn nobody_listening_is_a_dial_error_that_says_what_to_configure() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let target = BeeTarget::parse(&format!(
            "/ip4/127.0.0.1/tcp/{port}/p2p/{}",
            PeerId::random()
        ))
        .expect("target");
        let error = BeeNode::connect(&target, &BeeSettings::new(DEFAULT_NETWORK_ID))
            .expect_err("nobody listens");
        assert!(matches!(error, BeeError::Dial { .. }), "{error}");
        assert!(error.to_string().contains("p2p.listen"), "{error}");
    }
}
