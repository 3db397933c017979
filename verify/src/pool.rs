//! The verification pool: fixed worker threads that validate SOCs in batches.
//!
//! Owns the threads, the bounded job queue and the batching policy. It never decides
//! what a result means (the broker's protocol core does) and never blocks its callers:
//! `submit` fails fast with [`PoolFull`] at the queue bound, which is the designed
//! backpressure point (the broker keeps the job and stops reading that stream).
//!
//! A batch is the unit of work: a worker blocks for the first job, then takes whatever
//! else is queued, up to `batch_jobs_max`, and hands all results of the batch to the
//! completion callback in one call, so the broker wakes the asking core once per batch
//! rather than once per chunk.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{self, Receiver, Sender, TrySendError};

use crate::job::{Verified, VerifyError, VerifyRequest, verify};

/// How a pool is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker threads; each verifies one batch at a time.
    pub workers: usize,
    /// Jobs queued and not yet taken by a worker; `submit` refuses beyond it.
    pub queue_jobs_max: usize,
    /// Jobs one worker takes at once; larger batches amortise wake-ups.
    pub batch_jobs_max: usize,
}

/// One finished job: the caller's tag, the outcome and how long the job waited plus ran.
#[derive(Debug)]
pub struct Done<T> {
    /// What the submitter attached to find its own state again.
    pub tag: T,
    /// The validation outcome.
    pub result: Result<Verified, VerifyError>,
    /// Microseconds from `submit` to the end of this job's verification.
    pub latency_us: u64,
}

/// The queue was at `queue_jobs_max`; the job comes back untouched.
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

/// Counters a pool exposes; read from any thread.
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Jobs queued and not yet finished.
    pub depth: AtomicUsize,
    /// Jobs finished since start.
    pub jobs: AtomicU64,
    /// Batches finished since start.
    pub batches: AtomicU64,
    /// `submit` calls refused at the queue bound.
    pub full: AtomicU64,
}

/// A running pool. Dropping it closes the queue and joins the workers.
pub struct Pool<T: Send + 'static> {
    sender: Option<Sender<Job<T>>>,
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
    /// If a size in `config` is zero (config validation guarantees it is not) or a thread
    /// cannot be spawned.
    pub fn start<F, S>(config: PoolConfig, on_start: S, on_batch: F) -> Self
    where
        F: Fn(Vec<Done<T>>) + Send + Sync + 'static,
        S: Fn(usize) + Send + Sync + 'static,
    {
        assert!(config.workers > 0, "pool needs at least one worker");
        assert!(config.queue_jobs_max > 0, "pool queue must hold a job");
        assert!(config.batch_jobs_max > 0, "a batch holds at least one job");
        let (sender, receiver) = channel::bounded::<Job<T>>(config.queue_jobs_max);
        let stats = Arc::new(PoolStats::default());
        let on_batch = Arc::new(on_batch);
        let on_start = Arc::new(on_start);
        let workers = (0..config.workers)
            .map(|index| {
                let receiver = receiver.clone();
                let stats = Arc::clone(&stats);
                let on_batch = Arc::clone(&on_batch);
                let on_start = Arc::clone(&on_start);
                std::thread::Builder::new()
                    .name(format!("bps-verify-{index}"))
                    .spawn(move || {
                        on_start(index);
                        work(&receiver, config.batch_jobs_max, &stats, &*on_batch);
                    })
                    .expect("spawning a verification worker")
            })
            .collect();
        Self {
            sender: Some(sender),
            workers,
            stats,
        }
    }

    /// Queues one job, or returns it at the queue bound.
    pub fn submit(&self, tag: T, request: VerifyRequest) -> Result<(), PoolFull<T>> {
        let Some(sender) = &self.sender else {
            return Err(PoolFull { tag, request });
        };
        let job = Job {
            tag,
            request,
            queued_at: Instant::now(),
        };
        match sender.try_send(job) {
            Ok(()) => {
                self.stats.depth.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                self.stats.full.fetch_add(1, Ordering::Relaxed);
                Err(PoolFull {
                    tag: job.tag,
                    request: job.request,
                })
            }
        }
    }

    /// Live counters.
    pub fn stats(&self) -> Arc<PoolStats> {
        Arc::clone(&self.stats)
    }
}

impl<T: Send + 'static> Drop for Pool<T> {
    fn drop(&mut self) {
        self.sender = None;
        for worker in self.workers.drain(..) {
            // A worker that panicked already reported it; joining the rest matters more.
            let _ = worker.join();
        }
    }
}

fn work<T>(
    receiver: &Receiver<Job<T>>,
    batch_jobs_max: usize,
    stats: &PoolStats,
    on_batch: &dyn Fn(Vec<Done<T>>),
) {
    let mut batch: Vec<Job<T>> = Vec::with_capacity(batch_jobs_max);
    while let Ok(first) = receiver.recv() {
        batch.push(first);
        while batch.len() < batch_jobs_max {
            match receiver.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let taken = batch.len();
        let done: Vec<Done<T>> = batch
            .drain(..)
            .map(|job| {
                let result = verify(&job.request);
                Done {
                    tag: job.tag,
                    result,
                    latency_us: micros(job.queued_at),
                }
            })
            .collect();
        stats.depth.fetch_sub(taken, Ordering::Relaxed);
        stats.jobs.fetch_add(taken as u64, Ordering::Relaxed);
        stats.batches.fetch_add(1, Ordering::Relaxed);
        on_batch(done);
    }
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX)
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
                if let Err(full) = pool.submit(tag, next) {
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

    #[test]
    fn a_full_queue_hands_the_job_back_and_counts_it() {
        let key = SigningKey::from_bytes(&[7; 32]).expect("valid key");
        let (release, gate) = mpsc::channel::<()>();
        let gate = Mutex::new(gate);
        let pool = Pool::start(
            PoolConfig {
                workers: 1,
                queue_jobs_max: 1,
                batch_jobs_max: 1,
            },
            |_| {},
            move |_batch: Vec<Done<u8>>| {
                // Hold the only worker until the test has filled the queue.
                let _ = gate.lock().expect("gate").recv();
            },
        );
        let mut refused = None;
        for tag in 0..4u8 {
            if let Err(full) = pool.submit(tag, request(&key, tag, key.address())) {
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
