//! The client a trusted reverse proxy names: `Forwarded` (RFC 7239) and `X-Forwarded-For`.
//!
//! Owns: the trusted proxies as address ranges ([`IpRange`], [`TrustedProxies`]: a single
//! address or CIDR), one hop of either header ([`parse_hop`]: `ip`, `ip:port`, `[v6]`,
//! `[v6]:port`, bare IPv6, `unknown`, an obfuscated `_name`), the elements of `Forwarded`
//! (quoted strings, several `;` pairs per element), and the walk ([`forwarded_peer`]).
//!
//! The walk: every line of the header, in order, forms one list (RFC 9110 section 5.3); it
//! is read from the right, past the hops that are trusted proxies; the first hop that is not
//! is the peer. A hop that does not parse, or that hides the client (`unknown`, `_name`),
//! refuses the request: skipping it would let the walk reach an address the client wrote.
//! Hops left of the peer are the client's own claims and are never read. When every hop is
//! a trusted proxy, the leftmost is the client itself (a client on the proxy's host).
//! Empty list elements (`a,,b`) are not hops: RFC 9110 section 5.6.1 has recipients ignore
//! them.
//!
//! Both headers present: `Forwarded` is read and `X-Forwarded-For` is not. It is the
//! standard, its syntax says what `X-Forwarded-For` leaves open (ports, IPv6, unknown
//! clients), and a proxy that writes it means it. The price: a proxy that only appends
//! `X-Forwarded-For` must drop a client's `Forwarded` (docs/WEBSOCKET.md shows nginx's line).
//!
//! Never: I/O, or what a peer's bounds are (the broker's link applies them to the address).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// The RFC 7239 header.
pub const FORWARDED: &str = "Forwarded";
/// The de facto header most proxies append to.
pub const X_FORWARDED_FOR: &str = "X-Forwarded-For";
/// Characters of a hop quoted in an error at most: a head may be 8 KiB, an answer stays short.
const HOP_SHOWN_CHARS_MAX: usize = 64;
/// Digits of a port at most (RFC 7239 `port = 1*5DIGIT`).
const PORT_DIGITS_MAX: usize = 5;

/// One trusted proxy entry: a network and its prefix length (a single address is `/32` or
/// `/128`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpRange {
    network: IpAddr,
    prefix_bits: u8,
}

/// Why a trusted proxy entry does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    /// The part before `/` is not an IP address.
    Address,
    /// The prefix length is not a number of at most 32 (IPv4) or 128 (IPv6).
    PrefixBits { max: u8 },
    /// Bits below the prefix are set: the entry is ambiguous, `network` is what it names.
    HostBits { network: IpRange },
}

impl fmt::Display for RangeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Address => formatter.write_str("not an IP address"),
            Self::PrefixBits { max } => {
                write!(
                    formatter,
                    "the prefix length must be a number from 0 to {max}"
                )
            }
            Self::HostBits { network } => {
                write!(
                    formatter,
                    "bits below the prefix are set (the range is {network})"
                )
            }
        }
    }
}

impl std::error::Error for RangeError {}

/// The bits of `ip` as a 128-bit number, left-aligned, and its width.
fn bits_of(ip: IpAddr) -> (u128, u8) {
    match ip {
        IpAddr::V4(v4) => (u128::from(v4.to_bits()) << 96, 32),
        IpAddr::V6(v6) => (v6.to_bits(), 128),
    }
}

/// The left-aligned mask of `prefix_bits` ones.
fn mask(prefix_bits: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix_bits))
        .unwrap_or(0)
}

impl IpRange {
    /// Whether `ip` lies in the range; an IPv4-mapped IPv6 address counts as its IPv4
    /// address (a dual-stack listener sees IPv4 clients so).
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if ip.is_ipv4() != self.network.is_ipv4() {
            return false;
        }
        let mask = mask(self.prefix_bits);
        bits_of(ip).0 & mask == bits_of(self.network).0 & mask
    }
}

impl FromStr for IpRange {
    type Err = RangeError;

    /// `address` or `address/prefix`.
    fn from_str(text: &str) -> Result<IpRange, RangeError> {
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address.parse().map_err(|_| RangeError::Address)?;
        let (bits, width) = bits_of(network);
        let prefix_bits = match prefix {
            None => width,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|bits| *bits <= width && prefix.bytes().all(|byte| byte.is_ascii_digit()))
                .ok_or(RangeError::PrefixBits { max: width })?,
        };
        if bits & !mask(prefix_bits) != 0 {
            let masked = bits & mask(prefix_bits);
            let network = match network {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from_bits((masked >> 96) as u32)),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from_bits(masked)),
            };
            return Err(RangeError::HostBits {
                network: IpRange {
                    network,
                    prefix_bits,
                },
            });
        }
        // An IPv4-mapped range is its IPv4 range: addresses are matched as IPv4 (`contains`).
        // A valid one has at least 96 prefix bits (the mapped prefix sets bits 80..96).
        if let IpAddr::V6(v6) = network
            && let Some(v4) = v6.to_ipv4_mapped()
        {
            return Ok(IpRange {
                network: IpAddr::V4(v4),
                prefix_bits: prefix_bits - 96,
            });
        }
        Ok(IpRange {
            network,
            prefix_bits,
        })
    }
}

impl From<IpAddr> for IpRange {
    /// The range of one address.
    fn from(ip: IpAddr) -> IpRange {
        let ip = ip.to_canonical();
        IpRange {
            network: ip,
            prefix_bits: bits_of(ip).1,
        }
    }
}

impl fmt::Display for IpRange {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.network, self.prefix_bits)
    }
}

/// The reverse proxies whose headers name the peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    ranges: Vec<IpRange>,
}

impl TrustedProxies {
    #[must_use]
    pub fn new(ranges: Vec<IpRange>) -> TrustedProxies {
        TrustedProxies { ranges }
    }

    /// Whether `ip` is a trusted proxy.
    #[must_use]
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|range| range.contains(ip))
    }
}

/// One hop of a forwarding header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// An address (a port, if given, is dropped; an IPv4-mapped IPv6 address is its IPv4).
    Address(IpAddr),
    /// `unknown`: the proxy did not know its client.
    Unknown,
    /// An obfuscated identifier (`_name`, RFC 7239 section 6.3).
    Obfuscated,
}

/// Characters of an obfuscated node or port after its `_` (RFC 7239 section 6.3).
fn is_obfuscated(rest: &str) -> bool {
    !rest.is_empty()
        && rest
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// A port: 1 to 5 digits up to 65535, or an obfuscated `_port`.
fn check_port(port: &str) -> Result<(), &'static str> {
    if let Some(rest) = port.strip_prefix('_') {
        return if is_obfuscated(rest) {
            Ok(())
        } else {
            Err("an obfuscated port has letters, digits, '.', '_' or '-' after its '_'")
        };
    }
    let digits = !port.is_empty()
        && port.len() <= PORT_DIGITS_MAX
        && port.bytes().all(|byte| byte.is_ascii_digit());
    if digits && port.parse::<u16>().is_ok() {
        Ok(())
    } else {
        Err("the port is not a number from 0 to 65535")
    }
}

/// One hop: `ip`, `ip:port` (IPv4), `[v6]`, `[v6]:port`, bare IPv6, `unknown` or an
/// obfuscated `_name` (with an optional port); whitespace around it is ignored.
///
/// # Errors
/// The hop is none of these; the reason says what is wrong.
pub fn parse_hop(text: &str) -> Result<Hop, &'static str> {
    let text = text.trim_matches([' ', '\t']);
    if text.is_empty() {
        return Err("the hop is empty");
    }
    if text.eq_ignore_ascii_case("unknown") {
        return Ok(Hop::Unknown);
    }
    let (node, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an opening '[' has no closing ']'")?;
        let ip: Ipv6Addr = inside
            .parse()
            .map_err(|_| "the text inside '[ ]' is not an IPv6 address")?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or("only ':port' may follow ']'")?,
            ),
        };
        (Hop::Address(IpAddr::V6(ip)), port)
    } else if let Ok(ip) = text.parse::<IpAddr>() {
        (Hop::Address(ip), None)
    } else {
        let (host, port) = match text.split_once(':') {
            Some((host, port)) if !port.contains(':') => (host, Some(port)),
            // Several colons and no brackets: an IPv6 address that does not parse.
            Some(_) => return Err("not an IPv6 address (write one with a port as [v6]:port)"),
            None => (text, None),
        };
        let node = if let Some(rest) = host.strip_prefix('_') {
            if !is_obfuscated(rest) {
                return Err(
                    "an obfuscated identifier has letters, digits, '.', '_' or '-' after its '_'",
                );
            }
            Hop::Obfuscated
        } else if host.eq_ignore_ascii_case("unknown") {
            Hop::Unknown
        } else {
            let ip: Ipv4Addr = host
                .parse()
                .map_err(|_| "not an address (ip, ip:port, [v6], [v6]:port or unknown)")?;
            Hop::Address(IpAddr::V4(ip))
        };
        (node, port)
    };
    if let Some(port) = port {
        check_port(port)?;
    }
    Ok(match node {
        Hop::Address(ip) => Hop::Address(ip.to_canonical()),
        other => other,
    })
}

/// Why no peer could be named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardedError {
    /// Neither header names anyone.
    Missing,
    /// The header's list cannot be split into elements.
    Syntax {
        header: &'static str,
        reason: &'static str,
    },
    /// A hop the walk reached does not parse.
    Hop {
        header: &'static str,
        hop: String,
        reason: &'static str,
    },
    /// The walk reached a hop that hides the client (`unknown` or obfuscated): its bounds
    /// could not be applied to anyone.
    Unknown { header: &'static str, hop: String },
}

impl fmt::Display for ForwardedError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing => write!(
                formatter,
                "a trusted proxy must name the client in \"{FORWARDED}\" or \"{X_FORWARDED_FOR}\""
            ),
            Self::Syntax { header, reason } => write!(formatter, "header \"{header}\": {reason}"),
            Self::Hop {
                header,
                hop,
                reason,
            } => write!(formatter, "header \"{header}\": hop {hop:?}: {reason}"),
            Self::Unknown { header, hop } => write!(
                formatter,
                "header \"{header}\": hop {hop:?} does not give the client's address \
                 (unknown or obfuscated), so its bounds cannot apply"
            ),
        }
    }
}

impl std::error::Error for ForwardedError {}

/// A hop as an error shows it: at most `HOP_SHOWN_CHARS_MAX` characters.
fn shown(hop: &str) -> String {
    let hop = hop.trim_matches([' ', '\t']);
    match hop.char_indices().nth(HOP_SHOWN_CHARS_MAX) {
        Some((end, _)) => format!("{}...", &hop[..end]),
        None => hop.to_owned(),
    }
}

/// `text` split at `separator` where it is not inside a quoted string (`"..."` with `\`
/// escapes); `None` when a quoted string is not closed.
fn split_unquoted(text: &str, separator: char) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (index, character) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && character == '\\' {
            escaped = true;
        } else if character == '"' {
            quoted = !quoted;
        } else if !quoted && character == separator {
            parts.push(&text[start..index]);
            start = index + separator.len_utf8();
        }
    }
    if quoted {
        return None;
    }
    parts.push(&text[start..]);
    Some(parts)
}

/// A token character (RFC 9110 section 5.6.2).
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// The `for=` value of one `Forwarded` element, unquoted.
fn for_value(element: &str) -> Result<String, &'static str> {
    let mut value = None;
    for pair in split_unquoted(element, ';').ok_or("a quoted string is not closed")? {
        let pair = pair.trim_matches([' ', '\t']);
        if pair.is_empty() {
            continue;
        }
        let (name, raw) = pair
            .split_once('=')
            .ok_or("a parameter is not name=value")?;
        if name.is_empty() || !name.bytes().all(is_tchar) {
            return Err("a parameter name is not a token");
        }
        if !name.eq_ignore_ascii_case("for") {
            continue;
        }
        if value.is_some() {
            return Err("the element has for= twice");
        }
        value = Some(unquote(raw)?);
    }
    value.ok_or("the element has no for= parameter")
}

/// A parameter value: a quoted string, or a token. Unquoted ':' '[' ']' are accepted
/// (proxies write `for=192.0.2.1:80` unquoted); the hop parser judges the address.
fn unquote(raw: &str) -> Result<String, &'static str> {
    if let Some(inner) = raw.strip_prefix('"') {
        let inner = inner
            .strip_suffix('"')
            .ok_or("a quoted value has text after its closing quote")?;
        let mut value = String::with_capacity(inner.len());
        let mut characters = inner.chars();
        while let Some(character) = characters.next() {
            match character {
                '\\' => value.push(characters.next().ok_or("a quoted value ends in '\\'")?),
                '"' => return Err("a quoted value has text after its closing quote"),
                other => value.push(other),
            }
        }
        return Ok(value);
    }
    let token = !raw.is_empty()
        && raw
            .bytes()
            .all(|byte| is_tchar(byte) || matches!(byte, b':' | b'[' | b']'));
    if token {
        Ok(raw.to_owned())
    } else {
        Err("a value is neither a token nor a quoted string")
    }
}

/// One list of a header's lines: the elements in order, empty ones dropped.
fn elements<'a>(
    header: &'static str,
    lines: &[&'a str],
    quoted_strings: bool,
) -> Result<Vec<&'a str>, ForwardedError> {
    let mut elements = Vec::new();
    for line in lines {
        let parts = if quoted_strings {
            split_unquoted(line, ',').ok_or(ForwardedError::Syntax {
                header,
                reason: "a quoted string is not closed",
            })?
        } else {
            line.split(',').collect()
        };
        elements.extend(
            parts
                .into_iter()
                .filter(|part| !part.trim_matches([' ', '\t']).is_empty()),
        );
    }
    Ok(elements)
}

/// Walks `hops` from the right past trusted proxies.
fn walk(
    header: &'static str,
    hops: &[&str],
    trusted: &TrustedProxies,
    resolve: impl Fn(&str) -> Result<Hop, &'static str>,
) -> Result<IpAddr, ForwardedError> {
    let mut leftmost_trusted = None;
    for hop in hops.iter().rev() {
        match resolve(hop) {
            Ok(Hop::Address(ip)) if trusted.contains(ip) => leftmost_trusted = Some(ip),
            Ok(Hop::Address(ip)) => return Ok(ip),
            Ok(Hop::Unknown | Hop::Obfuscated) => {
                return Err(ForwardedError::Unknown {
                    header,
                    hop: shown(hop),
                });
            }
            Err(reason) => {
                return Err(ForwardedError::Hop {
                    header,
                    hop: shown(hop),
                    reason,
                });
            }
        }
    }
    leftmost_trusted.ok_or(ForwardedError::Missing)
}

/// The peer a trusted proxy names, from every line of `Forwarded` and of `X-Forwarded-For`
/// in the order they came (the module header says how, and why `Forwarded` wins).
///
/// # Errors
/// No header names anyone, a hop the walk reaches does not parse or hides the client, or
/// `Forwarded` cannot be split into elements.
pub fn forwarded_peer(
    forwarded: &[&str],
    x_forwarded_for: &[&str],
    trusted: &TrustedProxies,
) -> Result<IpAddr, ForwardedError> {
    let standard = elements(FORWARDED, forwarded, true)?;
    if !standard.is_empty() {
        return walk(FORWARDED, &standard, trusted, |element| {
            parse_hop(&for_value(element)?)
        });
    }
    let hops = elements(X_FORWARDED_FOR, x_forwarded_for, false)?;
    walk(X_FORWARDED_FOR, &hops, trusted, parse_hop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    fn trusted(entries: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            entries
                .iter()
                .map(|entry| entry.parse().expect("a range"))
                .collect(),
        )
    }

    fn xff(lines: &[&str], proxies: &[&str]) -> Result<IpAddr, ForwardedError> {
        forwarded_peer(&[], lines, &trusted(proxies))
    }

    fn standard(lines: &[&str], proxies: &[&str]) -> Result<IpAddr, ForwardedError> {
        forwarded_peer(lines, &[], &trusted(proxies))
    }

    #[test]
    fn ranges_hold_single_addresses_and_cidr() {
        let single: IpRange = "127.0.0.1".parse().expect("range");
        assert!(single.contains(ip("127.0.0.1")));
        assert!(!single.contains(ip("127.0.0.2")));
        assert!(single.contains(ip("::ffff:127.0.0.1")), "mapped IPv4");
        let ten: IpRange = "10.0.0.0/8".parse().expect("range");
        assert!(ten.contains(ip("10.255.3.4")));
        assert!(!ten.contains(ip("11.0.0.0")));
        assert!(
            !ten.contains(ip("::a00:1")),
            "an IPv6 address is not in an IPv4 range"
        );
        let ula: IpRange = "fd00::/8".parse().expect("range");
        assert!(ula.contains(ip("fd12:3456::1")));
        assert!(!ula.contains(ip("fe80::1")));
        let everything: IpRange = "0.0.0.0/0".parse().expect("range");
        assert!(everything.contains(ip("203.0.113.9")));
        let everything_v6: IpRange = "::/0".parse().expect("range");
        assert!(everything_v6.contains(ip("2001:db8::1")));
        let one_v6: IpRange = "2001:db8::1/128".parse().expect("range");
        assert!(one_v6.contains(ip("2001:db8::1")));
        assert!(!one_v6.contains(ip("2001:db8::2")));
        assert_eq!(ten.to_string(), "10.0.0.0/8");
        let mapped: IpRange = "::ffff:10.0.0.0/104".parse().expect("range");
        assert_eq!(mapped, ten, "an IPv4-mapped range is its IPv4 range");
        assert_eq!(IpRange::from(ip("::ffff:127.0.0.1")), single);
    }

    #[test]
    fn bad_ranges_say_what_is_wrong() {
        assert_eq!("nonsense".parse::<IpRange>(), Err(RangeError::Address));
        assert_eq!(
            "10.0.0.0/33".parse::<IpRange>(),
            Err(RangeError::PrefixBits { max: 32 })
        );
        assert_eq!(
            "::/129".parse::<IpRange>(),
            Err(RangeError::PrefixBits { max: 128 })
        );
        assert_eq!(
            "10.0.0.0/".parse::<IpRange>(),
            Err(RangeError::PrefixBits { max: 32 })
        );
        assert_eq!(
            "10.0.0.0/+8".parse::<IpRange>(),
            Err(RangeError::PrefixBits { max: 32 })
        );
        let error = "10.0.0.1/8".parse::<IpRange>().expect_err("host bits");
        assert_eq!(
            error.to_string(),
            "bits below the prefix are set (the range is 10.0.0.0/8)"
        );
        let error = "fd00::1/8".parse::<IpRange>().expect_err("host bits");
        assert_eq!(
            error.to_string(),
            "bits below the prefix are set (the range is fd00::/8)"
        );
    }

    #[test]
    fn every_hop_form_parses() {
        let cases = [
            ("198.51.100.2", Hop::Address(ip("198.51.100.2"))),
            (" 198.51.100.2\t", Hop::Address(ip("198.51.100.2"))),
            ("198.51.100.2:4711", Hop::Address(ip("198.51.100.2"))),
            ("[2001:db8::1]", Hop::Address(ip("2001:db8::1"))),
            ("[2001:db8::1]:4711", Hop::Address(ip("2001:db8::1"))),
            ("2001:db8::1", Hop::Address(ip("2001:db8::1"))),
            ("::ffff:192.0.2.1", Hop::Address(ip("192.0.2.1"))),
            ("[::ffff:192.0.2.1]:80", Hop::Address(ip("192.0.2.1"))),
            ("192.0.2.1:_port", Hop::Address(ip("192.0.2.1"))),
            ("unknown", Hop::Unknown),
            ("UNKNOWN", Hop::Unknown),
            ("unknown:80", Hop::Unknown),
            ("_hidden", Hop::Obfuscated),
            ("_a.b-c_d:_x", Hop::Obfuscated),
        ];
        for (text, hop) in cases {
            assert_eq!(parse_hop(text), Ok(hop), "{text}");
        }
    }

    #[test]
    fn malformed_hops_are_errors() {
        for text in [
            "",
            "  ",
            "host.example",
            "198.51.100",
            "198.51.100.2:",
            "198.51.100.2:65536",
            "198.51.100.2:123456",
            "198.51.100.2:-1",
            "198.51.100.2:80:80",
            "[2001:db8::1",
            "[2001:db8::1]80",
            "[198.51.100.2]",
            "[2001:db8::1]:x",
            "2001:db8::g",
            "_",
            "_bad!",
            "fe80::1%eth0",
            "192.0.2.1:_",
        ] {
            assert!(parse_hop(text).is_err(), "{text:?} parsed");
        }
    }

    #[test]
    fn the_peer_is_the_rightmost_untrusted_hop() {
        let proxies = ["127.0.0.1"];
        assert_eq!(
            xff(&["203.0.113.9, 198.51.100.2, 127.0.0.1"], &proxies),
            Ok(ip("198.51.100.2"))
        );
        // Every hop trusted: the leftmost is the client.
        assert_eq!(xff(&["127.0.0.1"], &proxies), Ok(ip("127.0.0.1")));
        assert_eq!(xff(&[], &proxies), Err(ForwardedError::Missing));
        assert_eq!(xff(&[" , ,"], &proxies), Err(ForwardedError::Missing));
    }

    #[test]
    fn every_header_line_is_one_list() {
        let proxies = ["127.0.0.1", "10.0.0.0/8"];
        // The second line is the nearest proxy's: the walk crosses into the first line.
        assert_eq!(
            xff(
                &["203.0.113.9, 198.51.100.2", "10.1.2.3, 127.0.0.1"],
                &proxies
            ),
            Ok(ip("198.51.100.2"))
        );
        assert_eq!(
            xff(&["198.51.100.2", "10.1.2.3", "127.0.0.1"], &proxies),
            Ok(ip("198.51.100.2"))
        );
        // The first line alone would have named 10.1.2.3's client wrongly.
        assert_eq!(
            xff(&["10.1.2.3", "198.51.100.7"], &proxies),
            Ok(ip("198.51.100.7"))
        );
    }

    #[test]
    fn ports_and_bracketed_ipv6_hops_walk() {
        let proxies = ["127.0.0.1", "fd00::/8"];
        assert_eq!(
            xff(&["198.51.100.2:51000, 127.0.0.1:443"], &proxies),
            Ok(ip("198.51.100.2"))
        );
        assert_eq!(
            xff(&["[2001:db8::7]:51000, [fd00::1]:443"], &proxies),
            Ok(ip("2001:db8::7"))
        );
        assert_eq!(
            xff(&["2001:db8::7, fd00::1"], &proxies),
            Ok(ip("2001:db8::7"))
        );
    }

    #[test]
    fn a_bad_hop_on_the_walk_is_refused_not_skipped() {
        let proxies = ["127.0.0.1"];
        let error = xff(&["198.51.100.2, garbage, 127.0.0.1"], &proxies).expect_err("garbage");
        assert!(
            matches!(&error, ForwardedError::Hop { header: X_FORWARDED_FOR, hop, .. } if hop == "garbage"),
            "{error:?}"
        );
        assert!(error.to_string().contains("X-Forwarded-For"), "{error}");
        assert!(error.to_string().contains("garbage"), "{error}");
        let error = xff(&["198.51.100.2, unknown"], &proxies).expect_err("unknown");
        assert_eq!(
            error,
            ForwardedError::Unknown {
                header: X_FORWARDED_FOR,
                hop: "unknown".to_owned()
            }
        );
        assert!(matches!(
            xff(&["_hidden, 127.0.0.1"], &proxies),
            Err(ForwardedError::Unknown { .. })
        ));
        // Left of the peer, the client's own claims are not read.
        assert_eq!(
            xff(&["garbage, unknown, 198.51.100.2, 127.0.0.1"], &proxies),
            Ok(ip("198.51.100.2"))
        );
    }

    #[test]
    fn a_long_hop_is_cut_in_the_error() {
        let hop = "x".repeat(1000);
        let error = xff(&[&hop], &["127.0.0.1"]).expect_err("garbage");
        let ForwardedError::Hop { hop: shown, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!(shown.len(), HOP_SHOWN_CHARS_MAX + "...".len());
    }

    #[test]
    fn forwarded_elements_walk_like_hops() {
        let proxies = ["127.0.0.1", "10.0.0.0/8"];
        assert_eq!(
            standard(&["for=198.51.100.2;proto=https, for=10.0.0.5"], &proxies),
            Ok(ip("198.51.100.2"))
        );
        assert_eq!(
            standard(
                &[
                    "for=\"[2001:db8:cafe::17]:4711\";by=_proxy",
                    "For=\"127.0.0.1:443\""
                ],
                &proxies
            ),
            Ok(ip("2001:db8:cafe::17"))
        );
        assert_eq!(
            standard(&["proto=http;for=192.0.2.60;by=203.0.113.43"], &proxies),
            Ok(ip("192.0.2.60"))
        );
        // A quoted string may hold ',' and ';', and escapes.
        assert_eq!(
            standard(
                &["for=192.0.2.1;host=\"a,b;c\\\"d\", for=\"198.51.100.\\2\""],
                &proxies
            ),
            Ok(ip("198.51.100.2"))
        );
        assert_eq!(
            standard(&["for=192.0.2.1:8080"], &proxies),
            Ok(ip("192.0.2.1"))
        );
    }

    #[test]
    fn forwarded_unknown_hidden_and_malformed_elements_are_refused() {
        let proxies = ["127.0.0.1"];
        for (line, unknown) in [
            ("for=unknown", true),
            ("for=_hidden", true),
            ("for=\"_hidden:_port\"", true),
            ("for=\"unknown:80\"", true),
            ("proto=https", false),
            ("for=192.0.2.1;for=192.0.2.2", false),
            ("for=", false),
            ("for=\"192.0.2.1\"x", false),
            ("for=192.0.2.1 x", false),
            ("for", false),
            ("=192.0.2.1", false),
            ("f r=1;for=192.0.2.1", false),
            ("for=\"[2001:db8::1]:99999\"", false),
        ] {
            let error = standard(&[line], &proxies).expect_err(line);
            assert_eq!(
                matches!(
                    error,
                    ForwardedError::Unknown {
                        header: FORWARDED,
                        ..
                    }
                ),
                unknown,
                "{line}: {error:?}"
            );
            if !unknown {
                assert!(
                    matches!(
                        error,
                        ForwardedError::Hop {
                            header: FORWARDED,
                            ..
                        }
                    ),
                    "{line}: {error:?}"
                );
            }
        }
        assert_eq!(
            standard(&["for=\"192.0.2.1"], &proxies),
            Err(ForwardedError::Syntax {
                header: FORWARDED,
                reason: "a quoted string is not closed"
            })
        );
    }

    #[test]
    fn forwarded_wins_over_x_forwarded_for() {
        let proxies = trusted(&["127.0.0.1"]);
        assert_eq!(
            forwarded_peer(&["for=192.0.2.60"], &["198.51.100.2"], &proxies),
            Ok(ip("192.0.2.60"))
        );
        // An empty Forwarded names no one: X-Forwarded-For is read.
        assert_eq!(
            forwarded_peer(&[""], &["198.51.100.2"], &proxies),
            Ok(ip("198.51.100.2"))
        );
        // Forwarded wins even when it refuses.
        assert!(matches!(
            forwarded_peer(&["for=unknown"], &["198.51.100.2"], &proxies),
            Err(ForwardedError::Unknown {
                header: FORWARDED,
                ..
            })
        ));
    }

    #[test]
    fn errors_name_the_header() {
        assert_eq!(
            ForwardedError::Missing.to_string(),
            "a trusted proxy must name the client in \"Forwarded\" or \"X-Forwarded-For\""
        );
        let error = standard(&["for=nonsense"], &["127.0.0.1"]).expect_err("nonsense");
        assert!(
            error
                .to_string()
                .starts_with("header \"Forwarded\": hop \"for=nonsense\""),
            "{error}"
        );
    }
}
