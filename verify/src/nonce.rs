//! The nonce points of a batch of signatures: each decompressed from its x coordinate and
//! y parity exactly as k256's `AffinePoint::decompress` does, eight square roots at a time
//! where the CPU has AVX-512 IFMA ([`crate::sqrt_ifma`]).
//!
//! Owns: [`NonceX`], [`decompress_all`] and the portable path it must equal,
//! [`decompress_portable`] (k256's decompression, one element at a time).
//!
//! Never: trusts the vector square root. The decompression of `(x, odd)` is the unique
//! curve point with that x coordinate and a y of that parity, or none (x at or above p, or
//! `x³ + 7` not a square). For each element the fast path takes the candidate root `y`,
//! picks `y` or `p − y` by the parity asked for, and hands both coordinates to k256's
//! `AffinePoint::from_coordinates`, which accepts only canonical coordinates on the curve.
//! If it accepts, the point has x and the parity asked for, and since the two points with
//! a given x have y and `p − y` (of different parity, p being odd and no point having
//! y = 0), it is exactly k256's decompression. If it refuses (no root exists, or the
//! candidate is wrong), the element goes through k256's own `decompress`, whose answer
//! is then the answer. So the result is k256's for every input and every CPU; the vector
//! path only changes how fast.

use k256::elliptic_curve::hazmat::FieldArithmetic;
use k256::elliptic_curve::point::{AffineCoordinates, DecompressPoint};
use k256::elliptic_curve::subtle::Choice;
use k256::{AffinePoint, FieldBytes, Secp256k1};

use crate::sqrt_ifma::{self, LANES};

/// k256's field element (not exported under its own name; reached through the curve).
type FieldElement = <Secp256k1 as FieldArithmetic>::FieldElement;

/// Fewest elements worth one vector call for a partial group: a call of one group of
/// eight costs about 6.7 µs, one of k256's square roots 4.4 µs (measured here, issue 23 in
/// docs/BENCHMARKS.md), so a lone element goes to k256 and two or more to the vector call.
const PARTIAL_GROUP_MIN: usize = 2;

/// A nonce point to decompress: its x coordinate (big-endian, possibly at or above p, which
/// has no point) and whether its y is odd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonceX {
    /// The x coordinate, big-endian.
    pub x: FieldBytes,
    /// Whether y is odd.
    pub y_is_odd: bool,
}

/// Decompresses every nonce into `points` (cleared first, one point per nonce in order).
/// `false` as soon as one has no point (then `points` is incomplete). Exactly k256's
/// decompression of each (module docs).
pub fn decompress_all(nonces: &[NonceX], points: &mut Vec<AffinePoint>) -> bool {
    points.clear();
    let vector = sqrt_ifma::available();
    for group in nonces.chunks(2 * LANES) {
        let decompressed = if !vector || group.len() < PARTIAL_GROUP_MIN {
            group.iter().all(|nonce| push_decompressed(nonce, points))
        } else if group.len() > LANES {
            decompress_groups::<2>(group, points)
        } else {
            decompress_groups::<1>(group, points)
        };
        if !decompressed {
            return false;
        }
    }
    true
}

/// The portable path: k256's decompression of one nonce (`None`: it has no point).
pub fn decompress_portable(nonce: &NonceX) -> Option<AffinePoint> {
    AffinePoint::decompress(&nonce.x, Choice::from(u8::from(nonce.y_is_odd))).into_option()
}

/// [`decompress_portable`] pushed onto `points`; `false` if the nonce has no point.
fn push_decompressed(nonce: &NonceX, points: &mut Vec<AffinePoint>) -> bool {
    decompress_portable(nonce)
        .map(|point| points.push(point))
        .is_some()
}

/// Up to `GROUPS ·` [`LANES`] nonces through one vector square root call (unused lanes
/// repeat the first nonce), each candidate checked by k256 (module docs).
fn decompress_groups<const GROUPS: usize>(
    nonces: &[NonceX],
    points: &mut Vec<AffinePoint>,
) -> bool {
    let mut inputs = [[[0u8; 32]; LANES]; GROUPS];
    for (input, nonce) in inputs.iter_mut().flatten().zip(nonces.iter().cycle()) {
        // x at or above p: no point, as k256's decompression says too.
        let Some(x) = FieldElement::from_bytes(&nonce.x).into_option() else {
            return false;
        };
        let alpha = (x.square() * x + FieldElement::from_u64(7)).normalize();
        *input = alpha.to_bytes().into();
    }
    let Some(roots) = sqrt_ifma::sqrt_groups(&inputs) else {
        return nonces.iter().all(|nonce| push_decompressed(nonce, points));
    };
    nonces
        .iter()
        .zip(roots.iter().flatten())
        .all(|(nonce, root)| match checked_point(nonce, root) {
            Some(point) => {
                points.push(point);
                true
            }
            None => push_decompressed(nonce, points),
        })
}

/// The point `(x, ±root)` with the parity `nonce` asks for, if k256 finds it on the curve.
fn checked_point(nonce: &NonceX, root: &[u8; 32]) -> Option<AffinePoint> {
    let root = FieldElement::from_bytes(&FieldBytes::from(*root)).into_option()?;
    let y = if bool::from(root.is_odd()) == nonce.y_is_odd {
        root
    } else {
        root.negate(1).normalize()
    };
    AffinePoint::from_coordinates(&nonce.x, &y.to_bytes()).into_option()
}
