//! Black-box: the stage latency histograms (issue 23) move when frames flow: after a
//! publisher's chunks reach a subscriber, every stage of their way through the broker has
//! observations, merged and on some core. No timing is asserted, only that each stage was
//! timed.

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use support::{Broker, explicit, key, metric_of, publish, publisher};

/// Every stage label of `bps_stage_latency_us`, in export order.
const STAGES: [&str; 7] = [
    "read_to_turn",
    "verify_wait",
    "verify_run",
    "result_lane",
    "turn",
    "coalesce_wait",
    "flush",
];

/// How long the scrapes may take to show what the cores recorded (a loaded machine).
const WAIT: Duration = Duration::from_secs(20);

fn stage_count(metrics: &HashMap<String, f64>, stage: &str) -> u64 {
    metric_of(
        metrics,
        &format!("bps_stage_latency_us_count{{stage=\"{stage}\"}}"),
    )
}

/// The sum of `bps_core_stage_latency_us_count{core,stage}` over the cores.
fn per_core_count(metrics: &HashMap<String, f64>, stage: &str) -> u64 {
    let suffix = format!(",stage=\"{stage}\"}}");
    metrics
        .iter()
        .filter(|(series, _)| {
            series.starts_with("bps_core_stage_latency_us_count{") && series.ends_with(&suffix)
        })
        .map(|(_, value)| *value as u64)
        .sum()
}

#[test]
fn every_stage_is_timed_when_frames_flow() {
    let broker = Broker::start(&[]);
    let before = broker.metrics();
    for stage in STAGES {
        assert_eq!(stage_count(&before, stage), 0, "{stage} before any frame");
    }
    let admin = key(1);
    let live = explicit(1, &admin.address(), false);
    let _viewer = broker.join(&live, &key(2).address());
    let mut session = broker.join(&live, &admin.address());
    let mut chunks = publisher(&live, &admin, &session);
    publish(&mut chunks, &mut session, &[b"one", b"two", b"three"]);
    broker.wait_metric("bps_accepted_data_total", 3);
    let deadline = Instant::now() + WAIT;
    let metrics = loop {
        let metrics = broker.metrics();
        if STAGES.iter().all(|stage| stage_count(&metrics, stage) > 0) {
            break metrics;
        }
        assert!(
            Instant::now() < deadline,
            "some stage was never timed: {:?}",
            STAGES.map(|stage| (stage, stage_count(&metrics, stage)))
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for stage in STAGES {
        assert!(per_core_count(&metrics, stage) > 0, "{stage} on some core");
    }
    // Every accepted chunk was verified: its job's wait, run and way back were each timed.
    for stage in ["read_to_turn", "verify_wait", "verify_run", "result_lane"] {
        assert!(stage_count(&metrics, stage) >= 3, "{stage}");
    }
}
