//! The read loop every carrier shares: a stream's bytes into its read buffer, through the
//! carrier's decoder, and each frame through the read gate to the core.
//!
//! Owns: where a stream passes the read gate (`CoreLink::gate`): every frame exactly once,
//! right before it is handed to the core, and every read before it is issued (the router's
//! pause, frame memory and the stream's credit; not the core's frames in flight, which a
//! frame queues for in its cohort's turn), so a stream that sends faster than it is served
//! waits in the kernel, not in memory; the read itself (appended
//! to what is buffered, cancelled by the port's close), and what EOF and a failed read
//! mean: a half-close ends the stream after what the peer sent before it was consumed; a
//! failure is an I/O close unless the port was closing already.
//! Never does: parse a byte; that is the carrier's `Decode`.

use bps_proto::Frame;
use monoio::buf::IoBufMut;
use monoio::io::{CancelHandle, CancelableAsyncReadRent};

use crate::io::link::{Admit, CoreLink};
use crate::io::port::Port;
use crate::io::read_buffer::ReadBuffer;
use crate::protocol::ClosedBy;

/// What a carrier's decoder found next in the read buffer.
#[derive(Debug)]
pub enum Decoded {
    /// A complete frame for the core.
    Frame(Frame),
    /// No complete frame: what is left (if anything) waits for the next read.
    Incomplete,
    /// The stream ends.
    End(ClosedBy),
}

/// A carrier's decoder: from the bytes in the read buffer to the stream's frames.
pub trait Decode {
    /// The next complete frame in `buffer`, after answering what else the carrier reads
    /// before it (a WebSocket ping); leaves an incomplete one in the buffer.
    async fn next(&mut self, buffer: &mut ReadBuffer) -> Decoded;
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
        match decoder.next(buffer).await {
            Decoded::Frame(frame) => {
                if !link.gate(port, Admit::Frame).await {
                    return ClosedBy::Peer;
                }
                link.hand_over(port, frame);
            }
            Decoded::End(cause) => return cause,
            Decoded::Incomplete => {
                buffer.settle();
                if !link.gate(port, Admit::Read).await {
                    return ClosedBy::Peer;
                }
                let read = read_into(link, port, (reader, handle.clone()), buffer).await;
                if let Some(cause) = read {
                    return cause;
                }
            }
        }
    }
}

/// One read appended to `buffer`; `Some(cause)` when the stream ends with it.
async fn read_into<R: CancelableAsyncReadRent>(
    link: &CoreLink,
    port: &Port,
    (reader, handle): (&mut R, CancelHandle),
    buffer: &mut ReadBuffer,
) -> Option<ClosedBy> {
    let offered = buffer.prepare();
    let bytes = buffer.take();
    let filled = bytes.len();
    // Append after what is buffered: monoio's `read` into a bare `BytesMut` writes from
    // its start, which would overwrite a partial frame left from the previous read.
    let (result, back) = reader
        .cancelable_read(bytes.slice_mut(filled..filled + offered), handle)
        .await;
    let bytes = back.into_inner();
    match result {
        Ok(0) => {
            buffer.put_back(bytes, 0, offered);
            buffer.settle();
            // A half-close ends the stream, but what the peer sent before it counts.
            link.wait_consumed(port).await;
            Some(ClosedBy::Peer)
        }
        Ok(read) => {
            link.metrics().bytes_in.add(read as u64);
            buffer.put_back(bytes, read, offered);
            None
        }
        Err(_) => {
            buffer.put_back(bytes, 0, offered);
            Some(if port.is_open() {
                ClosedBy::Io
            } else {
                ClosedBy::Peer
            })
        }
    }
}
