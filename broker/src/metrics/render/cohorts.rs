//! The per-cohort families: for the cohorts shown on their own, their streams by role, their
//! gauges and their counters (`bps_cohort_*{cohort,binding,admin}`); for the rest, the same
//! figures summed into unlabelled `bps_cohort_other_*` gauges, and their number.
//!
//! Owns: the per-cohort labels, and the set of counter families every scrape carries (the R40
//! names always, plus any other name a cohort reports).
//! Never does: choose which cohorts are shown; `protocol_figures` does, at most
//! `limits.cohort_series_max` of them.

use super::text::{family, line, sanitize_name};
use crate::metrics::protocol::value_of;
use crate::metrics::{COHORT_GAUGES, CohortFigures, OtherCohorts, ProtocolMetric, R40_COUNTERS};
use crate::protocol::counters::CohortLabel;

/// Per-cohort families: the R40 names always, plus any other name a cohort reports; the
/// shown cohorts as counters, the rest summed into `bps_cohort_other_*` gauges.
pub(super) fn render_cohorts(
    out: &mut String,
    protocol: &[ProtocolMetric],
    cohorts: &CohortFigures,
) {
    let names = counter_names(protocol, cohorts);
    render_shown_streams(out, cohorts);
    render_shown_figures(out, &names, cohorts);
    render_other_cohorts(out, &names, &cohorts.other);
}

/// The counter families of the cohorts, with their help: the R40 names first, then any other
/// name a cohort reports, in the order first seen (its help from the broker-wide figure).
fn counter_names<'a>(
    protocol: &'a [ProtocolMetric],
    cohorts: &'a CohortFigures,
) -> Vec<(&'a str, &'a str)> {
    let mut names: Vec<(&str, &str)> = R40_COUNTERS.to_vec();
    for counters in cohorts
        .shown
        .iter()
        .map(|series| &series.counters)
        .chain([&cohorts.other.counters])
    {
        for (name, _) in counters {
            if !names.iter().any(|(known, _)| known == name) {
                let help = protocol
                    .iter()
                    .find(|metric| metric.name == *name)
                    .map_or("Per-cohort protocol counter.", |metric| metric.help);
                names.push((name, help));
            }
        }
    }
    names
}

/// `bps_cohort_streams{cohort,binding,admin,role}` of the shown cohorts.
fn render_shown_streams(out: &mut String, cohorts: &CohortFigures) {
    family(
        out,
        "bps_cohort_streams",
        "gauge",
        "Streams attached to the cohort, by role.",
    );
    for series in &cohorts.shown {
        for (role, count) in &series.streams_by_role {
            let mut labels = series_labels(&series.label);
            labels.push(("role", role));
            line(out, "bps_cohort_streams", &labels, &count.to_string());
        }
    }
}

/// The gauges, then the counters, of the shown cohorts: one sample per cohort in each family,
/// zero for a name the cohort did not report.
fn render_shown_figures(out: &mut String, names: &[(&str, &str)], cohorts: &CohortFigures) {
    for (name, help) in COHORT_GAUGES {
        let full = format!("bps_cohort_{name}");
        family(out, &full, "gauge", help);
        for series in &cohorts.shown {
            line(
                out,
                &full,
                &series_labels(&series.label),
                &value_of(&series.gauges, name).to_string(),
            );
        }
    }
    for (name, help) in names {
        let full = format!("bps_cohort_{}_total", sanitize_name(name));
        family(out, &full, "counter", help);
        for series in &cohorts.shown {
            line(
                out,
                &full,
                &series_labels(&series.label),
                &value_of(&series.counters, name).to_string(),
            );
        }
    }
}

/// The cohorts without their own series, summed: their number, streams by role, gauges and
/// counters.
fn render_other_cohorts(out: &mut String, names: &[(&str, &str)], other: &OtherCohorts) {
    family(
        out,
        "bps_cohorts_other",
        "gauge",
        "Live cohorts beyond limits.cohort_series_max, summed into the bps_cohort_other_* families.",
    );
    line(out, "bps_cohorts_other", &[], &other.cohorts.to_string());
    family(
        out,
        "bps_cohort_other_streams",
        "gauge",
        "Streams of the cohorts without their own series, by role.",
    );
    for (role, count) in &other.streams_by_role {
        line(
            out,
            "bps_cohort_other_streams",
            &[("role", role)],
            &count.to_string(),
        );
    }
    render_other_sums(out, names, other);
}

/// The gauges and counters of the cohorts without their own series, each summed into an
/// unlabelled gauge (a sum over a set that changes between scrapes may go down).
fn render_other_sums(out: &mut String, names: &[(&str, &str)], other: &OtherCohorts) {
    for (name, help) in COHORT_GAUGES {
        let full = format!("bps_cohort_other_{name}");
        family(
            out,
            &full,
            "gauge",
            &format!("Sum over the cohorts without their own series: {help}"),
        );
        line(out, &full, &[], &value_of(&other.gauges, name).to_string());
    }
    for (name, help) in names {
        let full = format!("bps_cohort_other_{}", sanitize_name(name));
        let help = format!(
            "Sum over the cohorts without their own series (may go down as that set changes): {help}"
        );
        family(out, &full, "gauge", &help);
        line(
            out,
            &full,
            &[],
            &value_of(&other.counters, name).to_string(),
        );
    }
}

/// The labels of one cohort's series.
fn series_labels(label: &CohortLabel) -> Vec<(&'static str, &str)> {
    vec![
        ("cohort", label.id.as_str()),
        ("binding", label.binding.as_str()),
        ("admin", label.admin.as_str()),
    ]
}
