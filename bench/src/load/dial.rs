//! The generator's outbound connections: from a chosen loopback source address, so that a
//! broker sees the load spread over several peers (a peer is the remote IP address,
//! docs/PROTOCOL.md §2), and the BPS handshake on such a connection.
//!
//! Owns: [`connect`] (bind the source address, connect within [`CONNECT_TIMEOUT`],
//! `TCP_NODELAY`) and [`join`] (over WebSocket first the upgrade, [`crate::load::websocket`];
//! then write the `Join`, read the `Ack` within [`HANDSHAKE_TIMEOUT`], R2–R5; bytes that came
//! after the `Ack` are handed back as they came off the wire; a refusal over WebSocket
//! keeps the broker's close reason, which names the bound). The client
//! library's `Session` does the same handshake but connects by itself, from the address the
//! kernel picks (always 127.0.0.1 on loopback), which is why the generator dials here.
//!
//! Never: signs, reads past the `Ack`, or retries a refused Join (the caller reports it).

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bps_client::refusal::Refusal;
use bps_client::session::REFUSAL_REASON_WAIT;
use bps_client::websocket::{Framing, Next, close_reason};
use bps_proto::{
    Address, CHALLENGE_BYTES, FRAME_BYTES_MAX_DEFAULT, Hash, Spec, Status, decode_ack,
    encode_frame, next_frame,
};
use bytes::{Bytes, BytesMut};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::load::websocket::{self, Transport};

/// Bound on one TCP connect (a full accept backlog drops SYNs; the retry comes after 1 s).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Bound on waiting for the `Ack` (a broker joining thousands of streams may be slow).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes read per call while waiting for the `Ack`.
const ACK_READ_BYTES: usize = 4096;

/// A joined stream.
#[derive(Debug)]
pub struct Joined {
    /// The socket (blocking, with a write timeout).
    pub stream: TcpStream,
    /// The stream's challenge from the `Ack` (R4).
    pub challenge: Hash,
    /// Bytes the broker sent after the `Ack`.
    pub leftover: BytesMut,
}

/// Why a Join did not give a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinError {
    /// `Ack{FULL}` or `Ack{REJECTED}` (R5), with the bound or reason the broker named.
    Refused(Refusal),
    /// Anything else: the connection, the timeout or a malformed `Ack`.
    Failed(String),
}

/// The next frame body in `buf` (over WebSocket: the next message's, answering pings).
fn buffered_frame(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    framing: Option<&mut Framing>,
) -> Result<Option<Bytes>, JoinError> {
    let Some(framing) = framing else {
        return next_frame(buf, FRAME_BYTES_MAX_DEFAULT)
            .map_err(|error| JoinError::Failed(format!("bad frame from the broker: {error}")));
    };
    loop {
        match framing.next_frame(buf) {
            Ok(Next::Frame(body)) => return Ok(Some(body)),
            Ok(Next::Wanting) => return Ok(None),
            Ok(Next::Skipped) => {}
            Ok(Next::Reply(reply)) => stream
                .write_all(&reply)
                .map_err(|error| JoinError::Failed(format!("pong: {error}")))?,
            Err(error) => return Err(JoinError::Failed(format!("WebSocket: {error}"))),
        }
    }
}

/// Connects to `target` from `source` (`None`: the kernel's choice).
pub fn connect(target: &str, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let address = resolve(target)?;
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    if let Some(source) = source {
        socket
            .bind(&SockAddr::from(SocketAddr::new(source, 0)))
            .map_err(|error| {
                io::Error::new(error.kind(), format!("binding source {source}: {error}"))
            })?;
    }
    socket.connect_timeout(&SockAddr::from(address), CONNECT_TIMEOUT)?;
    socket.set_nodelay(true)?;
    Ok(socket.into())
}

fn resolve(target: &str) -> io::Result<SocketAddr> {
    target.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{target} resolves to no address"),
        )
    })
}

/// Connects from `source` and joins `spec` as `addr` over `transport` (module docs).
pub fn join(
    target: &str,
    source: Option<IpAddr>,
    spec: &Spec,
    addr: &Address,
    transport: Transport,
) -> Result<Joined, JoinError> {
    let stream = connect(target, source)
        .map_err(|error| JoinError::Failed(format!("cannot connect to {target}: {error}")))?;
    join_on(stream, target, spec, addr, transport)
}

/// Joins `spec` as `addr` on `stream`, already connected to `target` (over libp2p: the
/// generator's end of a bridged pubsub stream, bare frames as on TCP).
pub fn join_on(
    mut stream: TcpStream,
    target: &str,
    spec: &Spec,
    addr: &Address,
    transport: Transport,
) -> Result<Joined, JoinError> {
    let failed = |error: io::Error| JoinError::Failed(format!("{target}: {error}"));
    stream
        .set_write_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(failed)?;
    let join = encode_frame(&spec.to_join(addr));
    let (mut buf, mut framing) = match transport {
        Transport::Tcp | Transport::P2p => {
            stream.write_all(&join).map_err(failed)?;
            (BytesMut::with_capacity(ACK_READ_BYTES), None)
        }
        Transport::Ws => {
            let buf = websocket::upgrade(&mut stream, target, HANDSHAKE_TIMEOUT)
                .map_err(|error| JoinError::Failed(format!("ws://{target}/bps/v1: {error}")))?;
            stream.write_all(&Framing::wrap(&join)).map_err(failed)?;
            (buf, Some(Framing::new(FRAME_BYTES_MAX_DEFAULT)))
        }
    };
    let body = read_ack(&mut stream, &mut buf, framing.as_mut(), &failed)?;
    stream.set_read_timeout(None).map_err(failed)?;
    let ack = decode_ack(body).map_err(|error| JoinError::Failed(format!("bad Ack: {error}")))?;
    match Status::try_from(ack.status) {
        Ok(Status::Ok) => {
            let challenge = Hash::try_from(ack.challenge.as_ref()).map_err(|_| {
                JoinError::Failed(format!(
                    "bad Ack: OK with a {}-byte challenge, expected {CHALLENGE_BYTES}",
                    ack.challenge.len()
                ))
            })?;
            Ok(Joined {
                stream,
                challenge,
                leftover: buf,
            })
        }
        Ok(status @ (Status::Full | Status::Rejected)) => {
            let reason = framing.as_mut().and_then(|framing| {
                close_reason(&mut stream, &mut buf, framing, REFUSAL_REASON_WAIT)
            });
            Err(JoinError::Refused(match reason {
                Some(reason) => Refusal::with_reason(status, reason),
                None => Refusal::new(status),
            }))
        }
        Ok(Status::Unspecified) | Err(_) => {
            Err(JoinError::Failed(format!("bad Ack: status {}", ack.status)))
        }
    }
}

/// The Ack's frame body, read within [`HANDSHAKE_TIMEOUT`]; what follows it stays in `buf`.
fn read_ack(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    mut framing: Option<&mut Framing>,
    failed: &dyn Fn(io::Error) -> JoinError,
) -> Result<Bytes, JoinError> {
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
    loop {
        if let Some(body) = buffered_frame(stream, buf, framing.as_deref_mut())? {
            return Ok(body);
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(JoinError::Failed(format!(
                "no Ack within {} ms",
                HANDSHAKE_TIMEOUT.as_millis()
            )));
        }
        stream.set_read_timeout(Some(remaining)).map_err(failed)?;
        let mut chunk = [0u8; ACK_READ_BYTES];
        match stream.read(&mut chunk) {
            Ok(0) => return Err(JoinError::Failed("the broker closed the stream".to_owned())),
            Ok(read) => buf.extend_from_slice(&chunk[..read]),
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) => {}
            Err(error) => return Err(failed(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};
    use std::thread;

    use bps_proto::{Ack, Binding, decode_join};
    use bytes::Bytes;

    use super::*;

    fn spec() -> Spec {
        Spec {
            topic: [7; 32],
            binding: Binding::FeedTopic,
            admin: Some([1; 20]),
            all: false,
            history: false,
            closed: false,
        }
    }

    /// A peer that reads one Join, answers `reply` and returns (the peer address it saw,
    /// the Join's addr).
    fn serve_once(reply: Vec<u8>) -> (String, thread::JoinHandle<(SocketAddr, Address)>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        let handle = thread::spawn(move || {
            let (mut stream, peer) = listener.accept().expect("accept");
            let mut buf = BytesMut::new();
            let body = loop {
                if let Some(body) = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT).expect("frame") {
                    break body;
                }
                let mut chunk = [0u8; 256];
                let read = stream.read(&mut chunk).expect("read");
                buf.extend_from_slice(&chunk[..read]);
            };
            stream.write_all(&reply).expect("write");
            let join = decode_join(body).expect("join");
            let addr = Address::try_from(join.addr.as_ref()).expect("20 bytes");
            (peer, addr)
        });
        (target, handle)
    }

    #[test]
    fn a_join_from_a_chosen_source_is_seen_from_that_address() {
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![9; 32]),
        });
        let after = b"after the ack".to_vec();
        let (target, peer) = serve_once([ack.to_vec(), after.clone()].concat());
        let source = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7));
        let joined =
            join(&target, Some(source), &spec(), &[3; 20], Transport::Tcp).expect("joined");
        assert_eq!(joined.challenge, [9; 32]);
        let (seen, addr) = peer.join().expect("peer");
        assert_eq!(seen.ip(), source, "the broker sees the chosen source");
        assert_eq!(addr, [3; 20]);
        // The bytes after the Ack are either buffered already or still in the socket.
        let mut rest = joined.leftover.to_vec();
        let mut stream = joined.stream;
        while rest.len() < after.len() {
            let mut chunk = [0u8; 64];
            let read = stream.read(&mut chunk).expect("read");
            assert!(read > 0, "closed before the bytes after the Ack");
            rest.extend_from_slice(&chunk[..read]);
        }
        assert_eq!(rest, after);
    }

    /// A WebSocket peer: answers the upgrade, reads one masked message (the Join), answers
    /// `messages` as server binary messages; returns the Join's addr.
    fn serve_ws_once(messages: Vec<Vec<u8>>) -> (String, thread::JoinHandle<Address>) {
        use bps_ws::codec::{Decoder, Event, Opcode};
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).expect("read");
                head.push(byte[0]);
            }
            let head = String::from_utf8(head).expect("utf-8");
            assert!(head.starts_with("GET /bps/v1 HTTP/1.1"), "{head}");
            let key = head
                .lines()
                .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
                .expect("a key");
            stream
                .write_all(&bps_ws::switching_protocols(&bps_ws::accept_key(key)))
                .expect("101");
            let mut decoder = Decoder::new(FRAME_BYTES_MAX_DEFAULT + 16);
            let mut buf = BytesMut::new();
            let message = loop {
                if let Some(event) = decoder.decode(&mut buf).expect("masked frames") {
                    break event;
                }
                let mut chunk = [0u8; 256];
                let read = stream.read(&mut chunk).expect("read");
                buf.extend_from_slice(&chunk[..read]);
            };
            let Event::Message {
                text: false,
                payload,
            } = message
            else {
                panic!("the Join is one binary message: {message:?}");
            };
            let mut frame = BytesMut::from(&payload[..]);
            let body = next_frame(&mut frame, FRAME_BYTES_MAX_DEFAULT)
                .expect("a frame")
                .expect("whole");
            assert!(frame.is_empty(), "exactly one frame");
            for message in messages {
                stream
                    .write_all(&bps_ws::encode_server_frame(Opcode::Binary, &message))
                    .expect("write");
            }
            let join = decode_join(body).expect("join");
            Address::try_from(join.addr.as_ref()).expect("20 bytes")
        });
        (target, handle)
    }

    #[test]
    fn a_websocket_join_upgrades_sends_one_message_and_hands_back_the_framed_rest() {
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![5; 32]),
        });
        let after = b"after".to_vec();
        let (target, peer) = serve_ws_once(vec![ack.to_vec(), after.clone()]);
        let joined = join(&target, None, &spec(), &[4; 20], Transport::Ws).expect("joined");
        assert_eq!(joined.challenge, [5; 32]);
        assert_eq!(peer.join().expect("peer"), [4; 20]);
        let expected = bps_ws::encode_server_frame(bps_ws::Opcode::Binary, &after);
        let mut rest = joined.leftover.to_vec();
        let mut stream = joined.stream;
        while rest.len() < expected.len() {
            let mut chunk = [0u8; 64];
            let read = stream.read(&mut chunk).expect("read");
            assert!(read > 0, "closed before the message after the Ack");
            rest.extend_from_slice(&chunk[..read]);
        }
        assert_eq!(rest, expected, "the bytes after the Ack, framing included");
    }

    #[test]
    fn refusals_and_a_short_challenge_are_told_apart() {
        for status in [Status::Full, Status::Rejected] {
            let ack = encode_frame(&Ack {
                status: status as i32,
                challenge: Bytes::new(),
            });
            let (target, peer) = serve_once(ack.to_vec());
            assert_eq!(
                join(&target, None, &spec(), &[3; 20], Transport::Tcp).err(),
                Some(JoinError::Refused(Refusal::new(status)))
            );
            peer.join().expect("peer");
        }
        let short = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![1; 31]),
        });
        let (target, peer) = serve_once(short.to_vec());
        let error =
            join(&target, None, &spec(), &[3; 20], Transport::Tcp).expect_err("short challenge");
        assert!(
            matches!(&error, JoinError::Failed(message) if message.contains("31-byte")),
            "{error:?}"
        );
        peer.join().expect("peer");
    }
}
