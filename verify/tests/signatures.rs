//! Signature acceptance exactly as bee's btcec `RecoverCompact` (docs/PROTOCOL.md §3, D9):
//! v in 27..=34 with recovery id (v - 27) & 3, r and s in [1, N-1], high S accepted.
//!
//! Base vector: bee's "foo" SOC (ethersphere/bee pkg/soc/soc_test.go
//! @4a6969461ec4581bbb8ee0e1451ca8d4c38638b2), owner 8d3766440f0d7b949a5e32995d09619a7f86e632.

use bps_proto::keccak256;
use bps_verify::{
    Hash, SignatureError, SigningKey, SocError, address_of, eip191_hash, recover_eth,
    validate_soc_at,
};
use k256::elliptic_curve::PrimeField;
use k256::elliptic_curve::ops::Reduce;
use k256::elliptic_curve::point::DecompressPoint;
use k256::{AffinePoint, FieldBytes, ProjectivePoint, PublicKey, Scalar};

const OWNER: &str = "8d3766440f0d7b949a5e32995d09619a7f86e632";
const FOO_SIG: &str = "5acd384febc133b7b245e5ddc62d82d2cded9182d2716126cd8844509af65a053deb418208027f548e3e88343af6f84a8772fb3cebc0a1833a0ea7ec0c1348311b";
const FOO_SOC_ADDRESS: &str = "9d453ebb73b2fedaaf44ceddcf7a0aa37f3e3d6453fea5841c31f0ea6d61dc85";
const FOO_CAC_ADDRESS: &str = "2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48";
/// The secp256k1 group order N.
const ORDER: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";

fn bytes<const LEN: usize>(hex_str: &str) -> [u8; LEN] {
    hex::decode(hex_str)
        .expect("hex")
        .try_into()
        .expect("length")
}

fn owner() -> [u8; 20] {
    bytes(OWNER)
}

/// keccak256(0^32 ‖ cac("foo")): what bee's "foo" signature signs.
fn foo_digest() -> Hash {
    let mut to_sign = [0u8; 64];
    to_sign[32..].copy_from_slice(&bytes::<32>(FOO_CAC_ADDRESS));
    keccak256(&to_sign)
}

fn foo_chunk(signature: &[u8; 65]) -> Vec<u8> {
    let mut chunk = vec![0u8; 32];
    chunk.extend_from_slice(signature);
    chunk.extend_from_slice(&3u64.to_le_bytes());
    chunk.extend_from_slice(b"foo");
    chunk
}

/// N - s, big-endian.
fn negate_mod_order(s: &[u8]) -> [u8; 32] {
    let scalar = Scalar::from_repr(FieldBytes::from(<[u8; 32]>::try_from(s).expect("32")))
        .into_option()
        .expect("s below N");
    (-scalar).to_repr().into()
}

fn is_high(s: &[u8]) -> bool {
    // s > N/2 exactly when s > N - s.
    s > negate_mod_order(s).as_slice()
}

#[test]
fn bee_signature_is_low_s_with_v_27() {
    let signature: [u8; 65] = bytes(FOO_SIG);
    assert_eq!(signature[64], 27);
    assert!(!is_high(&signature[32..64]));
}

/// High S is accepted (bee does not enforce low S): (r, N - s) with the other parity
/// recovers the same owner, and the SOC stays valid at its address.
#[test]
fn high_s_recovers_the_same_owner() {
    let mut signature: [u8; 65] = bytes(FOO_SIG);
    let high_s = negate_mod_order(&signature[32..64]);
    assert!(is_high(&high_s));
    signature[32..64].copy_from_slice(&high_s);
    signature[64] = 28;
    assert_eq!(recover_eth(&signature, &foo_digest()), Ok(owner()));
    let recovered = validate_soc_at(&foo_chunk(&signature), &bytes(FOO_SOC_ADDRESS))
        .expect("high-S SOC is valid, as in bee");
    assert_eq!(recovered.owner, owner());
    // The "compressed" flag form of the same high-S signature.
    signature[64] = 32;
    assert_eq!(recover_eth(&signature, &foo_digest()), Ok(owner()));
    // High S with the original parity names another key: valid signature, wrong address.
    signature[64] = 27;
    let other = recover_eth(&signature, &foo_digest()).expect("recovers some key");
    assert_ne!(other, owner());
    assert!(matches!(
        validate_soc_at(&foo_chunk(&signature), &bytes(FOO_SOC_ADDRESS)),
        Err(SocError::AddressMismatch { .. })
    ));
}

/// High S from our own signer: every random key's low-S signature, flipped to high S and
/// the other parity, recovers the same key.
#[test]
fn high_s_round_trip_random_keys() {
    for round in 0u8..32 {
        let key = SigningKey::random();
        let data = keccak256(&[round]);
        let mut signature = key.sign_eth(&data);
        let high_s = negate_mod_order(&signature[32..64]);
        signature[32..64].copy_from_slice(&high_s);
        signature[64] = 27 + ((signature[64] - 27) ^ 1);
        assert_eq!(recover_eth(&signature, &data), Ok(key.address()));
    }
}

/// v = 31..=34 is btcec's "compressed key" flag on recovery ids 0..=3: 31 behaves as 27.
#[test]
fn compressed_flag_v_31_and_32() {
    let mut signature: [u8; 65] = bytes(FOO_SIG);
    signature[64] = 31;
    assert_eq!(recover_eth(&signature, &foo_digest()), Ok(owner()));
    assert!(validate_soc_at(&foo_chunk(&signature), &bytes(FOO_SOC_ADDRESS)).is_ok());
    // 32 is recovery id 1: the other parity, another key.
    signature[64] = 32;
    let other = recover_eth(&signature, &foo_digest()).expect("recovers some key");
    assert_ne!(other, owner());
}

/// v = 29, 30, 33, 34 (recovery ids 2, 3: x = r + N) need r + N < P. bee's r is far above
/// P - N, so there is no such point, exactly as btcec reports "calculated Rx is larger
/// than curve P".
#[test]
fn x_reduced_ids_fail_for_large_r() {
    for v in [29u8, 30, 33, 34] {
        let mut signature: [u8; 65] = bytes(FOO_SIG);
        signature[64] = v;
        assert_eq!(
            recover_eth(&signature, &foo_digest()),
            Err(SignatureError::NoPublicKey { v }),
            "v = {v}"
        );
    }
}

/// A constructed vector for recovery ids 2 and 3: a curve point R whose x lies in [N, P),
/// so r = x - N. Recovery must yield Q = r⁻¹(s·R − z·G), with R's y even for v = 29/33 and
/// odd for v = 30/34.
#[test]
fn x_reduced_ids_recover_when_r_plus_n_is_on_the_curve() {
    let order: [u8; 32] = bytes(ORDER);
    // Smallest x = N + t on the curve with t >= 1 (r = t must be non-zero).
    let (x_bytes, t) = (1u8..=0xbe)
        .map(|t| {
            let mut x = order;
            x[31] += t; // N ends in 0x41: no carry for t <= 0xbe.
            (x, t)
        })
        .find(|(x, _)| {
            AffinePoint::decompress(&FieldBytes::from(*x), 0.into())
                .into_option()
                .is_some()
        })
        .expect("some x in [N, N + 0xbe] is on the curve");
    let mut r = [0u8; 32];
    r[31] = t;
    let r_scalar = Scalar::from(u64::from(t));
    let s: [u8; 32] = keccak256(b"any s");
    let s_scalar = Scalar::from_repr(FieldBytes::from(s))
        .into_option()
        .expect("below N");
    let data = keccak256(b"x-reduced vector");
    let z = <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(eip191_hash(&data)));
    let r_inv = r_scalar.invert().into_option().expect("r non-zero");

    for (parity, vs) in [(0u8, [29u8, 33]), (1u8, [30u8, 34])] {
        let point = AffinePoint::decompress(&FieldBytes::from(x_bytes), parity.into())
            .into_option()
            .expect("on curve");
        let q = (ProjectivePoint::from(point) * s_scalar - ProjectivePoint::GENERATOR * z) * r_inv;
        let expected =
            address_of(&PublicKey::from_affine(q.to_affine()).expect("not the identity"));
        for v in vs {
            let mut signature = [0u8; 65];
            signature[..32].copy_from_slice(&r);
            signature[32..64].copy_from_slice(&s);
            signature[64] = v;
            assert_eq!(recover_eth(&signature, &data), Ok(expected), "v = {v}");
        }
    }
}

/// v outside 27..=34 is rejected before any curve arithmetic.
#[test]
fn rejected_recovery_bytes() {
    for v in [0u8, 1, 2, 3, 4, 26, 35, 36, 37, 38, 255] {
        let mut signature: [u8; 65] = bytes(FOO_SIG);
        signature[64] = v;
        assert_eq!(
            recover_eth(&signature, &foo_digest()),
            Err(SignatureError::RecoveryByte { v })
        );
        assert!(matches!(
            validate_soc_at(&foo_chunk(&signature), &bytes(FOO_SOC_ADDRESS)),
            Err(SocError::Signature(SignatureError::RecoveryByte { .. }))
        ));
    }
}

/// r and s must be in [1, N-1].
#[test]
fn scalars_out_of_range() {
    let order: [u8; 32] = bytes(ORDER);
    let base: [u8; 65] = bytes(FOO_SIG);
    for (component, offset) in [("r", 0usize), ("s", 32)] {
        for value in [[0u8; 32], order, [0xff; 32]] {
            let mut signature = base;
            signature[offset..offset + 32].copy_from_slice(&value);
            assert_eq!(
                recover_eth(&signature, &foo_digest()),
                Err(SignatureError::ScalarOutOfRange { component, value }),
                "{component} = {}",
                hex::encode(value)
            );
        }
    }
    // N - 1 is in range for s (it is high S; it recovers some key).
    let mut n_minus_one = order;
    n_minus_one[31] -= 1;
    let mut signature = base;
    signature[32..64].copy_from_slice(&n_minus_one);
    assert!(!matches!(
        recover_eth(&signature, &foo_digest()),
        Err(SignatureError::ScalarOutOfRange { .. })
    ));
}

#[test]
fn errors_display_with_context() {
    assert_eq!(
        SignatureError::RecoveryByte { v: 35 }.to_string(),
        "signature v = 35 is outside 27..=34"
    );
    let error = SocError::Signature(SignatureError::NoPublicKey { v: 29 });
    assert!(error.to_string().contains("v = 29"), "{error}");
}
