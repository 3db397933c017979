//! Verification throughput on one core, old path against new, for `bps-bench verify`.
//!
//! Owns: [`measure`] and its [`MeasureConfig`] / [`Measurement`]. The bench tool pins the
//! calling thread to one core, calls [`measure`], and prints the figures.
//!
//! Never: pins anything itself. The pool worker that [`measure`] starts is spawned from
//! the calling thread and so inherits its CPU affinity (Linux threads start with their
//! creator's mask): pin the caller first and the whole pipeline, submitter and worker,
//! shares that one core, as the naive loop does.
//!
//! - `naive_socs_per_s`: the old path, bee's `soc.Valid` by recovery with the scalar BMT
//!   ([`crate::validate_soc_at_with`] and [`Lanes::Scalar`]), one chunk after another on
//!   the calling thread.
//! - `pipeline_socs_per_s`: the pool's real path: a one-worker [`Pool`] fed by the calling
//!   thread, which keeps the queue full, with a same-owner stream of pre-signed chunks
//!   (`Expect::At`, as under explicit authorship): multi-lane BMT, the owner's key cached
//!   after the first chunk, batched ECDSA. Counted after a warm-up, over completions.
//! - `bmt_scalar_us` / `bmt_multilane_us`: median time of one BMT root of a full payload
//!   with the scalar keccak and with [`Lanes::fastest`].
//!
//! Every chunk is valid; a rejection on either path is a bug and panics.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam::channel::{self, Receiver};

use crate::bmt::{CHUNK_SIZE, Lanes, bmt_root_with};
use crate::job::{Expect, VerifyRequest};
use crate::pool::{Done, Pool, PoolConfig};
use crate::publish::sign_soc;
use crate::signer::SigningKey;
use crate::soc::validate_soc_at_with;
use crate::wire::{Hash, keccak256, soc_address};

/// What to measure and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasureConfig {
    /// Distinct pre-signed chunks, cycled through by both paths (all of one owner).
    pub chunks: usize,
    /// Payload bytes per chunk (at most 4096).
    pub payload_bytes: usize,
    /// Measuring time per path, after a warm-up of a fifth of it.
    pub duration_ms: u64,
    /// The pipeline's pool (its `workers` is ignored: one worker).
    pub pool: PoolConfig,
    /// BMT timing samples per implementation.
    pub bmt_samples: usize,
}

impl Default for MeasureConfig {
    /// 1024 chunks of 4 KiB, 2 s per path, batches of up to 64 from a queue of 256.
    fn default() -> Self {
        Self {
            chunks: 1024,
            payload_bytes: CHUNK_SIZE,
            duration_ms: 2_000,
            pool: PoolConfig {
                workers: 1,
                queue_jobs_max: 256,
                batch_jobs_max: 64,
                ..PoolConfig::default()
            },
            bmt_samples: 2_000,
        }
    }
}

/// The figures `bps-bench verify` reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// Old path: recovery and scalar BMT per chunk.
    pub naive_socs_per_s: f64,
    /// The pool's real path on a same-owner stream.
    pub pipeline_socs_per_s: f64,
    /// Median µs of one BMT root of a `payload_bytes` payload, scalar keccak.
    pub bmt_scalar_us: f64,
    /// The same with the widest keccak this CPU runs ([`Measurement::lanes`]).
    pub bmt_multilane_us: f64,
    /// The keccak implementation behind `bmt_multilane_us` and the pipeline.
    pub lanes: Lanes,
    /// Mean jobs per batch in the pipeline run.
    pub pipeline_batch_jobs_mean: f64,
}

impl Measurement {
    /// `pipeline_socs_per_s / naive_socs_per_s` (target: at least 3).
    pub fn pipeline_speedup(&self) -> f64 {
        self.pipeline_socs_per_s / self.naive_socs_per_s
    }

    /// `bmt_scalar_us / bmt_multilane_us` (target: at least 3).
    pub fn bmt_speedup(&self) -> f64 {
        self.bmt_scalar_us / self.bmt_multilane_us
    }
}

/// Runs both paths and the BMT timings on the calling thread (module docs).
///
/// # Panics
/// If `chunks`, `duration_ms` or `bmt_samples` is zero, `payload_bytes` exceeds 4096,
/// the pool config is invalid ([`Pool::start`]), or a chunk is rejected.
pub fn measure(config: &MeasureConfig) -> Measurement {
    assert!(
        config.chunks > 0 && config.duration_ms > 0 && config.bmt_samples > 0,
        "measure needs chunks, time and samples"
    );
    assert!(
        config.payload_bytes <= CHUNK_SIZE,
        "payload of {} bytes exceeds the chunk size {CHUNK_SIZE}",
        config.payload_bytes
    );
    let key = SigningKey::from_bytes(&keccak256(b"bps-verify measure key"))
        .expect("a keccak digest below the group order is a valid key");
    let owner = key.address();
    let chunks: Vec<(Bytes, Hash)> = (0..config.chunks)
        .map(|index| {
            let id = keccak256(&(index as u64).to_be_bytes());
            let payload = payload_of(index, config.payload_bytes);
            let chunk = sign_soc(&key, &id, payload.len() as u64, &payload);
            (chunk, soc_address(id, owner))
        })
        .collect();
    let duration = Duration::from_millis(config.duration_ms);
    let warm_up = duration / 5;

    let naive_socs_per_s = {
        run_naive(&chunks, warm_up);
        run_naive(&chunks, duration)
    };

    let requests: Vec<VerifyRequest> = chunks
        .iter()
        .map(|(chunk, _)| VerifyRequest {
            chunk: chunk.clone(),
            expect: Expect::At { owner },
        })
        .collect();
    let (sender, finished) = channel::unbounded::<(usize, usize)>();
    let pool = Pool::start(
        PoolConfig {
            workers: 1,
            ..config.pool
        },
        |_| {},
        move |batch: Vec<Done<usize>>| {
            let rejected = batch.iter().filter(|done| done.result.is_err()).count();
            // The measuring thread may have stopped listening; then the count is moot.
            let _ = sender.send((batch.len(), rejected));
        },
    );
    run_pipeline(&pool, &requests, &finished, warm_up);
    let (pipeline_socs_per_s, pipeline_batch_jobs_mean) =
        run_pipeline(&pool, &requests, &finished, duration);
    drop(pool);

    let full_payload = payload_of(0, config.payload_bytes);
    let lanes = Lanes::fastest();
    Measurement {
        naive_socs_per_s,
        pipeline_socs_per_s,
        bmt_scalar_us: median_us(config.bmt_samples, || {
            black_box(bmt_root_with(Lanes::Scalar, black_box(&full_payload)));
        }),
        bmt_multilane_us: median_us(config.bmt_samples, || {
            black_box(bmt_root_with(lanes, black_box(&full_payload)));
        }),
        lanes,
        pipeline_batch_jobs_mean,
    }
}

/// Distinct, incompressible-looking payload bytes for chunk `index`.
fn payload_of(index: usize, len: usize) -> Vec<u8> {
    let seed = keccak256(&(index as u64).to_le_bytes());
    (0..len)
        .map(|at| seed[at % seed.len()] ^ (at as u8).wrapping_mul(131))
        .collect()
}

/// Chunks per second of the old path over `duration`.
fn run_naive(chunks: &[(Bytes, Hash)], duration: Duration) -> f64 {
    let start = Instant::now();
    let mut verified = 0u64;
    for (chunk, address) in chunks.iter().cycle() {
        let outcome = validate_soc_at_with(Lanes::Scalar, chunk, address);
        assert!(outcome.is_ok(), "measure: a pre-signed chunk was rejected");
        black_box(outcome.ok());
        verified += 1;
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return verified as f64 / elapsed.as_secs_f64();
        }
    }
    0.0
}

/// Chunks per second through `pool` over `duration` (until the jobs in flight at its end
/// are done), and the mean batch size: the calling thread keeps the queue full and
/// counts completed jobs.
fn run_pipeline(
    pool: &Pool<usize>,
    requests: &[VerifyRequest],
    finished: &Receiver<(usize, usize)>,
    duration: Duration,
) -> (f64, f64) {
    let start = Instant::now();
    let mut next = 0usize;
    let mut in_flight = 0usize;
    let mut completed = 0u64;
    let mut batches = 0u64;
    loop {
        if start.elapsed() < duration {
            loop {
                let request = requests[next % requests.len()].clone();
                if pool.submit(next, request).is_err() {
                    break;
                }
                next += 1;
                in_flight += 1;
            }
        } else if in_flight == 0 {
            break;
        }
        let Ok((jobs, rejected)) = finished.recv() else {
            break;
        };
        assert_eq!(rejected, 0, "measure: a pre-signed chunk was rejected");
        in_flight -= jobs;
        completed += jobs as u64;
        batches += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    (
        completed as f64 / elapsed,
        completed as f64 / batches.max(1) as f64,
    )
}

/// Median µs per call of `op`, timed in `samples` samples of a few calls each.
fn median_us(samples: usize, mut op: impl FnMut()) -> f64 {
    const CALLS_PER_SAMPLE: u32 = 4;
    op();
    let mut per_call: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..CALLS_PER_SAMPLE {
                op();
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(CALLS_PER_SAMPLE)
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    per_call[per_call.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_reports_every_figure() {
        let measurement = measure(&MeasureConfig {
            chunks: 8,
            payload_bytes: 100,
            duration_ms: 40,
            bmt_samples: 5,
            pool: PoolConfig {
                queue_jobs_max: 16,
                batch_jobs_max: 4,
                ..PoolConfig::default()
            },
        });
        assert!(measurement.naive_socs_per_s > 0.0);
        assert!(measurement.pipeline_socs_per_s > 0.0);
        assert!(measurement.bmt_scalar_us > 0.0 && measurement.bmt_multilane_us > 0.0);
        assert!((1.0..=4.0).contains(&measurement.pipeline_batch_jobs_mean));
        assert_eq!(measurement.lanes, Lanes::fastest());
        assert!(measurement.pipeline_speedup() > 0.0 && measurement.bmt_speedup() > 0.0);
    }
}
