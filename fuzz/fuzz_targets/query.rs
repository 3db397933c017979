//! Fuzz target `query`: the parameters of a bridge request: `percent_decode`, `parse_query`,
//! `parse_topic`, `Lookup` and `BridgeParams::parse` (with `parse_spec` and `Fields::parse`).
//!
//! Input: text (bytes that are not UTF-8 become U+FFFD, as in a request head). Line 1 is the
//! `{topic}` path segment, line 2 the raw query, every further line a header `name: value`
//! (a line without `:` is no header).
//!
//! Asserts, besides never panicking, against models written here from RFC 3986 section 2.1,
//! docs/PROTOCOL.md §9 and the crate's documented rules:
//! - `percent_decode` (both `+` rules) and `parse_query` (`&`-separated, empty pieces
//!   skipped, first `=` splits, at most 32 parameters, errors at the byte or parameter they
//!   name) give the model's answer;
//! - parameters encoded by the target's own encoder (`%XY` for everything but unreserved
//!   characters, a space as `+`) decode to themselves;
//! - `parse_topic` is the 64 hex digits (`0x` optional) or keccak256 of the decoded name;
//! - `Lookup` reads a header before a query parameter, the first of each; a request whose
//!   parameters parse has the binding, admin, publishers, booleans, addr, keep-alive and
//!   field list the lookup gives (the fields in order, without repeats, `payload` when none
//!   is named), and `parse_spec` gives the same spec; an error names one of the parameters.

#![no_main]

use bps_fuzz::keccak_reference;
use bps_ws::{
    BridgeParams, Field, Lookup, QUERY_PARAMS_MAX, QueryError, RequestHead, parse_query,
    parse_spec, parse_topic, percent_decode,
};
use libfuzzer_sys::fuzz_target;

/// Every parameter a bridge request reads, and `topic` for the path segment.
const PARAMETERS: [&str; 9] = [
    "topic",
    "binding",
    "admin",
    "publishers",
    "history",
    "closed",
    "addr",
    "swarm-soc-fields",
    "swarm-keep-alive",
];
/// `swarm-keep-alive` when absent, and its largest value, in seconds (W7).
const KEEP_ALIVE_S_DEFAULT: u64 = 60;
const KEEP_ALIVE_S_MAX: u64 = 3600;

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

fn decode_model(input: &[u8], plus_is_space: bool) -> Result<Vec<u8>, usize> {
    let mut out = Vec::new();
    let mut index = 0;
    while index < input.len() {
        if input[index] == b'%' {
            let digits = (
                input.get(index + 1).copied().and_then(hex_value),
                input.get(index + 2).copied().and_then(hex_value),
            );
            let (Some(high), Some(low)) = digits else {
                return Err(index);
            };
            out.push(high * 16 + low);
            index += 3;
        } else {
            out.push(if plus_is_space && input[index] == b'+' {
                b' '
            } else {
                input[index]
            });
            index += 1;
        }
    }
    Ok(out)
}

fn query_model(raw: &str) -> Result<Vec<(String, String)>, QueryError> {
    let mut parameters = Vec::new();
    let mut start = 0;
    for piece in raw.split('&') {
        let offset = start;
        start += piece.len() + 1;
        if piece.is_empty() {
            continue;
        }
        if parameters.len() == QUERY_PARAMS_MAX {
            return Err(QueryError::TooManyParameters {
                max: QUERY_PARAMS_MAX,
            });
        }
        let number = parameters.len() + 1;
        let split = piece.find('=');
        let name = &piece[..split.unwrap_or(piece.len())];
        let value = split.map_or("", |at| &piece[at + 1..]);
        let mut decoded = Vec::new();
        for (text, at) in [(name, offset), (value, offset + name.len() + 1)] {
            let bytes =
                decode_model(text.as_bytes(), true).map_err(|position| QueryError::BadEscape {
                    position: at + position,
                })?;
            decoded.push(
                String::from_utf8(bytes).map_err(|_| QueryError::NotUtf8 { parameter: number })?,
            );
        }
        let value = decoded.pop().unwrap_or_default();
        let name = decoded.pop().unwrap_or_default();
        parameters.push((name, value));
    }
    Ok(parameters)
}

/// Percent-encodes every byte but RFC 3986's unreserved characters; a space becomes `+`.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            b' ' => "+".to_owned(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn hex_bytes<const N: usize>(value: &str) -> Option<[u8; N]> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value)
        .as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (index, pair) in digits.chunks(2).enumerate() {
        bytes[index] = hex_value(pair[0])? * 16 + hex_value(pair[1])?;
    }
    Some(bytes)
}

fn topic_model(segment: &str) -> Option<[u8; 32]> {
    if segment.is_empty() {
        return None;
    }
    if let Some(topic) = hex_bytes::<32>(segment) {
        return Some(topic);
    }
    let name = String::from_utf8(decode_model(segment.as_bytes(), false).ok()?).ok()?;
    Some(keccak_reference::keccak256(&[name.as_bytes()]))
}

/// A parameter's value as `Lookup` must give it: the first header, else the first query
/// parameter, any case.
fn lookup_model<'a>(
    head: &'a RequestHead,
    query: &'a [(String, String)],
    name: &str,
) -> Option<&'a str> {
    head.headers
        .iter()
        .find(|(header, _)| header.eq_ignore_ascii_case(name))
        .or_else(|| {
            query
                .iter()
                .find(|(parameter, _)| parameter.eq_ignore_ascii_case(name))
        })
        .map(|(_, value)| value.as_str())
}

fn check_params(params: &BridgeParams, topic: [u8; 32], get: &dyn Fn(&str) -> Option<String>) {
    assert_eq!(params.spec.topic, topic);
    let binding = get("binding")
        .expect("a spec needs a binding")
        .to_lowercase();
    assert_eq!(
        format!("{:?}", params.spec.binding).to_lowercase(),
        binding.replace('_', "")
    );
    assert_eq!(
        params.spec.admin,
        get("admin").map(|admin| hex_bytes::<20>(&admin).expect("a parsed admin"))
    );
    assert_eq!(
        params.addr,
        get("addr").and_then(|addr| hex_bytes::<20>(&addr))
    );
    assert_eq!(params.spec.all, get("publishers").is_some());
    for (flag, name) in [
        (params.spec.history, "history"),
        (params.spec.closed, "closed"),
    ] {
        let truth = get(name).is_some_and(|value| ["true", "1"].contains(&&*value.to_lowercase()));
        assert_eq!(flag, truth, "{name}");
    }
    if params.spec.closed {
        assert!(params.addr.is_some());
    }
    let keep_alive = get("swarm-keep-alive").map_or(KEEP_ALIVE_S_DEFAULT, |value| {
        value.parse().expect("a parsed keep-alive")
    });
    assert_eq!(params.keep_alive_s, keep_alive);
    assert!((1..=KEEP_ALIVE_S_MAX).contains(&keep_alive));
    let mut named: Vec<Field> = Vec::new();
    for name in get("swarm-soc-fields").unwrap_or_default().split(',') {
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let field = Field::from_name(name).expect("a parsed field name");
        assert!(field.name().eq_ignore_ascii_case(name));
        if !named.contains(&field) {
            named.push(field);
        }
    }
    if named.is_empty() {
        named.push(Field::Payload);
    }
    assert_eq!(params.fields.iter().collect::<Vec<_>>(), named);
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let segment = lines.next().unwrap_or_default();
    let raw_query = lines.next().unwrap_or_default();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();

    for plus_is_space in [false, true] {
        let decoded = percent_decode(segment, plus_is_space);
        let expected = decode_model(segment.as_bytes(), plus_is_space)
            .map_err(|position| QueryError::BadEscape { position });
        assert_eq!(decoded, expected);
    }
    let query = parse_query(raw_query);
    assert_eq!(query, query_model(raw_query));
    if let Ok(parameters) = &query {
        let encoded: Vec<String> = parameters
            .iter()
            .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
            .collect();
        assert_eq!(parse_query(&encoded.join("&")).as_ref(), Ok(parameters));
        for (name, _) in parameters {
            assert_eq!(
                percent_decode(&encode(name), true),
                Ok(name.clone().into_bytes())
            );
        }
    }

    let topic = parse_topic(segment);
    assert_eq!(topic.as_ref().ok(), topic_model(segment).as_ref());
    if let Err(error) = &topic {
        assert_eq!(error.parameter, "topic");
    }

    let head = RequestHead {
        method: "GET".to_owned(),
        path: format!("/pubsub/{segment}"),
        query: raw_query.to_owned(),
        headers,
    };
    let lookup = match Lookup::new(&head) {
        Ok(lookup) => lookup,
        Err(error) => {
            assert_eq!(query, Err(error));
            return;
        }
    };
    let parameters = query.expect("the lookup decoded it");
    for name in PARAMETERS
        .iter()
        .chain(&["Binding", "SWARM-SOC-FIELDS", "x"])
    {
        assert_eq!(
            lookup.get(name),
            lookup_model(&head, &parameters, name),
            "{name}"
        );
    }
    let topic = topic.unwrap_or([0x5a; 32]);
    let get = |name: &str| lookup_model(&head, &parameters, name).map(str::to_owned);
    let spec = parse_spec(topic, &lookup);
    match BridgeParams::parse(topic, &lookup) {
        Ok(params) => {
            check_params(&params, topic, &get);
            assert_eq!(spec, Ok(params.spec));
        }
        Err(error) => {
            assert!(PARAMETERS.contains(&error.parameter), "{error}");
            assert!(error.to_string().contains(error.parameter));
            if let Err(spec_error) = spec {
                assert_eq!(error, spec_error);
            }
        }
    }
});
