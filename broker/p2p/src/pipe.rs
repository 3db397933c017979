//! A libp2p stream as a byte pipe: two tasks on the host's runtime copy between the stream
//! and a pair of bounded channels of `Bytes` (`StreamPipe`), and a slot counts the stream
//! against its connection's bound while either task runs.
//!
//! Inbound: each read of up to `READ_CHUNK_BYTES` becomes one `Bytes` (frozen from the read
//! buffer, not copied) sent on a channel of `INBOUND_CHUNKS_PER_STREAM`; when the caller
//! does not take them and the channel is full, the reader waits and stops reading the
//! stream: yamux's window then stops the peer (backpressure), and no byte is dropped.
//! Outbound: each `Bytes` the caller sends is written to the stream as it is, from the
//! caller's shared buffer with no copy here (below, yamux 0.14 copies it into its data
//! frame and Noise into its send buffer before encrypting: the libraries' copies, not
//! this host's, and one per write of the stream, not per receiver of a frame); a full
//! channel (`OUTBOUND_MESSAGES_PER_STREAM`) is the caller's to see (`try_send` fails), as
//! a slow reader of any carrier is.
//! The ends: the caller dropping `outbound` closes the stream's write side once everything
//! queued is written (a FIN); `inbound` ends (`None`) at the peer's FIN, a reset or the
//! connection's end; `StreamReset::reset` resets the stream at once, whatever is queued.
//! Never does: look at the bytes.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use bytes::{Bytes, BytesMut};
use futures::{AsyncReadExt as _, AsyncWriteExt as _, io::ReadHalf, io::WriteHalf};
use libp2p::{PeerId, Stream, StreamProtocol};
use tokio::sync::{mpsc, watch};

/// Largest chunk one read hands over, in bytes: a few BPS frames per chunk, and with
/// `INBOUND_CHUNKS_PER_STREAM` the memory a stream's unread input can take (64 KiB).
pub const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Chunks read and not yet taken by the caller, per stream, in chunks: enough to keep
/// reading while the caller's core turns around; at the bound the stream is not read.
pub const INBOUND_CHUNKS_PER_STREAM: usize = 4;

/// Messages the caller queued and the stream has not yet taken, per stream, in messages:
/// the carrier's own R26 bound is the real one; this one only has to let it act first.
pub const OUTBOUND_MESSAGES_PER_STREAM: usize = 256;

/// Who opened the stream or dialed the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Inbound,
    Outbound,
}

/// One stream, as the caller holds it.
#[derive(Debug)]
pub struct StreamPipe {
    pub peer: PeerId,
    pub protocol: StreamProtocol,
    pub direction: Direction,
    /// The bytes the peer wrote, in order, in chunks; `None` once the stream ended.
    pub inbound: mpsc::Receiver<Bytes>,
    /// The bytes to write, each `Bytes` as it is; dropping it closes the write side.
    pub outbound: mpsc::Sender<Bytes>,
    pub reset: StreamReset,
}

/// Resets the stream when the caller decides to (a protocol fault of the peer).
#[derive(Debug)]
pub struct StreamReset(watch::Sender<bool>);

impl StreamReset {
    /// Resets the stream: both tasks end and the stream is dropped unclosed (a yamux RST).
    pub fn reset(self) {
        // No receiver left means both tasks already ended: nothing to reset.
        let _ = self.0.send(true);
    }
}

/// Streams open per peer, against the bound (one connection per peer: `host`).
#[derive(Debug)]
pub(crate) struct StreamCounts {
    max: u32,
    open: Mutex<HashMap<PeerId, u32>>,
}

/// One open stream's place in its peer's count; released when dropped.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    counts: Arc<StreamCounts>,
    peer: PeerId,
}

impl StreamCounts {
    pub(crate) fn new(max: u32) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A slot for one more stream of `peer`, or `None` at the bound.
    pub(crate) fn acquire(self: &Arc<Self>, peer: PeerId) -> Option<StreamSlot> {
        let mut open = self
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(peer).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(StreamSlot {
            counts: Arc::clone(self),
            peer,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .counts
            .open
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.peer) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.peer);
            }
        }
    }
}

/// Starts the two tasks of `stream` on the current runtime and returns the caller's side.
pub(crate) fn spawn(
    stream: Stream,
    peer: PeerId,
    protocol: StreamProtocol,
    direction: Direction,
    slot: StreamSlot,
) -> StreamPipe {
    let (read, write) = stream.split();
    let (in_tx, in_rx) = mpsc::channel(INBOUND_CHUNKS_PER_STREAM);
    let (out_tx, out_rx) = mpsc::channel(OUTBOUND_MESSAGES_PER_STREAM);
    let (reset_tx, reset_rx) = watch::channel(false);
    let slot = Arc::new(slot);
    tokio::spawn(read_pump(read, in_tx, reset_rx.clone(), Arc::clone(&slot)));
    tokio::spawn(write_pump(write, out_rx, reset_rx, slot));
    StreamPipe {
        peer,
        protocol,
        direction,
        inbound: in_rx,
        outbound: out_tx,
        reset: StreamReset(reset_tx),
    }
}

/// Resolves once the caller reset the stream; never if the caller dropped the reset handle.
async fn reset_requested(reset: &mut watch::Receiver<bool>) {
    if reset.wait_for(|reset| *reset).await.is_err() {
        std::future::pending::<()>().await;
    }
}

async fn read_pump(
    mut read: ReadHalf<Stream>,
    chunks: mpsc::Sender<Bytes>,
    mut reset: watch::Receiver<bool>,
    _slot: Arc<StreamSlot>,
) {
    let mut buffer = BytesMut::new();
    loop {
        // Wait for room first: while the caller has not taken its chunks, nothing is read.
        let permit = tokio::select! {
            permit = chunks.reserve() => match permit { Ok(p) => p, Err(_) => return },
            () = reset_requested(&mut reset) => return,
        };
        buffer.resize(READ_CHUNK_BYTES, 0);
        let read = tokio::select! {
            read = read.read(&mut buffer) => read,
            () = reset_requested(&mut reset) => return,
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => permit.send(buffer.split_to(n).freeze()),
        }
    }
}

async fn write_pump(
    mut write: WriteHalf<Stream>,
    mut messages: mpsc::Receiver<Bytes>,
    mut reset: watch::Receiver<bool>,
    _slot: Arc<StreamSlot>,
) {
    loop {
        let next = tokio::select! {
            next = messages.recv() => next,
            () = reset_requested(&mut reset) => return,
        };
        let Some(bytes) = next else {
            // The caller is done writing: a FIN once everything before it is out.
            let _ = write.close().await;
            return;
        };
        // Flush once the queue is empty: one flush for a burst of messages.
        let last = messages.is_empty();
        let written = tokio::select! {
            written = write_one(&mut write, &bytes, last) => written,
            () = reset_requested(&mut reset) => return,
        };
        if written.is_err() {
            return;
        }
    }
}

async fn write_one(
    write: &mut WriteHalf<Stream>,
    bytes: &[u8],
    flush: bool,
) -> std::io::Result<()> {
    write.write_all(bytes).await?;
    if flush {
        write.flush().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_slots_count_per_peer_up_to_the_bound() {
        let counts = StreamCounts::new(2);
        let (a, b) = (PeerId::random(), PeerId::random());
        let first = counts.acquire(a).unwrap();
        let _second = counts.acquire(a).unwrap();
        assert!(counts.acquire(a).is_none(), "a third stream of one peer");
        assert!(
            counts.acquire(b).is_some(),
            "another peer has its own bound"
        );
        drop(first);
        assert!(
            counts.acquire(a).is_some(),
            "a closed stream frees its slot"
        );
    }
}
