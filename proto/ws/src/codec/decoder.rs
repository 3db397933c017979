//! The incremental frame decoder: bytes off the front of a read buffer in, [`Event`]s out.
//!
//! Owns: [`Decoder`] (one per connection and direction) with the rules of RFC 6455 section 5
//! that a receiver checks: masking by direction, no RSV bits, known opcodes, control frames
//! whole and at most 125 bytes (and allowed between fragments), continuation only inside a
//! message and no new message inside one, minimal lengths without the 64-bit top bit, the
//! message bound, UTF-8 text, valid close payloads, nothing after a close.
//!
//! Never: reads a socket or buffers a frame it has not yet got: it looks at what the caller's
//! `BytesMut` holds, consumes a frame only once the whole frame is there, and otherwise says
//! "need more" (`Ok(None)`, with [`Decoder::bytes_wanted`] telling how much at least). A
//! declared length over the bound is refused as soon as the length field is readable, before
//! any payload byte is awaited. An unfragmented message is unmasked in place and handed out
//! as a slice of the read buffer (no copy); fragments are unmasked in place and copied once
//! into the message being assembled.

use bytes::{Buf, Bytes, BytesMut};

use super::close::{CloseFrame, parse_close};
use super::error::ProtocolError;
use super::header::{
    FIN_BIT, LENGTH_7_MAX, LENGTH_16_CODE, LENGTH_16_MAX, LENGTH_64_CODE, LENGTH_BITS, MASK_BIT,
    MASK_KEY_BYTES, OPCODE_BITS, RSV_BITS,
};
use super::mask::apply_mask;
use super::opcode::Opcode;

/// Bytes every header starts with: flags and opcode, mask bit and 7-bit length.
const BASE_HEADER_BYTES: usize = 2;
/// Bytes of the extended length after the code 126.
const LENGTH_16_BYTES: usize = 2;
/// Bytes of the extended length after the code 127.
const LENGTH_64_BYTES: usize = 8;
/// The most significant bit of a 64-bit length, which section 5.2 requires to be 0.
const LENGTH_64_TOP_BIT: u64 = 1 << 63;

/// What a peer sent, one whole message or control frame at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A whole message, its fragments joined; `text` messages are valid UTF-8.
    Message {
        /// Sent as a text message (opcode 1) rather than binary (opcode 2).
        text: bool,
        /// The unmasked message.
        payload: Bytes,
    },
    /// A ping; the receiver answers a pong with the same payload.
    Ping(Bytes),
    /// A pong.
    Pong(Bytes),
    /// The peer's close frame (`None`: without a status code). Nothing may follow it.
    Close(Option<CloseFrame>),
}

/// Which side of the connection the decoder reads for, which fixes the masking rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Reads a client's frames: every frame must be masked.
    Server,
    /// Reads a server's frames: no frame may be masked.
    Client,
}

/// A fragmented message being assembled.
#[derive(Debug)]
struct Fragments {
    text: bool,
    assembled: BytesMut,
}

/// A complete frame header at the front of a buffer, every header rule already checked.
#[derive(Debug, Clone, Copy)]
struct FrameHeader {
    fin: bool,
    opcode: Opcode,
    mask: Option<[u8; MASK_KEY_BYTES]>,
    header_bytes: usize,
    payload_bytes: usize,
}

impl FrameHeader {
    fn frame_bytes(&self) -> usize {
        self.header_bytes.saturating_add(self.payload_bytes)
    }
}

/// What the first two bytes of a header say.
#[derive(Debug, Clone, Copy)]
struct Flags {
    fin: bool,
    opcode: Opcode,
    masked: bool,
    length_code: u8,
}

/// How far the front of a buffer goes toward a frame.
enum Peek {
    /// The header is incomplete: at least this many more bytes are needed.
    Wanting(usize),
    /// The header is complete and valid (the payload may still be arriving).
    Header(FrameHeader),
}

/// Decodes one direction of one connection.
#[derive(Debug)]
pub struct Decoder {
    role: Role,
    message_bytes_max: usize,
    fragments: Option<Fragments>,
    closed: bool,
}

impl Decoder {
    /// A server's decoder of a client's frames (all masked), refusing any message over
    /// `message_bytes_max` bytes (all of its fragments together).
    pub fn new(message_bytes_max: usize) -> Decoder {
        Decoder::with_role(Role::Server, message_bytes_max)
    }

    /// A client's decoder of a server's frames (none masked), for the load generator and
    /// tests; every other rule is the same as [`Decoder::new`]'s.
    pub fn client(message_bytes_max: usize) -> Decoder {
        Decoder::with_role(Role::Client, message_bytes_max)
    }

    fn with_role(role: Role, message_bytes_max: usize) -> Decoder {
        Decoder {
            role,
            message_bytes_max,
            fragments: None,
            closed: false,
        }
    }

    /// The next event from the front of `buf`, consuming the frames it used.
    ///
    /// `Ok(None)`: `buf` holds no whole frame that completes an event; what it holds is
    /// kept (a non-final fragment already consumed stays in the decoder). An error is final:
    /// fail the connection with [`ProtocolError::close_code`].
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Event>, ProtocolError> {
        loop {
            if self.closed {
                return if buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ProtocolError::FrameAfterClose)
                };
            }
            let header = match self.peek(buf)? {
                Peek::Wanting(_) => return Ok(None),
                Peek::Header(header) => header,
            };
            if buf.len() < header.frame_bytes() {
                return Ok(None);
            }
            let mut payload = buf.split_to(header.frame_bytes());
            payload.advance(header.header_bytes);
            if let Some(key) = header.mask {
                apply_mask(&mut payload, key);
            }
            if let Some(event) = self.take_frame(header, payload)? {
                return Ok(Some(event));
            }
        }
    }

    /// At least how many more bytes `buf` needs before [`Decoder::decode`] can consume its
    /// front frame; 0 when it can act now (a whole frame, or a fault to report, is there).
    /// A caller reserves this much room before its next read.
    pub fn bytes_wanted(&self, buf: &[u8]) -> usize {
        if self.closed {
            return 0;
        }
        match self.peek(buf) {
            Ok(Peek::Wanting(bytes)) => bytes,
            Ok(Peek::Header(header)) => header.frame_bytes().saturating_sub(buf.len()),
            Err(_) => 0,
        }
    }

    /// Reads and checks the header at the front of `buf`, consuming nothing.
    fn peek(&self, buf: &[u8]) -> Result<Peek, ProtocolError> {
        let [first, second, ..] = *buf else {
            return Ok(Peek::Wanting(BASE_HEADER_BYTES - buf.len()));
        };
        let flags = self.check_flags(first, second)?;
        let mask_start = BASE_HEADER_BYTES + extended_length_bytes(flags.length_code);
        let header_bytes = mask_start + if flags.masked { MASK_KEY_BYTES } else { 0 };
        let wanting = Peek::Wanting(header_bytes.saturating_sub(buf.len()));
        let Some(declared) = read_length(flags.length_code, &buf[BASE_HEADER_BYTES..])? else {
            return Ok(wanting);
        };
        let payload_bytes = self.check_bound(flags.opcode, declared)?;
        let mask = if flags.masked {
            match buf
                .get(mask_start..header_bytes)
                .map(<[u8; MASK_KEY_BYTES]>::try_from)
            {
                Some(Ok(key)) => Some(key),
                _ => return Ok(wanting),
            }
        } else {
            None
        };
        Ok(Peek::Header(FrameHeader {
            fin: flags.fin,
            opcode: flags.opcode,
            mask,
            header_bytes,
            payload_bytes,
        }))
    }

    /// The rules the first two bytes decide: RSV bits, opcode, masking by role, control
    /// frames whole and short, data frames in sequence.
    fn check_flags(&self, first: u8, second: u8) -> Result<Flags, ProtocolError> {
        if first & RSV_BITS != 0 {
            return Err(ProtocolError::ReservedBits {
                bits: first & RSV_BITS,
            });
        }
        let opcode =
            Opcode::from_wire(first & OPCODE_BITS).ok_or(ProtocolError::UnknownOpcode {
                opcode: first & OPCODE_BITS,
            })?;
        let flags = Flags {
            fin: first & FIN_BIT != 0,
            opcode,
            masked: second & MASK_BIT != 0,
            length_code: second & LENGTH_BITS,
        };
        match (self.role, flags.masked) {
            (Role::Server, false) => return Err(ProtocolError::Unmasked),
            (Role::Client, true) => return Err(ProtocolError::Masked),
            (Role::Server, true) | (Role::Client, false) => {}
        }
        if opcode.is_control() {
            check_control(opcode, flags.fin, flags.length_code)?;
        } else {
            self.check_sequence(opcode)?;
        }
        Ok(flags)
    }

    /// A data frame must fit the message state: continuation inside a message, text or
    /// binary outside one.
    fn check_sequence(&self, opcode: Opcode) -> Result<(), ProtocolError> {
        match (opcode, self.fragments.is_some()) {
            (Opcode::Continuation, false) => Err(ProtocolError::ContinuationWithoutMessage),
            (Opcode::Text | Opcode::Binary, true) => {
                Err(ProtocolError::MessageInProgress { opcode })
            }
            _ => Ok(()),
        }
    }

    /// The payload length as a `usize`, once it is known to fit: a data frame must not take
    /// its message over the bound (control frames are bounded by [`check_control`]).
    fn check_bound(&self, opcode: Opcode, declared: u64) -> Result<usize, ProtocolError> {
        if opcode.is_control() {
            // check_control bounded the 7-bit length to 125.
            return Ok(declared as usize);
        }
        let assembled = self
            .fragments
            .as_ref()
            .map_or(0, |fragments| fragments.assembled.len());
        let room = self.message_bytes_max.saturating_sub(assembled);
        match usize::try_from(declared) {
            Ok(bytes) if bytes <= room => Ok(bytes),
            _ => Err(ProtocolError::MessageTooBig {
                bytes: (assembled as u64).saturating_add(declared),
                max: self.message_bytes_max,
            }),
        }
    }

    /// Applies a whole, unmasked frame to the message state; an event when it completes one.
    fn take_frame(
        &mut self,
        header: FrameHeader,
        payload: BytesMut,
    ) -> Result<Option<Event>, ProtocolError> {
        match header.opcode {
            Opcode::Text | Opcode::Binary => {
                let text = header.opcode == Opcode::Text;
                if header.fin {
                    return whole_message(text, payload).map(Some);
                }
                let mut assembled = BytesMut::with_capacity(payload.len());
                assembled.extend_from_slice(&payload);
                self.fragments = Some(Fragments { text, assembled });
                Ok(None)
            }
            Opcode::Continuation => {
                // peek's sequence check already refused a continuation outside a message.
                let Some(mut fragments) = self.fragments.take() else {
                    return Err(ProtocolError::ContinuationWithoutMessage);
                };
                fragments.assembled.extend_from_slice(&payload);
                if !header.fin {
                    self.fragments = Some(fragments);
                    return Ok(None);
                }
                whole_message(fragments.text, fragments.assembled).map(Some)
            }
            Opcode::Ping => Ok(Some(Event::Ping(payload.freeze()))),
            Opcode::Pong => Ok(Some(Event::Pong(payload.freeze()))),
            Opcode::Close => {
                let close = parse_close(&payload)?;
                self.closed = true;
                Ok(Some(Event::Close(close)))
            }
        }
    }
}

/// Control frames are whole (FIN set) and carry at most 125 bytes, so only the 7-bit
/// length form is theirs.
fn check_control(opcode: Opcode, fin: bool, length_code: u8) -> Result<(), ProtocolError> {
    if !fin {
        return Err(ProtocolError::FragmentedControl { opcode });
    }
    if u64::from(length_code) > LENGTH_7_MAX {
        return Err(ProtocolError::ControlTooLong { opcode });
    }
    Ok(())
}

/// Bytes of the extended length that follow a 7-bit length code.
fn extended_length_bytes(length_code: u8) -> usize {
    match length_code {
        LENGTH_16_CODE => LENGTH_16_BYTES,
        LENGTH_64_CODE => LENGTH_64_BYTES,
        _ => 0,
    }
}

/// The declared payload length from the 7-bit code and the bytes after the first two;
/// `None` while the extended field is incomplete. Non-minimal encodings and the 64-bit top
/// bit are refused.
fn read_length(length_code: u8, rest: &[u8]) -> Result<Option<u64>, ProtocolError> {
    let (declared, shortest_max) = match length_code {
        LENGTH_16_CODE => match rest.first_chunk::<LENGTH_16_BYTES>() {
            Some(field) => (u64::from(u16::from_be_bytes(*field)), LENGTH_7_MAX),
            None => return Ok(None),
        },
        LENGTH_64_CODE => match rest.first_chunk::<LENGTH_64_BYTES>() {
            Some(field) => (u64::from_be_bytes(*field), LENGTH_16_MAX),
            None => return Ok(None),
        },
        short => return Ok(Some(u64::from(short))),
    };
    if declared & LENGTH_64_TOP_BIT != 0 {
        return Err(ProtocolError::LengthTopBit);
    }
    if declared <= shortest_max {
        return Err(ProtocolError::NonMinimalLength { bytes: declared });
    }
    Ok(Some(declared))
}

/// A complete message: text must be UTF-8.
fn whole_message(text: bool, payload: BytesMut) -> Result<Event, ProtocolError> {
    if text && let Err(error) = std::str::from_utf8(&payload) {
        return Err(ProtocolError::InvalidText {
            valid_up_to: error.valid_up_to(),
        });
    }
    Ok(Event::Message {
        text,
        payload: payload.freeze(),
    })
}
