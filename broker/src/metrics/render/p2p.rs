//! The libp2p carrier's families, summed over cores (core 0 alone writes them): connections
//! by direction, handshakes by outcome and reason, streams by protocol, streams refused by
//! reason.
//! Owns: the names and help texts of the `bps_p2p_*` families, in export order.
//! Never does: export a p2p figure per core.

use std::sync::Arc;

use bps_p2p::SWARM_PROTOCOLS;

use super::text::{family, line};
use crate::metrics::{CoreMetrics, P2P_DIRECTIONS, P2P_REASONS};

/// The libp2p carrier's families.
pub(super) fn render_p2p(out: &mut String, cores: &[Arc<CoreMetrics>]) {
    let name = "bps_p2p_connections_total";
    family(
        out,
        name,
        "counter",
        "libp2p connections established, by direction.",
    );
    for (index, direction) in P2P_DIRECTIONS.iter().enumerate() {
        let total = sum(cores, |core| core.p2p.connections[index].get());
        line(out, name, &[("direction", direction)], &total.to_string());
    }
    let name = "bps_p2p_handshakes_total";
    family(
        out,
        name,
        "counter",
        "bee handshakes, by outcome and the reason a failed one failed.",
    );
    let ok = sum(cores, |core| core.p2p.handshakes_ok.get());
    line(
        out,
        name,
        &[("outcome", "ok"), ("reason", "")],
        &ok.to_string(),
    );
    for (index, reason) in P2P_REASONS.iter().chain(&["other"]).enumerate() {
        let total = sum(cores, |core| core.p2p.handshakes_failed[index].get());
        line(
            out,
            name,
            &[("outcome", "failed"), ("reason", reason)],
            &total.to_string(),
        );
    }
    let name = "bps_p2p_streams_total";
    family(
        out,
        name,
        "counter",
        "Streams bee nodes opened to the broker, by protocol.",
    );
    for (index, protocol) in SWARM_PROTOCOLS.iter().chain(&["other"]).enumerate() {
        let total = sum(cores, |core| core.p2p.streams[index].get());
        line(out, name, &[("protocol", protocol)], &total.to_string());
    }
    let name = "bps_p2p_streams_refused_total";
    family(
        out,
        name,
        "counter",
        "libp2p streams reset before or instead of their exchange, by reason.",
    );
    for (index, reason) in P2P_REASONS.iter().chain(&["other"]).enumerate() {
        let total = sum(cores, |core| core.p2p.streams_refused[index].get());
        line(out, name, &[("reason", reason)], &total.to_string());
    }
}

/// One figure summed over cores (wrapping, as counters do).
fn sum(cores: &[Arc<CoreMetrics>], pick: impl Fn(&CoreMetrics) -> u64) -> u64 {
    cores
        .iter()
        .fold(0_u64, |total, core| total.wrapping_add(pick(core)))
}
