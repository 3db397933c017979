//! The history ring of a cohort whose spec sets `history` (D11, decided for the appliance;
//! SWIP-60 leaves the mechanism to a later SWIP).
//!
//! Owns: `HistoryRing`, the cohort's most recently accepted DATA frames in acceptance order,
//! each with the identity it was published under (R25) and its place in that order, bounded
//! by `history_frames_max` frames and `history_bytes_max` bytes (the oldest go first), and
//! the backlog one entering stream gets from it.
//! Never does: hold anything but accepted DATA (the latest ROSTER is the roster's, outside
//! these bounds, R22; AUTH is never delivered; an EOS ends the cohort and its ring), outlive
//! its cohort (reclaim and EOS drop it with the cohort; nothing is written to disk), copy a
//! frame (it keeps the delivered `Bytes`, which the I/O layer charges to frame memory), or
//! decide who gets what (the machine does).
//!
//! The decisions, in docs/PROTOCOL.md's terms:
//! - `history` is part of the spec and so of the cohort's key (R1): a publisher and its
//!   subscribers must all join with it, or they meet in two different cohorts.
//! - What the ring holds: every DATA the machine accepted (R18), the same bytes it delivered
//!   (section 1), under explicit, ALL and implicit authorship alike.
//! - When it is sent: to every stream entering the cohort's fan-out set (a spectator at
//!   attach; a pending or silent stream at its claim; an ALL member or an implicit publisher
//!   at its Join; a pending stream that a reduced roster turns into a spectator), right
//!   after the latest roster (R22) and before any live delivery, without the frames of the
//!   stream's own identity (R25), in acceptance order. A stream that leaves the fan-out set
//!   while attached (a publisher a reduced roster makes silent, R24) and enters it again
//!   gets only what was accepted after it left: nothing reaches one stream twice.
//! - A subscriber that reconnects is a new stream and gets the whole ring again; it drops
//!   what is below its cursors (R41), so it shows nothing twice.
//! - Revocation: when an accepted ROSTER removes a publisher (R24), its frames leave the
//!   ring, because a late joiner would reject them against the roster it receives first (R41
//!   admits only the admin and rostered owners under explicit authorship). Under ALL a
//!   roster grants nothing and so removes nothing.
//! - The bounds apply to every ring at once when they are reloaded: a lowered bound drops the
//!   oldest frames then, so the memory budget of the new configuration holds at once.
//! - `history_bytes_max` is at least the largest frame the broker reads, so the ring always
//!   holds at least the newest accepted frame.
//! - Per publisher the ring's indices rise, as the cursor makes them (R18), except after an
//!   eviction from a full cursor table restarted that publisher's cursor (R27): a late joiner
//!   then drops the lower indices as below its cursor, as it would live.

use std::collections::VecDeque;

use bps_proto::Address;

use super::action::Delivered;

/// One retained frame.
#[derive(Clone, Debug)]
struct Retained {
    /// Its place in the cohort's acceptance order (from 1).
    sequence: u64,
    /// The identity it was published under (R25).
    publisher: Address,
    /// The frame as delivered (varint length and body), with its chunk's facts.
    delivered: Delivered,
}

/// The most recently accepted DATA frames of one cohort; see the module documentation.
#[derive(Debug)]
pub(crate) struct HistoryRing {
    entries: VecDeque<Retained>,
    /// Bytes of the frames held.
    bytes: usize,
    frames_max: usize,
    bytes_max: usize,
    /// The sequence of the last frame ever pushed (0: none yet).
    last_sequence: u64,
}

impl HistoryRing {
    /// An empty ring of at most `frames_max` frames and `bytes_max` bytes.
    ///
    /// # Panics
    /// If either bound is 0 (the configuration's validation forbids it).
    pub fn new(frames_max: usize, bytes_max: usize) -> HistoryRing {
        assert!(
            frames_max >= 1 && bytes_max >= 1,
            "a history ring holds at least one frame"
        );
        HistoryRing {
            entries: VecDeque::new(),
            bytes: 0,
            frames_max,
            bytes_max,
            last_sequence: 0,
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of the frames held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The acceptance sequence of the newest frame ever pushed (0 before the first): a stream
    /// that has had everything up to it needs nothing older.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// Retains an accepted frame published under `publisher`, dropping the oldest frames
    /// beyond the bounds.
    pub fn push(&mut self, publisher: Address, delivered: Delivered) {
        self.last_sequence += 1;
        self.bytes += delivered.frame.len();
        self.entries.push_back(Retained {
            sequence: self.last_sequence,
            publisher,
            delivered,
        });
        self.trim();
    }

    /// Applies new bounds (a reload), dropping the oldest frames beyond them.
    pub fn set_bounds(&mut self, frames_max: usize, bytes_max: usize) {
        assert!(
            frames_max >= 1 && bytes_max >= 1,
            "a history ring holds at least one frame"
        );
        self.frames_max = frames_max;
        self.bytes_max = bytes_max;
        self.trim();
    }

    /// Drops every frame of `publisher` (revoked by a roster, R24); returns how many.
    pub fn remove_publisher(&mut self, publisher: &Address) -> usize {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.publisher != *publisher);
        self.bytes = self
            .entries
            .iter()
            .map(|entry| entry.delivered.frame.len())
            .sum();
        before - self.entries.len()
    }

    /// The backlog of a stream bound to `identity` that has had every frame up to
    /// `seen_through`: the later frames of other identities (R25), oldest first.
    pub fn backlog(&self, identity: &Address, seen_through: u64) -> Vec<Delivered> {
        self.entries
            .iter()
            .filter(|entry| entry.sequence > seen_through && entry.publisher != *identity)
            .map(|entry| entry.delivered.clone())
            .collect()
    }

    fn trim(&mut self) {
        while self.entries.len() > self.frames_max || self.bytes > self.bytes_max {
            let oldest = self
                .entries
                .pop_front()
                .expect("a ring over its bounds holds a frame");
            self.bytes -= oldest.delivered.frame.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::HistoryRing;
    use crate::action::{ChunkFacts, Delivered};

    fn frame(tag: u8, len: usize) -> Delivered {
        Delivered {
            frame: Bytes::from(vec![tag; len]),
            facts: Arc::new(ChunkFacts {
                owner: [tag; 20],
                address: [tag; 32],
                wrapped: [tag; 32],
                public_key: [tag; 33],
            }),
        }
    }

    fn tags(frames: &[Delivered]) -> Vec<u8> {
        frames
            .iter()
            .map(|delivered| {
                assert_eq!(
                    delivered.facts.owner[0], delivered.frame[0],
                    "facts travel along"
                );
                delivered.frame[0]
            })
            .collect()
    }

    #[test]
    fn the_frame_bound_drops_the_oldest_first() {
        let mut ring = HistoryRing::new(3, 1 << 20);
        for tag in 1..=5 {
            ring.push([1; 20], frame(tag, 10));
        }
        assert_eq!(ring.len(), 3);
        assert_eq!(ring.bytes(), 30);
        assert_eq!(ring.last_sequence(), 5);
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![3, 4, 5]);
    }

    #[test]
    fn the_byte_bound_drops_the_oldest_first_and_keeps_the_newest() {
        let mut ring = HistoryRing::new(100, 25);
        ring.push([1; 20], frame(1, 10));
        ring.push([1; 20], frame(2, 10));
        assert_eq!(ring.bytes(), 20);
        ring.push([1; 20], frame(3, 10));
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![2, 3]);
        ring.push([1; 20], frame(4, 25));
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![4]);
        assert_eq!(ring.bytes(), 25);
    }

    #[test]
    fn a_backlog_skips_the_own_identity_and_what_was_seen() {
        let mut ring = HistoryRing::new(10, 1 << 20);
        ring.push([1; 20], frame(1, 4));
        ring.push([2; 20], frame(2, 4));
        ring.push([1; 20], frame(3, 4));
        assert_eq!(tags(&ring.backlog(&[1; 20], 0)), vec![2]);
        assert_eq!(tags(&ring.backlog(&[9; 20], 2)), vec![3]);
        assert!(ring.backlog(&[9; 20], ring.last_sequence()).is_empty());
    }

    #[test]
    fn removing_a_publisher_keeps_the_others_in_order_and_recounts_bytes() {
        let mut ring = HistoryRing::new(10, 1 << 20);
        ring.push([1; 20], frame(1, 4));
        ring.push([2; 20], frame(2, 6));
        ring.push([1; 20], frame(3, 4));
        ring.push([3; 20], frame(4, 8));
        assert_eq!(ring.remove_publisher(&[1; 20]), 2);
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![2, 4]);
        assert_eq!(ring.bytes(), 14);
        assert_eq!(ring.remove_publisher(&[7; 20]), 0);
        assert_eq!(
            ring.last_sequence(),
            4,
            "removal keeps the acceptance order"
        );
    }

    #[test]
    fn lowered_bounds_apply_at_once() {
        let mut ring = HistoryRing::new(10, 1 << 20);
        for tag in 1..=6 {
            ring.push([1; 20], frame(tag, 10));
        }
        ring.set_bounds(4, 25);
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![5, 6]);
        ring.set_bounds(4, 1 << 20);
        ring.push([1; 20], frame(7, 10));
        assert_eq!(tags(&ring.backlog(&[9; 20], 0)), vec![5, 6, 7]);
    }
}
