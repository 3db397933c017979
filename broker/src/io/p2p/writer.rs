//! The writer task of a libp2p stream: what the port queues goes to the stream's outbound
//! channel as `Bytes` that share the frames' allocations (`IoBatch::next_shared`), never
//! copied here. The channel's bounded capacity (`bps_p2p::OUTBOUND_MESSAGES_PER_STREAM`) is
//! the backpressure: at the bound the writer waits, the port's queue grows, and R26 judges
//! it as it judges a socket that takes nothing (`Port::wrote`, `CoreLink::written`).
//! A port without a socket is never written by its core directly, so this task writes
//! everything.
//! Never does: frame a message (the port's framing is bare, as TCP's), or reset the stream
//! (it reports how it stopped, `WriteEnd`, and the carrier decides).

use std::future::poll_fn;
use std::pin::pin;
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::io::carrier::WriteEnd;
use crate::io::iovec::IoBatch;
use crate::io::link::CoreLink;
use crate::io::port::{Life, Port};

/// What waiting for room on the channel came to.
enum Room<'a> {
    Permit(mpsc::Permit<'a, Bytes>),
    /// The stream's write side is gone (the peer reset it, the connection ended).
    Gone,
    /// The port started resetting.
    Reset,
}

/// Writes what the port queues until the stream flushes or resets.
pub async fn write_loop(
    link: Rc<CoreLink>,
    port: Rc<Port>,
    outbound: &mpsc::Sender<Bytes>,
) -> WriteEnd {
    let batch_frames_max = link.settings().write_batch_frames_max;
    loop {
        if port.life() == Life::Resetting {
            return reset_end(&port);
        }
        let Some(mut batch) = port.take_writing(batch_frames_max) else {
            if port.life() == Life::Flushing {
                return WriteEnd::Flushed;
            }
            port.write_changed().await;
            continue;
        };
        let frames = batch.frames() as u64;
        let bytes = batch.remaining_bytes() as u64;
        if let Some(end) = send_batch(&link, &port, outbound, &mut batch).await {
            port.return_writing(batch);
            return end;
        }
        port.return_writing(batch);
        link.metrics().frames_per_write.record(frames);
        link.written(&port, frames, bytes);
    }
}

/// Sends every part of `batch`; `Some` when the stream stopped meanwhile.
async fn send_batch(
    link: &CoreLink,
    port: &Port,
    outbound: &mpsc::Sender<Bytes>,
    batch: &mut IoBatch,
) -> Option<WriteEnd> {
    while let Some(part) = batch.next_shared() {
        match room(port, outbound).await {
            Room::Permit(permit) => {
                let len = part.len();
                permit.send(part);
                link.metrics().writes.inc();
                batch.advance(len);
                port.wrote(!batch.is_done());
            }
            Room::Reset => {
                return Some(if batch.is_partial() {
                    WriteEnd::Cut
                } else {
                    WriteEnd::Reset
                });
            }
            Room::Gone => {
                let end = if batch.is_partial() || port.is_open() {
                    WriteEnd::Cut
                } else {
                    WriteEnd::Reset
                };
                port.reset();
                return Some(end);
            }
        }
    }
    None
}

/// Room for one message on the channel, or why there will be none.
async fn room<'a>(port: &Port, outbound: &'a mpsc::Sender<Bytes>) -> Room<'a> {
    let mut reserve = pin!(outbound.reserve());
    loop {
        let woken = {
            let mut changed = pin!(port.write_changed());
            poll_fn(|cx| {
                if let Poll::Ready(reserved) = reserve.as_mut().poll(cx) {
                    return Poll::Ready(Some(reserved));
                }
                changed.as_mut().poll(cx).map(|()| None)
            })
            .await
        };
        match woken {
            Some(Ok(permit)) => return Room::Permit(permit),
            Some(Err(_)) => return Room::Gone,
            // A frame queued or the port closed: only a reset stops the wait.
            None if port.life() == Life::Resetting => return Room::Reset,
            None => {}
        }
    }
}

fn reset_end(port: &Port) -> WriteEnd {
    if port.mid_message() {
        WriteEnd::Cut
    } else {
        WriteEnd::Reset
    }
}
