//! The BPS wire (docs/PROTOCOL.md §1 and §2, rules R1 and R3).
//!
//! Owns: `bps.proto` and the prost types generated from it ([`pb`]), the varint-delimited
//! frame codec ([`frame`]), keccak256 ([`hash`]), the typed cohort spec with its canonical
//! key and `Join` validation ([`spec`]), session-feed chunk-id derivation ([`chunk_id`]),
//! the `Roster` payload codec ([`roster`]) and placement by cohort key: which broker of a
//! list is a cohort's root ([`placement`]) and the relay path of an edge's Join
//! ([`relay_path`]).
//!
//! Never: a runtime, a socket, a clock, a signature. Everything here is a pure function of
//! its arguments, so the broker core, the verifier and the clients share one definition of
//! the wire and can test against it without I/O.

pub mod chunk_id;
pub mod frame;
pub mod hash;
pub mod placement;
pub mod relay_path;
pub mod roster;
pub mod spec;

/// The prost types generated from `proto/bps.proto` (package `bps`).
///
/// Enum-typed fields are `i32` in the structs, as prost does for proto3 open enums: an
/// unknown value decodes fine and is kept, so the broker can count it (R14) instead of
/// failing the whole frame. Every `bytes` field is a [`bytes::Bytes`], so decoding from a
/// `Bytes` frame is zero-copy.
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/bps.rs"));
}

pub use chunk_id::{
    SERVICE_PREFIX, feed_id, kind_from_i32, session_chunk_id, session_topic, soc_address,
};
pub use frame::{
    BROADCAST_FRAME_BYTES_MAX, DecodeError, FRAME_BYTES_MAX_DEFAULT, Frame, FrameError,
    FrameHeader, FrameType, SOC_BYTES_MAX, decode_ack, decode_broadcast, decode_join, encode_frame,
    next_frame, peek_frame,
};
pub use hash::{Keccak256, keccak256};
pub use pb::{
    Ack, Broadcast, CohortSpec, Join, Kind, PublisherRegime, Roster, Status, TopicBinding,
};
pub use placement::{
    BROKER_NAME_BYTES_MAX, PLACEMENT_TAG, PlacementError, broker_name, rank, weight,
};
pub use relay_path::{
    RELAY_ID_BYTES, RELAY_PATH_LEN_MAX, RelayId, RelayPathError, encode_relayed_ack,
    encode_relayed_join, relay_id_of_ack, relay_path_of,
};
pub use roster::{RosterError, decode_roster, encode_roster};
pub use spec::{Authorship, Binding, CohortKey, RejectReason, Spec, ValidJoin, validate_join};

/// Size of a cohort topic: one keccak256 output, whatever the binding means by it.
pub const TOPIC_BYTES: usize = 32;
/// Size of an Ethereum-style address (admin, stream addr, chunk owner, roster entry).
pub const ADDRESS_BYTES: usize = 20;
/// Size of the per-stream challenge the broker sends in `Ack` (R4).
pub const CHALLENGE_BYTES: usize = 32;

/// A 20-byte address: the last 20 bytes of keccak256 of an uncompressed public key.
pub type Address = [u8; ADDRESS_BYTES];
/// A 32-byte keccak256 output (topics, challenges, chunk ids and addresses).
pub type Hash = [u8; 32];
