//! One WebSocket session: a BPS stream whose bytes are WebSocket messages
//! (docs/PROTOCOL.md §9), on the native endpoint or the SWIP-60 bridge. A thin carrier on
//! `carrier`: the shared read loop and writer task, with this decoder and `rendition`'s
//! encoders.
//!
//! Owns: the session's decoder (RFC 6455 frames out of the read buffer through `bps_ws`'s
//! decoder: messages become frames handed to the core, pings are answered, a close is
//! echoed, and every fault ends this one session with its code from `close`), its keepalive
//! (pings, and the idle deadline), and how it ends: the close frame, a half-close and a
//! short linger for the peer's answer; or a TCP reset when the session is cut in the middle
//! of a message or is a slow consumer (R26), which a browser sees as 1006.
//! Never does: frame what the core queues (that happened in `rendition`), or judge a frame.

use std::cell::Cell;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::time::{Duration, Instant};

use bps_proto::Frame;
use bps_ws::codec::close_code_receivable;
use bps_ws::{
    BridgeParams, Decoder, Event, Head, Opcode, close_payload, encode_server_frame, parse_inbound,
};
use bytes::{Bytes, BytesMut};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt, Splitable};
use monoio::net::TcpStream;

use super::bridge_session::BridgeSession;
use super::close;
use crate::io::carrier::{
    self, Cancellers, Decode, Decoded, WriteEnd, set_linger_zero, shutdown_write,
};
use crate::io::link::CoreLink;
use crate::io::outgoing::{Outgoing, Prefix};
use crate::io::port::{Closing, ControlKind, Farewell, Port};
use crate::io::read_buffer::ReadBuffer;
use crate::limits::{BRIDGE_MESSAGE_BYTES_MAX, native_message_bytes_max};
use crate::protocol::ClosedBy;

/// Control frames (pings, pongs, closes) a peer may send per second; more is a flood.
pub const CONTROL_FRAMES_PER_S_MAX: u32 = 20;
/// How long writing the close frame may take.
const CLOSE_WRITE_DEADLINE: Duration = Duration::from_secs(1);
/// How long a closing session waits for the peer's close (RFC 6455 section 7.1.1: the
/// server closes the TCP connection after the close handshake).
const CLOSE_LINGER: Duration = Duration::from_secs(2);
/// Bytes a closing session reads (and drops) at most while it waits.
const CLOSE_LINGER_BYTES_MAX: usize = 64 * 1024;

/// Which endpoint a session is on.
#[derive(Debug)]
pub enum Endpoint {
    /// One BPS frame per binary message, both ways.
    Native,
    /// The SWIP-60 bridge, with the parameters of its request.
    Bridge(BridgeParams),
}

impl Endpoint {
    /// The exported name.
    pub fn name(&self) -> &'static str {
        match self {
            Endpoint::Native => "native",
            Endpoint::Bridge(_) => "bridge",
        }
    }
}

/// Runs an upgraded session to its end. `bridge` is a bridge session, whose Join the
/// carrier handed over before the 101 (the native endpoint's Join comes from the peer as
/// its first message).
pub async fn run(
    link: Rc<CoreLink>,
    port: Rc<Port>,
    stream: TcpStream,
    leftover: BytesMut,
    bridge: Option<Rc<BridgeSession>>,
) {
    let fd = stream.as_raw_fd();
    let (read_handle, write_handle) = Cancellers::arm(&port, fd, false);
    port.attach_socket(fd);
    let heard = Rc::new(Cell::new(Instant::now()));
    let ping_period = bridge.as_ref().map_or(
        Duration::from_millis(link.settings().ws.ping_interval_ms),
        |session| Duration::from_secs(session.keep_alive_s),
    );
    monoio::spawn(keepalive(
        Rc::clone(&link),
        Rc::clone(&port),
        Rc::clone(&heard),
        ping_period,
    ));
    let (mut reader, writer) = stream.into_split();
    let writer_task = monoio::spawn(carrier::write_loop(
        Rc::clone(&link),
        Rc::clone(&port),
        writer,
        write_handle,
    ));
    let cause = if port.is_open() {
        let mut buffer = ReadBuffer::new(std::sync::Arc::clone(link.memory()));
        buffer.unparsed().extend_from_slice(&leftover);
        let mut reading = Reading::new(&link, &port, &heard, bridge);
        carrier::read_loop(
            (&link, &port),
            &mut reader,
            read_handle,
            &mut buffer,
            &mut reading,
        )
        .await
    } else {
        ClosedBy::Peer
    };
    if port.is_open() {
        match cause {
            ClosedBy::Peer => link.flush(&port),
            ClosedBy::Io | ClosedBy::QueueOverflow => port.reset(),
        }
    }
    let (writer, end) = writer_task.await;
    port.clear_on_close();
    let mut stream = reader.reunite(writer).ok();
    if let Some(stream) = stream.as_mut() {
        finish(&port, stream, fd, end == WriteEnd::Cut).await;
    }
    drop(stream);
    link.ended(&port, cause);
}

/// Ends the connection: a close frame and a short wait for the peer's, or a reset (`cut`:
/// the writer stopped in the middle of a message, or the socket failed).
async fn finish(port: &Port, stream: &mut TcpStream, fd: RawFd, cut: bool) {
    let closing = port.closing();
    let reset = cut || closing == Some(Closing::SlowConsumer);
    if reset {
        set_linger_zero(fd);
        return;
    }
    let farewell = closing
        .as_ref()
        .map_or_else(|| Farewell::new(close::NORMAL, ""), Farewell::of);
    let frame = encode_server_frame(
        Opcode::Close,
        &close_payload(farewell.code, &farewell.reason),
    );
    let written = monoio::time::timeout(CLOSE_WRITE_DEADLINE, stream.write_all(frame)).await;
    if !matches!(written, Ok((Ok(_), _))) {
        set_linger_zero(fd);
        return;
    }
    shutdown_write(fd);
    linger(stream).await;
}

/// Reads and drops what the peer still sends, until it closes or `CLOSE_LINGER` passes.
pub async fn linger(stream: &mut TcpStream) {
    let until = Instant::now() + CLOSE_LINGER;
    let mut drained = 0;
    let mut buffer = Vec::with_capacity(4096);
    while drained < CLOSE_LINGER_BYTES_MAX {
        let left = until.saturating_duration_since(Instant::now());
        let Ok((result, back)) = monoio::time::timeout(left, stream.read(buffer)).await else {
            return;
        };
        buffer = back;
        buffer.clear();
        match result {
            Ok(0) | Err(_) => return,
            Ok(read) => drained += read,
        }
    }
}

/// Pings the peer every `period` and ends a session that has been silent for too long.
async fn keepalive(link: Rc<CoreLink>, port: Rc<Port>, heard: Rc<Cell<Instant>>, period: Duration) {
    let settings = &link.settings().ws;
    let idle_after = Duration::from_millis(settings.idle_deadline_ms).max(2 * period);
    loop {
        monoio::time::sleep(period).await;
        if !port.is_open() {
            return;
        }
        if heard.get().elapsed() >= idle_after {
            link.metrics().ws_closed(close::IDLE);
            port.note_closing(Closing::Carrier(Farewell::new(
                close::IDLE,
                "nothing received within ws.idle_deadline_ms",
            )));
            port.reset();
            return;
        }
        port.push_control(
            ControlKind::Ping,
            control_message(Opcode::Ping, Bytes::new()),
        );
    }
}

fn control_message(opcode: Opcode, payload: Bytes) -> Outgoing {
    Outgoing::new(
        Prefix::of(Head::new(opcode, payload.len()).as_bytes()),
        payload,
    )
}

/// A copy of a control payload (at most 125 bytes, RFC 6455 5.5): a queued pong must not pin
/// the whole read buffer its ping was sliced from while the peer does not read.
fn owned(payload: &Bytes) -> Bytes {
    Bytes::copy_from_slice(payload)
}

/// The control frames a peer sent in the current one-second window.
#[derive(Debug)]
struct ControlRate {
    window_start: Instant,
    frames: u32,
}

impl ControlRate {
    /// Counts one more; false once the window holds more than the bound.
    fn allow(&mut self) -> bool {
        let now = Instant::now();
        if now.duration_since(self.window_start) >= Duration::from_secs(1) {
            self.window_start = now;
            self.frames = 0;
        }
        self.frames += 1;
        self.frames <= CONTROL_FRAMES_PER_S_MAX
    }
}

/// The decoder of one session (`carrier::Decode`), and what it answers itself.
struct Reading<'a> {
    link: &'a CoreLink,
    port: &'a Port,
    heard: &'a Cell<Instant>,
    decoder: Decoder,
    control: ControlRate,
    bridge: Option<Rc<BridgeSession>>,
}

impl<'a> Reading<'a> {
    fn new(
        link: &'a CoreLink,
        port: &'a Port,
        heard: &'a Cell<Instant>,
        bridge: Option<Rc<BridgeSession>>,
    ) -> Reading<'a> {
        let message_bytes_max = if bridge.is_some() {
            BRIDGE_MESSAGE_BYTES_MAX
        } else {
            native_message_bytes_max(link.settings().frame_bytes_max)
        };
        Reading {
            link,
            port,
            heard,
            decoder: Decoder::new(message_bytes_max),
            control: ControlRate {
                window_start: Instant::now(),
                frames: 0,
            },
            bridge,
        }
    }

    /// What one event is for the stream: a frame, its end, or nothing (answered here).
    async fn event(&mut self, event: Event) -> Option<Decoded> {
        match event {
            Event::Message { text: true, .. } => Some(Decoded::End(self.fault(Farewell::new(
                close::UNSUPPORTED_DATA,
                "text message: this endpoint takes binary messages",
            )))),
            Event::Message {
                text: false,
                payload,
            } => Some(self.message(&payload)),
            Event::Ping(payload) => {
                if !self.control.allow() {
                    return Some(Decoded::End(self.flood()));
                }
                self.port.push_control(
                    ControlKind::Pong,
                    control_message(Opcode::Pong, owned(&payload)),
                );
                None
            }
            Event::Pong(_) => {
                if !self.control.allow() {
                    return Some(Decoded::End(self.flood()));
                }
                None
            }
            Event::Close(frame) => {
                // The peer closes: what is queued for it still goes, then our close.
                let code = frame.map_or(close::NORMAL, |frame| echo_code(frame.code));
                self.port
                    .note_closing(Closing::Carrier(Farewell::new(code, "")));
                self.link.wait_consumed(self.port).await;
                Some(Decoded::End(ClosedBy::Peer))
            }
        }
    }

    /// A binary message: the next frame of the stream.
    fn message(&mut self, payload: &[u8]) -> Decoded {
        let frame = match &self.bridge {
            None => self.native_frame(payload),
            Some(session) => {
                let session = Rc::clone(session);
                self.bridged_frame(&session, payload)
            }
        };
        match frame {
            Ok(frame) => Decoded::Frame(frame),
            Err(farewell) => Decoded::End(self.fault(farewell)),
        }
    }

    fn native_frame(&self, payload: &[u8]) -> Result<Frame, Farewell> {
        let bytes = self.link.memory().frame(payload);
        Frame::parse_exact(bytes, self.link.settings().frame_bytes_max).map_err(|error| {
            self.link.frame_error(self.port, &error);
            Farewell::new(
                close::INVALID_PAYLOAD,
                format!("a message must be exactly one BPS frame: {error}"),
            )
        })
    }

    /// W4, W10, W11: a bridge message becomes the frame a native client would have sent.
    fn bridged_frame(&self, session: &BridgeSession, payload: &[u8]) -> Result<Frame, Farewell> {
        if !session.publishes {
            self.link.metrics().ws_spectator_sends.inc();
            return Err(Farewell::new(
                close::POLICY,
                "a session without addr is a spectator and sends nothing (W11)",
            ));
        }
        let inbound = parse_inbound(payload, &session.spec)
            .map_err(|error| Farewell::new(close::INVALID_PAYLOAD, error.to_string()))?;
        // Implicit chunks carry no salt: their frames take no challenge (R11).
        let challenge = match (session.challenge(), session.spec.admin) {
            (Some(challenge), _) => challenge,
            (None, None) => [0; 32],
            (None, Some(_)) => {
                return Err(Farewell::new(
                    close::POLICY,
                    "a message before the challenge: sign under the challenge the broker sent",
                ));
            }
        };
        let assembled = inbound.to_frame(&challenge);
        let bytes = self.link.memory().frame(&assembled);
        Frame::parse_exact(bytes, usize::MAX)
            .map_err(|error| Farewell::new(close::INVALID_PAYLOAD, error.to_string()))
    }

    /// A fault of the peer: this session ends with `farewell`, nothing else happens.
    fn fault(&self, farewell: Farewell) -> ClosedBy {
        self.link.metrics().ws_closed(farewell.code);
        if self.link.may_log() {
            tracing::debug!(stream = %self.port.id, peer = %self.port.peer(), code = farewell.code, reason = %farewell.reason, "WebSocket session closed");
        }
        self.port.note_closing(Closing::Carrier(farewell));
        self.port.reset();
        ClosedBy::Io
    }

    fn flood(&self) -> ClosedBy {
        self.fault(Farewell::new(
            close::POLICY,
            format!("more than {CONTROL_FRAMES_PER_S_MAX} control frames per second"),
        ))
    }
}

/// The WebSocket decoder: RFC 6455 frames out of the read buffer; a message is the next
/// frame of the stream, a control frame is answered here.
impl Decode for Reading<'_> {
    async fn next(&mut self, buffer: &mut ReadBuffer) -> Decoded {
        loop {
            let event = match self.decoder.decode(buffer.unparsed()) {
                Ok(Some(event)) => event,
                Ok(None) => return Decoded::Incomplete,
                Err(error) => return Decoded::End(self.fault(Farewell::of_protocol(&error))),
            };
            self.heard.set(Instant::now());
            if let Some(decoded) = self.event(event).await {
                return decoded;
            }
        }
    }
}

/// The code a session answers a peer's close with: the same, where it may be sent.
fn echo_code(code: u16) -> u16 {
    if close_code_receivable(code) {
        code
    } else {
        close::NORMAL
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::owned;

    #[test]
    fn a_pong_owns_its_payload_instead_of_a_slice_of_the_read_buffer() {
        let read_buffer = Bytes::from(vec![7u8; 64 << 10]);
        let ping = read_buffer.slice(100..225);
        let pong = owned(&ping);
        assert_eq!(pong, ping);
        assert!(!read_buffer.as_ptr_range().contains(&pong.as_ptr()));
    }
}
