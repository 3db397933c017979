//! Interop with an independent libp2p: the go-libp2p daemon `p2pd` (as bee runs go-libp2p),
//! driven over its control socket (the client in `support/p2pd.rs`), with a P-256 identity
//! like bee's. For Noise alone and for TLS alone, and each dial direction:
//! the connection comes up, identify runs both ways, pings are answered both ways, and a
//! `/swarm/pubsub/1.0.0/pubsub` stream carries bytes both ways byte-identical (an echo).
//!
//! Needs the binary: `P2PD=$(scripts/p2pd) cargo test -p bps-p2p --test interop --
//! --ignored`, which `scripts/p2p-interop` runs (in `.ci/run`). Streams are ended by
//! dropping them, never by a half-close: p2pd resets a stream whose other side half-closes,
//! which is p2pd's behaviour, not a fault.

#[path = "support/p2pd.rs"]
mod p2pd;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use bps_p2p::{
    Direction, HostEvent, Keypair, Multiaddr, P2pConfig, P2pHost, PeerId, StreamPipe,
    StreamProtocol,
};
use p2pd::{Daemon, Security};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    sync::mpsc,
};

/// Generous: the machine is shared and loaded.
const DEADLINE: Duration = Duration::from_secs(60);
const PUBSUB: &str = "/swarm/pubsub/1.0.0/pubsub";
const PING: &str = "/ipfs/ping/1.0.0";
/// Bytes echoed each way per stream: many yamux frames and Noise or TLS records.
const ECHO_BYTES: usize = 200_000;

fn temp_dir(name: &str) -> PathBuf {
    // Short: a unix socket path has at most 107 bytes.
    let dir = std::env::temp_dir().join(format!("p2pd-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Registers a pubsub handler in p2pd that echoes each stream back.
async fn echo_handler(daemon: &Daemon, dir: &Path) {
    let listener = daemon.handle(&dir.join("handler.sock"), &[PUBSUB]).await;
    tokio::spawn(async move {
        loop {
            let (_, mut conn) = p2pd::accept_stream(&listener).await;
            tokio::spawn(async move {
                let (mut read, mut write) = conn.split();
                let _ = tokio::io::copy(&mut read, &mut write).await;
            });
        }
    });
}

/// Our host, listening on 127.0.0.1.
async fn start_host(dir: &Path) -> (P2pHost, mpsc::Receiver<HostEvent>, Multiaddr) {
    let mut config = P2pConfig::new(dir.join("host.key"));
    config.listen = vec!["/ip4/127.0.0.1/tcp/0".parse().unwrap()];
    let (key, _): (Keypair, bool) = bps_p2p::load_or_create(&config.key_path).unwrap();
    let (host, mut events) = P2pHost::start(&config, key).unwrap();
    let addr = next(&mut events, |e| match e {
        HostEvent::Listening { address } => Some(address.clone()),
        _ => None,
    })
    .await;
    (host, events, addr)
}

/// The first event `pick` takes, skipping others; streams opened meanwhile are kept.
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

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed)
                .wrapping_add((i >> 9) as u8)
        })
        .collect()
}

/// Our stream to p2pd's echo handler returns what we wrote.
async fn echo_through_daemon(pipe: &mut StreamPipe) {
    let data = pattern(ECHO_BYTES, 1);
    let writer = pipe.outbound.clone();
    let pieces: Vec<bytes::Bytes> = data
        .chunks(4096)
        .map(bytes::Bytes::copy_from_slice)
        .collect();
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
            .expect("p2pd ended the stream");
        back.extend_from_slice(&chunk);
    }
    assert!(back == data, "p2pd's echo of our bytes differs");
}

/// p2pd opens a stream to us on `protocol`; what it writes comes back unchanged.
async fn daemon_stream_echoes(daemon: &Daemon, host: PeerId, protocol: &str, data: &[u8]) {
    let mut conn = daemon.open_stream(host, protocol).await;
    let (mut read, mut write) = conn.split();
    let mut back = vec![0; data.len()];
    let (written, read) = tokio::time::timeout(DEADLINE, async {
        tokio::join!(write.write_all(data), read.read_exact(&mut back))
    })
    .await
    .expect("p2pd's stream got no echo before the deadline");
    written.unwrap();
    read.unwrap();
    assert!(
        back == data,
        "our echo of p2pd's bytes on {protocol} differs"
    );
}

/// Echoes the next inbound stream the host hands over.
fn echo_next_stream(mut events: mpsc::Receiver<HostEvent>) {
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if let HostEvent::StreamOpened(mut pipe) = event {
                tokio::spawn(async move {
                    while let Some(chunk) = pipe.inbound.recv().await {
                        if pipe.outbound.send(chunk).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
}

async fn interop(security: Security, we_dial: bool) {
    let dir = temp_dir(&format!("{security:?}-{we_dial}"));
    let daemon = Daemon::start(&p2pd::binary(), &dir, security).await;
    echo_handler(&daemon, &dir).await;
    let (host, mut events, addr) = start_host(&dir).await;
    if we_dial {
        host.handle()
            .dial(daemon.addr.clone().with_p2p(daemon.peer).unwrap())
            .await
            .unwrap();
    } else {
        daemon.connect(host.peer_id(), &addr).await;
    }
    let expected = if we_dial {
        Direction::Outbound
    } else {
        Direction::Inbound
    };
    let direction = next(&mut events, |e| match e {
        HostEvent::ConnectionEstablished {
            peer, direction, ..
        } if *peer == daemon.peer => Some(*direction),
        _ => None,
    })
    .await;
    assert_eq!(direction, expected);
    identify_and_ping(&mut events, daemon.peer).await;
    let mut ours = host
        .handle()
        .open_stream(daemon.peer, StreamProtocol::new(PUBSUB))
        .await
        .unwrap();
    echo_through_daemon(&mut ours).await;
    echo_next_stream(events);
    daemon_stream_echoes(&daemon, host.peer_id(), PUBSUB, &pattern(ECHO_BYTES, 2)).await;
    // A go-libp2p ping of us: 32 bytes, echoed by our ping behaviour.
    daemon_stream_echoes(&daemon, host.peer_id(), PING, &pattern(32, 3)).await;
    let dialer = if we_dial { "bps-p2p" } else { "p2pd" };
    let p2pd = daemon.peer;
    println!(
        "interop {security:?}, {dialer} dials, p2pd {p2pd} (P-256): connection, identify, ping, echo both ways: ok"
    );
    drop(ours);
    host.shutdown();
    drop(daemon);
    let _ = std::fs::remove_dir_all(dir);
}

/// Identify both ways (p2pd's answer, and ours sent to it) and p2pd's pong to our ping.
async fn identify_and_ping(events: &mut mpsc::Receiver<HostEvent>, daemon: PeerId) {
    let (mut identified, mut sent, mut pong) = (false, false, false);
    next(events, |e| {
        match e {
            HostEvent::Identified {
                peer, protocols, ..
            } if *peer == daemon => {
                assert!(
                    protocols.iter().any(|p| p == PING),
                    "p2pd lists ping: {protocols:?}"
                );
                identified = true;
            }
            HostEvent::IdentifySent { peer } if *peer == daemon => sent = true,
            HostEvent::Pong { peer, .. } if *peer == daemon => pong = true,
            _ => {}
        }
        (identified && sent && pong).then_some(())
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the go-libp2p daemon: scripts/p2p-interop"]
async fn noise_we_dial_p2pd() {
    interop(Security::Noise, true).await;
}

#[tokio::test]
#[ignore = "needs the go-libp2p daemon: scripts/p2p-interop"]
async fn noise_p2pd_dials_us() {
    interop(Security::Noise, false).await;
}

#[tokio::test]
#[ignore = "needs the go-libp2p daemon: scripts/p2p-interop"]
async fn tls_we_dial_p2pd() {
    interop(Security::Tls, true).await;
}

#[tokio::test]
#[ignore = "needs the go-libp2p daemon: scripts/p2p-interop"]
async fn tls_p2pd_dials_us() {
    interop(Security::Tls, false).await;
}
