//! `Streams`: the behaviour that hands out raw protocol streams. Inbound, every stream a peer
//! negotiates for one of our protocols goes to one bounded queue (`INBOUND_STREAMS_QUEUED`)
//! that the host's acceptor task empties; outbound, `open` asks one of the peer's connections
//! for a stream and answers on a oneshot channel.
//! Why our own and not libp2p-stream's: that one queues a single negotiated stream per
//! protocol and drops the next when a connection negotiates two in one poll (a burst of BPS
//! streams from one bee node lost all but one). Here a stream is dropped (yamux resets it) only
//! when the whole queue is full, and that drop is counted (`HostStats::inbound_dropped`).
//! Never does: dial (a stream is opened on a connection that exists, or fails), count streams
//! per connection (the acceptor does), or read a byte of a stream.

use std::{
    collections::{HashMap, VecDeque},
    convert::Infallible,
    future::{Ready, ready},
    sync::Arc,
    task::{Context, Poll, Waker},
    time::Duration,
};

use libp2p::{
    Multiaddr, PeerId, Stream, StreamProtocol,
    core::{Endpoint, InboundUpgrade, OutboundUpgrade, UpgradeInfo, transport::PortUse},
    swarm::{
        ConnectionDenied, ConnectionHandler, ConnectionHandlerEvent, ConnectionId, FromSwarm,
        NetworkBehaviour, NotifyHandler, StreamUpgradeError, SubstreamProtocol, THandler,
        THandlerInEvent, THandlerOutEvent, ToSwarm,
        handler::{
            ConnectionEvent, DialUpgradeError, FullyNegotiatedInbound, FullyNegotiatedOutbound,
        },
    },
};
use tokio::sync::{mpsc, oneshot};

use crate::stats::HostStats;

/// Negotiated inbound streams waiting for the acceptor task: it only hands each on, so the
/// queue fills only when the host's thread is starved; a burst of a few hundred fits.
pub const INBOUND_STREAMS_QUEUED: usize = 256;

/// One negotiated inbound stream.
pub struct Inbound {
    pub peer: PeerId,
    pub protocol: StreamProtocol,
    pub stream: Stream,
}

/// Why an outbound stream did not open.
#[derive(Debug)]
pub enum OpenFailure {
    /// No connection to the peer.
    NotConnected,
    /// The peer does not speak the protocol.
    Unsupported(StreamProtocol),
    /// Not negotiated within the timeout.
    Timeout,
    /// The connection failed or closed meanwhile.
    Io(String),
}

/// The answer to one `open`.
pub type OpenReply = oneshot::Sender<Result<Stream, OpenFailure>>;

/// A request to open one stream on a connection; it travels with the stream's negotiation
/// to its answer.
#[derive(Debug)]
pub struct OpenRequest {
    protocol: StreamProtocol,
    reply: OpenReply,
}

/// The behaviour: the protocols we accept, the inbound queue, the connections per peer and
/// the opens not yet given to a connection.
pub struct Streams {
    protocols: Vec<StreamProtocol>,
    inbound: mpsc::Sender<Inbound>,
    stats: Arc<HostStats>,
    open_timeout: Duration,
    connections: HashMap<PeerId, Vec<ConnectionId>>,
    opens: VecDeque<(PeerId, OpenRequest)>,
    waker: Option<Waker>,
}

impl Streams {
    /// Accepts `protocols` inbound; the receiver takes the negotiated streams.
    pub fn new(
        protocols: Vec<StreamProtocol>,
        stats: Arc<HostStats>,
        open_timeout: Duration,
    ) -> (Self, mpsc::Receiver<Inbound>) {
        let (inbound, receiver) = mpsc::channel(INBOUND_STREAMS_QUEUED);
        let streams = Self {
            protocols,
            inbound,
            stats,
            open_timeout,
            connections: HashMap::new(),
            opens: VecDeque::new(),
            waker: None,
        };
        (streams, receiver)
    }

    /// Opens a stream of `protocol` to `peer` on one of its connections; the answer comes on
    /// `reply`. The host's bounded command queue bounds how many wait here.
    pub fn open(&mut self, peer: PeerId, protocol: StreamProtocol, reply: OpenReply) {
        self.opens
            .push_back((peer, OpenRequest { protocol, reply }));
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    fn handler(&self, peer: PeerId) -> Handler {
        Handler {
            peer,
            protocols: self.protocols.clone(),
            inbound: self.inbound.clone(),
            stats: Arc::clone(&self.stats),
            open_timeout: self.open_timeout,
            requested: VecDeque::new(),
        }
    }
}

impl NetworkBehaviour for Streams {
    type ConnectionHandler = Handler;
    type ToSwarm = Infallible;

    fn handle_established_inbound_connection(
        &mut self,
        _connection: ConnectionId,
        peer: PeerId,
        _local: &Multiaddr,
        _remote: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(self.handler(peer))
    }

    fn handle_established_outbound_connection(
        &mut self,
        _connection: ConnectionId,
        peer: PeerId,
        _addr: &Multiaddr,
        _role: Endpoint,
        _port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(self.handler(peer))
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ConnectionEstablished(established) => {
                let connections = self.connections.entry(established.peer_id).or_default();
                connections.push(established.connection_id);
            }
            FromSwarm::ConnectionClosed(closed) => {
                if let Some(connections) = self.connections.get_mut(&closed.peer_id) {
                    connections.retain(|id| *id != closed.connection_id);
                    if connections.is_empty() {
                        self.connections.remove(&closed.peer_id);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _peer: PeerId,
        _connection: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        match event {}
    }

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<ToSwarm<Infallible, THandlerInEvent<Self>>> {
        while let Some((peer, request)) = self.opens.pop_front() {
            // The newest connection: an older one may be on its way out.
            let Some(&connection) = self.connections.get(&peer).and_then(|all| all.last()) else {
                let _ = request.reply.send(Err(OpenFailure::NotConnected));
                continue;
            };
            return Poll::Ready(ToSwarm::NotifyHandler {
                peer_id: peer,
                handler: NotifyHandler::One(connection),
                event: request,
            });
        }
        self.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// One connection's side: accepts our protocols inbound, requests the opens it is given.
pub struct Handler {
    peer: PeerId,
    protocols: Vec<StreamProtocol>,
    inbound: mpsc::Sender<Inbound>,
    stats: Arc<HostStats>,
    open_timeout: Duration,
    requested: VecDeque<OpenRequest>,
}

impl ConnectionHandler for Handler {
    type FromBehaviour = OpenRequest;
    type ToBehaviour = Infallible;
    type InboundProtocol = ProtocolList;
    type OutboundProtocol = ProtocolList;
    type InboundOpenInfo = ();
    type OutboundOpenInfo = OpenRequest;

    fn listen_protocol(&self) -> SubstreamProtocol<ProtocolList, ()> {
        SubstreamProtocol::new(ProtocolList(self.protocols.clone()), ())
    }

    fn poll(
        &mut self,
        _cx: &mut Context<'_>,
    ) -> Poll<ConnectionHandlerEvent<ProtocolList, OpenRequest, Infallible>> {
        let Some(request) = self.requested.pop_front() else {
            return Poll::Pending;
        };
        let protocols = ProtocolList(vec![request.protocol.clone()]);
        Poll::Ready(ConnectionHandlerEvent::OutboundSubstreamRequest {
            protocol: SubstreamProtocol::new(protocols, request).with_timeout(self.open_timeout),
        })
    }

    fn on_behaviour_event(&mut self, request: OpenRequest) {
        self.requested.push_back(request);
    }

    fn on_connection_event(
        &mut self,
        event: ConnectionEvent<ProtocolList, ProtocolList, (), OpenRequest>,
    ) {
        match event {
            ConnectionEvent::FullyNegotiatedInbound(FullyNegotiatedInbound {
                protocol: (stream, protocol),
                ..
            }) => self.hand_on(stream, protocol),
            ConnectionEvent::FullyNegotiatedOutbound(FullyNegotiatedOutbound {
                protocol: (stream, _),
                info,
            }) => {
                let _ = info.reply.send(Ok(stream));
            }
            ConnectionEvent::DialUpgradeError(DialUpgradeError { info, error }) => {
                let failure = match error {
                    StreamUpgradeError::Timeout => OpenFailure::Timeout,
                    StreamUpgradeError::NegotiationFailed => {
                        OpenFailure::Unsupported(info.protocol)
                    }
                    StreamUpgradeError::Io(error) => OpenFailure::Io(error.to_string()),
                    StreamUpgradeError::Apply(never) => match never {},
                };
                let _ = info.reply.send(Err(failure));
            }
            _ => {}
        }
    }
}

impl Handler {
    /// Queues a negotiated inbound stream for the acceptor; at the bound it is dropped (yamux
    /// resets it) and counted.
    fn hand_on(&mut self, stream: Stream, protocol: StreamProtocol) {
        let inbound = Inbound {
            peer: self.peer,
            protocol,
            stream,
        };
        if let Err(mpsc::error::TrySendError::Full(_)) = self.inbound.try_send(inbound) {
            HostStats::bump(&self.stats.inbound_dropped);
        }
    }
}

/// The protocols a stream may be negotiated for; the stream comes out with the one agreed.
#[derive(Clone, Debug)]
pub struct ProtocolList(Vec<StreamProtocol>);

impl UpgradeInfo for ProtocolList {
    type Info = StreamProtocol;
    type InfoIter = std::vec::IntoIter<StreamProtocol>;

    fn protocol_info(&self) -> Self::InfoIter {
        self.0.clone().into_iter()
    }
}

impl InboundUpgrade<Stream> for ProtocolList {
    type Output = (Stream, StreamProtocol);
    type Error = Infallible;
    type Future = Ready<Result<(Stream, StreamProtocol), Infallible>>;

    fn upgrade_inbound(self, stream: Stream, agreed: StreamProtocol) -> Self::Future {
        ready(Ok((stream, agreed)))
    }
}

impl OutboundUpgrade<Stream> for ProtocolList {
    type Output = (Stream, StreamProtocol);
    type Error = Infallible;
    type Future = Ready<Result<(Stream, StreamProtocol), Infallible>>;

    fn upgrade_outbound(self, stream: Stream, agreed: StreamProtocol) -> Self::Future {
        ready(Ok((stream, agreed)))
    }
}
