//! The charts `bench/compare` writes: rendered from fixed reports, the SVG must parse as
//! XML, hold one bar per series per group with its value, name its axes with units, and be
//! the same bytes every time.

use bps_bench::load::report_chart::{ChartKind, ReportSeries, chart_of};
use serde_json::{Value, json};

/// A report as `bps-bench` writes it, with only the fields the charts read.
fn report(subscribers: u64, deliveries_per_s: f64, shape: &str) -> Value {
    json!({
        "version": 1,
        "mode": "pubsub",
        "shape": shape,
        "size": 4096,
        "deliveries_per_s": deliveries_per_s,
        "latency_us": {"p50": 851, "p90": 1230, "p99": 2179, "p999": 4723, "max": 6907, "count": 1000},
        "config": {"subscribers": subscribers},
        "environment": {"git_revision": "abc1234", "cpu": "AMD EPYC"},
    })
}

fn fanout_series() -> Vec<ReportSeries> {
    vec![
        ReportSeries {
            name: "bps-broker".to_owned(),
            reports: vec![
                report(1, 36_268.0, "custom"),
                report(10, 385_212.0, "custom"),
                report(100, 1_354_743.0, "custom"),
                report(1000, 1_196_488.0, "custom"),
            ],
        },
        ReportSeries {
            name: "nats-server".to_owned(),
            reports: vec![
                report(1000, 422_000.0, "custom"),
                report(100, 703_450.0, "custom"),
                report(10, 553_675.0, "custom"),
                report(1, 197_590.0, "custom"),
            ],
        },
    ]
}

fn bars(document: &roxmltree::Document<'_>) -> Vec<(String, String, f64)> {
    document
        .descendants()
        .filter(|node| node.has_tag_name("rect") && node.attribute("class") == Some("bar"))
        .map(|node| {
            (
                node.attribute("data-series").expect("series").to_owned(),
                node.attribute("data-group").expect("group").to_owned(),
                node.attribute("data-value")
                    .expect("value")
                    .parse()
                    .expect("a number"),
            )
        })
        .collect()
}

fn texts_of_class(document: &roxmltree::Document<'_>, class: &str) -> Vec<String> {
    document
        .descendants()
        .filter(|node| node.has_tag_name("text") && node.attribute("class") == Some(class))
        .filter_map(|node| node.text().map(str::to_owned))
        .collect()
}

#[test]
fn the_fanout_chart_has_one_bar_per_series_per_n_with_axes_and_legend() {
    let svg = chart_of(ChartKind::Fanout, &fanout_series(), "").to_svg();
    let document = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
    let root = document.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let bars = bars(&document);
    assert_eq!(bars.len(), 2 * 4, "two series x four N");
    for (series, group, value) in [
        ("bps-broker", "1", 36_268.0),
        ("bps-broker", "1000", 1_196_488.0),
        ("nats-server", "100", 703_450.0),
        ("nats-server", "1", 197_590.0),
    ] {
        assert!(
            bars.contains(&(series.to_owned(), group.to_owned(), value)),
            "{series} at N = {group}: {bars:?}"
        );
    }
    assert_eq!(
        texts_of_class(&document, "x-tick"),
        ["1", "10", "100", "1000"]
    );
    assert_eq!(
        texts_of_class(&document, "x-label"),
        ["subscribers per cohort, N (log scale)"]
    );
    assert_eq!(
        texts_of_class(&document, "y-label"),
        ["deliveries per second"]
    );
    assert_eq!(
        texts_of_class(&document, "legend"),
        ["bps-broker", "nats-server"]
    );
    let ticks = texts_of_class(&document, "y-tick");
    assert_eq!(ticks.first().map(String::as_str), Some("0"));
    assert_eq!(ticks.last().map(String::as_str), Some("1.5M"), "{ticks:?}");
    // Bars of one N sit side by side, N in increasing order left to right.
    let x_of = |series: &str, group: &str| -> f64 {
        document
            .descendants()
            .find(|node| {
                node.attribute("data-series") == Some(series)
                    && node.attribute("data-group") == Some(group)
            })
            .and_then(|node| node.attribute("x"))
            .expect("bar")
            .parse()
            .expect("x")
    };
    assert!(x_of("bps-broker", "1") < x_of("nats-server", "1"));
    assert!(x_of("nats-server", "1") < x_of("bps-broker", "10"));
    assert!(x_of("nats-server", "100") < x_of("bps-broker", "1000"));
}

#[test]
fn the_same_reports_give_the_same_bytes() {
    let first = chart_of(ChartKind::Fanout, &fanout_series(), "").to_svg();
    let second = chart_of(ChartKind::Fanout, &fanout_series(), "").to_svg();
    assert_eq!(first, second);
}

#[test]
fn a_missing_report_is_not_a_zero_bar() {
    let mut series = fanout_series();
    series[1].reports[0] = json!({});
    series[1].reports[1] = Value::Null;
    let svg = chart_of(ChartKind::Fanout, &series, "").to_svg();
    let document = roxmltree::Document::parse(&svg).expect("XML");
    assert_eq!(bars(&document).len(), 6, "two bars fewer");
    let missing: Vec<_> = document
        .descendants()
        .filter(|node| node.attribute("class") == Some("missing"))
        .map(|node| node.attribute("data-group").expect("group"))
        .collect();
    assert_eq!(missing, ["100", "1000"]);
}

#[test]
fn the_latency_and_shape_charts_show_percentiles_and_shapes() {
    let latency = [
        ReportSeries {
            name: "bps-broker".to_owned(),
            reports: vec![report(100, 677_300.0, "custom")],
        },
        ReportSeries {
            name: "nats-server".to_owned(),
            reports: vec![
                json!({"latency_us": {"p50": 2609, "p90": 6795, "p99": 10935, "p999": 14023, "count": 5}}),
            ],
        },
    ];
    let svg = chart_of(ChartKind::Latency, &latency, "Latency at N = 100").to_svg();
    let document = roxmltree::Document::parse(&svg).expect("XML");
    assert_eq!(texts_of_class(&document, "title"), ["Latency at N = 100"]);
    assert_eq!(
        texts_of_class(&document, "x-tick"),
        ["p50", "p90", "p99", "p99.9"]
    );
    assert_eq!(texts_of_class(&document, "y-label"), ["latency (µs)"]);
    let latency_bars = bars(&document);
    assert_eq!(latency_bars.len(), 8);
    assert!(latency_bars.contains(&("nats-server".to_owned(), "p99.9".to_owned(), 14_023.0)));
    assert!(latency_bars.contains(&("bps-broker".to_owned(), "p50".to_owned(), 851.0)));

    let shapes = [
        ReportSeries {
            name: "bps-broker".to_owned(),
            reports: vec![
                report(50, 900_000.0, "group-chat"),
                report(10, 150_000.0, "many-cohorts"),
            ],
        },
        ReportSeries {
            name: "nats-server".to_owned(),
            reports: vec![
                report(10, 400_000.0, "many-cohorts"),
                report(100, 600_000.0, "group-chat"),
            ],
        },
    ];
    let svg = chart_of(ChartKind::Shapes, &shapes, "").to_svg();
    let document = roxmltree::Document::parse(&svg).expect("XML");
    assert_eq!(
        texts_of_class(&document, "x-tick"),
        ["group-chat", "many-cohorts"]
    );
    let shape_bars = bars(&document);
    assert_eq!(shape_bars.len(), 4);
    assert!(shape_bars.contains(&("nats-server".to_owned(), "group-chat".to_owned(), 600_000.0)));
}
