//! `bps-bench`'s progress line against a real broker: with `--progress always` stderr carries
//! lines redrawn in place (carriage returns; elapsed time, rates, loss) and wiped at the
//! end; by default, with stderr a pipe and so no terminal, not a byte of it.

#[path = "../../client/tests/support/broker.rs"]
mod broker;

use std::path::PathBuf;
use std::process::{Command, Output};

use broker::Broker;

const BIN: &str = env!("CARGO_BIN_EXE_bps-bench");

fn json_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "bps-bench-progress-{}-{name}.json",
        std::process::id()
    ))
}

/// A few seconds of one publisher and two subscribers; `extra` picks the progress mode.
fn pubsub(target: &str, seed: &str, json: &PathBuf, extra: &[&str]) -> Output {
    let output = Command::new(BIN)
        .args([
            "pubsub",
            "--target",
            target,
            "--rate",
            "50",
            // Signed during the run, a few frames ahead: presigning every message first
            // can overrun the warm-up on a loaded machine, and such a run fails.
            "--sign-ahead",
            "16",
            "--size",
            "256",
            "--subscribers",
            "2",
            "--duration",
            "2.5",
            "--warmup",
            "2",
            "--drain",
            "2",
            "--seed",
            seed,
            "--json",
        ])
        .arg(json)
        .args(extra)
        .output()
        .expect("run bps-bench");
    let _ = std::fs::remove_file(json);
    output
}

#[test]
fn progress_is_drawn_when_asked_and_never_into_a_pipe_by_default() {
    // One peer address holds all three streams of the cohort (R33's default is 2).
    let broker = Broker::start(&["limits.streams_per_peer_per_cohort_max=16"]);
    let target = broker.listen.to_string();

    let drawn = pubsub(
        &target,
        "11",
        &json_path("always"),
        &["--progress", "always"],
    );
    let stderr = String::from_utf8_lossy(&drawn.stderr);
    assert_eq!(drawn.status.code(), Some(0), "{stderr}\n{}", broker.log());
    let redraws: Vec<&str> = stderr
        .split('\r')
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    assert!(!redraws.is_empty(), "no progress line in {stderr:?}");
    for line in &redraws {
        assert!(
            line.contains(" s ") && line.contains(" pub/s") && line.contains(" deliveries/s"),
            "{line:?}"
        );
        assert!(line.contains("  loss "), "{line:?}");
    }
    assert!(!stderr.contains('\n'), "one line, redrawn: {stderr:?}");
    assert!(stderr.ends_with('\r'), "wiped at the end: {stderr:?}");
    let summary = String::from_utf8_lossy(&drawn.stdout);
    assert!(
        !summary.contains('\r'),
        "stdout carries no progress: {summary:?}"
    );

    let piped = pubsub(&target, "12", &json_path("auto"), &[]);
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert_eq!(piped.status.code(), Some(0), "{stderr}\n{}", broker.log());
    assert!(
        !stderr.contains('\r') && !stderr.contains("deliveries/s"),
        "stderr is a pipe, not a terminal: {stderr:?}"
    );
}
