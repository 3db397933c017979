//! Fuzz target `bee_address`: a peer's signed record (`bps_bee::parse_address`), its underlay
//! field (`deserialize_underlays`) and signature recovery over any message
//! (`recover_message`), as the handshake and hive read them.
//!
//! Input: `network id (u64 LE) ‖ a BzzAddress protobuf body` (a body prost refuses ends the
//! run).
//!
//! Asserts, besides never panicking, against bee's rules restated in
//! `bps_fuzz::bee_reference`:
//! - an underlay field parses exactly when the model frames it and every entry is a
//!   non-empty multiaddr (the multiaddr crate's verdict), into exactly the model's entries;
//!   it serializes back to exactly its bytes (a list of one in the single form);
//! - for a 32-byte message, `recover_message` gives exactly what `bps_verify::recover_eth`
//!   gives (the same address or the same error) for any 65-byte signature;
//! - a record accepted has a signature that recovers, over the model's signed bytes, to an
//!   address whose model overlay on the network is the record's; its underlays are the
//!   model's entries, 1 to 20; its nonce and timestamp are the record's.

#![no_main]

use bps_bee::pb::BzzAddress;
use bps_bee::{
    Multiaddr, UNDERLAY_LIST_PREFIX, deserialize_underlays, parse_address, recover_message,
    serialize_underlays,
};
use bps_fuzz::bee_reference::{self, UNDERLAYS_MAX};
use bps_fuzz::reader::Reader;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn entries_of(addresses: &[Multiaddr]) -> Vec<Vec<u8>> {
    addresses.iter().map(Multiaddr::to_vec).collect()
}

fn check_underlay(field: &[u8]) {
    let model = bee_reference::underlay_entries(field).filter(|entries| {
        entries
            .iter()
            .all(|entry| !entry.is_empty() && Multiaddr::try_from(entry.to_vec()).is_ok())
    });
    let addresses = match (deserialize_underlays(field), model) {
        (Ok(addresses), Some(entries)) => {
            assert_eq!(entries_of(&addresses), entries);
            addresses
        }
        (Err(_), None) => return,
        (parsed, model) => panic!("parsed {parsed:?}, the model frames {model:?}"),
    };
    assert!(addresses.len() <= UNDERLAYS_MAX);
    let serialized = serialize_underlays(&addresses).expect("a parsed list fits");
    let single_from_list = addresses.len() == 1 && field.first() == Some(&UNDERLAY_LIST_PREFIX);
    if !single_from_list {
        assert_eq!(serialized, field);
    }
    assert_eq!(deserialize_underlays(&serialized).as_ref(), Ok(&addresses));
}

fn check_recovery(record: &BzzAddress) {
    let (Ok(signature), Ok(message)) = (
        <[u8; 65]>::try_from(&record.signature[..]),
        <[u8; 32]>::try_from(&record.overlay[..]),
    ) else {
        return;
    };
    assert_eq!(
        recover_message(&signature, &message),
        bps_verify::recover_eth(&signature, &message)
    );
}

fuzz_target!(|input: &[u8]| {
    let mut reader = Reader::new(input);
    let network_id = reader.u64_le();
    let Ok(record) = BzzAddress::decode(reader.rest()) else {
        return;
    };
    check_underlay(&record.underlay);
    check_recovery(&record);
    let Ok(peer) = parse_address(&record, network_id) else {
        return;
    };
    assert_eq!(&record.overlay[..], &peer.overlay[..]);
    assert_eq!(
        peer.overlay,
        bee_reference::overlay(&peer.eth_address, network_id, &record.nonce)
    );
    let chequebook: [u8; 20] = record.chequebook_address[..].try_into().unwrap_or_default();
    let signed = bee_reference::sign_data(
        &record.underlay,
        &record.overlay,
        network_id,
        &record.nonce,
        record.timestamp,
        &chequebook,
    );
    assert_eq!(
        recover_message(&peer.signature, &signed),
        Ok(peer.eth_address)
    );
    let entries = bee_reference::underlay_entries(&record.underlay).expect("framed");
    assert_eq!(entries_of(&peer.underlays), entries);
    assert!((1..=UNDERLAYS_MAX).contains(&peer.underlays.len()));
    assert_eq!(&record.nonce[..], &peer.nonce[..]);
    assert!(peer.timestamp == record.timestamp && peer.timestamp > 0);
});
