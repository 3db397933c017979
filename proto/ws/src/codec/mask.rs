//! Masking (RFC 6455 section 5.3): `byte[i] ^= key[i mod 4]`, its own inverse.
//!
//! Owns: [`apply_mask`], eight bytes at a time. Never: a mask offset across calls: the
//! decoder unmasks each frame's whole payload in one call, and every frame's masking starts
//! at key byte 0, so no state is carried.

/// Bytes XORed per step: one `u64`, which the compiler also widens into vector registers.
const WORD_BYTES: usize = 8;

/// XORs `data` with the repeated 4-byte `key` in place (masks and unmasks alike).
pub fn apply_mask(data: &mut [u8], key: [u8; 4]) {
    let [k0, k1, k2, k3] = key;
    // The key repeated twice is one word; native order on both sides keeps byte i under
    // key[i mod 4] whatever the endianness.
    let key_word = u64::from_ne_bytes([k0, k1, k2, k3, k0, k1, k2, k3]);
    let (words, tail) = data.as_chunks_mut::<WORD_BYTES>();
    for word in words {
        *word = (u64::from_ne_bytes(*word) ^ key_word).to_ne_bytes();
    }
    // The words covered a multiple of 4 bytes, so the tail starts at key byte 0.
    for (byte, key_byte) in tail.iter_mut().zip(key.iter().cycle()) {
        *byte ^= key_byte;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mask_byte_by_byte(data: &[u8], key: [u8; 4]) -> Vec<u8> {
        data.iter()
            .enumerate()
            .map(|(position, byte)| byte ^ key[position % 4])
            .collect()
    }

    #[test]
    fn matches_the_definition_for_every_length_and_alignment() {
        let key = [0x37, 0xfa, 0x21, 0x3d];
        let source: Vec<u8> = (0..=255u8).cycle().take(300).collect();
        for start in 0..8 {
            for length in 0..(source.len() - start) {
                let original = &source[start..start + length];
                let mut buffer = original.to_vec();
                apply_mask(&mut buffer, key);
                assert_eq!(buffer, mask_byte_by_byte(original, key), "{start}+{length}");
                apply_mask(&mut buffer, key);
                assert_eq!(buffer, original, "masking twice restores {start}+{length}");
            }
        }
    }

    #[test]
    fn rfc_6455_section_5_7_masked_hello() {
        let mut payload = *b"Hello";
        apply_mask(&mut payload, [0x37, 0xfa, 0x21, 0x3d]);
        assert_eq!(payload, [0x7f, 0x9f, 0x4d, 0x51, 0x58]);
    }
}
