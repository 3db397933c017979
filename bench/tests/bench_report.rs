//! The `bps-bench` JSON report schema and the SLO objectives: field names are a contract
//! read by other tools, and `--slo`/`--max-loss` decide the exit code.

use bps_bench::load::latency::{LatencySummary, Percentile};
use bps_bench::load::report::{CountedFigures, PeerLoadFigures, REPORT_VERSION, Report};
use bps_bench::load::slo::{Miss, Slo, parse_duration_us};
use bps_bench::load::thread_cpu::ThreadCpu;
use serde_json::{Value, json};

const CONTRACT_FIELDS: [&str; 13] = [
    "version",
    "mode",
    "closed_loop",
    "subscribers",
    "publishers",
    "cohorts",
    "size",
    "publications_per_s",
    "deliveries_per_s",
    "delivered_bytes_per_s",
    "loss",
    "latency_us",
    "config",
];

fn report_json(report: &Report) -> Value {
    serde_json::from_str(&report.to_json()).expect("the report is JSON")
}

#[test]
fn the_report_has_every_contract_field_with_its_type() {
    let mut report = Report::new("pubsub", json!({"rate": 1000.0}));
    report.latency_us = LatencySummary {
        p50: 10,
        p90: 20,
        p99: 30,
        p999: 40,
        max: 50,
        count: 7,
    };
    report.loss = 0.25;
    report.closed_loop = true;
    let value = report_json(&report);
    for field in CONTRACT_FIELDS {
        assert!(value.get(field).is_some(), "missing {field}");
    }
    assert_eq!(value["version"], json!(REPORT_VERSION));
    assert_eq!(value["mode"], json!("pubsub"));
    assert_eq!(value["closed_loop"], json!(true));
    assert_eq!(value["loss"], json!(0.25));
    assert!(value["publications_per_s"].is_number());
    assert!(value["deliveries_per_s"].is_number());
    assert!(value["delivered_bytes_per_s"].is_number());
    for (name, expected) in [
        ("p50", 10),
        ("p90", 20),
        ("p99", 30),
        ("p999", 40),
        ("max", 50),
    ] {
        assert_eq!(
            value["latency_us"][name],
            json!(expected),
            "latency_us.{name}"
        );
    }
    let environment = &value["environment"];
    for field in ["kernel", "cpu", "git_revision", "bps_bench_version"] {
        assert!(environment[field].is_string(), "environment.{field}");
    }
    assert_eq!(value["config"]["rate"], json!(1000.0));
    assert!(value["slo"].is_null(), "no objectives, no verdict");
    for field in [
        "verifying_subscribers",
        "byte_checked_subscribers",
        "fraction",
    ] {
        assert!(
            value["verification"].get(field).is_some(),
            "verification.{field}"
        );
    }
    for field in ["send_lag_us", "presigned", "presign_s", "threads"] {
        assert!(value["generator"].get(field).is_some(), "generator.{field}");
    }
}

#[test]
fn the_report_says_who_checked_how_and_what_each_generator_thread_used() {
    let mut report = Report::new("pubsub", Value::Null);
    report.shape = "group-chat".to_owned();
    (report.publishers, report.subscribers) = (50, 50);
    report.verification.check_fraction = 0.05;
    report.verification.check_min = 20;
    report.verification.verifying_subscribers = 1;
    report.verification.byte_checked_subscribers = 19;
    report.verification.counted_only_subscribers = 30;
    report.verification.counted_publisher_streams = 50;
    report.verification.counted = CountedFigures {
        expected_frames: 1000,
        received_frames: 998,
        measured_frames: 600,
        short_streams: 1,
        reset_streams: 1,
    };
    report.peer_load = Some(PeerLoadFigures {
        sources: 50,
        streams_per_source_per_cohort_max: 2,
        cohorts_per_source_max: 1,
    });
    report.generator.send_threads = 1;
    report.generator.receive_window_busy_cores_max = Some(0.42);
    report.generator.thread_cpu = vec![
        ThreadCpu {
            role: "receive",
            index: 0,
            cpu: Some(1),
            streams: 100,
            cpu_s: 1.5,
            busy_cores: 0.4,
            window_busy_cores: Some(0.42),
        },
        ThreadCpu {
            role: "send",
            index: 0,
            cpu: Some(1),
            streams: 50,
            cpu_s: 0.1,
            busy_cores: 0.03,
            window_busy_cores: None,
        },
    ];
    let value = report_json(&report);
    assert_eq!(value["shape"], json!("group-chat"));
    let verification = &value["verification"];
    for (field, expected) in [
        ("check_fraction", json!(0.05)),
        ("check_min", json!(20)),
        ("verifying_subscribers", json!(1)),
        ("byte_checked_subscribers", json!(19)),
        ("stamp_only_subscribers", json!(0)),
        ("counted_only_subscribers", json!(30)),
        ("counted_publisher_streams", json!(50)),
    ] {
        assert_eq!(verification[field], expected, "verification.{field}");
    }
    for (field, expected) in [
        ("expected_frames", 1000),
        ("received_frames", 998),
        ("measured_frames", 600),
        ("short_streams", 1),
        ("reset_streams", 1),
    ] {
        assert_eq!(
            verification["counted"][field],
            json!(expected),
            "verification.counted.{field}"
        );
    }
    assert_eq!(value["peer_load"]["sources"], json!(50));
    assert_eq!(
        value["peer_load"]["streams_per_source_per_cohort_max"],
        json!(2)
    );
    let generator = &value["generator"];
    assert_eq!(generator["send_threads"], json!(1));
    assert_eq!(generator["receive_window_busy_cores_max"], json!(0.42));
    let threads = generator["thread_cpu"].as_array().expect("thread_cpu");
    assert_eq!(threads.len(), 2);
    assert_eq!(threads[0]["role"], json!("receive"));
    assert_eq!(threads[0]["window_busy_cores"], json!(0.42));
    assert_eq!(threads[1]["role"], json!("send"));
    assert!(threads[1]["window_busy_cores"].is_null());
    let summary = report.summary();
    assert!(
        summary.contains("30 counted only (+50 publisher streams"),
        "{summary}"
    );
    assert!(
        summary.contains("counted: 998/1000 frames, 1 short stream(s), 1 reset"),
        "{summary}"
    );
    assert!(
        summary.contains("busiest 0.42 cores in the window"),
        "{summary}"
    );
}

#[test]
fn figures_merge_at_the_top_level_without_overwriting_the_contract() {
    let mut report = Report::new("verify", Value::Null);
    report.merge_figures(json!({
        "verify_socs_per_s": 8000.0,
        "naive_socs_per_s": 7000.0,
        "mode": "overwritten?",
    }));
    report.merge_figures(json!({"pipeline_socs_per_s": 9000.0, "bmt_scalar_us": 40.0}));
    let value = report_json(&report);
    assert_eq!(value["verify_socs_per_s"], json!(8000.0));
    assert_eq!(value["naive_socs_per_s"], json!(7000.0));
    assert_eq!(value["pipeline_socs_per_s"], json!(9000.0));
    assert_eq!(value["bmt_scalar_us"], json!(40.0));
    assert_eq!(value["mode"], json!("verify"));
    assert_eq!(value["figures.mode"], json!("overwritten?"));
    assert!(report.summary().contains("verify_socs_per_s: 8000.0"));
}

fn latency(p99: u64) -> LatencySummary {
    LatencySummary {
        p50: p99 / 4,
        p90: p99 / 2,
        p99,
        p999: p99 * 2,
        max: p99 * 3,
        count: 1000,
    }
}

#[test]
fn slo_parsing_accepts_units_and_lists_and_names_bad_input() {
    let mut slo = Slo::default();
    slo.parse_latency("p99=2ms").expect("p99");
    slo.parse_latency("p50=300us, p999=1.5s,max=800ns,p99.9=5ms")
        .expect("list");
    let bounds: Vec<(Percentile, f64)> = slo
        .latency
        .iter()
        .map(|bound| (bound.percentile, bound.limit_us))
        .collect();
    assert_eq!(
        bounds,
        [
            (Percentile::P99, 2000.0),
            (Percentile::P50, 300.0),
            (Percentile::P999, 1_500_000.0),
            (Percentile::Max, 0.8),
            (Percentile::P999, 5000.0),
        ]
    );
    assert_eq!(parse_duration_us("250µs"), Ok(250.0));
    for (text, needle) in [
        ("p99", "expected PERCENTILE=DURATION"),
        ("p98=1ms", "unknown percentile"),
        ("p99=2", "no unit"),
        ("p99=2h", "unknown unit"),
        ("p99=ms", "not a number"),
    ] {
        let error = Slo::default().parse_latency(text).expect_err(text);
        assert!(error.0.starts_with("--slo: "), "{error}");
        assert!(error.0.contains(needle), "{text}: {error}");
    }
    let mut loss = Slo::default();
    assert!(loss.set_max_loss(1.5).is_err());
    assert!(loss.set_max_loss(-0.1).is_err());
    assert!(loss.is_empty());
    loss.set_max_loss(0.0).expect("zero loss");
    assert!(!loss.is_empty());
}

#[test]
fn slo_checks_report_every_miss() {
    let mut slo = Slo::default();
    slo.parse_latency("p99=2ms").expect("p99");
    slo.set_max_loss(0.0).expect("loss");
    assert_eq!(slo.check(&latency(2000), 0.0), [], "at the bound is met");
    assert_eq!(
        slo.check(&latency(2001), 0.0),
        [Miss::Latency {
            percentile: Percentile::P99,
            measured_us: 2001,
            limit_us: 2000.0
        }]
    );
    let both = slo.check(&latency(5000), 0.01);
    assert_eq!(both.len(), 2);
    assert_eq!(both[1].to_string(), "SLO missed: loss = 0.01 > 0");
    let empty = LatencySummary::default();
    assert_eq!(
        slo.check(&empty, 0.0),
        [Miss::NoSamples],
        "no samples cannot meet a bound"
    );
    assert_eq!(
        Slo::default().check(&empty, 1.0),
        [],
        "no objectives, no misses"
    );
}
