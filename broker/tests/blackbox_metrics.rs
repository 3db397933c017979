//! Black-box: a scrape of a busy broker (cohorts of every authorship, TCP and WebSocket
//! streams, refusals, a violation) parses as Prometheus text with `prometheus-parse`, every
//! sample line is understood, and no two samples are the same series.

mod support;

use std::collections::HashSet;

use bps_proto::{Binding, Status};
use support::ws::Ws;
use support::{Broker, explicit, group, implicit, key, publish, publisher};

#[test]
fn a_busy_brokers_scrape_parses_with_no_duplicate_series() {
    let broker = Broker::start(&[
        "limits.streams_per_peer_per_cohort_max=16",
        "limits.cohort_series_max=2",
        // Every job to the pool, so its totals are in the scrape (a core would verify
        // these lone chunks itself).
        "verify.idle_inline_jobs_max=0",
    ]);
    let admin = key(1);
    let live = explicit(1, &admin.address(), false);
    let _viewer = broker.join(&live, &key(2).address());
    let (_ws_viewer, status, _) = Ws::native_join(&broker, &live, &key(3).address());
    assert_eq!(status, Status::Ok);
    let mut admin_session = broker.join(&live, &admin.address());
    let mut admin_publisher = publisher(&live, &admin, &admin_session);
    publish(&mut admin_publisher, &mut admin_session, &[b"one", b"two"]);
    let chat = group(2, &admin.address());
    let _member = broker.join(&chat, &key(4).address());
    let wall = implicit(support::topic(3), Binding::Mnemonic);
    let _writer = broker.join(&wall, &key(5).address());
    let jam = explicit(4, &admin.address(), true);
    let _seat = broker.join(&jam, &key(6).address());
    broker.wait_metric("bps_accepted_data_total", 2);
    // The pool's totals: every accepted chunk went through it, in at least one batch.
    assert!(broker.metric("bps_verify_pool_jobs_total") >= 2);
    assert!(broker.metric("bps_verify_pool_batches_total") >= 1);

    let (status, text) = broker.get("/metrics");
    assert_eq!(status, 200);
    let lines: Vec<std::io::Result<String>> =
        text.lines().map(|line| Ok(line.to_owned())).collect();
    let scrape = prometheus_parse::Scrape::parse(lines.into_iter()).expect("the scrape parses");
    assert!(
        scrape.samples.len() > 100,
        "{} samples",
        scrape.samples.len()
    );
    // As the parser sees them (a histogram is one sample with its buckets)...
    let mut series = HashSet::new();
    for sample in &scrape.samples {
        let mut labels: Vec<String> = sample
            .labels
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        labels.sort();
        assert!(
            series.insert((sample.metric.clone(), labels.clone())),
            "duplicate series {} {labels:?}",
            sample.metric
        );
    }
    // ...and line by line: no two sample lines name the same series.
    let mut lines_seen = HashSet::new();
    for line in text
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
    {
        let (series, _) = line.rsplit_once(' ').expect("a sample line has a value");
        assert!(lines_seen.insert(series), "duplicate sample line {series}");
    }
    // Per-cohort series are bounded by limits.cohort_series_max; the rest are summed.
    let cohort_ids: HashSet<String> = scrape
        .samples
        .iter()
        .filter(|sample| sample.metric == "bps_cohort_joins_ok_total")
        .filter_map(|sample| sample.labels.get("cohort").map(str::to_owned))
        .collect();
    assert_eq!(cohort_ids.len(), 2, "{cohort_ids:?}");
    assert!(text.contains("bps_cohorts_other"), "the others are summed");
    assert!(text.contains("bps_transport_frames_out_total{transport=\"websocket\"}"));
}

/// The value of the sample `name{core="N"}` in a scrape.
fn per_core(text: &str, name: &str, core: usize) -> Option<f64> {
    let prefix = format!("{name}{{core=\"{core}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.parse().ok())
}

#[test]
fn an_idle_brokers_cores_keep_a_fresh_heartbeat_and_report_their_cpu_time() {
    let broker = Broker::start(&[]);
    // Idle for several idle-turn intervals: no stream, no deadline, nothing to wake a core.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let (status, text) = broker.get("/metrics");
    assert_eq!(status, 200);
    for core in 0..2 {
        let age = per_core(&text, "bps_core_heartbeat_age_ms", core).expect("a heartbeat");
        // A quiet core still turns once a second; 3 s leaves room for a loaded machine.
        assert!(age < 3_000.0, "core {core} heartbeat age {age} ms");
        let busy = per_core(&text, "bps_core_busy_seconds_total", core).expect("a busy figure");
        assert!(
            (0.0..4.0).contains(&busy),
            "core {core} used {busy} s of CPU while idle for 4 s"
        );
    }
    assert!(text.contains("\nbps_ready 1\n"), "{text}");
}
