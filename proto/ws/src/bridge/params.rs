//! The Join parameters of a bridge request (W1, W2, W6, W7, W10, W11).
//!
//! Owns: [`Lookup`] (a name is read first as a header, then as a query parameter, since
//! browsers cannot set headers on a WebSocket), [`parse_topic`] (the path segment),
//! [`parse_spec`] (the spec, checked by `Spec::check`), [`BridgeParams`] (spec, `addr`,
//! fields, keep-alive, and W11's refusal of a spectator on a closed cohort) and
//! [`ParamError`], one line naming the parameter. Never: broker policy (whether `history` is
//! refused, capacity) or the native endpoint's Join, which is a frame, not a query.
//!
//! Unknown parameters are ignored (a dApp may add its own), `peer` names the broker's
//! underlay and is ignored on the appliance, `swarm-cache-wrapped-chunk` is a Bee storage
//! feature with no meaning here (W7), and a repeated parameter counts once: the first.

use std::fmt;

use bps_proto::{Address, Binding, Hash, RejectReason, Spec, keccak256};

use super::fields::Fields;
use crate::http::RequestHead;
use crate::query::{QueryError, parse_query, percent_decode};

/// W10's binding names, case-insensitive: the SWIP example's spelling.
const BINDING_NAMES: [(&str, Binding); 5] = [
    ("mnemonic", Binding::Mnemonic),
    ("anchor", Binding::Anchor),
    ("soc_id", Binding::SocId),
    ("owner", Binding::Owner),
    ("feed_topic", Binding::FeedTopic),
];

/// W10's boolean spellings, case-insensitive.
const BOOLEAN_NAMES: [(&str, bool); 4] =
    [("true", true), ("false", false), ("1", true), ("0", false)];

/// The only value of `publishers` (case-insensitive); absent means unset.
const PUBLISHERS_ALL: &str = "all";

/// The parameter that names the fields of a delivery (W6).
const FIELDS_PARAMETER: &str = "swarm-soc-fields";
/// The parameter that sets the ping period (W7).
const KEEP_ALIVE_PARAMETER: &str = "swarm-keep-alive";
/// A Bee storage switch, accepted and ignored (W7).
const CACHE_WRAPPED_PARAMETER: &str = "swarm-cache-wrapped-chunk";

/// The bridge's own header names (W6, W7): a browser's `fetch` may send them on the W5
/// POST, so CORS must allow them.
pub const SWARM_HEADERS: [&str; 3] = [
    FIELDS_PARAMETER,
    KEEP_ALIVE_PARAMETER,
    CACHE_WRAPPED_PARAMETER,
];

/// `swarm-keep-alive` when absent (W7).
pub const KEEP_ALIVE_S_DEFAULT: u64 = 60;
/// Longest ping period a session may ask for: an hour. Idle links longer than that are cut
/// by NATs and proxies anyway, and the period is also how soon a dead browser is noticed, so
/// a larger value would only keep dead sessions (and their fan-out slots) around.
pub const KEEP_ALIVE_S_MAX: u64 = 3600;

/// A request parameter that cannot make a valid Join: answered 400 with this one line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ParamError {
    /// The parameter at fault (`topic` for the path segment).
    pub parameter: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl ParamError {
    fn new(parameter: &'static str, problem: impl Into<String>) -> ParamError {
        ParamError {
            parameter,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            formatter,
            "parameter {:?}: {}",
            self.parameter, self.problem
        )
    }
}

impl std::error::Error for ParamError {}

/// The parameters of one request: headers first, then the decoded query.
#[derive(Debug, Clone)]
pub struct Lookup<'head> {
    head: &'head RequestHead,
    query: Vec<(String, String)>,
}

impl<'head> Lookup<'head> {
    /// Decodes the query of `head` once.
    ///
    /// # Errors
    /// The query cannot be decoded.
    pub fn new(head: &'head RequestHead) -> Result<Lookup<'head>, QueryError> {
        Ok(Lookup {
            head,
            query: parse_query(&head.query)?,
        })
    }

    /// The value of `name` (any case): the first header of that name, else the first query
    /// parameter.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.head.header(name).or_else(|| {
            self.query
                .iter()
                .find(|(parameter, _)| parameter.eq_ignore_ascii_case(name))
                .map(|(_, value)| value.as_str())
        })
    }
}

/// The 32-byte topic of the path segment `{topic}` (W1, W10): 64 hex digits, with or
/// without `0x`, any case, are the topic itself; anything else is percent-decoded (`+`
/// stays a plus, as in any path) and hashed with keccak256 of its UTF-8 bytes.
///
/// # Errors
/// An empty segment, a bad escape, or bytes that are not UTF-8.
pub fn parse_topic(segment: &str) -> Result<Hash, ParamError> {
    if segment.is_empty() {
        return Err(ParamError::new(
            "topic",
            "empty (expected 64 hex digits or a name)",
        ));
    }
    if let Some(topic) = parse_hex::<32>(segment) {
        return Ok(topic);
    }
    let bytes = percent_decode(segment, false)
        .map_err(|error| ParamError::new("topic", error.to_string()))?;
    let name = String::from_utf8(bytes)
        .map_err(|_| ParamError::new("topic", "not UTF-8 once percent-decoded"))?;
    Ok(keccak256(name.as_bytes()))
}

fn strip_hex_prefix(value: &str) -> &str {
    value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value)
}

/// `N` bytes from exactly `2 * N` hex digits of any case, after an optional `0x`.
fn parse_hex<const N: usize>(value: &str) -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    hex::decode_to_slice(strip_hex_prefix(value), &mut bytes).ok()?;
    Some(bytes)
}

/// An optional 20-byte address parameter (`admin`, `addr`).
fn parse_address(
    lookup: &Lookup<'_>,
    parameter: &'static str,
) -> Result<Option<Address>, ParamError> {
    lookup
        .get(parameter)
        .map(|value| {
            parse_hex::<20>(value).ok_or_else(|| {
                ParamError::new(
                    parameter,
                    format!("{value:?} is not a 20-byte address (40 hex digits, 0x optional)"),
                )
            })
        })
        .transpose()
}

/// An optional boolean parameter; absent is false.
fn parse_bool(lookup: &Lookup<'_>, parameter: &'static str) -> Result<bool, ParamError> {
    let Some(value) = lookup.get(parameter) else {
        return Ok(false);
    };
    BOOLEAN_NAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, truth)| *truth)
        .ok_or_else(|| {
            ParamError::new(
                parameter,
                format!("{value:?} is not a boolean (expected true, false, 1 or 0)"),
            )
        })
}

fn parse_binding(lookup: &Lookup<'_>) -> Result<Binding, ParamError> {
    let expected = "expected mnemonic, anchor, soc_id, owner or feed_topic";
    let Some(value) = lookup.get("binding") else {
        return Err(ParamError::new("binding", format!("missing ({expected})")));
    };
    BINDING_NAMES
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, binding)| *binding)
        .ok_or_else(|| {
            ParamError::new("binding", format!("unknown binding {value:?} ({expected})"))
        })
}

fn parse_publishers(lookup: &Lookup<'_>) -> Result<bool, ParamError> {
    match lookup.get("publishers") {
        None => Ok(false),
        Some(value) if value.eq_ignore_ascii_case(PUBLISHERS_ALL) => Ok(true),
        Some(value) => Err(ParamError::new(
            "publishers",
            format!("{value:?} is not a regime (expected all, or leave it out)"),
        )),
    }
}

/// The parameter whose value makes a spec break R3 or D7.
fn parameter_of(reason: &RejectReason) -> &'static str {
    match reason {
        RejectReason::AllWithoutAdmin
        | RejectReason::AllWithoutMnemonic { .. }
        | RejectReason::PublishersUnknown { .. } => "publishers",
        RejectReason::ClosedWithAll | RejectReason::ClosedImplicit => "closed",
        RejectReason::MissingCohort
        | RejectReason::BindingUnspecified
        | RejectReason::BindingUnknown { .. } => "binding",
        RejectReason::TopicLength { .. } => "topic",
        RejectReason::AdminLength { .. } => "admin",
        RejectReason::AddrLength { .. } => "addr",
    }
}

/// The cohort spec a request asks for (W2): `binding` (required), `admin`, `publishers`,
/// `history`, `closed`, checked against R3 and D7 by `Spec::check`.
///
/// # Errors
/// The first parameter that is missing, malformed, or makes the combination invalid.
pub fn parse_spec(topic: Hash, lookup: &Lookup<'_>) -> Result<Spec, ParamError> {
    let spec = Spec {
        topic,
        binding: parse_binding(lookup)?,
        admin: parse_address(lookup, "admin")?,
        all: parse_publishers(lookup)?,
        history: parse_bool(lookup, "history")?,
        closed: parse_bool(lookup, "closed")?,
    };
    spec.check()
        .map_err(|reason| ParamError::new(parameter_of(&reason), reason.to_string()))?;
    Ok(spec)
}

fn parse_keep_alive(lookup: &Lookup<'_>) -> Result<u64, ParamError> {
    let Some(value) = lookup.get(KEEP_ALIVE_PARAMETER) else {
        return Ok(KEEP_ALIVE_S_DEFAULT);
    };
    match value.parse::<u64>() {
        Ok(seconds) if (1..=KEEP_ALIVE_S_MAX).contains(&seconds) => Ok(seconds),
        _ => Err(ParamError::new(
            KEEP_ALIVE_PARAMETER,
            format!("{value:?} is not a ping period (expected 1 to {KEEP_ALIVE_S_MAX} seconds)"),
        )),
    }
}

/// Everything a bridge session's request says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BridgeParams {
    /// The cohort.
    pub spec: Spec,
    /// The address the session publishes as; `None` is a spectator session, joined with a
    /// random addr the broker draws (W11).
    pub addr: Option<Address>,
    /// What each delivery carries (W6).
    pub fields: Fields,
    /// The ping period of the link (W7).
    pub keep_alive_s: u64,
}

impl BridgeParams {
    /// The parameters of a session request for `topic` (from [`parse_topic`]).
    ///
    /// # Errors
    /// As [`parse_spec`]; a malformed `addr`, `swarm-soc-fields` or `swarm-keep-alive`; or
    /// no `addr` on a closed cohort (W11: a closed cohort has no audience).
    pub fn parse(topic: Hash, lookup: &Lookup<'_>) -> Result<BridgeParams, ParamError> {
        let spec = parse_spec(topic, lookup)?;
        let addr = parse_address(lookup, "addr")?;
        if spec.closed && addr.is_none() {
            return Err(ParamError::new(
                "addr",
                "required on a closed cohort (a closed cohort has no audience; join with addr)",
            ));
        }
        let fields = Fields::parse(lookup.get(FIELDS_PARAMETER).unwrap_or_default())
            .map_err(|error| ParamError::new(FIELDS_PARAMETER, error.to_string()))?;
        Ok(BridgeParams {
            spec,
            addr,
            fields,
            keep_alive_s: parse_keep_alive(lookup)?,
        })
    }
}
