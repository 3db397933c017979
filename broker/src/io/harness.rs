//! Test support for the I/O layer's own tests: a core's shared state built from a config,
//! monoio runtimes built as the broker builds them, and TCP socket pairs on 127.0.0.1.
//!
//! Owns: `shared` (a `Shared` for `cores` cores with inline verification, so no pool thread
//! runs), `on_each_driver` (runs a test on the epoll driver, and on io_uring too when the
//! kernel offers it, as `server.io_uring = "prefer"` would), `tcp_pair` (an accepted
//! connection and its peer, the peer's receive buffer sized before it connects) and the
//! socket-option helpers the tests read back.
//! Never does: stand in for what it tests: carriers, ports and links under test are the
//! real ones; only the shard's part (queueing, crediting, running deadlines) is played by
//! the test.

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use monoio::net::{TcpListener, TcpStream};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::{Shared, shared_state, ws};
use crate::budget::MemoryBudget;
use crate::config::{BrokerConfig, VerifyMode};
use crate::protocol::{Machine, PeerLedger};

/// The longest any single wait of a test may take before the test fails: a guard against a
/// hang, never a synchronisation (every wait it guards completes on an event).
pub const GUARD: Duration = Duration::from_secs(2);

/// A broker's shared state for `cores` cores, from the defaults as `edit` changes them, and
/// the machines of those cores.
pub fn shared(cores: usize, edit: impl FnOnce(&mut BrokerConfig)) -> (Arc<Shared>, Vec<Machine>) {
    let mut config = BrokerConfig::default();
    config.verify.mode = VerifyMode::Inline;
    edit(&mut config);
    let protocol = config.effective_protocol();
    let ledger = Arc::new(PeerLedger::new(&protocol));
    let machines: Vec<Machine> = (0..cores)
        .map(|core| {
            let seed = u64::try_from(core).unwrap_or(u64::MAX);
            Machine::new(
                protocol.clone(),
                Arc::clone(&ledger),
                StdRng::seed_from_u64(seed),
            )
        })
        .collect();
    let registries = machines.iter().map(Machine::counters).collect();
    let budget = MemoryBudget::of(&config, cores, 0, 1 << 30);
    let shared = shared_state(
        &config,
        (cores, &[]),
        (budget, Arc::new(ws::StaticFiles::default())),
        ledger,
        registries,
    );
    (Arc::new(shared), machines)
}

/// Runs `test` to its end on a fresh epoll runtime, then on a fresh io_uring one when the
/// kernel has io_uring; both with the timer, as the broker's cores run.
pub fn on_each_driver<F, T>(test: F)
where
    F: Fn(&'static str) -> T,
    T: Future<Output = ()>,
{
    let legacy = monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
        .enable_timer()
        .build();
    legacy.expect("epoll runtime").block_on(test("epoll"));
    if monoio::utils::detect_uring() {
        let uring = monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build();
        uring.expect("io_uring runtime").block_on(test("io_uring"));
    }
}

/// A listener on 127.0.0.1 with an ephemeral port.
pub fn listener() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("listener address");
    (listener, addr)
}

/// A connection accepted on `listener` and its peer, whose receive buffer is set to
/// `peer_receive_bytes` before it connects (so the window it offers is small from the
/// start), when given.
pub async fn tcp_pair(
    listener: &TcpListener,
    addr: SocketAddr,
    peer_receive_bytes: Option<usize>,
) -> (TcpStream, TcpStream) {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .expect("peer socket");
    if let Some(bytes) = peer_receive_bytes {
        socket.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
    }
    // Loopback completes the handshake in the kernel, before the accept.
    socket.connect(&addr.into()).expect("connect");
    // The runtime must never block in a peer's read or write.
    socket.set_nonblocking(true).expect("O_NONBLOCK");
    let peer = TcpStream::from_std(socket.into()).expect("peer stream");
    let (accepted, _) = monoio::time::timeout(GUARD, listener.accept())
        .await
        .expect("accepted in time")
        .expect("accept");
    (accepted, peer)
}

/// Shrinks a socket's send buffer to about `bytes` (the kernel doubles the value and keeps a
/// floor), so a writer meets a full socket after a few frames.
pub fn shrink_send_buffer(fd: RawFd, bytes: usize) {
    // SAFETY: `fd` is an open socket owned by the caller for the duration of the call.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    socket2::SockRef::from(&borrowed)
        .set_send_buffer_size(bytes)
        .expect("SO_SNDBUF");
}

/// Runs `read` on the socket behind a monoio stream (to read its options back).
pub fn with_socket<R>(stream: &TcpStream, read: impl FnOnce(&socket2::SockRef<'_>) -> R) -> R {
    // SAFETY: the fd is `stream`'s open socket, borrowed only for this call.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    read(&socket2::SockRef::from(&fd))
}
