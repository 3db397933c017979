//! The one place this crate names `bps_proto` items: keccak256, the address and hash
//! aliases, the `Broadcast`/`Kind` wire types, frame encoding and the id derivations.
//!
//! Owns nothing; never re-implements any of them (one definition of the wire, shared with
//! the broker and the clients).

pub use bps_proto::{Address, Hash};
pub(crate) use bps_proto::{
    Binding, Broadcast, Kind, encode_frame, feed_id, keccak256, session_chunk_id, soc_address,
};
