//! The roster of an explicit or ALL cohort (R19..R24).
//!
//! Owns: `RosterState`: the roster cursor (R20), the current set of rostered addresses
//! (excluding the admin, who needs no grant), the latest accepted ROSTER frame (sent first to
//! streams entering the fan-out set, R22) and a version number that tells the machine whether
//! a stream has already been sent the latest one.
//! Never does: decode payloads (`bps_proto::decode_roster`), validate chunks, or act on
//! revocation: `replace` reports who left and who arrived, and the machine acts.

use std::collections::HashSet;

use bps_proto::Address;
use bytes::Bytes;

/// What an accepted roster changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RosterChange {
    /// Addresses named before and not any more, in the old roster's order.
    pub removed: Vec<Address>,
    /// Addresses named now and not before, in the new roster's order.
    pub added: Vec<Address>,
}

#[derive(Debug, Default)]
pub(crate) struct RosterState {
    /// The lowest ROSTER index still acceptable (R20).
    pub cursor: u64,
    /// The rostered addresses, in the roster's order, without duplicates or the admin.
    pub ordered: Vec<Address>,
    members: HashSet<Address>,
    /// The latest accepted ROSTER as an encoded frame.
    pub latest: Option<Bytes>,
    /// Bumped on every accepted roster; 0 means none yet.
    pub version: u64,
}

impl RosterState {
    /// Whether `addr` is named by the current roster.
    pub fn names(&self, addr: &Address) -> bool {
        self.members.contains(addr)
    }

    /// Accepts the roster at `index` with `entries` (the admin's own entry is ignored: the
    /// roster is the set excluding the admin, R20) and its encoded `frame`.
    pub fn replace(
        &mut self,
        index: u64,
        entries: &[Address],
        admin: &Address,
        frame: Bytes,
    ) -> RosterChange {
        assert!(index >= self.cursor, "roster below its cursor was accepted");
        let mut ordered = Vec::with_capacity(entries.len());
        let mut members = HashSet::with_capacity(entries.len());
        for entry in entries {
            if entry != admin && members.insert(*entry) {
                ordered.push(*entry);
            }
        }
        let change = RosterChange {
            removed: self
                .ordered
                .iter()
                .filter(|addr| !members.contains(*addr))
                .copied()
                .collect(),
            added: ordered
                .iter()
                .filter(|addr| !self.members.contains(*addr))
                .copied()
                .collect(),
        };
        self.cursor = index + 1;
        self.ordered = ordered;
        self.members = members;
        self.latest = Some(frame);
        self.version += 1;
        change
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::{RosterChange, RosterState};

    #[test]
    fn replace_reports_removed_and_added_and_ignores_the_admin() {
        let admin = [9; 20];
        let mut roster = RosterState::default();
        let change = roster.replace(
            0,
            &[[1; 20], [2; 20], admin, [1; 20]],
            &admin,
            Bytes::from_static(b"r0"),
        );
        assert_eq!(
            change,
            RosterChange {
                removed: vec![],
                added: vec![[1; 20], [2; 20]]
            }
        );
        assert_eq!(roster.cursor, 1);
        assert_eq!(roster.version, 1);
        assert!(roster.names(&[1; 20]));
        assert!(!roster.names(&admin));
        let change = roster.replace(7, &[[2; 20], [3; 20]], &admin, Bytes::from_static(b"r7"));
        assert_eq!(
            change,
            RosterChange {
                removed: vec![[1; 20]],
                added: vec![[3; 20]]
            }
        );
        assert_eq!(roster.cursor, 8);
        assert_eq!(roster.ordered, vec![[2; 20], [3; 20]]);
        assert_eq!(roster.latest, Some(Bytes::from_static(b"r7")));
    }
}
