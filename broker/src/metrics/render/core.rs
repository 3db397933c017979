//! The families of the cores' instruments: each counter and gauge merged (`bps_<name>`) and
//! per core (`bps_core_<name>{core}`), in separate families so that `sum()` over either never
//! double counts; histograms the same way, cumulated at scrape; per-transport counters summed.
//!
//! Owns: merging the cores' figures at scrape time and the histogram series (`_bucket`,
//! `_sum`, `_count`), including the stage histograms' `stage` label.
//! Never does: read an instrument's name off anything but `render::core_families`.

use std::sync::Arc;

use super::core_families::{CORE_COUNTERS, CORE_GAUGES, CORE_HISTOGRAMS, CORE_PER_TRANSPORT};
use super::text::{family, line};
use crate::labels::Transport;
use crate::metrics::{CoreMetrics, HistogramSnapshot, STAGE_FAMILY, STAGE_HELP, Stage};

/// Core counters, merged and per core. The names come from a table, not from the cores, so
/// that a broker with no cores yet still exports every family.
pub(super) fn render_core_counters(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    for (name, help, counter) in CORE_COUNTERS {
        render_core_scalar(out, cores, (name, help), ("counter", "_total"), |core| {
            counter(core).get()
        });
    }
}

/// Per-transport counters, summed over cores: `bps_<name>_total{transport="tcp"}`.
pub(super) fn render_transports(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    for (name, help, per_transport) in CORE_PER_TRANSPORT {
        let full = format!("bps_{name}_total");
        family(out, &full, "counter", help);
        for transport in Transport::ALL {
            let total = cores.iter().fold(0_u64, |sum, core| {
                sum.wrapping_add(per_transport(core).get(transport))
            });
            line(
                out,
                &full,
                &[("transport", transport.name())],
                &total.to_string(),
            );
        }
    }
}

/// Core gauges, summed and per core.
pub(super) fn render_core_gauges(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    for (name, help, gauge) in CORE_GAUGES {
        render_core_scalar(out, cores, (name, help), ("gauge", ""), |core| {
            gauge(core).get()
        });
    }
}

/// One merged family `bps_<name><suffix>` and one per-core family `bps_core_<name><suffix>`,
/// with the value of a core from `value_of`.
fn render_core_scalar(
    out: &mut String,
    cores: &[Arc<CoreMetrics>],
    (name, help): (&str, &str),
    (kind, suffix): (&str, &str),
    value_of: impl Fn(&CoreMetrics) -> u64,
) {
    let total: u64 = cores
        .iter()
        .fold(0_u64, |sum, core| sum.wrapping_add(value_of(core)));
    let merged = format!("bps_{name}{suffix}");
    family(out, &merged, kind, help);
    line(out, &merged, &[], &total.to_string());
    let per_core = format!("bps_core_{name}{suffix}");
    family(out, &per_core, kind, help);
    for (core_index, core) in cores.iter().enumerate() {
        line(
            out,
            &per_core,
            &[("core", &core_index.to_string())],
            &value_of(core).to_string(),
        );
    }
}

/// Core histograms, merged and per core, then the stage histograms.
pub(super) fn render_core_histograms(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    // A zeroed core, so the merged figure has every bucket even with no cores.
    let template = CoreMetrics::default();
    for (name, help, histogram) in CORE_HISTOGRAMS {
        let snapshots: Vec<HistogramSnapshot> = cores
            .iter()
            .map(|core| histogram(core).snapshot())
            .collect();
        let mut merged = histogram(&template).snapshot();
        for snapshot in &snapshots {
            merged.merge(snapshot);
        }
        let merged_name = format!("bps_{name}");
        family(out, &merged_name, "histogram", help);
        histogram_lines(out, &merged_name, &[], &merged);
        let per_core = format!("bps_core_{name}");
        family(out, &per_core, "histogram", help);
        for (core_index, snapshot) in snapshots.iter().enumerate() {
            let core_label = core_index.to_string();
            histogram_lines(out, &per_core, &[("core", &core_label)], snapshot);
        }
    }
    render_stages(out, cores, &template);
}

/// The stage histograms (`metrics::stages`): one family `bps_stage_latency_us{stage}`, merged,
/// and one `bps_core_stage_latency_us{core,stage}`, so a stage is one label away from another.
fn render_stages(out: &mut String, cores: &[Arc<CoreMetrics>], template: &CoreMetrics) {
    let merged_name = format!("bps_{STAGE_FAMILY}");
    family(out, &merged_name, "histogram", STAGE_HELP);
    for stage in Stage::ALL {
        let mut merged = template.stage_latency_us.get(stage).snapshot();
        for core in cores {
            merged.merge(&core.stage_latency_us.get(stage).snapshot());
        }
        histogram_lines(out, &merged_name, &[("stage", stage.name())], &merged);
    }
    let per_core = format!("bps_core_{STAGE_FAMILY}");
    family(out, &per_core, "histogram", STAGE_HELP);
    for (core_index, core) in cores.iter().enumerate() {
        let core_label = core_index.to_string();
        for stage in Stage::ALL {
            let labels = [("core", core_label.as_str()), ("stage", stage.name())];
            let snapshot = core.stage_latency_us.get(stage).snapshot();
            histogram_lines(out, &per_core, &labels, &snapshot);
        }
    }
}

/// The `_bucket`, `_sum` and `_count` series of one histogram (buckets cumulative), each with
/// `labels` (and `le` on the buckets).
fn histogram_lines(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    snapshot: &HistogramSnapshot,
) {
    let bucket_name = format!("{name}_bucket");
    let mut cumulative = 0_u64;
    let finite = snapshot.buckets.len().saturating_sub(1);
    for (index, count) in snapshot.buckets.iter().enumerate() {
        cumulative = cumulative.wrapping_add(*count);
        let bound = if index < finite {
            (1_u64 << index).to_string()
        } else {
            "+Inf".to_owned()
        };
        let mut bucket_labels: Vec<(&str, &str)> = Vec::with_capacity(labels.len() + 1);
        bucket_labels.extend_from_slice(labels);
        bucket_labels.push(("le", &bound));
        line(out, &bucket_name, &bucket_labels, &cumulative.to_string());
    }
    line(
        out,
        &format!("{name}_sum"),
        labels,
        &snapshot.sum.to_string(),
    );
    // The +Inf bucket and `_count` must agree; take the bucket total, which is what was
    // cumulated above, so a scrape racing a `record` stays self-consistent.
    line(
        out,
        &format!("{name}_count"),
        labels,
        &cumulative.to_string(),
    );
}
