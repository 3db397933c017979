//! Closing streams and reclaiming cohorts (R21, R31, R34, R36).
//!
//! Owns: forgetting a stream (consuming what it held, giving back its ledger slots), the
//! cohort that goes with its last stream (R36), reclaiming a cohort with every stream still
//! attached (EOS R21, inactivity R34, idle R31) and R31's reclaim of the oldest idle cohort
//! for a creating Join.
//! Never does: decide when a deadline is due (that is `deadline`) or why a stream closes
//! (its caller gives the reason).

use super::Machine;
use crate::action::{Action, CloseReason};
use crate::cohort::Cohort;
use crate::counters::Counter;
use crate::ids::{CohortSerial, StreamId};
use crate::ledger::PeerLedger;
use crate::stream::Stream;
use crate::time::Millis;

/// Why a cohort is reclaimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reclaim {
    /// R36: its last stream left.
    Empty,
    /// R34: no accepted publisher frame for the inactivity deadline.
    Inactive,
    /// R21: the admin's EOS was delivered.
    EndOfStream,
    /// R31: nobody in its fan-out set for `idle_cohort_reclaim_ms`, and the table is full.
    Idle,
}

impl Reclaim {
    fn counter(self) -> Counter {
        match self {
            Reclaim::Empty => Counter::CohortsReclaimedEmpty,
            Reclaim::Inactive => Counter::CohortsReclaimedInactive,
            Reclaim::EndOfStream => Counter::CohortsReclaimedEos,
            Reclaim::Idle => Counter::CohortsReclaimedIdle,
        }
    }

    fn close_reason(self) -> CloseReason {
        match self {
            // An empty cohort has no stream left to close; an idle one's streams are reset
            // as at R34.
            Reclaim::Empty | Reclaim::Inactive | Reclaim::Idle => CloseReason::Inactive,
            Reclaim::EndOfStream => CloseReason::EndOfStream,
        }
    }
}

impl Machine {
    /// R31: reclaims this core's cohort idle the longest, if it has been idle for
    /// `idle_cohort_reclaim_ms`, so a creating Join finds room. Other cores' idle cohorts are
    /// shed by their own machines when their idle timers find the table full.
    pub(super) fn reclaim_oldest_idle(&mut self, now: Millis) -> bool {
        let Some(&(since, serial)) = self.idle.first() else {
            return false;
        };
        if since.plus_ms(self.config.idle_cohort_reclaim_ms) > now {
            return false;
        }
        self.reclaim(serial, Reclaim::Idle);
        true
    }

    /// Forgets a stream, consuming the frames it held that are not being verified (those are
    /// consumed when their result arrives); with a reason, tells the I/O layer to close it. The cohort goes when its last stream does (R36).
    pub(super) fn close_stream(&mut self, stream_id: StreamId, reason: Option<CloseReason>) {
        let stream = self.streams.remove(stream_id);
        for _ in 0..stream.frames_unverified() {
            self.out.consumed(stream_id);
        }
        if let Some(reason) = reason {
            self.out.push(Action::Close {
                stream: stream_id,
                reason,
            });
        }
        let cohort = self.cohorts.live_mut(stream.cohort);
        leave(&self.ledger, cohort, stream_id, &stream);
        let serial = cohort.serial;
        // An edge keeps an empty cohort for its linger (`upstream`), settled with the rest.
        if cohort.members.is_empty() && self.config.edge.is_none() {
            self.reclaim(serial, Reclaim::Empty);
        } else {
            self.unsettled.push(serial);
        }
    }

    /// Removes a cohort and closes every stream still attached (R21, R34, R36), its
    /// upstream stream at an edge too.
    pub(super) fn reclaim(&mut self, serial: CohortSerial, why: Reclaim) {
        let mut cohort = self.cohorts.remove(serial);
        if let Some(since) = cohort.idle_since {
            self.idle.remove(&(since, serial));
        }
        let members: Vec<StreamId> = cohort.members.iter().copied().collect();
        for stream_id in members {
            let stream = self.streams.remove(stream_id);
            for _ in 0..stream.frames_unverified() {
                self.out.consumed(stream_id);
            }
            self.out.push(Action::Close {
                stream: stream_id,
                reason: why.close_reason(),
            });
            leave(&self.ledger, &mut cohort, stream_id, &stream);
        }
        self.drop_upstream(serial, cohort.upstream);
        self.ledger.close_cohort();
        self.out.count(&cohort.counters, why.counter());
        self.out.registry.deregister(serial.get());
    }
}

/// Detaches a forgotten stream from its cohort and gives back what it held in the ledger.
fn leave(ledger: &PeerLedger, cohort: &mut Cohort, stream_id: StreamId, stream: &Stream) {
    if cohort.detach(stream_id, stream) {
        ledger.leave_cohort(stream.peer);
    }
    if stream.anonymous {
        ledger.leave_anonymous(stream.peer);
    }
}
