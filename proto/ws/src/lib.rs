//! The WebSocket side of the appliance, as pure functions (docs/PROTOCOL.md §9, W1..W11).
//!
//! Owns:
//! - [`codec`]: RFC 6455 framing, server side (an incremental decoder of masked client frames,
//!   inline headers for unmasked, unfragmented server frames, close payloads) and, for the load
//!   generator and tests, the client side;
//! - [`http`]: the HTTP/1.1 request head, parsed with httparse under a byte and a header bound;
//! - [`handshake`]: the upgrade checks of RFC 6455 section 4.2.1, the accept key (sha1 and
//!   base64 from their crates) and the 101 answer;
//! - [`origin`]: the `Origin` policy (W10), for the upgrade and for CORS;
//! - [`response`]: every other HTTP answer (one-line errors, the CORS headers and preflight of
//!   the W5 endpoint);
//! - [`query`]: percent-decoding and query parameters;
//! - [`forwarded`]: the peer a trusted reverse proxy names (`Forwarded`, `X-Forwarded-For`)
//!   and the trusted proxies as address ranges;
//! - [`bridge`]: the SWIP-60 bridge's formats: the Join parameters of a request (W1, W2, W6,
//!   W7, W10, W11), inbound messages assembled into BPS frames (W4, W5), deliveries rendered
//!   per `swarm-soc-fields` (W6) and the text frames of the challenge, roster and EOS (W10).
//!
//! Never: a socket, a runtime, a clock, a thread or a protocol rule of the broker core. The
//! broker's I/O layer reads bytes, hands them here and writes what comes back; every function
//! is a function of its arguments, so it is tested without I/O.
//!
//! Why the framing is our own: no well-kept crate offers an I/O-free, incremental decoder that
//! fits monoio's owned-buffer reads (the bytes arrive in a `BytesMut` we own and must consume
//! from the front) and our zero-copy writes (a carrier puts a small inline header in front of
//! a shared frame and never copies the frame); the WebSocket crates we looked at own the
//! socket or the write buffer. The framing is small and fully specified by RFC 6455 section 5,
//! so we wrote it and test it against the RFC's own examples. Everything that is not framing
//! comes from crates: HTTP head parsing is httparse, the accept key is sha1 + base64.

pub mod bridge;
pub mod codec;
pub mod forwarded;
pub mod handshake;
pub mod http;
pub mod origin;
pub mod query;
pub mod response;

pub use bridge::{
    BridgeParams, ChunkFacts, Field, Fields, Inbound, InboundError, Lookup, ParamError,
    RenderError, Rendered, challenge_text, parse_inbound, parse_spec, parse_topic, render_delivery,
    render_roster,
};
pub use codec::{
    CloseFrame, Decoder, Event, Head, Opcode, ProtocolError, close_payload, encode_client_frame,
    encode_server_frame,
};
pub use forwarded::{
    FORWARDED, ForwardedError, Hop, IpRange, RangeError, TrustedProxies, X_FORWARDED_FOR,
    forwarded_peer, parse_hop,
};
pub use handshake::{UpgradeError, accept_key, check_upgrade, switching_protocols};
pub use http::{HttpError, RequestHead, parse_request_head};
pub use origin::origin_allowed;
pub use query::{QUERY_PARAMS_MAX, QueryError, parse_query, percent_decode};
pub use response::{Response, cors_headers, preflight};
