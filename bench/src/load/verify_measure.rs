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
//! Two shapes of pre-signed `Expect::At` streams (as under explicit authorship), both of
//! `chunks` distinct chunks cycled through: the single-publisher shape (one owner) and the
//! many-publisher shape (`owners` owners, chunk `i` signed by owner `i mod owners`, so
//! the owners take turns chunk by chunk, as in a busy group chat). Figures:
//!
//! - `naive_socs_per_s` / `many_naive_socs_per_s`: the old path, bee's `soc.Valid` by
//!   recovery with the scalar BMT ([`bps_verify::validate_soc_at_with`] and
//!   [`Lanes::Scalar`]), one chunk after another on the calling thread, on each shape.
//! - `pipeline_socs_per_s` / `many_pipeline_socs_per_s`: the pool's real path: a
//!   one-worker [`Pool`] fed by the calling thread, which keeps the queue full:
//!   multi-lane BMT, owner keys cached after each owner's first chunk, one batched ECDSA
//!   check per batch for all cached owners. Counted after a warm-up (which also warms
//!   every owner's key), over completions.
//! - `many_per_owner_socs_per_s` / `many_multi_key_socs_per_s`: the many-publisher shape
//!   through one warm [`Verifier`] on the calling thread, in batches of the pool's
//!   `batch_jobs_max` consecutive chunks, without the pool's hand-off. Per owner: each
//!   batch is split into one `verify_batch` call per owner, which is the grouping before
//!   multi-key batches (one check per owner: a lone chunk gets the single check). Multi
//!   key: each batch in one call, one check for all owners. The two differ only in
//!   grouping, so their ratio is the effect of checking several keys at once.
//! - `bmt_scalar_us` / `bmt_multilane_us`: median time of one BMT root of a full payload
//!   with the scalar keccak and with [`Lanes::fastest`].
//!
//! Every chunk is valid; a rejection on any path is a bug and panics.

use std::hint::black_box;
use std::time::{Duration, Instant};

use std::sync::mpsc::{self as channel, Receiver};

use bps_proto::{Address, Hash, keccak256, soc_address};
use bps_verify::pool::{Done, Pool, PoolConfig};
use bps_verify::{
    CHUNK_SIZE, Expect, Lanes, SigningKey, Verifier, VerifyRequest, bmt_root_with, sign_soc,
    validate_soc_at_with,
};
use bytes::Bytes;

/// What to measure and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasureConfig {
    /// Distinct pre-signed chunks per shape, cycled through by every path.
    pub chunks: usize,
    /// Payload bytes per chunk (at most 4096).
    pub payload_bytes: usize,
    /// Measuring time per path, after a warm-up of a fifth of it.
    pub duration_ms: u64,
    /// The pipeline's pool (its `workers` is ignored: one worker). Its `batch_jobs_max`
    /// is also the batch size of the per-owner and multi-key runs, and its
    /// `key_cache_keys_max` must hold `owners` keys for those to stay warm.
    pub pool: PoolConfig,
    /// BMT timing samples per implementation.
    pub bmt_samples: usize,
    /// Publishers of the many-publisher shape.
    pub owners: usize,
}

impl Default for MeasureConfig {
    /// 1024 chunks of 4 KiB per shape, 2 s per path, batches of up to 64 from a queue of
    /// 256, 64 publishers in the many-publisher shape.
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
            owners: 64,
        }
    }
}

/// The figures `bps-bench verify` reports (module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// Old path: recovery and scalar BMT per chunk, single-publisher shape.
    pub naive_socs_per_s: f64,
    /// The pool's real path, single-publisher shape.
    pub pipeline_socs_per_s: f64,
    /// Median µs of one BMT root of a `payload_bytes` payload, scalar keccak.
    pub bmt_scalar_us: f64,
    /// The same with the widest keccak this CPU runs ([`Measurement::lanes`]).
    pub bmt_multilane_us: f64,
    /// The keccak implementation behind `bmt_multilane_us` and the pipeline.
    pub lanes: Lanes,
    /// Mean jobs per batch in the single-publisher pipeline run.
    pub pipeline_batch_jobs_mean: f64,
    /// Publishers of the many-publisher shape.
    pub owners: usize,
    /// Old path on the many-publisher shape.
    pub many_naive_socs_per_s: f64,
    /// Warm verifier, each batch split by owner (the grouping before multi-key batches).
    pub many_per_owner_socs_per_s: f64,
    /// Warm verifier, each batch in one call: one multi-key check per batch.
    pub many_multi_key_socs_per_s: f64,
    /// The pool's real path on the many-publisher shape.
    pub many_pipeline_socs_per_s: f64,
    /// Mean jobs per batch in the many-publisher pipeline run.
    pub many_pipeline_batch_jobs_mean: f64,
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

    /// `many_pipeline_socs_per_s / many_naive_socs_per_s`.
    pub fn many_pipeline_speedup(&self) -> f64 {
        self.many_pipeline_socs_per_s / self.many_naive_socs_per_s
    }

    /// `many_multi_key_socs_per_s / many_per_owner_socs_per_s`: what checking several
    /// keys at once gains over one check per owner.
    pub fn multi_key_speedup(&self) -> f64 {
        self.many_multi_key_socs_per_s / self.many_per_owner_socs_per_s
    }
}

/// One shape's pre-signed chunks: each with its expected SOC address (for the naive
/// path), as an `Expect::At` request (for the others), and its owner.
struct Shape {
    chunks: Vec<(Bytes, Hash)>,
    requests: Vec<VerifyRequest>,
    owners: Vec<Address>,
}

impl Shape {
    /// `count` chunks of `payload_bytes`, chunk `i` signed by `keys[i mod keys.len()]`.
    fn signed(keys: &[SigningKey], count: usize, payload_bytes: usize) -> Self {
        let chunks: Vec<(Bytes, Hash)> = (0..count)
            .map(|index| {
                let key = &keys[index % keys.len()];
                let id = keccak256(&(index as u64).to_be_bytes());
                let payload = payload_of(index, payload_bytes);
                let chunk = sign_soc(key, &id, payload.len() as u64, &payload);
                (chunk, soc_address(id, key.address()))
            })
            .collect();
        let owners: Vec<Address> = (0..count)
            .map(|index| keys[index % keys.len()].address())
            .collect();
        let requests = chunks
            .iter()
            .zip(&owners)
            .map(|((chunk, _), owner)| VerifyRequest {
                chunk: chunk.clone(),
                expect: Expect::At { owner: *owner },
            })
            .collect();
        Self {
            chunks,
            requests,
            owners,
        }
    }
}

/// Runs every path and the BMT timings on the calling thread (module docs).
///
/// # Panics
/// If `chunks`, `duration_ms`, `bmt_samples` or `owners` is zero, `payload_bytes`
/// exceeds 4096, the pool config is invalid ([`Pool::start`]), or a chunk is rejected.
pub fn measure(config: &MeasureConfig) -> Measurement {
    assert!(
        config.chunks > 0 && config.duration_ms > 0 && config.bmt_samples > 0,
        "measure needs chunks, time and samples"
    );
    assert!(config.owners > 0, "the many-publisher shape needs an owner");
    assert!(
        config.payload_bytes <= CHUNK_SIZE,
        "payload of {} bytes exceeds the chunk size {CHUNK_SIZE}",
        config.payload_bytes
    );
    let keys = owner_keys(config.owners);
    let single = Shape::signed(&keys[..1], config.chunks, config.payload_bytes);
    let many = Shape::signed(&keys, config.chunks, config.payload_bytes);
    let duration = Duration::from_millis(config.duration_ms);
    let timed = |run: &mut dyn FnMut(Duration) -> f64| {
        run(duration / 5);
        run(duration)
    };

    let naive_socs_per_s = timed(&mut |time| run_naive(&single.chunks, time));
    let (pool, finished) = start_pool(config.pool);
    run_pipeline(&pool, &single.requests, &finished, duration / 5);
    let (pipeline_socs_per_s, pipeline_batch_jobs_mean) =
        run_pipeline(&pool, &single.requests, &finished, duration);

    let many_naive_socs_per_s = timed(&mut |time| run_naive(&many.chunks, time));
    let batch_jobs = config.pool.batch_jobs_max;
    let per_owner_calls = calls_per_owner(&many, batch_jobs);
    let multi_key_calls: Vec<&[VerifyRequest]> = many.requests.chunks(batch_jobs).collect();
    let mut verifier = Verifier::new(config.pool.key_cache_keys_max);
    let many_per_owner_socs_per_s =
        timed(&mut |time| run_verifier(&mut verifier, &per_owner_calls, time));
    let many_multi_key_socs_per_s =
        timed(&mut |time| run_verifier(&mut verifier, &multi_key_calls, time));
    run_pipeline(&pool, &many.requests, &finished, duration / 5);
    let (many_pipeline_socs_per_s, many_pipeline_batch_jobs_mean) =
        run_pipeline(&pool, &many.requests, &finished, duration);
    drop(pool);

    let lanes = Lanes::fastest();
    let (bmt_scalar_us, bmt_multilane_us) = bmt_timings(config, lanes);
    Measurement {
        naive_socs_per_s,
        pipeline_socs_per_s,
        bmt_scalar_us,
        bmt_multilane_us,
        lanes,
        pipeline_batch_jobs_mean,
        owners: config.owners,
        many_naive_socs_per_s,
        many_per_owner_socs_per_s,
        many_multi_key_socs_per_s,
        many_pipeline_socs_per_s,
        many_pipeline_batch_jobs_mean,
    }
}

/// The pipeline's one-worker pool, and where each finished batch's size and rejections
/// arrive.
fn start_pool(config: PoolConfig) -> (Pool<usize>, Receiver<(usize, usize)>) {
    let (sender, finished) = channel::channel::<(usize, usize)>();
    let pool = Pool::start(
        PoolConfig {
            workers: 1,
            ..config
        },
        |_| {},
        move |batch: Vec<Done<usize>>| {
            let rejected = batch.iter().filter(|done| done.result.is_err()).count();
            // The measuring thread may have stopped listening; then the count is moot.
            let _ = sender.send((batch.len(), rejected));
        },
    );
    (pool, finished)
}

/// The many-publisher shape's `owners` signing keys, derived from their index (the first
/// one is the single-publisher shape's).
fn owner_keys(owners: usize) -> Vec<SigningKey> {
    (0..owners)
        .map(|index| {
            let seed = [b"bps-verify measure key".as_slice(), &index.to_be_bytes()].concat();
            SigningKey::from_bytes(&keccak256(&seed))
                .expect("a keccak digest below the group order is a valid key")
        })
        .collect()
}

/// Median µs of one BMT root of a full payload, scalar keccak and then `lanes`.
fn bmt_timings(config: &MeasureConfig, lanes: Lanes) -> (f64, f64) {
    let full_payload = payload_of(0, config.payload_bytes);
    let scalar = median_us(config.bmt_samples, || {
        black_box(bmt_root_with(Lanes::Scalar, black_box(&full_payload)));
    });
    let multilane = median_us(config.bmt_samples, || {
        black_box(bmt_root_with(lanes, black_box(&full_payload)));
    });
    (scalar, multilane)
}

/// The shape's requests cut into batches of `batch_jobs`, each batch split into one call
/// per owner (in job order within an owner, as the verifier groups a batch).
fn calls_per_owner(shape: &Shape, batch_jobs: usize) -> Vec<Vec<VerifyRequest>> {
    let mut calls = Vec::new();
    for (requests, owners) in shape
        .requests
        .chunks(batch_jobs)
        .zip(shape.owners.chunks(batch_jobs))
    {
        let mut pairs: Vec<(Address, &VerifyRequest)> =
            owners.iter().copied().zip(requests).collect();
        // Stable: job order is kept within an owner.
        pairs.sort_by_key(|(owner, _)| *owner);
        for group in pairs.chunk_by(|first, second| first.0 == second.0) {
            calls.push(
                group
                    .iter()
                    .map(|(_, request)| (*request).clone())
                    .collect(),
            );
        }
    }
    calls
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

/// Chunks per second through `verifier` over `duration`, one `verify_batch` per call in
/// `calls`, cycled through.
fn run_verifier<C: AsRef<[VerifyRequest]>>(
    verifier: &mut Verifier,
    calls: &[C],
    duration: Duration,
) -> f64 {
    let start = Instant::now();
    let mut verified = 0u64;
    let mut results = Vec::new();
    for call in calls.iter().cycle() {
        results.clear();
        verifier.verify_batch(call.as_ref(), &mut results);
        assert!(
            results.iter().all(Result::is_ok),
            "measure: a pre-signed chunk was rejected"
        );
        verified += results.len() as u64;
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
                if pool.submit(0, next, request).is_err() {
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
            owners: 3,
        });
        assert!(measurement.naive_socs_per_s > 0.0);
        assert!(measurement.pipeline_socs_per_s > 0.0);
        assert!(measurement.bmt_scalar_us > 0.0 && measurement.bmt_multilane_us > 0.0);
        assert!((1.0..=4.0).contains(&measurement.pipeline_batch_jobs_mean));
        assert_eq!(measurement.lanes, Lanes::fastest());
        assert!(measurement.pipeline_speedup() > 0.0 && measurement.bmt_speedup() > 0.0);
        assert_eq!(measurement.owners, 3);
        for figure in [
            measurement.many_naive_socs_per_s,
            measurement.many_per_owner_socs_per_s,
            measurement.many_multi_key_socs_per_s,
            measurement.many_pipeline_socs_per_s,
        ] {
            assert!(figure > 0.0, "{measurement:?}");
        }
        assert!((1.0..=4.0).contains(&measurement.many_pipeline_batch_jobs_mean));
        assert!(measurement.many_pipeline_speedup() > 0.0);
        assert!(measurement.multi_key_speedup() > 0.0);
    }

    #[test]
    fn per_owner_calls_hold_one_owner_each_and_every_chunk_once() {
        let keys: Vec<SigningKey> = (1..=3u8)
            .map(|seed| SigningKey::from_bytes(&[seed; 32]).expect("valid key"))
            .collect();
        let shape = Shape::signed(&keys, 8, 1);
        let calls = calls_per_owner(&shape, 4);
        // Batch 0 has owners 0, 1, 2, 0 and batch 1 owners 1, 2, 0, 1: three calls each.
        let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 8);
        assert_eq!(calls.len(), 6);
        let mut seen: Vec<Bytes> = Vec::new();
        for call in &calls {
            let owners: Vec<Expect> = call.iter().map(|request| request.expect).collect();
            assert!(
                owners.windows(2).all(|pair| pair[0] == pair[1]),
                "{owners:?}"
            );
            seen.extend(call.iter().map(|request| request.chunk.clone()));
        }
        let mut all: Vec<Bytes> = shape
            .requests
            .iter()
            .map(|request| request.chunk.clone())
            .collect();
        seen.sort();
        all.sort();
        assert_eq!(seen, all);
        // Within an owner, job order: owner 0's chunks 0 and 3 in batch 0.
        let owner_zero = Expect::At {
            owner: keys[0].address(),
        };
        let first = calls
            .iter()
            .find(|call| call[0].expect == owner_zero)
            .expect("owner 0 has a call");
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].chunk, shape.requests[0].chunk);
        assert_eq!(first[1].chunk, shape.requests[3].chunk);
    }
}
