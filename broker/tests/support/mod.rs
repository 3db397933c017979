//! Shared helpers of the black-box tests: start the real `bps-broker` binary on loopback with
//! free ports, scrape its admin endpoints, and drive BPS streams over real sockets.
//!
//! Owns: [`Broker`] (the child process with a kill-on-drop guard, its parsed listening line,
//! its stderr kept for failure messages), metric polling with deadlines, [`Raw`] (a
//! hand-driven TCP stream for frames the client library cannot express: malformed Joins,
//! garbage, oversize length prefixes, another source address, a small receive buffer), and
//! small helpers around `bps_bench`'s `Session`, `Publisher` and `Subscriber`; the `bps`
//! terminal client as a child process is in [`cli`].
//!
//! Never: reaches into the broker's internals. Everything goes through the wire and the
//! admin HTTP endpoints, as an operator or a foreign client would.
#![allow(dead_code)] // every test file uses a different subset

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bps_client::publisher::{Outgoing, Publisher, PublisherConfig};
use bps_client::session::{JoinOutcome, Session, SessionConfig, SessionError};
use bps_client::subscriber::{Event, Subscriber};
use bps_proto::{
    Ack, Address, Binding, FRAME_BYTES_MAX_DEFAULT, Hash, Join, Spec, Status, decode_ack,
    encode_frame, next_frame,
};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};

pub mod cli;
pub mod relay;
pub mod ws;

/// Upper bound for anything that must happen (a frame arriving, a counter moving, a close).
pub const WAIT: Duration = Duration::from_secs(10);
/// How long "nothing arrives" is watched for.
pub const QUIET: Duration = Duration::from_millis(200);
/// Time the broker gets to print its listening line.
const START_WAIT: Duration = Duration::from_secs(20);

/// How to start the broker beyond the defaults of [`Broker::start`].
#[derive(Default)]
pub struct Options<'a> {
    /// Command-line arguments before the test's own (e.g. `--config FILE`).
    pub args: &'a [&'a str],
    /// `section.key=value` overrides.
    pub sets: &'a [&'a str],
    /// Environment variables.
    pub env: &'a [(&'a str, &'a str)],
    /// Stop reading the broker's stderr once it listens (the pipe fills and stays full).
    pub stderr_unread_after_start: bool,
    /// Set `WATCHDOG_PID` to the broker's pid, as systemd does for a watchdog.
    pub watchdog_pid: bool,
    /// One core instead of two (a test that needs every stream on the cohort's home core).
    pub one_core: bool,
    /// Listen here instead of on a free port of 127.0.0.1 (a port chosen before the broker
    /// runs: a loop of edges needs both ports first, a restarted root keeps its own).
    pub listen: Option<SocketAddr>,
}

/// How a broker started by [`Broker::try_start`] failed to listen.
#[derive(Debug)]
pub struct Refused {
    /// Its exit status, if it exited within the start-up wait.
    pub status: Option<ExitStatus>,
    /// What it wrote on stderr.
    pub log: String,
}

/// What the listening line names: the BPS, admin and WebSocket addresses.
type Listening = (SocketAddr, SocketAddr, Option<SocketAddr>);

/// The running broker process. Killed (and reaped) when dropped.
pub struct Broker {
    child: Option<Child>,
    listen: SocketAddr,
    admin: SocketAddr,
    ws: Option<SocketAddr>,
    log: Arc<Mutex<String>>,
}

impl Broker {
    /// Starts `bps-broker` on 127.0.0.1 with free ports and two cores; `sets` are
    /// `section.key=value` overrides passed as `--set`.
    pub fn start(sets: &[&str]) -> Broker {
        Broker::start_with(&[], sets)
    }

    /// As [`Broker::start`], with more command-line arguments first (e.g. `--config FILE`).
    pub fn start_with(args: &[&str], sets: &[&str]) -> Broker {
        Broker::start_options(&Options {
            args,
            sets,
            ..Options::default()
        })
    }

    /// Starts `bps-broker` as `options` say; it must print its listening line.
    pub fn start_options(options: &Options<'_>) -> Broker {
        match Broker::try_start(options) {
            Ok(broker) => broker,
            Err(refused) => panic!(
                "bps-broker printed no listening line within {START_WAIT:?}; exit: {:?}\n{}",
                refused.status, refused.log
            ),
        }
    }

    /// Starts `bps-broker` as `options` say: the broker once it listens, or how it failed
    /// (it exited, or printed no listening line within the start-up wait).
    pub fn try_start(options: &Options<'_>) -> Result<Broker, Refused> {
        let binary = env!("CARGO_BIN_EXE_bps-broker");
        let mut command = if options.watchdog_pid {
            // systemd names the watched process in WATCHDOG_PID: a shell that execs the
            // broker knows its pid before the broker starts.
            let mut shell = Command::new("sh");
            shell.args(["-c", "WATCHDOG_PID=$$ exec \"$0\" \"$@\"", binary]);
            shell
        } else {
            Command::new(binary)
        };
        command.args(options.args);
        command.env_remove("RUST_LOG");
        for (name, value) in options.env {
            command.env(name, value);
        }
        let sets = options.sets;
        let listen = options
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
            .to_string();
        command.args([
            "--listen",
            &listen,
            "--admin-listen",
            "127.0.0.1:0",
            "--ws-listen",
            "127.0.0.1:0",
            "--cores",
            if options.one_core { "1" } else { "2" },
        ]);
        for set in sets {
            command.args(["--set", set]);
        }
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn bps-broker");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (line_tx, line_rx) = mpsc::channel();
        {
            let log = Arc::clone(&log);
            let stop_after_start = options.stderr_unread_after_start;
            // Keeps reading so the broker never blocks on a full pipe (unless a test wants
            // exactly that: then it stops after the listening line, keeping the pipe open).
            thread::spawn(move || {
                let mut lines = BufReader::new(stderr).lines();
                for line in lines.by_ref() {
                    let Ok(line) = line else { break };
                    let listening = parse_listening(&line);
                    let mut log = log.lock().unwrap_or_else(|poison| poison.into_inner());
                    log.push_str(&line);
                    log.push('\n');
                    drop(log);
                    if let Some(addrs) = listening {
                        let _ = line_tx.send(addrs);
                        if stop_after_start {
                            // Hold the pipe open and never read it again.
                            thread::sleep(Duration::from_secs(3600));
                            drop(lines);
                            return;
                        }
                    }
                }
            });
        }
        let mut broker = Broker {
            child: Some(child),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: SocketAddr::from(([127, 0, 0, 1], 0)),
            ws: None,
            log,
        };
        broker.await_listening(&line_rx)?;
        Ok(broker)
    }

    /// Waits for the listening line the stderr reader passes on, and takes its addresses.
    fn await_listening(&mut self, lines: &mpsc::Receiver<Listening>) -> Result<(), Refused> {
        let deadline = Instant::now() + START_WAIT;
        loop {
            match lines.recv_timeout(Duration::from_millis(20)) {
                Ok((listen, admin, ws)) => {
                    (self.listen, self.admin, self.ws) = (listen, admin, ws);
                    return Ok(());
                }
                // Still starting.
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let status = self.try_exit();
                    return Err(Refused {
                        status,
                        log: self.log(),
                    });
                }
                // Its stderr closed without a listening line: it is exiting, and the reader
                // has kept every line.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(START_WAIT);
                    return Err(Refused {
                        status,
                        log: self.log(),
                    });
                }
            }
        }
    }

    /// The BPS address.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The BPS address as `HOST:PORT`, for `Session::join`.
    pub fn target(&self) -> String {
        self.listen.to_string()
    }

    /// The admin HTTP address.
    pub fn admin(&self) -> SocketAddr {
        self.admin
    }

    /// The WebSocket listener's address.
    pub fn ws(&self) -> SocketAddr {
        self.ws.expect("the broker runs its WebSocket listener")
    }

    /// Everything the broker wrote on stderr so far.
    pub fn log(&self) -> String {
        self.log
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The process id.
    pub fn pid(&self) -> i32 {
        let child = self.child.as_ref().expect("broker running");
        i32::try_from(child.id()).expect("pid fits in i32")
    }

    /// Sends `signal` to the broker.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid with a valid signal number.
        let status = unsafe { libc::kill(self.pid(), signal) };
        assert_eq!(status, 0, "kill({}, {signal})", self.pid());
    }

    /// The exit status if the process has ended.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|child| child.try_wait().expect("try_wait"))
    }

    /// Waits up to `timeout` for the process to end.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// `GET path` on the admin address: (status, body). `Err` when nothing answers.
    pub fn try_get(&self, path: &str) -> io::Result<(u16, String)> {
        let mut stream = TcpStream::connect_timeout(&self.admin, Duration::from_secs(2))?;
        stream.set_read_timeout(Some(WAIT))?;
        stream.set_write_timeout(Some(WAIT))?;
        stream.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let text = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| io::Error::other(format!("no HTTP head in {text:?}")))?;
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| io::Error::other(format!("no status in {head:?}")))?;
        Ok((status, body.to_owned()))
    }

    /// `GET path`, which must answer.
    pub fn get(&self, path: &str) -> (u16, String) {
        self.try_get(path)
            .unwrap_or_else(|error| panic!("GET {path}: {error}\n{}", self.log()))
    }

    /// One scrape of `/metrics`: every sample by its series (name with labels).
    pub fn metrics(&self) -> HashMap<String, f64> {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "/metrics answered {status}: {body}");
        body.lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .filter_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                Some((series.to_owned(), value.parse().ok()?))
            })
            .collect()
    }

    /// The broker-wide value of one counter or gauge (no labels), e.g. `bps_wrong_stream_total`.
    pub fn metric(&self, name: &str) -> u64 {
        metric_of(&self.metrics(), name)
    }

    /// Polls until the counter `name` reaches `expected`, then checks it did not overshoot
    /// it. Returns the whole scrape that showed it.
    pub fn wait_metric(&self, name: &str, expected: u64) -> HashMap<String, f64> {
        let deadline = Instant::now() + WAIT;
        loop {
            let metrics = self.metrics();
            let value = metric_of(&metrics, name);
            if value >= expected {
                assert_eq!(value, expected, "{name} overshot\n{}", self.log());
                return metrics;
            }
            assert!(
                Instant::now() < deadline,
                "{name} is {value}, never reached {expected} within {WAIT:?}\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls until the gauge `name` equals `expected` (it may move either way).
    pub fn wait_gauge(&self, name: &str, expected: u64) {
        let deadline = Instant::now() + WAIT;
        loop {
            let value = self.metric(name);
            if value == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{name} is {value}, never {expected} within {WAIT:?}\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Asserts the current values of several metrics at once (after the events that move
    /// them are known to have happened).
    pub fn assert_metrics(&self, expected: &[(&str, u64)]) {
        let metrics = self.metrics();
        let actual: Vec<(&str, u64)> = expected
            .iter()
            .map(|(name, _)| (*name, metric_of(&metrics, name)))
            .collect();
        assert_eq!(actual, expected, "metrics\n{}", self.log());
    }

    /// Joins `spec` as `addr` with the client library; the Join must be answered OK.
    pub fn join(&self, spec: &Spec, addr: &Address) -> Session {
        match Session::join(&self.target(), spec, addr, session_config()) {
            Ok(JoinOutcome::Joined(session)) => session,
            Ok(JoinOutcome::Refused(status)) => {
                panic!("Join refused with {status:?}\n{}", self.log())
            }
            Err(error) => panic!("Join failed: {error}\n{}", self.log()),
        }
    }

    /// Joins `spec` as `addr`; the Join must be refused, and the refusal's status comes back.
    pub fn join_refused(&self, spec: &Spec, addr: &Address) -> Status {
        match Session::join(&self.target(), spec, addr, session_config()) {
            Ok(JoinOutcome::Refused(status)) => status,
            Ok(JoinOutcome::Joined(_)) => panic!("Join answered OK, expected a refusal"),
            Err(error) => panic!("Join failed: {error}\n{}", self.log()),
        }
    }

    /// A raw connection to the BPS port from 127.0.0.1.
    pub fn raw(&self) -> Raw {
        Raw::connect(self.listen, None, None)
    }

    /// A raw connection to the BPS port from another loopback address (another peer for
    /// the per-peer bounds, R32, R33, R39).
    pub fn raw_from(&self, source: Ipv4Addr) -> Raw {
        Raw::connect(self.listen, Some(IpAddr::V4(source)), None)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `listen=IP:PORT admin=IP:PORT ws=IP:PORT|off` from the broker's listening line.
fn parse_listening(line: &str) -> Option<Listening> {
    let rest = line.strip_prefix("bps-broker listening ")?;
    let mut listen = None;
    let mut admin = None;
    let mut ws = None;
    for field in rest.split_whitespace() {
        if let Some(value) = field.strip_prefix("listen=") {
            listen = value.parse().ok();
        } else if let Some(value) = field.strip_prefix("admin=") {
            admin = value.parse().ok();
        } else if let Some(value) = field.strip_prefix("ws=") {
            ws = value.parse().ok();
        }
    }
    Some((listen?, admin?, ws))
}

/// A sample without labels from a scrape (0 if absent would hide a renamed metric, so absent
/// panics).
pub fn metric_of(metrics: &HashMap<String, f64>, name: &str) -> u64 {
    let value = metrics
        .get(name)
        .unwrap_or_else(|| panic!("no metric {name} in the scrape"));
    // Counters and gauges are whole numbers.
    *value as u64
}

/// Timeouts for the client library's sessions.
pub fn session_config() -> SessionConfig {
    SessionConfig {
        connect_timeout: Duration::from_secs(5),
        handshake_timeout: WAIT,
        write_timeout: WAIT,
        frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
    }
}

// ---- specs and keys ----

/// A deterministic key; distinct `n` give distinct identities.
pub fn key(n: u8) -> SigningKey {
    let mut secret = [0u8; 32];
    secret[0] = 0x42;
    secret[31] = n.max(1);
    SigningKey::from_bytes(&secret).expect("a valid secp256k1 key")
}

/// A topic from a number.
pub fn topic(n: u8) -> Hash {
    bps_proto::keccak256(&[b'b', b'b', n])
}

/// Explicit authorship: `admin`, FEED_TOPIC, open or closed (live-stream, jam, spectator-jam).
pub fn explicit(topic_n: u8, admin: &Address, closed: bool) -> Spec {
    Spec {
        topic: topic(topic_n),
        binding: Binding::FeedTopic,
        admin: Some(*admin),
        all: false,
        history: false,
        closed,
    }
}

/// ALL + MNEMONIC with `admin` (group chat).
pub fn group(topic_n: u8, admin: &Address) -> Spec {
    Spec {
        topic: topic(topic_n),
        binding: Binding::Mnemonic,
        admin: Some(*admin),
        all: true,
        history: false,
        closed: false,
    }
}

/// Implicit authorship (no admin).
pub fn implicit(topic: Hash, binding: Binding) -> Spec {
    Spec {
        topic,
        binding,
        admin: None,
        all: false,
        history: false,
        closed: false,
    }
}

/// A publisher for `key` in `spec`, indices from 0, on `session`'s stream.
pub fn publisher(spec: &Spec, key: &SigningKey, session: &Session) -> Publisher {
    publisher_with(spec, key, PublisherConfig::default(), session)
}

/// A publisher with explicit index starts (or a GSOC id), on `session`'s stream.
pub fn publisher_with(
    spec: &Spec,
    key: &SigningKey,
    config: PublisherConfig,
    session: &Session,
) -> Publisher {
    let mut publisher = Publisher::new(*spec, key.clone(), config).expect("key fits the spec");
    publisher.begin_session(*session.challenge());
    publisher
}

/// Writes everything the publisher may send now (the claim first when pending); returns
/// what was written.
pub fn flush(publisher: &mut Publisher, session: &mut Session) -> Vec<Outgoing> {
    let mut sent = Vec::new();
    while let Some(outgoing) = publisher.next_frame().expect("sign") {
        session.send(&outgoing.signed.frame).expect("send a frame");
        publisher.mark_sent();
        sent.push(outgoing);
    }
    sent
}

/// Queues DATA payloads and writes them (after the claim when pending); returns the DATA
/// frames written, in order.
pub fn publish(
    publisher: &mut Publisher,
    session: &mut Session,
    payloads: &[&[u8]],
) -> Vec<Outgoing> {
    for payload in payloads {
        publisher
            .enqueue_data(Bytes::copy_from_slice(payload))
            .expect("queue DATA");
    }
    flush(publisher, session)
        .into_iter()
        .filter(|outgoing| outgoing.kind == bps_proto::Kind::Data)
        .collect()
}

/// The body (without its varint length) of an encoded frame.
pub fn body_of(frame: &Bytes) -> Bytes {
    let mut buf = BytesMut::from(frame.as_ref());
    next_frame(&mut buf, usize::MAX)
        .expect("a well-formed frame")
        .expect("a whole frame")
}

/// The bodies of written frames.
pub fn bodies(sent: &[Outgoing]) -> Vec<Bytes> {
    sent.iter()
        .map(|outgoing| body_of(&outgoing.signed.frame))
        .collect()
}

// ---- receiving ----

/// How a stream ended, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// A clean close (FIN): EOF.
    Eof,
    /// A TCP reset.
    Reset,
}

/// The next frame body on `session`, which must arrive within [`WAIT`].
pub fn recv(session: &mut Session) -> Bytes {
    match session.recv(WAIT) {
        Ok(Some(body)) => body,
        Ok(None) => panic!("no frame within {WAIT:?}"),
        Err(error) => panic!("stream ended while a frame was expected: {error}"),
    }
}

/// Receives exactly `expected.len()` frames and checks them byte for byte, in order.
pub fn expect_frames(session: &mut Session, expected: &[Bytes]) {
    for (position, want) in expected.iter().enumerate() {
        let got = recv(session);
        assert_eq!(
            got,
            want,
            "frame {position} of {} differs from what was published",
            expected.len()
        );
    }
}

/// Joins a spectator and the admin of an explicit cohort, then sends on the admin's stream a
/// claim signed by another key under the admin's challenge; waits until the broker has
/// closed that stream and counted the invalid SOC. Returns the spectator's session, on
/// which nothing may arrive.
pub fn send_forged_claim(broker: &Broker) -> Session {
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let spectator = broker.join(&spec, &key(10).address());
    let mut admin_session = broker.join(&spec, &admin.address());
    let forged = bps_verify::sign_broadcast(
        &key(2),
        bps_proto::Kind::Auth,
        &spec.topic,
        admin_session.challenge(),
        0,
        b"",
    );
    admin_session.send(&forged.frame).expect("send the forgery");
    let _ = expect_closed(&mut admin_session);
    broker.wait_metric("bps_invalid_soc_total", 1);
    spectator
}

/// Nothing arrives for [`QUIET`] and the stream stays open.
pub fn expect_nothing(session: &mut Session) {
    match session.recv(QUIET) {
        Ok(None) => {}
        Ok(Some(body)) => panic!("unexpected frame of {} bytes", body.len()),
        Err(error) => panic!("stream ended, expected it open and quiet: {error}"),
    }
}

/// The stream ends within [`WAIT`]; returns how, and the frames that came first.
pub fn expect_end(session: &mut Session) -> (End, Vec<Bytes>) {
    let deadline = Instant::now() + WAIT;
    let mut frames = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "stream still open after {WAIT:?}");
        match session.recv(left) {
            Ok(Some(body)) => frames.push(body),
            Ok(None) => {}
            Err(SessionError::Closed) => return (End::Eof, frames),
            Err(SessionError::Io(error)) if is_reset(&error) => return (End::Reset, frames),
            Err(error) => panic!("stream failed oddly: {error}"),
        }
    }
}

/// The stream ends within [`WAIT`] with no frame before the end.
pub fn expect_closed(session: &mut Session) -> End {
    let (end, frames) = expect_end(session);
    assert!(
        frames.is_empty(),
        "{} frames arrived before the close",
        frames.len()
    );
    end
}

fn is_reset(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
    )
}

/// Verifies a received DATA end to end (R41) and checks its owner, index and payload.
pub fn expect_data(
    subscriber: &mut Subscriber,
    body: Bytes,
    owner: &Address,
    index: u64,
    payload: &[u8],
) {
    match subscriber.on_frame(body) {
        Event::Data {
            owner: got_owner,
            index: got_index,
            payload: got_payload,
        } => {
            assert_eq!(&got_owner, owner, "owner");
            assert_eq!(got_index, index, "index");
            assert_eq!(got_payload.as_ref(), payload, "payload");
        }
        other => panic!("expected DATA, the subscriber saw {other:?}"),
    }
}

/// Verifies a received ROSTER end to end and returns its publishers.
pub fn expect_roster(subscriber: &mut Subscriber, body: Bytes) -> Vec<Address> {
    match subscriber.on_frame(body) {
        Event::Roster {
            publishers, gap, ..
        } => {
            assert_eq!(gap, None, "roster gap");
            publishers
        }
        other => panic!("expected a ROSTER, the subscriber saw {other:?}"),
    }
}

/// Polls `attempt` every 10 ms until it returns `Some`, for at most [`WAIT`].
pub fn eventually<T>(what: &str, mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

// ---- raw streams ----

/// A hand-driven TCP stream: any bytes out, frames in, and how it ended.
pub struct Raw {
    stream: TcpStream,
    buf: BytesMut,
}

impl Raw {
    /// Connects to `target`, from `source` if given, with `SO_RCVBUF` = `rcvbuf` (set
    /// before the connect, so the advertised window is small from the start) if given.
    pub fn connect(target: SocketAddr, source: Option<IpAddr>, rcvbuf: Option<usize>) -> Raw {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        if let Some(bytes) = rcvbuf {
            socket.set_recv_buffer_size(bytes).expect("SO_RCVBUF");
        }
        if let Some(source) = source {
            socket
                .bind(&SocketAddr::new(source, 0).into())
                .expect("bind the source address");
        }
        socket
            .connect_timeout(&target.into(), Duration::from_secs(5))
            .expect("connect");
        let stream: TcpStream = socket.into();
        stream.set_nodelay(true).expect("nodelay");
        stream.set_write_timeout(Some(WAIT)).expect("write timeout");
        Raw {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Writes `bytes`; the broker may already have closed the stream.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Sends a Join (any, even one the library could not build) and reads the Ack.
    pub fn join(&mut self, join: &Join) -> Ack {
        self.send(&encode_frame(join)).expect("send the Join");
        match self.recv(WAIT) {
            Ok(Some(body)) => decode_ack(body).expect("an Ack"),
            Ok(None) => panic!("no Ack within {WAIT:?}"),
            Err(end) => panic!("stream ended ({end:?}) before the Ack"),
        }
    }

    /// The next frame body within `wait` (`Ok(None)`: none came); `Err` when the stream ended.
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Bytes>, End> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(body) =
                next_frame(&mut self.buf, FRAME_BYTES_MAX_DEFAULT).expect("a frame from the broker")
            {
                return Ok(Some(body));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left)).expect("timeout");
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(End::Eof),
                Ok(read) => self.buf.extend_from_slice(&chunk[..read]),
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) if is_reset(&error) => return Err(End::Reset),
                Err(error) => panic!("read failed: {error}"),
            }
        }
    }

    /// The stream ends within [`WAIT`]; returns how, and the frames that came first.
    pub fn expect_end(&mut self) -> (End, Vec<Bytes>) {
        let deadline = Instant::now() + WAIT;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "raw stream still open after {WAIT:?}");
            match self.recv(left) {
                Ok(Some(body)) => frames.push(body),
                Ok(None) => {}
                Err(end) => return (end, frames),
            }
        }
    }

    /// A raw view of a connected socket.
    pub fn from_stream(stream: TcpStream) -> Raw {
        Raw {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// The socket itself, for a test that reads it its own way.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Half-closes the write side.
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
