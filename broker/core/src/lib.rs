//! `bps_core`, the BPS protocol core: an I/O-free state machine (docs/PROTOCOL.md §5, R1..R40).
//!
//! Owns: every protocol rule the broker enforces, as `Machine` (one per broker core, for the
//! cohorts homed on it), fed with `(now, stream, bytes)` and verification results, answering
//! with `Action`s; plus the pieces it is made of (one file per concept) and the few types the
//! I/O layer uses next to it (`PeerLedger`, `ProtocolConfig`).
//! Never does: sockets, runtimes (no monoio: CI checks this crate's dependency tree), clocks,
//! JSON or signature checks. Time is passed in, signatures
//! are checked by whoever executes `Action::Verify`, and bytes go out through the I/O layer.
//!
//! Decisions where the spec is silent (each is also noted where it is made):
//! - R30 counts every stream except those that joined pending (admin or rostered, exempt),
//!   and that exemption survives the claim; pending streams have their own bound
//!   (`pending_streams_per_cohort_max`) because anyone may declare the admin's address. An
//!   exempt stream whose address is revoked becomes counted, or leaves (gracefully, after
//!   its reduced roster) when the cohort has no room.
//! - R31 is broker-wide (the `PeerLedger` counts cohorts of all cores). A full table makes
//!   room from cohorts nobody has received from (empty fan-out set) for
//!   `idle_cohort_reclaim_ms`: the creating Join's core reclaims its oldest at once, and
//!   every core sheds one of its own at its idle timer while the table is full.
//! - R32 also bounds the /64s of one IPv6 prefix (`ipv6_prefix_bits`) together, by their
//!   cohort attachments (`cohorts_per_ipv6_prefix_max`); IPv4 peers are not grouped.
//! - A spectator or silent stream named by the current roster may claim (R8, R23); a silent
//!   stream newly named gets a fresh claim deadline from the roster's acceptance.
//! - R24 applies to every stream of an address that leaves the roster (pending, publisher,
//!   and named spectator or silent streams), so a claim in flight is never punished.
//!   A revoked stream's frames are dropped (`drop_revoked_in_grace`) until the reduced
//!   roster is written plus `revocation_grace_ms`; later frames are `wrong_stream`
//!   violations. A revoked stream of a closed cohort is silent and gets a claim deadline.
//! - R22: a stream gets the latest roster on its own only if it has not had that version
//!   yet; the fan-out set gets each roster as one delivery.
//! - R11: the owner must equal the declared addr only under OWNER, the one binding that
//!   fixes a single owner. Under ANCHOR (GSOC, a shared key) the declared addr is the
//!   identity for R25, so holders of the shared key can hear each other.
//! - AUTH in an implicit cohort is a `wrong_stream` violation (there is no claim to prove);
//!   ROSTER and EOS there are service kinds from a non-admin.
//! - DATA or ROSTER at index 2^64-1 is `invalid_soc` (bee rejects it; the next cursor
//!   would not exist). AUTH has no cursor and no duplicate check.
//! - Inactivity (R34) counts accepted DATA, AUTH, ROSTER and EOS; retransmits, drops and
//!   invalid rosters do not.
//! - Violations close only the offending stream; the peer's other streams stay until the I/O
//!   layer refuses them by the blocklist at their next connection.
//! - D11, history (SWIP-60 leaves the mechanism to a later SWIP; the details are in
//!   `history`): `history` is part of the spec and so of the cohort's identity (R1), so a
//!   publisher and its subscribers must all join with it. Such a cohort keeps its most
//!   recently accepted DATA frames (R18) in a ring bounded by `history_frames_max` and
//!   `history_bytes_max`, in acceptance order, in memory only, for as long as the cohort
//!   lives (reclaim and EOS drop it); the latest ROSTER stays the roster's (R22), outside
//!   those bounds. Every stream entering the fan-out set (a spectator at attach, a pending or
//!   silent stream at its claim, an ALL member or implicit publisher at its Join, a pending
//!   stream a reduced roster makes a spectator) gets `Action::Backlog` right after its
//!   latest roster: the retained frames not of its own identity (R25) it has not had, then
//!   live traffic, nothing lost or twice at the seam (the machine is single-threaded; the I/O
//!   layer writes the backlog before anything queued after it). A reconnecting subscriber is
//!   a new stream and gets the whole ring; it drops what is below its cursors (R41). An
//!   accepted ROSTER that revokes a publisher removes its frames from the ring, because a
//!   late joiner would reject them against the roster it gets first (R41). The ring bounds
//!   are reloadable and apply to existing rings at once. `HistoryPolicy::Refuse` (reloadable)
//!   answers every Join with `history` REJECTED (R3 allows it), creating or attaching;
//!   streams already attached carry on.

pub mod action;
pub mod arrival;
pub mod config;
pub mod counters;
pub mod fanout;
pub mod ids;
pub mod ledger;
pub mod machine;
pub mod relay;
pub mod snapshot;
pub mod time;
pub mod trust;

mod cohort;
mod cursor;
mod deadlines;
mod dedup;
mod history;
mod roster;
mod stream;
mod validation;

#[cfg(any(test, feature = "sim"))]
pub mod sim;
#[cfg(test)]
mod tests;

pub use action::{
    Action, ChunkFacts, CloseReason, ClosedBy, Delivered, FullCause, InvalidSoc, RejectCause,
    Violation, WrongStream,
};
pub use arrival::Arrival;
pub use config::{EdgePolicy, HistoryPolicy, ProtocolConfig};
pub use counters::{CohortCounters, CohortLabel, Counter, CounterRegistry, CounterSet};
pub use fanout::Targets;
pub use ids::{CohortSerial, CoreId, PeerId, StreamId, Ticket, WriteNotice};
pub use ledger::{LedgerSnapshot, PeerLedger};
pub use machine::{Machine, SpliceOutcome, TicketOrigin};
pub use relay::{RelayOutcome, RelayReply};
pub use snapshot::{CohortStreams, CohortSummary, StreamSnapshot};
pub use stream::Role;
pub use time::Millis;
pub use trust::{PrefixError, TrustedRelays};
