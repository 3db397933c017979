//! `bps-bench --transport p2p` against the real broker with `[p2p]` on: a short run whose
//! streams are libp2p pubsub streams of a few Swarm light nodes delivers every message with
//! none invalid, on as many connections as its streams need, and reports what the libp2p
//! threads cost per delivery; a run on another Swarm network fails with the network id to
//! pass, and one with more streams per connection than the broker takes names the key.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

#[path = "../../client/tests/support/broker.rs"]
mod broker;

const BIN: &str = env!("CARGO_BIN_EXE_bps-bench");

/// The broker's Swarm network: not the default (1), so `--network-id` is exercised.
const NETWORK: &str = "10";

/// The broker with `[p2p]` on (light mode, which takes dials too) and its multiaddr.
fn start_broker(name: &str, extra: &[&str]) -> (broker::Broker, String) {
    let dir = std::env::temp_dir().join(format!("bps-bench-p2p-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let key_path = dir.join("libp2p.key");
    let (keypair, _) = bps_p2p::load_or_create(&key_path).expect("broker key");
    let peer = keypair.public().to_peer_id();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let sets = [
        "p2p.enabled=true".to_owned(),
        format!("p2p.listen=/ip4/127.0.0.1/tcp/{port}"),
        format!("p2p.network_id={NETWORK}"),
        format!("p2p.swarm_key_file={}", dir.join("swarm.key").display()),
        format!("p2p.libp2p_key_file={}", key_path.display()),
        // Every stream comes from 127.0.0.1.
        "limits.streams_per_peer_per_cohort_max=64".to_owned(),
    ];
    let sets: Vec<&str> = sets
        .iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect();
    let broker = broker::Broker::start(&sets);
    (broker, format!("/ip4/127.0.0.1/tcp/{port}/p2p/{peer}"))
}

/// A short run: 20 subscribers (half verifying) and a publisher at 200 msg/s, 8 streams
/// per libp2p connection.
fn run(target: &str, json: &PathBuf, network_id: &str) -> Output {
    Command::new(BIN)
        .args(["pubsub", "--transport", "p2p", "--target", target])
        .args([
            "--network-id",
            network_id,
            "--p2p-streams-per-connection",
            "8",
        ])
        .args(["--subscribers", "20", "--rate", "200", "--size", "256"])
        .args([
            "--verify-fraction",
            "0.5",
            "--duration",
            "1",
            "--warmup",
            "0.5",
        ])
        .args(["--drain", "2", "--seed", "7", "--quiet", "--json"])
        .arg(json)
        .output()
        .expect("run bps-bench")
}

#[test]
fn a_short_run_over_libp2p_delivers_everything_with_none_invalid() {
    let (broker, target) = start_broker("run", &[]);
    let json = std::env::temp_dir().join(format!("bps-bench-p2p-{}.json", std::process::id()));
    let output = run(&target, &json, NETWORK);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stderr}\nthe broker (BPS on {}):\n{}",
        broker.listen,
        broker.log()
    );
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    let _ = std::fs::remove_file(&json);
    let report: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(report["transport"], "p2p");
    let expected = report["expected"].as_u64().expect("expected");
    assert!(
        expected >= 20 * 100,
        "a second at 200 msg/s to 20: {report}"
    );
    assert_eq!(report["delivered"], expected, "every delivery: {report}");
    assert_eq!(report["invalid"], 0, "{report}");
    // 21 streams at 8 per connection.
    assert_eq!(report["p2p"]["connections"], 3, "{report}");
    assert_eq!(report["p2p"]["streams"], 21, "{report}");
    assert!(report["p2p"]["host_cpu_s"].as_f64() > Some(0.0), "{report}");
    assert!(
        report["p2p"]["host_cpu_ns_per_delivery"].as_f64() > Some(0.0),
        "{report}"
    );
}

#[test]
fn a_run_on_another_network_fails_with_the_network_id_to_pass() {
    let (_broker, target) = start_broker("network", &[]);
    let json = std::env::temp_dir().join(format!("bps-bench-p2p-net-{}.json", std::process::id()));
    let output = run(&target, &json, "1");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pass --network-id 10"), "{stderr}");
}

#[test]
fn more_streams_per_connection_than_the_broker_takes_names_the_key_to_raise() {
    let (_broker, target) = start_broker("bound", &["p2p.streams_per_connection_max=4"]);
    let json =
        std::env::temp_dir().join(format!("bps-bench-p2p-bound-{}.json", std::process::id()));
    let output = run(&target, &json, NETWORK);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        // Whichever connection reaches the bound first says so.
        stderr.contains("of libp2p connection ")
            && stderr.contains(": the broker closed the libp2p stream")
            && stderr.contains("p2p.streams_per_connection_max"),
        "{stderr}"
    );
}
