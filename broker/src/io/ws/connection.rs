//! One connection to the WebSocket listener, up to the point where it is a session or has
//! had its HTTP answer.
//!
//! Owns: admission at accept (answered with an HTTP status when refused, W10, within
//! `REFUSALS_IN_FLIGHT_PER_CORE_MAX` answers per core, each counted against
//! `limits.connections_max` and its peer's pre-Join cap while it holds its descriptor, else
//! closed at once like TCP's), the request head (bounded in bytes and headers, within
//! `HEAD_READ_DEADLINE`: a connection is no pre-Join stream until it upgrades, and one routed
//! to a plain HTTP answer gives its pre-Join slot back), the peer a trusted reverse
//! proxy names (`Forwarded`, `X-Forwarded-For`; the walk is `bps_ws::forwarded`), the
//! `Origin` check, the routing of the request (the native endpoint, the bridge, the W5
//! service POST and its preflight, the static files), the answers that refuse before the
//! upgrade, and the writing of a static file's answer (its shared head and body in one
//! vectored write, `STATIC_IN_FLIGHT_PER_CORE_MAX` of them per core, 503 beyond); every
//! answer's write deadline is its size at `ANSWER_MIN_RATE_BYTES_PER_S`.
//! Never does: frame WebSocket messages (`session`) or judge a chunk (the machine).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bps_ws::{
    BridgeParams, FORWARDED, Lookup, RequestHead, Response, X_FORWARDED_FOR, check_upgrade,
    forwarded_peer, origin_allowed, parse_request_head, parse_topic, switching_protocols,
};
use bytes::{Bytes, BytesMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};

use super::bridge_session::BridgeSession;
use super::rendition;
use super::service;
use super::session::{self, Endpoint};
use super::statics::{STATIC_IN_FLIGHT_PER_CORE_MAX, STATIC_RETRY_AFTER_S, StaticAnswer};
use crate::io::carrier;
use crate::io::encoding::Framing;
use crate::io::iovec::IoBatch;
use crate::io::link::{Admit, CoreLink, Refusal};
use crate::io::outgoing::Outgoing;
use crate::io::port::{Port, Transport};
use crate::limits::REFUSALS_IN_FLIGHT_PER_CORE_MAX;
use crate::limits::WS_HEAD_BYTES_MAX as HEAD_BYTES_MAX;
use crate::protocol::PeerId;

/// A request head's first read: a browser's WebSocket upgrade is about 500 bytes.
const HEAD_FIRST_READ_BYTES: usize = 1024;

/// Header lines of a request head at most.
pub const HEADERS_MAX: usize = 64;
/// The path of the native endpoint (one BPS frame per binary message).
pub const NATIVE_PATH: &str = "/bps/v1";
/// The prefix of the bridge's paths (W1, W5, W8).
pub const BRIDGE_PREFIX: &str = "/pubsub/";
/// How long a request head may take to arrive: a browser sends its request as soon as it
/// has connected, so a connection without one by then is an idle speculative socket or a
/// trickler. It is closed without a blocklist strike (honest browsers open such sockets).
const HEAD_READ_DEADLINE: Duration = Duration::from_secs(5);
/// The slowest rate an HTTP answer (a static file, a refusal, the `101`) is written at: a
/// poor mobile link still reads this fast, and a reader slower than this only holds a
/// connection. An answer's write deadline is its size at this rate plus `ANSWER_WRITE_BASE`.
const ANSWER_MIN_RATE_BYTES_PER_S: u64 = 16 * 1024;
/// What an answer's write may take besides its bytes at the minimum rate: a few round trips
/// of a slow link before the first bytes are acknowledged.
const ANSWER_WRITE_BASE: Duration = Duration::from_secs(1);
/// How long a refused connection is read after its answer, so that the request bytes it
/// sent do not turn the close into a reset that loses the answer; short, since a refused
/// peer is owed nothing more.
const REFUSAL_LINGER: Duration = Duration::from_millis(250);

/// Accepts until a drain shuts the listener.
pub async fn accept_loop(link: Rc<CoreLink>, listener: TcpListener) {
    link.register_listener(std::os::fd::AsRawFd::as_raw_fd(&listener));
    while let Some((stream, addr)) =
        carrier::accept_next(&link, &listener, "WebSocket accept failed").await
    {
        if link.draining() {
            let proxied = link.settings().ws.trusted_proxies.contains(addr.ip());
            refuse(&link, stream, (addr, proxied), Refusal::Draining);
            return;
        }
        start(&link, stream, addr);
    }
}

/// Admits one accepted connection and serves it; a refused one gets its status and goes.
fn start(link: &Rc<CoreLink>, stream: TcpStream, addr: SocketAddr) {
    let proxied = link.settings().ws.trusted_proxies.contains(addr.ip());
    let admitted = if proxied {
        link.admit_proxied(addr.ip(), Transport::WebSocket)
    } else {
        link.admit(addr.ip(), Transport::WebSocket)
    };
    match admitted {
        Ok(port) => {
            carrier::configure(&stream, link.settings());
            monoio::spawn(serve(Rc::clone(link), port, stream, proxied));
        }
        Err(refusal) => refuse(link, stream, (addr, proxied), refusal),
    }
}

/// A connection refused at accept: answered with its status while a `RefusalSlot` is free
/// (W10), else closed at once, counted.
fn refuse(
    link: &Rc<CoreLink>,
    stream: TcpStream,
    (addr, proxied): (SocketAddr, bool),
    refusal: Refusal,
) {
    // A proxy's connection names its peer only in its request, which a refusal never reads.
    let peer = (!proxied).then(|| PeerId::of(addr.ip()));
    match RefusalSlot::take(link, peer) {
        Some(slot) => {
            monoio::spawn(answer_refusal(stream, refusal, slot));
        }
        None => link.metrics().ws.refusals_closed.inc(),
    }
}

/// One refusal answer in flight: until it is dropped it counts against
/// `REFUSALS_IN_FLIGHT_PER_CORE_MAX`, `limits.connections_max` and (for a direct peer) the
/// peer's pre-Join cap, since it holds a descriptor like an admitted connection.
struct RefusalSlot {
    link: Rc<CoreLink>,
    peer: Option<PeerId>,
}

impl RefusalSlot {
    fn take(link: &Rc<CoreLink>, peer: Option<PeerId>) -> Option<RefusalSlot> {
        let metrics = link.metrics();
        if metrics.ws.refusals_in_flight.get() >= REFUSALS_IN_FLIGHT_PER_CORE_MAX {
            return None;
        }
        let shared = &link.shared;
        if shared.connections.fetch_add(1, Ordering::Relaxed) >= link.settings().connections_max {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        if let Some(peer) = peer
            && !shared.ledger.try_enter_prejoin(peer)
        {
            shared.connections.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        metrics.ws.refusals_in_flight.inc();
        Some(RefusalSlot {
            link: Rc::clone(link),
            peer,
        })
    }
}

impl Drop for RefusalSlot {
    fn drop(&mut self) {
        let shared = &self.link.shared;
        if let Some(peer) = self.peer {
            shared.ledger.leave_prejoin(peer);
        }
        shared.connections.fetch_sub(1, Ordering::Relaxed);
        self.link.metrics().ws.refusals_in_flight.dec();
    }
}

/// Writes a refusal's status and closes, lingering `REFUSAL_LINGER` at most.
async fn answer_refusal(mut stream: TcpStream, refusal: Refusal, slot: RefusalSlot) {
    let response = refusal_response(refusal);
    slot.link.metrics().ws_http_answer(response.status);
    let bytes = response.to_bytes();
    let deadline = write_deadline(bytes.len());
    let written = monoio::time::timeout(deadline, stream.write_all(bytes)).await;
    if matches!(written, Ok((Ok(_), _))) {
        let _ = stream.shutdown().await;
        let _ = monoio::time::timeout(REFUSAL_LINGER, session::linger(&mut stream)).await;
    }
    drop(slot);
}

/// How long an answer of `bytes` may take to write: `ANSWER_WRITE_BASE`, plus its size at
/// `ANSWER_MIN_RATE_BYTES_PER_S`.
fn write_deadline(bytes: usize) -> Duration {
    let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
    ANSWER_WRITE_BASE
        + Duration::from_millis(bytes.saturating_mul(1000) / ANSWER_MIN_RATE_BYTES_PER_S)
}

/// The status of a refusal at accept (W10).
fn refusal_response(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Blocklisted => Response::error(403, "the peer is blocklisted (R39)"),
        Refusal::PrejoinMax => {
            Response::error(429, "too many connections of this peer have not joined yet")
        }
        Refusal::Draining => Response::error(503, "the broker is draining"),
        Refusal::ConnectionsMax => Response::error(503, "the broker is at its connection bound"),
    }
}

/// Writes an HTTP answer and closes: the write side first, then what the client still
/// sends is read briefly, so the answer is not lost to a reset.
pub async fn answer(link: &CoreLink, stream: &mut TcpStream, response: Response) {
    link.metrics().ws_http_answer(response.status);
    let bytes = response.to_bytes();
    let deadline = write_deadline(bytes.len());
    let written = monoio::time::timeout(deadline, stream.write_all(bytes)).await;
    if matches!(written, Ok((Ok(_), _))) {
        let _ = stream.shutdown().await;
        session::linger(stream).await;
    }
}

/// Reads the request head and routes the request; the port ends here unless it became a
/// session. Until it upgrades, the connection is no pre-Join stream: its head has
/// `HEAD_READ_DEADLINE`, missing it is no blocklist strike, and a request routed to a plain
/// HTTP answer gives its pre-Join slot back before the answer is written.
async fn serve(link: Rc<CoreLink>, port: Rc<Port>, mut stream: TcpStream, proxied: bool) {
    let head = monoio::time::timeout(HEAD_READ_DEADLINE, read_head(&mut stream)).await;
    let (head, leftover) = match head {
        Ok(Ok(Some(parsed))) => parsed,
        Ok(Ok(None)) => return end(&link, &port),
        Ok(Err(response)) => {
            link.routed(&port);
            answer(&link, &mut stream, response).await;
            return end(&link, &port);
        }
        Err(_) => {
            link.metrics().ws.head_timeouts.inc();
            return end(&link, &port);
        }
    };
    if link.draining() {
        link.routed(&port);
        answer(&link, &mut stream, refusal_response(Refusal::Draining)).await;
        return end(&link, &port);
    }
    if proxied && let Err(response) = name_peer(&link, &port, &head) {
        answer(&link, &mut stream, response).await;
        return end(&link, &port);
    }
    match route(&link, &head) {
        Route::Answer(response) => {
            link.routed(&port);
            answer(&link, &mut stream, response).await;
            end(&link, &port);
        }
        Route::Static { status, head, body } => {
            link.routed(&port);
            answer_static(&link, &mut stream, (status, head, body)).await;
            end(&link, &port);
        }
        Route::Service(topic) => {
            link.routed(&port);
            let response =
                service::handle(&link, (&head, &topic), port.peer(), leftover, &mut stream).await;
            answer(&link, &mut stream, response).await;
            end(&link, &port);
        }
        Route::Upgrade { accept, endpoint } => {
            link.await_join(&port);
            upgrade(link, port, stream, (accept, leftover), endpoint).await;
        }
    }
}

/// The port of a connection that never became a session.
fn end(link: &CoreLink, port: &Port) {
    port.clear_on_close();
    link.ended(port, crate::protocol::ClosedBy::Peer);
}

/// What a request asks for.
pub(super) enum Route {
    Answer(Response),
    /// A static file's answer: status, head and body, shared with every other request.
    Static {
        status: u16,
        head: Bytes,
        body: Bytes,
    },
    Service(String),
    Upgrade {
        accept: String,
        endpoint: Endpoint,
    },
}

fn route(link: &CoreLink, head: &RequestHead) -> Route {
    let settings = &link.settings().ws;
    if !origin_allowed(head.header("origin"), &settings.allowed_origins) {
        return Route::Answer(Response::error(
            403,
            "origin not allowed (ws.allowed_origins)",
        ));
    }
    let path = head.path.as_str();
    if path == NATIVE_PATH {
        return match check_upgrade(head) {
            Ok(accept) => Route::Upgrade {
                accept,
                endpoint: Endpoint::Native,
            },
            Err(error) => Route::Answer(error.to_response()),
        };
    }
    let Some(rest) = path.strip_prefix(BRIDGE_PREFIX) else {
        return static_file(settings, head);
    };
    if rest.is_empty() {
        return Route::Answer(Response::error(
            404,
            "GET /pubsub/ (the topic list, W8) is served on the admin port",
        ));
    }
    // One path segment is the topic, on the GET and the POST alike: a topic with a slash is
    // spelled `%2F` in both, so no POST reaches a cohort that no GET could name.
    match rest.split_once('/') {
        None => bridge_route(link, head, rest),
        Some((topic, "service")) => service::route(settings, head, topic),
        Some(_) => Route::Answer(Response::error(404, "no such endpoint")),
    }
}

/// A file of `ws.static_dir`, or 404.
fn static_file(settings: &super::WsSettings, head: &RequestHead) -> Route {
    match settings
        .statics
        .answer(&head.method, &head.path, head.header("if-none-match"))
    {
        StaticAnswer::Missing => Route::Answer(Response::error(404, "no such endpoint")),
        StaticAnswer::MethodNotAllowed => {
            Route::Answer(Response::error(405, "use GET").with_header("Allow", "GET, HEAD"))
        }
        StaticAnswer::Reply { status, head, body } => Route::Static { status, head, body },
    }
}

/// Writes a static file's answer within its `write_deadline`, and closes. At
/// `STATIC_IN_FLIGHT_PER_CORE_MAX` answers in flight on this core it answers 503 with
/// `Retry-After` instead, counted. An answer is in flight until its connection is done with,
/// linger included, since until then the kernel may still hold the file's bytes.
async fn answer_static(
    link: &CoreLink,
    stream: &mut TcpStream,
    (status, head, body): (u16, Bytes, Bytes),
) {
    let metrics = link.metrics();
    if metrics.ws.static_in_flight.get() >= STATIC_IN_FLIGHT_PER_CORE_MAX {
        metrics.ws.static_busy.inc();
        let response = Response::error(503, "too many static files are being served; retry")
            .with_header("Retry-After", &STATIC_RETRY_AFTER_S.to_string());
        return answer(link, stream, response).await;
    }
    let _in_flight = InFlight::start(&metrics.ws.static_in_flight);
    metrics.ws_http_answer(status);
    let deadline = write_deadline(head.len() + body.len());
    let mut batch = IoBatch::with_capacity(2);
    batch.push_control(Outgoing::bare(head));
    batch.push_control(Outgoing::bare(body));
    let written = monoio::time::timeout(deadline, write_batch(stream, batch)).await;
    if matches!(written, Ok(true)) {
        let _ = stream.shutdown().await;
        session::linger(stream).await;
    }
}

/// One static answer counted in flight on its core until dropped.
struct InFlight<'gauge>(&'gauge crate::metrics::Gauge);

impl<'gauge> InFlight<'gauge> {
    fn start(gauge: &'gauge crate::metrics::Gauge) -> InFlight<'gauge> {
        gauge.inc();
        InFlight(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Hands the whole batch to the kernel, vectored, resuming after partial writes; false
/// when the peer is gone.
async fn write_batch(stream: &mut TcpStream, mut batch: IoBatch) -> bool {
    while !batch.is_done() {
        let (result, back) = stream.writev(batch).await;
        batch = back;
        match result {
            Ok(0) | Err(_) => return false,
            Ok(written) => batch.advance(written),
        }
    }
    true
}

fn bridge_route(link: &CoreLink, head: &RequestHead, topic: &str) -> Route {
    let lookup = match Lookup::new(head) {
        Ok(lookup) => lookup,
        Err(error) => return Route::Answer(Response::error(400, &error.to_string())),
    };
    let params = match parse_topic(topic).and_then(|topic| BridgeParams::parse(topic, &lookup)) {
        Ok(params) => params,
        Err(error) => return Route::Answer(Response::error(400, &error.to_string())),
    };
    if params.spec.history && !link.shared.history_served() {
        return Route::Answer(Response::error(
            400,
            "parameter \"history\": this broker does not serve history",
        ));
    }
    match check_upgrade(head) {
        Ok(accept) => Route::Upgrade {
            accept,
            endpoint: Endpoint::Bridge(params),
        },
        Err(error) => Route::Answer(error.to_response()),
    }
}

async fn upgrade(
    link: Rc<CoreLink>,
    port: Rc<Port>,
    mut stream: TcpStream,
    (accept, leftover): (String, BytesMut),
    endpoint: Endpoint,
) {
    let bridge = match &endpoint {
        Endpoint::Native => {
            port.set_framing(Framing::Encoded(Rc::new(rendition::Native)), false);
            None
        }
        Endpoint::Bridge(params) => {
            let Some(session) = join_bridge(&link, &port, params).await else {
                return end(&link, &port);
            };
            Some(session)
        }
    };
    let response = switching_protocols(&accept);
    let deadline = write_deadline(response.len());
    let written = monoio::time::timeout(deadline, stream.write_all(response)).await;
    if !matches!(written, Ok((Ok(_), _))) {
        return end(&link, &port);
    }
    link.metrics().ws_upgrade(endpoint.name());
    session::run(link, port, stream, leftover, bridge).await;
}

/// Frames the port for a bridge session (W2, W3, W11) and hands its Join to the cohort's
/// core before the 101 is written: a bridge client has no Ack to wait for, so the 101 is
/// its sign that it is in (with the Join after the 101, a spectator whose core was slow to
/// send it missed a publication made right after). The Join is then ahead of every frame
/// any core reads later: the home core's lane is one queue for all senders, and what that
/// core reads itself is taken in the same turn as the Join, before the turn applies a
/// verification result. Whatever the core answers meanwhile waits in the port until the
/// writer starts, after the 101. `None` when the stream closed while it waited.
async fn join_bridge(
    link: &CoreLink,
    port: &Port,
    params: &BridgeParams,
) -> Option<Rc<BridgeSession>> {
    let publishes = params.addr.is_some();
    let addr = params.addr.unwrap_or_else(rand::random);
    let session = Rc::new(BridgeSession::new(
        params.spec,
        params.fields,
        publishes,
        params.keep_alive_s,
    ));
    port.set_framing(Framing::Encoded(session.clone()), !publishes);
    port.set_bridged();
    if !link.gate(port, Admit::Frame).await {
        return None;
    }
    let join = bps_proto::Frame::encode(&params.spec.to_join(&addr));
    link.hand_over(port, join);
    Some(session)
}

/// Reads until a whole request head is there; `None` when the peer left first. The buffer
/// doubles from [`HEAD_FIRST_READ_BYTES`] up to `HEAD_BYTES_MAX` and never past it, the
/// bytes the memory budget counts per connection; what follows the head leaves in a buffer
/// of its own size, so a session does not keep the head's.
async fn read_head(stream: &mut TcpStream) -> Result<Option<(RequestHead, BytesMut)>, Response> {
    let mut buffer = BytesMut::with_capacity(HEAD_FIRST_READ_BYTES);
    loop {
        match parse_request_head(&buffer, HEAD_BYTES_MAX, HEADERS_MAX) {
            Ok(Some((head, used))) => return Ok(Some((head, BytesMut::from(&buffer[used..])))),
            Ok(None) => {}
            Err(error) => return Err(Response::error(error.status(), &error.to_string())),
        }
        if buffer.len() == buffer.capacity() {
            buffer = grown(&buffer);
        }
        let filled = buffer.len();
        let room = buffer.capacity() - filled;
        let (result, back) = stream
            .read(monoio::buf::IoBufMut::slice_mut(
                buffer,
                filled..filled + room,
            ))
            .await;
        buffer = back.into_inner();
        match result {
            Ok(0) | Err(_) => return Ok(None),
            Ok(_) => {}
        }
    }
}

/// `buffer`'s bytes in one of twice its capacity, at most `HEAD_BYTES_MAX` (a full buffer
/// of that size is a head too large, refused before it would grow).
fn grown(buffer: &BytesMut) -> BytesMut {
    let mut larger = BytesMut::with_capacity((buffer.capacity() * 2).min(HEAD_BYTES_MAX));
    larger.extend_from_slice(buffer);
    larger
}

/// The peer a trusted proxy names in `Forwarded` or `X-Forwarded-For`, every line of them
/// (the walk and its refusals are `bps_ws::forwarded`); its bounds apply from here on.
fn name_peer(link: &CoreLink, port: &Port, head: &RequestHead) -> Result<(), Response> {
    let forwarded: Vec<&str> = head.header_values(FORWARDED).collect();
    let x_forwarded_for: Vec<&str> = head.header_values(X_FORWARDED_FOR).collect();
    let ip = forwarded_peer(
        &forwarded,
        &x_forwarded_for,
        &link.settings().ws.trusted_proxies,
    )
    .map_err(|error| Response::error(400, &error.to_string()))?;
    link.name_proxied_peer(port, ip).map_err(refusal_response)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;
    use crate::io::harness::{self, GUARD};
    use crate::io::router::HomeMsg;
    use crate::protocol::{ClosedBy, CoreId, StreamId};

    /// Messages per lane and overflow: small, so a few messages pause the reads.
    const LANE_MESSAGES_MAX: usize = 4;

    /// How long the client listens for a 101 that must not come yet: the server task runs
    /// on the same thread, so this is many of its turns.
    const QUIET: Duration = Duration::from_millis(200);

    /// A bridge spectator's upgrade request (W11: no `addr`).
    fn spectator_request() -> String {
        let topic = "ab".repeat(32);
        let admin = "cd".repeat(20);
        format!(
            "GET /pubsub/{topic}?binding=feed_topic&admin={admin} HTTP/1.1\r\nHost: broker\r\n\
             Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
    }

    /// Whether a Join of `stream` waits in any core's home lane (or this core's own).
    fn join_waits(link: &CoreLink, stream: StreamId) -> bool {
        let mut found = false;
        let mut check = |msg: HomeMsg| {
            found |= matches!(msg, HomeMsg::Join { stream: joined, .. } if joined == stream);
        };
        while let Some(msg) = link.router.pop_home() {
            check(msg);
        }
        for lanes in link.router.lanes() {
            while let Some(msg) = lanes.home.pop() {
                check(msg);
            }
        }
        found
    }

    #[test]
    fn a_bridge_spectator_gets_its_101_only_once_its_join_is_on_its_way() {
        harness::on_each_driver(|driver| async move {
            let (shared, _) = harness::shared(2, |config| {
                config.server.inbox_messages_max = LANE_MESSAGES_MAX;
                config.server.overflow_messages_max = LANE_MESSAGES_MAX;
            });
            let link = Rc::new(CoreLink::new(CoreId::new(0), shared));
            // Core 1's lane from here is full and a message overflowed: reads wait.
            for local in 0..=LANE_MESSAGES_MAX as u64 {
                let stream = StreamId::new(0, 1000 + local);
                let cause = ClosedBy::Peer;
                link.router
                    .to_home(CoreId::new(1), HomeMsg::Closed { stream, cause });
            }
            assert!(link.router.reads_paused(), "{driver}");
            let (listener, addr) = harness::listener();
            let (accepted, mut peer) = harness::tcp_pair(&listener, addr, None).await;
            let port = link
                .admit(IpAddr::V4(Ipv4Addr::LOCALHOST), Transport::WebSocket)
                .expect("admitted");
            monoio::spawn(serve(Rc::clone(&link), Rc::clone(&port), accepted, false));
            let (sent, _) = peer.write_all(spectator_request().into_bytes()).await;
            sent.expect("request sent");
            let early = monoio::time::timeout(QUIET, peer.read(vec![0u8; 1024])).await;
            assert!(early.is_err(), "{driver}: a 101 before the Join could go");
            // The lane empties: the Join goes, then the 101.
            while link.router.overflowed() > 0 {
                while link.router.lanes()[1].home.pop().is_some() {}
                link.router.retry_overflow();
            }
            let (read, head) = monoio::time::timeout(GUARD, peer.read(vec![0u8; 1024]))
                .await
                .expect("the 101 came");
            let head = String::from_utf8_lossy(&head[..read.expect("read")]).into_owned();
            assert!(head.starts_with("HTTP/1.1 101 "), "{driver}: {head}");
            assert!(
                join_waits(&link, port.id),
                "{driver}: the client has its 101 and its Join is not on its way"
            );
        });
    }

    #[test]
    fn the_head_buffer_grows_to_the_budgeted_bound_and_no_further() {
        let mut buffer = BytesMut::with_capacity(HEAD_FIRST_READ_BYTES);
        let mut written = 0u8;
        while buffer.capacity() < HEAD_BYTES_MAX {
            while buffer.len() < buffer.capacity() {
                buffer.extend_from_slice(&[written]);
                written = written.wrapping_add(1);
            }
            let before = buffer.clone();
            buffer = grown(&buffer);
            assert_eq!(buffer[..], before[..], "growing keeps the bytes read");
            assert!(buffer.capacity() <= HEAD_BYTES_MAX, "{}", buffer.capacity());
        }
        assert_eq!(buffer.capacity(), HEAD_BYTES_MAX);
    }
}
