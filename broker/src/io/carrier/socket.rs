//! The socket side every carrier shares: accepting, socket options, cancellation.
//!
//! Owns: the next accepted connection of a listener with a backoff after a failed accept;
//! the socket options of an accepted connection (no Nagle; keepalive and
//! `TCP_USER_TIMEOUT`, so a vanished peer frees its slot within
//! `server.tcp_user_timeout_ms` even when the broker has nothing to send it); the
//! cancellers of a stream's read and write in flight, armed in the port's close hook; and
//! how a reset is a reset (zero linger, so the peer sees an RST and not a FIN) and a flush
//! ends (a half-close).
//! Never does: read or write a stream's bytes.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use monoio::io::{CancelHandle, Canceller};
use monoio::net::{TcpListener, TcpStream};

use crate::io::Settings;
use crate::io::link::CoreLink;
use crate::io::port::{Life, Port};

/// Probes a silent peer gets before the kernel gives up on it (after the keepalive idle time,
/// one per interval): with `TCP_USER_TIMEOUT` the connection ends within the user timeout.
pub const KEEPALIVE_PROBES: u32 = 3;

/// How long a listener waits after a failed accept (EMFILE and friends) rather than spin.
const ACCEPT_BACKOFF_MS: u64 = 10;

/// The next accepted connection of `listener`; `None` once a drain has shut it. A failed
/// accept is logged (rate-limited, as `what`) and retried after `ACCEPT_BACKOFF_MS`.
pub async fn accept_next(
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
                    tracing::warn!(core = link.core.index(), %error, "{what}");
                }
                monoio::time::sleep(Duration::from_millis(ACCEPT_BACKOFF_MS)).await;
            }
        }
    }
}

/// Socket options of an accepted connection.
pub fn configure(stream: &TcpStream, settings: &Settings) {
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
pub struct Cancellers {
    read: RefCell<Option<Canceller>>,
    write: RefCell<Option<Canceller>>,
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

    fn cancel(slot: &RefCell<Option<Canceller>>) {
        if let Some(canceller) = slot.borrow_mut().take() {
            // The handles share the cancelled state; the fresh canceller returned is unused.
            drop(canceller.cancel());
        }
    }
}

/// Half-closes a connection: the peer reads to the end of what was written, then EOF.
pub fn shutdown_write(fd: RawFd) {
    // SAFETY: `fd` is this connection's socket, open until both halves are dropped, which
    // happens only after the reader and writer ended. ENOTCONN after a peer reset is fine.
    unsafe {
        libc::shutdown(fd, libc::SHUT_WR);
    }
}

/// Makes the socket's close a TCP reset.
pub fn set_linger_zero(fd: RawFd) {
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
