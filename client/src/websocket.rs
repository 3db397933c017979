//! The WebSocket carrier of a BPS stream: the broker's native endpoint
//! (`ws://HOST:PORT/bps/v1`, docs/WEBSOCKET.md), where every binary message is exactly one
//! BPS frame (varint length and body), both ways.
//!
//! Owns: [`WsUrl`] (a `ws://` target taken apart), the client's opening handshake
//! ([`upgrade`]: the `GET` with a fresh random key, the `101` answer and its
//! `Sec-WebSocket-Accept` checked, any other status reported with the broker's one-line
//! reason), and [`Framing`]: each outbound frame as one masked binary message under a fresh
//! random key (RFC 6455 section 5.3), inbound server frames through `bps_ws`'s client-side
//! decoder, pings answered with pongs, a close frame turned into [`WsError::Closed`], and
//! after a refused `Ack` the close frame's reason ([`close_reason`]).
//!
//! Never: TLS (a reverse proxy terminates it, docs/WEBSOCKET.md; `wss://` is refused with
//! that word), an extension or subprotocol, a fragmented outbound message, or a look inside
//! a BPS frame (the session above decodes the `Ack`, the subscriber the `Broadcast`s).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bps_proto::peek_frame;
use bps_ws::codec::{CLOSE_NORMAL, Decoder, Event, Opcode, ProtocolError, close_payload};
use bps_ws::{accept_key, encode_client_frame};
use bytes::{Bytes, BytesMut};

/// The scheme of a WebSocket target.
pub const SCHEME: &str = "ws://";

/// The broker's native endpoint, where binary messages are BPS frames.
pub const NATIVE_PATH: &str = "/bps/v1";

/// Bound on the `101` answer's head: the broker's answers are a few hundred bytes, and a
/// peer that is not a WebSocket server must not make us buffer without end.
pub const RESPONSE_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Headers of the answer parsed at most (the broker sends four).
const RESPONSE_HEADERS_MAX: usize = 32;

/// Bytes of the refusal body kept for the error message (the broker's is one line).
const REASON_BYTES_MAX: usize = 512;

/// Random bytes of `Sec-WebSocket-Key` (RFC 6455 section 4.1: a 16-byte nonce).
const KEY_NONCE_BYTES: usize = 16;

/// Bytes of a BPS frame's varint prefix at most, over the frame bound (a message may carry
/// that much framing besides the body).
const PREFIX_BYTES_MAX: usize = 10;

/// Bytes read at a time during the handshake.
const READ_CHUNK_BYTES: usize = 4096;

/// A `ws://HOST:PORT/PATH` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsUrl {
    /// `HOST:PORT`, what is connected to and sent as `Host`.
    pub authority: String,
    /// The request target, starting with `/`.
    pub path: String,
}

impl WsUrl {
    /// `Ok(None)` for a target that is not a URL (`HOST:PORT`, the TCP transport); the URL
    /// for a `ws://` one; an error for a URL this carrier cannot serve.
    pub fn parse(target: &str) -> Result<Option<WsUrl>, WsError> {
        if !target.contains("://") {
            return Ok(None);
        }
        let Some(rest) = target.strip_prefix(SCHEME) else {
            return Err(WsError::Url(format!(
                "{target}: only {SCHEME} is served here (TLS is a reverse proxy's, \
                 docs/WEBSOCKET.md; the TCP transport is HOST:PORT)"
            )));
        };
        let (authority, path) = rest.find('/').map_or((rest, "/"), |at| rest.split_at(at));
        let has_port = authority
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !has_port {
            return Err(WsError::Url(format!(
                "{target}: expected {SCHEME}HOST:PORT/PATH (the broker's WebSocket port is \
                 1639 by default)"
            )));
        }
        Ok(Some(WsUrl {
            authority: authority.to_owned(),
            path: path.to_owned(),
        }))
    }
}

impl fmt::Display for WsUrl {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{SCHEME}{}{}", self.authority, self.path)
    }
}

/// Why the WebSocket carrier failed.
#[derive(Debug)]
pub enum WsError {
    /// The target is not a URL this carrier serves.
    Url(String),
    /// A socket error.
    Io(io::Error),
    /// The connection closed during the handshake.
    ClosedInHandshake,
    /// No complete answer to the upgrade within the handshake timeout.
    HandshakeTimeout(Duration),
    /// The answer is not HTTP, or its head exceeds [`RESPONSE_HEAD_BYTES_MAX`].
    BadResponse(String),
    /// The server answered the upgrade with another status (docs/WEBSOCKET.md, "Before the
    /// upgrade"), with its one-line reason.
    Refused {
        /// The HTTP status.
        status: u16,
        /// The reason the body gave (or the status line's, if the body was empty).
        reason: String,
    },
    /// A `101` whose `Sec-WebSocket-Accept` does not answer our key.
    BadAccept,
    /// The server broke the framing rules (RFC 6455 section 5).
    Protocol(ProtocolError),
    /// A message that is not what the native endpoint carries.
    BadMessage(String),
    /// The server closed the session with a close frame (docs/WEBSOCKET.md, "After the
    /// upgrade: close codes").
    Closed {
        /// The close code (`None`: a close without status).
        code: Option<u16>,
        /// Its reason text.
        reason: String,
    },
}

impl fmt::Display for WsError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(message) | Self::BadMessage(message) => formatter.write_str(message),
            Self::Io(error) => write!(formatter, "socket error: {error}"),
            Self::ClosedInHandshake => {
                formatter.write_str("the server closed the connection during the upgrade")
            }
            Self::HandshakeTimeout(timeout) => write!(
                formatter,
                "no answer to the WebSocket upgrade within {} ms",
                timeout.as_millis()
            ),
            Self::BadResponse(message) => write!(formatter, "bad answer to the upgrade: {message}"),
            Self::Refused { status, reason } => {
                write!(
                    formatter,
                    "the upgrade was refused: HTTP {status}: {reason}"
                )
            }
            Self::BadAccept => {
                formatter.write_str("the 101 answer's Sec-WebSocket-Accept does not match our key")
            }
            Self::Protocol(error) => write!(formatter, "bad frame from the server: {error}"),
            Self::Closed {
                code: Some(code),
                reason,
            } => write!(formatter, "the broker closed the session: {code} {reason}"),
            Self::Closed { code: None, .. } => {
                formatter.write_str("the broker closed the session without a code")
            }
        }
    }
}

impl std::error::Error for WsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(error) => Some(error),
            Self::Protocol(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for WsError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// The opening handshake on a connected `stream` (blocking): sends the upgrade request for
/// `url` and reads the answer within `timeout`. Returns the bytes that came after the
/// answer's head (the first frames, if the server was quick). Leaves the read timeout unset.
pub fn upgrade(
    stream: &mut TcpStream,
    url: &WsUrl,
    timeout: Duration,
) -> Result<BytesMut, WsError> {
    let key = BASE64.encode(rand::random::<[u8; KEY_NONCE_BYTES]>());
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n",
        url.path, url.authority
    );
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request.as_bytes())?;
    let deadline = Instant::now() + timeout;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let head_bytes = loop {
        if let Some(head_bytes) = check_answer(&buf, &key, stream, deadline)? {
            break head_bytes;
        }
        if buf.len() >= RESPONSE_HEAD_BYTES_MAX {
            return Err(WsError::BadResponse(format!(
                "the head exceeds {RESPONSE_HEAD_BYTES_MAX} bytes"
            )));
        }
        if !read_some(stream, &mut buf, deadline)? {
            return Err(WsError::ClosedInHandshake);
        }
    };
    stream.set_read_timeout(None)?;
    let _head = buf.split_to(head_bytes);
    Ok(buf)
}

/// Reads once into `buf`, waiting until `deadline`; `false` at EOF.
fn read_some(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    deadline: Instant,
) -> Result<bool, WsError> {
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(WsError::HandshakeTimeout(Duration::ZERO));
        }
        stream.set_read_timeout(Some(remaining))?;
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(read) => {
                buf.extend_from_slice(&chunk[..read]);
                return Ok(true);
            }
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::Interrupted
                        | io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                ) => {}
            Err(error) => return Err(WsError::Io(error)),
        }
    }
}

/// The answer in `buf`, if its head is complete: the head's length for a valid `101`, else
/// the error (a refusal's body is read from `stream` as far as it goes, for its reason).
fn check_answer(
    buf: &[u8],
    key: &str,
    stream: &mut TcpStream,
    deadline: Instant,
) -> Result<Option<usize>, WsError> {
    let mut headers = [httparse::EMPTY_HEADER; RESPONSE_HEADERS_MAX];
    let mut response = httparse::Response::new(&mut headers);
    let head_bytes = match response.parse(buf) {
        Ok(httparse::Status::Complete(head_bytes)) => head_bytes,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(WsError::BadResponse(error.to_string())),
    };
    let status = response.code.unwrap_or(0);
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| String::from_utf8_lossy(header.value).trim().to_owned())
    };
    if status != 101 {
        let declared = header("content-length").and_then(|length| length.parse::<usize>().ok());
        let reason = refusal_reason(
            &buf[head_bytes..],
            declared,
            response.reason.unwrap_or(""),
            stream,
            deadline,
        );
        return Err(WsError::Refused { status, reason });
    }
    let upgraded = header("upgrade").is_some_and(|value| value.eq_ignore_ascii_case("websocket"));
    if !upgraded {
        return Err(WsError::BadResponse(
            "a 101 without Upgrade: websocket".to_owned(),
        ));
    }
    if header("sec-websocket-accept").as_deref() != Some(accept_key(key).as_str()) {
        return Err(WsError::BadAccept);
    }
    Ok(Some(head_bytes))
}

/// The first line of a refusal's body (up to [`REASON_BYTES_MAX`] bytes, as much as
/// arrives before `deadline`), or the status line's reason when the body is empty.
fn refusal_reason(
    already: &[u8],
    declared: Option<usize>,
    status_reason: &str,
    stream: &mut TcpStream,
    deadline: Instant,
) -> String {
    let wanted = declared.unwrap_or(REASON_BYTES_MAX).min(REASON_BYTES_MAX);
    let mut body = BytesMut::from(&already[..already.len().min(wanted)]);
    while body.len() < wanted {
        match read_some(stream, &mut body, deadline) {
            Ok(true) => {}
            Ok(false) | Err(_) => break,
        }
    }
    body.truncate(wanted);
    let text = String::from_utf8_lossy(&body);
    match text.lines().map(str::trim).find(|line| !line.is_empty()) {
        Some(line) => line.to_owned(),
        None => status_reason.to_owned(),
    }
}

/// What [`Framing::next_frame`] found in the read buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// One BPS frame's body (its varint prefix checked and removed).
    Frame(Bytes),
    /// Bytes to write back (the pong of a ping), then look again.
    Reply(Vec<u8>),
    /// A frame that asks nothing (a pong), consumed; look again.
    Skipped,
    /// No whole message yet.
    Wanting,
}

/// The framing of one session (module docs).
#[derive(Debug)]
pub struct Framing {
    decoder: Decoder,
    frame_bytes_max: usize,
}

impl Framing {
    /// The framing of a session whose BPS frame bodies are at most `frame_bytes_max` bytes.
    pub fn new(frame_bytes_max: usize) -> Framing {
        Framing {
            decoder: Decoder::client(frame_bytes_max.saturating_add(PREFIX_BYTES_MAX)),
            frame_bytes_max,
        }
    }

    /// One encoded BPS frame as a masked binary message.
    pub fn wrap(frame: &[u8]) -> Vec<u8> {
        encode_client_frame(Opcode::Binary, true, frame, rand::random())
    }

    /// A masked close frame with code 1000, to send before ending a session.
    pub fn close() -> Vec<u8> {
        encode_client_frame(
            Opcode::Close,
            true,
            &close_payload(CLOSE_NORMAL, ""),
            rand::random(),
        )
    }

    /// The next event at the front of `buf`, consuming what it used.
    pub fn next_frame(&mut self, buf: &mut BytesMut) -> Result<Next, WsError> {
        match self.decoder.decode(buf).map_err(WsError::Protocol)? {
            None => Ok(Next::Wanting),
            Some(Event::Message { text: true, .. }) => Err(WsError::BadMessage(
                "a text message on the native endpoint (it carries binary BPS frames)".to_owned(),
            )),
            Some(Event::Message {
                text: false,
                payload,
            }) => one_frame(payload, self.frame_bytes_max).map(Next::Frame),
            Some(Event::Ping(payload)) => Ok(Next::Reply(encode_client_frame(
                Opcode::Pong,
                true,
                &payload,
                rand::random(),
            ))),
            Some(Event::Pong(_)) => Ok(Next::Skipped),
            Some(Event::Close(close)) => Err(WsError::Closed {
                code: close.as_ref().map(|close| close.code),
                reason: close.map(|close| close.reason).unwrap_or_default(),
            }),
        }
    }
}

/// After a refused `Ack`: the reason of the close frame the broker sends right after it
/// (docs/WEBSOCKET.md: 4001 FULL naming the bound, 4002 REJECTED naming why), looked for in
/// `buf` and then read from `stream` until `wait` passes. `None` if no close frame came.
pub fn close_reason(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    framing: &mut Framing,
    wait: Duration,
) -> Option<String> {
    let deadline = Instant::now() + wait;
    loop {
        match framing.next_frame(buf) {
            Err(WsError::Closed { reason, .. }) => return Some(reason),
            Ok(Next::Wanting) => match read_some(stream, buf, deadline) {
                Ok(true) => {}
                Ok(false) | Err(_) => return None,
            },
            // Nothing is owed to a session that is over: no pong, no frame taken.
            Ok(Next::Frame(_) | Next::Reply(_) | Next::Skipped) => {}
            Err(_) => return None,
        }
    }
}

/// The body of the one BPS frame `message` must be exactly.
fn one_frame(message: Bytes, frame_bytes_max: usize) -> Result<Bytes, WsError> {
    let header = peek_frame(&message, frame_bytes_max)
        .map_err(|error| WsError::BadMessage(format!("a message that is no BPS frame: {error}")))?
        .ok_or_else(|| {
            WsError::BadMessage(format!(
                "a {}-byte message holding part of a BPS frame",
                message.len()
            ))
        })?;
    if header.total_bytes() != message.len() {
        return Err(WsError::BadMessage(format!(
            "a {}-byte message holding a {}-byte BPS frame and more",
            message.len(),
            header.total_bytes()
        )));
    }
    Ok(message.slice(header.prefix_bytes..))
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use bps_proto::{FRAME_BYTES_MAX_DEFAULT, encode_frame};
    use bps_ws::encode_server_frame;

    use super::*;

    #[test]
    fn urls_split_into_authority_and_path_and_host_port_is_not_one() {
        assert_eq!(WsUrl::parse("127.0.0.1:1637").expect("tcp"), None);
        let url = WsUrl::parse("ws://127.0.0.1:1639/bps/v1")
            .expect("ws")
            .expect("a url");
        assert_eq!(
            (url.authority.as_str(), url.path.as_str()),
            ("127.0.0.1:1639", "/bps/v1")
        );
        assert_eq!(url.to_string(), "ws://127.0.0.1:1639/bps/v1");
        let bare = WsUrl::parse("ws://[::1]:9").expect("ws").expect("a url");
        assert_eq!(
            (bare.authority.as_str(), bare.path.as_str()),
            ("[::1]:9", "/")
        );
        for bad in ["wss://host:443/bps/v1", "ws://host/bps/v1", "ws://:80/"] {
            assert!(
                matches!(WsUrl::parse(bad), Err(WsError::Url(_))),
                "{bad} is refused"
            );
        }
    }

    /// A server that reads one request head, answers with what `answer` makes of the
    /// request's key, and returns the request.
    fn serve_once(answer: fn(&str) -> Vec<u8>) -> (WsUrl, thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = WsUrl {
            authority: listener.local_addr().expect("addr").to_string(),
            path: NATIVE_PATH.to_owned(),
        };
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                stream.read_exact(&mut byte).expect("read");
                request.push(byte[0]);
            }
            let request = String::from_utf8(request).expect("utf-8");
            let key = request
                .lines()
                .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
                .expect("a key")
                .to_owned();
            stream.write_all(&answer(&key)).expect("write");
            request
        });
        (url, handle)
    }

    fn connect(url: &WsUrl) -> TcpStream {
        TcpStream::connect(&url.authority).expect("connect")
    }

    #[test]
    fn a_101_with_the_right_accept_upgrades_and_keeps_the_bytes_after_it() {
        let (url, server) = serve_once(|key| {
            let mut answer = bps_ws::switching_protocols(&accept_key(key));
            answer.extend_from_slice(&encode_server_frame(Opcode::Binary, b"early"));
            answer
        });
        let mut stream = connect(&url);
        let leftover = upgrade(&mut stream, &url, Duration::from_secs(5)).expect("upgraded");
        let request = server.join().expect("server");
        assert!(request.starts_with("GET /bps/v1 HTTP/1.1\r\n"), "{request}");
        assert!(request.contains(&format!("Host: {}\r\n", url.authority)));
        let mut rest = leftover.to_vec();
        while rest.len() < 7 {
            let mut chunk = [0u8; 16];
            let read = stream.read(&mut chunk).expect("read");
            assert!(read > 0);
            rest.extend_from_slice(&chunk[..read]);
        }
        assert_eq!(rest, encode_server_frame(Opcode::Binary, b"early"));
    }

    #[test]
    fn a_refusal_shows_its_status_and_reason_and_a_wrong_accept_is_caught() {
        let (url, server) = serve_once(|_| {
            let body = "parameter \"binding\": is missing\n";
            format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes()
        });
        let error = upgrade(&mut connect(&url), &url, Duration::from_secs(5)).expect_err("400");
        server.join().expect("server");
        assert_eq!(
            error.to_string(),
            "the upgrade was refused: HTTP 400: parameter \"binding\": is missing"
        );
        let (url, server) = serve_once(|_| bps_ws::switching_protocols("bm90IHRoZSBrZXk="));
        let error = upgrade(&mut connect(&url), &url, Duration::from_secs(5)).expect_err("accept");
        server.join().expect("server");
        assert!(matches!(error, WsError::BadAccept), "{error}");
    }

    #[test]
    fn framing_takes_one_frame_per_message_answers_pings_and_reports_a_close() {
        let mut framing = Framing::new(FRAME_BYTES_MAX_DEFAULT);
        let frame = encode_frame(&bps_proto::Ack {
            status: 1,
            challenge: Bytes::from(vec![7; 32]),
        });
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&encode_server_frame(Opcode::Ping, b"p"));
        buf.extend_from_slice(&encode_server_frame(Opcode::Binary, &frame));
        let Next::Reply(pong) = framing.next_frame(&mut buf).expect("ping") else {
            panic!("a ping is answered");
        };
        assert_eq!(pong[0], 0x8a, "FIN and the pong opcode");
        assert_eq!(pong[1], 0x81, "masked, one byte");
        let mut unmasked = pong[6..].to_vec();
        bps_ws::codec::apply_mask(&mut unmasked, [pong[2], pong[3], pong[4], pong[5]]);
        assert_eq!(unmasked, b"p");
        assert_eq!(
            framing.next_frame(&mut buf).expect("frame"),
            Next::Frame(frame.slice(1..)),
            "the body without its one-byte prefix"
        );
        assert_eq!(framing.next_frame(&mut buf).expect("empty"), Next::Wanting);
        let two = [frame.to_vec(), frame.to_vec()].concat();
        buf.extend_from_slice(&encode_server_frame(Opcode::Binary, &two));
        assert!(matches!(
            framing.next_frame(&mut buf),
            Err(WsError::BadMessage(message)) if message.contains("and more")
        ));
        let mut framing = Framing::new(FRAME_BYTES_MAX_DEFAULT);
        let mut buf =
            BytesMut::from(&encode_server_frame(Opcode::Close, &close_payload(4001, "full"))[..]);
        let error = framing.next_frame(&mut buf).expect_err("closed");
        assert_eq!(
            error.to_string(),
            "the broker closed the session: 4001 full"
        );
    }

    #[test]
    fn wrapped_frames_are_masked_binary_messages_a_server_decodes() {
        let frame = vec![0x42u8; 300];
        let mut buf = BytesMut::from(&Framing::wrap(&frame)[..]);
        let mut server = Decoder::new(FRAME_BYTES_MAX_DEFAULT);
        assert_eq!(
            server.decode(&mut buf).expect("valid"),
            Some(Event::Message {
                text: false,
                payload: Bytes::from(frame)
            })
        );
    }
}
