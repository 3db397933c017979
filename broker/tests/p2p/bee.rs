//! A bee node played in-process for the black-box tests of the libp2p carrier: bps-p2p is
//! its libp2p host, bps-bee its handshake, headers and control messages; each call blocks on
//! the node's own runtime, bounded by `WAIT`.
//! Owns: [`Bee`] (the host, its events and its handshake settings), driving a handshake
//! state machine over a stream, and a BPS publication over a pubsub stream checked at a TCP
//! subscriber. Never: departs from bee's protocol; a test that sends a bad message builds it
//! itself.

use std::sync::Arc;

use bps_bee::{
    HANDSHAKE_PROTOCOL, Handshake, Identity, LocalNode, Peer, Step, empty_headers, read_headers,
};
use bps_p2p::{
    HostEvent, Multiaddr, P2pConfig, P2pHost, PeerId, Protocol, StreamPipe, StreamProtocol,
};
use bps_proto::{Spec, decode_ack, encode_frame, next_frame};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::{P2pBroker, PUBSUB, publisher_after, signed_frames, temp_dir, unix_now};
use crate::support::{WAIT, body_of, explicit, key, recv};

/// A bee node: a libp2p host of its own and its handshake settings.
pub struct Bee {
    pub runtime: tokio::runtime::Runtime,
    pub host: P2pHost,
    pub events: mpsc::Receiver<HostEvent>,
    pub node: Arc<LocalNode>,
}

impl Bee {
    /// A bee node on `network_id`, listening on loopback and dialing `dial`.
    pub fn start(name: &str, network_id: u64, dial: Vec<Multiaddr>) -> Bee {
        Bee::start_as(name, 77, network_id, dial)
    }

    /// As [`Bee::start`], with the Swarm key `key(swarm_key)`: another overlay.
    pub fn start_as(name: &str, swarm_key: u8, network_id: u64, dial: Vec<Multiaddr>) -> Bee {
        let dir = temp_dir(name);
        let mut config = P2pConfig::new(dir.join("libp2p.key"));
        config.listen = vec!["/ip4/127.0.0.1/tcp/0".parse().expect("multiaddr")];
        config.dial = dial;
        let (keypair, _) = bps_p2p::load_or_create(&config.key_path).expect("bee key");
        let (host, events) = P2pHost::start(&config, keypair).expect("bee host");
        let identity = Identity::new(&key(swarm_key), [3; 32], network_id).expect("identity");
        let underlay: Multiaddr = "/ip4/127.0.0.1/tcp/1634".parse().expect("multiaddr");
        let node = LocalNode::new(identity, host.peer_id(), true, "bee".into(), &[underlay])
            .expect("settings");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        Bee {
            runtime,
            host,
            events,
            node: Arc::new(node),
        }
    }

    /// The next host event that `pick` wants, skipping others.
    pub fn wait_for<T>(&mut self, mut pick: impl FnMut(HostEvent) -> Option<T>) -> T {
        let events = &mut self.events;
        self.runtime.block_on(async {
            tokio::time::timeout(WAIT, async {
                loop {
                    let event = events.recv().await.expect("the bee host runs");
                    if let Some(found) = pick(event) {
                        return found;
                    }
                }
            })
            .await
            .expect("the event within WAIT")
        })
    }

    pub fn connected(&mut self, to: PeerId) {
        self.wait_for(|event| match event {
            HostEvent::ConnectionEstablished { peer, .. } if peer == to => Some(()),
            _ => None,
        });
    }

    pub fn open(&self, peer: PeerId, protocol: &'static str) -> StreamPipe {
        let handle = self.host.handle();
        self.runtime
            .block_on(handle.open_stream(peer, StreamProtocol::new(protocol)))
            .expect("stream opened")
    }

    /// Bee's handshake as the dialer with the broker; the broker's side of it.
    pub fn dial_handshake(&self, broker: &P2pBroker) -> Peer {
        let mut pipe = self.open(broker.peer, HANDSHAKE_PROTOCOL);
        let (handshake, syn) = Handshake::dial(
            Arc::clone(&self.node),
            broker.peer,
            std::slice::from_ref(&broker.addr),
        );
        self.runtime
            .block_on(drive(&mut pipe, handshake, Some(syn)))
            .expect("handshake completed")
    }

    /// Where the host listens, with its peer id: how a light broker dials it.
    pub fn listening(&mut self) -> Multiaddr {
        let peer = self.host.peer_id();
        self.wait_for(|event| match event {
            HostEvent::Listening { address } => Some(address.with(Protocol::P2p(peer))),
            _ => None,
        })
    }

    /// Dials the broker once (no redial: the node is not configured with it) and waits for
    /// the connection.
    pub fn dial_once(&mut self, broker: &P2pBroker) {
        let target = broker.addr.clone().with(Protocol::P2p(broker.peer));
        self.runtime
            .block_on(self.host.handle().dial(target))
            .expect("the bee host runs");
        self.connected(broker.peer);
    }

    /// The broker dialed us and leads the handshake: its stream arrives and we respond.
    pub fn respond_handshake(&mut self, broker: &P2pBroker) -> Peer {
        let mut pipe = self.handshake_stream();
        let remote = std::slice::from_ref(&broker.addr);
        let handshake = Handshake::respond(Arc::clone(&self.node), broker.peer, remote);
        self.runtime
            .block_on(drive(&mut pipe, handshake, None))
            .expect("handshake completed")
    }

    /// The next handshake stream the broker opens to us.
    pub fn handshake_stream(&mut self) -> StreamPipe {
        self.wait_for(|event| match event {
            HostEvent::StreamOpened(pipe) if pipe.protocol.as_ref() == HANDSHAKE_PROTOCOL => {
                Some(pipe)
            }
            _ => None,
        })
    }

    /// Whether the host reported a connection to `to` closed, among the events not read yet.
    pub fn lost(&mut self, to: PeerId) -> bool {
        let mut lost = false;
        while let Ok(event) = self.events.try_recv() {
            lost |= matches!(event, HostEvent::ConnectionClosed { peer, .. } if peer == to);
        }
        lost
    }

    /// A pubsub stream after bee's headers exchange (we opened it: our headers first).
    pub fn pubsub(&self, broker: PeerId) -> (StreamPipe, BytesMut) {
        self.pubsub_like(broker, PUBSUB)
    }

    /// Writes `bytes` on `pipe`.
    pub fn send(&self, pipe: &StreamPipe, bytes: Bytes) {
        self.runtime
            .block_on(pipe.outbound.send(bytes))
            .expect("stream open");
    }

    /// The next BPS frame body on `pipe`.
    pub fn frame(&self, pipe: &mut StreamPipe, buf: &mut BytesMut) -> Bytes {
        self.runtime.block_on(read_until(pipe, buf, |buf| {
            next_frame(buf, 64 * 1024).expect("a frame")
        }))
    }

    /// Whether `pipe`'s inbound side ends (a reset or FIN) within `WAIT`.
    pub fn ends(&self, pipe: &mut StreamPipe) -> bool {
        self.runtime.block_on(async {
            tokio::time::timeout(WAIT, async { while pipe.inbound.recv().await.is_some() {} })
                .await
                .is_ok()
        })
    }
}

impl Bee {
    /// Opens a control stream, does bee's headers exchange, sends `message` and expects the
    /// broker to close the stream in order (a FIN, not a reset).
    pub fn control_stream(&self, broker: PeerId, protocol: &'static str, message: Bytes) {
        let (mut pipe, _) = self.pubsub_like(broker, protocol);
        self.send(&pipe, message);
        assert!(self.ends(&mut pipe), "{protocol}: closed after its message");
    }

    /// A stream of `protocol` after bee's headers exchange (we opened it: our headers first).
    pub fn pubsub_like(&self, broker: PeerId, protocol: &'static str) -> (StreamPipe, BytesMut) {
        let mut pipe = self.open(broker, protocol);
        let mut buf = BytesMut::new();
        self.runtime.block_on(async {
            pipe.outbound
                .send(empty_headers())
                .await
                .expect("send headers");
            read_until(&mut pipe, &mut buf, |buf| {
                read_headers(buf).expect("headers")
            })
            .await;
        });
        (pipe, buf)
    }
}

/// Reads chunks into `buf` until `parse` finds something.
pub async fn read_until<T>(
    pipe: &mut StreamPipe,
    buf: &mut BytesMut,
    mut parse: impl FnMut(&mut BytesMut) -> Option<T>,
) -> T {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(found) = parse(buf) {
                return found;
            }
            let chunk = pipe.inbound.recv().await.expect("the stream ended");
            buf.extend_from_slice(&chunk);
        }
    })
    .await
    .expect("within WAIT")
}

/// Runs a handshake state machine over `pipe`.
pub async fn drive(
    pipe: &mut StreamPipe,
    mut handshake: Handshake,
    first: Option<Bytes>,
) -> Result<Peer, String> {
    if let Some(syn) = first {
        pipe.outbound.send(syn).await.map_err(|e| e.to_string())?;
    }
    let mut buf = BytesMut::new();
    loop {
        match handshake
            .feed(&mut buf, unix_now())
            .map_err(|e| e.to_string())?
        {
            Step::NeedMore => {
                let chunk = tokio::time::timeout(WAIT, pipe.inbound.recv())
                    .await
                    .map_err(|_| "no answer".to_owned())?
                    .ok_or("the stream ended")?;
                buf.extend_from_slice(&chunk);
            }
            Step::Send(bytes) => pipe.outbound.send(bytes).await.map_err(|e| e.to_string())?,
            Step::Done(completed) => {
                if let Some(ack) = completed.send {
                    pipe.outbound.send(ack).await.map_err(|e| e.to_string())?;
                }
                return Ok(completed.peer);
            }
        }
    }
}

/// Joins `spec` as `publisher` on a pubsub stream and publishes `payloads`; the DATA frames
/// sent.
pub fn publish_over_p2p(
    bee: &Bee,
    pipe: &mut StreamPipe,
    buf: &mut BytesMut,
    spec: &Spec,
    publisher: &SigningKey,
    payloads: &[&[u8]],
) -> Vec<Bytes> {
    bee.send(pipe, encode_frame(&spec.to_join(&publisher.address())));
    let ack = decode_ack(bee.frame(pipe, buf)).expect("an Ack");
    let mut sender = publisher_after(spec, publisher, &ack);
    let (frames, data) = signed_frames(&mut sender, payloads);
    for frame in frames {
        bee.send(pipe, frame);
    }
    data
}

/// After the handshake: a BPS publication over p2p reaches a TCP subscriber byte for byte.
pub fn publish_and_check(broker: &P2pBroker, bee: &Bee, spec_topic: u8) {
    let admin = key(1);
    let spec = explicit(spec_topic, &admin.address(), false);
    let mut viewer = broker.broker.join(&spec, &key(11).address());
    let (mut pipe, mut buf) = bee.pubsub(broker.peer);
    let payloads: [&[u8]; 2] = [b"hello from bee", &[9u8; 3000]];
    let sent = publish_over_p2p(bee, &mut pipe, &mut buf, &spec, &admin, &payloads);
    assert_eq!(sent.len(), 2);
    for (index, frame) in sent.iter().enumerate() {
        assert_eq!(recv(&mut viewer), body_of(frame), "delivery {index}");
    }
    let metrics = broker.broker.metrics();
    assert!(metrics["bps_transport_connections_accepted_total{transport=\"p2p\"}"] >= 1.0);
}
