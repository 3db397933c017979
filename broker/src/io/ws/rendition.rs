//! The WebSocket carrier's encoders (`io::encoding::Encoder`): what the core queues for a
//! session, framed, the zero-copy half of the carrier.
//!
//! Owns: `Native`, the shared frame behind a binary header for a native session (the
//! header is computed once per delivery and copied inline per receiver), and the bridge's
//! encoder on `BridgeSession`: the fields a session asked for (W6) as a gather list of
//! slices of the shared frame and one small copy of the facts between them, or the roster
//! and EOS text frames (W10, charged to frame memory like the frames read); each rendered
//! once per distinct field list per delivery (its key) and shared by every session that
//! asked for it. A session's history backlog is rendered the same way, so what a session
//! that does not read holds is handles to frames the ring holds anyway, never copies; its
//! queued bytes are counted and capped by the port like any stream's.
//! Never does: re-encode anything per receiver, or queue anything itself.

use std::sync::Arc;

use bps_proto::{Frame, Hash, Status, decode_ack};
use bps_ws::{
    ChunkFacts as BridgeFacts, Fields, Head, Opcode, Rendered, challenge_text, render_delivery,
    render_roster,
};
use bytes::Bytes;

use super::bridge_session::BridgeSession;
use crate::io::encoding::Encoder;
use crate::io::frame_memory::FrameMemory;
use crate::io::outgoing::{Outgoing, Prefix};
use crate::protocol::ChunkFacts;

/// The key of the native endpoint's encoding, apart from every bridge field list's key (a
/// `u32`): every native session gets the same message of a delivery.
const NATIVE_KEY: u64 = 1 << 32;

/// The native endpoint: one binary message per frame, the shared frame behind a header.
#[derive(Debug)]
pub struct Native;

impl Encoder for Native {
    fn key(&self) -> u64 {
        NATIVE_KEY
    }

    fn delivery(&self, frame: &Bytes, _: &ChunkFacts, _: &Arc<FrameMemory>) -> Option<Outgoing> {
        Some(binary(frame))
    }

    fn single(&self, frame: &Bytes, _: &Arc<FrameMemory>) -> Option<Outgoing> {
        Some(binary(frame))
    }
}

/// The SWIP-60 bridge: the fields of each delivery a session asked for (W6), service kinds
/// as text (W10).
impl Encoder for BridgeSession {
    fn key(&self) -> u64 {
        u64::from(self.fields.key())
    }

    fn delivery(
        &self,
        frame: &Bytes,
        facts: &ChunkFacts,
        memory: &Arc<FrameMemory>,
    ) -> Option<Outgoing> {
        render(&self.fields, frame, facts, memory)
    }

    /// Its Ack (the session takes the challenge from it and shows it as a text frame if it
    /// publishes, W10), or a roster.
    fn single(&self, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing> {
        if !self.acked() {
            return acked(self, frame, memory);
        }
        let body = body_of(frame)?;
        render_roster(&body)
            .ok()
            .map(|text| text_message(text.as_bytes(), memory))
    }
}

fn binary(frame: &Bytes) -> Outgoing {
    Outgoing::new(binary_prefix(frame.len()), frame.clone())
}

/// The bridge session's Ack: its challenge is kept; a publishing session is shown it.
fn acked(session: &BridgeSession, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing> {
    let ack = body_of(frame).and_then(|body| decode_ack(body).ok());
    let challenge = ack
        .filter(|ack| ack.status == Status::Ok as i32)
        .and_then(|ack| Hash::try_from(ack.challenge.as_ref()).ok());
    session.ack(challenge);
    let challenge = challenge?;
    session
        .publishes
        .then(|| text_message(challenge_text(&challenge).as_bytes(), memory))
}

fn render(
    fields: &Fields,
    frame: &Bytes,
    facts: &ChunkFacts,
    memory: &Arc<FrameMemory>,
) -> Option<Outgoing> {
    let body = body_of(frame)?;
    let facts = BridgeFacts {
        address: facts.address,
        public_key: facts.public_key,
        wrapped: facts.wrapped,
    };
    match render_delivery(*fields, &body, &facts) {
        Ok(Rendered::Binary(parts)) => {
            let len = parts.iter().map(Bytes::len).sum();
            let copied = parts
                .iter()
                .filter(|part| !within(part, &body))
                .map(Bytes::len)
                .sum();
            Some(Outgoing::gather(binary_prefix(len), parts, copied, memory))
        }
        Ok(Rendered::Text(text)) => Some(text_message(text.as_bytes(), memory)),
        Ok(Rendered::Nothing) | Err(_) => None,
    }
}

/// Whether `part` is a slice of `frame` (charged with it) rather than a copy.
fn within(part: &Bytes, frame: &Bytes) -> bool {
    let frame = frame.as_ptr_range();
    let part = part.as_ptr_range();
    frame.start <= part.start && part.end <= frame.end
}

/// The protobuf body of a delimited frame the machine produced.
fn body_of(frame: &Bytes) -> Option<Bytes> {
    Frame::parse_exact(frame.clone(), usize::MAX)
        .ok()
        .map(|frame| frame.body())
}

fn binary_prefix(len: usize) -> Prefix {
    Prefix::of(Head::new(Opcode::Binary, len).as_bytes())
}

fn text_message(text: &[u8], memory: &Arc<FrameMemory>) -> Outgoing {
    Outgoing::new(
        Prefix::of(Head::new(Opcode::Text, text.len()).as_bytes()),
        memory.frame(text),
    )
}
