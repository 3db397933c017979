//! One connection to the WebSocket listener, up to the point where it is a session or has
//! had its HTTP answer.
//!
//! Owns: admission at accept (answered with an HTTP status when refused, W10), the request
//! head (bounded in bytes and headers, within the Join deadline), the peer a trusted reverse
//! proxy names (`Forwarded`, `X-Forwarded-For`; the walk is `bps_ws::forwarded`), the
//! `Origin` check, the routing of the request (the native endpoint, the bridge, the W5
//! service POST and its preflight, the static files), the answers that refuse before the
//! upgrade, and the writing of a static file's answer (its shared head and body in one
//! vectored write, `STATIC_IN_FLIGHT_PER_CORE_MAX` of them per core, 503 beyond).
//! Never does: frame WebSocket messages (`session`) or judge a chunk (the machine).

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

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
use crate::io::link::{CoreLink, Refusal};
use crate::io::outgoing::Outgoing;
use crate::io::port::{Port, Transport};
use crate::limits::WS_HEAD_BYTES_MAX as HEAD_BYTES_MAX;

/// Header lines of a request head at most.
pub const HEADERS_MAX: usize = 64;
/// The path of the native endpoint (one BPS frame per binary message).
pub const NATIVE_PATH: &str = "/bps/v1";
/// The prefix of the bridge's paths (W1, W5, W8).
pub const BRIDGE_PREFIX: &str = "/pubsub/";
/// How long an HTTP answer may take to write before the connection is dropped.
const ANSWER_WRITE_DEADLINE: Duration = Duration::from_secs(2);

/// Accepts until a drain shuts the listener.
pub async fn accept_loop(link: Rc<CoreLink>, listener: TcpListener) {
    link.register_listener(std::os::fd::AsRawFd::as_raw_fd(&listener));
    while let Some((stream, addr)) =
        carrier::accept_next(&link, &listener, "WebSocket accept failed").await
    {
        if link.draining() {
            monoio::spawn(refuse(Rc::clone(&link), stream, Refusal::Draining));
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
        Err(refusal) => {
            monoio::spawn(refuse(Rc::clone(link), stream, refusal));
        }
    }
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

async fn refuse(link: Rc<CoreLink>, mut stream: TcpStream, refusal: Refusal) {
    answer(&link, &mut stream, refusal_response(refusal)).await;
}

/// Writes an HTTP answer and closes: the write side first, then what the client still
/// sends is read briefly, so the answer is not lost to a reset.
pub async fn answer(link: &CoreLink, stream: &mut TcpStream, response: Response) {
    link.metrics().ws_http_answer(response.status);
    let bytes = response.to_bytes();
    let written = monoio::time::timeout(ANSWER_WRITE_DEADLINE, stream.write_all(bytes)).await;
    if matches!(written, Ok((Ok(_), _))) {
        let _ = stream.shutdown().await;
        session::linger(stream).await;
    }
}

/// Reads the request head and routes the request; the port ends here unless it became a
/// session.
async fn serve(link: Rc<CoreLink>, port: Rc<Port>, mut stream: TcpStream, proxied: bool) {
    let started = Instant::now();
    let deadline = Duration::from_millis(link.settings().join_deadline_ms);
    let head = monoio::time::timeout(deadline, read_head(&mut stream)).await;
    let (head, leftover) = match head {
        Ok(Ok(Some(parsed))) => parsed,
        Ok(Ok(None)) => return end(&link, &port),
        Ok(Err(response)) => {
            answer(&link, &mut stream, response).await;
            return end(&link, &port);
        }
        // The Join deadline: the link resets the port and counts it.
        Err(_) => return end(&link, &port),
    };
    if link.draining() {
        answer(&link, &mut stream, refusal_response(Refusal::Draining)).await;
        return end(&link, &port);
    }
    if proxied && let Err(response) = name_peer(&link, &port, &head) {
        answer(&link, &mut stream, response).await;
        return end(&link, &port);
    }
    match route(&link, &head) {
        Route::Answer(response) => {
            answer(&link, &mut stream, response).await;
            end(&link, &port);
        }
        Route::Static { status, head, body } => {
            let left = deadline.saturating_sub(started.elapsed());
            answer_static(&link, &mut stream, (status, head, body), left).await;
            end(&link, &port);
        }
        Route::Service(topic) => {
            let response = service::handle(&link, &head, &topic, leftover, &mut stream).await;
            answer(&link, &mut stream, response).await;
            end(&link, &port);
        }
        Route::Upgrade { accept, endpoint } => {
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
    if let Some(topic) = rest.strip_suffix("/service") {
        return service::route(settings, head, topic);
    }
    if rest.contains('/') {
        return Route::Answer(Response::error(404, "no such endpoint"));
    }
    bridge_route(link, head, rest)
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

/// Writes a static file's answer within `left` (what remains of the Join deadline: a
/// connection without a Join lives that long, whatever it asked for), and closes. At
/// `STATIC_IN_FLIGHT_PER_CORE_MAX` answers in flight on this core it answers 503 with
/// `Retry-After` instead, counted. An answer is in flight until its connection is done with,
/// linger included, since until then the kernel may still hold the file's bytes.
async fn answer_static(
    link: &CoreLink,
    stream: &mut TcpStream,
    (status, head, body): (u16, Bytes, Bytes),
    left: Duration,
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
    let mut batch = IoBatch::with_capacity(2);
    batch.push_control(Outgoing::bare(head));
    batch.push_control(Outgoing::bare(body));
    let written = monoio::time::timeout(left, write_batch(stream, batch)).await;
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
    let response = switching_protocols(&accept);
    let written = monoio::time::timeout(ANSWER_WRITE_DEADLINE, stream.write_all(response)).await;
    if !matches!(written, Ok((Ok(_), _))) {
        return end(&link, &port);
    }
    let join = match &endpoint {
        Endpoint::Native => {
            port.set_framing(Framing::Encoded(Rc::new(rendition::Native)), false);
            None
        }
        Endpoint::Bridge(params) => Some(bridge_join(&port, params)),
    };
    link.metrics().ws_upgrade(endpoint.name());
    session::run(link, port, stream, leftover, join).await;
}

/// The Join of a bridge session (W2, W3, W11) and the session, framing the port.
fn bridge_join(port: &Port, params: &BridgeParams) -> (bps_proto::Frame, Rc<BridgeSession>) {
    let publishes = params.addr.is_some();
    let addr = params.addr.unwrap_or_else(rand::random);
    let session = Rc::new(BridgeSession::new(
        params.spec,
        params.fields,
        publishes,
        params.keep_alive_s,
    ));
    port.set_framing(Framing::Encoded(session.clone()), !publishes);
    (
        bps_proto::Frame::encode(&params.spec.to_join(&addr)),
        session,
    )
}

/// Reads until a whole request head is there; `None` when the peer left first.
async fn read_head(stream: &mut TcpStream) -> Result<Option<(RequestHead, BytesMut)>, Response> {
    let mut buffer = BytesMut::with_capacity(1024);
    loop {
        match parse_request_head(&buffer, HEAD_BYTES_MAX, HEADERS_MAX) {
            Ok(Some((head, used))) => {
                let leftover = buffer.split_off(used);
                return Ok(Some((head, leftover)));
            }
            Ok(None) => {}
            Err(error) => return Err(Response::error(error.status(), &error.to_string())),
        }
        if buffer.capacity() - buffer.len() < 512 {
            buffer.reserve(buffer.len().clamp(512, HEAD_BYTES_MAX));
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
