//! Trusted relays: the edge brokers whose per-peer bounds a root raises (docs/LIMITS.md).
//!
//! Owns: `TrustedPrefix` (one entry of `limits.trusted_relays`: an IP address or a CIDR
//! prefix, IPv4 or IPv6, with a typed `PrefixError` when it does not parse),
//! `TrustedRelays` (the bounded list, `TRUSTED_RELAYS_MAX`) and whether a `PeerId` is one.
//! A peer is what every bound counts by (an IPv4 address or an IPv6 /64, `ids::PeerId`), so
//! trust is granted to peers: an IPv6 entry narrower than a /64 trusts the /64 it lies in,
//! whose addresses already share every count. An IPv4-mapped IPv6 entry is its IPv4 entry,
//! as a peer's IPv4-mapped address is its IPv4 address.
//! Never does: decide a bound (the ledger does) or see a connection.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ids::{IPV6_PEER_PREFIX_BITS, PeerId};

/// Entries of `limits.trusted_relays` at most: an operator's edges are a handful of
/// addresses or prefixes, and every Join, accept and penalty scans the list under the
/// ledger's mutex, so its length is what that scan may cost (256 comparisons, well under a
/// microsecond).
pub const TRUSTED_RELAYS_MAX: usize = 256;

/// One trusted address or prefix: `network` with the bits below `bits` zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrustedPrefix {
    network: IpAddr,
    bits: u32,
}

/// Why an entry of `limits.trusted_relays` is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// The part before `/` is not an IP address.
    Address(String),
    /// The length after `/` is not a number from 0 to 32 (IPv4) or 128 (IPv6).
    Bits { entry: String, max: u32 },
    /// Bits below the prefix are set, so the entry does not say which network it means.
    HostBits { entry: String, network: String },
    /// More entries than `TRUSTED_RELAYS_MAX`.
    TooMany { count: usize },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::Address(entry) => write!(
                f,
                "{entry:?} is not an IP address or CIDR prefix (e.g. \"192.0.2.7\", \"10.1.0.0/16\", \"2001:db8:5::/48\")"
            ),
            PrefixError::Bits { entry, max } => {
                write!(
                    f,
                    "{entry:?}: the prefix length must be a number from 0 to {max}"
                )
            }
            PrefixError::HostBits { entry, network } => write!(
                f,
                "{entry:?}: bits below the prefix are set (did you mean {network:?}?)"
            ),
            PrefixError::TooMany { count } => write!(
                f,
                "{count} entries; at most {TRUSTED_RELAYS_MAX} (list prefixes rather than single edges)"
            ),
        }
    }
}

impl std::error::Error for PrefixError {}

/// The address as 128 bits, an IPv4 address in the top 32, and its width in bits.
fn bits_of(ip: IpAddr) -> (u128, u32) {
    match ip {
        IpAddr::V4(v4) => (u128::from(v4.to_bits()) << 96, 32),
        IpAddr::V6(v6) => (v6.to_bits(), 128),
    }
}

/// The top `bits` of 128 set.
fn mask(bits: u32) -> u128 {
    u128::MAX.checked_shl(128 - bits).unwrap_or(0)
}

/// `bits` left-aligned back into an address of the family of `like`.
fn address_like(like: IpAddr, bits: u128) -> IpAddr {
    match like {
        // The top 32 bits of an IPv4 address shifted down fit a u32.
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from_bits((bits >> 96) as u32)),
        IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from_bits(bits)),
    }
}

impl TrustedPrefix {
    /// Whether `peer` lies in this prefix. An IPv6 prefix longer than a peer matches the
    /// peer (/64) it lies in.
    #[must_use]
    pub fn contains(&self, peer: PeerId) -> bool {
        // A bee node, named by its overlay, is in no address prefix.
        let Some(ip) = peer.ip() else {
            return false;
        };
        if ip.is_ipv4() != self.network.is_ipv4() {
            return false;
        }
        let bits = match ip {
            IpAddr::V4(_) => self.bits,
            IpAddr::V6(_) => self.bits.min(IPV6_PEER_PREFIX_BITS),
        };
        bits_of(ip).0 & mask(bits) == bits_of(self.network).0 & mask(bits)
    }
}

impl FromStr for TrustedPrefix {
    type Err = PrefixError;

    /// `address` (a /32 or /128) or `address/bits`.
    fn from_str(entry: &str) -> Result<TrustedPrefix, PrefixError> {
        let (address, bits) = match entry.split_once('/') {
            Some((address, bits)) => (address, Some(bits)),
            None => (entry, None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| PrefixError::Address(entry.to_owned()))?;
        let (value, width) = bits_of(network);
        let bits = match bits {
            None => width,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|bits| *bits <= width && text.bytes().all(|byte| byte.is_ascii_digit()))
                .ok_or(PrefixError::Bits {
                    entry: entry.to_owned(),
                    max: width,
                })?,
        };
        if value & !mask(bits) != 0 {
            let network = address_like(network, value & mask(bits));
            return Err(PrefixError::HostBits {
                entry: entry.to_owned(),
                network: format!("{network}/{bits}"),
            });
        }
        Ok(canonical(network, bits))
    }
}

/// An IPv4-mapped prefix of at least 96 bits as its IPv4 prefix (peers are matched so);
/// anything else as written.
fn canonical(network: IpAddr, bits: u32) -> TrustedPrefix {
    if let IpAddr::V6(v6) = network
        && let Some(v4) = v6.to_ipv4_mapped()
        && bits >= 96
    {
        return TrustedPrefix {
            network: IpAddr::V4(v4),
            bits: bits - 96,
        };
    }
    TrustedPrefix { network, bits }
}

impl fmt::Display for TrustedPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.bits)
    }
}

/// The trusted relays of one broker: `limits.trusted_relays`, at most `TRUSTED_RELAYS_MAX`
/// entries; in TOML a list of strings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct TrustedRelays {
    prefixes: Vec<TrustedPrefix>,
}

impl TrustedRelays {
    /// Whether `peer` is a trusted relay.
    #[must_use]
    pub fn contains(&self, peer: PeerId) -> bool {
        self.prefixes.iter().any(|prefix| prefix.contains(peer))
    }

    /// Whether no relay is trusted.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Parses every entry; the first bad one is the error.
    ///
    /// # Errors
    /// An entry that is not an address or prefix, or more than `TRUSTED_RELAYS_MAX` entries.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<TrustedRelays, PrefixError> {
        if entries.len() > TRUSTED_RELAYS_MAX {
            return Err(PrefixError::TooMany {
                count: entries.len(),
            });
        }
        let prefixes = entries
            .iter()
            .map(|entry| entry.as_ref().trim().parse())
            .collect::<Result<Vec<TrustedPrefix>, PrefixError>>()?;
        Ok(TrustedRelays { prefixes })
    }
}

impl TryFrom<Vec<String>> for TrustedRelays {
    type Error = PrefixError;

    fn try_from(entries: Vec<String>) -> Result<TrustedRelays, PrefixError> {
        TrustedRelays::parse(&entries)
    }
}

impl From<TrustedRelays> for Vec<String> {
    fn from(relays: TrustedRelays) -> Vec<String> {
        relays.prefixes.iter().map(ToString::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{PrefixError, TRUSTED_RELAYS_MAX, TrustedPrefix, TrustedRelays};
    use crate::ids::PeerId;

    fn peer(text: &str) -> PeerId {
        PeerId::of(text.parse().expect("literal address"))
    }

    fn prefix(text: &str) -> TrustedPrefix {
        text.parse().expect("valid prefix")
    }

    #[test]
    fn ipv4_prefixes_match_their_addresses_only() {
        assert!(prefix("10.1.0.0/16").contains(peer("10.1.255.7")));
        assert!(!prefix("10.1.0.0/16").contains(peer("10.2.0.1")));
        assert!(prefix("192.0.2.7/32").contains(peer("192.0.2.7")));
        assert!(prefix("192.0.2.7").contains(peer("192.0.2.7")));
        assert!(!prefix("192.0.2.7/32").contains(peer("192.0.2.8")));
        assert!(!prefix("10.1.0.0/16").contains(peer("::ffff:10.2.0.1")));
        // A peer on a dual-stack socket arrives IPv4-mapped and is its IPv4 address.
        assert!(prefix("10.1.0.0/16").contains(peer("::ffff:10.1.0.1")));
    }

    #[test]
    fn zero_length_prefixes_match_their_family_only() {
        assert!(prefix("0.0.0.0/0").contains(peer("203.0.113.9")));
        assert!(!prefix("0.0.0.0/0").contains(peer("2001:db8::1")));
        assert!(prefix("::/0").contains(peer("2001:db8::1")));
        assert!(!prefix("::/0").contains(peer("203.0.113.9")));
    }

    #[test]
    fn ipv6_entries_narrower_than_a_peer_trust_its_slash_64() {
        let edge = prefix("2001:db8:5:1::10/128");
        assert!(edge.contains(peer("2001:db8:5:1::10")));
        // The same /64 is the same peer: its counts are the edge's counts already.
        assert!(edge.contains(peer("2001:db8:5:1::99")));
        assert!(!edge.contains(peer("2001:db8:5:2::10")));
        assert!(prefix("2001:db8:5::/48").contains(peer("2001:db8:5:ffff::1")));
        assert!(!prefix("2001:db8:5::/48").contains(peer("2001:db8:6::1")));
    }

    #[test]
    fn ipv4_mapped_entries_are_ipv4() {
        let mapped = prefix("::ffff:10.1.0.0/112");
        assert_eq!(mapped, prefix("10.1.0.0/16"));
        assert!(mapped.contains(peer("10.1.2.3")));
        assert!(prefix("::ffff:192.0.2.7").contains(peer("192.0.2.7")));
        // Not the IPv6 peer ::/64 that its first 64 bits would name.
        assert!(!prefix("::ffff:192.0.2.7").contains(peer("::1")));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let error = |text: &str| text.parse::<TrustedPrefix>().expect_err("refused");
        assert_eq!(
            error("edge-1.example"),
            PrefixError::Address("edge-1.example".to_owned())
        );
        assert_eq!(
            error("10.0.0.0/33"),
            PrefixError::Bits {
                entry: "10.0.0.0/33".to_owned(),
                max: 32
            }
        );
        assert!(matches!(
            error("2001:db8::/129"),
            PrefixError::Bits { max: 128, .. }
        ));
        assert!(matches!(error("10.0.0.0/+8"), PrefixError::Bits { .. }));
        assert!(matches!(error("10.0.0.0/"), PrefixError::Bits { .. }));
        let host_bits = error("10.1.2.3/16");
        assert_eq!(
            host_bits.to_string(),
            "\"10.1.2.3/16\": bits below the prefix are set (did you mean \"10.1.0.0/16\"?)"
        );
    }

    #[test]
    fn the_list_is_bounded_and_round_trips_as_strings() {
        let many: Vec<String> = (0..=TRUSTED_RELAYS_MAX)
            .map(|index| format!("10.0.{}.{}", index / 256, index % 256))
            .collect();
        assert_eq!(
            TrustedRelays::parse(&many),
            Err(PrefixError::TooMany {
                count: TRUSTED_RELAYS_MAX + 1
            })
        );
        let relays = TrustedRelays::parse(&many[..TRUSTED_RELAYS_MAX]).expect("at the bound");
        assert!(relays.contains(peer("10.0.0.255")));
        let listed: Vec<String> = TrustedRelays::parse(&["192.0.2.7", " 2001:db8::/32"])
            .expect("valid")
            .into();
        assert_eq!(listed, ["192.0.2.7/32", "2001:db8::/32"]);
    }
}
