//! Identifiers the machine and the I/O layer exchange.
//!
//! Owns: `StreamId` (assigned by the I/O layer; the owning core in the top 8 bits so that a
//! sorted target list is grouped by core), `CoreId` (one of the broker's cores: a core index
//! crosses files and crates as this type, never as a bare `usize`), `PeerId` (a peer for R32, R33, the pre-Join cap
//! and the blocklist: an IPv4 address, an IPv6 /64, or a bee node's overlay address), `Ticket` (one verification job, issued by the machine) and
//! `CohortSerial` (one cohort of one machine, issued by the machine), `WriteNotice` (a token the I/O layer hands back once a frame that asked for it is on the
//! wire, R24).
//! Never does: allocate ids for the I/O layer or interpret an address beyond equality.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use serde::Serialize;

/// Bits of a `StreamId` below the owning core's number.
const STREAM_LOCAL_BITS: u32 = 56;

/// One BPS stream (one TCP connection on the native transport).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The id of the `local`-th stream of core `core`.
    ///
    /// # Panics
    /// If `local` does not fit in 56 bits: the I/O layer's counter must never get there.
    #[must_use]
    pub fn new(core: u8, local: u64) -> StreamId {
        assert!(
            local < 1 << STREAM_LOCAL_BITS,
            "stream counter overflow: {local}"
        );
        StreamId((u64::from(core) << STREAM_LOCAL_BITS) | local)
    }

    /// The core that owns the stream's connection.
    #[must_use]
    pub fn core(self) -> u8 {
        // The shift leaves exactly the top 8 bits.
        (self.0 >> STREAM_LOCAL_BITS) as u8
    }

    /// The stream's number on its core.
    #[must_use]
    pub fn local(self) -> u64 {
        self.0 & ((1 << STREAM_LOCAL_BITS) - 1)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.core(), self.local())
    }
}

/// One core of the running broker, `0..cores`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct CoreId(usize);

impl CoreId {
    /// The core at `index` (of `0..cores`).
    pub const fn new(index: usize) -> CoreId {
        CoreId(index)
    }

    /// Every core of `cores`, in order.
    pub fn all(cores: usize) -> impl Iterator<Item = CoreId> {
        (0..cores).map(CoreId)
    }

    /// The position in a per-core table.
    pub const fn index(self) -> usize {
        self.0
    }

    /// The core that owns `stream` (its id names it in its top byte).
    pub fn of_stream(stream: StreamId) -> CoreId {
        CoreId(usize::from(stream.core()))
    }

    /// This core as a `StreamId` names it.
    pub fn stream_byte(self) -> u8 {
        u8::try_from(self.0).expect("the broker runs at most 256 cores (a StreamId's core)")
    }
}

impl fmt::Display for CoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Leading bits of an IPv6 address that name one peer. A /64 is what one subscriber line or
/// one host is given, so every per-peer bound would be worthless if each of its 2^64
/// addresses counted as its own peer.
pub const IPV6_PEER_PREFIX_BITS: u32 = 64;

/// A remote peer: its IPv4 address, or its IPv6 address cut to the /64 it lies in (an
/// IPv4-mapped IPv6 address is its IPv4 address), or, for a bee node on the libp2p carrier,
/// its overlay address (bee keys its peers so; its IP only bounds its handshakes). Built only
/// through [`PeerId::of`] and [`PeerId::overlay`], so no bound can be keyed by anything finer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(PeerKey);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum PeerKey {
    Ip(IpAddr),
    Overlay([u8; 32]),
}

impl PeerId {
    /// The peer a remote address belongs to.
    #[must_use]
    pub fn of(ip: IpAddr) -> PeerId {
        let ip = match ip {
            IpAddr::V4(v4) => IpAddr::V4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let mask = u128::MAX << (128 - IPV6_PEER_PREFIX_BITS);
                    IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
                }
            },
        };
        PeerId(PeerKey::Ip(ip))
    }

    /// The bee node with this overlay address (whose handshake proved it holds its key).
    #[must_use]
    pub fn overlay(overlay: [u8; 32]) -> PeerId {
        PeerId(PeerKey::Overlay(overlay))
    }

    /// The address that names the peer (an IPv6 peer's /64 with the host bits zero); none
    /// for a peer named by its overlay.
    #[must_use]
    pub fn ip(self) -> Option<IpAddr> {
        match self.0 {
            PeerKey::Ip(ip) => Some(ip),
            PeerKey::Overlay(_) => None,
        }
    }
}

impl fmt::Display for PeerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            PeerKey::Ip(IpAddr::V4(v4)) => write!(f, "{v4}"),
            PeerKey::Ip(IpAddr::V6(v6)) => write!(f, "{v6}/{IPV6_PEER_PREFIX_BITS}"),
            PeerKey::Overlay(overlay) => f.write_str(&hex::encode(overlay)),
        }
    }
}

/// As JSON (`/cohortz`): the address as a string (an IPv6 peer's /64 without the suffix),
/// or the overlay as 64 hex digits.
impl Serialize for PeerId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            PeerKey::Ip(ip) => ip.serialize(serializer),
            PeerKey::Overlay(overlay) => serializer.serialize_str(&hex::encode(overlay)),
        }
    }
}

/// One verification job issued by a `Machine`; its result comes back through
/// `Machine::on_verified` with the same ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub(crate) u64);

impl Ticket {
    /// The raw ticket number, for logs.
    #[must_use]
    pub fn value(self) -> u64 {
        self.0
    }
}

/// One cohort of one machine, unique for the machine's lifetime: a reclaimed key gets a new
/// serial (R37). Serials are per machine (per core), so the I/O layer pairs one with its core
/// where cores share something keyed by cohort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CohortSerial(pub(crate) u64);

impl CohortSerial {
    /// The serial of the first cohort a machine creates.
    pub(crate) const FIRST: CohortSerial = CohortSerial(0);

    /// The serial of the cohort created after this one.
    pub(crate) fn next(self) -> CohortSerial {
        CohortSerial(self.0 + 1)
    }

    /// The raw serial number, for logs and for keys that mix it with other numbers.
    #[must_use]
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for CohortSerial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A token attached to a `Send` whose write time matters (the reduced roster of R24); the I/O
/// layer returns it through `Machine::on_written` once that frame is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteNotice(pub u64);

impl WriteNotice {
    /// The raw notice number, for logs.
    #[must_use]
    pub fn value(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::{PeerId, StreamId};

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("literal address")
    }

    #[test]
    fn ipv6_peers_are_their_slash_64() {
        let one = PeerId::of(ip("2001:db8:1:2:aaaa::1"));
        assert_eq!(one, PeerId::of(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")));
        assert_ne!(one, PeerId::of(ip("2001:db8:1:3::1")));
        assert_eq!(one.ip(), Some(ip("2001:db8:1:2::")));
        assert_eq!(one.to_string(), "2001:db8:1:2::/64");
    }

    #[test]
    fn ipv4_peers_are_their_address_also_when_mapped() {
        let v4 = PeerId::of(ip("192.0.2.7"));
        assert_eq!(v4, PeerId::of(ip("::ffff:192.0.2.7")));
        assert_ne!(v4, PeerId::of(ip("192.0.2.8")));
        assert_eq!(v4.to_string(), "192.0.2.7");
    }

    #[test]
    fn overlay_peers_are_their_overlay_apart_from_every_address() {
        let overlay = PeerId::overlay([0xab; 32]);
        assert_eq!(overlay, PeerId::overlay([0xab; 32]));
        assert_ne!(overlay, PeerId::overlay([0xac; 32]));
        assert_ne!(overlay, PeerId::of(ip("0.0.0.0")));
        assert_eq!(overlay.ip(), None);
        assert_eq!(overlay.to_string(), "ab".repeat(32));
        assert_eq!(
            serde_json::to_string(&overlay).expect("serializes"),
            format!("\"{}\"", "ab".repeat(32))
        );
        assert_eq!(
            serde_json::to_string(&PeerId::of(ip("2001:db8:1:2::9"))).expect("serializes"),
            "\"2001:db8:1:2::\""
        );
    }

    #[test]
    fn stream_id_keeps_core_in_top_bits() {
        let id = StreamId::new(3, 77);
        assert_eq!(id.core(), 3);
        assert_eq!(id.local(), 77);
        assert!(StreamId::new(2, u64::from(u32::MAX)) < id);
        assert_eq!(id.to_string(), "3/77");
    }

    #[test]
    #[should_panic(expected = "stream counter overflow")]
    fn stream_id_rejects_overflowing_counter() {
        let _ = StreamId::new(0, 1 << 56);
    }
}
