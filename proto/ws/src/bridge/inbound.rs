//! A bridge publisher's binary message (W4, W10) and the W5 POST body, assembled into the
//! BPS frame a native client would have sent.
//!
//! Owns: the three layouts of an inbound message (chosen by the spec), [`parse_inbound`] with
//! its size checks, and [`Inbound::to_frame`]: the SOC `id ‖ sig ‖ span ‖ payload` with the id
//! derived as the layout says, wrapped in a `Broadcast` and varint-delimited. Never:
//! validation (the broker checks the assembled frame exactly as one from a TCP stream, so a
//! bad signature is the same `invalid_soc`) and never a judgement of the kind: an unknown
//! kind is assembled as is, so the broker core drops and counts it (R14).
//!
//! | spec | message |
//! |---|---|
//! | admin set (explicit or `ALL`) | `kind(1) ‖ index(8, BE) ‖ sig(65) ‖ span(8) ‖ payload` |
//! | implicit `FEED_TOPIC` | `index(8, BE) ‖ sig(65) ‖ span(8) ‖ payload`, kind DATA |
//! | implicit, other bindings | `id(32) ‖ sig(65) ‖ span(8) ‖ payload`, kind DATA, index 0 |

use std::fmt;

use bps_proto::{
    Binding, Broadcast, Hash, Kind, Spec, encode_frame, feed_id, kind_from_i32, session_chunk_id,
};
use bytes::{Bytes, BytesMut};

/// Largest payload a chunk carries: bee's ChunkSize (`bps_verify::CHUNK_SIZE`).
pub const PAYLOAD_BYTES_MAX: usize = 4096;

/// The kind is one byte (W10, as bee PR #5626's publish frame).
const KIND_BYTES: usize = 1;
/// The index is 8 bytes, big-endian (W10).
const INDEX_BYTES: usize = 8;
/// A SOC id.
const ID_BYTES: usize = 32;
/// A SOC signature, `r ‖ s ‖ v`.
const SIGNATURE_BYTES: usize = 65;
/// A CAC span, little-endian.
const SPAN_BYTES: usize = 8;

/// Longest inbound message of any layout: the whole SOC with a full payload (4201 bytes).
/// A bridge session's [`crate::codec::Decoder`] and the W5 body need no larger bound.
pub const INBOUND_BYTES_MAX: usize = ID_BYTES + SIGNATURE_BYTES + SPAN_BYTES + PAYLOAD_BYTES_MAX;

// The other layouts' prefixes are shorter than an id, so the whole SOC is the longest.
const _: () = assert!(KIND_BYTES + INDEX_BYTES <= ID_BYTES && INDEX_BYTES <= ID_BYTES);

/// How the chunk id of an inbound message is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ChunkId {
    /// Explicit or `ALL`: the session-feed id of (kind, topic, challenge, index).
    Session {
        /// The raw kind byte, known or not.
        kind: u8,
        index: u64,
    },
    /// Implicit `FEED_TOPIC`: the feed id of (topic, index) (D4).
    Feed { index: u64 },
    /// Any other implicit binding: the message carries the id itself.
    Own(Hash),
}

/// The layout an inbound message has under a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Session,
    Feed,
    Own,
}

impl Layout {
    fn of(spec: &Spec) -> Layout {
        match (spec.admin, spec.binding) {
            (Some(_), _) => Layout::Session,
            (None, Binding::FeedTopic) => Layout::Feed,
            (None, _) => Layout::Own,
        }
    }

    /// Bytes before the signature.
    fn prefix_bytes(self) -> usize {
        match self {
            Layout::Session => KIND_BYTES + INDEX_BYTES,
            Layout::Feed => INDEX_BYTES,
            Layout::Own => ID_BYTES,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Layout::Session => "kind(1) ‖ index(8) ‖ sig(65) ‖ span(8) ‖ payload",
            Layout::Feed => "index(8) ‖ sig(65) ‖ span(8) ‖ payload",
            Layout::Own => "id(32) ‖ sig(65) ‖ span(8) ‖ payload",
        }
    }
}

/// An inbound message that cannot be a chunk (the session is closed and counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InboundError {
    /// Shorter than its layout's fixed part.
    TooShort {
        /// Bytes of the message.
        bytes: usize,
        /// Bytes of the layout's fixed part.
        min: usize,
        /// The layout, for the reason line.
        layout: &'static str,
    },
    /// A payload over a chunk's 4096 bytes.
    PayloadTooLarge {
        /// Bytes of the payload.
        bytes: usize,
        /// The bound.
        max: usize,
    },
}

impl fmt::Display for InboundError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { bytes, min, layout } => write!(
                formatter,
                "message of {bytes} bytes is shorter than the {min} bytes of {layout}"
            ),
            Self::PayloadTooLarge { bytes, max } => write!(
                formatter,
                "payload of {bytes} bytes exceeds a chunk's {max} bytes"
            ),
        }
    }
}

impl std::error::Error for InboundError {}

/// A parsed inbound message, borrowing the message's signed part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Inbound<'message> {
    topic: Hash,
    id: ChunkId,
    /// `sig ‖ span ‖ payload`, as sent.
    signed: &'message [u8],
}

/// Splits `message` per the layout `spec` gives it (see the table above).
///
/// # Errors
/// Too short for its layout, or a payload over 4096 bytes.
pub fn parse_inbound<'message>(
    message: &'message [u8],
    spec: &Spec,
) -> Result<Inbound<'message>, InboundError> {
    let layout = Layout::of(spec);
    let too_short = InboundError::TooShort {
        bytes: message.len(),
        min: layout.prefix_bytes() + SIGNATURE_BYTES + SPAN_BYTES,
        layout: layout.describe(),
    };
    let (id, signed) = match layout {
        Layout::Session => {
            let Some((&[kind], rest)) = message.split_first_chunk::<KIND_BYTES>() else {
                return Err(too_short);
            };
            let Some((index, signed)) = rest.split_first_chunk::<INDEX_BYTES>() else {
                return Err(too_short);
            };
            let index = u64::from_be_bytes(*index);
            (ChunkId::Session { kind, index }, signed)
        }
        Layout::Feed => {
            let Some((index, signed)) = message.split_first_chunk::<INDEX_BYTES>() else {
                return Err(too_short);
            };
            let index = u64::from_be_bytes(*index);
            (ChunkId::Feed { index }, signed)
        }
        Layout::Own => {
            let Some((id, signed)) = message.split_first_chunk::<ID_BYTES>() else {
                return Err(too_short);
            };
            (ChunkId::Own(*id), signed)
        }
    };
    let Some(payload_bytes) = signed.len().checked_sub(SIGNATURE_BYTES + SPAN_BYTES) else {
        return Err(too_short);
    };
    if payload_bytes > PAYLOAD_BYTES_MAX {
        return Err(InboundError::PayloadTooLarge {
            bytes: payload_bytes,
            max: PAYLOAD_BYTES_MAX,
        });
    }
    Ok(Inbound {
        topic: spec.topic,
        id,
        signed,
    })
}

impl Inbound<'_> {
    /// The frame's raw kind: the message's kind byte, or DATA under implicit authorship.
    pub fn kind(&self) -> i32 {
        match self.id {
            ChunkId::Session { kind, .. } => i32::from(kind),
            ChunkId::Feed { .. } | ChunkId::Own(_) => Kind::Data as i32,
        }
    }

    /// The frame's index: the message's, or 0 where the layout has none.
    pub fn index(&self) -> u64 {
        match self.id {
            ChunkId::Session { index, .. } | ChunkId::Feed { index } => index,
            ChunkId::Own(_) => 0,
        }
    }

    /// The varint-delimited `Broadcast` frame, as the broker decodes one from a stream.
    ///
    /// `challenge` is the stream's (from its `Ack`; W5: each live admin stream's in turn).
    /// Explicit and `ALL`: the id is `session_chunk_id(kind, topic, challenge, index)` and the
    /// frame carries the challenge and index; an unknown kind gets an all-zero id, which no
    /// chunk validates at, and keeps its raw value so the core counts it. Implicit: the
    /// challenge is not used and the frame carries none (R11); `FEED_TOPIC` takes the id
    /// `feed_id(topic, index)` and carries the index, other bindings the message's own id
    /// and index 0.
    pub fn to_frame(&self, challenge: &Hash) -> Bytes {
        let (id, challenge, index) = match self.id {
            ChunkId::Session { kind, index } => {
                let id = kind_from_i32(i32::from(kind)).map_or([0; ID_BYTES], |known| {
                    session_chunk_id(known, self.topic, challenge, index)
                });
                (id, Bytes::copy_from_slice(challenge), index)
            }
            ChunkId::Feed { index } => (feed_id(self.topic, index), Bytes::new(), index),
            ChunkId::Own(id) => (id, Bytes::new(), 0),
        };
        let mut soc = BytesMut::with_capacity(ID_BYTES + self.signed.len());
        soc.extend_from_slice(&id);
        soc.extend_from_slice(self.signed);
        encode_frame(&Broadcast {
            soc: soc.freeze(),
            kind: self.kind(),
            challenge,
            index,
        })
    }
}
