//! `CoreId`: which of the broker's cores something belongs to (a runtime thread, its lanes,
//! its mailbox, its streams). A core index crosses files here as this type, not as a bare
//! `usize`, so a core can't be mixed up with a count, a length or a stream number.
//!
//! Owns: the conversions at the edges: to and from the core byte of a `StreamId`, and to
//! the plain index that per-core tables (`Vec`s, slices) and the metrics and protocol
//! crates use.

use crate::protocol::StreamId;

/// One core of the running broker, `0..cores`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

impl std::fmt::Display for CoreId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
