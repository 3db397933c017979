//! The protocol figures a scrape carries: broker-wide totals of the protocol core's counters
//! (`ProtocolMetric`) and the per-cohort series (`CohortSeries`), bounded to the cohorts with
//! the most subscribers and the rest summed (`OtherCohorts`).
//!
//! Owns: the R40 counters and cohort gauges every cohort exports, with their help texts; the
//! help text of every other protocol counter; `protocol_figures`, which reads the counter
//! registries of every core's machine at scrape time.
//! Never does: render; `render::protocol` and `render::cohorts` write these figures.

use crate::protocol::counters::{
    CohortCounters, CohortLabel, Counter as ProtocolCounter, CounterRegistry,
};

/// The counters every cohort MUST expose (R40: SWIP-74's seven plus SWIP-60's
/// `invalid_roster`), with their help text. Rendered per cohort and in total even when zero,
/// so that a dashboard never sees a family appear out of nowhere.
pub const R40_COUNTERS: [(&str, &str); 8] = [
    (
        "wrong_stream",
        "Frames from a spectator or silent stream, or service kinds from a non-admin (R13).",
    ),
    ("unknown_kind", "Frames of an unknown kind, dropped (R14)."),
    (
        "wrong_challenge",
        "Frames under another stream's challenge, dropped (R15).",
    ),
    (
        "invalid_soc",
        "Frames whose chunk failed id derivation or SOC validation (R17).",
    ),
    (
        "claim_timeout",
        "Pending or silent streams disconnected at the claim deadline (R35).",
    ),
    ("retransmit", "Frames below the cursor, dropped (R16)."),
    (
        "queue_reset",
        "Streams reset because their outbound queue was full (R26).",
    ),
    (
        "invalid_roster",
        "Valid ROSTER chunks whose payload did not decode (R20).",
    ),
];

/// The gauges every cohort exports (D11: the size of its history ring, zero without history),
/// with their help text.
pub const COHORT_GAUGES: [(&str, &str); 2] = [
    (
        "history_frames",
        "Retained DATA frames in the history ring (D11; limits.history_frames_max per cohort).",
    ),
    (
        "history_bytes",
        "Frame bytes in the history ring (D11; limits.history_bytes_max per cohort).",
    ),
];

/// The kind of a broker-wide protocol figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricKind {
    /// Monotonic; exported with the `_total` suffix.
    Counter,
    /// Goes up and down (live cohorts, attached streams).
    Gauge,
}

/// One broker-wide figure of the protocol core (for instance a total of an R40 counter, or the
/// number of live cohorts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolMetric {
    /// Exported name without the `bps_` prefix and without `_total`, e.g. `wrong_stream`.
    pub name: &'static str,
    /// One-line help text.
    pub help: &'static str,
    /// Counter or gauge.
    pub kind: MetricKind,
    /// The value, summed over every home core.
    pub value: u64,
}

/// The protocol counters and role gauges of one live cohort, or of the cohorts summed into
/// `other`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CohortSeries {
    /// The series' labels (a hash of the key, the binding, the admin).
    pub label: CohortLabel,
    /// Streams receiving its deliveries: the order in which cohorts get their own series.
    pub subscribers: u64,
    /// Counter name (as in `ProtocolMetric::name`) and value. The R40 names missing here are
    /// exported as zero.
    pub counters: Vec<(&'static str, u64)>,
    /// Attached streams by role name (`pending`, `publisher`, `spectator`, `silent`),
    /// exported as `bps_cohort_streams{cohort,role}`.
    pub streams_by_role: Vec<(&'static str, u64)>,
    /// The cohort's gauges by name (see `COHORT_GAUGES`); missing names are exported as zero.
    pub gauges: Vec<(&'static str, u64)>,
}

impl CohortSeries {
    fn of(cohort: &CohortCounters) -> CohortSeries {
        CohortSeries {
            label: cohort.label().clone(),
            subscribers: cohort.subscribers(),
            counters: cohort.counters().snapshot().into_iter().collect(),
            streams_by_role: cohort.roles_snapshot().into_iter().collect(),
            gauges: cohort.gauges_snapshot().into_iter().collect(),
        }
    }
}

/// The cohorts beyond `limits.cohort_series_max`, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherCohorts {
    /// How many cohorts are summed here.
    pub cohorts: u64,
    /// Their counters, summed per name.
    pub counters: Vec<(&'static str, u64)>,
    /// Their streams by role, summed.
    pub streams_by_role: Vec<(&'static str, u64)>,
    /// Their gauges, summed.
    pub gauges: Vec<(&'static str, u64)>,
}

impl OtherCohorts {
    fn add(&mut self, series: &CohortSeries) {
        self.cohorts += 1;
        add_into(&mut self.counters, &series.counters);
        add_into(&mut self.streams_by_role, &series.streams_by_role);
        add_into(&mut self.gauges, &series.gauges);
    }
}

fn add_into(sums: &mut Vec<(&'static str, u64)>, values: &[(&'static str, u64)]) {
    for (name, value) in values {
        match sums.iter_mut().find(|(known, _)| known == name) {
            Some((_, sum)) => *sum = sum.wrapping_add(*value),
            None => sums.push((name, *value)),
        }
    }
}

/// The per-cohort figures of one scrape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CohortFigures {
    /// The cohorts with their own series, most subscribers first (ties by id).
    pub shown: Vec<CohortSeries>,
    /// The rest, summed.
    pub other: OtherCohorts,
}

/// The protocol figures of a scrape, from the counter registries of every core's machine: the
/// totals summed (they survive cohort reclaim, so they stay monotonic), a `cohorts_live`
/// gauge, and the per-cohort figures with at most `series_max` cohorts shown on their own.
#[must_use]
pub fn protocol_figures<'a>(
    registries: impl IntoIterator<Item = &'a CounterRegistry>,
    series_max: usize,
) -> (Vec<ProtocolMetric>, CohortFigures) {
    let mut totals: Vec<ProtocolMetric> = ProtocolCounter::ALL
        .iter()
        .map(|counter| ProtocolMetric {
            name: counter.name(),
            help: protocol_help(counter.name()),
            kind: MetricKind::Counter,
            value: 0,
        })
        .collect();
    let mut all = Vec::new();
    for registry in registries {
        for (total, counter) in totals.iter_mut().zip(ProtocolCounter::ALL) {
            total.value = total.value.wrapping_add(registry.totals().get(counter));
        }
        all.extend(
            registry
                .live_cohorts()
                .iter()
                .map(|cohort| CohortSeries::of(cohort)),
        );
    }
    totals.extend(cohort_gauges(&all));
    (totals, split_shown(all, series_max))
}

/// The broker-wide gauges of the live cohorts: how many there are, and each of
/// `COHORT_GAUGES` summed over them.
fn cohort_gauges(all: &[CohortSeries]) -> Vec<ProtocolMetric> {
    let mut gauges = vec![ProtocolMetric {
        name: "cohorts_live",
        help: "Live cohorts (R31).",
        kind: MetricKind::Gauge,
        value: all.len() as u64,
    }];
    for (name, help) in COHORT_GAUGES {
        gauges.push(ProtocolMetric {
            name,
            help,
            kind: MetricKind::Gauge,
            value: all
                .iter()
                .map(|series| value_of(&series.gauges, name))
                .fold(0, u64::wrapping_add),
        });
    }
    gauges
}

/// The `series_max` cohorts with the most subscribers (ties by id) shown on their own, the
/// rest summed.
fn split_shown(mut all: Vec<CohortSeries>, series_max: usize) -> CohortFigures {
    all.sort_by(|first, second| {
        second
            .subscribers
            .cmp(&first.subscribers)
            .then_with(|| first.label.id.cmp(&second.label.id))
    });
    let mut figures = CohortFigures::default();
    for series in all {
        if figures.shown.len() < series_max {
            figures.shown.push(series);
        } else {
            figures.other.add(&series);
        }
    }
    figures
}

/// The help text of a protocol counter: the R40 text, or one line per extra counter.
fn protocol_help(name: &str) -> &'static str {
    if let Some((_, help)) = R40_COUNTERS.iter().find(|(known, _)| *known == name) {
        return help;
    }
    match name {
        "malformed" => "Frame bodies that are not a Broadcast (violations).",
        "joins_ok" => "Joins answered OK.",
        "joins_full" => "Joins answered FULL (R30..R33).",
        "joins_rejected" => "Joins answered REJECTED (R3, D6, D7, D11).",
        "joins_blocked" => "Joins from a blocklisted peer, closed without an Ack (R39).",
        "accepted_data" => "Accepted DATA publications.",
        "accepted_auth" => "Accepted AUTH frames (never delivered).",
        "accepted_roster" => "Accepted ROSTER publications.",
        "accepted_eos" => "Accepted EOS publications.",
        "claims" => "Streams that claimed and became publishers (R7).",
        "deliveries" => "Frames handed to the I/O layer for receiving streams.",
        "drop_revoked_in_grace" => "Frames of revoked streams dropped within the grace (R24).",
        "drop_stream_gone" => "Frames for streams already closed, dropped.",
        "upstream_invalid" => {
            "Edge mode: frames from the root a subscriber drops (R41: undecodable, AUTH, wrong id, invalid SOC, owner not admitted)."
        }
        "superseded" => "Publisher streams reset by a newer claim of the same address (R29).",
        "relay_forwarded" => {
            "Edge mode: frames from the cohort's root accepted and delivered to the edge's own streams (docs/SCALING.md)."
        }
        "relay_spliced_frames" => {
            "Edge mode: frames passed through spliced streams, both ways (docs/SCALING.md)."
        }
        "relay_loops_refused" => {
            "Edge mode: Joins REJECTED because their relay path holds this broker: a loop of edges (docs/SCALING.md)."
        }
        "blocklisted" => "Blocklist entries issued (R39).",
        "verify_requests" => "Verification jobs issued by the protocol core.",
        "cursor_evictions" => {
            "Publisher cursors evicted from a full cursor table, least recently used first (R27)."
        }
        "drop_rate_resets" => {
            "Streams reset for dropping more than limits.dropped_frames_per_stream_per_s_max frames a second."
        }
        "cohorts_created" => "Cohorts created (R2).",
        "cohorts_reclaimed_empty" => "Cohorts reclaimed because their last stream left (R36).",
        "cohorts_reclaimed_inactive" => "Cohorts reclaimed for inactivity (R34).",
        "cohorts_reclaimed_eos" => "Cohorts reclaimed after an EOS (R21).",
        "cohorts_reclaimed_idle" => {
            "Cohorts with an empty fan-out set reclaimed to make room in a full cohort table (R31)."
        }
        "history_frames_served" => {
            "Retained DATA frames sent in history backlogs to streams entering a fan-out set (D11)."
        }
        _ => UNDESCRIBED_HELP,
    }
}

/// The help of a protocol counter this file has no line for (a test keeps it unused).
const UNDESCRIBED_HELP: &str = "Protocol event count.";

/// The value of `name` in a list of named figures; zero when it is missing.
pub(super) fn value_of(counters: &[(&'static str, u64)], name: &str) -> u64 {
    counters
        .iter()
        .find(|(counter, _)| *counter == name)
        .map_or(0, |(_, value)| *value)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::metrics::render_prometheus;

    #[test]
    fn every_protocol_counter_has_its_own_help() {
        let undescribed: Vec<&str> = crate::protocol::counters::Counter::ALL
            .iter()
            .map(|counter| counter.name())
            .filter(|name| protocol_help(name) == UNDESCRIBED_HELP)
            .collect();
        assert!(undescribed.is_empty(), "no help line for {undescribed:?}");
    }

    fn registered(registry: &CounterRegistry, serial: u64, topic: u8) -> Arc<CohortCounters> {
        let spec = bps_proto::Spec {
            topic: [topic; 32],
            binding: bps_proto::Binding::Mnemonic,
            admin: None,
            all: false,
            history: false,
            closed: false,
        };
        let cohort = Arc::new(CohortCounters::new(&spec.key(), &spec));
        registry.register(serial, Arc::clone(&cohort));
        cohort
    }

    #[test]
    fn protocol_figures_sum_registries_and_bound_the_cohorts_shown() {
        let first = CounterRegistry::default();
        let second = CounterRegistry::default();
        let one = registered(&first, 1, 1);
        first.add(&one, ProtocolCounter::Retransmit, 2);
        let two = registered(&second, 1, 2);
        second.add(&two, ProtocolCounter::Retransmit, 4);
        // Equal subscriber counts: the lower id is shown.
        let (shown, hidden_retransmits) = if one.label().id < two.label().id {
            (one, 4)
        } else {
            (two, 2)
        };
        let shown_retransmits = 6 - hidden_retransmits;
        second.add_total(ProtocolCounter::Retransmit, 3);
        second.add_total(ProtocolCounter::JoinsOk, 1);
        let (totals, cohorts) = protocol_figures([&first, &second], 1);
        let value = |name: &str| {
            totals
                .iter()
                .find(|metric| metric.name == name)
                .map(|metric| metric.value)
        };
        assert_eq!(value("retransmit"), Some(9));
        assert_eq!(value("joins_ok"), Some(1));
        assert_eq!(value("cohorts_live"), Some(2));
        // No ring holds anything, and the broker-wide ring gauges are there all the same.
        assert_eq!(value("history_frames"), Some(0));
        assert_eq!(value("history_bytes"), Some(0));
        assert_eq!(value("history_frames_served"), Some(0));
        assert_eq!(cohorts.shown.len(), 1);
        assert_eq!(cohorts.shown[0].label, *shown.label());
        assert!(
            cohorts.shown[0]
                .counters
                .contains(&("retransmit", shown_retransmits))
        );
        assert_eq!(cohorts.other.cohorts, 1);
        assert!(
            cohorts
                .other
                .counters
                .contains(&("retransmit", hidden_retransmits))
        );
        let text = render_prometheus(&[], &totals, &cohorts, "epoll");
        assert!(text.contains("bps_retransmit_total 9\n"));
        assert!(text.contains("# TYPE bps_history_frames gauge\nbps_history_frames 0\n"));
        assert!(text.contains("# TYPE bps_history_frames_served_total counter\n"));
        assert!(text.contains("# HELP bps_joins_ok_total Joins answered OK.\n"));
        assert!(text.contains(&format!(
            "bps_cohort_retransmit_total{{cohort=\"{}\",binding=\"mnemonic\",admin=\"none\"}} {shown_retransmits}\n",
            shown.label().id
        )));
        assert!(text.contains(&format!(
            "bps_cohort_other_retransmit {hidden_retransmits}\n"
        )));
    }
}
