//! Black-box: the peer a trusted reverse proxy names (docs/WEBSOCKET.md, "How the broker
//! reads the proxy's headers") against the real binary. The test connects from 127.0.0.1,
//! a trusted proxy, writes the request head itself (several lines of one header, which an
//! HTTP client library would merge or refuse), joins a cohort on the native endpoint and
//! reads the peer the broker settled on from `/cohortz`.

mod support;

use std::net::TcpStream;

use bps_proto::{Status, encode_frame};
use support::ws::{RawWs, upgrade_request};
use support::{Broker, body_of, eventually, explicit, key};
use tungstenite::protocol::Role;
use tungstenite::{Message, WebSocket};

/// The native endpoint's upgrade request with extra header lines, in order.
fn request(headers: &[(&str, &str)]) -> String {
    let plain = upgrade_request("/bps/v1", "dGhlIHNhbXBsZSBub25jZQ==");
    let mut request = plain
        .strip_suffix("\r\n")
        .expect("a head ends in an empty line")
        .to_owned();
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request
}

/// Sends the upgrade request; the session when the broker upgraded, else the answer.
fn open(broker: &Broker, headers: &[(&str, &str)]) -> Result<WebSocket<TcpStream>, (u16, String)> {
    let mut raw = RawWs::connect(broker);
    let (status, answer) = raw.request(&request(headers));
    if status != 101 {
        return Err((status, answer));
    }
    Ok(WebSocket::from_raw_socket(raw.stream, Role::Client, None))
}

/// The peer `/cohortz` lists for a session opened with `headers` and joined to the cohort of
/// topic `topic_n` (one topic per call, so the cohort holds that session alone).
fn peer_named(broker: &Broker, topic_n: u8, headers: &[(&str, &str)]) -> String {
    let spec = explicit(topic_n, &key(1).address(), false);
    let mut socket = open(broker, headers)
        .unwrap_or_else(|(status, answer)| panic!("refused with {status}: {answer}"));
    socket
        .send(Message::Binary(encode_frame(
            &spec.to_join(&key(2).address()),
        )))
        .expect("send the Join");
    let ack = loop {
        match socket.read().expect("the Ack") {
            Message::Binary(bytes) => {
                break bps_proto::decode_ack(body_of(&bytes)).expect("an Ack");
            }
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("expected the Ack, got {other:?}"),
        }
    };
    assert_eq!(ack.status, Status::Ok as i32);
    let path = format!("/cohortz?key={}", hex::encode(spec.key().as_bytes()));
    // The Ack means the cohort holds the stream; polled all the same, the page is the cores'.
    let peers = eventually("the session's peer on /cohortz", || {
        let (status, body) = broker.get(&path);
        assert_eq!(status, 200, "{body}");
        let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let peers: Vec<String> = page
            .pointer("/cohort/peers")
            .and_then(serde_json::Value::as_array)?
            .iter()
            .filter_map(|peer| peer.as_str().map(str::to_owned))
            .collect();
        (!peers.is_empty()).then_some(peers)
    });
    assert_eq!(peers.len(), 1, "{peers:?}");
    drop(socket);
    peers[0].clone()
}

/// The status and body of a refused upgrade.
fn refused(broker: &Broker, headers: &[(&str, &str)]) -> (u16, String) {
    match open(broker, headers) {
        Ok(_) => panic!("upgraded with {headers:?}"),
        Err(answer) => answer,
    }
}

const TRUST_LOCALHOST: &str = "ws.trusted_proxies=[\"127.0.0.1\"]";

#[test]
fn split_x_forwarded_for_lines_are_one_list() {
    let broker = Broker::start(&[TRUST_LOCALHOST]);
    // The second line is the nearest proxy's; the first line alone would name 198.51.100.2.
    assert_eq!(
        peer_named(
            &broker,
            1,
            &[
                ("X-Forwarded-For", "203.0.113.9, 198.51.100.2"),
                ("X-Forwarded-For", "198.51.100.7, 127.0.0.1"),
            ]
        ),
        "198.51.100.7"
    );
    // The walk crosses from the last line into the first past trusted hops.
    assert_eq!(
        peer_named(
            &broker,
            2,
            &[
                ("X-Forwarded-For", "203.0.113.9, 198.51.100.3"),
                ("x-forwarded-for", "127.0.0.1"),
                ("X-Forwarded-For", "127.0.0.1"),
            ]
        ),
        "198.51.100.3"
    );
}

#[test]
fn hops_with_ports_and_bracketed_ipv6_name_the_peer() {
    let broker = Broker::start(&[TRUST_LOCALHOST]);
    assert_eq!(
        peer_named(
            &broker,
            1,
            &[("X-Forwarded-For", "198.51.100.4:51000, 127.0.0.1:443")]
        ),
        "198.51.100.4"
    );
    // An IPv6 peer is its /64.
    assert_eq!(
        peer_named(
            &broker,
            2,
            &[("X-Forwarded-For", "[2001:db8:1:2::7]:4711, 127.0.0.1")]
        ),
        "2001:db8:1:2::/64"
    );
}

#[test]
fn unparseable_and_unknown_hops_are_refused() {
    let broker = Broker::start(&[TRUST_LOCALHOST]);
    let (status, body) = refused(
        &broker,
        &[("X-Forwarded-For", "198.51.100.2, garbage, 127.0.0.1")],
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("X-Forwarded-For") && body.contains("garbage"),
        "{body}"
    );
    for hop in ["unknown", "_hidden"] {
        let (status, body) = refused(
            &broker,
            &[("X-Forwarded-For", &format!("{hop}, 127.0.0.1"))],
        );
        assert_eq!(status, 400, "{body}");
        assert!(body.contains(hop) && body.contains("unknown"), "{body}");
    }
    let (status, body) = refused(&broker, &[("Forwarded", "for=unknown")]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("\"Forwarded\""), "{body}");
    let (status, body) = refused(&broker, &[]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("must name the client"), "{body}");
    // Refused requests cost nothing: a good one still gets through.
    assert_eq!(
        peer_named(&broker, 1, &[("X-Forwarded-For", "198.51.100.2")]),
        "198.51.100.2"
    );
}

#[test]
fn cidr_ranges_of_proxies_are_trusted() {
    let broker = Broker::start(&["ws.trusted_proxies=[\"127.0.0.0/8\", \"10.0.0.0/8\"]"]);
    assert_eq!(
        peer_named(
            &broker,
            1,
            &[("X-Forwarded-For", "198.51.100.5, 10.20.30.40, 10.0.0.1")]
        ),
        "198.51.100.5"
    );
}

#[test]
fn forwarded_names_the_peer_and_wins_over_x_forwarded_for() {
    let broker = Broker::start(&[TRUST_LOCALHOST]);
    assert_eq!(
        peer_named(
            &broker,
            1,
            &[
                ("X-Forwarded-For", "198.51.100.9"),
                ("Forwarded", "for=\"[2001:db8:3:4::9]:4711\";proto=http"),
                ("Forwarded", "for=127.0.0.1;by=_nginx"),
            ]
        ),
        "2001:db8:3:4::/64"
    );
    assert_eq!(
        peer_named(
            &broker,
            2,
            &[("Forwarded", "for=192.0.2.60, for=\"127.0.0.1:443\"")]
        ),
        "192.0.2.60"
    );
}
