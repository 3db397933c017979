//! Percent-decoding (RFC 3986 section 2.1) and the parameters of a request's query.
//!
//! Owns: [`percent_decode`] (path segments keep `+`, queries read it as a space, as browsers'
//! `URLSearchParams` write it), [`parse_query`] and the [`QUERY_PARAMS_MAX`] bound. Never: the
//! meaning of a parameter (that is [`crate::bridge`]) or normalising a name's case: callers
//! compare names case-insensitively.

use std::fmt;

/// Most parameters one query may carry: a Join needs at most 9 (`binding`, `admin`,
/// `publishers`, `closed`, `history`, `addr`, `peer` and two `swarm-*`), so 32 leaves room
/// for a dApp's own cache-busters while bounding the work a request can ask for.
pub const QUERY_PARAMS_MAX: usize = 32;

/// A query (or path segment) that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueryError {
    /// A `%` not followed by two hex digits.
    BadEscape {
        /// Byte offset of the `%` in the input.
        position: usize,
    },
    /// A parameter's name or value is not UTF-8 once decoded.
    NotUtf8 {
        /// The parameter's position in the query, from 1.
        parameter: usize,
    },
    /// More than [`QUERY_PARAMS_MAX`] parameters.
    TooManyParameters {
        /// The bound.
        max: usize,
    },
}

impl fmt::Display for QueryError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadEscape { position } => write!(
                formatter,
                "'%' at byte {position} is not followed by two hex digits"
            ),
            Self::NotUtf8 { parameter } => write!(
                formatter,
                "query parameter {parameter} is not UTF-8 once percent-decoded"
            ),
            Self::TooManyParameters { max } => {
                write!(formatter, "query has more than {max} parameters")
            }
        }
    }
}

impl std::error::Error for QueryError {}

/// The value of an ASCII hex digit.
fn hex_digit(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|value| u8::try_from(value).ok())
}

/// The bytes `input` percent-encodes: `%XY` is the byte 0xXY (either case), `+` is a space
/// iff `plus_is_space`, every other byte stands for itself.
pub fn percent_decode(input: &str, plus_is_space: bool) -> Result<Vec<u8>, QueryError> {
    let bytes = input.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while let Some(&byte) = bytes.get(position) {
        match byte {
            b'%' => {
                let high = bytes.get(position + 1).copied().and_then(hex_digit);
                let low = bytes.get(position + 2).copied().and_then(hex_digit);
                let (Some(high), Some(low)) = (high, low) else {
                    return Err(QueryError::BadEscape { position });
                };
                decoded.push(high << 4 | low);
                position += 3;
            }
            b'+' if plus_is_space => {
                decoded.push(b' ');
                position += 1;
            }
            other => {
                decoded.push(other);
                position += 1;
            }
        }
    }
    Ok(decoded)
}

/// The parameters of a raw query (what follows `?`), in order, decoded: `&` separates them
/// (empty pieces are skipped), the first `=` splits name from value (none: an empty value),
/// `+` is a space. Repeated names are all kept; callers take the first.
pub fn parse_query(raw: &str) -> Result<Vec<(String, String)>, QueryError> {
    let mut parameters = Vec::new();
    let mut offset = 0;
    for piece in raw.split('&') {
        let piece_offset = offset;
        offset += piece.len() + 1;
        if piece.is_empty() {
            continue;
        }
        if parameters.len() == QUERY_PARAMS_MAX {
            return Err(QueryError::TooManyParameters {
                max: QUERY_PARAMS_MAX,
            });
        }
        let (name, value) = piece.split_once('=').unwrap_or((piece, ""));
        let value_offset = piece_offset + name.len() + 1;
        let name = decode_text(name, piece_offset, parameters.len() + 1)?;
        let value = decode_text(value, value_offset, parameters.len() + 1)?;
        parameters.push((name, value));
    }
    Ok(parameters)
}

/// One decoded name or value; `offset` places its escapes in the whole query.
fn decode_text(input: &str, offset: usize, parameter: usize) -> Result<String, QueryError> {
    let bytes = percent_decode(input, true).map_err(|error| match error {
        QueryError::BadEscape { position } => QueryError::BadEscape {
            position: offset + position,
        },
        other => other,
    })?;
    String::from_utf8(bytes).map_err(|_| QueryError::NotUtf8 { parameter })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_in_either_case_and_plus_as_asked() {
        assert_eq!(
            percent_decode("a%20b%2fc%2F", false),
            Ok(b"a b/c/".to_vec())
        );
        assert_eq!(percent_decode("a+b", false), Ok(b"a+b".to_vec()));
        assert_eq!(percent_decode("a+b", true), Ok(b"a b".to_vec()));
        assert_eq!(percent_decode("%2B", true), Ok(b"+".to_vec()));
        assert_eq!(percent_decode("%ff%00", false), Ok(vec![0xff, 0x00]));
        assert_eq!(percent_decode("", false), Ok(Vec::new()));
        assert_eq!(
            percent_decode("caf%C3%A9", false),
            Ok("café".as_bytes().to_vec())
        );
    }

    #[test]
    fn refuses_every_incomplete_or_non_hex_escape() {
        for (input, position) in [("%", 0), ("a%2", 1), ("ab%zz", 2), ("%2g", 0), ("x%%41", 1)] {
            assert_eq!(
                percent_decode(input, true),
                Err(QueryError::BadEscape { position }),
                "{input}"
            );
        }
    }

    #[test]
    fn parses_parameters_in_order_with_empty_values_and_spaces() {
        let parsed =
            parse_query("binding=feed_topic&closed&&name=a+b%26c&=v&admin=").expect("valid");
        let expected = [
            ("binding", "feed_topic"),
            ("closed", ""),
            ("name", "a b&c"),
            ("", "v"),
            ("admin", ""),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        assert_eq!(parsed, expected);
        assert_eq!(parse_query(""), Ok(Vec::new()));
        assert_eq!(
            parse_query("a=b=c"),
            Ok(vec![("a".to_owned(), "b=c".to_owned())])
        );
    }

    #[test]
    fn errors_name_where_they_are() {
        assert_eq!(
            parse_query("a=1&b=%zz"),
            Err(QueryError::BadEscape { position: 6 })
        );
        assert_eq!(
            parse_query("a=1&%zz=1"),
            Err(QueryError::BadEscape { position: 4 })
        );
        assert_eq!(
            parse_query("a=1&&b=%ff"),
            Err(QueryError::NotUtf8 { parameter: 2 })
        );
        assert_eq!(
            QueryError::NotUtf8 { parameter: 2 }.to_string(),
            "query parameter 2 is not UTF-8 once percent-decoded"
        );
    }

    #[test]
    fn the_parameter_bound_counts_parameters_not_separators() {
        let at_bound = vec!["p=1"; QUERY_PARAMS_MAX].join("&");
        assert_eq!(parse_query(&at_bound).map(|found| found.len()), Ok(32));
        assert_eq!(
            parse_query(&format!("{at_bound}&&&")).map(|found| found.len()),
            Ok(32)
        );
        assert_eq!(
            parse_query(&format!("{at_bound}&p=1")),
            Err(QueryError::TooManyParameters { max: 32 })
        );
    }
}
