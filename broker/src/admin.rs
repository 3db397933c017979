//! The admin HTTP endpoints: `/metrics`, `/healthz`, `/readyz`, `/cohortz` and the bridge's
//! topic list `/pubsub/` (docs/PROTOCOL.md W8: it names peers, so it is here and not on the public
//! WebSocket port, W10).
//!
//! Owns: the `AdminBackend` trait (what the I/O layer exposes to operators), `/cohortz`'s
//! paging and sorting, and a small, bounded HTTP/1.1 server on plain std threads: one I/O
//! thread that polls every connection with non-blocking sockets, and `ADMIN_WORKERS` workers
//! that compute responses. One request per connection (`Connection: close`).
//! Never does: touch protocol state directly, keep connections alive, read request bodies,
//! block on a client, or grow without bound.
//!
//! A client can cost the server one of `ADMIN_CONNECTIONS_MAX` connection slots and nothing
//! else: heads are read and responses written by the I/O thread without blocking, so a
//! client that trickles its request or never reads its response holds no worker, and
//! `/healthz` keeps answering. Each connection has one total deadline,
//! `ADMIN_CONNECTION_DEADLINE`, from accept to the last byte of its response; a slot is
//! freed at it whatever the client does. Workers only call the backend, which asks the cores
//! through their control mailboxes with a deadline. Stopping never waits for a client.
//!
//! Responses: unknown path 404; a known path with a method other than GET 405 (with
//! `Allow: GET`); a malformed request 400; a request head over `REQUEST_HEAD_BYTES_MAX` 431;
//! a request head not complete within `REQUEST_HEAD_DEADLINE` 408; every worker busy 503;
//! more than `ADMIN_CONNECTIONS_MAX` connections: closed at once.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bps_proto::CohortKey;
use crossbeam::channel::{self, Receiver, Sender, TrySendError};
use serde_json::{Value, json};

pub use crate::metrics::MetricsSnapshot;
use crate::protocol::{CohortStreams, CohortSummary};

/// Worker threads computing responses: enough for a scraper and an operator at once.
pub const ADMIN_WORKERS: usize = 2;

/// Requests waiting for a worker; beyond it a request gets 503 at once.
pub const ADMIN_PENDING_MAX: usize = 16;

/// Connections open at once; the admin port is for operators and scrapers, not the public.
pub const ADMIN_CONNECTIONS_MAX: usize = 64;

/// Largest request line plus headers; admin requests are a line and a few headers.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Time a client has to send its whole request head.
pub const REQUEST_HEAD_DEADLINE: Duration = Duration::from_secs(2);

/// Time a connection may live in all, from accept to the last byte of its response.
pub const ADMIN_CONNECTION_DEADLINE: Duration = Duration::from_secs(10);

/// The two deadlines of a connection, as the server applies them.
#[derive(Clone, Copy, Debug)]
struct Deadlines {
    /// From accept to a complete request head.
    head: Duration,
    /// From accept to the last byte of the response.
    connection: Duration,
}

impl Deadlines {
    const SERVED: Deadlines = Deadlines {
        head: REQUEST_HEAD_DEADLINE,
        connection: ADMIN_CONNECTION_DEADLINE,
    };
}

/// `/cohortz` page size when `limit` is not given.
pub const COHORTZ_LIMIT_DEFAULT: usize = 50;

/// Largest `/cohortz` page: a larger `limit` is clamped to it.
pub const COHORTZ_LIMIT_MAX: usize = 1000;

/// Content type of the Prometheus text exposition format.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Longest the I/O thread sleeps without an event: it rechecks deadlines at least this often.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// What the admin endpoints need from the running broker. Implemented by the I/O layer; every
/// method may block its (admin worker) thread but never a core.
pub trait AdminBackend: Send + Sync {
    /// Asks every core to answer within `deadline`; one entry per core, in core order, true
    /// when that core answered.
    fn ping(&self, deadline: Duration) -> Vec<bool>;

    /// Every live cohort's summary, gathered from the home cores within `deadline`; `None`
    /// when some core did not answer in time.
    fn cohorts(&self, deadline: Duration) -> Option<Vec<CohortSummary>>;

    /// A page of the streams of the cohort with key `key`; `None` when some core did not
    /// answer in time, `Some(None)` when no such cohort is live.
    fn cohort_streams(
        &self,
        key: &CohortKey,
        offset: usize,
        limit: usize,
        deadline: Duration,
    ) -> Option<Option<CohortStreams>>;

    /// The figures of one scrape.
    fn metrics(&self) -> MetricsSnapshot;

    /// True while the broker is listening and not draining.
    fn ready(&self) -> bool;
}

/// State the admin endpoints share with the daemon: draining and the reloadable deadline.
#[derive(Debug)]
struct AdminState {
    draining: AtomicBool,
    healthz_deadline_ms: AtomicU64,
    stopping: AtomicBool,
    /// The I/O thread's wake-up: written by workers with a response and by `stop`.
    wake: OwnedFd,
}

impl AdminState {
    fn wake_io(&self) {
        let one: u64 = 1;
        // SAFETY: an eventfd takes an 8-byte counter increment from a valid buffer; a full
        // counter (EAGAIN) still leaves the fd readable, which is all a wake needs.
        unsafe {
            libc::write(self.wake.as_raw_fd(), (&raw const one).cast(), 8);
        }
    }
}

/// An admin listener bound but not serving yet: bind before starting the cores so that a
/// taken admin port refuses the start before anything else runs.
#[derive(Debug)]
pub struct AdminListener {
    listener: TcpListener,
}

impl AdminListener {
    /// Binds the admin address.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub fn bind(addr: SocketAddr) -> io::Result<AdminListener> {
        Ok(AdminListener {
            listener: TcpListener::bind(addr)?,
        })
    }

    /// The bound address (the real port when bound to port 0).
    ///
    /// # Errors
    /// When the socket cannot report its address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts the I/O thread and the workers.
    ///
    /// # Errors
    /// When the eventfd or a thread cannot be created.
    pub fn serve(
        self,
        backend: Arc<dyn AdminBackend>,
        healthz_deadline: Duration,
    ) -> io::Result<AdminServer> {
        self.serve_with(backend, healthz_deadline, Deadlines::SERVED)
    }

    fn serve_with(
        self,
        backend: Arc<dyn AdminBackend>,
        healthz_deadline: Duration,
        deadlines: Deadlines,
    ) -> io::Result<AdminServer> {
        let local_addr = self.listener.local_addr()?;
        self.listener.set_nonblocking(true)?;
        // SAFETY: eventfd has no memory preconditions; a negative result is checked.
        let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if wake < 0 {
            return Err(io::Error::last_os_error());
        }
        let state = Arc::new(AdminState {
            draining: AtomicBool::new(false),
            healthz_deadline_ms: AtomicU64::new(duration_ms(healthz_deadline)),
            stopping: AtomicBool::new(false),
            // SAFETY: `wake` is a fresh fd owned by nothing else.
            wake: unsafe { OwnedFd::from_raw_fd(wake) },
        });
        let (requests, jobs) = channel::bounded::<Job>(ADMIN_PENDING_MAX);
        let (answers, responses) = channel::unbounded::<(u64, Vec<u8>)>();
        let mut threads = Vec::with_capacity(ADMIN_WORKERS + 1);
        for worker in 0..ADMIN_WORKERS {
            let jobs = jobs.clone();
            let answers = answers.clone();
            let backend = Arc::clone(&backend);
            let state = Arc::clone(&state);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("bps-admin-{worker}"))
                    .spawn(move || work(&jobs, &answers, backend.as_ref(), &state))?,
            );
        }
        let io_state = Arc::clone(&state);
        let listener = self.listener;
        threads.push(
            std::thread::Builder::new()
                .name("bps-admin-io".to_owned())
                .spawn(move || {
                    Server {
                        listener,
                        state: io_state,
                        requests,
                        responses,
                        connections: HashMap::new(),
                        next_id: 0,
                        deadlines,
                    }
                    .run();
                })?,
        );
        Ok(AdminServer {
            local_addr,
            state,
            threads,
        })
    }
}

/// The running admin server. Dropping it stops it.
pub struct AdminServer {
    local_addr: SocketAddr,
    state: Arc<AdminState>,
    threads: Vec<JoinHandle<()>>,
}

impl fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminServer")
            .field("local_addr", &self.local_addr)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl AdminServer {
    /// Binds `addr` and serves `backend` on it.
    ///
    /// # Errors
    /// When the address cannot be bound or a thread cannot be spawned.
    pub fn start(
        addr: SocketAddr,
        backend: Arc<dyn AdminBackend>,
        healthz_deadline: Duration,
    ) -> io::Result<AdminServer> {
        AdminListener::bind(addr)?.serve(backend, healthz_deadline)
    }

    /// The address served (the real port when bound to port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// From now on `/readyz` answers 503: the broker is draining.
    pub fn set_draining(&self) {
        self.state.draining.store(true, Ordering::Relaxed);
    }

    /// The deadline for `/healthz` pings and `/cohortz` (reloadable).
    pub fn set_healthz_deadline(&self, deadline: Duration) {
        self.state
            .healthz_deadline_ms
            .store(duration_ms(deadline), Ordering::Relaxed);
    }

    /// Stops at once: open connections are closed, workers finish the request in hand (each
    /// bounded by the health deadline), every thread is joined.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.state.stopping.store(true, Ordering::Relaxed);
        self.state.wake_io();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.shut_down();
        }
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A complete request head for a worker.
struct Job {
    connection: u64,
    head: Vec<u8>,
}

/// Where one connection is.
enum Phase {
    /// Reading the request head.
    Reading { head: Vec<u8> },
    /// A worker computes the response.
    Waiting,
    /// Writing the response.
    Writing { response: Vec<u8>, written: usize },
}

struct Connection {
    stream: TcpStream,
    accepted: Instant,
    phase: Phase,
}

/// The I/O thread's state.
struct Server {
    listener: TcpListener,
    state: Arc<AdminState>,
    requests: Sender<Job>,
    responses: Receiver<(u64, Vec<u8>)>,
    connections: HashMap<u64, Connection>,
    next_id: u64,
    deadlines: Deadlines,
}

impl Server {
    fn run(mut self) {
        while !self.state.stopping.load(Ordering::Relaxed) {
            self.wait();
            self.accept();
            self.take_responses();
            let ids: Vec<u64> = self.connections.keys().copied().collect();
            for id in ids {
                self.advance(id);
            }
        }
    }

    /// Polls the listener, the wake eventfd and every connection, for at most
    /// `POLL_INTERVAL`.
    fn wait(&self) {
        let mut fds = vec![
            pollfd(self.listener.as_raw_fd(), libc::POLLIN),
            pollfd(self.state.wake.as_raw_fd(), libc::POLLIN),
        ];
        for connection in self.connections.values() {
            let events = match connection.phase {
                Phase::Reading { .. } => libc::POLLIN,
                Phase::Waiting => 0,
                Phase::Writing { .. } => libc::POLLOUT,
            };
            fds.push(pollfd(connection.stream.as_raw_fd(), events));
        }
        let timeout = i32::try_from(POLL_INTERVAL.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `fds` is a valid, exclusively borrowed array of `fds.len()` pollfds.
        unsafe {
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout);
        }
        let mut drained = [0_u8; 8];
        // SAFETY: reads the eventfd's 8-byte counter into a valid buffer (EAGAIN when 0).
        unsafe {
            libc::read(self.state.wake.as_raw_fd(), drained.as_mut_ptr().cast(), 8);
        }
    }

    fn accept(&mut self) {
        loop {
            let stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => return,
                // A connection that failed before accept completed, or an fd shortage: the
                // next poll retries.
                Err(_) => return,
            };
            if self.connections.len() >= ADMIN_CONNECTIONS_MAX
                || stream.set_nonblocking(true).is_err()
            {
                continue;
            }
            self.next_id += 1;
            self.connections.insert(
                self.next_id,
                Connection {
                    stream,
                    accepted: Instant::now(),
                    phase: Phase::Reading {
                        head: Vec::with_capacity(1024),
                    },
                },
            );
        }
    }

    fn take_responses(&mut self) {
        while let Ok((id, response)) = self.responses.try_recv() {
            if let Some(connection) = self.connections.get_mut(&id) {
                connection.phase = Phase::Writing {
                    response,
                    written: 0,
                };
            }
        }
    }

    /// Moves one connection on as far as its socket allows; closes it when done, failed or
    /// past its deadline.
    fn advance(&mut self, id: u64) {
        let Some(connection) = self.connections.get_mut(&id) else {
            return;
        };
        let age = connection.accepted.elapsed();
        let deadlines = self.deadlines;
        let done = match &mut connection.phase {
            Phase::Reading { head } => match read_head(&mut connection.stream, head) {
                HeadProgress::More if age < deadlines.head => false,
                HeadProgress::More => {
                    connection.phase =
                        writing(response(408, "text/plain", &[], b"request timeout\n"));
                    false
                }
                HeadProgress::TooLarge => {
                    connection.phase = writing(response(
                        431,
                        "text/plain",
                        &[],
                        b"request header fields too large\n",
                    ));
                    false
                }
                HeadProgress::Closed => true,
                HeadProgress::Complete(length) => {
                    let mut complete = std::mem::take(head);
                    complete.truncate(length);
                    match self.requests.try_send(Job {
                        connection: id,
                        head: complete,
                    }) {
                        Ok(()) => connection.phase = Phase::Waiting,
                        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                            connection.phase = writing(response(503, "text/plain", &[], b"busy\n"));
                        }
                    }
                    false
                }
            },
            Phase::Waiting => false,
            Phase::Writing { response, written } => {
                write_some(&mut connection.stream, response, written)
            }
        };
        if (done || age >= deadlines.connection)
            && let Some(connection) = self.connections.remove(&id)
        {
            close_gracefully(&connection.stream);
        }
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn writing(response: Vec<u8>) -> Phase {
    Phase::Writing {
        response,
        written: 0,
    }
}

/// Where reading a request head stands.
#[derive(Debug, PartialEq, Eq)]
enum HeadProgress {
    /// Not complete yet.
    More,
    /// Complete; the head is the first `n` bytes.
    Complete(usize),
    /// More than `REQUEST_HEAD_BYTES_MAX` bytes without the end of the head.
    TooLarge,
    /// The client closed or the socket failed: nothing to answer.
    Closed,
}

/// Reads what the socket has into `head` (never blocking) and reports where it stands.
fn read_head(stream: &mut impl Read, head: &mut Vec<u8>) -> HeadProgress {
    let mut chunk = [0_u8; 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return HeadProgress::Closed,
            Ok(read) => {
                let searched_from = head.len().saturating_sub(3);
                head.extend_from_slice(&chunk[..read]);
                if let Some(end) = find_head_end(&head[searched_from..]) {
                    let length = searched_from + end;
                    return if length > REQUEST_HEAD_BYTES_MAX {
                        HeadProgress::TooLarge
                    } else {
                        HeadProgress::Complete(length)
                    };
                }
                if head.len() > REQUEST_HEAD_BYTES_MAX {
                    return HeadProgress::TooLarge;
                }
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return HeadProgress::More,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return HeadProgress::Closed,
        }
    }
}

/// Writes what the socket takes; true when the response is out (or the client is gone).
fn write_some(stream: &mut impl Write, response: &[u8], written: &mut usize) -> bool {
    while *written < response.len() {
        match stream.write(&response[*written..]) {
            Ok(0) => return true,
            Ok(count) => *written += count,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => return false,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    true
}

/// Closing a socket with unread input sends a reset, which can destroy the response before
/// the client reads it: send FIN first and discard what is readable now.
fn close_gracefully(stream: &TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0_u8; 4096];
    let mut reader = stream;
    for _ in 0..16 {
        match reader.read(&mut sink) {
            Ok(read) if read > 0 => {}
            _ => break,
        }
    }
}

/// A worker: answers one request at a time until the I/O thread goes away.
fn work(
    jobs: &Receiver<Job>,
    answers: &Sender<(u64, Vec<u8>)>,
    backend: &dyn AdminBackend,
    state: &AdminState,
) {
    while let Ok(job) = jobs.recv() {
        if state.stopping.load(Ordering::Relaxed) {
            return;
        }
        let reply = route(&job.head, backend, state);
        if answers.send((job.connection, reply)).is_err() {
            return;
        }
        state.wake_io();
    }
}

/// The offset just past the first `\r\n\r\n` (or bare `\n\n`).
fn find_head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .map(|at| at + 4);
    let lf = bytes
        .windows(2)
        .position(|window| window == b"\n\n")
        .map(|at| at + 2);
    match (crlf, lf) {
        (Some(first), Some(second)) => Some(first.min(second)),
        (first, second) => first.or(second),
    }
}

/// The response to one request head.
fn route(head: &[u8], backend: &dyn AdminBackend, state: &AdminState) -> Vec<u8> {
    let Some((method, target)) = parse_request_line(head) else {
        return response(400, "text/plain", &[], b"malformed request line\n");
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !matches!(
        path,
        "/metrics" | "/healthz" | "/readyz" | "/cohortz" | "/pubsub/"
    ) {
        return response(404, "text/plain", &[], b"not found\n");
    }
    if method != "GET" {
        return response(
            405,
            "text/plain",
            &[("Allow", "GET")],
            b"method not allowed\n",
        );
    }
    let deadline = Duration::from_millis(state.healthz_deadline_ms.load(Ordering::Relaxed));
    match path {
        "/metrics" => {
            let mut snapshot = backend.metrics();
            snapshot.broker.ready &= !state.draining.load(Ordering::Relaxed);
            response(200, METRICS_CONTENT_TYPE, &[], snapshot.render().as_bytes())
        }
        "/healthz" => healthz(&backend.ping(deadline)),
        "/readyz" => {
            if state.draining.load(Ordering::Relaxed) {
                response(503, "text/plain", &[], b"draining\n")
            } else if backend.ready() {
                response(200, "text/plain", &[], b"ready\n")
            } else {
                response(503, "text/plain", &[], b"not ready\n")
            }
        }
        "/pubsub/" => match backend.cohorts(deadline) {
            None => response(
                503,
                "text/plain",
                &[],
                b"some core did not answer within timeouts.healthz_deadline_ms\n",
            ),
            Some(cohorts) => response(
                200,
                "application/json",
                &[],
                topics(&cohorts).to_string().as_bytes(),
            ),
        },
        _ => cohortz_response(query, backend, deadline),
    }
}

/// W8: the active topics with their cohort parameters, the broker's role in each and the
/// connected peers (up to `SUMMARY_PEERS_MAX` of them, with the total).
fn topics(cohorts: &[CohortSummary]) -> Value {
    let mut listed: Vec<&CohortSummary> = cohorts.iter().collect();
    listed.sort_by(|first, second| first.key.cmp(&second.key));
    let topics: Vec<Value> = listed
        .iter()
        .map(|cohort| {
            json!({
                "topic": cohort.topic,
                "binding": cohort.binding,
                "admin": cohort.admin,
                "publishers": (cohort.authorship == "all").then_some("all"),
                "history": cohort.history,
                "closed": cohort.closed,
                "role": "broker",
                "streams": cohort.streams.values().sum::<u64>(),
                "peers_total": cohort.peers_total,
                "peers": cohort.peers,
            })
        })
        .collect();
    json!({ "topics": topics })
}

fn cohortz_response(query: &str, backend: &dyn AdminBackend, deadline: Duration) -> Vec<u8> {
    let query = match CohortzQuery::parse(query) {
        Ok(query) => query,
        Err(message) => {
            return response(400, "text/plain", &[], format!("{message}\n").as_bytes());
        }
    };
    let slow = || {
        response(
            503,
            "text/plain",
            &[],
            b"some core did not answer within timeouts.healthz_deadline_ms\n",
        )
    };
    let body = match &query.key {
        Some(key) => match backend.cohort_streams(key, query.offset, query.limit, deadline) {
            None => return slow(),
            Some(None) => {
                return response(404, "text/plain", &[], b"no live cohort has that key\n");
            }
            Some(Some(page)) => streams_page(&page, &query),
        },
        None => match backend.cohorts(deadline) {
            None => return slow(),
            Some(cohorts) => cohorts_page(cohorts, &query),
        },
    };
    response(200, "application/json", &[], body.to_string().as_bytes())
}

/// `METHOD TARGET HTTP/1.x` from the first line of the head.
fn parse_request_line(head: &[u8]) -> Option<(&str, &str)> {
    let line_end = head.iter().position(|byte| *byte == b'\n')?;
    let line = std::str::from_utf8(&head[..line_end])
        .ok()?
        .trim_end_matches('\r');
    let mut parts = line.split(' ');
    let method = parts.next()?;
    let target = parts.next()?;
    let version = parts.next()?;
    let well_formed = parts.next().is_none()
        && !method.is_empty()
        && method.bytes().all(|byte| byte.is_ascii_uppercase())
        && target.starts_with('/')
        && version.starts_with("HTTP/1.");
    well_formed.then_some((method, target))
}

/// `/healthz`: 200 when every core answered, else 503 naming the silent ones.
fn healthz(answers: &[bool]) -> Vec<u8> {
    if answers.is_empty() {
        return response(503, "text/plain", &[], b"no cores running\n");
    }
    let silent: Vec<String> = answers
        .iter()
        .enumerate()
        .filter(|(_, answered)| !**answered)
        .map(|(core, _)| core.to_string())
        .collect();
    if silent.is_empty() {
        response(200, "text/plain", &[], b"ok\n")
    } else {
        let body = format!(
            "cores not answering within timeouts.healthz_deadline_ms: {}\n",
            silent.join(",")
        );
        response(503, "text/plain", &[], body.as_bytes())
    }
}

/// The parameters of `/cohortz`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CohortzQuery {
    limit: usize,
    offset: usize,
    /// With `key=<hex>`: the streams of that one cohort, paged the same way.
    key: Option<CohortKey>,
    /// `sort=key`: cohorts in key order, paged by a key cursor (`after=<hex>`, the `next` of
    /// the previous page), so that cohorts coming and going between pages never shift a page
    /// the way an offset does.
    by_key: bool,
    after: Option<String>,
}

impl CohortzQuery {
    /// Parses `limit=N&offset=M&sort=subscribers&key=HEX`; unknown parameters are ignored,
    /// bad values are errors naming the parameter.
    fn parse(query: &str) -> Result<CohortzQuery, String> {
        let mut parsed = CohortzQuery {
            limit: COHORTZ_LIMIT_DEFAULT,
            offset: 0,
            key: None,
            by_key: false,
            after: None,
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "limit" => {
                    let limit: usize = value.parse().map_err(|_| {
                        format!(
                            "limit={value}: expected a whole number (at most {COHORTZ_LIMIT_MAX})"
                        )
                    })?;
                    parsed.limit = limit.min(COHORTZ_LIMIT_MAX);
                }
                "offset" => {
                    parsed.offset = value
                        .parse()
                        .map_err(|_| format!("offset={value}: expected a whole number"))?;
                }
                "sort" => match value {
                    "subscribers" => parsed.by_key = false,
                    "key" => parsed.by_key = true,
                    _ => {
                        return Err(format!(
                            "sort={value}: expected subscribers or key (paged by after=)"
                        ));
                    }
                },
                "after" => {
                    let hex_key = value.trim_start_matches("0x").to_ascii_lowercase();
                    if hex::decode(&hex_key).is_err() {
                        return Err(format!(
                            "after={value}: expected a cohort key in hex (the next of a page)"
                        ));
                    }
                    parsed.after = Some(hex_key);
                }
                "key" => {
                    let bytes = hex::decode(value.trim_start_matches("0x")).map_err(|_| {
                        format!("key={value}: expected the cohort's canonical key in hex")
                    })?;
                    parsed.key = Some(CohortKey::from_bytes(bytes.into()));
                }
                _ => {}
            }
        }
        if parsed.after.is_some() && !parsed.by_key {
            return Err("after= pages the key order: add sort=key".to_owned());
        }
        if parsed.by_key && parsed.offset > 0 {
            return Err("sort=key pages by after=, not offset=".to_owned());
        }
        Ok(parsed)
    }
}

/// One `/cohortz` page: sorted by subscribers, descending, then by key for a stable order;
/// each summary with its `age_ms` and `idle_ms`.
fn cohorts_page(mut cohorts: Vec<CohortSummary>, query: &CohortzQuery) -> Value {
    if query.by_key {
        return cohorts_by_key(cohorts, query);
    }
    let total = cohorts.len();
    cohorts.sort_by(|first, second| {
        second
            .subscribers
            .cmp(&first.subscribers)
            .then_with(|| first.key.cmp(&second.key))
    });
    let page: Vec<Value> = cohorts
        .iter()
        .skip(query.offset)
        .take(query.limit)
        .map(summary_json)
        .collect();
    json!({
        "cohorts_total": total,
        "offset": query.offset,
        "limit": query.limit,
        "sort": "subscribers",
        "cohorts": page,
    })
}

/// One `/cohortz?sort=key` page: the `limit` cohorts after the cursor in key order, and the
/// cursor of the next page (`null` on the last).
fn cohorts_by_key(mut cohorts: Vec<CohortSummary>, query: &CohortzQuery) -> Value {
    let total = cohorts.len();
    cohorts.sort_by(|first, second| first.key.cmp(&second.key));
    let after = query.after.as_deref().unwrap_or("");
    let start = cohorts.partition_point(|cohort| cohort.key.as_str() <= after);
    let page = &cohorts[start..(start + query.limit).min(total)];
    let next = (start + page.len() < total)
        .then(|| page.last().map(|cohort| cohort.key.clone()))
        .flatten();
    json!({
        "cohorts_total": total,
        "limit": query.limit,
        "sort": "key",
        "after": query.after,
        "next": next,
        "cohorts": page.iter().map(summary_json).collect::<Vec<Value>>(),
    })
}

/// `/cohortz?key=`: one cohort's summary, roster and a page of its streams.
fn streams_page(page: &CohortStreams, query: &CohortzQuery) -> Value {
    json!({
        "cohort": summary_json(&page.summary),
        "roster": page.roster,
        "streams_total": page.streams_total,
        "offset": page.offset,
        "limit": query.limit,
        "streams": page.streams,
    })
}

fn summary_json(summary: &CohortSummary) -> Value {
    serde_json::to_value(summary).unwrap_or(Value::Null)
}

/// A complete HTTP/1.1 response with `Connection: close`.
fn response(status: u16, content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    };
    let mut head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(
            parse_request_line(b"GET /a?b=c HTTP/1.0\n\n"),
            Some(("GET", "/a?b=c"))
        );
        assert_eq!(parse_request_line(b"GET /metrics\r\n\r\n"), None);
        assert_eq!(parse_request_line(b"get /metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(parse_request_line(b"GET metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(parse_request_line(b"GET /metrics HTTP/2 x\r\n\r\n"), None);
    }

    #[test]
    fn head_end() {
        assert_eq!(find_head_end(b"a\r\n\r\nrest"), Some(5));
        assert_eq!(find_head_end(b"a\n\nrest"), Some(3));
        assert_eq!(find_head_end(b"a\r\nb"), None);
    }

    /// Gives one byte per read, then "would block".
    struct Trickle(Vec<u8>);

    impl Read for Trickle {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            buffer[0] = self.0.remove(0);
            Ok(1)
        }
    }

    #[test]
    fn a_head_read_in_pieces_completes_and_an_endless_one_is_refused() {
        let mut head = Vec::new();
        let mut input = Trickle(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody".to_vec());
        assert_eq!(read_head(&mut input, &mut head), HeadProgress::Complete(24));
        let mut head = Vec::new();
        let mut partial = Trickle(b"GET / HTTP/1.1\r\n".to_vec());
        assert_eq!(read_head(&mut partial, &mut head), HeadProgress::More);
        let mut head = Vec::new();
        let mut endless = Trickle(vec![b'a'; REQUEST_HEAD_BYTES_MAX + 10]);
        assert_eq!(read_head(&mut endless, &mut head), HeadProgress::TooLarge);
    }

    #[test]
    fn cohortz_query() {
        assert_eq!(
            CohortzQuery::parse(""),
            Ok(CohortzQuery {
                limit: 50,
                offset: 0,
                key: None,
                by_key: false,
                after: None,
            })
        );
        assert_eq!(
            CohortzQuery::parse("limit=5&offset=7&sort=subscribers&x=1&key=0x0a20"),
            Ok(CohortzQuery {
                limit: 5,
                offset: 7,
                key: Some(CohortKey::from_bytes(vec![0x0a, 0x20].into())),
                by_key: false,
                after: None,
            })
        );
        let by_key = CohortzQuery::parse("sort=key&after=0x0A20").expect("a key page");
        assert!(by_key.by_key);
        assert_eq!(by_key.after.as_deref(), Some("0a20"));
        assert!(CohortzQuery::parse("after=0a20").is_err());
        assert!(CohortzQuery::parse("sort=key&offset=3").is_err());
        assert!(CohortzQuery::parse("sort=key&after=zz").is_err());
        assert_eq!(
            CohortzQuery::parse("limit=5000").map(|query| query.limit),
            Ok(1000)
        );
        assert!(CohortzQuery::parse("limit=-1").is_err());
        assert!(CohortzQuery::parse("offset=x").is_err());
        assert!(CohortzQuery::parse("sort=name").is_err());
        assert!(CohortzQuery::parse("key=zz").is_err());
    }

    #[test]
    fn healthz_names_silent_cores() {
        let ok = String::from_utf8(healthz(&[true, true])).unwrap_or_default();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"));
        let bad = String::from_utf8(healthz(&[true, false, false])).unwrap_or_default();
        assert!(bad.starts_with("HTTP/1.1 503 "));
        assert!(bad.ends_with(": 1,2\n"));
        let none = String::from_utf8(healthz(&[])).unwrap_or_default();
        assert!(none.starts_with("HTTP/1.1 503 "));
    }

    /// A backend whose cores all answer and whose one cohort lists `peers` peers, so that
    /// `/pubsub/` is larger than any socket buffer.
    struct Answering {
        cohorts: Vec<CohortSummary>,
    }

    impl Answering {
        fn new(peers: usize) -> Answering {
            let summary = CohortSummary {
                key: "0a20".to_owned(),
                id: "00".repeat(8),
                core: 0,
                topic: "00".repeat(32),
                binding: "FEED_TOPIC".to_owned(),
                admin: None,
                authorship: "explicit",
                history: false,
                closed: false,
                created_ms: 0,
                last_activity_ms: 0,
                age_ms: 0,
                idle_ms: 0,
                roster_entries: 0,
                roster_cursor: 0,
                cursors: 0,
                dedup_entries: 0,
                history_frames: 0,
                history_bytes: 0,
                subscribers: peers,
                streams: std::collections::BTreeMap::new(),
                peers_total: peers,
                peers: vec!["255.255.255.255".to_owned(); peers],
                counters: std::collections::BTreeMap::new(),
            };
            Answering {
                cohorts: vec![summary],
            }
        }
    }

    impl AdminBackend for Answering {
        fn ping(&self, _deadline: Duration) -> Vec<bool> {
            vec![true]
        }

        fn cohorts(&self, _deadline: Duration) -> Option<Vec<CohortSummary>> {
            Some(self.cohorts.clone())
        }

        fn cohort_streams(
            &self,
            _key: &CohortKey,
            _offset: usize,
            _limit: usize,
            _deadline: Duration,
        ) -> Option<Option<CohortStreams>> {
            Some(None)
        }

        fn metrics(&self) -> MetricsSnapshot {
            use crate::metrics::{BrokerGauges, CohortFigures, OtherCohorts};
            let config = crate::config::BrokerConfig::default();
            MetricsSnapshot {
                driver: "epoll",
                cores: Vec::new(),
                protocol: Vec::new(),
                cohorts: CohortFigures {
                    shown: Vec::new(),
                    other: OtherCohorts::default(),
                },
                broker: BrokerGauges {
                    frame_memory_bytes: 0,
                    frame_memory_bytes_max: 0,
                    rss_bytes: 0,
                    budget: crate::budget::MemoryBudget::of(&config, 1, 1, 1 << 30),
                    heartbeats_ms: vec![0],
                    core_busy: vec![Some(Duration::from_millis(500))],
                    ready: true,
                    peers: bps_core::LedgerSnapshot::default(),
                    verify_pool: None,
                    p2p_host: None,
                },
            }
        }

        fn ready(&self) -> bool {
            true
        }
    }

    /// The deadlines of these tests: short, so that a test reaches them fast.
    const SHORT: Deadlines = Deadlines {
        head: Duration::from_millis(300),
        connection: Duration::from_millis(600),
    };

    /// Guard on any one wait of these tests.
    const GUARD: Duration = Duration::from_secs(2);

    /// How long past a deadline a test waits before it looks at what the server did: the
    /// server's check runs when its worker gets the CPU, a little after the deadline.
    const DEADLINE_MARGIN: Duration = Duration::from_millis(500);

    fn serve(peers: usize, deadlines: Deadlines) -> AdminServer {
        let listener = AdminListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind");
        let backend: Arc<dyn AdminBackend> = Arc::new(Answering::new(peers));
        listener
            .serve_with(backend, GUARD, deadlines)
            .expect("the admin server starts")
    }

    /// The status of a whole response read from `stream`.
    fn status_of(stream: &mut TcpStream) -> Option<u16> {
        let mut response = Vec::new();
        stream.read_to_end(&mut response).ok()?;
        let text = String::from_utf8_lossy(&response);
        text.split(' ').nth(1)?.parse().ok()
    }

    fn ask_healthz(addr: SocketAddr) -> Option<u16> {
        let mut stream = TcpStream::connect(addr).ok()?;
        stream.set_read_timeout(Some(GUARD)).ok()?;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            .ok()?;
        status_of(&mut stream)
    }

    #[test]
    fn a_trickling_client_gets_408_at_the_head_deadline_while_healthz_answers_others() {
        let server = serve(1, SHORT);
        let addr = server.local_addr();
        let mut trickler = TcpStream::connect(addr).expect("connect");
        let accepted = Instant::now();
        let writer = trickler.try_clone().expect("clone");
        // A byte every 20 ms: a deadline per read would never fire.
        let trickling = std::thread::spawn(move || {
            let mut writer = writer;
            let mut sent = 0;
            while writer.write_all(b"G").is_ok() && sent < 200 {
                sent += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        for _ in 0..5 {
            let asked = Instant::now();
            assert_eq!(ask_healthz(addr), Some(200));
            assert!(asked.elapsed() < GUARD);
        }
        trickler.set_read_timeout(Some(GUARD)).expect("timeout");
        assert_eq!(status_of(&mut trickler), Some(408));
        let dropped = accepted.elapsed();
        assert!(
            dropped >= SHORT.head && dropped < SHORT.head + GUARD,
            "dropped after {dropped:?}"
        );
        trickler
            .shutdown(std::net::Shutdown::Both)
            .expect("shutdown");
        trickling.join().expect("trickler");
    }

    #[test]
    fn a_client_that_never_reads_its_response_is_dropped_at_the_connection_deadline() {
        // About 5 MB of JSON: more than the largest send buffer the kernel gives a socket
        // (4 MiB, `net.ipv4.tcp_wmem`), with time to render it within the deadline.
        let deadlines = Deadlines {
            head: SHORT.head,
            connection: Duration::from_millis(1500),
        };
        let server = serve(300_000, deadlines);
        let addr = server.local_addr();
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        socket.set_recv_buffer_size(4096).expect("SO_RCVBUF");
        socket.connect(&addr.into()).expect("connect");
        let mut stuck: TcpStream = socket.into();
        let accepted = Instant::now();
        stuck
            .write_all(b"GET /pubsub/ HTTP/1.1\r\nHost: test\r\n\r\n")
            .expect("request");
        stuck.set_read_timeout(Some(GUARD)).expect("timeout");
        let mut first = [0_u8; 1];
        assert_eq!(stuck.peek(&mut first).ok(), Some(1), "the response started");
        assert!(
            accepted.elapsed() < deadlines.connection,
            "rendered too slowly for the test"
        );
        assert_eq!(
            ask_healthz(addr),
            Some(200),
            "answered while one client is stuck"
        );
        // Waits past the deadline, then reads what the server sent before it let go. Reading
        // at the deadline itself raced the server's check: a read that came first was
        // progress, and the whole response went out (seen once in CI).
        let past_deadline = deadlines.connection + DEADLINE_MARGIN;
        std::thread::sleep(past_deadline.saturating_sub(accepted.elapsed()));
        let mut received = Vec::new();
        let ended = stuck.read_to_end(&mut received);
        assert!(
            ended.is_ok()
                || ended
                    .as_ref()
                    .is_err_and(|error| error.kind() == io::ErrorKind::ConnectionReset),
            "{ended:?}"
        );
        let text = String::from_utf8_lossy(&received);
        let (head, body) = text.split_once("\r\n\r\n").expect("a response head");
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("Content-Length: "))
            .and_then(|length| length.parse().ok())
            .expect("Content-Length");
        assert!(
            body.len() < length,
            "the whole response went out ({length} bytes): nothing was left to the deadline"
        );
        assert!(accepted.elapsed() < deadlines.connection + GUARD);
        assert_eq!(ask_healthz(addr), Some(200));
    }
}
