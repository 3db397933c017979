//! Where the machine's outputs go: the actions the I/O layer drains and the counter bumps.
//!
//! Owns: `Outbox`, and the two delivery shapes every rule family shares: a single-stream
//! Send (counted as one delivery) and a fan-out Deliver (counted per target), plus the D11
//! history backlog of a stream entering the fan-out set.
//! Never does: decide anything. Every rule is the caller's; this only records what it chose.

use std::sync::Arc;

use bytes::Bytes;

use crate::action::{Action, ChunkFacts};
use crate::cohort::Cohort;
use crate::counters::{CohortCounters, Counter, CounterRegistry};
use crate::fanout::Targets;
use crate::ids::{StreamId, WriteNotice};
use crate::stream::Stream;

/// Where actions and counter bumps go; a separate field so that it can be borrowed next to
/// a cohort or a stream.
#[derive(Debug)]
pub(super) struct Outbox {
    pub(super) actions: Vec<Action>,
    pub(super) registry: Arc<CounterRegistry>,
}

impl Outbox {
    pub(super) fn push(&mut self, action: Action) {
        self.actions.push(action);
    }

    pub(super) fn consumed(&mut self, stream: StreamId) {
        self.actions.push(Action::Consumed { stream });
    }

    /// A single-stream Broadcast (counted as one delivery).
    pub(super) fn send_broadcast(
        &mut self,
        counters: &CohortCounters,
        stream: StreamId,
        frame: Bytes,
        notice: Option<WriteNotice>,
    ) {
        self.registry.add(counters, Counter::Deliveries, 1);
        self.actions.push(Action::Send {
            stream,
            frame,
            notice,
        });
    }

    pub(super) fn deliver(
        &mut self,
        counters: &CohortCounters,
        frame: Bytes,
        targets: Targets,
        facts: Arc<ChunkFacts>,
    ) {
        if targets.is_empty() {
            return;
        }
        self.registry
            .add(counters, Counter::Deliveries, targets.len() as u64);
        self.actions.push(Action::Deliver {
            frame,
            targets,
            facts,
        });
    }

    pub(super) fn count(&self, counters: &CohortCounters, counter: Counter) {
        self.registry.add(counters, counter, 1);
    }

    /// D11: a stream of `cohort` entered its fan-out set (after its roster-first Send): the
    /// retained frames it has not had, without its own identity's (R25), as one backlog.
    pub(super) fn backlog(&mut self, cohort: &Cohort, stream_id: StreamId, stream: &mut Stream) {
        let Some(ring) = cohort.history.as_ref() else {
            return;
        };
        let frames = ring.backlog(&stream.addr, stream.history_seen);
        stream.history_seen = ring.last_sequence();
        if frames.is_empty() {
            return;
        }
        let served = frames.len() as u64;
        self.registry
            .add(&cohort.counters, Counter::Deliveries, served);
        self.registry
            .add(&cohort.counters, Counter::HistoryFramesServed, served);
        self.actions.push(Action::Backlog {
            stream: stream_id,
            frames,
        });
    }
}
