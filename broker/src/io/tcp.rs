//! The TCP carrier: BPS's native transport, one stream per TCP connection, frames from the
//! first byte (docs/PROTOCOL.md §2). A thin carrier on `carrier`: its decoder splits
//! length-delimited frames off the read buffer, and it has no encoder (the shared frame is
//! the message).
//!
//! Owns: the accept loop of one core's listener, and how a TCP stream ends: a flushed
//! stream half-closes (a FIN after what was queued), a reset one closes with linger 0 (the
//! peer sees an RST).
//! Never does: touch the shard or the machine; everything goes through the port and the link.

use std::os::fd::AsRawFd;
use std::rc::Rc;

use monoio::io::Splitable;
use monoio::net::{TcpListener, TcpStream};

use super::carrier::{self, Cancellers, WriteEnd};
use super::link::CoreLink;
use super::port::{Port, Transport};
use super::read_buffer::ReadBuffer;
use crate::protocol::ClosedBy;

/// Accepts until a drain shuts the listener.
pub async fn accept_loop(link: Rc<CoreLink>, listener: TcpListener) {
    link.register_listener(listener.as_raw_fd());
    while let Some((stream, addr)) = carrier::accept_next(&link, &listener, "accept failed").await {
        if link.draining() {
            return;
        }
        let Ok(port) = link.admit(addr.ip(), Transport::Tcp) else {
            // Refused: dropped, so closed at once.
            continue;
        };
        carrier::configure(&stream, link.settings());
        monoio::spawn(run(Rc::clone(&link), port, stream));
    }
}

/// Runs one admitted connection to its end, then tells the link.
pub async fn run(link: Rc<CoreLink>, port: Rc<Port>, stream: TcpStream) {
    let fd = stream.as_raw_fd();
    let (read_handle, write_handle) = Cancellers::arm(&port, fd, true);
    port.attach_socket(fd);
    let (mut reader, writer) = stream.into_split();
    let writer_task = monoio::spawn(carrier::write_loop(
        Rc::clone(&link),
        Rc::clone(&port),
        writer,
        write_handle,
    ));
    let mut buffer = ReadBuffer::new(std::sync::Arc::clone(link.memory()));
    let mut frames = carrier::Delimited::new(&link, &port);
    let cause = carrier::read_loop(
        (&link, &port),
        &mut reader,
        read_handle,
        &mut buffer,
        &mut frames,
    )
    .await;
    if port.is_open() {
        match cause {
            // The peer finished sending: what is queued for it still goes out.
            ClosedBy::Peer => link.flush(&port),
            ClosedBy::Io | ClosedBy::QueueOverflow => port.reset(),
        }
    }
    let (writer, end) = writer_task.await;
    if end == WriteEnd::Flushed {
        carrier::shutdown_write(fd);
    }
    // The socket is about to close: nothing may touch its fd from now on.
    port.clear_on_close();
    // A write half dropped alone sends a FIN (monoio shuts it down); the whole socket closes
    // as its linger setting says, so a reset reaches the peer as a TCP reset.
    drop(reader.reunite(writer));
    link.ended(&port, cause);
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

    use super::run;
    use crate::io::carrier::{KEEPALIVE_PROBES, configure};
    use crate::io::harness::{self, GUARD};
    use crate::io::link::CoreLink;
    use crate::io::outbound::{QueueFull, Queued};
    use crate::io::outgoing::Outgoing;
    use crate::io::port::{Life, Port, Transport};
    use crate::protocol::CoreId;

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
        Rc::new(CoreLink::new(CoreId::new(0), shared))
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
            let link = link_with(|config| config.protocol.outbound_queue_frames_max = 1024);
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
            let link = link_with(|config| config.protocol.outbound_queue_frames_max = 8);
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
            let link = link_with(|config| config.protocol.outbound_queue_frames_max = 8);
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
            let link = link_with(|config| config.protocol.frames_in_flight_per_stream_max = 2);
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
                config.protocol.cohorts_max = 1;
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
