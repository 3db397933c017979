//! WebSocket clients for the black-box tests: tungstenite (an independent implementation of
//! RFC 6455, not our framing code) over a blocking TCP stream, and a raw socket for the
//! malformed inputs no well-behaved client sends.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bps_proto::{Address, Hash, Join, Spec, Status, encode_frame};
use bytes::Bytes;
use tungstenite::client::IntoClientRequest;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::CloseFrame;
use tungstenite::{Message, WebSocket};

use super::{Broker, WAIT, body_of};

/// How the session ended, seen from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WsEnd {
    /// A close frame with this code and reason.
    Closed(u16, String),
    /// The TCP connection ended without a close frame (a browser's 1006).
    Dropped,
}

impl WsEnd {
    /// The close code, when a close frame came.
    pub fn code(&self) -> Option<u16> {
        match self {
            WsEnd::Closed(code, _) => Some(*code),
            WsEnd::Dropped => None,
        }
    }
}

/// One WebSocket client session.
pub struct Ws {
    socket: WebSocket<TcpStream>,
}

/// The HTTP answer to a request that was not upgraded.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub body: String,
}

impl Ws {
    /// Opens `target` (a path with its query) on the broker's WebSocket listener with extra
    /// request headers; the HTTP answer when the broker does not upgrade.
    pub fn open(broker: &Broker, target: &str, headers: &[(&str, &str)]) -> Result<Ws, Refused> {
        let url = format!("ws://{}{target}", broker.ws());
        let mut request = url.into_client_request().expect("a valid URL");
        for (name, value) in headers {
            request.headers_mut().insert(
                tungstenite::http::HeaderName::from_bytes(name.as_bytes()).expect("header name"),
                HeaderValue::from_str(value).expect("header value"),
            );
        }
        let stream = TcpStream::connect(broker.ws()).expect("connect to the WebSocket port");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        match tungstenite::client(request, stream) {
            Ok((socket, _)) => Ok(Ws { socket }),
            Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(response))) => {
                let status = response.status().as_u16();
                let body = response
                    .body()
                    .as_ref()
                    .map(|body| String::from_utf8_lossy(body).into_owned())
                    .unwrap_or_default();
                Err(Refused { status, body })
            }
            Err(error) => panic!("WebSocket handshake failed: {error}"),
        }
    }

    /// Opens `target` over `stream`, a socket the caller connected to the WebSocket port its
    /// own way (another source address, a small receive buffer); the handshake's failure as
    /// text instead of a panic, for a test that opens many and counts what was refused.
    pub fn open_on(stream: TcpStream, broker: &Broker, target: &str) -> Result<Ws, String> {
        let request = format!("ws://{}{target}", broker.ws())
            .into_client_request()
            .expect("a valid URL");
        stream
            .set_read_timeout(Some(WAIT))
            .map_err(|error| error.to_string())?;
        match tungstenite::client(request, stream) {
            Ok((socket, _)) => Ok(Ws { socket }),
            Err(error) => Err(error.to_string()),
        }
    }

    /// A session on the native endpoint.
    pub fn native(broker: &Broker) -> Ws {
        match Ws::open(broker, "/bps/v1", &[]) {
            Ok(ws) => ws,
            Err(refused) => panic!("native endpoint refused: {refused:?}"),
        }
    }

    /// Joins on a native session; the Ack's status and challenge.
    pub fn native_join(broker: &Broker, spec: &Spec, addr: &Address) -> (Ws, Status, Hash) {
        let mut ws = Ws::native(broker);
        let join: Join = spec.to_join(addr);
        ws.send(&encode_frame(&join));
        let ack = bps_proto::decode_ack(body_of(&ws.recv_binary())).expect("an Ack");
        let status = Status::try_from(ack.status).expect("a known status");
        let challenge = Hash::try_from(ack.challenge.as_ref()).unwrap_or([0; 32]);
        (ws, status, challenge)
    }

    /// Sends one binary message.
    pub fn send(&mut self, bytes: &[u8]) {
        self.socket
            .send(Message::Binary(Bytes::copy_from_slice(bytes)))
            .expect("send a binary message");
    }

    /// Sends one text message.
    pub fn send_text(&mut self, text: &str) {
        self.socket
            .send(Message::text(text))
            .expect("send a text message");
    }

    /// The next data message (pings are answered by tungstenite), within [`WAIT`].
    pub fn recv(&mut self) -> Result<Message, WsEnd> {
        let deadline = Instant::now() + WAIT;
        loop {
            assert!(Instant::now() < deadline, "no message within {WAIT:?}");
            match self.socket.read() {
                Ok(Message::Ping(_) | Message::Pong(_)) => {}
                Ok(Message::Close(frame)) => return Err(end_of(frame)),
                Ok(message) => return Ok(message),
                Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                    return Err(WsEnd::Dropped);
                }
                Err(error) if timed_out(&error) => {
                    panic!("no message within {WAIT:?}")
                }
                Err(_) => return Err(WsEnd::Dropped),
            }
        }
    }

    /// The next message, which must be binary.
    pub fn recv_binary(&mut self) -> Bytes {
        match self.recv() {
            Ok(Message::Binary(bytes)) => bytes,
            other => panic!("expected a binary message, got {other:?}"),
        }
    }

    /// The next message, which must be a JSON text frame.
    pub fn recv_json(&mut self) -> serde_json::Value {
        match self.recv() {
            Ok(Message::Text(text)) => serde_json::from_str(&text).expect("a JSON text frame"),
            other => panic!("expected a text message, got {other:?}"),
        }
    }

    /// The session ends within [`WAIT`] (data messages before the end are dropped).
    pub fn expect_end(&mut self) -> WsEnd {
        loop {
            match self.recv() {
                Ok(_) => {}
                Err(end) => return end,
            }
        }
    }

    /// Nothing arrives for `quiet` and the session stays open.
    pub fn expect_quiet(&mut self, quiet: Duration) {
        self.socket
            .get_mut()
            .set_read_timeout(Some(quiet))
            .expect("read timeout");
        match self.socket.read() {
            Err(error) if timed_out(&error) => {}
            other => panic!("expected quiet, got {other:?}"),
        }
        self.socket
            .get_mut()
            .set_read_timeout(Some(WAIT))
            .expect("read timeout");
    }

    /// Pings of the broker read within `within` (each answered by tungstenite with a pong),
    /// after sending one ping of our own; panics on anything but pings and pongs.
    pub fn pings_within(&mut self, within: Duration) -> usize {
        self.socket
            .send(Message::Ping(Bytes::from_static(b"hello")))
            .expect("send a ping");
        let deadline = Instant::now() + within;
        let mut pings = 0;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let wait = left.max(Duration::from_millis(1));
            self.socket
                .get_mut()
                .set_read_timeout(Some(wait))
                .expect("read timeout");
            match self.socket.read() {
                Ok(Message::Ping(_)) => pings += 1,
                Ok(Message::Pong(_)) => {}
                Err(error) if timed_out(&error) => {}
                other => panic!("expected pings, got {other:?}"),
            }
        }
        self.socket
            .get_mut()
            .set_read_timeout(Some(WAIT))
            .expect("read timeout");
        pings
    }

    /// Stops reading (the socket stays open, its receive buffer fills).
    pub fn into_socket(self) -> TcpStream {
        self.socket.into_inner()
    }
}

fn end_of(frame: Option<CloseFrame>) -> WsEnd {
    match frame {
        Some(frame) => WsEnd::Closed(u16::from(frame.code), frame.reason.to_string()),
        None => WsEnd::Closed(1005, String::new()),
    }
}

/// A raw connection to the WebSocket port, for requests and frames no client library sends.
pub struct RawWs {
    pub stream: TcpStream,
}

impl RawWs {
    pub fn connect(broker: &Broker) -> RawWs {
        let stream = TcpStream::connect(broker.ws()).expect("connect to the WebSocket port");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        RawWs { stream }
    }

    /// Sends `request` and reads the answer's status line and headers (and what follows
    /// them, when the connection ends).
    pub fn request(&mut self, request: &str) -> (u16, String) {
        self.request_bytes(request.as_bytes())
    }

    /// [`RawWs::request`] for a request with a binary body.
    pub fn request_bytes(&mut self, request: &[u8]) -> (u16, String) {
        self.stream.write_all(request).expect("send the request");
        let mut answer = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            match self.stream.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => {
                    answer.extend_from_slice(&buffer[..read]);
                    if let Some(end) = find(&answer, b"\r\n\r\n")
                        && answer.starts_with(b"HTTP/1.1 101")
                    {
                        answer.truncate(end + 4);
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text
            .split(' ')
            .nth(1)
            .and_then(|status| status.parse().ok())
            .unwrap_or(0);
        (status, text)
    }

    /// Upgrades on `target` with a valid key; panics unless the answer is 101.
    pub fn upgrade(broker: &Broker, target: &str) -> RawWs {
        let mut raw = RawWs::connect(broker);
        let (status, answer) = raw.request(&upgrade_request(target, "dGhlIHNhbXBsZSBub25jZQ=="));
        assert_eq!(status, 101, "{answer}");
        raw
    }

    /// Sends raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads frames until a close frame arrives; its code, or `None` when the connection
    /// ended without one.
    pub fn close_code(&mut self) -> Option<u16> {
        let mut pending = Vec::new();
        let mut buffer = [0u8; 8192];
        loop {
            while let Some((opcode, payload, used)) = server_frame(&pending) {
                pending.drain(..used);
                if opcode == 0x8 {
                    return payload
                        .get(..2)
                        .map(|code| u16::from_be_bytes([code[0], code[1]]));
                }
            }
            match self.stream.read(&mut buffer) {
                Ok(0) | Err(_) => return None,
                Ok(read) => pending.extend_from_slice(&buffer[..read]),
            }
        }
    }
}

/// An upgrade request for `target` with `key`.
/// Whether a read ended at its read timeout (nothing arrived), not on a fault.
fn timed_out(error: &tungstenite::Error) -> bool {
    matches!(
        error,
        tungstenite::Error::Io(error)
            if matches!(error.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    )
}

pub fn upgrade_request(target: &str, key: &str) -> String {
    format!(
        "GET {target} HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n\r\n"
    )
}

/// A client frame as RFC 6455 section 5.2 lays it out (masked unless `mask` is `None`).
pub fn client_frame(opcode: u8, fin: bool, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut frame = vec![(u8::from(fin) << 7) | opcode];
    let masked = u8::from(mask.is_some()) << 7;
    match payload.len() {
        len @ 0..=125 => frame.push(masked | len as u8),
        len @ 126..=0xffff => {
            frame.push(masked | 126);
            frame.extend_from_slice(&(len as u16).to_be_bytes());
        }
        len => {
            frame.push(masked | 127);
            frame.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            frame.extend_from_slice(&key);
            frame.extend(
                payload
                    .iter()
                    .enumerate()
                    .map(|(at, byte)| byte ^ key[at % 4]),
            );
        }
        None => frame.extend_from_slice(payload),
    }
    frame
}

/// One unmasked server frame from the front of `bytes`: opcode, payload, bytes used.
fn server_frame(bytes: &[u8]) -> Option<(u8, Vec<u8>, usize)> {
    let opcode = bytes.first()? & 0x0f;
    let short = bytes.get(1)? & 0x7f;
    let (len, start) = match short {
        126 => (
            usize::from(u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?])),
            4,
        ),
        127 => (
            usize::try_from(u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?)).ok()?,
            10,
        ),
        len => (usize::from(len), 2),
    };
    let payload = bytes.get(start..start + len)?.to_vec();
    Some((opcode, payload, start + len))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}
