//! The relay path a relay edge's upstream `Join` carries, so that a broker can refuse a loop
//! of edges (docs/PROTOCOL.md §10).
//!
//! Owns: [`RelayId`], the path's bounds, reading it from a Join's body ([`relay_path_of`])
//! and writing a Join that carries it ([`encode_relayed_join`]).
//! Never: decide what a path means; the broker core refuses a Join whose path names the
//! broker itself or is too long.
//!
//! The path is field 15 of the Join's bytes, a field `Join` does not define: every client,
//! every broker that is not an edge and bee's own code skip it as an unknown field (proto3),
//! and it is outside the cohort key (R1 keys the spec alone). Reading it decodes the same
//! body as the message `JoinRelay`, which has field 15 only.

use bytes::{Bytes, BytesMut};
use prost::Message;

use crate::pb::{Ack, AckRelay, Join, JoinRelay};

/// Size of a relay id: random per broker process, so two brokers never share one.
pub const RELAY_ID_BYTES: usize = 16;

/// Relay ids a Join may carry: the deepest tree of edges it may have passed through. Eight
/// levels of a thousand subscribers each is far beyond any audience; a longer path is a loop
/// the id check has not caught yet (each trip round it grows by one).
pub const RELAY_PATH_LEN_MAX: usize = 8;

/// One broker's id on a relay path.
pub type RelayId = [u8; RELAY_ID_BYTES];

/// Why a Join's relay path is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayPathError {
    /// Field 15 does not decode.
    Undecodable,
    /// An entry is not `RELAY_ID_BYTES` long.
    IdLength { bytes: usize },
    /// More than `RELAY_PATH_LEN_MAX` entries.
    TooLong { entries: usize },
}

impl std::fmt::Display for RelayPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayPathError::Undecodable => f.write_str("the relay path does not decode"),
            RelayPathError::IdLength { bytes } => {
                write!(f, "a relay id of {bytes} bytes, not {RELAY_ID_BYTES}")
            }
            RelayPathError::TooLong { entries } => write!(
                f,
                "a relay path of {entries} edges, more than {RELAY_PATH_LEN_MAX}"
            ),
        }
    }
}

impl std::error::Error for RelayPathError {}

/// The relay path of a Join's body (empty for every Join but an edge's).
///
/// # Errors
/// When field 15 does not decode, an entry is not 16 bytes, or there are more than
/// `RELAY_PATH_LEN_MAX` entries.
pub fn relay_path_of(join_body: Bytes) -> Result<Vec<RelayId>, RelayPathError> {
    let relay = JoinRelay::decode(join_body).map_err(|_| RelayPathError::Undecodable)?;
    if relay.relay_path.len() > RELAY_PATH_LEN_MAX {
        return Err(RelayPathError::TooLong {
            entries: relay.relay_path.len(),
        });
    }
    relay
        .relay_path
        .iter()
        .map(|entry| {
            RelayId::try_from(entry.as_ref())
                .map_err(|_| RelayPathError::IdLength { bytes: entry.len() })
        })
        .collect()
}

/// A whole Join frame (varint length and body) whose body is `join` followed by `path` as
/// field 15: one message to a reader of `JoinRelay`, the same `Join` to everyone else.
#[must_use]
pub fn encode_relayed_join(join: &Join, path: &[RelayId]) -> Bytes {
    let relay = JoinRelay {
        relay_path: path.iter().map(|id| Bytes::copy_from_slice(id)).collect(),
    };
    frame_of_both(join, &relay)
}

/// A whole Ack frame whose body is `ack` followed by `relay_id` as field 15: an edge's OK
/// to another edge's Join, naming the answering broker (`relay_id_of_ack`).
#[must_use]
pub fn encode_relayed_ack(ack: &Ack, relay_id: &RelayId) -> Bytes {
    let relay = AckRelay {
        relay_id: Bytes::copy_from_slice(relay_id),
    };
    frame_of_both(ack, &relay)
}

/// A whole frame whose body is `message` followed by `relay`'s fields: protobuf merges
/// concatenated messages, so a reader of either type reads its own fields.
fn frame_of_both(message: &impl Message, relay: &impl Message) -> Bytes {
    let body_bytes = message.encoded_len() + relay.encoded_len();
    let mut frame = BytesMut::with_capacity(body_bytes + 5);
    prost::encoding::encode_varint(body_bytes as u64, &mut frame);
    message.encode_raw(&mut frame);
    relay.encode_raw(&mut frame);
    frame.freeze()
}

/// The relay id an Ack's body names (`encode_relayed_ack`), if it names a well-formed one.
#[must_use]
pub fn relay_id_of_ack(ack_body: Bytes) -> Option<RelayId> {
    let relay = AckRelay::decode(ack_body).ok()?;
    RelayId::try_from(relay.relay_id.as_ref()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Spec, decode_join, next_frame, validate_join};

    fn spec() -> Spec {
        Spec {
            topic: [7; 32],
            binding: crate::Binding::Mnemonic,
            admin: Some([1; 20]),
            all: false,
            history: true,
            closed: false,
        }
    }

    #[test]
    fn a_relayed_join_is_the_same_join_to_a_reader_of_join_and_carries_its_path() {
        let join = spec().to_join(&[9; 20]);
        let path = [[1; RELAY_ID_BYTES], [2; RELAY_ID_BYTES]];
        let frame = encode_relayed_join(&join, &path);
        let mut buffer = BytesMut::from(frame.as_ref());
        let body = next_frame(&mut buffer, 4096)
            .expect("one frame")
            .expect("whole");
        assert!(buffer.is_empty());
        let decoded = decode_join(body.clone()).expect("a Join");
        assert_eq!(decoded, join);
        let valid = validate_join(&decoded).expect("valid");
        assert_eq!(valid.key, spec().key());
        assert_eq!(relay_path_of(body), Ok(path.to_vec()));
    }

    #[test]
    fn a_relayed_ack_is_the_same_ack_and_names_its_broker() {
        let ack = Ack {
            status: crate::Status::Ok as i32,
            challenge: Bytes::from_static(&[5; 32]),
        };
        let frame = encode_relayed_ack(&ack, &[8; RELAY_ID_BYTES]);
        let mut buffer = BytesMut::from(frame.as_ref());
        let body = next_frame(&mut buffer, 4096)
            .expect("one frame")
            .expect("whole");
        assert_eq!(crate::decode_ack(body.clone()), Ok(ack.clone()));
        assert_eq!(relay_id_of_ack(body), Some([8; RELAY_ID_BYTES]));
        assert_eq!(relay_id_of_ack(Bytes::from(ack.encode_to_vec())), None);
    }

    #[test]
    fn an_ordinary_join_has_an_empty_path() {
        let body = spec().to_join(&[9; 20]).encode_to_vec();
        assert_eq!(relay_path_of(Bytes::from(body)), Ok(Vec::new()));
    }

    #[test]
    fn a_path_with_a_short_id_or_too_many_ids_is_refused() {
        let join = spec().to_join(&[9; 20]);
        let short = JoinRelay {
            relay_path: vec![Bytes::from_static(&[1; 15])],
        };
        let mut body = join.encode_to_vec();
        body.extend(short.encode_to_vec());
        assert_eq!(
            relay_path_of(Bytes::from(body)),
            Err(RelayPathError::IdLength { bytes: 15 })
        );
        let long = vec![[3; RELAY_ID_BYTES]; RELAY_PATH_LEN_MAX + 1];
        let frame = encode_relayed_join(&join, &long);
        let mut buffer = BytesMut::from(frame.as_ref());
        let body = next_frame(&mut buffer, 4096)
            .expect("one frame")
            .expect("whole");
        assert_eq!(
            relay_path_of(body),
            Err(RelayPathError::TooLong {
                entries: RELAY_PATH_LEN_MAX + 1
            })
        );
    }
}
