//! Edge-mode trees for the black-box tests: brokers whose `relay.upstreams` name other
//! brokers of the test, a broker started on a port chosen beforehand (a loop needs both
//! ports before either broker runs, a restarted root keeps its port), the broker's refusal
//! to start, and the terminal client's loops (`bps_client::client`) run in a thread with
//! their JSON lines read as they come.
//!
//! Owns: [`TREE`] (the settings every broker of a test tree gets), [`upstreams`],
//! [`free_port`], [`launch`] (a [`Broker`] on a given listen address, or how its start
//! failed: [`Broker::try_start`]) and [`LineSink`].
//!
//! Never: asserts what a tree delivers (the tests do) or reaches into a broker: as in the
//! rest of the support module, everything goes through the wire and `/metrics`.

use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Broker, Options, Refused};

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

/// Starts `bps-broker` listening on `listen` (admin and WebSocket listeners on free ports,
/// one core) with `sets`; `Err` if it exits, or prints no listening line in time.
pub fn launch(listen: SocketAddr, sets: &[String]) -> Result<Broker, Refused> {
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    Broker::try_start(&Options {
        sets: &sets,
        listen: Some(listen),
        one_core: true,
        ..Options::default()
    })
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
