//! `Σ a_i·P_i` for affine points `P_i` and 128-bit weights `a_i`, eight points at a time in
//! the lanes of AVX-512 IFMA registers: the nonce and key terms of the batch check's
//! multi-scalar multiplication ([`crate::batch`]), and the single check's `u1·G + u2·Q` as
//! eight 64-bit quarters ([`crate::double_mul`]).
//!
//! Owns: [`available`] and [`weighted_sum`].
//!
//! Never: decides validity. It returns a point that [`crate::batch`] compares with the rest
//! of the batch equation, exactly as it would compare k256's result; its correctness is
//! that of the formulas below, tested against k256's `lincomb` on random points, weights,
//! every batch size and the identity (`verify/tests/msm_exactness.rs`). Each
//! lane's result must also lie on the curve (k256 checks it when converting back), or the
//! sum is refused and the batch falls back to the checks one by one, which are k256's.
//!
//! # Method
//! Lane `j` of slot `k` holds point `8k + j`; missing points (a batch not a multiple of 8)
//! get weight 0. Weights are recoded in signed radix 16 (33 digits in `[-8, 8]`), so every
//! lane of every slot adds one table entry per digit position: the lanes run in lockstep,
//! with no data-dependent branch. Per slot a table of `1·P … 8·P` (one doubling, six
//! additions); a digit selects its entry by lane masks and a negative one negates y. The
//! eight lane accumulators share the chain of doublings (128 for the largest weights, 64
//! for the single check's 64-bit ones: the chain starts at the highest non-zero digit of
//! any lane); at the end each is converted to an affine point with k256 (one inversion for
//! all eight) and they are summed with k256.
//!
//! The point formulas are the complete ones of Renes, Costello and Batina (2015, algorithms
//! 7 and 9 for `a = 0`, `3b = 21`), the same k256 uses: correct for every input pair,
//! the identity `(0 : 1 : 0)` and equal points included, as secp256k1 has prime order.

use k256::elliptic_curve::hazmat::FieldArithmetic;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, Secp256k1};

use crate::field_ifma::{self, LANES};

/// k256's field element (not exported under its own name; reached through the curve).
type FieldElement = <Secp256k1 as FieldArithmetic>::FieldElement;

/// Whether this CPU runs [`weighted_sum`] ([`field_ifma::available`]).
pub fn available() -> bool {
    field_ifma::available()
}

/// Signed radix-16 digits of a 128-bit weight: 32 nibbles and the final carry.
const DIGITS: usize = 33;

/// `Σ weights[i]·points[i]`, or `None` if this CPU lacks IFMA or a lane's result is not
/// on the curve (which the formulas exclude; module docs).
///
/// # Panics
/// If `points` and `weights` differ in length (a caller bug).
pub fn weighted_sum(points: &[AffinePoint], weights: &[u128]) -> Option<ProjectivePoint> {
    assert_eq!(points.len(), weights.len(), "one weight per point");
    if !available() || points.is_empty() {
        return (points.is_empty()).then_some(ProjectivePoint::IDENTITY);
    }
    let slots = points.len().div_ceil(LANES);
    let mut coordinates = Vec::with_capacity(slots);
    let mut digits = Vec::with_capacity(slots);
    for slot in 0..slots {
        let lanes: [(AffinePoint, u128); LANES] = std::array::from_fn(|lane| {
            let index = slot * LANES + lane;
            points
                .get(index)
                .map_or((points[0], 0), |point| (*point, weights[index]))
        });
        coordinates.push(lanes.map(|(point, _)| {
            [
                field_ifma::from_bytes(&point.x().into()),
                field_ifma::from_bytes(&point.y().into()),
            ]
        }));
        digits.push(lanes.map(|(_, weight)| radix16(weight)));
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `available()` held: the CPU has AVX-512F and AVX-512 IFMA, which is the
        // whole of `simd::sum_lanes`'s contract.
        let lanes = unsafe { simd::sum_lanes(&coordinates, &digits, significant(&digits)) };
        to_projective_sum(&lanes)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// `weight` as `Σ d_i·16^i` with every `d_i` in `[-8, 7]` but the last, the carry (0 or 1).
fn radix16(weight: u128) -> [i8; DIGITS] {
    let mut digits = [0i8; DIGITS];
    let mut carry = 0u8;
    for (position, digit) in digits.iter_mut().take(DIGITS - 1).enumerate() {
        // A nibble plus the carry: at most 16.
        let value = ((weight >> (4 * position)) & 0xf) as u8 + carry;
        if value >= 8 {
            *digit = value as i8 - 16;
            carry = 1;
        } else {
            *digit = value as i8;
            carry = 0;
        }
    }
    digits[DIGITS - 1] = carry as i8;
    digits
}

/// Digit positions up to the highest non-zero digit of any lane: above it every lane adds
/// the identity, so the chain starts there (64-bit weights need 17 positions, not 33).
fn significant(digits: &[[[i8; DIGITS]; LANES]]) -> usize {
    digits
        .iter()
        .flatten()
        .filter_map(|lane| lane.iter().rposition(|digit| *digit != 0))
        .max()
        .map_or(0, |top| top + 1)
}

/// Eight projective lane results `(X, Y, Z)` (52-bit limbs) summed with k256: each made
/// affine (one inversion for all, Montgomery's trick) and checked on the curve.
fn to_projective_sum(lanes: &[[[u64; 5]; 3]; LANES]) -> Option<ProjectivePoint> {
    let element = |limbs: &[u64; 5]| {
        FieldElement::from_bytes(&FieldBytes::from(field_ifma::to_bytes(limbs))).into_option()
    };
    let mut projective = Vec::with_capacity(LANES);
    for [x, y, z] in lanes {
        let z = element(z)?;
        if bool::from(z.normalizes_to_zero()) {
            // The identity: nothing to add.
            continue;
        }
        projective.push((element(x)?, element(y)?, z));
    }
    let mut prefix = Vec::with_capacity(projective.len());
    let mut product = FieldElement::ONE;
    for (_, _, z) in &projective {
        prefix.push(product);
        product *= z;
    }
    let mut inverse = product.invert().into_option()?;
    let mut sum = ProjectivePoint::IDENTITY;
    for ((x, y, z), before) in projective.iter().zip(&prefix).rev() {
        let z_inverse = inverse * before;
        inverse *= z;
        let affine = AffinePoint::from_coordinates(
            &(*x * z_inverse).normalize().to_bytes(),
            &(*y * z_inverse).normalize().to_bytes(),
        )
        .into_option()?;
        sum += affine;
    }
    Some(sum)
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi64_mask, _mm512_mask_mov_epi64, _mm512_set_epi64,
        _mm512_set1_epi64,
    };

    use super::DIGITS;
    use crate::field_ifma::LANES;
    use crate::field_ifma::simd::{Fe8, add, constant, load, mul_small, mul8, square, store, sub};

    /// `3·b` of the curve `y² = x³ + 7`.
    const B3: u64 = 21;
    /// Table entries per slot: `1·P … 8·P`.
    const ENTRIES: usize = 8;

    /// Eight points in projective coordinates `(X : Y : Z)`.
    #[derive(Clone, Copy)]
    struct Point8 {
        x: Fe8,
        y: Fe8,
        z: Fe8,
    }

    /// The lane sums of [`super::weighted_sum`]: `(X, Y, Z)` limbs per lane, from the digit
    /// positions below `positions` (the digits above must all be zero).
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512 IFMA.
    #[target_feature(enable = "avx512f,avx512ifma")]
    pub(super) unsafe fn sum_lanes(
        coordinates: &[[[[u64; 5]; 2]; LANES]],
        digits: &[[[i8; DIGITS]; LANES]],
        positions: usize,
    ) -> [[[u64; 5]; 3]; LANES] {
        let tables: Vec<[Point8; ENTRIES]> = coordinates.iter().map(|slot| table(slot)).collect();
        let mut sum = identity();
        for position in (0..positions).rev() {
            if position != positions - 1 {
                for _ in 0..4 {
                    sum = double(&sum);
                }
            }
            for (table, digits) in tables.iter().zip(digits) {
                let lane_digits = digits.map(|lane| lane[position]);
                sum = add_points(&sum, &select(table, &lane_digits));
            }
        }
        let [x, y, z] = [store(&sum.x), store(&sum.y), store(&sum.z)];
        std::array::from_fn(|lane| [x[lane], y[lane], z[lane]])
    }

    #[target_feature(enable = "avx512f,avx512ifma")]
    fn identity() -> Point8 {
        Point8 {
            x: constant(0),
            y: constant(1),
            z: constant(0),
        }
    }

    /// `[1·P, 2·P, …, 8·P]` of a slot's affine points.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn table(slot: &[[[u64; 5]; 2]; LANES]) -> [Point8; ENTRIES] {
        let base = Point8 {
            x: load(&slot.map(|[x, _]| x)),
            y: load(&slot.map(|[_, y]| y)),
            z: constant(1),
        };
        let mut entries = [base; ENTRIES];
        entries[1] = double(&base);
        for index in 2..ENTRIES {
            entries[index] = add_points(&entries[index - 1], &base);
        }
        entries
    }

    /// Per lane, the entry `|digit|·P` (the identity for 0), negated for a negative digit.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn select(table: &[Point8; ENTRIES], digits: &[i8; LANES]) -> Point8 {
        let magnitudes = lanes_of(&digits.map(|digit| i64::from(digit.unsigned_abs())));
        let mut chosen = identity();
        for (index, entry) in table.iter().enumerate() {
            let wanted = _mm512_set1_epi64(index as i64 + 1);
            let mask = _mm512_cmpeq_epi64_mask(magnitudes, wanted);
            chosen.x = blend(&chosen.x, &entry.x, mask);
            chosen.y = blend(&chosen.y, &entry.y, mask);
            chosen.z = blend(&chosen.z, &entry.z, mask);
        }
        let negative = digits.iter().enumerate().fold(0u8, |mask, (lane, digit)| {
            mask | (u8::from(*digit < 0) << lane)
        });
        let negated = sub(&constant(0), &chosen.y);
        chosen.y = blend(&chosen.y, &negated, negative);
        chosen
    }

    /// Eight 64-bit values as a register, lane `j` = `values[j]`.
    #[target_feature(enable = "avx512f")]
    fn lanes_of(values: &[i64; LANES]) -> __m512i {
        _mm512_set_epi64(
            values[7], values[6], values[5], values[4], values[3], values[2], values[1], values[0],
        )
    }

    /// `b` in the lanes of `mask`, `a` elsewhere.
    #[target_feature(enable = "avx512f")]
    fn blend(a: &Fe8, b: &Fe8, mask: u8) -> Fe8 {
        Fe8(std::array::from_fn(|k| {
            _mm512_mask_mov_epi64(a.0[k], mask, b.0[k])
        }))
    }

    /// `p + q`, complete (Renes–Costello–Batina algorithm 7, `a = 0`).
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn add_points(p: &Point8, q: &Point8) -> Point8 {
        let xx = mul8(&p.x, &q.x);
        let yy = mul8(&p.y, &q.y);
        let zz = mul8(&p.z, &q.z);
        let xy_pairs = sub(&mul8(&add(&p.x, &p.y), &add(&q.x, &q.y)), &add(&xx, &yy));
        let yz_pairs = sub(&mul8(&add(&p.y, &p.z), &add(&q.y, &q.z)), &add(&yy, &zz));
        let xz_pairs = sub(&mul8(&add(&p.x, &p.z), &add(&q.x, &q.z)), &add(&xx, &zz));
        let xx3 = mul_small(&xx, 3);
        let bzz3 = mul_small(&zz, B3);
        let yy_p_bzz3 = add(&yy, &bzz3);
        let yy_m_bzz3 = sub(&yy, &bzz3);
        let bxz3 = mul_small(&xz_pairs, B3);
        Point8 {
            x: sub(&mul8(&xy_pairs, &yy_m_bzz3), &mul8(&yz_pairs, &bxz3)),
            y: add(&mul8(&yy_m_bzz3, &yy_p_bzz3), &mul8(&bxz3, &xx3)),
            z: add(&mul8(&yy_p_bzz3, &yz_pairs), &mul8(&xx3, &xy_pairs)),
        }
    }

    /// `2·p`, complete (Renes–Costello–Batina algorithm 9, `a = 0`).
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn double(p: &Point8) -> Point8 {
        let yy = square(&p.y);
        let yy8 = mul_small(&yy, 8);
        let bzz3 = mul_small(&square(&p.z), B3);
        let yy_m_bzz9 = sub(&yy, &mul_small(&bzz3, 3));
        let yy_p_bzz3 = add(&yy, &bzz3);
        Point8 {
            x: mul_small(&mul8(&yy_m_bzz9, &mul8(&p.x, &p.y)), 2),
            y: add(&mul8(&yy_m_bzz9, &yy_p_bzz3), &mul8(&bzz3, &yy8)),
            z: mul8(&mul8(&p.y, &p.z), &yy8),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix16_digits_represent_the_weight() {
        for weight in [
            0u128,
            1,
            7,
            8,
            15,
            16,
            u128::MAX,
            1 << 127,
            0x8888_8888 << 64,
        ] {
            let digits = radix16(weight);
            let mut value: i128 = 0;
            for digit in digits.iter().rev() {
                assert!((-8..=8).contains(digit));
                value = value.wrapping_mul(16).wrapping_add(i128::from(*digit));
            }
            // Exact modulo 2^128 (the top carry shifts out of an i128).
            assert_eq!(value as u128, weight, "{weight:#x}");
        }
    }
}
