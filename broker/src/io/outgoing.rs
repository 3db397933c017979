//! One message of a stream's outbound queue.
//!
//! Owns: `Outgoing`, a shared body (the frame a thousand receivers share, or a message
//! rendered once per delivery for every receiver that asked for the same fields) and the
//! few bytes its carrier writes before it (a WebSocket frame header; nothing for TCP),
//! kept inline so that framing a delivery costs no allocation per receiver.
//! Never does: encode anything; the carrier that owns the stream says what the prefix is.

use bytes::Bytes;

use crate::limits::PREFIX_BYTES_MAX;

/// The bytes before a body, inline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefix {
    bytes: [u8; PREFIX_BYTES_MAX],
    len: u8,
}

impl Prefix {
    /// No prefix (TCP writes the frame alone).
    pub const NONE: Prefix = Prefix {
        bytes: [0; PREFIX_BYTES_MAX],
        len: 0,
    };

    /// A copy of `bytes`.
    ///
    /// # Panics
    /// If `bytes` is longer than `PREFIX_BYTES_MAX` (a carrier's bug).
    #[must_use]
    pub fn of(bytes: &[u8]) -> Prefix {
        assert!(
            bytes.len() <= PREFIX_BYTES_MAX,
            "a prefix of {} bytes",
            bytes.len()
        );
        let mut prefix = Prefix::NONE;
        prefix.bytes[..bytes.len()].copy_from_slice(bytes);
        prefix.len = bytes.len() as u8;
        prefix
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A message queued towards one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub prefix: Prefix,
    pub body: Bytes,
}

impl Outgoing {
    /// A body written as it is (a TCP frame).
    #[must_use]
    pub fn bare(body: Bytes) -> Outgoing {
        Outgoing {
            prefix: Prefix::NONE,
            body,
        }
    }

    /// Bytes on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        self.prefix.as_bytes().len() + self.body.len()
    }
}
