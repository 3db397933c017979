//! Black-box: the `bps` terminal client as a Swarm light node (issue 20,
//! item 5) against the real broker with `[p2p]` on: `bps pub` over libp2p reaches a TCP
//! `bps sub` and `bps sub` over libp2p gets a TCP `bps pub`'s messages, byte for byte and
//! verified; a client on another Swarm network is told which network id to pass and
//! exits 1; a target without a peer id is bad input. (`bps-bench --transport p2p` is
//! checked in the bench's own tests, `bench/tests/bench_p2p.rs`.)
//!
//! The `bps` binary comes from `support::cli::bps_binary`.

mod p2p;
mod support;

use std::process::{Command, Output};

use serde_json::Value;
use support::cli::{JsonSub, bps_binary};
use support::{Broker, key, topic};

/// How long a `bps` run may take (its own `--timeout-ms`).
const RUN_TIMEOUT_MS: &str = "30000";

/// The broker with `[p2p]` in light mode (it accepts dials in either mode), and the
/// multiaddr `bps` is given for it.
struct P2pBroker {
    broker: Broker,
    multiaddr: String,
}

fn start_broker(name: &str) -> P2pBroker {
    let started = p2p::start_broker(&format!("client-{name}"), "light", &[], "");
    P2pBroker {
        multiaddr: format!("{}/p2p/{}", started.addr, started.peer),
        broker: started.broker,
    }
}

/// The hex of `support::key(n)`'s secret.
fn secret_hex(n: u8) -> String {
    let mut secret = [0u8; 32];
    secret[0] = 0x42;
    secret[31] = n.max(1);
    hex::encode(secret)
}

/// `--topic … --binding mnemonic --admin …`: a live stream with key 1 as its admin.
fn spec_args() -> Vec<String> {
    vec![
        "--topic".to_owned(),
        hex::encode(topic(43)),
        "--binding".to_owned(),
        "mnemonic".to_owned(),
        "--admin".to_owned(),
        hex::encode(key(1).address()),
    ]
}

/// Messages published: one of 3000 bytes, one not ASCII.
fn messages() -> Vec<String> {
    vec![
        "over libp2p".to_owned(),
        "x".repeat(3000),
        "third, ünïcödé".to_owned(),
    ]
}

fn publish(target: &str, network_id: u64) -> Output {
    Command::new(bps_binary())
        .args(["pub", "--no-reconnect", "--target", target, "--key"])
        .arg(secret_hex(1))
        .args(["--network-id", &network_id.to_string()])
        .args(["--timeout-ms", RUN_TIMEOUT_MS])
        .args(spec_args())
        .arg("--message")
        .args(messages())
        .output()
        .expect("run bps pub")
}

fn subscribe(target: &str, count: usize) -> JsonSub {
    let count = count.to_string();
    let spec = spec_args();
    let mut args = vec![
        "--target",
        target,
        "--no-reconnect",
        "--network-id",
        "10",
        "--count",
        &count,
        "--timeout-ms",
        RUN_TIMEOUT_MS,
    ];
    args.extend(spec.iter().map(String::as_str));
    JsonSub::start(&args)
}

/// The DATA lines' (owner, index, payload bytes) in order.
fn data_of(lines: &[Value]) -> Vec<(String, u64, Vec<u8>)> {
    lines
        .iter()
        .filter(|line| line["kind"] == "data")
        .map(|line| {
            let payload = hex::decode(line["payload_hex"].as_str().expect("payload_hex"));
            (
                line["owner"].as_str().expect("owner").to_owned(),
                line["index"].as_u64().expect("index"),
                payload.expect("hex"),
            )
        })
        .collect()
}

/// Publishes with `bps pub` at `pub_target` to `bps sub`s at each of `sub_targets`; each
/// subscriber's verified DATA lines, in its order.
fn deliver(broker: &P2pBroker, pub_target: &str, sub_targets: &[&str]) -> Vec<Vec<Value>> {
    let subs: Vec<JsonSub> = sub_targets
        .iter()
        .map(|target| subscribe(target, messages().len()))
        .collect();
    for sub in &subs {
        sub.joined();
    }
    let published = publish(pub_target, p2p::NETWORK);
    assert!(
        published.status.success(),
        "bps pub at {pub_target} failed: {}\n{}",
        String::from_utf8_lossy(&published.stderr),
        broker.broker.log()
    );
    subs.into_iter().map(JsonSub::finish).collect()
}

fn assert_every_message(lines: &[Value]) {
    let data = data_of(lines);
    let payloads: Vec<Vec<u8>> = data.iter().map(|data| data.2.clone()).collect();
    let expected: Vec<Vec<u8>> = messages().into_iter().map(String::into_bytes).collect();
    assert_eq!(payloads, expected, "every message, in order, byte for byte");
    let admin = hex::encode(key(1).address());
    assert!(
        data.iter()
            .all(|data| data.0.trim_start_matches("0x") == admin)
    );
}

#[test]
fn bps_pub_over_libp2p_reaches_a_tcp_sub_byte_for_byte() {
    let broker = start_broker("pub");
    let tcp = broker.broker.target();
    let lines = deliver(&broker, &broker.multiaddr, &[&tcp]);
    assert_every_message(&lines[0]);
    broker
        .broker
        .wait_metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}", 1);
    let metrics = broker.broker.metrics();
    assert_eq!(
        metrics["bps_p2p_connections_total{direction=\"inbound\"}"],
        1.0
    );
    assert_eq!(
        metrics["bps_p2p_streams_total{protocol=\"/swarm/pubsub/1.0.0/pubsub\"}"],
        1.0
    );
}

#[test]
fn bps_sub_over_libp2p_gets_a_tcp_pubs_messages_as_a_tcp_sub_does() {
    let broker = start_broker("sub");
    let tcp = broker.broker.target();
    let lines = deliver(&broker, &tcp, &[&broker.multiaddr, &tcp]);
    assert_every_message(&lines[0]);
    assert_eq!(
        data_of(&lines[0]),
        data_of(&lines[1]),
        "the same deliveries over libp2p and tcp"
    );
}

#[test]
fn a_client_on_another_network_is_told_which_network_id_to_pass() {
    let broker = start_broker("network");
    let published = publish(&broker.multiaddr, 1);
    let stderr = String::from_utf8_lossy(&published.stderr);
    assert_eq!(published.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the broker is on Swarm network 10, we are on 1: pass --network-id 10"),
        "{stderr}"
    );
    assert_eq!(
        broker
            .broker
            .metric("bps_p2p_handshakes_total{outcome=\"ok\",reason=\"\"}"),
        0
    );
}

#[test]
fn a_target_without_a_peer_id_is_bad_input() {
    let output = Command::new(bps_binary())
        .args(["sub", "--target", "/ip4/127.0.0.1/tcp/1634"])
        .args(spec_args())
        .output()
        .expect("run bps sub");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--target"), "{stderr}");
    assert!(stderr.contains("/p2p/"), "{stderr}");
}
