//! Where a publication's time goes inside the broker (issue 23): one latency histogram per
//! stage of its way from the read to the subscribers' sockets, per core.
//!
//! Owns: the stages (`Stage`), their exported names and help texts, and `StageLatencies`,
//! the histograms a core records them into.
//! Never does: take a clock reading of its own; the shard times each stage from instants it
//! already has (the frame's read, the pool's batch end, the start of the turn) plus at most
//! two per turn, so the hot path pays one histogram record per frame and stage, never one
//! per receiver.

use crate::metrics::{Histogram, LATENCY_BUCKETS};

/// A stage of a publication's way through the broker, in the order it passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// From the frame's read to the start of its home core's turn that submits its
    /// verification job (the lane towards the home core and the wait for its turn).
    ReadToTurn,
    /// From submitting the job to the start of its batch's verification (the pool's queue and
    /// the batch's wait for company).
    VerifyWait,
    /// The verification of the job's batch.
    VerifyRun,
    /// From the batch's end to the start of the turn that applies its result (the result
    /// lane, the core's wake-up and the fair queue of finished results).
    ResultLane,
    /// From the start of a turn to the end of its work, before the flush (once per turn that
    /// queued fan-outs): what every frame applied in that turn waits at most.
    Turn,
    /// From the first fan-out queued since the last flush waiting for more results to the
    /// flush (`server.write_coalesce_us`), once per flush of fan-outs; 0 when it did not wait.
    CoalesceWait,
    /// The flush: the direct vectored writes of every touched stream, once per flush of
    /// fan-outs.
    Flush,
}

impl Stage {
    /// Every stage, in export order.
    pub const ALL: [Stage; 7] = [
        Stage::ReadToTurn,
        Stage::VerifyWait,
        Stage::VerifyRun,
        Stage::ResultLane,
        Stage::Turn,
        Stage::CoalesceWait,
        Stage::Flush,
    ];

    /// The value of the `stage` label.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Stage::ReadToTurn => "read_to_turn",
            Stage::VerifyWait => "verify_wait",
            Stage::VerifyRun => "verify_run",
            Stage::ResultLane => "result_lane",
            Stage::Turn => "turn",
            Stage::CoalesceWait => "coalesce_wait",
            Stage::Flush => "flush",
        }
    }
}

/// The exported name of the stage histograms (merged; `bps_core_` per core).
pub const STAGE_FAMILY: &str = "stage_latency_us";

/// The help text of the stage histograms.
pub const STAGE_HELP: &str = "Microseconds a publication spends in each stage inside the broker, by stage: read_to_turn (read to the home core's turn that submits its verification), verify_wait (submit to its batch's start), verify_run (its batch's verification), result_lane (batch end to the turn that applies it), turn (turn start to the end of its work, once per turn with fan-outs), coalesce_wait (the write-coalescing wait, server.write_coalesce_us, once per flush of fan-outs, 0 when none), flush (the direct writes, once per flush of fan-outs).";

/// One latency histogram per stage (µs, the latency buckets).
#[derive(Debug)]
pub struct StageLatencies([Histogram; Stage::ALL.len()]);

impl Default for StageLatencies {
    fn default() -> StageLatencies {
        StageLatencies(std::array::from_fn(|_| Histogram::new(LATENCY_BUCKETS)))
    }
}

impl StageLatencies {
    /// Records `micros` spent in `stage`.
    pub fn record(&self, stage: Stage, micros: u64) {
        self.0[stage as usize].record(micros);
    }

    /// The histogram of `stage`.
    #[must_use]
    pub fn get(&self, stage: Stage) -> &Histogram {
        &self.0[stage as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_in_export_order_with_distinct_names() {
        for (index, stage) in Stage::ALL.iter().enumerate() {
            assert_eq!(*stage as usize, index);
        }
        let mut names: Vec<&str> = Stage::ALL.iter().map(|stage| stage.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Stage::ALL.len());
    }

    #[test]
    fn each_stage_records_into_its_own_histogram() {
        let stages = StageLatencies::default();
        stages.record(Stage::Flush, 3);
        stages.record(Stage::Flush, 5);
        stages.record(Stage::VerifyRun, 40);
        assert_eq!(stages.get(Stage::Flush).snapshot().count, 2);
        assert_eq!(stages.get(Stage::VerifyRun).snapshot().sum, 40);
        assert_eq!(stages.get(Stage::Turn).snapshot().count, 0);
    }
}
