//! Fuzz target `join`: `decode_join` then `validate_join` on an arbitrary Join body.
//!
//! Asserts:
//! - a body that does not decode is a `DecodeError` naming `Join` and the body's size;
//! - `validate_join` gives the verdict of a model of R3, D6 and D7 built here from docs/PROTOCOL.md
//!   (the same first broken rule, in the documented order);
//! - for a valid Join, the cohort key is the R1 layout built here by hand
//!   (`0A 20 topic 10 binding [1A 14 admin] [20 01] [28 01] [30 01]`), and it is stable:
//!   re-encoding the typed spec and validating again gives the same `ValidJoin`; so does
//!   the body with unknown fields of every wire type added at Join and cohort level, and
//!   with every known field restated, non-minimally where a varint allows it;
//! - the relay path (field 15, read by relay edges) never panics to read; a path that reads
//!   is within `RELAY_PATH_LEN_MAX`, and written again with the Join (`encode_relayed_join`)
//!   it reads back the same, beside the same Join;
//! - the relay id of an Ack (field 15, read by relay edges) never panics to read from any
//!   bytes, and one written after an Ack (`encode_relayed_ack`) reads back.

#![no_main]

use bps_fuzz::varint_reference;
use bps_proto::{
    Ack, Binding, FrameType, Join, RELAY_ID_BYTES, RELAY_PATH_LEN_MAX, RejectReason, RelayId,
    ValidJoin, decode_join, encode_relayed_ack, encode_relayed_join, next_frame, relay_id_of_ack,
    relay_path_of, validate_join,
};
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Protobuf wire types (the encoding spec's numbers).
const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LENGTH_DELIMITED: u64 = 2;
const WIRE_START_GROUP: u64 = 3;
const WIRE_END_GROUP: u64 = 4;
const WIRE_FIXED32: u64 = 5;

/// Field numbers of `bps.proto`'s Join and CohortSpec.
const JOIN_COHORT: u64 = 1;
const JOIN_ADDR: u64 = 2;
const COHORT_TOPIC: u64 = 1;
const COHORT_BINDING: u64 = 2;
const COHORT_ADMIN: u64 = 3;
const COHORT_PUBLISHERS: u64 = 4;
const COHORT_HISTORY: u64 = 5;
const COHORT_CLOSED: u64 = 6;

/// The largest field number protobuf allows.
const FIELD_NUMBER_MAX: u64 = (1 << 29) - 1;

/// The binding of a `TopicBinding` wire value (`bps.proto`), `Err` for the two rejections.
fn model_binding(value: i32) -> Result<Binding, RejectReason> {
    match value {
        0 => Err(RejectReason::BindingUnspecified),
        1 => Ok(Binding::Anchor),
        2 => Ok(Binding::SocId),
        3 => Ok(Binding::Owner),
        4 => Ok(Binding::FeedTopic),
        5 => Ok(Binding::Mnemonic),
        value => Err(RejectReason::BindingUnknown { value }),
    }
}

/// R3, D6 and D7 in the order `validate_join` documents: cohort, binding, publishers, topic,
/// admin, addr, then ALL without admin, ALL without MNEMONIC, closed with ALL, closed
/// without admin.
fn model_verdict(join: &Join) -> Result<(), RejectReason> {
    let cohort = join.cohort.as_ref().ok_or(RejectReason::MissingCohort)?;
    let binding = model_binding(cohort.binding)?;
    let all = match cohort.publishers {
        0 => false,
        1 => true,
        value => return Err(RejectReason::PublishersUnknown { value }),
    };
    if cohort.topic.len() != 32 {
        return Err(RejectReason::TopicLength {
            bytes: cohort.topic.len(),
        });
    }
    let has_admin = match cohort.admin.len() {
        0 => false,
        20 => true,
        bytes => return Err(RejectReason::AdminLength { bytes }),
    };
    if join.addr.len() != 20 {
        return Err(RejectReason::AddrLength {
            bytes: join.addr.len(),
        });
    }
    if all && !has_admin {
        return Err(RejectReason::AllWithoutAdmin);
    }
    if all && binding != Binding::Mnemonic {
        return Err(RejectReason::AllWithoutMnemonic { binding });
    }
    if cohort.closed && all {
        return Err(RejectReason::ClosedWithAll);
    }
    if cohort.closed && !has_admin {
        return Err(RejectReason::ClosedImplicit);
    }
    Ok(())
}

fn key(field: u64, wire_type: u64) -> Vec<u8> {
    varint_reference::encode(field << 3 | wire_type)
}

fn length_delimited(field: u64, content: &[u8]) -> Vec<u8> {
    [
        key(field, WIRE_LENGTH_DELIMITED),
        varint_reference::encode(content.len() as u64),
        content.to_vec(),
    ]
    .concat()
}

/// `value` as a varint one byte longer than needed (a continuation into a zero group).
fn non_minimal_varint(value: u64) -> Vec<u8> {
    let mut encoded = varint_reference::encode(value);
    if encoded.len() == varint_reference::VARINT_BYTES_MAX {
        return encoded;
    }
    if let Some(last) = encoded.last_mut() {
        *last |= 0x80;
    }
    encoded.push(0x00);
    encoded
}

/// One field of every wire type, numbered from `first_unknown` up to the largest number.
fn unknown_fields(first_unknown: u64) -> Vec<u8> {
    [
        key(first_unknown, WIRE_VARINT),
        varint_reference::encode(u64::MAX),
        length_delimited(first_unknown + 1, &[0xff, 0x00, 0x12]),
        key(first_unknown + 100, WIRE_FIXED32),
        vec![1, 2, 3, 4],
        key(FIELD_NUMBER_MAX, WIRE_FIXED64),
        vec![0xff; 8],
        key(first_unknown + 2, WIRE_START_GROUP),
        key(JOIN_COHORT, WIRE_VARINT),
        vec![0x01],
        key(first_unknown + 2, WIRE_END_GROUP),
    ]
    .concat()
}

/// The valid Join's fields written again, as a peer might: every field explicit, varints
/// one byte longer than needed. Merged after the original, it changes nothing.
fn restated_fields(valid: &ValidJoin) -> Vec<u8> {
    let spec = &valid.spec;
    let admin = spec.admin.map_or_else(Vec::new, |admin| admin.to_vec());
    let cohort = [
        length_delimited(COHORT_TOPIC, &spec.topic),
        key(COHORT_BINDING, WIRE_VARINT),
        non_minimal_varint(spec.binding.to_pb() as u64),
        length_delimited(COHORT_ADMIN, &admin),
        key(COHORT_PUBLISHERS, WIRE_VARINT),
        non_minimal_varint(u64::from(spec.all)),
        key(COHORT_HISTORY, WIRE_VARINT),
        non_minimal_varint(u64::from(spec.history)),
        key(COHORT_CLOSED, WIRE_VARINT),
        non_minimal_varint(u64::from(spec.closed)),
    ]
    .concat();
    [
        length_delimited(JOIN_COHORT, &cohort),
        length_delimited(JOIN_ADDR, &valid.addr),
    ]
    .concat()
}

/// The R1 canonical key of a valid spec, byte by byte.
fn model_key(valid: &ValidJoin) -> Vec<u8> {
    let spec = &valid.spec;
    let mut key = vec![0x0a, 0x20];
    key.extend_from_slice(&spec.topic);
    key.extend_from_slice(&[0x10, spec.binding.to_pb() as u8]);
    if let Some(admin) = spec.admin {
        key.extend_from_slice(&[0x1a, 0x14]);
        key.extend_from_slice(&admin);
    }
    for (present, field_key) in [(spec.all, 0x20), (spec.history, 0x28), (spec.closed, 0x30)] {
        if present {
            key.extend_from_slice(&[field_key, 0x01]);
        }
    }
    key
}

fn revalidate(body: Vec<u8>) -> ValidJoin {
    let join = decode_join(Bytes::from(body)).expect("a valid body with fields added decodes");
    validate_join(&join).expect("a valid Join with fields added stays valid")
}

fn check_key_stability(body: &[u8], valid: &ValidJoin) {
    assert_eq!(valid.key, valid.spec.key());
    assert_eq!(valid.key.as_bytes(), &model_key(valid)[..]);
    assert_eq!(valid.spec.to_pb().encode_to_vec(), valid.key.as_bytes());

    let reencoded = valid.spec.to_join(&valid.addr).encode_to_vec();
    assert_eq!(&revalidate(reencoded), valid, "re-encoded spec");

    // Unknown Join fields before and after; unknown cohort fields in a second cohort
    // record, which protobuf merges into the first.
    let noisy = [
        unknown_fields(JOIN_ADDR + 1),
        body.to_vec(),
        unknown_fields(JOIN_ADDR + 1),
        length_delimited(JOIN_COHORT, &unknown_fields(COHORT_CLOSED + 1)),
    ]
    .concat();
    assert_eq!(&revalidate(noisy), valid, "unknown fields");

    let restated = [body.to_vec(), restated_fields(valid)].concat();
    assert_eq!(&revalidate(restated), valid, "restated fields");
}

/// The relay path of `body` (a Join's bytes that decoded as `join`), checked as the module
/// documentation says.
fn check_relay_path(body: &[u8], join: &Join) {
    let Ok(path) = relay_path_of(Bytes::copy_from_slice(body)) else {
        return;
    };
    assert!(path.len() <= RELAY_PATH_LEN_MAX);
    let frame = encode_relayed_join(join, &path);
    let mut buffer = BytesMut::from(frame.as_ref());
    let rewritten = next_frame(&mut buffer, usize::MAX)
        .expect("an encoded frame splits")
        .expect("whole");
    assert_eq!(&decode_join(rewritten.clone()).expect("decodes"), join);
    assert_eq!(relay_path_of(rewritten), Ok(path));
}

/// The Ack relay id of arbitrary bytes, and a written one read back.
fn check_ack_relay(body: &[u8]) {
    let _ = relay_id_of_ack(Bytes::copy_from_slice(body));
    let Some(id) = body.get(..RELAY_ID_BYTES) else {
        return;
    };
    let id = RelayId::try_from(id).expect("16 bytes");
    let ack = Ack {
        status: 1,
        challenge: Bytes::copy_from_slice(&body[RELAY_ID_BYTES..]),
    };
    let frame = encode_relayed_ack(&ack, &id);
    let mut buffer = BytesMut::from(frame.as_ref());
    let written = next_frame(&mut buffer, usize::MAX)
        .expect("an encoded frame splits")
        .expect("whole");
    assert_eq!(relay_id_of_ack(written), Some(id));
}

fuzz_target!(|body: &[u8]| {
    check_ack_relay(body);
    let join = match decode_join(Bytes::copy_from_slice(body)) {
        Ok(join) => join,
        Err(error) => {
            assert_eq!((error.frame, error.bytes), (FrameType::Join, body.len()));
            // Whatever the bytes, reading a relay path is an answer, never a panic.
            let _ = relay_path_of(Bytes::copy_from_slice(body));
            return;
        }
    };
    check_relay_path(body, &join);
    let verdict = validate_join(&join);
    assert_eq!(
        verdict.as_ref().map(|_| ()).map_err(|reason| *reason),
        model_verdict(&join),
        "{join:?}"
    );
    if let Ok(valid) = verdict {
        assert_eq!(valid.addr.as_slice(), &join.addr[..]);
        check_key_stability(body, &valid);
    }
});
