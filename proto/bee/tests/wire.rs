//! Every field number and wire type of bee's control messages, pinned against bytes built by
//! hand from the `.proto` files (bee `pkg/p2p/libp2p/internal/handshake/pb/handshake.proto`,
//! `pkg/p2p/libp2p/internal/headers/pb/headers.proto`, `pkg/pricing/pb/pricing.proto`,
//! `pkg/hive/pb/hive.proto`): each message encodes to them and decodes from them.

use bps_bee::pb::{Ack, AnnouncePaymentThreshold, BzzAddress, Header, Headers, Peers, Syn, SynAck};
use bps_bee::{MESSAGE_BYTES_MAX, ReadError, read_message, write_message};
use bytes::{Bytes, BytesMut};
use prost::Message;

/// Wire type 0: a varint.
const VARINT: u8 = 0;
/// Wire type 2: a length and that many bytes.
const LEN: u8 = 2;

/// The one-byte key of `field` (below 16) with `wire_type`.
fn key(field: u8, wire_type: u8) -> u8 {
    assert!(field < 16);
    field << 3 | wire_type
}

/// A length-delimited field of fewer than 128 bytes.
fn len_field(field: u8, value: &[u8]) -> Vec<u8> {
    let mut out = vec![key(field, LEN), u8::try_from(value.len()).expect("short")];
    out.extend_from_slice(value);
    out
}

fn pinned<M: Message + Default + PartialEq + std::fmt::Debug>(message: &M, bytes: &[u8]) {
    assert_eq!(
        message.encode_to_vec(),
        bytes,
        "{message:?} encodes to the pinned bytes"
    );
    assert_eq!(&M::decode(bytes).expect("decodes"), message);
}

fn bzz_address() -> (BzzAddress, Vec<u8>) {
    let address = BzzAddress {
        underlay: Bytes::from_static(&[0x04, 127, 0, 0, 1]),
        signature: Bytes::from_static(&[0x51; 3]),
        overlay: Bytes::from_static(&[0x0e; 2]),
        nonce: Bytes::from_static(&[0x9a; 4]),
        timestamp: 300,
        chequebook_address: Bytes::from_static(&[0xcb; 2]),
    };
    let mut bytes = len_field(1, &[0x04, 127, 0, 0, 1]);
    bytes.extend(len_field(2, &[0x51; 3]));
    bytes.extend(len_field(3, &[0x0e; 2]));
    bytes.extend(len_field(4, &[0x9a; 4]));
    // 300 = 0b10_0101100: low seven bits with the continuation bit, then 2.
    bytes.extend([key(5, VARINT), 0xac, 0x02]);
    bytes.extend(len_field(6, &[0xcb; 2]));
    (address, bytes)
}

#[test]
fn bzz_address_fields_1_to_6() {
    let (address, bytes) = bzz_address();
    pinned(&address, &bytes);
}

#[test]
fn timestamp_is_int64_not_sint64() {
    // A negative int64 is ten varint bytes (two's complement), where sint64 would zigzag it.
    let address = BzzAddress {
        timestamp: -1,
        ..BzzAddress::default()
    };
    let mut bytes = vec![key(5, VARINT)];
    bytes.extend([0xff; 9]);
    bytes.push(0x01);
    pinned(&address, &bytes);
}

#[test]
fn syn_field_1() {
    pinned(
        &Syn {
            observed_underlay: Bytes::from_static(b"\x99"),
        },
        &len_field(1, b"\x99"),
    );
}

fn ack() -> (Ack, Vec<u8>) {
    let (address, address_bytes) = bzz_address();
    let ack = Ack {
        address: Some(address),
        network_id: 10,
        full_node: true,
        welcome_message: Bytes::from_static(b"hi"),
    };
    let mut bytes = len_field(1, &address_bytes);
    bytes.extend([key(2, VARINT), 10, key(3, VARINT), 1]);
    // Field 99, wire type 2: key 99 << 3 | 2 = 794, a two-byte varint.
    bytes.extend([0x9a, 0x06, 2, b'h', b'i']);
    (ack, bytes)
}

#[test]
fn ack_fields_1_2_3_and_99() {
    let (ack, bytes) = ack();
    pinned(&ack, &bytes);
}

#[test]
fn syn_ack_fields_1_and_2() {
    let (ack, ack_bytes) = ack();
    let syn_ack = SynAck {
        syn: Some(Syn {
            observed_underlay: Bytes::from_static(&[7]),
        }),
        ack: Some(ack),
    };
    let mut bytes = len_field(1, &len_field(1, &[7]));
    bytes.extend(len_field(2, &ack_bytes));
    pinned(&syn_ack, &bytes);
}

#[test]
fn welcome_message_and_header_key_keep_bytes_that_are_not_utf8() {
    // Bee's gogo decoder keeps such a `string`; refusing it would refuse a bee peer.
    let ack = Ack::decode(&[0x9a, 0x06, 2, 0xff, 0xfe][..]).expect("decodes");
    assert_eq!(&ack.welcome_message[..], &[0xff, 0xfe]);
    let headers = Headers::decode(&len_field(1, &len_field(1, &[0xc3]))[..]).expect("decodes");
    assert_eq!(&headers.headers[0].key[..], &[0xc3]);
}

#[test]
fn headers_field_1_and_header_fields_1_2() {
    let headers = Headers {
        headers: vec![
            Header {
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(&[1, 2]),
            },
            Header {
                key: Bytes::from_static(b"x"),
                value: Bytes::new(),
            },
        ],
    };
    let mut first = len_field(1, b"k");
    first.extend(len_field(2, &[1, 2]));
    let mut bytes = len_field(1, &first);
    bytes.extend(len_field(1, &len_field(1, b"x")));
    pinned(&headers, &bytes);
    pinned(&Headers::default(), &[]);
}

#[test]
fn pricing_field_1() {
    pinned(
        &AnnouncePaymentThreshold {
            payment_threshold: Bytes::from_static(&[0x01, 0x00]),
        },
        &len_field(1, &[0x01, 0x00]),
    );
}

#[test]
fn hive_peers_field_1_holds_bzz_addresses() {
    let (address, address_bytes) = bzz_address();
    let peers = Peers {
        peers: vec![address.clone(), address],
    };
    let mut bytes = len_field(1, &address_bytes);
    bytes.extend(len_field(1, &address_bytes));
    pinned(&peers, &bytes);
}

#[test]
fn messages_are_uvarint_length_delimited() {
    let syn = Syn {
        observed_underlay: Bytes::from_static(&[1, 2, 3]),
    };
    let framed = write_message(&syn);
    let mut expected = vec![5];
    expected.extend(len_field(1, &[1, 2, 3]));
    assert_eq!(&framed[..], &expected[..]);
    assert_eq!(
        &write_message(&Headers::default())[..],
        &[0],
        "empty headers: one zero"
    );
}

#[test]
fn the_reader_waits_for_whole_messages_and_leaves_the_rest() {
    let syn = Syn {
        observed_underlay: Bytes::from_static(&[1, 2, 3]),
    };
    let framed = write_message(&syn);
    let mut buf = BytesMut::new();
    for &byte in framed.iter() {
        assert_eq!(read_message::<Syn>(&mut buf, "Syn"), Ok(None));
        buf.extend_from_slice(&[byte]);
    }
    buf.extend_from_slice(&[9, 9]);
    assert_eq!(read_message::<Syn>(&mut buf, "Syn"), Ok(Some(syn)));
    assert_eq!(&buf[..], &[9, 9]);
}

#[test]
fn the_reader_takes_bees_cap_and_refuses_one_byte_more() {
    // Bee's reader refuses a declared length above 128 KiB (`length > maxSize`).
    assert_eq!(MESSAGE_BYTES_MAX, 131_072);
    let mut at_cap = BytesMut::from(&[0x80, 0x80, 0x08][..]);
    assert_eq!(read_message::<Syn>(&mut at_cap, "Syn"), Ok(None));
    let mut over = BytesMut::from(&[0x81, 0x80, 0x08][..]);
    assert!(matches!(
        read_message::<Syn>(&mut over, "Syn"),
        Err(ReadError::Frame(_))
    ));
    let mut garbage = BytesMut::from(&[2, 0x0a, 0x05][..]);
    assert!(matches!(
        read_message::<Syn>(&mut garbage, "Syn"),
        Err(ReadError::Decode {
            message: "Syn",
            bytes: 2,
            ..
        })
    ));
}
