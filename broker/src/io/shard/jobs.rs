//! A core's verification jobs: submitted to the pool or verified here, their results
//! applied fairly between cohorts, and those of a closed stream taken back.
//!
//! Owns: where each job in flight came from (`JobOrigin`), its fairness class, the inline
//! mode's batches, the queue of finished results and the jobs taken back unverified.
//! Never does: verify a signature itself (the `Verifier` or the pool does), or decide what a
//! result means (the machine does, `on_verified`).

use std::time::Instant;

use bps_verify::VerifyRequest;
use bps_verify::pool::Pool;

use super::{DELIVERIES_PER_TURN_MAX, Shard};
use crate::io::router::VerifyDone;
use crate::metrics::Stage;
use crate::protocol::{CohortSerial, CoreId, Millis, StreamId, Ticket, TicketOrigin};

/// A verification job waiting to be verified on this core (inline mode), with when it was
/// queued.
pub(super) type InlineJob = (Ticket, VerifyRequest, Instant);

/// Where a verification job in flight came from.
#[derive(Clone, Copy, Debug)]
pub(super) struct JobOrigin {
    /// The stream whose frame it checks; `None` for a W5 relay's (no stream owns it).
    stream: Option<StreamId>,
    /// Its fairness class: the cohort (`fairness_class`).
    class: u64,
    /// When its frame was read (for the latency sample).
    read_at: Option<Instant>,
}

/// The fairness class of cohort `serial` of core `core`: the pool is shared by every core,
/// and serials are per core (a core index fits 8 bits, a `StreamId`'s core byte).
fn fairness_class(core: CoreId, serial: CohortSerial) -> u64 {
    serial.get() << 8 | core.index() as u64
}

fn micros(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
}

impl Shard {
    /// Records the time from `since` to the start of this turn as `stage`.
    pub(super) fn timed_since(&self, stage: Stage, since: Instant) {
        let micros = micros(since, self.turn_at.get());
        self.link.metrics().stage_latency_us.record(stage, micros);
    }

    /// Applies up to `budget` verification results, the cohorts in turn; returns how many.
    pub(super) fn apply_results(&self, now: Millis, budget: usize) -> usize {
        let lanes = self.link.router.inbound();
        let mut batch_jobs = 0;
        while let Some(done) = lanes.pop_result() {
            batch_jobs = batch_jobs.max(done.batch_jobs);
            self.queue_result(done);
        }
        if batch_jobs > 0 {
            let recent = self.pool_batch_recent.get().saturating_sub(1);
            self.pool_batch_recent.set(batch_jobs.max(recent));
        }
        let mut applied = 0;
        while applied < budget && self.turn_deliveries.get() < DELIVERIES_PER_TURN_MAX {
            let next = self.results.borrow_mut().pop();
            let Some((_, done)) = next else {
                break;
            };
            self.verified(now, done);
            applied += 1;
        }
        applied
    }

    /// A finished verification, queued behind its cohort's earlier ones.
    fn queue_result(&self, done: VerifyDone) {
        let (_, ticket) = done.tag;
        let class = self
            .jobs
            .borrow()
            .get(&ticket)
            .map_or(0, |origin| origin.class);
        let queued = self.results.borrow_mut().push(class, done);
        assert!(
            queued.is_ok(),
            "results are bounded by every core's frames in flight"
        );
    }

    fn verified(&self, now: Millis, done: VerifyDone) {
        let (_, ticket) = done.tag;
        self.verifications.set(self.verifications.get() - 1);
        let metrics = self.link.metrics();
        metrics.verify_jobs.inc();
        metrics.verify_latency_us.record(done.latency_us);
        let stages = &metrics.stage_latency_us;
        stages.record(
            Stage::VerifyWait,
            done.latency_us.saturating_sub(done.run_us),
        );
        stages.record(Stage::VerifyRun, done.run_us);
        self.timed_since(Stage::ResultLane, done.finished);
        let read_at = self.forget_job(ticket).and_then(|origin| origin.read_at);
        self.current_read_at.set(read_at);
        self.machine
            .borrow_mut()
            .on_verified(now, ticket, done.result);
        self.execute();
        self.current_read_at.set(None);
    }

    /// Takes back the queued verification jobs of `stream` once the machine has forgotten
    /// it (their results would only be ignored); they are reported at the end of `execute`.
    pub(super) fn cancel_queued(&self, stream: StreamId) {
        let stream_jobs = self.stream_jobs.borrow();
        let Some((class, tickets)) = stream_jobs.get(&stream) else {
            return;
        };
        let forgotten = tickets
            .first()
            .is_some_and(|ticket| self.machine.borrow().job_origin(*ticket).is_none());
        if !forgotten {
            return;
        }
        let ours = |ticket: &Ticket| tickets.contains(ticket);
        // Pool mode holds a turn's jobs here too while the pool is idle.
        let mut taken: Vec<Ticket> = self
            .inline_jobs
            .borrow_mut()
            .cancel(*class, |(ticket, ..)| ours(ticket))
            .into_iter()
            .map(|(ticket, ..)| ticket)
            .collect();
        if let Some(pool) = &self.link.shared.pool {
            let pooled = pool.cancel(*class, |(_, ticket)| ours(ticket));
            taken.extend(pooled.into_iter().map(|(_, ticket)| ticket));
        }
        self.cancelled.borrow_mut().extend(taken);
    }

    /// Tells the machine about the jobs taken back; each frame is consumed now.
    pub(super) fn report_cancelled(&self) {
        let cancelled = std::mem::take(&mut *self.cancelled.borrow_mut());
        if cancelled.is_empty() {
            return;
        }
        let now = self.link.shared.now();
        for ticket in cancelled {
            self.forget_job(ticket);
            self.verifications.set(self.verifications.get() - 1);
            self.link.metrics().verify_cancelled.inc();
            self.machine.borrow_mut().on_cancelled(now, ticket);
        }
        self.execute();
    }

    /// Forgets a job that was answered or taken back; where it came from.
    fn forget_job(&self, ticket: Ticket) -> Option<JobOrigin> {
        let origin = self.jobs.borrow_mut().remove(&ticket)?;
        let Some(stream) = origin.stream else {
            return Some(origin);
        };
        let mut stream_jobs = self.stream_jobs.borrow_mut();
        if let Some((_, tickets)) = stream_jobs.get_mut(&stream) {
            tickets.retain(|queued| *queued != ticket);
            if tickets.is_empty() {
                stream_jobs.remove(&stream);
            }
        }
        Some(origin)
    }

    pub(super) fn verify(&self, ticket: Ticket, request: VerifyRequest) {
        self.verifications.set(self.verifications.get() + 1);
        let origin = self.machine.borrow().job_origin(ticket);
        let Some(TicketOrigin { stream, cohort }) = origin else {
            // The machine closed the stream in the same input: nothing to verify.
            self.cancelled.borrow_mut().push(ticket);
            return;
        };
        let class = fairness_class(self.link.core, cohort);
        self.jobs.borrow_mut().insert(
            ticket,
            JobOrigin {
                stream,
                class,
                read_at: self.current_read_at.get(),
            },
        );
        if let Some(stream) = stream {
            self.stream_jobs
                .borrow_mut()
                .entry(stream)
                .or_insert_with(|| (class, Vec::new()))
                .1
                .push(ticket);
        }
        let queued = match &self.link.shared.pool {
            Some(pool) if !self.holds_here(pool) => pool
                .submit(class, (self.link.core, ticket), request)
                .is_ok(),
            _ => self
                .inline_jobs
                .borrow_mut()
                .push(class, (ticket, request, Instant::now()))
                .is_ok(),
        };
        assert!(
            queued,
            "the verification queues hold every job the cores may have in flight"
        );
    }

    /// Pool mode: whether a job is verified on this core rather than handed to the pool. Only
    /// when nothing is under way: the pool idle, none of this core's jobs in flight or
    /// waiting to be applied but those held here, of which at most
    /// `verify.idle_inline_jobs_max`, and the pool's recent batches for this core no larger
    /// than that either. Such a job would be verified alone anyway; here it costs no wake of a
    /// worker, no wake of this core for its result and no second turn, and it is written in
    /// the turn that read it (issue 23: on a core that shares its CPU with the worker, the
    /// job otherwise waited behind the previous publication's flush).
    /// Under load jobs are in flight, and they all go to the pool, whose batches check
    /// same-owner signatures together (measured: holding a few jobs every turn at a peak
    /// cost a tenth of the fan-out). Between two of its batches the pool is idle too; the
    /// size of the recent ones tells that apart from a moderate load (measured at the N = 100
    /// peak: jobs held there made 42% of the writes carry at most 4 frames, against 2%).
    fn holds_here(&self, pool: &Pool<(CoreId, Ticket)>) -> bool {
        let held = self.inline_jobs.borrow().len();
        let held_max = self.link.settings().verify_idle_inline_jobs_max;
        // This job is counted in `verifications` already.
        let nothing_else = self.verifications.get() == held + 1;
        let held_here = self.verifier.is_some()
            && nothing_else
            && held < held_max
            && self.pool_batch_recent.get() <= held_max
            && pool.is_idle();
        if held_here {
            self.link.metrics().verify_idle_inline.inc();
        }
        held_here
    }

    /// Verifies one batch of the jobs held on this core (all of them in inline mode, a
    /// turn's few while the pool was idle in pool mode); the results are applied like the
    /// pool's, within the fan-out budget.
    pub(super) fn verify_inline(&self) {
        let Some(verifier) = &self.verifier else {
            return;
        };
        let batch: Vec<InlineJob> = {
            let mut jobs = self.inline_jobs.borrow_mut();
            let take = jobs.len().min(self.link.settings().verify_batch_jobs_max);
            (0..take)
                .filter_map(|_| jobs.pop())
                .map(|(_, job)| job)
                .collect()
        };
        if batch.is_empty() {
            return;
        }
        let requests: Vec<&VerifyRequest> = batch.iter().map(|(_, request, _)| request).collect();
        let mut results = Vec::with_capacity(batch.len());
        let started = Instant::now();
        verifier.borrow_mut().verify_batch(&requests, &mut results);
        let finished = Instant::now();
        let batch_jobs = batch.len();
        for ((ticket, _, queued_at), result) in batch.into_iter().zip(results) {
            self.queue_result(VerifyDone {
                tag: (self.link.core, ticket),
                result,
                latency_us: micros(queued_at, finished),
                run_us: micros(started, finished),
                finished,
                batch_jobs,
            });
        }
    }
}
