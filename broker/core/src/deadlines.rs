//! Deadlines of one machine: claim deadlines (R35), inactivity deadlines (R34) and idle
//! cohorts' reclaim times (R31).
//!
//! Owns: `Deadlines`, a min-heap of (time, what) entries and the time of the timer last
//! asked of the I/O layer. Entries are never updated in place: a deadline that moves later
//! is re-queued when its old entry comes due, and entries of closed streams or reclaimed
//! cohorts are skipped when they come due (and swept when they outnumber the live ones), so
//! no input scans every stream.
//! Never does: decide what a due entry means (the machine checks it against the stream or
//! cohort it names).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::ids::{CohortSerial, StreamId};
use super::time::Millis;

/// What a deadline entry is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DeadlineKey {
    /// The claim deadline of a pending or silent stream.
    Claim(StreamId),
    /// The inactivity deadline of the cohort with this serial.
    Inactivity(CohortSerial),
    /// The time the cohort with this serial, idle, may be reclaimed for room (R31).
    Idle(CohortSerial),
    /// Edge mode: the end of the linger of the cohort with this serial, empty since.
    Linger(CohortSerial),
}

#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Millis, DeadlineKey)>>,
    /// The earliest time asked of the I/O layer and not yet reached.
    armed: Option<Millis>,
}

impl Deadlines {
    pub fn push(&mut self, at: Millis, key: DeadlineKey) {
        self.heap.push(Reverse((at, key)));
    }

    /// Removes and returns the earliest entry due at `now`.
    pub fn pop_due(&mut self, now: Millis) -> Option<(Millis, DeadlineKey)> {
        let Reverse((at, _)) = self.heap.peek()?;
        if *at > now {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    /// Forgets an armed timer that `now` has reached (the I/O layer fired it).
    pub fn timer_fired(&mut self, now: Millis) {
        if self.armed.is_some_and(|armed| armed <= now) {
            self.armed = None;
        }
    }

    /// The time to arm when the earliest entry is earlier than the armed timer: that entry's
    /// time, or `now` for an entry already due (a tick that hit its budget).
    pub fn rearm(&mut self, now: Millis) -> Option<Millis> {
        let Reverse((earliest, _)) = self.heap.peek()?;
        let at = (*earliest).max(now);
        if self.armed.is_some_and(|armed| armed <= at) {
            return None;
        }
        self.armed = Some(at);
        self.armed
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Keeps only the entries `live` accepts.
    pub fn sweep(&mut self, live: impl Fn(Millis, DeadlineKey) -> bool) {
        self.heap.retain(|Reverse((at, key))| live(*at, *key));
    }

    /// Pops entries `live` rejects until the earliest one is live (or none is left).
    pub fn drop_dead_top(&mut self, live: impl Fn(Millis, DeadlineKey) -> bool) {
        while let Some(Reverse((at, key))) = self.heap.peek() {
            if live(*at, *key) {
                return;
            }
            self.heap.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DeadlineKey, Deadlines};
    use crate::ids::{CohortSerial, StreamId};
    use crate::time::Millis;

    #[test]
    fn due_entries_come_out_in_time_order() {
        let mut deadlines = Deadlines::default();
        deadlines.push(Millis(30), DeadlineKey::Inactivity(CohortSerial(1)));
        deadlines.push(Millis(10), DeadlineKey::Claim(StreamId(4)));
        deadlines.push(Millis(20), DeadlineKey::Claim(StreamId(5)));
        assert_eq!(deadlines.pop_due(Millis(5)), None);
        assert_eq!(
            deadlines.pop_due(Millis(25)),
            Some((Millis(10), DeadlineKey::Claim(StreamId(4))))
        );
        assert_eq!(
            deadlines.pop_due(Millis(25)),
            Some((Millis(20), DeadlineKey::Claim(StreamId(5))))
        );
        assert_eq!(deadlines.pop_due(Millis(25)), None);
        assert_eq!(deadlines.len(), 1);
    }

    #[test]
    fn rearm_only_when_the_earliest_moves_earlier() {
        let mut deadlines = Deadlines::default();
        assert_eq!(deadlines.rearm(Millis(0)), None);
        deadlines.push(Millis(30), DeadlineKey::Inactivity(CohortSerial(1)));
        assert_eq!(deadlines.rearm(Millis(0)), Some(Millis(30)));
        deadlines.push(Millis(40), DeadlineKey::Inactivity(CohortSerial(2)));
        assert_eq!(deadlines.rearm(Millis(0)), None);
        deadlines.push(Millis(20), DeadlineKey::Inactivity(CohortSerial(3)));
        assert_eq!(deadlines.rearm(Millis(0)), Some(Millis(20)));
        deadlines.timer_fired(Millis(19));
        assert_eq!(deadlines.rearm(Millis(0)), None);
        deadlines.timer_fired(Millis(20));
        assert_eq!(
            deadlines.pop_due(Millis(20)),
            Some((Millis(20), DeadlineKey::Inactivity(CohortSerial(3))))
        );
        assert_eq!(deadlines.rearm(Millis(0)), Some(Millis(30)));
    }

    #[test]
    fn an_entry_already_due_arms_at_now() {
        let mut deadlines = Deadlines::default();
        deadlines.push(Millis(5), DeadlineKey::Inactivity(CohortSerial(1)));
        assert_eq!(deadlines.rearm(Millis(9)), Some(Millis(9)));
        assert_eq!(deadlines.rearm(Millis(9)), None);
        deadlines.timer_fired(Millis(9));
        assert_eq!(deadlines.rearm(Millis(12)), Some(Millis(12)));
    }

    #[test]
    fn dead_entries_on_top_are_dropped_before_arming() {
        let mut deadlines = Deadlines::default();
        deadlines.push(Millis(1), DeadlineKey::Inactivity(CohortSerial(1)));
        deadlines.push(Millis(2), DeadlineKey::Inactivity(CohortSerial(2)));
        deadlines.push(Millis(3), DeadlineKey::Inactivity(CohortSerial(3)));
        deadlines.drop_dead_top(|_, key| key != DeadlineKey::Inactivity(CohortSerial(1)));
        assert_eq!(deadlines.len(), 2);
        assert_eq!(deadlines.rearm(Millis(0)), Some(Millis(2)));
        deadlines.drop_dead_top(|_, _| false);
        assert_eq!(deadlines.len(), 0);
    }

    #[test]
    fn sweep_drops_dead_entries() {
        let mut deadlines = Deadlines::default();
        deadlines.push(Millis(1), DeadlineKey::Inactivity(CohortSerial(1)));
        deadlines.push(Millis(2), DeadlineKey::Inactivity(CohortSerial(2)));
        deadlines.sweep(|_, key| key == DeadlineKey::Inactivity(CohortSerial(2)));
        assert_eq!(deadlines.len(), 1);
        assert_eq!(
            deadlines.pop_due(Millis(9)),
            Some((Millis(2), DeadlineKey::Inactivity(CohortSerial(2))))
        );
    }
}
