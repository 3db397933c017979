//! Step 4 of a run (module docs of [`run`](super)), the receiving side: who reads what.
//!
//! Owns: [`Readers`] (the report's `verification`, and how many subscribers read or count
//! per cohort) and the receiving endpoints in one bucket per receiving thread.
//!
//! Never: reads a socket; the receiving threads do.

use bps_client::subscriber::Subscriber;
use bytes::Bytes;

use super::join::{JoinedPublisher, JoinedSubscriber, nats_sid};
use super::{RunError, failed};
use crate::load::config::{CheckKind, LoadConfig, Mode};
use crate::load::nats;
use crate::load::plan::Plan;
use crate::load::receiver::{Check, Endpoint, Wire};
use crate::load::report::Verification;
use crate::load::websocket::{self, Transport};

/// Who reads what, per cohort, and the report's `verification` (counted part aside).
pub(super) struct Readers {
    pub(super) verification: Verification,
    /// Subscribers per cohort that read every frame.
    checked_per_cohort: Vec<u64>,
    /// Subscribers per cohort that only count bytes.
    pub(super) counted_per_cohort: Vec<u64>,
    /// Deliveries this process receives per published message.
    pub(super) deliveries_per_message: f64,
}

impl Readers {
    /// Subscribers of `cohort` that read every frame.
    pub(super) fn reading_in(&self, cohort: u32) -> u64 {
        self.checked_per_cohort
            .get(cohort as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The subscribers each cohort's closed-loop window follows: the reading ones, read at
    /// once, where a cohort has any (the counting ones are read in harvests, receiver
    /// module docs).
    pub(super) fn window_subscribers(&self) -> Vec<u64> {
        self.checked_per_cohort
            .iter()
            .zip(&self.counted_per_cohort)
            .map(|(reading, counting)| if *reading > 0 { *reading } else { *counting })
            .collect()
    }
}

/// Every reader of the run and its receiving endpoints, one bucket per receiving thread
/// ([`buckets`]).
pub(super) fn build(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
    subscribers: Vec<JoinedSubscriber>,
    publishers: &[JoinedPublisher],
    frames_by_publisher: &[Vec<Bytes>],
) -> Result<(Readers, Vec<Vec<Endpoint>>), RunError> {
    let verification = verification_of(config, wire, &subscribers, plan, publishers);
    let frame_bytes = cohort_frame_bytes(plan, frames_by_publisher);
    let checked_per_cohort = reading_subscribers(plan, &subscribers);
    let counted_per_cohort = counted_subscribers(plan, &subscribers);
    let deliveries_per_message =
        deliveries_per_message(wire, plan, &checked_per_cohort, &counted_per_cohort);
    let endpoints = Endpoints {
        config,
        plan,
        wire,
        frame_bytes: &frame_bytes,
        reading: &checked_per_cohort,
    };
    let buckets = buckets(&endpoints, subscribers, publishers)?;
    let readers = Readers {
        verification,
        checked_per_cohort,
        counted_per_cohort,
        deliveries_per_message,
    };
    Ok((readers, buckets))
}

/// The one frame length of each cohort's presigned frames (what counting streams divide
/// by), or why there is none.
fn cohort_frame_bytes(
    plan: &Plan,
    frames_by_publisher: &[Vec<Bytes>],
) -> Vec<Result<usize, String>> {
    plan.cohorts
        .iter()
        .map(|cohort| {
            let mut lengths = cohort
                .publishers
                .iter()
                .filter_map(|publisher| frames_by_publisher.get(publisher.global as usize))
                .flatten()
                .map(Bytes::len);
            let Some(first) = lengths.next() else {
                return Err(format!("cohort {} has no presigned frames", cohort.index));
            };
            match lengths.find(|length| *length != first) {
                None => Ok(first),
                Some(other) => Err(format!(
                    "cohort {}: presigned frames of {first} and {other} bytes; counting needs one \
                     length (use --check-fraction 1 to read every frame)",
                    cohort.index
                )),
            }
        })
        .collect()
}

/// Subscribers per cohort that read every frame (the population of `expected` by stamp).
fn reading_subscribers(plan: &Plan, subscribers: &[JoinedSubscriber]) -> Vec<u64> {
    let mut counts = vec![0u64; plan.cohorts.len()];
    for subscriber in subscribers
        .iter()
        .filter(|subscriber| subscriber.kind != CheckKind::Count)
    {
        if let Some(count) = counts.get_mut(subscriber.cohort as usize) {
            *count += 1;
        }
    }
    counts
}

/// Deliveries this process receives per published message, on average over the
/// publishers: each cohort's reading and counting subscribers, plus, where publisher
/// streams are counted, the cohort's other publishers (never its own, R25).
fn deliveries_per_message(wire: Wire, plan: &Plan, reading: &[u64], counting: &[u64]) -> f64 {
    let (mut deliveries, mut publishers) = (0u64, 0u64);
    for cohort in &plan.cohorts {
        let at = cohort.index as usize;
        let own = cohort.publishers.len() as u64;
        let others = if counts_publisher_stream(wire, plan, cohort.index) {
            own - 1
        } else {
            0
        };
        let receivers =
            reading.get(at).copied().unwrap_or(0) + counting.get(at).copied().unwrap_or(0) + others;
        deliveries += own * receivers;
        publishers += own;
    }
    if publishers == 0 {
        0.0
    } else {
        deliveries as f64 / publishers as f64
    }
}

/// Subscribers per cohort that only count bytes.
fn counted_subscribers(plan: &Plan, subscribers: &[JoinedSubscriber]) -> Vec<u64> {
    let mut counts = vec![0u64; plan.cohorts.len()];
    for subscriber in subscribers
        .iter()
        .filter(|subscriber| subscriber.kind == CheckKind::Count)
    {
        if let Some(count) = counts.get_mut(subscriber.cohort as usize) {
            *count += 1;
        }
    }
    counts
}

/// How many subscribers check how (the report's `verification`, counted part aside).
fn verification_of(
    config: &LoadConfig,
    wire: Wire,
    subscribers: &[JoinedSubscriber],
    plan: &Plan,
    publishers: &[JoinedPublisher],
) -> Verification {
    let mut verification = Verification {
        fraction: config.verify_fraction,
        check_fraction: config.check_fraction,
        check_min: config.check_min,
        ..Verification::default()
    };
    for subscriber in subscribers {
        match (subscriber.kind, wire, config.mode) {
            (CheckKind::Verify, _, _) => verification.verifying_subscribers += 1,
            (CheckKind::Compare, Wire::Bps, Mode::Pubsub) if !config.signs_ahead() => {
                verification.byte_checked_subscribers += 1
            }
            (CheckKind::Compare, _, _) => verification.stamp_only_subscribers += 1,
            (CheckKind::Count, _, _) => verification.counted_only_subscribers += 1,
        }
    }
    verification.counted_publisher_streams = publishers
        .iter()
        .filter(|publisher| counts_publisher_stream(wire, plan, publisher.cohort))
        .count() as u64;
    verification
}

/// Whether a publisher's own stream is read (counted): BPS under publishers ALL, where it
/// receives the other publishers (a live stream's publisher receives nothing).
fn counts_publisher_stream(wire: Wire, plan: &Plan, cohort: u32) -> bool {
    wire == Wire::Bps
        && plan
            .cohorts
            .get(cohort as usize)
            .is_some_and(|cohort| cohort.publishers.len() > 1)
}

/// What a receiving endpoint is built from: `frame_bytes` is each cohort's frame length,
/// `reading` its subscribers that read.
struct Endpoints<'a> {
    config: &'a LoadConfig,
    plan: &'a Plan,
    wire: Wire,
    frame_bytes: &'a [Result<usize, String>],
    reading: &'a [u64],
}

impl Endpoints<'_> {
    /// One delivery's wire size in `cohort`, what a counting stream divides its bytes by:
    /// over WebSocket the server's message header is part of it.
    fn frame_of(&self, cohort: u32) -> Result<usize, RunError> {
        self.frame_bytes
            .get(cohort as usize)
            .cloned()
            .unwrap_or_else(|| Err(format!("no cohort {cohort}")))
            .map(|frame| match self.config.transport {
                Transport::Tcp | Transport::P2p => frame,
                Transport::Ws => websocket::message_bytes(frame),
            })
            .map_err(RunError::Failed)
    }

    /// How `subscriber` checks its deliveries.
    fn check_of(&self, subscriber: &JoinedSubscriber) -> Result<Check, RunError> {
        let (config, plan) = (self.config, self.plan);
        let cohort = plan
            .cohorts
            .get(subscriber.cohort as usize)
            .ok_or_else(|| RunError::Failed(format!("no cohort {}", subscriber.cohort)))?;
        Ok(match (subscriber.kind, self.wire) {
            (CheckKind::Verify, _) => Check::Verify(Box::new(Subscriber::new(cohort.spec))),
            (CheckKind::Compare, Wire::Bps)
                if config.mode == Mode::Pubsub && !config.signs_ahead() =>
            {
                Check::Bytes
            }
            (CheckKind::Compare, _) => Check::Stamp,
            (CheckKind::Count, Wire::Bps | Wire::WebSocket) => Check::Count {
                frame_bytes: self.frame_of(subscriber.cohort)?,
                payload_bytes: config.size,
            },
            (CheckKind::Count, Wire::Nats) => Check::Count {
                frame_bytes: nats::msg_bytes(
                    &plan.nats_subject(subscriber.cohort),
                    nats_sid(subscriber.member),
                    config.size,
                ),
                payload_bytes: config.size,
            },
        })
    }

    /// `subscriber`'s endpoint; a counting one beside readers stays outside the window.
    fn subscriber(&self, subscriber: JoinedSubscriber) -> Result<Endpoint, RunError> {
        let endpoint_wire = match (self.wire, self.config.transport) {
            (Wire::Bps, Transport::Ws) => Wire::WebSocket,
            _ => self.wire,
        };
        let check = self.check_of(&subscriber)?;
        let publishers_per_cohort = self.plan.publishers_per_cohort;
        let endpoint = Endpoint::new(
            subscriber.stream,
            &subscriber.leftover,
            endpoint_wire,
            subscriber.cohort,
            subscriber.cohort * publishers_per_cohort,
            publishers_per_cohort,
            check,
        )
        .map_err(failed("subscriber socket"))?;
        let has_readers = self
            .reading
            .get(subscriber.cohort as usize)
            .is_some_and(|count| *count > 0);
        Ok(if endpoint.counts() && has_readers {
            endpoint.outside_window()
        } else {
            endpoint
        })
    }

    /// A counted publisher stream's endpoint (on a clone of its socket).
    fn publisher_stream(&self, publisher: &JoinedPublisher) -> Result<Endpoint, RunError> {
        let stream = publisher
            .stream
            .try_clone()
            .map_err(failed("publisher socket"))?;
        Endpoint::publisher_stream(
            stream,
            &publisher.leftover,
            publisher.cohort,
            publisher.global,
            self.frame_of(publisher.cohort)?,
            self.config.size,
        )
        .map_err(failed("publisher socket"))
    }
}

/// Every receiving endpoint, in one bucket per receiving thread: subscribers round robin
/// (verifying ones, when only some verify, in `config.threads` buckets of their own: a
/// verification, ~70 µs, must not hold up the other streams behind it on the same thread,
/// or the broker would reset those for full queues, R26, and the run would measure the
/// generator), then the counted publisher streams round robin over the other buckets.
fn buckets(
    endpoints: &Endpoints<'_>,
    subscribers: Vec<JoinedSubscriber>,
    publishers: &[JoinedPublisher],
) -> Result<Vec<Vec<Endpoint>>, RunError> {
    let threads = endpoints.config.threads.max(1);
    let verifying = subscribers
        .iter()
        .filter(|subscriber| subscriber.kind == CheckKind::Verify)
        .count();
    let mixed = verifying > 0 && verifying < subscribers.len();
    let mut buckets: Vec<Vec<Endpoint>> = (0..if mixed { 2 * threads } else { threads })
        .map(|_| Vec::new())
        .collect();
    let (mut plain_slot, mut verifying_slot) = (0usize, 0usize);
    for subscriber in subscribers {
        let bucket = if mixed && subscriber.kind == CheckKind::Verify {
            verifying_slot += 1;
            threads + (verifying_slot - 1) % threads
        } else {
            plain_slot += 1;
            (plain_slot - 1) % threads
        };
        buckets[bucket].push(endpoints.subscriber(subscriber)?);
    }
    for publisher in publishers.iter().filter(|publisher| {
        counts_publisher_stream(endpoints.wire, endpoints.plan, publisher.cohort)
    }) {
        let endpoint = endpoints.publisher_stream(publisher)?;
        plain_slot += 1;
        buckets[(plain_slot - 1) % threads].push(endpoint);
    }
    Ok(buckets)
}
