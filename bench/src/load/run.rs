//! One load run of `pubsub`, `pub`, `sub` or `nats`: join, presign, pace, receive,
//! report.
//!
//! Owns: the run's timeline and threads. In order:
//! 1. every subscriber stream joins (BPS `Join`/`Ack` through [`dial`], from its source
//!    address; NATS `SUB`), a few joining threads at a time;
//! 2. every publisher stream joins and, when pending, claims at once (AUTH at index 0,
//!    D3) through the client library's [`Publisher`];
//! 3. every message of the run is signed under its stream's challenge ([`presign`]), the
//!    open-loop `t0` placed after the estimated signing time; the warm-up absorbs any
//!    error of the estimate, and a run whose signing ran past the warm-up fails rather
//!    than measure a burst; with `--sign-ahead` (open loop) only the first frames are
//!    signed before `t0` and a [`SignFeed`] per publisher signs the rest during the run;
//! 4. each subscriber gets its reader ([`LoadConfig::check_of`]: verify, compare, or count
//!    bytes against the run's one frame length) and, under publishers ALL, each publisher
//!    stream a counting reader too; receiving threads (one per CPU, epoll) and sending
//!    threads (a few publishers each) start, pinned to `--cpus` when given; the
//!    [`progress`](crate::load::progress) line is redrawn every second on a terminal;
//! 5. after the last scheduled message, deliveries are awaited until every measured
//!    message reached every reading subscriber and every written frame every counting
//!    stream, or `--drain` passed; then the report is built.
//!
//! Loss is exact in `pubsub`, `pub` and `nats`: the publishers count the messages, each
//! must reach every stream it is sent to (measured ones, by stamp, on the reading streams;
//! all of them, by bytes, on the counting streams). `sub` mode estimates it from the span
//! of sequences each stream saw.
//!
//! Never: retries a refused Join or a reset stream during a run (it would hide loss).

use std::io::{self, Write};
use std::net::{IpAddr, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::{Hash, Spec, Status};
use bps_verify::SigningKey;
use bytes::{Bytes, BytesMut};

use crate::load::config::{CheckKind, LoadConfig, Mode};
use crate::load::dial::{self, JoinError};
use crate::load::nats;
use crate::load::plan::{CohortPlan, Member, Plan};
use crate::load::presign::{SignJob, presign, signing_cost};
use crate::load::progress::{RunProgress, RunTimeline};
use crate::load::receiver::{self, Check, CountedStream, Endpoint, Totals, Wire};
use crate::load::report::{
    CountedFigures, Generator, PeerLoadFigures, Report, Verification, round,
};
use crate::load::schedule::{Schedule, now_ns};
use crate::load::sender::{self, SendOutcome, SendTask, Source};
use crate::load::shared::{PublisherShared, Shared};
use crate::load::sign_feed::{FeedJob, SignFeed};
use crate::load::stamp::{Stamp, payload};
use crate::load::websocket::{self, Masker, Transport};
use bps_client::publisher::{Publisher, PublisherConfig, Role};
use bps_client::subscriber::Subscriber;
use bps_client::websocket::Framing;

/// Time between the end of signing and `t0` (threads start, sockets settle).
const START_LEAD: Duration = Duration::from_millis(300);

/// Margin on the estimated signing time.
const SIGNING_ESTIMATE_MARGIN: f64 = 2.0;

/// Threads that open the run's streams: a Join is a round trip, and a few at a time keep
/// ten thousand of them to seconds.
const JOIN_THREADS: usize = 8;

/// Why a run could not be done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// A Join was answered FULL or REJECTED.
    Refused(String),
    /// Anything else.
    Failed(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(message) | Self::Failed(message) => formatter.write_str(message),
        }
    }
}

impl std::error::Error for RunError {}

fn failed(context: &str) -> impl FnOnce(io::Error) -> RunError + '_ {
    move |error| RunError::Failed(format!("{context}: {error}"))
}

/// A joined publisher stream, ready to send.
struct JoinedPublisher {
    global: u32,
    cohort: u32,
    stream: TcpStream,
    challenge: Hash,
    leftover: BytesMut,
}

/// A joined subscriber stream, before its reader is built.
struct JoinedSubscriber {
    cohort: u32,
    member: u32,
    kind: CheckKind,
    stream: TcpStream,
    leftover: BytesMut,
}

/// Runs `config` (mode `pubsub`, `pub`, `sub` or `nats`) and returns its report.
pub fn run(config: &LoadConfig) -> Result<Report, RunError> {
    let plan = Plan::new(
        config.seed,
        config.cohorts,
        config.publishers,
        config.subscribers,
        config.binding,
    )
    .and_then(|plan| plan.with_sources(config.sources))
    .map_err(|error| RunError::Failed(error.to_string()))?;
    if config.sources > 1 {
        require_loopback(&config.target)?;
    }
    crate::load::poller::raise_open_files_limit();
    let mut report = Report::new(
        config.mode.name(),
        serde_json::to_value(config).unwrap_or_default(),
    );
    report.shape = config.shape.name().to_owned();
    report.transport = config.transport.name().to_owned();
    let wire = if config.mode == Mode::Nats {
        Wire::Nats
    } else {
        Wire::Bps
    };
    let base_index = now_ns() / 1000;

    // 1. Subscribers.
    let subscribers = if config.mode.subscribes() {
        join_subscribers(config, &plan, wire)?
    } else {
        Vec::new()
    };
    let peer_load = plan.peer_load();
    report.peer_load = Some(PeerLoadFigures {
        sources: peer_load.sources,
        streams_per_source_per_cohort_max: peer_load.streams_per_source_per_cohort_max,
        cohorts_per_source_max: peer_load.cohorts_per_source_max,
    });

    // 2. Publishers.
    let joined = if config.mode.publishes() {
        join_publishers(config, &plan, base_index)?
    } else {
        Vec::new()
    };

    // 3. Timeline and presigning.
    let closed = config.closed_loop();
    let publishers = plan.publisher_count().max(1) as u64;
    let open_count =
        ((config.warmup + config.duration).as_secs_f64() * config.rate).ceil() as u64 + 1;
    // A feed signs during the run; only its first frames are signed before t0.
    let feeds = config.signs_ahead();
    let count = match (closed, feeds) {
        (true, _) => config.presign,
        (false, true) => open_count.min(config.sign_ahead),
        (false, false) => open_count,
    };
    let signs = wire == Wire::Bps && config.mode.publishes();
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let t0 = if closed || !signs {
        now_ns()
    } else {
        let spec = plan.cohorts.first().map(|cohort| cohort.spec);
        let per_message = spec.map_or(Duration::ZERO, |spec| signing_cost(spec, config.size));
        let estimate = per_message.as_secs_f64() * (count * publishers) as f64 / workers as f64;
        now_ns() + (estimate * SIGNING_ESTIMATE_MARGIN * 1e9) as u64
    } + START_LEAD.as_nanos() as u64;
    let interval_ns = if closed { 0.0 } else { 1e9 / config.rate };
    let schedule_of = |global: u32| {
        let stagger = (interval_ns * f64::from(global) / publishers as f64) as u64;
        Schedule::new(t0 + stagger, config.rate)
    };
    let signing_started = Instant::now();
    let mut frames_by_publisher: Vec<Vec<Bytes>> = vec![Vec::new(); plan.publisher_count()];
    if signs {
        for publisher in &joined {
            let schedule = schedule_of(publisher.global);
            let frames = sign_publisher(
                config, &plan, publisher, schedule, base_index, count, workers,
            )?;
            if let Some(slot) = frames_by_publisher.get_mut(publisher.global as usize) {
                *slot = frames;
            }
        }
    }
    let presign_s = if signs {
        signing_started.elapsed().as_secs_f64()
    } else {
        0.0
    };
    let t0 = if closed {
        now_ns() + START_LEAD.as_nanos() as u64
    } else {
        t0
    };
    let measure_from = t0 + config.warmup.as_nanos() as u64;
    let measure_to = measure_from + config.duration.as_nanos() as u64;
    let deadline = measure_to + config.drain.as_nanos() as u64;
    if !closed && signs && now_ns() > measure_from {
        return Err(RunError::Failed(format!(
            "presigning took {presign_s:.1} s and ran past the warm-up; lengthen --warmup or lower --rate/--duration"
        )));
    }
    let schedule_of = |global: u32| {
        if closed {
            Schedule::Closed
        } else {
            schedule_of(global)
        }
    };

    // 4. Readers, shared state and threads.
    let verification = verification_of(config, wire, &subscribers, &plan, &joined);
    let frame_bytes = cohort_frame_bytes(&plan, &frames_by_publisher);
    let checked_per_cohort = reading_subscribers(&plan, &subscribers);
    let counted_per_cohort = counted_subscribers(&plan, &subscribers);
    let deliveries_per_message =
        deliveries_per_message(wire, &plan, &checked_per_cohort, &counted_per_cohort);
    let buckets = build_buckets(
        config,
        &plan,
        wire,
        subscribers,
        &joined,
        (&frame_bytes, &checked_per_cohort),
    )?;
    let cpu_at_start = cpu_seconds();
    let wall_at_start = Instant::now();
    // The closed loop's window follows the reading subscribers, read at once, where a
    // cohort has any (the counting ones are read in harvests, receiver module docs).
    let cohort_subscribers = checked_per_cohort
        .iter()
        .zip(&counted_per_cohort)
        .map(|(reading, counting)| if *reading > 0 { *reading } else { *counting })
        .collect();
    let shared = Arc::new(Shared::new(
        measure_from,
        measure_to,
        plan.publishers()
            .map(|publisher| {
                let frames = frames_by_publisher
                    .get(publisher.global as usize)
                    .cloned()
                    .unwrap_or_default();
                let sent_ns = if closed && signs {
                    (0..frames.len()).map(|_| AtomicU64::new(0)).collect()
                } else {
                    Vec::new()
                };
                PublisherShared {
                    cohort: publisher.cohort,
                    base_index: (config.mode == Mode::Pubsub).then_some(base_index),
                    frames: if config.mode == Mode::Pubsub && !feeds {
                        frames
                    } else {
                        Vec::new()
                    },
                    sent_ns,
                }
            })
            .collect(),
        cohort_subscribers,
    ));
    let mut cpu_slot = 0usize;
    let mut next_cpu = || {
        let cpu = config
            .cpus
            .get(cpu_slot % config.cpus.len().max(1))
            .copied();
        cpu_slot += 1;
        cpu
    };
    let mixed = buckets.iter().flatten().any(Endpoint::verifies)
        && !buckets.iter().flatten().all(Endpoint::verifies);
    let buckets: Vec<Vec<Endpoint>> = buckets
        .into_iter()
        .filter(|bucket| !bucket.is_empty())
        .collect();
    let receiving_threads = buckets.len();
    let receivers: Vec<_> = buckets
        .into_iter()
        .enumerate()
        .map(|(index, bucket)| {
            let shared = Arc::clone(&shared);
            let cpu = next_cpu();
            // Verifying threads beside byte-checking ones yield the core to them (docs of
            // build_buckets); a verifying stream that falls behind is reset by
            // the broker and reported, instead of dragging every stream down.
            let yielding = mixed && bucket.iter().all(Endpoint::verifies);
            thread::Builder::new()
                .name("bps-bench-recv".to_owned())
                .spawn(move || {
                    pin(cpu);
                    if yielding {
                        lower_priority();
                    }
                    receiver::run(bucket, &shared, index, cpu)
                })
        })
        .collect::<Result<_, _>>()
        .map_err(failed("spawning a receiver"))?;
    let tasks: Vec<SendTask> = joined
        .into_iter()
        .map(|publisher| -> Result<SendTask, RunError> {
            let source = if wire == Wire::Nats {
                Source::Nats {
                    subject: plan.nats_subject(publisher.cohort),
                    size: config.size,
                    publisher: publisher.global,
                    cohort: publisher.cohort,
                }
            } else {
                let frames = frames_by_publisher
                    .get_mut(publisher.global as usize)
                    .map(std::mem::take)
                    .unwrap_or_default();
                if feeds {
                    assert!(
                        config.transport == Transport::Tcp,
                        "a feed signs bare frames: TCP only (bps-bench refuses --sign-ahead over ws)"
                    );
                    let schedule = schedule_of(publisher.global);
                    Source::Fed(start_feed(
                        config, &plan, &publisher, schedule, base_index, open_count, frames,
                    )?)
                } else {
                    match config.transport {
                        Transport::Tcp => Source::Presigned(Arc::new(frames)),
                        Transport::Ws => Source::PresignedWs(Arc::new(frames), Masker::new()),
                    }
                }
            };
            Ok(SendTask {
                publisher: publisher.global,
                stream: publisher.stream,
                source,
                schedule: schedule_of(publisher.global),
                end_ns: measure_to,
                deadline_ns: deadline,
                cohort: publisher.cohort,
                window: config.window,
            })
        })
        .collect::<Result<_, _>>()?;
    let send_threads = config.send_threads.clamp(1, tasks.len().max(1));
    let mut per_thread: Vec<Vec<SendTask>> = (0..send_threads).map(|_| Vec::new()).collect();
    for (at, task) in tasks.into_iter().enumerate() {
        per_thread[at % send_threads].push(task);
    }
    let senders: Vec<_> = per_thread
        .into_iter()
        .filter(|tasks| !tasks.is_empty())
        .enumerate()
        .map(|(index, tasks)| {
            let shared = Arc::clone(&shared);
            let cpu = next_cpu();
            thread::Builder::new()
                .name("bps-bench-send".to_owned())
                .spawn(move || {
                    pin(cpu);
                    sender::run(tasks, &shared, index, cpu)
                })
        })
        .collect::<Result<_, _>>()
        .map_err(failed("spawning a sender"))?;
    let sending_threads = senders.len();

    // 5. Progress, then drain.
    let mut progress = RunProgress::new(
        config.progress,
        RunTimeline {
            t0_ns: t0,
            measure_from_ns: measure_from,
            measure_to_ns: measure_to,
            drain: config.drain,
            publishes: config.mode.publishes(),
            receives: config.mode.subscribes() || deliveries_per_message > 0.0,
            deliveries_per_message,
        },
    );
    while now_ns() < measure_to && !(senders.is_empty() && receivers.is_empty()) {
        if !senders.is_empty() && senders.iter().all(thread::JoinHandle::is_finished) {
            break;
        }
        progress.tick(&shared);
    }
    let mut outcomes: Vec<SendOutcome> = Vec::new();
    let mut thread_cpu = Vec::new();
    for handle in senders {
        let sent = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        outcomes.extend(sent.outcomes);
        thread_cpu.push(sent.cpu);
    }
    let cohort_of = |publisher: u32| {
        shared
            .publishers
            .get(publisher as usize)
            .map_or(0, |publisher| publisher.cohort)
    };
    let written = Written::of(&plan, &outcomes, &cohort_of);
    let expected_checked: u64 = outcomes
        .iter()
        .map(|outcome| {
            let cohort = cohort_of(outcome.publisher) as usize;
            outcome.measured * checked_per_cohort.get(cohort).copied().unwrap_or(0)
        })
        .sum();
    let expected_counted = written.expected_total(&counted_per_cohort, &plan);
    let drain_until = now_ns().max(measure_to) + config.drain.as_nanos() as u64;
    while !receivers.is_empty() && now_ns() < drain_until {
        if config.mode != Mode::Sub
            && shared.delivered_measured.load(Ordering::Relaxed) >= expected_checked
            && shared.counted_frames.load(Ordering::Relaxed) >= expected_counted
        {
            break;
        }
        progress.tick(&shared);
    }
    progress.finish();
    shared.stop.store(true, Ordering::Relaxed);
    let mut totals = Totals::default();
    for handle in receivers {
        let thread_totals = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .map_err(failed("receiver"))?;
        totals.merge(&thread_totals);
    }

    let cpu_cores_used = (cpu_seconds() - cpu_at_start) / wall_at_start.elapsed().as_secs_f64();

    // 6. The report.
    let receive_window_busy_cores_max = totals
        .threads
        .iter()
        .filter_map(|thread| thread.window_busy_cores)
        .reduce(f64::max);
    thread_cpu.splice(0..0, totals.threads.iter().cloned());
    let mut generator = Generator {
        threads: receiving_threads,
        cpus: config.cpus.clone(),
        presigned: if signs { count * publishers } else { 0 },
        presign_s: round(presign_s, 3),
        send_threads: sending_threads,
        receive_window_busy_cores_max,
        thread_cpu,
        ..Generator::default()
    };
    let mut first_error = totals.first_error.clone();
    for outcome in &outcomes {
        generator.presign_exhausted |= outcome.exhausted;
        generator.send_backlog += outcome.backlog;
        generator.warmup_skipped += outcome.skipped;
        if first_error.is_none() {
            first_error.clone_from(&outcome.error);
        }
    }
    generator.send_lag_us = summary_of_lags(&outcomes);
    generator.senders_realtime =
        !outcomes.is_empty() && outcomes.iter().all(|outcome| outcome.realtime);
    generator.cpu_cores_used = round(cpu_cores_used, 2);
    let measured_s = measured_seconds(&shared, config, closed);
    let published: u64 = outcomes.iter().map(|outcome| outcome.measured_sent).sum();
    let offered: u64 = outcomes.iter().map(|outcome| outcome.measured).sum();
    let mut verification = verification;
    verification.counted = written.tally(&totals.counted_streams, totals.counted_measured);
    let (expected, delivered) = if config.mode == Mode::Sub {
        (totals.measured_span, totals.measured)
    } else {
        (
            expected_checked + verification.counted.expected_frames,
            totals.measured + verification.counted.received_frames,
        )
    };
    report.closed_loop = closed;
    report.target = Some(config.target.clone());
    report.measured_s = round(measured_s, 3);
    report.cohorts = u64::from(config.cohorts);
    report.publishers = if config.mode.publishes() {
        plan.publisher_count() as u64
    } else {
        0
    };
    report.subscribers = if config.mode.subscribes() {
        plan.subscriber_count() as u64
    } else {
        0
    };
    report.size = config.size as u64;
    report.published = published;
    report.publications_per_s = round(published as f64 / measured_s, 1);
    report.offered_per_s = round(offered as f64 / measured_s, 1);
    let measured_deliveries = totals.measured + totals.counted_measured;
    report.deliveries_per_s = round(measured_deliveries as f64 / measured_s, 1);
    report.delivered_bytes_per_s = round(totals.payload_bytes as f64 / measured_s, 1);
    report.delivered_wire_bytes_per_s = round(totals.wire_bytes as f64 / measured_s, 1);
    report.expected = expected;
    report.delivered = delivered;
    report.loss = if expected == 0 {
        0.0
    } else {
        (1.0 - delivered as f64 / expected as f64).max(0.0)
    };
    report.reordered = totals.reordered;
    report.invalid = totals.invalid;
    report.subscriber_resets = totals.resets;
    report.latency_us = totals.latency.summary();
    report.verification = verification;
    report.generator = generator;
    report.first_error = first_error;
    Ok(report)
}

/// Frames the publishers wrote completely, by cohort and by publisher: what each counting
/// stream must have received.
struct Written {
    by_cohort: Vec<u64>,
    by_publisher: Vec<u64>,
}

impl Written {
    fn of(plan: &Plan, outcomes: &[SendOutcome], cohort_of: &dyn Fn(u32) -> u32) -> Self {
        let mut written = Self {
            by_cohort: vec![0; plan.cohorts.len()],
            by_publisher: vec![0; plan.publisher_count()],
        };
        for outcome in outcomes {
            if let Some(count) = written
                .by_cohort
                .get_mut(cohort_of(outcome.publisher) as usize)
            {
                *count += outcome.written;
            }
            if let Some(count) = written.by_publisher.get_mut(outcome.publisher as usize) {
                *count = outcome.written;
            }
        }
        written
    }

    /// What one counting stream should have received: all of its cohort, less its own
    /// publisher's (never echo, R25).
    fn expected_for(&self, cohort: u32, own_publisher: Option<u32>) -> u64 {
        let all = self.by_cohort.get(cohort as usize).copied().unwrap_or(0);
        let own = own_publisher
            .and_then(|publisher| self.by_publisher.get(publisher as usize))
            .copied()
            .unwrap_or(0);
        all.saturating_sub(own)
    }

    /// Frames all counting streams should receive: `counted_subscribers` per cohort, plus
    /// every publisher stream of a cohort with several publishers.
    fn expected_total(&self, counted_subscribers: &[u64], plan: &Plan) -> u64 {
        let subscribers: u64 = counted_subscribers
            .iter()
            .enumerate()
            .map(|(cohort, count)| count * self.by_cohort.get(cohort).copied().unwrap_or(0))
            .sum();
        let publisher_streams: u64 = plan
            .cohorts
            .iter()
            .filter(|cohort| cohort.publishers.len() > 1)
            .flat_map(|cohort| cohort.publishers.iter())
            .map(|publisher| self.expected_for(publisher.cohort, Some(publisher.global)))
            .sum();
        subscribers + publisher_streams
    }

    /// The counting streams' tally against what was written to them.
    fn tally(&self, streams: &[CountedStream], measured_frames: u64) -> CountedFigures {
        let mut figures = CountedFigures {
            measured_frames,
            ..CountedFigures::default()
        };
        for stream in streams {
            let expected = self.expected_for(stream.cohort, stream.own_publisher);
            figures.expected_frames += expected;
            figures.received_frames += stream.frames.min(expected);
            figures.short_streams += u64::from(stream.is_short(expected));
            figures.reset_streams += u64::from(!stream.open);
        }
        figures
    }
}

/// `--sources` binds loopback addresses, which reach only a server on this host.
fn require_loopback(target: &str) -> Result<(), RunError> {
    let addresses: Vec<IpAddr> = target
        .to_socket_addrs()
        .map_err(|error| RunError::Failed(format!("cannot resolve {target}: {error}")))?
        .map(|address| address.ip())
        .collect();
    if addresses.is_empty() || !addresses.iter().all(IpAddr::is_loopback) {
        return Err(RunError::Failed(format!(
            "--sources binds 127.0.0.x source addresses, so the target must be on loopback, not {target}"
        )));
    }
    Ok(())
}

/// Signs every message of one publisher (module docs, step 3), or with a feed its first
/// `count`.
fn sign_publisher(
    config: &LoadConfig,
    plan: &Plan,
    publisher: &JoinedPublisher,
    schedule: Schedule,
    base_index: u64,
    count: u64,
    workers: usize,
) -> Result<Vec<Bytes>, RunError> {
    let (spec, key) = publisher_key(plan, publisher)?;
    let job = SignJob {
        spec,
        key,
        challenge: publisher.challenge,
        base_index,
        count,
    };
    presign(&job, workers, &stamped(config, publisher, schedule))
        .map_err(|error| RunError::Failed(format!("presigning: {error}")))
}

/// Starts the feed that signs the rest of one publisher's `count` messages during the run,
/// after its `presigned` first ones.
fn start_feed(
    config: &LoadConfig,
    plan: &Plan,
    publisher: &JoinedPublisher,
    schedule: Schedule,
    base_index: u64,
    count: u64,
    presigned: Vec<Bytes>,
) -> Result<SignFeed, RunError> {
    let (spec, key) = publisher_key(plan, publisher)?;
    let job = FeedJob {
        spec,
        key: key.clone(),
        challenge: publisher.challenge,
        base_index,
        count,
    };
    let ahead = usize::try_from(config.sign_ahead).unwrap_or(usize::MAX);
    SignFeed::start(
        job,
        presigned,
        ahead,
        Box::new(stamped(config, publisher, schedule)),
    )
    .map_err(failed("spawning a signing thread"))
}

/// The cohort spec and key of one joined publisher.
fn publisher_key<'a>(
    plan: &'a Plan,
    publisher: &JoinedPublisher,
) -> Result<(Spec, &'a SigningKey), RunError> {
    let cohort = plan
        .cohorts
        .get(publisher.cohort as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {}", publisher.cohort)))?;
    let key = cohort
        .publishers
        .iter()
        .find(|plan| plan.global == publisher.global)
        .map(|plan| &plan.key)
        .ok_or_else(|| RunError::Failed(format!("no publisher {}", publisher.global)))?;
    Ok((cohort.spec, key))
}

/// The payload of one publisher's message by sequence: its stamp, intended time included.
fn stamped(
    config: &LoadConfig,
    publisher: &JoinedPublisher,
    schedule: Schedule,
) -> impl Fn(u64) -> Vec<u8> + Send + Sync + 'static {
    let (global, cohort, size) = (publisher.global, publisher.cohort, config.size);
    move |sequence| {
        let stamp = Stamp {
            publisher: global,
            sequence,
            intended_ns: schedule.intended_ns(sequence).unwrap_or(0),
            cohort,
        };
        payload(&stamp, size)
    }
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

/// Every receiving endpoint, in one bucket per receiving thread: subscribers round robin
/// (verifying ones, when only some verify, in `config.threads` buckets of their own: a
/// verification, ~70 µs, must not hold up the other streams behind it on the same thread,
/// or the broker would reset those for full queues, R26, and the run would measure the
/// generator), then the counted publisher streams round robin over the other buckets.
/// `frame_bytes` is each cohort's frame length, `reading` its subscribers that read.
fn build_buckets(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
    subscribers: Vec<JoinedSubscriber>,
    publishers: &[JoinedPublisher],
    (frame_bytes, reading): (&[Result<usize, String>], &[u64]),
) -> Result<Vec<Vec<Endpoint>>, RunError> {
    let threads = config.threads.max(1);
    let verifying = subscribers
        .iter()
        .filter(|subscriber| subscriber.kind == CheckKind::Verify)
        .count();
    let mixed = verifying > 0 && verifying < subscribers.len();
    let mut buckets: Vec<Vec<Endpoint>> = (0..if mixed { 2 * threads } else { threads })
        .map(|_| Vec::new())
        .collect();
    let (mut plain_slot, mut verifying_slot) = (0usize, 0usize);
    // A counting stream divides its bytes by one delivery's wire size: over WebSocket the
    // server's message header is part of it.
    let frame_of = |cohort: u32| {
        frame_bytes
            .get(cohort as usize)
            .cloned()
            .unwrap_or_else(|| Err(format!("no cohort {cohort}")))
            .map(|frame| match config.transport {
                Transport::Tcp => frame,
                Transport::Ws => websocket::message_bytes(frame),
            })
            .map_err(RunError::Failed)
    };
    let endpoint_wire = match (wire, config.transport) {
        (Wire::Bps, Transport::Ws) => Wire::WebSocket,
        _ => wire,
    };
    for subscriber in subscribers {
        let cohort = plan
            .cohorts
            .get(subscriber.cohort as usize)
            .ok_or_else(|| RunError::Failed(format!("no cohort {}", subscriber.cohort)))?;
        let check = match (subscriber.kind, wire) {
            (CheckKind::Verify, _) => Check::Verify(Box::new(Subscriber::new(cohort.spec))),
            (CheckKind::Compare, Wire::Bps)
                if config.mode == Mode::Pubsub && !config.signs_ahead() =>
            {
                Check::Bytes
            }
            (CheckKind::Compare, _) => Check::Stamp,
            (CheckKind::Count, Wire::Bps | Wire::WebSocket) => Check::Count {
                frame_bytes: frame_of(subscriber.cohort)?,
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
        };
        let bucket = if mixed && subscriber.kind == CheckKind::Verify {
            verifying_slot += 1;
            threads + (verifying_slot - 1) % threads
        } else {
            plain_slot += 1;
            (plain_slot - 1) % threads
        };
        let endpoint = Endpoint::new(
            subscriber.stream,
            &subscriber.leftover,
            endpoint_wire,
            subscriber.cohort,
            subscriber.cohort * plan.publishers_per_cohort,
            plan.publishers_per_cohort,
            check,
        )
        .map_err(failed("subscriber socket"))?;
        let has_readers = reading
            .get(subscriber.cohort as usize)
            .is_some_and(|count| *count > 0);
        buckets[bucket].push(if endpoint.counts() && has_readers {
            endpoint.outside_window()
        } else {
            endpoint
        });
    }
    for publisher in publishers
        .iter()
        .filter(|publisher| counts_publisher_stream(wire, plan, publisher.cohort))
    {
        let stream = publisher
            .stream
            .try_clone()
            .map_err(failed("publisher socket"))?;
        let endpoint = Endpoint::publisher_stream(
            stream,
            &publisher.leftover,
            publisher.cohort,
            publisher.global,
            frame_of(publisher.cohort)?,
            config.size,
        )
        .map_err(failed("publisher socket"))?;
        plain_slot += 1;
        buckets[(plain_slot - 1) % threads].push(endpoint);
    }
    Ok(buckets)
}

/// The NATS subscription id of subscriber `member` (ids start at 1).
fn nats_sid(member: u32) -> u64 {
    u64::from(member) + 1
}

/// Runs `work` on every item, `threads` contiguous shares in parallel; results in order,
/// or the first error.
fn in_parallel<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    work: &(dyn Fn(T) -> Result<R, RunError> + Sync),
) -> Result<Vec<R>, RunError> {
    let share = items.len().div_ceil(threads.max(1)).max(1);
    let mut shares: Vec<Vec<T>> = Vec::new();
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        shares.push(items.by_ref().take(share).collect());
    }
    thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || share.into_iter().map(work).collect::<Result<Vec<R>, _>>())
            })
            .collect();
        let mut results = Vec::new();
        for handle in handles {
            let part = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            results.extend(part);
        }
        Ok(results)
    })
}

/// The send-lag percentiles over all publishers: the worst publisher's (lags are per
/// stream; the worst one bounds how late any message left).
fn summary_of_lags(outcomes: &[SendOutcome]) -> crate::load::latency::LatencySummary {
    outcomes
        .iter()
        .map(|outcome| outcome.lag)
        .max_by_key(|lag| (lag.p99, lag.max))
        .unwrap_or_default()
}

/// Seconds actually measured: the window, or in closed loop up to the last write when the
/// presigned messages ran out early.
fn measured_seconds(shared: &Shared, config: &LoadConfig, closed: bool) -> f64 {
    let window = config.duration.as_secs_f64();
    if !closed {
        return window;
    }
    let last = shared
        .publishers
        .iter()
        .flat_map(|publisher| publisher.sent_ns.iter())
        .map(|slot| slot.load(Ordering::Relaxed))
        .filter(|at| shared.measured(*at))
        .max();
    match last {
        Some(last)
            if !shared
                .publishers
                .iter()
                .all(|publisher| publisher.sent_ns.is_empty()) =>
        {
            let span = (last - shared.measure_from_ns) as f64 / 1e9;
            span.clamp(1e-3, window)
        }
        _ => window,
    }
}

/// Nice 10 for this thread (on Linux a thread's nice value is its own).
fn lower_priority() {
    // SAFETY: gettid and setpriority take integers only; a failure leaves the priority.
    unsafe {
        let thread = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, thread as libc::id_t, 10);
    }
}

/// User and system CPU time of this process so far, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given; a failure leaves it zeroed.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

fn pin(cpu: Option<usize>) {
    if let Some(id) = cpu {
        core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

/// Joins every subscriber of the plan, [`JOIN_THREADS`] at a time.
fn join_subscribers(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
) -> Result<Vec<JoinedSubscriber>, RunError> {
    let members: Vec<(u32, u32)> = plan
        .cohorts
        .iter()
        .flat_map(|cohort| {
            (0..cohort.subscribers.len() as u32).map(|member| (cohort.index, member))
        })
        .collect();
    in_parallel(members, JOIN_THREADS, &|(cohort, member)| {
        join_subscriber(config, plan, wire, cohort, member)
    })
}

fn join_subscriber(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
    cohort_index: u32,
    member: u32,
) -> Result<JoinedSubscriber, RunError> {
    let cohort = plan
        .cohorts
        .get(cohort_index as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {cohort_index}")))?;
    let source = plan
        .source_of(cohort_index, Member::Subscriber(member))
        .map(IpAddr::V4);
    let kind = config.check_of(member);
    let (stream, leftover) = match wire {
        Wire::Bps | Wire::WebSocket => {
            let addr = cohort
                .subscribers
                .get(member as usize)
                .copied()
                .unwrap_or([0; 20]);
            let joined = join(config, source, cohort, &addr)?;
            (joined.stream, joined.leftover)
        }
        Wire::Nats => {
            let connected = nats::connect(&config.target, source, "bps-bench-sub")
                .map_err(failed("NATS connect"))?;
            let subscribed = nats::subscribe(
                connected,
                &plan.nats_subject(cohort_index),
                nats_sid(member),
            )
            .map_err(failed("NATS subscribe"))?;
            (subscribed.stream, subscribed.leftover)
        }
    };
    Ok(JoinedSubscriber {
        cohort: cohort_index,
        member,
        kind,
        stream,
        leftover,
    })
}

fn join(
    config: &LoadConfig,
    source: Option<IpAddr>,
    cohort: &CohortPlan,
    addr: &[u8; 20],
) -> Result<dial::Joined, RunError> {
    let joined = dial::join(&config.target, source, &cohort.spec, addr, config.transport);
    joined.map_err(|error| match error {
        JoinError::Refused(refusal) => RunError::Refused(format!(
            "join of cohort {} refused: {refusal}{}",
            cohort.index,
            if refusal.status == Status::Full {
                " (the per-peer bounds count source addresses: more --sources spreads the load)"
            } else {
                ""
            }
        )),
        JoinError::Failed(message) => {
            RunError::Failed(format!("join of cohort {}: {message}", cohort.index))
        }
    })
}

/// Joins every publisher, [`JOIN_THREADS`] at a time; a pending stream (the live stream's
/// admin) claims at once.
fn join_publishers(
    config: &LoadConfig,
    plan: &Plan,
    base_index: u64,
) -> Result<Vec<JoinedPublisher>, RunError> {
    let publishers: Vec<(u32, u32)> = plan
        .cohorts
        .iter()
        .flat_map(|cohort| (0..cohort.publishers.len() as u32).map(|local| (cohort.index, local)))
        .collect();
    in_parallel(publishers, JOIN_THREADS, &|(cohort, local)| {
        join_publisher(config, plan, base_index, cohort, local)
    })
}

fn join_publisher(
    config: &LoadConfig,
    plan: &Plan,
    base_index: u64,
    cohort_index: u32,
    local: u32,
) -> Result<JoinedPublisher, RunError> {
    let cohort = plan
        .cohorts
        .get(cohort_index as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {cohort_index}")))?;
    let publisher = cohort.publishers.get(local as usize).ok_or_else(|| {
        RunError::Failed(format!("no publisher {local} in cohort {cohort_index}"))
    })?;
    let source = plan
        .source_of(cohort_index, Member::Publisher(local))
        .map(IpAddr::V4);
    if config.mode == Mode::Nats {
        let connected = nats::connect(&config.target, source, "bps-bench-pub")
            .map_err(failed("NATS connect"))?;
        return Ok(JoinedPublisher {
            global: publisher.global,
            cohort: cohort_index,
            stream: connected.stream,
            challenge: [0; 32],
            leftover: connected.leftover,
        });
    }
    let mut joined = join(config, source, cohort, &publisher.key.address())?;
    let mut client = Publisher::new(
        cohort.spec,
        publisher.key.clone(),
        PublisherConfig {
            data_index_start: base_index,
            ..PublisherConfig::default()
        },
    )
    .map_err(|error| RunError::Failed(error.to_string()))?;
    client.begin_session(joined.challenge);
    if client.role() == Some(Role::Pending) {
        let claim = client
            .next_frame()
            .map_err(|error| RunError::Failed(error.to_string()))?
            .ok_or_else(|| {
                RunError::Failed("a pending publisher has no claim to send".to_owned())
            })?;
        let claim = match config.transport {
            Transport::Tcp => claim.signed.frame.to_vec(),
            Transport::Ws => Framing::wrap(&claim.signed.frame),
        };
        joined.stream.write_all(&claim).map_err(failed("claim"))?;
        client.mark_sent();
    }
    Ok(JoinedPublisher {
        global: publisher.global,
        cohort: cohort_index,
        stream: joined.stream,
        challenge: joined.challenge,
        leftover: joined.leftover,
    })
}

#[cfg(test)]
mod tests {
    use bps_proto::Binding;

    use super::*;
    use crate::load::latency::LatencySummary;

    fn outcome(publisher: u32, written: u64) -> SendOutcome {
        SendOutcome {
            publisher,
            sent: written,
            written,
            measured: 0,
            measured_sent: 0,
            exhausted: false,
            backlog: 0,
            lag: LatencySummary::default(),
            skipped: 0,
            realtime: false,
            error: None,
        }
    }

    fn stream(
        own_publisher: Option<u32>,
        frames: u64,
        partial_bytes: u64,
        open: bool,
    ) -> CountedStream {
        CountedStream {
            cohort: 0,
            own_publisher,
            frames,
            partial_bytes,
            server_pings: 0,
            open,
        }
    }

    #[test]
    fn counted_streams_expect_everyone_but_their_own_publisher_and_loss_shows() {
        // One ALL cohort of three publishers (D7): 10, 20 and 30 frames written.
        let plan = Plan::new(1, 1, 3, 2, Binding::Mnemonic).expect("plan");
        let outcomes = [outcome(0, 10), outcome(1, 20), outcome(2, 30)];
        let written = Written::of(&plan, &outcomes, &|_| 0);
        assert_eq!(
            written.expected_for(0, None),
            60,
            "a subscriber gets everything"
        );
        assert_eq!(written.expected_for(0, Some(1)), 40, "never its own (R25)");
        // Two counting subscribers and the three publisher streams.
        assert_eq!(written.expected_total(&[2], &plan), 2 * 60 + 50 + 40 + 30);
        let streams = [
            stream(None, 60, 0, true),
            stream(None, 57, 100, false),
            stream(Some(0), 50, 0, true),
            stream(Some(1), 40, 0, true),
            stream(Some(2), 31, 0, true),
        ];
        let tally = written.tally(&streams, 200);
        assert_eq!(tally.expected_frames, 60 + 60 + 50 + 40 + 30);
        assert_eq!(
            tally.received_frames,
            60 + 57 + 50 + 40 + 30,
            "a stream's surplus never hides another's loss"
        );
        assert_eq!((tally.short_streams, tally.reset_streams), (1, 1));
        assert_eq!(tally.measured_frames, 200);
    }
}
