//! Fuzz target `bee_streams`: the messages of bee's other control streams as a peer sends
//! them: the headers in front of every stream (`read_headers`), pricing's threshold
//! (`read_payment_threshold`) and hive's records (`read_peers`, `check_peers`).
//!
//! Input: `selector (1 byte, modulo 3: headers, pricing, hive) ‖ stream`.
//!
//! Asserts, besides never panicking:
//! - a message read consumed exactly the length varint and the body it declares
//!   (`bps_fuzz::varint_reference`), and the rest stays;
//!   written again (`write_message`) and read back it is the same message;
//! - "need more" consumes nothing;
//! - hive: one answer per record, in order, and every record accepted has the overlay its
//!   recovered address, network id and nonce derive (`bps_fuzz::bee_reference`).

#![no_main]

use bps_bee::{
    ReadError, check_peers, read_headers, read_message, read_payment_threshold, read_peers,
    write_message,
};
use bps_fuzz::bee_reference;
use bps_fuzz::bee_seeds::{NETWORK_ID, STREAM_HEADERS, STREAM_HIVE, STREAM_PRICING};
use bps_fuzz::varint_reference::{self, Varint};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Reads one message with `read`, checks what it consumed and that it survives a rewrite.
fn check<M: Message + Default + PartialEq>(
    stream: &[u8],
    read: fn(&mut BytesMut) -> Result<Option<M>, ReadError>,
) -> Option<M> {
    let mut buf = BytesMut::from(stream);
    match read(&mut buf) {
        Ok(Some(message)) => {
            let consumed = stream.len() - buf.len();
            let Varint::Value { value, bytes } = varint_reference::decode(stream) else {
                panic!("a message read without a length varint");
            };
            assert_eq!(
                Ok(consumed),
                usize::try_from(value).map(|body| body + bytes)
            );
            assert_eq!(&stream[consumed..], &buf[..]);
            let mut again = BytesMut::from(&write_message(&message)[..]);
            let reread: Option<M> = read_message(&mut again, "again").expect("our own bytes");
            assert!(reread.as_ref() == Some(&message) && again.is_empty());
            Some(message)
        }
        Ok(None) => {
            assert_eq!(&buf[..], stream, "need more consumes nothing");
            None
        }
        Err(_) => None,
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&selector, stream)) = input.split_first() else {
        return;
    };
    match selector % 3 {
        STREAM_HEADERS => {
            check(stream, read_headers);
        }
        STREAM_PRICING => {
            check(stream, read_payment_threshold);
        }
        STREAM_HIVE => {
            let Some(peers) = check(stream, read_peers) else {
                return;
            };
            let checked = check_peers(&peers, NETWORK_ID);
            assert_eq!(checked.len(), peers.peers.len());
            for (record, result) in peers.peers.iter().zip(&checked) {
                if let Ok(peer) = result {
                    assert_eq!(&record.overlay[..], &peer.overlay[..]);
                    assert_eq!(
                        peer.overlay,
                        bee_reference::overlay(&peer.eth_address, NETWORK_ID, &record.nonce)
                    );
                }
            }
        }
        _ => unreachable!("a value modulo 3"),
    }
});
