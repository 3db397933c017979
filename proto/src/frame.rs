//! Frames on a BPS stream: an unsigned LEB128 varint length, then that many protobuf bytes
//! (docs/PROTOCOL.md §2, bee's delimited protobuf streams).
//!
//! Owns: [`Frame`] (one whole frame, length prefix and body, in one buffer: what a broker
//! reads once and delivers unchanged), splitting frames off a read buffer ([`next_frame`],
//! [`peek_frame`]), encoding a message as one frame ([`encode_frame`]), decoding the three
//! frame bodies ([`decode_join`], [`decode_ack`], [`decode_broadcast`]) and the frame size
//! limits.
//!
//! Never: touches a socket, judges what a frame means (that is [`crate::spec`] and the broker
//! core), or allocates for a peer's declared length: an oversize length is refused as soon as
//! the varint is complete, before any body byte is awaited. A short buffer is never an error,
//! only "need more" (`Ok(None)`), so a decoder resumes across partial reads.

use std::fmt;

use bytes::{Buf, Bytes, BytesMut};
use prost::Message;
use prost::encoding::encoded_len_varint;

use crate::CHALLENGE_BYTES;
use crate::pb::{Ack, Broadcast, Join, Kind};

/// Largest SOC a `Broadcast` can carry: bee's SocMaxChunkSize = id 32 + signature 65 +
/// span 8 + payload 4096 (`bps_verify::SOC_MAX_CHUNK_SIZE` is the same number).
pub const SOC_BYTES_MAX: usize = 4201;

/// Default cap on a frame body: the largest valid Broadcast plus headroom for unknown fields,
/// still 16x below bee's 128 KiB, so a peer cannot make the broker buffer much.
pub const FRAME_BYTES_MAX_DEFAULT: usize = 8192;

/// Longest unsigned LEB128 encoding of a u64: 64 bits at 7 bits per byte.
const VARINT_BYTES_MAX: usize = 10;

/// Largest known `Kind` value; it decides how many bytes the kind field takes at most.
const KIND_VALUE_MAX: i32 = Kind::Eos as i32;

/// Every field number of `Broadcast` is below 16, so every field key is one byte.
const FIELD_KEY_BYTES: usize = 1;

/// The largest valid Broadcast body: a 4201-byte soc, a known kind, a 32-byte challenge and
/// an index of u64::MAX; a configured frame cap below it would refuse valid publications.
pub const BROADCAST_FRAME_BYTES_MAX: usize = FIELD_KEY_BYTES
    + encoded_len_varint(SOC_BYTES_MAX as u64)
    + SOC_BYTES_MAX
    + FIELD_KEY_BYTES
    + encoded_len_varint(KIND_VALUE_MAX as u64)
    + FIELD_KEY_BYTES
    + encoded_len_varint(CHALLENGE_BYTES as u64)
    + CHALLENGE_BYTES
    + FIELD_KEY_BYTES
    + encoded_len_varint(u64::MAX);

const _: () = assert!(FRAME_BYTES_MAX_DEFAULT >= BROADCAST_FRAME_BYTES_MAX);

/// A peer fault in the framing layer; it ends the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The declared body length exceeds the configured cap.
    TooLarge {
        /// The length the peer declared.
        bytes: u64,
        /// The cap in force.
        max: usize,
    },
    /// The length varint has a continuation bit on its tenth byte.
    VarintTooLong,
    /// The length varint's tenth byte carries bits beyond the 64th.
    VarintOverflow,
    /// A buffer meant to hold exactly one frame (a WebSocket message) holds more or less
    /// than its length prefix declares.
    LengthMismatch {
        /// Bytes the prefix and its declared body take.
        declared: usize,
        /// Bytes the buffer holds.
        actual: usize,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { bytes, max } => {
                write!(
                    formatter,
                    "frame of {bytes} bytes exceeds the {max}-byte cap"
                )
            }
            Self::VarintTooLong => write!(
                formatter,
                "frame length varint is longer than {VARINT_BYTES_MAX} bytes"
            ),
            Self::VarintOverflow => write!(formatter, "frame length varint overflows u64"),
            Self::LengthMismatch { declared, actual } => write!(
                formatter,
                "message of {actual} bytes holds a frame declaring {declared} bytes"
            ),
        }
    }
}

impl std::error::Error for FrameError {}

/// Where a frame sits at the front of a buffer, known once its length varint is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Bytes of the length varint.
    pub prefix_bytes: usize,
    /// Bytes of the protobuf body that follows, already checked against the cap.
    pub body_bytes: usize,
}

impl FrameHeader {
    /// Bytes the whole frame occupies: varint plus body (saturating, which a header from
    /// [`peek_frame`] never needs).
    pub fn total_bytes(&self) -> usize {
        self.prefix_bytes.saturating_add(self.body_bytes)
    }
}

/// Reads the length prefix at the front of `buf` without consuming anything.
///
/// `Ok(None)`: the varint is not complete yet. `Ok(Some(header))`: the body may or may not
/// have arrived (compare `header.total_bytes()` with `buf.len()`), and it is within the cap,
/// so the caller may reserve room for it. A length above `frame_bytes_max` is refused here.
pub fn peek_frame(buf: &[u8], frame_bytes_max: usize) -> Result<Option<FrameHeader>, FrameError> {
    let mut declared: u64 = 0;
    for (position, &byte) in buf.iter().take(VARINT_BYTES_MAX).enumerate() {
        let low_bits = u64::from(byte & 0x7f);
        let more = byte & 0x80 != 0;
        if position == VARINT_BYTES_MAX - 1 {
            if more {
                return Err(FrameError::VarintTooLong);
            }
            if low_bits > 1 {
                return Err(FrameError::VarintOverflow);
            }
        }
        declared |= low_bits << (7 * position);
        if !more {
            let prefix_bytes = position + 1;
            // The second guard only matters for a cap near usize::MAX: the whole frame's size
            // must be representable, so `total_bytes` cannot overflow.
            return match usize::try_from(declared) {
                Ok(body_bytes)
                    if body_bytes <= frame_bytes_max
                        && body_bytes.checked_add(prefix_bytes).is_some() =>
                {
                    Ok(Some(FrameHeader {
                        prefix_bytes,
                        body_bytes,
                    }))
                }
                _ => Err(FrameError::TooLarge {
                    bytes: declared,
                    max: frame_bytes_max,
                }),
            };
        }
    }
    Ok(None)
}

/// Splits the next frame's body off the front of `buf`, zero-copy.
///
/// `Ok(None)` means "need more bytes" and leaves `buf` untouched. On `Ok(Some(body))` exactly
/// the frame's bytes (varint and body) have been consumed; `body` shares `buf`'s allocation.
/// On an error nothing is consumed and the stream should be closed.
pub fn next_frame(buf: &mut BytesMut, frame_bytes_max: usize) -> Result<Option<Bytes>, FrameError> {
    let Some(header) = peek_frame(buf, frame_bytes_max)? else {
        return Ok(None);
    };
    if buf.len() < header.total_bytes() {
        return Ok(None);
    }
    buf.advance(header.prefix_bytes);
    Ok(Some(buf.split_to(header.body_bytes).freeze()))
}

/// Encodes `message` as one frame: varint length, then the body. Encode once, send the same
/// `Bytes` to every receiver (clones are reference counts).
pub fn encode_frame(message: &impl Message) -> Bytes {
    Bytes::from(message.encode_length_delimited_to_vec())
}

/// One whole frame in one buffer: the varint length prefix followed by the body. A broker
/// keeps a received frame in this form so that it can deliver the very same bytes to every
/// receiver (section 1: byte for byte unchanged) without framing it again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    bytes: Bytes,
    prefix_bytes: usize,
}

impl Frame {
    /// The frame `header` describes, held in `bytes` (exactly `header.total_bytes()` long,
    /// as [`peek_frame`] measured it in the buffer `bytes` was copied from).
    ///
    /// # Panics
    /// If `bytes` is not exactly the frame `header` describes: a caller bug.
    #[must_use]
    pub fn from_header(bytes: Bytes, header: FrameHeader) -> Frame {
        assert_eq!(
            bytes.len(),
            header.total_bytes(),
            "a frame buffer holds exactly its frame"
        );
        Frame {
            bytes,
            prefix_bytes: header.prefix_bytes,
        }
    }

    /// Parses a buffer that must hold exactly one frame (a WebSocket message of the native
    /// endpoint), zero-copy.
    ///
    /// # Errors
    /// A bad or oversize length prefix, an incomplete frame, or bytes beyond it.
    pub fn parse_exact(bytes: Bytes, frame_bytes_max: usize) -> Result<Frame, FrameError> {
        let actual = bytes.len();
        match peek_frame(&bytes, frame_bytes_max)? {
            Some(header) if header.total_bytes() == actual => Ok(Frame::from_header(bytes, header)),
            Some(header) => Err(FrameError::LengthMismatch {
                declared: header.total_bytes(),
                actual,
            }),
            None => Err(FrameError::LengthMismatch {
                declared: actual.saturating_add(1),
                actual,
            }),
        }
    }

    /// `message` encoded as one frame.
    #[must_use]
    pub fn encode(message: &impl Message) -> Frame {
        let body_bytes = message.encoded_len();
        Frame {
            bytes: encode_frame(message),
            prefix_bytes: encoded_len_varint(body_bytes as u64),
        }
    }

    /// The whole frame: what goes on the wire.
    #[must_use]
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The whole frame, owned.
    #[must_use]
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// The protobuf body (a zero-copy slice of the frame).
    #[must_use]
    pub fn body(&self) -> Bytes {
        self.bytes.slice(self.prefix_bytes..)
    }

    /// Bytes of the whole frame.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the frame is empty (never: a frame has at least its one-byte prefix).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Which frame a body was decoded as (the role and direction decide, there is no envelope).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameType {
    /// The peer's handshake frame.
    Join,
    /// The broker's handshake frame.
    Ack,
    /// Every frame after the handshake.
    Broadcast,
}

impl fmt::Display for FrameType {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Join => "Join",
            Self::Ack => "Ack",
            Self::Broadcast => "Broadcast",
        })
    }
}

/// A frame body that is not valid protobuf for the message it must be (a peer fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The message the body was decoded as.
    pub frame: FrameType,
    /// Size of the body.
    pub bytes: usize,
    /// What prost found wrong.
    pub source: prost::DecodeError,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "malformed {} frame of {} bytes: {}",
            self.frame, self.bytes, self.source
        )
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

fn decode_body<M: Message + Default>(frame: FrameType, body: Bytes) -> Result<M, DecodeError> {
    let bytes = body.len();
    M::decode(body).map_err(|source| DecodeError {
        frame,
        bytes,
        source,
    })
}

/// Decodes a `Join` body. Unknown fields are dropped; nothing is validated (see
/// [`crate::validate_join`]).
pub fn decode_join(body: Bytes) -> Result<Join, DecodeError> {
    decode_body(FrameType::Join, body)
}

/// Decodes an `Ack` body; the status is kept as the raw `i32`.
pub fn decode_ack(body: Bytes) -> Result<Ack, DecodeError> {
    decode_body(FrameType::Ack, body)
}

/// Decodes a `Broadcast` body zero-copy (`soc` and `challenge` slice `body`). An unknown
/// kind decodes fine and stays in `kind` as its `i32`, so the broker can count it (R14).
pub fn decode_broadcast(body: Bytes) -> Result<Broadcast, DecodeError> {
    decode_body(FrameType::Broadcast, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_frame_max_is_the_encoded_worst_case() {
        let worst = Broadcast {
            soc: Bytes::from(vec![0xff; SOC_BYTES_MAX]),
            kind: KIND_VALUE_MAX,
            challenge: Bytes::from(vec![0xff; CHALLENGE_BYTES]),
            index: u64::MAX,
        };
        assert_eq!(worst.encoded_len(), BROADCAST_FRAME_BYTES_MAX);
        assert_eq!(BROADCAST_FRAME_BYTES_MAX, 4251);
    }

    #[test]
    fn kind_value_max_covers_every_known_kind() {
        for value in 0..=255 {
            if let Ok(kind) = Kind::try_from(value) {
                assert!(kind as i32 <= KIND_VALUE_MAX, "{kind:?}");
            }
        }
    }

    #[test]
    fn body_is_a_slice_of_the_read_buffer() {
        let ack = Ack {
            status: crate::pb::Status::Ok as i32,
            challenge: Bytes::from(vec![7; CHALLENGE_BYTES]),
        };
        let mut buf = BytesMut::from(&encode_frame(&ack)[..]);
        let base = buf.as_ptr() as usize;
        let body = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
            .expect("valid frame")
            .expect("complete frame");
        assert_eq!(body.as_ptr() as usize, base + 1, "body must not be copied");
        let decoded = decode_ack(body.clone()).expect("valid Ack");
        assert_eq!(decoded, ack);
        let offset = decoded.challenge.as_ptr() as usize - body.as_ptr() as usize;
        assert!(offset < body.len(), "challenge must slice the body");
    }

    #[test]
    fn a_frame_keeps_prefix_and_body_in_one_buffer() {
        let ack = Ack {
            status: crate::pb::Status::Ok as i32,
            challenge: Bytes::from(vec![7; CHALLENGE_BYTES]),
        };
        let frame = Frame::encode(&ack);
        assert_eq!(frame.bytes(), &encode_frame(&ack));
        assert_eq!(decode_ack(frame.body()).expect("valid Ack"), ack);
        let parsed = Frame::parse_exact(frame.bytes().clone(), FRAME_BYTES_MAX_DEFAULT)
            .expect("exactly one frame");
        assert_eq!(parsed, frame);
        assert_eq!(parsed.body().as_ptr(), offset_in(&parsed, 1));
        let mut longer = frame.bytes().to_vec();
        longer.push(0);
        assert_eq!(
            Frame::parse_exact(Bytes::from(longer), FRAME_BYTES_MAX_DEFAULT),
            Err(FrameError::LengthMismatch {
                declared: frame.len(),
                actual: frame.len() + 1
            })
        );
        let shorter = frame.bytes().slice(..frame.len() - 1);
        assert!(matches!(
            Frame::parse_exact(shorter, FRAME_BYTES_MAX_DEFAULT),
            Err(FrameError::LengthMismatch { .. })
        ));
        assert!(matches!(
            Frame::parse_exact(Bytes::new(), FRAME_BYTES_MAX_DEFAULT),
            Err(FrameError::LengthMismatch { .. })
        ));
        assert_eq!(
            Frame::parse_exact(frame.bytes().clone(), 10),
            Err(FrameError::TooLarge { bytes: 36, max: 10 })
        );
    }

    /// The address `offset` bytes into the frame's buffer.
    fn offset_in(frame: &Frame, offset: usize) -> *const u8 {
        frame.bytes()[offset..].as_ptr()
    }

    #[test]
    fn errors_display_their_context() {
        let too_large = FrameError::TooLarge {
            bytes: 9000,
            max: 8192,
        };
        assert_eq!(
            too_large.to_string(),
            "frame of 9000 bytes exceeds the 8192-byte cap"
        );
        let error = decode_join(Bytes::from_static(&[0x0a, 0x05])).expect_err("truncated");
        assert_eq!(error.frame, FrameType::Join);
        assert_eq!(error.bytes, 2);
        assert!(
            error
                .to_string()
                .starts_with("malformed Join frame of 2 bytes: ")
        );
    }
}
