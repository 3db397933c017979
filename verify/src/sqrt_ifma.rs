//! Eight secp256k1 field square roots at once with AVX-512 IFMA (52-bit multiply-add).
//!
//! Owns: [`available`] (whether this CPU runs it) and [`sqrt_x8`] ([`sqrt_groups`] for
//! several groups of eight at once): for eight field
//! elements `a` (canonical big-endian bytes, below p), the canonical bytes of
//! `a^((p+1)/4) mod p`, the candidate square root k256's `FieldElement::sqrt` computes with
//! the same exponent and the same addition chain. Eight lanes of one 512-bit register each
//! hold one element, so one instruction stream runs eight exponentiations.
//!
//! Never: decides that a root exists or that a point is valid. Its output is only a
//! candidate: [`crate::nonce`] checks every one with k256 (the point must satisfy the curve
//! equation there) and takes k256's own decompression for any that fails. So a wrong value
//! from this file can cost speed, never exactness; the tests compare it with k256 on every
//! path this CPU has, so that it also costs no speed.
//!
//! The arithmetic (52-bit limbs, weakly reduced) is [`crate::field_ifma`]'s.
//!
//! Cost (measured here, AMD EPYC with IFMA): see docs/BENCHMARKS.md, issue 23.

use crate::field_ifma;
pub use crate::field_ifma::LANES;

/// Whether this CPU runs [`sqrt_x8`] ([`field_ifma::available`]).
pub fn available() -> bool {
    field_ifma::available()
}

/// `a^((p+1)/4) mod p` for each of the eight `inputs` (canonical big-endian bytes), as
/// canonical big-endian bytes; `None` if this CPU lacks IFMA ([`available`]). Inputs at or
/// above p are taken modulo 2^256 as they are and give some value; callers pass
/// canonical elements.
pub fn sqrt_x8(inputs: &[[u8; 32]; LANES]) -> Option<[[u8; 32]; LANES]> {
    sqrt_groups::<1>(&[*inputs]).map(|[roots]| roots)
}

/// [`sqrt_x8`] of `GROUPS` groups of eight in one call: their chains of squarings are
/// independent, so the CPU overlaps them (each squaring is one long dependency chain of
/// carries); two groups cost little more than one (measured here, docs/BENCHMARKS.md
/// issue 23).
pub fn sqrt_groups<const GROUPS: usize>(
    inputs: &[[[u8; 32]; LANES]; GROUPS],
) -> Option<[[[u8; 32]; LANES]; GROUPS]> {
    if !field_ifma::available() {
        return None;
    }
    let limbs = inputs.map(|group| group.map(|bytes| field_ifma::from_bytes(&bytes)));
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `available()` held: the CPU has AVX-512F and AVX-512 IFMA, which is the
        // whole of `simd::sqrt_lanes`'s contract.
        let roots = unsafe { simd::sqrt_lanes(&limbs) };
        Some(roots.map(|group| group.map(|root| field_ifma::to_bytes(&root))))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = limbs;
        None
    }
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use crate::field_ifma::LANES;
    use crate::field_ifma::simd::{Fe8, load, mul8, square, store};

    /// [`super::sqrt_x8`] on limbs, `GROUPS` groups of eight interleaved.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512 IFMA.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(super) unsafe fn sqrt_lanes<const GROUPS: usize>(
        limbs: &[[[u64; 5]; LANES]; GROUPS],
    ) -> [[[u64; 5]; LANES]; GROUPS] {
        let a = limbs.map(|group| load(&group));
        // (p+1)/4 in binary is 223 ones, a zero, 22 ones, four zeros, two ones, two zeros:
        // k256's chain, building 2^n − 1 powers for n in {2, 22, 223}.
        let x2 = mul(&pow2k(&a, 1), &a);
        let x3 = mul(&pow2k(&x2, 1), &a);
        let x6 = mul(&pow2k(&x3, 3), &x3);
        let x9 = mul(&pow2k(&x6, 3), &x3);
        let x11 = mul(&pow2k(&x9, 2), &x2);
        let x22 = mul(&pow2k(&x11, 11), &x11);
        let x44 = mul(&pow2k(&x22, 22), &x22);
        let x88 = mul(&pow2k(&x44, 44), &x44);
        let x176 = mul(&pow2k(&x88, 88), &x88);
        let x220 = mul(&pow2k(&x176, 44), &x44);
        let x223 = mul(&pow2k(&x220, 3), &x3);
        let root = pow2k(&mul(&pow2k(&mul(&pow2k(&x223, 23), &x22), 6), &x2), 2);
        root.map(|group| store(&group))
    }

    /// `a^(2^k)` for each group: `k` squarings, the groups' steps interleaved.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn pow2k<const GROUPS: usize>(a: &[Fe8; GROUPS], k: u32) -> [Fe8; GROUPS] {
        let mut value = *a;
        for _ in 0..k {
            for group in &mut value {
                *group = square(group);
            }
        }
        value
    }

    /// `a·b` for each group.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn mul<const GROUPS: usize>(a: &[Fe8; GROUPS], b: &[Fe8; GROUPS]) -> [Fe8; GROUPS] {
        std::array::from_fn(|group| mul8(&a[group], &b[group]))
    }
}
