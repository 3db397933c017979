//! Black-box: the libp2p carrier (issue 20) against the real binary, with a bee node played
//! in-process by bps-p2p (its libp2p host) and bps-bee (its handshake and headers): the bee
//! node dials the broker (full mode) or the broker dials it (light mode), bee's handshake
//! runs, a `/swarm/pubsub/1.0.0/pubsub` stream does bee's headers exchange and then BPS as
//! TCP carries it, and a TCP subscriber of the same cohort receives the bee node's
//! publication byte for byte. Also: a pubsub stream before the handshake is reset, and a
//! peer on another network is refused.

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bps_bee::pb::{Ack, AnnouncePaymentThreshold, Peers, SynAck};
use bps_bee::{
    HANDSHAKE_PROTOCOL, HIVE_PROTOCOL, Handshake, Identity, LocalNode, PRICING_PROTOCOL, Peer,
    Step, empty_headers, read_headers, read_message, write_message,
};
use bps_client::publisher::{Publisher, PublisherConfig};
use bps_p2p::{
    HostEvent, Multiaddr, P2pConfig, P2pHost, PeerId, Protocol, StreamPipe, StreamProtocol,
};
use bps_proto::{Spec, Status, decode_ack, encode_frame, next_frame};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};
use support::{Broker, WAIT, body_of, explicit, key, recv};
use tokio::sync::mpsc;

const PUBSUB: &str = "/swarm/pubsub/1.0.0/pubsub";
const NETWORK: u64 = 10;
/// Enough streams per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bps-p2p-bee-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

fn unix_now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    i64::try_from(since.as_secs()).expect("seconds")
}

/// The broker with p2p enabled, and how a bee node reaches it.
struct P2pBroker {
    broker: Broker,
    peer: PeerId,
    addr: Multiaddr,
    /// Where its key files and config are.
    dir: PathBuf,
}

/// Starts the broker with `[p2p]` as given (`extra`: more lines of it): its libp2p key made
/// here first, so its peer id is known; it listens on a free loopback port.
fn start_broker(name: &str, mode: &str, dial: Option<&Multiaddr>, extra: &str) -> P2pBroker {
    let dir = temp_dir(name);
    let key_path = dir.join("libp2p.key");
    let (keypair, _) = bps_p2p::load_or_create(&key_path).expect("broker key");
    let peer = keypair.public().to_peer_id();
    let port = free_port();
    let dial = dial.map_or(String::new(), |addr| format!("\"{addr}\""));
    let config = format!(
        "[p2p]\nenabled = true\nlisten = [\"/ip4/127.0.0.1/tcp/{port}\"]\nmode = \"{mode}\"\n\
         network_id = {NETWORK}\nswarm_key_file = \"{}\"\nlibp2p_key_file = \"{}\"\n\
         dial = [{dial}]\nwelcome_message = \"bps\"\n{extra}\n",
        dir.join("swarm.key").display(),
        key_path.display(),
    );
    let config_path = dir.join("broker.toml");
    std::fs::write(&config_path, config).expect("config");
    let path = config_path.to_str().expect("utf-8 path");
    let broker = Broker::start_with(&["--config", path], &[MANY_STREAMS_PER_PEER]);
    let addr = format!("/ip4/127.0.0.1/tcp/{port}")
        .parse()
        .expect("multiaddr");
    P2pBroker {
        broker,
        peer,
        addr,
        dir,
    }
}

/// A bee node: a libp2p host of its own and its handshake settings.
struct Bee {
    runtime: tokio::runtime::Runtime,
    host: P2pHost,
    events: mpsc::Receiver<HostEvent>,
    node: Arc<LocalNode>,
}

impl Bee {
    /// A bee node on `network_id`, listening on loopback and dialing `dial`.
    fn start(name: &str, network_id: u64, dial: Vec<Multiaddr>) -> Bee {
        let dir = temp_dir(name);
        let mut config = P2pConfig::new(dir.join("libp2p.key"));
        config.listen = vec!["/ip4/127.0.0.1/tcp/0".parse().expect("multiaddr")];
        config.dial = dial;
        let (keypair, _) = bps_p2p::load_or_create(&config.key_path).expect("bee key");
        let (host, events) = P2pHost::start(&config, keypair).expect("bee host");
        let identity = Identity::new(&key(77), [3; 32], network_id).expect("identity");
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
    fn wait_for<T>(&mut self, mut pick: impl FnMut(HostEvent) -> Option<T>) -> T {
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

    fn connected(&mut self, to: PeerId) {
        self.wait_for(|event| match event {
            HostEvent::ConnectionEstablished { peer, .. } if peer == to => Some(()),
            _ => None,
        });
    }

    fn open(&self, peer: PeerId, protocol: &'static str) -> StreamPipe {
        let handle = self.host.handle();
        self.runtime
            .block_on(handle.open_stream(peer, StreamProtocol::new(protocol)))
            .expect("stream opened")
    }

    /// Bee's handshake as the dialer with the broker; the broker's side of it.
    fn dial_handshake(&self, broker: &P2pBroker) -> Peer {
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

    /// A pubsub stream after bee's headers exchange (we opened it: our headers first).
    fn pubsub(&self, broker: PeerId) -> (StreamPipe, BytesMut) {
        self.pubsub_like(broker, PUBSUB)
    }

    /// Writes `bytes` on `pipe`.
    fn send(&self, pipe: &StreamPipe, bytes: Bytes) {
        self.runtime
            .block_on(pipe.outbound.send(bytes))
            .expect("stream open");
    }

    /// The next BPS frame body on `pipe`.
    fn frame(&self, pipe: &mut StreamPipe, buf: &mut BytesMut) -> Bytes {
        self.runtime.block_on(read_until(pipe, buf, |buf| {
            next_frame(buf, 64 * 1024).expect("a frame")
        }))
    }

    /// Whether `pipe`'s inbound side ends (a reset or FIN) within `WAIT`.
    fn ends(&self, pipe: &mut StreamPipe) -> bool {
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
    fn control_stream(&self, broker: PeerId, protocol: &'static str, message: Bytes) {
        let (mut pipe, _) = self.pubsub_like(broker, protocol);
        self.send(&pipe, message);
        assert!(self.ends(&mut pipe), "{protocol}: closed after its message");
    }

    /// A stream of `protocol` after bee's headers exchange (we opened it: our headers first).
    fn pubsub_like(&self, broker: PeerId, protocol: &'static str) -> (StreamPipe, BytesMut) {
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
async fn read_until<T>(
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
async fn drive(
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

/// Joins `spec` as `publisher` on a pubsub stream and publishes `payloads`; the frames sent.
fn publish_over_p2p(
    bee: &Bee,
    pipe: &mut StreamPipe,
    buf: &mut BytesMut,
    spec: &Spec,
    publisher: &SigningKey,
    payloads: &[&[u8]],
) -> Vec<Bytes> {
    bee.send(pipe, encode_frame(&spec.to_join(&publisher.address())));
    let ack = decode_ack(bee.frame(pipe, buf)).expect("an Ack");
    assert_eq!(ack.status, Status::Ok as i32, "the Join over p2p");
    let challenge = ack.challenge.as_ref().try_into().expect("32 bytes");
    let mut sender =
        Publisher::new(*spec, publisher.clone(), PublisherConfig::default()).expect("key fits");
    sender.begin_session(challenge);
    for payload in payloads {
        sender
            .enqueue_data(Bytes::copy_from_slice(payload))
            .expect("queue DATA");
    }
    let mut sent = Vec::new();
    while let Some(outgoing) = sender.next_frame().expect("sign") {
        bee.send(pipe, outgoing.signed.frame.clone());
        sender.mark_sent();
        if outgoing.kind == bps_proto::Kind::Data {
            sent.push(outgoing.signed.frame);
        }
    }
    sent
}

/// After the handshake: a BPS publication over p2p reaches a TCP subscriber byte for byte.
fn publish_and_check(broker: &P2pBroker, bee: &Bee, spec_topic: u8) {
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

#[test]
fn full_mode_a_bee_node_dials_handshakes_and_publishes_to_a_tcp_subscriber() {
    let broker = start_broker("full", "full", None, "");
    let mut bee = Bee::start(
        "full-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let peer = bee.dial_handshake(&broker);
    assert!(
        peer.full_node,
        "the broker says it is a full node in full mode"
    );
    assert_eq!(&peer.welcome_message[..], b"bps");
    publish_and_check(&broker, &bee, 1);
    let threshold = AnnouncePaymentThreshold {
        payment_threshold: Bytes::from_static(&[0x01, 0x00]),
    };
    bee.control_stream(broker.peer, PRICING_PROTOCOL, write_message(&threshold));
    let record = bee.node.identity().sign(
        &[broker.addr.clone().with(Protocol::P2p(broker.peer))],
        unix_now(),
        None,
    );
    let peers = Peers {
        peers: vec![record],
    };
    bee.control_stream(broker.peer, HIVE_PROTOCOL, write_message(&peers));
    let log = broker.broker.log();
    assert!(log.contains("p2p host started"), "{log}");
    assert!(
        log.contains(&broker.peer.to_string()),
        "the peer id is logged: {log}"
    );
    // The Swarm key the broker created, readable by its owner alone.
    let swarm_key = std::fs::metadata(broker.dir.join("swarm.key")).expect("created");
    assert_eq!(swarm_key.len(), 32);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&swarm_key.permissions()) & 0o777,
        0o600
    );
    broker
        .broker
        .wait_metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}", 1);
    let metrics = broker.broker.metrics();
    assert_eq!(
        metrics["bps_p2p_connections_total{direction=\"inbound\"}"],
        1.0
    );
    for protocol in [PUBSUB, PRICING_PROTOCOL, HIVE_PROTOCOL] {
        let series = format!("bps_p2p_streams_total{{protocol=\"{protocol}\"}}");
        assert_eq!(metrics[&series], 1.0, "{series}");
    }
    assert_eq!(
        metrics["bps_p2p_streams_refused_total{reason=\"other\"}"],
        0.0
    );
    // The host handed over the four streams the bee node opened and opened none itself.
    assert_eq!(metrics["bps_p2p_host_streams_inbound_total"], 4.0);
    assert_eq!(metrics["bps_p2p_host_streams_outbound_total"], 0.0);
    assert_eq!(metrics["bps_p2p_host_streams_refused_total"], 0.0);
}

#[test]
fn light_mode_the_broker_dials_a_listening_bee_node() {
    let mut bee = Bee::start("light-bee", NETWORK, Vec::new());
    let listening = bee.wait_for(|event| match event {
        HostEvent::Listening { address } => Some(address),
        _ => None,
    });
    let bee_addr = listening.with(Protocol::P2p(bee.host.peer_id()));
    let broker = start_broker("light", "light", Some(&bee_addr), "");
    // The broker dials and leads the handshake; the bee node responds.
    let mut pipe = bee.wait_for(|event| match event {
        HostEvent::StreamOpened(pipe) if pipe.protocol.as_ref() == HANDSHAKE_PROTOCOL => Some(pipe),
        _ => None,
    });
    let remote = broker.addr.clone();
    let handshake = Handshake::respond(Arc::clone(&bee.node), broker.peer, &[remote]);
    let peer = bee
        .runtime
        .block_on(drive(&mut pipe, handshake, None))
        .expect("handshake completed");
    assert!(!peer.full_node, "a light broker says so");
    broker
        .broker
        .wait_metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}", 1);
    publish_and_check(&broker, &bee, 2);
    let metrics = broker.broker.metrics();
    assert_eq!(
        metrics["bps_p2p_connections_total{direction=\"outbound\"}"],
        1.0
    );
}

#[test]
fn a_pubsub_stream_before_the_handshake_is_reset() {
    let broker = start_broker("early", "full", None, "");
    let mut bee = Bee::start(
        "early-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let mut pipe = bee.open(broker.peer, PUBSUB);
    bee.send(&pipe, empty_headers());
    assert!(bee.ends(&mut pipe), "the early pubsub stream was reset");
    broker
        .broker
        .wait_metric("bps_p2p_streams_refused_total{reason=\"no_handshake\"}", 1);
    // The handshake still works afterwards, and then a pubsub stream does too.
    bee.dial_handshake(&broker);
    publish_and_check(&broker, &bee, 3);
}

#[test]
fn a_pubsub_stream_opened_while_the_handshake_runs_waits_for_its_end() {
    let broker = start_broker("racing", "full", None, "");
    let mut bee = Bee::start(
        "racing-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let mut handshake_pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    let (mut handshake, syn) = Handshake::dial(
        Arc::clone(&bee.node),
        broker.peer,
        std::slice::from_ref(&broker.addr),
    );
    bee.send(&handshake_pipe, syn);
    let ack = bee.runtime.block_on(async {
        let mut buf = BytesMut::new();
        loop {
            match handshake
                .feed(&mut buf, unix_now())
                .expect("the broker's SynAck")
            {
                Step::NeedMore => {
                    let chunk = handshake_pipe.inbound.recv().await.expect("open");
                    buf.extend_from_slice(&chunk);
                }
                Step::Done(done) => return done.send.expect("the dialer's Ack"),
                other @ Step::Send(_) => panic!("the dialer sends nothing here: {other:?}"),
            }
        }
    });
    // The pubsub stream comes before our last handshake message.
    let mut pipe = bee.open(broker.peer, PUBSUB);
    bee.send(&pipe, empty_headers());
    std::thread::sleep(support::QUIET);
    bee.send(&handshake_pipe, ack);
    let mut buf = BytesMut::new();
    bee.runtime.block_on(read_until(&mut pipe, &mut buf, |buf| {
        read_headers(buf).expect("headers")
    }));
    let admin = key(1);
    let spec = explicit(5, &admin.address(), false);
    let mut viewer = broker.broker.join(&spec, &key(11).address());
    let sent = publish_over_p2p(&bee, &mut pipe, &mut buf, &spec, &admin, &[b"raced"]);
    assert_eq!(recv(&mut viewer), body_of(&sent[0]));
    assert_eq!(
        broker
            .broker
            .metric("bps_p2p_streams_refused_total{reason=\"no_handshake\"}"),
        0
    );
}

#[test]
fn a_peer_on_another_network_is_refused() {
    let broker = start_broker("network", "full", None, "");
    let mut bee = Bee::start(
        "network-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    let mut pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    let (_, syn) = Handshake::dial(
        Arc::clone(&bee.node),
        broker.peer,
        std::slice::from_ref(&broker.addr),
    );
    bee.send(&pipe, syn);
    let mut buf = BytesMut::new();
    let syn_ack: SynAck = bee.runtime.block_on(read_until(&mut pipe, &mut buf, |buf| {
        read_message(buf, "SynAck").expect("a SynAck")
    }));
    assert_eq!(syn_ack.ack.expect("the broker's Ack").network_id, NETWORK);
    // Our Ack says we are on network 11, signed for it.
    let elsewhere = Identity::new(&key(77), [3; 32], 11).expect("identity");
    let underlay: Multiaddr = "/ip4/127.0.0.1/tcp/1634".parse().expect("multiaddr");
    let ack = Ack {
        address: Some(elsewhere.sign(
            &[underlay.with(Protocol::P2p(bee.host.peer_id()))],
            unix_now(),
            None,
        )),
        network_id: 11,
        full_node: true,
        welcome_message: Bytes::new(),
    };
    bee.send(&pipe, write_message(&ack));
    assert!(bee.ends(&mut pipe), "the handshake stream was reset");
    broker.broker.wait_metric(
        "bps_p2p_handshakes_total{outcome=\"failed\",reason=\"network_id\"}",
        1,
    );
    // The refused peer's connection is closed.
    bee.wait_for(|event| match event {
        HostEvent::ConnectionClosed { peer, .. } if peer == broker.peer => Some(()),
        _ => None,
    });
    assert!(
        broker
            .broker
            .metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}")
            == 0,
        "{}",
        broker.broker.log()
    );
}

#[test]
fn a_connection_without_a_handshake_is_closed_at_the_deadline() {
    let broker = start_broker("idle", "full", None, "handshake_deadline_ms = 300");
    let mut bee = Bee::start(
        "idle-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    // A handshake stream that never says anything is reset at the deadline too.
    let mut pipe = bee.open(broker.peer, HANDSHAKE_PROTOCOL);
    assert!(bee.ends(&mut pipe), "the silent handshake was reset");
    broker.broker.wait_metric(
        "bps_p2p_handshakes_total{outcome=\"failed\",reason=\"deadline\"}",
        1,
    );
    bee.wait_for(|event| match event {
        HostEvent::ConnectionClosed { peer, .. } if peer == broker.peer => Some(()),
        _ => None,
    });
    // The bee node redials (it is configured to); doing nothing, it is closed again.
    bee.connected(broker.peer);
    bee.wait_for(|event| match event {
        HostEvent::ConnectionClosed { peer, .. } if peer == broker.peer => Some(()),
        _ => None,
    });
    broker.broker.wait_metric(
        "bps_p2p_handshakes_total{outcome=\"failed\",reason=\"unhandshaken\"}",
        1,
    );
}

#[test]
fn a_bee_subscriber_that_reads_nothing_is_reset_as_a_slow_consumer() {
    let broker = start_broker(
        "slow",
        "full",
        None,
        "[limits]\noutbound_queue_frames_max = 8",
    );
    let mut bee = Bee::start(
        "slow-bee",
        NETWORK,
        vec![broker.addr.clone().with(Protocol::P2p(broker.peer))],
    );
    bee.connected(broker.peer);
    bee.dial_handshake(&broker);
    let admin = key(1);
    let spec = explicit(4, &admin.address(), false);
    let (mut pipe, mut buf) = bee.pubsub(broker.peer);
    bee.send(&pipe, encode_frame(&spec.to_join(&key(12).address())));
    let ack = decode_ack(bee.frame(&mut pipe, &mut buf)).expect("an Ack");
    assert_eq!(ack.status, Status::Ok as i32);
    // The bee node reads nothing more: its host's chunks, yamux's window, the broker's
    // outbound channel and then the port's queue fill, and R26 resets the stream.
    let mut session = broker.broker.join(&spec, &admin.address());
    let mut sender = support::publisher(&spec, &admin, &session);
    let payload = [5u8; 4000];
    let mut published = 0;
    while broker.broker.metric("bps_queue_resets_total") == 0 {
        assert!(published < 5000, "never reset\n{}", broker.broker.log());
        support::publish(&mut sender, &mut session, &[&payload[..]; 50]);
        published += 50;
    }
    assert!(
        bee.ends(&mut pipe),
        "the slow bee subscriber's stream was reset"
    );
    broker.broker.wait_metric(
        "bps_transport_connections_closed_total{transport=\"p2p\"}",
        1,
    );
}
