//! The stamp at the front of every load-test payload: which publisher, which sequence
//! number, and when the message was meant to be sent.
//!
//! Owns: [`Stamp`], its fixed 32-byte little-endian layout (one BMT segment) and the filler
//! that pads a payload to `--size` ([`payload`]), and locating the payload inside an encoded
//! `Broadcast` body without decoding it ([`broadcast_payload`]).
//!
//! Layout: `magic "bpsb" (4) ‖ publisher u32 ‖ sequence u64 ‖ intended send time u64 (Unix
//! ns, 0 = not known when the payload was built: closed loop) ‖ cohort u32 ‖ reserved u32`.
//! The stamp is inside the signed chunk, so a broker cannot alter it without failing
//! verification, and a subscriber in another process (`bps-bench sub`) can measure latency
//! from it alone.
//!
//! Never: signs, verifies or reads a clock.

use std::fmt;

/// Bytes of a stamp; the smallest `--size`.
pub const STAMP_BYTES: usize = 32;

const MAGIC: [u8; 4] = *b"bpsb";

/// Field key of `Broadcast.soc` (field 1, length-delimited) on the wire.
const SOC_FIELD_KEY: u8 = 0x0a;

/// Bytes in front of a SOC's payload: id 32 ‖ signature 65 ‖ span 8.
const SOC_HEADER_BYTES: usize = 105;

/// What a load-test message carries about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The publisher's number in the run (0-based, across cohorts).
    pub publisher: u32,
    /// The message's number in its publisher's sequence (0-based).
    pub sequence: u64,
    /// When the open-loop schedule meant it to be sent, Unix nanoseconds; 0 when not known
    /// in advance (closed loop: the send time is recorded at write time instead).
    pub intended_ns: u64,
    /// The cohort's number in the run.
    pub cohort: u32,
}

/// Why bytes are not a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampError {
    /// Fewer than [`STAMP_BYTES`] bytes.
    Short {
        /// Bytes present.
        bytes: usize,
    },
    /// The magic is wrong: not a `bps-bench` payload.
    Magic,
    /// The frame body is not a `Broadcast` whose first field is the chunk.
    NotABroadcast,
}

impl fmt::Display for StampError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Short { bytes } => {
                write!(
                    formatter,
                    "payload of {bytes} bytes, a stamp needs {STAMP_BYTES}"
                )
            }
            Self::Magic => write!(formatter, "payload is not a bps-bench stamp"),
            Self::NotABroadcast => write!(formatter, "frame is not a Broadcast with a chunk"),
        }
    }
}

impl std::error::Error for StampError {}

impl Stamp {
    /// The 32 bytes of the stamp.
    pub fn encode(&self) -> [u8; STAMP_BYTES] {
        let mut bytes = [0u8; STAMP_BYTES];
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[4..8].copy_from_slice(&self.publisher.to_le_bytes());
        bytes[8..16].copy_from_slice(&self.sequence.to_le_bytes());
        bytes[16..24].copy_from_slice(&self.intended_ns.to_le_bytes());
        bytes[24..28].copy_from_slice(&self.cohort.to_le_bytes());
        bytes
    }

    /// Reads the stamp at the front of `payload`.
    pub fn decode(payload: &[u8]) -> Result<Self, StampError> {
        let Some(bytes) = payload.first_chunk::<STAMP_BYTES>() else {
            return Err(StampError::Short {
                bytes: payload.len(),
            });
        };
        if bytes[..4] != MAGIC {
            return Err(StampError::Magic);
        }
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(word)
        };
        Ok(Self {
            publisher: u32_at(4),
            sequence: u64_at(8),
            intended_ns: u64_at(16),
            cohort: u32_at(24),
        })
    }
}

/// A payload of `size` bytes (at least [`STAMP_BYTES`]): the stamp, then a fixed filler.
pub fn payload(stamp: &Stamp, size: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(size.max(STAMP_BYTES));
    payload.extend_from_slice(&stamp.encode());
    // A filler that is not all zeros, so nothing on the path can shortcut it.
    payload.extend((STAMP_BYTES..size).map(|at| (at % 251) as u8));
    payload
}

/// The payload inside an encoded `Broadcast` body, found without decoding the message:
/// prost writes field 1 (the chunk) first, so the body is `0x0a ‖ varint(len) ‖ chunk ‖ ...`
/// and the payload starts 105 bytes into the chunk.
pub fn broadcast_payload(body: &[u8]) -> Result<&[u8], StampError> {
    let Some((&SOC_FIELD_KEY, rest)) = body.split_first() else {
        return Err(StampError::NotABroadcast);
    };
    let mut cursor = rest;
    let chunk_len =
        prost::encoding::decode_varint(&mut cursor).map_err(|_| StampError::NotABroadcast)?;
    let chunk_len = usize::try_from(chunk_len).map_err(|_| StampError::NotABroadcast)?;
    let chunk = cursor.get(..chunk_len).ok_or(StampError::NotABroadcast)?;
    chunk
        .get(SOC_HEADER_BYTES..)
        .ok_or(StampError::NotABroadcast)
}
