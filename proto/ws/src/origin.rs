//! W10's `Origin` policy: which browser origins may open a session or read a W5 answer.
//!
//! Owns: [`origin_allowed`], asked by the listener before an upgrade and by the CORS headers
//! and preflight of [`crate::response`]. Never: the status a refusal earns (the caller's).

/// W10's `Origin` rule: a request without `Origin` (not a browser) is allowed; an empty
/// list or one holding `*` allows any origin; otherwise the serialized origin
/// (`scheme://host[:port]`) must equal an entry, ignoring ASCII case.
pub fn origin_allowed(origin: Option<&str>, allowed: &[String]) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    allowed.is_empty()
        || allowed
            .iter()
            .any(|entry| entry == "*" || entry.eq_ignore_ascii_case(origin.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_follow_w10() {
        let only = vec![
            "https://app.example".to_owned(),
            "http://localhost:5173".to_owned(),
        ];
        assert!(origin_allowed(None, &only), "no Origin: not a browser");
        assert!(origin_allowed(Some("https://evil.example"), &[]));
        assert!(origin_allowed(
            Some("https://evil.example"),
            &["*".to_owned()]
        ));
        assert!(origin_allowed(Some("https://app.example"), &only));
        assert!(origin_allowed(Some("HTTPS://APP.EXAMPLE"), &only));
        assert!(origin_allowed(Some("http://localhost:5173"), &only));
        assert!(!origin_allowed(Some("http://localhost:5174"), &only));
        assert!(!origin_allowed(Some("https://app.example.evil"), &only));
        assert!(!origin_allowed(Some("https://app.example/"), &only));
        assert!(!origin_allowed(Some("null"), &only));
    }
}
