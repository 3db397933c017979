//! Whole frames as bytes: small server frames, and masked client frames.
//!
//! Owns: [`encode_server_frame`] (a pong, a close, a challenge text: header and payload in
//! one `Vec`) and [`encode_client_frame`] (what a browser sends: masked, any opcode, FIN as
//! asked) for the load generator and tests. Never: a large server delivery: the carrier
//! writes a [`super::Head`] in front of the shared frame instead of copying it here.

use super::header::{FIN_BIT, Head, MASK_BIT, MASK_KEY_BYTES, unmasked_header};
use super::mask::apply_mask;
use super::opcode::Opcode;

/// One unfragmented, unmasked server frame carrying `payload`.
///
/// # Panics
/// A control opcode with more than 125 payload bytes (see [`Head::new`]).
pub fn encode_server_frame(opcode: Opcode, payload: &[u8]) -> Vec<u8> {
    let head = Head::new(opcode, payload.len());
    let mut frame = Vec::with_capacity(head.as_bytes().len() + payload.len());
    frame.extend_from_slice(head.as_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// One client frame: `opcode`, FIN iff `fin`, the minimal length, the masking key `mask`
/// and the masked payload. It encodes what it is asked, valid or not (a control frame over
/// 125 bytes, a fragmented ping), so tests and the load generator can build faulty frames.
pub fn encode_client_frame(opcode: Opcode, fin: bool, payload: &[u8], mask: [u8; 4]) -> Vec<u8> {
    let first_byte = if fin { FIN_BIT } else { 0 } | opcode.to_wire();
    let (header, used) = unmasked_header(first_byte, payload.len() as u64);
    let mut frame = Vec::with_capacity(used + MASK_KEY_BYTES + payload.len());
    frame.extend_from_slice(&header[..used]);
    frame[1] |= MASK_BIT;
    frame.extend_from_slice(&mask);
    let payload_start = frame.len();
    frame.extend_from_slice(payload);
    apply_mask(&mut frame[payload_start..], mask);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_6455_section_5_7_frames() {
        assert_eq!(
            encode_server_frame(Opcode::Text, b"Hello"),
            [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
        );
        assert_eq!(
            encode_client_frame(Opcode::Text, true, b"Hello", [0x37, 0xfa, 0x21, 0x3d]),
            [
                0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58
            ]
        );
        // The masked pong that answers the RFC's ping of "Hello".
        assert_eq!(
            encode_client_frame(Opcode::Pong, true, b"Hello", [0x37, 0xfa, 0x21, 0x3d]),
            [
                0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58
            ]
        );
        assert_eq!(
            encode_server_frame(Opcode::Ping, b"Hello"),
            [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f]
        );
    }

    #[test]
    fn client_frames_carry_fin_as_asked_and_long_lengths_masked() {
        let first = encode_client_frame(Opcode::Text, false, b"Hel", [0; 4]);
        assert_eq!(first, [0x01, 0x83, 0, 0, 0, 0, b'H', b'e', b'l']);
        let long = encode_client_frame(Opcode::Binary, true, &[0u8; 256], [1, 2, 3, 4]);
        assert_eq!(&long[..8], [0x82, 0xfe, 0x01, 0x00, 1, 2, 3, 4]);
        assert_eq!(&long[8..12], [1, 2, 3, 4], "zeros masked are the key");
        assert_eq!(long.len(), 8 + 256);
    }
}
