//! Fairness between cohorts against the real binary (issue 19, item 5): while streams under
//! fresh keys flood one ALL cohort on a one-core broker with one verification worker, a
//! quiet cohort on the same core gets every one of its messages, in order (the flood goes on
//! until they arrived, or for a while after the last was sent; one still held up then must
//! arrive after it). Its latencies are printed, not asserted: a debug build on a loaded CI machine
//! says nothing about them; `bench/flood` measures the real figure on a release build
//! (docs/BENCHMARKS.md, "Fairness under flood").

mod support;

use std::io::Read;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bps_client::session::{JoinOutcome, Session};
use support::{Broker, Options, bodies, explicit, group, key, publish, publisher};

/// Flooding threads, each driving `FLOOD_STREAMS_PER_THREAD` publisher streams.
const FLOOD_THREADS: u16 = 4;
const FLOOD_STREAMS_PER_THREAD: u16 = 40;
/// The quiet cohort's messages, one every `QUIET_INTERVAL` (10 per second).
const QUIET_MESSAGES: usize = 40;
const QUIET_INTERVAL: Duration = Duration::from_millis(100);
/// How long the flood may take to join and start.
const FLOOD_START_WAIT: Duration = Duration::from_secs(120);
/// How long the flood goes on after the last quiet message was sent, at most.
const FLOOD_AFTER_LAST_SEND_MAX: Duration = Duration::from_secs(20);
/// How long the receiver waits for the next quiet message before it gives up.
const RECEIVE_WAIT: Duration = Duration::from_secs(60);

#[test]
fn a_quiet_cohort_gets_every_message_while_another_cohort_floods() {
    let broker = Broker::start_options(&Options {
        sets: &[
            "verify.workers=1",
            "limits.streams_per_peer_per_cohort_max=1000",
        ],
        one_core: true,
        ..Options::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let flood_spec = group(1, &key(1).address());
    let flooders: Vec<thread::JoinHandle<()>> = (0..FLOOD_THREADS)
        .map(|thread_n| {
            let target = broker.target();
            let stop = Arc::clone(&stop);
            thread::spawn(move || flood(&target, &flood_spec, thread_n, &stop))
        })
        .collect();
    // Every flood stream joined and published: generous, the joins take a while on a
    // loaded machine.
    let flowing_by = Instant::now() + FLOOD_START_WAIT;
    while broker.metric("bps_accepted_data_total")
        <= u64::from(FLOOD_THREADS * FLOOD_STREAMS_PER_THREAD)
    {
        assert!(Instant::now() < flowing_by, "the flood did not flow");
        thread::sleep(Duration::from_millis(50));
    }

    let admin = key(3);
    let quiet_spec = explicit(2, &admin.address(), false);
    let spectator = broker.join(&quiet_spec, &key(4).address());
    let mut session = broker.join(&quiet_spec, &admin.address());
    let mut quiet_publisher = publisher(&quiet_spec, &admin, &session);
    let arrived = Arc::new(AtomicUsize::new(0));
    let receiver = {
        let arrived = Arc::clone(&arrived);
        thread::spawn(move || receive(spectator, QUIET_MESSAGES, &arrived))
    };
    let mut sent = Vec::new();
    let mut sent_at = Vec::new();
    let started = Instant::now();
    for n in 0..QUIET_MESSAGES {
        let due = started + QUIET_INTERVAL * u32::try_from(n).expect("few messages");
        thread::sleep(due.saturating_duration_since(Instant::now()));
        let payload = format!("quiet message {n}");
        let written = publish(&mut quiet_publisher, &mut session, &[payload.as_bytes()]);
        sent_at.extend(written.iter().map(|_| Instant::now()));
        sent.extend(written);
    }
    // The flood goes on while the quiet messages arrive, for a while at most: a message
    // still held up then must arrive once the flood stops (no loss), however late.
    let flood_until = Instant::now() + FLOOD_AFTER_LAST_SEND_MAX;
    while arrived.load(Ordering::Relaxed) < QUIET_MESSAGES && Instant::now() < flood_until {
        thread::sleep(Duration::from_millis(50));
    }
    let flood_accepted = broker.metric("bps_accepted_data_total");
    stop.store(true, Ordering::Relaxed);
    let received = receiver.join().expect("receiver");
    for flooder in flooders {
        let _ = flooder.join();
    }

    let expected = bodies(&sent);
    let bodies_received: Vec<_> = received.iter().map(|(body, _)| body.clone()).collect();
    assert_eq!(
        bodies_received.len(),
        expected.len(),
        "the quiet cohort lost messages"
    );
    assert_eq!(bodies_received, expected, "every message, in order");
    let latencies: Vec<Duration> = received
        .iter()
        .zip(&sent_at)
        .map(|((_, arrived), sent)| arrived.saturating_duration_since(*sent))
        .collect();
    let worst = latencies.iter().max().copied().unwrap_or_default();
    let millis: Vec<u128> = latencies.iter().map(Duration::as_millis).collect();
    eprintln!(
        "quiet cohort: {} messages, worst latency {worst:?} (ms each: {millis:?}); flood: \
         {flood_accepted} accepted",
        latencies.len()
    );
    assert!(
        flood_accepted > u64::from(FLOOD_THREADS * FLOOD_STREAMS_PER_THREAD) * 2,
        "the flood kept flowing meanwhile ({flood_accepted} accepted)"
    );
}

/// Receives `count` frame bodies on `session`, each with when it arrived, counting them
/// in `arrived` as they come.
fn receive(
    mut session: Session,
    count: usize,
    arrived: &AtomicUsize,
) -> Vec<(bytes::Bytes, Instant)> {
    let mut received = Vec::with_capacity(count);
    while received.len() < count {
        match session.recv(RECEIVE_WAIT) {
            Ok(Some(body)) => {
                received.push((body, Instant::now()));
                arrived.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None) | Err(_) => break,
        }
    }
    received
}

/// `FLOOD_STREAMS_PER_THREAD` publishers under keys of their own on `spec` (an ALL cohort),
/// publishing 4 KiB frames in turn until `stop`; what they receive of each other is read
/// and dropped by another thread, so none of them is a slow consumer.
fn flood(target: &str, spec: &bps_proto::Spec, thread_n: u16, stop: &Arc<AtomicBool>) {
    let mut streams = Vec::new();
    let mut readers = Vec::new();
    for n in 0..FLOOD_STREAMS_PER_THREAD {
        let flood_key = fresh_key(thread_n * FLOOD_STREAMS_PER_THREAD + n);
        let session = match Session::join(
            target,
            spec,
            &flood_key.address(),
            support::session_config(),
        ) {
            Ok(JoinOutcome::Joined(session)) => session,
            other => panic!("flood join: {:?}", other.err()),
        };
        let flood_publisher = publisher(spec, &flood_key, &session);
        let (stream, _) = session.into_parts();
        readers.push(stream.try_clone().expect("clone"));
        streams.push((stream, flood_publisher));
    }
    let reading = {
        let stop = Arc::clone(stop);
        thread::spawn(move || drain(readers, &stop))
    };
    let payload = bytes::Bytes::from(vec![9_u8; 4096]);
    'flood: while !stop.load(Ordering::Relaxed) {
        for (stream, flood_publisher) in &mut streams {
            flood_publisher
                .enqueue_data(payload.clone())
                .expect("queue");
            while let Some(outgoing) = flood_publisher.next_frame().expect("sign") {
                if std::io::Write::write_all(stream, &outgoing.signed.frame).is_err() {
                    break 'flood;
                }
                flood_publisher.mark_sent();
            }
        }
    }
    let _ = reading.join();
}

/// Reads and drops what arrives on `streams` until `stop`.
fn drain(mut streams: Vec<TcpStream>, stop: &AtomicBool) {
    for stream in &streams {
        stream.set_nonblocking(true).expect("nonblocking");
    }
    let mut chunk = vec![0_u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        streams.retain_mut(|stream| match stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(_) => {
                idle = false;
                true
            }
            Err(error) => error.kind() == std::io::ErrorKind::WouldBlock,
        });
        if idle {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The `index`-th of many distinct keys (beyond the 255 of `support::key`).
fn fresh_key(index: u16) -> bps_verify::SigningKey {
    let mut secret = [0x6b_u8; 32];
    secret[30..].copy_from_slice(&(index + 1).to_be_bytes());
    bps_verify::SigningKey::from_bytes(&secret).expect("a valid key")
}
