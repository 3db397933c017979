//! The verification pool: fixed worker threads that validate SOCs in batches.
//!
//! Owns the threads, the bounded job queue and the batching policy. It never decides
//! what a result means (the broker's protocol core does) and never blocks its callers:
//! `submit` fails fast with [`PoolFull`] at the queue's bounds (`queue_jobs_max` in all,
//! `queue_jobs_per_class_max` per class), which is the designed backpressure point (the
//! broker keeps the job and stops reading that stream).
//!
//! Fairness: every job names a class (the broker names the cohort), and the queue is a
//! [`FairQueue`]: workers take one job of each waiting class in turn, so a class that
//! floods the pool delays another class's job by at most one job of its own per round,
//! not by its whole line. A flooding class gets whatever the others leave, and at least
//! `1/k` of the jobs served while `k` classes wait. A caller may take back queued jobs it
//! no longer wants ([`Pool::cancel`]: the broker's stream closed), so they cost no check.
//!
//! A batch is the unit of work: a worker blocks for the first job, then takes what else is
//! queued, up to `batch_jobs_max` and up to its share (below), and hands all results of the
//! batch to the completion callback in one call (in the order the jobs were taken), so the
//! broker wakes the asking core once per batch rather than once per chunk.
//!
//! A worker's share: while jobs are queued, a worker stops taking them once it holds
//! `ceil((held + queued) / workers)`, so a burst is split across every worker instead of
//! going whole to the first one awake. One hot publisher's frames arrive as such bursts (a
//! core submits every frame of a read at once, and the stream's read window bounds how
//! many are in flight), and its results are applied in stream order, so a burst verified by
//! one worker while the others idle would cost the whole burst's time on one core. The
//! share does not look at whether the other workers are busy: measured at N = 1 with two
//! workers (docs/BENCHMARKS.md, "Two cores at N = 1"), leaving work only for idle workers
//! did worse, because smaller batches finish, and release their stream's next frames,
//! sooner. A job left in the queue is never stranded: a worker parked for its first job is
//! woken by the next job queued, a worker parked with a batch begun by the job that would
//! end its wait (its share, or a full batch) or by its deadline, and a worker that finishes
//! comes back for more. With one worker the share is everything queued, as before.
//!
//! Each worker owns a [`Verifier`]: multi-lane BMT, a key cache, and the jobs of every
//! cached owner in a batch verified together with one batched ECDSA check (see
//! [`crate::verifier`]); each result is exactly [`crate::verify`]'s.
//!
//! When a batch closes: at `batch_jobs_max` jobs, at the worker's share while jobs are
//! queued, or when the queue is empty and the oldest job in hand was submitted
//! `batch_wait_us` ago, whichever comes first. The wait is counted from the oldest job's
//! `submit`, not from when the worker took it, so batching never holds a job back by more
//! than `batch_wait_us` in total: under load the queue is full, the oldest job has already
//! waited longer, and batches close at once at whatever size the queue gives (up to the
//! maximum and the share). A batch waits for company only when the pool's state says some
//! is coming (`waits_for_company`: another worker verifying, jobs queued behind its first,
//! or this worker's previous batch having had company); when the pool is idle, a lone job
//! is verified at once after the few spins and yields that let a core finish submitting a
//! read's burst (issue 23: at a moderate load every job waited the whole `batch_wait_us`
//! for company that never came). Zero turns the wait off (a batch is then what is queued
//! when the worker looks, up to its share).

use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::sync::{Condvar, Mutex, MutexGuard};

use crossbeam::utils::Backoff;

use crate::fair::{Bound, FairQueue};
use crate::job::{Verified, VerifyError, VerifyRequest};
use crate::verifier::{Verifier, VerifierStats};

/// Longest `batch_wait_us` a pool accepts: past a millisecond, batching costs more
/// latency than any batch saves (one SOC check is tens of microseconds).
pub const BATCH_WAIT_US_MAX: u64 = 1_000;

/// How a pool is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker threads; each verifies one batch at a time.
    pub workers: usize,
    /// Jobs queued and not yet taken by a worker; `submit` refuses beyond it.
    pub queue_jobs_max: usize,
    /// Jobs of one class queued and not yet taken; `submit` refuses beyond it.
    pub queue_jobs_per_class_max: usize,
    /// Jobs one worker takes at once; larger batches amortise wake-ups and the batched
    /// ECDSA check's fixed cost.
    pub batch_jobs_max: usize,
    /// How long, counted from the oldest job's submit, a worker whose queue ran empty waits
    /// for more jobs before closing a batch smaller than `batch_jobs_max` (module docs);
    /// at most [`BATCH_WAIT_US_MAX`], 0 = never wait.
    pub batch_wait_us: u64,
    /// Owner keys each worker caches (least recently used evicted); a cached owner's chunks
    /// are verified without recovery.
    pub key_cache_keys_max: usize,
}

impl Default for PoolConfig {
    /// One worker, 4096 queued jobs (of one class as of all), batches of up to 64 closed
    /// after at most 200 µs, 4096 cached keys per worker.
    fn default() -> Self {
        Self {
            workers: 1,
            queue_jobs_max: 4096,
            queue_jobs_per_class_max: 4096,
            batch_jobs_max: 64,
            batch_wait_us: 200,
            key_cache_keys_max: 4096,
        }
    }
}

/// One finished job: the caller's tag, the outcome and how long the job waited plus ran.
#[derive(Debug)]
pub struct Done<T> {
    /// What the submitter attached to find its own state again.
    pub tag: T,
    /// The validation outcome.
    pub result: Result<Verified, VerifyError>,
    /// Microseconds from `submit` to the end of this job's verification (the end of its
    /// batch: a batch's results are handed over together).
    pub latency_us: u64,
    /// Microseconds its batch took to verify (part of `latency_us`; the rest is the wait
    /// in the queue and for the batch to close).
    pub run_us: u64,
    /// When its batch finished: the caller times how long the result took to reach it.
    pub finished: Instant,
    /// Jobs in its batch: how much company the load gives a job.
    pub batch_jobs: usize,
}

/// The queue was at `queue_jobs_max`, or the job's class at `queue_jobs_per_class_max`;
/// the job comes back untouched.
pub struct PoolFull<T> {
    /// The rejected job's tag.
    pub tag: T,
    /// The rejected job's request.
    pub request: VerifyRequest,
}

impl<T> fmt::Debug for PoolFull<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PoolFull")
    }
}

struct Job<T> {
    tag: T,
    request: VerifyRequest,
    queued_at: Instant,
}

impl<T> Borrow<VerifyRequest> for Job<T> {
    fn borrow(&self) -> &VerifyRequest {
        &self.request
    }
}

/// Counters a pool exposes; read from any thread.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Jobs queued and not yet finished.
    pub depth: AtomicUsize,
    /// Jobs finished since start.
    pub jobs: AtomicU64,
    /// Batches finished since start.
    pub batches: AtomicU64,
    /// `submit` calls refused at the queue bound (`queue_jobs_max`).
    pub full: AtomicU64,
    /// `submit` calls refused at a class's bound (`queue_jobs_per_class_max`).
    pub class_full: AtomicU64,
    /// Queued jobs taken back by `cancel` before any worker took them.
    pub cancelled: AtomicU64,
    /// Jobs settled by full recovery (cold owners, implicit authorship, rejected chunks).
    pub recoveries: AtomicU64,
    /// Jobs accepted against a cached key, without recovery.
    pub key_accepts: AtomicU64,
    /// Batched ECDSA checks run (one per batch with two or more chunks of cached owners).
    pub batch_checks: AtomicU64,
    /// Batched ECDSA checks that failed and fell back to one check per chunk.
    pub batch_failures: AtomicU64,
    /// Failed batch checks split in two and checked again ([`crate::verifier`]).
    pub bisections: AtomicU64,
}

/// The queue and whether the pool is closing, behind one lock.
struct Queue<T> {
    jobs: FairQueue<Job<T>>,
    closed: bool,
    /// Workers parked for the first job of a batch.
    idle: usize,
    /// Workers parked with a batch begun, until their deadline or until the queue holds
    /// `room` more jobs (the least room of them).
    filling: usize,
    room: usize,
    /// Workers verifying a batch (taken and not yet handed over).
    verifying: usize,
}

/// What the workers and the submitters share.
struct Shared<T> {
    queue: Mutex<Queue<T>>,
    /// Rung for a job queued while a worker is idle, and at close.
    ready: Condvar,
    /// Rung when the queue could fill a begun batch, and at close. A filling worker is not
    /// woken for every job: its batch closes at its deadline or when full either way, and
    /// a wake per job (the worker often shares the submitting core's CPU) preempts the
    /// core at every submit, so a burst of a read's frames trickles in and the batches it
    /// would have made shrink to a few jobs.
    fill: Condvar,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Queue<T>> {
        // A worker that panicked holding the lock left the queue consistent: every
        // operation on it completes before the guard drops.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A running pool. Dropping it closes the queue and joins the workers.
pub struct Pool<T: Send + 'static> {
    shared: Arc<Shared<T>>,
    workers: Vec<JoinHandle<()>>,
    stats: Arc<PoolStats>,
}

impl<T: Send + 'static> fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("workers", &self.workers.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl<T: Send + 'static> Pool<T> {
    /// Starts `config.workers` threads. `on_batch` receives every finished batch (never
    /// empty) on the worker thread; `on_start(worker_index)` runs first on each worker
    /// (the broker pins workers there).
    ///
    /// # Panics
    /// If a size in `config` is zero or `batch_wait_us` exceeds [`BATCH_WAIT_US_MAX`]
    /// (config validation guarantees neither happens) or a thread cannot be spawned.
    pub fn start<F, S>(config: PoolConfig, on_start: S, on_batch: F) -> Self
    where
        F: Fn(Vec<Done<T>>) + Send + Sync + 'static,
        S: Fn(usize) + Send + Sync + 'static,
    {
        assert!(config.workers > 0, "pool needs at least one worker");
        assert!(config.queue_jobs_max > 0, "pool queue must hold a job");
        assert!(
            config.queue_jobs_per_class_max > 0,
            "pool queue must hold a job of each class"
        );
        assert!(config.batch_jobs_max > 0, "a batch holds at least one job");
        assert!(
            config.key_cache_keys_max > 0,
            "the key cache holds at least one key"
        );
        assert!(
            config.batch_wait_us <= BATCH_WAIT_US_MAX,
            "batch_wait_us {} exceeds {BATCH_WAIT_US_MAX}",
            config.batch_wait_us
        );
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: FairQueue::new(config.queue_jobs_max, config.queue_jobs_per_class_max),
                closed: false,
                idle: 0,
                filling: 0,
                room: 0,
                verifying: 0,
            }),
            ready: Condvar::new(),
            fill: Condvar::new(),
        });
        let stats = Arc::new(PoolStats::default());
        let on_batch = Arc::new(on_batch);
        let on_start = Arc::new(on_start);
        let workers = (0..config.workers)
            .map(|index| {
                let shared = Arc::clone(&shared);
                let stats = Arc::clone(&stats);
                let on_batch = Arc::clone(&on_batch);
                let on_start = Arc::clone(&on_start);
                std::thread::Builder::new()
                    .name(format!("bps-verify-{index}"))
                    .spawn(move || {
                        on_start(index);
                        work(&shared, config, &stats, &*on_batch);
                    })
                    .expect("spawning a verification worker")
            })
            .collect();
        Self {
            shared,
            workers,
            stats,
        }
    }

    /// Queues one job at the end of its `class`, or returns it at a bound.
    pub fn submit(&self, class: u64, tag: T, request: VerifyRequest) -> Result<(), PoolFull<T>> {
        let job = Job {
            tag,
            request,
            queued_at: Instant::now(),
        };
        let pushed = {
            let mut queue = self.shared.lock();
            if queue.closed {
                return Err(PoolFull {
                    tag: job.tag,
                    request: job.request,
                });
            }
            // Counted before a worker can take it, so the gauge never goes below zero.
            self.stats.depth.fetch_add(1, Ordering::Relaxed);
            let pushed = queue.jobs.push(class, job);
            let wake_idle = queue.idle > 0;
            let wake_filling = queue.filling > 0 && queue.jobs.len() >= queue.room;
            pushed.map(|()| (wake_idle, wake_filling))
        };
        match pushed {
            Ok((wake_idle, wake_filling)) => {
                if wake_idle {
                    self.shared.ready.notify_one();
                }
                if wake_filling {
                    self.shared.fill.notify_all();
                }
                Ok(())
            }
            Err(refused) => {
                self.stats.depth.fetch_sub(1, Ordering::Relaxed);
                let counter = match refused.bound {
                    Bound::Total => &self.stats.full,
                    Bound::Class => &self.stats.class_full,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                Err(PoolFull {
                    tag: refused.job.tag,
                    request: refused.job.request,
                })
            }
        }
    }

    /// Takes back the queued jobs of `class` whose tag `cancelled` picks (none a worker has
    /// taken already: those finish as usual), and returns their tags in queue order.
    pub fn cancel(&self, class: u64, mut cancelled: impl FnMut(&T) -> bool) -> Vec<T> {
        let removed = self
            .shared
            .lock()
            .jobs
            .cancel(class, |job| cancelled(&job.tag));
        let count = removed.len();
        self.stats.depth.fetch_sub(count, Ordering::Relaxed);
        self.stats
            .cancelled
            .fetch_add(count as u64, Ordering::Relaxed);
        removed.into_iter().map(|job| job.tag).collect()
    }

    /// Whether no job is queued or being verified: a job submitted now would be taken by a
    /// parked worker and verified alone. A lock-free read, so it may be a moment stale.
    pub fn is_idle(&self) -> bool {
        self.stats.depth.load(Ordering::Relaxed) == 0
    }

    /// Live counters.
    pub fn stats(&self) -> Arc<PoolStats> {
        Arc::clone(&self.stats)
    }
}

impl<T: Send + 'static> Drop for Pool<T> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_all();
        self.shared.fill.notify_all();
        for worker in self.workers.drain(..) {
            // A worker that panicked already reported it; joining the rest matters more.
            let _ = worker.join();
        }
    }
}

fn work<T>(
    shared: &Shared<T>,
    config: PoolConfig,
    stats: &PoolStats,
    on_batch: &dyn Fn(Vec<Done<T>>),
) {
    let wait = Duration::from_micros(config.batch_wait_us);
    let mut verifier = Verifier::new(config.key_cache_keys_max);
    let mut reported = VerifierStats::default();
    let mut batch: Vec<Job<T>> = Vec::with_capacity(config.batch_jobs_max);
    let mut results = Vec::with_capacity(config.batch_jobs_max);
    let mut last_batch_jobs = 0;
    while take_batch(shared, config, (wait, last_batch_jobs), &mut batch) {
        let taken = batch.len();
        last_batch_jobs = taken;
        results.clear();
        let started = Instant::now();
        verifier.verify_batch(&batch, &mut results);
        let finished = Instant::now();
        let run_us = micros(started, finished);
        let done: Vec<Done<T>> = batch
            .drain(..)
            .zip(results.drain(..))
            .map(|(job, result)| Done {
                tag: job.tag,
                result,
                latency_us: micros(job.queued_at, finished),
                run_us,
                finished,
                batch_jobs: taken,
            })
            .collect();
        shared.lock().verifying -= 1;
        stats.depth.fetch_sub(taken, Ordering::Relaxed);
        stats.jobs.fetch_add(taken as u64, Ordering::Relaxed);
        stats.batches.fetch_add(1, Ordering::Relaxed);
        let now = verifier.stats();
        for (counter, (total, before)) in [
            (&stats.recoveries, (now.recoveries, reported.recoveries)),
            (&stats.key_accepts, (now.key_accepts, reported.key_accepts)),
            (
                &stats.batch_checks,
                (now.batch_checks, reported.batch_checks),
            ),
            (
                &stats.batch_failures,
                (now.batch_failures, reported.batch_failures),
            ),
            (&stats.bisections, (now.bisections, reported.bisections)),
        ] {
            counter.fetch_add(total - before, Ordering::Relaxed);
        }
        reported = now;
        on_batch(done);
    }
}

/// Fills `batch` (empty on entry) with the next batch, in the queue's round-robin order
/// (module docs for when it closes), counting the worker as verifying; `false` once the
/// pool is closed and drained. `last_batch_jobs` is the size of this worker's previous batch.
fn take_batch<T>(
    shared: &Shared<T>,
    config: PoolConfig,
    (wait, last_batch_jobs): (Duration, usize),
    batch: &mut Vec<Job<T>>,
) -> bool {
    let mut queue = fill_batch(shared, config, (wait, last_batch_jobs), batch);
    if batch.is_empty() {
        return false;
    }
    queue.verifying += 1;
    true
}

/// `take_batch`'s filling: `batch` stays empty once the pool is closed and drained.
fn fill_batch<'a, T>(
    shared: &'a Shared<T>,
    config: PoolConfig,
    (wait, last_batch_jobs): (Duration, usize),
    batch: &mut Vec<Job<T>>,
) -> MutexGuard<'a, Queue<T>> {
    let mut queue = shared.lock();
    let first = loop {
        if let Some((_, job)) = queue.jobs.pop() {
            break job;
        }
        if queue.closed {
            return queue;
        }
        queue.idle += 1;
        queue = shared
            .ready
            .wait(queue)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        queue.idle -= 1;
    };
    let deadline = first.queued_at + wait;
    let backoff = Backoff::new();
    // Decided once, when the batch begins: the pool's state at that moment is what says
    // whether company is coming (module docs).
    let waits = waits_for_company(queue.verifying, queue.jobs.len(), last_batch_jobs);
    batch.push(first);
    while batch.len() < config.batch_jobs_max {
        if holds_share(batch.len(), queue.jobs.len(), config.workers) {
            break;
        }
        if let Some((_, job)) = queue.jobs.pop() {
            batch.push(job);
            continue;
        }
        // A deadline already past ends the batch at once.
        let left = deadline.saturating_duration_since(Instant::now());
        if wait.is_zero() || left.is_zero() || queue.closed {
            break;
        }
        if !backoff.is_completed() {
            // Before parking, a few spins and yields: a worker sharing the submitting core's
            // CPU lets the core queue the rest of its burst, instead of closing a batch of
            // the first few jobs at its deadline while the core waits for the CPU.
            drop(queue);
            backoff.snooze();
            queue = shared.lock();
            continue;
        }
        if !waits {
            break;
        }
        let room = fill_room(batch.len(), config);
        queue.room = if queue.filling == 0 {
            room
        } else {
            queue.room.min(room)
        };
        queue.filling += 1;
        queue = shared
            .fill
            .wait_timeout(queue, left)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
        queue.filling -= 1;
    }
    queue
}

/// Whether a batch begun with nothing else queued may wait for company (up to its deadline):
/// only when something says more jobs are coming, another worker verifying (`verifying`),
/// jobs queued behind the first (`queued`), or this worker's previous batch having had
/// company (`last_batch_jobs`). An idle pool verifies a lone job at once: the wait would be
/// pure latency, as nothing is on its way to share the batched check with.
fn waits_for_company(verifying: usize, queued: usize, last_batch_jobs: usize) -> bool {
    verifying > 0 || queued > 0 || last_batch_jobs > 1
}

/// The fewest queued jobs at which a worker holding `held` jobs stops waiting for more: with
/// other workers, any job (it then holds its share, `holds_share`); alone, a full batch.
fn fill_room(held: usize, config: PoolConfig) -> usize {
    if config.workers > 1 {
        1
    } else {
        config.batch_jobs_max - held
    }
}

/// Whether a worker holding `held` jobs, with `queued` more in the queue, has its share of
/// them among `workers` (module docs); with nothing queued it may wait for more up to its
/// deadline.
fn holds_share(held: usize, queued: usize, workers: usize) -> bool {
    queued > 0 && held >= (held + queued).div_ceil(workers)
}

fn micros(since: Instant, until: Instant) -> u64 {
    u64::try_from(until.saturating_duration_since(since).as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Expect;
    use crate::publish::sign_soc;
    use crate::signer::SigningKey;
    use std::sync::Mutex;
    use std::sync::mpsc;

    fn request(key: &SigningKey, id: u8, owner: [u8; 20]) -> VerifyRequest {
        VerifyRequest {
            chunk: sign_soc(key, &[id; 32], 3, b"abc"),
            expect: Expect::At { owner },
        }
    }

    /// A one-worker pool whose worker waits before its first job until `release` is sent,
    /// so a test can queue jobs first; every finished batch arrives whole on `batches`.
    struct HeldPool<T: Send + 'static> {
        pool: Pool<T>,
        release: mpsc::Sender<()>,
        batches: mpsc::Receiver<Vec<Done<T>>>,
    }

    fn held_pool<T: Send + 'static>(batch_jobs_max: usize, batch_wait_us: u64) -> HeldPool<T> {
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let (sender, batches) = mpsc::channel();
        let sender = Mutex::new(sender);
        let pool = Pool::start(
            PoolConfig {
                workers: 1,
                queue_jobs_max: 64,
                queue_jobs_per_class_max: 64,
                batch_jobs_max,
                batch_wait_us,
                key_cache_keys_max: 8,
            },
            move |_| {
                let _ = gate.lock().expect("gate").recv();
            },
            move |batch: Vec<Done<T>>| {
                sender
                    .lock()
                    .expect("test channel")
                    .send(batch)
                    .expect("receiver alive");
            },
        );
        HeldPool {
            pool,
            release,
            batches,
        }
    }

    #[test]
    fn every_job_comes_back_once_with_its_own_result() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let (sender, receiver) = mpsc::channel();
        let sender = Mutex::new(sender);
        let pool = Pool::start(
            PoolConfig {
                workers: 2,
                queue_jobs_max: 64,
                batch_jobs_max: 8,
                ..PoolConfig::default()
            },
            |_| {},
            move |batch: Vec<Done<u32>>| {
                assert!(!batch.is_empty());
                let sender = sender.lock().expect("test channel");
                for done in batch {
                    sender
                        .send((done.tag, done.result.is_ok()))
                        .expect("receiver alive");
                }
            },
        );
        for tag in 0..40u32 {
            // Odd tags expect another owner, so they must fail.
            let owner = if tag % 2 == 0 { key.address() } else { [9; 20] };
            let mut job = Some(request(&key, tag as u8, owner));
            while let Some(next) = job.take() {
                if let Err(full) = pool.submit(0, tag, next) {
                    std::thread::yield_now();
                    job = Some(full.request);
                }
            }
        }
        let mut seen: Vec<(u32, bool)> =
            (0..40).map(|_| receiver.recv().expect("result")).collect();
        seen.sort();
        let expected: Vec<(u32, bool)> = (0..40).map(|tag| (tag, tag % 2 == 0)).collect();
        assert_eq!(seen, expected);
        let stats = pool.stats();
        assert_eq!(stats.jobs.load(Ordering::Relaxed), 40);
        assert_eq!(stats.depth.load(Ordering::Relaxed), 0);
    }

    /// A pool is idle only while no job is queued or being verified: the broker's cores
    /// verify a lone job themselves only then.
    #[test]
    fn a_pool_is_idle_only_with_no_job_queued_or_being_verified() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let HeldPool {
            pool,
            release,
            batches,
        } = held_pool::<u8>(4, 0);
        assert!(pool.is_idle(), "a new pool");
        assert!(pool.submit(0, 0, request(&key, 0, key.address())).is_ok());
        assert!(!pool.is_idle(), "a job queued");
        release.send(()).expect("worker waiting");
        assert_eq!(batches.recv().expect("batch").len(), 1);
        assert!(
            pool.is_idle(),
            "its batch was verified before it was handed over"
        );
    }

    /// A held worker finds ten jobs queued: batches of the maximum size close at once,
    /// the rest closes at its deadline, jobs stay in submit order, and the same-owner jobs
    /// after the first are accepted by key in batches.
    #[test]
    fn batches_close_at_the_maximum_and_keep_job_order() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let HeldPool {
            pool,
            release,
            batches: receiver,
        } = held_pool::<u8>(4, BATCH_WAIT_US_MAX);
        for tag in 0..10u8 {
            assert!(
                pool.submit(0, tag, request(&key, tag, key.address()))
                    .is_ok()
            );
        }
        release.send(()).expect("worker waiting");
        let batches: Vec<Vec<(u8, bool)>> = (0..3)
            .map(|_| {
                let batch = receiver.recv().expect("batch");
                batch
                    .iter()
                    .map(|done| (done.tag, done.result.is_ok()))
                    .collect()
            })
            .collect();
        let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
        assert_eq!(sizes, [4, 4, 2]);
        let flat: Vec<(u8, bool)> = batches.into_iter().flatten().collect();
        let expected: Vec<(u8, bool)> = (0..10).map(|tag| (tag, true)).collect();
        assert_eq!(flat, expected);
        let stats = pool.stats();
        assert_eq!(stats.recoveries.load(Ordering::Relaxed), 1);
        assert_eq!(stats.key_accepts.load(Ordering::Relaxed), 9);
        assert_eq!(stats.batch_checks.load(Ordering::Relaxed), 3);
        assert_eq!(stats.batch_failures.load(Ordering::Relaxed), 0);
    }

    /// A lone job after a batch that had company (a sign of load) waits for more until
    /// `batch_wait_us` after its submit, then goes alone; each result says how long its
    /// batch ran, within its whole latency.
    #[test]
    fn a_lone_job_after_company_waits_for_its_deadline_then_goes_alone() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let HeldPool {
            pool,
            release,
            batches,
        } = held_pool::<u8>(4, BATCH_WAIT_US_MAX);
        for tag in 0..2 {
            assert!(
                pool.submit(0, tag, request(&key, tag, key.address()))
                    .is_ok()
            );
        }
        release.send(()).expect("worker waiting");
        assert_eq!(batches.recv().expect("first batch").len(), 2);
        assert!(pool.submit(0, 2, request(&key, 2, key.address())).is_ok());
        let lone = batches.recv().expect("lone batch");
        assert_eq!(lone.len(), 1);
        assert!(
            lone[0].latency_us >= BATCH_WAIT_US_MAX,
            "{}",
            lone[0].latency_us
        );
        assert!(lone[0].run_us <= lone[0].latency_us);
    }

    /// An idle pool (no worker verifying, nothing queued, the last batch alone) never waits
    /// for company; any sign of load keeps batching.
    #[test]
    fn only_a_pool_with_signs_of_load_waits_for_company() {
        assert!(!waits_for_company(0, 0, 0), "a fresh pool");
        assert!(!waits_for_company(0, 0, 1), "a lone job after a lone job");
        assert!(waits_for_company(1, 0, 1), "another worker is verifying");
        assert!(
            waits_for_company(0, 3, 1),
            "jobs are queued behind the first"
        );
        assert!(waits_for_company(0, 0, 2), "the previous batch had company");
    }

    #[test]
    fn a_share_is_everything_for_one_worker_and_a_fair_part_for_several() {
        for held in 1..70 {
            assert!(!holds_share(held, 5, 1), "one worker takes all it is given");
        }
        assert!(!holds_share(1, 31, 2));
        assert!(!holds_share(15, 17, 2));
        assert!(holds_share(16, 16, 2));
        assert!(!holds_share(10, 22, 3));
        assert!(holds_share(11, 21, 3));
        assert!(holds_share(1, 1, 2), "two jobs for two workers: one each");
        assert!(
            !holds_share(1, 0, 2),
            "with nothing queued a worker may wait for company"
        );
    }

    /// One owner's burst of 32 jobs, queued while both workers were held: each worker takes
    /// at most half, both take part (the first batch on each thread waits, a bounded time,
    /// until the other worker has one too, so a worker that took everything would show),
    /// and every batch keeps submit order.
    #[test]
    fn two_workers_each_take_part_of_one_owners_burst() {
        use std::sync::atomic::AtomicBool;
        const JOBS: u8 = 32;
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let (sender, receiver) = mpsc::channel();
        let sender = Mutex::new(sender);
        let workers_with_a_batch = Arc::new(AtomicUsize::new(0));
        thread_local! {
            static HAD_A_BATCH: AtomicBool = const { AtomicBool::new(false) };
        }
        let pool = Pool::start(
            PoolConfig {
                workers: 2,
                queue_jobs_max: 64,
                queue_jobs_per_class_max: 64,
                batch_jobs_max: 64,
                batch_wait_us: 0,
                key_cache_keys_max: 8,
            },
            move |_| {
                let _ = gate.lock().expect("gate").recv();
            },
            move |batch: Vec<Done<u8>>| {
                let name = std::thread::current().name().map(str::to_owned);
                let tags: Vec<(u8, bool)> = batch
                    .iter()
                    .map(|done| (done.tag, done.result.is_ok()))
                    .collect();
                sender
                    .lock()
                    .expect("test channel")
                    .send((name, tags))
                    .expect("receiver alive");
                if !HAD_A_BATCH.with(|had| had.swap(true, Ordering::Relaxed)) {
                    workers_with_a_batch.fetch_add(1, Ordering::Relaxed);
                    let until = Instant::now() + Duration::from_secs(5);
                    while workers_with_a_batch.load(Ordering::Relaxed) < 2 && Instant::now() < until
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            },
        );
        for tag in 0..JOBS {
            assert!(
                pool.submit(0, tag, request(&key, tag, key.address()))
                    .is_ok()
            );
        }
        release.send(()).expect("a worker waiting");
        release.send(()).expect("a worker waiting");
        let mut seen = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        while seen.len() < usize::from(JOBS) {
            let (name, tags) = receiver
                .recv_timeout(Duration::from_secs(10))
                .expect("a batch");
            assert!(tags.len() <= usize::from(JOBS / 2), "{tags:?}");
            assert!(
                tags.windows(2).all(|pair| pair[0].0 < pair[1].0),
                "{tags:?}"
            );
            names.insert(name.expect("workers are named"));
            seen.extend(tags);
        }
        assert_eq!(
            names.len(),
            2,
            "both workers verified part of it: {names:?}"
        );
        seen.sort_unstable();
        let expected: Vec<(u8, bool)> = (0..JOBS).map(|tag| (tag, true)).collect();
        assert_eq!(seen, expected);
    }

    /// A class that queued 40 jobs first and one that queued 3 after it, behind a held
    /// worker: the batches take the classes in turn, so the late class's jobs are all in
    /// the first batch, and each class keeps its own order.
    #[test]
    fn a_flooding_class_takes_turns_with_a_late_one() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let HeldPool {
            pool,
            release,
            batches,
        } = held_pool::<(u64, u8)>(8, 0);
        let receiver = || -> Vec<(u64, u8)> {
            let batch = batches
                .recv_timeout(Duration::from_secs(30))
                .expect("batch");
            batch.iter().map(|done| done.tag).collect()
        };
        for n in 0..40u8 {
            assert!(
                pool.submit(1, (1, n), request(&key, n, key.address()))
                    .is_ok()
            );
        }
        for n in 0..3u8 {
            let id = 100 + n;
            assert!(
                pool.submit(2, (2, n), request(&key, id, key.address()))
                    .is_ok()
            );
        }
        release.send(()).expect("worker waiting");
        let first = receiver();
        assert_eq!(
            first,
            [
                (1, 0),
                (2, 0),
                (1, 1),
                (2, 1),
                (1, 2),
                (2, 2),
                (1, 3),
                (1, 4)
            ]
        );
        let mut rest = Vec::new();
        while rest.len() < 35 {
            rest.extend(receiver());
        }
        let expected: Vec<(u64, u8)> = (5..40).map(|n| (1, n)).collect();
        assert_eq!(rest, expected);
    }

    /// Jobs taken back before a worker took them never come back through `on_batch`, and
    /// are counted; the others are verified as usual.
    #[test]
    fn cancelled_jobs_are_returned_and_never_verified() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let HeldPool {
            pool,
            release,
            batches,
        } = held_pool::<u8>(64, 0);
        for tag in 0..10u8 {
            assert!(
                pool.submit(u64::from(tag % 2), tag, request(&key, tag, key.address()))
                    .is_ok()
            );
        }
        // The worker is held before its first job, so all ten are still queued.
        let cancelled = pool.cancel(1, |tag| *tag >= 5);
        assert_eq!(cancelled, [5, 7, 9]);
        assert!(pool.cancel(3, |_| true).is_empty());
        release.send(()).expect("worker waiting");
        let mut seen: Vec<u8> = Vec::new();
        while seen.len() < 7 {
            let batch = batches
                .recv_timeout(Duration::from_secs(30))
                .expect("a result");
            seen.extend(batch.iter().map(|done| done.tag));
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4, 6, 8]);
        let stats = pool.stats();
        assert_eq!(stats.cancelled.load(Ordering::Relaxed), 3);
        assert_eq!(stats.jobs.load(Ordering::Relaxed), 7);
        assert_eq!(stats.depth.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_class_at_its_bound_is_refused_while_another_class_is_not() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let pool = Pool::start(
            PoolConfig {
                workers: 1,
                queue_jobs_max: 8,
                queue_jobs_per_class_max: 2,
                batch_jobs_max: 8,
                batch_wait_us: 0,
                key_cache_keys_max: 8,
            },
            move |_| {
                let _ = gate.lock().expect("gate").recv();
            },
            |_batch: Vec<Done<u8>>| {},
        );
        assert!(pool.submit(1, 0, request(&key, 0, key.address())).is_ok());
        assert!(pool.submit(1, 1, request(&key, 1, key.address())).is_ok());
        let refused = pool
            .submit(1, 2, request(&key, 2, key.address()))
            .expect_err("class 1 is at its bound");
        assert_eq!(refused.tag, 2);
        assert!(pool.submit(2, 3, request(&key, 3, key.address())).is_ok());
        let stats = pool.stats();
        assert_eq!(stats.class_full.load(Ordering::Relaxed), 1);
        assert_eq!(stats.full.load(Ordering::Relaxed), 0);
        release.send(()).expect("worker waiting");
    }

    /// A worker parked with a batch begun is woken exactly when it would stop waiting: the
    /// room `submit` waits for ends the wait by the share or by a full batch.
    #[test]
    fn a_filling_worker_is_woken_by_the_job_that_ends_its_wait() {
        for workers in 1..=4 {
            let config = PoolConfig {
                workers,
                ..PoolConfig::default()
            };
            for held in 1..config.batch_jobs_max {
                let room = fill_room(held, config);
                let ends = holds_share(held, room, workers) || held + room >= config.batch_jobs_max;
                assert!(ends, "workers {workers}, held {held}: room {room}");
                let fewer = room - 1;
                let ends_sooner = (fewer > 0 && holds_share(held, fewer, workers))
                    || held + fewer >= config.batch_jobs_max;
                assert!(!ends_sooner, "workers {workers}, held {held}: woken late");
            }
        }
    }

    #[test]
    fn default_config_is_valid_and_documented() {
        let config = PoolConfig::default();
        assert_eq!(config.workers, 1);
        assert_eq!(config.batch_wait_us, 200);
        assert!(config.batch_wait_us <= BATCH_WAIT_US_MAX);
        assert!(config.batch_jobs_max <= config.queue_jobs_max);
        drop(Pool::<u8>::start(config, |_| {}, |_| {}));
    }

    #[test]
    #[should_panic(expected = "batch_wait_us")]
    fn an_overlong_wait_is_refused() {
        let _pool = Pool::<u8>::start(
            PoolConfig {
                batch_wait_us: BATCH_WAIT_US_MAX + 1,
                ..PoolConfig::default()
            },
            |_| {},
            |_| {},
        );
    }

    #[test]
    fn a_full_queue_hands_the_job_back_and_counts_it() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let pool = Pool::start(
            PoolConfig {
                workers: 1,
                queue_jobs_max: 1,
                queue_jobs_per_class_max: 1,
                batch_jobs_max: 1,
                ..PoolConfig::default()
            },
            |_| {},
            move |_batch: Vec<Done<u8>>| {
                // Hold the only worker until the test has filled the queue.
                let _ = gate.lock().expect("gate").recv();
            },
        );
        let mut refused = None;
        for tag in 0..4u8 {
            if let Err(full) = pool.submit(0, tag, request(&key, tag, key.address())) {
                refused = Some(full.tag);
                break;
            }
        }
        assert!(
            refused.is_some(),
            "a one-slot queue behind a held worker must refuse"
        );
        assert!(pool.stats().full.load(Ordering::Relaxed) >= 1);
        for _ in 0..4 {
            let _ = release.send(());
        }
        drop(release);
    }
}
