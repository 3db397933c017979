//! Fuzz target `broadcast`: `decode_broadcast` on an arbitrary Broadcast body, and
//! `kind_from_i32` on the decoded kind and on an arbitrary `i32`.
//!
//! Asserts:
//! - a body that does not decode is a `DecodeError` naming `Broadcast` and the body's size;
//! - a decoded Broadcast re-encoded decodes to an equal Broadcast, both as a bare body and
//!   through `encode_frame` and `next_frame`; an unknown kind survives as its `i32` (R14);
//! - `soc` and `challenge` are zero-copy slices of the body (what the broker forwards);
//! - `kind_from_i32` accepts exactly the specified kinds of `bps.proto` (DATA 1, AUTH 2,
//!   ROSTER 3, EOS 4) and returns the kind with that value; 0 and everything else is `None`.

#![no_main]

use bps_fuzz::reader::Reader;
use bps_proto::{
    Broadcast, FrameType, Kind, decode_broadcast, encode_frame, kind_from_i32, next_frame,
};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// The specified kinds by wire value, from `bps.proto`.
fn model_kind(value: i32) -> Option<Kind> {
    match value {
        1 => Some(Kind::Data),
        2 => Some(Kind::Auth),
        3 => Some(Kind::Roster),
        4 => Some(Kind::Eos),
        _ => None,
    }
}

fn check_kind(value: i32) {
    let kind = kind_from_i32(value);
    assert_eq!(kind, model_kind(value), "kind {value}");
    if let Some(kind) = kind {
        assert_eq!(kind as i32, value);
    }
}

/// `field` is empty or lies inside `body`'s bytes.
fn assert_slice_of(field: &Bytes, body: &Bytes, name: &str) {
    if field.is_empty() {
        return;
    }
    let body_start = body.as_ptr() as usize;
    let field_start = field.as_ptr() as usize;
    assert!(
        field_start >= body_start && field_start + field.len() <= body_start + body.len(),
        "{name} is copied, not sliced from the body"
    );
}

fn check_round_trip(broadcast: &Broadcast) {
    let reencoded = Bytes::from(broadcast.encode_to_vec());
    assert_eq!(
        decode_broadcast(reencoded.clone()).as_ref(),
        Ok(broadcast),
        "re-encoded body"
    );
    let frame = encode_frame(broadcast);
    let mut buf = BytesMut::from(&frame[..]);
    let body = next_frame(&mut buf, usize::MAX)
        .expect("an encoded frame has a valid length")
        .expect("an encoded frame is complete");
    assert!(buf.is_empty(), "one frame, nothing left");
    assert_eq!(body, reencoded);
    assert_eq!(
        decode_broadcast(body).as_ref(),
        Ok(broadcast),
        "through a frame"
    );
}

fuzz_target!(|input: &[u8]| {
    check_kind(i32::from_le_bytes(Reader::new(input).array()));
    let body = Bytes::copy_from_slice(input);
    let broadcast = match decode_broadcast(body.clone()) {
        Ok(broadcast) => broadcast,
        Err(error) => {
            assert_eq!(
                (error.frame, error.bytes),
                (FrameType::Broadcast, input.len())
            );
            return;
        }
    };
    check_kind(broadcast.kind);
    assert_slice_of(&broadcast.soc, &body, "soc");
    assert_slice_of(&broadcast.challenge, &body, "challenge");
    check_round_trip(&broadcast);
});
