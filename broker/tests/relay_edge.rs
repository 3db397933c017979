//! Black-box: edge mode (docs/SCALING.md) with real `bps-broker` processes on loopback. A
//! root and its edges (`relay.upstreams`), publishers always at the root, subscribers at the
//! edges verifying every frame end to end (R41): a live stream reaches every subscriber once
//! and byte for byte while the root delivers once per edge; a spectator-jam's roster comes
//! first at an edge (R22), a revoked publisher reaches no edge subscriber (R24) and a
//! spectator at an edge that a roster names is closed after it; EOS ends the edges' streams
//! (R21); history is served to late joiners at an edge from one upstream Join (D11); an
//! emptied edge cohort keeps its upstream for the linger; a tree of depth 2 delivers; loops
//! are refused (at start for a broker naming itself, by the relay path for A ⇄ B); a
//! restarted root and a killed edge are survived.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use bps_client::client::{Connection, Output, SubOptions, run_pub, run_sub};
use bps_client::publisher::{Publisher, PublisherConfig};
use bps_client::session::Session;
use bps_client::subscriber::{Event, Subscriber};
use bps_proto::{Address, Spec};
use bytes::Bytes;
use support::relay::{self, LineSink};
use support::{
    Broker, End, WAIT, bodies, body_of, expect_data, expect_end, expect_nothing, expect_roster,
    explicit, flush, key, publish, publisher, recv,
};

/// A spectator's address: no key of the test signs with it.
fn spectator(n: u8) -> Address {
    key(100 + n).address()
}

/// `count` payloads `prefix 0`, `prefix 1`, ...
fn payloads(prefix: &str, count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|n| format!("{prefix} {n}").into_bytes())
        .collect()
}

fn slices(payloads: &[Vec<u8>]) -> Vec<&[u8]> {
    payloads.iter().map(Vec::as_slice).collect()
}

/// Receives `payloads.len()` frames on `session`, each verified end to end as DATA of
/// `owner` at `first_index` on; returns their bytes.
fn receive_data(
    session: &mut Session,
    subscriber: &mut Subscriber,
    owner: &Address,
    first_index: u64,
    payloads: &[Vec<u8>],
) -> Vec<Bytes> {
    payloads
        .iter()
        .enumerate()
        .map(|(offset, payload)| {
            let body = recv(session);
            expect_data(
                subscriber,
                body.clone(),
                owner,
                first_index + offset as u64,
                payload,
            );
            body
        })
        .collect()
}

/// The one labelled `bps_cohort_{name}_total` series of a broker holding one cohort.
fn cohort_counter(broker: &Broker, name: &str) -> u64 {
    let prefix = format!("bps_cohort_{name}_total{{");
    let metrics = broker.metrics();
    let series: Vec<(&String, &f64)> = metrics
        .iter()
        .filter(|(series, _)| series.starts_with(&prefix))
        .collect();
    assert_eq!(series.len(), 1, "one cohort's {prefix}: {series:?}");
    *series[0].1 as u64
}

/// Waits until `broker`'s counter `name` is at least `at_least`.
fn wait_at_least(broker: &Broker, name: &str, at_least: u64) -> u64 {
    support::eventually(&format!("{name} >= {at_least}"), || {
        let value = broker.metric(name);
        (value >= at_least).then_some(value)
    })
}

#[test]
fn a_live_stream_reaches_every_subscriber_once_and_an_edge_gets_the_roots_bytes() {
    let root = relay::root(&[]);
    let edge1 = relay::edge(&[root.listen()], &[]);
    let edge2 = relay::edge(&[root.listen()], &[]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let mut at_root: Vec<Session> = (0..2).map(|n| root.join(&spec, &spectator(n))).collect();
    let mut at_edges = [
        edge1.join(&spec, &spectator(10)),
        edge1.join(&spec, &spectator(11)),
        edge2.join(&spec, &spectator(12)),
    ];
    // The admin, two subscribers and one upstream Join per edge.
    root.wait_metric("bps_joins_ok_total", 5);
    edge1.wait_gauge("bps_relay_upstreams_attached", 1);
    edge2.wait_gauge("bps_relay_upstreams_attached", 1);

    let n = 200;
    let messages = payloads("live", n);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&messages),
    ));
    for (which, session) in at_root.iter_mut().chain(at_edges.iter_mut()).enumerate() {
        let mut subscriber = Subscriber::new(spec);
        let got = receive_data(session, &mut subscriber, &admin.address(), 0, &messages);
        assert_eq!(
            got, sent,
            "subscriber {which}: the published bytes, in order"
        );
        expect_nothing(session);
    }
    let n = n as u64;
    assert_eq!(
        cohort_counter(&root, "deliveries"),
        n * (2 + 2),
        "the root delivers once per local subscriber and once per edge"
    );
    root.assert_metrics(&[("bps_deliveries_total", n * 4), ("bps_joins_ok_total", 5)]);
    edge1.assert_metrics(&[
        ("bps_deliveries_total", n * 2),
        ("bps_upstream_invalid_total", 0),
        ("bps_relay_upstream_joins_total", 1),
        ("bps_relay_upstream_reconnects_total", 0),
        ("bps_relay_upstream_failures_total", 0),
        ("bps_relay_forwarded_total", n),
    ]);
    edge2.assert_metrics(&[
        ("bps_deliveries_total", n),
        ("bps_upstream_invalid_total", 0),
    ]);
}

#[test]
fn a_spectator_jam_at_the_edges_roster_first_then_the_member_until_it_is_revoked() {
    let root = relay::root(&[]);
    let edge1 = relay::edge(&[root.listen()], &[]);
    let edge2 = relay::edge(&[root.listen()], &[]);
    let (admin, member) = (key(1), key(2));
    let spec = explicit(2, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher
        .enqueue_roster(&[member.address()])
        .expect("a roster");
    let granting = body_of(
        &flush(&mut admin_publisher, &mut admin_session)
            .pop()
            .expect("the claim and the roster")
            .signed
            .frame,
    );
    root.wait_metric("bps_accepted_roster_total", 1);

    let mut early = vec![
        edge1.join(&spec, &spectator(10)),
        edge2.join(&spec, &spectator(11)),
    ];
    let mut views: Vec<Subscriber> = early.iter().map(|_| Subscriber::new(spec)).collect();
    for (session, view) in early.iter_mut().zip(&mut views) {
        let first = recv(session);
        assert_eq!(first, granting, "the roster comes first at an edge (R22)");
        assert_eq!(expect_roster(view, first), vec![member.address()]);
    }

    let mut member_session = root.join(&spec, &member.address());
    let mut member_view = Subscriber::new(spec);
    let roster = expect_roster(&mut member_view, recv(&mut member_session));
    let mut member_publisher = publisher(&spec, &member, &member_session);
    member_publisher.on_roster(&roster);
    let granted = payloads("granted", 3);
    let sent = bodies(&publish(
        &mut member_publisher,
        &mut member_session,
        &slices(&granted),
    ));
    for (session, view) in early.iter_mut().zip(&mut views) {
        let got = receive_data(session, view, &member.address(), 0, &granted);
        assert_eq!(got, sent);
    }

    // A spectator joining an edge late gets the roster in force first, from the edge.
    let mut late = edge2.join(&spec, &spectator(12));
    let mut late_view = Subscriber::new(spec);
    let first = recv(&mut late);
    assert_eq!(first, granting, "a late spectator at an edge: roster first");
    assert_eq!(expect_roster(&mut late_view, first), vec![member.address()]);
    early.push(late);
    views.push(late_view);

    revoke_then_check_the_edges(
        (&root, &spec),
        (&mut admin_publisher, &mut admin_session),
        (&mut member_publisher, &mut member_session),
        (&mut early, &mut views),
    );
}

/// The admin revokes the member (an empty roster); the member's publisher, not told, goes
/// on publishing; the root drops those frames and no edge subscriber gets them: each gets
/// the reduced roster, then the admin's next DATA, then nothing.
fn revoke_then_check_the_edges(
    (root, spec): (&Broker, &Spec),
    (admin_publisher, admin_session): (&mut Publisher, &mut Session),
    (member_publisher, member_session): (&mut Publisher, &mut Session),
    (at_edges, views): (&mut [Session], &mut [Subscriber]),
) {
    admin_publisher.enqueue_roster(&[]).expect("a roster");
    let reduced = body_of(&flush(admin_publisher, admin_session)[0].signed.frame);
    for (session, view) in at_edges.iter_mut().zip(views.iter_mut()) {
        let got = recv(session);
        assert_eq!(got, reduced, "the reduced roster reaches the edges");
        assert!(expect_roster(view, got).is_empty());
    }
    let revoked = publish(member_publisher, member_session, &[b"revoked"]);
    assert_eq!(revoked.len(), 1, "the member's publisher still signs");
    root.wait_metric("bps_drop_revoked_in_grace_total", 1);
    let after = bodies(&publish(admin_publisher, admin_session, &[b"after"]));
    let admin = spec.admin.expect("an explicit spec");
    for (session, view) in at_edges.iter_mut().zip(views.iter_mut()) {
        let got = recv(session);
        assert_eq!(got, after[0], "the admin's DATA, not the revoked member's");
        expect_data(view, got, &admin, 0, b"after");
        expect_nothing(session);
    }
}

#[test]
fn a_spectator_at_an_edge_that_a_later_roster_names_is_closed_after_that_roster() {
    let root = relay::root(&[]);
    let edge = relay::edge(&[root.listen()], &[]);
    let (admin, named) = (key(1), key(3));
    let spec = explicit(9, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let mut to_be_named = edge.join(&spec, &named.address());
    let mut bystander = edge.join(&spec, &spectator(10));
    edge.wait_gauge("bps_relay_upstreams_attached", 1);
    admin_publisher
        .enqueue_roster(&[named.address()])
        .expect("a roster");
    let naming = body_of(
        &flush(&mut admin_publisher, &mut admin_session)
            .pop()
            .expect("the claim and the roster")
            .signed
            .frame,
    );
    let (end, frames) = expect_end(&mut to_be_named);
    assert_eq!(frames, vec![naming.clone()], "the roster, then the close");
    assert_eq!(
        end,
        End::Eof,
        "a graceful close: it may publish at the root"
    );
    assert_eq!(recv(&mut bystander), naming);
    expect_nothing(&mut bystander);
}

#[test]
fn eos_at_the_root_reaches_the_edge_subscribers_and_ends_their_streams() {
    let root = relay::root(&[]);
    let edge1 = relay::edge(&[root.listen()], &[]);
    let edge2 = relay::edge(&[root.listen()], &[]);
    let admin = key(1);
    let spec = explicit(3, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let mut at_root = root.join(&spec, &spectator(0));
    let mut at_edges = [
        edge1.join(&spec, &spectator(10)),
        edge1.join(&spec, &spectator(11)),
        edge2.join(&spec, &spectator(12)),
    ];
    edge1.wait_gauge("bps_relay_upstreams_attached", 1);
    edge2.wait_gauge("bps_relay_upstreams_attached", 1);
    let mut views: Vec<Subscriber> = at_edges.iter().map(|_| Subscriber::new(spec)).collect();
    let hello = payloads("hello", 1);
    publish(&mut admin_publisher, &mut admin_session, &slices(&hello));
    for (session, view) in at_edges.iter_mut().zip(&mut views) {
        receive_data(session, view, &admin.address(), 0, &hello);
    }
    recv(&mut at_root);

    admin_publisher.enqueue_eos().expect("EOS");
    let eos = body_of(
        &flush(&mut admin_publisher, &mut admin_session)[0]
            .signed
            .frame,
    );
    let (_, at_root_frames) = expect_end(&mut at_root);
    assert_eq!(at_root_frames, vec![eos.clone()]);
    for (which, (session, view)) in at_edges.iter_mut().zip(&mut views).enumerate() {
        let (end, frames) = expect_end(session);
        assert_eq!(
            frames,
            vec![eos.clone()],
            "edge subscriber {which}: the EOS"
        );
        assert_eq!(view.on_frame(frames[0].clone()), Event::Eos);
        assert_eq!(end, End::Eof, "edge subscriber {which}: a clean end");
    }
    for edge in [&edge1, &edge2] {
        edge.wait_gauge("bps_cohorts_live", 0);
        edge.wait_gauge("bps_relay_upstreams_attached", 0);
    }
}

fn with_history(spec: Spec) -> Spec {
    Spec {
        history: true,
        ..spec
    }
}

#[test]
fn late_joiners_at_an_edge_get_the_backlog_in_order_from_one_upstream_join() {
    let root = relay::root(&[]);
    let edge = relay::edge(&[root.listen()], &[]);
    let admin = key(1);
    let spec = with_history(explicit(4, &admin.address(), false));
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let k = 30;
    let backlog = payloads("backlog", k);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&backlog),
    ));
    root.wait_metric("bps_accepted_data_total", k as u64);
    root.wait_gauge("bps_history_frames", k as u64);
    root.assert_metrics(&[("bps_joins_ok_total", 1)]);

    let mut first = edge.join(&spec, &spectator(10));
    let mut first_view = Subscriber::new(spec);
    let got = receive_data(&mut first, &mut first_view, &admin.address(), 0, &backlog);
    assert_eq!(got, sent, "the first late joiner: the backlog, in order");
    expect_nothing(&mut first);
    root.assert_metrics(&[("bps_joins_ok_total", 2)]);

    let mut second = edge.join(&spec, &spectator(11));
    let mut second_view = Subscriber::new(spec);
    let got = receive_data(&mut second, &mut second_view, &admin.address(), 0, &backlog);
    assert_eq!(got, sent, "the second late joiner: the backlog, in order");
    expect_nothing(&mut second);
    root.assert_metrics(&[
        ("bps_joins_ok_total", 2),
        ("bps_history_frames_served_total", k as u64),
    ]);
    assert_eq!(
        cohort_counter(&root, "joins_ok"),
        2,
        "one Join from the edge for both of its subscribers"
    );

    let live = payloads("live", 1);
    let live_sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&live),
    ));
    for (session, view) in [
        (&mut first, &mut first_view),
        (&mut second, &mut second_view),
    ] {
        let got = receive_data(session, view, &admin.address(), k as u64, &live);
        assert_eq!(got, live_sent);
        expect_nothing(session);
    }
    edge.assert_metrics(&[("bps_relay_upstream_joins_total", 1)]);
}

#[test]
fn a_tree_of_depth_two_delivers_every_frame_to_the_second_edge() {
    let root = relay::root(&[]);
    let edge1 = relay::edge(&[root.listen()], &[]);
    let edge2 = relay::edge(&[edge1.listen()], &[]);
    let admin = key(1);
    let spec = explicit(5, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let mut far = edge2.join(&spec, &spectator(20));
    edge2.wait_gauge("bps_relay_upstreams_attached", 1);
    edge1.wait_gauge("bps_relay_upstreams_attached", 1);
    root.wait_metric("bps_joins_ok_total", 2);

    let messages = payloads("deep", 100);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&messages),
    ));
    let mut view = Subscriber::new(spec);
    let got = receive_data(&mut far, &mut view, &admin.address(), 0, &messages);
    assert_eq!(got, sent, "two relays later, the root's bytes");
    expect_nothing(&mut far);
    // edge1 delivers only to edge2's upstream stream; the root only to edge1's.
    edge1.assert_metrics(&[("bps_deliveries_total", 100)]);
    root.assert_metrics(&[("bps_deliveries_total", 100)]);
}

#[test]
fn an_emptied_edge_cohort_keeps_its_upstream_for_the_linger_then_closes_it() {
    let linger = Duration::from_millis(1500);
    let root = relay::root(&[]);
    let linger_set = format!("relay.upstream_linger_ms={}", linger.as_millis());
    let edge = relay::edge(&[root.listen()], &[&linger_set]);
    let admin = key(1);
    let spec = explicit(10, &admin.address(), false);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    drop(edge.join(&spec, &spectator(10)));
    edge.wait_gauge("bps_relay_upstreams_attached", 1);
    let left_at = Instant::now();
    // Within the linger a new subscriber rides the same upstream.
    let mut again = edge.join(&spec, &spectator(11));
    let messages = payloads("again", 2);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&messages),
    ));
    let mut view = Subscriber::new(spec);
    let got = receive_data(&mut again, &mut view, &admin.address(), 0, &messages);
    assert_eq!(got, sent);
    assert!(left_at.elapsed() < linger, "the test outran the linger");
    edge.assert_metrics(&[("bps_relay_upstream_joins_total", 1)]);
    drop(again);
    let emptied_at = Instant::now();
    edge.wait_gauge("bps_relay_upstreams_attached", 0);
    assert!(
        emptied_at.elapsed() >= linger,
        "closed {:?} after the cohort emptied, before the linger",
        emptied_at.elapsed()
    );
    edge.wait_gauge("bps_cohorts_live", 0);
    // The root sees the edge's connection go: only the admin's is left.
    root.wait_gauge("bps_connections_open", 1);
}

#[test]
fn a_broker_naming_its_own_listener_upstream_does_not_start() {
    let listen = relay::free_port();
    let sets = relay::tree_sets(&[&relay::upstreams(&[listen])]);
    let refused = match relay::launch(listen, &sets) {
        Ok(broker) => panic!("the broker started\n{}", broker.log()),
        Err(refused) => refused,
    };
    let status = refused.status.expect("the broker exited");
    // Exit code 1: a refused config (broker/src/main.rs).
    assert_eq!(status.code(), Some(1), "exit {status}\n{}", refused.log);
    let entry = format!("relay.upstreams = \"{listen}\"");
    assert!(
        refused.log.contains(&entry) && refused.log.contains("own listener"),
        "the error names relay.upstreams and why:\n{}",
        refused.log
    );
}

#[test]
fn a_loop_of_two_edges_is_refused_and_an_ordinary_tree_still_delivers() {
    let (a_listen, b_listen) = (relay::free_port(), relay::free_port());
    let a_sets = relay::tree_sets(&[&relay::upstreams(&[b_listen])]);
    let b_sets = relay::tree_sets(&[&relay::upstreams(&[a_listen])]);
    let a = relay::launch(a_listen, &a_sets).expect("A starts");
    let b = relay::launch(b_listen, &b_sets).expect("B starts");
    let admin = key(1);
    let spec = explicit(6, &admin.address(), false);
    // A's Join to B carries [A]; B's to A carries [A, B]: A refuses it.
    let _at_a = a.join(&spec, &spectator(10));
    wait_at_least(&b, "bps_relay_upstream_failures_total", 1);
    wait_at_least(&a, "bps_joins_rejected_total", 1);
    support::eventually("B logs the failed upstream", || {
        b.log().contains("relay upstream failed").then_some(())
    });
    // A took the test's spectator and refused B; B took A's upstream and holds none itself.
    a.assert_metrics(&[("bps_joins_ok_total", 1)]);
    b.assert_metrics(&[
        ("bps_joins_ok_total", 1),
        ("bps_relay_upstreams_attached", 0),
    ]);
    let log = b.log();
    let failed = log
        .lines()
        .find(|line| line.contains("relay upstream failed"))
        .expect("the line was seen");
    assert!(
        failed.contains("WARN") && failed.contains(&a_listen.to_string()),
        "a warning naming A: {failed}"
    );
    eprintln!("B's log of the refused loop: {failed}");

    // A root and an edge beside the loop: the relay path refuses only loops.
    let root = relay::root(&[]);
    let edge = relay::edge(&[root.listen()], &[]);
    let mut admin_session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let mut at_edge = edge.join(&spec, &spectator(11));
    edge.wait_gauge("bps_relay_upstreams_attached", 1);
    let messages = payloads("tree", 10);
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &slices(&messages),
    ));
    let mut view = Subscriber::new(spec);
    let got = receive_data(&mut at_edge, &mut view, &admin.address(), 0, &messages);
    assert_eq!(got, sent);
    edge.assert_metrics(&[("bps_relay_upstream_failures_total", 0)]);
    root.assert_metrics(&[("bps_joins_rejected_total", 0)]);
}

/// What an edge subscriber saw of the admin's DATA: indices in order, and the gaps.
#[derive(Default)]
struct Seen {
    indices: Vec<u64>,
    gaps: u64,
}

/// Receives on `session` until DATA `last` arrives (within `wait`), verifying each frame
/// (R41) and checking its payload is `m{index}`; nothing may be dropped (a duplicate would
/// be).
fn receive_until(session: &mut Session, spec: Spec, last: u64, wait: Duration) -> Seen {
    let mut subscriber = Subscriber::new(spec);
    let mut seen = Seen::default();
    let deadline = Instant::now() + wait;
    while seen.indices.last() != Some(&last) {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "index {last} not within {wait:?}");
        let body = match session.recv(left.min(WAIT)) {
            Ok(Some(body)) => body,
            Ok(None) => continue,
            Err(error) => panic!("an edge subscriber's stream ended: {error}"),
        };
        let received = subscriber.receive(body);
        match received.event {
            Event::Data { index, payload, .. } => {
                assert_eq!(payload, format!("m{index}").as_bytes());
                seen.gaps += u64::from(received.gap.is_some());
                seen.indices.push(index);
            }
            other => panic!("expected DATA, saw {other:?}"),
        }
    }
    seen
}

/// A publishing run of `bps_client` (reconnecting itself) for the admin of `spec` at
/// `target`, fed lines by the returned sender; it ends when the sender is dropped and
/// everything is written.
fn admin_run(
    target: String,
    spec: Spec,
    admin: &bps_verify::SigningKey,
) -> (mpsc::Sender<Vec<u8>>, thread::JoinHandle<()>) {
    let publisher =
        Publisher::new(spec, admin.clone(), PublisherConfig::default()).expect("the admin's key");
    let (lines_tx, lines) = mpsc::channel();
    let connection = Connection {
        targets: vec![target],
        network_id: 1,
        session: support::session_config(),
        reconnect: true,
        timeout: Some(Duration::from_secs(45)),
    };
    let run = thread::spawn(move || {
        let mut output = Output {
            out: std::io::sink(),
            err: std::io::sink(),
        };
        let options = bps_client::client::PubOptions::default();
        run_pub(&connection, options, publisher, Some(lines), &mut output)
            .expect("the admin's run publishes every line");
    });
    (lines_tx, run)
}

#[test]
fn edge_subscribers_ride_out_a_root_restart_with_no_duplicate_and_at_most_one_gap() {
    let root_listen = relay::free_port();
    let root_sets = relay::tree_sets(&[]);
    let mut root = relay::launch(root_listen, &root_sets).expect("the root starts");
    let edge = relay::edge(&[root_listen], &[]);
    let admin = key(1);
    let spec = explicit(7, &admin.address(), false);
    let mut at_edge = [
        edge.join(&spec, &spectator(10)),
        edge.join(&spec, &spectator(11)),
    ];
    edge.wait_gauge("bps_relay_upstreams_attached", 1);
    let (lines, run) = admin_run(root_listen.to_string(), spec, &admin);
    let total = 150_u64;
    for index in 0..total {
        if index == total / 3 {
            drop(root);
            root = relay::launch(root_listen, &root_sets).expect("the root restarts");
        }
        lines
            .send(format!("m{index}").into_bytes())
            .expect("the admin's run reads lines");
        thread::sleep(Duration::from_millis(20));
    }
    drop(lines);
    for (which, session) in at_edge.iter_mut().enumerate() {
        let seen = receive_until(session, spec, total - 1, Duration::from_secs(30));
        assert!(
            seen.indices.windows(2).all(|pair| pair[0] < pair[1]),
            "subscriber {which}: no duplicate, in order: {:?}",
            seen.indices
        );
        assert!(seen.gaps <= 1, "subscriber {which}: {} gaps", seen.gaps);
        eprintln!(
            "edge subscriber {which}: {} of {total} frames, {} gap",
            seen.indices.len(),
            seen.gaps
        );
        expect_nothing(session);
    }
    run.join().expect("the admin's run");
    assert!(
        edge.metric("bps_relay_upstream_joins_total") >= 2
            && edge.metric("bps_relay_upstream_reconnects_total") >= 1,
        "the edge joined the restarted root\n{}",
        edge.log()
    );
    drop(root);
}

/// The admin publishing `m{index}` every 20 ms at `root` until `stop`; returns when each
/// index was written.
fn steady_admin(
    root: &Broker,
    spec: Spec,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<Vec<Instant>> {
    let admin = key(1);
    let mut session = root.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &session);
    thread::spawn(move || {
        let mut written = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let payload = format!("m{}", written.len());
            publish(&mut admin_publisher, &mut session, &[payload.as_bytes()]);
            written.push(Instant::now());
            thread::sleep(Duration::from_millis(20));
        }
        written
    })
}

/// A `bps_client` subscribing run given `targets`, its JSON lines on the returned channel.
fn client_sub(targets: Vec<String>, spec: Spec, addr: Address) -> Lines {
    let (sink, lines) = LineSink::new();
    let connection = Connection {
        targets,
        network_id: 1,
        session: support::session_config(),
        reconnect: true,
        timeout: Some(Duration::from_secs(20)),
    };
    let options = SubOptions {
        spec,
        addr,
        json: true,
        count: None,
    };
    thread::spawn(move || {
        let mut output = Output {
            out: sink,
            err: std::io::sink(),
        };
        // Ends at its first line after the test dropped the receiver, or at its timeout.
        let _ = run_sub(&connection, &options, &mut output);
    });
    lines
}

type Lines = Receiver<(Instant, String)>;

/// A client's view across its streams: when it joined, the DATA indices, and the gaps.
#[derive(Default)]
struct ClientView {
    joined: Vec<Instant>,
    indices: Vec<u64>,
    gaps: u64,
}

impl ClientView {
    /// Reads lines until `done` holds (within [`WAIT`]), or every line within `wait` when
    /// `done` never holds.
    fn read(&mut self, lines: &Lines, wait: Duration, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + wait;
        while !done(self) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some((at, line)) = relay::next_json(lines, left) else {
                return;
            };
            match line["kind"].as_str() {
                Some("joined") => self.joined.push(at),
                Some("gap") => self.gaps += 1,
                Some("data") => {
                    let index = line["index"].as_u64().expect("an index");
                    assert_eq!(line["payload_utf8"], format!("m{index}"));
                    self.indices.push(index);
                }
                _ => panic!("unexpected line {line}"),
            }
        }
    }
}

#[test]
fn clients_given_two_edges_move_to_the_other_when_theirs_is_killed() {
    let root = relay::root(&[]);
    let mut edges: Vec<Option<Broker>> = (0..2)
        .map(|_| Some(relay::edge(&[root.listen()], &[])))
        .collect();
    let spec = explicit(8, &key(1).address(), false);
    let targets: Vec<String> = edges.iter().flatten().map(Broker::target).collect();
    let route = bps_client::route::Route::new(&targets, &spec).expect("a ranked list");
    let first = targets
        .iter()
        .position(|target| target == route.current())
        .expect("the root of the list is listed");
    // The other edge holds no stream of the cohort until the clients come: its upstream
    // opens with their Joins.
    let clients: Vec<Lines> = (0..2)
        .map(|n| client_sub(targets.clone(), spec, spectator(10 + n)))
        .collect();
    let mut views: Vec<ClientView> = clients.iter().map(|_| ClientView::default()).collect();
    for (lines, view) in clients.iter().zip(&mut views) {
        view.read(lines, WAIT, |view| !view.joined.is_empty());
        assert_eq!(view.joined.len(), 1, "joined");
    }
    let chosen = edges[first].as_ref().expect("running");
    chosen.wait_gauge("bps_relay_upstreams_attached", 1);
    chosen.wait_metric("bps_joins_ok_total", 2);
    failover_and_check(&root, spec, (&mut edges, first), (&clients, &mut views));
    let other = edges[1 - first].as_ref().expect("running");
    other.assert_metrics(&[
        ("bps_joins_ok_total", 2),
        ("bps_relay_upstream_joins_total", 1),
    ]);
}

/// Publishes steadily, kills edge `first`, and checks that both clients rejoin (the other
/// edge) within 5 s and lose nothing published after they rejoined.
fn failover_and_check(
    root: &Broker,
    spec: Spec,
    (edges, first): (&mut [Option<Broker>], usize),
    (clients, views): (&[Lines], &mut [ClientView]),
) {
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = steady_admin(root, spec, Arc::clone(&stop));
    thread::sleep(Duration::from_millis(500));
    let killed_at = Instant::now();
    drop(edges[first].take());
    thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    let written = publishing.join().expect("the admin's thread");
    let last = written.len() as u64 - 1;
    for (which, (lines, view)) in clients.iter().zip(views.iter_mut()).enumerate() {
        view.read(lines, WAIT, |view| view.indices.last() == Some(&last));
        assert_eq!(view.joined.len(), 2, "client {which}: joined twice");
        let rejoin = view.joined[1].duration_since(killed_at);
        let indices = &view.indices;
        assert!(
            indices.windows(2).all(|pair| pair[0] < pair[1]),
            "client {which}: no duplicate: {indices:?}"
        );
        let missing: Vec<u64> = (0..=last)
            .filter(|index| written[*index as usize] > view.joined[1])
            .filter(|index| !indices.contains(index))
            .collect();
        eprintln!(
            "client {which}: rejoined {rejoin:?} after the kill; {} of {} frames, {} gap",
            indices.len(),
            last + 1,
            view.gaps
        );
        assert!(
            missing.is_empty(),
            "client {which}: lost {missing:?} published after its rejoin"
        );
        assert!(view.gaps <= 1, "client {which}: {} gaps", view.gaps);
        assert!(
            rejoin < Duration::from_secs(5),
            "client {which} rejoined {rejoin:?} after the kill"
        );
    }
}
