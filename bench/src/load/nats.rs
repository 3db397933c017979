//! Just enough of the NATS client protocol (text over TCP) to run the pubsub shape
//! against a NATS server side by side with the broker: `INFO`, `CONNECT`, `SUB`, `PUB`,
//! `MSG`, `PING`/`PONG`.
//!
//! Owns: [`connect`] (read `INFO`, send `CONNECT` with `verbose` and `echo` off, then a
//! `PING` whose `PONG` proves the server took everything before it) and [`subscribe`]
//! (`SUB` then the same `PING` round trip, so a subscription is in force before any message
//! is published), and [`msg_bytes`], the length of one delivery on the wire (what a
//! counting subscriber divides its bytes by). The `MSG` parsing lives with the receiver,
//! `PUB` with the sender.
//!
//! Never: verifies anything (NATS carries opaque bytes: the stamp is the whole check),
//! reconnects, or uses TLS or authentication.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;

use crate::load::dial;

/// Bytes of a server's `PING\r\n` line.
pub const NATS_PING_BYTES: u64 = 6;

/// Bound on each handshake round trip (connecting has its own, [`dial::CONNECT_TIMEOUT`]).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected, acknowledged NATS stream and any bytes read past the handshake.
#[derive(Debug)]
pub struct NatsStream {
    /// The socket (blocking).
    pub stream: TcpStream,
    /// Bytes after the last `PONG`.
    pub leftover: BytesMut,
}

/// Connects to `target` from `source` (`None`: the kernel's choice) and completes the
/// handshake.
pub fn connect(target: &str, source: Option<IpAddr>, name: &str) -> io::Result<NatsStream> {
    let stream = dial::connect(target, source)?;
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

/// Bytes of one delivery to subscription `sid` of `subject` with `payload_bytes` of payload:
/// `MSG <subject> <sid> <#bytes>\r\n<payload>\r\n` (no reply subject: the sender sets none).
pub fn msg_bytes(subject: &str, sid: u64, payload_bytes: usize) -> usize {
    format!("MSG {subject} {sid} {payload_bytes}\r\n").len() + payload_bytes + 2
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_is_the_msg_line_the_payload_and_a_line_end() {
        let line = "MSG bps.bench.0011223344556677 12 4096\r\n";
        assert_eq!(
            msg_bytes("bps.bench.0011223344556677", 12, 4096),
            line.len() + 4096 + 2
        );
        assert_eq!(msg_bytes("s", 1, 0), "MSG s 1 0\r\n\r\n".len());
    }
}
