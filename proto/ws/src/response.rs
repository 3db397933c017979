//! Every HTTP answer of the WebSocket listener except the 101: refusals before the upgrade
//! (W10), the answers of the W5 POST and its CORS.
//!
//! Owns: [`Response`] and its bytes (status line with the reason phrase, `Content-Length`,
//! `Connection: close`, `Content-Type` for a body), one-line error answers, and the CORS
//! headers and `OPTIONS` preflight of the W5 endpoint ([`cors_headers`], [`preflight`]).
//! Never: keep-alive (each answer ends its connection, so a peer gets one request per
//! connection and the pre-Join bounds count connections), chunked bodies, or which status a
//! fault earns (the caller's, per W10's table).

use crate::bridge::SWARM_HEADERS;
use crate::origin::origin_allowed;

/// How long a browser may cache a preflight's answer: 10 minutes, so a changed
/// `ws.allowed_origins` takes effect soon (browsers cap it lower anyway: Chromium at 2 h).
pub const CORS_MAX_AGE_S: u64 = 600;

/// The content type of a body that does not name one: our bodies are one-line messages.
const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// An HTTP/1.1 answer that closes the connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers besides `Content-Length`, `Connection` and a default `Content-Type`.
    pub headers: Vec<(String, String)>,
    /// The body, possibly empty.
    pub body: Vec<u8>,
}

impl Response {
    /// An answer with no header and no body.
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A refusal: `message` and a newline as a plain-text body.
    pub fn error(status: u16, message: &str) -> Response {
        let mut body = Vec::with_capacity(message.len() + 1);
        body.extend_from_slice(message.as_bytes());
        body.push(b'\n');
        Response {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// This answer with one more header.
    #[must_use]
    pub fn with_header(mut self, name: &str, value: &str) -> Response {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The bytes on the wire. CR, LF and NUL in a header are written as spaces, so no value
    /// (an echoed origin) can split the head.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\n",
            self.status,
            reason_phrase(self.status)
        );
        for (name, value) in &self.headers {
            push_header(&mut head, name, value);
        }
        let has_content_type = self
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
        if !self.body.is_empty() && !has_content_type {
            push_header(&mut head, "Content-Type", TEXT_CONTENT_TYPE);
        }
        // RFC 9110 section 8.6: no Content-Length on 1xx and 204.
        if !matches!(self.status, 100..=199 | 204) {
            push_header(&mut head, "Content-Length", &self.body.len().to_string());
        }
        push_header(&mut head, "Connection", "close");
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

fn push_header(head: &mut String, name: &str, value: &str) {
    let clean = |text: &str| text.replace(['\r', '\n', '\0'], " ");
    head.push_str(&clean(name));
    head.push_str(": ");
    head.push_str(&clean(value));
    head.push_str("\r\n");
}

/// The reason phrase of the statuses the listener answers with; others get an empty one,
/// which HTTP/1.1 allows.
fn reason_phrase(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// The CORS headers of an answer on the W5 endpoint: `Access-Control-Allow-Origin` is `*`
/// when any origin is allowed, the request's origin when the list names it (with
/// `Vary: Origin`, since the answer then depends on it), and absent otherwise, which makes the
/// browser refuse; plus the methods, the headers a dApp may send and the preflight's age.
pub fn cors_headers(origin: Option<&str>, allowed: &[String]) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    let any = allowed.is_empty() || allowed.iter().any(|entry| entry == "*");
    if any {
        headers.push(("Access-Control-Allow-Origin".to_owned(), "*".to_owned()));
    } else {
        if let Some(origin) = origin.filter(|origin| origin_allowed(Some(origin), allowed)) {
            headers.push(("Access-Control-Allow-Origin".to_owned(), origin.to_owned()));
        }
        headers.push(("Vary".to_owned(), "Origin".to_owned()));
    }
    let allowed_headers = std::iter::once("content-type")
        .chain(SWARM_HEADERS)
        .collect::<Vec<_>>()
        .join(", ");
    headers.extend([
        (
            "Access-Control-Allow-Methods".to_owned(),
            "POST, OPTIONS".to_owned(),
        ),
        ("Access-Control-Allow-Headers".to_owned(), allowed_headers),
        (
            "Access-Control-Max-Age".to_owned(),
            CORS_MAX_AGE_S.to_string(),
        ),
    ]);
    headers
}

/// The answer to an `OPTIONS` preflight of the W5 endpoint: 204 with the CORS headers for
/// an allowed origin, 403 otherwise.
pub fn preflight(origin: Option<&str>, allowed: &[String]) -> Response {
    if !origin_allowed(origin, allowed) {
        return Response::error(403, "origin not allowed on this broker");
    }
    Response {
        status: 204,
        headers: cors_headers(origin, allowed),
        body: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `bytes` as an HTTP response: status, headers, and the body after the head.
    fn parse(bytes: &[u8]) -> (u16, Vec<(String, String)>, Vec<u8>) {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut response = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head_bytes)) = response.parse(bytes) else {
            panic!(
                "not a complete response: {:?}",
                String::from_utf8_lossy(bytes)
            );
        };
        let headers = response
            .headers
            .iter()
            .map(|header| {
                (
                    header.name.to_owned(),
                    String::from_utf8_lossy(header.value).into_owned(),
                )
            })
            .collect();
        (
            response.code.unwrap_or_default(),
            headers,
            bytes[head_bytes..].to_vec(),
        )
    }

    fn header<'list>(headers: &'list [(String, String)], name: &str) -> Option<&'list str> {
        headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    #[test]
    fn an_error_is_a_closed_one_line_plain_text_answer() {
        let bytes = Response::error(400, "parameter \"binding\": missing").to_bytes();
        assert!(bytes.starts_with(b"HTTP/1.1 400 Bad Request\r\n"));
        let (status, headers, body) = parse(&bytes);
        assert_eq!(status, 400);
        assert_eq!(body, b"parameter \"binding\": missing\n");
        assert_eq!(header(&headers, "content-type"), Some(TEXT_CONTENT_TYPE));
        let length = body.len().to_string();
        assert_eq!(header(&headers, "content-length"), Some(length.as_str()));
        assert_eq!(header(&headers, "connection"), Some("close"));
    }

    #[test]
    fn no_body_means_no_content_type_and_204_has_no_length() {
        let (_, headers, body) = parse(&Response::new(200).to_bytes());
        assert!(body.is_empty());
        assert_eq!(header(&headers, "content-type"), None);
        assert_eq!(header(&headers, "content-length"), Some("0"));
        let (status, headers, _) = parse(&Response::new(204).to_bytes());
        assert_eq!(status, 204);
        assert_eq!(header(&headers, "content-length"), None);
    }

    #[test]
    fn a_named_content_type_wins_and_unknown_statuses_have_an_empty_phrase() {
        let response = Response {
            status: 299,
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: b"{}".to_vec(),
        };
        let bytes = response.to_bytes();
        assert!(bytes.starts_with(b"HTTP/1.1 299 \r\n"));
        let (_, headers, _) = parse(&bytes);
        let types: Vec<_> = headers
            .iter()
            .filter(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .collect();
        assert_eq!(types.len(), 1);
        assert_eq!(types[0].1, "application/json");
    }

    #[test]
    fn a_header_value_cannot_split_the_head() {
        let bytes = Response::new(200)
            .with_header("X-Echo", "a\r\nSet-Cookie: b")
            .to_bytes();
        let (_, headers, _) = parse(&bytes);
        assert_eq!(header(&headers, "x-echo"), Some("a  Set-Cookie: b"));
        assert_eq!(header(&headers, "set-cookie"), None);
    }

    #[test]
    fn cors_allows_any_origin_by_default_and_echoes_a_listed_one() {
        let any = cors_headers(Some("https://app.example"), &[]);
        assert_eq!(header(&any, "access-control-allow-origin"), Some("*"));
        assert_eq!(header(&any, "vary"), None);
        assert_eq!(
            header(&any, "access-control-allow-methods"),
            Some("POST, OPTIONS")
        );
        assert_eq!(
            header(&any, "access-control-allow-headers"),
            Some("content-type, swarm-soc-fields, swarm-keep-alive, swarm-cache-wrapped-chunk")
        );
        assert_eq!(header(&any, "access-control-max-age"), Some("600"));

        let only = vec!["https://app.example".to_owned()];
        let listed = cors_headers(Some("https://APP.example"), &only);
        assert_eq!(
            header(&listed, "access-control-allow-origin"),
            Some("https://APP.example")
        );
        assert_eq!(header(&listed, "vary"), Some("Origin"));
        let other = cors_headers(Some("https://evil.example"), &only);
        assert_eq!(header(&other, "access-control-allow-origin"), None);
        assert_eq!(header(&other, "vary"), Some("Origin"));
    }

    #[test]
    fn a_preflight_is_204_for_an_allowed_origin_and_403_otherwise() {
        let only = vec!["https://app.example".to_owned()];
        let granted = preflight(Some("https://app.example"), &only);
        let (status, headers, body) = parse(&granted.to_bytes());
        assert_eq!(status, 204);
        assert!(body.is_empty());
        assert_eq!(
            header(&headers, "access-control-allow-origin"),
            Some("https://app.example")
        );
        let refused = preflight(Some("https://evil.example"), &only);
        assert_eq!(refused.status, 403);
    }
}
