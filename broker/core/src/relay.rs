//! W5: service chunks that reach the broker outside any stream (the bridge's
//! `POST /pubsub/{topic}/service`) and are relayed on a live admin stream of their cohort.
//!
//! Owns: `RelayOutcome`, what became of one such chunk, and `RelayReply`, where the I/O
//! layer wants it sent.
//! Never does: HTTP. The I/O layer maps each outcome to its answer (docs/PROTOCOL.md W10: 200, 400,
//! 404, 409, 422); the machine decides it (`Machine::on_relay`).

use std::fmt;

use super::counters::Counter;
use super::ids::CoreId;

/// Where the outcome of a relay goes: opaque to the machine, which hands it back with the
/// outcome (`Action::Relayed`) once the chunk's one signature check is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RelayReply {
    /// The core that holds the POST's connection.
    pub core: CoreId,
    /// That core's number for the POST.
    pub relay: u64,
}

/// What became of a relayed service chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelayOutcome {
    /// Accepted on the admin stream whose challenge it was signed under.
    Accepted,
    /// No live cohort has this spec.
    NoCohort,
    /// The cohort has no live admin stream (pending or publisher) to relay it on, or none
    /// with the challenge the POST names.
    NoAdminStream,
    /// The POST names no challenge, no admin stream has claimed, and several are pending:
    /// which one it was signed for is not guessed (each guess is a signature check).
    Unnamed { pending: usize },
    /// It breaks a rule or does not validate on the admin stream it was tried on (counted
    /// as the counter says; the I/O layer makes it a strike against the POSTing peer).
    Invalid { counter: Counter, reason: String },
    /// It validates but is not accepted: a retransmit, or a roster that does not decode.
    NotAccepted { counter: Counter },
}

impl fmt::Display for RelayOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RelayOutcome::Accepted => f.write_str("accepted"),
            RelayOutcome::NoCohort => f.write_str("no live cohort has this spec"),
            RelayOutcome::NoAdminStream => {
                f.write_str("the cohort has no live admin session to relay it on")
            }
            RelayOutcome::Unnamed { pending } => write!(
                f,
                "{pending} admin sessions are pending: name the one it was signed for with \
                 the \"challenge\" parameter"
            ),
            RelayOutcome::Invalid { reason, .. } => write!(f, "invalid: {reason}"),
            RelayOutcome::NotAccepted { counter } => {
                write!(f, "valid but not accepted ({})", counter.name())
            }
        }
    }
}
