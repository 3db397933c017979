//! Metrics: lock-free per-core instruments and the Prometheus text rendering of a scrape.
//!
//! Owns, one file each: the instruments (`instruments`: `Counter`, `Gauge`, `Histogram`,
//! atomics only), a core's instruments (`core`: `CoreMetrics`, one per core, shared by `Arc`,
//! written only by the core that owns it), the protocol figures a scrape carries (`protocol`:
//! `ProtocolMetric`, `CohortSeries`, `protocol_figures`), the broker-wide gauges (`broker`:
//! `BrokerGauges`), the stages of a publication's way through a core and their latency
//! histograms (`stages`: `Stage`, `StageLatencies`), and the rendering (`render`: `MetricsSnapshot`, `render_prometheus`), which
//! merges the per-core figures at scrape time and writes the text exposition format 0.0.4.
//! Everything public is re-exported here, so users name `crate::metrics::X`.
//! Never does: take a lock, allocate or format on the hot path. Recording is one relaxed
//! atomic add; all the merging, summing and formatting is paid by the scraper.
//!
//! Naming: every family starts with `bps_`. Counters end in `_total`. Figures kept per core
//! are exported twice: merged as `bps_<name>` and per core as `bps_core_<name>{core="N"}`, in
//! separate families so that `sum()` over either never double counts. Protocol counters are
//! exported broker-wide as `bps_<name>_total` and per cohort as
//! `bps_cohort_<name>_total{cohort,binding,admin}`, where `cohort` is 16 hex digits of
//! keccak256 of the whole canonical key (R1), so two cohorts never share a series. Per-cohort
//! series are bounded: the `limits.cohort_series_max` cohorts with the most subscribers at
//! the scrape get their own; the rest are summed into `bps_cohort_other_<name>` gauges (a
//! sum over a set that changes between scrapes may go down, so it is not a counter; use the
//! broker-wide totals for rates) and counted by `bps_cohorts_other`. The cohorts' gauges (their
//! history rings, D11) follow the same split: `bps_cohort_<name>` for the shown cohorts,
//! `bps_cohort_other_<name>` for the rest, and `bps_<name>` summed over every live cohort.

mod broker;
mod core;
mod instruments;
mod p2p;
mod protocol;
mod render;
mod stages;

pub use self::broker::{BrokerGauges, P2pHostFigures, P2pIdentity, VerifyPoolFigures};
pub use self::core::{
    CoreMetrics, FRAMES_PER_WRITE_BUCKETS, LATENCY_BUCKETS, PerTransport, WS_CARRIER_CLOSES,
    WS_ENDPOINTS, WS_HTTP_STATUSES, WsMetrics,
};
pub use self::instruments::{Counter, Gauge, Histogram, HistogramSnapshot};
pub use self::p2p::{P2P_DIRECTIONS, P2P_REASONS, P2pMetrics};
pub use self::protocol::{
    COHORT_GAUGES, CohortFigures, CohortSeries, MetricKind, OtherCohorts, ProtocolMetric,
    R40_COUNTERS, protocol_figures,
};
pub use self::render::{MetricsSnapshot, render_prometheus};
pub use self::stages::{STAGE_FAMILY, STAGE_HELP, Stage, StageLatencies};
