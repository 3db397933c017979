//! What the I/O layer says about a joining stream besides its `Join`.
//!
//! Owns: `Arrival`: the peer (R32, R33, R39), whether the stream is an anonymous spectator
//! session of the WebSocket bridge (docs/PROTOCOL.md W11), and the name of its carrier.
//! Never does: anything about the transport itself; the carrier is a label for the admin
//! view, which the machine stores and shows and never looks at.

use super::ids::PeerId;

/// A joining stream, as its carrier describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub peer: PeerId,
    /// W11: a bridge session without `addr`, joined under an addr the broker drew. It is a
    /// spectator whatever the spec, outside R33 and inside the peer's bound of anonymous
    /// sessions; a frame from it closes it without blocklisting its peer.
    pub anonymous: bool,
    /// What carries the stream ("tcp", "websocket"), for `/cohortz`.
    pub carrier: &'static str,
    /// Whether its carrier passes frames both ways as they are, so that an edge can splice
    /// it to the root (all but a W-API bridge session, which speaks JSON).
    pub spliceable: bool,
}

impl Arrival {
    /// A stream that declared its own addr.
    #[must_use]
    pub fn declared(peer: PeerId, carrier: &'static str) -> Arrival {
        Arrival {
            peer,
            anonymous: false,
            carrier,
            spliceable: true,
        }
    }

    /// A W11 spectator session.
    #[must_use]
    pub fn anonymous(peer: PeerId, carrier: &'static str) -> Arrival {
        Arrival {
            peer,
            anonymous: true,
            carrier,
            spliceable: false,
        }
    }
}
