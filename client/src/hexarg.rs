//! Hex and key arguments from the command line, with errors that name the argument.
//!
//! Owns: decoding hex (an optional `0x`/`0X` prefix, either case), fixed-length byte strings
//! (ids, topics, addresses, keys), secp256k1 keys, payload size checks, and [`ArgError`], the
//! one-line message `bps` prints before exiting with code 2.
//!
//! Never: reads a socket or prints anything; never panics on input.

use std::fmt;

use bps_verify::{CHUNK_SIZE, SigningKey};

/// A bad command-line value: which argument, and what is wrong with it. Displayed as
/// `--id: expected 32 bytes of hex, got 31`; `bps` prefixes `error: ` and exits 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The argument as the user wrote it (`--id`, `CHUNK_HEX`, ...).
    pub argument: String,
    /// What is wrong with its value.
    pub message: String,
}

impl ArgError {
    /// An error about `argument`.
    pub fn new(argument: &str, message: impl Into<String>) -> Self {
        Self {
            argument: argument.to_owned(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.argument, self.message)
    }
}

impl std::error::Error for ArgError {}

/// Decodes hex of any even length (empty is fine), with an optional `0x` prefix.
pub fn parse_hex(argument: &str, value: &str) -> Result<Vec<u8>, ArgError> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    if !digits.len().is_multiple_of(2) {
        return Err(ArgError::new(
            argument,
            format!("odd number of hex digits ({})", digits.len()),
        ));
    }
    hex::decode(digits).map_err(|error| match error {
        hex::FromHexError::InvalidHexCharacter { c, index } => ArgError::new(
            argument,
            format!("invalid hex character {c:?} at position {index}"),
        ),
        other => ArgError::new(argument, format!("invalid hex: {other}")),
    })
}

/// Decodes hex that must be exactly `N` bytes.
pub fn parse_fixed<const N: usize>(argument: &str, value: &str) -> Result<[u8; N], ArgError> {
    let bytes = parse_hex(argument, value)?;
    <[u8; N]>::try_from(bytes.as_slice()).map_err(|_| {
        ArgError::new(
            argument,
            format!("expected {N} bytes of hex, got {}", bytes.len()),
        )
    })
}

/// A secp256k1 secret key: 32 bytes of hex, non-zero and below the curve order.
pub fn parse_key(argument: &str, value: &str) -> Result<SigningKey, ArgError> {
    let bytes = parse_fixed::<32>(argument, value)?;
    SigningKey::from_bytes(&bytes).map_err(|error| ArgError::new(argument, error.to_string()))
}

/// Checks that a payload fits one chunk (at most 4096 bytes).
pub fn check_payload(argument: &str, payload: &[u8]) -> Result<(), ArgError> {
    if payload.len() > CHUNK_SIZE {
        return Err(ArgError::new(
            argument,
            format!(
                "payload of {} bytes exceeds the chunk size {CHUNK_SIZE}",
                payload.len()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_an_optional_prefix_and_either_case() {
        assert_eq!(parse_hex("X", "0xAbCd"), Ok(vec![0xab, 0xcd]));
        assert_eq!(parse_hex("X", "0XABCD"), Ok(vec![0xab, 0xcd]));
        assert_eq!(parse_hex("X", "abcd"), Ok(vec![0xab, 0xcd]));
        assert_eq!(parse_hex("X", ""), Ok(Vec::new()));
        assert_eq!(parse_hex("X", "0x"), Ok(Vec::new()));
    }

    #[test]
    fn errors_name_the_argument() {
        let odd = parse_hex("--id", "abc").expect_err("odd");
        assert_eq!(odd.to_string(), "--id: odd number of hex digits (3)");
        let bad = parse_hex("--id", "zz").expect_err("bad char");
        assert_eq!(
            bad.to_string(),
            "--id: invalid hex character 'z' at position 0"
        );
        let short = parse_fixed::<32>("--id", &"00".repeat(31)).expect_err("short");
        assert_eq!(short.to_string(), "--id: expected 32 bytes of hex, got 31");
        let zero = parse_key("--key", &"00".repeat(32)).expect_err("zero key");
        assert_eq!(zero.to_string(), "--key: secp256k1 secret key is zero");
        let big = check_payload("--payload", &[0; 4097]).expect_err("oversize");
        assert_eq!(
            big.to_string(),
            "--payload: payload of 4097 bytes exceeds the chunk size 4096"
        );
        assert_eq!(check_payload("--payload", &[0; 4096]), Ok(()));
    }
}
