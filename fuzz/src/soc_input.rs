//! The `soc` target's input: what the broker expects of a chunk, then the chunk.
//!
//! Layout: `binding selector (1) ‖ index (u64 LE) ‖ owner (20) ‖ address (32) ‖ chunk`.
//! The selector modulo 6 is 0 for "no implicit check" or a `TopicBinding` wire value
//! (1 ANCHOR, 2 SOC_ID, 3 OWNER, 4 FEED_TOPIC, 5 MNEMONIC, as in `bps.proto`); the address
//! doubles as the implicit cohort's topic. Owns: parsing and encoding that layout. Never:
//! looks at the chunk.

use bps_proto::Binding;

use crate::reader::Reader;

/// Selector values: "none" and the five bindings.
const SELECTOR_VALUES: u8 = 6;

/// One parsed `soc` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocInput<'a> {
    /// The implicit binding to check the chunk against, if any.
    pub binding: Option<Binding>,
    /// The frame index (read by FEED_TOPIC).
    pub index: u64,
    /// An expected owner (`Expect::At`).
    pub owner: [u8; 20],
    /// An expected SOC address, and the implicit topic.
    pub address: [u8; 32],
    /// The SOC bytes.
    pub chunk: &'a [u8],
}

impl<'a> SocInput<'a> {
    /// Reads the layout; every byte string is an input.
    pub fn parse(input: &'a [u8]) -> Self {
        let mut reader = Reader::new(input);
        let binding = match reader.byte() % SELECTOR_VALUES {
            1 => Some(Binding::Anchor),
            2 => Some(Binding::SocId),
            3 => Some(Binding::Owner),
            4 => Some(Binding::FeedTopic),
            5 => Some(Binding::Mnemonic),
            _ => None,
        };
        Self {
            binding,
            index: reader.u64_le(),
            owner: reader.array(),
            address: reader.array(),
            chunk: reader.rest(),
        }
    }
}

/// The input bytes for a selector, index, owner, address and chunk.
pub fn encode(
    selector: u8,
    index: u64,
    owner: &[u8; 20],
    address: &[u8; 32],
    chunk: &[u8],
) -> Vec<u8> {
    let mut input = vec![selector];
    input.extend_from_slice(&index.to_le_bytes());
    input.extend_from_slice(owner);
    input.extend_from_slice(address);
    input.extend_from_slice(chunk);
    input
}
