//! What a bridge session receives (W6, W10): a DATA delivery as the raw bytes of the fields
//! it asked for, the service kinds as text frames, and the challenge text frame.
//!
//! Owns: [`ChunkFacts`] (what verification learnt about a chunk), [`render_delivery`],
//! [`render_roster`], [`challenge_text`], [`EOS_TEXT`] and the JSON spellings of W10, written
//! by hand (every value is a number, lowercase hex or a fixed word, so nothing needs
//! escaping). Never: a decision to deliver (the core's), and never AUTH or an unknown kind:
//! those render as [`Rendered::Nothing`].

use std::fmt;
use std::ops::Range;

use bps_proto::{
    DecodeError, Hash, Kind, RosterError, decode_broadcast, decode_roster, kind_from_i32,
};
use bytes::{Bytes, BytesMut};

use super::fields::{Field, Fields};

/// The text frame that tells a session the channel ended (W10); the close (1000) follows.
pub const EOS_TEXT: &str = r#"{"type":"eos"}"#;

/// Where the parts of a SOC sit: `id(32) ‖ sig(65) ‖ span(8) ‖ payload`.
const ID_RANGE: Range<usize> = 0..32;
const SIGNATURE_RANGE: Range<usize> = 32..97;
const SPAN_RANGE: Range<usize> = 97..105;
const PAYLOAD_START: usize = 105;

/// What verifying a chunk established, for the fields a SOC does not hold itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkFacts {
    /// The SOC address, `keccak256(id ‖ owner)`.
    pub address: Hash,
    /// The signer's public key, SEC1 compressed.
    pub public_key: [u8; 33],
    /// The wrapped CAC's address.
    pub wrapped: Hash,
}

/// One delivery as a bridge session receives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rendered {
    /// A binary message: the asked fields' bytes in order, as parts written one after the
    /// other. Fields of the SOC are slices of the frame (adjacent ones one slice), so no
    /// field of the chunk is ever copied; facts next to each other are one small copy.
    Binary(Vec<Bytes>),
    /// A text message.
    Text(String),
    /// Nothing is sent for this kind (AUTH, unknown kinds).
    Nothing,
}

/// A frame body the bridge cannot render; the broker accepts none of these, so one is a
/// broken assumption upstream, reported rather than trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// The body is not a `Broadcast`.
    Malformed(DecodeError),
    /// The SOC is shorter than `id ‖ sig ‖ span`.
    ShortSoc {
        /// Bytes of the SOC.
        bytes: usize,
    },
    /// A ROSTER whose payload is not a `Roster`.
    Roster(RosterError),
    /// [`render_roster`] was given another kind.
    NotRoster {
        /// The frame's raw kind.
        kind: i32,
    },
}

impl fmt::Display for RenderError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(error) => write!(formatter, "cannot render: {error}"),
            Self::ShortSoc { bytes } => write!(
                formatter,
                "cannot render a SOC of {bytes} bytes (at least {PAYLOAD_START})"
            ),
            Self::Roster(error) => write!(formatter, "cannot render the roster: {error}"),
            Self::NotRoster { kind } => write!(formatter, "kind {kind} is not a ROSTER"),
        }
    }
}

impl std::error::Error for RenderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Malformed(error) => Some(error),
            Self::Roster(error) => Some(error),
            Self::ShortSoc { .. } | Self::NotRoster { .. } => None,
        }
    }
}

/// A decoded `Broadcast` with a SOC long enough to split.
struct Delivery {
    soc: Bytes,
    kind: i32,
    index: u64,
}

fn decode(body: &Bytes) -> Result<Delivery, RenderError> {
    let broadcast = decode_broadcast(body.clone()).map_err(RenderError::Malformed)?;
    if broadcast.soc.len() < PAYLOAD_START {
        return Err(RenderError::ShortSoc {
            bytes: broadcast.soc.len(),
        });
    }
    Ok(Delivery {
        soc: broadcast.soc,
        kind: broadcast.kind,
        index: broadcast.index,
    })
}

/// Renders the accepted frame whose protobuf body (without its varint length) is `body`
/// for a session that asked for `fields`: DATA as the fields' bytes in order, ROSTER and
/// EOS as W10's text frames, AUTH and unknown kinds as nothing.
///
/// # Errors
/// A body that is not a `Broadcast`, a SOC too short to split, or an undecodable roster.
pub fn render_delivery(
    fields: Fields,
    body: &Bytes,
    facts: &ChunkFacts,
) -> Result<Rendered, RenderError> {
    let delivery = decode(body)?;
    match kind_from_i32(delivery.kind) {
        Some(Kind::Data) => Ok(Rendered::Binary(field_parts(fields, &delivery.soc, facts))),
        Some(Kind::Roster) => roster_text(&delivery).map(Rendered::Text),
        Some(Kind::Eos) => Ok(Rendered::Text(EOS_TEXT.to_owned())),
        Some(Kind::Auth | Kind::Unspecified) | None => Ok(Rendered::Nothing),
    }
}

/// The roster text frame of a ROSTER frame's body, for sending the stored latest roster
/// to one session (R22), which needs no [`ChunkFacts`].
///
/// # Errors
/// Not a `Broadcast`, not a ROSTER, or a payload that is not a `Roster`.
pub fn render_roster(body: &Bytes) -> Result<String, RenderError> {
    let delivery = decode(body)?;
    if kind_from_i32(delivery.kind) != Some(Kind::Roster) {
        return Err(RenderError::NotRoster {
            kind: delivery.kind,
        });
    }
    roster_text(&delivery)
}

/// The first server message of a session with `addr` (W10).
pub fn challenge_text(challenge: &Hash) -> String {
    format!(
        r#"{{"type":"challenge","challenge":"{}"}}"#,
        hex::encode(challenge)
    )
}

/// `{"type":"roster","index":N,"publishers":["<40 lowercase hex>",…]}`.
fn roster_text(delivery: &Delivery) -> Result<String, RenderError> {
    let publishers = decode_roster(&delivery.soc[PAYLOAD_START..]).map_err(RenderError::Roster)?;
    let mut text = format!(
        r#"{{"type":"roster","index":{},"publishers":["#,
        delivery.index
    );
    for (position, publisher) in publishers.iter().enumerate() {
        if position > 0 {
            text.push(',');
        }
        text.push('"');
        text.push_str(&hex::encode(publisher));
        text.push('"');
    }
    text.push_str("]}");
    Ok(text)
}

/// Where a field's bytes come from.
enum Part<'facts> {
    /// A range of the SOC.
    Soc(Range<usize>),
    /// What verification supplied.
    Fact(&'facts [u8]),
}

fn locate(field: Field, soc_bytes: usize, facts: &ChunkFacts) -> Part<'_> {
    match field {
        Field::Identifier => Part::Soc(ID_RANGE),
        Field::Signature => Part::Soc(SIGNATURE_RANGE),
        Field::Span => Part::Soc(SPAN_RANGE),
        Field::Payload => Part::Soc(PAYLOAD_START..soc_bytes),
        Field::Address => Part::Fact(&facts.address),
        Field::RecoveredPubKey => Part::Fact(&facts.public_key),
        Field::WrappedAddress => Part::Fact(&facts.wrapped),
    }
}

/// A part of a message being gathered.
enum Pending {
    Soc(Range<usize>),
    Facts(BytesMut),
}

impl Pending {
    fn finish(self, soc: &Bytes) -> Bytes {
        match self {
            Pending::Soc(range) => soc.slice(range),
            Pending::Facts(bytes) => bytes.freeze(),
        }
    }
}

/// The fields' bytes in order, as parts (`decode` made the SOC at least 105 bytes long, so
/// every range is inside it): adjacent SOC ranges merge into one slice and adjacent facts
/// into one copy, so at most [`Fields`]' length of parts, and one for `[payload]`.
fn field_parts(fields: Fields, soc: &Bytes, facts: &ChunkFacts) -> Vec<Bytes> {
    let mut parts = Vec::new();
    let mut pending: Option<Pending> = None;
    for field in fields.iter() {
        pending = Some(match (pending.take(), locate(field, soc.len(), facts)) {
            (Some(Pending::Soc(range)), Part::Soc(next)) if range.end == next.start => {
                Pending::Soc(range.start..next.end)
            }
            (Some(Pending::Facts(mut bytes)), Part::Fact(fact)) => {
                bytes.extend_from_slice(fact);
                Pending::Facts(bytes)
            }
            (done, part) => {
                parts.extend(done.map(|done| done.finish(soc)));
                match part {
                    Part::Soc(range) => Pending::Soc(range),
                    Part::Fact(fact) => Pending::Facts(BytesMut::from(fact)),
                }
            }
        });
    }
    parts.extend(pending.map(|last| last.finish(soc)));
    parts
}
