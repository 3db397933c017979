//! W5: service chunks that reach the broker outside any stream (the bridge's
//! `POST /pubsub/{topic}/service`) and are relayed on a live admin stream of their cohort.
//!
//! Owns: `RelayOutcome`, what became of one such chunk.
//! Never does: HTTP. The I/O layer maps each outcome to its answer (docs/PROTOCOL.md W10: 200, 400,
//! 404, 409, 422); the machine decides it (`Machine::on_relay`).

use std::fmt;

use super::counters::Counter;

/// What became of a relayed service chunk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelayOutcome {
    /// Accepted on the admin stream whose challenge it was signed under.
    Accepted,
    /// No live cohort has this spec.
    NoCohort,
    /// The cohort has no live admin stream (pending or publisher) to relay it on.
    NoAdminStream,
    /// It validates on no live admin stream (counted as the counter says, blocklisting
    /// nobody: it was on no stream).
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
            RelayOutcome::Invalid { reason, .. } => write!(f, "invalid: {reason}"),
            RelayOutcome::NotAccepted { counter } => {
                write!(f, "valid but not accepted ({})", counter.name())
            }
        }
    }
}
