//! The batch decompression of nonce points ([`decompress_all`], eight square roots at a
//! time with AVX-512 IFMA where the CPU has it) gives exactly k256's decompression
//! ([`decompress_portable`]) for every element: residues and non-residues, both parities,
//! x at or above p, every group size, on whichever path this CPU takes. And the vector
//! square root itself ([`sqrt_x8`]) equals k256's root wherever one exists, so the fast
//! path is really taken (a wrong candidate would only fall back to k256, silently slow).

use bps_proto::keccak256;
use bps_verify::nonce::{NonceX, decompress_all, decompress_portable};
use bps_verify::sqrt_ifma::{LANES, available, sqrt_groups, sqrt_x8};
use k256::elliptic_curve::hazmat::FieldArithmetic;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, Scalar, Secp256k1};

type FieldElement = <Secp256k1 as FieldArithmetic>::FieldElement;

/// p, big-endian.
fn modulus() -> [u8; 32] {
    let mut p = [0xffu8; 32];
    p[27] = 0xfe;
    p[30] = 0xfc;
    p[31] = 0x2f;
    p
}

/// Bytes from a seed: pseudo-random, with some seeds steered to the edges.
fn x_of(seed: u64) -> [u8; 32] {
    let mut x = keccak256(&seed.to_le_bytes());
    match seed % 16 {
        0 => x = [0; 32],
        1 => {
            x = modulus();
            x[31] -= 1 + (seed % 3) as u8;
        }
        2 => x = modulus(),
        3 => x = [0xff; 32],
        4 => x[..20].fill(0),
        _ => {}
    }
    x
}

/// Nonces whose x is an actual point's (so about every other one decompresses) or
/// arbitrary bytes, both parities.
fn nonces(count: u64, salt: u64) -> Vec<NonceX> {
    (0..count)
        .map(|index| {
            let seed = index * 7919 + salt;
            let x = if seed.is_multiple_of(3) {
                let scalar = Scalar::from(seed + 1);
                ProjectivePoint::mul_by_generator_vartime(&scalar)
                    .to_affine()
                    .x()
            } else {
                FieldBytes::from(x_of(seed))
            };
            NonceX {
                x,
                y_is_odd: !(seed / 5).is_multiple_of(2),
            }
        })
        .collect()
}

fn assert_matches_portable(nonces: &[NonceX]) {
    let mut points = Vec::new();
    let expected: Option<Vec<AffinePoint>> = nonces.iter().map(decompress_portable).collect();
    let decompressed = decompress_all(nonces, &mut points);
    assert_eq!(decompressed, expected.is_some(), "{nonces:?}");
    if let Some(expected) = expected {
        assert_eq!(points, expected);
    }
}

#[test]
fn batch_decompression_is_k256s_for_every_group_size() {
    for count in 0..=3 * LANES as u64 + 1 {
        for salt in 0..24 {
            assert_matches_portable(&nonces(count, salt * 1000 + count));
        }
    }
}

#[test]
fn batch_decompression_of_valid_points_returns_them() {
    // All on the curve: the batch passes only if every lane is right.
    let points: Vec<AffinePoint> = (1..=40u64)
        .map(|seed| {
            let scalar = Scalar::from(keccak256(&seed.to_be_bytes())[0] as u64 * 1_000_003 + seed);
            ProjectivePoint::mul_by_generator_vartime(&scalar).to_affine()
        })
        .collect();
    let nonces: Vec<NonceX> = points
        .iter()
        .map(|point| NonceX {
            x: point.x(),
            y_is_odd: bool::from(point.y_is_odd()),
        })
        .collect();
    let mut decompressed = Vec::new();
    assert!(decompress_all(&nonces, &mut decompressed));
    assert_eq!(decompressed, points);
}

#[test]
fn vector_square_root_is_k256s_root() {
    let Some(_) = sqrt_x8(&[[0; 32]; LANES]) else {
        assert!(!available(), "sqrt_x8 refuses only without IFMA");
        return;
    };
    assert!(available());
    let mut residues = 0;
    for round in 0..64u64 {
        let inputs: [[u8; 32]; LANES] = std::array::from_fn(|lane| {
            let seed = round * LANES as u64 + lane as u64;
            let mut x = x_of(seed);
            if x >= modulus() {
                // Canonical inputs only (what nonce decompression passes).
                x[0] = 0x7f;
            }
            x
        });
        let roots = sqrt_x8(&inputs).expect("IFMA present");
        // Two groups in one call: each group's roots as if alone.
        let mut reversed = inputs;
        reversed.reverse();
        let pair = sqrt_groups(&[reversed, inputs]).expect("IFMA present");
        let mut roots_reversed = roots;
        roots_reversed.reverse();
        assert_eq!(pair, [roots_reversed, roots]);
        for (input, root) in inputs.iter().zip(roots) {
            let element = FieldElement::from_bytes(&FieldBytes::from(*input))
                .into_option()
                .expect("canonical");
            let candidate = FieldElement::from_bytes(&FieldBytes::from(root))
                .into_option()
                .expect("canonical output");
            match element.sqrt().into_option() {
                Some(expected) => {
                    residues += 1;
                    assert_eq!(candidate.to_bytes(), expected.normalize().to_bytes());
                }
                None => assert!(
                    !bool::from((candidate.square() - element).normalizes_to_zero()),
                    "no root exists"
                ),
            }
        }
    }
    assert!(residues > 100, "a fair share of residues: {residues}");
}
