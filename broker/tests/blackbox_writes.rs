//! Black-box: how a core batches its writes to subscribers. While results of a burst are
//! still being verified, its deliveries wait for each other and leave in writes of several
//! frames, and never more than the fan-out budget (half the R26 bound) go into one write,
//! so a subscriber that keeps up never finds more than that queued by our batching.

mod support;

use support::{
    Broker, Options, bodies, expect_frames, explicit, key, metric_of, publish, publisher,
};

/// The R26 bound of the test's broker: a fan-out budget of 4 frames between two writes.
const OUTBOUND_QUEUE_FRAMES: usize = 8;
const FANOUT_BUDGET_FRAMES: u64 = 4;

/// Frames of the burst: three budgets' worth.
const BURST_FRAMES: usize = 12;

#[test]
fn a_burst_leaves_in_writes_of_several_frames_never_more_than_the_fanout_budget() {
    let queue = format!("limits.outbound_queue_frames_max={OUTBOUND_QUEUE_FRAMES}");
    // Inline verification one job per turn: every turn applies one result while the rest
    // of the burst is still in flight, so only coalescing puts two frames in one write. The
    // coalescing wait is long enough for a debug build on a busy machine.
    let sets = [
        "verify.mode=inline",
        "verify.batch_jobs_max=1",
        queue.as_str(),
        "server.write_coalesce_us=10000",
    ];
    let broker = Broker::start_options(&Options {
        sets: &sets,
        one_core: true,
        ..Options::default()
    });
    let admin = key(1);
    let live = explicit(1, &admin.address(), false);
    let mut viewer = broker.join(&live, &key(2).address());
    let mut admin_session = broker.join(&live, &admin.address());
    let mut admin_publisher = publisher(&live, &admin, &admin_session);
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
