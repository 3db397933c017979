//! Unsigned LEB128 as protobuf defines it, bit by bit: the model the `frame_decoder` and
//! `roster` targets judge the frame length and the protobuf keys and lengths against.
//!
//! Owns: [`decode`] (what the front of a byte string holds) and [`encode`] (the minimal
//! encoding). Never: any protobuf semantics beyond the varint itself.

/// Longest varint of a u64: ten groups of seven bits.
pub const VARINT_BYTES_MAX: usize = 10;

/// What a byte string starts with, read as a varint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Varint {
    /// Every byte so far (fewer than ten) has its continuation bit set.
    Incomplete,
    /// The tenth byte still has its continuation bit set.
    TooLong,
    /// The tenth byte carries bits beyond the 64th.
    Overflow,
    /// A complete varint.
    Value {
        /// The number it encodes.
        value: u64,
        /// How many bytes it takes (a non-minimal encoding counts all of them).
        bytes: usize,
    },
}

/// Reads the varint at the front of `input`.
pub fn decode(input: &[u8]) -> Varint {
    let mut value: u64 = 0;
    for position in 0..VARINT_BYTES_MAX - 1 {
        let Some(&byte) = input.get(position) else {
            return Varint::Incomplete;
        };
        value += u64::from(byte & 0x7f) << (7 * position);
        if byte < 0x80 {
            return Varint::Value {
                value,
                bytes: position + 1,
            };
        }
    }
    match input.get(VARINT_BYTES_MAX - 1) {
        None => Varint::Incomplete,
        Some(&last) if last >= 0x80 => Varint::TooLong,
        // Only the lowest bit of the tenth group still fits in 64 bits.
        Some(&last) if last > 1 => Varint::Overflow,
        Some(&last) => Varint::Value {
            value: value + (u64::from(last) << 63),
            bytes: VARINT_BYTES_MAX,
        },
    }
}

/// The minimal varint of `value`.
pub fn encode(mut value: u64) -> Vec<u8> {
    let mut encoded = Vec::with_capacity(VARINT_BYTES_MAX);
    loop {
        let group = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            encoded.push(group);
            return encoded;
        }
        encoded.push(group | 0x80);
    }
}
