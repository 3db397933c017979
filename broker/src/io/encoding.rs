//! What the core queues for a stream, in its carrier's messages: the carrier-neutral half
//! of fan-out rendering.
//!
//! Owns: `Framing` (how a port's messages are framed: the frame as it is, or through its
//! carrier's `Encoder`), the `Encoder` contract, and `Renditions`, the messages of one
//! delivery for every kind of receiver, each encoded once per delivery and shared (a clone
//! of the shared frame plus a copied header) by every receiver whose encoder has the same
//! key. A TCP receiver gets the shared frame itself without any encoder being called.
//! Never does: know a carrier; the encoders are the carriers' (`ws::rendition`).

use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;

use super::frame_memory::FrameMemory;
use super::outgoing::Outgoing;
use crate::protocol::ChunkFacts;

/// How a carrier frames what the core queues for one of its streams.
pub trait Encoder: fmt::Debug {
    /// Receivers whose encoders have the same key get the same message of a delivery,
    /// encoded once (the native WebSocket endpoint: one key; the bridge: one per field list).
    fn key(&self) -> u64;
    /// The message a receiver gets of a delivery; `None` when it is not passed on.
    fn delivery(
        &self,
        frame: &Bytes,
        facts: &ChunkFacts,
        memory: &Arc<FrameMemory>,
    ) -> Option<Outgoing>;
    /// The message of a frame the core sends this receiver alone (an Ack, a roster).
    fn single(&self, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing>;
}

/// How the core turns what it queues for a stream into the messages its carrier writes.
#[derive(Clone, Debug)]
pub enum Framing {
    /// The frame as it is (TCP, and any carrier that sends frames unwrapped).
    Bare,
    /// Through the carrier's encoder.
    Encoded(Rc<dyn Encoder>),
}

impl Framing {
    /// What a receiver framed so gets of a frame sent to it alone.
    pub fn single(&self, frame: &Bytes, memory: &Arc<FrameMemory>) -> Option<Outgoing> {
        match self {
            Framing::Bare => Some(Outgoing::bare(frame.clone())),
            Framing::Encoded(encoder) => encoder.single(frame, memory),
        }
    }
}

/// One delivery, encoded for each kind of receiver on first use.
#[derive(Debug)]
pub struct Renditions<'a> {
    frame: &'a Bytes,
    facts: &'a ChunkFacts,
    memory: &'a Arc<FrameMemory>,
    /// The first encoding made, kept inline: most deliveries meet one kind of encoder.
    first: Option<(u64, Option<Outgoing>)>,
    /// Encodings of further keys.
    more: Vec<(u64, Option<Outgoing>)>,
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
            first: None,
            more: Vec::new(),
        }
    }

    /// What a receiver framed so gets of this delivery.
    pub fn of(&mut self, framing: &Framing) -> Option<Outgoing> {
        match framing {
            Framing::Bare => Some(Outgoing::bare(self.frame.clone())),
            Framing::Encoded(encoder) => self.encoded(&**encoder),
        }
    }

    fn encoded(&mut self, encoder: &dyn Encoder) -> Option<Outgoing> {
        let key = encoder.key();
        let known = self
            .first
            .iter()
            .chain(&self.more)
            .find(|(known, _)| *known == key);
        if let Some((_, message)) = known {
            return message.clone();
        }
        let message = encoder.delivery(self.frame, self.facts, self.memory);
        let entry = (key, message.clone());
        if self.first.is_none() {
            self.first = Some(entry);
        } else {
            self.more.push(entry);
        }
        message
    }
}
