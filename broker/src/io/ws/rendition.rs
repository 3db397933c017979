//! What the core queues for a WebSocket session, framed: the zero-copy half of the carrier.
//!
//! Owns: `Renditions`, the messages of one delivery for every kind of receiver: the shared
//! frame for a TCP stream, the same frame behind a binary header for a native session (the
//! header is computed once per delivery and copied inline per receiver), and for bridge
//! sessions the fields they asked for (W6) or the roster and EOS text frames (W10),
//! rendered once per distinct field list per delivery and shared by every session that
//! asked for it, and charged to frame memory like the frames read (so queued renderings are
//! bounded like queued frames). `single` frames what the core sends one stream alone (an
//! Ack, a roster).
//! Never does: re-encode anything per receiver, or queue anything itself.

use std::sync::Arc;

use bps_proto::{Frame, Hash, Status, decode_ack};
use bps_ws::{
    ChunkFacts as BridgeFacts, Fields, Head, Opcode, Rendered, challenge_text, render_delivery,
    render_roster,
};
use bytes::Bytes;

use super::bridge_session::BridgeSession;
use crate::io::frame_memory::FrameMemory;
use crate::io::outgoing::{Outgoing, Prefix};
use crate::io::port::{Framing, Port};
use crate::protocol::ChunkFacts;

/// One delivery, framed for each kind of receiver on first use.
#[derive(Debug)]
pub struct Renditions<'a> {
    frame: &'a Bytes,
    facts: &'a ChunkFacts,
    memory: &'a Arc<FrameMemory>,
    native: Option<Prefix>,
    /// Per field list (by `Fields::key`) asked for by a bridge session: its message, or
    /// nothing when the delivery is not passed on (never an AUTH).
    bridged: Vec<(u32, Option<Outgoing>)>,
}

impl<'a> Renditions<'a> {
    pub fn new(
        frame: &'a Bytes,
        facts: &'a ChunkFacts,
        memory: &'a Arc<FrameMemory>,
    ) -> Renditions<'a> {
        Renditions {
            frame,
            facts,
            memory,
            native: None,
            bridged: Vec::new(),
        }
    }

    /// What `port` gets of this delivery.
    pub fn for_port(&mut self, port: &Port) -> Option<Outgoing> {
        match port.framing() {
            Framing::Bare => Some(Outgoing::bare(self.frame.clone())),
            Framing::Native => {
                let len = self.frame.len();
                let prefix = *self.native.get_or_insert_with(|| binary_prefix(len));
                Some(Outgoing {
                    prefix,
                    body: self.frame.clone(),
                })
            }
            Framing::Bridge(session) => self.bridged(&session.fields),
        }
    }

    fn bridged(&mut self, fields: &Fields) -> Option<Outgoing> {
        let key = fields.key();
        if let Some((_, message)) = self.bridged.iter().find(|(known, _)| *known == key) {
            return message.clone();
        }
        let message = render(fields, self.frame, self.facts, self.memory);
        self.bridged.push((key, message.clone()));
        message
    }
}

/// What `port` gets of a frame sent to it alone: its Ack (a bridge session takes the
/// challenge from it and shows it as a text frame if it publishes, W10), or a roster.
pub fn single(port: &Port, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing> {
    match port.framing() {
        Framing::Bare => Some(Outgoing::bare(frame.clone())),
        Framing::Native => Some(Outgoing {
            prefix: binary_prefix(frame.len()),
            body: frame.clone(),
        }),
        Framing::Bridge(session) if !session.acked() => acked(&session, frame, memory),
        Framing::Bridge(_) => {
            let body = body_of(frame)?;
            render_roster(&body)
                .ok()
                .map(|text| text_message(text.as_bytes(), memory))
        }
    }
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
        Ok(Rendered::Binary(bytes)) => Some(Outgoing {
            prefix: binary_prefix(bytes.len()),
            body: charged(bytes, &body, memory),
        }),
        Ok(Rendered::Text(text)) => Some(text_message(text.as_bytes(), memory)),
        Ok(Rendered::Nothing) | Err(_) => None,
    }
}

/// A rendered message that is a slice of the (charged) frame is sent as it is; one that
/// was assembled is charged to frame memory like a frame.
fn charged(bytes: Bytes, frame: &Bytes, memory: &Arc<FrameMemory>) -> Bytes {
    let within = frame.as_ptr_range();
    let range = bytes.as_ptr_range();
    if within.start <= range.start && range.end <= within.end {
        bytes
    } else {
        memory.frame(&bytes)
    }
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
    Outgoing {
        prefix: Prefix::of(Head::new(Opcode::Text, text.len()).as_bytes()),
        body: memory.frame(text),
    }
}
