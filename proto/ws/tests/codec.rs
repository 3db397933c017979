//! RFC 6455 framing through the public API: the RFC's own example frames (section 5.7), every
//! rule a receiver checks, partial reads at every byte boundary, and a round trip of random
//! fragmented messages.

use bps_ws::codec::{CloseFrame, Decoder, Event, Opcode, ProtocolError, encode_client_frame};
use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
const BOUND_BYTES: usize = 100_000;

/// Decodes everything in `wire` at once; the events up to the first error, then the error.
fn decode_all(decoder: &mut Decoder, wire: &[u8]) -> (Vec<Event>, Option<ProtocolError>) {
    let mut buf = BytesMut::from(wire);
    let mut events = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return (events, None),
            Err(error) => return (events, Some(error)),
        }
    }
}

fn server_error(wire: &[u8]) -> ProtocolError {
    match decode_all(&mut Decoder::new(BOUND_BYTES), wire) {
        (_, Some(error)) => error,
        (events, None) => panic!("expected an error, decoded {events:?}"),
    }
}

fn binary(payload: &[u8]) -> Event {
    Event::Message {
        text: false,
        payload: Bytes::copy_from_slice(payload),
    }
}

fn text(payload: &str) -> Event {
    Event::Message {
        text: true,
        payload: Bytes::copy_from_slice(payload.as_bytes()),
    }
}

#[test]
fn rfc_single_frame_unmasked_text_to_a_client() {
    let wire = [0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    let (events, error) = decode_all(&mut Decoder::client(BOUND_BYTES), &wire);
    assert_eq!((events, error), (vec![text("Hello")], None));
    assert_eq!(server_error(&wire), ProtocolError::Unmasked);
}

#[test]
fn rfc_single_frame_masked_text_to_a_server() {
    let wire = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &wire);
    assert_eq!((events, error), (vec![text("Hello")], None));
    let (_, error) = decode_all(&mut Decoder::client(BOUND_BYTES), &wire);
    assert_eq!(error, Some(ProtocolError::Masked));
}

#[test]
fn rfc_fragmented_unmasked_text() {
    let wire = [0x01, 0x03, 0x48, 0x65, 0x6c, 0x80, 0x02, 0x6c, 0x6f];
    let (events, error) = decode_all(&mut Decoder::client(BOUND_BYTES), &wire);
    assert_eq!((events, error), (vec![text("Hello")], None));
}

#[test]
fn rfc_unmasked_ping_and_masked_pong() {
    let ping = [0x89, 0x05, 0x48, 0x65, 0x6c, 0x6c, 0x6f];
    let (events, _) = decode_all(&mut Decoder::client(BOUND_BYTES), &ping);
    assert_eq!(events, vec![Event::Ping(Bytes::from_static(b"Hello"))]);
    let pong = [
        0x8a, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let (events, _) = decode_all(&mut Decoder::new(BOUND_BYTES), &pong);
    assert_eq!(events, vec![Event::Pong(Bytes::from_static(b"Hello"))]);
}

#[test]
fn rfc_256_and_65536_byte_binary_messages_in_one_unmasked_frame() {
    let payload: Vec<u8> = (0..=255u8).collect();
    let wire = [[0x82, 0x7e, 0x01, 0x00].as_slice(), &payload].concat();
    let (events, error) = decode_all(&mut Decoder::client(BOUND_BYTES), &wire);
    assert_eq!((events, error), (vec![binary(&payload)], None));

    let payload: Vec<u8> = (0..65536u32).map(|value| (value % 251) as u8).collect();
    let header = [0x82, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00];
    let wire = [header.as_slice(), &payload].concat();
    let (events, error) = decode_all(&mut Decoder::client(BOUND_BYTES), &wire);
    assert_eq!((events, error), (vec![binary(&payload)], None));
}

#[test]
fn an_unfragmented_message_is_a_slice_of_the_read_buffer() {
    let wire = encode_client_frame(Opcode::Binary, true, &[7u8; 300], MASK);
    let mut buf = BytesMut::from(wire.as_slice());
    let start = buf.as_ptr() as usize;
    let Ok(Some(Event::Message { payload, .. })) = Decoder::new(BOUND_BYTES).decode(&mut buf)
    else {
        panic!("a whole binary message");
    };
    assert_eq!(payload.as_ptr() as usize, start + 8, "unmasked in place");
    assert_eq!(payload, Bytes::from(vec![7u8; 300]));
    assert!(buf.is_empty());
}

#[test]
fn reserved_bits_and_reserved_opcodes_are_refused() {
    for bits in [0x40u8, 0x20, 0x10, 0x70] {
        let mut wire = encode_client_frame(Opcode::Text, true, b"x", MASK);
        wire[0] |= bits;
        assert_eq!(server_error(&wire), ProtocolError::ReservedBits { bits });
    }
    for opcode in (0x3u8..=0x7).chain(0xb..=0xf) {
        let mut wire = encode_client_frame(Opcode::Binary, true, b"", MASK);
        wire[0] = 0x80 | opcode;
        assert_eq!(server_error(&wire), ProtocolError::UnknownOpcode { opcode });
    }
}

#[test]
fn control_frames_are_whole_and_short() {
    for opcode in [Opcode::Ping, Opcode::Pong, Opcode::Close] {
        let fragmented = encode_client_frame(opcode, false, b"", MASK);
        assert_eq!(
            server_error(&fragmented),
            ProtocolError::FragmentedControl { opcode }
        );
        let long = encode_client_frame(opcode, true, &[0u8; 126], MASK);
        assert_eq!(
            server_error(&long),
            ProtocolError::ControlTooLong { opcode }
        );
        // A close code and a 123-byte reason: 125 bytes, valid for every control opcode.
        let payload: Vec<u8> = [0x03, 0xe8].into_iter().chain([b'a'; 123]).collect();
        let at_bound = encode_client_frame(opcode, true, &payload, MASK);
        let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &at_bound);
        assert_eq!((events.len(), error), (1, None), "{opcode} of 125 bytes");
    }
    // The bound is refused from the length code alone, before any payload arrives.
    let header_only = &encode_client_frame(Opcode::Ping, true, &[0u8; 200], MASK)[..2];
    assert_eq!(
        server_error(header_only),
        ProtocolError::ControlTooLong {
            opcode: Opcode::Ping
        }
    );
}

#[test]
fn continuation_only_inside_a_message_and_no_message_inside_one() {
    let continuation = encode_client_frame(Opcode::Continuation, true, b"x", MASK);
    assert_eq!(
        server_error(&continuation),
        ProtocolError::ContinuationWithoutMessage
    );
    for opcode in [Opcode::Text, Opcode::Binary] {
        let wire = [
            encode_client_frame(Opcode::Binary, false, b"first", MASK),
            encode_client_frame(opcode, true, b"second", MASK),
        ]
        .concat();
        assert_eq!(
            server_error(&wire),
            ProtocolError::MessageInProgress { opcode }
        );
    }
    // A finished message ends the state: a continuation after it is refused again.
    let wire = [
        encode_client_frame(Opcode::Binary, false, b"a", MASK),
        encode_client_frame(Opcode::Continuation, true, b"b", MASK),
        encode_client_frame(Opcode::Continuation, true, b"c", MASK),
    ]
    .concat();
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &wire);
    assert_eq!(events, vec![binary(b"ab")]);
    assert_eq!(error, Some(ProtocolError::ContinuationWithoutMessage));
}

#[test]
fn control_frames_between_fragments_are_delivered_in_order() {
    let wire = [
        encode_client_frame(Opcode::Text, false, "Hé".as_bytes(), MASK),
        encode_client_frame(Opcode::Ping, true, b"p1", [9, 8, 7, 6]),
        encode_client_frame(Opcode::Continuation, false, b"ll", [1, 1, 1, 1]),
        encode_client_frame(Opcode::Pong, true, b"", MASK),
        encode_client_frame(Opcode::Ping, true, b"p2", MASK),
        encode_client_frame(Opcode::Continuation, true, b"o", [0, 0, 0, 0]),
        encode_client_frame(Opcode::Binary, true, b"next", MASK),
    ]
    .concat();
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &wire);
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            Event::Ping(Bytes::from_static(b"p1")),
            Event::Pong(Bytes::new()),
            Event::Ping(Bytes::from_static(b"p2")),
            text("Héllo"),
            binary(b"next"),
        ]
    );
}

#[test]
fn lengths_must_be_minimal_and_below_the_top_bit() {
    // 125 in the 16-bit form, 0xffff and 0 in the 64-bit form.
    let wire16 = [0x82, 0xfe, 0x00, 0x7d, 0, 0, 0, 0];
    assert_eq!(
        server_error(&wire16),
        ProtocolError::NonMinimalLength { bytes: 125 }
    );
    let mut wire64 = vec![0x82, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
    assert_eq!(
        server_error(&wire64),
        ProtocolError::NonMinimalLength { bytes: 0xffff }
    );
    wire64[8..10].copy_from_slice(&[0, 0]);
    assert_eq!(
        server_error(&wire64),
        ProtocolError::NonMinimalLength { bytes: 0 }
    );
    let top_bit = [0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(server_error(&top_bit), ProtocolError::LengthTopBit);
    // The shortest forms at the boundaries are fine.
    for length in [125usize, 126, 0xffff, 0x1_0000] {
        let wire = encode_client_frame(Opcode::Binary, true, &vec![1u8; length], MASK);
        let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &wire);
        assert_eq!((events.len(), error), (1, None), "{length}");
    }
}

#[test]
fn a_frame_over_the_bound_is_refused_from_its_header_alone() {
    let mut decoder = Decoder::new(1000);
    let wire = encode_client_frame(Opcode::Binary, true, &[0u8; 1001], MASK);
    let mut buf = BytesMut::from(&wire[..4]);
    assert_eq!(
        decoder.decode(&mut buf),
        Err(ProtocolError::MessageTooBig {
            bytes: 1001,
            max: 1000
        })
    );
    // A 64-bit length far beyond any memory, with nothing after it.
    let huge = [0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    assert_eq!(
        server_error(&huge),
        ProtocolError::MessageTooBig {
            bytes: 0x7fff_ffff_ffff_ffff,
            max: BOUND_BYTES
        }
    );
    let exactly = encode_client_frame(Opcode::Binary, true, &[0u8; 1000], MASK);
    let (events, error) = decode_all(&mut Decoder::new(1000), &exactly);
    assert_eq!((events.len(), error), (1, None));
}

#[test]
fn the_bound_counts_every_fragment_of_a_message() {
    let first = encode_client_frame(Opcode::Binary, false, &[1u8; 60], MASK);
    let fits = encode_client_frame(Opcode::Continuation, true, &[2u8; 40], MASK);
    let (events, error) = decode_all(&mut Decoder::new(100), &[first.clone(), fits].concat());
    assert_eq!((events.len(), error), (1, None));

    // The second fragment's header alone, without its payload, is enough to refuse it.
    let over = encode_client_frame(Opcode::Continuation, true, &[2u8; 41], MASK);
    let wire = [first.as_slice(), &over[..2]].concat();
    let (events, error) = decode_all(&mut Decoder::new(100), &wire);
    assert!(events.is_empty());
    assert_eq!(
        error,
        Some(ProtocolError::MessageTooBig {
            bytes: 101,
            max: 100
        })
    );
    // Control frames between fragments do not count toward the message.
    let wire = [
        first,
        encode_client_frame(Opcode::Ping, true, &[0u8; 125], MASK),
        encode_client_frame(Opcode::Continuation, true, &[2u8; 40], MASK),
    ]
    .concat();
    let (events, error) = decode_all(&mut Decoder::new(100), &wire);
    assert_eq!((events.len(), error), (2, None));
}

#[test]
fn text_must_be_utf8_whole_or_across_fragments() {
    let invalid = encode_client_frame(Opcode::Text, true, &[b'o', b'k', 0xc3], MASK);
    assert_eq!(
        server_error(&invalid),
        ProtocolError::InvalidText { valid_up_to: 2 }
    );
    assert_eq!(server_error(&invalid).close_code(), 1007);
    // "é" is 0xc3 0xa9: split across two fragments it is still valid text.
    let split_char = [
        encode_client_frame(Opcode::Text, false, &[0xc3], MASK),
        encode_client_frame(Opcode::Continuation, true, &[0xa9], MASK),
    ]
    .concat();
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &split_char);
    assert_eq!((events, error), (vec![text("é")], None));
    let bad_fragments = [
        encode_client_frame(Opcode::Text, false, b"abc", MASK),
        encode_client_frame(Opcode::Continuation, true, &[0xff], MASK),
    ]
    .concat();
    assert_eq!(
        server_error(&bad_fragments),
        ProtocolError::InvalidText { valid_up_to: 3 }
    );
    // Binary messages are not checked.
    let bytes = encode_client_frame(Opcode::Binary, true, &[0xff, 0xfe], MASK);
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &bytes);
    assert_eq!((events, error), (vec![binary(&[0xff, 0xfe])], None));
}

#[test]
fn close_frames_are_checked_and_end_the_stream() {
    let empty = encode_client_frame(Opcode::Close, true, b"", MASK);
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &empty);
    assert_eq!((events, error), (vec![Event::Close(None)], None));

    let normal = encode_client_frame(Opcode::Close, true, &[0x03, 0xe8, b'o', b'k'], MASK);
    let (events, _) = decode_all(&mut Decoder::new(BOUND_BYTES), &normal);
    assert_eq!(
        events,
        vec![Event::Close(Some(CloseFrame {
            code: 1000,
            reason: "ok".to_owned()
        }))]
    );

    let one_byte = encode_client_frame(Opcode::Close, true, &[0x03], MASK);
    assert_eq!(server_error(&one_byte), ProtocolError::CloseTooShort);
    for code in [0u16, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000] {
        let wire = encode_client_frame(Opcode::Close, true, &code.to_be_bytes(), MASK);
        assert_eq!(server_error(&wire), ProtocolError::CloseCode { code });
    }
    let bad_reason = encode_client_frame(Opcode::Close, true, &[0x03, 0xe8, 0xc0], MASK);
    assert_eq!(
        server_error(&bad_reason),
        ProtocolError::CloseReason { valid_up_to: 0 }
    );

    let after = [normal, encode_client_frame(Opcode::Ping, true, b"", MASK)].concat();
    let (events, error) = decode_all(&mut Decoder::new(BOUND_BYTES), &after);
    assert_eq!(events.len(), 1);
    assert_eq!(error, Some(ProtocolError::FrameAfterClose));
}

/// A conversation with every kind of frame: fragments with control frames between them,
/// both length extensions, a close.
fn conversation() -> (Vec<u8>, Vec<Event>) {
    let long: Vec<u8> = (0..70_000u32).map(|value| (value % 253) as u8).collect();
    let wire = [
        encode_client_frame(Opcode::Text, true, b"Hello", MASK),
        encode_client_frame(Opcode::Binary, false, &long[..300], [1, 2, 3, 4]),
        encode_client_frame(Opcode::Ping, true, b"keep", [5, 6, 7, 8]),
        encode_client_frame(Opcode::Continuation, false, &long[300..301], MASK),
        encode_client_frame(Opcode::Continuation, true, &long[301..], MASK),
        encode_client_frame(Opcode::Pong, true, b"", MASK),
        encode_client_frame(Opcode::Close, true, &[0x0f, 0xa0], MASK),
    ]
    .concat();
    let events = vec![
        text("Hello"),
        Event::Ping(Bytes::from_static(b"keep")),
        binary(&long),
        Event::Pong(Bytes::new()),
        Event::Close(Some(CloseFrame {
            code: 4000,
            reason: String::new(),
        })),
    ];
    (wire, events)
}

#[test]
fn a_conversation_split_at_every_byte_boundary_decodes_the_same() {
    let (wire, expected) = conversation();
    for split in 0..=wire.len() {
        // Skip most boundaries inside the long payload; every header boundary is covered.
        if split > 400 && split < wire.len() - 40 && split % 997 != 0 {
            continue;
        }
        let mut decoder = Decoder::new(BOUND_BYTES);
        let mut buf = BytesMut::from(&wire[..split]);
        let mut events = Vec::new();
        while let Some(event) = decoder.decode(&mut buf).expect("valid frames") {
            events.push(event);
        }
        buf.extend_from_slice(&wire[split..]);
        while let Some(event) = decoder.decode(&mut buf).expect("valid frames") {
            events.push(event);
        }
        assert_eq!(events, expected, "split at {split}");
        assert!(buf.is_empty());
    }
}

#[test]
fn a_conversation_fed_one_byte_at_a_time_decodes_the_same() {
    let (wire, expected) = conversation();
    let mut decoder = Decoder::new(BOUND_BYTES);
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for byte in &wire {
        buf.extend_from_slice(&[*byte]);
        while let Some(event) = decoder.decode(&mut buf).expect("valid frames") {
            events.push(event);
        }
    }
    assert_eq!(events, expected);
}

#[test]
fn bytes_wanted_names_the_missing_bytes_of_the_front_frame() {
    let mut decoder = Decoder::new(BOUND_BYTES);
    let wire = encode_client_frame(Opcode::Binary, true, &[0u8; 300], MASK);
    // 2 base bytes, 2 of 16-bit length, 4 of mask, then the payload.
    let expected = [2usize, 1, 6, 5, 4, 3, 2, 1, 300];
    for (held, wanted) in expected.iter().enumerate() {
        assert_eq!(decoder.bytes_wanted(&wire[..held]), *wanted, "{held} held");
    }
    assert_eq!(decoder.bytes_wanted(&wire[..100]), 208);
    assert_eq!(decoder.bytes_wanted(&wire), 0);
    assert_eq!(
        decoder.bytes_wanted(&[0x82, 0x05]),
        0,
        "unmasked: an error now"
    );
    let mut buf = BytesMut::from(wire.as_slice());
    assert!(matches!(decoder.decode(&mut buf), Ok(Some(_))));
}

/// A message as a browser might send it: cut into fragments, each with its own mask, and
/// pings after some of them.
#[derive(Debug, Clone)]
struct FragmentedMessage {
    is_text: bool,
    payload: Vec<u8>,
    /// Sorted cut points in `0..=payload.len()`; equal cuts make empty fragments.
    cuts: Vec<usize>,
    masks: Vec<[u8; 4]>,
    ping_after: Vec<bool>,
}

impl FragmentedMessage {
    /// The frames on the wire and how many pings they interleave.
    fn wire(&self) -> (Vec<u8>, usize) {
        let mut bounds = vec![0];
        bounds.extend(&self.cuts);
        bounds.push(self.payload.len());
        let fragments = bounds.len() - 1;
        let mut wire = Vec::new();
        let mut pings = 0;
        for fragment in 0..fragments {
            let opcode = match (fragment, self.is_text) {
                (0, true) => Opcode::Text,
                (0, false) => Opcode::Binary,
                _ => Opcode::Continuation,
            };
            let piece = &self.payload[bounds[fragment]..bounds[fragment + 1]];
            let fin = fragment + 1 == fragments;
            wire.extend(encode_client_frame(
                opcode,
                fin,
                piece,
                self.masks[fragment],
            ));
            if !fin && self.ping_after[fragment] {
                let ping = encode_client_frame(Opcode::Ping, true, b"p", self.masks[fragment + 1]);
                wire.extend(ping);
                pings += 1;
            }
        }
        (wire, pings)
    }
}

fn fragmented_message() -> impl Strategy<Value = FragmentedMessage> {
    (
        any::<bool>(),
        proptest::collection::vec(any::<u8>(), 0..2000),
        proptest::collection::vec(0usize..2000, 0..6),
        proptest::collection::vec(any::<[u8; 4]>(), 7),
        proptest::collection::vec(any::<bool>(), 7),
    )
        .prop_map(|(is_text, bytes, mut cuts, masks, ping_after)| {
            let payload = if is_text {
                String::from_utf8_lossy(&bytes).into_owned().into_bytes()
            } else {
                bytes
            };
            cuts.iter_mut().for_each(|cut| *cut %= payload.len() + 1);
            cuts.sort_unstable();
            FragmentedMessage {
                is_text,
                payload,
                cuts,
                masks,
                ping_after,
            }
        })
}

proptest! {
    #[test]
    fn random_fragments_in_random_reads_give_the_message_back(
        message in fragmented_message(),
        read_bytes in 1usize..700,
    ) {
        let (wire, pings) = message.wire();
        let mut decoder = Decoder::new(message.payload.len().max(1));
        let mut buf = BytesMut::new();
        let mut events = Vec::new();
        for read in wire.chunks(read_bytes) {
            buf.extend_from_slice(read);
            while let Some(event) = decoder.decode(&mut buf).expect("valid frames") {
                events.push(event);
            }
        }
        let expected = Event::Message {
            text: message.is_text,
            payload: Bytes::from(message.payload.clone()),
        };
        prop_assert_eq!(events.last(), Some(&expected));
        prop_assert_eq!(events.len(), pings + 1);
        prop_assert!(buf.is_empty());
    }
}
