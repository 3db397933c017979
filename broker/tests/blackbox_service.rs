//! Black-box: the W5 service POST (`POST /pubsub/{topic}/service`, docs/PROTOCOL.md W5, W10)
//! against the real binary, as an attacker would use it: one POST costs at most one
//! signature check however many streams declare the admin's address, POSTs are rate-limited
//! per peer (429 with `Retry-After`, counted), and an invalid one is a blocklist strike.
//! Alongside each abuse, another cohort keeps delivering and `/healthz` keeps answering.

mod support;

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use bps_proto::{Binding, Hash, Kind, Spec, encode_roster};
use bps_verify::{SigningKey, sign_broadcast};
use support::{Broker, Raw, WAIT, body_of, explicit, key, publish, publisher};

/// Pending streams that declare the admin's address, opened by the attacker: each was one
/// more signature check per POST before the fix.
const DECOY_STREAMS: usize = 24;
/// Room for the decoys and the admin's own stream from one peer.
const STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=32";
/// POSTs sent as fast as possible to find the rate limit.
const FLOOD_POSTS: usize = 100;
/// The default of `limits.service_posts_per_peer_per_s`.
const POSTS_PER_PEER_PER_S: u64 = 4;
/// How long `/healthz` may take while the abuse goes on.
const HEALTHZ_WAIT: Duration = Duration::from_secs(1);
/// Tries of `/healthz`, the best of which must be within [`HEALTHZ_WAIT`].
const HEALTHZ_TRIES: usize = 3;

/// The W5 target of `spec` (its query carries the spec as on the GET), plus `extra`.
fn service_target(spec: &Spec, extra: &str) -> String {
    service_target_at(&hex::encode(spec.topic), spec, extra)
}

/// The W5 target of `spec` with its topic spelled `segment` in the path.
fn service_target_at(segment: &str, spec: &Spec, extra: &str) -> String {
    let binding = match spec.binding {
        Binding::Anchor => "anchor",
        Binding::SocId => "soc_id",
        Binding::Owner => "owner",
        Binding::FeedTopic => "feed_topic",
        Binding::Mnemonic => "mnemonic",
    };
    let mut target = format!("/pubsub/{segment}/service?binding={binding}");
    if let Some(admin) = spec.admin {
        target.push_str(&format!("&admin=0x{}", hex::encode(admin)));
    }
    target.push_str(extra);
    target
}

/// W4's inline message, signed by `key` under `challenge`: `kind ‖ index ‖ sig ‖ span ‖
/// payload`; with the frame a native client would have sent.
fn signed_message(
    key: &SigningKey,
    kind: Kind,
    spec: &Spec,
    challenge: &Hash,
    index: u64,
    payload: &[u8],
) -> (Vec<u8>, bytes::Bytes) {
    let signed = sign_broadcast(key, kind, &spec.topic, challenge, index, payload);
    let mut message = vec![kind as i32 as u8];
    message.extend_from_slice(&index.to_be_bytes());
    message.extend_from_slice(&signed.chunk[32..]);
    (message, body_of(&signed.frame))
}

/// One POST from `source`: the status and the whole answer.
fn post(broker: &Broker, source: Ipv4Addr, target: &str, body: &[u8]) -> (u16, String) {
    let mut raw = Raw::connect(broker.ws(), Some(IpAddr::V4(source)), None);
    let mut request = format!(
        "POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    raw.send(&request).expect("send the POST");
    let mut stream = raw.into_stream();
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"));
    (status, answer)
}

/// `/healthz` answers 200 within [`HEALTHZ_WAIT`], at the best of [`HEALTHZ_TRIES`] tries:
/// a broker kept busy by the abuse misses every one, a loaded test machine's one hiccup not.
fn assert_healthy(broker: &Broker) {
    let mut took = Vec::new();
    for _ in 0..HEALTHZ_TRIES {
        let started = Instant::now();
        let (status, body) = broker.get("/healthz");
        assert_eq!(status, 200, "{body}");
        took.push(started.elapsed());
        if started.elapsed() <= HEALTHZ_WAIT {
            return;
        }
    }
    panic!("/healthz took {took:?}, over {HEALTHZ_WAIT:?} every time");
}

/// Another cohort, on the same broker, publishes and its subscriber gets every chunk.
fn assert_other_cohort_delivers(broker: &Broker, topic: u8, payloads: &[&[u8]]) {
    let admin = key(50 + topic);
    let spec = explicit(topic, &admin.address(), false);
    let mut viewer = broker.join(&spec, &key(90).address());
    let mut session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    let sent = publish(&mut admin_publisher, &mut session, payloads);
    support::expect_frames(&mut viewer, &support::bodies(&sent));
}

#[test]
fn one_post_costs_one_verification_however_many_streams_declare_the_admin() {
    let broker = Broker::start(&[STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = explicit(31, &admin.address(), false);
    let mut viewer = broker.join(&spec, &key(9).address());
    let admin_session = broker.join(&spec, &admin.address());
    let challenge = *admin_session.challenge();
    // The attacker's decoys: pending streams that only declare the admin's address.
    let decoys: Vec<_> = (0..DECOY_STREAMS)
        .map(|_| broker.join(&spec, &admin.address()))
        .collect();
    let attacker = Ipv4Addr::new(127, 0, 0, 2);
    let roster = encode_roster(&[key(2).address()]);
    let (forged, _) = signed_message(&key(3), Kind::Roster, &spec, &challenge, 0, &roster);
    // Naming no admin session while several are pending: no guess, no check, 409.
    let before = broker.metric("bps_verify_requests_total");
    let (status, answer) = post(&broker, attacker, &service_target(&spec, ""), &forged);
    let checks = broker.metric("bps_verify_requests_total") - before;
    assert_eq!(
        checks,
        0,
        "an unnamed forged POST cost {checks} signature checks with {} streams declaring the admin",
        DECOY_STREAMS + 1
    );
    assert_eq!(status, 409, "{answer}");
    assert!(answer.contains("challenge"), "{answer}");
    // Naming one (the attacker may know any of the challenges): one check, on the pool.
    let named = format!("&challenge={}", hex::encode(challenge));
    for round in 1..=2 {
        let before = broker.metric("bps_verify_requests_total");
        let results_before = broker.metric("bps_verify_jobs_total");
        let (status, answer) = post(&broker, attacker, &service_target(&spec, &named), &forged);
        assert_eq!(status, 400, "{answer}");
        assert_eq!(
            broker.metric("bps_verify_jobs_total") - results_before,
            1,
            "the check went through the verification jobs, not inline on the core"
        );
        let checks = broker.metric("bps_verify_requests_total") - before;
        assert_eq!(
            checks,
            1,
            "forged POST {round} cost {checks} signature checks with {} streams declaring the admin",
            DECOY_STREAMS + 1
        );
        assert_healthy(&broker);
    }
    assert_other_cohort_delivers(&broker, 32, &[b"alongside", b"the forged posts"]);
    // The admin's own POST, naming its session's challenge, is one check and accepted.
    let (message, native) = signed_message(&admin, Kind::Roster, &spec, &challenge, 0, &roster);
    let before = broker.metric("bps_verify_requests_total");
    let (status, answer) = post(
        &broker,
        Ipv4Addr::LOCALHOST,
        &service_target(&spec, &named),
        &message,
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(broker.metric("bps_verify_requests_total") - before, 1);
    assert_eq!(
        support::recv(&mut viewer),
        native,
        "relayed on the admin's stream"
    );
    drop(decoys);
}

#[test]
fn service_posts_are_rate_limited_per_peer_with_retry_after() {
    let broker = Broker::start(&[]);
    let spec = explicit(33, &key(1).address(), false);
    let target = service_target(&spec, "");
    let (message, _) = signed_message(&key(1), Kind::Eos, &spec, &[0; 32], 0, &[]);
    let flooder = Ipv4Addr::new(127, 0, 0, 3);
    let started = Instant::now();
    let mut limited = 0;
    let mut served = 0;
    for _ in 0..FLOOD_POSTS {
        let (status, answer) = post(&broker, flooder, &target, &message);
        if status == 429 {
            assert!(answer.contains("Retry-After: "), "{answer}");
            limited += 1;
        } else {
            // No such cohort: answered without any signature check.
            assert_eq!(status, 404, "{answer}");
            served += 1;
        }
    }
    let elapsed_s = started.elapsed().as_secs();
    assert!(
        limited > 0,
        "{FLOOD_POSTS} POSTs in {elapsed_s} s: none refused"
    );
    let allowed = POSTS_PER_PEER_PER_S * (elapsed_s + 2);
    assert!(
        served <= allowed,
        "{served} POSTs served in {elapsed_s} s: at most {allowed} expected"
    );
    assert_eq!(
        broker.metric("bps_ws_service_posts_limited_total"),
        limited,
        "every 429 is counted"
    );
    // Another peer is not held to the flooder's rate, and the broker is responsive.
    let (status, answer) = post(&broker, Ipv4Addr::new(127, 0, 0, 4), &target, &message);
    assert_eq!(status, 404, "{answer}");
    assert_healthy(&broker);
    assert_other_cohort_delivers(&broker, 34, &[b"alongside the flood"]);
}

#[test]
fn an_invalid_post_is_a_blocklist_strike() {
    let broker = Broker::start(&[
        "limits.join_timeouts_per_peer_max=3",
        "timeouts.blocklist_join_timeout_ms=60000",
    ]);
    let admin = key(1);
    let spec = explicit(35, &admin.address(), false);
    let admin_session = broker.join(&spec, &admin.address());
    let challenge = *admin_session.challenge();
    let forger = Ipv4Addr::new(127, 0, 0, 5);
    let target = service_target(&spec, "");
    let roster = encode_roster(&[key(2).address()]);
    for index in 0..3 {
        let (forged, _) = signed_message(&key(3), Kind::Roster, &spec, &challenge, index, &roster);
        let (status, answer) = post(&broker, forger, &target, &forged);
        assert_eq!(status, 400, "forged POST {index}: {answer}");
    }
    let (forged, _) = signed_message(&key(3), Kind::Roster, &spec, &challenge, 3, &roster);
    let (status, answer) = post(&broker, forger, &target, &forged);
    assert_eq!(status, 403, "three strikes blocklist the forger: {answer}");
    assert_eq!(broker.metric("bps_ws_service_strikes_total"), 3);
    // The admin, another peer, is served as before.
    let (message, _) = signed_message(&admin, Kind::Roster, &spec, &challenge, 0, &roster);
    let (status, answer) = post(&broker, Ipv4Addr::LOCALHOST, &target, &message);
    assert_eq!(status, 200, "{answer}");
    assert_healthy(&broker);
}

#[test]
fn a_post_names_its_topic_in_one_path_segment_as_the_get_does() {
    let broker = Broker::start(&[]);
    let admin = key(1);
    // A named topic with a slash: `GET /pubsub/a/b` is no endpoint, `a%2Fb` is its spelling.
    let spec = Spec {
        topic: bps_proto::keccak256(b"a/b"),
        ..explicit(0, &admin.address(), false)
    };
    let mut viewer = broker.join(&spec, &key(9).address());
    let admin_session = broker.join(&spec, &admin.address());
    let challenge = *admin_session.challenge();
    let roster = encode_roster(&[key(2).address()]);
    let (message, native) = signed_message(&admin, Kind::Roster, &spec, &challenge, 0, &roster);
    let mut get = Raw::connect(broker.ws(), None, None);
    get.send(b"GET /pubsub/a/b?binding=feed_topic HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        .expect("send the GET");
    let mut answer = String::new();
    let mut stream = get.into_stream();
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let _ = stream.read_to_string(&mut answer);
    assert!(
        answer.starts_with("HTTP/1.1 404"),
        "GET /pubsub/a/b: {answer}"
    );
    let (status, answer) = post(
        &broker,
        Ipv4Addr::LOCALHOST,
        &service_target_at("a/b", &spec, ""),
        &message,
    );
    assert_eq!(status, 404, "POST /pubsub/a/b/service: {answer}");
    let (status, answer) = post(
        &broker,
        Ipv4Addr::LOCALHOST,
        &service_target_at("a%2Fb", &spec, ""),
        &message,
    );
    assert_eq!(status, 200, "POST /pubsub/a%2Fb/service: {answer}");
    assert_eq!(
        support::recv(&mut viewer),
        native,
        "relayed on the admin's stream"
    );
}
