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
