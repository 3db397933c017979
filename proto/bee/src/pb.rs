//! The protobuf messages of bee's control protocols, as prost structs written by hand.
//!
//! Owns: the handshake's [`Syn`], [`SynAck`], [`Ack`] and [`BzzAddress`] (bee
//! `pkg/p2p/libp2p/internal/handshake/pb/handshake.proto`), the per-stream [`Headers`] and
//! [`Header`] (bee `pkg/p2p/libp2p/internal/headers/pb/headers.proto`), pricing's
//! [`AnnouncePaymentThreshold`] (bee `pkg/pricing/pb/pricing.proto`) and hive's [`Peers`]
//! (bee `pkg/hive/pb/hive.proto`). Hive's `BzzAddress` has the handshake's six fields with the
//! same numbers and types, so one struct serves both.
//!
//! Never: validates anything (that is [`crate::address`] and [`crate::handshake`]).
//!
//! Why by hand and not from `.proto` files: four small files of another project, whose field
//! numbers must match bee's and are pinned byte for byte by tests; a build script would add a
//! copy of bee's files without adding a check.
//!
//! Bee's proto3 `string` fields (`Ack.WelcomeMessage`, `Header.key`) are `bytes` here: bee's
//! gogo-generated decoder keeps any bytes there without checking UTF-8, while prost refuses a
//! `String` that is not UTF-8; a `bytes` field has the same wire type, so a message bee accepts
//! is never refused here.

use bytes::Bytes;

/// The dialer's first message: how it sees the responder (bee's serialized underlay list).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Syn {
    /// The responder's addresses as the dialer observed them ([`crate::underlay`]'s form).
    #[prost(bytes = "bytes", tag = "1")]
    pub observed_underlay: Bytes,
}

/// A node's signed record and settings; the dialer's last message, the second half of
/// [`SynAck`].
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Ack {
    /// The sender's signed address record.
    #[prost(message, optional, tag = "1")]
    pub address: Option<BzzAddress>,
    /// The Swarm network the sender is on (1 is mainnet).
    #[prost(uint64, tag = "2")]
    pub network_id: u64,
    /// Whether the sender serves Swarm's storage protocols.
    #[prost(bool, tag = "3")]
    pub full_node: bool,
    /// Free text (bee: at most 140 bytes for its own); bee's `string`, kept as bytes.
    #[prost(bytes = "bytes", tag = "99")]
    pub welcome_message: Bytes,
}

/// The responder's answer to [`Syn`]: how it sees the dialer, and its own record.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct SynAck {
    /// The dialer's addresses as the responder observed them.
    #[prost(message, optional, tag = "1")]
    pub syn: Option<Syn>,
    /// The responder's record and settings.
    #[prost(message, optional, tag = "2")]
    pub ack: Option<Ack>,
}

/// A node's signed address record, in the handshake and in hive's gossip.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct BzzAddress {
    /// The node's libp2p addresses ([`crate::underlay`]'s form).
    #[prost(bytes = "bytes", tag = "1")]
    pub underlay: Bytes,
    /// EIP-191 signature `r ‖ s ‖ v` over [`crate::address::sign_data`].
    #[prost(bytes = "bytes", tag = "2")]
    pub signature: Bytes,
    /// keccak256(eth address ‖ le64(network id) ‖ nonce).
    #[prost(bytes = "bytes", tag = "3")]
    pub overlay: Bytes,
    /// The 32-byte nonce the overlay was mined with.
    #[prost(bytes = "bytes", tag = "4")]
    pub nonce: Bytes,
    /// When the record was signed, unix seconds.
    #[prost(int64, tag = "5")]
    pub timestamp: i64,
    /// The node's chequebook contract, 20 bytes, or empty.
    #[prost(bytes = "bytes", tag = "6")]
    pub chequebook_address: Bytes,
}

/// The headers each side sends first on every stream but the handshake's.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Headers {
    /// The key-value pairs; bee keeps the last value of a repeated key.
    #[prost(message, repeated, tag = "1")]
    pub headers: Vec<Header>,
}

/// One header.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Header {
    /// The name; bee's `string`, kept as bytes.
    #[prost(bytes = "bytes", tag = "1")]
    pub key: Bytes,
    /// The value.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// Pricing's one message: the sender's payment threshold.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct AnnouncePaymentThreshold {
    /// An unsigned big-endian integer of any length (bee `big.Int.SetBytes`).
    #[prost(bytes = "bytes", tag = "1")]
    pub payment_threshold: Bytes,
}

/// Hive's one message: signed records of peers the sender knows.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Peers {
    /// The records (bee sends at most 30 a message).
    #[prost(message, repeated, tag = "1")]
    pub peers: Vec<BzzAddress>,
}
