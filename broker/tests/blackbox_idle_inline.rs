//! Black-box: in pool mode a core verifies a turn's first few jobs itself while the pool is
//! idle (`verify.idle_inline_jobs_max`, issue 23). Publications sent one at a time are each
//! verified on their core (`bps_verify_idle_inline_total`) and delivered byte for byte; a
//! burst larger than the bound is split between the core and the pool and still arrives
//! whole and in order; after the pool verified a burst in a batch larger than the bound, the
//! next lone publication goes to the pool too (between batches the pool is idle at a peak),
//! and once lone results have come back, jobs are held again; a forged chunk
//! held on the core is refused as the pool refuses it; with the bound at 0 every job goes to
//! the pool.

mod support;

use bps_client::publisher::{Outgoing, Publisher};
use bps_client::session::Session;
use bytes::Bytes;
use support::{
    Broker, bodies, expect_frames, expect_nothing, explicit, key, publish, publisher,
    send_forged_claim,
};

/// Enough streams per peer for one test's clients, which all come from 127.0.0.1.
const MANY_STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=16";
/// The bound these tests run with (the default's value, set so that they do not depend on it).
const IDLE_INLINE_ON: &str = "verify.idle_inline_jobs_max=4";

/// Publishes `count` chunks one at a time, each received by the spectator before the next
/// is sent, so every job finds the pool idle; returns how many jobs were verified.
fn publish_one_at_a_time(broker: &Broker, count: usize) -> u64 {
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let mut spectator = broker.join(&spec, &key(10).address());
    let mut session = broker.join(&spec, &admin.address());
    let mut chunks = publisher(&spec, &admin, &session);
    for n in 0..count {
        let payload = format!("lone {n}");
        let sent = publish(&mut chunks, &mut session, &[payload.as_bytes()]);
        expect_frames(&mut spectator, &bodies(&sent));
    }
    broker.wait_metric("bps_accepted_data_total", count as u64);
    broker.metric("bps_verify_jobs_total")
}

/// Lone publications after a burst within which a job is held again: the pool's recent
/// figure falls by one with each lone result, from at most a batch (64) to the bound (2).
const LONE_UNTIL_HELD_MAX: usize = 70;

/// Signs `count` DATA chunks first and writes them in one write, so that the broker reads
/// them as one burst (the pool then verifies them in a few large batches).
fn publish_at_once(chunks: &mut Publisher, session: &mut Session, count: u8) -> Vec<Outgoing> {
    for n in 0..count {
        chunks
            .enqueue_data(Bytes::from(vec![n; 64]))
            .expect("queue DATA");
    }
    let mut sent = Vec::new();
    let mut burst = Vec::new();
    while let Some(outgoing) = chunks.next_frame().expect("sign") {
        burst.extend_from_slice(&outgoing.signed.frame);
        chunks.mark_sent();
        sent.push(outgoing);
    }
    session.send(&burst).expect("send the burst");
    sent.retain(|outgoing| outgoing.kind == bps_proto::Kind::Data);
    sent
}

#[test]
fn lone_publications_are_verified_on_their_core_and_delivered_byte_for_byte() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, IDLE_INLINE_ON]);
    let jobs = publish_one_at_a_time(&broker, 6);
    assert!(jobs >= 6, "every chunk was verified: {jobs} jobs");
    // Nothing else was verifying, so no job went to the pool.
    assert_eq!(broker.metric("bps_verify_idle_inline_total"), jobs);
    assert_eq!(broker.metric("bps_verify_pool_jobs_total"), 0);
}

#[test]
fn with_the_bound_at_zero_every_job_goes_to_the_pool() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, "verify.idle_inline_jobs_max=0"]);
    let jobs = publish_one_at_a_time(&broker, 6);
    assert!(jobs >= 6, "every chunk was verified: {jobs} jobs");
    assert_eq!(broker.metric("bps_verify_idle_inline_total"), 0);
    assert_eq!(broker.metric("bps_verify_pool_jobs_total"), jobs);
}

/// A one-core broker holding at most 2 jobs, with one cohort's spectator, admin session and
/// publisher.
fn one_core_bound_two() -> (Broker, Session, Session, Publisher) {
    let broker = Broker::start(&[
        MANY_STREAMS_PER_PEER,
        "verify.idle_inline_jobs_max=2",
        "server.cores=1",
    ]);
    let admin = key(1);
    let spec = explicit(1, &admin.address(), false);
    let spectator = broker.join(&spec, &key(10).address());
    let session = broker.join(&spec, &admin.address());
    let chunks = publisher(&spec, &admin, &session);
    (broker, spectator, session, chunks)
}

#[test]
fn a_burst_beyond_the_bound_arrives_whole_and_in_order() {
    let (broker, mut spectator, mut session, mut chunks) = one_core_bound_two();
    let payloads: Vec<Vec<u8>> = (0..40u8).map(|n| vec![n; 64 + usize::from(n)]).collect();
    let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
    let sent = publish(&mut chunks, &mut session, &slices);
    expect_frames(&mut spectator, &bodies(&sent));
    broker.wait_metric("bps_accepted_data_total", 40);
    let held = broker.metric("bps_verify_idle_inline_total");
    let pooled = broker.metric("bps_verify_pool_jobs_total");
    assert_eq!(held + pooled, broker.metric("bps_verify_jobs_total"));
    assert!(held >= 1, "the first job found the pool idle");
}

#[test]
fn after_a_batch_larger_than_the_bound_the_next_lone_job_goes_to_the_pool() {
    let (broker, mut spectator, mut session, mut chunks) = one_core_bound_two();
    let sent = publish_at_once(&mut chunks, &mut session, 40);
    expect_frames(&mut spectator, &bodies(&sent));
    broker.wait_metric("bps_accepted_data_total", 40);
    let held_after_burst = broker.metric("bps_verify_idle_inline_total");
    let pooled_after_burst = broker.metric("bps_verify_pool_jobs_total");
    let batches = broker.metric("bps_verify_pool_batches_total");
    assert!(
        pooled_after_burst > 2 * batches,
        "the burst went to the pool in batches larger than the bound: {pooled_after_burst} \
         jobs in {batches} batches"
    );

    let lone = publish(
        &mut chunks,
        &mut session,
        &[b"right after the burst".as_slice()],
    );
    expect_frames(&mut spectator, &bodies(&lone));
    broker.wait_metric("bps_accepted_data_total", 41);
    assert_eq!(
        broker.metric("bps_verify_idle_inline_total"),
        held_after_burst,
        "the pool was idle, but its last results said it batches: the job went to it"
    );
    assert_eq!(
        broker.metric("bps_verify_pool_jobs_total"),
        pooled_after_burst + 1
    );

    // Lone results bring the figure down: within a few publications jobs are held again.
    for n in 0..LONE_UNTIL_HELD_MAX {
        let payload = format!("lone {n} after the burst");
        let next = publish(&mut chunks, &mut session, &[payload.as_bytes()]);
        expect_frames(&mut spectator, &bodies(&next));
        broker.wait_metric("bps_accepted_data_total", 42 + n as u64);
        if broker.metric("bps_verify_idle_inline_total") > held_after_burst {
            return;
        }
    }
    panic!("no job was held on the core again in {LONE_UNTIL_HELD_MAX} lone publications");
}

#[test]
fn a_forged_chunk_verified_on_its_core_closes_its_stream_and_reaches_nobody() {
    let broker = Broker::start(&[MANY_STREAMS_PER_PEER, IDLE_INLINE_ON]);
    let mut spectator = send_forged_claim(&broker);
    assert_eq!(broker.metric("bps_verify_idle_inline_total"), 1);
    assert_eq!(broker.metric("bps_verify_pool_jobs_total"), 0);
    expect_nothing(&mut spectator);
}
