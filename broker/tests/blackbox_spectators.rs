//! Black-box: W11's anonymous bridge sessions cannot fill a cohort (review C4). One peer
//! holds at most `limits.spectator_sessions_per_peer_per_cohort_max` of them in a cohort, and
//! together they hold at most `limits.spectator_slots_percent` of its R30 slots, so
//! publishers and viewers with an address still get in and still get every message.

mod support;

use bps_proto::{Spec, Status};
use support::ws::{Ws, WsEnd};
use support::{Broker, bodies, explicit, key, publish, publisher, recv};

/// `limits.spectator_sessions_per_peer_per_cohort_max` by default.
const DEFAULT_PER_PEER_PER_COHORT: usize = 64;

/// The close code of a FULL answer on the WebSocket listener.
const FULL: u16 = 4001;

/// An anonymous bridge session (no addr) on `spec`, an open live stream.
fn anonymous(broker: &Broker, spec: &Spec) -> Ws {
    let admin = spec.admin.expect("a live stream has an admin");
    let target = format!(
        "/pubsub/{}?binding=feed_topic&admin=0x{}",
        hex::encode(spec.topic),
        hex::encode(admin)
    );
    match Ws::open(broker, &target, &[]) {
        Ok(ws) => ws,
        Err(refused) => panic!("the upgrade was refused: {refused:?}"),
    }
}

/// The anonymous streams `/cohortz` lists for `spec`.
fn anonymous_streams(broker: &Broker, spec: &Spec) -> usize {
    let (status, body) = broker.get(&format!(
        "/cohortz?key={}&limit=1000",
        hex::encode(spec.key().as_bytes())
    ));
    // 404 until the first session's Join has created the cohort.
    if status == 404 {
        return 0;
    }
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    page["streams"].as_array().map_or(0, |streams| {
        streams
            .iter()
            .filter(|stream| stream["anonymous"] == true)
            .count()
    })
}

/// Opens `count` anonymous sessions and waits until the cohort holds them all.
fn fill(broker: &Broker, spec: &Spec, count: usize) -> Vec<Ws> {
    let sessions: Vec<Ws> = (0..count).map(|_| anonymous(broker, spec)).collect();
    support::eventually("the anonymous sessions are admitted", || {
        (anonymous_streams(broker, spec) == count).then_some(())
    });
    sessions
}

/// The next session is refused FULL for `bound`.
fn expect_full(broker: &Broker, spec: &Spec, bound: &str) {
    match anonymous(broker, spec).expect_end() {
        WsEnd::Closed(FULL, reason) => assert!(reason.contains(bound), "{reason}"),
        other => panic!("expected FULL for {bound}, got {other:?}"),
    }
}

/// The admin publishes and a viewer with an address receives it: legitimate traffic still
/// flows beside the crowd. Both streams stay open while the caller holds them.
fn named_viewer_gets_a_message(broker: &Broker, spec: &Spec) -> [bps_client::session::Session; 2] {
    let admin = key(1);
    let mut viewer = broker.join(spec, &key(2).address());
    let mut admin_session = broker.join(spec, &admin.address());
    let mut sender = publisher(spec, &admin, &admin_session);
    let sent = publish(&mut sender, &mut admin_session, &[b"still here"]);
    assert_eq!(
        recv(&mut viewer),
        bodies(&sent)[0],
        "the named viewer's message"
    );
    [viewer, admin_session]
}

#[test]
fn one_peer_holds_at_most_its_share_of_anonymous_sessions_in_a_cohort() {
    // The default bound, so that the same test runs against a broker without it.
    let broker = Broker::start(&[]);
    let spec = explicit(1, &key(1).address(), false);
    let _crowd = fill(&broker, &spec, DEFAULT_PER_PEER_PER_COHORT);
    expect_full(&broker, &spec, "anonymous sessions per peer per cohort");
    // The same address may still watch another cohort.
    let _other = fill(&broker, &explicit(2, &key(1).address(), false), 1);
    let _named = named_viewer_gets_a_message(&broker, &spec);
    assert_eq!(
        anonymous_streams(&broker, &spec),
        DEFAULT_PER_PEER_PER_COHORT
    );
}

#[test]
fn anonymous_sessions_leave_part_of_a_cohorts_slots_to_streams_with_an_address() {
    let broker = Broker::start(&[
        "limits.streams_per_cohort_max=8",
        "limits.spectator_slots_percent=50",
        "limits.streams_per_peer_per_cohort_max=8",
    ]);
    let spec = explicit(3, &key(1).address(), false);
    let _crowd = fill(&broker, &spec, 4);
    expect_full(&broker, &spec, "anonymous share of a cohort's streams");
    let _named = named_viewer_gets_a_message(&broker, &spec);
    // Three more viewers with an address fill R30: four anonymous sessions and four viewers
    // (the admin joined pending, and R30 exempts a stream that joined pending).
    let _more: Vec<_> = (3..=5)
        .map(|n| broker.join(&spec, &key(n).address()))
        .collect();
    assert_eq!(broker.join_refused(&spec, &key(9).address()), Status::Full);
}
