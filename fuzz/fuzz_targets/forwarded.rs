//! Fuzz target `forwarded`: `forwarded_peer`, the walk over `Forwarded` and
//! `X-Forwarded-For` behind trusted proxies, and the trusted ranges it reads.
//!
//! Input: text (bytes that are not UTF-8 become U+FFFD, as in a request head). The first
//! line is the trusted proxies, comma-separated (entries that do not parse are dropped;
//! `127.0.0.1` is always trusted); every further line is one header line, `Forwarded`
//! when it starts with `F` and `X-Forwarded-For` otherwise, without that first character.
//!
//! Asserts, besides never panicking:
//! - a range's text parses back to the same range, which holds its own network address;
//! - every address, in every hop form (`ip`, `ip:port`, `[v6]`, `[v6]:port`, bare IPv6),
//!   parses to itself;
//! - an error names its header and quotes at most a bounded piece of the hop;
//! - the lines are one list: joining them with `,` into one line changes nothing;
//! - a trusted hop appended on the right changes nothing (a walk that found no one now
//!   finds that proxy); an untrusted address appended names it; `unknown` appended refuses;
//!   a `Forwarded` line added when none named anyone decides alone;
//! - the `X-Forwarded-For` walk is the walk restated here: from the right, past trusted
//!   proxies, to the first untrusted hop (or, all trusted, the leftmost), so an answer is
//!   always one of the hops; a hop that hides the client or does not parse, where the walk
//!   reaches it, refuses; no hop at all is `Missing` (the broker keeps the socket's peer).

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bps_ws::{
    FORWARDED, ForwardedError, Hop, IpRange, TrustedProxies, X_FORWARDED_FOR, forwarded_peer,
    parse_hop,
};
use libfuzzer_sys::fuzz_target;

/// The proxy that is always trusted.
const PROXY: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
/// Characters an error quotes of a hop at most: the module's bound (64) plus "...".
const SHOWN_CHARS_MAX: usize = 67;

/// Whether a `Forwarded` list of `lines` has an element (or cannot be split): then it, not
/// `X-Forwarded-For`, is read.
fn forwarded_active(lines: &[&str]) -> bool {
    lines.iter().any(|line| {
        line.chars()
            .any(|character| !matches!(character, ' ' | '\t' | ','))
    })
}

fn check_error(error: &ForwardedError) {
    let text = error.to_string();
    match error {
        ForwardedError::Missing => {
            assert!(text.contains(FORWARDED) && text.contains(X_FORWARDED_FOR));
        }
        ForwardedError::Syntax { header, .. } => assert!(text.contains(header)),
        ForwardedError::Hop { header, hop, .. } | ForwardedError::Unknown { header, hop } => {
            assert!(text.contains(header), "{text}");
            assert!(hop.chars().count() <= SHOWN_CHARS_MAX, "{hop:?}");
        }
    }
}

/// An address from the input's bytes, so every run checks a different one.
fn addresses(data: &[u8]) -> (Ipv4Addr, Ipv6Addr) {
    let mut bytes = [0u8; 16];
    for (index, byte) in data.iter().enumerate() {
        bytes[index % 16] ^= byte.rotate_left(index as u32 % 8);
    }
    let v4 = Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]);
    (v4, Ipv6Addr::from(bytes))
}

fn check_hop_forms(v4: Ipv4Addr, v6: Ipv6Addr) {
    let port = u16::from_be_bytes([v6.octets()[4], v6.octets()[5]]);
    let v4_forms = [v4.to_string(), format!("{v4}:{port}")];
    for form in &v4_forms {
        assert_eq!(parse_hop(form), Ok(Hop::Address(IpAddr::V4(v4))), "{form}");
    }
    let expected = Hop::Address(IpAddr::V6(v6).to_canonical());
    for form in [v6.to_string(), format!("[{v6}]"), format!("[{v6}]:{port}")] {
        assert_eq!(parse_hop(&form), Ok(expected), "{form}");
    }
}

/// The walk over `X-Forwarded-For` as docs/WEBSOCKET.md states it: hops split at `,`,
/// blank ones skipped, read from the right; a trusted address is passed (the leftmost one
/// is the answer when every hop is trusted), the first untrusted address is the peer.
fn x_forwarded_for_model(
    lines: &[&str],
    trusted: &TrustedProxies,
) -> Result<IpAddr, ForwardedError> {
    let hops: Vec<&str> = lines
        .iter()
        .flat_map(|line| line.split(','))
        .filter(|hop| !hop.trim_matches([' ', '\t']).is_empty())
        .collect();
    let mut leftmost_trusted = None;
    for hop in hops.iter().rev() {
        match parse_hop(hop) {
            Ok(Hop::Address(ip)) if trusted.contains(ip) => leftmost_trusted = Some(ip),
            Ok(Hop::Address(ip)) => return Ok(ip),
            Ok(Hop::Unknown | Hop::Obfuscated) => {
                return Err(ForwardedError::Unknown {
                    header: X_FORWARDED_FOR,
                    hop: String::new(),
                });
            }
            Err(_) => {
                return Err(ForwardedError::Hop {
                    header: X_FORWARDED_FOR,
                    hop: String::new(),
                    reason: "",
                });
            }
        }
    }
    leftmost_trusted.ok_or(ForwardedError::Missing)
}

/// The same outcome, ignoring the quoted hop and the reason of an error.
fn same_outcome(
    one: &Result<IpAddr, ForwardedError>,
    other: &Result<IpAddr, ForwardedError>,
) -> bool {
    match (one, other) {
        (Ok(one), Ok(other)) => one == other,
        (Err(ForwardedError::Missing), Err(ForwardedError::Missing)) => true,
        (
            Err(ForwardedError::Unknown { header, .. }),
            Err(ForwardedError::Unknown { header: other, .. }),
        )
        | (
            Err(ForwardedError::Hop { header, .. }),
            Err(ForwardedError::Hop { header: other, .. }),
        ) => header == other,
        _ => false,
    }
}

fn check_ranges(entries: &str) -> Vec<IpRange> {
    let mut ranges = vec![IpRange::from(IpAddr::V4(PROXY))];
    for entry in entries.split(',') {
        if let Ok(range) = entry.parse::<IpRange>() {
            let text = range.to_string();
            assert_eq!(
                text.parse::<IpRange>(),
                Ok(range),
                "{entry} shown as {text}"
            );
            let network: IpAddr = text
                .split_once('/')
                .and_then(|(network, _)| network.parse().ok())
                .expect("a range shows its network");
            assert!(range.contains(network), "{text}");
            ranges.push(range);
        }
    }
    ranges
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let ranges = check_ranges(lines.next().unwrap_or(""));
    let trusted = TrustedProxies::new(ranges);
    let (v4, v6) = addresses(data);
    check_hop_forms(v4, v6);

    let mut forwarded = Vec::new();
    let mut x_forwarded_for = Vec::new();
    for line in lines {
        let mut characters = line.chars();
        match characters.next() {
            Some('F') => forwarded.push(characters.as_str()),
            Some(_) => x_forwarded_for.push(characters.as_str()),
            None => {}
        }
    }
    let peer = forwarded_peer(&forwarded, &x_forwarded_for, &trusted);
    if let Err(error) = &peer {
        check_error(error);
    }
    if let Ok(ip) = peer {
        assert_eq!(ip, ip.to_canonical());
    }
    if !forwarded_active(&forwarded) {
        let expected = x_forwarded_for_model(&x_forwarded_for, &trusted);
        assert!(
            same_outcome(&peer, &expected),
            "{peer:?}, model {expected:?}"
        );
    }

    // One list: the lines joined into one.
    let joined_forwarded = forwarded.join(",");
    let joined_x = x_forwarded_for.join(",");
    let syntax_error = matches!(peer, Err(ForwardedError::Syntax { .. }));
    if !syntax_error {
        assert_eq!(
            forwarded_peer(&[&joined_forwarded], &[&joined_x], &trusted),
            peer,
            "joined: {joined_forwarded:?} / {joined_x:?}"
        );
    }

    let standard = forwarded_active(&forwarded);
    let with = |hop_x: &str, hop_forwarded: &str| {
        let (mut forwarded, mut x_forwarded_for) = (forwarded.clone(), x_forwarded_for.clone());
        if standard {
            forwarded.push(hop_forwarded);
        } else {
            x_forwarded_for.push(hop_x);
        }
        forwarded_peer(&forwarded, &x_forwarded_for, &trusted)
    };

    // A trusted proxy on the right.
    let expected = match &peer {
        Err(ForwardedError::Missing) => Ok(IpAddr::V4(PROXY)),
        other => other.clone(),
    };
    assert_eq!(with("127.0.0.1:443", "for=\"127.0.0.1:443\""), expected);

    if syntax_error {
        return;
    }
    // An untrusted address on the right is the peer.
    for ip in [IpAddr::V4(v4), IpAddr::V6(v6).to_canonical()] {
        if trusted.contains(ip) {
            continue;
        }
        let hop = match ip {
            IpAddr::V4(v4) => format!("{v4}:80"),
            IpAddr::V6(v6) => format!("[{v6}]:80"),
        };
        assert_eq!(with(&hop, &format!("for=\"{hop}\"")), Ok(ip), "{hop}");
    }
    // `unknown` on the right refuses.
    let header = if standard { FORWARDED } else { X_FORWARDED_FOR };
    assert!(matches!(
        with("unknown", "for=unknown"),
        Err(ForwardedError::Unknown { header: named, .. }) if named == header
    ));
    // A Forwarded line where none named anyone decides alone.
    if !standard && !trusted.contains(IpAddr::V4(v4)) {
        let line = format!("for={v4};proto=https");
        let mut forwarded = forwarded.clone();
        forwarded.push(&line);
        assert_eq!(
            forwarded_peer(&forwarded, &x_forwarded_for, &trusted),
            Ok(IpAddr::V4(v4))
        );
    }
});
