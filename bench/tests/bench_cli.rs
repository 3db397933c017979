//! `bps-bench` end to end: the binary against its own bare relay (`bps-bench sink`) on
//! loopback, the JSON report it writes, and its exit codes (0 met, 2 bad input, 4 an
//! objective missed).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_bps-bench");

/// A sink on an ephemeral port, killed on drop.
struct SinkProcess {
    child: Child,
    address: String,
}

impl SinkProcess {
    fn start() -> Self {
        let mut child = Command::new(BIN)
            .args(["sink", "--listen", "127.0.0.1:0", "--duration", "60"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the sink");
        let stderr = child.stderr.take().expect("stderr");
        let mut line = String::new();
        BufReader::new(stderr)
            .read_line(&mut line)
            .expect("sink line");
        let address = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("listen="))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Self { child, address }
    }
}

impl Drop for SinkProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bps-bench-test-{}-{name}.json", std::process::id()))
}

/// A short, small run: 2 subscribers (one verifying), 200 msg/s, 0.5 s measured.
fn pubsub(target: &str, json: &PathBuf, extra: &[&str]) -> (i32, Value) {
    let output = Command::new(BIN)
        .args([
            "pubsub",
            "--target",
            target,
            "--rate",
            "200",
            "--size",
            "256",
            "--subscribers",
            "2",
            "--verify-fraction",
            "0.5",
            "--duration",
            "0.5",
            "--warmup",
            "0.5",
            "--drain",
            "1",
            "--seed",
            "7",
            "--quiet",
            "--json",
        ])
        .arg(json)
        .args(extra)
        .output()
        .expect("run bps-bench");
    let code = output.status.code().expect("exit code");
    let text = std::fs::read_to_string(json).unwrap_or_else(|error| {
        panic!(
            "no report ({error}); stdout {} stderr {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let _ = std::fs::remove_file(json);
    (code, serde_json::from_str(&text).expect("JSON report"))
}

#[test]
fn pubsub_against_the_sink_delivers_everything_and_exit_codes_follow_the_slo() {
    let sink = SinkProcess::start();
    let json = json_path("met");
    let (code, report) = pubsub(
        &sink.address,
        &json,
        &["--slo", "p99=10s", "--max-loss", "0"],
    );
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["mode"], "pubsub");
    assert_eq!(report["closed_loop"], false);
    assert_eq!(report["subscribers"], 2);
    assert_eq!(report["publishers"], 1);
    assert_eq!(report["size"], 256);
    assert_eq!(report["loss"], 0.0, "{report:#}");
    assert_eq!(report["invalid"], 0, "{report:#}");
    assert_eq!(report["published"], 100, "200 msg/s for 0.5 s");
    assert_eq!(report["delivered"], 200, "to both subscribers");
    assert_eq!(report["verification"]["verifying_subscribers"], 1);
    assert_eq!(report["verification"]["byte_checked_subscribers"], 1);
    assert_eq!(report["slo"]["passed"], true);
    assert!(report["latency_us"]["p99"].as_u64().expect("p99") > 0);

    let json = json_path("missed");
    let (code, report) = pubsub(&sink.address, &json, &["--slo", "p50=1ns"]);
    assert_eq!(code, 4, "{report:#}");
    assert_eq!(report["slo"]["passed"], false);
    let misses = report["slo"]["misses"].as_array().expect("misses");
    assert!(
        misses[0]
            .as_str()
            .expect("line")
            .starts_with("SLO missed: p50"),
        "{misses:?}"
    );
}

#[test]
fn sign_ahead_signs_during_the_run_and_every_frame_still_verifies_and_arrives() {
    let sink = SinkProcess::start();
    let json = json_path("sign-ahead");
    let (code, report) = pubsub(&sink.address, &json, &["--sign-ahead", "8"]);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["loss"], 0.0, "{report:#}");
    assert_eq!(report["invalid"], 0, "{report:#}");
    assert_eq!(report["published"], 100, "200 msg/s for 0.5 s");
    assert_eq!(report["delivered"], 200, "to both subscribers");
    // Only the first 8 of the run's ~200 messages were signed before it started; the one
    // verifying subscriber checked the rest, signed by the feed, end to end.
    assert_eq!(report["generator"]["presigned"], 8, "{report:#}");
    assert_eq!(report["verification"]["verifying_subscribers"], 1);
    assert_eq!(report["verification"]["byte_checked_subscribers"], 0);
    assert_eq!(report["verification"]["stamp_only_subscribers"], 1);
}

#[test]
fn bad_input_exits_2_with_the_argument_named() {
    for (args, needle) in [
        (vec!["--slo", "p99=fast"], "error: --slo:"),
        (vec!["--max-loss", "2"], "error: --max-loss:"),
        (vec!["--size", "4097"], "error: --size:"),
        (
            vec!["--verify-fraction", "1.5"],
            "error: --verify-fraction:",
        ),
        (vec!["--duration", "soon"], "error: --duration:"),
        (vec!["--cpus", "3-1"], "error: --cpus:"),
    ] {
        let output = Command::new(BIN)
            .args(["pubsub", "--target", "127.0.0.1:9"])
            .args(&args)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(needle), "{args:?}: {stderr}");
    }
    let output = Command::new(BIN)
        .args(["pubsub", "--rate", "1"])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "clap: --target is required");
}

#[test]
fn an_unreachable_target_is_a_failed_run() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("addr").to_string();
    drop(listener);
    let output = Command::new(BIN)
        .args([
            "pubsub",
            "--target",
            &target,
            "--duration",
            "0.1",
            "--quiet",
        ])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot connect"));
}

#[test]
fn verify_mode_reports_the_single_core_ceiling() {
    let json = json_path("verify");
    let status = Command::new(BIN)
        .args(["verify", "--duration", "0.2", "--size", "4096", "--json"])
        .arg(&json)
        .stdout(Stdio::null())
        .status()
        .expect("run");
    assert_eq!(status.code(), Some(0));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("JSON");
    let _ = std::fs::remove_file(&json);
    assert_eq!(report["mode"], "verify");
    assert_eq!(report["size"], 4096);
    assert!(report["verify_socs_per_s"].as_f64().expect("rate") > 0.0);
    assert!(report["verify_iterations"].as_u64().expect("iterations") > 0);
    for figure in [
        "naive_socs_per_s",
        "pipeline_socs_per_s",
        "bmt_scalar_us",
        "bmt_multilane_us",
    ] {
        assert!(
            report[figure].as_f64().expect(figure) > 0.0,
            "{figure} missing or zero"
        );
    }
}
