//! The WebSocket side of the appliance, as pure functions (BPS.md section 9, W1..W11).
//!
//! Owns:
//! - [`codec`]: RFC 6455 framing, server side (an incremental decoder of masked client frames,
//!   inline headers for unmasked, unfragmented server frames, close payloads) and, for the load
//!   generator and tests, the client side;
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

pub mod codec;

pub use codec::{
    CloseFrame, Decoder, Event, Head, Opcode, ProtocolError, close_payload, encode_client_frame,
    encode_server_frame,
};
