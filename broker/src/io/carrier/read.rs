//! The read loop every carrier shares: a stream's bytes into its read buffer, as the link's
//! read window allows, and through the carrier's decoder to the core.
//!
//! Owns: when a stream reads (only once the core has room for what it read: the link's
//! `wait_read_room`, so a stream that sends faster than it is served waits in the kernel,
//! not in memory), the read itself (appended to what is buffered, cancelled by the port's
//! close), and what EOF and a failed read mean: a half-close ends the stream after what
//! the peer sent before it was consumed; a failure is an I/O close unless the port was
//! closing already.
//! Never does: parse a byte; that is the carrier's `Decode`.

use monoio::buf::IoBufMut;
use monoio::io::{CancelHandle, CancelableAsyncReadRent};

use crate::io::link::CoreLink;
use crate::io::port::Port;
use crate::io::read_buffer::ReadBuffer;
use crate::protocol::ClosedBy;

/// A carrier's decoder: from the bytes in the read buffer to frames handed to the core.
pub trait Decode {
    /// Hands every complete frame in `buffer` to the core (`CoreLink::hand_over`) and
    /// answers what else the carrier reads (a WebSocket ping); leaves an incomplete one in
    /// the buffer. `Some(cause)` ends the stream.
    async fn decode(&mut self, buffer: &mut ReadBuffer) -> Option<ClosedBy>;
}

/// Reads `reader` into `buffer` and through `decoder` until the stream ends; says why.
pub async fn read_loop<R: CancelableAsyncReadRent>(
    (link, port): (&CoreLink, &Port),
    reader: &mut R,
    handle: CancelHandle,
    buffer: &mut ReadBuffer,
    decoder: &mut impl Decode,
) -> ClosedBy {
    loop {
        if let Some(cause) = decoder.decode(buffer).await {
            return cause;
        }
        buffer.settle();
        link.wait_read_room(port).await;
        if !port.is_open() {
            return ClosedBy::Peer;
        }
        let offered = buffer.prepare();
        let bytes = buffer.take();
        let filled = bytes.len();
        // Append after what is buffered: monoio's `read` into a bare `BytesMut` writes from
        // its start, which would overwrite a partial frame left from the previous read.
        let (result, back) = reader
            .cancelable_read(bytes.slice_mut(filled..filled + offered), handle.clone())
            .await;
        let bytes = back.into_inner();
        match result {
            Ok(0) => {
                buffer.put_back(bytes, 0, offered);
                buffer.settle();
                // A half-close ends the stream, but what the peer sent before it counts.
                link.wait_consumed(port).await;
                return ClosedBy::Peer;
            }
            Ok(read) => {
                link.metrics().bytes_in.add(read as u64);
                buffer.put_back(bytes, read, offered);
            }
            Err(_) => {
                buffer.put_back(bytes, 0, offered);
                return if port.is_open() {
                    ClosedBy::Io
                } else {
                    ClosedBy::Peer
                };
            }
        }
    }
}
