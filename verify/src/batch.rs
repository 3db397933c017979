//! Signatures of one known key, checked without recovering the key: one at a time, or a
//! whole batch with one multi-scalar multiplication (ARCHITECTURE.md §3).
//!
//! Owns: [`KnownKey`] (a public key and its address), [`SignedDigest`] (a 65-byte
//! signature parsed with bee's rules), [`verify_with_key`] and [`SameKeyBatch`].
//!
//! Never: decides validity on its own. A `true` here means "recovery (bee's
//! `crypto.Recover`, our [`crate::recover_public_key_eth`]) would yield exactly this
//! key"; a `false` is only a hint, and the caller ([`crate::verifier`]) sends the chunk
//! through full recovery, whose outcome is then the answer. So the fast path can only
//! ever accept what bee accepts, and everything else gets bee's own error.
//!
//! # What recovery accepts, and the single check that is equivalent
//! For a signature `(r, s, v)` over the prehash `z` (EIP-191 of the digest, reduced mod N),
//! recovery requires `v` in 27..=34 and `r, s` in `[1, N-1]`, takes the recovery id
//! `id = (v - 27) & 3`, builds the nonce point `R` with `x(R) = r + ⌊id / 2⌋·N` (as an
//! integer, which must be below P) and `y(R)` of parity `id & 1`, and returns
//! `Q' = r⁻¹·(s·R − z·G)`, failing if `R` does not exist or `Q'` is the identity. (Our
//! recovery normalises high S to `(N − s, −R)`, which gives the same `Q'`.)
//!
//! For a known key `Q ≠ O`: `Q' = Q ⇔ s·R = z·G + r·Q ⇔ R = T` with
//! `T = (z·s⁻¹)·G + (r·s⁻¹)·Q`. Plain ECDSA verification only asks `x(T) ≡ r (mod N)`,
//! which also accepts `T = −R` and `x(T) = r + N`: it accepts the flipped-v twin
//! `(r, s, v ^ 1)` of a valid signature, from which bee recovers another key and rejects
//! the chunk. [`verify_with_key`] therefore requires what `v` demands: `T ≠ O`,
//! `x(T) = r + ⌊id / 2⌋·N` exactly, and `y(T)` of parity `id & 1`. Then the point that
//! recovery would use exists and equals `T`, so recovery yields `Q`; and conversely. High S
//! needs no special case: `(r, N − s, v ^ 1)` gives `−T` with the other parity, which is
//! what its `v` demands.
//!
//! Recovery yielding `Q` implies bee accepts (the owner is `address(Q)`). Bee could also
//! accept a `Q' ≠ Q` with the same 20-byte address (a keccak collision); such a chunk
//! fails here and is then accepted by full recovery, so even that case is exact.
//!
//! # The batch check, and why it is sound
//! For signatures `i = 1..n` of the same key, let `R_i` be recovery's nonce point (decoded
//! from `r_i` and `v_i` as above; a batch with an `R_i` that does not exist fails) and
//! `E_i = (z_i·s_i⁻¹)·G + (r_i·s_i⁻¹)·Q − R_i`, so `E_i = O` exactly when signature `i`
//! passes the single check. The batch draws weights `a_i`, uniform in `[1, 2^128)`, from
//! a CSPRNG (rand's `ThreadRng`: ChaCha12 seeded and reseeded from the OS) after the
//! signatures are fixed, and accepts iff
//!
//! `(Σ a_i·z_i·s_i⁻¹)·G + (Σ a_i·r_i·s_i⁻¹)·Q − Σ a_i·R_i = Σ a_i·E_i = O`,
//!
//! computed as one fixed-base-plus-`Q` double multiplication and one interleaved
//! (Straus) multi-scalar multiplication over the `R_i` with 128-bit scalars.
//! - Valid batches always pass: every `E_i = O`.
//! - An invalid batch passes with probability at most `1/(2^128 − 1)`: secp256k1 has
//!   prime order N (cofactor 1), so `E_i = e_i·G` for some `e_i` mod N. If `e_k ≠ 0`,
//!   then for any fixed other weights `Σ a_i·e_i ≡ 0 (mod N)` holds for at most one
//!   residue `a_k`; the weights are distinct below N, so at most one of the `2^128 − 1`
//!   equally likely values of `a_k` passes.
//! - Why random weights: with fixed weights (say all 1) the errors could be made to
//!   cancel. The attacker chooses `r`, `v` (so any point as `R_i`), `s` and, through the
//!   chunk's id, span and payload, the message `z`; two signatures with nonce points
//!   `R_1 + D` and `R_2 − D` would pass together although neither is valid. The weights
//!   are secret, fresh per batch and drawn after the chunks arrive, so nothing the attacker
//!   submits can depend on them, and every batch is an independent ≤ 2^-128 trial. (The
//!   arithmetic runs in variable time; timing could at most reveal the weights of a batch
//!   already decided, which the next batch does not reuse.)
//! - Why the recovery id: `r` fixes `x(R)` only modulo N and not the sign of `y`; using
//!   exactly the point `v` names makes each `E_i = O` equivalent to "recovery with this
//!   `v` yields `Q`" (bee's rule), not to plain ECDSA validity, which would accept the
//!   flipped-v twin.
//! - What is checked before any arithmetic: `v` in 27..=34 and `r, s` in `[1, N-1]`
//!   ([`SignedDigest::parse`], with recovery's own errors), so every `s_i` is invertible
//!   and `r_i ≠ 0`; `R_i` must decompress.
//!
//! A failed batch tells the caller only that some signature is bad:
//! [`SameKeyBatch::check_each`] then checks them one by one, so a bad chunk, and only it,
//! is rejected.

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::{MulByGeneratorVartime, Reduce};
use k256::elliptic_curve::point::{AffineCoordinates, DecompressPoint};
use k256::elliptic_curve::subtle::Choice;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, PublicKey, Scalar};
use rand::Rng;

use crate::signer::{SignatureError, V_MAX, V_MIN, address_of, checked_scalar, eip191_hash};
use crate::wire::{Address, Hash};

/// The secp256k1 group order N, big-endian.
const ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

/// Width of the signed-digit windows in the multi-scalar multiplication: digits are odd
/// in `[-15, 15]`, each point needs a table of its 8 odd multiples. Measured here, 4 and 5
/// are within a few percent for 128-bit scalars; 5 needs fewer additions.
const WINDOW: usize = 5;
/// Odd multiples `1·P, 3·P, …, 15·P` per point.
const TABLE_SIZE: usize = 1 << (WINDOW - 2);
/// Digit positions of a 128-bit scalar in signed-digit form (one more than its bits, for
/// the final carry).
const DIGITS: usize = 129;

/// A public key whose owner is known, ready for checks without recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKey {
    point: ProjectivePoint,
    address: Address,
}

impl KnownKey {
    /// The key and its Ethereum address.
    pub fn new(public_key: &PublicKey) -> Self {
        Self {
            point: ProjectivePoint::from(public_key),
            address: address_of(public_key),
        }
    }

    /// The owner address `keccak256(pubkey)[12..]`.
    pub fn address(&self) -> Address {
        self.address
    }
}

/// A signature over the EIP-191 hash of a 32-byte digest, parsed with bee's acceptance
/// rules (`v` in 27..=34, `r` and `s` in `[1, N-1]`, high S allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignedDigest {
    r: Scalar,
    s: Scalar,
    /// The EIP-191 prehash reduced mod N, as recovery uses it.
    z: Scalar,
    /// `(v - 27) & 3`: bit 0 is the nonce point's y parity, bit 1 means `x = r + N`.
    recovery_id: u8,
}

impl SignedDigest {
    /// Parses `signature` over `data` (before EIP-191). Fails exactly where
    /// [`crate::recover_public_key_eth`] fails before any curve arithmetic, with the same
    /// error.
    pub fn parse(signature: &[u8; 65], data: &Hash) -> Result<Self, SignatureError> {
        let v = signature[64];
        if !(V_MIN..=V_MAX).contains(&v) {
            return Err(SignatureError::RecoveryByte { v });
        }
        let r = checked_scalar("r", &signature[..32])?;
        let s = checked_scalar("s", &signature[32..64])?;
        let (Some(r), Some(s)) = (
            Scalar::from_repr(FieldBytes::from(r)).into_option(),
            Scalar::from_repr(FieldBytes::from(s)).into_option(),
        ) else {
            // `checked_scalar` accepted both, so both are below N.
            return Err(SignatureError::ScalarOutOfRange {
                component: "r",
                value: r,
            });
        };
        let z = <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(eip191_hash(data)));
        Ok(Self {
            r,
            s,
            z,
            recovery_id: (v - V_MIN) & 3,
        })
    }

    /// The x coordinate `v` names for the nonce point: `r`, or `r + N` for recovery ids 2
    /// and 3 (`None` if that does not fit 256 bits; at or above P no point has it either).
    fn nonce_x(&self) -> Option<FieldBytes> {
        let r = self.r.to_repr();
        if self.recovery_id & 2 == 0 {
            return Some(r);
        }
        let mut sum = [0u8; 32];
        let mut carry = 0u16;
        for ((out, r_byte), order_byte) in sum.iter_mut().zip(r.iter()).zip(ORDER).rev() {
            let total = u16::from(*r_byte) + u16::from(order_byte) + carry;
            *out = total.to_le_bytes()[0];
            carry = total >> 8;
        }
        (carry == 0).then(|| FieldBytes::from(sum))
    }

    fn y_is_odd(&self) -> bool {
        self.recovery_id & 1 == 1
    }

    /// Recovery's nonce point, if it exists.
    fn nonce_point(&self) -> Option<AffinePoint> {
        let x = self.nonce_x()?;
        AffinePoint::decompress(&x, Choice::from(u8::from(self.y_is_odd()))).into_option()
    }
}

/// Whether recovery of `signature` would yield exactly `key` (module docs: `T` must be the
/// nonce point `v` names). One double multiplication and one inversion.
pub fn verify_with_key(key: &KnownKey, signature: &SignedDigest) -> bool {
    let Some(s_inv) = signature.s.invert_vartime().into_option() else {
        return false;
    };
    let candidate = ProjectivePoint::mul_by_generator_and_mul_add_vartime(
        &(signature.z * s_inv),
        &(signature.r * s_inv),
        &key.point,
    );
    if candidate == ProjectivePoint::IDENTITY {
        return false;
    }
    let candidate = candidate.to_affine();
    signature.nonce_x() == Some(candidate.x())
        && bool::from(candidate.y_is_odd()) == signature.y_is_odd()
}

/// Reusable scratch space for checking batches of one key's signatures (module docs).
#[derive(Debug, Default)]
pub struct SameKeyBatch {
    prefix_products: Vec<Scalar>,
    inverses: Vec<Scalar>,
    weights: Vec<u128>,
    tables: Vec<[ProjectivePoint; TABLE_SIZE]>,
    digits: Vec<[i8; DIGITS]>,
}

impl SameKeyBatch {
    /// Empty scratch; it grows to the largest batch seen and stays there.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether every signature would recover to `key`, up to a soundness error of at most
    /// 2^-128 per call (module docs). `true` for an empty batch. A `false` says only that at
    /// least one would not.
    pub fn check(&mut self, key: &KnownKey, signatures: &[SignedDigest]) -> bool {
        if signatures.is_empty() {
            return true;
        }
        self.tables.clear();
        for signature in signatures {
            let Some(nonce) = signature.nonce_point() else {
                return false;
            };
            self.tables
                .push(odd_multiples(ProjectivePoint::from(nonce)));
        }
        if !self.invert_all(signatures) {
            return false;
        }
        let mut rng = rand::rng();
        self.weights.clear();
        self.weights.extend(signatures.iter().map(|_| {
            loop {
                let weight: u128 = rng.random();
                if weight != 0 {
                    break weight;
                }
            }
        }));
        let mut generator_scalar = Scalar::ZERO;
        let mut key_scalar = Scalar::ZERO;
        for ((signature, s_inv), weight) in signatures.iter().zip(&self.inverses).zip(&self.weights)
        {
            let weighted = Scalar::from(*weight) * s_inv;
            generator_scalar += signature.z * weighted;
            key_scalar += signature.r * weighted;
        }
        let expected = ProjectivePoint::mul_by_generator_and_mul_add_vartime(
            &generator_scalar,
            &key_scalar,
            &key.point,
        );
        self.digits.clear();
        self.digits
            .extend(self.weights.iter().map(|weight| signed_digits(*weight)));
        expected == straus(&self.tables, &self.digits)
    }

    /// Checks the batch, and on failure each signature alone: `accepted[i]` is whether
    /// signature `i` would recover to `key` (up to the batch's 2^-128 when the batch
    /// passed). Returns whether the batch check passed.
    ///
    /// # Panics
    /// If `accepted` and `signatures` differ in length (a caller bug).
    pub fn check_each(
        &mut self,
        key: &KnownKey,
        signatures: &[SignedDigest],
        accepted: &mut [bool],
    ) -> bool {
        assert_eq!(
            signatures.len(),
            accepted.len(),
            "one verdict slot per signature"
        );
        let passed = match signatures {
            [single] => verify_with_key(key, single),
            _ => self.check(key, signatures),
        };
        if passed {
            accepted.fill(true);
        } else {
            for (verdict, signature) in accepted.iter_mut().zip(signatures) {
                *verdict = verify_with_key(key, signature);
            }
        }
        passed
    }

    /// Fills `self.inverses` with `s_i⁻¹` for every signature, using one scalar
    /// inversion (Montgomery's trick). `false` only if some `s_i` is zero, which
    /// [`SignedDigest::parse`] excludes.
    fn invert_all(&mut self, signatures: &[SignedDigest]) -> bool {
        self.prefix_products.clear();
        let mut product = Scalar::ONE;
        for signature in signatures {
            self.prefix_products.push(product);
            product *= signature.s;
        }
        // `prefix_products[i]` is now `s_0 · … · s_(i-1)`.
        let Some(mut inverse) = product.invert_vartime().into_option() else {
            return false;
        };
        self.inverses.clear();
        self.inverses.resize(signatures.len(), Scalar::ZERO);
        for ((slot, before), signature) in self
            .inverses
            .iter_mut()
            .zip(&self.prefix_products)
            .zip(signatures)
            .rev()
        {
            // `inverse` is `(s_0 · … · s_i)⁻¹` here.
            *slot = inverse * before;
            inverse *= signature.s;
        }
        true
    }
}

/// `[P, 3P, 5P, …, 15P]`.
fn odd_multiples(point: ProjectivePoint) -> [ProjectivePoint; TABLE_SIZE] {
    let double = point.double();
    let mut table = [point; TABLE_SIZE];
    for index in 1..TABLE_SIZE {
        table[index] = table[index - 1] + double;
    }
    table
}

/// `weight` in width-[`WINDOW`] non-adjacent form: `weight = Σ digits[i]·2^i`, every
/// non-zero digit odd and in `[-15, 15]`, at least `WINDOW - 1` zeros after each.
fn signed_digits(weight: u128) -> [i8; DIGITS] {
    const WIDTH: i32 = 1 << WINDOW;
    let mut digits = [0i8; DIGITS];
    let mut position = 0;
    let mut carry = 0;
    while position < DIGITS {
        let window = carry + window_bits(weight, position);
        if window & 1 == 0 {
            // Digit 0 here. The carry stays: with carry 1 the bit was 1, so 1 + 1 carries.
            position += 1;
            continue;
        }
        let digit = if window < WIDTH / 2 {
            carry = 0;
            window
        } else {
            // Take the negative digit and owe 2^WINDOW to the position WINDOW higher.
            carry = 1;
            window - WIDTH
        };
        // An odd value in [-15, 15].
        digits[position] = digit as i8;
        position += WINDOW;
    }
    digits
}

/// Bits `position..position + WINDOW` of `weight` as a number below 2^WINDOW (zeros above
/// bit 127).
fn window_bits(weight: u128, position: usize) -> i32 {
    if position >= 128 {
        return 0;
    }
    // Below 2^WINDOW = 32 after the mask.
    ((weight >> position) & ((1 << WINDOW) - 1)) as i32
}

/// `Σ digits_i · P_i` over the points whose odd multiples are `tables[i]`: one shared
/// chain of doublings, one addition per non-zero digit.
fn straus(tables: &[[ProjectivePoint; TABLE_SIZE]], digits: &[[i8; DIGITS]]) -> ProjectivePoint {
    let top = digits
        .iter()
        .filter_map(|digits| digits.iter().rposition(|&digit| digit != 0))
        .max();
    let Some(top) = top else {
        return ProjectivePoint::IDENTITY;
    };
    let mut sum = ProjectivePoint::IDENTITY;
    for position in (0..=top).rev() {
        sum = sum.double();
        for (table, digits) in tables.iter().zip(digits) {
            let digit = digits[position];
            let entry = usize::from(digit.unsigned_abs() >> 1);
            if digit > 0 {
                sum += &table[entry];
            } else if digit < 0 {
                sum -= &table[entry];
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use k256::U256;
    use k256::elliptic_curve::ops::LinearCombination;

    fn scalar_of(seed: u64) -> Scalar {
        let bytes = crate::wire::keccak256(&seed.to_le_bytes());
        <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(bytes))
    }

    fn weight_of(seed: u64) -> u128 {
        let bytes = crate::wire::keccak256(&seed.to_be_bytes());
        let mut low = [0u8; 16];
        low.copy_from_slice(&bytes[..16]);
        u128::from_le_bytes(low)
    }

    #[test]
    fn order_constant_is_the_group_order() {
        assert!(
            Scalar::from_repr(FieldBytes::from(ORDER))
                .into_option()
                .is_none()
        );
        let mut below = ORDER;
        below[31] -= 1;
        assert_eq!(
            Scalar::from_repr(FieldBytes::from(below)).into_option(),
            Some(-Scalar::ONE)
        );
    }

    #[test]
    fn prehash_reduction_matches_the_integer_reduction_recovery_uses() {
        for bytes in [[0xffu8; 32], ORDER, [0u8; 32], [0x80; 32]] {
            assert_eq!(
                <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(bytes)),
                <Scalar as Reduce<U256>>::reduce(&U256::from_be_slice(&bytes))
            );
        }
    }

    #[test]
    fn signed_digits_represent_the_weight() {
        let weights = [
            0u128,
            1,
            15,
            16,
            17,
            31,
            u128::MAX,
            u128::MAX - 1,
            1 << 127,
            0x5555_5555_5555_5555_5555_5555_5555_5555,
            0xdead_beef_0123_4567_89ab_cdef_fedc_ba98,
        ];
        for weight in weights {
            let digits = signed_digits(weight);
            let mut value = Scalar::ZERO;
            let mut power = Scalar::ONE;
            let mut last_non_zero: Option<usize> = None;
            for (position, &digit) in digits.iter().enumerate() {
                if digit != 0 {
                    assert!(digit % 2 != 0 && (-15..=15).contains(&digit), "{digit}");
                    if let Some(last) = last_non_zero {
                        assert!(position - last >= WINDOW, "non-adjacent");
                    }
                    last_non_zero = Some(position);
                    let magnitude = Scalar::from(u64::from(digit.unsigned_abs()));
                    value += if digit > 0 { magnitude } else { -magnitude } * power;
                }
                power += power;
            }
            assert_eq!(value, Scalar::from(weight), "{weight:#x}");
        }
    }

    #[test]
    fn straus_matches_lincomb() {
        let points: Vec<ProjectivePoint> = (0..9)
            .map(|seed| ProjectivePoint::mul_by_generator(&scalar_of(seed)))
            .collect();
        let weights: Vec<u128> = (0..8).map(weight_of).chain([u128::MAX]).collect();
        let tables: Vec<_> = points.iter().map(|point| odd_multiples(*point)).collect();
        let digits: Vec<_> = weights
            .iter()
            .map(|weight| signed_digits(*weight))
            .collect();
        let pairs: Vec<(ProjectivePoint, Scalar)> = points
            .iter()
            .zip(&weights)
            .map(|(point, weight)| (*point, Scalar::from(*weight)))
            .collect();
        assert_eq!(
            straus(&tables, &digits),
            ProjectivePoint::lincomb(pairs.as_slice())
        );
        assert_eq!(straus(&[], &[]), ProjectivePoint::IDENTITY);
    }

    #[test]
    fn nonce_x_adds_the_order_for_ids_2_and_3() {
        let mut signature = [0u8; 65];
        signature[31] = 5;
        signature[63] = 1;
        signature[64] = 29;
        let parsed = SignedDigest::parse(&signature, &[0; 32]).expect("in range");
        let mut expected = ORDER;
        expected[31] += 5;
        assert_eq!(parsed.nonce_x(), Some(FieldBytes::from(expected)));
        // r close to N: r + N does not fit 256 bits.
        let mut high = [0u8; 65];
        high[..32].copy_from_slice(&ORDER);
        high[31] -= 1;
        high[63] = 1;
        high[64] = 30;
        let parsed = SignedDigest::parse(&high, &[0; 32]).expect("in range");
        assert_eq!(parsed.nonce_x(), None);
    }
}
