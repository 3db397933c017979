//! Fuzz target `roster`: `decode_roster` on an arbitrary ROSTER payload.
//!
//! Asserts, against a protobuf reader for `Roster { repeated bytes publishers = 1 }` written
//! here from the protobuf encoding rules (keys, the six wire types, groups, the nesting
//! limit of 100 that prost and the C++ implementation share):
//! - `decode_roster` is `Malformed` exactly when the payload is not a valid `Roster`;
//! - otherwise it is `Ok` exactly when every entry is 20 bytes, with the entries in order
//!   (duplicates kept), and else `EntryLength` naming the first bad entry and its size;
//! - for a valid roster, `encode_roster` gives the canonical bytes (`0A 14 <entry>` per
//!   entry, built here by hand) and decoding those gives the same list back.

#![no_main]

use bps_fuzz::varint_reference::{self, Varint};
use bps_proto::{RosterError, decode_roster, encode_roster};
use libfuzzer_sys::fuzz_target;

/// Protobuf wire types (the encoding spec's numbers).
const WIRE_VARINT: u64 = 0;
const WIRE_FIXED64: u64 = 1;
const WIRE_LENGTH_DELIMITED: u64 = 2;
const WIRE_START_GROUP: u64 = 3;
const WIRE_END_GROUP: u64 = 4;
const WIRE_FIXED32: u64 = 5;

/// Field number of `Roster.publishers` (`bps.proto`, decision D1).
const PUBLISHERS_FIELD: u64 = 1;

/// Nested skips allowed before a decoder gives up (protobuf's default recursion limit).
const NESTING_MAX: u32 = 100;

/// The payload is not a valid `Roster`.
#[derive(Debug)]
struct Malformed;

/// A cursor over the payload with the protobuf primitives.
struct Wire<'a> {
    rest: &'a [u8],
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Result<u64, Malformed> {
        match varint_reference::decode(self.rest) {
            Varint::Value { value, bytes } => {
                self.rest = &self.rest[bytes..];
                Ok(value)
            }
            Varint::Incomplete | Varint::TooLong | Varint::Overflow => Err(Malformed),
        }
    }

    /// A field key: a 32-bit value, a wire type of 0..=5 and a field number of at least 1.
    fn key(&mut self) -> Result<(u64, u64), Malformed> {
        let key = self.varint()?;
        if key > u64::from(u32::MAX) || key & 0x07 > WIRE_FIXED32 || key >> 3 == 0 {
            return Err(Malformed);
        }
        Ok((key >> 3, key & 0x07))
    }

    fn take(&mut self, bytes: u64) -> Result<&'a [u8], Malformed> {
        let bytes = usize::try_from(bytes).map_err(|_| Malformed)?;
        if bytes > self.rest.len() {
            return Err(Malformed);
        }
        let (taken, rest) = self.rest.split_at(bytes);
        self.rest = rest;
        Ok(taken)
    }

    /// Skips an unknown field's value; `nesting_left` is the recursion budget.
    fn skip(&mut self, field: u64, wire_type: u64, nesting_left: u32) -> Result<(), Malformed> {
        if nesting_left == 0 {
            return Err(Malformed);
        }
        match wire_type {
            WIRE_VARINT => self.varint().map(|_| ()),
            WIRE_FIXED64 => self.take(8).map(|_| ()),
            WIRE_FIXED32 => self.take(4).map(|_| ()),
            WIRE_LENGTH_DELIMITED => {
                let bytes = self.varint()?;
                self.take(bytes).map(|_| ())
            }
            WIRE_START_GROUP => loop {
                let (inner_field, inner_wire_type) = self.key()?;
                if inner_wire_type == WIRE_END_GROUP {
                    return if inner_field == field {
                        Ok(())
                    } else {
                        Err(Malformed)
                    };
                }
                self.skip(inner_field, inner_wire_type, nesting_left - 1)?;
            },
            _ => Err(Malformed),
        }
    }
}

/// The `publishers` entries of `payload`, in order, if it is a valid `Roster`.
fn model_entries(payload: &[u8]) -> Result<Vec<&[u8]>, Malformed> {
    let mut wire = Wire { rest: payload };
    let mut entries = Vec::new();
    while !wire.rest.is_empty() {
        let (field, wire_type) = wire.key()?;
        if field != PUBLISHERS_FIELD {
            wire.skip(field, wire_type, NESTING_MAX)?;
            continue;
        }
        if wire_type != WIRE_LENGTH_DELIMITED {
            return Err(Malformed);
        }
        let bytes = wire.varint()?;
        entries.push(wire.take(bytes)?);
    }
    Ok(entries)
}

fn check_canonical(publishers: &[[u8; 20]]) {
    let encoded = encode_roster(publishers);
    let canonical: Vec<u8> = publishers
        .iter()
        .flat_map(|entry| [&[0x0a, 0x14][..], entry].concat())
        .collect();
    assert_eq!(encoded, canonical);
    assert_eq!(decode_roster(&encoded).as_ref(), Ok(&publishers.to_vec()));
}

fuzz_target!(|payload: &[u8]| {
    let decoded = decode_roster(payload);
    let entries = match model_entries(payload) {
        Ok(entries) => entries,
        Err(Malformed) => {
            assert!(
                matches!(decoded, Err(RosterError::Malformed { .. })),
                "not a Roster, yet {decoded:?}"
            );
            return;
        }
    };
    match entries.iter().position(|entry| entry.len() != 20) {
        Some(index) => assert_eq!(
            decoded,
            Err(RosterError::EntryLength {
                index,
                bytes: entries[index].len()
            })
        ),
        None => {
            let publishers = decoded.expect("every entry is 20 bytes");
            assert_eq!(publishers.len(), entries.len());
            for (publisher, entry) in publishers.iter().zip(&entries) {
                assert_eq!(&publisher[..], *entry);
            }
            check_canonical(&publishers);
        }
    }
});
