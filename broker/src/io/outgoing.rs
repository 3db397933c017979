//! One message of a stream's outbound queue.
//!
//! Owns: `Outgoing`, a shared body and the few bytes its carrier writes before it (a
//! WebSocket frame header; nothing for TCP), kept inline so that framing a delivery costs
//! no allocation per receiver; and `Body`: the frame a thousand receivers share, or a
//! gather list of parts written one after the other (a bridge session's fields: slices of
//! the shared frame and a small copy of what verification learnt), shared by every
//! receiver that asked for the same fields, so no receiver ever holds a private copy of a
//! frame.
//! Never does: encode anything; the carrier that owns the stream says what the prefix is.

use std::sync::Arc;

use bytes::Bytes;

use super::frame_memory::{Charge, FrameMemory};
use crate::limits::{GATHER_PARTS_MAX, PREFIX_BYTES_MAX};

/// The bytes before a body, inline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefix {
    bytes: [u8; PREFIX_BYTES_MAX],
    len: u8,
}

impl Prefix {
    /// No prefix (TCP writes the frame alone).
    pub const NONE: Prefix = Prefix {
        bytes: [0; PREFIX_BYTES_MAX],
        len: 0,
    };

    /// A copy of `bytes`.
    ///
    /// # Panics
    /// If `bytes` is longer than `PREFIX_BYTES_MAX` (a carrier's bug).
    #[must_use]
    pub fn of(bytes: &[u8]) -> Prefix {
        assert!(
            bytes.len() <= PREFIX_BYTES_MAX,
            "a prefix of {} bytes",
            bytes.len()
        );
        let mut prefix = Prefix::NONE;
        prefix.bytes[..bytes.len()].copy_from_slice(bytes);
        prefix.len = bytes.len() as u8;
        prefix
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// What follows a prefix.
#[derive(Clone, Debug)]
pub enum Body {
    /// One shared buffer (a frame, a text message).
    One(Bytes),
    /// Parts written in order.
    Gather(Arc<Gather>),
}

/// At most `GATHER_PARTS_MAX` parts, with the frame memory their list and any bytes copied
/// into them take (the frames they slice are charged already), so what queued gather lists
/// hold is within `limits.frame_memory_bytes_max` like the frames.
#[derive(Debug)]
pub struct Gather {
    parts: Box<[Bytes]>,
    _charge: Charge,
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Body {}

impl Body {
    /// The parts, in order.
    pub fn parts(&self) -> &[Bytes] {
        match self {
            Body::One(bytes) => std::slice::from_ref(bytes),
            Body::Gather(gather) => &gather.parts,
        }
    }

    /// Bytes on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        self.parts().iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A message queued towards one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub prefix: Prefix,
    pub body: Body,
}

impl Outgoing {
    /// A body written as it is (a TCP frame).
    #[must_use]
    pub fn bare(body: Bytes) -> Outgoing {
        Outgoing::new(Prefix::NONE, body)
    }

    /// One buffer behind a prefix.
    #[must_use]
    pub fn new(prefix: Prefix, body: Bytes) -> Outgoing {
        Outgoing {
            prefix,
            body: Body::One(body),
        }
    }

    /// Parts behind a prefix; one part is a plain body. `copied` is how many of the parts'
    /// bytes are copies rather than slices of a frame, charged to `memory` with the list.
    ///
    /// # Panics
    /// With more than `GATHER_PARTS_MAX` parts (a carrier's bug).
    #[must_use]
    pub fn gather(
        prefix: Prefix,
        mut parts: Vec<Bytes>,
        copied: usize,
        memory: &Arc<FrameMemory>,
    ) -> Outgoing {
        assert!(
            parts.len() <= GATHER_PARTS_MAX,
            "a message of {} parts",
            parts.len()
        );
        if parts.len() == 1 && copied == 0 {
            return Outgoing::new(prefix, parts.remove(0));
        }
        let list = size_of::<Gather>() + parts.len() * size_of::<Bytes>();
        let body = Body::Gather(Arc::new(Gather {
            parts: parts.into_boxed_slice(),
            _charge: memory.charge(list + copied),
        }));
        Outgoing { prefix, body }
    }

    /// Bytes on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        self.prefix.as_bytes().len() + self.body.len()
    }

    /// Buffers a vectored write needs for it (its prefix and each non-empty part).
    #[must_use]
    pub fn iovecs(&self) -> usize {
        usize::from(!self.prefix.is_empty())
            + self
                .body
                .parts()
                .iter()
                .filter(|part| !part.is_empty())
                .count()
    }
}
