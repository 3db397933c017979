//! Client-side signing: SOC bytes and ready-to-send `Broadcast` frames (docs/PROTOCOL.md §1, R41).
//!
//! Owns: [`sign_soc`], [`sign_broadcast`] (session-feed ids for explicit and ALL cohorts),
//! [`sign_implicit`] (the binding's own id, no challenge) and their `try_` forms.
//!
//! Never: decides ids for a binding (callers pass the id for implicit cohorts), keeps
//! indices or cursors (the publisher's), or talks to the network. Used by clients, the
//! bench tool and tests; the broker never signs.
//!
//! The payload is the caller's own data, not a peer's: the panicking forms treat a payload
//! over 4096 bytes as a caller bug; the `try_` forms return [`PayloadTooLarge`].

use core::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::bmt::{CHUNK_SIZE, cac_address};
use crate::signer::SigningKey;
use crate::soc::{SOC_MIN_CHUNK_SIZE, signing_digest};
use crate::wire::{Broadcast, Hash, Kind, encode_frame, session_chunk_id};

/// A payload longer than a chunk can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadTooLarge {
    pub len: usize,
    pub max: usize,
}

impl fmt::Display for PayloadTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "payload of {} bytes exceeds the chunk size {}",
            self.len, self.max
        )
    }
}

impl std::error::Error for PayloadTooLarge {}

/// A signed publication: the SOC bytes, the `Broadcast` carrying them, and that message
/// encoded once as a varint-delimited frame (what goes on the stream).
#[derive(Clone, Debug, PartialEq)]
pub struct SignedFrame {
    pub chunk: Bytes,
    pub broadcast: Broadcast,
    pub frame: Bytes,
}

/// SOC bytes `id ‖ sig ‖ span(LE) ‖ payload`, signed by `key` (bee `soc.Sign`). The span is
/// written as given (`payload.len()` for ordinary data; 0 for AUTH and EOS).
pub fn try_sign_soc(
    key: &SigningKey,
    id: &Hash,
    span: u64,
    payload: &[u8],
) -> Result<Bytes, PayloadTooLarge> {
    if payload.len() > CHUNK_SIZE {
        return Err(PayloadTooLarge {
            len: payload.len(),
            max: CHUNK_SIZE,
        });
    }
    let span_bytes = span.to_le_bytes();
    let cac = cac_address(span_bytes, payload);
    let signature = key.sign_eth(&signing_digest(id, &cac));

    let mut chunk = BytesMut::with_capacity(SOC_MIN_CHUNK_SIZE + payload.len());
    chunk.put_slice(id);
    chunk.put_slice(&signature);
    chunk.put_slice(&span_bytes);
    chunk.put_slice(payload);
    Ok(chunk.freeze())
}

/// [`try_sign_soc`] for payloads known to fit.
///
/// # Panics
/// If `payload` is longer than 4096 bytes.
pub fn sign_soc(key: &SigningKey, id: &Hash, span: u64, payload: &[u8]) -> Bytes {
    match try_sign_soc(key, id, span, payload) {
        Ok(chunk) => chunk,
        Err(error) => panic!("sign_soc: {error}"),
    }
}

fn frame_of(chunk: Bytes, kind: Kind, challenge: Bytes, index: u64) -> SignedFrame {
    let broadcast = Broadcast {
        soc: chunk.clone(),
        kind: kind as i32,
        challenge,
        index,
    };
    let frame = encode_frame(&broadcast);
    SignedFrame {
        chunk,
        broadcast,
        frame,
    }
}

/// A `Broadcast` of `kind` at `index` on the session feed of (`topic`, `challenge`): the
/// chunk id is `session_chunk_id(kind, topic, challenge, index)` (docs/PROTOCOL.md §1.1); the span
/// is `payload.len()` (so AUTH and EOS, with no payload, get span 0).
pub fn try_sign_broadcast(
    key: &SigningKey,
    kind: Kind,
    topic: &Hash,
    challenge: &Hash,
    index: u64,
    payload: &[u8],
) -> Result<SignedFrame, PayloadTooLarge> {
    let id = session_chunk_id(kind, topic, challenge, index);
    let chunk = try_sign_soc(key, &id, payload.len() as u64, payload)?;
    Ok(frame_of(
        chunk,
        kind,
        Bytes::copy_from_slice(challenge),
        index,
    ))
}

/// [`try_sign_broadcast`] for payloads known to fit.
///
/// # Panics
/// If `payload` is longer than 4096 bytes.
pub fn sign_broadcast(
    key: &SigningKey,
    kind: Kind,
    topic: &Hash,
    challenge: &Hash,
    index: u64,
    payload: &[u8],
) -> SignedFrame {
    match try_sign_broadcast(key, kind, topic, challenge, index, payload) {
        Ok(frame) => frame,
        Err(error) => panic!("sign_broadcast: {error}"),
    }
}

/// A DATA `Broadcast` for an implicit cohort (R11): the chunk carries the binding's own
/// `id`, the challenge is empty, and `index` is set only when given (implicit FEED_TOPIC,
/// D4; proto3 cannot tell `Some(0)` from `None` on the wire).
pub fn try_sign_implicit(
    key: &SigningKey,
    id: &Hash,
    index: Option<u64>,
    payload: &[u8],
) -> Result<SignedFrame, PayloadTooLarge> {
    let chunk = try_sign_soc(key, id, payload.len() as u64, payload)?;
    Ok(frame_of(
        chunk,
        Kind::Data,
        Bytes::new(),
        index.unwrap_or_default(),
    ))
}

/// [`try_sign_implicit`] for payloads known to fit.
///
/// # Panics
/// If `payload` is longer than 4096 bytes.
pub fn sign_implicit(
    key: &SigningKey,
    id: &Hash,
    index: Option<u64>,
    payload: &[u8],
) -> SignedFrame {
    match try_sign_implicit(key, id, index, payload) {
        Ok(frame) => frame,
        Err(error) => panic!("sign_implicit: {error}"),
    }
}
