//! The WebSocket opening handshake, server side (RFC 6455 sections 4.2.1 and 4.2.2).
//!
//! Owns: [`check_upgrade`] (the request head's upgrade rules, each refusal an
//! [`UpgradeError`] with its HTTP status), [`accept_key`] (sha1 and base64 from their crates)
//! and the 101 answer ([`switching_protocols`]). Never: a subprotocol or an extension: none
//! is selected, so a `permessage-deflate` offer is ignored and frames stay uncompressed
//! (every RSV bit is then an error); never the routing or the Join parameters of the request
//! (that is [`crate::bridge`]); never the `Origin` policy of W10 (that is [`crate::origin`]).

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha1::{Digest, Sha1};

use crate::http::RequestHead;
use crate::response::Response;

/// Appended to the client's key before hashing (RFC 6455 section 1.3).
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/// The only protocol version (RFC 6455 section 4.4).
const WEBSOCKET_VERSION: &str = "13";
/// The nonce in `Sec-WebSocket-Key` is 16 random bytes (section 4.1).
const KEY_NONCE_BYTES: usize = 16;

/// A request that cannot be upgraded, answered before any WebSocket frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UpgradeError {
    /// Not a GET (405).
    Method {
        /// The method sent.
        method: String,
    },
    /// `Upgrade` does not list the token `websocket` (400).
    UpgradeHeader,
    /// `Connection` does not list the token `upgrade` (400).
    ConnectionHeader,
    /// `Sec-WebSocket-Version` is absent or not 13 (426, naming the version we speak).
    Version {
        /// The version sent, if any.
        sent: Option<String>,
    },
    /// `Sec-WebSocket-Key` is absent or repeated (400).
    KeyCount {
        /// How many times it was sent.
        count: usize,
    },
    /// `Sec-WebSocket-Key` is not the base64 of 16 bytes (400).
    KeyInvalid,
}

impl UpgradeError {
    /// The HTTP status that answers this refusal: 405, 426 or 400.
    pub fn status(&self) -> u16 {
        match self {
            Self::Method { .. } => 405,
            Self::Version { .. } => 426,
            Self::UpgradeHeader
            | Self::ConnectionHeader
            | Self::KeyCount { .. }
            | Self::KeyInvalid => 400,
        }
    }

    /// The whole answer: the status with a one-line reason, plus `Allow: GET` on a 405 and
    /// `Sec-WebSocket-Version: 13` on a 426 (RFC 6455 section 4.4).
    pub fn to_response(&self) -> Response {
        let response = Response::error(self.status(), &self.to_string());
        match self {
            Self::Method { .. } => response.with_header("Allow", "GET"),
            Self::Version { .. } => {
                response.with_header("Sec-WebSocket-Version", WEBSOCKET_VERSION)
            }
            Self::UpgradeHeader
            | Self::ConnectionHeader
            | Self::KeyCount { .. }
            | Self::KeyInvalid => response,
        }
    }
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Method { method } => write!(
                formatter,
                "method {method} cannot open a WebSocket, use GET"
            ),
            Self::UpgradeHeader => {
                write!(formatter, "header Upgrade must list the token websocket")
            }
            Self::ConnectionHeader => {
                write!(formatter, "header Connection must list the token upgrade")
            }
            Self::Version { sent: Some(sent) } => write!(
                formatter,
                "header Sec-WebSocket-Version is {sent:?}, only {WEBSOCKET_VERSION} is supported"
            ),
            Self::Version { sent: None } => write!(
                formatter,
                "header Sec-WebSocket-Version is missing, send {WEBSOCKET_VERSION}"
            ),
            Self::KeyCount { count } => write!(
                formatter,
                "header Sec-WebSocket-Key must be sent once, it was sent {count} times"
            ),
            Self::KeyInvalid => write!(
                formatter,
                "header Sec-WebSocket-Key must be the base64 of {KEY_NONCE_BYTES} bytes"
            ),
        }
    }
}

impl std::error::Error for UpgradeError {}

/// Whether any of the comma-separated lists in `values` holds `token` (any case).
fn lists_token<'value>(mut values: impl Iterator<Item = &'value str>, token: &str) -> bool {
    values.any(|list| {
        list.split(',')
            .any(|item| item.trim().eq_ignore_ascii_case(token))
    })
}

/// Checks that `head` asks for a WebSocket upgrade we can grant and returns the
/// `Sec-WebSocket-Accept` value for the 101 answer.
///
/// # Errors
/// The first rule broken, in this order: GET, `Upgrade`, `Connection`,
/// `Sec-WebSocket-Version`, `Sec-WebSocket-Key`.
pub fn check_upgrade(head: &RequestHead) -> Result<String, UpgradeError> {
    if head.method != "GET" {
        return Err(UpgradeError::Method {
            method: head.method.clone(),
        });
    }
    if !lists_token(head.header_values("upgrade"), "websocket") {
        return Err(UpgradeError::UpgradeHeader);
    }
    if !lists_token(head.header_values("connection"), "upgrade") {
        return Err(UpgradeError::ConnectionHeader);
    }
    let version = head.header("sec-websocket-version").map(str::trim);
    if version != Some(WEBSOCKET_VERSION) {
        return Err(UpgradeError::Version {
            sent: version.map(str::to_owned),
        });
    }
    let keys: Vec<&str> = head.header_values("sec-websocket-key").collect();
    let [key] = keys.as_slice() else {
        return Err(UpgradeError::KeyCount { count: keys.len() });
    };
    let key = key.trim();
    match BASE64.decode(key) {
        Ok(nonce) if nonce.len() == KEY_NONCE_BYTES => Ok(accept_key(key)),
        _ => Err(UpgradeError::KeyInvalid),
    }
}

/// `Sec-WebSocket-Accept` for a client's key: base64(sha1(key ‖ the RFC's GUID)).
pub fn accept_key(key: &str) -> String {
    let mut hasher = Sha1::new();
    hasher.update(key.as_bytes());
    hasher.update(ACCEPT_GUID.as_bytes());
    BASE64.encode(hasher.finalize())
}

/// The 101 answer that completes the handshake: no subprotocol, no extension.
pub fn switching_protocols(accept: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\n\
         Upgrade: websocket\r\n\
         Connection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse_request_head;

    /// The opening handshake of RFC 6455 section 1.2, with a permessage-deflate offer added.
    const RFC_REQUEST: &str = "GET /chat HTTP/1.1\r\n\
        Host: server.example.com\r\n\
        Upgrade: websocket\r\n\
        Connection: Upgrade\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
        Origin: http://example.com\r\n\
        Sec-WebSocket-Protocol: chat, superchat\r\n\
        Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\
        Sec-WebSocket-Version: 13\r\n\r\n";

    fn head_of(request: &str) -> RequestHead {
        match parse_request_head(request.as_bytes(), 8192, 32) {
            Ok(Some((head, _))) => head,
            other => panic!("not a complete head: {other:?}"),
        }
    }

    fn without(request: &str, header: &str) -> String {
        request
            .lines()
            .filter(|line| !line.starts_with(header))
            .map(|line| format!("{line}\r\n"))
            .collect()
    }

    fn replaced(request: &str, header: &str, line: &str) -> String {
        request
            .lines()
            .map(|current| {
                if current.starts_with(header) {
                    format!("{line}\r\n")
                } else {
                    format!("{current}\r\n")
                }
            })
            .collect()
    }

    #[test]
    fn the_rfc_example_key_gives_the_rfc_example_accept() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(
            check_upgrade(&head_of(RFC_REQUEST)),
            Ok("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".to_owned())
        );
    }

    #[test]
    fn the_101_answer_selects_no_subprotocol_and_no_extension() {
        let answer =
            String::from_utf8(switching_protocols("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")).expect("ASCII");
        assert_eq!(
            answer,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        );
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut response = httparse::Response::new(&mut headers);
        assert_eq!(
            response.parse(answer.as_bytes()),
            Ok(httparse::Status::Complete(answer.len()))
        );
        assert_eq!(response.code, Some(101));
    }

    #[test]
    fn tokens_and_names_are_case_insensitive_and_lists_are_split() {
        let request = RFC_REQUEST
            .replace("Upgrade: websocket", "upgrade: h2c, WebSocket")
            .replace("Connection: Upgrade", "CONNECTION: keep-alive, UPGRADE")
            .replace("Sec-WebSocket-Key:", "sec-websocket-key:")
            .replace("Sec-WebSocket-Version: 13", "SEC-WEBSOCKET-VERSION: 13");
        assert!(check_upgrade(&head_of(&request)).is_ok());
        // Connection split over two header lines.
        let split = RFC_REQUEST.replace(
            "Connection: Upgrade\r\n",
            "Connection: keep-alive\r\nConnection: upgrade\r\n",
        );
        assert!(check_upgrade(&head_of(&split)).is_ok());
    }

    #[test]
    fn each_refusal_has_its_status_and_names_its_header() {
        let post = RFC_REQUEST.replace("GET /chat", "POST /chat");
        let cases = [
            (
                post,
                UpgradeError::Method {
                    method: "POST".to_owned(),
                },
                405,
                "method POST",
            ),
            (
                without(RFC_REQUEST, "Upgrade:"),
                UpgradeError::UpgradeHeader,
                400,
                "header Upgrade",
            ),
            (
                replaced(RFC_REQUEST, "Upgrade:", "Upgrade: websocket/13"),
                UpgradeError::UpgradeHeader,
                400,
                "header Upgrade",
            ),
            (
                replaced(RFC_REQUEST, "Connection:", "Connection: keep-alive"),
                UpgradeError::ConnectionHeader,
                400,
                "header Connection",
            ),
            (
                without(RFC_REQUEST, "Sec-WebSocket-Version:"),
                UpgradeError::Version { sent: None },
                426,
                "header Sec-WebSocket-Version",
            ),
            (
                replaced(
                    RFC_REQUEST,
                    "Sec-WebSocket-Version:",
                    "Sec-WebSocket-Version: 8",
                ),
                UpgradeError::Version {
                    sent: Some("8".to_owned()),
                },
                426,
                "header Sec-WebSocket-Version",
            ),
            (
                without(RFC_REQUEST, "Sec-WebSocket-Key:"),
                UpgradeError::KeyCount { count: 0 },
                400,
                "header Sec-WebSocket-Key",
            ),
            (
                RFC_REQUEST.replace(
                    "Origin:",
                    "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\nOrigin:",
                ),
                UpgradeError::KeyCount { count: 2 },
                400,
                "header Sec-WebSocket-Key",
            ),
        ];
        for (request, expected, status, named) in cases {
            let error = check_upgrade(&head_of(&request)).expect_err("refused");
            assert_eq!(error, expected);
            assert_eq!(error.status(), status, "{error}");
            assert!(error.to_string().starts_with(named), "{error}");
        }
    }

    #[test]
    fn the_key_must_be_the_canonical_base64_of_16_bytes() {
        for key in [
            "",
            "dGhlIHNhbXBsZSBub25jZQ",
            "dGhlIHNhbXBsZSBub25jZQ=",
            "dGhlIHNhbXBsZSBub25j",
            "dGhlIHNhbXBsZSBub25jZSE=",
            "dGhlIHNhbXBsZSBub25jZR==",
            "dGhlIHNhbXBsZSBub25jZQ==!",
        ] {
            let request = replaced(
                RFC_REQUEST,
                "Sec-WebSocket-Key:",
                &format!("Sec-WebSocket-Key: {key}"),
            );
            assert_eq!(
                check_upgrade(&head_of(&request)),
                Err(UpgradeError::KeyInvalid),
                "{key:?}"
            );
        }
    }

    #[test]
    fn refusals_carry_the_headers_rfc_6455_asks_for() {
        let version = UpgradeError::Version { sent: None }.to_response();
        assert_eq!(version.status, 426);
        assert!(
            version
                .headers
                .contains(&("Sec-WebSocket-Version".to_owned(), "13".to_owned()))
        );
        let method = UpgradeError::Method {
            method: "PUT".to_owned(),
        }
        .to_response();
        assert!(
            method
                .headers
                .contains(&("Allow".to_owned(), "GET".to_owned()))
        );
        assert_eq!(
            method.body,
            b"method PUT cannot open a WebSocket, use GET\n"
        );
    }
}
