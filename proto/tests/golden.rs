//! Golden bytes of the wire. Every expected hex string below was worked out by hand from the
//! protobuf encoding rules (key = field number << 3 | wire type; varint 0, length-delimited
//! 2; LEB128 varints, least significant group first), never by echoing the encoder. Long
//! runs of one byte are spliced in with `run(byte, count)` to keep the strings readable.

use bps_proto::{
    Ack, Binding, Broadcast, CohortSpec, FRAME_BYTES_MAX_DEFAULT, Join, Kind, Spec, Status,
    TopicBinding, decode_ack, decode_broadcast, decode_join, encode_frame, next_frame,
    validate_join,
};
use bytes::{Bytes, BytesMut};

const TOPIC: [u8; 32] = [0x11; 32];
const ADMIN: [u8; 20] = [0xaa; 20];
const ADDR: [u8; 20] = [0xbb; 20];
const CHALLENGE: [u8; 32] = [0xcc; 32];

/// `count` copies of `byte` as hex.
fn run(byte: u8, count: usize) -> String {
    format!("{byte:02x}").repeat(count)
}

/// Hex with spaces for readability, to bytes.
fn unhex(spaced: &str) -> Vec<u8> {
    let compact: String = spaced.split_whitespace().collect();
    hex::decode(compact).expect("test hex is valid")
}

/// Splits the single frame in `frame` and checks it consumed everything.
fn only_body(frame: &[u8]) -> Bytes {
    let mut buf = BytesMut::from(frame);
    let body = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
        .expect("valid frame")
        .expect("complete frame");
    assert!(buf.is_empty(), "one frame, nothing left over");
    body
}

fn spec_pb(binding: TopicBinding, admin: &[u8], publishers: i32, history: bool) -> CohortSpec {
    CohortSpec {
        topic: Bytes::copy_from_slice(&TOPIC),
        binding: binding as i32,
        admin: Bytes::copy_from_slice(admin),
        publishers,
        history,
        closed: false,
    }
}

#[test]
fn join_frame_explicit_feed_topic() {
    let join = Join {
        cohort: Some(spec_pb(TopicBinding::FeedTopic, &ADMIN, 0, false)),
        addr: Bytes::copy_from_slice(&ADDR),
    };
    // CohortSpec: 0a 20 <topic 32> | 10 04 | 1a 14 <admin 20>  = 34 + 2 + 22 = 58 = 0x3a.
    // Join: 0a 3a <cohort 58> | 12 14 <addr 20>                = 2 + 58 + 22 = 82 = 0x52.
    let expected = unhex(&format!(
        "52  0a 3a  0a 20 {}  10 04  1a 14 {}  12 14 {}",
        run(0x11, 32),
        run(0xaa, 20),
        run(0xbb, 20)
    ));
    assert_eq!(encode_frame(&join)[..], expected[..]);
    assert_eq!(decode_join(only_body(&expected)), Ok(join));
}

#[test]
fn join_frame_all_mnemonic_with_history() {
    let join = Join {
        cohort: Some(spec_pb(TopicBinding::Mnemonic, &ADMIN, 1, true)),
        addr: Bytes::copy_from_slice(&ADDR),
    };
    // CohortSpec: 0a 20 <32> | 10 05 | 1a 14 <20> | 20 01 | 28 01 = 34+2+22+2+2 = 62 = 0x3e.
    // Join: 0a 3e <62> | 12 14 <20>                                  = 2+62+22   = 86 = 0x56.
    let expected = unhex(&format!(
        "56  0a 3e  0a 20 {}  10 05  1a 14 {}  20 01  28 01  12 14 {}",
        run(0x11, 32),
        run(0xaa, 20),
        run(0xbb, 20)
    ));
    assert_eq!(encode_frame(&join)[..], expected[..]);
    assert_eq!(decode_join(only_body(&expected)), Ok(join));
}

#[test]
fn ack_frames() {
    let ok = Ack {
        status: Status::Ok as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
    };
    // 08 01 | 12 20 <challenge 32> = 2 + 34 = 36 = 0x24.
    let expected = unhex(&format!("24  08 01  12 20 {}", run(0xcc, 32)));
    assert_eq!(encode_frame(&ok)[..], expected[..]);
    assert_eq!(decode_ack(only_body(&expected)), Ok(ok));

    for (status, expected) in [(Status::Full, "02 08 02"), (Status::Rejected, "02 08 03")] {
        let ack = Ack {
            status: status as i32,
            challenge: Bytes::new(),
        };
        let expected = unhex(expected);
        assert_eq!(encode_frame(&ack)[..], expected[..], "{status:?}");
        assert_eq!(decode_ack(only_body(&expected)), Ok(ack));
    }
}

#[test]
fn broadcast_frame_small() {
    let broadcast = Broadcast {
        soc: Bytes::from_static(&[1, 2, 3]),
        kind: Kind::Data as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: 300,
    };
    // 0a 03 01 02 03 | 10 01 | 1a 20 <32> | 20 ac 02   (300 = 0b10_0101100 -> ac 02)
    // = 5 + 2 + 34 + 3 = 44 = 0x2c.
    let expected = unhex(&format!(
        "2c  0a 03 01 02 03  10 01  1a 20 {}  20 ac 02",
        run(0xcc, 32)
    ));
    assert_eq!(encode_frame(&broadcast)[..], expected[..]);
    assert_eq!(decode_broadcast(only_body(&expected)), Ok(broadcast));
}

#[test]
fn broadcast_frame_implicit_has_no_challenge_or_index() {
    let broadcast = Broadcast {
        soc: Bytes::from_static(&[1, 2, 3]),
        kind: Kind::Data as i32,
        challenge: Bytes::new(),
        index: 0,
    };
    let expected = unhex("07  0a 03 01 02 03  10 01");
    assert_eq!(encode_frame(&broadcast)[..], expected[..]);
    assert_eq!(decode_broadcast(only_body(&expected)), Ok(broadcast));
}

#[test]
fn broadcast_frame_largest_valid() {
    let broadcast = Broadcast {
        soc: Bytes::from(vec![0x5a; 4201]),
        kind: Kind::Eos as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: u64::MAX,
    };
    // soc:   0a e9 20 <4201>     4201 = 32 * 128 + 105 -> e9 20       = 4204
    // kind:  10 04                                                     =    2
    // chal:  1a 20 <32>                                                =   34
    // index: 20 ff ff ff ff ff ff ff ff ff 01  (u64::MAX, ten bytes)   =   11
    // body = 4251 = 33 * 128 + 27 -> prefix 9b 21.
    let expected = unhex(&format!(
        "9b 21  0a e9 20 {}  10 04  1a 20 {}  20 ff ff ff ff ff ff ff ff ff 01",
        run(0x5a, 4201),
        run(0xcc, 32)
    ));
    assert_eq!(expected.len(), 2 + bps_proto::BROADCAST_FRAME_BYTES_MAX);
    assert_eq!(encode_frame(&broadcast)[..], expected[..]);
    assert_eq!(decode_broadcast(only_body(&expected)), Ok(broadcast));
}

#[test]
fn broadcast_with_unknown_kind_decodes_and_keeps_the_value() {
    // 0a 01 aa | 10 07: kind 7 is no Kind, yet the frame decodes (R14 counts it).
    let body = only_body(&unhex("05  0a 01 aa  10 07"));
    let broadcast = decode_broadcast(body).expect("unknown enum values are not decode errors");
    assert_eq!(broadcast.kind, 7);
    assert_eq!(bps_proto::kind_from_i32(broadcast.kind), None);
}

fn spec(admin: Option<[u8; 20]>, all: bool, history: bool, closed: bool) -> Spec {
    Spec {
        topic: TOPIC,
        binding: Binding::Mnemonic,
        admin,
        all,
        history,
        closed,
    }
}

#[test]
fn canonical_key_examples_of_r1() {
    let topic = run(0x11, 32);
    let admin = run(0xaa, 20);
    let cases = [
        (
            spec(None, false, false, false),
            format!("0a20 {topic} 1005"),
        ),
        (
            spec(Some(ADMIN), false, false, false),
            format!("0a20 {topic} 1005 1a14 {admin}"),
        ),
        (
            spec(Some(ADMIN), true, false, false),
            format!("0a20 {topic} 1005 1a14 {admin} 2001"),
        ),
        (
            spec(None, false, true, false),
            format!("0a20 {topic} 1005 2801"),
        ),
        (
            spec(Some(ADMIN), false, false, true),
            format!("0a20 {topic} 1005 1a14 {admin} 3001"),
        ),
        (
            spec(Some(ADMIN), true, true, true),
            format!("0a20 {topic} 1005 1a14 {admin} 2001 2801 3001"),
        ),
    ];
    for (spec, expected) in cases {
        let expected = unhex(&expected);
        assert_eq!(spec.key().as_bytes(), &expected[..], "{spec:?}");
        assert_eq!(spec.key().to_hex(), hex::encode(&expected));
    }
}

#[test]
fn canonical_key_encodes_each_binding_value() {
    let topic = run(0x11, 32);
    for (binding, value) in [
        (Binding::Anchor, "01"),
        (Binding::SocId, "02"),
        (Binding::Owner, "03"),
        (Binding::FeedTopic, "04"),
        (Binding::Mnemonic, "05"),
    ] {
        let spec = Spec {
            binding,
            ..spec(None, false, false, false)
        };
        assert_eq!(
            spec.key().as_bytes(),
            unhex(&format!("0a20 {topic} 10{value}"))
        );
    }
}

#[test]
fn unknown_fields_and_explicit_defaults_do_not_change_the_key() {
    // A cohort with its fields out of order, every default written out explicitly
    // (admin empty, publishers 0, history false, closed false) and two unknown fields:
    // field 15 varint (key 0x78) and field 16 length-delimited (key 130 -> 82 01).
    let cohort = unhex(&format!(
        "10 05  1a 00  20 00  78 01  0a 20 {}  28 00  82 01 02 ff ff  30 00",
        run(0x11, 32)
    ));
    // Join: cohort, then an unknown field 3 (key 0x1a, 2 bytes), then addr.
    let mut body = vec![0x0a, u8::try_from(cohort.len()).expect("short cohort")];
    body.extend_from_slice(&cohort);
    body.extend_from_slice(&unhex(&format!("1a 02 ff ff  12 14 {}", run(0xbb, 20))));

    let noisy = validate_join(&decode_join(Bytes::from(body)).expect("valid protobuf"))
        .expect("valid Join");
    let clean = validate_join(&spec(None, false, false, false).to_join(&ADDR)).expect("valid");
    assert_eq!(noisy, clean);
    assert_eq!(
        noisy.key.as_bytes(),
        unhex(&format!("0a20 {} 1005", run(0x11, 32)))
    );
}
