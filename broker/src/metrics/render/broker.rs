//! The broker-wide families: frame and resident memory against their bounds, the memory
//! budget's worst case in total and per term, each core's heartbeat and CPU time, readiness,
//! the peer ledger's counts, the verification pool's totals when there is a pool, and the
//! libp2p host's when it runs.
//!
//! Owns: the names and help texts of these families, in export order.
//! Never does: read a figure; `BrokerGauges` arrives filled by the I/O layer.

use super::text::{family, line};
use crate::budget::MemoryBudget;
use crate::metrics::{BrokerGauges, P2pHostFigures, P2pIdentity, VerifyPoolFigures};
use bps_core::LedgerSnapshot;

/// One family of a table: its name, its help text, and its one sample's value read off `T`.
type Family<T> = (&'static str, &'static str, fn(&T) -> u64);

/// A family of a table whose families differ in type: its name, its Prometheus type, its
/// help text, and its one sample's value read off `T`.
type TypedFamily<T> = (&'static str, &'static str, &'static str, fn(&T) -> u64);

/// The memory gauges: name, help and the figure, in export order.
const MEMORY_GAUGES: [Family<BrokerGauges>; 5] = [
    (
        "bps_frame_memory_bytes",
        "Frame bytes held now (frames read and not released, grown read buffers).",
        |broker| broker.frame_memory_bytes,
    ),
    (
        "bps_frame_memory_bytes_max",
        "The bound of frame memory (limits.frame_memory_bytes_max); readers wait at it.",
        |broker| broker.frame_memory_bytes_max,
    ),
    (
        "bps_rss_bytes",
        "Resident memory of the broker process.",
        |broker| broker.rss_bytes,
    ),
    (
        "bps_memory_budget_bytes",
        "The memory budget (limits.memory_bytes_max or half the host's memory).",
        |broker| broker.budget.budget_bytes,
    ),
    (
        "bps_memory_worst_case_bytes",
        "The worst-case memory of the running configuration's bounds.",
        |broker| broker.budget.total_bytes,
    ),
];

/// The libp2p host's counters: name, help and the figure, in export order.
const P2P_HOST_COUNTERS: [Family<P2pHostFigures>; 7] = [
    (
        "bps_p2p_host_streams_inbound_total",
        "Streams libp2p peers opened on a protocol the broker serves, handed to core 0.",
        |host| host.streams_inbound,
    ),
    (
        "bps_p2p_host_streams_outbound_total",
        "Streams the broker opened to libp2p peers (its handshakes as the dialer).",
        |host| host.streams_outbound,
    ),
    (
        "bps_p2p_host_streams_refused_total",
        "Streams reset or not opened because their connection had p2p.streams_per_connection_max open.",
        |host| host.streams_refused,
    ),
    (
        "bps_p2p_host_streams_dropped_total",
        "Negotiated inbound streams reset because the host's queue of them (256) was full.",
        |host| host.streams_dropped,
    ),
    (
        "bps_p2p_host_ping_timeouts_total",
        "libp2p connections closed because their ping timed out.",
        |host| host.ping_timeouts,
    ),
    (
        "bps_p2p_host_connections_refused_limit_total",
        "Inbound libp2p connections refused at p2p.connections_max (or the host's pending inbound cap).",
        |host| host.connections_refused_limit,
    ),
    (
        "bps_p2p_host_connections_refused_pending_per_ip_total",
        "Inbound libp2p connections refused because their IP had p2p.pending_handshakes_per_ip_max upgrading.",
        |host| host.connections_refused_pending_per_ip,
    ),
];

/// The peer ledger's figures: name, Prometheus type, help and the figure, in export order.
const PEER_FAMILIES: [TypedFamily<LedgerSnapshot>; 6] = [
    (
        "bps_peers_attached",
        "gauge",
        "Peers (addresses, or IPv6 prefixes' members) attached to at least one cohort (R32).",
        |peers| peers.peers_attached as u64,
    ),
    (
        "bps_peers_blocked",
        "gauge",
        "Blocklisted peers (R39; expired entries may linger until the next ledger call).",
        |peers| peers.peers_blocked as u64,
    ),
    (
        "bps_prejoin_connections",
        "gauge",
        "Connections that have not sent their Join yet, all peers together.",
        |peers| peers.prejoin_connections as u64,
    ),
    (
        "bps_trusted_relays_attached",
        "gauge",
        "Trusted relays (limits.trusted_relays) attached to at least one cohort.",
        |peers| peers.trusted_relays_attached as u64,
    ),
    (
        "bps_trusted_relay_cohorts",
        "gauge",
        "Cohort attachments of trusted relays, all of them together (their R32 count).",
        |peers| peers.trusted_relay_cohorts as u64,
    ),
    (
        "bps_blocklistings_waived_total",
        "counter",
        "Blocklistings of trusted relays waived (violations, claim timeouts, Join strikes).",
        |peers| peers.blocklistings_waived,
    ),
];

/// The verification pool's counters: name, help and the figure, in export order.
const VERIFY_POOL_COUNTERS: [Family<VerifyPoolFigures>; 10] = [
    (
        "bps_verify_pool_jobs_total",
        "Verification jobs the pool finished; over batches, the mean batch size.",
        |pool| pool.jobs,
    ),
    (
        "bps_verify_pool_batches_total",
        "Batches the pool's workers finished.",
        |pool| pool.batches,
    ),
    (
        "bps_verify_pool_full_total",
        "Jobs refused at the pool's queue bound.",
        |pool| pool.full,
    ),
    (
        "bps_verify_pool_recoveries_total",
        "Jobs settled by a full public-key recovery.",
        |pool| pool.recoveries,
    ),
    (
        "bps_verify_pool_key_accepts_total",
        "Jobs accepted against a cached owner key, without recovery.",
        |pool| pool.key_accepts,
    ),
    (
        "bps_verify_pool_batch_checks_total",
        "Batched signature checks run (two or more chunks of cached owners).",
        |pool| pool.batch_checks,
    ),
    (
        "bps_verify_pool_batch_failures_total",
        "Batched checks that failed and were bisected.",
        |pool| pool.batch_failures,
    ),
    (
        "bps_verify_pool_class_full_total",
        "Jobs refused at one cohort's bound in the pool's queue.",
        |pool| pool.class_full,
    ),
    (
        "bps_verify_pool_cancelled_total",
        "Queued jobs taken back unverified because their stream closed.",
        |pool| pool.cancelled,
    ),
    (
        "bps_verify_pool_bisections_total",
        "Failed batched checks split in two and checked again.",
        |pool| pool.bisections,
    ),
];

/// Memory against its bounds, the worst case per term, the cores' heartbeats and CPU time,
/// readiness, the peer ledger, and the verification pool.
pub(super) fn render_broker(out: &mut String, broker: &BrokerGauges) {
    for (name, help, value) in MEMORY_GAUGES {
        family(out, name, "gauge", help);
        line(out, name, &[], &value(broker).to_string());
    }
    render_budget_terms(out, &broker.budget);
    render_cores(out, broker);
    family(
        out,
        "bps_ready",
        "gauge",
        "1 while the broker takes new streams (/readyz answers 200), 0 while draining.",
    );
    line(out, "bps_ready", &[], if broker.ready { "1" } else { "0" });
    for (name, kind, help, value) in PEER_FAMILIES {
        family(out, name, kind, help);
        line(out, name, &[], &value(&broker.peers).to_string());
    }
    if let Some(pool) = &broker.verify_pool {
        for (name, help, value) in VERIFY_POOL_COUNTERS {
            family(out, name, "counter", help);
            line(out, name, &[], &value(pool).to_string());
        }
    }
    if let Some(host) = &broker.p2p_host {
        for (name, help, value) in P2P_HOST_COUNTERS {
            family(out, name, "counter", help);
            line(out, name, &[], &value(host).to_string());
        }
        render_p2p_info(out, &host.identity);
    }
}

/// `bps_p2p_info`: 1, labelled with the mode, the network and the identity bee nodes see
/// (join on it to split the p2p families by mode).
fn render_p2p_info(out: &mut String, identity: &P2pIdentity) {
    let name = "bps_p2p_info";
    family(
        out,
        name,
        "gauge",
        "The libp2p carrier's mode (p2p.mode), network id, peer id and overlay; always 1.",
    );
    let network_id = identity.network_id.to_string();
    let labels = [
        ("mode", identity.mode),
        ("network_id", network_id.as_str()),
        ("peer_id", identity.peer_id.as_str()),
        ("overlay", identity.overlay.as_str()),
    ];
    line(out, name, &labels, "1");
}

/// `bps_memory_worst_case_term_bytes{term}`: the worst case of each term of the budget.
fn render_budget_terms(out: &mut String, budget: &MemoryBudget) {
    family(
        out,
        "bps_memory_worst_case_term_bytes",
        "gauge",
        "The worst case of one term of the memory budget.",
    );
    for term in &budget.terms {
        line(
            out,
            "bps_memory_worst_case_term_bytes",
            &[("term", term.name)],
            &term.bytes.to_string(),
        );
    }
}

/// Each core's heartbeat age and the CPU time of its thread (none for a core not running).
fn render_cores(out: &mut String, broker: &BrokerGauges) {
    family(
        out,
        "bps_core_heartbeat_age_ms",
        "gauge",
        "Milliseconds since the core last began a turn (a stuck core's grows).",
    );
    for (core, age) in broker.heartbeats_ms.iter().enumerate() {
        line(
            out,
            "bps_core_heartbeat_age_ms",
            &[("core", &core.to_string())],
            &age.to_string(),
        );
    }
    family(
        out,
        "bps_core_busy_seconds_total",
        "counter",
        "CPU seconds the core's thread has used; its rate is the core's busy fraction.",
    );
    for (core, used) in broker.core_busy.iter().enumerate() {
        if let Some(used) = used {
            line(
                out,
                "bps_core_busy_seconds_total",
                &[("core", &core.to_string())],
                &format!("{:.6}", used.as_secs_f64()),
            );
        }
    }
}
