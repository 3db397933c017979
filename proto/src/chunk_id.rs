//! Chunk ids of the session feeds (docs/PROTOCOL.md §1.1), feed ids and
//! SOC addresses.
//!
//! Owns: the id every receiver derives from a frame's kind, the cohort topic, the stream's
//! challenge and the frame's index, and the [`SERVICE_PREFIX`] that separates the service
//! feeds (AUTH, ROSTER, EOS) from DATA. Never: signatures or SOC parsing (`bps_verify`),
//! and never a decision about which kinds a stream may send (the broker core).
//!
//! Inputs are taken as `impl Borrow<[u8; N]>`, so both an array and a reference to one work.

use std::borrow::Borrow;

use crate::hash::Keccak256;
use crate::pb::Kind;
use crate::{Address, Hash};

/// Prefixes the session topic of every non-DATA kind, followed by the kind as one byte (D2).
pub const SERVICE_PREFIX: &[u8] = b"bps-service:v1";

// D2 puts the kind in one byte: every kind that takes the service prefix must fit.
const _: () =
    assert!(Kind::Auth as i32 <= 0xff && Kind::Roster as i32 <= 0xff && Kind::Eos as i32 <= 0xff);

/// `keccak256(prefix ‖ topic ‖ challenge)`, where the prefix is empty for DATA and
/// `SERVICE_PREFIX ‖ kind as one byte` for every other kind, so each kind is its own feed.
///
/// Pass only specified kinds (see [`kind_from_i32`]); `Kind::Unspecified` is not a feed.
pub fn session_topic(kind: Kind, topic: impl Borrow<Hash>, challenge: impl Borrow<Hash>) -> Hash {
    let mut hasher = Keccak256::new();
    if kind != Kind::Data {
        // Truncation cannot happen: the const assertion above bounds every service kind.
        hasher.update(SERVICE_PREFIX).update(&[kind as i32 as u8]);
    }
    hasher.update(topic.borrow()).update(challenge.borrow());
    hasher.finalize()
}

/// The chunk id of a frame: `keccak256(session_topic ‖ be64(index))`, i.e. the feed id of
/// `index` in the kind's session feed.
pub fn session_chunk_id(
    kind: Kind,
    topic: impl Borrow<Hash>,
    challenge: impl Borrow<Hash>,
    index: u64,
) -> Hash {
    feed_id(session_topic(kind, topic, challenge), index)
}

/// A feed update's id, as bee's `pkg/feeds`: `keccak256(topic ‖ be64(index))` (also D4).
pub fn feed_id(topic: impl Borrow<Hash>, index: u64) -> Hash {
    let mut hasher = Keccak256::new();
    hasher.update(topic.borrow()).update(&index.to_be_bytes());
    hasher.finalize()
}

/// A single-owner chunk's address: `keccak256(id ‖ owner)`.
pub fn soc_address(id: impl Borrow<Hash>, owner: impl Borrow<Address>) -> Hash {
    let mut hasher = Keccak256::new();
    hasher.update(id.borrow()).update(owner.borrow());
    hasher.finalize()
}

/// The kind of a frame's raw `kind` field: `None` for `KIND_UNSPECIFIED` and for values
/// outside the enum (the broker drops and counts those, R14).
pub fn kind_from_i32(value: i32) -> Option<Kind> {
    Kind::try_from(value)
        .ok()
        .filter(|kind| *kind != Kind::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Raw keccak256 straight from tiny-keccak, independent of [`Keccak256`].
    fn raw_keccak(parts: &[&[u8]]) -> Hash {
        use tiny_keccak::Hasher;
        let joined: Vec<u8> = parts.concat();
        let mut keccak = tiny_keccak::Keccak::v256();
        keccak.update(&joined);
        let mut output = [0u8; 32];
        keccak.finalize(&mut output);
        output
    }

    const TOPIC: Hash = [0x11; 32];
    const CHALLENGE: Hash = [0x22; 32];
    const OWNER: Address = [0x33; 20];

    #[test]
    fn session_chunk_id_matches_raw_keccak_for_every_kind() {
        let index: u64 = 0x0102_0304_0506_0708;
        let cases: [(Kind, Vec<u8>); 4] = [
            (Kind::Data, Vec::new()),
            (Kind::Auth, [b"bps-service:v1".as_slice(), &[2]].concat()),
            (Kind::Roster, [b"bps-service:v1".as_slice(), &[3]].concat()),
            (Kind::Eos, [b"bps-service:v1".as_slice(), &[4]].concat()),
        ];
        for (kind, prefix) in cases {
            let topic_s = raw_keccak(&[&prefix, &TOPIC, &CHALLENGE]);
            assert_eq!(session_topic(kind, TOPIC, CHALLENGE), topic_s, "{kind:?}");
            let id = raw_keccak(&[&topic_s, &[1, 2, 3, 4, 5, 6, 7, 8]]);
            assert_eq!(
                session_chunk_id(kind, TOPIC, CHALLENGE, index),
                id,
                "{kind:?}"
            );
            let address = raw_keccak(&[&id, &OWNER]);
            assert_eq!(soc_address(id, OWNER), address, "{kind:?}");
        }
    }

    #[test]
    fn data_and_auth_ids_differ_for_the_same_inputs() {
        for index in [0, 1, u64::MAX] {
            assert_ne!(
                session_chunk_id(Kind::Data, TOPIC, CHALLENGE, index),
                session_chunk_id(Kind::Auth, TOPIC, CHALLENGE, index)
            );
        }
    }

    #[test]
    fn every_kind_is_its_own_feed() {
        let ids: Vec<Hash> = [Kind::Data, Kind::Auth, Kind::Roster, Kind::Eos]
            .into_iter()
            .map(|kind| session_chunk_id(kind, TOPIC, CHALLENGE, 0))
            .collect();
        for (position, id) in ids.iter().enumerate() {
            assert!(!ids[position + 1..].contains(id));
        }
    }

    #[test]
    fn feed_id_is_topic_then_big_endian_index() {
        let expected = raw_keccak(&[&TOPIC, &[0, 0, 0, 0, 0, 0, 1, 0]]);
        assert_eq!(feed_id(TOPIC, 256), expected);
    }

    #[test]
    fn kind_from_i32_accepts_only_specified_known_kinds() {
        assert_eq!(kind_from_i32(0), None);
        assert_eq!(kind_from_i32(1), Some(Kind::Data));
        assert_eq!(kind_from_i32(2), Some(Kind::Auth));
        assert_eq!(kind_from_i32(3), Some(Kind::Roster));
        assert_eq!(kind_from_i32(4), Some(Kind::Eos));
        assert_eq!(kind_from_i32(5), None);
        assert_eq!(kind_from_i32(-1), None);
        assert_eq!(kind_from_i32(i32::MAX), None);
    }
}
