//! The admin JSON view of a machine.
//!
//! Owns: `MachineSnapshot`, `CohortSnapshot`, `StreamSnapshot` (serde-serialisable, plain
//! data) and how they are read off the machine's state.
//! Never does: change state, or run on the hot path (it walks every stream of every cohort).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::cohort::Cohort;
use super::ids::{PeerId, StreamId};
use super::stream::{Role, Stream};

/// Every cohort of one machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MachineSnapshot {
    /// Live cohorts, oldest first.
    pub cohorts: Vec<CohortSnapshot>,
    /// Attached streams.
    pub streams: usize,
    /// Verification jobs not yet answered.
    pub verifications_in_flight: usize,
    /// The machine's counters since it started.
    pub totals: BTreeMap<&'static str, u64>,
}

/// One cohort.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CohortSnapshot {
    /// The canonical key (R1) as hex.
    pub key: String,
    pub topic: String,
    pub binding: String,
    pub admin: Option<String>,
    /// `implicit`, `explicit` or `all`.
    pub authorship: &'static str,
    pub history: bool,
    pub closed: bool,
    pub created_ms: u64,
    pub last_activity_ms: u64,
    /// The rostered addresses (hex), in roster order.
    pub roster: Vec<String>,
    pub roster_cursor: u64,
    /// Publisher cursors held (R27).
    pub cursors: usize,
    /// Dedup keys held (R28; implicit cohorts only).
    pub dedup_entries: usize,
    /// Streams per role (`pending`, `publisher`, `spectator`, `silent`), ascending ids.
    pub streams: BTreeMap<&'static str, Vec<StreamSnapshot>>,
    pub counters: BTreeMap<&'static str, u64>,
}

/// One stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamSnapshot {
    pub id: StreamId,
    pub peer: PeerId,
    /// The declared addr (hex).
    pub addr: String,
    pub joined_ms: u64,
    /// Whether the stream is in the R24 revocation phase.
    pub revoked: bool,
    /// Frames read and not yet consumed.
    pub frames_held: usize,
}

pub(crate) fn snapshot_cohort(
    cohort: &Cohort,
    streams: &HashMap<StreamId, Stream>,
) -> CohortSnapshot {
    let mut by_role: BTreeMap<&'static str, Vec<StreamSnapshot>> = Role::ALL
        .iter()
        .map(|role| (role.name(), Vec::new()))
        .collect();
    for id in &cohort.members {
        let stream = streams.get(id).expect("member stream is attached");
        by_role
            .entry(stream.role.name())
            .or_default()
            .push(StreamSnapshot {
                id: *id,
                peer: stream.peer,
                addr: hex::encode(stream.addr),
                joined_ms: stream.joined_at.as_ms(),
                revoked: stream.revocation.is_some(),
                frames_held: stream.frames_held(),
            });
    }
    let spec = &cohort.spec;
    CohortSnapshot {
        key: cohort.key.to_hex(),
        topic: hex::encode(spec.topic),
        binding: spec.binding.to_string(),
        admin: spec.admin.map(hex::encode),
        authorship: match spec.authorship() {
            bps_proto::Authorship::Implicit => "implicit",
            bps_proto::Authorship::Explicit => "explicit",
            bps_proto::Authorship::All => "all",
        },
        history: spec.history,
        closed: spec.closed,
        created_ms: cohort.created.as_ms(),
        last_activity_ms: cohort.last_activity.as_ms(),
        roster: cohort.roster.ordered.iter().map(hex::encode).collect(),
        roster_cursor: cohort.roster.cursor,
        cursors: cohort.cursors.len(),
        dedup_entries: cohort.dedup.as_ref().map_or(0, |dedup| dedup.len()),
        streams: by_role,
        counters: cohort.counters.counters().snapshot(),
    }
}
