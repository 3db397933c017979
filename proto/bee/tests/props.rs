//! Properties of our records over random identities: every record we sign parses back to
//! what was signed, and changing any signed byte of it makes it fail.

use bps_bee::pb::BzzAddress;
use bps_bee::{AddressError, Identity, Multiaddr, parse_address};
use bps_verify::SigningKey;
use bytes::Bytes;
use proptest::prelude::*;

fn underlays(ports: &[u16]) -> Vec<Multiaddr> {
    ports
        .iter()
        .map(|port| {
            format!("/ip4/192.0.2.1/tcp/{port}")
                .parse()
                .expect("valid multiaddr")
        })
        .collect()
}

/// `record` with byte `index` of the field `field` (0..5) flipped, if the field has it.
fn flipped(record: &BzzAddress, field: usize, index: usize) -> Option<BzzAddress> {
    let mut changed = record.clone();
    let target = match field {
        0 => &mut changed.underlay,
        1 => &mut changed.signature,
        2 => &mut changed.overlay,
        3 => &mut changed.nonce,
        _ => &mut changed.chequebook_address,
    };
    let mut bytes = target.to_vec();
    let at = index % bytes.len().max(1);
    let byte = bytes.get_mut(at)?;
    *byte ^= 0x01;
    *target = Bytes::from(bytes);
    Some(changed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn our_records_parse_back_and_every_signed_byte_counts(
        secret in any::<[u8; 32]>(),
        nonce in any::<[u8; 32]>(),
        network_id in any::<u64>(),
        timestamp in 1..i64::MAX,
        chequebook in proptest::option::of(any::<[u8; 20]>()),
        ports in proptest::collection::vec(any::<u16>(), 1..6),
        field in 0..5usize,
        index in any::<usize>(),
    ) {
        let Ok(key) = SigningKey::from_bytes(&secret) else {
            return Ok(());
        };
        let identity = Identity::new(&key, nonce, network_id).expect("a valid key");
        let addresses = underlays(&ports);
        let record = identity.sign(&addresses, timestamp, chequebook);
        let parsed = parse_address(&record, network_id).expect("our own record");
        prop_assert_eq!(parsed.overlay, identity.overlay());
        prop_assert_eq!(parsed.eth_address, key.address());
        prop_assert_eq!(parsed.nonce, nonce);
        prop_assert_eq!(parsed.timestamp, timestamp);
        let mut expected = Vec::new();
        for address in addresses {
            if !expected.contains(&address) {
                expected.push(address);
            }
        }
        prop_assert_eq!(parsed.underlays, expected);
        prop_assert_eq!(parsed.chequebook, chequebook.filter(|bytes| *bytes != [0; 20]));
        if let Some(changed) = flipped(&record, field, index) {
            prop_assert!(parse_address(&changed, network_id).is_err());
        }
        let later = BzzAddress { timestamp: timestamp - 1, ..record.clone() };
        let refused = parse_address(&later, network_id);
        prop_assert!(
            matches!(refused, Err(AddressError::OverlayMismatch { .. }) | Err(AddressError::TimestampNotPositive { .. })),
            "{:?}", refused
        );
    }
}
