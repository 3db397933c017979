//! Counters and gauges the broker exposes (R40 and the extras).
//!
//! Owns: the `Counter` names, `CounterSet` (one relaxed `AtomicU64` per name), the per-cohort
//! `CohortCounters` (counters plus role and history-ring gauges), and the per-machine
//! `CounterRegistry` (totals that survive cohort reclaim, plus the live cohorts' counters for
//! a scraper).
//! Never does: lock on the hot path. A counter bump is one relaxed `fetch_add`; the
//! registry's mutex is taken only when a cohort is created or reclaimed, and by a scraper.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bps_proto::{CohortKey, Spec};

use super::stream::Role;

/// Every counter, per cohort and in total. The names are the exported metric names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counter {
    /// R13/R40: a frame from a stream whose role may not send it (a violation).
    WrongStream,
    /// R14/R40: a frame of an unknown or unspecified kind (dropped).
    UnknownKind,
    /// R15/R40: a frame under another challenge (dropped).
    WrongChallenge,
    /// R17/R40: a chunk that is not valid where it must be (a violation).
    InvalidSoc,
    /// R35/R40: a pending or silent stream that did not claim in time.
    ClaimTimeout,
    /// R16/R40: a duplicate (below the cursor or in the dedup window; dropped).
    Retransmit,
    /// R26/R40: a stream reset because its outbound queue was full.
    QueueReset,
    /// R20/R40: a valid ROSTER chunk whose payload does not decode (dropped).
    InvalidRoster,
    /// A frame body that is not a `Broadcast` (a violation).
    Malformed,
    /// Joins answered OK.
    JoinsOk,
    /// Joins answered FULL (R30..R33).
    JoinsFull,
    /// Joins answered REJECTED (R3, D6, D7, D11).
    JoinsRejected,
    /// Joins from a blocklisted peer, closed without an Ack (R39).
    JoinsBlocked,
    /// Accepted DATA publications.
    AcceptedData,
    /// Accepted AUTH frames (never delivered).
    AcceptedAuth,
    /// Accepted ROSTER publications.
    AcceptedRoster,
    /// Accepted EOS publications.
    AcceptedEos,
    /// Claims: pending, silent or granted spectator streams that became publishers (R7).
    Claims,
    /// Frames handed to the I/O layer for receiving streams (frames x targets).
    Deliveries,
    /// R24: frames of a revoked stream dropped within the grace period.
    DropRevokedInGrace,
    /// Frames that arrived for a stream the machine had already closed (dropped).
    DropStreamGone,
    /// Edge mode: a frame from the root that a subscriber drops (R41): undecodable, an AUTH,
    /// a wrong id, an invalid SOC, or an owner the cohort does not admit.
    UpstreamInvalid,
    /// Edge mode: Joins REJECTED because their relay path holds this broker (a loop).
    RelayLoopsRefused,
    /// Edge mode: frames from the cohort's root accepted and delivered to the edge's streams.
    RelayForwarded,
    /// Edge mode: frames passed through spliced streams, both ways.
    RelaySplicedFrames,
    /// R29: publisher streams reset because a newer one of the same address claimed.
    Superseded,
    /// R39: blocklist entries issued.
    Blocklisted,
    /// Verification jobs issued.
    VerifyRequests,
    /// R27: publisher cursors evicted from a full cursor table (that publisher restarts at 0).
    CursorEvictions,
    /// Cohorts created (R2).
    CohortsCreated,
    /// Cohorts reclaimed because their last stream left (R36).
    CohortsReclaimedEmpty,
    /// Cohorts reclaimed for inactivity (R34).
    CohortsReclaimedInactive,
    /// Cohorts reclaimed after an EOS (R21).
    CohortsReclaimedEos,
    /// Cohorts with nobody in their fan-out set for `idle_cohort_reclaim_ms`, reclaimed to
    /// make room in a full cohort table (R31).
    CohortsReclaimedIdle,
    /// R15/R16: streams reset for dropping frames (unknown kind, wrong challenge,
    /// retransmit) faster than `dropped_frames_per_stream_per_s_max`.
    DropRateResets,
    /// D11: retained DATA frames handed out in backlogs to streams entering the fan-out set
    /// of a history cohort (also counted in `Deliveries`).
    HistoryFramesServed,
}

impl Counter {
    /// Every counter, in export order.
    pub const ALL: [Counter; 36] = [
        Counter::WrongStream,
        Counter::UnknownKind,
        Counter::WrongChallenge,
        Counter::InvalidSoc,
        Counter::ClaimTimeout,
        Counter::Retransmit,
        Counter::QueueReset,
        Counter::InvalidRoster,
        Counter::Malformed,
        Counter::JoinsOk,
        Counter::JoinsFull,
        Counter::JoinsRejected,
        Counter::JoinsBlocked,
        Counter::AcceptedData,
        Counter::AcceptedAuth,
        Counter::AcceptedRoster,
        Counter::AcceptedEos,
        Counter::Claims,
        Counter::Deliveries,
        Counter::DropRevokedInGrace,
        Counter::DropStreamGone,
        Counter::UpstreamInvalid,
        Counter::RelayLoopsRefused,
        Counter::RelayForwarded,
        Counter::RelaySplicedFrames,
        Counter::Superseded,
        Counter::Blocklisted,
        Counter::VerifyRequests,
        Counter::CursorEvictions,
        Counter::CohortsCreated,
        Counter::CohortsReclaimedEmpty,
        Counter::CohortsReclaimedInactive,
        Counter::CohortsReclaimedEos,
        Counter::CohortsReclaimedIdle,
        Counter::DropRateResets,
        Counter::HistoryFramesServed,
    ];

    /// The exported name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Counter::WrongStream => "wrong_stream",
            Counter::UnknownKind => "unknown_kind",
            Counter::WrongChallenge => "wrong_challenge",
            Counter::InvalidSoc => "invalid_soc",
            Counter::ClaimTimeout => "claim_timeout",
            Counter::Retransmit => "retransmit",
            Counter::QueueReset => "queue_reset",
            Counter::InvalidRoster => "invalid_roster",
            Counter::Malformed => "malformed",
            Counter::JoinsOk => "joins_ok",
            Counter::JoinsFull => "joins_full",
            Counter::JoinsRejected => "joins_rejected",
            Counter::JoinsBlocked => "joins_blocked",
            Counter::AcceptedData => "accepted_data",
            Counter::AcceptedAuth => "accepted_auth",
            Counter::AcceptedRoster => "accepted_roster",
            Counter::AcceptedEos => "accepted_eos",
            Counter::Claims => "claims",
            Counter::Deliveries => "deliveries",
            Counter::DropRevokedInGrace => "drop_revoked_in_grace",
            Counter::DropStreamGone => "drop_stream_gone",
            Counter::UpstreamInvalid => "upstream_invalid",
            Counter::RelayLoopsRefused => "relay_loops_refused",
            Counter::RelayForwarded => "relay_forwarded",
            Counter::RelaySplicedFrames => "relay_spliced_frames",
            Counter::Superseded => "superseded",
            Counter::Blocklisted => "blocklisted",
            Counter::VerifyRequests => "verify_requests",
            Counter::CursorEvictions => "cursor_evictions",
            Counter::CohortsCreated => "cohorts_created",
            Counter::CohortsReclaimedEmpty => "cohorts_reclaimed_empty",
            Counter::CohortsReclaimedInactive => "cohorts_reclaimed_inactive",
            Counter::CohortsReclaimedEos => "cohorts_reclaimed_eos",
            Counter::CohortsReclaimedIdle => "cohorts_reclaimed_idle",
            Counter::DropRateResets => "drop_rate_resets",
            Counter::HistoryFramesServed => "history_frames_served",
        }
    }

    fn slot(self) -> usize {
        // The discriminants are 0..ALL.len() in declaration order.
        self as usize
    }
}

/// One relaxed atomic per `Counter`.
#[derive(Debug)]
pub struct CounterSet {
    values: [AtomicU64; Counter::ALL.len()],
}

impl Default for CounterSet {
    fn default() -> Self {
        CounterSet {
            values: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl CounterSet {
    /// The current value of `counter`.
    #[must_use]
    pub fn get(&self, counter: Counter) -> u64 {
        self.values[counter.slot()].load(Ordering::Relaxed)
    }

    pub(crate) fn add(&self, counter: Counter, amount: u64) {
        self.values[counter.slot()].fetch_add(amount, Ordering::Relaxed);
    }

    /// Every counter with its name, in export order.
    #[must_use]
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        Counter::ALL
            .iter()
            .map(|counter| (counter.name(), self.get(*counter)))
            .collect()
    }
}

/// Hex digits of the cohort id label: 64 bits of keccak256 of the whole canonical key, so
/// two live cohorts share an id with probability below 2^-40 even at 4096 cohorts.
pub const COHORT_ID_HEX_DIGITS: usize = 16;

/// What names one cohort's series: a hash of its whole canonical key (R1), plus its binding
/// and admin so that a dashboard can tell cohorts of one topic apart at a glance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CohortLabel {
    /// The first `COHORT_ID_HEX_DIGITS` hex digits of keccak256(canonical key).
    pub id: String,
    /// The binding's name, lowercase (`mnemonic`, `feed_topic`, ...).
    pub binding: String,
    /// The admin address in hex, or `none` under implicit authorship.
    pub admin: String,
}

impl CohortLabel {
    /// The label of the cohort of `spec`, whose canonical key is `key`.
    #[must_use]
    pub fn of(key: &CohortKey, spec: &Spec) -> CohortLabel {
        let digest = bps_proto::keccak256(key.as_bytes());
        let mut id = hex::encode(digest);
        id.truncate(COHORT_ID_HEX_DIGITS);
        CohortLabel {
            id,
            binding: spec.binding.to_string().to_ascii_lowercase(),
            admin: spec.admin.map_or_else(|| "none".to_owned(), hex::encode),
        }
    }
}

/// The counters and gauges (roles, history ring) of one cohort.
#[derive(Debug)]
pub struct CohortCounters {
    key_hex: String,
    label: CohortLabel,
    counters: CounterSet,
    roles: [AtomicU64; Role::ALL.len()],
    /// D11: frames and bytes its history ring holds (0 without history).
    history_frames: AtomicU64,
    history_bytes: AtomicU64,
}

impl CohortCounters {
    /// Zeroed counters for the cohort of `spec`, whose canonical key is `key`.
    #[must_use]
    pub fn new(key: &CohortKey, spec: &Spec) -> Self {
        CohortCounters {
            key_hex: key.to_hex(),
            label: CohortLabel::of(key, spec),
            counters: CounterSet::default(),
            roles: std::array::from_fn(|_| AtomicU64::new(0)),
            history_frames: AtomicU64::new(0),
            history_bytes: AtomicU64::new(0),
        }
    }

    /// The cohort's canonical key as hex (R1), as `/cohortz` shows it.
    #[must_use]
    pub fn key_hex(&self) -> &str {
        &self.key_hex
    }

    /// The labels of the cohort's metric series.
    #[must_use]
    pub fn label(&self) -> &CohortLabel {
        &self.label
    }

    /// Streams that receive the cohort's deliveries (spectators and publishers, R25).
    #[must_use]
    pub fn subscribers(&self) -> u64 {
        self.role_count(Role::Spectator) + self.role_count(Role::Publisher)
    }

    /// The cohort's counters.
    #[must_use]
    pub fn counters(&self) -> &CounterSet {
        &self.counters
    }

    /// Streams currently in `role`.
    #[must_use]
    pub fn role_count(&self, role: Role) -> u64 {
        self.roles[role as usize].load(Ordering::Relaxed)
    }

    pub(crate) fn enter_role(&self, role: Role) {
        self.roles[role as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn leave_role(&self, role: Role) {
        let before = self.roles[role as usize].fetch_sub(1, Ordering::Relaxed);
        assert!(before > 0, "role gauge {} underflow", role.name());
    }

    pub(crate) fn set_history(&self, frames: usize, bytes: usize) {
        self.history_frames.store(frames as u64, Ordering::Relaxed);
        self.history_bytes.store(bytes as u64, Ordering::Relaxed);
    }

    /// D11: frames its history ring holds.
    #[must_use]
    pub fn history_frames(&self) -> u64 {
        self.history_frames.load(Ordering::Relaxed)
    }

    /// D11: frame bytes its history ring holds.
    #[must_use]
    pub fn history_bytes(&self) -> u64 {
        self.history_bytes.load(Ordering::Relaxed)
    }

    /// The ring gauges by exported name (`history_frames`, `history_bytes`).
    #[must_use]
    pub fn gauges_snapshot(&self) -> BTreeMap<&'static str, u64> {
        BTreeMap::from([
            ("history_frames", self.history_frames()),
            ("history_bytes", self.history_bytes()),
        ])
    }

    /// Role gauges by name.
    #[must_use]
    pub fn roles_snapshot(&self) -> BTreeMap<&'static str, u64> {
        Role::ALL
            .iter()
            .map(|role| (role.name(), self.role_count(*role)))
            .collect()
    }
}

/// The counters of one machine: totals (which survive cohort reclaim) and the live cohorts.
#[derive(Debug, Default)]
pub struct CounterRegistry {
    totals: CounterSet,
    live: Mutex<BTreeMap<u64, Arc<CohortCounters>>>,
}

impl CounterRegistry {
    /// The machine's totals since it started.
    #[must_use]
    pub fn totals(&self) -> &CounterSet {
        &self.totals
    }

    /// The counters of every live cohort, in creation order.
    #[must_use]
    pub fn live_cohorts(&self) -> Vec<Arc<CohortCounters>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Starts listing a live cohort's counters (the machine does this at creation).
    ///
    /// # Panics
    /// If the serial is already registered.
    pub fn register(&self, cohort_serial: u64, counters: Arc<CohortCounters>) {
        let previous = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(cohort_serial, counters);
        assert!(
            previous.is_none(),
            "cohort serial {cohort_serial} registered twice"
        );
    }

    pub(crate) fn deregister(&self, cohort_serial: u64) {
        let removed = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&cohort_serial);
        assert!(
            removed.is_some(),
            "cohort serial {cohort_serial} was not registered"
        );
    }

    /// Adds to a counter that has no cohort (totals only).
    pub fn add_total(&self, counter: Counter, amount: u64) {
        self.totals.add(counter, amount);
    }

    /// Adds to a cohort's counter and to the totals.
    pub fn add(&self, cohort: &CohortCounters, counter: Counter, amount: u64) {
        cohort.counters.add(counter, amount);
        self.totals.add(counter, amount);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bps_proto::{Binding, Spec};

    use super::{CohortCounters, CohortLabel, Counter, CounterRegistry};
    use crate::stream::Role;

    fn spec(topic: u8, admin: Option<[u8; 20]>) -> Spec {
        Spec {
            topic: [topic; 32],
            binding: Binding::FeedTopic,
            admin,
            all: false,
            history: false,
            closed: false,
        }
    }

    fn counters(spec: &Spec) -> CohortCounters {
        CohortCounters::new(&spec.key(), spec)
    }

    #[test]
    fn labels_tell_apart_cohorts_of_one_topic() {
        let first = spec(1, Some([2; 20]));
        let second = spec(1, Some([3; 20]));
        let implicit = spec(1, None);
        let labels: Vec<CohortLabel> = [&first, &second, &implicit]
            .iter()
            .map(|spec| CohortLabel::of(&spec.key(), spec))
            .collect();
        assert_ne!(labels[0].id, labels[1].id);
        assert_ne!(labels[0].id, labels[2].id);
        assert_eq!(labels[0].id.len(), super::COHORT_ID_HEX_DIGITS);
        let digest = hex::encode(bps_proto::keccak256(first.key().as_bytes()));
        assert!(digest.starts_with(&labels[0].id));
        assert_eq!(labels[0].binding, "feed_topic");
        assert_eq!(labels[0].admin, hex::encode([2; 20]));
        assert_eq!(labels[2].admin, "none");
    }

    #[test]
    fn every_counter_has_its_own_slot_and_name() {
        for (position, counter) in Counter::ALL.iter().enumerate() {
            assert_eq!(counter.slot(), position);
        }
        let mut names: Vec<&str> = Counter::ALL.iter().map(|counter| counter.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Counter::ALL.len());
    }

    #[test]
    fn totals_survive_deregistration() {
        let registry = CounterRegistry::default();
        let cohort = Arc::new(counters(&spec(1, None)));
        registry.register(7, Arc::clone(&cohort));
        registry.add(&cohort, Counter::Retransmit, 3);
        registry.add_total(Counter::JoinsRejected, 1);
        assert_eq!(registry.live_cohorts().len(), 1);
        registry.deregister(7);
        assert!(registry.live_cohorts().is_empty());
        assert_eq!(registry.totals().get(Counter::Retransmit), 3);
        assert_eq!(cohort.counters().get(Counter::Retransmit), 3);
        assert_eq!(cohort.counters().get(Counter::JoinsRejected), 0);
        assert_eq!(registry.totals().get(Counter::JoinsRejected), 1);
    }

    #[test]
    fn role_gauges_move_both_ways() {
        let cohort = counters(&spec(1, None));
        cohort.enter_role(Role::Pending);
        cohort.enter_role(Role::Pending);
        cohort.leave_role(Role::Pending);
        assert_eq!(cohort.role_count(Role::Pending), 1);
        assert_eq!(cohort.roles_snapshot()["pending"], 1);
    }
}
