//! Violations and penalties (R39): frames dropped without penalty but rate-bounded, rule
//! breaks that close the stream, and the blocklist.
//!
//! Owns: the drop-rate reset (R14..R16's drops, bounded per stream), closing a violating
//! stream, and blocklisting its peer in the shared `PeerLedger` (not for an anonymous
//! session, W11).
//! Never does: decide what is a violation (the `frame` checks and `validation` do) or close
//! a peer's other streams (the I/O layer refuses them by the blocklist at their next
//! connection).

use std::sync::Arc;

use super::Machine;
use crate::action::{Action, CloseReason, Violation};
use crate::counters::{CohortCounters, Counter};
use crate::ids::{PeerId, StreamId};
use crate::time::Millis;

impl Machine {
    /// A frame dropped without penalty (R14, R15, R16): counted, and a stream that drops
    /// more than `dropped_frames_per_stream_per_s_max` per second is reset.
    pub(super) fn dropped(&mut self, now: Millis, stream_id: StreamId, counter: Counter) {
        let stream = self.streams.attached_mut(stream_id);
        let exceeded = stream
            .drops
            .exceeded(now, self.config.dropped_frames_per_stream_per_s_max);
        let serial = stream.cohort;
        let counters = Arc::clone(&self.cohorts.live(serial).counters);
        self.out.count(&counters, counter);
        if exceeded {
            self.out.count(&counters, Counter::DropRateResets);
            self.close_stream(stream_id, Some(CloseReason::DropRate));
        }
    }

    pub(super) fn violate(&mut self, now: Millis, stream_id: StreamId, violation: Violation) {
        let stream = self.streams.attached(stream_id);
        let peer = stream.peer;
        // W11: one tab of a shared address must not blocklist everyone behind it.
        let blocklists = !stream.anonymous;
        let counters = Arc::clone(&self.cohorts.live(stream.cohort).counters);
        self.out.count(&counters, violation.counter());
        self.close_stream(stream_id, Some(CloseReason::Violation(violation)));
        if blocklists {
            self.blocklist(now, peer, self.config.blocklist_violation_ms, &counters);
        }
    }

    pub(super) fn blocklist(
        &mut self,
        now: Millis,
        peer: PeerId,
        duration_ms: u64,
        counters: &CohortCounters,
    ) {
        if duration_ms == 0 {
            return;
        }
        let until = now.plus_ms(duration_ms);
        // A trusted relay is not blocklisted (the ledger counts the waiver).
        if !self.ledger.block(peer, now, until) {
            return;
        }
        self.out.count(counters, Counter::Blocklisted);
        self.out.push(Action::Blocklist { peer, until });
    }
}
