//! Identifiers the machine and the I/O layer exchange.
//!
//! Owns: `StreamId` (assigned by the I/O layer; the owning core in the top 8 bits so that a
//! sorted target list is grouped by core), `PeerId` (the remote IP address: a peer for R32,
//! R33 and the blocklist), `Ticket` (one verification job, issued by the machine) and
//! `WriteNotice` (a token the I/O layer hands back once a frame that asked for it is on the
//! wire, R24).
//! Never does: allocate ids for the I/O layer or interpret an address beyond equality.

use std::fmt;
use std::net::IpAddr;

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

/// A remote peer: its IP address (one connection per stream on the native transport).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct PeerId(pub IpAddr);

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

/// A token attached to a `Send` whose write time matters (the reduced roster of R24); the I/O
/// layer returns it through `Machine::on_written` once that frame is on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteNotice(pub(crate) u64);

impl WriteNotice {
    /// The raw notice number, for logs.
    #[must_use]
    pub fn value(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::StreamId;

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
