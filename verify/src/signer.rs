//! secp256k1 keys, EIP-191 signing and owner recovery, as bee's `pkg/crypto` does them
//! (docs/PROTOCOL.md §3 "Signing"/"Recovery", D9).
//!
//! Owns: [`SigningKey`], [`eip191_hash`], [`recover_eth`], [`address_of`].
//!
//! Never: hashes a message of a length other than 32 bytes (every BPS signature is over a
//! 32-byte digest, so the EIP-191 prefix is the constant [`EIP191_PREFIX`]), prints or
//! exposes secret key bytes in `Debug`, or panics on a peer's signature.
//!
//! Signature layout `r(32) ‖ s(32) ‖ v`:
//! - We emit `v = 27 + recovery id` (27/28; 29/30 only if `r` overflowed the order, which
//!   happens with probability about 2^-128), RFC 6979 deterministic nonces and low S,
//!   which is what bee's btcec `SignCompact` produces.
//! - We accept what bee's `RecoverCompact` accepts: `v` in 27..=34 with recovery id
//!   `(v - 27) & 3` (31..=34 are btcec's "compressed key" flag, irrelevant to the owner),
//!   `r` and `s` in `[1, N-1]`, and **high S** (bee does not enforce low S). A high-S
//!   signature is normalised here to `(r, N - s)` with the recovery id's y-parity bit
//!   flipped, which recovers the same key; so the outcome does not depend on whether the
//!   ECDSA library accepts high S.
//! - Recovery ids 2 and 3 mean the nonce point's x was `r + N`; that needs `r + N < P`
//!   and otherwise fails, as in btcec.

use core::fmt;

use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use k256::elliptic_curve::sec1::ToSec1Point;
use k256::{FieldBytes, NonZeroScalar, PublicKey};

use crate::hexfmt::Hex;
use crate::wire::{Address, Hash, keccak256};

/// EIP-191 "personal message" prefix for a 32-byte message, as bee's `Signer.Sign` builds
/// it (`"\x19Ethereum Signed Message:\n" ‖ decimal length`).
pub const EIP191_PREFIX: &[u8] = b"\x19Ethereum Signed Message:\n32";

/// Lowest `v` bee accepts: 27 + recovery id 0.
pub(crate) const V_MIN: u8 = 27;
/// Highest `v` bee accepts: 27 + 4 ("compressed") + recovery id 3.
pub(crate) const V_MAX: u8 = 34;

/// `keccak256(EIP191_PREFIX ‖ data)`: the prehash that is actually signed.
pub fn eip191_hash(data: &Hash) -> Hash {
    let mut message = [0u8; EIP191_PREFIX.len() + 32];
    message[..EIP191_PREFIX.len()].copy_from_slice(EIP191_PREFIX);
    message[EIP191_PREFIX.len()..].copy_from_slice(data);
    keccak256(&message)
}

/// A public key in SEC1 compressed form (parity byte ‖ x), as bee's
/// `crypto.EncodeSecp256k1PublicKey` writes it; what a bridge subscriber asks for as
/// `recoveredPubKey` (docs/PROTOCOL.md W6).
pub type CompressedKey = [u8; COMPRESSED_KEY_SIZE];

/// Bytes of a [`CompressedKey`].
pub const COMPRESSED_KEY_SIZE: usize = 33;

/// The SEC1 compressed encoding of a public key.
pub fn compressed_key(public_key: &PublicKey) -> CompressedKey {
    let point = public_key.to_sec1_point(true);
    let mut compressed = [0u8; COMPRESSED_KEY_SIZE];
    compressed.copy_from_slice(point.as_bytes());
    compressed
}

/// The Ethereum address of a public key: the last 20 bytes of
/// `keccak256(uncompressed_point[1..65])`.
pub fn address_of(public_key: &PublicKey) -> Address {
    let point = public_key.to_sec1_point(false);
    let uncompressed = point.as_bytes();
    let digest = keccak256(uncompressed.get(1..).unwrap_or_default());
    let mut address = [0u8; 20];
    address.copy_from_slice(&digest[12..]);
    address
}

/// Why 32 bytes are not a usable secret key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// All zero.
    Zero,
    /// Not below the curve order N.
    OutOfRange,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Zero => f.write_str("secp256k1 secret key is zero"),
            Self::OutOfRange => f.write_str("secp256k1 secret key is not below the curve order"),
        }
    }
}

impl std::error::Error for KeyError {}

/// Why a 65-byte signature does not yield an owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// `v` outside 27..=34.
    RecoveryByte { v: u8 },
    /// `r` (`component == "r"`) or `s` is zero or not below the curve order.
    ScalarOutOfRange {
        component: &'static str,
        value: [u8; 32],
    },
    /// No public key: the nonce point does not exist for this `r` and recovery id (x not
    /// on the curve, or `r + N` not below P for ids 2/3), or recovery gave the identity.
    NoPublicKey { v: u8 },
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::RecoveryByte { v } => {
                write!(f, "signature v = {v} is outside {V_MIN}..={V_MAX}")
            }
            Self::ScalarOutOfRange { component, value } => write!(
                f,
                "signature {component} = {} is not in [1, N-1]",
                Hex(value)
            ),
            Self::NoPublicKey { v } => write!(
                f,
                "signature with v = {v} recovers no public key (no curve point for r)"
            ),
        }
    }
}

impl std::error::Error for SignatureError {}

/// A secp256k1 secret key with its Ethereum address cached.
#[derive(Clone)]
pub struct SigningKey {
    inner: k256::ecdsa::SigningKey,
    address: Address,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        write!(f, "SigningKey {{ address: 0x{} }}", Hex(&self.address))
    }
}

impl SigningKey {
    /// A key from its 32 big-endian bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, KeyError> {
        if bytes.iter().all(|&byte| byte == 0) {
            return Err(KeyError::Zero);
        }
        let inner = k256::ecdsa::SigningKey::from_bytes(&FieldBytes::from(*bytes))
            .map_err(|_| KeyError::OutOfRange)?;
        let address = address_of(&PublicKey::from(inner.verifying_key()));
        Ok(Self { inner, address })
    }

    /// A fresh key from the thread CSPRNG (rand's `ThreadRng`, seeded from the OS).
    pub fn random() -> Self {
        loop {
            // A uniformly random 256-bit value is out of range with probability ~2^-128.
            let bytes: [u8; 32] = rand::random();
            if let Ok(key) = Self::from_bytes(&bytes) {
                return key;
            }
        }
    }

    /// The secret's 32 big-endian bytes (for key files; handle with care).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.inner.to_bytes().into()
    }

    /// The owner address: `keccak256(pubkey)[12..]`.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey::from(self.inner.verifying_key())
    }

    /// EIP-191 signature over a 32-byte `data` (bee `Signer.Sign`): `r ‖ s ‖ v`, RFC 6979
    /// nonce, low S, `v = 27 + recovery id`.
    pub fn sign_eth(&self, data: &Hash) -> [u8; 65] {
        let prehash = eip191_hash(data);
        let (signature, recovery_id) = self.inner.sign_prehash_recoverable(&prehash);
        let mut out = [0u8; 65];
        out[..64].copy_from_slice(&signature.to_bytes());
        out[64] = V_MIN + recovery_id.to_byte();
        out
    }
}

/// `bytes` as a big-endian scalar in [1, N-1], or the error naming `component`.
pub(crate) fn checked_scalar(
    component: &'static str,
    bytes: &[u8],
) -> Result<[u8; 32], SignatureError> {
    let mut value = [0u8; 32];
    value.copy_from_slice(bytes);
    if NonZeroScalar::from_repr(FieldBytes::from(value))
        .is_some()
        .into()
    {
        Ok(value)
    } else {
        Err(SignatureError::ScalarOutOfRange { component, value })
    }
}

/// The public key that made `signature` over the EIP-191 hash of `data` (bee
/// `crypto.Recover`), with bee's acceptance rules (module docs).
pub fn recover_public_key_eth(
    signature: &[u8; 65],
    data: &Hash,
) -> Result<PublicKey, SignatureError> {
    let v = signature[64];
    if !(V_MIN..=V_MAX).contains(&v) {
        return Err(SignatureError::RecoveryByte { v });
    }
    let r = checked_scalar("r", &signature[..32])?;
    let s = checked_scalar("s", &signature[32..64])?;
    // Both are in [1, N-1] now, which is all `from_scalars` checks.
    let parsed = Signature::from_scalars(r, s).map_err(|_| SignatureError::ScalarOutOfRange {
        component: "r",
        value: r,
    })?;
    let mut recovery_byte = (v - V_MIN) & 3;
    let normalized = parsed.normalize_s();
    if normalized != parsed {
        // (r, s) and (r, N - s) verify under the same key with nonce points R and -R,
        // which differ only in the parity of y.
        recovery_byte ^= 1;
    }
    let recovery_id =
        RecoveryId::from_byte(recovery_byte).ok_or(SignatureError::RecoveryByte { v })?;
    let verifying_key =
        VerifyingKey::recover_from_prehash(&eip191_hash(data), &normalized, recovery_id)
            .map_err(|_| SignatureError::NoPublicKey { v })?;
    Ok(PublicKey::from(&verifying_key))
}

/// The owner address that made `signature` over the EIP-191 hash of `data`.
pub fn recover_eth(signature: &[u8; 65], data: &Hash) -> Result<Address, SignatureError> {
    recover_public_key_eth(signature, data).map(|key| address_of(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_keys() {
        assert_eq!(
            SigningKey::from_bytes(&[0u8; 32]).err(),
            Some(KeyError::Zero)
        );
        assert_eq!(
            SigningKey::from_bytes(&[0xff; 32]).err(),
            Some(KeyError::OutOfRange)
        );
    }

    #[test]
    fn compressed_key_of_one_is_the_generator() {
        let mut one = [0u8; 32];
        one[31] = 1;
        let key = SigningKey::from_bytes(&one).expect("valid key");
        // secp256k1's generator G in SEC1 compressed form (SEC 2, section 2.4.1).
        let generator = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";
        assert_eq!(
            format!("{}", Hex(&compressed_key(&key.public_key()))),
            generator
        );
    }

    #[test]
    fn debug_hides_secret() {
        let key = SigningKey::from_bytes(&[0x11; 32]).expect("valid key");
        let shown = format!("{key:?}");
        assert!(!shown.contains("1111111111"), "{shown}");
        assert!(shown.contains(&format!("{}", Hex(&key.address()))));
    }

    #[test]
    fn round_trip_and_bad_v() {
        let key = SigningKey::random();
        let data = keccak256(b"data");
        let mut signature = key.sign_eth(&data);
        assert!(matches!(signature[64], 27 | 28));
        assert_eq!(recover_eth(&signature, &data), Ok(key.address()));
        for v in [0u8, 1, 26, 35, 255] {
            signature[64] = v;
            assert_eq!(
                recover_eth(&signature, &data),
                Err(SignatureError::RecoveryByte { v })
            );
        }
    }
}
