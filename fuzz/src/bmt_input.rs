//! The `keccak_bmt` target's input: a span, then data that is both a payload and a run of
//! 64-byte messages.
//!
//! Layout: `span (8) ‖ data`. The payload is the first 4096 bytes of `data`; the messages
//! are `data` cut to a whole number of 64-byte messages. Owns: parsing and encoding that
//! layout. Never: hashes.

use crate::keccak_reference::CHUNK_BYTES;
use crate::reader::Reader;

/// Bytes of one `hash_pairs` message.
pub const MESSAGE_BYTES: usize = 64;

/// One parsed `keccak_bmt` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BmtInput<'a> {
    /// The span, as the 8 bytes that precede a CAC payload.
    pub span: [u8; 8],
    /// At most 4096 bytes.
    pub payload: &'a [u8],
    /// A whole number of 64-byte messages.
    pub messages: &'a [u8],
}

impl<'a> BmtInput<'a> {
    /// Reads the layout; every byte string is an input.
    pub fn parse(input: &'a [u8]) -> Self {
        let mut reader = Reader::new(input);
        let span = reader.array();
        let data = reader.rest();
        Self {
            span,
            payload: &data[..data.len().min(CHUNK_BYTES)],
            messages: &data[..data.len() - data.len() % MESSAGE_BYTES],
        }
    }
}

/// The input bytes for a span and data.
pub fn encode(span: u64, data: &[u8]) -> Vec<u8> {
    let mut input = span.to_le_bytes().to_vec();
    input.extend_from_slice(data);
    input
}
