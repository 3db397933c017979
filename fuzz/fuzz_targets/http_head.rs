//! Fuzz target `http_head`: `bps_ws::parse_request_head`, the request head every connection
//! to the WebSocket port sends first, its lookups, and `check_upgrade` on what it parsed.
//!
//! Input: `headers bound (1) ‖ byte bound (u16 LE, 0xffff = usize::MAX) ‖ cut count (1) ‖
//! cuts (u16 LE each) ‖ bytes` (the last four as `bps_fuzz::frame_input`).
//!
//! Asserts, besides never panicking:
//! - the bounds: a complete head is at most the byte bound and has at most the header bound
//!   of headers; under a byte bound one short of the head the same bytes are refused
//!   (`HeadTooLarge`), under a header bound one short `TooManyHeaders`; "need more" only
//!   while the bytes are under the byte bound, `HeadTooLarge` only once they reach it;
//! - a complete head ends its bytes with a blank line, parses the same from its own bytes
//!   alone and with other bytes after it, and every prefix of it cut at the input's cuts is
//!   "need more"; a "need more" is "need more" at every cut too;
//! - the parsed head: the path holds no `?`, header names are lowercase, no value holds a
//!   line break, `header` and `header_values` find every header by any case of its name
//!   and in order, `query_param` is the first match of `parse_query`;
//! - `check_upgrade` gives the verdict of the RFC 6455 section 4.2.1 rules restated here (in
//!   its documented order), its accept key is `accept_key` of the trimmed key, 28 base64
//!   characters, and each error's status is 405, 426 or 400; a head error's is 431, 400 or
//!   505.

#![no_main]

use bps_fuzz::frame_input::FrameInput;
use bps_ws::{
    HttpError, RequestHead, UpgradeError, accept_key, check_upgrade, parse_query,
    parse_request_head,
};
use libfuzzer_sys::fuzz_target;

/// Characters of a `Sec-WebSocket-Accept` value: base64 of a 20-byte sha1.
const ACCEPT_CHARS: usize = 28;

type Parsed = Result<Option<(RequestHead, usize)>, HttpError>;

fn base64_of_16_bytes(key: &str) -> bool {
    // 16 bytes are 22 base64 characters and two `=` of padding; the last character holds
    // only 2 data bits, so it is one of the 4 characters whose low 4 bits are zero.
    let bytes = key.as_bytes();
    bytes.len() == 24
        && bytes[..22]
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || *byte == b'+' || *byte == b'/')
        && b"AQgw".contains(&bytes[21])
        && &bytes[22..] == b"=="
}

fn lists(head: &RequestHead, name: &str, token: &str) -> bool {
    head.headers
        .iter()
        .filter(|(header, _)| header == name)
        .any(|(_, value)| {
            value
                .split(',')
                .any(|item| item.trim().eq_ignore_ascii_case(token))
        })
}

/// The upgrade rules in the documented order: GET, `Upgrade`, `Connection`, version 13, one
/// key that is the base64 of 16 bytes.
fn upgrade_model(head: &RequestHead) -> Result<String, UpgradeError> {
    if head.method != "GET" {
        return Err(UpgradeError::Method {
            method: head.method.clone(),
        });
    }
    if !lists(head, "upgrade", "websocket") {
        return Err(UpgradeError::UpgradeHeader);
    }
    if !lists(head, "connection", "upgrade") {
        return Err(UpgradeError::ConnectionHeader);
    }
    let version = head
        .headers
        .iter()
        .find(|(name, _)| name == "sec-websocket-version")
        .map(|(_, value)| value.trim());
    if version != Some("13") {
        return Err(UpgradeError::Version {
            sent: version.map(str::to_owned),
        });
    }
    let keys: Vec<&str> = head
        .headers
        .iter()
        .filter(|(name, _)| name == "sec-websocket-key")
        .map(|(_, value)| value.as_str())
        .collect();
    if keys.len() != 1 {
        return Err(UpgradeError::KeyCount { count: keys.len() });
    }
    let key = keys[0].trim();
    if !base64_of_16_bytes(key) {
        return Err(UpgradeError::KeyInvalid);
    }
    Ok(accept_key(key))
}

fn check_head(head: &RequestHead, headers_max: usize) {
    assert!(!head.method.is_empty());
    assert!(!head.path.contains('?'), "{:?}", head.path);
    assert!(head.headers.len() <= headers_max);
    for (index, (name, value)) in head.headers.iter().enumerate() {
        assert_eq!(*name, name.to_ascii_lowercase());
        assert!(!value.contains(['\r', '\n']), "{value:?}");
        let first = head.headers.iter().position(|(other, _)| other == name);
        let shouted = name.to_ascii_uppercase();
        if first == Some(index) {
            assert_eq!(head.header(&shouted), Some(value.as_str()));
        }
        let values: Vec<&str> = head
            .headers
            .iter()
            .filter(|(other, _)| other == name)
            .map(|(_, value)| value.as_str())
            .collect();
        assert_eq!(head.header_values(&shouted).collect::<Vec<_>>(), values);
    }
    match parse_query(&head.query) {
        Ok(parameters) => {
            for (name, _) in &parameters {
                let first = parameters
                    .iter()
                    .find(|(other, _)| other.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.clone());
                assert_eq!(head.query_param(name), Ok(first));
            }
        }
        Err(error) => assert_eq!(head.query_param("binding"), Err(error)),
    }
    let verdict = check_upgrade(head);
    assert_eq!(verdict, upgrade_model(head));
    match verdict {
        Ok(accept) => assert_eq!(accept.len(), ACCEPT_CHARS),
        Err(error) => assert!([405, 426, 400].contains(&error.status()), "{error}"),
    }
}

fn check_error(error: &HttpError, bytes: &[u8], bytes_max: usize, headers_max: usize) {
    assert!([431, 400, 505].contains(&error.status()), "{error}");
    match error {
        HttpError::HeadTooLarge { bytes_max: bound } => {
            assert_eq!(*bound, bytes_max);
            assert!(bytes.len() >= bytes_max);
        }
        HttpError::TooManyHeaders { headers_max: bound } => assert_eq!(*bound, headers_max),
        HttpError::Version { minor } => assert_ne!(*minor, 1),
        HttpError::Malformed { .. } => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&headers_max, rest)) = data.split_first() else {
        return;
    };
    let headers_max = usize::from(headers_max);
    let input = FrameInput::parse(rest);
    let bytes_max = input.frame_bytes_max;
    let bytes = input.stream;
    let parsed: Parsed = parse_request_head(bytes, bytes_max, headers_max);
    match &parsed {
        Ok(Some((head, used))) => {
            let used = *used;
            assert!(used <= bytes.len() && used <= bytes_max);
            assert!(bytes[..used].ends_with(b"\n\n") || bytes[..used].ends_with(b"\n\r\n"));
            check_head(head, headers_max);
            let alone = parse_request_head(&bytes[..used], bytes_max, headers_max);
            assert_eq!(alone, parsed);
            let mut followed = bytes[..used].to_vec();
            followed.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(
                parse_request_head(&followed, bytes_max, headers_max),
                parsed
            );
            for &cut in input.cuts.iter().filter(|&&cut| cut < used) {
                assert_eq!(
                    parse_request_head(&bytes[..cut], bytes_max, headers_max),
                    Ok(None),
                    "cut at {cut} of {used}"
                );
            }
            // One byte short of the head's length, the bound refuses it.
            assert_eq!(
                parse_request_head(bytes, used - 1, headers_max),
                Err(HttpError::HeadTooLarge {
                    bytes_max: used - 1
                })
            );
            if let Some(fewer) = head.headers.len().checked_sub(1) {
                assert_eq!(
                    parse_request_head(bytes, bytes_max, fewer),
                    Err(HttpError::TooManyHeaders { headers_max: fewer })
                );
            }
        }
        Ok(None) => {
            assert!(bytes.len() < bytes_max);
            for &cut in &input.cuts {
                assert_eq!(
                    parse_request_head(&bytes[..cut], bytes_max, headers_max),
                    Ok(None),
                    "cut at {cut}"
                );
            }
        }
        Err(error) => check_error(error, bytes, bytes_max, headers_max),
    }
});
