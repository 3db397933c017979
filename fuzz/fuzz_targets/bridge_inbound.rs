//! Fuzz target `bridge_inbound`: a bridge publisher's binary message (W4, W10) and the W5
//! `POST /pubsub/{topic}/service` body: `parse_inbound` under each of its three layouts and
//! `Inbound::to_frame`, the assembly into the BPS frame a native client would have sent.
//!
//! Input: `mode (1) ‖ challenge (32) ‖ rest`.
//! - Mode bit 7 clear, a session message: the mode's bits 0-2 pick the binding (modulo 5),
//!   bit 3 sets an admin (explicit; bit 4 also `ALL`); `rest` is `topic (32) ‖ admin (20) ‖
//!   message`.
//! - Mode bit 7 set, a W5 POST: `rest` is a whole request, head and body, run through the
//!   pure steps the service endpoint takes: `parse_request_head` under the broker's bounds
//!   (8 KiB, 64 headers), the topic between `/pubsub/` and `/service` (the broker's routing
//!   is I/O code this target cannot call; any other path is read whole as the topic),
//!   `Lookup`, `parse_topic`, `parse_spec`, an admin required, the body (every byte after
//!   the head, as `Content-Length` would frame it) at most 4201 bytes, `parse_inbound`, a
//!   ROSTER or EOS kind, then `to_frame` for the input's challenge and for a second one (W5
//!   tries each live admin stream's challenge).
//!
//! Asserts, against the table of the module (docs/PROTOCOL.md §9, W10) restated here with
//! ids from `bps_fuzz::keccak_reference`:
//! - the layout's prefix, the `TooShort` bound and the 4096-byte payload bound, exactly;
//! - the kind (the raw byte, or DATA) and the index (big-endian, or 0);
//! - the assembled frame is one whole frame (`Frame::parse_exact` under `usize::MAX`, which
//!   the broker's service endpoint `expect`s, and under TCP's default 8192-byte bound), and
//!   its `Broadcast` carries `id ‖ sig ‖ span ‖ payload` with the id of the layout (the
//!   session-feed id of a known kind, all zeros for an unknown one, the feed id, the
//!   message's own), the raw kind, the challenge only under an admin, and the index.

#![no_main]

use bps_fuzz::keccak_reference;
use bps_fuzz::reader::Reader;
use bps_proto::{Binding, FRAME_BYTES_MAX_DEFAULT, Frame, Spec, decode_broadcast, next_frame};
use bps_ws::bridge::{INBOUND_BYTES_MAX, PAYLOAD_BYTES_MAX};
use bps_ws::{InboundError, Lookup, parse_inbound, parse_request_head, parse_spec, parse_topic};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

/// The broker's request-head bounds (`broker/src/io/ws/connection.rs`).
const HEAD_BYTES_MAX: usize = 8 * 1024;
const HEADERS_MAX: usize = 64;
/// The fixed parts of every layout after its prefix: `sig (65) ‖ span (8)`.
const SIGNED_FIXED_BYTES: usize = 65 + 8;
/// D2: the session topic of every kind but DATA starts with this and the kind's byte.
const SERVICE_PREFIX: &[u8] = b"bps-service:v1";
/// DATA's wire value (docs/PROTOCOL.md); the known kinds are 1 to 4.
const KIND_DATA: u8 = 1;
const BINDINGS: [Binding; 5] = [
    Binding::Mnemonic,
    Binding::Anchor,
    Binding::SocId,
    Binding::Owner,
    Binding::FeedTopic,
];

/// The id a message's chunk must carry, and the prefix the message has, per the layout.
fn model(spec: &Spec, message: &[u8], challenge: &[u8; 32]) -> (usize, u8, u64, [u8; 32]) {
    let be64 = |bytes: &[u8]| {
        bytes
            .iter()
            .fold(0u64, |value, byte| value << 8 | u64::from(*byte))
    };
    if spec.admin.is_some() {
        let (kind, index) = (message[0], be64(&message[1..9]));
        let id = if (1..=4).contains(&kind) {
            let service: &[u8] = if kind == KIND_DATA {
                &[]
            } else {
                SERVICE_PREFIX
            };
            let kind_byte: &[u8] = if kind == KIND_DATA { &[] } else { &[kind] };
            let session =
                keccak_reference::keccak256(&[service, kind_byte, &spec.topic, challenge]);
            keccak_reference::feed_id(&session, index)
        } else {
            [0; 32]
        };
        (9, kind, index, id)
    } else if spec.binding == Binding::FeedTopic {
        let index = be64(&message[..8]);
        (
            8,
            KIND_DATA,
            index,
            keccak_reference::feed_id(&spec.topic, index),
        )
    } else {
        let mut id = [0; 32];
        id.copy_from_slice(&message[..32]);
        (32, KIND_DATA, 0, id)
    }
}

fn prefix_bytes(spec: &Spec) -> usize {
    match (spec.admin, spec.binding) {
        (Some(_), _) => 9,
        (None, Binding::FeedTopic) => 8,
        (None, _) => 32,
    }
}

/// Parses and assembles `message` under `spec` for each challenge, checking everything
/// against the model.
fn check_message(spec: &Spec, message: &[u8], challenges: &[[u8; 32]]) {
    let prefix = prefix_bytes(spec);
    let min = prefix + SIGNED_FIXED_BYTES;
    let inbound = match parse_inbound(message, spec) {
        Ok(inbound) => inbound,
        Err(error) => {
            match error {
                InboundError::TooShort {
                    bytes, min: bound, ..
                } => {
                    assert_eq!((bytes, bound), (message.len(), min));
                    assert!(message.len() < min);
                }
                InboundError::PayloadTooLarge { bytes, max } => {
                    assert_eq!(max, PAYLOAD_BYTES_MAX);
                    assert_eq!(bytes, message.len() - min);
                    assert!(bytes > PAYLOAD_BYTES_MAX);
                }
            }
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    assert!(message.len() >= min && message.len() - min <= PAYLOAD_BYTES_MAX);
    assert!(message.len() <= INBOUND_BYTES_MAX);
    for challenge in challenges {
        let (prefix, kind, index, id) = model(spec, message, challenge);
        assert_eq!(inbound.kind(), i32::from(kind));
        assert_eq!(inbound.index(), index);
        let assembled = inbound.to_frame(challenge);
        assert!(Frame::parse_exact(assembled.clone(), usize::MAX).is_ok());
        assert!(Frame::parse_exact(assembled.clone(), FRAME_BYTES_MAX_DEFAULT).is_ok());
        let mut buf = BytesMut::from(&assembled[..]);
        let body = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
            .expect("one frame")
            .expect("whole");
        assert!(buf.is_empty());
        let broadcast = decode_broadcast(body).expect("a Broadcast");
        assert_eq!(&broadcast.soc[..32], &id);
        assert_eq!(&broadcast.soc[32..], &message[prefix..]);
        assert_eq!(broadcast.kind, i32::from(kind));
        assert_eq!(broadcast.index, index);
        let carried: &[u8] = if spec.admin.is_some() { challenge } else { &[] };
        assert_eq!(&broadcast.challenge[..], carried);
    }
}

/// The W5 endpoint's pure steps on one request.
fn check_post(request: &[u8], challenge: [u8; 32]) {
    let Ok(Some((head, used))) = parse_request_head(request, HEAD_BYTES_MAX, HEADERS_MAX) else {
        return;
    };
    let Ok(lookup) = Lookup::new(&head) else {
        return;
    };
    let segment = head
        .path
        .strip_prefix("/pubsub/")
        .and_then(|rest| rest.strip_suffix("/service"))
        .unwrap_or(&head.path);
    let Ok(spec) = parse_topic(segment).and_then(|topic| parse_spec(topic, &lookup)) else {
        return;
    };
    assert!(spec.check().is_ok());
    let body = &request[used..];
    if spec.admin.is_none() || body.len() > INBOUND_BYTES_MAX {
        return;
    }
    let mut second = challenge;
    second[0] ^= 0xff;
    // The endpoint assembles only ROSTER and EOS; every kind is assembled here, a superset.
    check_message(&spec, body, &[challenge, second]);
}

fuzz_target!(|data: &[u8]| {
    let mut reader = Reader::new(data);
    let mode = reader.byte();
    let challenge = reader.array::<32>();
    if mode & 0x80 != 0 {
        check_post(reader.rest(), challenge);
        return;
    }
    let topic = reader.array::<32>();
    let admin = reader.array::<20>();
    let spec = Spec {
        topic,
        binding: BINDINGS[usize::from(mode & 0x07) % BINDINGS.len()],
        admin: (mode & 0x08 != 0).then_some(admin),
        all: mode & 0x18 == 0x18,
        history: false,
        closed: false,
    };
    check_message(&spec, reader.rest(), &[challenge]);
});
