//! Bee's stream framing: every control message is an unsigned LEB128 length, then that many
//! protobuf bytes (bee `pkg/p2p/protobuf/protobuf.go`, gogo's delimited reader and writer).
//!
//! Owns: the read cap [`MESSAGE_BYTES_MAX`], reading the next message of a known type off
//! the front of a read buffer ([`read_message`]) and writing one ([`write_message`]).
//!
//! Never: touches a stream. The length prefix is the BPS frame's (docs/PROTOCOL.md §2), so
//! the split is `bps_proto`'s [`next_frame`], which refuses an oversize length before any body
//! byte is awaited and treats a short buffer as "need more", never as an error.

use std::fmt;

use bps_proto::{FrameError, encode_frame, next_frame};
use bytes::{Bytes, BytesMut};
use prost::Message;

/// Largest message body bee reads on a control stream (its `delimitedReaderMaxSize`, 128
/// KiB); a longer declared length ends the stream.
pub const MESSAGE_BYTES_MAX: usize = 128 * 1024;

/// Why the next message could not be read: a peer fault that ends the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The length prefix is malformed or declares more than [`MESSAGE_BYTES_MAX`].
    Frame(FrameError),
    /// The body is not valid protobuf for the message expected.
    Decode {
        /// The message expected (bee's name for it).
        message: &'static str,
        /// Size of the body.
        bytes: usize,
        /// What prost found wrong.
        source: prost::DecodeError,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Frame(error) => write!(formatter, "bad message length: {error}"),
            Self::Decode {
                message,
                bytes,
                source,
            } => write!(
                formatter,
                "malformed {message} message of {bytes} bytes: {source}"
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Frame(error) => Some(error),
            Self::Decode { source, .. } => Some(source),
        }
    }
}

/// Reads the next `message` (its name, for errors) off the front of `buf`.
///
/// `Ok(None)`: the message is not complete yet and nothing was consumed. `Ok(Some(_))`:
/// exactly its bytes were consumed; its `bytes` fields share `buf`'s allocation. On an error
/// the stream should be reset.
pub fn read_message<M: Message + Default>(
    buf: &mut BytesMut,
    message: &'static str,
) -> Result<Option<M>, ReadError> {
    let Some(body) = next_frame(buf, MESSAGE_BYTES_MAX).map_err(ReadError::Frame)? else {
        return Ok(None);
    };
    let bytes = body.len();
    M::decode(body)
        .map(Some)
        .map_err(|source| ReadError::Decode {
            message,
            bytes,
            source,
        })
}

/// `message` as bee writes it: its length, then its body.
pub fn write_message(message: &impl Message) -> Bytes {
    encode_frame(message)
}
