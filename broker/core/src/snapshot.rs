//! The admin view of a machine: one summary per cohort, and the streams of one cohort by
//! pages.
//!
//! Owns: `CohortSummary` (a cohort's spec, sizes and counters: O(1) to build, no stream is
//! visited), `CohortStreams` (one page of one cohort's streams) and `StreamSnapshot`, all
//! serde-serialisable plain data, and how they are read off the machine's state.
//! Never does: change state, or walk every stream of every cohort: a `/cohortz` over
//! thousands of cohorts costs a runtime thread one summary per cohort, and the streams of
//! one named cohort cost at most one page.

use std::collections::BTreeMap;

use serde::Serialize;

use super::cohort::Cohort;
use super::ids::{PeerId, StreamId};
use super::stream::{Role, Stream};
use super::time::Millis;

/// Peers a summary names at most (W8 lists a topic's connected peers; a cohort may have a
/// thousand).
pub const SUMMARY_PEERS_MAX: usize = 16;

/// One cohort, without its streams.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CohortSummary {
    /// The canonical key (R1) as hex.
    pub key: String,
    /// The id label of the cohort's metric series (a hash of the key).
    pub id: String,
    /// The broker core the cohort is homed on: the machine does not know it, so it says 0 and
    /// the broker's I/O layer, which asks every core, fills it in.
    pub core: usize,
    pub topic: String,
    pub binding: String,
    pub admin: Option<String>,
    /// `implicit`, `explicit` or `all`.
    pub authorship: &'static str,
    pub history: bool,
    pub closed: bool,
    pub created_ms: u64,
    pub last_activity_ms: u64,
    /// Milliseconds since creation and since the last accepted publisher frame, at the
    /// time of the summary.
    pub age_ms: u64,
    pub idle_ms: u64,
    /// Addresses in the current roster.
    pub roster_entries: usize,
    pub roster_cursor: u64,
    /// Publisher cursors held (R27).
    pub cursors: usize,
    /// Dedup keys held (R28; implicit cohorts only).
    pub dedup_entries: usize,
    /// D11: frames and frame bytes the history ring holds (0 without history).
    pub history_frames: usize,
    pub history_bytes: usize,
    /// Streams that receive deliveries: spectators and publishers (R25).
    pub subscribers: usize,
    /// Streams per role (`pending`, `publisher`, `spectator`, `silent`).
    pub streams: BTreeMap<&'static str, u64>,
    /// Distinct peers attached, and up to `SUMMARY_PEERS_MAX` of them (sorted).
    pub peers_total: usize,
    pub peers: Vec<String>,
    pub counters: BTreeMap<&'static str, u64>,
}

/// One page of the streams of one cohort, ascending by stream id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CohortStreams {
    pub summary: CohortSummary,
    /// The rostered addresses (hex), in roster order.
    pub roster: Vec<String>,
    /// Streams attached to the cohort.
    pub streams_total: usize,
    pub offset: usize,
    pub streams: Vec<StreamSnapshot>,
}

/// One stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StreamSnapshot {
    pub id: StreamId,
    pub peer: PeerId,
    pub role: Role,
    /// The declared addr (hex).
    pub addr: String,
    pub joined_ms: u64,
    /// Whether the stream is in the R24 revocation phase.
    pub revoked: bool,
    /// Frames read and not yet consumed.
    pub frames_held: usize,
    /// What carries the stream ("tcp", "websocket").
    pub transport: &'static str,
    /// A W11 anonymous spectator session (its addr was drawn by the broker).
    pub anonymous: bool,
    /// The peer is a trusted relay (`limits.trusted_relays`): an edge, whose per-peer bounds
    /// are raised. The machine fills it in from the ledger.
    pub trusted_relay: bool,
}

pub(crate) fn summarize(cohort: &Cohort, now: Millis) -> CohortSummary {
    let spec = &cohort.spec;
    CohortSummary {
        key: cohort.counters.key_hex().to_owned(),
        id: cohort.counters.label().id.clone(),
        core: 0,
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
        age_ms: now.as_ms().saturating_sub(cohort.created.as_ms()),
        idle_ms: now.as_ms().saturating_sub(cohort.last_activity.as_ms()),
        roster_entries: cohort.roster.ordered.len(),
        roster_cursor: cohort.roster.cursor,
        cursors: cohort.cursors.len(),
        dedup_entries: cohort.dedup.as_ref().map_or(0, |dedup| dedup.len()),
        history_frames: cohort.history.as_ref().map_or(0, |ring| ring.len()),
        history_bytes: cohort.history.as_ref().map_or(0, |ring| ring.bytes()),
        subscribers: usize::try_from(cohort.counters.subscribers()).unwrap_or(usize::MAX),
        streams: cohort.counters.roles_snapshot(),
        peers_total: cohort.streams_by_peer.len(),
        peers: some_peers(cohort),
        counters: cohort.counters.counters().snapshot(),
    }
}

/// Up to `SUMMARY_PEERS_MAX` of a cohort's peers, sorted: O(that), not O(peers).
fn some_peers(cohort: &Cohort) -> Vec<String> {
    let mut peers: Vec<PeerId> = cohort
        .streams_by_peer
        .keys()
        .take(SUMMARY_PEERS_MAX)
        .copied()
        .collect();
    peers.sort_unstable();
    peers.iter().map(PeerId::to_string).collect()
}

pub(crate) fn page_of_streams<'a>(
    cohort: &Cohort,
    attached: impl Fn(StreamId) -> &'a Stream,
    (offset, limit): (usize, usize),
    now: Millis,
) -> CohortStreams {
    let page = cohort
        .members
        .iter()
        .skip(offset)
        .take(limit)
        .map(|id| {
            let stream = attached(*id);
            StreamSnapshot {
                id: *id,
                peer: stream.peer,
                role: stream.role,
                addr: hex::encode(stream.addr),
                joined_ms: stream.joined_at.as_ms(),
                revoked: stream.revocation.is_some(),
                frames_held: stream.frames_held(),
                transport: stream.carrier,
                anonymous: stream.anonymous,
                trusted_relay: false,
            }
        })
        .collect();
    CohortStreams {
        summary: summarize(cohort, now),
        roster: cohort.roster.ordered.iter().map(hex::encode).collect(),
        streams_total: cohort.members.len(),
        offset,
        streams: page,
    }
}
