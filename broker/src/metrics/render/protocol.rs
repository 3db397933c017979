//! The broker-wide protocol families: every R40 counter (zero when the protocol core reported
//! none) and each figure the protocol core reported, counters as `bps_<name>_total` and gauges
//! as `bps_<name>`.
//!
//! Owns: the R40 guarantee at the broker-wide level, so a dashboard never sees a family
//! appear out of nowhere.
//! Never does: per-cohort series; those are `render::cohorts`'.

use super::text::{family, line, sanitize_name};
use crate::metrics::{MetricKind, ProtocolMetric, R40_COUNTERS};

/// Broker-wide protocol figures, with every R40 counter present.
pub(super) fn render_protocol(out: &mut String, protocol: &[ProtocolMetric]) {
    for (name, help) in R40_COUNTERS {
        if !protocol
            .iter()
            .any(|metric| metric.name == name && metric.kind == MetricKind::Counter)
        {
            let full = format!("bps_{name}_total");
            family(out, &full, "counter", help);
            line(out, &full, &[], "0");
        }
    }
    for metric in protocol {
        let base = sanitize_name(metric.name);
        let (full, kind) = match metric.kind {
            MetricKind::Counter => (format!("bps_{base}_total"), "counter"),
            MetricKind::Gauge => (format!("bps_{base}"), "gauge"),
        };
        family(out, &full, kind, metric.help);
        line(out, &full, &[], &metric.value.to_string());
    }
}
