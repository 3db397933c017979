//! Property tests of the frame codec: every valid frame survives being split at every byte
//! boundary, frames back to back come out one by one consuming exactly their bytes, random
//! bytes never panic a decoder, and an oversize length is refused with only its varint read.

use bps_proto::{
    Ack, Broadcast, CohortSpec, FRAME_BYTES_MAX_DEFAULT, FrameError, FrameHeader, Join,
    SOC_BYTES_MAX, decode_ack, decode_broadcast, decode_join, decode_roster, encode_frame,
    next_frame, peek_frame, validate_join,
};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq)]
enum Frame {
    Join(Join),
    Ack(Ack),
    Broadcast(Broadcast),
}

impl Frame {
    fn encode(&self) -> Bytes {
        match self {
            Self::Join(join) => encode_frame(join),
            Self::Ack(ack) => encode_frame(ack),
            Self::Broadcast(broadcast) => encode_frame(broadcast),
        }
    }

    /// Decodes `body` as the same frame type as `self`.
    fn decode_like(&self, body: Bytes) -> Frame {
        match self {
            Self::Join(_) => Self::Join(decode_join(body).expect("valid Join")),
            Self::Ack(_) => Self::Ack(decode_ack(body).expect("valid Ack")),
            Self::Broadcast(_) => Self::Broadcast(decode_broadcast(body).expect("valid Broadcast")),
        }
    }
}

fn bytes_up_to(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

/// Mostly the meaningful enum values, sometimes anything (unknown values must round-trip).
fn enum_value() -> impl Strategy<Value = i32> {
    prop_oneof![4 => 0..6i32, 1 => any::<i32>()]
}

fn join() -> impl Strategy<Value = Join> {
    let cohort = (
        bytes_up_to(40),
        enum_value(),
        bytes_up_to(24),
        enum_value(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(topic, binding, admin, publishers, history, closed)| CohortSpec {
                topic,
                binding,
                admin,
                publishers,
                history,
                closed,
            },
        );
    (proptest::option::of(cohort), bytes_up_to(24)).prop_map(|(cohort, addr)| Join { cohort, addr })
}

fn ack() -> impl Strategy<Value = Ack> {
    (enum_value(), bytes_up_to(40)).prop_map(|(status, challenge)| Ack { status, challenge })
}

fn broadcast_with(soc: impl Strategy<Value = Bytes>) -> impl Strategy<Value = Broadcast> {
    (soc, enum_value(), bytes_up_to(40), any::<u64>()).prop_map(|(soc, kind, challenge, index)| {
        Broadcast {
            soc,
            kind,
            challenge,
            index,
        }
    })
}

fn frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        join().prop_map(Frame::Join),
        ack().prop_map(Frame::Ack),
        broadcast_with(bytes_up_to(300)).prop_map(Frame::Broadcast),
    ]
}

fn full_soc() -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), SOC_BYTES_MAX).prop_map(Bytes::from)
}

/// Feeds `encoded` split at every byte boundary: the prefix, a `next_frame` call, the rest,
/// another call. Returns the decoded frame of every split (they must all agree).
fn check_every_split(frame: &Frame) -> Result<(), TestCaseError> {
    let encoded = frame.encode();
    let header = peek_frame(&encoded, FRAME_BYTES_MAX_DEFAULT)
        .expect("valid length")
        .expect("complete varint");
    prop_assert_eq!(header.total_bytes(), encoded.len());
    for split in 0..=encoded.len() {
        let mut buf = BytesMut::from(&encoded[..split]);
        let early = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT).expect("valid prefix");
        let body = if split < encoded.len() {
            prop_assert_eq!(early, None, "split {}", split);
            prop_assert_eq!(&buf[..], &encoded[..split], "need-more consumes nothing");
            buf.extend_from_slice(&encoded[split..]);
            next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
                .expect("valid frame")
                .expect("complete frame")
        } else {
            early.expect("complete frame")
        };
        prop_assert!(buf.is_empty(), "split {} left {} bytes", split, buf.len());
        prop_assert_eq!(&body[..], &encoded[header.prefix_bytes..]);
        prop_assert_eq!(&frame.decode_like(body), frame);
    }
    Ok(())
}

fn encode_varint(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}

proptest! {
    #[test]
    fn any_frame_survives_every_split(frame in frame()) {
        check_every_split(&frame)?;
    }

    #[test]
    fn frames_back_to_back_come_out_one_by_one(
        frames in proptest::collection::vec(frame(), 1..6),
    ) {
        let encoded: Vec<Bytes> = frames.iter().map(Frame::encode).collect();
        let stream: Vec<u8> = encoded.concat();
        for split in 0..=stream.len() {
            let mut buf = BytesMut::new();
            let mut consumed = 0;
            let mut decoded = Vec::new();
            for fed in [split, stream.len()] {
                buf.extend_from_slice(&stream[buf.len() + consumed..fed]);
                while let Some(body) = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
                    .expect("valid stream")
                {
                    let frame = &frames[decoded.len()];
                    let whole = &encoded[decoded.len()];
                    prop_assert_eq!(&body[..], &whole[whole.len() - body.len()..]);
                    consumed += whole.len();
                    prop_assert_eq!(&buf[..], &stream[consumed..fed], "exactly one frame consumed");
                    decoded.push(frame.decode_like(body));
                }
            }
            prop_assert_eq!(&decoded, &frames);
            prop_assert!(buf.is_empty());
        }
    }

    #[test]
    fn random_bytes_never_panic_a_decoder(
        raw in proptest::collection::vec(any::<u8>(), 0..600),
        frame_bytes_max in 0usize..10_000,
    ) {
        let mut buf = BytesMut::from(&raw[..]);
        while let Ok(Some(body)) = next_frame(&mut buf, frame_bytes_max) {
            prop_assert!(body.len() <= frame_bytes_max);
            if let Ok(join) = decode_join(body.clone()) {
                // Validation must not panic either, whatever it answers.
                let _verdict = validate_join(&join);
            }
            let _ack = decode_ack(body.clone());
            let _broadcast = decode_broadcast(body.clone());
            let _roster = decode_roster(&body);
        }
        let raw = Bytes::from(raw);
        if let Ok(join) = decode_join(raw.clone()) {
            let _verdict = validate_join(&join);
        }
        let _ack = decode_ack(raw.clone());
        let _broadcast = decode_broadcast(raw.clone());
        let _roster = decode_roster(&raw);
    }

    #[test]
    fn oversize_length_is_refused_with_only_the_varint(
        frame_bytes_max in 0usize..100_000,
        excess in 1u64..u64::MAX,
    ) {
        let declared = (frame_bytes_max as u64).saturating_add(excess);
        let varint = encode_varint(declared);
        for end in 0..varint.len() {
            let mut partial = BytesMut::from(&varint[..end]);
            prop_assert_eq!(next_frame(&mut partial, frame_bytes_max), Ok(None));
        }
        let mut buf = BytesMut::from(&varint[..]);
        let refused = FrameError::TooLarge { bytes: declared, max: frame_bytes_max };
        prop_assert_eq!(next_frame(&mut buf, frame_bytes_max), Err(refused));
        prop_assert_eq!(&buf[..], &varint[..], "nothing consumed");
        prop_assert_eq!(peek_frame(&varint, frame_bytes_max), Err(refused));
    }
}

proptest! {
    // Each case splits a 4.2 KB frame at every one of its ~4,260 boundaries.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn a_full_size_broadcast_survives_every_split(broadcast in broadcast_with(full_soc())) {
        check_every_split(&Frame::Broadcast(broadcast))?;
    }
}

#[test]
fn length_varint_longer_than_ten_bytes_is_an_error() {
    // Ten bytes, all with the continuation bit: no valid u64 varint continues past them.
    let mut buf = BytesMut::from(&[0x80u8; 10][..]);
    assert_eq!(
        next_frame(&mut buf, usize::MAX),
        Err(FrameError::VarintTooLong)
    );
    // Nine of them are still an incomplete length, not an error.
    let mut buf = BytesMut::from(&[0x80u8; 9][..]);
    assert_eq!(next_frame(&mut buf, usize::MAX), Ok(None));
}

#[test]
fn length_varint_beyond_64_bits_is_an_error() {
    let mut overflowing = vec![0xffu8; 9];
    overflowing.push(0x02);
    let mut buf = BytesMut::from(&overflowing[..]);
    assert_eq!(
        next_frame(&mut buf, usize::MAX),
        Err(FrameError::VarintOverflow)
    );
}

#[test]
fn a_length_whose_frame_size_overflows_is_too_large() {
    // u64::MAX with a cap of usize::MAX: the body fits the cap, the whole frame cannot.
    let varint = encode_varint(u64::MAX);
    assert_eq!(varint.len(), 10);
    let expected = FrameError::TooLarge {
        bytes: u64::MAX,
        max: usize::MAX,
    };
    assert_eq!(peek_frame(&varint, usize::MAX), Err(expected));
}

#[test]
fn an_empty_body_is_a_frame() {
    let mut buf = BytesMut::from(&[0x00u8, 0x00][..]);
    assert_eq!(
        next_frame(&mut buf, 0).expect("valid").expect("complete"),
        Bytes::new()
    );
    assert_eq!(&buf[..], &[0x00], "only the first frame consumed");
    assert_eq!(
        decode_broadcast(Bytes::new()),
        Ok(Broadcast::default()),
        "an all-default message encodes to nothing"
    );
}

#[test]
fn a_non_minimal_length_varint_is_accepted() {
    // 0x83 0x00 is 3 written in two bytes; protobuf decoders accept it, and so do we.
    let mut buf = BytesMut::from(&[0x83u8, 0x00, 1, 2, 3][..]);
    assert_eq!(
        peek_frame(&buf, 16),
        Ok(Some(FrameHeader {
            prefix_bytes: 2,
            body_bytes: 3
        }))
    );
    assert_eq!(
        next_frame(&mut buf, 16),
        Ok(Some(Bytes::from_static(&[1, 2, 3])))
    );
}

#[test]
fn the_cap_is_inclusive() {
    let frame = encode_frame(&Broadcast {
        soc: Bytes::from(vec![1; 10]),
        ..Broadcast::default()
    });
    let body_bytes = frame.len() - 1;
    let mut buf = BytesMut::from(&frame[..]);
    assert_eq!(
        next_frame(&mut buf, body_bytes - 1),
        Err(FrameError::TooLarge {
            bytes: body_bytes as u64,
            max: body_bytes - 1
        })
    );
    assert!(matches!(next_frame(&mut buf, body_bytes), Ok(Some(_))));
}
