//! Field arithmetic mod p (secp256k1's base field) in eight lanes of AVX-512 IFMA
//! (52-bit multiply-add): one 512-bit register per limb, lane `j` of every register one
//! element.
//!
//! Owns: [`LANES`], [`available`], the limb conversions [`from_bytes`] / [`to_bytes`]
//! (canonical big-endian bytes to 52-bit limbs and back, fully reduced), and on x86_64
//! `simd::Fe8` with its operations (load, store, multiply, square, add, subtract, multiply
//! by a small constant).
//!
//! Never: decides anything. Its users ([`crate::sqrt_ifma`], [`crate::msm_ifma`]) have
//! every result they act on checked by k256 or tested against it (their module docs).
//!
//! # Arithmetic
//! An element is five limbs of 52 bits, `a = Σ a_k·2^(52k)` below 2^260 (weakly reduced:
//! congruent mod p, not necessarily below p). IFMA multiplies the low 52 bits of two lanes
//! and adds the low or high 52 bits of the 104-bit product to a 64-bit accumulator, so
//! every limb entering a multiplication must be below 2^52; every operation here returns
//! limbs below 2^52. A product has ten 52-bit columns; each column sums at most ten terms
//! below 2^52 (under 2^56, no overflow). After carrying, the columns 5..9 (weights
//! 2^260..2^468) fold down by `2^260 ≡ 2^4·(2^32 + 977) (mod p)`, a 37-bit constant, and two
//! more carry passes bring every limb below 2^52 again (argued at `simd::normalize`). A
//! difference adds 32·p limb by limb first (every limb of 32·p is at least 2^52, so no
//! limb goes negative). Only the conversion to bytes reduces fully below p ([`to_bytes`]).

/// Field elements per register: the 64-bit lanes of a 512-bit register.
pub const LANES: usize = 8;

/// Whether this CPU has AVX-512F and AVX-512 IFMA (detected once).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *DETECTED.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512ifma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// 2^52 − 1: one limb.
const LIMB_MASK: u64 = (1 << 52) - 1;
/// `2^256 mod p` = 2^32 + 977.
const TWO_256_MOD_P: u64 = 0x1_0000_03d1;

/// Canonical big-endian bytes as five 52-bit limbs, least significant first.
pub fn from_bytes(bytes: &[u8; 32]) -> [u64; 5] {
    let mut words = [0u64; 4];
    for (word, chunk) in words.iter_mut().zip(bytes.rchunks_exact(8)) {
        let mut be = [0u8; 8];
        be.copy_from_slice(chunk);
        *word = u64::from_be_bytes(be);
    }
    let [w0, w1, w2, w3] = words;
    [
        w0 & LIMB_MASK,
        ((w0 >> 52) | (w1 << 12)) & LIMB_MASK,
        ((w1 >> 40) | (w2 << 24)) & LIMB_MASK,
        ((w2 >> 28) | (w3 << 36)) & LIMB_MASK,
        w3 >> 16,
    ]
}

/// Five limbs (each below 2^52, value below 2^260) as the canonical big-endian bytes of
/// their value mod p.
pub fn to_bytes(limbs: &[u64; 5]) -> [u8; 32] {
    let [l0, l1, l2, l3, l4] = *limbs;
    let mut words = [
        l0 | (l1 << 52),
        (l1 >> 12) | (l2 << 40),
        (l2 >> 24) | (l3 << 28),
        (l3 >> 36) | (l4 << 16),
    ];
    // The value is `words + top·2^256` with `top` below 2^4; 2^256 ≡ 2^32 + 977.
    let top = l4 >> 48;
    let carry = add_small(&mut words, top * TWO_256_MOD_P);
    // A carry out means the sum wrapped past 2^256, so `words` is now below 2^41: adding
    // 2^256 mod p once more cannot carry again.
    add_small(&mut words, carry * TWO_256_MOD_P);
    // Now below 2^256; at or above p exactly when adding 2^256 − p carries out.
    let mut reduced = words;
    if add_small(&mut reduced, TWO_256_MOD_P) == 1 {
        words = reduced;
    }
    let mut bytes = [0u8; 32];
    for (chunk, word) in bytes.rchunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    bytes
}

/// `words += value` (little-endian 64-bit words); returns the carry out (0 or 1).
fn add_small(words: &mut [u64; 4], value: u64) -> u64 {
    let mut carry = u128::from(value);
    for word in words.iter_mut() {
        let sum = u128::from(*word) + carry;
        *word = sum as u64;
        carry = sum >> 64;
    }
    carry as u64
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod simd {
    use std::arch::x86_64::{
        __m512i, _mm512_add_epi64, _mm512_and_si512, _mm512_loadu_si512, _mm512_madd52hi_epu64,
        _mm512_madd52lo_epu64, _mm512_set1_epi64, _mm512_setzero_si512, _mm512_srli_epi64,
        _mm512_storeu_si512, _mm512_sub_epi64,
    };

    use super::{LANES, LIMB_MASK};

    /// `2^260 mod p` = 2^4·(2^32 + 977), below 2^37.
    const FOLD: u64 = 0x10_0000_3d10;
    /// p in 52-bit limbs: 2^256 − 2^32 − 977.
    const MODULUS_LIMBS: [u64; 5] = [
        0xf_fffe_ffff_fc2f,
        0xf_ffff_ffff_ffff,
        0xf_ffff_ffff_ffff,
        0xf_ffff_ffff_ffff,
        0xffff_ffff_ffff,
    ];

    /// Eight field elements, limb `k` of lane `j` in lane `j` of `self.0[k]`.
    #[derive(Clone, Copy)]
    pub(crate) struct Fe8(pub(crate) [__m512i; 5]);

    #[target_feature(enable = "avx512f")]
    pub(crate) fn load(limbs: &[[u64; 5]; LANES]) -> Fe8 {
        let mut fe = [_mm512_setzero_si512(); 5];
        for (index, slot) in fe.iter_mut().enumerate() {
            let column: [u64; LANES] = limbs.map(|lane| lane[index]);
            // SAFETY: `column` is a `[u64; 8]`, 64 readable bytes; the load is unaligned.
            *slot = unsafe { _mm512_loadu_si512(column.as_ptr().cast()) };
        }
        Fe8(fe)
    }

    #[target_feature(enable = "avx512f")]
    pub(crate) fn store(fe: &Fe8) -> [[u64; 5]; LANES] {
        let mut limbs = [[0u64; 5]; LANES];
        for (index, limb) in fe.0.iter().enumerate() {
            let mut column = [0u64; LANES];
            // SAFETY: `column` is a `[u64; 8]`, 64 writable bytes; the store is unaligned.
            unsafe { _mm512_storeu_si512(column.as_mut_ptr().cast(), *limb) };
            for (lane, value) in limbs.iter_mut().zip(column) {
                lane[index] = value;
            }
        }
        limbs
    }

    /// `a·b` (limbs below 2^52 in, below 2^52 out).
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn mul8(a: &Fe8, b: &Fe8) -> Fe8 {
        let mut columns = [_mm512_setzero_si512(); 10];
        for (i, a_limb) in a.0.iter().enumerate() {
            for (j, b_limb) in b.0.iter().enumerate() {
                columns[i + j] = _mm512_madd52lo_epu64(columns[i + j], *a_limb, *b_limb);
                columns[i + j + 1] = _mm512_madd52hi_epu64(columns[i + j + 1], *a_limb, *b_limb);
            }
        }
        reduce(columns)
    }

    /// `a²`: the cross products once, doubled, plus the squares of the limbs.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn square(a: &Fe8) -> Fe8 {
        let mut columns = [_mm512_setzero_si512(); 10];
        for i in 0..5 {
            for j in i + 1..5 {
                columns[i + j] = _mm512_madd52lo_epu64(columns[i + j], a.0[i], a.0[j]);
                columns[i + j + 1] = _mm512_madd52hi_epu64(columns[i + j + 1], a.0[i], a.0[j]);
            }
        }
        for column in &mut columns {
            *column = _mm512_add_epi64(*column, *column);
        }
        for i in 0..5 {
            columns[2 * i] = _mm512_madd52lo_epu64(columns[2 * i], a.0[i], a.0[i]);
            columns[2 * i + 1] = _mm512_madd52hi_epu64(columns[2 * i + 1], a.0[i], a.0[i]);
        }
        reduce(columns)
    }

    /// Ten product columns (each below 2^57) to five limbs below 2^52 of a congruent value
    /// below 2^260.
    ///
    /// 1. Carry through all ten columns: the product of two values below 2^260 is below
    ///    2^520 = 2^(52·10), so after carrying every column is a 52-bit limb and nothing is
    ///    left above column 9.
    /// 2. Fold columns 5..9 by `2^260 ≡ FOLD`: the low 52 bits of `c_k·FOLD` go to limb
    ///    `k − 5`, the high bits (below 2^37) to limb `k − 4`. Limbs are then below
    ///    2^52 + 2^52 + 2^37, and a sixth limb (weight 2^260) below 2^37.
    /// 3. Carry limbs 0..4 into the sixth (now below 2^38), fold it the same way (low part
    ///    below 2^52 into limb 0, high part below 2^23 into limb 1), carry 0..4 again. A
    ///    carry out of limb 4 (0 or 1) means limbs 2..4 wrapped to 0 and limb 1 is below
    ///    2^23 + 2; folding it adds FOLD to limb 0, and one carry into limb 1 keeps every
    ///    limb below 2^52.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn reduce(mut columns: [__m512i; 10]) -> Fe8 {
        let mask = _mm512_set1_epi64(LIMB_MASK as i64);
        let fold = _mm512_set1_epi64(FOLD as i64);
        for k in 0..9 {
            let carry = _mm512_srli_epi64::<52>(columns[k]);
            columns[k] = _mm512_and_si512(columns[k], mask);
            columns[k + 1] = _mm512_add_epi64(columns[k + 1], carry);
        }
        let mut limbs = [
            columns[0],
            columns[1],
            columns[2],
            columns[3],
            columns[4],
            _mm512_setzero_si512(),
        ];
        for k in 0..5 {
            limbs[k] = _mm512_madd52lo_epu64(limbs[k], columns[k + 5], fold);
            limbs[k + 1] = _mm512_madd52hi_epu64(limbs[k + 1], columns[k + 5], fold);
        }
        normalize(limbs)
    }

    /// Six limbs (0..4 below 2^58, the sixth, weight 2^260, below 2^51) to five limbs below
    /// 2^52 of a congruent value below 2^260: carry 0..4 into the sixth (then below 2^52),
    /// fold it by `2^260 ≡ FOLD` (low part below 2^52 into limb 0, high part below 2^37
    /// into limb 1), carry 0..4 again. A carry out of limb 4 (0 or 1) then means limbs 2..4
    /// wrapped to 0 and limb 1 is below 2^37 + 2; folding it adds FOLD to limb 0, and one
    /// carry into limb 1 keeps every limb below 2^52.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn normalize(mut limbs: [__m512i; 6]) -> Fe8 {
        let mask = _mm512_set1_epi64(LIMB_MASK as i64);
        let fold = _mm512_set1_epi64(FOLD as i64);
        carry_into_top(&mut limbs, mask);
        let top = limbs[5];
        limbs[0] = _mm512_madd52lo_epu64(limbs[0], top, fold);
        limbs[1] = _mm512_madd52hi_epu64(limbs[1], top, fold);
        limbs[5] = _mm512_setzero_si512();
        carry_into_top(&mut limbs, mask);
        // `limbs[5]` is 0 or 1 here; FOLD·1 has no high part.
        limbs[0] = _mm512_madd52lo_epu64(limbs[0], limbs[5], fold);
        let carry = _mm512_srli_epi64::<52>(limbs[0]);
        limbs[0] = _mm512_and_si512(limbs[0], mask);
        limbs[1] = _mm512_add_epi64(limbs[1], carry);
        Fe8([limbs[0], limbs[1], limbs[2], limbs[3], limbs[4]])
    }

    /// `a + b`.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn add(a: &Fe8, b: &Fe8) -> Fe8 {
        let mut limbs = [_mm512_setzero_si512(); 6];
        for (k, limb) in limbs.iter_mut().take(5).enumerate() {
            *limb = _mm512_add_epi64(a.0[k], b.0[k]);
        }
        normalize(limbs)
    }

    /// `a − b`, as `a + 32·p − b` limb by limb: every limb of 32·p is at least 2^52, above
    /// any limb of `b`, and the sums stay below 2^58.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn sub(a: &Fe8, b: &Fe8) -> Fe8 {
        let mut limbs = [_mm512_setzero_si512(); 6];
        for (k, limb) in limbs.iter_mut().take(5).enumerate() {
            let bias = _mm512_set1_epi64((32 * MODULUS_LIMBS[k]) as i64);
            *limb = _mm512_sub_epi64(_mm512_add_epi64(a.0[k], bias), b.0[k]);
        }
        normalize(limbs)
    }

    /// `a·c` for a constant `c` below 2^52.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(crate) fn mul_small(a: &Fe8, c: u64) -> Fe8 {
        let c = _mm512_set1_epi64(c as i64);
        let mut limbs = [_mm512_setzero_si512(); 6];
        for k in 0..5 {
            limbs[k] = _mm512_madd52lo_epu64(limbs[k], a.0[k], c);
            limbs[k + 1] = _mm512_madd52hi_epu64(limbs[k + 1], a.0[k], c);
        }
        normalize(limbs)
    }

    /// The same value `c` (below 2^52) in every lane, as an element.
    #[target_feature(enable = "avx512f")]
    pub(crate) fn constant(c: u64) -> Fe8 {
        let zero = _mm512_setzero_si512();
        Fe8([_mm512_set1_epi64(c as i64), zero, zero, zero, zero])
    }

    /// Carries limbs 0..4 upwards, the last carry into `limbs[5]`.
    #[target_feature(enable = "avx512f")]
    pub(crate) fn carry_into_top(limbs: &mut [__m512i; 6], mask: __m512i) {
        for k in 0..5 {
            let carry = _mm512_srli_epi64::<52>(limbs[k]);
            limbs[k] = _mm512_and_si512(limbs[k], mask);
            limbs[k + 1] = _mm512_add_epi64(limbs[k + 1], carry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// p, big-endian.
    fn modulus() -> [u8; 32] {
        let mut p = [0xffu8; 32];
        p[27] = 0xfe;
        p[30] = 0xfc;
        p[31] = 0x2f;
        p
    }

    #[test]
    fn limbs_round_trip_canonical_bytes() {
        let mut p_minus_one = modulus();
        p_minus_one[31] -= 1;
        for bytes in [[0u8; 32], [1u8; 32], [0x5au8; 32], p_minus_one] {
            let limbs = from_bytes(&bytes);
            assert!(limbs.iter().all(|limb| *limb <= LIMB_MASK));
            assert_eq!(to_bytes(&limbs), bytes);
        }
    }

    #[test]
    fn to_bytes_reduces_values_at_and_above_p() {
        assert_eq!(to_bytes(&from_bytes(&modulus())), [0u8; 32]);
        let mut p_plus_one = modulus();
        p_plus_one[31] += 1;
        let mut one = [0u8; 32];
        one[31] = 1;
        assert_eq!(to_bytes(&from_bytes(&p_plus_one)), one);
        // 2^260 − 1 (all limbs full) is 2^4·2^256 − 1 ≡ 16·(2^32 + 977) − 1.
        let full = [LIMB_MASK; 5];
        let expected = 16 * TWO_256_MOD_P - 1;
        let mut bytes = [0u8; 32];
        bytes[24..].copy_from_slice(&expected.to_be_bytes());
        assert_eq!(to_bytes(&full), bytes);
    }
}
