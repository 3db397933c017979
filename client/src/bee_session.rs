//! One BPS stream over the libp2p carrier ([`crate::bee_node`]): a light node connected
//! and handshaken with the broker, one `/swarm/pubsub/1.0.0/pubsub` stream on it, then the
//! `Join`, the `Ack` and `Broadcast` frames exactly as on TCP (docs/PROTOCOL.md §2).
//!
//! Owns: the stream's read buffer (frames resume across chunks), its challenge (R4), the
//! handshake with the broker's `Ack` ([`BeeSession::join`]) and the clean close.
//!
//! Never: signs, verifies or retries (as [`crate::session`]); each join starts its own
//! node, so a reconnect dials and handshakes afresh.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bps_proto::{Address, CHALLENGE_BYTES, Hash, Spec, encode_frame, next_frame};
use bytes::{Bytes, BytesMut};

use crate::bee_node::{BeeNode, BeeSettings, BeeStream, BeeTarget};
use crate::refusal::Refusal;
use crate::session::{AckAnswer, SessionConfig, SessionError, read_ack};

/// A BPS stream over libp2p after `Ack{OK}`.
#[derive(Debug)]
pub struct BeeSession {
    stream: BeeStream,
    buf: BytesMut,
    challenge: Hash,
    config: SessionConfig,
}

impl BeeSession {
    /// Connects a light node to `target` (a multiaddr ending in `/p2p/<peer id>`), opens a
    /// pubsub stream, sends `Join{spec, addr}` and reads the `Ack`.
    pub fn join(
        target: &str,
        settings: &BeeSettings,
        (spec, addr): (&Spec, &Address),
        config: SessionConfig,
    ) -> Result<Result<Self, Refusal>, SessionError> {
        let target = BeeTarget::parse(target)?;
        let node = BeeNode::connect(&target, settings)?;
        Self::join_on(&node, (spec, addr), config)
    }

    /// As [`BeeSession::join`], on a node already connected.
    pub fn join_on(
        node: &Arc<BeeNode>,
        (spec, addr): (&Spec, &Address),
        config: SessionConfig,
    ) -> Result<Result<Self, Refusal>, SessionError> {
        let mut stream = node.open_pubsub()?;
        let buf = stream.take_leftover();
        let mut session = Self {
            stream,
            buf,
            challenge: [0; CHALLENGE_BYTES],
            config,
        };
        session.send(&encode_frame(&spec.to_join(addr)))?;
        let Some(body) = session.recv(config.handshake_timeout)? else {
            return Err(SessionError::HandshakeTimeout(config.handshake_timeout));
        };
        Ok(match read_ack(body)? {
            AckAnswer::Ok(challenge) => {
                session.challenge = challenge;
                Ok(session)
            }
            AckAnswer::Refused(status) => Err(Refusal::new(status)),
        })
    }

    /// This stream's challenge from the `Ack` (R4).
    pub fn challenge(&self) -> &Hash {
        &self.challenge
    }

    /// Writes one encoded frame, waiting at most the write timeout for room.
    pub fn send(&mut self, frame: &[u8]) -> Result<(), SessionError> {
        let frame = Bytes::copy_from_slice(frame);
        Ok(self.stream.send(frame, self.config.write_timeout)?)
    }

    /// The next frame body, if one is buffered or arrives within `wait`.
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Bytes>, SessionError> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(body) = next_frame(&mut self.buf, self.config.frame_bytes_max)? {
                return Ok(Some(body));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.stream.recv(remaining)? {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }

    /// Ends the stream cleanly (a FIN after everything sent), lingering up to `linger`.
    pub fn finish(self, linger: Duration) {
        self.stream.finish(linger);
    }
}
