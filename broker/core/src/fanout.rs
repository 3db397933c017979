//! The fan-out set of one cohort and its cached target lists (R25).
//!
//! Owns: `FanOut`, the streams that receive the cohort's deliveries (spectators and publisher
//! streams) with their addresses, and per publishing identity the sorted target list without
//! that identity's streams, built once and shared as `Arc<[StreamId]>` until membership
//! changes. A publication therefore costs one map lookup and one refcount, whatever the
//! number of subscribers.
//! Never does: decide who belongs (the machine does, by role) or send anything.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bps_proto::Address;

use super::ids::StreamId;

/// The receiving streams of one cohort.
#[derive(Debug, Default)]
pub(crate) struct FanOut {
    members: BTreeMap<StreamId, Address>,
    /// Member streams per address (only addresses with at least one member).
    streams_per_addr: HashMap<Address, usize>,
    /// Every member; valid until membership changes.
    everyone: Option<Arc<[StreamId]>>,
    /// Every member except one identity's streams; valid until membership changes.
    without: HashMap<Address, Arc<[StreamId]>>,
}

impl FanOut {
    pub fn insert(&mut self, stream: StreamId, addr: Address) {
        let previous = self.members.insert(stream, addr);
        assert!(
            previous.is_none(),
            "stream {stream} is already in the fan-out set"
        );
        *self.streams_per_addr.entry(addr).or_insert(0) += 1;
        self.invalidate();
    }

    pub fn remove(&mut self, stream: StreamId) {
        let addr = self
            .members
            .remove(&stream)
            .expect("stream leaves a fan-out set it is not in");
        let count = self
            .streams_per_addr
            .get_mut(&addr)
            .expect("fan-out address count");
        *count -= 1;
        if *count == 0 {
            self.streams_per_addr.remove(&addr);
        }
        self.invalidate();
    }

    pub fn contains(&self, stream: StreamId) -> bool {
        self.members.contains_key(&stream)
    }

    /// Every member except the streams bound to `identity`, sorted ascending.
    pub fn targets(&mut self, identity: &Address) -> Arc<[StreamId]> {
        if !self.streams_per_addr.contains_key(identity) {
            let members = &self.members;
            return Arc::clone(
                self.everyone
                    .get_or_insert_with(|| members.keys().copied().collect()),
            );
        }
        if let Some(targets) = self.without.get(identity) {
            return Arc::clone(targets);
        }
        let targets: Arc<[StreamId]> = self
            .members
            .iter()
            .filter(|(_, addr)| *addr != identity)
            .map(|(stream, _)| *stream)
            .collect();
        self.without.insert(*identity, Arc::clone(&targets));
        targets
    }

    fn invalidate(&mut self) {
        self.everyone = None;
        self.without.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::FanOut;
    use crate::ids::StreamId;

    #[test]
    fn targets_exclude_the_identity_and_are_shared_until_membership_changes() {
        let mut fanout = FanOut::default();
        fanout.insert(StreamId(5), [1; 20]);
        fanout.insert(StreamId(2), [2; 20]);
        fanout.insert(StreamId(9), [1; 20]);
        let without_one = fanout.targets(&[1; 20]);
        assert_eq!(&*without_one, &[StreamId(2)]);
        assert!(Arc::ptr_eq(&without_one, &fanout.targets(&[1; 20])));
        let everyone = fanout.targets(&[7; 20]);
        assert_eq!(&*everyone, &[StreamId(2), StreamId(5), StreamId(9)]);
        assert!(Arc::ptr_eq(&everyone, &fanout.targets(&[8; 20])));
        fanout.remove(StreamId(2));
        assert!(fanout.targets(&[1; 20]).is_empty());
        assert_eq!(&*fanout.targets(&[2; 20]), &[StreamId(5), StreamId(9)]);
        assert!(fanout.contains(StreamId(5)));
    }
}
