//! Black-box: the static files of the WebSocket listener (`ws.static_dir`, docs/WEBSOCKET.md)
//! against the real binary, over plain sockets: `HEAD` with the true length and no body, a
//! strong `ETag` that `If-None-Match` turns into a bodiless 304, `nosniff` and the page's
//! `Content-Security-Policy`, symbolic links refused with a logged reason, and the bound on
//! answers in flight per core (503 with `Retry-After` beyond it, `/healthz` unaffected).

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use support::{Broker, Options, Raw, WAIT};

/// The demo page's stand-in.
const PAGE: &str =
    "<!doctype html><title>t</title><script type=\"module\" src=\"app.js\"></script>\n";
/// A script beside it.
const SCRIPT: &str = "console.log(\"static\");\n";
/// The broker's bound on static answers in flight per core (`STATIC_IN_FLIGHT_PER_CORE_MAX`).
const IN_FLIGHT_PER_CORE_MAX: usize = 32;
/// A file no client that reads nothing can take in one go (the broker's per-file maximum):
/// its answer stays in flight.
const LARGE_FILE_BYTES: usize = 4 << 20;
/// The receive buffer of a client that reads nothing: small, so the broker's write stalls.
const STALLED_RCVBUF_BYTES: usize = 4096;
/// How long the stalled answers may take to all be in flight: each costs the kernel a few
/// MiB of copying into the socket, which a starved broker on a loaded machine does slowly.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(120);
/// The Join deadline of the bound's test, which bounds a static answer: far beyond
/// `IN_FLIGHT_WAIT`, so no stalled answer ends before the test looks.
const LONG_JOIN_DEADLINE: &str = "server.join_deadline_ms=600000";
/// How often the in-flight gauge is scraped (a scrape costs the broker some work too).
const POLL: Duration = Duration::from_millis(100);
/// How long `/healthz` may take while the bound is reached.
const HEALTHZ_WAIT: Duration = Duration::from_secs(1);

/// A temporary `ws.static_dir`: `index.html`, `app.js`, `large.bin`, and two symbolic links
/// (`linked.js` to `app.js`, `secret.txt` to a file outside the tree). Removed on drop.
struct StaticDir {
    root: PathBuf,
}

impl StaticDir {
    fn new(name: &str) -> StaticDir {
        let root = std::env::temp_dir().join(format!("bps-statics-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let served = root.join("served");
        std::fs::create_dir_all(&served).expect("create the static dir");
        std::fs::write(served.join("index.html"), PAGE).expect("write index.html");
        std::fs::write(served.join("app.js"), SCRIPT).expect("write app.js");
        std::fs::write(served.join("large.bin"), vec![7u8; LARGE_FILE_BYTES]).expect("large");
        std::fs::write(root.join("secret.txt"), "outside the tree\n").expect("write secret");
        std::os::unix::fs::symlink(served.join("app.js"), served.join("linked.js"))
            .expect("link to app.js");
        std::os::unix::fs::symlink(root.join("secret.txt"), served.join("secret.txt"))
            .expect("link out of the tree");
        StaticDir { root }
    }

    fn served(&self) -> PathBuf {
        self.root.join("served")
    }

    fn setting(&self) -> String {
        format!("ws.static_dir={}", self.served().display())
    }
}

impl Drop for StaticDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn start(dir: &StaticDir) -> Broker {
    let setting = dir.setting();
    Broker::start(&[&setting])
}

/// One answer: status, head lines (lower-case names) and body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Sends `method path` with `headers` to `addr` and reads the whole answer (every answer of
/// the listener closes its connection).
fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = TcpStream::connect(addr).expect("connect to the WebSocket port");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).expect("send the request");
    let mut bytes = Vec::new();
    stream.read_to_end(&mut bytes).expect("read the answer");
    parse(&bytes)
}

fn parse(bytes: &[u8]) -> Answer {
    let end = bytes
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head in {:?}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: bytes[end + 4..].to_vec(),
    }
}

#[test]
fn head_answers_the_true_length_and_no_body() {
    let dir = StaticDir::new("head");
    let broker = start(&dir);
    let get = request(broker.ws(), "GET", "/app.js", &[]);
    assert_eq!(get.status, 200);
    assert_eq!(get.body, SCRIPT.as_bytes());
    let length = SCRIPT.len().to_string();
    assert_eq!(get.header("content-length"), Some(length.as_str()));
    let head = request(broker.ws(), "HEAD", "/app.js", &[]);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(length.as_str()),
        "HEAD names the length a GET gets"
    );
    assert_eq!(head.header("etag"), get.header("etag"));
    assert!(head.body.is_empty(), "HEAD sent a body: {:?}", head.body);
    let large = request(broker.ws(), "HEAD", "/large.bin", &[]);
    assert_eq!(
        large.header("content-length"),
        Some(LARGE_FILE_BYTES.to_string().as_str())
    );
    assert!(large.body.is_empty());
}

#[test]
fn a_strong_etag_is_stable_and_if_none_match_answers_304_without_a_body() {
    let dir = StaticDir::new("etag");
    let broker = start(&dir);
    let first = request(broker.ws(), "GET", "/", &[]);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, PAGE.as_bytes());
    let etag = first.header("etag").expect("an ETag").to_owned();
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "a strong, quoted tag: {etag}"
    );
    let again = request(broker.ws(), "GET", "/index.html", &[]);
    assert_eq!(
        again.header("etag"),
        Some(etag.as_str()),
        "the same file, the same tag"
    );
    let script = request(broker.ws(), "GET", "/app.js", &[]);
    assert_ne!(
        script.header("etag"),
        Some(etag.as_str()),
        "another file, another tag"
    );

    let unchanged = request(broker.ws(), "GET", "/", &[("If-None-Match", &etag)]);
    assert_eq!(unchanged.status, 304);
    assert!(unchanged.body.is_empty(), "304 sent a body");
    assert_eq!(unchanged.header("etag"), Some(etag.as_str()));
    let listed = format!("\"something-else\", W/{etag}");
    let among = request(broker.ws(), "GET", "/", &[("If-None-Match", &listed)]);
    assert_eq!(among.status, 304, "a list naming the tag (weakly) matches");
    let head = request(broker.ws(), "HEAD", "/", &[("If-None-Match", &etag)]);
    assert_eq!(head.status, 304);
    assert!(head.body.is_empty());
    let other = request(broker.ws(), "GET", "/", &[("If-None-Match", "\"stale\"")]);
    assert_eq!(other.status, 200);
    assert_eq!(other.body, PAGE.as_bytes());

    // Computed from the bytes: a restart serving the same files names the same tag.
    drop(broker);
    let restarted = start(&dir);
    let after = request(restarted.ws(), "GET", "/", &[]);
    assert_eq!(after.header("etag"), Some(etag.as_str()));
    let counted = restarted.metrics();
    assert_eq!(
        support::metric_of(&counted, "bps_ws_http_answers_total{status=\"200\"}"),
        1
    );
}

#[test]
fn every_static_answer_says_nosniff_and_the_page_carries_a_restrictive_policy() {
    let dir = StaticDir::new("headers");
    let broker = start(&dir);
    let page = request(broker.ws(), "GET", "/", &[]);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let policy = page
        .header("content-security-policy")
        .expect("the page has a Content-Security-Policy");
    for directive in [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self' ws: wss:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(
            policy.split(';').any(|part| part.trim() == directive),
            "{directive:?} missing from {policy:?}"
        );
    }
    assert!(!policy.contains("unsafe"), "{policy}");
    let script = request(broker.ws(), "GET", "/app.js", &[]);
    assert_eq!(script.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(script.header("content-security-policy"), None);
    let etag = page.header("etag").expect("an ETag");
    let unchanged = request(broker.ws(), "GET", "/", &[("If-None-Match", etag)]);
    assert_eq!(unchanged.header("x-content-type-options"), Some("nosniff"));
}

#[test]
fn a_symbolic_link_is_not_served_and_the_log_says_why() {
    let dir = StaticDir::new("links");
    let broker = start(&dir);
    assert_eq!(request(broker.ws(), "GET", "/app.js", &[]).status, 200);
    for link in ["/linked.js", "/secret.txt"] {
        let answer = request(broker.ws(), "GET", link, &[]);
        assert_eq!(answer.status, 404, "{link} was served");
    }
    let log = broker.log();
    for link in ["linked.js", "secret.txt"] {
        assert!(
            log.lines()
                .any(|line| line.contains("symbolic link is not served") && line.contains(link)),
            "no logged reason for {link}:\n{log}"
        );
    }
}

/// `GET /healthz` on the admin port within [`HEALTHZ_WAIT`], in one of three tries (one slow
/// scheduling slice on a loaded machine is not what this watches for).
fn healthz_answers_promptly(broker: &Broker) -> bool {
    (0..3).any(|_| {
        let started = Instant::now();
        let Ok(mut stream) = TcpStream::connect_timeout(&broker.admin(), HEALTHZ_WAIT) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(HEALTHZ_WAIT));
        if stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        answer.starts_with(b"HTTP/1.1 200") && started.elapsed() < HEALTHZ_WAIT
    })
}

/// Polls until `bps_ws_static_in_flight` is `expected`, for at most [`IN_FLIGHT_WAIT`].
fn wait_in_flight(broker: &Broker, expected: u64) {
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    loop {
        let in_flight = broker.metric("bps_ws_static_in_flight");
        if in_flight == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{in_flight} static answers in flight, never {expected} within {IN_FLIGHT_WAIT:?}\n{}",
            broker.log()
        );
        std::thread::sleep(POLL);
    }
}

#[test]
fn at_the_in_flight_bound_the_next_request_gets_503_and_the_broker_stays_responsive() {
    let dir = StaticDir::new("bound");
    let setting = dir.setting();
    let broker = Broker::start_options(&Options {
        sets: &[
            &setting,
            // Every client comes from 127.0.0.1 and none sends a Join.
            "limits.prejoin_connections_per_peer_max=64",
            // Answers stay in flight as long as the test needs them.
            LONG_JOIN_DEADLINE,
        ],
        // The bound is per core.
        one_core: true,
        ..Options::default()
    });
    let mut stalled: Vec<Raw> = (0..IN_FLIGHT_PER_CORE_MAX)
        .map(|_| {
            let mut raw = Raw::connect(broker.ws(), None, Some(STALLED_RCVBUF_BYTES));
            raw.send(b"GET /large.bin HTTP/1.1\r\nHost: test\r\n\r\n")
                .expect("send the request");
            raw
        })
        .collect();
    wait_in_flight(&broker, IN_FLIGHT_PER_CORE_MAX as u64);

    // Refused at once, not queued for a slot: no slot frees while the stalled clients stay,
    // so a queued request would see no answer within `request`'s read timeout.
    let refused = request(broker.ws(), "GET", "/app.js", &[]);
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(refused.header("retry-after"), Some("2"));
    assert!(
        healthz_answers_promptly(&broker),
        "/healthz did not answer within {HEALTHZ_WAIT:?} in three tries"
    );
    let metrics = broker.metrics();
    assert_eq!(support::metric_of(&metrics, "bps_ws_static_busy_total"), 1);
    assert_eq!(
        support::metric_of(&metrics, "bps_ws_static_in_flight"),
        IN_FLIGHT_PER_CORE_MAX as u64
    );

    // The stalled clients leave: their slots come back.
    for raw in stalled.drain(..) {
        drop(raw.into_stream());
    }
    wait_in_flight(&broker, 0);
    let served = request(broker.ws(), "GET", "/app.js", &[]);
    assert_eq!(served.status, 200);
    assert_eq!(served.body, SCRIPT.as_bytes());
}
