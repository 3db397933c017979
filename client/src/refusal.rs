//! What a refused Join tells whoever sent it: for FULL, which of the broker's bounds was
//! reached and the config setting that moves it; for REJECTED, why, when the broker said.
//!
//! Owns: [`BOUNDS`], the one table of the bounds a Join can be answered FULL for (R30..R33,
//! W11) with the words the broker names each by and its `limits.*` key, and [`Refusal`]
//! (the `Ack`'s status with what the broker said besides) and its one-line rendering. Over
//! WebSocket the broker's close frame after the `Ack` names the bound (`full: streams per
//! cohort (R30)`, docs/WEBSOCKET.md); over TCP the `Ack` carries the status alone, so every
//! bound a Join with an addr can meet is named with its setting.
//!
//! Never: reads the wire (the session and `bps-bench`'s dialer hand the close reason in),
//! or retries (R38: the caller backs off).

use std::fmt;

use bps_proto::Status;

/// One bound a Join can be answered FULL for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// What is bounded, as the broker's close reason names it after `full: `.
    pub what: &'static str,
    /// The broker setting that moves it (`bps-broker --set KEY=N`, or the config file).
    pub setting: &'static str,
    /// Whether a Join with an addr of its own can meet it (every Join over TCP and the
    /// native WebSocket endpoint has one; anonymous bridge sessions do not).
    pub addressed: bool,
}

/// Every bound behind a FULL answer, in the order the broker checks an existing cohort's.
pub const BOUNDS: [Bound; 8] = [
    Bound {
        what: "streams per peer per cohort (R33)",
        setting: "limits.streams_per_peer_per_cohort_max",
        addressed: true,
    },
    Bound {
        what: "pending streams per cohort",
        setting: "limits.pending_streams_per_cohort_max",
        addressed: true,
    },
    Bound {
        what: "streams per cohort (R30)",
        setting: "limits.streams_per_cohort_max",
        addressed: true,
    },
    Bound {
        what: "cohorts per peer (R32)",
        setting: "limits.cohorts_per_peer_max",
        addressed: true,
    },
    Bound {
        what: "cohorts per broker (R31)",
        setting: "limits.cohorts_max",
        addressed: true,
    },
    Bound {
        what: "anonymous sessions per peer (W11)",
        setting: "limits.spectator_sessions_per_peer_max",
        addressed: false,
    },
    Bound {
        what: "anonymous sessions per peer per cohort (W11)",
        setting: "limits.spectator_sessions_per_peer_per_cohort_max",
        addressed: false,
    },
    Bound {
        what: "anonymous share of a cohort's streams (W11)",
        setting: "limits.spectator_slots_percent",
        addressed: false,
    },
];

/// The prefix of the broker's close reason for FULL.
const FULL_PREFIX: &str = "full: ";

/// The prefix of the broker's close reason for REJECTED.
const REJECTED_PREFIX: &str = "rejected: ";

/// A Join answered FULL or REJECTED.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The `Ack`'s status.
    pub status: Status,
    /// The broker's words, when it said more than the status (over WebSocket, the close
    /// frame's reason).
    pub reason: Option<String>,
}

impl Refusal {
    /// A refusal with the status alone (TCP).
    pub fn new(status: Status) -> Self {
        Self {
            status,
            reason: None,
        }
    }

    /// A refusal with the broker's reason (an empty one counts as none).
    pub fn with_reason(status: Status, reason: String) -> Self {
        Self {
            status,
            reason: Some(reason).filter(|reason| !reason.trim().is_empty()),
        }
    }

    /// The bound the broker named, if it named one of [`BOUNDS`].
    pub fn bound(&self) -> Option<&'static Bound> {
        let named = self.reason.as_deref()?.trim().strip_prefix(FULL_PREFIX)?;
        BOUNDS.iter().find(|bound| bound.what == named)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.status.as_str_name())?;
        match (self.status, self.bound(), self.reason.as_deref()) {
            (Status::Full, Some(bound), _) => write!(
                formatter,
                ": the broker is at its bound on {}; raise {} to admit more",
                bound.what, bound.setting
            ),
            (Status::Full, None, reason) => {
                if let Some(reason) = reason {
                    write!(formatter, " ({reason})")?;
                }
                formatter.write_str(
                    ": the broker is at one of its bounds (a TCP Ack does not say which; over \
                     ws:// the close reason does):",
                )?;
                let mut separator = " ";
                for bound in BOUNDS.iter().filter(|bound| bound.addressed) {
                    write!(
                        formatter,
                        "{separator}{}, set by {}",
                        bound.what, bound.setting
                    )?;
                    separator = "; ";
                }
                Ok(())
            }
            (_, _, Some(reason)) => write!(
                formatter,
                ": {}",
                reason.strip_prefix(REJECTED_PREFIX).unwrap_or(reason)
            ),
            (_, _, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_bound_gives_its_setting() {
        let refusal =
            Refusal::with_reason(Status::Full, "full: streams per cohort (R30)".to_owned());
        assert_eq!(
            refusal.bound().map(|bound| bound.setting),
            Some("limits.streams_per_cohort_max")
        );
        assert_eq!(
            refusal.to_string(),
            "FULL: the broker is at its bound on streams per cohort (R30); \
             raise limits.streams_per_cohort_max to admit more"
        );
    }

    #[test]
    fn without_a_reason_every_bound_an_addressed_join_can_meet_is_named() {
        let text = Refusal::new(Status::Full).to_string();
        for bound in &BOUNDS {
            assert_eq!(text.contains(bound.setting), bound.addressed, "{text}");
        }
        assert!(
            text.starts_with("FULL: the broker is at one of its bounds"),
            "{text}"
        );
        let unknown = Refusal::with_reason(Status::Full, "full: something new".to_owned());
        assert!(unknown.bound().is_none());
        assert!(
            unknown
                .to_string()
                .starts_with("FULL (full: something new): "),
            "{unknown}"
        );
    }

    #[test]
    fn rejected_says_why_when_the_broker_did() {
        assert_eq!(Refusal::new(Status::Rejected).to_string(), "REJECTED");
        assert_eq!(
            Refusal::with_reason(
                Status::Rejected,
                "rejected: history is refused by this broker".to_owned()
            )
            .to_string(),
            "REJECTED: history is refused by this broker"
        );
        assert_eq!(
            Refusal::with_reason(Status::Rejected, " ".to_owned()).reason,
            None
        );
    }
}
