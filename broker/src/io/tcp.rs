//! The TCP carrier: BPS's native transport, one stream per TCP connection, frames from the
//! first byte (docs/PROTOCOL.md §2).
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
    while let Some((stream, addr)) = accept_next(&link, &listener, "accept failed").await {
        if link.draining() {
            return;
        }
        start(&link, stream, addr);
    }
}

/// How long a listener waits after a failed accept (EMFILE and friends) rather than spin.
const ACCEPT_BACKOFF_MS: u64 = 10;

/// The next accepted connection of `listener`; `None` once a drain has shut it. A failed
/// accept is logged (rate-limited, as `what`) and retried after `ACCEPT_BACKOFF_MS`.
pub(super) async fn accept_next(
    link: &CoreLink,
    listener: &TcpListener,
    what: &str,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        match listener.accept().await {
            Ok(accepted) => return Some(accepted),
            Err(error) => {
                if link.draining() {
                    return None;
                }
                if link.may_log() {
                    tracing::warn!(core = link.core, %error, "{what}");
                }
                monoio::time::sleep(Duration::from_millis(ACCEPT_BACKOFF_MS)).await;
            }
        }
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
    /// Arms a connection's operations: the port's close cancels its read, a reset also its
    /// write, after setting zero linger when `reset_is_rst` (so the peer sees a TCP reset).
    /// Returns the read and the write handle.
    pub fn arm(port: &Port, fd: RawFd, reset_is_rst: bool) -> (CancelHandle, CancelHandle) {
        let cancellers = Rc::new(Cancellers::default());
        let read_canceller = Canceller::new();
        let write_canceller = Canceller::new();
        let handles = (read_canceller.handle(), write_canceller.handle());
        *cancellers.read.borrow_mut() = Some(read_canceller);
        *cancellers.write.borrow_mut() = Some(write_canceller);
        port.set_on_close(Box::new(move |life| {
            Cancellers::cancel(&cancellers.read);
            if life == Life::Resetting {
                if reset_is_rst {
                    set_linger_zero(fd);
                }
                Cancellers::cancel(&cancellers.write);
            }
        }));
        handles
    }

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
    let (read_handle, write_handle) = Cancellers::arm(&port, fd, true);
    port.attach_socket(fd);
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::rc::Rc;
    use std::time::Duration;

    use bytes::Bytes;
    use monoio::io::AsyncReadRent;
    use monoio::net::TcpStream;
    use monoio::task::JoinHandle;

    use super::{KEEPALIVE_PROBES, configure, run};
    use crate::io::harness::{self, GUARD};
    use crate::io::link::CoreLink;
    use crate::io::outbound::{QueueFull, Queued};
    use crate::io::outgoing::Outgoing;
    use crate::io::port::{Life, Port, Transport};

    /// How long a test lets the runtime park so that its other tasks run.
    const NAP: Duration = Duration::from_millis(1);

    /// Buffer size asked of both ends where a test needs the kernel to refuse bytes soon.
    const SMALL_BUFFER_BYTES: usize = 4096;

    /// One connection run by the TCP carrier, as a core runs it, and its peer.
    struct Carried {
        port: Rc<Port>,
        peer: TcpStream,
        ended: JoinHandle<()>,
    }

    /// Accepts a connection, admits and configures it as the accept loop does (with the
    /// broker's send buffer shrunk to `send_bytes` when given) and runs it.
    async fn carried(
        link: &Rc<CoreLink>,
        peer_receive_bytes: Option<usize>,
        send_bytes: Option<usize>,
    ) -> Carried {
        let (listener, addr) = harness::listener();
        let (accepted, peer) = harness::tcp_pair(&listener, addr, peer_receive_bytes).await;
        let port = link
            .admit(IpAddr::V4(Ipv4Addr::LOCALHOST), Transport::Tcp)
            .expect("admitted");
        configure(&accepted, link.settings());
        if let Some(bytes) = send_bytes {
            harness::shrink_send_buffer(std::os::fd::AsRawFd::as_raw_fd(&accepted), bytes);
        }
        let ended = monoio::spawn(run(Rc::clone(link), Rc::clone(&port), accepted));
        // The carrier starts: its socket is attached to the port, its reader and writer wait.
        other_tasks_run().await;
        Carried { port, peer, ended }
    }

    fn link_with(edit: impl FnOnce(&mut crate::config::BrokerConfig)) -> Rc<CoreLink> {
        let (shared, _) = harness::shared(1, edit);
        Rc::new(CoreLink::new(0, shared))
    }

    /// `count` frames of `bytes` bytes, each with a pattern of its own, so that a lost,
    /// repeated or reordered piece shows.
    fn frames(count: usize, bytes: usize) -> Vec<Bytes> {
        (0..count)
            .map(|index| {
                (0..bytes)
                    .map(|offset| (index * 31 + offset * 7) as u8)
                    .collect::<Vec<u8>>()
                    .into()
            })
            .collect()
    }

    /// Reads until `bytes` bytes arrived (or the stream ended or failed).
    async fn read_bytes(peer: &mut TcpStream, bytes: usize) -> Vec<u8> {
        let mut got = Vec::with_capacity(bytes);
        while got.len() < bytes {
            let chunk = Vec::with_capacity(64 * 1024);
            let read = monoio::time::timeout(GUARD, peer.read(chunk)).await;
            let (result, chunk) = read.expect("the writer stalled");
            match result {
                Ok(0) | Err(_) => break,
                Ok(read) => got.extend_from_slice(&chunk[..read]),
            }
        }
        got
    }

    /// How a peer's reading ends once nothing more is sent: a FIN or an error.
    async fn read_to_end(peer: &mut TcpStream) -> std::io::Result<usize> {
        let mut total = 0;
        loop {
            let chunk = Vec::with_capacity(64 * 1024);
            let read = monoio::time::timeout(GUARD, peer.read(chunk)).await;
            match read.expect("the stream never ended").0 {
                Ok(0) => return Ok(total),
                Ok(read) => total += read,
                Err(error) => return Err(error),
            }
        }
    }

    /// Lets every other ready task of the runtime (the carrier's reader and writer) run: a
    /// nap parks the runtime, which runs every ready task first. (A self-wake does not do it:
    /// monoio 0.2.4 polls a task that woke itself again at once.)
    async fn other_tasks_run() {
        monoio::time::sleep(NAP).await;
    }

    async fn ends(ended: JoinHandle<()>) {
        monoio::time::timeout(GUARD, ended)
            .await
            .expect("the carrier ended");
    }

    #[test]
    fn an_accepted_connection_has_no_nagle_keepalive_and_a_user_timeout() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| {
                config.server.tcp_keepalive_ms = 6_000;
                config.server.tcp_user_timeout_ms = 7_000;
            });
            let (listener, addr) = harness::listener();
            let (accepted, peer) = harness::tcp_pair(&listener, addr, None).await;
            // The peer is a socket as the kernel makes it: the options below are not defaults.
            harness::with_socket(&peer, |socket| {
                assert!(!socket.nodelay().expect("TCP_NODELAY"), "{driver}");
                assert!(!socket.keepalive().expect("SO_KEEPALIVE"), "{driver}");
                assert_eq!(socket.tcp_user_timeout().expect("TCP_USER_TIMEOUT"), None);
            });
            configure(&accepted, link.settings());
            harness::with_socket(&accepted, |socket| {
                assert!(socket.nodelay().expect("TCP_NODELAY"), "{driver}");
                assert!(socket.keepalive().expect("SO_KEEPALIVE"), "{driver}");
                assert_eq!(
                    socket.keepalive_time().expect("TCP_KEEPIDLE"),
                    Duration::from_secs(6)
                );
                assert_eq!(
                    socket.keepalive_interval().expect("TCP_KEEPINTVL"),
                    Duration::from_secs(2)
                );
                assert_eq!(
                    socket.keepalive_retries().expect("TCP_KEEPCNT"),
                    KEEPALIVE_PROBES
                );
                assert_eq!(
                    socket.tcp_user_timeout().expect("TCP_USER_TIMEOUT"),
                    Some(Duration::from_secs(7))
                );
            });
        });
    }

    #[test]
    fn what_the_kernel_refuses_is_written_later_complete_and_in_order() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.limits.outbound_queue_frames_max = 1024);
            let Carried {
                port,
                mut peer,
                ended,
            } = carried(&link, Some(SMALL_BUFFER_BYTES), Some(SMALL_BUFFER_BYTES)).await;
            let sent = frames(256, 1024);
            for frame in &sent {
                let queued = port.enqueue(Outgoing::bare(frame.clone()), None, None);
                assert_eq!(queued, Ok(Queued::Within), "{driver}");
                link.touched(&port);
            }
            link.flush_touched();
            other_tasks_run().await;
            let on_wire = link.metrics().frames_out.get();
            assert!(
                on_wire < 256,
                "{driver}: the kernel took all {on_wire} frames, nothing was left to the writer"
            );
            let expected = sent.concat();
            let got = read_bytes(&mut peer, expected.len()).await;
            assert_eq!(got.len(), expected.len(), "{driver}");
            assert!(got == expected, "{driver}: bytes out of order or altered");
            // The peer hangs up; the carrier ends once its writer is done.
            drop(peer);
            ends(ended).await;
            assert_eq!(link.metrics().frames_out.get(), 256, "{driver}");
            assert_eq!(port.queued(), 0, "{driver}");
            assert_eq!(link.ports_open(), 0, "{driver}");
        });
    }

    /// Queues `frames` on `port` as one turn of the core does, then writes them directly.
    fn one_turn(
        link: &CoreLink,
        port: &Rc<Port>,
        frames: &[Bytes],
    ) -> Vec<Result<Queued, QueueFull>> {
        let placed = frames
            .iter()
            .map(|frame| {
                let placed = port.enqueue(Outgoing::bare(frame.clone()), None, None);
                link.touched(port);
                placed
            })
            .collect();
        link.flush_touched();
        placed
    }

    #[test]
    fn a_burst_beyond_the_queue_bound_that_the_kernel_takes_is_no_slow_consumer() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.limits.outbound_queue_frames_max = 8);
            let Carried {
                port,
                mut peer,
                ended,
            } = carried(&link, None, None).await;
            let sent = frames(30, 256);
            for burst in sent.chunks(15) {
                // One turn queues nearly twice the bound before the writer runs: the slack.
                let placed = one_turn(&link, &port, burst);
                let in_slack = placed
                    .iter()
                    .filter(|placed| **placed == Ok(Queued::InSlack))
                    .count();
                assert_eq!(in_slack, 7, "{driver}: {placed:?}");
                assert!(placed.iter().all(Result::is_ok), "{driver}: {placed:?}");
                assert_eq!(
                    port.queued(),
                    0,
                    "{driver}: the kernel took the burst at once"
                );
            }
            assert_eq!(link.metrics().frames_out.get(), 30, "{driver}");
            let expected = sent.concat();
            assert!(
                read_bytes(&mut peer, expected.len()).await == expected,
                "{driver}"
            );
            assert!(port.is_open(), "{driver}");
            drop(peer);
            ends(ended).await;
        });
    }

    #[test]
    fn a_peer_that_does_not_read_is_a_slow_consumer_once_the_kernel_refuses_its_bytes() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.limits.outbound_queue_frames_max = 8);
            let Carried { port, peer, ended } =
                carried(&link, Some(SMALL_BUFFER_BYTES), Some(SMALL_BUFFER_BYTES)).await;
            let frame = frames(1, 1024).remove(0);
            let mut queued = 0;
            let refusal = loop {
                // Turns of half the bound, as the shard's fan-out budget makes them.
                let placed = one_turn(
                    &link,
                    &port,
                    &[frame.clone(), frame.clone(), frame.clone(), frame.clone()],
                );
                if let Some(Err(full)) = placed.iter().find(|placed| placed.is_err()) {
                    break *full;
                }
                queued += placed.len();
                assert!(queued < 1024, "{driver}: never refused");
                other_tasks_run().await;
            };
            assert_eq!(
                refusal,
                QueueFull::SlowConsumer { frames_max: 8 },
                "{driver}"
            );
            let on_wire = link.metrics().frames_out.get() as usize;
            assert!(
                on_wire > 0 && queued >= on_wire + 8,
                "{driver}: {on_wire} frames on the wire, {queued} queued"
            );
            port.reset();
            ends(ended).await;
            drop(peer);
        });
    }

    /// A connection whose peer never reads, with more queued than the socket buffers hold,
    /// closing gracefully.
    async fn stuck_flush(link: &Rc<CoreLink>) -> Carried {
        let carried = carried(link, Some(SMALL_BUFFER_BYTES), Some(SMALL_BUFFER_BYTES)).await;
        for frame in frames(64, 4096) {
            carried
                .port
                .enqueue(Outgoing::bare(frame), None, None)
                .expect("room");
            link.touched(&carried.port);
        }
        link.flush_touched();
        link.flush(&carried.port);
        carried
    }

    #[test]
    fn a_flushing_close_to_a_peer_that_never_reads_is_reset_at_its_deadline() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.timeouts.flush_deadline_ms = 150);
            let Carried {
                port,
                mut peer,
                ended,
            } = stuck_flush(&link).await;
            other_tasks_run().await;
            assert!(!link.expire_deadlines(link.shared.now()));
            assert_eq!(
                port.life(),
                Life::Flushing,
                "{driver}: reset before the deadline"
            );
            let due = link.next_deadline().expect("the flush deadline");
            let wait_ms = due.as_ms().saturating_sub(link.shared.now().as_ms());
            assert!(wait_ms <= 150, "{driver}");
            // The deadline is the event awaited here: time itself.
            monoio::time::sleep(Duration::from_millis(wait_ms + 1)).await;
            link.expire_deadlines(link.shared.now());
            assert_eq!(port.life(), Life::Resetting, "{driver}");
            assert_eq!(link.metrics().flush_timeouts.get(), 1, "{driver}");
            ends(ended).await;
            let end = read_to_end(&mut peer).await;
            assert_eq!(
                end.map_err(|error| error.kind()),
                Err(std::io::ErrorKind::ConnectionReset),
                "{driver}: a reset, not a FIN"
            );
        });
    }

    #[test]
    fn a_flushing_close_to_a_peer_that_reads_delivers_everything_then_a_fin() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.timeouts.flush_deadline_ms = 150);
            let Carried {
                port,
                mut peer,
                ended,
            } = stuck_flush(&link).await;
            assert_eq!(
                read_to_end(&mut peer).await.ok(),
                Some(64 * 4096),
                "{driver}"
            );
            ends(ended).await;
            assert_eq!(port.life(), Life::Flushing, "{driver}");
            assert_eq!(link.metrics().flush_timeouts.get(), 0, "{driver}");
            assert_eq!(link.ports_open(), 0, "{driver}");
        });
    }

    /// `count` tiny frames on the wire: a length byte and three body bytes each.
    fn wire_frames(count: u8) -> Vec<u8> {
        (0..count)
            .flat_map(|index| [3, b'f', b'#', index])
            .collect()
    }

    /// Lets the other tasks run until `done` holds, at most `naps_max` times.
    async fn within_naps(naps_max: usize, done: impl Fn() -> bool) -> bool {
        for _ in 0..naps_max {
            if done() {
                return true;
            }
            other_tasks_run().await;
        }
        done()
    }

    /// Runs the other tasks until `done` holds, for at most `GUARD`.
    async fn soon(done: impl Fn() -> bool) -> bool {
        let waited = monoio::time::timeout(GUARD, async {
            while !done() {
                other_tasks_run().await;
            }
        });
        waited.await.is_ok()
    }

    #[test]
    fn a_reader_out_of_credit_stops_and_a_credit_resumes_it_without_a_timer() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| config.limits.frames_in_flight_per_stream_max = 2);
            let Carried {
                port,
                mut peer,
                ended,
            } = carried(&link, None, None).await;
            // The first frame goes as the Join (no credit), two more on credit, three wait.
            let (written, _) =
                monoio::io::AsyncWriteRentExt::write_all(&mut peer, wire_frames(6)).await;
            written.expect("peer writes");
            let paused = soon(|| link.metrics().read_paused.get() > 0).await;
            assert!(paused, "{driver}: the reader never ran out of credit");
            let mut handed = Vec::new();
            while let Some(message) = link.router.pop_home() {
                handed.push(message);
            }
            assert_eq!(handed.len(), 3, "{driver}: {handed:?}");
            assert!(matches!(handed[0], crate::io::router::HomeMsg::Join { .. }));
            assert_eq!((port.credits(), link.in_flight()), (0, 2), "{driver}");
            assert!(
                !within_naps(16, || link.router.has_home()).await,
                "{driver}: read on without credit"
            );
            // One credit: exactly one more frame (read already, waiting for its credit), within
            // a few naps of a millisecond: woken by the credit, not by a housekeeping timer.
            link.credit(port.id);
            assert!(
                within_naps(16, || link.router.has_home()).await,
                "{driver}: not resumed"
            );
            assert!(link.router.pop_home().is_some());
            assert!(
                !within_naps(16, || link.router.has_home()).await,
                "{driver}"
            );
            link.credit(port.id);
            link.credit(port.id);
            assert!(soon(|| link.router.has_home()).await, "{driver}");
            // The peer hangs up; the carrier ends once the home core consumed what it read.
            drop(peer);
            while link.in_flight() > 0 {
                link.credit(port.id);
            }
            ends(ended).await;
        });
    }

    /// Frame memory of the memory test: small, yet with room for one cohort's history ring
    /// (half of frame memory, at least one whole frame).
    const MEMORY_BYTES: usize = 32 * 1024;

    #[test]
    fn a_reader_at_the_frame_memory_bound_waits_and_a_release_resumes_it() {
        harness::on_each_driver(|driver| async move {
            let link = link_with(|config| {
                config.limits.frame_memory_bytes_max = MEMORY_BYTES;
                config.limits.cohorts_max = 1;
            });
            let filler = link.memory().frame(&[0; MEMORY_BYTES]);
            let Carried {
                port: _port,
                mut peer,
                ended,
            } = carried(&link, None, None).await;
            let (written, _) =
                monoio::io::AsyncWriteRentExt::write_all(&mut peer, wire_frames(1)).await;
            written.expect("peer writes");
            let paused = soon(|| link.metrics().read_paused_memory.get() > 0).await;
            assert!(paused, "{driver}: the reader did not wait for memory");
            assert!(
                !within_naps(16, || link.router.has_home()).await,
                "{driver}: read at the bound"
            );
            // The release rings this core's doorbell (rung before by the accept: clear that);
            // the core's next turn wakes the waiting readers.
            let doorbell = &link.router.inbound().doorbell;
            let _ =
                doorbell.poll_rung(&mut std::task::Context::from_waker(std::task::Waker::noop()));
            drop(filler);
            let rung =
                monoio::time::timeout(GUARD, std::future::poll_fn(|cx| doorbell.poll_rung(cx)));
            rung.await.expect("the release rang the core");
            link.wake_memory_waiters();
            assert!(
                soon(|| link.router.has_home()).await,
                "{driver}: not resumed"
            );
            assert_eq!(link.metrics().read_paused_memory.get(), 1, "{driver}");
            drop(peer);
            ends(ended).await;
        });
    }
}
