//! Deadlines (R34, R35, R31): the claim deadline of a pending or silent stream, the
//! inactivity deadline of a cohort, the idle timer of a cohort with an empty fan-out set,
//! an edge's linger of a cohort with no stream (its due handler is `upstream`'s),
//! and the one timer the I/O layer keeps for all of them.
//!
//! Owns: running a due deadline (or re-queueing it when it moved later), settling which
//! cohorts are idle after each input, sweeping dead timer entries, and asking for the timer
//! (`Action::ArmTimer`).
//! Never does: read a clock (every input carries `now`) or run more than
//! `DEADLINES_PER_TICK_MAX` deadlines in one tick (`on_tick` bounds it).

use std::sync::Arc;

use super::Machine;
use super::reclaim::Reclaim;
use crate::action::{Action, CloseReason};
use crate::cohort::Cohort;
use crate::counters::Counter;
use crate::deadlines::{DeadlineKey, Deadlines};
use crate::ids::{CohortSerial, StreamId};
use crate::stream::Stream;
use crate::time::Millis;

impl Machine {
    pub(super) fn claim_deadline_due(&mut self, now: Millis, at: Millis, stream_id: StreamId) {
        let Some(stream) = self.streams.get_mut(stream_id) else {
            return;
        };
        if stream.claim_timer != Some(at) {
            return;
        }
        stream.claim_timer = None;
        match stream.claim_deadline {
            None => {}
            Some(deadline) if deadline > now => {
                stream.claim_timer = Some(deadline);
                self.deadlines.push(deadline, DeadlineKey::Claim(stream_id));
            }
            Some(_) => {
                let peer = stream.peer;
                let cohort = self.cohorts.live(stream.cohort);
                let counters = Arc::clone(&cohort.counters);
                self.out.count(&counters, Counter::ClaimTimeout);
                self.close_stream(stream_id, Some(CloseReason::ClaimTimeout));
                self.blocklist(now, peer, self.config.blocklist_claim_timeout_ms, &counters);
            }
        }
    }

    pub(super) fn inactivity_deadline_due(
        &mut self,
        now: Millis,
        at: Millis,
        serial: CohortSerial,
    ) {
        let Some(cohort) = self.cohorts.get_mut(serial) else {
            return;
        };
        if cohort.inactivity_timer != Some(at) {
            return;
        }
        let deadline = cohort
            .last_activity
            .plus_ms(self.config.inactivity_deadline_ms);
        if deadline > now {
            cohort.inactivity_timer = Some(deadline);
            self.deadlines
                .push(deadline, DeadlineKey::Inactivity(serial));
            return;
        }
        cohort.inactivity_timer = None;
        self.reclaim(serial, Reclaim::Inactive);
    }

    /// R31: an idle cohort's timer. Idle for `idle_cohort_reclaim_ms` while the table is full,
    /// it is reclaimed (a Join on another core may be waiting for room); otherwise the timer
    /// comes back after that long again while the cohort stays idle, so each idle cohort
    /// holds one timer.
    pub(super) fn idle_deadline_due(&mut self, now: Millis, at: Millis, serial: CohortSerial) {
        let Some(cohort) = self.cohorts.get_mut(serial) else {
            return;
        };
        if cohort.idle_timer != Some(at) {
            return;
        }
        cohort.idle_timer = None;
        let Some(since) = cohort.idle_since else {
            return;
        };
        let due = since.plus_ms(self.config.idle_cohort_reclaim_ms);
        if due <= now && self.ledger.cohorts_full() {
            self.reclaim(serial, Reclaim::Idle);
            return;
        }
        let next = if due > now {
            due
        } else {
            now.plus_ms(self.config.idle_cohort_reclaim_ms)
        };
        cohort.idle_timer = Some(next);
        self.deadlines.push(next, DeadlineKey::Idle(serial));
    }

    /// Records whether each cohort changed during this input now has an empty fan-out set,
    /// and since when; a newly idle cohort gets an idle timer unless one is queued.
    pub(super) fn settle_idle(&mut self, now: Millis) {
        for serial in std::mem::take(&mut self.unsettled) {
            let Some(cohort) = self.cohorts.get_mut(serial) else {
                continue;
            };
            match (cohort.fanout.is_empty(), cohort.idle_since) {
                (true, None) => {
                    cohort.idle_since = Some(now);
                    self.idle.insert((now, serial));
                    if cohort.idle_timer.is_none() {
                        let at = now.plus_ms(self.config.idle_cohort_reclaim_ms);
                        cohort.idle_timer = Some(at);
                        self.deadlines.push(at, DeadlineKey::Idle(serial));
                    }
                }
                (false, Some(since)) => {
                    cohort.idle_since = None;
                    self.idle.remove(&(since, serial));
                }
                (true, Some(_)) | (false, None) => {}
            }
            if let Some(edge) = self.config.edge {
                arm_linger(&mut self.deadlines, cohort, now.plus_ms(edge.linger_ms));
            }
        }
    }

    /// Settles the idleness of the cohorts this input changed, then asks for a timer when
    /// the earliest live deadline moved earlier. Dead entries (of closed streams, reclaimed
    /// cohorts, moved deadlines) are dropped from the top, and swept from the whole heap once
    /// they outnumber the live ones.
    pub(super) fn rearm(&mut self, now: Millis) {
        self.settle_idle(now);
        let (streams, cohorts) = (&self.streams, &self.cohorts);
        let live = |at: Millis, key: DeadlineKey| match key {
            DeadlineKey::Claim(stream_id) => streams
                .get(stream_id)
                .is_some_and(|stream| stream.claim_timer == Some(at)),
            DeadlineKey::Inactivity(serial) => cohorts
                .get(serial)
                .is_some_and(|cohort| cohort.inactivity_timer == Some(at)),
            DeadlineKey::Idle(serial) => cohorts
                .get(serial)
                .is_some_and(|cohort| cohort.idle_timer == Some(at)),
            DeadlineKey::Linger(serial) => cohorts
                .get(serial)
                .is_some_and(|cohort| cohort.linger_timer == Some(at)),
        };
        // Live entries: a claim per stream, an inactivity, an idle and a linger timer per
        // cohort.
        if self.deadlines.len() > 2 * (streams.len() + 3 * cohorts.len()) + 64 {
            self.deadlines.sweep(live);
        }
        self.deadlines.drop_dead_top(live);
        if let Some(at) = self.deadlines.rearm(now) {
            self.out.push(Action::ArmTimer { at });
        }
    }
}

/// Sets a claim deadline (R35), queueing a timer unless one is queued already (an earlier
/// one, which re-queues itself for the later deadline when it comes due).
pub(super) fn set_claim_deadline(
    deadlines: &mut Deadlines,
    stream_id: StreamId,
    stream: &mut Stream,
    at: Millis,
) {
    stream.claim_deadline = Some(at);
    if stream.claim_timer.is_none() {
        stream.claim_timer = Some(at);
        deadlines.push(at, DeadlineKey::Claim(stream_id));
    }
}

/// Edge mode: an empty cohort's linger starts (unless it has started); a cohort with
/// streams again has none (its queued timer is dead from then on).
fn arm_linger(deadlines: &mut Deadlines, cohort: &mut Cohort, at: Millis) {
    match (cohort.members.is_empty(), cohort.linger_timer) {
        (true, None) => {
            cohort.linger_timer = Some(at);
            deadlines.push(at, DeadlineKey::Linger(cohort.serial));
        }
        (false, Some(_)) => cohort.linger_timer = None,
        (true, Some(_)) | (false, None) => {}
    }
}

/// Drops a claim deadline; its queued timer, if any, is dead from now on.
pub(super) fn clear_claim_deadline(stream: &mut Stream) {
    stream.claim_deadline = None;
    stream.claim_timer = None;
}
