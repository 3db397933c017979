//! The HTTP/1.1 request head of a connection to the WebSocket listener.
//!
//! Owns: [`parse_request_head`] (httparse under a byte bound and a header-count bound, both
//! the caller's, resumable across reads), [`RequestHead`] and its lookups, and [`HttpError`]
//! with the status each fault answers with. Never: a request body (the W5 POST body is
//! framed by `Content-Length`, which the I/O layer reads), keep-alive (every answer but the
//! upgrade closes the connection) or the meaning of a header (that is [`crate::handshake`]
//! and [`crate::bridge`]).

use std::fmt;

use crate::query::{QueryError, parse_query};

/// HTTP/1.1's minor version in httparse's terms; RFC 6455 requires at least 1.1.
const HTTP_1_1_MINOR: u8 = 1;

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestHead {
    /// The method as sent (methods are case-sensitive).
    pub method: String,
    /// The request target up to `?`, percent-encoded as received.
    pub path: String,
    /// The raw query after `?`, possibly empty.
    pub query: String,
    /// Every header in order: the name lowercased, the value as sent (httparse trims the
    /// whitespace around it). Bytes that are not UTF-8 become U+FFFD: no header this crate
    /// reads has a legitimate non-ASCII value.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The first value of the header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_values(name).next()
    }

    /// Every value of the header `name` (any case), in order.
    pub fn header_values<'head>(&'head self, name: &str) -> impl Iterator<Item = &'head str> {
        let wanted = name.to_ascii_lowercase();
        self.headers
            .iter()
            .filter(move |(header, _)| *header == wanted)
            .map(|(_, value)| value.as_str())
    }

    /// The first value of the query parameter `name` (any case), decoded.
    ///
    /// # Errors
    /// The query cannot be decoded (see [`parse_query`]).
    pub fn query_param(&self, name: &str) -> Result<Option<String>, QueryError> {
        Ok(parse_query(&self.query)?
            .into_iter()
            .find(|(parameter, _)| parameter.eq_ignore_ascii_case(name))
            .map(|(_, value)| value))
    }
}

/// A request head that cannot be served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// The head is not complete within the bound.
    HeadTooLarge {
        /// The bound in force.
        bytes_max: usize,
    },
    /// More headers than the bound.
    TooManyHeaders {
        /// The bound in force.
        headers_max: usize,
    },
    /// Not an HTTP request head.
    Malformed {
        /// What httparse found wrong.
        source: httparse::Error,
    },
    /// HTTP/1.0: the upgrade needs HTTP/1.1 (RFC 6455 section 4.1).
    Version {
        /// The minor version sent.
        minor: u8,
    },
}

impl HttpError {
    /// The HTTP status that answers this fault: 431 for a head over a bound, 505 for an old
    /// version, 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            Self::HeadTooLarge { .. } | Self::TooManyHeaders { .. } => 431,
            Self::Malformed { .. } => 400,
            Self::Version { .. } => 505,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HeadTooLarge { bytes_max } => write!(
                formatter,
                "request head is not complete within {bytes_max} bytes"
            ),
            Self::TooManyHeaders { headers_max } => {
                write!(formatter, "request has more than {headers_max} headers")
            }
            Self::Malformed { source } => write!(formatter, "malformed request head: {source}"),
            Self::Version { minor } => {
                write!(formatter, "HTTP/1.{minor} is not supported, use HTTP/1.1")
            }
        }
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Malformed { source } => Some(source),
            Self::HeadTooLarge { .. } | Self::TooManyHeaders { .. } | Self::Version { .. } => None,
        }
    }
}

/// Parses the request head at the front of `buf`: `Ok(Some((head, bytes)))` once it is
/// complete (`bytes` of `buf` are the head; a body, if any, follows), `Ok(None)` while it is
/// incomplete and `buf` is still under `head_bytes_max`.
///
/// # Errors
/// No complete head within `head_bytes_max` bytes, more than `headers_max` headers, a
/// malformed head, or a version other than HTTP/1.1.
pub fn parse_request_head(
    buf: &[u8],
    head_bytes_max: usize,
    headers_max: usize,
) -> Result<Option<(RequestHead, usize)>, HttpError> {
    let window = &buf[..buf.len().min(head_bytes_max)];
    let mut headers = vec![httparse::EMPTY_HEADER; headers_max];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(window) {
        Ok(httparse::Status::Partial) if buf.len() >= head_bytes_max => {
            Err(HttpError::HeadTooLarge {
                bytes_max: head_bytes_max,
            })
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Ok(httparse::Status::Complete(head_bytes)) => {
            Ok(Some((request_head(&request)?, head_bytes)))
        }
        Err(httparse::Error::TooManyHeaders) => Err(HttpError::TooManyHeaders { headers_max }),
        Err(source) => Err(HttpError::Malformed { source }),
    }
}

/// The owned head of a complete parse.
fn request_head(request: &httparse::Request<'_, '_>) -> Result<RequestHead, HttpError> {
    // A complete parse always has a method, a path and a version; a missing one is treated
    // as malformed rather than trusted.
    let malformed = HttpError::Malformed {
        source: httparse::Error::Token,
    };
    let (Some(method), Some(target), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Err(malformed);
    };
    if minor != HTTP_1_1_MINOR {
        return Err(HttpError::Version { minor });
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers = request
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_ascii_lowercase(),
                String::from_utf8_lossy(header.value).into_owned(),
            )
        })
        .collect();
    Ok(RequestHead {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD_BYTES_MAX: usize = 4096;
    const HEADERS_MAX: usize = 16;

    const RFC_REQUEST: &str = "GET /chat HTTP/1.1\r\n\
        Host: server.example.com\r\n\
        Upgrade: websocket\r\n\
        Connection: Upgrade\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
        Origin: http://example.com\r\n\
        Sec-WebSocket-Protocol: chat, superchat\r\n\
        Sec-WebSocket-Version: 13\r\n\r\n";

    fn parse(text: &str) -> Result<Option<(RequestHead, usize)>, HttpError> {
        parse_request_head(text.as_bytes(), HEAD_BYTES_MAX, HEADERS_MAX)
    }

    #[test]
    fn parses_the_rfc_6455_opening_handshake() {
        let (head, bytes) = parse(RFC_REQUEST).expect("valid").expect("complete");
        assert_eq!(bytes, RFC_REQUEST.len());
        assert_eq!(head.method, "GET");
        assert_eq!(head.path, "/chat");
        assert_eq!(head.query, "");
        assert_eq!(head.headers.len(), 7);
        assert_eq!(
            head.header("sec-websocket-key"),
            Some("dGhlIHNhbXBsZSBub25jZQ==")
        );
        assert_eq!(head.header("SEC-WebSocket-Version"), Some("13"));
        assert_eq!(head.header("origin"), Some("http://example.com"));
        assert_eq!(head.header("cookie"), None);
    }

    #[test]
    fn a_head_split_anywhere_is_incomplete_until_its_last_byte() {
        let with_body = format!("{RFC_REQUEST}body");
        for split in 0..RFC_REQUEST.len() {
            assert_eq!(
                parse_request_head(&with_body.as_bytes()[..split], HEAD_BYTES_MAX, HEADERS_MAX),
                Ok(None),
                "split at {split}"
            );
        }
        let parsed = parse(&with_body).expect("valid").expect("complete");
        assert_eq!(
            parsed.1,
            RFC_REQUEST.len(),
            "the body is not part of the head"
        );
    }

    #[test]
    fn splits_the_query_off_the_path_and_keeps_both_raw() {
        let request = "GET /pubsub/caf%C3%A9?binding=mnemonic&x=a+b HTTP/1.1\r\nHost: h\r\n\r\n";
        let (head, _) = parse(request).expect("valid").expect("complete");
        assert_eq!(head.path, "/pubsub/caf%C3%A9");
        assert_eq!(head.query, "binding=mnemonic&x=a+b");
        assert_eq!(head.query_param("BINDING"), Ok(Some("mnemonic".to_owned())));
        assert_eq!(head.query_param("x"), Ok(Some("a b".to_owned())));
        assert_eq!(head.query_param("admin"), Ok(None));
    }

    #[test]
    fn repeated_headers_keep_their_order() {
        let request = "GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\n\r\n";
        let (head, _) = parse(request).expect("valid").expect("complete");
        assert_eq!(head.header("x-a"), Some("1"));
        assert_eq!(head.header_values("X-A").collect::<Vec<_>>(), ["1", "2"]);
    }

    #[test]
    fn a_head_over_the_byte_bound_is_refused_once_the_bound_is_reached() {
        let long = format!("GET / HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "p".repeat(200));
        let bytes = long.as_bytes();
        assert_eq!(parse_request_head(&bytes[..99], 100, HEADERS_MAX), Ok(None));
        let error = parse_request_head(&bytes[..100], 100, HEADERS_MAX).expect_err("too large");
        assert_eq!(error, HttpError::HeadTooLarge { bytes_max: 100 });
        assert_eq!(error.status(), 431);
        // A head that ends within the bound is fine even when a body follows past it.
        let short = "GET / HTTP/1.1\r\n\r\n";
        let with_body = format!("{short}{}", "b".repeat(500));
        let parsed = parse_request_head(with_body.as_bytes(), short.len(), HEADERS_MAX);
        assert_eq!(
            parsed.map(|found| found.map(|(_, bytes)| bytes)),
            Ok(Some(short.len()))
        );
    }

    #[test]
    fn too_many_headers_old_versions_and_garbage_are_refused() {
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: 1\r\n".repeat(3));
        let error = parse_request_head(many.as_bytes(), HEAD_BYTES_MAX, 2).expect_err("3 > 2");
        assert_eq!(error, HttpError::TooManyHeaders { headers_max: 2 });
        assert_eq!(error.status(), 431);
        assert!(parse_request_head(many.as_bytes(), HEAD_BYTES_MAX, 3).is_ok());

        let old = parse("GET / HTTP/1.0\r\nHost: h\r\n\r\n").expect_err("HTTP/1.0");
        assert_eq!(old, HttpError::Version { minor: 0 });
        assert_eq!(old.status(), 505);

        let tls_hello: &[u8] = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
        for garbage in [
            tls_hello,
            b"GET / HTTP/2.0\r\n\r\n",
            b"GET\x00/ HTTP/1.1\r\n\r\n",
        ] {
            let error =
                parse_request_head(garbage, HEAD_BYTES_MAX, HEADERS_MAX).expect_err("not HTTP/1.x");
            assert!(matches!(error, HttpError::Malformed { .. }), "{error:?}");
            assert_eq!(error.status(), 400);
        }
    }

    #[test]
    fn non_utf8_header_values_are_kept_lossily() {
        let request = b"GET / HTTP/1.1\r\nX-Name: caf\xe9\r\n\r\n";
        let (head, _) = parse_request_head(request, HEAD_BYTES_MAX, HEADERS_MAX)
            .expect("valid")
            .expect("complete");
        assert_eq!(head.header("x-name"), Some("caf\u{fffd}"));
    }
}
