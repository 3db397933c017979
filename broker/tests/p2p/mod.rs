//! Shared by the black-box tests of the libp2p carrier (`p2p_bee`, a bee node played
//! in-process; `p2pd_bee`, a bee node played by go-libp2p's daemon): the broker started with
//! `[p2p]` and its libp2p key made first (so its peer id is known), and a BPS publisher's
//! signed frames for a stream, whatever carries them.
//! Never: speaks libp2p or bee's protocols itself; each test's bee node does.
#![allow(dead_code)] // each including test uses a different subset

pub mod bee;

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use bps_client::publisher::{Publisher, PublisherConfig};
use bps_p2p::{Multiaddr, PeerId};
use bps_proto::{Ack, Spec, Status};
use bps_verify::SigningKey;
use bytes::Bytes;

use crate::support::Broker;

pub const PUBSUB: &str = "/swarm/pubsub/1.0.0/pubsub";
pub const NETWORK: u64 = 10;
/// Enough streams per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bps-p2p-bee-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

pub fn unix_now() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    i64::try_from(since.as_secs()).expect("seconds")
}

/// The broker with p2p enabled, and how a bee node reaches it.
pub struct P2pBroker {
    pub broker: Broker,
    pub peer: PeerId,
    pub addr: Multiaddr,
    /// Where its key files and config are.
    pub dir: PathBuf,
}

/// Starts the broker with `[p2p]` as given (`dial`: the peers a light broker dials; `extra`:
/// more lines of the section, then maybe other sections): its libp2p key made here first, so
/// its peer id is known; it listens on a free loopback port.
pub fn start_broker(name: &str, mode: &str, dial: &[Multiaddr], extra: &str) -> P2pBroker {
    let dir = temp_dir(name);
    let key_path = dir.join("libp2p.key");
    let (keypair, _) = bps_p2p::load_or_create(&key_path).expect("broker key");
    let peer = keypair.public().to_peer_id();
    let port = free_port();
    let dial: Vec<String> = dial.iter().map(|addr| format!("\"{addr}\"")).collect();
    let config = format!(
        "[p2p]\nenabled = true\nlisten = [\"/ip4/127.0.0.1/tcp/{port}\"]\nmode = \"{mode}\"\n\
         network_id = {NETWORK}\nswarm_key_file = \"{}\"\nlibp2p_key_file = \"{}\"\n\
         dial = [{}]\nwelcome_message = \"bps\"\n{extra}\n",
        dir.join("swarm.key").display(),
        key_path.display(),
        dial.join(", "),
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

/// A publisher of `spec` as `key` on a stream whose Join was answered with `ack`.
pub fn publisher_after(spec: &Spec, key: &SigningKey, ack: &Ack) -> Publisher {
    assert_eq!(ack.status, Status::Ok as i32, "the publisher's Join");
    let challenge = ack.challenge.as_ref().try_into().expect("32 bytes");
    let mut sender =
        Publisher::new(*spec, key.clone(), PublisherConfig::default()).expect("key fits");
    sender.begin_session(challenge);
    sender
}

/// `sender`'s next frames for `payloads`: everything to send in order (its claim first, on
/// the first call), and the DATA frames among them (what subscribers receive).
pub fn signed_frames(sender: &mut Publisher, payloads: &[&[u8]]) -> (Vec<Bytes>, Vec<Bytes>) {
    for payload in payloads {
        sender
            .enqueue_data(Bytes::copy_from_slice(payload))
            .expect("queue DATA");
    }
    let (mut frames, mut data) = (Vec::new(), Vec::new());
    while let Some(outgoing) = sender.next_frame().expect("sign") {
        frames.push(outgoing.signed.frame.clone());
        sender.mark_sent();
        if outgoing.kind == bps_proto::Kind::Data {
            data.push(outgoing.signed.frame);
        }
    }
    (frames, data)
}
