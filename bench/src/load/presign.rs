//! Signing every message of a run before it starts, on every core, with the client
//! library's publisher.
//!
//! Owns: [`presign`], which splits a publisher's sequence into one contiguous range per
//! worker; each worker drives its own [`Publisher`] (the same key, the stream's challenge,
//! DATA indices starting at its range) exactly as a live client would, and keeps the
//! encoded frames; and [`signing_cost`], a short calibration that lets the caller place the
//! open-loop `t0` after signing will have finished.
//!
//! Signing needs the challenge from the stream's `Ack` (R4, R41), so it runs after the
//! Join and before `t0`; afterwards a publisher only copies bytes, and signing can never
//! throttle the offered load.
//!
//! Never: writes to a socket.

use std::time::{Duration, Instant};

use bps_proto::{Hash, Spec};
use bps_verify::SigningKey;
use bytes::Bytes;

use bps_client::publisher::{PublishError, Publisher, PublisherConfig, Role};

/// What to sign for one publisher.
#[derive(Debug, Clone)]
pub struct SignJob<'a> {
    /// The cohort.
    pub spec: Spec,
    /// The publisher's key.
    pub key: &'a SigningKey,
    /// The live stream's challenge.
    pub challenge: Hash,
    /// DATA index of sequence 0.
    pub base_index: u64,
    /// Messages to sign.
    pub count: u64,
}

/// Signs `job.count` DATA frames, payload `payload(sequence)`, on `workers` threads;
/// returns the encoded frames (varint and body) by sequence.
pub fn presign(
    job: &SignJob<'_>,
    workers: usize,
    payload: &(dyn Fn(u64) -> Vec<u8> + Sync),
) -> Result<Vec<Bytes>, PublishError> {
    let workers = workers.max(1) as u64;
    let per_worker = job.count.div_ceil(workers).max(1);
    let ranges: Vec<(u64, u64)> = (0..workers)
        .map(|worker| {
            let start = (worker * per_worker).min(job.count);
            (start, (start + per_worker).min(job.count))
        })
        .filter(|(start, end)| start < end)
        .collect();
    let parts = std::thread::scope(|scope| {
        let handles: Vec<_> = ranges
            .iter()
            .map(|&(start, end)| scope.spawn(move || sign_range(job, start, end, payload)))
            .collect();
        handles
            .into_iter()
            .map(|handle| match handle.join() {
                Ok(result) => result,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect::<Vec<_>>()
    });
    let mut frames = Vec::with_capacity(usize::try_from(job.count).unwrap_or(0));
    for part in parts {
        frames.extend(part?);
    }
    Ok(frames)
}

fn sign_range(
    job: &SignJob<'_>,
    start: u64,
    end: u64,
    payload: &(dyn Fn(u64) -> Vec<u8> + Sync),
) -> Result<Vec<Bytes>, PublishError> {
    let mut publisher = session_publisher(job, start)?;
    let mut frames = Vec::with_capacity(usize::try_from(end - start).unwrap_or(0));
    for sequence in start..end {
        frames.extend(sign_next(&mut publisher, payload(sequence))?);
    }
    Ok(frames)
}

/// A publisher in `job`'s live session whose next DATA frame is sequence `start`.
pub(crate) fn session_publisher(job: &SignJob<'_>, start: u64) -> Result<Publisher, PublishError> {
    let config = PublisherConfig {
        data_index_start: job.base_index + start,
        ..PublisherConfig::default()
    };
    // The plan only builds explicit and ALL cohorts, which fit any key.
    let mut publisher = Publisher::new(job.spec, job.key.clone(), config)
        .unwrap_or_else(|error| panic!("plan built a spec the key cannot publish in: {error}"));
    publisher.begin_session(job.challenge);
    if publisher.role() == Some(Role::Pending) {
        // The claim went out on the live stream already; this copy only needs the state.
        publisher.next_frame()?;
        publisher.mark_sent();
    }
    Ok(publisher)
}

/// Signs the next DATA frame of `publisher` around `payload`; the encoded frame.
pub(crate) fn sign_next(
    publisher: &mut Publisher,
    payload: Vec<u8>,
) -> Result<Option<Bytes>, PublishError> {
    publisher.enqueue_data(payload)?;
    let signed = publisher
        .next_frame()?
        .map(|outgoing| outgoing.signed.frame);
    if signed.is_some() {
        publisher.mark_sent();
    }
    Ok(signed)
}

/// The time to sign one message of `size` payload bytes on one core (a few samples with a
/// throwaway key).
pub fn signing_cost(spec: Spec, size: usize) -> Duration {
    const SAMPLES: u32 = 4;
    let key = SigningKey::random();
    let job = SignJob {
        spec: Spec {
            admin: Some(key.address()),
            all: false,
            ..spec
        },
        key: &key,
        challenge: [0; 32],
        base_index: 0,
        count: u64::from(SAMPLES),
    };
    let started = Instant::now();
    let signed = sign_range(&job, 0, u64::from(SAMPLES), &|_| vec![0x5a; size]);
    let elapsed = started.elapsed();
    match signed {
        Ok(_) => elapsed / SAMPLES,
        Err(_) => Duration::ZERO,
    }
}
