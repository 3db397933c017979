//! W5: `POST /pubsub/{topic}/service`, the admin's ROSTER or EOS outside any session, and
//! its CORS preflight.
//!
//! Owns: reading the body (its `Content-Length` bounded before anything is read), turning
//! it into a chunk per candidate challenge (the same message a session sends inline, W10),
//! sending it to the cohort's home core (`CoreLink::relay`) and the answer: 200 accepted,
//! 400 invalid, 404 no such cohort, 409 no live admin session, 422 valid but not accepted,
//! 503 when the home core does not answer.
//! Never does: check the chunk (the machine does, on the admin stream whose challenge it
//! was signed under) or punish anyone for an invalid one (it was on no stream).

use std::time::Duration;

use bps_proto::{Frame, Kind};
use bps_ws::bridge::INBOUND_BYTES_MAX;
use bps_ws::{
    Lookup, RequestHead, Response, cors_headers, parse_inbound, parse_spec, parse_topic, preflight,
};
use bytes::BytesMut;
use monoio::io::AsyncReadRent;
use monoio::net::TcpStream;

use super::WsSettings;
use super::connection::Route;
use crate::io::link::CoreLink;
use crate::io::router::RelayFrames;
use crate::protocol::RelayOutcome;

/// How long the body of a POST may take to arrive.
const BODY_READ_DEADLINE: Duration = Duration::from_secs(5);

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

/// Serves one POST: its answer, with the CORS headers its origin gets.
pub(super) async fn handle(
    link: &CoreLink,
    head: &RequestHead,
    topic: &str,
    leftover: BytesMut,
    stream: &mut TcpStream,
) -> Response {
    let mut response = relay(link, head, topic, leftover, stream).await;
    let allowed = &link.settings().ws.allowed_origins;
    response
        .headers
        .extend(cors_headers(head.header("origin"), allowed));
    response
}

async fn relay(
    link: &CoreLink,
    head: &RequestHead,
    topic: &str,
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
    match link.relay(spec.key(), frames).await {
        None => Response::error(503, "the cohort's core did not answer in time"),
        Some(outcome) => outcome_response(&outcome),
    }
}

fn outcome_response(outcome: &RelayOutcome) -> Response {
    let status = match outcome {
        RelayOutcome::Accepted => 200,
        RelayOutcome::NoCohort => 404,
        RelayOutcome::NoAdminStream => 409,
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
