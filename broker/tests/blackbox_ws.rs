//! Black-box: the WebSocket listener (docs/PROTOCOL.md §9, docs/WEBSOCKET.md) against the real
//! binary, with tungstenite as the client: the five configurations over the native endpoint
//! and over the SWIP-60 bridge with all signing on the client, WebSocket and TCP streams of
//! one cohort side by side, the W5 service POST, the admin views, and every bad input with
//! its documented answer, each costing one session and nothing else.

mod support;

use bps_client::publisher::{Publisher, PublisherConfig};
use bps_client::subscriber::Subscriber;
use bps_proto::{
    Address, Binding, Hash, Kind, Spec, Status, encode_roster, feed_id, keccak256, soc_address,
};
use bps_verify::{SigningKey, cac_address, sign_broadcast, sign_implicit};
use bytes::Bytes;
use support::ws::{RawWs, Ws, client_frame, upgrade_request};
use support::{
    Broker, QUIET, body_of, expect_data, expect_frames, explicit, group, implicit, key, publish,
    publisher, recv,
};

/// Enough streams per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

// ---- the native endpoint ----

/// A publisher on a native WebSocket session.
struct WsPublisher {
    ws: Ws,
    publisher: Publisher,
}

impl WsPublisher {
    fn join(broker: &Broker, spec: &Spec, key: &SigningKey) -> WsPublisher {
        let (ws, status, challenge) = Ws::native_join(broker, spec, &key.address());
        assert_eq!(status, Status::Ok);
        let mut publisher =
            Publisher::new(*spec, key.clone(), PublisherConfig::default()).expect("key fits");
        publisher.begin_session(challenge);
        WsPublisher { ws, publisher }
    }

    /// Queues the payloads as DATA and sends everything due (the claim first); the DATA
    /// bodies sent, in order.
    fn publish(&mut self, payloads: &[&[u8]]) -> Vec<Bytes> {
        for payload in payloads {
            self.publisher
                .enqueue_data(Bytes::copy_from_slice(payload))
                .expect("queue DATA");
        }
        self.flush(Kind::Data)
    }

    /// Sends everything due; the bodies of the frames of `kind` sent.
    fn flush(&mut self, kind: Kind) -> Vec<Bytes> {
        let mut sent = Vec::new();
        while let Some(outgoing) = self.publisher.next_frame().expect("sign") {
            self.ws.send(&outgoing.signed.frame);
            self.publisher.mark_sent();
            if outgoing.kind == kind {
                sent.push(body_of(&outgoing.signed.frame));
            }
        }
        sent
    }
}

/// A native WebSocket subscriber with its end-to-end verifier (R41).
fn ws_subscriber(broker: &Broker, spec: &Spec, addr: &Address) -> (Ws, Subscriber) {
    let (ws, status, _) = Ws::native_join(broker, spec, addr);
    assert_eq!(status, Status::Ok);
    (ws, Subscriber::new(*spec))
}

fn ws_body(ws: &mut Ws) -> Bytes {
    body_of(&ws.recv_binary())
}

#[test]
fn native_live_stream_reaches_websocket_and_tcp_subscribers_with_the_same_bytes() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let (mut ws_viewer, mut ws_verifier) = ws_subscriber(&broker, &spec, &key(10).address());
    let mut tcp_viewer = broker.join(&spec, &key(11).address());
    let mut tcp_verifier = Subscriber::new(spec);
    let mut publisher = WsPublisher::join(&broker, &spec, &admin);
    let payloads: [&[u8]; 3] = [b"first", &[7u8; 4096], b""];
    let sent = publisher.publish(&payloads);
    for (index, (body, payload)) in sent.iter().zip(payloads).enumerate() {
        let over_ws = ws_body(&mut ws_viewer);
        let over_tcp = recv(&mut tcp_viewer);
        assert_eq!(&over_ws, body, "WebSocket delivery {index}");
        assert_eq!(over_ws, over_tcp, "WebSocket and TCP deliveries {index}");
        expect_data(
            &mut ws_verifier,
            over_ws,
            &admin.address(),
            index as u64,
            payload,
        );
        expect_data(
            &mut tcp_verifier,
            over_tcp,
            &admin.address(),
            index as u64,
            payload,
        );
    }
}

#[test]
fn native_a_tcp_publisher_reaches_websocket_members_and_the_other_way_round() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let spec = group(2, &key(1).address());
    let (alice, bob) = (key(2), key(3));
    let mut ws_alice = WsPublisher::join(&broker, &spec, &alice);
    let mut tcp_bob = broker.join(&spec, &bob.address());
    let mut bob_publisher = publisher(&spec, &bob, &tcp_bob);
    let from_bob = support::bodies(&publish(
        &mut bob_publisher,
        &mut tcp_bob,
        &[b"hi from tcp"],
    ));
    assert_eq!(vec![ws_body(&mut ws_alice.ws)], from_bob);
    let from_alice = ws_alice.publish(&[b"hi from a browser"]);
    expect_frames(&mut tcp_bob, &from_alice);
    // Never echo (R25): neither gets its own.
    ws_alice.ws.expect_quiet(QUIET);
}

#[test]
fn native_jam_and_spectator_jam_with_a_websocket_member() {
    for closed in [true, false] {
        let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
        let admin = key(1);
        let member = key(2);
        let spec = explicit(3, &admin.address(), closed);
        let mut viewer = broker.join(&spec, &key(9).address());
        let (mut member_ws, status, member_challenge) =
            Ws::native_join(&broker, &spec, &member.address());
        assert_eq!(status, Status::Ok);
        let mut admin_session = broker.join(&spec, &admin.address());
        let mut admin_publisher = publisher(&spec, &admin, &admin_session);
        admin_publisher
            .enqueue_roster(&[member.address()])
            .expect("queue the roster");
        let rosters: Vec<Bytes> = support::flush(&mut admin_publisher, &mut admin_session)
            .iter()
            .filter(|outgoing| outgoing.kind == Kind::Roster)
            .map(|outgoing| body_of(&outgoing.signed.frame))
            .collect();
        // The named member learns it first (R22), over its WebSocket session.
        assert_eq!(ws_body(&mut member_ws), rosters[0]);
        let mut member_publisher =
            Publisher::new(spec, member.clone(), PublisherConfig::default()).expect("key fits");
        member_publisher.begin_session(member_challenge);
        member_publisher.on_roster(&[member.address()]);
        let mut ws_member = WsPublisher {
            ws: member_ws,
            publisher: member_publisher,
        };
        let sent = ws_member.publish(&[b"riff"]);
        expect_frames(&mut admin_session, &sent);
        if !closed {
            // The spectator-jam's audience got the roster, then the member's riff.
            expect_frames(&mut viewer, &[rosters[0].clone(), sent[0].clone()]);
        }
    }
}

#[test]
fn native_implicit_cohort_publisher_over_websocket() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let spec = implicit(support::topic(4), Binding::Mnemonic);
    let mut tcp_listener = broker.join(&spec, &key(5).address());
    let mut publisher = WsPublisher::join(&broker, &spec, &key(6));
    let sent = publisher.publish(&[b"graffiti"]);
    expect_frames(&mut tcp_listener, &sent);
}

// ---- the SWIP-60 bridge ----

/// The bridge's query for `spec`, with `addr` when the session publishes.
fn bridge_query(spec: &Spec, addr: Option<&Address>, extra: &str) -> String {
    let binding = match spec.binding {
        Binding::Anchor => "anchor",
        Binding::SocId => "soc_id",
        Binding::Owner => "owner",
        Binding::FeedTopic => "feed_topic",
        Binding::Mnemonic => "mnemonic",
    };
    let mut query = format!("/pubsub/{}?binding={binding}", hex::encode(spec.topic));
    if let Some(admin) = spec.admin {
        query.push_str(&format!("&admin=0x{}", hex::encode(admin)));
    }
    if spec.all {
        query.push_str("&publishers=all");
    }
    if spec.closed {
        query.push_str("&closed=true");
    }
    if let Some(addr) = addr {
        query.push_str(&format!("&addr={}", hex::encode(addr)));
    }
    query.push_str(extra);
    query
}

/// A bridge session with `addr`: it is handed its challenge first (W10).
fn bridge_publisher(broker: &Broker, spec: &Spec, addr: &Address) -> (Ws, Hash) {
    let mut ws = match Ws::open(broker, &bridge_query(spec, Some(addr), ""), &[]) {
        Ok(ws) => ws,
        Err(refused) => panic!("bridge refused: {refused:?}"),
    };
    let challenge = ws.recv_json();
    assert_eq!(challenge["type"], "challenge");
    let hex = challenge["challenge"].as_str().expect("a hex challenge");
    let challenge = Hash::try_from(hex::decode(hex).expect("hex").as_slice()).expect("32 bytes");
    (ws, challenge)
}

/// A spectator session (no addr, W11) asking for `fields`.
fn bridge_spectator(broker: &Broker, spec: &Spec, fields: &str) -> Ws {
    let extra = if fields.is_empty() {
        String::new()
    } else {
        format!("&swarm-soc-fields={fields}")
    };
    bridge_spectator_with(broker, spec, &extra)
}

/// A spectator session with `extra` query parameters.
fn bridge_spectator_with(broker: &Broker, spec: &Spec, extra: &str) -> Ws {
    match Ws::open(broker, &bridge_query(spec, None, extra), &[]) {
        Ok(ws) => ws,
        Err(refused) => panic!("bridge refused: {refused:?}"),
    }
}

/// The inline message of W4 for explicit authorship and ALL: `kind ‖ index ‖ sig ‖ span ‖
/// payload`, signed on the client under `challenge`; with the frame a native client would
/// have sent for the same chunk.
fn signed_message(
    key: &SigningKey,
    kind: Kind,
    spec: &Spec,
    challenge: &Hash,
    index: u64,
    payload: &[u8],
) -> (Vec<u8>, Bytes) {
    let signed = sign_broadcast(key, kind, &spec.topic, challenge, index, payload);
    let mut message = vec![kind as i32 as u8];
    message.extend_from_slice(&index.to_be_bytes());
    message.extend_from_slice(&signed.chunk[32..]);
    (message, body_of(&signed.frame))
}

#[test]
fn bridge_live_stream_round_trips_with_signing_on_the_client() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = explicit(5, &admin.address(), false);
    let mut viewer = bridge_spectator(&broker, &spec, "");
    let mut tcp_viewer = broker.join(&spec, &key(12).address());
    let (mut admin_ws, challenge) = bridge_publisher(&broker, &spec, &admin.address());
    for (index, payload) in [b"frame zero".as_slice(), &[3u8; 4096], b""]
        .iter()
        .enumerate()
    {
        let (message, native) =
            signed_message(&admin, Kind::Data, &spec, &challenge, index as u64, payload);
        admin_ws.send(&message);
        // W6's default field is the payload; a TCP subscriber gets the whole Broadcast, the
        // same bytes a native publisher would have produced.
        assert_eq!(viewer.recv_binary().as_ref(), *payload, "payload {index}");
        assert_eq!(recv(&mut tcp_viewer), native, "Broadcast {index}");
    }
}

#[test]
fn bridge_group_chat_delivers_the_requested_fields_in_order() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let spec = group(6, &key(1).address());
    let alice = key(2);
    let fields = "address,recoveredPubKey,identifier,signature,wrappedAddress,span,payload";
    let mut bob = match Ws::open(
        &broker,
        &bridge_query(
            &spec,
            Some(&key(3).address()),
            &format!("&swarm-soc-fields={fields}"),
        ),
        &[],
    ) {
        Ok(ws) => ws,
        Err(refused) => panic!("refused: {refused:?}"),
    };
    assert_eq!(bob.recv_json()["type"], "challenge");
    let (mut alice_ws, challenge) = bridge_publisher(&broker, &spec, &alice.address());
    let signed = sign_broadcast(
        &alice,
        Kind::Data,
        &spec.topic,
        &challenge,
        0,
        b"hello room",
    );
    let (message, _) = signed_message(&alice, Kind::Data, &spec, &challenge, 0, b"hello room");
    alice_ws.send(&message);
    let got = bob.recv_binary();
    let chunk = &signed.chunk;
    let id: Hash = chunk[..32].try_into().expect("id");
    let mut expected = soc_address(id, alice.address()).to_vec();
    expected.extend_from_slice(&bps_verify::compressed_key(&alice.public_key()));
    expected.extend_from_slice(&chunk[..32]);
    expected.extend_from_slice(&chunk[32..97]);
    let span: [u8; 8] = chunk[97..105].try_into().expect("span");
    expected.extend_from_slice(&cac_address(span, &chunk[105..]));
    expected.extend_from_slice(&chunk[97..105]);
    expected.extend_from_slice(b"hello room");
    assert_eq!(got.as_ref(), expected.as_slice());
}

#[test]
fn bridge_jam_roster_grants_a_seat_and_eos_ends_the_channel() {
    for closed in [true, false] {
        let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
        let admin = key(1);
        let member = key(2);
        let spec = explicit(7, &admin.address(), closed);
        let mut viewer = (!closed).then(|| bridge_spectator(&broker, &spec, ""));
        let (mut member_ws, member_challenge) = bridge_publisher(&broker, &spec, &member.address());
        let (mut admin_ws, admin_challenge) = bridge_publisher(&broker, &spec, &admin.address());
        let roster = encode_roster(&[member.address()]);
        let (message, _) =
            signed_message(&admin, Kind::Roster, &spec, &admin_challenge, 0, &roster);
        admin_ws.send(&message);
        let expected_roster = serde_json::json!({
            "type": "roster",
            "index": 0,
            "publishers": [hex::encode(member.address())],
        });
        assert_eq!(
            member_ws.recv_json(),
            expected_roster,
            "the seat learns it (R23)"
        );
        let (message, _) =
            signed_message(&member, Kind::Data, &spec, &member_challenge, 0, b"riff");
        member_ws.send(&message);
        assert_eq!(admin_ws.recv_binary().as_ref(), b"riff");
        if let Some(viewer) = viewer.as_mut() {
            assert_eq!(viewer.recv_json(), expected_roster);
            assert_eq!(viewer.recv_binary().as_ref(), b"riff");
        }
        let (message, _) = signed_message(&admin, Kind::Eos, &spec, &admin_challenge, 0, b"");
        admin_ws.send(&message);
        for ws in [Some(&mut member_ws), viewer.as_mut()]
            .into_iter()
            .flatten()
        {
            assert_eq!(ws.recv_json(), serde_json::json!({"type": "eos"}));
            assert_eq!(ws.expect_end().code(), Some(1000));
        }
    }
}

#[test]
fn bridge_implicit_feeds_and_whole_chunks() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    // FEED_TOPIC: the message is `index ‖ sig ‖ span ‖ payload`, the id is the feed's.
    let feed = implicit(support::topic(8), Binding::FeedTopic);
    let mut viewer = bridge_spectator(&broker, &feed, "identifier,payload");
    let writer = key(4);
    let (mut writer_ws, _) = bridge_publisher(&broker, &feed, &writer.address());
    let signed = sign_implicit(&writer, &feed_id(feed.topic, 9), Some(9), b"update nine");
    let mut message = 9u64.to_be_bytes().to_vec();
    message.extend_from_slice(&signed.chunk[32..]);
    writer_ws.send(&message);
    let mut expected = feed_id(feed.topic, 9).to_vec();
    expected.extend_from_slice(b"update nine");
    assert_eq!(viewer.recv_binary().as_ref(), expected.as_slice());
    // MNEMONIC: no id can be derived, the message is the whole SOC.
    let name = implicit(keccak256(b"wall"), Binding::Mnemonic);
    let mut wall_viewer = bridge_spectator(&broker, &name, "");
    let (mut wall_writer, _) = bridge_publisher(&broker, &name, &writer.address());
    let signed = sign_implicit(&writer, &keccak256(b"any id"), None, b"on the wall");
    wall_writer.send(&signed.chunk);
    assert_eq!(wall_viewer.recv_binary().as_ref(), b"on the wall");
}

#[test]
fn bridge_a_mnemonic_topic_in_the_path_is_hashed() {
    let broker = Broker::start(&[]);
    let admin = key(1);
    let mut spec = explicit(0, &admin.address(), false);
    spec.topic = keccak256("caf\u{e9} chat".as_bytes());
    let target = format!(
        "/pubsub/caf%C3%A9%20chat?binding=feed_topic&admin={}",
        hex::encode(admin.address())
    );
    let mut viewer = Ws::open(&broker, &target, &[]).expect("upgraded");
    let mut tcp_admin = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &tcp_admin);
    publish(&mut admin_publisher, &mut tcp_admin, &[b"same cohort"]);
    assert_eq!(viewer.recv_binary().as_ref(), b"same cohort");
}

#[test]
fn bridge_spectator_that_sends_is_closed_and_nobody_is_blocklisted() {
    let broker = Broker::start(&[]);
    let spec = explicit(9, &key(1).address(), false);
    let mut spectator = bridge_spectator(&broker, &spec, "");
    spectator.send(b"not mine to send");
    assert_eq!(spectator.expect_end().code(), Some(1008));
    broker.wait_metric("bps_ws_spectator_sends_total", 1);
    assert_eq!(broker.metric("bps_blocklisted_total"), 0);
    let mut again = bridge_spectator(&broker, &spec, "");
    again.expect_quiet(QUIET);
}

#[test]
fn bridge_history_gives_a_late_viewer_the_retained_payloads() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let mut spec = explicit(10, &admin.address(), false);
    spec.history = true;
    let mut tcp_admin = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &tcp_admin);
    publish(
        &mut admin_publisher,
        &mut tcp_admin,
        &[b"one", b"two", b"three"],
    );
    broker.wait_metric("bps_accepted_data_total", 3);
    let mut late = bridge_spectator_with(&broker, &spec, "&history=true");
    for payload in [b"one".as_slice(), b"two", b"three"] {
        assert_eq!(late.recv_binary().as_ref(), payload);
    }
    publish(&mut admin_publisher, &mut tcp_admin, &[b"live"]);
    assert_eq!(late.recv_binary().as_ref(), b"live");
}

#[test]
fn bridge_refuses_history_on_a_refusing_broker_and_audiences_of_closed_cohorts() {
    let broker = Broker::start(&["protocol.history=refuse"]);
    let admin = key(1);
    let mut spec = explicit(10, &admin.address(), false);
    spec.history = true;
    let refused = Ws::open(&broker, &bridge_query(&spec, None, "&history=true"), &[])
        .err()
        .expect("refused");
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("\"history\""), "{}", refused.body);
    let jam = explicit(10, &admin.address(), true);
    let refused = Ws::open(&broker, &bridge_query(&jam, None, ""), &[])
        .err()
        .expect("refused");
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("addr"), "{}", refused.body);
}

// ---- W5: the service POST ----

fn post(broker: &Broker, target: &str, body: &[u8], origin: Option<&str>) -> (u16, String) {
    let mut raw = RawWs::connect(broker);
    let origin = origin.map_or_else(String::new, |origin| format!("Origin: {origin}\r\n"));
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: localhost\r\n{origin}Content-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut request = head.into_bytes();
    request.extend_from_slice(body);
    raw.request_bytes(&request)
}

#[test]
fn service_post_relays_the_admins_roster_on_its_stream() {
    // Six POSTs from one peer in quick succession: above the default rate.
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, "ws.service_posts_per_peer_per_s=100"]);
    let admin = key(1);
    let member = key(2);
    let spec = explicit(11, &admin.address(), false);
    let service = bridge_query(&spec, None, "").replacen('?', "/service?", 1);
    let roster = encode_roster(&[member.address()]);
    // No cohort yet: 404; a cohort without a live admin stream: 409.
    let (message, _) = signed_message(&admin, Kind::Roster, &spec, &[0; 32], 0, &roster);
    assert_eq!(post(&broker, &service, &message, None).0, 404);
    let mut viewer = broker.join(&spec, &key(9).address());
    assert_eq!(post(&broker, &service, &message, None).0, 409);
    // The admin's native TCP stream; the browser signs under its challenge.
    let admin_session = broker.join(&spec, &admin.address());
    let challenge = *admin_session.challenge();
    let (message, native) = signed_message(&admin, Kind::Roster, &spec, &challenge, 0, &roster);
    let (status, answer) = post(&broker, &service, &message, Some("https://app.example"));
    assert_eq!(status, 200, "{answer}");
    assert!(
        answer.contains("Access-Control-Allow-Origin: https://app.example")
            || answer.contains("Access-Control-Allow-Origin: *"),
        "{answer}"
    );
    assert_eq!(
        recv(&mut viewer),
        native,
        "relayed unchanged on the admin's stream"
    );
    // The same chunk again validates but is not accepted: 422.
    assert_eq!(post(&broker, &service, &message, None).0, 422);
    // Signed by someone else: 400, counted, and one strike (not yet a blocklisting).
    let (forged, _) = signed_message(&key(3), Kind::Roster, &spec, &challenge, 1, &roster);
    assert_eq!(post(&broker, &service, &forged, None).0, 400);
    assert_eq!(broker.metric("bps_ws_service_strikes_total"), 1);
    assert_eq!(broker.metric("bps_blocklisted_total"), 0);
    // A body that is not a service message at all: 400 before anything is relayed.
    assert_eq!(post(&broker, &service, b"short", None).0, 400);
    drop(admin_session);
}

#[test]
fn service_preflight_answers_cors() {
    let broker = Broker::start(&[]);
    let mut raw = RawWs::connect(&broker);
    let (status, answer) = raw.request(
        "OPTIONS /pubsub/chat/service?binding=mnemonic HTTP/1.1\r\nHost: localhost\r\nOrigin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n\r\n",
    );
    assert_eq!(status, 204, "{answer}");
    assert!(answer.contains("Access-Control-Allow-Methods"), "{answer}");
}

// ---- admin views and metrics ----

#[test]
fn cohortz_shows_each_streams_transport_and_pubsub_lists_topics() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let spec = explicit(12, &key(1).address(), false);
    let (_ws, _, _) = Ws::native_join(&broker, &spec, &key(2).address());
    let _tcp = broker.join(&spec, &key(3).address());
    let _bridge = bridge_spectator(&broker, &spec, "");
    let key_hex = hex::encode(spec.key().as_bytes());
    // A spectator's upgrade is answered before its home core has taken the Join.
    let transports = support::eventually("three streams in /cohortz", || {
        let (status, body) = broker.get(&format!("/cohortz?key={key_hex}"));
        assert_eq!(status, 200, "{body}");
        let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let mut transports: Vec<(String, bool)> = page["streams"]
            .as_array()
            .expect("streams")
            .iter()
            .map(|stream| {
                (
                    stream["transport"].as_str().expect("transport").to_owned(),
                    stream["anonymous"].as_bool().expect("anonymous"),
                )
            })
            .collect();
        transports.sort();
        (transports.len() == 3).then_some(transports)
    });
    assert_eq!(
        transports,
        vec![
            ("tcp".to_owned(), false),
            ("websocket".to_owned(), false),
            ("websocket".to_owned(), true),
        ]
    );
    let (status, body) = broker.get("/pubsub/");
    assert_eq!(status, 200, "{body}");
    let topics: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let topic = &topics["topics"][0];
    assert_eq!(topic["topic"], hex::encode(spec.topic));
    assert_eq!(topic["role"], "broker");
    assert_eq!(topic["peers"], serde_json::json!(["127.0.0.1"]));
    let metrics = broker.metrics();
    assert!(metrics["bps_transport_connections_accepted_total{transport=\"websocket\"}"] >= 2.0);
    assert_eq!(metrics["bps_ws_upgrades_total{endpoint=\"bridge\"}"], 1.0);
    // W8 is on the admin port only.
    let mut raw = RawWs::connect(&broker);
    let (status, _) = raw.request("GET /pubsub/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(status, 404);
}

// ---- bad input: each gets its answer and costs one session ----

/// The broker still serves: a native session joins, and nobody was blocklisted.
/// Keepalive pings and pongs are queued like frames (their bytes held until written): a
/// session pinged every 100 ms, which pings the broker too, gets its pings and pongs and
/// the broker goes on serving.
#[test]
fn keepalive_pings_and_pongs_are_written_and_the_broker_goes_on() {
    let broker = Broker::start(&["ws.ping_interval_ms=100"]);
    let spec = explicit(98, &key(1).address(), false);
    let (mut ws, status, _) = Ws::native_join(&broker, &spec, &key(51).address());
    assert_eq!(status, Status::Ok);
    let pings = ws.pings_within(std::time::Duration::from_millis(1500));
    assert!(pings >= 3, "{pings} pings in 1.5 s at a 100 ms interval");
    still_serving(&broker);
    // The gauge is sampled at the end of a core's turn, so a ping or pong of this session
    // may be counted as held for a moment after it was written: nothing stays held.
    broker.wait_gauge("bps_held_bytes", 0);
}

fn still_serving(broker: &Broker) {
    let spec = explicit(99, &key(1).address(), false);
    let (_, status, _) = Ws::native_join(broker, &spec, &key(50).address());
    assert_eq!(status, Status::Ok);
    assert_eq!(broker.metric("bps_blocklisted_total"), 0);
}

#[test]
fn malformed_upgrades_get_400_naming_what_is_wrong() {
    let broker = Broker::start(&[]);
    let cases: [(String, u16, &str); 5] = [
        ("GET /bps/v1 HTTP/1.1\r\nHost: x\r\n\r\n".into(), 400, "Upgrade"),
        ("\x16\x03\x01\x02\x00\x01\x00\x01\x03\x03\r\n\r\n".into(), 400, ""),
        (
            "GET /bps/v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n".into(),
            400,
            "Sec-WebSocket-Key",
        ),
        (upgrade_request("/bps/v1", "c2hvcnQ="), 400, "Sec-WebSocket-Key"),
        (
            "GET /bps/v1 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".into(),
            426,
            "Sec-WebSocket-Version",
        ),
    ];
    for (request, status, names) in cases {
        let mut raw = RawWs::connect(&broker);
        let (got, answer) = raw.request(&request);
        assert_eq!(got, status, "{request:?}: {answer}");
        assert!(answer.contains(names), "{request:?}: {answer}");
    }
    still_serving(&broker);
}

#[test]
fn a_query_that_cannot_make_a_join_is_400_naming_the_parameter() {
    let broker = Broker::start(&[]);
    let admin = hex::encode(key(1).address());
    let cases: [(String, &str); 5] = [
        ("/pubsub/chat".into(), "binding"),
        ("/pubsub/chat?binding=nope".into(), "binding"),
        (
            "/pubsub/chat?binding=mnemonic&publishers=all".into(),
            "publishers",
        ),
        (
            format!("/pubsub/chat?binding=mnemonic&admin={admin}&addr=12"),
            "addr",
        ),
        (
            format!("/pubsub/chat?binding=mnemonic&admin={admin}&swarm-soc-fields=payload,colour"),
            "swarm-soc-fields",
        ),
    ];
    for (target, parameter) in cases {
        let refused = Ws::open(&broker, &target, &[]).err().expect("refused");
        assert_eq!(refused.status, 400, "{target}");
        assert!(
            refused.body.contains(&format!("\"{parameter}\"")),
            "{target}: {}",
            refused.body
        );
    }
    still_serving(&broker);
}

#[test]
fn a_disallowed_origin_is_403() {
    let broker = Broker::start(&["ws.allowed_origins=[\"https://good.example\"]"]);
    let refused = Ws::open(&broker, "/bps/v1", &[("Origin", "https://evil.example")])
        .err()
        .expect("refused");
    assert_eq!(refused.status, 403);
    assert!(Ws::open(&broker, "/bps/v1", &[("Origin", "https://good.example")]).is_ok());
    // A client that is not a browser sends no Origin: allowed.
    assert!(Ws::open(&broker, "/bps/v1", &[]).is_ok());
    still_serving(&broker);
}

#[test]
fn frame_faults_close_the_session_with_their_codes() {
    let broker = Broker::start(&[]);
    let mask = Some([1, 2, 3, 4]);
    // (what is sent after the upgrade, the close code)
    let mut cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("unmasked", client_frame(0x2, true, b"hello", None), 1002),
        ("text", client_frame(0x1, true, b"hello", mask), 1003),
        (
            "reserved bits",
            {
                let mut frame = client_frame(0x2, true, b"x", mask);
                frame[0] |= 0x40;
                frame
            },
            1002,
        ),
        (
            "continuation first",
            client_frame(0x0, true, b"x", mask),
            1002,
        ),
        (
            "not a frame",
            client_frame(0x2, true, b"\x05abc", mask),
            1007,
        ),
    ];
    // Only the header of a 1 GiB message: refused before a byte of it is allocated.
    let mut oversize = vec![0x82, 0x80 | 127];
    oversize.extend_from_slice(&(1u64 << 30).to_be_bytes());
    oversize.extend_from_slice(&[1, 2, 3, 4]);
    cases.push(("oversize", oversize, 1009));
    // Fragments under the bound each, over it together.
    let mut fragmented = client_frame(0x2, false, &[0u8; 4000], mask);
    fragmented.extend(client_frame(0x0, false, &[0u8; 4000], mask));
    fragmented.extend(client_frame(0x0, true, &[0u8; 4000], mask));
    cases.push(("fragmented over the bound", fragmented, 1009));
    let mut flood = Vec::new();
    for _ in 0..100 {
        flood.extend(client_frame(0x9, true, b"p", mask));
    }
    cases.push(("ping flood", flood, 1008));
    for (what, bytes, code) in cases {
        let mut raw = RawWs::upgrade(&broker, "/bps/v1");
        raw.send(&bytes).expect("send");
        assert_eq!(raw.close_code(), Some(code), "{what}");
    }
    still_serving(&broker);
}

#[test]
fn a_native_message_carries_every_frame_tcp_takes_and_nothing_larger() {
    let broker = Broker::start(&[]);
    // The largest body the default limits.frame_bytes_max takes, with its length prefix: the
    // body is no Join, so the answer is a REJECTED Ack, exactly as on TCP.
    let body_max = bps_proto::FRAME_BYTES_MAX_DEFAULT;
    let mut largest = Vec::new();
    prost::encoding::encode_varint(body_max as u64, &mut largest);
    largest.resize(largest.len() + body_max, 0xff);
    let mut ws = Ws::native(&broker);
    ws.send(&largest);
    let ack = bps_proto::decode_ack(body_of(&ws.recv_binary())).expect("an Ack");
    assert_eq!(ack.status, Status::Rejected as i32);
    // One byte more is over the bound: 1009, before any of it is taken as a frame.
    let mut over = Vec::new();
    prost::encoding::encode_varint(body_max as u64 + 1, &mut over);
    over.resize(over.len() + body_max + 1, 0xff);
    let mut ws = Ws::native(&broker);
    ws.send(&over);
    assert_eq!(ws.expect_end().code(), Some(1009));
}

#[test]
fn a_websocket_subscriber_that_never_reads_is_reset_at_the_queue_bound() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, "limits.outbound_queue_frames_max=8"]);
    let admin = key(1);
    let spec = explicit(13, &admin.address(), false);
    let (stalled, _, _) = Ws::native_join(&broker, &spec, &key(20).address());
    let stalled = stalled.into_socket();
    let (mut reader, _) = ws_subscriber(&broker, &spec, &key(21).address());
    let mut publisher = WsPublisher::join(&broker, &spec, &admin);
    let payload = [9u8; 4096];
    let mut sent = 0;
    while broker.metric("bps_queue_resets_total") == 0 {
        assert!(sent < 20_000, "the stalled subscriber was never reset");
        sent += publisher.publish(&[&payload]).len();
        // The reading subscriber keeps up and is never reset.
        let _ = reader.recv_binary();
    }
    assert_eq!(broker.metric("bps_queue_resets_total"), 1);
    drop(stalled);
    still_serving(&broker);
}
