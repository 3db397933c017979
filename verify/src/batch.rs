//! Signatures of known keys, checked without recovering the key: one at a time, or a
//! whole batch, of one key or of many, with one multi-scalar multiplication
//! (ARCHITECTURE.md §3).
//!
//! Owns: [`KnownKey`] (a public key and its address), [`SignedDigest`] (a 65-byte
//! signature parsed with bee's rules), [`verify_with_key`], [`KeyedSignature`] (a
//! signature and the key it must recover to) and [`KnownKeysBatch`].
//!
//! Never: decides validity on its own. A `true` here means "recovery (bee's
//! `crypto.Recover`, our [`crate::recover_public_key_eth`]) would yield exactly this
//! key"; a `false` is only a hint, and the caller ([`crate::verifier`]) sends the chunk
//! through full recovery, whose outcome is then the answer. So the fast path can only
//! ever accept what bee accepts, and everything else gets bee's own error. Never picks
//! the keys either: the caller names, per signature, the key its owner must have (the
//! verifier takes it from its key cache, which only recovery fills).
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
//! A batch holds keys `Q_1 … Q_m` (each `≠ O`) and signatures `i = 1..n`; signature `i`
//! names the key `Q_k(i)` it must recover to ([`KeyedSignature`]). Let `R_i` be recovery's
//! nonce point (decoded from `r_i` and `v_i` as above; a batch with an `R_i` that does not
//! exist fails) and `E_i = (z_i·s_i⁻¹)·G + (r_i·s_i⁻¹)·Q_k(i) − R_i`, so `E_i = O` exactly
//! when signature `i` passes the single check against its own key. The batch draws
//! weights `a_i`, uniform in `[1, 2^128)`, from a CSPRNG (rand's `ThreadRng`: ChaCha12
//! seeded and reseeded from the OS) after the signatures and keys are fixed, and accepts
//! iff
//!
//! `(Σ_i a_i·z_i·s_i⁻¹)·G + Σ_k c_k·Q_k − Σ_i a_i·R_i = O`, where
//! `c_k = Σ_{i : k(i) = k} a_i·r_i·s_i⁻¹`.
//!
//! The left side is `Σ_i a_i·E_i`, only regrouped: each term `a_i·(r_i·s_i⁻¹)·Q_k(i)` is
//! collected into the scalar of its key. It is computed as one fixed-base multiplication
//! of `G` (k256's precomputed tables) plus one interleaved (Straus) multi-scalar
//! multiplication over the `Q_k` with their full 256-bit scalars and the `−R_i` with the
//! 128-bit weights, all sharing one chain of doublings. A key whose `c_k` is zero (no
//! signature names it, or its terms sum to 0 mod N) contributes `O` and is left out.
//!
//! Where the CPU has AVX-512 IFMA and the batch holds at least [`VECTOR_NONCES_MIN`]
//! signatures, the same sum is computed differently, not a different sum: the nonce points
//! are decompressed eight square roots at a time ([`crate::nonce`], every point checked by
//! k256, so they are exactly recovery's `R_i`), and the terms `a_i·(−R_i)` together with
//! every key term, split as `c_k·Q_k = c_low·Q_k + c_high·(2^128·Q_k)` (both halves below
//! 2^128, `2^128·Q_k` computed once when the key is cached), go through one eight-lane
//! multi-scalar multiplication ([`crate::msm_ifma`]); `G`'s term stays k256's. The split
//! is an identity of the group (`c = c_low + 2^128·c_high` as integers), and the vector
//! multiplication is tested equal to k256's on random and extreme inputs of every size, so
//! the left side and everything argued below are unchanged. A vector result that is not
//! on the curve makes the batch fail, which sends its signatures to the single checks.
//! - Valid batches always pass: every `E_i = O`.
//! - An invalid batch passes with probability at most `1/(2^128 − 1)`: secp256k1 has
//!   prime order N (cofactor 1), so `E_i = e_i·G` for some `e_i` mod N, and `e_i` depends
//!   only on signature `i` and the key it names, both fixed before the weights are drawn.
//!   The check is `Σ a_i·e_i ≡ 0 (mod N)`. If `e_j ≠ 0`, then for any fixed other
//!   weights this holds for at most one residue `a_j`; the weights are distinct below N,
//!   so at most one of the `2^128 − 1` equally likely values of `a_j` passes.
//! - Why random weights: with fixed weights (say all 1) the errors could be made to
//!   cancel. The attacker chooses `r`, `v` (so any point as `R_i`), `s` and, through the
//!   chunk's id, span and payload, the message `z`; two signatures with nonce points
//!   `R_1 + D` and `R_2 − D` would pass together although neither is valid. The weights
//!   are secret, fresh per batch and drawn after the chunks arrive, so nothing the attacker
//!   submits can depend on them, and every batch is an independent ≤ 2^-128 trial. (The
//!   arithmetic runs in variable time; timing could at most reveal the weights of a batch
//!   already decided, which the next batch does not reuse.)
//! - Why mixing keys gives an attacker nothing: the bound above assumes nothing about the
//!   keys and no hardness at all (no discrete logarithm), so it holds against an attacker
//!   who knows the secret of his own key A, any relation between A and another owner's
//!   key B (say A = t·B), or even B's secret. Knowing A's secret, he can give his own
//!   signatures any error he likes, for instance exactly `−e_j` for a forged signature
//!   `j` under B: under unit weights the two cancel. Here they are multiplied by
//!   independent secret weights, and `a_i·e_i + a_j·e_j ≡ 0` pins `a_j` to one residue.
//!   The key scalars `c_k` are derived from the weights too, but they are not free
//!   parameters: `c_k·Q_k` is exactly the sum of the weighted terms `a_i·(r_i·s_i⁻¹)·Q_k`
//!   of the signatures that name `Q_k`, so the left side is `Σ a_i·E_i` whatever the keys
//!   are, and the bound applies. The keys themselves are fixed points that no chunk
//!   supplies (the verifier takes them from its cache, which only recovery fills). And
//!   each signature is held to the key it names, not to some key of the batch: `e_i` is
//!   measured against `Q_k(i)`, so a signature valid for A but presented as B's has
//!   `e_i ≠ 0` and is caught like any other bad signature.
//! - Duplicates: a key listed twice (`Q_k = Q_l`, `k ≠ l`) adds `(c_k + c_l)·Q_k`, the
//!   same sum; a signature listed twice (a replayed chunk) has `e_i = e_j`, weighted by two
//!   independent weights, and the argument above fixes all weights but one: still at most
//!   `1/(2^128 − 1)`. Neither costs soundness; the verifier lists each owner's key once
//!   (distinct owners have distinct keys, since the owner is the key's hash).
//! - Why the recovery id: `r` fixes `x(R)` only modulo N and not the sign of `y`; using
//!   exactly the point `v` names makes each `E_i = O` equivalent to "recovery with this
//!   `v` yields `Q_k(i)`" (bee's rule: `R_i` is a curve point, so `T_i = R_i` is not the
//!   identity, has `x(T_i) = r_i + ⌊id_i / 2⌋·N` exactly and `y(T_i)` of parity
//!   `id_i & 1`), not to plain ECDSA validity, which would accept the flipped-v twin.
//! - What is checked before any arithmetic: `v` in 27..=34 and `r, s` in `[1, N-1]`
//!   ([`SignedDigest::parse`], with recovery's own errors), so every `s_i` is invertible
//!   and `r_i ≠ 0`; `R_i` must decompress.
//!
//! A failed batch tells the caller only that some signature is bad:
//! [`KnownKeysBatch::check_each`] then checks them one by one, each against its own key,
//! so a bad chunk, and only it, is rejected.

use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::Reduce;
use k256::elliptic_curve::point::AffineCoordinates;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, PublicKey, Scalar};
use rand::Rng;

use crate::double_mul::{Quarters, double_mul, scalar_quarters};
use crate::msm_ifma;
use crate::nonce::{NonceX, decompress_all};
use crate::signer::{
    CompressedKey, SignatureError, V_MAX, V_MIN, address_of, checked_scalar, compressed_key,
    eip191_hash,
};
use crate::wire::{Address, Hash};

/// The secp256k1 group order N, big-endian.
const ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

/// Width of the signed-digit windows in the multi-scalar multiplication: digits are odd
/// in `[-15, 15]`, each point needs a table of its 8 odd multiples. Measured here, 4 and 5
/// are within a few percent for 128-bit scalars; 5 needs fewer additions, and for the
/// 256-bit key scalars 5 is also the cheapest (table plus additions per key).
const WINDOW: usize = 5;
/// Fewest signatures whose terms go through the vector multi-scalar multiplication
/// ([`msm_ifma`]) where the CPU has IFMA. Estimated from the per-operation costs (issue 23
/// in docs/BENCHMARKS.md), not measured at each size: one slot of eight lanes costs
/// about 39 µs, the scalar Straus about 39 + 5.4·n µs, so the vector path would win from 2
/// on. Batches of 2 and 3 stay scalar anyway: they are rare under load (the pool batches
/// whatever waits), and so the scalar path, the only one on CPUs without IFMA, is still
/// exercised by the batch tests on CPUs that have it.
const VECTOR_NONCES_MIN: usize = 4;
/// Odd multiples `1·P, 3·P, …, 15·P` per point.
const TABLE_SIZE: usize = 1 << (WINDOW - 2);
/// Bits of a scalar below N (a weight uses the low 128).
const SCALAR_BITS: usize = 256;
/// Digit positions of a scalar in signed-digit form (one more than its bits, for the
/// final carry).
const DIGITS: usize = SCALAR_BITS + 1;

/// A public key whose owner is known, ready for checks without recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KnownKey {
    point: ProjectivePoint,
    /// `Q, 2^64·Q, 2^128·Q, 2^192·Q`, affine, for the vector paths: the batch check takes
    /// 128-bit weights (`c·Q = c_low·Q + c_high·(2^128·Q)`), the single check 64-bit ones
    /// ([`crate::double_mul`]). Only where the CPU runs them ([`msm_ifma::available`]);
    /// their cost is paid once per key, at the recovery that caches it (192 doublings and
    /// four inversions).
    quarters: Option<Quarters>,
    address: Address,
    compressed: CompressedKey,
}

impl KnownKey {
    /// The key and its Ethereum address.
    pub fn new(public_key: &PublicKey) -> Self {
        let point = ProjectivePoint::from(public_key);
        let quarters = Quarters::for_key(&point);
        Self {
            point,
            quarters,
            address: address_of(public_key),
            compressed: compressed_key(public_key),
        }
    }

    /// The key in SEC1 compressed form.
    pub fn compressed(&self) -> CompressedKey {
        self.compressed
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
}

/// Whether recovery of `signature` would yield exactly `key` (module docs: `T` must be the
/// nonce point `v` names). One double multiplication ([`double_mul`], on one slot of vector
/// lanes where the CPU has IFMA) and one inversion.
pub fn verify_with_key(key: &KnownKey, signature: &SignedDigest) -> bool {
    let Some(s_inv) = signature.s.invert_vartime().into_option() else {
        return false;
    };
    let candidate = double_mul(
        &(signature.z * s_inv),
        &(signature.r * s_inv),
        &key.point,
        key.quarters.as_ref(),
    );
    if candidate == ProjectivePoint::IDENTITY {
        return false;
    }
    let candidate = candidate.to_affine();
    signature.nonce_x() == Some(candidate.x())
        && bool::from(candidate.y_is_odd()) == signature.y_is_odd()
}

/// A signature and the key it must recover to: `key` indexes the key list handed to
/// [`KnownKeysBatch::check`] with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyedSignature {
    /// Index of the signer's key in the batch's key list.
    pub key: usize,
    pub signature: SignedDigest,
}

/// Reusable scratch space for checking batches of signatures of known keys, one key or
/// many (module docs).
#[derive(Debug, Default)]
pub struct KnownKeysBatch {
    prefix_products: Vec<Scalar>,
    inverses: Vec<Scalar>,
    weights: Vec<u128>,
    /// `c_k` of the module docs, one per key of the batch.
    key_scalars: Vec<Scalar>,
    /// The nonce points to decompress, one per signature.
    nonces: Vec<NonceX>,
    /// Recovery's nonce point of every signature.
    nonce_points: Vec<AffinePoint>,
    /// Odd multiples of every point of the multi-scalar multiplication: the negated nonce
    /// points, then the keys that take part.
    tables: Vec<[ProjectivePoint; TABLE_SIZE]>,
    /// Signed digits of each point's scalar, in the order of `tables`.
    digits: Vec<[i8; DIGITS]>,
    /// The points of the vector multi-scalar multiplication (where the CPU runs it): the
    /// negated nonce points, then both halves of each key that takes part.
    vector_points: Vec<AffinePoint>,
    /// Their 128-bit weights, in the same order.
    vector_weights: Vec<u128>,
}

impl KnownKeysBatch {
    /// Empty scratch; it grows to the largest batch seen and stays there.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether every signature would recover to the key it names in `keys`, up to a
    /// soundness error of at most 2^-128 per call (module docs). `true` for an empty
    /// batch. A `false` says only that at least one would not.
    ///
    /// # Panics
    /// If a signature names a key index outside `keys` (a caller bug).
    pub fn check(&mut self, keys: &[KnownKey], signatures: &[KeyedSignature]) -> bool {
        assert_names_keys(keys, signatures);
        if signatures.is_empty() {
            return true;
        }
        self.nonces.clear();
        for keyed in signatures {
            let Some(x) = keyed.signature.nonce_x() else {
                return false;
            };
            self.nonces.push(NonceX {
                x,
                y_is_odd: keyed.signature.y_is_odd(),
            });
        }
        if !decompress_all(&self.nonces, &mut self.nonce_points) {
            return false;
        }
        if !self.invert_all(signatures) {
            return false;
        }
        self.draw_weights(signatures.len());
        let generator_scalar = self.collect_scalars(keys.len(), signatures);
        let vector = msm_ifma::available() && signatures.len() >= VECTOR_NONCES_MIN;
        self.gather_terms(keys, vector);
        let mut sum = ProjectivePoint::mul_by_generator_vartime(&generator_scalar)
            + straus(&self.tables, &self.digits);
        if vector {
            // `None` only if a lane's result is off the curve (module docs of
            // `msm_ifma`): then the batch is not accepted and its signatures are checked
            // one by one, by k256.
            let Some(vector_sum) =
                msm_ifma::weighted_sum(&self.vector_points, &self.vector_weights)
            else {
                return false;
            };
            sum += vector_sum;
        }
        sum == ProjectivePoint::IDENTITY
    }

    /// Fills the terms of the multi-scalar multiplication besides `G`'s: the negated nonce
    /// points with the weights, and each key with a non-zero `c_k`. With `vector`, the
    /// nonces and the keys that have quarters go to the vector lists (a key as its two
    /// 128-bit halves, `Q` and `2^128·Q`), the rest to the Straus tables.
    fn gather_terms(&mut self, keys: &[KnownKey], vector: bool) {
        self.tables.clear();
        self.digits.clear();
        self.vector_points.clear();
        self.vector_weights.clear();
        // Negated, so that the weights themselves are the scalars of these points.
        if vector {
            self.vector_points
                .extend(self.nonce_points.iter().map(|nonce| -*nonce));
            self.vector_weights.extend_from_slice(&self.weights);
        } else {
            self.tables.extend(
                self.nonce_points
                    .iter()
                    .map(|nonce| odd_multiples(-ProjectivePoint::from(nonce))),
            );
            self.digits.extend(
                self.weights
                    .iter()
                    .map(|weight| signed_digits(&weight_limbs(*weight))),
            );
        }
        for (key, scalar) in keys.iter().zip(&self.key_scalars) {
            if *scalar == Scalar::ZERO {
                continue;
            }
            match key.quarters {
                Some(Quarters([low_point, _, high_point, _])) if vector => {
                    let [l0, l1, l2, l3] = scalar_quarters(scalar);
                    let low = u128::from(l0) | (u128::from(l1) << 64);
                    let high = u128::from(l2) | (u128::from(l3) << 64);
                    self.vector_points.extend([low_point, high_point]);
                    self.vector_weights.extend([low, high]);
                }
                _ => {
                    self.tables.push(odd_multiples(key.point));
                    self.digits.push(signed_digits(&scalar_quarters(scalar)));
                }
            }
        }
    }

    /// Checks the batch, and on failure each signature alone against its own key:
    /// `accepted[i]` is whether signature `i` would recover to the key it names (up to the
    /// batch's 2^-128 when the batch passed). Returns whether the batch check passed. A
    /// lone signature gets the single check, which is cheaper than a batch of one.
    ///
    /// # Panics
    /// If `accepted` and `signatures` differ in length or a signature names a key index
    /// outside `keys` (caller bugs).
    pub fn check_each(
        &mut self,
        keys: &[KnownKey],
        signatures: &[KeyedSignature],
        accepted: &mut [bool],
    ) -> bool {
        assert_eq!(
            signatures.len(),
            accepted.len(),
            "one verdict slot per signature"
        );
        assert_names_keys(keys, signatures);
        let single = |keyed: &KeyedSignature| verify_with_key(&keys[keyed.key], &keyed.signature);
        let passed = match signatures {
            [lone] => single(lone),
            _ => self.check(keys, signatures),
        };
        if passed {
            accepted.fill(true);
        } else {
            for (verdict, keyed) in accepted.iter_mut().zip(signatures) {
                *verdict = single(keyed);
            }
        }
        passed
    }

    /// Fills `self.weights` with `count` fresh weights, uniform in `[1, 2^128)`.
    fn draw_weights(&mut self, count: usize) {
        let mut rng = rand::rng();
        self.weights.clear();
        self.weights.extend((0..count).map(|_| {
            loop {
                let weight: u128 = rng.random();
                if weight != 0 {
                    break weight;
                }
            }
        }));
    }

    /// Fills `self.key_scalars` with `c_k` for each of `key_count` keys and returns the
    /// scalar of `G`, `Σ a_i·z_i·s_i⁻¹` (needs the weights and inverses).
    fn collect_scalars(&mut self, key_count: usize, signatures: &[KeyedSignature]) -> Scalar {
        self.key_scalars.clear();
        self.key_scalars.resize(key_count, Scalar::ZERO);
        let mut generator_scalar = Scalar::ZERO;
        for ((keyed, s_inv), weight) in signatures.iter().zip(&self.inverses).zip(&self.weights) {
            let weighted = Scalar::from(*weight) * s_inv;
            generator_scalar += keyed.signature.z * weighted;
            self.key_scalars[keyed.key] += keyed.signature.r * weighted;
        }
        generator_scalar
    }

    /// Fills `self.inverses` with `s_i⁻¹` for every signature, using one scalar
    /// inversion (Montgomery's trick). `false` only if some `s_i` is zero, which
    /// [`SignedDigest::parse`] excludes.
    fn invert_all(&mut self, signatures: &[KeyedSignature]) -> bool {
        self.prefix_products.clear();
        let mut product = Scalar::ONE;
        for keyed in signatures {
            self.prefix_products.push(product);
            product *= keyed.signature.s;
        }
        // `prefix_products[i]` is now `s_0 · … · s_(i-1)`.
        let Some(mut inverse) = product.invert_vartime().into_option() else {
            return false;
        };
        self.inverses.clear();
        self.inverses.resize(signatures.len(), Scalar::ZERO);
        for ((slot, before), keyed) in self
            .inverses
            .iter_mut()
            .zip(&self.prefix_products)
            .zip(signatures)
            .rev()
        {
            // `inverse` is `(s_0 · … · s_i)⁻¹` here.
            *slot = inverse * before;
            inverse *= keyed.signature.s;
        }
        true
    }
}

/// Asserts that every signature names a key of the batch.
fn assert_names_keys(keys: &[KnownKey], signatures: &[KeyedSignature]) {
    assert!(
        signatures.iter().all(|keyed| keyed.key < keys.len()),
        "a signature names a key outside the batch's {} keys",
        keys.len()
    );
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

/// A weight as little-endian 64-bit limbs.
fn weight_limbs(weight: u128) -> [u64; 4] {
    let [low, high] = [weight as u64, (weight >> 64) as u64];
    [low, high, 0, 0]
}

/// `value` in width-[`WINDOW`] non-adjacent form: `value = Σ digits[i]·2^i`, every
/// non-zero digit odd and in `[-15, 15]`, at least `WINDOW - 1` zeros after each.
fn signed_digits(value: &[u64; 4]) -> [i8; DIGITS] {
    const WIDTH: i32 = 1 << WINDOW;
    let mut digits = [0i8; DIGITS];
    let mut position = 0;
    let mut carry = 0;
    while position < DIGITS {
        let window = carry + window_bits(value, position);
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

/// Bits `position..position + WINDOW` of `value` as a number below 2^WINDOW (zeros above
/// bit 255).
fn window_bits(value: &[u64; 4], position: usize) -> i32 {
    let limb = position / 64;
    if limb >= value.len() {
        return 0;
    }
    let shift = position % 64;
    let mut bits = value[limb] >> shift;
    if shift + WINDOW > 64 && limb + 1 < value.len() {
        // The window straddles two limbs; `shift` is above 0 here.
        bits |= value[limb + 1] << (64 - shift);
    }
    // Below 2^WINDOW = 32 after the mask.
    (bits & ((1 << WINDOW) - 1)) as i32
}

/// `Σ digits_i · P_i` over the points whose odd multiples are `tables[i]`: one shared
/// chain of doublings (as long as the longest scalar), one addition per non-zero digit.
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

    /// `Σ digits[i]·2^i` mod N, asserting the non-adjacent form on the way.
    fn value_of(digits: &[i8; DIGITS]) -> Scalar {
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
        value
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
            let digits = signed_digits(&weight_limbs(weight));
            assert_eq!(value_of(&digits), Scalar::from(weight), "{weight:#x}");
            // A 128-bit value needs no digit above position 128.
            assert!(digits[129..].iter().all(|digit| *digit == 0), "{weight:#x}");
        }
    }

    #[test]
    fn signed_digits_represent_full_scalars() {
        let mut top_bit = [0u8; 32];
        top_bit[0] = 0x80;
        let mut one_per_limb = [0u8; 32];
        for at in [7usize, 15, 23, 31] {
            one_per_limb[at] = 1;
        }
        let mut scalars: Vec<Scalar> = [top_bit, one_per_limb]
            .into_iter()
            .map(|bytes| {
                Scalar::from_repr(FieldBytes::from(bytes))
                    .into_option()
                    .expect("below N")
            })
            .collect();
        scalars.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, -Scalar::from(2u64)]);
        scalars.extend((0..64).map(scalar_of));
        for scalar in scalars {
            // The digits of the limbs give back the scalar: the limbs are its value.
            let digits = signed_digits(&scalar_quarters(&scalar));
            assert_eq!(value_of(&digits), scalar, "{scalar:?}");
        }
    }

    #[test]
    fn window_bits_reads_across_limbs() {
        let limbs = [1u64 << 63, 0b1011, 0, 1 << 63];
        // Bit 63 of limb 0 and bits 0..4 of limb 1: 1 + 2·0b1011.
        assert_eq!(window_bits(&limbs, 63), 0b10111);
        assert_eq!(window_bits(&limbs, 64), 0b01011);
        assert_eq!(window_bits(&limbs, 255), 1);
        assert_eq!(window_bits(&limbs, 256), 0);
    }

    #[test]
    fn straus_matches_lincomb() {
        let points: Vec<ProjectivePoint> = (0..12)
            .map(|seed| ProjectivePoint::mul_by_generator(&scalar_of(seed)))
            .collect();
        // Weights, a 128-bit extreme, and full scalars (as the keys have).
        let mut scalars: Vec<Scalar> = (0..8).map(weight_of).map(Scalar::from).collect();
        scalars.extend([Scalar::from(u128::MAX), -Scalar::ONE]);
        scalars.extend((100..102).map(scalar_of));
        let tables: Vec<_> = points.iter().map(|point| odd_multiples(*point)).collect();
        let digits: Vec<_> = scalars
            .iter()
            .map(|scalar| signed_digits(&scalar_quarters(scalar)))
            .collect();
        let pairs: Vec<(ProjectivePoint, Scalar)> = points
            .iter()
            .copied()
            .zip(scalars.iter().copied())
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
