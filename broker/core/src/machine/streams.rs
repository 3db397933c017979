//! The streams attached to one machine's cohorts, by id.
//!
//! Owns: `Streams`, and the machine's invariant that a stream id it took from its own tables
//! names an attached stream (`attached`, `attached_mut`, `remove`): a stream is forgotten
//! only by `Machine::close_stream` and `Machine::reclaim`, which detach it from its cohort in
//! the same step, so an id in a cohort's members or address indexes is attached, and so is
//! the id a rule family is handed by a caller that has just looked the stream up. Ids that
//! come from the I/O layer (a frame, a close, a write notice) or outlive a stream (a ticket,
//! a deadline, a relayed chunk) are looked up with `get`, since the stream may be gone.
//! Never does: decide when a stream attaches or leaves, or keep its cohort in step (the
//! machine does both).

use std::collections::HashMap;

use super::cohorts::Cohorts;
use crate::cohort::Cohort;
use crate::ids::StreamId;
use crate::stream::Stream;

#[derive(Debug)]
pub(super) struct Streams {
    by_id: HashMap<StreamId, Stream>,
}

impl Streams {
    pub(super) fn new() -> Streams {
        Streams {
            by_id: HashMap::new(),
        }
    }

    /// Starts tracking a stream its Join attached.
    pub(super) fn insert(&mut self, id: StreamId, stream: Stream) {
        self.by_id.insert(id, stream);
    }

    /// Forgets an attached stream (the caller detaches it from its cohort).
    ///
    /// # Panics
    /// If the stream is not attached (see `attached`).
    #[track_caller]
    pub(super) fn remove(&mut self, id: StreamId) -> Stream {
        match self.by_id.remove(&id) {
            Some(stream) => stream,
            None => unattached(id),
        }
    }

    /// A stream whose id the machine took from its own tables.
    ///
    /// # Panics
    /// If it is not attached: the machine never keeps such an id past `remove`.
    #[track_caller]
    pub(super) fn attached(&self, id: StreamId) -> &Stream {
        match self.by_id.get(&id) {
            Some(stream) => stream,
            None => unattached(id),
        }
    }

    /// `attached`, mutably.
    #[track_caller]
    pub(super) fn attached_mut(&mut self, id: StreamId) -> &mut Stream {
        match self.by_id.get_mut(&id) {
            Some(stream) => stream,
            None => unattached(id),
        }
    }

    /// `attached_mut` with its cohort, which is live (`Cohorts::live`).
    #[track_caller]
    pub(super) fn with_cohort<'a>(
        &'a mut self,
        cohorts: &'a mut Cohorts,
        id: StreamId,
    ) -> (&'a mut Stream, &'a mut Cohort) {
        let stream = self.attached_mut(id);
        let cohort = cohorts.live_mut(stream.cohort);
        (stream, cohort)
    }

    /// The stream with this id, if it is still attached (an id from the I/O layer, a
    /// ticket or a deadline may outlive its stream).
    pub(super) fn get(&self, id: StreamId) -> Option<&Stream> {
        self.by_id.get(&id)
    }

    /// `get`, mutably.
    pub(super) fn get_mut(&mut self, id: StreamId) -> Option<&mut Stream> {
        self.by_id.get_mut(&id)
    }

    pub(super) fn contains(&self, id: StreamId) -> bool {
        self.by_id.contains_key(&id)
    }

    pub(super) fn len(&self) -> usize {
        self.by_id.len()
    }
}

/// The one panic of a broken `Streams` invariant; `#[track_caller]` names the rule family
/// that held the stale id.
#[cold]
#[track_caller]
fn unattached(id: StreamId) -> ! {
    panic!("stream {id} is not attached: the machine kept its id past close_stream or reclaim")
}
