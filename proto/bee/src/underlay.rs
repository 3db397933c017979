//! A node's underlay addresses as bee puts them in one `bytes` field (bee
//! `pkg/bzz/underlay.go`, `pkg/bzz/transport.go`).
//!
//! Owns: the two encodings and their bounds. Exactly one address is that multiaddr's bytes
//! (the form older bees read); any other count is [`UNDERLAY_LIST_PREFIX`], then for each
//! address its length as an unsigned varint and its bytes. Reading accepts either form,
//! serializing picks by count ([`serialize_underlays`]), and [`truncate_underlays`] cuts a
//! list to the bounds before it is signed or sent.
//!
//! Never: resolves, dials or judges an address; [`deserialize_underlays`] only checks that
//! each one is a well-formed multiaddr (rust `multiaddr`'s rules, which match go-multiaddr's
//! for the protocols bee uses).
//!
//! Bee facts, checked at bee master a404d601: the list prefix 0x99 is not a multiaddr protocol
//! code, so an old reader fails on a list rather than misreading it; bee refuses more than 20
//! addresses and more than 2048 bytes in all; a list's lengths are go-varint's, which refuses
//! a non-minimal encoding and more than 9 bytes (so does `unsigned_varint`). One difference,
//! on purpose: an empty address inside a list is refused here.
//!
//! Our truncation keeps the caller's order and drops what does not fit, where bee first sorts
//! by its transport and reachability score: the caller lists its preferred address first.

use std::fmt;

use multiaddr::Multiaddr;

/// First byte of the list form; 0x99 (153) is not a multiaddr protocol code.
pub const UNDERLAY_LIST_PREFIX: u8 = 0x99;

/// Most addresses bee accepts in one record (its `maxUnderlaysPerPeer`), against a peer that
/// would make every receiver store and dial a long list.
pub const UNDERLAYS_PER_PEER_MAX: usize = 20;

/// Most bytes bee accepts in one underlay field (its `maxUnderlayBytes`): 20 addresses of a
/// typical 100 bytes with headroom.
pub const UNDERLAY_BYTES_MAX: usize = 2048;

/// Why an underlay field does not parse (a peer fault) or a list cannot be serialized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnderlayError {
    /// The field is empty (no address at all).
    Empty,
    /// The field, or the serialized list, is longer than [`UNDERLAY_BYTES_MAX`].
    TooLarge {
        /// Its length.
        bytes: usize,
    },
    /// More than [`UNDERLAYS_PER_PEER_MAX`] addresses.
    TooMany,
    /// A list entry's length varint is malformed (truncated, over 9 bytes, not minimal).
    EntryLength {
        /// The entry's position in the list.
        index: usize,
    },
    /// A list entry declares more bytes than remain.
    EntryTruncated {
        /// The entry's position in the list.
        index: usize,
        /// The bytes it declares.
        declared: u64,
        /// The bytes left in the field.
        remaining: usize,
    },
    /// An address is not a well-formed multiaddr.
    Multiaddr {
        /// Its position (0 for the single-address form).
        index: usize,
        /// What the multiaddr parser found wrong.
        reason: String,
    },
}

impl fmt::Display for UnderlayError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => formatter.write_str("underlay field is empty"),
            Self::TooLarge { bytes } => write!(
                formatter,
                "underlay field of {bytes} bytes exceeds {UNDERLAY_BYTES_MAX}"
            ),
            Self::TooMany => write!(
                formatter,
                "underlay list holds more than {UNDERLAYS_PER_PEER_MAX} addresses"
            ),
            Self::EntryLength { index } => {
                write!(formatter, "underlay entry {index} has a malformed length")
            }
            Self::EntryTruncated {
                index,
                declared,
                remaining,
            } => write!(
                formatter,
                "underlay entry {index} declares {declared} bytes, {remaining} remain"
            ),
            Self::Multiaddr { index, reason } => {
                write!(
                    formatter,
                    "underlay entry {index} is not a multiaddr: {reason}"
                )
            }
        }
    }
}

impl std::error::Error for UnderlayError {}

/// Bytes an address takes inside the list form: its length varint and itself.
fn list_entry_bytes(address: &Multiaddr) -> usize {
    let length = address.as_ref().len();
    let mut varint = unsigned_varint::encode::u64_buffer();
    unsigned_varint::encode::u64(length as u64, &mut varint).len() + length
}

/// `addresses` in bee's form, without checking the bounds.
fn write_underlays(addresses: &[Multiaddr]) -> Vec<u8> {
    if let [only] = addresses {
        return only.to_vec();
    }
    let mut out = vec![UNDERLAY_LIST_PREFIX];
    for address in addresses {
        let bytes = address.as_ref();
        let mut varint = unsigned_varint::encode::u64_buffer();
        out.extend_from_slice(unsigned_varint::encode::u64(
            bytes.len() as u64,
            &mut varint,
        ));
        out.extend_from_slice(bytes);
    }
    out
}

/// `addresses` in bee's form (bee `SerializeUnderlays`): one address alone, else the list.
///
/// # Errors
/// More than [`UNDERLAYS_PER_PEER_MAX`] addresses or more than [`UNDERLAY_BYTES_MAX`] bytes.
pub fn serialize_underlays(addresses: &[Multiaddr]) -> Result<Vec<u8>, UnderlayError> {
    if addresses.len() > UNDERLAYS_PER_PEER_MAX {
        return Err(UnderlayError::TooMany);
    }
    let out = write_underlays(addresses);
    if out.len() > UNDERLAY_BYTES_MAX {
        return Err(UnderlayError::TooLarge { bytes: out.len() });
    }
    Ok(out)
}

/// The longest prefix of `addresses`, without repeats, that fits both bounds in the list
/// form (which is never shorter than the single form), so its serialization cannot fail.
pub fn truncate_underlays(addresses: &[Multiaddr]) -> Vec<Multiaddr> {
    let mut kept: Vec<Multiaddr> = Vec::new();
    let mut bytes = 1;
    for address in addresses {
        if kept.contains(address) {
            continue;
        }
        let entry = list_entry_bytes(address);
        if kept.len() == UNDERLAYS_PER_PEER_MAX || bytes + entry > UNDERLAY_BYTES_MAX {
            break;
        }
        bytes += entry;
        kept.push(address.clone());
    }
    kept
}

/// [`truncate_underlays`] then [`serialize_underlays`]: what a node sends of its own list.
pub fn serialize_truncated(addresses: &[Multiaddr]) -> Vec<u8> {
    write_underlays(&truncate_underlays(addresses))
}

/// The addresses of an underlay field (bee `DeserializeUnderlays`). The list form may be
/// empty (only the prefix); the caller decides whether no address is acceptable.
///
/// # Errors
/// Empty or oversize field, too many entries, a malformed entry length or multiaddr.
pub fn deserialize_underlays(data: &[u8]) -> Result<Vec<Multiaddr>, UnderlayError> {
    if data.len() > UNDERLAY_BYTES_MAX {
        return Err(UnderlayError::TooLarge { bytes: data.len() });
    }
    match data.split_first() {
        None => Err(UnderlayError::Empty),
        Some((&UNDERLAY_LIST_PREFIX, list)) => deserialize_list(list),
        Some(_) => Ok(vec![parse_multiaddr(0, data)?]),
    }
}

fn deserialize_list(mut rest: &[u8]) -> Result<Vec<Multiaddr>, UnderlayError> {
    let mut addresses = Vec::new();
    while !rest.is_empty() {
        let index = addresses.len();
        if index == UNDERLAYS_PER_PEER_MAX {
            return Err(UnderlayError::TooMany);
        }
        let (declared, after) =
            unsigned_varint::decode::u64(rest).map_err(|_| UnderlayError::EntryLength { index })?;
        let entry = usize::try_from(declared)
            .ok()
            .and_then(|length| after.get(..length))
            .ok_or(UnderlayError::EntryTruncated {
                index,
                declared,
                remaining: after.len(),
            })?;
        addresses.push(parse_multiaddr(index, entry)?);
        rest = &after[entry.len()..];
    }
    Ok(addresses)
}

fn parse_multiaddr(index: usize, bytes: &[u8]) -> Result<Multiaddr, UnderlayError> {
    if bytes.is_empty() {
        return Err(UnderlayError::Multiaddr {
            index,
            reason: "empty address".to_owned(),
        });
    }
    Multiaddr::try_from(bytes.to_vec()).map_err(|error| UnderlayError::Multiaddr {
        index,
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(text: &str) -> Multiaddr {
        text.parse().expect("valid multiaddr")
    }

    #[test]
    fn one_address_is_its_bytes_and_others_are_a_list() {
        let one = address("/ip4/127.0.0.1/tcp/1634");
        let two = address("/ip6/::1/tcp/1634");
        assert_eq!(
            serialize_underlays(std::slice::from_ref(&one)),
            Ok(one.to_vec())
        );
        assert_eq!(serialize_underlays(&[]), Ok(vec![UNDERLAY_LIST_PREFIX]));
        let both = serialize_underlays(&[one.clone(), two.clone()]).expect("fits");
        let mut expected = vec![UNDERLAY_LIST_PREFIX, one.as_ref().len() as u8];
        expected.extend_from_slice(one.as_ref());
        expected.push(two.as_ref().len() as u8);
        expected.extend_from_slice(two.as_ref());
        assert_eq!(both, expected);
        assert_eq!(deserialize_underlays(&both), Ok(vec![one, two]));
        assert_eq!(deserialize_underlays(&[UNDERLAY_LIST_PREFIX]), Ok(vec![]));
    }

    #[test]
    fn bounds_are_bees() {
        let one = address("/ip4/1.2.3.4/tcp/80");
        let many = vec![one.clone(); UNDERLAYS_PER_PEER_MAX + 1];
        assert_eq!(serialize_underlays(&many), Err(UnderlayError::TooMany));
        let mut list = vec![UNDERLAY_LIST_PREFIX];
        for _ in 0..=UNDERLAYS_PER_PEER_MAX {
            list.push(one.as_ref().len() as u8);
            list.extend_from_slice(one.as_ref());
        }
        assert_eq!(deserialize_underlays(&list), Err(UnderlayError::TooMany));
        let oversize = vec![UNDERLAY_LIST_PREFIX; UNDERLAY_BYTES_MAX + 1];
        assert_eq!(
            deserialize_underlays(&oversize),
            Err(UnderlayError::TooLarge {
                bytes: UNDERLAY_BYTES_MAX + 1
            })
        );
        assert_eq!(deserialize_underlays(&[]), Err(UnderlayError::Empty));
    }

    #[test]
    fn malformed_entries_are_typed() {
        assert_eq!(
            deserialize_underlays(&[UNDERLAY_LIST_PREFIX, 0x85, 0x00]),
            Err(UnderlayError::EntryLength { index: 0 })
        );
        assert_eq!(
            deserialize_underlays(&[UNDERLAY_LIST_PREFIX, 0x80]),
            Err(UnderlayError::EntryLength { index: 0 })
        );
        assert_eq!(
            deserialize_underlays(&[UNDERLAY_LIST_PREFIX, 5, 4, 1]),
            Err(UnderlayError::EntryTruncated {
                index: 0,
                declared: 5,
                remaining: 2
            })
        );
        assert!(matches!(
            deserialize_underlays(&[UNDERLAY_LIST_PREFIX, 0]),
            Err(UnderlayError::Multiaddr { index: 0, .. })
        ));
        assert!(matches!(
            deserialize_underlays(&[0xde, 0xad, 0xbe, 0xef]),
            Err(UnderlayError::Multiaddr { index: 0, .. })
        ));
    }

    #[test]
    fn truncation_fits_both_bounds_and_keeps_order() {
        let addresses: Vec<Multiaddr> = (0..30u16)
            .map(|port| address(&format!("/ip4/10.0.0.1/tcp/{port}")))
            .collect();
        let kept = truncate_underlays(&addresses);
        assert_eq!(kept, addresses[..UNDERLAYS_PER_PEER_MAX]);
        assert!(serialize_underlays(&kept).is_ok());
        let long = address(&format!("/dns/{}/tcp/1", "a".repeat(250)));
        let kept = truncate_underlays(&vec![long.clone(); 2]);
        assert_eq!(kept, vec![long.clone()], "a repeat is dropped");
        let longs: Vec<Multiaddr> = (0..20)
            .map(|n| address(&format!("/dns/{}/tcp/{n}", "a".repeat(250))))
            .collect();
        let kept = truncate_underlays(&longs);
        assert!(kept.len() < longs.len());
        assert_eq!(kept, longs[..kept.len()]);
        assert!(serialize_truncated(&longs).len() <= UNDERLAY_BYTES_MAX);
    }
}
