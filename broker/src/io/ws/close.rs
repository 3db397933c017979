//! The one table of WebSocket close codes the broker sends (docs/WEBSOCKET.md shows it).
//!
//! Owns: the close codes, and the mapping from why a session ends (`Closing`, or a fault
//! the carrier found) to its `Farewell` (the port's carrier-neutral code and reason). A
//! browser sees close codes, not HTTP statuses, so every refusal after the upgrade and
//! every later fault has one here; codes 4000..=4999 are the range RFC 6455 leaves to applications.
//! Never does: write anything; the session writes the close frame.

use bps_ws::codec::ProtocolError;

use crate::io::port::{Closing, Farewell};
use crate::protocol::CloseReason;

/// R21: the admin's EOS was delivered; also the answer to a peer's own close.
pub const NORMAL: u16 = 1000;
/// The broker drains (a restart or a shutdown).
pub const GOING_AWAY: u16 = 1001;
/// A message of the wrong type: text where binary is required.
pub const UNSUPPORTED_DATA: u16 = 1003;
/// A message whose content is not what the endpoint carries (not one BPS frame; a bridge
/// message too short or too long).
pub const INVALID_PAYLOAD: u16 = 1007;
/// A policy the broker enforces on sessions: a ping flood, a spectator session that sent
/// data (W11), a message before the challenge.
pub const POLICY: u16 = 1008;
/// FULL (R30..R33, W11).
pub const FULL: u16 = 4001;
/// REJECTED (R3).
pub const REJECTED: u16 = 4002;
/// The peer is blocklisted (R39).
pub const BLOCKLISTED: u16 = 4003;
/// A violation (R39); the reason names the rule.
pub const VIOLATION: u16 = 4004;
/// No claim within the claim deadline (R35).
pub const CLAIM_TIMEOUT: u16 = 4005;
/// A newer publisher session of the same address took this one's place (R29).
pub const SUPERSEDED: u16 = 4006;
/// The cohort was reclaimed for inactivity (R34).
pub const INACTIVE: u16 = 4007;
/// Revoked with no room left among the cohort's readers (R24, R30).
pub const REVOKED_WITHOUT_ROOM: u16 = 4008;
/// Frames dropped without penalty too fast (R15, R16).
pub const DROP_RATE: u16 = 4009;
/// Nothing received (not even a pong) for `ws.idle_deadline_ms`.
pub const IDLE: u16 = 4010;
/// No Join within `server.join_deadline_ms` (the native endpoint).
pub const JOIN_DEADLINE: u16 = 4011;
/// Edge mode: a roster named this spectator, which may now publish at the root; rejoin.
pub const ROSTERED_AT_EDGE: u16 = 4012;
/// Edge mode: an upstream stream nobody wants (never a client's).
pub const UPSTREAM_UNWANTED: u16 = 4013;
/// Edge mode: the other side of a spliced stream ended (the root closed it).
pub const UPSTREAM_ENDED: u16 = 4014;
/// Edge mode: the root answered the spliced Join FULL or REJECTED (the Ack came first).
pub const ROOT_REFUSED: u16 = 4015;
/// Edge mode: no broker of the edge's list answered the spliced Join in time.
pub const ROOT_UNREACHABLE: u16 = 4016;
/// Edge mode: an edge's upstream stream that closes a loop of edges (never a client's).
pub const RELAY_LOOP: u16 = 4017;

/// The WebSocket close codes of the carrier-neutral `Farewell`.
impl Farewell {
    /// The farewell of a session that ends as `closing` says.
    pub fn of(closing: &Closing) -> Farewell {
        match closing {
            Closing::Decided(reason) => Farewell::new(code_of(reason), reason.to_string()),
            Closing::Drain => Farewell::new(GOING_AWAY, "the broker is draining"),
            Closing::JoinDeadline => Farewell::new(JOIN_DEADLINE, "no Join in time"),
            Closing::SlowConsumer => Farewell::new(POLICY, "slow consumer (R26)"),
            Closing::Carrier(farewell) => farewell.clone(),
        }
    }

    /// The farewell of an RFC 6455 fault in what the peer sent.
    pub fn of_protocol(error: &ProtocolError) -> Farewell {
        Farewell::new(error.close_code(), error.to_string())
    }
}

fn code_of(reason: &CloseReason) -> u16 {
    match reason {
        CloseReason::Rejected(_) => REJECTED,
        CloseReason::Full(_) => FULL,
        CloseReason::Blocklisted => BLOCKLISTED,
        CloseReason::Violation(_) => VIOLATION,
        CloseReason::ClaimTimeout => CLAIM_TIMEOUT,
        CloseReason::Superseded => SUPERSEDED,
        CloseReason::Inactive => INACTIVE,
        CloseReason::EndOfStream => NORMAL,
        CloseReason::RevokedWithoutRoom => REVOKED_WITHOUT_ROOM,
        CloseReason::DropRate => DROP_RATE,
        CloseReason::RosteredAtEdge => ROSTERED_AT_EDGE,
        CloseReason::UpstreamUnwanted => UPSTREAM_UNWANTED,
        CloseReason::UpstreamEnded => UPSTREAM_ENDED,
        CloseReason::RootRefused => ROOT_REFUSED,
        CloseReason::RootUnreachable => ROOT_UNREACHABLE,
        CloseReason::RelayLoop => RELAY_LOOP,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{FullCause, Violation};

    #[test]
    fn every_decided_close_has_its_own_code_and_says_why() {
        let cases = [
            (CloseReason::Full(FullCause::CohortStreams), FULL),
            (CloseReason::Violation(Violation::Malformed), VIOLATION),
            (CloseReason::EndOfStream, NORMAL),
            (CloseReason::DropRate, DROP_RATE),
        ];
        for (reason, code) in cases {
            let farewell = Farewell::of(&Closing::Decided(reason.clone()));
            assert_eq!(farewell.code, code, "{reason}");
            assert_eq!(farewell.reason, reason.to_string());
        }
        assert_eq!(Farewell::of(&Closing::Drain).code, GOING_AWAY);
    }
}
