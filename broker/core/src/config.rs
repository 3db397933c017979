//! The protocol's policy: every bound and duration the machine enforces.
//!
//! Owns: `ProtocolConfig` (one named field per bound, unit last, default from D10 or bee), the
//! plain limits the machine reads. Each field is declared here once: it is also the broker's
//! config key of that name (the broker deserializes this struct from the keys of its
//! `[limits]`, `[timeouts]` and `[protocol]` sections, its key table saying which section
//! each is in), and its default here is that key's default. The bounds of every key and the
//! rules between keys are the broker's key table's (bps-broker's `config::keys` and
//! `config::rules`), which validate a configuration before it reaches a machine.
//! Never does: read files, flags or the environment, or validate (the broker's config loader
//! does both and hands the result here).

use bps_proto::RelayId;
use serde::{Deserialize, Serialize};

use super::trust::TrustedRelays;

/// D11: whether the broker serves `history = true` (docs/PROTOCOL.md R3 lets it refuse).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryPolicy {
    /// Cohorts whose spec has `history` keep a ring of recent DATA and send it to every
    /// stream entering their fan-out set (see `history`).
    #[default]
    Serve,
    /// Every Join with `history` (creating or attaching) is REJECTED; streams already
    /// attached to such cohorts carry on, and their rings keep serving them.
    Refuse,
}

/// The protocol policy of one broker; the same value is given to every core's `Machine`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProtocolConfig {
    /// R30: fan-out streams (spectators, silent and non-exempt publishers) per cohort; bee 1024.
    pub streams_per_cohort_max: usize,
    /// R30 exemption guard: pending streams per cohort. Anyone may declare the admin's
    /// address, so the R30 exemption needs its own cap on what such streams can hold.
    pub pending_streams_per_cohort_max: usize,
    /// R31: live cohorts per broker (all cores together); bee 512.
    pub cohorts_max: usize,
    /// R32: live cohorts one peer address may be attached to.
    pub cohorts_per_peer_max: usize,
    /// R32: cohort attachments of all the peers (/64s) within one IPv6 prefix of
    /// `ipv6_prefix_bits` together; one /48 holds 65,536 /64s, so without it a single site
    /// could fill the cohort table (R31). IPv4 peers are not grouped.
    pub cohorts_per_ipv6_prefix_max: usize,
    /// R32: leading bits of the IPv6 prefix `cohorts_per_ipv6_prefix_max` counts by; 48 is
    /// what one site is usually given. 16..=64.
    pub ipv6_prefix_bits: u32,
    /// R33: streams one peer address may hold in one cohort (D10).
    pub streams_per_peer_per_cohort_max: usize,
    /// R29: publisher streams per publisher address per cohort (D10); a claim beyond it
    /// resets the oldest.
    pub publisher_streams_per_address_max: usize,
    /// R26: frames queued towards one stream before it is reset.
    pub outbound_queue_frames_max: usize,
    /// R28: chunk addresses remembered per implicit cohort for dedup.
    pub dedup_window_entries: usize,
    /// R27: publisher cursors per cohort; the least recently used one is evicted (its
    /// publisher's cursor restarts at 0).
    pub cursors_per_cohort_max: usize,
    /// Largest frame body the I/O layer reads (bee caps at 128 KiB; a BPS frame is ~4.3 KB).
    pub frame_bytes_max: usize,
    /// R35: time a pending or silent stream has to claim.
    pub claim_deadline_ms: u64,
    /// R34: time without an accepted publisher frame before a cohort is reclaimed.
    pub inactivity_deadline_ms: u64,
    /// R31: time a cohort must have had nobody in its fan-out set (no publisher, no
    /// spectator: only pending or silent streams) before a Join that finds the cohort table
    /// full may reclaim it to make room.
    pub idle_cohort_reclaim_ms: u64,
    /// R24: time after the reduced roster is written during which a revoked stream's frames
    /// are dropped without penalty.
    pub revocation_grace_ms: u64,
    /// R39: blocklist duration after a violation (bee: 10 min); 0 disables.
    pub blocklist_violation_ms: u64,
    /// R39: blocklist duration after a claim timeout (bee: 1 min); 0 disables.
    pub blocklist_claim_timeout_ms: u64,
    /// Bound of the shared blocklist; when full the entry expiring soonest is dropped, so a
    /// flood of violating addresses cannot grow it without limit.
    pub blocklist_entries_max: usize,
    /// Read window: frames of one stream read but not yet `Consumed`; the I/O layer stops
    /// reading a stream at this many (backpressure towards verification). 64 by default:
    /// at 32 the one publisher of a 1000-subscriber cohort waited for its credits while the
    /// core had work to spare (docs/BENCHMARKS.md, "No regression vs 1b5c89d"); the broker's
    /// memory is bounded per core (`frames_in_flight_per_core_max`), not by this.
    pub frames_in_flight_per_stream_max: usize,
    /// R15/R16: frames one stream may have dropped without penalty (unknown kind, wrong
    /// challenge, retransmit) per second before it is reset; such frames cost reads and
    /// decoding but no verification, so a peer could otherwise stream them forever. Two
    /// streams of one identity (R29) drop each other's duplicates, so keep it well above the
    /// publication rate of a redundant publisher. 0 disables the limit.
    pub dropped_frames_per_stream_per_s_max: u32,
    /// Connections one peer may hold that have not sent their Join yet, so idle sockets
    /// from one address cannot take the broker's connection slots from everyone else.
    pub prejoin_connections_per_peer_max: usize,
    /// Join deadlines one peer may miss (within one blocklist period) before it is
    /// blocklisted for `blocklist_join_timeout_ms`.
    pub join_timeouts_per_peer_max: usize,
    /// Blocklist duration after a peer missed `join_timeouts_per_peer_max` Join deadlines;
    /// 0 disables.
    pub blocklist_join_timeout_ms: u64,
    /// W11: anonymous spectator sessions (bridge sessions without `addr`) one peer may hold
    /// on all cohorts together; they are outside R33, so that many viewers behind one NAT
    /// are not refused at the third tab, and this bounds what one address can hold instead.
    pub spectator_sessions_per_peer_max: usize,
    /// W11: anonymous sessions one peer may hold in one cohort, so a few addresses cannot fill
    /// a cohort's R30 slots with sessions nobody can be held to (64: a large household or
    /// office behind one NAT watching one stream).
    pub spectator_sessions_per_peer_per_cohort_max: usize,
    /// W11: the share of a cohort's R30 slots, in percent, anonymous sessions may hold; the
    /// rest stays for streams with an address (publishers, named viewers) whatever the crowd.
    pub spectator_slots_percent: usize,
    /// Edge brokers (addresses or CIDR prefixes) whose per-peer bounds are raised to the
    /// `trusted_relay_*` keys, are exempt from R32's IPv6 prefix bound and are never
    /// blocklisted: one edge relaying hundreds of cohorts is many clients behind one address
    /// (docs/LIMITS.md, "Trusted relays").
    pub trusted_relays: TrustedRelays,
    /// R32 for a trusted relay: cohorts it may be attached to. 512, bee's and our default
    /// R31: one edge may relay every cohort a default root holds.
    pub trusted_relay_cohorts_max: usize,
    /// R33 for a trusted relay: streams it may hold in one cohort, its own upstream stream
    /// and one per publisher it splices through (an `ALL` group chat splices every member).
    /// 1024, the default R30: the cohort's own bound is what limits it.
    pub trusted_relay_streams_per_cohort_max: usize,
    /// Pre-Join connections a trusted relay may hold: an edge that lost its root reopens one
    /// stream per relayed cohort and per spliced publisher at once. 1024: a default edge's
    /// cohorts with their publishers, still bounded so a broken edge cannot take every
    /// connection slot.
    pub trusted_relay_prejoin_connections_max: usize,
    /// D11: serve or refuse Joins with `history = true`; reloadable.
    pub history: HistoryPolicy,
    /// D11: DATA frames a history cohort retains at most. 256 is a minute of a chat or live
    /// stream at four messages a second, what a late viewer needs to see where it is.
    pub history_frames_max: usize,
    /// D11: frame bytes a history cohort retains at most. 256 KiB is 60 full 4 KiB chunks;
    /// with 512 cohorts the rings hold at most a quarter of the default frame memory. (The
    /// broker's key of this name defaults to 0, "derive it from frame memory"; the broker
    /// resolves that before a machine sees the value.)
    pub history_bytes_max: usize,
    /// Edge mode (docs/SCALING.md, "Edges"): set by the broker when `relay.upstreams` is not
    /// empty; not a key of its own, so outside the config file's `[limits]`.
    #[serde(skip)]
    pub edge: Option<EdgePolicy>,
}

/// What an edge's machines need to know of edge mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgePolicy {
    /// This broker's id on relay paths: a Join whose path holds it is a loop.
    pub relay_id: RelayId,
    /// How long a cohort with no stream left keeps its upstream stream, so a viewer who
    /// reloads the page does not cost the root a Join and the edge a backlog.
    pub linger_ms: u64,
}

impl Default for ProtocolConfig {
    fn default() -> Self {
        ProtocolConfig {
            streams_per_cohort_max: 1024,
            pending_streams_per_cohort_max: 256,
            cohorts_max: 512,
            cohorts_per_peer_max: 16,
            cohorts_per_ipv6_prefix_max: 64,
            ipv6_prefix_bits: 48,
            streams_per_peer_per_cohort_max: 2,
            publisher_streams_per_address_max: 2,
            outbound_queue_frames_max: 64,
            dedup_window_entries: 4096,
            cursors_per_cohort_max: 1024,
            frame_bytes_max: bps_proto::FRAME_BYTES_MAX_DEFAULT,
            claim_deadline_ms: 30_000,
            inactivity_deadline_ms: 600_000,
            idle_cohort_reclaim_ms: 30_000,
            revocation_grace_ms: 5_000,
            blocklist_violation_ms: 600_000,
            blocklist_claim_timeout_ms: 60_000,
            blocklist_entries_max: 65_536,
            frames_in_flight_per_stream_max: 64,
            dropped_frames_per_stream_per_s_max: 1_000,
            prejoin_connections_per_peer_max: 16,
            join_timeouts_per_peer_max: 4,
            blocklist_join_timeout_ms: 60_000,
            spectator_sessions_per_peer_max: 256,
            spectator_sessions_per_peer_per_cohort_max: 64,
            spectator_slots_percent: 75,
            trusted_relays: TrustedRelays::default(),
            trusted_relay_cohorts_max: 512,
            trusted_relay_streams_per_cohort_max: 1024,
            trusted_relay_prejoin_connections_max: 1024,
            history: HistoryPolicy::Serve,
            history_frames_max: 256,
            history_bytes_max: 256 << 10,
            edge: None,
        }
    }
}

impl ProtocolConfig {
    /// W11: the R30 slots of one cohort anonymous sessions may hold (at least one, so a tiny
    /// cohort still admits a viewer).
    #[must_use]
    pub fn spectator_slots_per_cohort(&self) -> usize {
        (self.streams_per_cohort_max * self.spectator_slots_percent / 100).max(1)
    }

    /// The largest whole frame the I/O layer hands over: a `frame_bytes_max` body and its
    /// varint length.
    #[must_use]
    pub fn largest_frame_bytes(&self) -> usize {
        self.frame_bytes_max + prost::encoding::encoded_len_varint(self.frame_bytes_max as u64)
    }
}
