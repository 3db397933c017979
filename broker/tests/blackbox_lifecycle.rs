//! Black-box: the life of streams and of the process: the claim deadline (R35), revocation's
//! two phases (R24), a slow subscriber reset without slowing the others (R26), and the drain
//! on SIGTERM.

mod support;

use std::net::Ipv4Addr;
use std::thread;
use std::time::{Duration, Instant};

use bps_client::session::JoinOutcome;
use bps_client::subscriber::Subscriber;
use bps_proto::{Kind, Status};
use bps_verify::sign_broadcast;
use support::{
    Broker, End, Raw, WAIT, bodies, expect_closed, expect_end, expect_frames, expect_nothing,
    expect_roster, explicit, flush, group, key, publish, publisher, recv, session_config,
};

#[test]
fn claim_deadline_closes_pending_and_silent_streams_that_never_claim() {
    let broker = Broker::start(&[
        "timeouts.claim_deadline_ms=300",
        "timeouts.blocklist_claim_timeout_ms=0",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let jam = explicit(1, &admin.address(), true);
    let live = explicit(2, &admin.address(), false);
    let mut spectator = broker.join(&live, &key(10).address());

    let joined = Instant::now();
    let mut pending = broker.join(&jam, &admin.address());
    let mut silent = broker.join(&jam, &key(11).address());
    expect_closed(&mut pending);
    let elapsed = joined.elapsed();
    expect_closed(&mut silent);
    assert!(
        elapsed >= Duration::from_millis(290),
        "closed after {elapsed:?}, before the 300 ms claim deadline"
    );
    assert!(
        elapsed < Duration::from_secs(3),
        "closed only after {elapsed:?}"
    );
    broker.wait_metric("bps_claim_timeout_total", 2);
    // A spectator has nothing to claim and stays.
    expect_nothing(&mut spectator);

    // With the blocklist disabled the admin comes back at once, claims in time and stays.
    let mut admin_session = broker.join(&jam, &admin.address());
    let mut admin_publisher = publisher(&jam, &admin, &admin_session);
    flush(&mut admin_publisher, &mut admin_session);
    broker.wait_metric("bps_claims_total", 1);
    match admin_session.recv(Duration::from_millis(600)) {
        Ok(None) => {}
        other => panic!("a claimed stream must outlive the claim deadline: {other:?}"),
    }
    broker.assert_metrics(&[
        ("bps_claim_timeout_total", 2),
        ("bps_blocklisted_total", 0),
        ("bps_joins_ok_total", 4),
    ]);
}

#[test]
fn a_claim_timeout_blocklists_the_peer_when_enabled() {
    let broker = Broker::start(&[
        "timeouts.claim_deadline_ms=200",
        "timeouts.blocklist_claim_timeout_ms=60000",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut pending = broker.join(&spec, &admin.address());
    expect_closed(&mut pending);
    broker.wait_metric("bps_claim_timeout_total", 1);
    broker.wait_metric("bps_blocklisted_total", 1);
    match bps_client::session::Session::join(
        &broker.target(),
        &spec,
        &admin.address(),
        session_config(),
    ) {
        Err(_) => {}
        Ok(JoinOutcome::Joined(_)) => panic!("a blocklisted peer joined"),
        Ok(JoinOutcome::Refused(status)) => panic!("a blocklisted peer got an Ack: {status:?}"),
    }
    broker.wait_metric("bps_connections_refused_blocklist_total", 1);
    let mut other_peer = broker.raw_from(Ipv4Addr::new(127, 0, 0, 3));
    assert_eq!(
        other_peer.join(&spec.to_join(&key(5).address())).status,
        Status::Ok as i32
    );
}

#[test]
fn revocation_drops_silently_within_the_grace_then_resets() {
    let broker = Broker::start(&[
        "timeouts.revocation_grace_ms=1000",
        "timeouts.blocklist_violation_ms=0",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let member = key(2);
    let spec = explicit(1, &admin.address(), false);
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);
    admin_publisher
        .enqueue_roster(&[member.address()])
        .expect("roster");
    flush(&mut admin_publisher, &mut admin_session);
    broker.wait_metric("bps_accepted_roster_total", 1);
    let mut spectator = broker.join(&spec, &key(10).address());
    let mut spectator_view = Subscriber::new(spec);
    assert_eq!(
        expect_roster(&mut spectator_view, recv(&mut spectator)),
        vec![member.address()]
    );

    // Granted: the member gets the roster naming it, claims and publishes.
    let mut member_session = broker.join(&spec, &member.address());
    let mut member_view = Subscriber::new(spec);
    let roster = expect_roster(&mut member_view, recv(&mut member_session));
    let mut member_publisher = publisher(&spec, &member, &member_session);
    member_publisher.on_roster(&roster);
    let sent = bodies(&publish(
        &mut member_publisher,
        &mut member_session,
        &[b"granted"],
    ));
    expect_frames(&mut spectator, &sent);
    expect_frames(&mut admin_session, &sent);

    // Revoked: the reduced roster goes to everyone, the member included.
    admin_publisher.enqueue_roster(&[]).expect("roster");
    let reduced = flush(&mut admin_publisher, &mut admin_session);
    let reduced_body = support::body_of(&reduced[0].signed.frame);
    assert_eq!(recv(&mut spectator), reduced_body);
    assert_eq!(recv(&mut member_session), reduced_body);
    let revoked_at = Instant::now();
    assert!(expect_roster(&mut member_view, reduced_body).is_empty());
    member_publisher.on_roster(&[]);
    assert!(
        member_publisher.next_frame().expect("sign").is_none(),
        "a revoked publisher sends nothing more"
    );

    // Phase 1: within the grace its frames are dropped silently, the stream stays open.
    let challenge = *member_session.challenge();
    let in_grace = sign_broadcast(&member, Kind::Data, &spec.topic, &challenge, 1, b"late");
    member_session.send(&in_grace.frame).expect("send");
    // Counted as dropped in the grace, not as a violation: it was read within the grace.
    broker.wait_metric("bps_drop_revoked_in_grace_total", 1);
    expect_nothing(&mut member_session);
    expect_nothing(&mut spectator);

    // Phase 2: after the grace a frame is a violation and the connection breaks.
    // The grace runs from when the reduced roster was written, which is before it arrived.
    thread::sleep(Duration::from_millis(1100).saturating_sub(revoked_at.elapsed()));
    let after_grace = sign_broadcast(&member, Kind::Data, &spec.topic, &challenge, 2, b"later");
    member_session.send(&after_grace.frame).expect("send");
    expect_closed(&mut member_session);
    broker.wait_metric("bps_wrong_stream_total", 1);
    expect_nothing(&mut spectator);
    broker.assert_metrics(&[
        ("bps_drop_revoked_in_grace_total", 1),
        ("bps_wrong_stream_total", 1),
        ("bps_accepted_data_total", 1),
        ("bps_accepted_roster_total", 2),
    ]);
}

#[test]
fn a_slow_subscriber_is_reset_and_a_fast_one_gets_every_frame() {
    let broker = Broker::start(&[
        "limits.outbound_queue_frames_max=4",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut fast = broker.join(&spec, &key(10).address());
    // The slow one joins with a tiny receive window and never reads after its Ack.
    let mut slow = Raw::connect(broker.listen(), None, Some(4096));
    assert_eq!(
        slow.join(&spec.to_join(&key(11).address())).status,
        Status::Ok as i32
    );
    let mut admin_session = broker.join(&spec, &admin.address());
    let mut admin_publisher = publisher(&spec, &admin, &admin_session);

    // Publish full chunks in lockstep with the fast subscriber, three at a time (below the
    // queue bound, so a subscriber that keeps up never overflows), until the slow one is
    // reset, then a few more.
    let mut sent: Vec<bytes::Bytes> = Vec::new();
    let mut after_reset = None;
    let mut round = 0u32;
    while after_reset.is_none_or(|left| left > 0) {
        assert!(round < 1000, "the slow subscriber was never reset");
        let payloads: Vec<Vec<u8>> = (0..3u32)
            .map(|n| {
                let index = round * 3 + n;
                let mut payload = vec![index as u8; 4096];
                payload[..4].copy_from_slice(&index.to_be_bytes());
                payload
            })
            .collect();
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let burst = bodies(&publish(
            &mut admin_publisher,
            &mut admin_session,
            &payloads,
        ));
        // Never slower than the fast subscriber: each burst arrives before the next is sent.
        expect_frames(&mut fast, &burst);
        sent.extend(burst);
        round += 1;
        after_reset = match after_reset {
            Some(left) => Some(left - 1),
            None if round.is_multiple_of(4) && broker.metric("bps_queue_reset_total") > 0 => {
                Some(4)
            }
            None => None,
        };
    }
    expect_nothing(&mut fast);
    // The slow stream ended; what it got before is an unbroken prefix of the publications.
    let (_, got) = slow.expect_end();
    eprintln!(
        "slow subscriber reset after {} frames; it had read {}",
        sent.len(),
        got.len()
    );
    assert!(got.len() < sent.len(), "{} of {}", got.len(), sent.len());
    assert_eq!(got[..], sent[..got.len()], "the slow subscriber's frames");
    broker.assert_metrics(&[
        ("bps_queue_reset_total", 1),
        ("bps_queue_resets_total", 1),
        ("bps_accepted_data_total", sent.len() as u64),
        ("bps_wrong_stream_total", 0),
    ]);
}

#[test]
fn sigterm_drains_every_stream_cleanly_and_exits_zero() {
    let mut broker = Broker::start(&[
        "server.drain_deadline_ms=5000",
        "limits.streams_per_peer_per_cohort_max=16",
    ]);
    assert_eq!(broker.get("/readyz").0, 200);
    assert_eq!(broker.get("/healthz").0, 200);
    let admin = key(1);
    let live = explicit(1, &admin.address(), false);
    let jam = explicit(2, &admin.address(), true);
    let chat = group(3, &admin.address());
    let mut admin_session = broker.join(&live, &admin.address());
    let mut admin_publisher = publisher(&live, &admin, &admin_session);
    let mut sessions = vec![
        broker.join(&live, &key(10).address()),
        broker.join(&jam, &admin.address()),
        broker.join(&jam, &key(11).address()),
        broker.join(&chat, &key(12).address()),
    ];
    let sent = bodies(&publish(
        &mut admin_publisher,
        &mut admin_session,
        &[b"before"],
    ));
    expect_frames(&mut sessions[0], &sent);
    // A connection that never sent its Join.
    let mut raw = broker.raw();
    broker.wait_gauge("bps_connections_open", 6);

    let signalled = Instant::now();
    broker.signal(libc::SIGTERM);
    // Not ready any more: 503 while draining, or nobody answers once it is gone.
    let readiness = support::eventually("/readyz stops answering 200", || {
        match broker.try_get("/readyz") {
            Ok((200, _)) => None,
            Ok((status, body)) => Some(format!("{status} {body}")),
            Err(error) => Some(format!("gone: {error}")),
        }
    });
    assert!(
        readiness.starts_with("503") || readiness.starts_with("gone"),
        "/readyz during the drain: {readiness}"
    );
    // Every stream is closed cleanly: EOF, not a reset, not a hang.
    sessions.push(admin_session);
    for (n, session) in sessions.iter_mut().enumerate() {
        let (end, frames) = expect_end(session);
        assert_eq!((end, frames.len()), (End::Eof, 0), "stream {n}");
    }
    let (end, frames) = raw.expect_end();
    assert_eq!(
        (end, frames.len()),
        (End::Eof, 0),
        "the stream without a Join"
    );
    let status = broker
        .wait_exit(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("still running 5 s after SIGTERM\n{}", broker.log()));
    assert_eq!(status.code(), Some(0), "exit status\n{}", broker.log());
    assert!(
        signalled.elapsed() < WAIT,
        "drained in {:?}",
        signalled.elapsed()
    );
    assert!(broker.log().contains("drained"), "{}", broker.log());
}

#[test]
fn sighup_reloads_a_broker_wide_bound_from_the_config_file() {
    let path = std::env::temp_dir().join(format!("bps-reload-{}.toml", std::process::id()));
    std::fs::write(&path, "[limits]\ncohorts_max = 1\n").expect("write the config");
    let config = path.to_string_lossy().into_owned();
    let broker = Broker::start_with(&["--config", &config], &[]);
    let admin = key(1).address();
    let _first = broker.join(&explicit(1, &admin, false), &key(10).address());
    assert_eq!(
        broker.join_refused(&explicit(2, &admin, false), &key(10).address()),
        Status::Full,
        "cohorts_max = 1 holds one cohort"
    );

    std::fs::write(&path, "[limits]\ncohorts_max = 2\n").expect("rewrite the config");
    broker.signal(libc::SIGHUP);
    let deadline = Instant::now() + WAIT;
    while !broker.log().contains("reload applied") {
        assert!(
            Instant::now() < deadline,
            "no reload logged\n{}",
            broker.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Reloads reach the cores through their inboxes; a cohort fits once they applied it.
    let _second = broker.join(&explicit(2, &admin, false), &key(10).address());
    assert_eq!(
        broker.join_refused(&explicit(3, &admin, false), &key(10).address()),
        Status::Full,
        "cohorts_max = 2 now holds two"
    );
    let _ = std::fs::remove_file(&path);
}
