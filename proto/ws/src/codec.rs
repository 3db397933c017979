//! RFC 6455 framing (section 5), I/O-free.
//!
//! Owns: the [`Opcode`]s, unmasking ([`mask`]), the incremental [`Decoder`] and the
//! [`Event`]s it yields, the [`ProtocolError`]s of a peer's framing with the close code each
//! answers with, close payloads ([`close`]), the header layout and the inline [`Head`] the server puts
//! in front of a shared payload ([`header`]), and whole frames ([`encoder`]): small server
//! frames, and masked client frames for the load generator and tests.
//!
//! Never: a socket, a timer (ping periods and close deadlines are the I/O layer's), an
//! extension (nothing is negotiated, so every RSV bit is an error) or a fragmented server
//! frame: the server sends each message as one frame.

pub mod close;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod header;
pub mod mask;
pub mod opcode;

pub use close::{
    CLOSE_GOING_AWAY, CLOSE_INVALID_PAYLOAD, CLOSE_MESSAGE_TOO_BIG, CLOSE_NORMAL,
    CLOSE_PROTOCOL_ERROR, CloseFrame, close_code_receivable, close_payload,
};
pub use decoder::{Decoder, Event};
pub use encoder::{encode_client_frame, encode_server_frame};
pub use error::ProtocolError;
pub use header::Head;
pub use mask::apply_mask;
pub use opcode::{CONTROL_PAYLOAD_BYTES_MAX, Opcode};
