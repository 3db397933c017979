//! The fan-out set of one cohort and the target lists of its deliveries (R25).
//!
//! Owns: `FanOut`, the streams that receive the cohort's deliveries (spectators and publisher
//! streams) with their addresses, and `Targets`, what one delivery goes to: the whole set,
//! shared as one `Arc<[StreamId]>` until membership changes, minus the few streams bound to
//! the publishing identity (R25), kept per address as their own small sorted list. Memory is
//! O(N) in the members whatever the number of publishing identities (an `ALL` cohort of N
//! publishers once cached a list of N - 1 streams per publisher: O(N²)); a publication costs
//! two map lookups and two refcounts.
//! Never does: decide who belongs (the machine does, by role) or send anything.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bps_proto::Address;

use super::ids::StreamId;

/// The receivers of one delivery: every stream of `all` except those in `except`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Targets {
    /// Every member of the fan-out set at the time of the delivery, ascending (so grouped
    /// by core, `StreamId` keeps the core in its top bits).
    pub all: Arc<[StreamId]>,
    /// The members that must not receive it (the publishing identity's streams, R25, and
    /// streams served on their own), ascending; each is also in `all`.
    pub except: Arc<[StreamId]>,
}

impl Targets {
    /// Streams that receive the delivery.
    #[must_use]
    pub fn len(&self) -> usize {
        self.all.len() - self.except.len()
    }

    /// Whether nobody receives it.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `stream` is excluded.
    #[must_use]
    pub fn excludes(&self, stream: StreamId) -> bool {
        self.except.binary_search(&stream).is_ok()
    }

    /// The receiving streams, ascending.
    pub fn iter(&self) -> impl Iterator<Item = StreamId> + '_ {
        self.all
            .iter()
            .copied()
            .filter(|stream| !self.excludes(*stream))
    }
}

/// The receiving streams of one cohort.
#[derive(Debug, Default)]
pub(crate) struct FanOut {
    members: BTreeMap<StreamId, Address>,
    /// Member streams per address, ascending (only addresses with at least one member).
    by_addr: HashMap<Address, Arc<[StreamId]>>,
    /// Every member; valid until membership changes.
    everyone: Option<Arc<[StreamId]>>,
}

impl FanOut {
    pub fn insert(&mut self, stream: StreamId, addr: Address) {
        let previous = self.members.insert(stream, addr);
        assert!(
            previous.is_none(),
            "stream {stream} is already in the fan-out set"
        );
        let mut same: Vec<StreamId> = self
            .by_addr
            .get(&addr)
            .map(|streams| streams.to_vec())
            .unwrap_or_default();
        let at = same.partition_point(|other| *other < stream);
        same.insert(at, stream);
        self.by_addr.insert(addr, same.into());
        self.everyone = None;
    }

    pub fn remove(&mut self, stream: StreamId) {
        let addr = self
            .members
            .remove(&stream)
            .expect("stream leaves a fan-out set it is not in");
        let same = self
            .by_addr
            .get(&addr)
            .expect("streams of a member address");
        let rest: Vec<StreamId> = same
            .iter()
            .copied()
            .filter(|other| *other != stream)
            .collect();
        if rest.is_empty() {
            self.by_addr.remove(&addr);
        } else {
            self.by_addr.insert(addr, rest.into());
        }
        self.everyone = None;
    }

    pub fn contains(&self, stream: StreamId) -> bool {
        self.members.contains_key(&stream)
    }

    /// Whether nobody receives (R31's idle cohort).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Stream ids this set holds in its lists (for the O(N) bound: never above twice the
    /// members, whatever the number of identities).
    #[cfg(test)]
    pub fn entries_held(&self) -> usize {
        self.everyone.as_ref().map_or(0, |all| all.len())
            + self
                .by_addr
                .values()
                .map(|streams| streams.len())
                .sum::<usize>()
    }

    /// Every member except the streams bound to `identity` (R25).
    pub fn targets(&mut self, identity: &Address) -> Targets {
        let members = &self.members;
        let all = Arc::clone(
            self.everyone
                .get_or_insert_with(|| members.keys().copied().collect()),
        );
        let except = self
            .by_addr
            .get(identity)
            .cloned()
            .unwrap_or_else(|| Arc::from([]));
        Targets { all, except }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::FanOut;
    use crate::ids::StreamId;

    #[test]
    fn targets_exclude_the_identity_and_share_the_member_list() {
        let mut fanout = FanOut::default();
        fanout.insert(StreamId(5), [1; 20]);
        fanout.insert(StreamId(2), [2; 20]);
        fanout.insert(StreamId(9), [1; 20]);
        let without_one = fanout.targets(&[1; 20]);
        assert_eq!(without_one.iter().collect::<Vec<_>>(), vec![StreamId(2)]);
        assert_eq!(&*without_one.except, &[StreamId(5), StreamId(9)]);
        assert_eq!(without_one.len(), 1);
        let everyone = fanout.targets(&[7; 20]);
        assert_eq!(
            everyone.iter().collect::<Vec<_>>(),
            vec![StreamId(2), StreamId(5), StreamId(9)]
        );
        assert!(Arc::ptr_eq(&everyone.all, &without_one.all));
        fanout.remove(StreamId(2));
        assert!(fanout.targets(&[1; 20]).is_empty());
        assert_eq!(
            fanout.targets(&[2; 20]).iter().collect::<Vec<_>>(),
            vec![StreamId(5), StreamId(9)]
        );
        assert!(fanout.contains(StreamId(5)));
    }

    #[test]
    fn memory_is_linear_in_publishing_members() {
        // An ALL cohort: every member publishes under its own identity.
        let members = 2_000_u64;
        let mut fanout = FanOut::default();
        for member in 0..members {
            let mut addr = [0; 20];
            addr[..8].copy_from_slice(&member.to_be_bytes());
            fanout.insert(StreamId(member), addr);
        }
        for member in 0..members {
            let mut addr = [0; 20];
            addr[..8].copy_from_slice(&member.to_be_bytes());
            let targets = fanout.targets(&addr);
            assert_eq!(targets.len(), members as usize - 1);
        }
        assert!(
            fanout.entries_held() <= 2 * members as usize,
            "{} entries for {members} members",
            fanout.entries_held()
        );
    }
}
