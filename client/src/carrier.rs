//! A joined BPS stream on the carrier its target names: `HOST:PORT` (TCP) and
//! `ws://HOST:PORT/bps/v1` (WebSocket) through [`Session`], a multiaddr ending in
//! `/p2p/<peer id>` (libp2p, as a Swarm light node) through [`BeeSession`].
//!
//! Owns: the choice by target ([`Carried::join`]) and the four calls the terminal client's
//! loops make of any stream.
//!
//! Never: frames, timeouts or handshakes of its own; each carrier has them.

use std::time::Duration;

use bps_proto::{Address, Hash, Spec};
use bytes::Bytes;

use crate::bee_node::{BeeSettings, BeeTarget};
use crate::bee_session::BeeSession;
use crate::refusal::Refusal;
use crate::session::{JoinAnswer, Session, SessionConfig, SessionError};

/// A stream after `Ack{OK}`, on any carrier.
#[derive(Debug)]
pub enum Carried {
    /// TCP or WebSocket.
    Socket(Session),
    /// libp2p.
    Bee(BeeSession),
}

impl Carried {
    /// Joins `spec` as `addr` at `target` over the carrier it names; a libp2p target's node
    /// is on `network_id`. `Ok(Err(_))`: the broker refused the `Join`.
    pub fn join(
        target: &str,
        (spec, addr): (&Spec, &Address),
        config: SessionConfig,
        network_id: u64,
    ) -> Result<Result<Self, Refusal>, SessionError> {
        if BeeTarget::is_p2p(target) {
            let settings = BeeSettings::new(network_id);
            return Ok(BeeSession::join(target, &settings, (spec, addr), config)?.map(Self::Bee));
        }
        Ok(match Session::join_explained(target, spec, addr, config)? {
            JoinAnswer::Joined(session) => Ok(Self::Socket(session)),
            JoinAnswer::Refused(refusal) => Err(refusal),
        })
    }

    /// The stream's challenge (R4).
    pub fn challenge(&self) -> &Hash {
        match self {
            Self::Socket(session) => session.challenge(),
            Self::Bee(session) => session.challenge(),
        }
    }

    /// Writes one encoded frame.
    pub fn send(&mut self, frame: &[u8]) -> Result<(), SessionError> {
        match self {
            Self::Socket(session) => session.send(frame),
            Self::Bee(session) => session.send(frame),
        }
    }

    /// The next frame body within `wait` (`Ok(None)`: none came).
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Bytes>, SessionError> {
        match self {
            Self::Socket(session) => session.recv(wait),
            Self::Bee(session) => session.recv(wait),
        }
    }

    /// Ends the stream cleanly, lingering up to `linger` for the broker's close.
    pub fn finish(self, linger: Duration) -> Result<(), SessionError> {
        match self {
            Self::Socket(session) => session.finish(linger),
            Self::Bee(session) => {
                session.finish(linger);
                Ok(())
            }
        }
    }
}
