//! The SWIP-60 WebSocket bridge's formats (docs/PROTOCOL.md §9, W1..W11), as pure functions.
//!
//! Owns: the Join parameters of a request ([`params`]: the topic of the path, the spec,
//! `addr`, `swarm-soc-fields` as [`Fields`], the keep-alive period), the inbound binary
//! message and its assembly into a BPS frame ([`inbound`], W4 and W5), and what a bridge
//! session receives ([`render`]: deliveries per field list, the roster, EOS and challenge
//! text frames). Every spelling W10 decides sits in one named place in these files, so a
//! correction is one line.
//!
//! Never: validation of a chunk (the broker validates an assembled frame exactly as one from
//! a TCP stream), roles, cursors or any other rule of the broker core, and never a socket.

pub mod fields;
pub mod inbound;
pub mod params;
pub mod render;

pub use fields::{FIELD_KINDS, Field, Fields, UnknownField};
pub use inbound::{INBOUND_BYTES_MAX, Inbound, InboundError, PAYLOAD_BYTES_MAX, parse_inbound};
pub use params::{
    BridgeParams, KEEP_ALIVE_S_DEFAULT, KEEP_ALIVE_S_MAX, Lookup, ParamError, SWARM_HEADERS,
    parse_spec, parse_topic,
};
pub use render::{
    ChunkFacts, EOS_TEXT, RenderError, Rendered, challenge_text, render_delivery, render_roster,
};
