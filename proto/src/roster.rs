//! The `Roster` payload of a ROSTER chunk (R20): the admin's current publishers.
//!
//! Owns: encoding a list of addresses and decoding one strictly, every entry exactly 20
//! bytes. Never: legitimacy (whether the chunk came from the admin, its index and cursor),
//! which is the broker core's and the subscriber's; duplicates and order are kept as sent.

use std::fmt;

use bytes::Bytes;
use prost::Message;

use crate::pb::Roster;
use crate::{ADDRESS_BYTES, Address};

/// A ROSTER payload that is not a list of 20-byte addresses (counted as `invalid_roster`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RosterError {
    /// The payload is not a protobuf `Roster`.
    Malformed {
        /// What prost found wrong.
        source: prost::DecodeError,
    },
    /// An entry is not 20 bytes.
    EntryLength {
        /// Position of the entry in `publishers`, from 0.
        index: usize,
        /// Its length.
        bytes: usize,
    },
}

impl fmt::Display for RosterError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed { source } => write!(formatter, "malformed Roster payload: {source}"),
            Self::EntryLength { index, bytes } => write!(
                formatter,
                "Roster entry {index} is {bytes} bytes, expected {ADDRESS_BYTES}"
            ),
        }
    }
}

impl std::error::Error for RosterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Malformed { source } => Some(source),
            Self::EntryLength { .. } => None,
        }
    }
}

/// The protobuf `Roster { publishers }` naming `publishers`, in order: a ROSTER chunk's
/// payload.
pub fn encode_roster(publishers: &[Address]) -> Vec<u8> {
    Roster {
        publishers: publishers
            .iter()
            .map(|address| Bytes::copy_from_slice(address))
            .collect(),
    }
    .encode_to_vec()
}

/// Decodes a ROSTER chunk's payload; every entry must be exactly 20 bytes. Takes anything
/// that is a byte slice (`&[u8]`, `Bytes`, `Vec<u8>`).
pub fn decode_roster(payload: impl AsRef<[u8]>) -> Result<Vec<Address>, RosterError> {
    let roster =
        Roster::decode(payload.as_ref()).map_err(|source| RosterError::Malformed { source })?;
    roster
        .publishers
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            Address::try_from(entry.as_ref()).map_err(|_| RosterError::EntryLength {
                index,
                bytes: entry.len(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_order_and_duplicates() {
        let publishers = [[1u8; 20], [2; 20], [1; 20]];
        assert_eq!(
            decode_roster(encode_roster(&publishers)),
            Ok(publishers.to_vec())
        );
        assert_eq!(decode_roster(encode_roster(&[])), Ok(Vec::new()));
    }

    #[test]
    fn golden_bytes_by_hand() {
        // Field 1, wire type 2 (length-delimited): key 0x0A, length 0x14 = 20, then the entry.
        let expected = [
            [0x0a, 0x14].as_slice(),
            &[0xaa; 20],
            &[0x0a, 0x14],
            &[0xbb; 20],
        ]
        .concat();
        assert_eq!(encode_roster(&[[0xaa; 20], [0xbb; 20]]), expected);
        assert!(encode_roster(&[]).is_empty());
    }

    #[test]
    fn rejects_19_and_21_byte_entries_with_their_position() {
        for bad_bytes in [19usize, 21] {
            let roster = Roster {
                publishers: vec![
                    Bytes::from(vec![1; 20]),
                    Bytes::from(vec![2; bad_bytes]),
                    Bytes::from(vec![3; 20]),
                ],
            };
            let error = decode_roster(roster.encode_to_vec()).expect_err("bad entry");
            assert_eq!(
                error,
                RosterError::EntryLength {
                    index: 1,
                    bytes: bad_bytes
                }
            );
            assert_eq!(
                error.to_string(),
                format!("Roster entry 1 is {bad_bytes} bytes, expected 20")
            );
        }
    }

    #[test]
    fn rejects_an_empty_entry() {
        let roster = Roster {
            publishers: vec![Bytes::new()],
        };
        assert_eq!(
            decode_roster(Bytes::from(roster.encode_to_vec())),
            Err(RosterError::EntryLength { index: 0, bytes: 0 })
        );
    }

    #[test]
    fn rejects_malformed_protobuf() {
        // Field 1 declares 20 bytes but only 2 follow.
        let error = decode_roster([0x0a, 0x14, 0x01, 0x02]).expect_err("truncated");
        assert!(matches!(error, RosterError::Malformed { .. }), "{error:?}");
    }
}
