//! Close frames (RFC 6455 sections 5.5.1 and 7.4): the payload, the codes, the reason.
//!
//! Owns: [`CloseFrame`], the close codes this crate names, which codes a peer may send
//! ([`close_code_receivable`], after the IANA registry), parsing a received close payload and
//! building one to send ([`close_payload`]). Never: which code the broker answers a fault with
//! beyond the three framing faults of [`super::ProtocolError::close_code`]; the I/O layer owns
//! that table.

use super::error::ProtocolError;
use super::opcode::CONTROL_PAYLOAD_BYTES_MAX;

/// 1000: the purpose of the connection is fulfilled (also: after `{"type":"eos"}`, W10).
pub const CLOSE_NORMAL: u16 = 1000;
/// 1001: the endpoint goes away (a draining broker).
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// 1002: the peer broke the framing protocol.
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// 1007: a message's data does not fit its type (non-UTF-8 text or close reason).
pub const CLOSE_INVALID_PAYLOAD: u16 = 1007;
/// 1009: a message is larger than the endpoint takes.
pub const CLOSE_MESSAGE_TOO_BIG: u16 = 1009;

/// Bytes of the status code at the front of a non-empty close payload.
const CODE_BYTES: usize = 2;

/// Longest reason that fits a close frame next to its code.
const REASON_BYTES_MAX: usize = CONTROL_PAYLOAD_BYTES_MAX - CODE_BYTES;

/// A received close frame's status code and reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CloseFrame {
    /// The status code, one that [`close_code_receivable`] accepts.
    pub code: u16,
    /// The UTF-8 reason, possibly empty.
    pub reason: String,
}

/// Whether a peer may send `code` in a close frame, per the IANA "WebSocket Close Code
/// Number Registry": 1000-1003 and 1007-1014 are assigned for use on the wire (1012 service
/// restart, 1013 try again later and 1014 bad gateway were registered after RFC 6455),
/// 3000-3999 are registered by libraries and 4000-4999 are private. 1004 is reserved,
/// 1005, 1006 and 1015 must never be sent, 1016-2999 are unassigned or reserved for
/// extensions, and everything below 1000 or above 4999 is not a close code.
pub fn close_code_receivable(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Parses a received close payload: empty is a close without status; one byte, a code the
/// peer may not send, or a reason that is not UTF-8 is an error.
pub(crate) fn parse_close(payload: &[u8]) -> Result<Option<CloseFrame>, ProtocolError> {
    let Some((code_bytes, reason)) = payload.split_first_chunk::<CODE_BYTES>() else {
        return if payload.is_empty() {
            Ok(None)
        } else {
            Err(ProtocolError::CloseTooShort)
        };
    };
    let code = u16::from_be_bytes(*code_bytes);
    if !close_code_receivable(code) {
        return Err(ProtocolError::CloseCode { code });
    }
    let reason = std::str::from_utf8(reason).map_err(|error| ProtocolError::CloseReason {
        valid_up_to: error.valid_up_to(),
    })?;
    Ok(Some(CloseFrame {
        code,
        reason: reason.to_owned(),
    }))
}

/// The payload of a close frame to send: `code` big-endian, then `reason` cut at a character
/// boundary so that the whole payload fits a control frame's 125 bytes.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let kept = &reason[..reason.floor_char_boundary(REASON_BYTES_MAX)];
    let mut payload = Vec::with_capacity(CODE_BYTES + kept.len());
    payload.extend_from_slice(&code.to_be_bytes());
    payload.extend_from_slice(kept.as_bytes());
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivable_codes_are_exactly_the_registry_ranges() {
        let receivable: Vec<u16> = (0..=u16::MAX)
            .filter(|code| close_code_receivable(*code))
            .collect();
        let expected: Vec<u16> = (1000..=1003)
            .chain(1007..=1014)
            .chain(3000..=4999)
            .collect();
        assert_eq!(receivable, expected);
        for refused in [
            0,
            999,
            1004,
            1005,
            1006,
            1015,
            1016,
            2000,
            2999,
            5000,
            u16::MAX,
        ] {
            assert!(!close_code_receivable(refused), "{refused}");
        }
    }

    #[test]
    fn parses_empty_code_only_and_code_with_reason() {
        assert_eq!(parse_close(&[]), Ok(None));
        assert_eq!(
            parse_close(&[0x03, 0xe8]),
            Ok(Some(CloseFrame {
                code: 1000,
                reason: String::new()
            }))
        );
        assert_eq!(
            parse_close(&[0x0f, 0xa0, b'b', b'y', b'e']),
            Ok(Some(CloseFrame {
                code: 4000,
                reason: "bye".to_owned()
            }))
        );
    }

    #[test]
    fn refuses_one_byte_bad_codes_and_non_utf8_reasons() {
        assert_eq!(parse_close(&[0x03]), Err(ProtocolError::CloseTooShort));
        for code in [999u16, 1005, 1006, 1015, 2999, 5000] {
            assert_eq!(
                parse_close(&code.to_be_bytes()),
                Err(ProtocolError::CloseCode { code })
            );
        }
        assert_eq!(
            parse_close(&[0x03, 0xe8, b'o', b'k', 0xff]),
            Err(ProtocolError::CloseReason { valid_up_to: 2 })
        );
    }

    #[test]
    fn close_payload_cuts_the_reason_at_a_character_boundary() {
        assert_eq!(close_payload(1000, ""), vec![0x03, 0xe8]);
        assert_eq!(
            close_payload(1009, "big"),
            vec![0x03, 0xf1, b'b', b'i', b'g']
        );
        // 122 ASCII bytes and a two-byte character would end at 124 bytes of reason, one over
        // the 123 that fit, so the character goes whole.
        let reason = format!("{}é", "a".repeat(122));
        let payload = close_payload(1000, &reason);
        assert_eq!(payload.len(), 2 + 122);
        assert_eq!(&payload[2..], "a".repeat(122).as_bytes());
        let long = "é".repeat(100);
        let payload = close_payload(1000, &long);
        assert_eq!(payload.len(), 2 + 122, "61 whole two-byte characters");
        assert_eq!(
            parse_close(&payload).map(|close| close.map(|frame| frame.reason.chars().count())),
            Ok(Some(61))
        );
    }
}
