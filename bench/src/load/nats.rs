//! Just enough of the NATS client protocol (text over TCP) to run the pubsub shape
//! against a NATS server side by side with the broker: `INFO`, `CONNECT`, `SUB`, `PUB`,
//! `MSG`, `PING`/`PONG`.
//!
//! Owns: [`connect`] (read `INFO`, send `CONNECT` with `verbose` and `echo` off, then a
//! `PING` whose `PONG` proves the server took everything before it) and [`subscribe`]
//! (`SUB` then the same `PING` round trip, so a subscription is in force before any message
//! is published). The `MSG` parsing lives with the receiver, `PUB` with the sender.
//!
//! Never: verifies anything (NATS carries opaque bytes: the stamp is the whole check),
//! reconnects, or uses TLS or authentication.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::BytesMut;

/// Bound on connecting and on each handshake round trip.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected, acknowledged NATS stream and any bytes read past the handshake.
#[derive(Debug)]
pub struct NatsStream {
    /// The socket (blocking).
    pub stream: TcpStream,
    /// Bytes after the last `PONG`.
    pub leftover: BytesMut,
}

/// Connects to `target` and completes the handshake.
pub fn connect(target: &str, name: &str) -> io::Result<NatsStream> {
    let address = target.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{target} resolves to nothing"),
        )
    })?;
    let stream = TcpStream::connect_timeout(&address, HANDSHAKE_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if !line.starts_with("INFO ") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{target} is not a NATS server (first line {:?})",
                line.trim_end()
            ),
        ));
    }
    let connect = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"tls_required\":false,\"name\":\"{name}\",\
         \"lang\":\"rust\",\"version\":\"{}\",\"protocol\":1,\"echo\":false}}\r\nPING\r\n",
        env!("CARGO_PKG_VERSION")
    );
    (&stream).write_all(connect.as_bytes())?;
    await_pong(&mut reader)?;
    let leftover = BytesMut::from(reader.buffer());
    Ok(NatsStream { stream, leftover })
}

/// Subscribes `nats` to `subject` as `sid` and waits until the server has it.
pub fn subscribe(nats: NatsStream, subject: &str, sid: u64) -> io::Result<NatsStream> {
    let NatsStream { stream, leftover } = nats;
    (&stream).write_all(format!("SUB {subject} {sid}\r\nPING\r\n").as_bytes())?;
    let mut reader = BufReader::new(leftover.as_ref().chain(stream.try_clone()?));
    await_pong(&mut reader)?;
    let leftover = BytesMut::from(reader.buffer());
    Ok(NatsStream { stream, leftover })
}

fn await_pong(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "NATS server closed the stream",
            ));
        }
        match line.trim_end() {
            "PONG" => return Ok(()),
            error if error.starts_with("-ERR") => {
                return Err(io::Error::other(format!("NATS: {error}")));
            }
            _ => {}
        }
    }
}
