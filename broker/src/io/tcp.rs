//! The TCP carrier: BPS's native transport, one stream per TCP connection, frames from the
//! first byte (BPS.md section 2).
//!
//! Owns: the accept loop of one core's listener, the socket options of an accepted
//! connection (no Nagle; keepalive and `TCP_USER_TIMEOUT`, so a vanished peer frees its slot
//! within `server.tcp_user_timeout_ms` even when the broker has nothing to send it), the
//! connection's reader (frames out of a `ReadBuffer`, handed to the core through its
//! `CoreLink`) and writer (what the port queues, many frames per vectored write, zero-copy),
//! and how a reset is a reset: in-flight operations are cancelled and the socket closes with
//! linger 0, so the peer sees an RST and not a FIN.
//! Never does: touch the shard or the machine; everything goes through the port and the link.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use monoio::buf::IoBufMut;
use monoio::io::{
    CancelHandle, CancelableAsyncReadRent, CancelableAsyncWriteRent, Canceller, OwnedReadHalf,
    OwnedWriteHalf, Splitable,
};
use monoio::net::{TcpListener, TcpStream};

use super::link::CoreLink;
use super::port::{Life, Port, Transport};
use super::read_buffer::ReadBuffer;
use crate::protocol::ClosedBy;

/// Probes a silent peer gets before the kernel gives up on it (after the keepalive idle time,
/// one per interval): with `TCP_USER_TIMEOUT` the connection ends within the user timeout.
const KEEPALIVE_PROBES: u32 = 3;

/// Accepts until a drain shuts the listener.
pub async fn accept_loop(link: Rc<CoreLink>, listener: TcpListener) {
    link.register_listener(listener.as_raw_fd());
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                if link.draining() {
                    return;
                }
                // EMFILE and friends: back off briefly rather than spin.
                if link.may_log() {
                    tracing::warn!(core = link.core, %error, "accept failed");
                }
                monoio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if link.draining() {
            return;
        }
        start(&link, stream, addr);
    }
}

/// Admits one accepted connection and runs it; a refused one is dropped (closed) at once.
fn start(link: &Rc<CoreLink>, stream: TcpStream, addr: SocketAddr) {
    let Ok(port) = link.admit(addr.ip(), Transport::Tcp) else {
        return;
    };
    configure(&stream, link.settings());
    monoio::spawn(run(Rc::clone(link), port, stream));
}

/// Socket options of an accepted connection.
pub(super) fn configure(stream: &TcpStream, settings: &super::Settings) {
    // Nagle would hold back small Acks; the writer already batches.
    let _ = stream.set_nodelay(true);
    // SAFETY: the fd is the open socket `stream` owns, borrowed only for these calls.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    let socket = socket2::SockRef::from(&fd);
    let idle = Duration::from_millis(settings.tcp_keepalive_ms);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(idle / KEEPALIVE_PROBES)
        .with_retries(KEEPALIVE_PROBES);
    let _ = socket.set_tcp_keepalive(&keepalive);
    let _ = socket.set_tcp_user_timeout(Some(Duration::from_millis(settings.tcp_user_timeout_ms)));
}

/// The cancellers of a connection's operations in flight.
#[derive(Default)]
pub(super) struct Cancellers {
    pub read: RefCell<Option<Canceller>>,
    pub write: RefCell<Option<Canceller>>,
}

impl Cancellers {
    pub fn cancel(slot: &RefCell<Option<Canceller>>) {
        if let Some(canceller) = slot.borrow_mut().take() {
            // The handles share the cancelled state; the fresh canceller returned is unused.
            drop(canceller.cancel());
        }
    }
}

/// Runs one admitted connection to its end, then tells the link.
pub async fn run(link: Rc<CoreLink>, port: Rc<Port>, stream: TcpStream) {
    let fd = stream.as_raw_fd();
    let cancellers = Rc::new(Cancellers::default());
    let read_canceller = Canceller::new();
    let write_canceller = Canceller::new();
    let read_handle = read_canceller.handle();
    let write_handle = write_canceller.handle();
    *cancellers.read.borrow_mut() = Some(read_canceller);
    *cancellers.write.borrow_mut() = Some(write_canceller);
    let on_close = Rc::clone(&cancellers);
    port.set_on_close(Box::new(move |life| {
        Cancellers::cancel(&on_close.read);
        if life == Life::Resetting {
            set_linger_zero(fd);
            Cancellers::cancel(&on_close.write);
        }
    }));
    port.attach_socket(fd, link.settings().write_batch_frames_max);
    let (mut reader, writer) = stream.into_split();
    let writer_task = monoio::spawn(write_loop(
        Rc::clone(&link),
        Rc::clone(&port),
        (writer, fd),
        write_handle,
    ));
    let cause = read_loop(&link, &port, &mut reader, read_handle).await;
    if port.is_open() {
        match cause {
            // The peer finished sending: what is queued for it still goes out.
            ClosedBy::Peer => link.flush(&port),
            ClosedBy::Io | ClosedBy::QueueOverflow => port.reset(),
        }
    }
    let writer = writer_task.await;
    // The socket is about to close: nothing may touch its fd from now on.
    port.clear_on_close();
    // A write half dropped alone sends a FIN (monoio shuts it down); the whole socket closes
    // as its linger setting says, so a reset reaches the peer as a TCP reset.
    drop(reader.reunite(writer));
    link.ended(&port, cause);
}

async fn read_loop(
    link: &CoreLink,
    port: &Port,
    reader: &mut OwnedReadHalf<TcpStream>,
    handle: CancelHandle,
) -> ClosedBy {
    let frame_bytes_max = link.settings().frame_bytes_max;
    let mut buffer = ReadBuffer::new(std::sync::Arc::clone(link.memory()));
    loop {
        loop {
            match buffer.next_frame(frame_bytes_max) {
                Ok(Some(frame)) => {
                    if !link.hand_over(port, frame).await {
                        return ClosedBy::Peer;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    link.frame_error(port, &error);
                    return ClosedBy::Io;
                }
            }
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

/// Writes what the core left to it (what the kernel refused to a direct write, and what is
/// queued after it), and the flush of a closing stream; hands the write half back so the
/// socket closes whole.
async fn write_loop(
    link: Rc<CoreLink>,
    port: Rc<Port>,
    (mut writer, fd): (OwnedWriteHalf<TcpStream>, RawFd),
    handle: CancelHandle,
) -> OwnedWriteHalf<TcpStream> {
    let batch_frames_max = link.settings().write_batch_frames_max;
    loop {
        if port.life() == Life::Resetting {
            return writer;
        }
        let Some(mut batch) = port.take_writing(batch_frames_max) else {
            if port.life() == Life::Flushing {
                shutdown_write(fd);
                return writer;
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
                    port.reset();
                    return writer;
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

pub(super) fn shutdown_write(fd: RawFd) {
    // SAFETY: `fd` is this connection's socket, open until both halves are dropped, which
    // happens only after the reader and writer ended. ENOTCONN after a peer reset is fine.
    unsafe {
        libc::shutdown(fd, libc::SHUT_WR);
    }
}

pub(super) fn set_linger_zero(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: valid socket fd (see `shutdown_write`) and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
