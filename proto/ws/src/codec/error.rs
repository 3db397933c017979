//! A peer's faults in the framing layer (RFC 6455 section 5) and the close code of each.
//!
//! Owns: [`ProtocolError`] with the context of each fault and its close code (1002, 1007 or
//! 1009, section 7.4.1). Never: a fault of the BPS layer above (a bad Join, a bad chunk): the
//! I/O layer maps those to its own documented codes.

use std::fmt;

use super::close::{CLOSE_INVALID_PAYLOAD, CLOSE_MESSAGE_TOO_BIG, CLOSE_PROTOCOL_ERROR};
use super::opcode::{CONTROL_PAYLOAD_BYTES_MAX, Opcode};

/// A frame the peer must not have sent; the connection fails with [`Self::close_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolError {
    /// RSV1-3 set: they mean an extension, and none is negotiated.
    ReservedBits {
        /// The frame's first byte masked to its RSV bits.
        bits: u8,
    },
    /// An opcode RFC 6455 reserves (3-7, 11-15).
    UnknownOpcode {
        /// The 4-bit value.
        opcode: u8,
    },
    /// A client frame without a mask (section 5.1: the server must fail the connection).
    Unmasked,
    /// A server frame with a mask (section 5.1, seen by a client-side decoder).
    Masked,
    /// A control frame without FIN (section 5.5: control frames are never fragmented).
    FragmentedControl {
        /// The control opcode.
        opcode: Opcode,
    },
    /// A control frame declaring more than 125 payload bytes.
    ControlTooLong {
        /// The control opcode.
        opcode: Opcode,
    },
    /// A continuation frame with no fragmented message in progress.
    ContinuationWithoutMessage,
    /// A text or binary frame while a fragmented message is still in progress.
    MessageInProgress {
        /// The opcode of the new frame.
        opcode: Opcode,
    },
    /// A 16- or 64-bit length that a shorter encoding could have held (section 5.2: the
    /// minimal number of bytes MUST be used).
    NonMinimalLength {
        /// The declared payload length.
        bytes: u64,
    },
    /// A 64-bit length with its most significant bit set (section 5.2).
    LengthTopBit,
    /// The message (all its fragments so far plus this frame) would exceed the bound; refused
    /// as soon as the length is read, before any of it is buffered.
    MessageTooBig {
        /// Bytes the message would have with this frame.
        bytes: u64,
        /// The bound in force.
        max: usize,
    },
    /// A text message that is not UTF-8 (section 8.1).
    InvalidText {
        /// Bytes of valid UTF-8 before the first invalid sequence.
        valid_up_to: usize,
    },
    /// A close payload of one byte: a code takes two (section 5.5.1).
    CloseTooShort,
    /// A close code the peer may not send (section 7.4 and the IANA registry).
    CloseCode {
        /// The code received.
        code: u16,
    },
    /// A close reason that is not UTF-8.
    CloseReason {
        /// Bytes of valid UTF-8 before the first invalid sequence.
        valid_up_to: usize,
    },
    /// Bytes after the peer's close frame: nothing may follow it (section 5.5.1).
    FrameAfterClose,
}

impl ProtocolError {
    /// The close code that answers this fault: 1009 for a message over the bound, 1007 for
    /// data that is not UTF-8 where it must be, 1002 for everything else.
    pub fn close_code(&self) -> u16 {
        match self {
            Self::MessageTooBig { .. } => CLOSE_MESSAGE_TOO_BIG,
            Self::InvalidText { .. } | Self::CloseReason { .. } => CLOSE_INVALID_PAYLOAD,
            Self::ReservedBits { .. }
            | Self::UnknownOpcode { .. }
            | Self::Unmasked
            | Self::Masked
            | Self::FragmentedControl { .. }
            | Self::ControlTooLong { .. }
            | Self::ContinuationWithoutMessage
            | Self::MessageInProgress { .. }
            | Self::NonMinimalLength { .. }
            | Self::LengthTopBit
            | Self::CloseTooShort
            | Self::CloseCode { .. }
            | Self::FrameAfterClose => CLOSE_PROTOCOL_ERROR,
        }
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReservedBits { bits } => write!(
                formatter,
                "frame sets reserved bits {bits:#04x} but no extension is negotiated"
            ),
            Self::UnknownOpcode { opcode } => {
                write!(formatter, "frame has reserved opcode {opcode:#x}")
            }
            Self::Unmasked => write!(formatter, "client frame is not masked"),
            Self::Masked => write!(formatter, "server frame is masked"),
            Self::FragmentedControl { opcode } => {
                write!(formatter, "{opcode} frame is fragmented (FIN unset)")
            }
            Self::ControlTooLong { opcode } => write!(
                formatter,
                "{opcode} frame declares more than {CONTROL_PAYLOAD_BYTES_MAX} payload bytes"
            ),
            Self::ContinuationWithoutMessage => write!(
                formatter,
                "continuation frame without a fragmented message in progress"
            ),
            Self::MessageInProgress { opcode } => write!(
                formatter,
                "{opcode} frame while a fragmented message is in progress"
            ),
            Self::NonMinimalLength { bytes } => write!(
                formatter,
                "payload length {bytes} is not in its shortest encoding"
            ),
            Self::LengthTopBit => write!(
                formatter,
                "64-bit payload length has its most significant bit set"
            ),
            Self::MessageTooBig { bytes, max } => write!(
                formatter,
                "message of {bytes} bytes exceeds the {max}-byte bound"
            ),
            Self::InvalidText { valid_up_to } => write!(
                formatter,
                "text message is not UTF-8 (valid up to byte {valid_up_to})"
            ),
            Self::CloseTooShort => write!(formatter, "close payload of 1 byte (a code takes 2)"),
            Self::CloseCode { code } => {
                write!(formatter, "close code {code} may not be sent by a peer")
            }
            Self::CloseReason { valid_up_to } => write!(
                formatter,
                "close reason is not UTF-8 (valid up to byte {valid_up_to})"
            ),
            Self::FrameAfterClose => write!(formatter, "bytes after the close frame"),
        }
    }
}

impl std::error::Error for ProtocolError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_follow_section_7_4_1() {
        let too_big = ProtocolError::MessageTooBig {
            bytes: 9000,
            max: 8192,
        };
        assert_eq!(too_big.close_code(), 1009);
        assert_eq!(
            ProtocolError::InvalidText { valid_up_to: 3 }.close_code(),
            1007
        );
        assert_eq!(
            ProtocolError::CloseReason { valid_up_to: 0 }.close_code(),
            1007
        );
        for protocol in [
            ProtocolError::ReservedBits { bits: 0x40 },
            ProtocolError::UnknownOpcode { opcode: 3 },
            ProtocolError::Unmasked,
            ProtocolError::Masked,
            ProtocolError::FragmentedControl {
                opcode: Opcode::Ping,
            },
            ProtocolError::ControlTooLong {
                opcode: Opcode::Close,
            },
            ProtocolError::ContinuationWithoutMessage,
            ProtocolError::MessageInProgress {
                opcode: Opcode::Text,
            },
            ProtocolError::NonMinimalLength { bytes: 5 },
            ProtocolError::LengthTopBit,
            ProtocolError::CloseTooShort,
            ProtocolError::CloseCode { code: 1005 },
            ProtocolError::FrameAfterClose,
        ] {
            assert_eq!(protocol.close_code(), 1002, "{protocol}");
        }
        assert_eq!(
            too_big.to_string(),
            "message of 9000 bytes exceeds the 8192-byte bound"
        );
    }
}
