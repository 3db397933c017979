//! Edge-mode trees for the black-box tests: brokers whose `relay.upstreams` name other
//! brokers of the test, a broker started on a port chosen beforehand (a loop needs both
//! ports before either broker runs, a restarted root keeps its port), the broker's refusal
//! to start, and the terminal client's loops (`bps_client::client`) run in a thread with
//! their JSON lines read as they come.
//!
//! Owns: [`TREE`] (the settings every broker of a test tree gets), [`upstreams`],
//! [`free_port`], [`launch`] (a [`Broker`] on a given listen address, or how its start
//! failed) and [`LineSink`].
//!
//! Never: asserts what a tree delivers (the tests do) or reaches into a broker: as in the
//! rest of the support module, everything goes through the wire and `/metrics`.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Broker, START_WAIT, parse_listening};

/// Settings of every broker in a test tree: all the test's clients and edges come from
/// 127.0.0.1, so a root trusts loopback as its edges (docs/SCALING.md, "Trusted relays") and
/// every broker lets one peer hold many streams of a cohort; edges reconnect quickly.
pub const TREE: [&str; 4] = [
    "limits.streams_per_peer_per_cohort_max=32",
    "limits.trusted_relays=[\"127.0.0.0/8\"]",
    "relay.reconnect_backoff_min_ms=100",
    "relay.reconnect_backoff_max_ms=500",
];

/// The `relay.upstreams=[...]` setting naming `brokers` by their listen addresses.
pub fn upstreams(brokers: &[SocketAddr]) -> String {
    let names: Vec<String> = brokers.iter().map(|addr| format!("\"{addr}\"")).collect();
    format!("relay.upstreams=[{}]", names.join(","))
}

/// [`TREE`] and `extra`, as one list of settings.
pub fn tree_sets(extra: &[&str]) -> Vec<String> {
    TREE.iter()
        .chain(extra)
        .map(|set| (*set).to_owned())
        .collect()
}

/// A root: a broker with [`TREE`] and `extra`, no upstreams.
pub fn root(extra: &[&str]) -> Broker {
    let sets = tree_sets(extra);
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    Broker::start(&sets)
}

/// An edge whose upstreams are `parents`, with [`TREE`] and `extra`.
pub fn edge(parents: &[SocketAddr], extra: &[&str]) -> Broker {
    let upstreams = upstreams(parents);
    let mut sets = tree_sets(extra);
    sets.push(upstreams);
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    Broker::start(&sets)
}

/// A port of 127.0.0.1 that nothing listens on now (the kernel's pick, released at once).
pub fn free_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address")
}

/// How a broker started by [`launch`] failed to listen.
#[derive(Debug)]
pub struct Refused {
    /// Its exit status, if it exited within the start-up wait.
    pub status: Option<ExitStatus>,
    /// What it wrote on stderr.
    pub log: String,
}

/// Starts `bps-broker` listening on `listen` (admin and WebSocket listeners on free ports,
/// one core) with `sets`; `Err` if it exits, or prints no listening line in time.
pub fn launch(listen: SocketAddr, sets: &[String]) -> Result<Broker, Refused> {
    let listen_arg = listen.to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_bps-broker"));
    command.env_remove("RUST_LOG").args([
        "--listen",
        &listen_arg,
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
    let (line_tx, line_rx) = mpsc::channel();
    {
        let log = Arc::clone(&log);
        // Reads until the end, so the broker never blocks on a full pipe.
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let listening = parse_listening(&line);
                let mut log = log.lock().unwrap_or_else(|poison| poison.into_inner());
                log.push_str(&line);
                log.push('\n');
                drop(log);
                if let Some(addrs) = listening {
                    let _ = line_tx.send(addrs);
                }
            }
        });
    }
    let mut broker = Broker {
        child: Some(child),
        listen,
        admin: listen,
        ws: None,
        log,
    };
    let deadline = Instant::now() + START_WAIT;
    loop {
        match line_rx.recv_timeout(Duration::from_millis(20)) {
            Ok((listen, admin, ws)) => {
                broker.listen = listen;
                broker.admin = admin;
                broker.ws = ws;
                return Ok(broker);
            }
            // Still starting.
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(RecvTimeoutError::Timeout) => {
                return Err(Refused {
                    status: broker.try_exit(),
                    log: broker.log(),
                });
            }
            // Its stderr closed without a listening line: it is exiting, and the reader has
            // logged every line.
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Refused {
                    status: broker.wait_exit(START_WAIT),
                    log: broker.log(),
                });
            }
        }
    }
}

/// A `Write` that sends each complete line, with when it was written, to a channel: the
/// stdout of `bps_client::client::run_sub` running in a thread.
pub struct LineSink {
    pending: Vec<u8>,
    lines: Sender<(Instant, String)>,
}

impl LineSink {
    /// A sink and the receiving end of its lines.
    pub fn new() -> (LineSink, Receiver<(Instant, String)>) {
        let (lines, receiver) = mpsc::channel();
        (
            LineSink {
                pending: Vec::new(),
                lines,
            },
            receiver,
        )
    }
}

impl Write for LineSink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|byte| *byte == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]).into_owned();
            // A test that stopped listening ends the client's run as a closed stdout would.
            if self.lines.send((Instant::now(), text)).is_err() {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The next JSON line within `wait` and when it was written; `None` if none came.
pub fn next_json(lines: &Receiver<(Instant, String)>, wait: Duration) -> Option<(Instant, Value)> {
    let (at, line) = lines.recv_timeout(wait).ok()?;
    let value = serde_json::from_str(&line)
        .unwrap_or_else(|error| panic!("not a JSON line ({error}): {line}"));
    Some((at, value))
}
