//! `bps-bench verify`: the single-core verification ceiling, the denominator of the
//! ingest target (verified publications per second on one core).
//!
//! Owns: [`measure_verify`]: sign one DATA publication of `size` payload bytes once, then
//! run the broker's own verification job (`bps_verify::verify` with `Expect::At`, what the
//! pool runs per publication) on it in a loop on one pinned core for the given time, and
//! report SOCs per second and the per-call latency distribution; [`VerifyCeiling`] is the
//! figures. [`measure_pipeline`] runs the verification comparison of
//! [`verify_measure`](crate::load::verify_measure) (the old path against the pool's, on a
//! single-publisher and a many-publisher shape, and scalar against multi-lane BMT) on the
//! same core;
//! [`PipelineFigures`] is its figures under the report's names. Both are merged into the
//! report by [`crate::load::report::Report::merge_figures`].
//!
//! Never: touches the network.

use std::time::{Duration, Instant};

use bps_proto::{Address, Kind, keccak256};
use bps_verify::{Expect, SigningKey, VerifyRequest, sign_broadcast, validate_soc_at, verify};
use serde::Serialize;

use crate::load::latency::{Latency, LatencySummary};
use crate::load::stamp::{Stamp, payload};
use crate::load::verify_measure::{MeasureConfig, Measurement, measure};

/// Calls between clock reads (a read costs far less than a verification, but not nothing).
const CALLS_PER_CLOCK_READ: u32 = 16;

/// The verification ceiling's figures.
#[derive(Debug, Clone, Serialize)]
pub struct VerifyCeiling {
    /// Full SOC verifications per second on one core (`bps_verify::verify`, `Expect::At`).
    pub verify_socs_per_s: f64,
    /// Microseconds per verification, per batch of calls.
    pub verify_us: LatencySummary,
    /// Verifications run.
    pub verify_iterations: u64,
    /// Payload bytes of the verified chunk.
    pub verify_payload_bytes: usize,
    /// The CPU the loop was pinned to (`null`: not pinned).
    pub verify_cpu: Option<usize>,
}

/// Why the ceiling could not be measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CeilingError(pub String);

impl std::fmt::Display for CeilingError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for CeilingError {}

/// Signs once, then verifies for `duration` on `cpu` (module docs).
pub fn measure_verify(
    size: usize,
    duration: Duration,
    cpu: Option<usize>,
    seed: u64,
) -> Result<VerifyCeiling, CeilingError> {
    if let Some(id) = cpu
        && !core_affinity::set_for_current(core_affinity::CoreId { id })
    {
        return Err(CeilingError(format!("cannot pin to CPU {id}")));
    }
    let (request, owner) = signed_request(size, seed)?;
    let mut latency = Latency::new();
    let mut iterations = 0u64;
    let started = Instant::now();
    while started.elapsed() < duration {
        let batch_started = Instant::now();
        for _ in 0..CALLS_PER_CLOCK_READ {
            verify_once(&request, owner)?;
        }
        let per_call = batch_started.elapsed() / CALLS_PER_CLOCK_READ;
        latency.record_ns(u64::try_from(per_call.as_nanos()).unwrap_or(u64::MAX));
        iterations += u64::from(CALLS_PER_CLOCK_READ);
    }
    let elapsed = started.elapsed().as_secs_f64();
    Ok(VerifyCeiling {
        verify_socs_per_s: (iterations as f64 / elapsed).round(),
        verify_us: latency.summary(),
        verify_iterations: iterations,
        verify_payload_bytes: size,
        verify_cpu: cpu,
    })
}

/// One DATA publication of `size` payload bytes signed under the key of `seed`, as the
/// job the pool runs on it, and its owner; it passes both the job and the plain
/// validation before it is timed.
fn signed_request(size: usize, seed: u64) -> Result<(VerifyRequest, Address), CeilingError> {
    let key = SigningKey::from_bytes(&keccak256(&seed.to_le_bytes()))
        .map_err(|error| CeilingError(format!("key from seed: {error}")))?;
    let owner = key.address();
    let body = payload(
        &Stamp {
            publisher: 0,
            sequence: 0,
            intended_ns: 0,
            cohort: 0,
        },
        size,
    );
    let signed = sign_broadcast(&key, Kind::Data, &[0x42; 32], &[0x17; 32], 0, &body);
    let request = VerifyRequest {
        chunk: signed.chunk.clone(),
        expect: Expect::At { owner },
    };
    // The chunk must pass both the job and the plain validation before it is timed.
    let verified =
        verify(&request).map_err(|error| CeilingError(format!("self-check: {error}")))?;
    validate_soc_at(&signed.chunk, &verified.address)
        .map_err(|error| CeilingError(format!("self-check: {error}")))?;
    Ok((request, owner))
}

/// One timed verification, which must recover `owner`.
fn verify_once(request: &VerifyRequest, owner: Address) -> Result<(), CeilingError> {
    match verify(request) {
        Ok(result) if result.owner == owner => Ok(()),
        Ok(result) => Err(CeilingError(format!(
            "verification recovered 0x{} instead of 0x{}",
            hex::encode(result.owner),
            hex::encode(owner)
        ))),
        Err(error) => Err(CeilingError(format!("verification failed: {error}"))),
    }
}

/// [`measure`]'s figures as the report names them (all rates in SOCs per second
/// on the one core, µs per BMT root).
#[derive(Debug, Clone, Serialize)]
pub struct PipelineFigures {
    /// Single publisher, old path: recovery and scalar BMT per chunk.
    pub naive_socs_per_s: f64,
    /// Single publisher, the pool's real path (multi-lane BMT, cached key, batched ECDSA).
    pub pipeline_socs_per_s: f64,
    /// `pipeline_socs_per_s / naive_socs_per_s`.
    pub pipeline_speedup: f64,
    /// Mean jobs per pool batch in the single-publisher run.
    pub pipeline_batch_jobs_mean: f64,
    /// One BMT root of a `size`-byte payload, scalar keccak.
    pub bmt_scalar_us: f64,
    /// The same with the widest keccak this CPU runs (`bmt_lanes`).
    pub bmt_multilane_us: f64,
    /// `bmt_scalar_us / bmt_multilane_us`.
    pub bmt_speedup: f64,
    /// The keccak implementation behind `bmt_multilane_us` and the pipeline.
    pub bmt_lanes: String,
    /// Publishers of the many-publisher shape (chunks signed round robin).
    pub many_owners: usize,
    /// Many publishers, old path.
    pub many_naive_socs_per_s: f64,
    /// Many publishers, a warm verifier called once per owner of each batch: one check
    /// per owner, the grouping before multi-key batches.
    pub many_per_owner_socs_per_s: f64,
    /// Many publishers, a warm verifier called once per batch: one multi-key check.
    pub many_multi_key_socs_per_s: f64,
    /// `many_multi_key_socs_per_s / many_per_owner_socs_per_s`.
    pub multi_key_speedup: f64,
    /// Many publishers, the pool's real path.
    pub many_pipeline_socs_per_s: f64,
    /// `many_pipeline_socs_per_s / many_naive_socs_per_s`.
    pub many_pipeline_speedup: f64,
    /// Mean jobs per pool batch in the many-publisher run.
    pub many_pipeline_batch_jobs_mean: f64,
}

impl From<&Measurement> for PipelineFigures {
    fn from(measurement: &Measurement) -> Self {
        Self {
            naive_socs_per_s: measurement.naive_socs_per_s,
            pipeline_socs_per_s: measurement.pipeline_socs_per_s,
            pipeline_speedup: measurement.pipeline_speedup(),
            pipeline_batch_jobs_mean: measurement.pipeline_batch_jobs_mean,
            bmt_scalar_us: measurement.bmt_scalar_us,
            bmt_multilane_us: measurement.bmt_multilane_us,
            bmt_speedup: measurement.bmt_speedup(),
            bmt_lanes: measurement.lanes.to_string(),
            many_owners: measurement.owners,
            many_naive_socs_per_s: measurement.many_naive_socs_per_s,
            many_per_owner_socs_per_s: measurement.many_per_owner_socs_per_s,
            many_multi_key_socs_per_s: measurement.many_multi_key_socs_per_s,
            multi_key_speedup: measurement.multi_key_speedup(),
            many_pipeline_socs_per_s: measurement.many_pipeline_socs_per_s,
            many_pipeline_speedup: measurement.many_pipeline_speedup(),
            many_pipeline_batch_jobs_mean: measurement.many_pipeline_batch_jobs_mean,
        }
    }
}

/// Runs [`measure`] on the calling thread (pin it first: see
/// [`measure_verify`]) with `size`-byte payloads, `duration` per path and `owners`
/// publishers in the many-publisher shape; the rest is its default configuration.
///
/// # Panics
/// If `size` exceeds 4096, `duration` is zero or `owners` is zero (the caller checks
/// its arguments first).
pub fn measure_pipeline(size: usize, duration: Duration, owners: usize) -> PipelineFigures {
    let measurement = measure(&MeasureConfig {
        payload_bytes: size,
        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
        owners,
        ..MeasureConfig::default()
    });
    PipelineFigures::from(&measurement)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bps_verify::Lanes;

    /// The report keeps the figure names other tools read, next to the new ones.
    #[test]
    fn pipeline_figures_keep_the_report_names() {
        let measurement = Measurement {
            naive_socs_per_s: 1000.0,
            pipeline_socs_per_s: 5000.0,
            bmt_scalar_us: 30.0,
            bmt_multilane_us: 10.0,
            lanes: Lanes::Scalar,
            pipeline_batch_jobs_mean: 60.0,
            owners: 64,
            many_naive_socs_per_s: 990.0,
            many_per_owner_socs_per_s: 2000.0,
            many_multi_key_socs_per_s: 3000.0,
            many_pipeline_socs_per_s: 2970.0,
            many_pipeline_batch_jobs_mean: 62.0,
        };
        let value = serde_json::to_value(PipelineFigures::from(&measurement)).expect("JSON");
        for (name, expected) in [
            ("naive_socs_per_s", 1000.0),
            ("pipeline_socs_per_s", 5000.0),
            ("bmt_scalar_us", 30.0),
            ("bmt_multilane_us", 10.0),
            ("pipeline_speedup", 5.0),
            ("bmt_speedup", 3.0),
            ("many_naive_socs_per_s", 990.0),
            ("many_per_owner_socs_per_s", 2000.0),
            ("many_multi_key_socs_per_s", 3000.0),
            ("multi_key_speedup", 1.5),
            ("many_pipeline_socs_per_s", 2970.0),
            ("many_pipeline_speedup", 3.0),
            ("many_pipeline_batch_jobs_mean", 62.0),
        ] {
            assert_eq!(value[name].as_f64(), Some(expected), "{name}");
        }
        assert_eq!(value["many_owners"], 64);
        assert_eq!(value["bmt_lanes"], Lanes::Scalar.to_string());
    }
}
