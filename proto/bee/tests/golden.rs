//! Bee's own vectors, reproduced byte for byte: overlay derivation (bee
//! `pkg/crypto/crypto_test.go`), Ethereum addresses and the deterministic EIP-191 signature of
//! its signer tests (bee `pkg/crypto/signer_test.go`), the underlay forms of bee
//! `pkg/bzz/underlay_test.go`, and the signed bytes of a record laid out as bee
//! `pkg/bzz/address.go` `generateSignData` lays them out.

use bps_bee::pb::BzzAddress;
use bps_bee::{
    AddressError, Identity, Multiaddr, UNDERLAY_LIST_PREFIX, deserialize_underlays, message_hash,
    overlay_address, parse_address, recover_message, serialize_underlays, sign_data, sign_message,
};
use bps_proto::keccak256;
use bps_verify::SigningKey;
use bytes::Bytes;

fn bytes_of<const N: usize>(hex_text: &str) -> [u8; N] {
    hex::decode(hex_text)
        .expect("hex")
        .try_into()
        .expect("length")
}

/// bee `common.HexToHash("0xN")`: N as a 32-byte big-endian nonce.
fn nonce(n: u8) -> [u8; 32] {
    let mut out = [0u8; 32];
    out[31] = n;
    out
}

fn key(hex_text: &str) -> SigningKey {
    SigningKey::from_bytes(&bytes_of(hex_text)).expect("valid key")
}

fn k256_key(key: &SigningKey) -> k256::ecdsa::SigningKey {
    k256::ecdsa::SigningKey::from_bytes(&key.to_bytes().into()).expect("valid key")
}

/// The private key of bee's signer tests.
const SIGNER_KEY: &str = "634fb5a872396d9693e5c9f9d7233cfa93f395c093371017ff44aa9ae6564cdd";

#[test]
fn overlays_of_bees_crypto_tests() {
    // bee pkg/crypto/crypto_test.go TestNewOverlayFromEthereumAddress.
    let cases = [
        (
            "1815cac638d1525b47f848daf02b7953e4edd15c",
            1,
            1,
            "a38f7a814d4b249ae9d3821e9b898019c78ac9abe248fff171782c32a3849a17",
        ),
        (
            "1815cac638d1525b47f848daf02b7953e4edd15c",
            1,
            2,
            "c63c10b1728dfc463c64c264f71a621fe640196979375840be42dc496b702610",
        ),
        (
            "d26bc1715e933bd5f8fad16310042f13abc16159",
            2,
            1,
            "9f421f9149b8e31e238cfbdc6e5e833bacf1e42f77f60874d49291292858968e",
        ),
        (
            "ac485e3c63dcf9b4cda9f007628bb0b6fed1c063",
            1,
            0,
            "fe3a6d582c577404fb19df64a44e00d3a3b71230a8464c0dd34af3f0791b45f2",
        ),
    ];
    for (eth, network_id, nonce_value, expected) in cases {
        let overlay = overlay_address(&bytes_of(eth), network_id, &nonce(nonce_value));
        assert_eq!(hex::encode(overlay), expected, "{eth} on {network_id}");
    }
}

#[test]
fn overlay_is_keccak_of_eth_address_le_network_id_and_nonce() {
    let eth: [u8; 20] = bytes_of("1815cac638d1525b47f848daf02b7953e4edd15c");
    let mut data = eth.to_vec();
    data.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    data.extend_from_slice(&nonce(1));
    assert_eq!(overlay_address(&eth, 1, &nonce(1)), keccak256(&data));
}

#[test]
fn eth_addresses_of_bees_keys() {
    // bee pkg/crypto/crypto_test.go TestNewEthereumAddress.
    let crypto_key = key("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
    assert_eq!(
        hex::encode(crypto_key.address()),
        "2f63cbeb054ce76050827e42dd75268f6b9d87c5"
    );
    // bee pkg/crypto/signer_test.go TestDefaultSignerEthereumAddress.
    let identity = Identity::new(&key(SIGNER_KEY), nonce(1), 1).expect("identity");
    assert_eq!(
        hex::encode(identity.eth_address()),
        "8d3766440f0d7b949a5e32995d09619a7f86e632"
    );
}

#[test]
fn deterministic_signature_of_bees_signer_test() {
    // bee pkg/crypto/signer_test.go TestDefaultSignerDeterministic: Sign over these 32 bytes.
    let signer = key(SIGNER_KEY);
    let data: [u8; 32] =
        bytes_of("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
    let expected: [u8; 65] = bytes_of(
        "336d24afef78c5883b96ad9a62552a8db3d236105cb059ddd04dc49680869dc1\
         6234f6852c277087f025d4114c4fac6b40295ecffd1194a84cdb91bd57176949\
         1b",
    );
    assert_eq!(sign_message(&k256_key(&signer), &data), expected);
    assert_eq!(recover_message(&expected, &data), Ok(signer.address()));
}

#[test]
fn signatures_over_other_lengths_recover_and_bind_the_message() {
    // bee pkg/crypto/signer_test.go TestDefaultSigner: "test string" signs, recovers, and
    // recovers another key over other data.
    let signer = key(SIGNER_KEY);
    let signature = sign_message(&k256_key(&signer), b"test string");
    assert_eq!(
        recover_message(&signature, b"test string"),
        Ok(signer.address())
    );
    assert_ne!(
        recover_message(&signature, b"invalid"),
        Ok(signer.address())
    );
    let mut prefixed = b"\x19Ethereum Signed Message:\n11".to_vec();
    prefixed.extend_from_slice(b"test string");
    assert_eq!(message_hash(b"test string"), keccak256(&prefixed));
}

/// The address of bee's bzz and handshake tests.
const BEE_NODE: &str =
    "/ip4/127.0.0.1/tcp/1634/p2p/16Uiu2HAkx8ULY8cTXhdVAcMmLcH9AsTKz6uBQ7DPLKRjMLgBVYkA";

fn multiaddr(text: &str) -> Multiaddr {
    text.parse().expect("valid multiaddr")
}

#[test]
fn underlay_forms_of_bees_tests() {
    // bee pkg/bzz/underlay_test.go TestSerializeUnderlays.
    let dns = multiaddr("/dnsaddr/mainnet.ethswarm.org");
    assert_eq!(
        serialize_underlays(std::slice::from_ref(&dns)),
        Ok(dns.to_vec())
    );
    assert_eq!(serialize_underlays(&[]), Ok(vec![UNDERLAY_LIST_PREFIX]));
    let several = [
        multiaddr("/ip4/127.0.0.1/tcp/80/p2p/QmWqeeHEqG2db37JsuKUxyJ2JF8LtVJMGohKVT8h3aeCVH"),
        multiaddr(
            "/ip4/65.108.66.216/tcp/16341/p2p/QmVuCJ3M96c7vwv4MQBv7WY1HWQacyCEHvM99R8MUDj95d",
        ),
        multiaddr("/ip4/127.0.0.1/tcp/443/wss/p2p/QmWqeeHEqG2db37JsuKUxyJ2JF8LtVJMGohKVT8h3aeCVH"),
        dns,
    ];
    let serialized = serialize_underlays(&several).expect("fits");
    assert_eq!(serialized[0], UNDERLAY_LIST_PREFIX);
    assert_eq!(deserialize_underlays(&serialized), Ok(several.to_vec()));
    // The single form of bee's node address: /ip4 (0x04) 127.0.0.1, /tcp (0x06) 1634 big
    // endian, /p2p (0xa5 0x03) and its multihash with a one-byte length.
    let node = multiaddr(BEE_NODE);
    let bytes = serialize_underlays(std::slice::from_ref(&node)).expect("fits");
    assert_eq!(
        &bytes[..11],
        &[0x04, 127, 0, 0, 1, 0x06, 0x06, 0x62, 0xa5, 0x03, 0x27]
    );
    assert_eq!(bytes.len(), 11 + 0x27);
    assert_eq!(deserialize_underlays(&bytes), Ok(vec![node]));
}

#[test]
fn sign_data_is_bees_layout() {
    let chequebook: [u8; 20] = bytes_of("abc0000000000000000000000000000000000123");
    let data = sign_data(b"u", &[0x0e; 32], 3, &nonce(2), 1, &chequebook);
    let mut expected = b"bee-handshake-u".to_vec();
    expected.extend_from_slice(&[0x0e; 32]);
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]);
    expected.extend_from_slice(&nonce(2));
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    expected.extend_from_slice(&chequebook);
    assert_eq!(data, expected);
}

/// Bee's `TestBzzAddress` record, made with bee's signer key instead of a random one.
fn bee_test_record(chequebook: Option<[u8; 20]>) -> (Identity, BzzAddress) {
    let identity = Identity::new(&key(SIGNER_KEY), nonce(2), 3).expect("identity");
    let record = identity.sign(&[multiaddr(BEE_NODE)], 1, chequebook);
    (identity, record)
}

#[test]
fn a_signed_record_parses_as_bee_parses_it() {
    let chequebook: [u8; 20] = bytes_of("abc0000000000000000000000000000000000123");
    let (identity, record) = bee_test_record(Some(chequebook));
    let parsed = parse_address(&record, 3).expect("valid record");
    assert_eq!(parsed.overlay, identity.overlay());
    assert_eq!(parsed.eth_address, identity.eth_address());
    assert_eq!(parsed.underlays, vec![multiaddr(BEE_NODE)]);
    assert_eq!(parsed.chequebook, Some(chequebook));
    let signed = sign_data(
        &record.underlay,
        &identity.overlay(),
        3,
        &nonce(2),
        1,
        &chequebook,
    );
    let signature: [u8; 65] = record.signature[..].try_into().expect("65 bytes");
    assert_eq!(
        recover_message(&signature, &signed),
        Ok(identity.eth_address())
    );
}

#[test]
fn the_chequebook_is_signed_and_must_be_empty_or_20_bytes() {
    // bee pkg/bzz/address_test.go TestParseAddress_ChequebookIsSigned and
    // TestParseAddress_RejectsNonCanonicalChequebookLength.
    let (_, record) = bee_test_record(Some([0x11; 20]));
    let tampered = BzzAddress {
        chequebook_address: Bytes::from_static(&[0x22; 20]),
        ..record.clone()
    };
    assert!(matches!(
        parse_address(&tampered, 3),
        Err(AddressError::OverlayMismatch { .. })
    ));
    for length in [2, 21, 32] {
        let odd = BzzAddress {
            chequebook_address: Bytes::from(vec![0x11; length]),
            ..record.clone()
        };
        assert_eq!(
            parse_address(&odd, 3),
            Err(AddressError::ChequebookLength { bytes: length })
        );
    }
    // No chequebook: bee signs and sends 20 zero bytes, and reads an empty field as them.
    let (_, none) = bee_test_record(None);
    assert_eq!(&none.chequebook_address[..], &[0; 20]);
    let empty = BzzAddress {
        chequebook_address: Bytes::new(),
        ..none.clone()
    };
    assert_eq!(parse_address(&empty, 3).expect("valid").chequebook, None);
    assert_eq!(parse_address(&none, 3).expect("valid").chequebook, None);
}

#[test]
fn every_field_of_the_record_is_checked() {
    let (_, record) = bee_test_record(None);
    let with = |change: &dyn Fn(&mut BzzAddress)| {
        let mut changed = record.clone();
        change(&mut changed);
        parse_address(&changed, 3)
    };
    assert_eq!(
        with(&|r| r.nonce = Bytes::from_static(&[2; 31])),
        Err(AddressError::NonceLength { bytes: 31 })
    );
    assert_eq!(
        with(&|r| r.timestamp = 0),
        Err(AddressError::TimestampNotPositive { timestamp: 0 })
    );
    assert_eq!(
        with(&|r| r.signature = Bytes::from_static(&[1; 64])),
        Err(AddressError::SignatureLength { bytes: 64 })
    );
    assert!(matches!(
        with(&|r| r.timestamp = 2),
        Err(AddressError::OverlayMismatch { .. })
    ));
    assert!(matches!(
        with(&|r| r.nonce = Bytes::copy_from_slice(&nonce(3))),
        Err(AddressError::OverlayMismatch { .. })
    ));
    assert!(matches!(
        parse_address(&record, 1),
        Err(AddressError::OverlayMismatch { .. })
    ));
    let mut bad_v = record.signature.to_vec();
    bad_v[64] = 26;
    assert!(matches!(
        with(&|r| r.signature = Bytes::from(bad_v.clone())),
        Err(AddressError::Signature(_))
    ));
}

#[test]
fn a_record_without_underlays_is_refused_after_its_signature() {
    let identity = Identity::new(&key(SIGNER_KEY), nonce(2), 3).expect("identity");
    let empty = identity.sign(&[], 1, None);
    assert_eq!(&empty.underlay[..], &[UNDERLAY_LIST_PREFIX]);
    assert_eq!(parse_address(&empty, 3), Err(AddressError::NoUnderlay));
}
