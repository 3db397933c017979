//! `bps-bench verify`: the single-core verification ceiling, the denominator of the
//! ingest target (verified publications per second on one core).
//!
//! Owns: [`measure_verify`]: sign one DATA publication of `size` payload bytes once, then
//! run the broker's own verification job (`bps_verify::verify` with `Expect::At`, what the
//! pool runs per publication) on it in a loop on one pinned core for the given time, and
//! report SOCs per second and the per-call latency distribution; [`VerifyCeiling`] is the
//! figures, merged into the report by [`crate::load::report::Report::merge_figures`], the
//! same call that will merge the verification crate's own measurements (naive vs pipeline
//! SOCs/s, scalar vs multi-lane BMT) once it exports them.
//!
//! Never: touches the network.

use std::time::{Duration, Instant};

use bps_proto::{Kind, keccak256};
use bps_verify::{Expect, SigningKey, VerifyRequest, sign_broadcast, validate_soc_at, verify};
use serde::Serialize;

use crate::load::latency::{Latency, LatencySummary};
use crate::load::stamp::{Stamp, payload};

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

    let mut latency = Latency::new();
    let mut iterations = 0u64;
    let started = Instant::now();
    while started.elapsed() < duration {
        let batch_started = Instant::now();
        for _ in 0..CALLS_PER_CLOCK_READ {
            match verify(&request) {
                Ok(result) if result.owner == owner => {}
                Ok(result) => {
                    return Err(CeilingError(format!(
                        "verification recovered 0x{} instead of 0x{}",
                        hex::encode(result.owner),
                        hex::encode(owner)
                    )));
                }
                Err(error) => return Err(CeilingError(format!("verification failed: {error}"))),
            }
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
