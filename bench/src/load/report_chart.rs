//! Which chart shows which figures of the JSON reports: `bps-bench chart`, run by
//! `bench/compare` over its reports.
//!
//! Owns: [`ChartKind`] and [`chart_of`], which turns named series of reports (e.g.
//! `bps-broker` = the peak runs at N = 1, 10, 100, 1000) into a [`BarChart`]:
//! - [`ChartKind::Fanout`]: deliveries per second against subscribers per cohort N, on a
//!   log axis, one bar per series per N;
//! - [`ChartKind::Latency`]: p50, p90, p99 and p99.9 of one run per series, µs;
//! - [`ChartKind::Shapes`]: deliveries per second of each named shape (`group-chat`,
//!   `many-cohorts`), one bar per series per shape.
//!
//! A report that is missing or failed (`bench/compare` writes `{}`) gives "n/a" instead
//! of a bar, never a zero that would read as a measurement.
//!
//! Never: measures; it only reads the reports' fields.

use serde_json::Value;

use crate::load::chart::{BarChart, Group, Series, XScale};

/// What a chart shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChartKind {
    /// Peak deliveries per second against N.
    Fanout,
    /// Latency percentiles of one run per series.
    Latency,
    /// Deliveries per second per named shape.
    Shapes,
}

/// The latency percentiles a latency chart shows, with their report names.
const PERCENTILES: [(&str, &str); 4] = [
    ("p50", "p50"),
    ("p90", "p90"),
    ("p99", "p99"),
    ("p99.9", "p999"),
];

/// One series: its legend name and its reports (`Value::Null` or `{}` for a missing one).
#[derive(Debug, Clone)]
pub struct ReportSeries {
    /// The legend's name, e.g. `bps-broker`.
    pub name: String,
    /// Its reports.
    pub reports: Vec<Value>,
}

/// The chart of `kind` over `series`, titled `title` (empty: the kind's own title).
pub fn chart_of(kind: ChartKind, series: &[ReportSeries], title: &str) -> BarChart {
    let (default_title, x_label, y_label) = match kind {
        ChartKind::Fanout => (
            "Peak fan-out: deliveries per second against subscribers",
            "subscribers per cohort, N (log scale)",
            "deliveries per second",
        ),
        ChartKind::Latency => ("Publish-to-deliver latency", "percentile", "latency (µs)"),
        ChartKind::Shapes => (
            "Shapes users run: deliveries per second",
            "shape",
            "deliveries per second",
        ),
    };
    let groups = match kind {
        ChartKind::Fanout => fanout_groups(series),
        ChartKind::Latency => PERCENTILES
            .iter()
            .map(|(label, _)| Group {
                label: (*label).to_owned(),
                at: 0.0,
            })
            .collect(),
        ChartKind::Shapes => shape_groups(series),
    };
    let series = series
        .iter()
        .map(|one| Series {
            name: one.name.clone(),
            values: groups
                .iter()
                .map(|group| value_of(kind, &one.reports, group))
                .collect(),
        })
        .collect();
    BarChart {
        title: if title.is_empty() {
            default_title.to_owned()
        } else {
            title.to_owned()
        },
        subtitle: String::new(),
        x_label: x_label.to_owned(),
        y_label: y_label.to_owned(),
        x_scale: if kind == ChartKind::Fanout {
            XScale::Log10
        } else {
            XScale::Categories
        },
        groups,
        series,
    }
}

/// A run's subscribers per cohort (`config.subscribers`).
fn subscribers_of(report: &Value) -> Option<u64> {
    report
        .pointer("/config/subscribers")
        .and_then(Value::as_u64)
}

/// Every N any report of any series has, ascending.
fn fanout_groups(series: &[ReportSeries]) -> Vec<Group> {
    let mut counts: Vec<u64> = series
        .iter()
        .flat_map(|one| one.reports.iter().filter_map(subscribers_of))
        .filter(|count| *count > 0)
        .collect();
    counts.sort_unstable();
    counts.dedup();
    counts
        .into_iter()
        .map(|count| Group {
            label: count.to_string(),
            at: count as f64,
        })
        .collect()
}

/// Every shape any report names, in order of first appearance.
fn shape_groups(series: &[ReportSeries]) -> Vec<Group> {
    let mut shapes: Vec<String> = Vec::new();
    for report in series.iter().flat_map(|one| one.reports.iter()) {
        if let Some(shape) = report.get("shape").and_then(Value::as_str)
            && !shapes.iter().any(|known| known == shape)
        {
            shapes.push(shape.to_owned());
        }
    }
    shapes
        .into_iter()
        .map(|label| Group { label, at: 0.0 })
        .collect()
}

/// The value one series shows for `group` (`None`: no report, or a failed one).
fn value_of(kind: ChartKind, reports: &[Value], group: &Group) -> Option<f64> {
    match kind {
        ChartKind::Fanout => reports
            .iter()
            .find(|report| subscribers_of(report) == Some(group.at as u64))
            .and_then(|report| report.get("deliveries_per_s"))
            .and_then(Value::as_f64),
        ChartKind::Shapes => reports
            .iter()
            .find(|report| report.get("shape").and_then(Value::as_str) == Some(&group.label))
            .and_then(|report| report.get("deliveries_per_s"))
            .and_then(Value::as_f64),
        ChartKind::Latency => {
            let field = PERCENTILES
                .iter()
                .find(|(label, _)| *label == group.label)
                .map(|(_, field)| *field)?;
            let report = reports.first()?;
            let samples = report
                .pointer("/latency_us/count")
                .and_then(Value::as_u64)?;
            (samples > 0)
                .then(|| report.pointer(&format!("/latency_us/{field}")))
                .flatten()
                .and_then(Value::as_f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A peak or latency report with only the fields the charts read.
    fn report(subscribers: u64, deliveries_per_s: f64) -> Value {
        json!({
            "deliveries_per_s": deliveries_per_s,
            "latency_us": {"p50": 900, "p90": 1500, "p99": 4000, "p999": 9000, "count": 5000},
            "config": {"subscribers": subscribers},
        })
    }

    /// What `bench/compare` charts: bps-broker over TCP at every N, over WebSocket only
    /// where it ran the WebSocket twin, nats-server at every N.
    fn three_systems() -> Vec<ReportSeries> {
        vec![
            ReportSeries {
                name: "bps-broker TCP".to_owned(),
                reports: vec![
                    report(10, 400_000.0),
                    report(100, 700_000.0),
                    report(1000, 950_000.0),
                ],
            },
            ReportSeries {
                name: "bps-broker WebSocket".to_owned(),
                reports: vec![report(100, 650_000.0), report(1000, 900_000.0)],
            },
            ReportSeries {
                name: "nats-server".to_owned(),
                reports: vec![
                    report(10, 550_000.0),
                    report(100, 350_000.0),
                    report(1000, 300_000.0),
                ],
            },
        ]
    }

    /// Texts of `class` in document order.
    fn texts(document: &roxmltree::Document<'_>, class: &str) -> Vec<String> {
        document
            .descendants()
            .filter(|node| node.attribute("class") == Some(class))
            .filter_map(|node| node.text().map(str::to_owned))
            .collect()
    }

    /// Bars as (series, group, value, fill).
    fn bars(document: &roxmltree::Document<'_>) -> Vec<(String, String, f64, String)> {
        document
            .descendants()
            .filter(|node| node.attribute("class") == Some("bar"))
            .map(|node| {
                let attribute = |name: &str| node.attribute(name).unwrap_or_default().to_owned();
                (
                    attribute("data-series"),
                    attribute("data-group"),
                    attribute("data-value").parse().unwrap_or(f64::NAN),
                    attribute("fill"),
                )
            })
            .collect()
    }

    #[test]
    fn the_fanout_chart_has_one_series_per_system_and_labelled_axes() {
        let mut chart = chart_of(ChartKind::Fanout, &three_systems(), "Peak fan-out");
        chart.subtitle = "commit abc1234, AMD EPYC, 2 cores".to_owned();
        let svg = chart.to_svg();
        let document = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
        assert_eq!(document.root_element().tag_name().name(), "svg");
        assert_eq!(texts(&document, "title"), ["Peak fan-out"]);
        assert_eq!(
            texts(&document, "subtitle"),
            ["commit abc1234, AMD EPYC, 2 cores"]
        );
        assert_eq!(
            texts(&document, "x-label"),
            ["subscribers per cohort, N (log scale)"]
        );
        assert_eq!(texts(&document, "y-label"), ["deliveries per second"]);
        assert_eq!(texts(&document, "x-tick"), ["10", "100", "1000"]);
        let systems = ["bps-broker TCP", "bps-broker WebSocket", "nats-server"];
        assert_eq!(texts(&document, "legend"), systems);

        let bars = bars(&document);
        let mut fills = Vec::new();
        for (system, expected) in systems.iter().zip([3, 2, 3]) {
            let own: Vec<_> = bars.iter().filter(|bar| bar.0 == *system).collect();
            assert_eq!(own.len(), expected, "{system}: {bars:?}");
            // One colour per system, the same in every group.
            assert!(own.iter().all(|bar| bar.3 == own[0].3), "{system}: {own:?}");
            fills.push(own[0].3.clone());
        }
        fills.dedup();
        assert_eq!(fills.len(), 3, "each system has its own colour: {fills:?}");
        assert!(bars.contains(&(
            "bps-broker WebSocket".to_owned(),
            "1000".to_owned(),
            900_000.0,
            fills[1].clone()
        )));
        // The WebSocket run that did not happen is marked, not drawn as zero.
        let missing: Vec<_> = document
            .descendants()
            .filter(|node| node.attribute("class") == Some("missing"))
            .map(|node| {
                (
                    node.attribute("data-series").unwrap_or_default(),
                    node.attribute("data-group").unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(missing, [("bps-broker WebSocket", "10")]);
    }

    #[test]
    fn the_latency_chart_has_one_series_per_system_and_labelled_axes() {
        let series = [
            ReportSeries {
                name: "bps-broker".to_owned(),
                reports: vec![report(100, 300_000.0)],
            },
            ReportSeries {
                name: "nats-server".to_owned(),
                reports: vec![json!({
                    "latency_us": {"p50": 2000, "p90": 5000, "p99": 11000, "p999": 15000, "count": 10}
                })],
            },
        ];
        let svg = chart_of(ChartKind::Latency, &series, "").to_svg();
        let document = roxmltree::Document::parse(&svg).expect("the SVG is well-formed XML");
        assert_eq!(texts(&document, "title"), ["Publish-to-deliver latency"]);
        assert_eq!(texts(&document, "x-label"), ["percentile"]);
        assert_eq!(texts(&document, "y-label"), ["latency (µs)"]);
        assert_eq!(texts(&document, "legend"), ["bps-broker", "nats-server"]);
        let bars = bars(&document);
        assert_eq!(bars.len(), 8, "two systems x four percentiles");
        let p99: Vec<_> = bars
            .iter()
            .filter(|bar| bar.1 == "p99")
            .map(|bar| (bar.0.as_str(), bar.2))
            .collect();
        assert_eq!(p99, [("bps-broker", 4000.0), ("nats-server", 11_000.0)]);
    }
}
