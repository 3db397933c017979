//! The generator's libp2p carrier (`--transport p2p`): every stream, publisher or
//! subscriber, is its own `/swarm/pubsub/1.0.0/pubsub` stream, opened on one of a few Swarm
//! light nodes ([`bps_client::bee_node`]), each one libp2p connection to the broker with
//! many streams on it, as bee keeps one connection per peer.
//!
//! Owns: [`P2pPool`] (how many nodes a run needs and their connects, one after the other so
//! the broker's pending-handshakes bound per IP is never hit; which node a stream goes on),
//! the bridge that hands each stream to the generator's epoll loops as a loopback socket
//! (the loops read and write sockets; the bridge's copy is the generator's cost, measured
//! apart), and [`P2pCost`]: the CPU of the nodes' libp2p threads (Noise, yamux) and of the
//! bridge, per delivery.
//!
//! Never: reads a BPS frame (the streams join over the socket as TCP ones do), or retries.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use bps_client::bee_node::{BeeError, BeeNode, BeeSettings, BeeTarget};
use bps_p2p::StreamPipe;
use bytes::{Bytes, BytesMut};
use serde::Serialize;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

/// Streams the generator opens on one libp2p connection by default: the broker's
/// `p2p.streams_per_connection_max` default (64) less one for a handshake or headers
/// exchange in flight, so a run at the broker's defaults never has a stream reset.
pub const STREAMS_PER_CONNECTION_DEFAULT: u32 = 63;

/// Connections the broker takes at its `p2p.connections_max` default: a run needing more
/// is told to raise that key (and `--p2p-streams-per-connection` with
/// `p2p.streams_per_connection_max`).
pub const CONNECTIONS_MAX_DEFAULT: u32 = 64;

/// Bytes the bridge reads from the generator's side at a time: a few frames per stream
/// write, as the host's own reads are 16 KiB.
const BRIDGE_READ_BYTES: usize = 16 * 1024;

/// The bridge thread's name, which its CPU is read by.
const BRIDGE_THREAD: &str = "bps-bench-p2p";

/// The libp2p host threads' name (bps-p2p names them so).
const HOST_THREAD: &str = "bps-p2p";

/// A run's light nodes and the bridge.
#[derive(Debug)]
pub struct P2pPool {
    nodes: Vec<Arc<BeeNode>>,
    streams_per_node: usize,
    opened: AtomicUsize,
    /// Held while a stream opens: the broker's host takes inbound streams through a small
    /// queue and drops one that arrives while it is full, so opens go one at a time (each
    /// done once the broker answered its headers, so it was taken).
    opening: Mutex<()>,
    listener: TcpListener,
    bridge: tokio::runtime::Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
    cpu_at_start: ThreadsCpu,
}

/// The CPU the carrier cost a run (the report's `p2p`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct P2pCost {
    /// Light nodes, one libp2p connection each.
    pub connections: u32,
    /// Streams opened.
    pub streams: u32,
    /// CPU seconds of the nodes' libp2p threads (Noise's ChaCha20-Poly1305, yamux, the
    /// stream pumps) over the run.
    pub host_cpu_s: f64,
    /// The same per delivery, ns.
    pub host_cpu_ns_per_delivery: f64,
    /// CPU seconds of the bridge to the generator's sockets (not part of libp2p's cost).
    pub bridge_cpu_s: f64,
    /// The same per delivery, ns.
    pub bridge_cpu_ns_per_delivery: f64,
}

impl P2pPool {
    /// Connects the nodes `streams` streams need at `streams_per_connection` each.
    pub fn connect(
        target: &str,
        network_id: u64,
        streams: u32,
        streams_per_connection: u32,
    ) -> Result<Self, String> {
        let target = BeeTarget::parse(target).map_err(|error| error.to_string())?;
        let per = streams_per_connection.max(1);
        let count = streams.div_ceil(per).max(1);
        if count > CONNECTIONS_MAX_DEFAULT {
            eprintln!(
                "note: {streams} streams at {per} per connection need {count} libp2p \
                 connections, over the broker's p2p.connections_max default \
                 ({CONNECTIONS_MAX_DEFAULT}): raise it, or p2p.streams_per_connection_max \
                 with --p2p-streams-per-connection"
            );
        }
        let cpu_at_start = ThreadsCpu::now();
        let mut nodes = Vec::with_capacity(count as usize);
        for index in 0..count {
            let node = BeeNode::connect(&target, &BeeSettings::new(network_id)).map_err(|e| {
                format!(
                    "libp2p connection {} of {count}: {e} (the broker bounds them with \
                     p2p.connections_max)",
                    index + 1
                )
            })?;
            nodes.push(node);
        }
        let (bridge, stop, thread) = start_bridge()?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|error| format!("bridge listener: {error}"))?;
        Ok(Self {
            nodes,
            streams_per_node: per as usize,
            opened: AtomicUsize::new(0),
            opening: Mutex::new(()),
            listener,
            bridge,
            stop: Some(stop),
            thread: Some(thread),
            cpu_at_start,
        })
    }

    /// A new pubsub stream, as the generator's end of a loopback socket bridged to it.
    pub fn open(&self) -> Result<TcpStream, String> {
        let number = self.opened.fetch_add(1, Ordering::Relaxed);
        let index = number / self.streams_per_node;
        let node = self.nodes.get(index).ok_or_else(|| {
            format!(
                "more streams than the {} connections x {} planned",
                self.nodes.len(),
                self.streams_per_node
            )
        })?;
        let stream = {
            let _one_at_a_time = self.opening.lock().unwrap_or_else(|e| e.into_inner());
            node.open_pubsub().map_err(|error| {
                // A stream over the broker's bound is reset, which reads as a closed stream.
                let hint = if error == BeeError::Closed {
                    " (the broker resets streams over p2p.streams_per_connection_max: raise \
                     it or lower --p2p-streams-per-connection)"
                } else {
                    ""
                };
                let (stream, connection) = (number % self.streams_per_node + 1, index + 1);
                format!("stream {stream} of libp2p connection {connection}: {error}{hint}")
            })?
        };
        let (pipe, leftover) = stream
            .into_pipe()
            .ok_or_else(|| "the stream ended at once".to_owned())?;
        // Our end and the bridge's: connected, then accepted (loopback: at once).
        let ours = TcpStream::connect(self.listener.local_addr().map_err(|e| e.to_string())?)
            .map_err(|error| format!("bridge socket: {error}"))?;
        let (theirs, _) = self
            .listener
            .accept()
            .map_err(|error| format!("bridge socket: {error}"))?;
        ours.set_nodelay(true).map_err(|e| e.to_string())?;
        theirs.set_nodelay(true).map_err(|e| e.to_string())?;
        theirs.set_nonblocking(true).map_err(|e| e.to_string())?;
        self.bridge.spawn(bridge(theirs, pipe, leftover));
        Ok(ours)
    }

    /// What the carrier cost so far, over `delivered` deliveries.
    pub fn cost(&self, delivered: u64) -> P2pCost {
        let now = ThreadsCpu::now();
        let host = now.host_s - self.cpu_at_start.host_s;
        let bridge = now.bridge_s - self.cpu_at_start.bridge_s;
        let per = |seconds: f64| {
            if delivered == 0 {
                0.0
            } else {
                seconds * 1e9 / delivered as f64
            }
        };
        P2pCost {
            connections: self.nodes.len() as u32,
            streams: self.opened.load(Ordering::Relaxed) as u32,
            host_cpu_s: host,
            host_cpu_ns_per_delivery: per(host),
            bridge_cpu_s: bridge,
            bridge_cpu_ns_per_delivery: per(bridge),
        }
    }
}

impl Drop for P2pPool {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The bridge's runtime on its own thread, until told to stop.
fn start_bridge() -> Result<
    (
        tokio::runtime::Handle,
        oneshot::Sender<()>,
        thread::JoinHandle<()>,
    ),
    String,
> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|error| format!("bridge runtime: {error}"))?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = thread::Builder::new()
        .name(BRIDGE_THREAD.into())
        .spawn(move || {
            let _ = runtime.block_on(stopped);
        })
        .map_err(|error| format!("bridge thread: {error}"))?;
    Ok((handle, stop, thread))
}

/// Copies both ways between the generator's socket and the stream until either ends.
async fn bridge(socket: TcpStream, pipe: StreamPipe, leftover: BytesMut) {
    let Ok(socket) = tokio::net::TcpStream::from_std(socket) else {
        return;
    };
    let (mut read, mut write) = socket.into_split();
    let StreamPipe {
        mut inbound,
        outbound,
        reset,
        ..
    } = pipe;
    let down = async move {
        if !leftover.is_empty() && write.write_all(&leftover).await.is_err() {
            return;
        }
        while let Some(chunk) = inbound.recv().await {
            if write.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // The broker ended the stream: the generator sees EOF, as on TCP.
        let _ = write.shutdown().await;
    };
    let up = async move {
        let mut buffer = BytesMut::new();
        loop {
            buffer.reserve(BRIDGE_READ_BYTES);
            match read.read_buf(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let bytes: Bytes = buffer.split().freeze();
                    if outbound.send(bytes).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    tokio::join!(down, up);
    drop(reset);
}

/// CPU seconds of the process's libp2p host threads and bridge threads, from
/// `/proc/self/task` (their names tell them apart).
#[derive(Debug, Clone, Copy, Default)]
struct ThreadsCpu {
    host_s: f64,
    bridge_s: f64,
}

impl ThreadsCpu {
    fn now() -> Self {
        // SAFETY: sysconf reads a constant of the system.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let mut cpu = Self::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return cpu;
        };
        for task in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ...`: the name is between the parentheses, fields after.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let name = &stat[open + 1..close];
            let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
            // utime and stime are fields 14 and 15 of stat(5): 11 and 12 after the name.
            let used = |at: usize| fields.get(at).and_then(|f| f.parse::<f64>().ok());
            let seconds = (used(11).unwrap_or(0.0) + used(12).unwrap_or(0.0)) / ticks;
            match name {
                HOST_THREAD => cpu.host_s += seconds,
                BRIDGE_THREAD => cpu.bridge_s += seconds,
                _ => {}
            }
        }
        cpu
    }
}
