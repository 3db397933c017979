//! The listening sockets: one `SO_REUSEPORT` listener per core on the same address, so the
//! kernel spreads incoming connections across cores without a shared accept queue.
//!
//! Owns socket creation and options. When the configured port is 0 the first listener
//! picks the port and the others bind to the port it got.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Pending connections the kernel keeps per listener; the sysctl `net.core.somaxconn`
/// caps it (see tuning/).
const LISTEN_BACKLOG_CONNECTIONS: i32 = 4096;

/// Binds `count` listeners on `addr`, all sharing one port.
pub fn bind_all(addr: SocketAddr, count: usize) -> io::Result<Vec<TcpListener>> {
    assert!(count > 0, "at least one core listens");
    let first = bind_one(addr)?;
    let bound = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..count {
        listeners.push(bind_one(bound)?);
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG_CONNECTIONS)?;
    Ok(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_gives_every_listener_the_same_port() {
        let listeners = bind_all("127.0.0.1:0".parse().expect("literal address"), 3)
            .expect("binding loopback listeners");
        let ports: Vec<u16> = listeners
            .iter()
            .map(|listener| listener.local_addr().expect("bound").port())
            .collect();
        assert_ne!(ports[0], 0);
        assert!(ports.iter().all(|port| *port == ports[0]), "{ports:?}");
    }
}
