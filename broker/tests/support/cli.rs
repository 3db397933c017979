//! The `bps` terminal client as a black-box test runs it: the binary itself, and a running
//! `bps sub --json` whose stdout lines are read as they come.
//!
//! Owns: [`bps_binary`] (the workspace's `bps`, built once per test process: it belongs to
//! another package, so `sibling_binary` builds it) and [`JsonSub`] (the child process, killed on drop, its lines
//! parsed as JSON, its stderr kept for failure messages).
//!
//! Never: interprets the lines (the tests do) or links the client's code into the check.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::WAIT;

// The client's test support owns the one cargo invocation that builds a sibling binary.
#[path = "../../../client/tests/support/sibling_binary.rs"]
mod sibling_binary;

/// The path of the `bps` binary, up to date with the workspace's sources.
pub fn bps_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| sibling_binary::build_sibling("bps-client", "bps"))
        .clone()
}

/// A running `bps sub --json`.
pub struct JsonSub {
    child: Option<Child>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl JsonSub {
    /// Starts `bps sub --json` with `args` (target, spec and exit condition).
    pub fn start(args: &[&str]) -> JsonSub {
        let mut child = Command::new(bps_binary())
            .arg("sub")
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bps sub");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr_pipe = child.stderr.take().expect("piped stderr");
        let (line_tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if line_tx.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr = Arc::clone(&stderr);
            thread::spawn(move || {
                let mut text = String::new();
                let _ = stderr_pipe.read_to_string(&mut text);
                stderr
                    .lock()
                    .unwrap_or_else(|poison| poison.into_inner())
                    .push_str(&text);
            });
        }
        JsonSub {
            child: Some(child),
            lines,
            stderr,
        }
    }

    /// The next line within [`WAIT`], parsed; `None` once stdout has closed.
    pub fn next_line(&self) -> Option<Value> {
        match self.lines.recv_timeout(WAIT) {
            Ok(line) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|error| panic!("not a JSON line ({error}): {line}")),
            ),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("bps sub printed nothing within {WAIT:?}\n{}", self.stderr())
            }
        }
    }

    /// Reads up to the `joined` line, which `bps sub` prints once the broker has answered OK:
    /// from then on the stream is in the cohort.
    pub fn joined(&self) -> Value {
        let line = self
            .next_line()
            .unwrap_or_else(|| panic!("bps sub ended before joining\n{}", self.stderr()));
        assert_eq!(line["kind"], "joined", "the first line\n{}", self.stderr());
        line
    }

    /// Every remaining line until `bps sub` exits, which it must do successfully.
    pub fn finish(mut self) -> Vec<Value> {
        let mut lines = Vec::new();
        while let Some(line) = self.next_line() {
            lines.push(line);
        }
        let status = self.wait_exit();
        assert!(
            status.success(),
            "bps sub exited with {status} after {lines:?}\n{}",
            self.stderr()
        );
        lines
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let child = self.child.as_mut().expect("bps sub running");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait on bps sub") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "bps sub still running {WAIT:?} after closing stdout"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// What `bps sub` wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }
}

impl Drop for JsonSub {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
