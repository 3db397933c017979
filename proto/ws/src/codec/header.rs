//! The frame header's layout (RFC 6455 section 5.2) and the server's inline [`Head`].
//!
//! Owns: the bits of the first two bytes, the three length encodings (7-bit, 16-bit after
//! 126, 64-bit after 127) and their minimal choice, and [`Head`], the at most 10 bytes a
//! server frame starts with. Never: payload bytes: the head is written in front of a payload
//! the caller keeps (a shared frame), so a delivery is never copied to be framed.

use super::opcode::{CONTROL_PAYLOAD_BYTES_MAX, Opcode};

/// First byte: the final fragment of a message.
pub(crate) const FIN_BIT: u8 = 0x80;
/// First byte: RSV1-3, meaningful only under a negotiated extension.
pub(crate) const RSV_BITS: u8 = 0x70;
/// First byte: the opcode.
pub(crate) const OPCODE_BITS: u8 = 0x0f;
/// Second byte: a masking key follows the length.
pub(crate) const MASK_BIT: u8 = 0x80;
/// Second byte: the 7-bit length or one of the two codes below.
pub(crate) const LENGTH_BITS: u8 = 0x7f;
/// 7-bit length code: a 16-bit big-endian length follows.
pub(crate) const LENGTH_16_CODE: u8 = 126;
/// 7-bit length code: a 64-bit big-endian length follows.
pub(crate) const LENGTH_64_CODE: u8 = 127;
/// Largest length the 7-bit field holds itself.
pub(crate) const LENGTH_7_MAX: u64 = 125;
/// Largest length the 16-bit field holds.
pub(crate) const LENGTH_16_MAX: u64 = 0xffff;
/// Bytes of the masking key.
pub(crate) const MASK_KEY_BYTES: usize = 4;
/// Longest unmasked header: 2 bytes and a 64-bit length.
const HEAD_BYTES_MAX: usize = 10;

/// An unmasked header: `[first byte, 7-bit length or code, extended length]`, minimal, and
/// how many of its bytes are used.
pub(crate) fn unmasked_header(first_byte: u8, payload_bytes: u64) -> ([u8; HEAD_BYTES_MAX], usize) {
    let mut bytes = [0u8; HEAD_BYTES_MAX];
    bytes[0] = first_byte;
    let used = if payload_bytes <= LENGTH_7_MAX {
        // The branch bounds the value to 7 bits.
        bytes[1] = payload_bytes as u8;
        2
    } else if payload_bytes <= LENGTH_16_MAX {
        bytes[1] = LENGTH_16_CODE;
        bytes[2..4].copy_from_slice(&(payload_bytes as u16).to_be_bytes());
        4
    } else {
        bytes[1] = LENGTH_64_CODE;
        bytes[2..10].copy_from_slice(&payload_bytes.to_be_bytes());
        10
    };
    (bytes, used)
}

/// The header of one server frame: FIN set, no RSV bits, unmasked, minimal length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    bytes: [u8; HEAD_BYTES_MAX],
    used: usize,
}

impl Head {
    /// The header of a whole message (or control frame) of `payload_bytes` bytes.
    ///
    /// # Panics
    /// A control opcode with more than 125 payload bytes: the caller's own payload, a bug.
    pub fn new(opcode: Opcode, payload_bytes: usize) -> Head {
        assert!(
            !opcode.is_control() || payload_bytes <= CONTROL_PAYLOAD_BYTES_MAX,
            "a {opcode} frame of {payload_bytes} bytes exceeds the control-frame bound"
        );
        let (bytes, used) = unmasked_header(FIN_BIT | opcode.to_wire(), payload_bytes as u64);
        Head { bytes, used }
    }

    /// The header's bytes, 2 to 10 of them.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.used]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_take_the_shortest_form_at_each_boundary() {
        let cases: [(usize, &[u8]); 7] = [
            (0, &[0x82, 0x00]),
            (125, &[0x82, 0x7d]),
            (126, &[0x82, 0x7e, 0x00, 0x7e]),
            (0xffff, &[0x82, 0x7e, 0xff, 0xff]),
            (0x1_0000, &[0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00]),
            (4251, &[0x82, 0x7e, 0x10, 0x9b]),
            (
                0x0123_4567_89ab,
                &[0x82, 0x7f, 0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab],
            ),
        ];
        for (payload_bytes, expected) in cases {
            assert_eq!(
                Head::new(Opcode::Binary, payload_bytes).as_bytes(),
                expected,
                "{payload_bytes}"
            );
        }
    }

    #[test]
    fn rfc_6455_section_5_7_headers() {
        // "Hello" as one unmasked text frame, a ping with "Hello", 256 and 65536 bytes of
        // binary in one frame.
        assert_eq!(Head::new(Opcode::Text, 5).as_bytes(), [0x81, 0x05]);
        assert_eq!(Head::new(Opcode::Ping, 5).as_bytes(), [0x89, 0x05]);
        assert_eq!(
            Head::new(Opcode::Binary, 256).as_bytes(),
            [0x82, 0x7e, 0x01, 0x00]
        );
        assert_eq!(
            Head::new(Opcode::Binary, 65536).as_bytes(),
            [0x82, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00]
        );
    }

    #[test]
    #[should_panic(expected = "exceeds the control-frame bound")]
    fn a_control_head_over_125_bytes_is_a_caller_bug() {
        let _ = Head::new(Opcode::Pong, 126);
    }
}
