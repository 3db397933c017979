//! The vector multi-scalar multiplication ([`weighted_sum`], AVX-512 IFMA) equals k256's
//! on every batch size, with random and extreme weights, repeated and opposite points and
//! sums that are the identity. Without IFMA it declines (`None`) and the batch check takes
//! k256's path, which the other tests cover.

use bps_proto::keccak256;
use bps_verify::msm_ifma::{available, weighted_sum};
use k256::{AffinePoint, ProjectivePoint, Scalar};

fn point(seed: u64) -> AffinePoint {
    let bytes = keccak256(&seed.to_le_bytes());
    let mut low = [0u8; 8];
    low.copy_from_slice(&bytes[..8]);
    ProjectivePoint::mul_by_generator(&Scalar::from(u64::from_le_bytes(low) | 1)).to_affine()
}

fn weight(seed: u64) -> u128 {
    match seed % 11 {
        0 => 0,
        1 => u128::MAX,
        2 => 1,
        3 => 1 << 127,
        _ => {
            let bytes = keccak256(&seed.to_be_bytes());
            let mut low = [0u8; 16];
            low.copy_from_slice(&bytes[..16]);
            u128::from_le_bytes(low)
        }
    }
}

fn reference(points: &[AffinePoint], weights: &[u128]) -> ProjectivePoint {
    points
        .iter()
        .zip(weights)
        .map(|(point, weight)| ProjectivePoint::from(*point) * Scalar::from(*weight))
        .sum()
}

#[test]
fn vector_sum_is_k256s_for_every_batch_size() {
    if !available() {
        assert_eq!(weighted_sum(&[point(1)], &[3]), None);
        return;
    }
    for count in (0..=20).chain([63, 64, 65]) {
        for salt in 0..3u64 {
            let points: Vec<AffinePoint> = (0..count).map(|i| point(i * 31 + salt)).collect();
            let weights: Vec<u128> = (0..count).map(|i| weight(i * 17 + salt * 5)).collect();
            assert_eq!(
                weighted_sum(&points, &weights),
                Some(reference(&points, &weights)),
                "{count} points, salt {salt}"
            );
        }
    }
}

#[test]
fn vector_sum_handles_repeats_opposites_and_the_identity() {
    if !available() {
        return;
    }
    let p = point(7);
    let minus_p = -p;
    // Equal points in one slot (the table's additions double), opposite ones cancelling.
    let points = vec![p, p, minus_p, p, minus_p, minus_p, p, p, p];
    let weights = vec![5u128, 5, 5, u128::MAX, u128::MAX, 1, 1, 0, 9];
    assert_eq!(
        weighted_sum(&points, &weights),
        Some(reference(&points, &weights))
    );
    let cancelling = vec![p, minus_p];
    let same = vec![0xdead_beef_u128 << 64, 0xdead_beef_u128 << 64];
    assert_eq!(
        weighted_sum(&cancelling, &same),
        Some(ProjectivePoint::IDENTITY)
    );
    assert_eq!(weighted_sum(&[], &[]), Some(ProjectivePoint::IDENTITY));
}
