//! EIP-191 signatures over a message of any length, as bee's `Signer.Sign` and
//! `crypto.Recover` make and check them (bee `pkg/crypto/signer.go`): the signed hash is
//! keccak256("\x19Ethereum Signed Message:\n" ‖ decimal length ‖ message).
//!
//! Owns: [`message_hash`], [`sign_message`], [`recover_message`].
//!
//! Never: decides what a signature may look like. `bps_verify` signs and recovers over a
//! 32-byte message only (every BPS signature is), while the handshake signs a record of any
//! length; so the length-dependent hash is made here and everything else is `bps_verify`'s:
//! its acceptance rules (`v` in 27..=34, `r` and `s` in [1, N-1], high S accepted) are
//! applied by [`bps_verify::SignedDigest::parse`] before any curve arithmetic, and the
//! address is its [`bps_verify::address_of`]. Tests check that, for a 32-byte message, this
//! module and `bps_verify` agree signature for signature and error for error.
//!
//! Left for `bps_verify`: a `sign_eth_message` / `recover_eth_message` pair there would let
//! this module shrink to its callers.

use bps_proto::{Address, Hash, keccak256};
use bps_verify::{SignatureError, SignedDigest, address_of};
use k256::ecdsa::{RecoveryId, Signature, VerifyingKey};
use k256::{FieldBytes, PublicKey};

/// The EIP-191 "personal message" prefix before the message's decimal length.
const PREFIX: &[u8] = b"\x19Ethereum Signed Message:\n";

/// What is signed for `message`: keccak256(prefix ‖ decimal length ‖ message).
pub fn message_hash(message: &[u8]) -> Hash {
    let mut prefixed = Vec::with_capacity(PREFIX.len() + 20 + message.len());
    prefixed.extend_from_slice(PREFIX);
    prefixed.extend_from_slice(message.len().to_string().as_bytes());
    prefixed.extend_from_slice(message);
    keccak256(&prefixed)
}

/// `r ‖ s ‖ v` over [`message_hash`]`(message)`: RFC 6979 nonce, low S, `v = 27 + recovery
/// id`, which is what bee's btcec `SignCompact` makes.
pub fn sign_message(key: &k256::ecdsa::SigningKey, message: &[u8]) -> [u8; 65] {
    let (signature, recovery_id) = key.sign_prehash_recoverable(&message_hash(message));
    let mut out = [0u8; 65];
    out[..64].copy_from_slice(&signature.to_bytes());
    out[64] = RECOVERY_BYTE_BASE + recovery_id.to_byte();
    out
}

/// `v` of recovery id 0 (Ethereum's convention, as bee writes it).
const RECOVERY_BYTE_BASE: u8 = 27;

/// The Ethereum address whose key made `signature` over `message`, with bee's acceptance
/// rules (module docs).
///
/// # Errors
/// `v`, `r` or `s` out of range, or no key recovers.
pub fn recover_message(signature: &[u8; 65], message: &[u8]) -> Result<Address, SignatureError> {
    // Only the range checks of `parse` matter here; its digest is not the one recovered.
    SignedDigest::parse(signature, &[0; 32])?;
    let v = signature[64];
    let no_key = SignatureError::NoPublicKey { v };
    let r = FieldBytes::from(array_32(&signature[..32]));
    let s = FieldBytes::from(array_32(&signature[32..64]));
    let parsed = Signature::from_scalars(r, s).map_err(|_| no_key)?;
    let normalized = parsed.normalize_s();
    // (r, s) and (r, N - s) verify under one key with nonce points R and -R, whose y
    // parities differ: a high S flips the parity bit of the recovery id.
    let flip = u8::from(normalized != parsed);
    let recovery_id = RecoveryId::from_byte(((v - RECOVERY_BYTE_BASE) & 3) ^ flip).ok_or(no_key)?;
    let key = VerifyingKey::recover_from_prehash(&message_hash(message), &normalized, recovery_id)
        .map_err(|_| no_key)?;
    Ok(address_of(&PublicKey::from(&key)))
}

fn array_32(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(bytes);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bps_verify::{SigningKey, recover_eth};

    fn k256_key(key: &SigningKey) -> k256::ecdsa::SigningKey {
        k256::ecdsa::SigningKey::from_bytes(&FieldBytes::from(key.to_bytes())).expect("valid")
    }

    #[test]
    fn a_32_byte_message_is_signed_and_recovered_as_bps_verify_does() {
        for seed in 1..=8u8 {
            let key = SigningKey::from_bytes(&[seed; 32]).expect("valid key");
            let data = keccak256(&[seed]);
            let signature = sign_message(&k256_key(&key), &data);
            assert_eq!(signature, key.sign_eth(&data));
            assert_eq!(recover_message(&signature, &data), Ok(key.address()));
            let mut changed = signature;
            for v in [0u8, 26, 29, 31, 35] {
                changed[64] = v;
                assert_eq!(
                    recover_message(&changed, &data),
                    recover_eth(&changed, &data),
                    "v = {v}"
                );
            }
        }
    }

    #[test]
    fn a_high_s_signature_recovers_like_bps_verify() {
        // secp256k1's order N, big-endian.
        let order = hex::decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141")
            .expect("hex");
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let data = keccak256(b"high s");
        let mut signature = key.sign_eth(&data);
        let mut borrow = 0i16;
        for index in (0..32).rev() {
            let difference = i16::from(order[index]) - i16::from(signature[32 + index]) - borrow;
            borrow = i16::from(difference < 0);
            signature[32 + index] = difference.rem_euclid(256) as u8;
        }
        signature[64] = RECOVERY_BYTE_BASE + ((signature[64] - RECOVERY_BYTE_BASE) ^ 1);
        assert_eq!(recover_message(&signature, &data), Ok(key.address()));
        assert_eq!(recover_eth(&signature, &data), Ok(key.address()));
    }

    #[test]
    fn the_hash_counts_the_message_length_in_decimal() {
        let mut expected = b"\x19Ethereum Signed Message:\n11test string".to_vec();
        assert_eq!(message_hash(b"test string"), keccak256(&expected));
        expected.clear();
        assert_eq!(
            message_hash(b""),
            keccak256(b"\x19Ethereum Signed Message:\n0")
        );
    }
}
