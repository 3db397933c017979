//! `bps` against a real broker whose bound refuses it: the one-line error names the bound
//! and the setting that moves it, and the run exits 3 (over TCP, whose `Ack` says only FULL,
//! every bound is named with its setting; over WebSocket, the one the broker's close reason
//! names). And the client's table of bounds against the broker's sources: every FULL cause
//! the broker can name has a row, and every row's setting is a key of the example config.

#[path = "support/broker.rs"]
mod broker;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bps_client::refusal::BOUNDS;
use broker::Broker;

/// Upper bound on the holding subscriber's join (generous: a loaded 2-core machine).
const JOIN_WAIT: Duration = Duration::from_secs(30);

const TOPIC: &str = "5151515151515151515151515151515151515151515151515151515151515151";
const ADMIN: &str = "0202020202020202020202020202020202020202";

fn sub_args(target: &str) -> Vec<String> {
    [
        "sub",
        "--target",
        target,
        "--topic",
        TOPIC,
        "--binding",
        "mnemonic",
        "--admin",
        ADMIN,
        "--timeout-ms",
        "60000",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect()
}

/// A `bps sub --json` that holds the cohort's one stream; killed when dropped.
struct Holder(Child);

impl Holder {
    fn join(target: &str) -> Holder {
        let mut child = Command::new(env!("CARGO_BIN_EXE_bps"))
            .args(sub_args(target))
            .arg("--json")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn bps sub");
        let stdout = child.stdout.take().expect("stdout");
        let (line_tx, line_rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let holder = Holder(child);
        let line = line_rx
            .recv_timeout(JOIN_WAIT)
            .expect("the holding subscriber joins");
        let event: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(event["kind"], "joined", "{line}");
        holder
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bps_sub(target: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bps"))
        .args(sub_args(target))
        .stdin(Stdio::null())
        .output()
        .expect("run bps sub")
}

#[test]
fn a_full_cohort_names_its_bound_and_the_setting_that_moves_it() {
    let broker = Broker::start(&["limits.streams_per_cohort_max=1"]);
    let tcp = broker.listen.to_string();
    let _holder = Holder::join(&tcp);

    let refused = bps_sub(&tcp);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{stderr}\n{}", broker.log());
    assert!(refused.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: join refused: FULL: the broker is at one of its bounds"),
        "{stderr}"
    );
    assert!(
        stderr.contains("streams per cohort (R30), set by limits.streams_per_cohort_max"),
        "{stderr}"
    );

    let ws = format!("ws://{}/bps/v1", broker.ws);
    let refused = bps_sub(&ws);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(3), "{stderr}\n{}", broker.log());
    assert_eq!(
        stderr.trim_end(),
        "error: join refused: FULL: the broker is at its bound on streams per cohort (R30); \
         raise limits.streams_per_cohort_max to admit more"
    );
}

/// A file of the repository, by its path from the root.
fn repo_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the client crate sits one level below the repository root");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

#[test]
fn every_full_cause_the_broker_names_has_a_row_and_every_setting_exists() {
    // The broker's words for each FULL cause: the string literals of `FullCause`'s Display.
    let action = repo_file("broker/core/src/action.rs");
    let display = action
        .split("impl fmt::Display for FullCause")
        .nth(1)
        .and_then(|rest| rest.split("\n}\n").next())
        .expect("FullCause's Display in broker/core/src/action.rs");
    let named: Vec<&str> = display.split('"').skip(1).step_by(2).collect();
    assert!(named.len() >= 6, "{named:?}");
    for what in &named {
        assert!(
            BOUNDS.iter().any(|bound| bound.what == *what),
            "the broker names {what:?}, which bps_client::refusal::BOUNDS lacks"
        );
    }
    assert_eq!(BOUNDS.len(), named.len(), "a row the broker never names");

    let example = repo_file("broker/bps-broker.example.toml");
    let limits = example
        .split("\n[limits]\n")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("[limits] in the example config");
    for bound in &BOUNDS {
        let key = bound
            .setting
            .strip_prefix("limits.")
            .unwrap_or_else(|| panic!("{} is not under [limits]", bound.setting));
        assert!(
            limits
                .lines()
                .any(|line| line.starts_with(&format!("{key} = "))),
            "{} is not a key of broker/bps-broker.example.toml",
            bound.setting
        );
    }
}
