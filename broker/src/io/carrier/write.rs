//! The writer task every carrier shares.
//!
//! Owns: writing what the core left to the writer (what the kernel refused to the core's
//! direct write, `Port::flush_now`, and everything queued after it) and what a closing
//! stream still has to write, many messages per vectored write with no copy of a shared
//! frame; the write counters; and how the writer stopped (`WriteEnd`), from which the
//! carrier chooses its goodbye. The flush deadline that bounds a closing stream's writes is
//! the link's: it resets the port, which cancels a write in flight.
//! Never does: frame a message (the port's encoder did), or close the socket.

use std::rc::Rc;

use monoio::io::{CancelHandle, CancelableAsyncWriteRent};

use crate::io::link::CoreLink;
use crate::io::port::{Life, Port};

/// How a stream's writer stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEnd {
    /// Everything queued was written and the stream flushes: the carrier may end it
    /// cleanly (a FIN, a close frame).
    Flushed,
    /// The stream was reset between two messages.
    Reset,
    /// In the middle of a message, or the socket failed: only a TCP reset is left.
    Cut,
}

/// Writes what the core left to the writer until the stream flushes or resets; hands the
/// write half back with how it stopped, so the socket closes whole.
pub async fn write_loop<W: CancelableAsyncWriteRent>(
    link: Rc<CoreLink>,
    port: Rc<Port>,
    mut writer: W,
    handle: CancelHandle,
) -> (W, WriteEnd) {
    let batch_frames_max = link.settings().write_batch_frames_max;
    loop {
        if port.life() == Life::Resetting {
            let end = if port.mid_message() {
                WriteEnd::Cut
            } else {
                WriteEnd::Reset
            };
            return (writer, end);
        }
        let Some(mut batch) = port.take_writing(batch_frames_max) else {
            if port.life() == Life::Flushing {
                return (writer, WriteEnd::Flushed);
            }
            port.write_changed().await;
            continue;
        };
        let frames = batch.frames() as u64;
        let bytes = batch.remaining_bytes() as u64;
        while !batch.is_done() {
            let (result, back) = writer.cancelable_writev(batch, handle.clone()).await;
            batch = back;
            link.metrics().writes.inc();
            match result {
                Ok(0) | Err(_) => {
                    let end = if batch.is_partial() || port.is_open() {
                        WriteEnd::Cut
                    } else {
                        WriteEnd::Reset
                    };
                    port.reset();
                    port.return_writing(batch);
                    return (writer, end);
                }
                Ok(written) => {
                    batch.advance(written);
                    port.wrote(!batch.is_done());
                }
            }
        }
        port.return_writing(batch);
        link.metrics().frames_per_write.record(frames);
        link.written(&port, frames, bytes);
    }
}
