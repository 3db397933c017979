//! A binary of another workspace package, built for a black-box test: cargo builds only a
//! package's own binaries for its tests, so a test that runs a sibling's binary (the client's
//! tests run `bps-broker`, the broker's run `bps`, the bench's run `bps-broker`) builds it
//! here. Shared by `#[path]` inclusion from each test suite's support code, so the cargo
//! invocation lives once.
//!
//! Owns: [`build_sibling`].
//!
//! Never: caches (each caller keeps its own `OnceLock`, one build per test process).

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Runs `cargo build` for binary `bin` of package `package` in the profile of these tests
/// and returns the executable cargo reports (wherever the target directory is).
pub fn build_sibling(package: &str, bin: &str) -> PathBuf {
    let mut command = Command::new(env!("CARGO"));
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--quiet",
        "--package",
        package,
        "--bin",
        bin,
        "--message-format=json",
    ]);
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let output = command
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("run cargo build for {bin}: {error}"));
    assert!(output.status.success(), "cargo build for {bin} failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == bin)
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo names the {bin} executable"))
}
