//! `u1·G + u2·Q`, the double multiplication of the single check
//! ([`crate::batch::verify_with_key`]): k256's, or, where the CPU has AVX-512 IFMA, one
//! slot of the vector multi-scalar multiplication ([`crate::msm_ifma`]) over the quarters
//! of `G` and of the cached key.
//!
//! Owns: [`Quarters`] (a point's multiples `2^(64k)·P`, `k = 0..3`), the generator's, and
//! [`double_mul`].
//!
//! Never: decides validity; the caller compares the point with the nonce point `v` names,
//! exactly as it compares k256's.
//!
//! # Why quarters
//! k256's `mul_by_generator_and_mul_add_vartime` runs about 256 doublings and, for `Q`,
//! constant-time table lookups: 92–102 µs on the 2-vCPU Xeon of issue 23, where it was the
//! largest part of a lone chunk's verification. Written in 64-bit quarters,
//! `u·P = Σ_k u_k·(2^(64k)·P)` with `u = Σ_k u_k·2^(64k)` as integers, so the two 256-bit
//! products are a sum of eight points with 64-bit weights: exactly the eight lanes of one
//! slot, which share a chain of 64 doublings instead of 256. The split is an identity of
//! the group, and the vector multiplication is tested equal to k256's
//! (`verify/tests/msm_exactness.rs`, `verify/tests/signatures.rs`), so the point is the
//! same. A lane result off the curve (which the formulas exclude) makes [`double_mul`]
//! fall back to k256's, so the answer never depends on the vector code being right.
//!
//! The key's quarters cost 192 doublings and four inversions once, when recovery caches the
//! key; the generator's are computed once per process.

use std::sync::OnceLock;

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::MulByGeneratorVartime;
use k256::{AffinePoint, ProjectivePoint, Scalar};

use crate::msm_ifma;

/// Bits of a quarter of a scalar.
const QUARTER_BITS: usize = 64;

/// A point's multiples `P, 2^64·P, 2^128·P, 2^192·P`, affine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quarters(pub [AffinePoint; 4]);

impl Quarters {
    /// The quarters of `point`: 192 doublings and four inversions.
    pub fn of(point: &ProjectivePoint) -> Self {
        let mut multiple = *point;
        Self(std::array::from_fn(|quarter| {
            if quarter > 0 {
                for _ in 0..QUARTER_BITS {
                    multiple = multiple.double();
                }
            }
            multiple.to_affine()
        }))
    }

    /// The quarters of a cached key, where the CPU runs the vector path
    /// ([`msm_ifma::available`]); elsewhere nothing, so no key pays for them.
    pub fn for_key(point: &ProjectivePoint) -> Option<Self> {
        msm_ifma::available().then(|| Self::of(point))
    }

    /// The generator's, computed on first use.
    fn generator() -> &'static Self {
        static GENERATOR: OnceLock<Quarters> = OnceLock::new();
        GENERATOR.get_or_init(|| Self::of(&ProjectivePoint::GENERATOR))
    }
}

/// A scalar's four 64-bit quarters, least significant first.
pub fn scalar_quarters(scalar: &Scalar) -> [u64; 4] {
    let big_endian = scalar.to_repr();
    let mut quarters = [0u64; 4];
    for (quarter, word) in quarters.iter_mut().zip(big_endian.chunks_exact(8).rev()) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        *quarter = u64::from_be_bytes(bytes);
    }
    quarters
}

/// `u1·G + u2·Q`: with `q_quarters` (the CPU runs the vector path), one vector slot of the
/// eight quarters; otherwise, or if a lane's result is off the curve, k256's.
pub fn double_mul(
    u1: &Scalar,
    u2: &Scalar,
    q: &ProjectivePoint,
    q_quarters: Option<&Quarters>,
) -> ProjectivePoint {
    q_quarters
        .and_then(|quarters| vector_double_mul(u1, u2, quarters))
        .unwrap_or_else(|| ProjectivePoint::mul_by_generator_and_mul_add_vartime(u1, u2, q))
}

/// The vector path of [`double_mul`], `None` where it declines (module docs).
fn vector_double_mul(u1: &Scalar, u2: &Scalar, q_quarters: &Quarters) -> Option<ProjectivePoint> {
    let generator = Quarters::generator();
    let points: [AffinePoint; 8] =
        std::array::from_fn(|lane| [&generator.0, &q_quarters.0][lane / 4][lane % 4]);
    let (g_weights, q_weights) = (scalar_quarters(u1), scalar_quarters(u2));
    let weights: [u128; 8] =
        std::array::from_fn(|lane| u128::from([g_weights, q_weights][lane / 4][lane % 4]));
    msm_ifma::weighted_sum(&points, &weights)
}

#[cfg(test)]
mod tests {
    use super::{Quarters, double_mul, scalar_quarters};
    use bps_proto::keccak256;
    use k256::elliptic_curve::ops::{MulByGeneratorVartime, Reduce};
    use k256::{FieldBytes, ProjectivePoint, Scalar};

    /// A scalar spread over all 256 bits, from a seed.
    fn scalar(seed: u64) -> Scalar {
        <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(keccak256(&seed.to_le_bytes())))
    }

    fn two_to_the_64() -> Scalar {
        Scalar::from(1u64 << 32) * Scalar::from(1u64 << 32)
    }

    #[test]
    fn quarters_recompose_the_scalar() {
        for seed in 0..16 {
            let [q0, q1, q2, q3] = scalar_quarters(&scalar(seed));
            let two_64 = two_to_the_64();
            let recomposed = ((Scalar::from(q3) * two_64 + Scalar::from(q2)) * two_64
                + Scalar::from(q1))
                * two_64
                + Scalar::from(q0);
            assert_eq!(recomposed, scalar(seed));
        }
    }

    #[test]
    fn quarters_are_the_point_times_powers_of_two_to_the_64() {
        let point = ProjectivePoint::GENERATOR * scalar(1);
        let mut expected = point;
        for quarter in Quarters::of(&point).0 {
            assert_eq!(ProjectivePoint::from(quarter), expected);
            expected *= two_to_the_64();
        }
    }

    /// On a CPU with IFMA this is the vector path; elsewhere k256's on both sides.
    #[test]
    fn double_mul_equals_k256_on_spread_and_extreme_scalars() {
        let q = ProjectivePoint::GENERATOR * scalar(2);
        let quarters = Quarters::for_key(&q);
        let extremes = [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, two_to_the_64()];
        let mut pairs: Vec<(Scalar, Scalar)> = (0..64)
            .map(|seed| (scalar(seed), scalar(seed + 1000)))
            .collect();
        for a in extremes {
            for b in extremes {
                pairs.push((a, b));
            }
        }
        for (u1, u2) in pairs {
            let expected = ProjectivePoint::mul_by_generator_and_mul_add_vartime(&u1, &u2, &q);
            assert_eq!(double_mul(&u1, &u2, &q, quarters.as_ref()), expected);
        }
        // `secret·G − 1·Q` with `Q = secret·G`: the identity.
        let secret = scalar(3);
        let q = ProjectivePoint::GENERATOR * secret;
        let quarters = Quarters::for_key(&q);
        assert_eq!(
            double_mul(&secret, &-Scalar::ONE, &q, quarters.as_ref()),
            ProjectivePoint::IDENTITY
        );
    }
}
