//! W5: `POST /pubsub/{topic}/service`, the admin's ROSTER or EOS outside any session, and
//! its CORS preflight.
//!
//! Owns: the POST's rate per peer (`ws.service_posts_per_peer_per_s`, checked before the body
//! is read: 429 with `Retry-After` beyond it), reading the body (its `Content-Length` bounded
//! before anything is read), the optional `challenge` parameter naming the admin session it
//! was signed for, turning it into a chunk under that session's challenge (the same message
//! a session sends inline, W10), sending it to the cohort's home core (`CoreLink::relay`),
//! whose one signature check runs on the verification pool, the blocklist strike against the
//! peer of a POST that does not validate, and the answer: 200 accepted, 400 invalid, 404 no
//! such cohort, 409 no (such) live admin session or several pending and none named, 422
//! valid but not accepted, 429 over the rate, 503 when the home core does not answer or this
//! core has `SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX` relays waiting.
//! Never does: check the chunk (the machine does, on the admin stream it names) or try it
//! on more than one admin stream (each try would be a signature check).

use std::time::{Duration, Instant};

use bps_proto::{Frame, Hash, Kind};
use bps_ws::bridge::INBOUND_BYTES_MAX;
use bps_ws::{
    Lookup, RequestHead, Response, cors_headers, parse_inbound, parse_spec, parse_topic, preflight,
};
use bytes::BytesMut;
use monoio::io::AsyncReadRent;
use monoio::net::TcpStream;

use super::WsSettings;
use super::connection::Route;
use crate::io::link::{CoreLink, Relayed};
use crate::io::router::RelayFrames;
use crate::protocol::{PeerId, RelayOutcome};

/// How long the body of a POST may take to arrive.
const BODY_READ_DEADLINE: Duration = Duration::from_secs(5);

/// `Retry-After` of a POST over its peer's rate or refused while its core is busy: a bucket
/// gains a token within a second at any allowed rate.
const SERVICE_RETRY_AFTER_S: u64 = 1;

/// The query parameter naming the admin session a POST was signed for (its challenge).
const CHALLENGE_PARAMETER: &str = "challenge";

/// The answer to a request on a service path, or the go-ahead to read a POST.
pub(super) fn route(settings: &WsSettings, head: &RequestHead, topic: &str) -> Route {
    match head.method.as_str() {
        "OPTIONS" => Route::Answer(preflight(head.header("origin"), &settings.allowed_origins)),
        "POST" => Route::Service(topic.to_owned()),
        _ => {
            let mut response = Response::error(405, "use POST (W5)");
            response
                .headers
                .push(("Allow".to_owned(), "POST, OPTIONS".to_owned()));
            Route::Answer(response)
        }
    }
}

/// Serves one POST of `peer`: its answer, with the CORS headers its origin gets.
pub(super) async fn handle(
    link: &CoreLink,
    (head, topic): (&RequestHead, &str),
    peer: PeerId,
    leftover: BytesMut,
    stream: &mut TcpStream,
) -> Response {
    let mut response = if link.settings().ws.post_rate.try_take(peer, Instant::now()) {
        relay(link, head, topic, peer, leftover, stream).await
    } else {
        link.metrics().ws.service_posts_limited.inc();
        retry_later(
            429,
            "too many service POSTs from this peer (ws.service_posts_per_peer_per_s)",
        )
    };
    let allowed = &link.settings().ws.allowed_origins;
    response
        .headers
        .extend(cors_headers(head.header("origin"), allowed));
    response
}

fn retry_later(status: u16, reason: &str) -> Response {
    Response::error(status, reason).with_header("Retry-After", &SERVICE_RETRY_AFTER_S.to_string())
}

async fn relay(
    link: &CoreLink,
    head: &RequestHead,
    topic: &str,
    peer: PeerId,
    leftover: BytesMut,
    stream: &mut TcpStream,
) -> Response {
    let lookup = match Lookup::new(head) {
        Ok(lookup) => lookup,
        Err(error) => return Response::error(400, &error.to_string()),
    };
    let spec = match parse_topic(topic).and_then(|topic| parse_spec(topic, &lookup)) {
        Ok(spec) => spec,
        Err(error) => return Response::error(400, &error.to_string()),
    };
    if spec.admin.is_none() {
        return Response::error(
            400,
            "parameter \"admin\": service chunks are the admin's, and this spec has none",
        );
    }
    let named = match lookup.get(CHALLENGE_PARAMETER).map(parse_challenge) {
        None => None,
        Some(Ok(challenge)) => Some(challenge),
        Some(Err(response)) => return response,
    };
    let body = match read_body(head, leftover, stream).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    let body = body.freeze();
    match parse_inbound(&body, &spec) {
        Err(error) => return Response::error(400, &error.to_string()),
        Ok(inbound) if ![Kind::Roster as i32, Kind::Eos as i32].contains(&inbound.kind()) => {
            return Response::error(
                400,
                "kind: the service endpoint takes ROSTER (3) or EOS (4)",
            );
        }
        Ok(_) => {}
    }
    let frames = RelayFrames(Box::new(move |challenge| {
        let inbound = parse_inbound(&body, &spec).expect("the body parsed before");
        Frame::parse_exact(inbound.to_frame(challenge), usize::MAX)
            .expect("an assembled frame is one whole frame")
    }));
    match link.relay(spec.key(), named, frames).await {
        Relayed::Busy => {
            link.metrics().ws.service_busy.inc();
            retry_later(503, "too many service POSTs are being relayed; retry")
        }
        Relayed::TimedOut => Response::error(503, "the cohort's core did not answer in time"),
        Relayed::Answered(outcome) => {
            if matches!(outcome, RelayOutcome::Invalid { .. }) {
                strike(link, peer);
            }
            outcome_response(&outcome)
        }
    }
}

/// `challenge`: the 32-byte challenge of the admin session the chunk was signed under.
fn parse_challenge(value: &str) -> Result<Hash, Response> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    let mut challenge = [0u8; 32];
    hex::decode_to_slice(digits, &mut challenge).map_err(|_| {
        Response::error(
            400,
            &format!(
                "parameter \"{CHALLENGE_PARAMETER}\": {value:?} is not a 32-byte challenge (64 hex digits, 0x optional)"
            ),
        )
    })?;
    Ok(challenge)
}

/// A POST that did not validate is a strike against its peer, like a missed Join deadline:
/// `limits.join_timeouts_per_peer_max` of them within `timeouts.blocklist_join_timeout_ms`
/// blocklist it (R39).
fn strike(link: &CoreLink, peer: PeerId) {
    link.metrics().ws.service_strikes.inc();
    if let Some(until) = link
        .shared
        .ledger
        .note_join_timeout(peer, link.shared.now())
    {
        link.metrics().join_timeout_blocklistings.inc();
        tracing::info!(%peer, until_ms = until.as_ms(), "peer blocklisted for invalid service POSTs");
    }
}

fn outcome_response(outcome: &RelayOutcome) -> Response {
    let status = match outcome {
        RelayOutcome::Accepted => 200,
        RelayOutcome::NoCohort => 404,
        RelayOutcome::NoAdminStream | RelayOutcome::Unnamed { .. } => 409,
        RelayOutcome::Invalid { .. } => 400,
        RelayOutcome::NotAccepted { .. } => 422,
    };
    Response::error(status, &outcome.to_string())
}

/// The body, `Content-Length` bytes of it (bounded before anything is read).
async fn read_body(
    head: &RequestHead,
    mut body: BytesMut,
    stream: &mut TcpStream,
) -> Result<BytesMut, Response> {
    let Some(length) = head.header("content-length") else {
        return Err(Response::error(
            411,
            "header \"Content-Length\" is required",
        ));
    };
    let Ok(length) = length.trim().parse::<usize>() else {
        return Err(Response::error(
            400,
            "header \"Content-Length\": expected a number of bytes",
        ));
    };
    if length > INBOUND_BYTES_MAX {
        return Err(Response::error(
            413,
            &format!("the body is at most {INBOUND_BYTES_MAX} bytes (W5)"),
        ));
    }
    if body.len() > length {
        return Err(Response::error(
            400,
            "more bytes than \"Content-Length\" says (no pipelining)",
        ));
    }
    body.reserve(length - body.len());
    let read = monoio::time::timeout(BODY_READ_DEADLINE, async {
        while body.len() < length {
            let filled = body.len();
            let (result, back) = stream
                .read(monoio::buf::IoBufMut::slice_mut(body, filled..length))
                .await;
            body = back.into_inner();
            match result {
                Ok(0) | Err(_) => return Err(body),
                Ok(_) => {}
            }
        }
        Ok(body)
    })
    .await;
    match read {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(_)) | Err(_) => Err(Response::error(
            400,
            "the body ended before \"Content-Length\" bytes",
        )),
    }
}
