//! A receiver of RFC 6455 frames written from section 5 of the RFC, for the `ws_decoder`
//! target to compare `bps_ws::Decoder` with.
//!
//! Owns: [`decode`], which reads a whole byte stream at once, byte by byte as the RFC lays a
//! frame out, and says which events it holds, how many bytes the whole frames among them
//! take, and how the stream ends (an error, or how many more bytes the next frame needs).
//! Never: calls the decoder under test or its helpers (unmasking, the close-code table and
//! the length rules are restated here).

use bps_ws::{CloseFrame, Event, Opcode, ProtocolError};
use bytes::Bytes;

/// Control frames carry at most this many bytes (section 5.5).
const CONTROL_BYTES_MAX: u64 = 125;

/// How a stream ends once its whole frames are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The next frame is incomplete: at least this many more bytes are needed (0 after a
    /// close, when nothing more is awaited).
    NeedMore(usize),
    /// The first fault, after the events before it.
    Fault(ProtocolError),
}

/// What [`decode`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Every completed event, in order.
    pub events: Vec<Event>,
    /// Bytes of the whole frames read before the end (a non-final fragment counts).
    pub consumed: usize,
    /// How the stream ends.
    pub end: End,
}

/// Close codes a peer may send (section 7.4.1 and the IANA registry: 1000-1003 and
/// 1007-1014 on the wire, 3000-4999 registered or private).
fn receivable(code: u16) -> bool {
    (1000..=1003).contains(&code) || (1007..=1014).contains(&code) || (3000..=4999).contains(&code)
}

fn opcode(value: u8) -> Option<Opcode> {
    Some(match value {
        0 => Opcode::Continuation,
        1 => Opcode::Text,
        2 => Opcode::Binary,
        8 => Opcode::Close,
        9 => Opcode::Ping,
        10 => Opcode::Pong,
        _ => return None,
    })
}

fn utf8_valid_up_to(bytes: &[u8]) -> Option<usize> {
    std::str::from_utf8(bytes)
        .err()
        .map(|error| error.valid_up_to())
}

fn close_event(payload: &[u8]) -> Result<Event, ProtocolError> {
    match payload {
        [] => Ok(Event::Close(None)),
        [_] => Err(ProtocolError::CloseTooShort),
        [high, low, reason @ ..] => {
            let code = u16::from(*high) << 8 | u16::from(*low);
            if !receivable(code) {
                return Err(ProtocolError::CloseCode { code });
            }
            if let Some(valid_up_to) = utf8_valid_up_to(reason) {
                return Err(ProtocolError::CloseReason { valid_up_to });
            }
            Ok(Event::Close(Some(CloseFrame {
                code,
                reason: String::from_utf8_lossy(reason).into_owned(),
            })))
        }
    }
}

fn message_event(text: bool, payload: Vec<u8>) -> Result<Event, ProtocolError> {
    if text && let Some(valid_up_to) = utf8_valid_up_to(&payload) {
        return Err(ProtocolError::InvalidText { valid_up_to });
    }
    Ok(Event::Message {
        text,
        payload: Bytes::from(payload),
    })
}

/// Reads `stream` as a server (`masked`: every frame must be masked) or as a client (no
/// frame may be), refusing any message over `message_bytes_max` bytes.
pub fn decode(stream: &[u8], masked: bool, message_bytes_max: usize) -> Decoded {
    let mut events = Vec::new();
    let mut fragments: Option<(bool, Vec<u8>)> = None;
    let mut at = 0;
    let end = loop {
        let rest = &stream[at..];
        let (first, second) = match rest {
            [first, second, ..] => (*first, *second),
            _ => break End::NeedMore(2 - rest.len()),
        };
        let fin = first & 0x80 != 0;
        if first & 0x70 != 0 {
            break End::Fault(ProtocolError::ReservedBits { bits: first & 0x70 });
        }
        let Some(op) = opcode(first & 0x0f) else {
            break End::Fault(ProtocolError::UnknownOpcode {
                opcode: first & 0x0f,
            });
        };
        let frame_masked = second & 0x80 != 0;
        match (masked, frame_masked) {
            (true, false) => break End::Fault(ProtocolError::Unmasked),
            (false, true) => break End::Fault(ProtocolError::Masked),
            _ => {}
        }
        let code = u64::from(second & 0x7f);
        let control = matches!(op, Opcode::Close | Opcode::Ping | Opcode::Pong);
        if control && !fin {
            break End::Fault(ProtocolError::FragmentedControl { opcode: op });
        }
        if control && code > CONTROL_BYTES_MAX {
            break End::Fault(ProtocolError::ControlTooLong { opcode: op });
        }
        match (op, fragments.is_some()) {
            (Opcode::Continuation, false) => {
                break End::Fault(ProtocolError::ContinuationWithoutMessage);
            }
            (Opcode::Text | Opcode::Binary, true) => {
                break End::Fault(ProtocolError::MessageInProgress { opcode: op });
            }
            _ => {}
        }
        let length_bytes = match code {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let header = 2 + length_bytes + if frame_masked { 4 } else { 0 };
        if rest.len() < 2 + length_bytes {
            break End::NeedMore(header - rest.len());
        }
        // A 7-bit length is the code itself; an extended one is big-endian (section 5.2).
        let declared = if length_bytes == 0 {
            code
        } else {
            rest[2..2 + length_bytes]
                .iter()
                .fold(0u64, |value, byte| value << 8 | u64::from(*byte))
        };
        if length_bytes == 8 && declared >> 63 == 1 {
            break End::Fault(ProtocolError::LengthTopBit);
        }
        if (length_bytes == 2 && declared <= 125) || (length_bytes == 8 && declared <= 0xffff) {
            break End::Fault(ProtocolError::NonMinimalLength { bytes: declared });
        }
        if !control {
            let assembled = fragments.as_ref().map_or(0, |(_, bytes)| bytes.len());
            if u128::from(declared) + assembled as u128 > message_bytes_max as u128 {
                break End::Fault(ProtocolError::MessageTooBig {
                    bytes: (assembled as u64).saturating_add(declared),
                    max: message_bytes_max,
                });
            }
        }
        if rest.len() < header {
            break End::NeedMore(header - rest.len());
        }
        // Bounded by the message bound (or 125) above, and checked against the stream here.
        let payload_bytes = declared as usize;
        let available = rest.len() - header;
        if available < payload_bytes {
            break End::NeedMore(payload_bytes - available);
        }
        let key = if frame_masked {
            [
                rest[header - 4],
                rest[header - 3],
                rest[header - 2],
                rest[header - 1],
            ]
        } else {
            [0; 4]
        };
        let payload: Vec<u8> = rest[header..header + payload_bytes]
            .iter()
            .enumerate()
            .map(|(index, byte)| byte ^ key[index % 4])
            .collect();
        at += header + payload_bytes;
        let event = match op {
            Opcode::Text | Opcode::Binary if fin => message_event(op == Opcode::Text, payload),
            Opcode::Text | Opcode::Binary => {
                fragments = Some((op == Opcode::Text, payload));
                continue;
            }
            Opcode::Continuation => {
                let (text, mut assembled) = fragments.take().unwrap_or_default();
                assembled.extend_from_slice(&payload);
                if !fin {
                    fragments = Some((text, assembled));
                    continue;
                }
                message_event(text, assembled)
            }
            Opcode::Ping => Ok(Event::Ping(Bytes::from(payload))),
            Opcode::Pong => Ok(Event::Pong(Bytes::from(payload))),
            Opcode::Close => close_event(&payload),
        };
        match event {
            Ok(event @ Event::Close(_)) => {
                events.push(event);
                break if at == stream.len() {
                    End::NeedMore(0)
                } else {
                    End::Fault(ProtocolError::FrameAfterClose)
                };
            }
            Ok(event) => events.push(event),
            Err(fault) => break End::Fault(fault),
        }
    };
    Decoded {
        events,
        consumed: at,
        end,
    }
}
