//! The WebSocket carrier's families, summed over cores: upgrades by endpoint, HTTP answers by
//! status, carrier closes by code (each with `other` last), and its unlabelled gauges and
//! counters.
//!
//! Owns: the names, kinds and help texts of the `bps_ws_*` families, in export order.
//! Never does: export a WebSocket figure per core.

use std::sync::Arc;

use super::text::{family, line};
use crate::metrics::{CoreMetrics, WS_CARRIER_CLOSES, WS_ENDPOINTS, WS_HTTP_STATUSES};

/// Reads one figure of a core.
type Pick = fn(&CoreMetrics) -> u64;

/// The unlabelled families: name, kind, help and the figure summed over cores, in export
/// order.
const WS_UNLABELLED: [(&str, &str, &str, Pick); 8] = [
    (
        "bps_ws_static_in_flight",
        "gauge",
        "Static-file answers of the WebSocket listener being written.",
        |core| core.ws.static_in_flight.get(),
    ),
    (
        "bps_ws_refusals_in_flight",
        "gauge",
        "Refusal answers of the WebSocket listener being written at accept.",
        |core| core.ws.refusals_in_flight.get(),
    ),
    (
        "bps_ws_static_busy_total",
        "counter",
        "Static-file requests answered 503 because their core had its bound of answers in flight.",
        |core| core.ws.static_busy.get(),
    ),
    (
        "bps_ws_service_posts_limited_total",
        "counter",
        "W5 POSTs answered 429 because their peer was over ws.service_posts_per_peer_per_s.",
        |core| core.ws.service_posts_limited.get(),
    ),
    (
        "bps_ws_service_busy_total",
        "counter",
        "W5 POSTs answered 503 because their core had its bound of relays waiting.",
        |core| core.ws.service_busy.get(),
    ),
    (
        "bps_ws_service_strikes_total",
        "counter",
        "W5 POSTs that did not validate, each a blocklist strike against its peer.",
        |core| core.ws.service_strikes.get(),
    ),
    (
        "bps_ws_refusals_closed_total",
        "counter",
        "Connections refused at accept and closed at once, no refusal answer slot being free.",
        |core| core.ws.refusals_closed.get(),
    ),
    (
        "bps_ws_head_timeouts_total",
        "counter",
        "Connections closed, without a blocklist strike, for sending no request head in time.",
        |core| core.ws.head_timeouts.get(),
    ),
];

/// The WebSocket carrier's families, summed over cores.
pub(super) fn render_ws(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let name = "bps_ws_upgrades_total";
    family(out, name, "counter", "WebSocket upgrades, by endpoint.");
    for (index, endpoint) in WS_ENDPOINTS.iter().enumerate() {
        let total = sum(cores, |core| core.ws.upgrades[index].get());
        line(out, name, &[("endpoint", endpoint)], &total.to_string());
    }
    render_with_other(
        out,
        cores,
        (
            "bps_ws_http_answers_total",
            "HTTP answers of the WebSocket listener other than an upgrade, by status.",
        ),
        ("status", &WS_HTTP_STATUSES.map(|status| status.to_string())),
        |core, index| core.ws.http_answers[index].get(),
    );
    render_with_other(
        out,
        cores,
        (
            "bps_ws_carrier_closes_total",
            "WebSocket sessions the carrier closed (peer faults, idle sessions), by close code.",
        ),
        ("code", &WS_CARRIER_CLOSES.map(|code| code.to_string())),
        |core, index| core.ws.carrier_closes[index].get(),
    );
    for (name, kind, help, pick) in WS_UNLABELLED {
        family(out, name, kind, help);
        line(out, name, &[], &sum(cores, pick).to_string());
    }
}

/// A counter family with one sample per known label value and a last one for `other`; the
/// sample at `index` sums `pick(core, index)` over cores.
fn render_with_other(
    out: &mut String,
    cores: &[Arc<CoreMetrics>],
    (name, help): (&str, &str),
    (label, known): (&str, &[String]),
    pick: impl Fn(&CoreMetrics, usize) -> u64,
) {
    family(out, name, "counter", help);
    for (index, value) in known
        .iter()
        .map(String::as_str)
        .chain(["other"])
        .enumerate()
    {
        let total = sum(cores, |core| pick(core, index));
        line(out, name, &[(label, value)], &total.to_string());
    }
}

/// One figure summed over cores (wrapping, as counters do).
fn sum(cores: &[Arc<CoreMetrics>], pick: impl Fn(&CoreMetrics) -> u64) -> u64 {
    cores
        .iter()
        .fold(0_u64, |total, core| total.wrapping_add(pick(core)))
}
