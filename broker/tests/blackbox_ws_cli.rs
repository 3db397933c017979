//! Black-box: the `bps` terminal client over the native WebSocket endpoint
//! (`--target ws://HOST:PORT/bps/v1`, docs/WEBSOCKET.md) against the real broker: a
//! WebSocket publisher, a WebSocket subscriber and a TCP subscriber of one live stream see
//! the same verified messages; a refused upgrade is shown with its HTTP status and reason.
//!
//! The `bps` binary comes from `support::cli::bps_binary` (built once per test process).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cli::bps_binary;
use support::{Broker, WAIT, key, topic};

/// Enough streams per peer for the three clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

/// Messages the publisher sends.
const MESSAGES: [&str; 3] = ["one", "two over ws", "three"];

/// How long a `bps` run may take (its own `--timeout-ms`).
const RUN_TIMEOUT_MS: &str = "30000";

/// The hex of `support::key(n)`'s secret.
fn secret_hex(n: u8) -> String {
    let mut secret = [0u8; 32];
    secret[0] = 0x42;
    secret[31] = n.max(1);
    hex::encode(secret)
}

/// `--topic … --binding mnemonic --admin …`: the live stream of README's example.
fn spec_args(admin_n: u8) -> Vec<String> {
    vec![
        "--topic".to_owned(),
        hex::encode(topic(41)),
        "--binding".to_owned(),
        "mnemonic".to_owned(),
        "--admin".to_owned(),
        hex::encode(key(admin_n).address()),
    ]
}

/// A running `bps sub --json` and its stdout lines.
struct Sub {
    child: Child,
    lines: Receiver<String>,
}

impl Sub {
    fn start(target: &str, count: usize) -> Sub {
        let mut child = Command::new(bps_binary())
            .args(["sub", "--target", target, "--json", "--no-reconnect"])
            .args([
                "--count",
                &count.to_string(),
                "--timeout-ms",
                RUN_TIMEOUT_MS,
            ])
            .args(spec_args(1))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bps sub");
        let stdout = child.stdout.take().expect("piped stdout");
        let (line_tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line_tx.send(line).is_err() {
                    return;
                }
            }
        });
        Sub { child, lines }
    }

    /// The next JSON line within [`WAIT`].
    fn next(&self) -> Option<Value> {
        let line = self.lines.recv_timeout(WAIT).ok()?;
        Some(serde_json::from_str(&line).expect("bps sub --json prints JSON lines"))
    }

    /// Waits for the `joined` line.
    fn await_joined(&self) {
        let joined = self.next().expect("a joined line");
        assert_eq!(joined["kind"], "joined", "{joined}");
    }

    /// Every line until the process ends, and whether it succeeded.
    fn finish(mut self) -> (Vec<Value>, bool) {
        let mut lines = Vec::new();
        while let Some(line) = self.next() {
            lines.push(line);
        }
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait bps sub") {
                break status;
            }
            assert!(Instant::now() < deadline, "bps sub did not end");
            thread::sleep(Duration::from_millis(20));
        };
        (lines, status.success())
    }
}

fn publish(target: &str) -> Output {
    Command::new(bps_binary())
        .args(["pub", "--target", target, "--key", &secret_hex(1)])
        .args(["--timeout-ms", RUN_TIMEOUT_MS])
        .args(spec_args(1))
        .arg("--message")
        .args(MESSAGES)
        .output()
        .expect("run bps pub")
}

/// The DATA lines' (owner, index, payload) in order.
fn data_of(lines: &[Value]) -> Vec<(String, u64, String)> {
    lines
        .iter()
        .filter(|line| line["kind"] == "data")
        .map(|line| {
            (
                line["owner"].as_str().expect("owner").to_owned(),
                line["index"].as_u64().expect("index"),
                line["payload_utf8"].as_str().expect("payload").to_owned(),
            )
        })
        .collect()
}

#[test]
fn bps_pub_and_sub_over_ws_deliver_what_a_tcp_sub_gets() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let ws_target = format!("ws://{}/bps/v1", broker.ws());
    let ws_sub = Sub::start(&ws_target, MESSAGES.len());
    let tcp_sub = Sub::start(&broker.target(), MESSAGES.len());
    ws_sub.await_joined();
    tcp_sub.await_joined();
    let published = publish(&ws_target);
    assert!(
        published.status.success(),
        "bps pub over ws failed: {}",
        String::from_utf8_lossy(&published.stderr)
    );
    let (ws_lines, ws_ok) = ws_sub.finish();
    let (tcp_lines, tcp_ok) = tcp_sub.finish();
    assert!(ws_ok && tcp_ok, "both subscribers got their count");
    let ws_data = data_of(&ws_lines);
    let payloads: Vec<&str> = ws_data.iter().map(|data| data.2.as_str()).collect();
    assert_eq!(payloads, MESSAGES, "every message, in order, verified");
    let admin = hex::encode(key(1).address());
    assert!(
        ws_data
            .iter()
            .all(|data| data.0.trim_start_matches("0x") == admin)
    );
    assert_eq!(
        ws_data,
        data_of(&tcp_lines),
        "the same deliveries over ws and tcp"
    );
}

#[test]
fn a_refused_upgrade_is_shown_with_its_status_and_reason() {
    let broker = Broker::start(&[]);
    let output = Command::new(bps_binary())
        .args(["sub", "--no-reconnect", "--timeout-ms", "5000", "--target"])
        .arg(format!("ws://{}/nowhere", broker.ws()))
        .args(spec_args(1))
        .output()
        .expect("run bps sub");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the upgrade was refused: HTTP 404"),
        "the status is shown: {stderr}"
    );
}
