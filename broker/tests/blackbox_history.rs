//! Black-box: history (D11) through the real binary. A late spectator of a live stream with
//! history gets the latest roster, then the retained frames in order (verified end to end,
//! R41), then live traffic; a spectator joining during a burst of publications gets every
//! frame exactly once; a reload to `refuse` answers history Joins REJECTED while attached
//! streams carry on; and 500 cohorts with full rings stay within the memory the broker
//! computed for its configuration.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bps_client::session::{JoinOutcome, Session};
use bps_client::subscriber::{Event, Subscriber};
use bps_proto::{Binding, Spec, Status};
use bps_verify::sign_implicit;
use bytes::Bytes;
use support::{
    Broker, WAIT, bodies, expect_data, expect_frames, expect_nothing, expect_roster, explicit,
    flush, implicit, key, publish, publisher, recv,
};

/// Enough streams and cohorts per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";

fn with_history(spec: Spec) -> Spec {
    Spec {
        history: true,
        ..spec
    }
}

#[test]
fn a_late_spectator_gets_the_roster_then_the_retained_frames_verified_in_order_then_live_ones() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = with_history(explicit(1, &admin.address(), false));
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher.enqueue_roster(&[]).expect("a roster");
    let roster = flush(&mut admin_publisher, &mut admin_session)
        .pop()
        .expect("the claim and the roster were written");
    broker.wait_metric("bps_accepted_roster_total", 1);
    let payloads: Vec<Vec<u8>> = (0..50)
        .map(|n| format!("message {n}").into_bytes())
        .collect();
    let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let retained = bodies(&publish(&mut admin_publisher, &mut admin_session, &slices));
    broker.wait_metric("bps_accepted_data_total", 50);
    broker.wait_gauge("bps_history_frames", 50);

    let mut late = broker.join(&spec, &key(10).address());
    let mut subscriber = Subscriber::new(spec);
    let got = recv(&mut late);
    assert_eq!(
        got,
        support::body_of(&roster.signed.frame),
        "the roster comes first (R22)"
    );
    assert!(expect_roster(&mut subscriber, got).is_empty());
    for (index, (body, payload)) in retained.iter().zip(&payloads).enumerate() {
        let got = recv(&mut late);
        assert_eq!(&got, body, "retained frame {index}");
        expect_data(
            &mut subscriber,
            got,
            &admin.address(),
            index as u64,
            payload,
        );
    }
    let live = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"live 50", b"live 51"],
    ));
    for (offset, body) in live.iter().enumerate() {
        let got = recv(&mut late);
        assert_eq!(&got, body);
        let payload = format!("live {}", 50 + offset);
        expect_data(
            &mut subscriber,
            got,
            &admin.address(),
            50 + offset as u64,
            payload.as_bytes(),
        );
    }
    expect_nothing(&mut late);
    expect_nothing(&mut admin_session);
    broker.assert_metrics(&[
        ("bps_history_frames_served_total", 50),
        ("bps_history_frames", 52),
        // The roster and 50 backlog frames to the late spectator, then two live frames.
        ("bps_deliveries_total", 1 + 50 + 2),
    ]);
    // A reconnecting spectator gets the whole ring again; its subscriber drops what it has.
    drop(late);
    let mut again = broker.join(&spec, &key(10).address());
    recv(&mut again);
    expect_frames(&mut again, &[retained, live].concat());
    expect_nothing(&mut again);
}

#[test]
fn a_spectator_joining_during_a_burst_gets_every_frame_exactly_once() {
    let ring_frames = 64;
    let broker = Broker::start(&[
        MANY_STREAMS_PER_PEER,
        &format!("limits.history_frames_max={ring_frames}"),
    ]);
    let admin = key(1);
    let spec = with_history(explicit(2, &admin.address(), false));
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    // 100 frames first (the ring is full), then a burst of 1000 during which the spectator
    // joins, once the broker has accepted 50 of them.
    let (before, during, join_after) = (100_u64, 1_000_u64, 50_u64);
    let total = before + during;
    let (go_tx, go) = mpsc::channel();
    let burst = thread::spawn(move || {
        let mut sent = Vec::new();
        for index in 0..total {
            if index == before {
                go.recv_timeout(WAIT).expect("the test starts the burst");
            }
            let payload = format!("burst {index}");
            sent.extend(bodies(&publish(
                &mut admin_publisher,
                &mut admin_session,
                &[payload.as_bytes()],
            )));
        }
        (sent, admin_session)
    });
    broker.wait_metric("bps_accepted_data_total", before);
    go_tx.send(()).expect("the burst thread waits");
    support::eventually("the burst under way", || {
        (broker.metric("bps_accepted_data_total") >= before + join_after).then_some(())
    });
    let mut late = broker.join(&spec, &key(10).address());
    // Each frame verified end to end as it comes (R41), until the burst's last one.
    let mut subscriber = Subscriber::new(spec);
    let mut received: Vec<(u64, Bytes)> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while received.last().is_none_or(|(index, _)| *index + 1 < total) {
        assert!(
            Instant::now() < deadline,
            "the last frame never came; {} received",
            received.len()
        );
        let body = recv(&mut late);
        match subscriber.on_frame(body.clone()) {
            Event::Data {
                owner,
                index,
                payload,
            } => {
                assert_eq!(owner, admin.address());
                assert_eq!(payload, format!("burst {index}").as_bytes());
                received.push((index, body));
            }
            other => panic!("expected DATA, the subscriber saw {other:?}"),
        }
    }
    let (sent, _admin_session) = burst.join().expect("the burst thread");
    assert_eq!(sent.len() as u64, total);
    // A contiguous run ending at the last frame, byte for byte: nothing lost, nothing twice
    // at the seam (a duplicate would be below the subscriber's cursor, and show up here).
    let first = usize::try_from(received[0].0).expect("a small index");
    let bodies_received: Vec<Bytes> = received.into_iter().map(|(_, body)| body).collect();
    assert_eq!(
        bodies_received,
        sent[first..],
        "frames from index {first} on"
    );
    expect_nothing(&mut late);
    // It got what the ring held at its entry (all of it, or a full ring), then live frames:
    // it joined while the burst went on.
    let served = broker.metric("bps_history_frames_served_total");
    eprintln!(
        "joined after {} accepted frames: a backlog of {served} from index {first}, then {} live",
        first as u64 + served,
        total - first as u64 - served
    );
    assert_eq!(served, ring_frames, "a full ring at its entry");
    let entry = first as u64 + served;
    assert!(
        entry >= before + join_after && entry < total,
        "the spectator joined during the burst (after {entry} of {total} frames)"
    );
}

#[test]
fn a_reload_to_refuse_rejects_history_joins_and_attached_streams_carry_on() {
    let path = std::env::temp_dir().join(format!("bps-history-{}.toml", std::process::id()));
    std::fs::write(&path, "[protocol]\nhistory = \"serve\"\n").expect("write the config");
    let config = path.to_string_lossy().into_owned();
    let broker = Broker::start_with(&["--config", &config], &[MANY_STREAMS_PER_PEER]);
    let admin = key(1);
    let spec = with_history(explicit(3, &admin.address(), false));
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    let first = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"one"],
    ));
    let mut spectator = broker.join(&spec, &key(10).address());
    expect_frames(&mut spectator, &first);

    std::fs::write(&path, "[protocol]\nhistory = \"refuse\"\n").expect("rewrite the config");
    broker.signal(libc::SIGHUP);
    let deadline = Instant::now() + WAIT;
    while !broker.log().contains("reload applied") {
        assert!(Instant::now() < deadline, "no reload\n{}", broker.log());
        thread::sleep(Duration::from_millis(20));
    }
    // Reloads reach the cores through their mailboxes: poll until an attaching Join is refused.
    support::eventually(
        "an attaching history Join REJECTED",
        || match Session::join(
            &broker.target(),
            &spec,
            &key(11).address(),
            support::session_config(),
        ) {
            Ok(JoinOutcome::Refused(Status::Rejected)) => Some(()),
            _ => None,
        },
    );
    let creating = with_history(explicit(4, &admin.address(), false));
    assert_eq!(
        broker.join_refused(&creating, &key(11).address()),
        Status::Rejected
    );
    // Streams attached before the reload carry on.
    let second = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"two"],
    ));
    expect_frames(&mut spectator, &second);
    let _without_history = broker.join(&explicit(4, &admin.address(), false), &key(11).address());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn five_hundred_cohorts_with_full_rings_stay_within_the_budget_the_broker_computed() {
    let (cohorts, frames_per_ring) = (500_usize, 20_usize);
    let broker = Broker::start(&[
        "limits.cohorts_per_peer_max=1024",
        "limits.connections_max=2048",
        "limits.frame_memory_bytes_max=134217728",
        &format!("limits.history_frames_max={frames_per_ring}"),
        "limits.history_bytes_max=131072",
        "limits.memory_bytes_max=1073741824",
    ]);
    let payload = vec![0x5a_u8; 4096];
    let mut sessions = Vec::with_capacity(cohorts);
    for cohort in 0..cohorts {
        let topic = bps_proto::keccak256(&(cohort as u64).to_be_bytes());
        let spec = with_history(implicit(topic, Binding::Mnemonic));
        let owner = key(2);
        let mut session = broker.join(&spec, &owner.address());
        for frame in 0..frames_per_ring {
            let id = bps_proto::keccak256(&[topic.as_slice(), &frame.to_be_bytes()].concat());
            let signed = sign_implicit(&owner, &id, None, &payload);
            session.send(&signed.frame).expect("publish");
        }
        sessions.push(session);
    }
    let frames = (cohorts * frames_per_ring) as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while broker.metric("bps_history_frames") < frames {
        assert!(
            Instant::now() < deadline,
            "rings hold {} of {frames} frames\n{}",
            broker.metric("bps_history_frames"),
            broker.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
    let metrics = broker.metrics();
    let value = |name: &str| support::metric_of(&metrics, name);
    let (rss, worst, budget) = (
        value("bps_rss_bytes"),
        value("bps_memory_worst_case_bytes"),
        value("bps_memory_budget_bytes"),
    );
    let (ring_bytes, frame_memory) = (value("bps_history_bytes"), value("bps_frame_memory_bytes"));
    eprintln!(
        "{cohorts} cohorts x {frames_per_ring} frames: rings {ring_bytes} B, frame memory {frame_memory} B, \
         RSS {rss} B, worst case {worst} B, budget {budget} B"
    );
    assert_eq!(value("bps_cohorts_live"), cohorts as u64);
    assert!(
        ring_bytes >= frames * 4096,
        "every ring holds its frames whole"
    );
    assert!(
        frame_memory >= ring_bytes,
        "retained frames are charged to frame memory"
    );
    assert!(rss <= worst, "RSS {rss} above the worst case {worst}");
    assert!(
        worst <= budget,
        "worst case {worst} above the budget {budget}"
    );
    drop(sessions);
}
