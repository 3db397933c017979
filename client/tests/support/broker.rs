//! The real `bps-broker` for the client-side black-box tests (`bps` here, `bps-bench` in the
//! bench package, which includes this file): built by the cargo that runs the tests, started
//! on loopback with free ports and one core, killed when dropped.
//!
//! Owns: [`broker_binary`] (the broker belongs to another package, so it is built here once
//! per test process, by `sibling_binary`) and
//! [`Broker`] (the child, its listening addresses from its `bps-broker listening` line, its
//! stderr kept for failure messages).
//!
//! Never: reaches into the broker; everything goes through its command line and the wire.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::Duration;

#[path = "sibling_binary.rs"]
mod sibling_binary;

/// Time the broker gets to print its listening line (generous: a loaded 2-core machine).
const START_WAIT: Duration = Duration::from_secs(60);

/// The path of the `bps-broker` binary, up to date with the workspace's sources.
pub fn broker_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| sibling_binary::build_sibling("bps-broker", "bps-broker"))
        .clone()
}

/// A running broker; killed and reaped when dropped.
pub struct Broker {
    child: Child,
    /// The BPS (TCP) address.
    pub listen: SocketAddr,
    /// The WebSocket address.
    #[allow(dead_code)] // each including test uses part of this file: the bench's dials TCP
    pub ws: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Broker {
    /// Starts the broker on 127.0.0.1 with free ports and one core; `sets` are
    /// `section.key=value` overrides passed as `--set`.
    pub fn start(sets: &[&str]) -> Broker {
        let mut command = Command::new(broker_binary());
        command.env_remove("RUST_LOG").args([
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--cores",
            "1",
        ]);
        for set in sets {
            command.args(["--set", set]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn bps-broker");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (listening_tx, listening_rx) = mpsc::channel();
        {
            let log = Arc::clone(&log);
            // Keeps reading, so the broker never blocks on a full pipe.
            thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(addresses) = parse_listening(&line) {
                        let _ = listening_tx.send(addresses);
                    }
                    let mut log = log.lock().unwrap_or_else(|poison| poison.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        let addresses = listening_rx.recv_timeout(START_WAIT);
        let log_now = || {
            log.lock()
                .unwrap_or_else(|poison| poison.into_inner())
                .clone()
        };
        let Ok((listen, ws)) = addresses else {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "bps-broker printed no listening line within {START_WAIT:?}\n{}",
                log_now()
            );
        };
        Broker {
            child,
            listen,
            ws,
            log,
        }
    }

    /// Everything the broker wrote on stderr so far.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The BPS and WebSocket addresses of `bps-broker listening listen=… admin=… ws=…`.
fn parse_listening(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.strip_prefix("bps-broker listening ")?;
    let field = |name: &str| {
        rest.split_whitespace()
            .find_map(|field| field.strip_prefix(name))
            .and_then(|value| value.parse().ok())
    };
    Some((field("listen=")?, field("ws=")?))
}
