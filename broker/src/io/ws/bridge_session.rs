//! What one bridge session (docs/PROTOCOL.md W1..W11) keeps beside its port.
//!
//! Owns: `BridgeSession`: the spec and fields it asked for, whether it publishes (it has an
//! `addr`), and the challenge of its stream once the Ack came (the core sees the Ack go by
//! when it frames it for the session, and the reader needs it to assemble chunks).
//! Never does: I/O or protocol checks; an assembled frame is validated by the machine like
//! any other.

use std::cell::Cell;

use bps_proto::{Hash, Spec};
use bps_ws::bridge::Fields;

/// One bridge session's state.
#[derive(Debug)]
pub struct BridgeSession {
    pub spec: Spec,
    pub fields: Fields,
    /// Whether the session joined with an `addr` of its own (W3); otherwise it is a W11
    /// spectator session.
    pub publishes: bool,
    /// `swarm-keep-alive` (W7): the period of the broker's pings.
    pub keep_alive_s: u64,
    acked: Cell<bool>,
    challenge: Cell<Option<Hash>>,
}

impl BridgeSession {
    pub fn new(spec: Spec, fields: Fields, publishes: bool, keep_alive_s: u64) -> BridgeSession {
        BridgeSession {
            spec,
            fields,
            publishes,
            keep_alive_s,
            acked: Cell::new(false),
            challenge: Cell::new(None),
        }
    }

    /// Whether the stream's Ack has gone by (it is the first frame the core queues).
    pub fn acked(&self) -> bool {
        self.acked.get()
    }

    /// The Ack went by, with its challenge when it was OK.
    pub fn ack(&self, challenge: Option<Hash>) {
        self.acked.set(true);
        self.challenge.set(challenge);
    }

    /// The stream's challenge, once an OK Ack gave it.
    pub fn challenge(&self) -> Option<Hash> {
        self.challenge.get()
    }
}
