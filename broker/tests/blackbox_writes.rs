//! Black-box: how a core batches its writes to subscribers, and what its fan-out budget
//! (half the R26 bound) leaves alone. While results of a burst are still being verified,
//! its deliveries wait for each other and leave in writes of several frames, never more
//! than the budget in one write, so a subscriber that keeps up never finds more than that
//! queued by our batching. A Join is taken while every turn spends its whole budget.

mod support;

use bps_client::publisher::Publisher;
use bps_client::session::Session;
use bps_proto::{Kind, Spec};
use support::{
    Broker, Options, QUIET, bodies, body_of, expect_frames, explicit, key, metric_of, publish,
    publisher,
};

/// The R26 bound of the test's broker: a fan-out budget of 4 frames between two writes.
const OUTBOUND_QUEUE_FRAMES: usize = 8;
const FANOUT_BUDGET_FRAMES: u64 = 4;

/// Frames of the burst: three budgets' worth.
const BURST_FRAMES: usize = 12;

/// A one-core broker started with `sets`, an open cohort on it with one viewer, and the
/// admin's stream and publisher.
struct Live {
    broker: Broker,
    live: Spec,
    viewer: Session,
    admin_session: Session,
    admin_publisher: Publisher,
}

fn live_cohort(sets: &[&str]) -> Live {
    let broker = Broker::start_options(&Options {
        sets,
        one_core: true,
        ..Options::default()
    });
    let admin = key(1);
    let live = explicit(1, &admin.address(), false);
    let viewer = broker.join(&live, &key(2).address());
    let admin_session = broker.join(&live, &admin.address());
    let admin_publisher = publisher(&live, &admin, &admin_session);
    Live {
        broker,
        live,
        viewer,
        admin_session,
        admin_publisher,
    }
}

#[test]
fn a_burst_leaves_in_writes_of_several_frames_never_more_than_the_fanout_budget() {
    let queue = format!("limits.outbound_queue_frames_max={OUTBOUND_QUEUE_FRAMES}");
    // Inline verification one job per turn: every turn applies one result while the rest
    // of the burst is still in flight, so only coalescing puts two frames in one write. The
    // coalescing wait is long enough for a debug build on a busy machine.
    let Live {
        broker,
        mut viewer,
        mut admin_session,
        mut admin_publisher,
        ..
    } = live_cohort(&[
        "verify.mode=inline",
        "verify.batch_jobs_max=1",
        queue.as_str(),
        "server.write_coalesce_us=10000",
    ]);
    let payloads: Vec<Vec<u8>> = (0..BURST_FRAMES)
        .map(|n| format!("frame {n}").into_bytes())
        .collect();
    let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let sent = publish(&mut admin_publisher, &mut admin_session, &payloads);
    assert_eq!(sent.len(), BURST_FRAMES);
    expect_frames(&mut viewer, &bodies(&sent));

    let metrics = broker.metrics();
    let writes = metric_of(&metrics, "bps_frames_per_write_count");
    let at_most = |frames: u64| {
        metric_of(
            &metrics,
            &format!("bps_frames_per_write_bucket{{le=\"{frames}\"}}"),
        )
    };
    assert_eq!(
        at_most(FANOUT_BUDGET_FRAMES),
        writes,
        "no write carries more than the fan-out budget"
    );
    assert!(
        at_most(2) < writes,
        "some write carries more than two frames of the burst ({writes} writes, {} of at most 2)",
        at_most(2)
    );
}

/// Publications of the long burst: one turn each at a budget of one.
const LONG_BURST_FRAMES: usize = 400;

#[test]
fn a_join_is_answered_while_every_turn_spends_its_fanout_budget() {
    // A budget of one fan-out per turn, written at once: the burst takes hundreds of turns,
    // each spending its whole budget, and a Join that arrives once the fan-out has begun is
    // taken within a few of them (Joins and credits are outside the budget), so the late
    // subscriber gets the rest of the burst.
    let Live {
        broker,
        live,
        viewer: mut early,
        mut admin_session,
        mut admin_publisher,
    } = live_cohort(&[
        "verify.mode=inline",
        "limits.outbound_queue_frames_max=2",
        "server.write_coalesce_us=0",
        // Three streams from 127.0.0.1 in one cohort (R33).
        "limits.streams_per_peer_per_cohort_max=4",
    ]);
    for n in 0..LONG_BURST_FRAMES {
        admin_publisher
            .enqueue_data(format!("frame {n}").into_bytes())
            .expect("queue DATA");
    }
    let mut burst = Vec::new();
    let mut data = Vec::new();
    while let Some(outgoing) = admin_publisher.next_frame().expect("sign") {
        burst.extend_from_slice(&outgoing.signed.frame);
        if outgoing.kind == Kind::Data {
            data.push(body_of(&outgoing.signed.frame));
        }
        admin_publisher.mark_sent();
    }
    admin_session.send(&burst).expect("send the burst at once");
    // The burst is being fanned out, one publication a turn, once its first frame arrives
    // (measured in a debug build: the whole burst takes about 100-170 ms, the Join 2-8 ms).
    assert_eq!(support::recv(&mut early), data[0]);
    let mut late = broker.join(&live, &key(3).address());
    expect_frames(&mut early, &data[1..]);
    let mut tail = Vec::new();
    while let Ok(Some(body)) = late.recv(QUIET) {
        tail.push(body);
    }
    assert!(
        !tail.is_empty(),
        "the Join waited until the whole burst was fanned out"
    );
    assert_eq!(
        tail[..],
        data[data.len() - tail.len()..],
        "the late subscriber gets the burst's tail, in order"
    );
}
