//! The Prometheus text exposition (format 0.0.4) of one scrape: `MetricsSnapshot`, what the
//! admin backend hands over, and `render_prometheus`, which writes its families in order.
//!
//! Owns: the order of the families in a scrape; one file per family group beneath it
//! (`core`: the cores' instruments merged and per core; `ws`: the WebSocket carrier's;
//! `protocol`: the broker-wide protocol figures; `cohorts`: the per-cohort series; `broker`:
//! memory, budget, heartbeats, readiness and the verification pool), and `text`, the format's
//! lines and escaping.
//! Never does: run on the hot path; all the merging, summing and formatting is paid by the
//! scraper.

mod broker;
mod cohorts;
mod core;
mod core_families;
mod p2p;
mod protocol;
mod text;
mod ws;

use std::sync::Arc;

use self::broker::render_broker;
use self::cohorts::render_cohorts;
use self::core::{
    render_core_counters, render_core_gauges, render_core_histograms, render_transports,
};
use self::p2p::render_p2p;
use self::protocol::render_protocol;
use self::text::{family, line};
use self::ws::render_ws;
use crate::metrics::{BrokerGauges, CohortFigures, CoreMetrics, ProtocolMetric};

/// Everything one scrape exports, handed over by the admin backend.
#[derive(Clone, Debug)]
pub struct MetricsSnapshot {
    /// The I/O driver in use: `io_uring` or `epoll`.
    pub driver: &'static str,
    /// Every core's instruments, in core order.
    pub cores: Vec<Arc<CoreMetrics>>,
    /// Broker-wide protocol figures. The R40 counters missing here are exported as zero.
    pub protocol: Vec<ProtocolMetric>,
    /// Per-cohort protocol counters.
    pub cohorts: CohortFigures,
    /// Memory and heartbeats.
    pub broker: BrokerGauges,
}

impl MetricsSnapshot {
    /// The Prometheus text exposition of this snapshot.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = render_prometheus(&self.cores, &self.protocol, &self.cohorts, self.driver);
        render_broker(&mut out, &self.broker);
        out
    }
}

/// Renders a scrape in the Prometheus text exposition format 0.0.4: per-core instruments merged
/// and per core, broker-wide protocol figures, per-cohort counters, and `bps_driver_info`.
#[must_use]
pub fn render_prometheus(
    cores: &[Arc<CoreMetrics>],
    protocol: &[ProtocolMetric],
    cohorts: &CohortFigures,
    driver: &str,
) -> String {
    let mut out = String::with_capacity(16 * 1024);
    family(
        &mut out,
        "bps_driver_info",
        "gauge",
        "The I/O driver in use (io_uring or epoll).",
    );
    line(
        &mut out,
        "bps_driver_info",
        &[("driver", driver)],
        &1_u64.to_string(),
    );
    family(
        &mut out,
        "bps_cores",
        "gauge",
        "Cores running a broker runtime.",
    );
    line(&mut out, "bps_cores", &[], &cores.len().to_string());

    render_core_counters(&mut out, cores);
    render_transports(&mut out, cores);
    render_ws(&mut out, cores);
    render_p2p(&mut out, cores);
    render_core_gauges(&mut out, cores);
    render_core_histograms(&mut out, cores);
    render_protocol(&mut out, protocol);
    render_cohorts(&mut out, protocol, cohorts);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{CohortSeries, MetricKind, OtherCohorts, R40_COUNTERS, Stage};
    use crate::protocol::counters::CohortLabel;

    fn label(id: &str) -> CohortLabel {
        CohortLabel {
            id: id.to_owned(),
            binding: "mnemonic".to_owned(),
            admin: "none".to_owned(),
        }
    }

    fn sample() -> String {
        let first = CoreMetrics::new_shared();
        let second = CoreMetrics::new_shared();
        first.frames_in.add(3);
        second.frames_in.add(4);
        first.connections_open.set(2);
        second.connections_open.set(5);
        first.verify_latency_us.record(100);
        second.verify_latency_us.record(3);
        first.stage_latency_us.record(Stage::Flush, 6);
        second.stage_latency_us.record(Stage::Flush, 2);
        second.stage_latency_us.record(Stage::ReadToTurn, 300);
        second.frames_per_write.record(16);
        let protocol = vec![
            ProtocolMetric {
                name: "wrong_stream",
                help: "R13 violations.",
                kind: MetricKind::Counter,
                value: 9,
            },
            ProtocolMetric {
                name: "cohorts_live",
                help: "Live cohorts.",
                kind: MetricKind::Gauge,
                value: 2,
            },
        ];
        let cohorts = CohortFigures {
            shown: vec![
                CohortSeries {
                    label: label("aabbccddeeff0011"),
                    subscribers: 4,
                    counters: vec![("wrong_stream", 4), ("joins", 7)],
                    streams_by_role: vec![("spectator", 3), ("publisher", 1)],
                    gauges: vec![("history_frames", 20), ("history_bytes", 86_000)],
                },
                CohortSeries {
                    label: label("ffff000000000000"),
                    subscribers: 0,
                    counters: vec![],
                    streams_by_role: vec![],
                    gauges: vec![],
                },
            ],
            other: OtherCohorts {
                cohorts: 3,
                counters: vec![("wrong_stream", 5)],
                streams_by_role: vec![("spectator", 6)],
                gauges: vec![("history_frames", 7)],
            },
        };
        render_prometheus(&[first, second], &protocol, &cohorts, "io_uring")
    }

    #[test]
    fn renders_merged_and_per_core_series() {
        let text = sample();
        assert!(text.contains("bps_driver_info{driver=\"io_uring\"} 1\n"));
        assert!(text.contains("bps_cores 2\n"));
        assert!(text.contains("# TYPE bps_frames_in_total counter\n"));
        assert!(text.contains("bps_frames_in_total 7\n"));
        assert!(text.contains("bps_core_frames_in_total{core=\"0\"} 3\n"));
        assert!(text.contains("bps_core_frames_in_total{core=\"1\"} 4\n"));
        assert!(text.contains("bps_connections_open 7\n"));
        assert!(text.contains("bps_core_connections_open{core=\"1\"} 5\n"));
    }

    #[test]
    fn renders_the_history_ring_gauges_per_cohort_and_for_the_others() {
        let text = sample();
        assert!(text.contains("# TYPE bps_cohort_history_frames gauge\n"));
        assert!(text.contains(
            "bps_cohort_history_frames{cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"} 20\n"
        ));
        assert!(text.contains(
            "bps_cohort_history_bytes{cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"} 86000\n"
        ));
        // A cohort without the gauges exports zero, not nothing.
        assert!(text.contains(
            "bps_cohort_history_bytes{cohort=\"ffff000000000000\",binding=\"mnemonic\",admin=\"none\"} 0\n"
        ));
        assert!(text.contains("# TYPE bps_cohort_other_history_frames gauge\n"));
        assert!(text.contains("bps_cohort_other_history_frames 7\n"));
        assert!(text.contains("bps_cohort_other_history_bytes 0\n"));
    }

    #[test]
    fn renders_histograms_cumulatively() {
        let text = sample();
        assert!(text.contains("# TYPE bps_verify_latency_us histogram\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"2\"} 0\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"4\"} 1\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"128\"} 2\n"));
        assert!(text.contains("bps_verify_latency_us_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("bps_verify_latency_us_sum 103\n"));
        assert!(text.contains("bps_verify_latency_us_count 2\n"));
        assert!(text.contains("bps_core_verify_latency_us_bucket{core=\"0\",le=\"128\"} 1\n"));
        assert!(text.contains("bps_core_verify_latency_us_count{core=\"1\"} 1\n"));
        assert!(text.contains("bps_frames_per_write_bucket{le=\"16\"} 1\n"));
        assert!(text.contains("bps_frames_per_write_bucket{le=\"1024\"} 1\n"));
    }

    #[test]
    fn renders_the_stage_histograms_merged_and_per_core_by_stage() {
        let text = sample();
        assert_eq!(
            text.matches("# TYPE bps_stage_latency_us histogram\n")
                .count(),
            1
        );
        assert!(text.contains("# TYPE bps_core_stage_latency_us histogram\n"));
        assert!(text.contains("bps_stage_latency_us_bucket{stage=\"flush\",le=\"2\"} 1\n"));
        assert!(text.contains("bps_stage_latency_us_bucket{stage=\"flush\",le=\"8\"} 2\n"));
        assert!(text.contains("bps_stage_latency_us_sum{stage=\"flush\"} 8\n"));
        assert!(text.contains("bps_stage_latency_us_count{stage=\"read_to_turn\"} 1\n"));
        assert!(text.contains("bps_stage_latency_us_count{stage=\"coalesce_wait\"} 0\n"));
        assert!(text.contains(
            "bps_core_stage_latency_us_bucket{core=\"1\",stage=\"read_to_turn\",le=\"512\"} 1\n"
        ));
        assert!(text.contains("bps_core_stage_latency_us_count{core=\"0\",stage=\"flush\"} 1\n"));
        for stage in Stage::ALL {
            let series = format!("bps_stage_latency_us_count{{stage=\"{}\"}}", stage.name());
            assert!(text.contains(&series), "{series}");
        }
    }

    #[test]
    fn renders_every_r40_counter_in_total_and_per_cohort() {
        let text = sample();
        for (name, _) in R40_COUNTERS {
            assert!(
                text.contains(&format!("# TYPE bps_{name}_total counter\n")),
                "{name}"
            );
            assert!(
                text.contains(&format!(
                    "bps_cohort_{name}_total{{cohort=\"ffff000000000000\",binding=\"mnemonic\",admin=\"none\"}}"
                )),
                "{name}"
            );
        }
        assert!(text.contains("bps_wrong_stream_total 9\n"));
        assert!(text.contains("bps_unknown_kind_total 0\n"));
        assert!(text.contains("bps_cohorts_live 2\n"));
        let labels = "cohort=\"aabbccddeeff0011\",binding=\"mnemonic\",admin=\"none\"";
        assert!(text.contains(&format!("bps_cohort_wrong_stream_total{{{labels}}} 4\n")));
        assert!(text.contains(&format!("bps_cohort_joins_total{{{labels}}} 7\n")));
        assert!(text.contains(&format!(
            "bps_cohort_streams{{{labels},role=\"spectator\"}} 3\n"
        )));
        assert!(text.contains("bps_cohorts_other 3\n"));
        assert!(text.contains("bps_cohort_other_wrong_stream 5\n"));
        assert!(text.contains("bps_cohort_other_joins 0\n"));
        assert!(text.contains("bps_cohort_other_streams{role=\"spectator\"} 6\n"));
    }

    #[test]
    fn exposition_is_well_formed() {
        let text = sample();
        let mut declared: Vec<String> = Vec::new();
        for text_line in text.lines() {
            if let Some(rest) = text_line.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap_or_default().to_owned();
                assert!(!declared.contains(&name), "family declared twice: {name}");
                declared.push(name);
                continue;
            }
            if text_line.starts_with("# HELP ") {
                continue;
            }
            let (series, value) = text_line.rsplit_once(' ').expect("sample has a value");
            assert!(value.parse::<f64>().is_ok(), "bad value in {text_line}");
            let name = series.split('{').next().unwrap_or_default();
            assert!(
                name.chars()
                    .all(|character| character.is_ascii_alphanumeric() || character == '_'),
                "bad name in {text_line}"
            );
            let family = declared.last().expect("a sample follows its TYPE line");
            assert!(
                name == family
                    || name
                        .strip_prefix(family.as_str())
                        .is_some_and(|suffix| ["_bucket", "_sum", "_count"].contains(&suffix)),
                "sample {name} outside its family {family}"
            );
        }
    }
}
