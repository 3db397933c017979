//! Bee's libp2p control protocols, as pure functions: what a Swarm node needs from a peer
//! before it opens BPS streams to it (issue 20; SWIP-60 runs BPS over bee's libp2p stack).
//!
//! Owns:
//! - [`pb`]: the protobuf messages of the handshake, the headers exchange, pricing and hive;
//! - [`delimited`]: bee's length-prefixed framing of those messages and its 128 KiB cap;
//! - [`underlay`]: a node's addresses in one field (one multiaddr, or bee's list form);
//! - [`eip191`]: EIP-191 signatures over a message of any length, on `bps_verify`'s rules;
//! - [`address`]: overlay derivation, our signed record, a peer's record checked;
//! - [`handshake`]: `/swarm/handshake/15.0.0/handshake` in both roles, as a state machine;
//! - [`streams`]: the headers every other stream starts with, pricing and hive.
//!
//! Never: a socket, a runtime, a clock, a thread. The libp2p host reads a stream, feeds the
//! bytes and `now` here and writes what comes back; so every check is tested without I/O.
//!
//! Every fact about bee here was read in ethersphere/bee at master a404d601; each module names
//! the bee files it follows and records where bee differs from the description.

pub mod address;
pub mod delimited;
pub mod eip191;
pub mod handshake;
pub mod pb;
pub mod streams;
pub mod underlay;

pub use address::{
    AddressError, CLOCK_SKEW_MAX_SECS, Identity, NONCE_BYTES, OVERLAY_BYTES, PeerAddress,
    SIGN_DATA_PREFIX, SIGNATURE_BYTES, check_timestamp, overlay_address, parse_address, sign_data,
};
pub use delimited::{MESSAGE_BYTES_MAX, ReadError, read_message, write_message};
pub use eip191::{message_hash, recover_message, sign_message};
pub use handshake::{
    Completed, ConfigError, HANDSHAKE_DEADLINE_SECS, HANDSHAKE_PROTOCOL, Handshake, HandshakeError,
    LocalNode, Peer, Step, WELCOME_MESSAGE_BYTES_MAX, final_peer_id, with_peer_id,
};
pub use multiaddr::{Multiaddr, PeerId};
pub use streams::{
    HIVE_PEERS_PER_MESSAGE, HIVE_PROTOCOL, PRICING_PROTOCOL, check_peers, empty_headers,
    read_headers, read_payment_threshold, read_peers,
};
pub use underlay::{
    UNDERLAY_BYTES_MAX, UNDERLAY_LIST_PREFIX, UNDERLAYS_PER_PEER_MAX, UnderlayError,
    deserialize_underlays, serialize_truncated, serialize_underlays, truncate_underlays,
};
