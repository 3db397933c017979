//! One `/swarm/pubsub/1.0.0/pubsub` stream as a BPS stream: bee's headers exchange (within
//! the handshake deadline), then admission to this core like any connection (transport
//! `p2p`, the per-peer bounds and the blocklist keyed by the bee node's overlay, as bee keys
//! its peers), the shared read loop over the stream's inbound channel (`PipeReader`) with
//! length-delimited frames exactly as TCP reads them, and the p2p writer task. How it ends: a flushed stream closes its write side (a
//! FIN once everything queued is out), any other end resets the stream (a yamux RST).
//! Never does: touch the shard or the machine (everything goes through the port and the
//! link), or look at a frame.

use std::rc::Rc;
use std::time::Duration;

use bps_p2p::StreamPipe;
use bps_proto::Hash;
use monoio::io::Canceller;

use super::exchange::{self, Fault, Incoming};
use super::reader::{CloseSignal, PipeReader};
use super::writer;
use crate::io::carrier::{self, WriteEnd};
use crate::io::link::CoreLink;
use crate::io::port::{Port, Transport};
use crate::io::read_buffer::ReadBuffer;
use crate::protocol::{ClosedBy, PeerId};

/// Runs one pubsub stream of the handshaken peer with `overlay` to its end.
pub async fn run(
    link: Rc<CoreLink>,
    pipe: StreamPipe,
    overlay: Hash,
    deadline: Duration,
) -> Result<(), Fault> {
    let StreamPipe {
        inbound,
        outbound,
        reset,
        ..
    } = pipe;
    let mut incoming = Incoming::new(inbound);
    let exchanged = monoio::time::timeout(deadline, exchange::headers(&mut incoming, &outbound))
        .await
        .unwrap_or(Err(Fault::Deadline));
    let admitted = exchanged.and_then(|()| {
        if link.draining() {
            return Err(Fault::Admission);
        }
        link.admit_peer(PeerId::overlay(overlay), Transport::P2p)
            .map_err(|_| Fault::Admission)
    });
    let port = match admitted {
        Ok(port) => port,
        Err(fault) => {
            reset.reset();
            return Err(fault);
        }
    };
    let closed = Rc::new(CloseSignal::default());
    {
        let closed = Rc::clone(&closed);
        port.set_on_close(Box::new(move |_| closed.close()));
    }
    let (inbound, leftover) = incoming.into_parts();
    let mut reader = PipeReader::new(inbound, leftover, closed);
    let writer_task = {
        let (link, port) = (Rc::clone(&link), Rc::clone(&port));
        monoio::spawn(async move {
            let end = writer::write_loop(link, port, &outbound).await;
            (outbound, end)
        })
    };
    let cause = read_frames(&link, &port, &mut reader).await;
    if port.is_open() {
        match cause {
            ClosedBy::Peer => link.flush(&port),
            ClosedBy::Io | ClosedBy::QueueOverflow => port.reset(),
        }
    }
    let (outbound, end) = writer_task.await;
    if end == WriteEnd::Flushed {
        // Dropping the sender closes the write side once everything queued is out.
        drop(outbound);
    } else {
        reset.reset();
    }
    port.clear_on_close();
    link.ended(&port, cause);
    Ok(())
}

/// The shared read loop over the stream's inbound channel.
async fn read_frames(link: &CoreLink, port: &Port, reader: &mut PipeReader) -> ClosedBy {
    let mut buffer = ReadBuffer::new(std::sync::Arc::clone(link.memory()));
    let mut frames = carrier::Delimited::new(link, port);
    // The reader watches the port's close itself; this handle is never cancelled.
    let canceller = Canceller::new();
    carrier::read_loop(
        (link, port),
        reader,
        canceller.handle(),
        &mut buffer,
        &mut frames,
    )
    .await
}
