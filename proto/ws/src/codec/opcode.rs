//! The frame opcodes of RFC 6455 section 5.2 and the control-frame payload bound.
//!
//! Owns: [`Opcode`], the mapping from the 4-bit wire value (unknown values are `None`, the
//! decoder refuses them) and which opcodes are control frames. Never: reserved opcodes; an
//! extension would define them and we negotiate none.

use std::fmt;

/// Largest payload of a control frame (close, ping, pong): RFC 6455 section 5.5 allows 125
/// bytes, so the 7-bit length always holds it and a control frame is never split.
pub const CONTROL_PAYLOAD_BYTES_MAX: usize = 125;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opcode {
    /// A later fragment of the message in progress.
    Continuation,
    /// The first (or only) frame of a UTF-8 text message.
    Text,
    /// The first (or only) frame of a binary message.
    Binary,
    /// The closing handshake.
    Close,
    /// A keep-alive probe; answered with a pong of the same payload.
    Ping,
    /// The answer to a ping (or an unsolicited heartbeat).
    Pong,
}

impl Opcode {
    /// The opcode of a frame's low four bits; `None` for the reserved values 3-7 and 11-15.
    pub fn from_wire(value: u8) -> Option<Self> {
        match value {
            0x0 => Some(Self::Continuation),
            0x1 => Some(Self::Text),
            0x2 => Some(Self::Binary),
            0x8 => Some(Self::Close),
            0x9 => Some(Self::Ping),
            0xA => Some(Self::Pong),
            _ => None,
        }
    }

    /// The 4-bit wire value.
    pub fn to_wire(self) -> u8 {
        match self {
            Self::Continuation => 0x0,
            Self::Text => 0x1,
            Self::Binary => 0x2,
            Self::Close => 0x8,
            Self::Ping => 0x9,
            Self::Pong => 0xA,
        }
    }

    /// Close, ping and pong: at most 125 bytes, never fragmented, allowed between the
    /// fragments of a message.
    pub fn is_control(self) -> bool {
        self.to_wire() & 0x8 != 0
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Continuation => "continuation",
            Self::Text => "text",
            Self::Binary => "binary",
            Self::Close => "close",
            Self::Ping => "ping",
            Self::Pong => "pong",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_four_bit_value_maps_to_its_opcode_or_none() {
        let known = [
            (0x0, Opcode::Continuation),
            (0x1, Opcode::Text),
            (0x2, Opcode::Binary),
            (0x8, Opcode::Close),
            (0x9, Opcode::Ping),
            (0xA, Opcode::Pong),
        ];
        for value in 0u8..16 {
            let expected = known
                .iter()
                .find(|(wire, _)| *wire == value)
                .map(|(_, opcode)| *opcode);
            assert_eq!(Opcode::from_wire(value), expected, "{value:#x}");
            if let Some(opcode) = expected {
                assert_eq!(opcode.to_wire(), value);
                assert_eq!(opcode.is_control(), value >= 0x8, "{opcode}");
            }
        }
    }
}
