//! Two hosts in one process on 127.0.0.1: a stream carries bytes both ways unchanged,
//! identify and ping run, a flood of streams on one connection is reset and counted while
//! the connection stays usable, an unread stream stops its writer instead of dropping
//! bytes, a configured peer is dialed, and connections over the connection bound or the
//! pending-per-IP bound are refused and counted.

use std::{num::NonZeroU32, path::PathBuf, time::Duration};

use bps_p2p::{
    Direction, HostEvent, HostStats, Multiaddr, P2pConfig, P2pHost, PeerId, StreamPipe,
    StreamProtocol, load_or_create,
};
use bytes::Bytes;
use tokio::sync::mpsc::{self, error::TrySendError};

/// Generous: the machine is shared and loaded; nothing here takes a second when idle.
const DEADLINE: Duration = Duration::from_secs(60);
const PUBSUB: &str = "/swarm/pubsub/1.0.0/pubsub";

struct Node {
    host: P2pHost,
    events: mpsc::Receiver<HostEvent>,
    addr: Multiaddr,
}

fn key_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bps-p2p-host-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("libp2p.key")
}

fn config(name: &str) -> P2pConfig {
    let mut config = P2pConfig::new(key_path(name));
    config.listen = vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()];
    config
}

async fn start(config: P2pConfig) -> Node {
    let (key, _) = load_or_create(&config.key_path).unwrap();
    let (host, mut events) = P2pHost::start(&config, key).unwrap();
    let addr = next(&mut events, |e| match e {
        HostEvent::Listening { address } => Some(address.clone()),
        _ => None,
    })
    .await;
    Node { host, events, addr }
}

/// The first event `pick` takes, skipping others, within the deadline.
async fn next<T>(
    events: &mut mpsc::Receiver<HostEvent>,
    mut pick: impl FnMut(&HostEvent) -> Option<T>,
) -> T {
    let found = async {
        loop {
            let event = events.recv().await.expect("the host stopped");
            if let Some(found) = pick(&event) {
                return found;
            }
        }
    };
    tokio::time::timeout(DEADLINE, found)
        .await
        .expect("no such event before the deadline")
}

async fn inbound_stream(events: &mut mpsc::Receiver<HostEvent>) -> StreamPipe {
    let found = async {
        loop {
            if let HostEvent::StreamOpened(pipe) = events.recv().await.expect("the host stopped") {
                return pipe;
            }
        }
    };
    tokio::time::timeout(DEADLINE, found)
        .await
        .expect("no stream before the deadline")
}

fn p2p_addr(node: &Node) -> Multiaddr {
    node.addr.clone().with_p2p(node.host.peer_id()).unwrap()
}

/// `a` dials `b`; both see the connection.
async fn connect(a: &mut Node, b: &mut Node) {
    a.host.handle().dial(p2p_addr(b)).await.unwrap();
    let b_id = b.host.peer_id();
    next(&mut a.events, |e| matches!(e, HostEvent::ConnectionEstablished { peer, direction: Direction::Outbound, .. } if *peer == b_id).then_some(())).await;
    next(&mut b.events, |e| {
        matches!(
            e,
            HostEvent::ConnectionEstablished {
                direction: Direction::Inbound,
                ..
            }
        )
        .then_some(())
    })
    .await;
}

/// Sends every chunk the stream reads back on it.
fn echo(mut pipe: StreamPipe) {
    tokio::spawn(async move {
        while let Some(chunk) = pipe.inbound.recv().await {
            if pipe.outbound.send(chunk).await.is_err() {
                return;
            }
        }
    });
}

/// Writes `data` in pieces and reads as many bytes back.
async fn round_trip(pipe: &mut StreamPipe, data: &[u8]) -> Vec<u8> {
    let writer = pipe.outbound.clone();
    let pieces: Vec<Bytes> = data.chunks(1000).map(Bytes::copy_from_slice).collect();
    tokio::spawn(async move {
        for piece in pieces {
            writer.send(piece).await.unwrap();
        }
    });
    let mut back = Vec::new();
    while back.len() < data.len() {
        let chunk = tokio::time::timeout(DEADLINE, pipe.inbound.recv())
            .await
            .unwrap()
            .expect("stream ended early");
        back.extend_from_slice(&chunk);
    }
    back
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[tokio::test]
async fn a_stream_echoes_byte_identical_and_identify_and_ping_run() {
    let mut a = start(config("echo-a")).await;
    let mut b = start(config("echo-b")).await;
    connect(&mut a, &mut b).await;
    let b_id = b.host.peer_id();
    let protocols = next(&mut a.events, |e| match e {
        HostEvent::Identified {
            peer,
            protocols,
            agent_version,
            ..
        } if *peer == b_id => {
            assert!(agent_version.starts_with("bps-broker/"));
            Some(protocols.clone())
        }
        _ => None,
    })
    .await;
    assert!(
        protocols.iter().any(|p| p == PUBSUB),
        "identify lists the stream protocols: {protocols:?}"
    );
    next(&mut a.events, |e| {
        matches!(e, HostEvent::Pong { peer, .. } if *peer == b_id).then_some(())
    })
    .await;

    let mut ours = a
        .host
        .handle()
        .open_stream(b_id, StreamProtocol::new(PUBSUB))
        .await
        .unwrap();
    let theirs = inbound_stream(&mut b.events).await;
    assert_eq!(
        (theirs.peer, theirs.protocol.as_ref(), theirs.direction),
        (a.host.peer_id(), PUBSUB, Direction::Inbound)
    );
    echo(theirs);
    let data = pattern(300_000);
    assert!(
        round_trip(&mut ours, &data).await == data,
        "the echo is byte-identical"
    );
}

#[tokio::test]
async fn a_stream_flood_is_reset_and_counted_and_the_connection_stays() {
    let mut b_config = config("flood-b");
    b_config.max_streams_per_connection = NonZeroU32::new(4).unwrap();
    let mut a = start(config("flood-a")).await;
    let mut b = start(b_config).await;
    connect(&mut a, &mut b).await;
    let b_id = b.host.peer_id();
    let mut streams = Vec::new();
    for _ in 0..12 {
        // Over the bound the open may succeed on our side (the peer resets it after
        // multistream-select) or fail: either way the peer keeps at most its bound.
        if let Ok(pipe) = a
            .host
            .handle()
            .open_stream(b_id, StreamProtocol::new(PUBSUB))
            .await
        {
            streams.push(pipe);
        }
    }
    let mut accepted = Vec::new();
    while HostStats::get(&b.host.stats().streams_refused) == 0 || accepted.len() < 4 {
        accepted.push(inbound_stream(&mut b.events).await);
        assert!(
            accepted.len() <= 4,
            "more streams than the bound were accepted"
        );
    }
    // The connection is intact: the first stream still echoes.
    let first = accepted.remove(0);
    echo(first);
    let data = pattern(10_000);
    assert!(round_trip(&mut streams[0], &data).await == data);
}

#[tokio::test]
async fn an_unread_stream_stops_its_writer_and_loses_no_byte() {
    let mut a = start(config("bp-a")).await;
    let mut b = start(config("bp-b")).await;
    connect(&mut a, &mut b).await;
    let ours = a
        .host
        .handle()
        .open_stream(b.host.peer_id(), StreamProtocol::new(PUBSUB))
        .await
        .unwrap();
    let mut theirs = inbound_stream(&mut b.events).await;
    // Write until the host refuses more: the peer's unread chunks, yamux's window and our
    // queue are all full, so the stream is not read beyond its bounds.
    let mut sent = Vec::new();
    let mut n: u32 = 0;
    let full = tokio::time::timeout(DEADLINE, async {
        loop {
            let piece = Bytes::from(n.to_be_bytes().repeat(256));
            match ours.outbound.try_send(piece.clone()) {
                Ok(()) => {
                    sent.extend_from_slice(&piece);
                    n += 1;
                }
                Err(TrySendError::Full(_)) => break,
                Err(TrySendError::Closed(_)) => panic!("the stream closed"),
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        full.is_ok(),
        "an unread stream never filled its writer's queue"
    );
    drop(ours.outbound);
    let mut got = Vec::new();
    while let Some(chunk) = tokio::time::timeout(DEADLINE, theirs.inbound.recv())
        .await
        .unwrap()
    {
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "every byte arrived, in order");
}

#[tokio::test]
async fn a_configured_peer_is_dialed() {
    let mut b = start(config("dial-b")).await;
    let mut a_config = config("dial-a");
    a_config.listen.clear();
    a_config.dial = vec![p2p_addr(&b)];
    let (key, _) = load_or_create(&a_config.key_path).unwrap();
    let (a, mut a_events) = P2pHost::start(&a_config, key).unwrap();
    let b_id: PeerId = b.host.peer_id();
    next(&mut a_events, |e| {
        matches!(e, HostEvent::ConnectionEstablished { peer, .. } if *peer == b_id).then_some(())
    })
    .await;
    next(&mut b.events, |e| {
        matches!(e, HostEvent::ConnectionEstablished { peer, .. } if *peer == a.peer_id())
            .then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_configured_peer_lost_is_dialed_again() {
    let b_config = config("redial-b");
    let b = start(b_config.clone()).await;
    let b_id = b.host.peer_id();
    let mut a_config = config("redial-a");
    a_config.listen.clear();
    a_config.dial = vec![p2p_addr(&b)];
    let (key, _) = load_or_create(&a_config.key_path).unwrap();
    let (_a, mut a_events) = P2pHost::start(&a_config, key).unwrap();
    let established = |e: &HostEvent| {
        matches!(e, HostEvent::ConnectionEstablished { peer, .. } if *peer == b_id).then_some(())
    };
    next(&mut a_events, established).await;
    // B stops and comes back on the same address with the same key: A redials it.
    let b_addr = b.addr.clone();
    b.host.shutdown();
    next(&mut a_events, |e| {
        matches!(e, HostEvent::ConnectionClosed { peer, .. } if *peer == b_id).then_some(())
    })
    .await;
    let mut b_again = b_config;
    b_again.listen = vec![b_addr];
    let _b_again = start(b_again).await;
    next(&mut a_events, established).await;
}

/// Polls `counter` until it is at least `at_least`, within the deadline.
async fn counted(counter: &std::sync::atomic::AtomicU64, at_least: u64) {
    let reached = async {
        while HostStats::get(counter) < at_least {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(DEADLINE, reached)
        .await
        .expect("the counter did not reach its figure before the deadline");
}

#[tokio::test]
async fn a_connection_over_the_bound_is_refused_and_counted_and_the_first_stays() {
    let mut b_config = config("limit-b");
    b_config.max_connections = NonZeroU32::new(1).unwrap();
    let mut a = start(config("limit-a")).await;
    let mut b = start(b_config).await;
    let c = start(config("limit-c")).await;
    connect(&mut a, &mut b).await;
    c.host.handle().dial(p2p_addr(&b)).await.unwrap();
    counted(&b.host.stats().connections_refused_limit, 1).await;
    assert_eq!(
        HostStats::get(&b.host.stats().connections_refused_pending_per_ip),
        0
    );
    // The connection within the bound still carries a stream.
    let mut pipe = a
        .host
        .handle()
        .open_stream(b.host.peer_id(), StreamProtocol::new(PUBSUB))
        .await
        .unwrap();
    echo(inbound_stream(&mut b.events).await);
    let data = pattern(10_000);
    assert!(round_trip(&mut pipe, &data).await == data);
}

#[tokio::test]
async fn connections_over_the_pending_per_ip_bound_are_refused_and_counted() {
    let mut b_config = config("pending-b");
    b_config.max_pending_per_ip = NonZeroU32::new(2).unwrap();
    let b = start(b_config).await;
    let port = b
        .addr
        .iter()
        .find_map(|part| match part {
            bps_p2p::Protocol::Tcp(port) => Some(port),
            _ => None,
        })
        .unwrap();
    // Plain TCP connections that never speak multistream-select stay in the upgrade.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap(),
        );
    }
    counted(&b.host.stats().connections_refused_pending_per_ip, 2).await;
    assert_eq!(HostStats::get(&b.host.stats().connections_refused_limit), 0);
}

#[tokio::test]
async fn bursts_of_streams_from_several_peers_at_once_all_arrive() {
    const PEERS: usize = 6;
    const STREAMS_PER_PEER: usize = 8;
    let mut b = start(config("burst-b")).await;
    let mut peers = Vec::new();
    for index in 0..PEERS {
        let mut a = start(config(&format!("burst-a{index}"))).await;
        connect(&mut a, &mut b).await;
        peers.push(a);
    }
    let b_id = b.host.peer_id();
    let handles: Vec<_> = peers.iter().map(|a| a.host.handle()).collect();
    let opens = handles.iter().flat_map(|handle| {
        (0..STREAMS_PER_PEER).map(|_| handle.open_stream(b_id, StreamProtocol::new(PUBSUB)))
    });
    let opened: Vec<StreamPipe> = futures::future::join_all(opens)
        .await
        .into_iter()
        .map(|opened| opened.expect("opened"))
        .collect();
    let mut arrived = Vec::new();
    while arrived.len() < opened.len() {
        arrived.push(inbound_stream(&mut b.events).await);
    }
    assert_eq!(HostStats::get(&b.host.stats().inbound_dropped), 0);
    assert_eq!(
        HostStats::get(&b.host.stats().streams_inbound),
        (PEERS * STREAMS_PER_PEER) as u64
    );
}
