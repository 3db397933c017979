//! The admin HTTP endpoints: `/metrics`, `/healthz`, `/readyz` and `/cohortz`.
//!
//! Owns: the `AdminBackend` trait (what the I/O layer exposes to operators), the paging and
//! sorting of `/cohortz`, and a small, bounded HTTP/1.1 server on plain std
//! threads: one acceptor and `ADMIN_WORKERS` workers fed by a bounded channel, one request per
//! connection (`Connection: close`), the request head capped at `REQUEST_HEAD_BYTES_MAX`, a
//! read timeout of `REQUEST_TIMEOUT`. A scraper or a curl can never slow a core: the workers
//! only call the backend, which asks the cores through their inboxes with a deadline.
//! Never does: touch protocol state directly, keep connections alive, read request bodies, or
//! grow without bound (a full worker queue answers 503 at once).
//!
//! Responses: unknown path 404; a known path with a method other than GET 405 (with
//! `Allow: GET`); a malformed request 400; an oversize request head 431; a request head not
//! complete within the timeout 408.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam::channel::{self, Receiver, Sender, TrySendError};
use serde_json::{Value, json};

pub use crate::metrics::MetricsSnapshot;

/// Worker threads answering requests: enough for a scraper and an operator at once.
pub const ADMIN_WORKERS: usize = 2;

/// Accepted connections waiting for a worker; beyond it a connection gets 503 at once.
pub const ADMIN_PENDING_MAX: usize = 16;

/// Largest request line plus headers; admin requests are a line and a few headers.
pub const REQUEST_HEAD_BYTES_MAX: usize = 8 * 1024;

/// Time a client has to send its request head, and to take the response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// `/cohortz` page size when `limit` is not given.
pub const COHORTZ_LIMIT_DEFAULT: usize = 50;

/// Largest `/cohortz` page: a larger `limit` is clamped to it.
pub const COHORTZ_LIMIT_MAX: usize = 1000;

/// Content type of the Prometheus text exposition format.
const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the admin endpoints need from the running broker. Implemented by the I/O layer; every
/// method may block its (admin) thread but never a core.
pub trait AdminBackend: Send + Sync {
    /// Asks every core to answer within `deadline`; one entry per core, in core order, true
    /// when that core answered.
    fn ping(&self, deadline: Duration) -> Vec<bool>;

    /// Every live cohort as a JSON object (the protocol core's `CohortSnapshot`: `key`, the
    /// spec, `streams` by role, `counters`), gathered from the home cores within `deadline`;
    /// `None` when some core did not answer in time. `/cohortz` adds a `subscribers` count to
    /// each (see `subscriber_count`), sorts by it descending, then by `key`, and pages.
    fn cohorts(&self, deadline: Duration) -> Option<Vec<Value>>;

    /// The figures of one scrape.
    fn metrics(&self) -> MetricsSnapshot;

    /// True while the broker is listening and not draining.
    fn ready(&self) -> bool;
}

/// The sort key of `/cohortz`: the cohort's subscriber count, that is its fan-out set
/// (spectators plus publisher streams, R25). Taken from a `subscribers` number when the cohort
/// has one, else counted from `streams.spectator` and `streams.publisher` (each a number or a
/// list of streams, as the protocol core's `CohortSnapshot` gives them).
fn subscriber_count(cohort: &Value) -> u64 {
    if let Some(count) = cohort.get("subscribers").and_then(Value::as_u64) {
        return count;
    }
    let role = |name: &str| match cohort.get("streams").and_then(|streams| streams.get(name)) {
        Some(Value::Array(streams)) => u64::try_from(streams.len()).unwrap_or(u64::MAX),
        Some(count) => count.as_u64().unwrap_or(0),
        None => 0,
    };
    role("spectator").saturating_add(role("publisher"))
}

/// State the admin endpoints share with the daemon: draining and the reloadable deadline.
#[derive(Debug)]
struct AdminState {
    draining: AtomicBool,
    healthz_deadline_ms: AtomicU64,
    stopping: AtomicBool,
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

    /// Starts the acceptor and the workers.
    ///
    /// # Errors
    /// When a thread cannot be spawned.
    pub fn serve(
        self,
        backend: Arc<dyn AdminBackend>,
        healthz_deadline: Duration,
    ) -> io::Result<AdminServer> {
        let local_addr = self.listener.local_addr()?;
        let state = Arc::new(AdminState {
            draining: AtomicBool::new(false),
            healthz_deadline_ms: AtomicU64::new(duration_ms(healthz_deadline)),
            stopping: AtomicBool::new(false),
        });
        let (sender, receiver) = channel::bounded::<TcpStream>(ADMIN_PENDING_MAX);
        let mut threads = Vec::with_capacity(ADMIN_WORKERS + 1);
        for worker in 0..ADMIN_WORKERS {
            let receiver = receiver.clone();
            let backend = Arc::clone(&backend);
            let state = Arc::clone(&state);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("bps-admin-{worker}"))
                    .spawn(move || work(&receiver, backend.as_ref(), &state))?,
            );
        }
        let acceptor_state = Arc::clone(&state);
        let listener = self.listener;
        threads.push(
            std::thread::Builder::new()
                .name("bps-admin-accept".to_owned())
                .spawn(move || accept(&listener, &sender, &acceptor_state))?,
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

    /// Stops accepting, lets the workers finish their requests, and joins every thread.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.state.stopping.store(true, Ordering::Relaxed);
        // Wake the acceptor out of its blocking accept with a connection of our own.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, REQUEST_TIMEOUT);
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

/// The acceptor: hands connections to the workers, answers 503 when they are all busy. Ends
/// (dropping the sender, which ends the workers) once stopping.
fn accept(listener: &TcpListener, workers: &Sender<TcpStream>, state: &AdminState) {
    for connection in listener.incoming() {
        if state.stopping.load(Ordering::Relaxed) {
            break;
        }
        let Ok(stream) = connection else {
            // A connection that failed before accept completed (reset, fd limit): nothing to
            // answer. Back off briefly so an fd shortage does not spin this thread.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        match workers.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(mut stream)) => {
                // Never block the acceptor on a client: a bounded write, then close.
                let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
                let _ = stream.write_all(&response(503, "text/plain", &[], b"busy\n"));
                let _ = stream.shutdown(Shutdown::Both);
            }
            Err(TrySendError::Disconnected(_)) => break,
        }
    }
}

/// A worker: answers one connection at a time until the acceptor goes away.
fn work(connections: &Receiver<TcpStream>, backend: &dyn AdminBackend, state: &AdminState) {
    while let Ok(stream) = connections.recv() {
        handle(stream, backend, state);
    }
}

/// Reads one request, answers it, and closes the connection.
fn handle(mut stream: TcpStream, backend: &dyn AdminBackend, state: &AdminState) {
    let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let reply = match read_head(&mut stream) {
        Ok(head) => route(&head, backend, state),
        Err(HeadError::TooLarge) => {
            response(431, "text/plain", &[], b"request header fields too large\n")
        }
        Err(HeadError::Timeout) => response(408, "text/plain", &[], b"request timeout\n"),
        Err(HeadError::Closed) => return,
    };
    let _ = stream.write_all(&reply);
    let _ = stream.flush();
    linger(&mut stream);
}

/// Bytes of an unread request (an oversize head, a body) discarded before closing.
const LINGER_BYTES_MAX: usize = 64 * 1024;

/// Time spent discarding unread request bytes before closing.
const LINGER_TIMEOUT: Duration = Duration::from_millis(100);

/// Closes gracefully: closing a socket with unread input sends a reset, which can destroy the
/// response before the client reads it. Send FIN, then discard a bounded amount of input.
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(LINGER_TIMEOUT));
    let mut discarded = 0;
    let mut sink = [0_u8; 4096];
    while discarded < LINGER_BYTES_MAX {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(read) => discarded += read,
        }
    }
}

/// Why no request head was read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    /// More than `REQUEST_HEAD_BYTES_MAX` bytes without the end of the head.
    TooLarge,
    /// The client was too slow.
    Timeout,
    /// The client closed or the socket failed; nothing to answer.
    Closed,
}

/// Reads up to the blank line ending the request head.
fn read_head(stream: &mut impl Read) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0_u8; 1024];
    loop {
        let read = match stream.read(&mut chunk) {
            Ok(0) => return Err(HeadError::Closed),
            Ok(read) => read,
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Timeout);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(HeadError::Closed),
        };
        let searched_from = head.len().saturating_sub(3);
        head.extend_from_slice(&chunk[..read]);
        if let Some(end) = find_head_end(&head[searched_from..]) {
            head.truncate(searched_from + end);
            if head.len() > REQUEST_HEAD_BYTES_MAX {
                return Err(HeadError::TooLarge);
            }
            return Ok(head);
        }
        if head.len() > REQUEST_HEAD_BYTES_MAX {
            return Err(HeadError::TooLarge);
        }
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
    if !matches!(path, "/metrics" | "/healthz" | "/readyz" | "/cohortz") {
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
        "/metrics" => response(
            200,
            METRICS_CONTENT_TYPE,
            &[],
            backend.metrics().render().as_bytes(),
        ),
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
        _ => match CohortzQuery::parse(query) {
            Ok(query) => match backend.cohorts(deadline) {
                Some(cohorts) => {
                    let body = cohortz(cohorts, &query).to_string();
                    response(200, "application/json", &[], body.as_bytes())
                }
                None => response(
                    503,
                    "text/plain",
                    &[],
                    b"some core did not answer within timeouts.healthz_deadline_ms\n",
                ),
            },
            Err(message) => response(400, "text/plain", &[], format!("{message}\n").as_bytes()),
        },
    }
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CohortzQuery {
    limit: usize,
    offset: usize,
}

impl CohortzQuery {
    /// Parses `limit=N&offset=M&sort=subscribers`; unknown parameters are ignored, bad values
    /// are errors naming the parameter.
    fn parse(query: &str) -> Result<CohortzQuery, String> {
        let mut parsed = CohortzQuery {
            limit: COHORTZ_LIMIT_DEFAULT,
            offset: 0,
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
                "sort" if value != "subscribers" => {
                    return Err(format!(
                        "sort={value}: expected subscribers (the only order offered)"
                    ));
                }
                _ => {}
            }
        }
        Ok(parsed)
    }
}

/// One `/cohortz` page: sorted by subscribers, descending, then by key for a stable order.
fn cohortz(mut cohorts: Vec<Value>, query: &CohortzQuery) -> Value {
    let total = cohorts.len();
    for cohort in &mut cohorts {
        let count = subscriber_count(cohort);
        if let Value::Object(fields) = cohort {
            fields.insert("subscribers".to_owned(), Value::from(count));
        }
    }
    cohorts.sort_by(|first, second| {
        subscriber_count(second)
            .cmp(&subscriber_count(first))
            .then_with(|| {
                let key =
                    |cohort: &Value| cohort.get("key").and_then(Value::as_str).map(str::to_owned);
                key(first).cmp(&key(second))
            })
    });
    let page: Vec<Value> = cohorts
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .collect();
    json!({
        "cohorts_total": total,
        "offset": query.offset,
        "limit": query.limit,
        "sort": "subscribers",
        "cohorts": page,
    })
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

    #[test]
    fn head_split_across_reads() {
        struct Trickle(Vec<u8>);
        impl Read for Trickle {
            fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
                if self.0.is_empty() {
                    return Ok(0);
                }
                buffer[0] = self.0.remove(0);
                Ok(1)
            }
        }
        let mut input = Trickle(b"GET / HTTP/1.1\r\nA: b\r\n\r\nbody".to_vec());
        assert_eq!(
            read_head(&mut input),
            Ok(b"GET / HTTP/1.1\r\nA: b\r\n\r\n".to_vec())
        );
        let mut endless = Trickle(vec![b'a'; REQUEST_HEAD_BYTES_MAX + 10]);
        assert_eq!(read_head(&mut endless), Err(HeadError::TooLarge));
        let mut cut = Trickle(b"GET / HTTP/1.1\r\n".to_vec());
        assert_eq!(read_head(&mut cut), Err(HeadError::Closed));
    }

    #[test]
    fn cohortz_query() {
        assert_eq!(
            CohortzQuery::parse(""),
            Ok(CohortzQuery {
                limit: 50,
                offset: 0
            })
        );
        assert_eq!(
            CohortzQuery::parse("limit=5&offset=7&sort=subscribers&x=1"),
            Ok(CohortzQuery {
                limit: 5,
                offset: 7
            })
        );
        assert_eq!(
            CohortzQuery::parse("limit=5000"),
            Ok(CohortzQuery {
                limit: 1000,
                offset: 0
            })
        );
        assert!(CohortzQuery::parse("limit=-1").is_err());
        assert!(CohortzQuery::parse("offset=x").is_err());
        assert!(CohortzQuery::parse("sort=name").is_err());
    }

    #[test]
    fn subscriber_count_fallbacks() {
        assert_eq!(subscriber_count(&json!({"subscribers": 3})), 3);
        assert_eq!(
            subscriber_count(&json!({"streams": {"spectator": 2, "publisher": 1}})),
            3
        );
        assert_eq!(
            subscriber_count(&json!({"streams": {
                "spectator": [{"id": 1}, {"id": 2}],
                "publisher": [{"id": 3}],
                "pending": [{"id": 4}],
                "silent": [{"id": 5}],
            }})),
            3
        );
        assert_eq!(subscriber_count(&json!({})), 0);
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
}
