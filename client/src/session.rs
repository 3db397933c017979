//! One BPS stream over the native TCP transport (docs/PROTOCOL.md §2) or the broker's native
//! WebSocket endpoint (a `ws://HOST:PORT/bps/v1` target, [`crate::websocket`]): connect,
//! send the `Join`, read the `Ack`, then exchange `Broadcast` frames.
//!
//! Owns: the blocking `std::net` socket with its connect, read and write timeouts, the read
//! buffer that frames resume across partial reads in, the carrier the target names (bare
//! frames on TCP, one frame per WebSocket message), the handshake ([`Session::join`],
//! R2–R5; [`Session::join_explained`] keeps what the broker said about a refusal) and the
//! stream's challenge (R4), the clean close ([`Session::finish`]), the `Ack`'s check
//! ([`read_ack`], which the libp2p carrier's [`crate::bee_session`] shares) and every
//! carrier's [`SessionError`].
//!
//! Never: signs, verifies or interprets a `Broadcast` (the publisher and subscriber do),
//! retries (callers apply [`crate::backoff`] between joins), or keeps a frame of a previous
//! stream: one `Session` is one stream with one challenge.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bps_proto::{
    Address, CHALLENGE_BYTES, DecodeError, FRAME_BYTES_MAX_DEFAULT, FrameError, Hash, Spec, Status,
    decode_ack, encode_frame, next_frame,
};
use bytes::{Bytes, BytesMut};

use crate::bee_node::BeeError;
use crate::refusal::Refusal;
use crate::websocket::{Framing, Next, WsError, WsUrl, close_reason, upgrade};

/// Timeouts and limits of one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConfig {
    /// Bound on the TCP connect, per resolved address.
    pub connect_timeout: Duration,
    /// Bound on waiting for the `Ack` after the `Join`.
    pub handshake_timeout: Duration,
    /// Bound on one blocking write; a broker that does not read for this long costs the
    /// stream.
    pub write_timeout: Duration,
    /// Largest frame body accepted from the broker.
    pub frame_bytes_max: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
        }
    }
}

/// Why a stream could not be opened or ended.
#[derive(Debug)]
pub enum SessionError {
    /// The target did not resolve to any address.
    Resolve {
        /// The target as given.
        target: String,
        /// Why, if the resolver said.
        source: Option<io::Error>,
    },
    /// No resolved address accepted the connection.
    Connect {
        /// The target as given.
        target: String,
        /// The last address's error.
        source: io::Error,
    },
    /// A socket error on an open stream.
    Io(io::Error),
    /// The broker closed the stream (EOF): a reset, as far as the client is concerned.
    Closed,
    /// No `Ack` within the handshake timeout.
    HandshakeTimeout(Duration),
    /// The broker sent a frame longer than the limit, or a broken length.
    Frame(FrameError),
    /// The `Ack` did not decode.
    Decode(DecodeError),
    /// The `Ack` decoded but breaks R4/R5 (unknown status, or OK without a 32-byte
    /// challenge).
    BadAck(String),
    /// The WebSocket carrier failed: a bad URL, a refused upgrade, a framing fault, the
    /// broker's close frame.
    WebSocket(WsError),
    /// The libp2p carrier failed: the dial, bee's handshake, the stream.
    P2p(BeeError),
}

impl fmt::Display for SessionError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Resolve {
                target,
                source: Some(source),
            } => write!(formatter, "cannot resolve {target}: {source}"),
            Self::Resolve { target, .. } => write!(formatter, "{target} resolves to no address"),
            Self::Connect { target, source } => {
                write!(formatter, "cannot connect to {target}: {source}")
            }
            Self::Io(source) => write!(formatter, "stream error: {source}"),
            Self::Closed => write!(formatter, "the broker closed the stream"),
            Self::HandshakeTimeout(timeout) => {
                write!(formatter, "no Ack within {} ms", timeout.as_millis())
            }
            Self::Frame(error) => write!(formatter, "bad frame from the broker: {error}"),
            Self::Decode(error) => write!(formatter, "bad Ack from the broker: {error}"),
            Self::BadAck(message) => write!(formatter, "bad Ack from the broker: {message}"),
            Self::WebSocket(error) => write!(formatter, "WebSocket: {error}"),
            Self::P2p(error) => write!(formatter, "libp2p: {error}"),
        }
    }
}

impl std::error::Error for SessionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Resolve {
                source: Some(source),
                ..
            }
            | Self::Connect { source, .. }
            | Self::Io(source) => Some(source),
            Self::Frame(error) => Some(error),
            Self::Decode(error) => Some(error),
            Self::WebSocket(error) => Some(error),
            Self::P2p(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for SessionError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

impl From<WsError> for SessionError {
    fn from(error: WsError) -> Self {
        Self::WebSocket(error)
    }
}

impl From<BeeError> for SessionError {
    fn from(error: BeeError) -> Self {
        match error {
            BeeError::Closed => Self::Closed,
            other => Self::P2p(other),
        }
    }
}

impl From<FrameError> for SessionError {
    fn from(error: FrameError) -> Self {
        Self::Frame(error)
    }
}

/// The broker's answer to a `Join`.
#[derive(Debug)]
pub enum JoinOutcome {
    /// `Ack{OK, challenge}`: the stream is open.
    Joined(Session),
    /// `FULL` or `REJECTED`: the broker ended the stream (R5); back off before retrying (R38).
    Refused(Status),
}

/// The broker's answer to a `Join`, a refusal with what the broker said about it.
#[derive(Debug)]
pub enum JoinAnswer {
    /// `Ack{OK, challenge}`: the stream is open.
    Joined(Session),
    /// `FULL` or `REJECTED` (R5), with the bound or the reason when the broker named it.
    Refused(Refusal),
}

/// Bound on waiting for the close frame after a refused `Ack` over WebSocket. The broker
/// writes it right behind the `Ack` and then closes, so the wait ends at once either way;
/// the bound is for a server that does neither.
pub const REFUSAL_REASON_WAIT: Duration = Duration::from_secs(5);

/// An open stream after `Ack{OK}`.
#[derive(Debug)]
pub struct Session {
    stream: TcpStream,
    buf: BytesMut,
    challenge: Hash,
    addr: Address,
    config: SessionConfig,
    nonblocking: bool,
    /// `None`: bare frames on TCP (boxed: a TCP session does not carry a decoder's size).
    websocket: Option<Box<Framing>>,
}

/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;

impl Session {
    /// Connects to `target` (`HOST:PORT` for TCP, `ws://HOST:PORT/PATH` for the WebSocket
    /// endpoint), sends `Join{spec, addr}` and reads the `Ack`.
    pub fn join(
        target: &str,
        spec: &Spec,
        addr: &Address,
        config: SessionConfig,
    ) -> Result<JoinOutcome, SessionError> {
        Ok(match Self::join_explained(target, spec, addr, config)? {
            JoinAnswer::Joined(session) => JoinOutcome::Joined(session),
            JoinAnswer::Refused(refusal) => JoinOutcome::Refused(refusal.status),
        })
    }

    /// As [`Session::join`]; a refusal over WebSocket also carries the broker's close
    /// reason, read within [`REFUSAL_REASON_WAIT`] (it names the bound of a FULL).
    pub fn join_explained(
        target: &str,
        spec: &Spec,
        addr: &Address,
        config: SessionConfig,
    ) -> Result<JoinAnswer, SessionError> {
        let url = WsUrl::parse(target)?;
        let authority = url.as_ref().map_or(target, |url| url.authority.as_str());
        let mut stream = connect(authority, config.connect_timeout)?;
        stream.set_nodelay(true)?;
        let (buf, websocket) = match &url {
            Some(url) => (
                upgrade(&mut stream, url, config.handshake_timeout)?,
                Some(Box::new(Framing::new(config.frame_bytes_max))),
            ),
            None => (BytesMut::with_capacity(READ_CHUNK_BYTES), None),
        };
        stream.set_write_timeout(Some(config.write_timeout))?;
        let mut session = Self {
            stream,
            buf,
            challenge: [0; CHALLENGE_BYTES],
            addr: *addr,
            config,
            nonblocking: false,
            websocket,
        };
        session.send(&encode_frame(&spec.to_join(addr)))?;
        let Some(body) = session.recv(config.handshake_timeout)? else {
            return Err(SessionError::HandshakeTimeout(config.handshake_timeout));
        };
        match read_ack(body)? {
            AckAnswer::Ok(challenge) => {
                session.challenge = challenge;
                Ok(JoinAnswer::Joined(session))
            }
            AckAnswer::Refused(status) => {
                let wait = REFUSAL_REASON_WAIT.min(config.handshake_timeout);
                let reason = session.websocket.as_deref_mut().and_then(|framing| {
                    close_reason(&mut session.stream, &mut session.buf, framing, wait)
                });
                Ok(JoinAnswer::Refused(match reason {
                    Some(reason) => Refusal::with_reason(status, reason),
                    None => Refusal::new(status),
                }))
            }
        }
    }

    /// This stream's challenge from the `Ack` (R4): publishers sign under it.
    pub fn challenge(&self) -> &Hash {
        &self.challenge
    }

    /// The address this stream declared in its `Join`.
    pub fn addr(&self) -> &Address {
        &self.addr
    }

    /// Whether the stream is carried by WebSocket messages.
    pub fn is_websocket(&self) -> bool {
        self.websocket.is_some()
    }

    /// Takes the stream apart after the handshake: the socket (still blocking) and whatever
    /// the broker sent after the `Ack` that is already buffered, as it came off the wire
    /// (WebSocket framing included). For drivers that multiplex many streams themselves
    /// (the `bps-bench` load generator).
    pub fn into_parts(self) -> (TcpStream, BytesMut) {
        (self.stream, self.buf)
    }

    /// Writes one encoded frame (varint length and body) completely: as it is on TCP, as
    /// one masked binary message on WebSocket.
    pub fn send(&mut self, frame: &[u8]) -> Result<(), SessionError> {
        self.set_nonblocking(false)?;
        if self.websocket.is_some() {
            self.stream.write_all(&Framing::wrap(frame))?;
        } else {
            self.stream.write_all(frame)?;
        }
        Ok(())
    }

    /// The next frame body already in the buffer, answering any ping found before it.
    fn buffered_frame(&mut self) -> Result<Option<Bytes>, SessionError> {
        let Some(framing) = self.websocket.as_mut() else {
            return Ok(next_frame(&mut self.buf, self.config.frame_bytes_max)?);
        };
        loop {
            match framing.next_frame(&mut self.buf)? {
                Next::Frame(body) => return Ok(Some(body)),
                Next::Wanting => return Ok(None),
                Next::Skipped => {}
                Next::Reply(reply) => {
                    let nonblocking = self.nonblocking;
                    if nonblocking {
                        self.stream.set_nonblocking(false)?;
                    }
                    self.stream.write_all(&reply)?;
                    if nonblocking {
                        self.stream.set_nonblocking(true)?;
                    }
                }
            }
        }
    }

    /// The next frame body, if one is buffered or arrives within `wait`; `Ok(None)` when
    /// none did. A zero `wait` only takes what the socket already holds.
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Bytes>, SessionError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(body) = self.buffered_frame()? {
                return Ok(Some(body));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if !self.fill(remaining)? {
                return Ok(None);
            }
        }
    }

    /// Ends the stream cleanly: no more writes (the broker sees EOF after every frame
    /// sent), then reads and discards until the broker closes or `linger` passes, so that
    /// closing never resets a connection the broker has not finished reading.
    pub fn finish(mut self, linger: Duration) -> Result<(), SessionError> {
        if self.websocket.is_some() {
            // The closing handshake (RFC 6455 section 7): the broker answers with its own
            // close and ends the connection.
            self.set_nonblocking(false)?;
            self.stream.write_all(&Framing::close())?;
        }
        self.stream.shutdown(Shutdown::Write)?;
        let deadline = Instant::now() + linger;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Ok(());
            }
            self.buf.clear();
            match self.fill(remaining) {
                Ok(_) => {}
                Err(SessionError::Closed) => return Ok(()),
                Err(error) => return Err(error),
            }
        }
    }

    /// Reads once, waiting at most `wait` (zero: do not wait). `Ok(false)`: nothing came.
    fn fill(&mut self, wait: Duration) -> Result<bool, SessionError> {
        if wait.is_zero() {
            self.set_nonblocking(true)?;
        } else {
            self.set_nonblocking(false)?;
            self.stream.set_read_timeout(Some(wait))?;
        }
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(SessionError::Closed),
            Ok(read) => {
                self.buf.extend_from_slice(&chunk[..read]);
                Ok(true)
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(false)
            }
            Err(error) => Err(SessionError::Io(error)),
        }
    }

    fn set_nonblocking(&mut self, nonblocking: bool) -> Result<(), SessionError> {
        if self.nonblocking != nonblocking {
            self.stream.set_nonblocking(nonblocking)?;
            self.nonblocking = nonblocking;
        }
        Ok(())
    }
}

/// What an `Ack` says (R4, R5), whatever carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckAnswer {
    /// `OK` with the stream's challenge.
    Ok(Hash),
    /// `FULL` or `REJECTED`.
    Refused(Status),
}

/// The `Ack` in `body`, checked: a known status, and `OK` with a 32-byte challenge.
pub fn read_ack(body: Bytes) -> Result<AckAnswer, SessionError> {
    let ack = decode_ack(body).map_err(SessionError::Decode)?;
    match Status::try_from(ack.status) {
        Ok(Status::Ok) => Hash::try_from(ack.challenge.as_ref())
            .map(AckAnswer::Ok)
            .map_err(|_| {
                SessionError::BadAck(format!(
                    "OK with a {}-byte challenge, expected {CHALLENGE_BYTES}",
                    ack.challenge.len()
                ))
            }),
        Ok(status @ (Status::Full | Status::Rejected)) => Ok(AckAnswer::Refused(status)),
        Ok(Status::Unspecified) => {
            Err(SessionError::BadAck("status STATUS_UNSPECIFIED".to_owned()))
        }
        Err(_) => Err(SessionError::BadAck(format!(
            "unknown status {}",
            ack.status
        ))),
    }
}

/// Connects to the first address of `target` that accepts within `timeout`.
fn connect(target: &str, timeout: Duration) -> Result<TcpStream, SessionError> {
    let addresses = target
        .to_socket_addrs()
        .map_err(|source| SessionError::Resolve {
            target: target.to_owned(),
            source: Some(source),
        })?;
    let mut last_error = None;
    for address in addresses {
        match TcpStream::connect_timeout(&address, timeout) {
            Ok(stream) => return Ok(stream),
            Err(error) => last_error = Some(error),
        }
    }
    Err(match last_error {
        Some(source) => SessionError::Connect {
            target: target.to_owned(),
            source,
        },
        None => SessionError::Resolve {
            target: target.to_owned(),
            source: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::thread;

    use bps_proto::{Ack, Binding, Broadcast, Join, decode_join};

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

    /// A one-connection peer that reads the Join, answers `reply` byte by byte (so the
    /// client must resume across partial reads) and returns the Join it read.
    fn serve_once(reply: Vec<u8>) -> (String, thread::JoinHandle<Join>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        let handle = thread::spawn(move || {
            let (mut stream, _) = listener.accept().expect("accept");
            let mut buf = BytesMut::new();
            let body = loop {
                if let Some(body) = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT).expect("frame") {
                    break body;
                }
                let mut chunk = [0u8; 256];
                let read = stream.read(&mut chunk).expect("read");
                buf.extend_from_slice(&chunk[..read]);
            };
            for byte in reply {
                stream.write_all(&[byte]).expect("write");
                stream.flush().expect("flush");
            }
            decode_join(body).expect("join")
        });
        (target, handle)
    }

    #[test]
    fn join_reads_the_ack_and_the_challenge_then_frames() {
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![9; 32]),
        });
        let broadcast = Broadcast {
            soc: Bytes::from(vec![1; 105]),
            kind: 1,
            challenge: Bytes::from(vec![2; 32]),
            index: 5,
        };
        let reply = [ack.to_vec(), encode_frame(&broadcast).to_vec()].concat();
        let (target, peer) = serve_once(reply);
        let outcome =
            Session::join(&target, &spec(), &[3; 20], SessionConfig::default()).expect("join");
        let JoinOutcome::Joined(mut session) = outcome else {
            panic!("refused");
        };
        assert_eq!(session.challenge(), &[9; 32]);
        assert_eq!(session.addr(), &[3; 20]);
        let body = session
            .recv(Duration::from_secs(5))
            .expect("recv")
            .expect("a frame");
        assert_eq!(
            bps_proto::decode_broadcast(body).expect("broadcast"),
            broadcast
        );
        let join = peer.join().expect("peer");
        assert_eq!(join, spec().to_join(&[3; 20]));
        // The peer closed: EOF is a reset.
        assert!(matches!(
            session.recv(Duration::from_secs(5)),
            Err(SessionError::Closed)
        ));
    }

    #[test]
    fn join_reports_full_and_rejected() {
        for status in [Status::Full, Status::Rejected] {
            let ack = encode_frame(&Ack {
                status: status as i32,
                challenge: Bytes::new(),
            });
            let (target, peer) = serve_once(ack.to_vec());
            let outcome =
                Session::join(&target, &spec(), &[3; 20], SessionConfig::default()).expect("ack");
            assert!(matches!(outcome, JoinOutcome::Refused(got) if got == status));
            peer.join().expect("peer");
        }
    }

    #[test]
    fn join_refuses_a_malformed_ack() {
        let short = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![1; 31]),
        });
        let (target, peer) = serve_once(short.to_vec());
        let error = Session::join(&target, &spec(), &[3; 20], SessionConfig::default())
            .expect_err("short challenge");
        assert_eq!(
            error.to_string(),
            "bad Ack from the broker: OK with a 31-byte challenge, expected 32"
        );
        peer.join().expect("peer");
    }

    #[test]
    fn connect_failure_names_the_target() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let target = listener.local_addr().expect("addr").to_string();
        drop(listener);
        let error = Session::join(&target, &spec(), &[3; 20], SessionConfig::default())
            .expect_err("nobody listens");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot connect to {target}")),
            "{error}"
        );
    }
}
