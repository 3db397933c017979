//! One load run of `pubsub`, `pub`, `sub` or `nats`: join, presign, pace, receive,
//! report.
//!
//! Owns: the run's timeline and threads. In order:
//! 1. every subscriber stream joins (BPS `Join`/`Ack` through [`Session`], NATS `SUB`),
//!    spread over the receiving threads;
//! 2. every publisher stream joins and, when pending, claims at once (AUTH at index 0,
//!    D3) through the client library's [`Publisher`];
//! 3. every message of the run is signed under its stream's challenge ([`presign`]), the
//!    open-loop `t0` placed after the estimated signing time; the warm-up absorbs any
//!    error of the estimate, and a run whose signing ran past the warm-up fails rather
//!    than measure a burst;
//! 4. receiving threads (one per CPU, epoll) and one thread per publisher start, pinned to
//!    `--cpus` when given; a progress line is printed every second;
//! 5. after the last scheduled message, deliveries are awaited until every measured
//!    message reached every subscriber or `--drain` passed; then the report is built.
//!
//! Loss is exact in `pubsub` and `nats`: the publishers count the measured messages, each
//! must reach every subscriber of its cohort. `sub` mode estimates it from the span of
//! sequences each stream saw.
//!
//! Never: retries a refused Join or a reset stream during a run (it would hide loss).

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::{Hash, Status};
use bytes::Bytes;

use crate::load::config::{LoadConfig, Mode};
use crate::load::nats;
use crate::load::plan::{CohortPlan, Plan};
use crate::load::presign::{SignJob, presign, signing_cost};
use crate::load::receiver::{self, Check, Endpoint, Totals, Wire};
use crate::load::report::{Generator, Report, Verification, round};
use crate::load::schedule::{Schedule, now_ns};
use crate::load::sender::{self, SendOutcome, SendTask, Source};
use crate::load::shared::{PublisherShared, Shared};
use crate::load::stamp::{Stamp, payload};
use bps_client::publisher::{Publisher, PublisherConfig, Role};
use bps_client::session::{JoinOutcome, Session, SessionConfig};
use bps_client::subscriber::Subscriber;

/// Time between the end of signing and `t0` (threads start, sockets settle).
const START_LEAD: Duration = Duration::from_millis(300);

/// Margin on the estimated signing time.
const SIGNING_ESTIMATE_MARGIN: f64 = 2.0;

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
    stream: std::net::TcpStream,
    challenge: Hash,
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
    .map_err(|error| RunError::Failed(error.to_string()))?;
    crate::load::poller::raise_open_files_limit();
    let mut report = Report::new(
        config.mode.name(),
        serde_json::to_value(config).unwrap_or_default(),
    );
    let wire = if config.mode == Mode::Nats {
        Wire::Nats
    } else {
        Wire::Bps
    };
    let base_index = now_ns() / 1000;

    // 1. Subscribers.
    let buckets = if config.mode.subscribes() {
        join_subscribers(config, &plan, wire)?
    } else {
        Vec::new()
    };
    let mut verification = Verification {
        fraction: config.verify_fraction,
        ..Verification::default()
    };
    for endpoint in buckets.iter().flatten() {
        match (endpoint.verifies(), config.mode) {
            (true, _) => verification.verifying_subscribers += 1,
            (false, Mode::Pubsub) => verification.byte_checked_subscribers += 1,
            (false, _) => verification.stamp_only_subscribers += 1,
        }
    }

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
    let count = if closed { config.presign } else { open_count };
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
            let Some(cohort) = plan.cohorts.get(publisher.cohort as usize) else {
                continue;
            };
            let Some(key) = cohort
                .publishers
                .iter()
                .find(|plan| plan.global == publisher.global)
                .map(|plan| &plan.key)
            else {
                continue;
            };
            let schedule = schedule_of(publisher.global);
            let job = SignJob {
                spec: cohort.spec,
                key,
                challenge: publisher.challenge,
                base_index,
                count,
            };
            let (global, cohort_index, size) = (publisher.global, publisher.cohort, config.size);
            let frames = presign(&job, workers, &|sequence| {
                let stamp = Stamp {
                    publisher: global,
                    sequence,
                    intended_ns: schedule.intended_ns(sequence).unwrap_or(0),
                    cohort: cohort_index,
                };
                payload(&stamp, size)
            })
            .map_err(|error| RunError::Failed(format!("presigning: {error}")))?;
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

    // 4. Shared state and threads.
    let cpu_at_start = cpu_seconds();
    let wall_at_start = Instant::now();
    let cohort_subscribers = plan
        .cohorts
        .iter()
        .map(|cohort| {
            if config.mode.subscribes() {
                cohort.subscribers.len() as u64
            } else {
                0
            }
        })
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
                    frames: if config.mode == Mode::Pubsub {
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
        .map(|bucket| {
            let shared = Arc::clone(&shared);
            let cpu = next_cpu();
            // Verifying threads beside byte-checking ones yield the core to them (module
            // docs of join_subscribers); a verifying stream that falls behind is reset by
            // the broker and reported, instead of dragging every stream down.
            let yielding = mixed && bucket.iter().all(Endpoint::verifies);
            thread::Builder::new()
                .name("bps-bench-recv".to_owned())
                .spawn(move || {
                    pin(cpu);
                    if yielding {
                        lower_priority();
                    }
                    receiver::run(bucket, &shared)
                })
        })
        .collect::<Result<_, _>>()
        .map_err(failed("spawning a receiver"))?;
    let senders: Vec<_> = joined
        .into_iter()
        .map(|publisher| {
            let source = if wire == Wire::Nats {
                Source::Nats {
                    subject: plan.nats_subject(publisher.cohort),
                    size: config.size,
                    publisher: publisher.global,
                    cohort: publisher.cohort,
                }
            } else {
                Source::Presigned(Arc::new(
                    frames_by_publisher
                        .get_mut(publisher.global as usize)
                        .map(std::mem::take)
                        .unwrap_or_default(),
                ))
            };
            let task = SendTask {
                publisher: publisher.global,
                stream: publisher.stream,
                source,
                schedule: schedule_of(publisher.global),
                end_ns: measure_to,
                deadline_ns: deadline,
                cohort: publisher.cohort,
                window: config.window,
            };
            let shared = Arc::clone(&shared);
            let cpu = next_cpu();
            thread::Builder::new()
                .name("bps-bench-send".to_owned())
                .spawn(move || {
                    pin(cpu);
                    sender::run(task, &shared)
                })
        })
        .collect::<Result<_, _>>()
        .map_err(failed("spawning a sender"))?;

    // 5. Progress, then drain.
    let progress = Progress::new(config.quiet, t0, measure_from, measure_to);
    let mut progress = progress;
    while now_ns() < measure_to && !(senders.is_empty() && receivers.is_empty()) {
        if !senders.is_empty() && senders.iter().all(thread::JoinHandle::is_finished) {
            break;
        }
        progress.tick(&shared);
    }
    let outcomes: Vec<SendOutcome> = senders
        .into_iter()
        .map(|handle| {
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
        .collect();
    let cohort_subscribers = |cohort: u32| {
        if config.mode.subscribes() {
            plan.cohorts
                .get(cohort as usize)
                .map_or(0, |cohort: &CohortPlan| cohort.subscribers.len() as u64)
        } else {
            0
        }
    };
    let expected: u64 = outcomes
        .iter()
        .map(|outcome| {
            let cohort = shared
                .publishers
                .get(outcome.publisher as usize)
                .map_or(0, |publisher| publisher.cohort);
            outcome.measured * cohort_subscribers(cohort)
        })
        .sum();
    let drain_until = now_ns().max(measure_to) + config.drain.as_nanos() as u64;
    while !receivers.is_empty() && now_ns() < drain_until {
        if config.mode != Mode::Sub && shared.delivered_measured.load(Ordering::Relaxed) >= expected
        {
            break;
        }
        progress.tick(&shared);
    }
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
    let mut generator = Generator {
        threads: receiving_threads,
        cpus: config.cpus.clone(),
        presigned: if signs { count * publishers } else { 0 },
        presign_s: round(presign_s, 3),
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
    let (expected, delivered) = if config.mode == Mode::Sub {
        (totals.measured_span, totals.measured)
    } else {
        (expected, totals.measured)
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
    report.deliveries_per_s = round(delivered as f64 / measured_s, 1);
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

/// Joins every subscriber, spread round robin over `config.threads` buckets (one per
/// receiving thread), each bucket joined by its own thread. When only some subscribers
/// verify, they get `config.threads` buckets of their own (the last ones): a verification
/// (~70 µs) must not hold up the byte-checked streams behind it on the same thread, or the
/// broker would reset those for full queues (R26) and the run would measure the generator.
fn join_subscribers(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
) -> Result<Vec<Vec<Endpoint>>, RunError> {
    let threads = config.threads.max(1);
    let verifying = if wire == Wire::Bps {
        config.verifying_per_cohort()
    } else {
        0
    };
    let mixed = verifying > 0 && verifying < config.subscribers;
    let mut work: Vec<Vec<(u32, u32)>> =
        vec![Vec::new(); if mixed { 2 * threads } else { threads }];
    let (mut plain_slot, mut verifying_slot) = (0usize, 0usize);
    for cohort in &plan.cohorts {
        for member in 0..cohort.subscribers.len() as u32 {
            if mixed && member < verifying {
                work[threads + verifying_slot % threads].push((cohort.index, member));
                verifying_slot += 1;
            } else {
                work[plain_slot % threads].push((cohort.index, member));
                plain_slot += 1;
            }
        }
    }
    thread::scope(|scope| {
        let handles: Vec<_> = work
            .into_iter()
            .map(|members| {
                scope.spawn(move || {
                    members
                        .into_iter()
                        .map(|(cohort, member)| {
                            join_subscriber(config, plan, wire, cohort, member, member < verifying)
                        })
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

fn join_subscriber(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
    cohort_index: u32,
    member: u32,
    verify: bool,
) -> Result<Endpoint, RunError> {
    let cohort = plan
        .cohorts
        .get(cohort_index as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {cohort_index}")))?;
    let first_publisher = cohort_index * plan.publishers_per_cohort;
    let publishers = plan.publishers_per_cohort;
    match wire {
        Wire::Bps => {
            let addr = cohort
                .subscribers
                .get(member as usize)
                .copied()
                .unwrap_or([0; 20]);
            let session = join(&config.target, cohort, &addr)?;
            let (stream, leftover) = session.into_parts();
            let check = if verify {
                Check::Verify(Box::new(Subscriber::new(cohort.spec)))
            } else if config.mode == Mode::Pubsub {
                Check::Bytes
            } else {
                Check::Stamp
            };
            Endpoint::new(
                stream,
                &leftover,
                wire,
                cohort_index,
                first_publisher,
                publishers,
                check,
            )
            .map_err(failed("subscriber socket"))
        }
        Wire::Nats => {
            let connected =
                nats::connect(&config.target, "bps-bench-sub").map_err(failed("NATS connect"))?;
            let subscribed = nats::subscribe(
                connected,
                &plan.nats_subject(cohort_index),
                u64::from(member) + 1,
            )
            .map_err(failed("NATS subscribe"))?;
            Endpoint::new(
                subscribed.stream,
                &subscribed.leftover,
                wire,
                cohort_index,
                first_publisher,
                publishers,
                Check::Stamp,
            )
            .map_err(failed("subscriber socket"))
        }
    }
}

fn join(target: &str, cohort: &CohortPlan, addr: &[u8; 20]) -> Result<Session, RunError> {
    match Session::join(target, &cohort.spec, addr, SessionConfig::default()) {
        Ok(JoinOutcome::Joined(session)) => Ok(session),
        Ok(JoinOutcome::Refused(status)) => Err(RunError::Refused(format!(
            "join of cohort {} refused: {}{}",
            cohort.index,
            Status::as_str_name(&status),
            if status == Status::Full {
                " (a broker bounds streams per peer address and cohort, R33: load from one \
                 address needs those bounds raised, e.g. bps-broker \
                 --set limits.streams_per_peer_per_cohort_max=20000)"
            } else {
                ""
            }
        ))),
        Err(error) => Err(RunError::Failed(format!(
            "join of cohort {}: {error}",
            cohort.index
        ))),
    }
}

/// Joins every publisher; a pending stream (the live stream's admin) claims at once.
fn join_publishers(
    config: &LoadConfig,
    plan: &Plan,
    base_index: u64,
) -> Result<Vec<JoinedPublisher>, RunError> {
    let mut joined = Vec::new();
    for cohort in &plan.cohorts {
        for publisher in &cohort.publishers {
            if config.mode == Mode::Nats {
                let connected = nats::connect(&config.target, "bps-bench-pub")
                    .map_err(failed("NATS connect"))?;
                joined.push(JoinedPublisher {
                    global: publisher.global,
                    cohort: cohort.index,
                    stream: connected.stream,
                    challenge: [0; 32],
                });
                continue;
            }
            let mut session = join(&config.target, cohort, &publisher.key.address())?;
            let challenge = *session.challenge();
            let mut client = Publisher::new(
                cohort.spec,
                publisher.key.clone(),
                PublisherConfig {
                    data_index_start: base_index,
                    ..PublisherConfig::default()
                },
            )
            .map_err(|error| RunError::Failed(error.to_string()))?;
            client.begin_session(challenge);
            if client.role() == Some(Role::Pending) {
                let claim = client
                    .next_frame()
                    .map_err(|error| RunError::Failed(error.to_string()))?
                    .ok_or_else(|| {
                        RunError::Failed("a pending publisher has no claim to send".to_owned())
                    })?;
                session
                    .send(&claim.signed.frame)
                    .map_err(|error| RunError::Failed(format!("claim: {error}")))?;
                client.mark_sent();
            }
            let (stream, _) = session.into_parts();
            joined.push(JoinedPublisher {
                global: publisher.global,
                cohort: cohort.index,
                stream,
                challenge,
            });
        }
    }
    Ok(joined)
}

/// The once-a-second progress line on stderr.
struct Progress {
    quiet: bool,
    t0: u64,
    measure_from: u64,
    measure_to: u64,
    last_at: Instant,
    last_published: u64,
    last_delivered: u64,
}

impl Progress {
    fn new(quiet: bool, t0: u64, measure_from: u64, measure_to: u64) -> Self {
        Self {
            quiet,
            t0,
            measure_from,
            measure_to,
            last_at: Instant::now(),
            last_published: 0,
            last_delivered: 0,
        }
    }

    /// Sleeps up to 100 ms; prints a line when a second has passed since the last one.
    fn tick(&mut self, shared: &Shared) {
        thread::sleep(Duration::from_millis(100));
        let elapsed = self.last_at.elapsed();
        if elapsed < Duration::from_secs(1) {
            return;
        }
        let published = shared.published.load(Ordering::Relaxed);
        let delivered = shared.delivered.load(Ordering::Relaxed);
        let seconds = elapsed.as_secs_f64();
        let now = now_ns();
        let phase = if now < self.t0 {
            "start"
        } else if now < self.measure_from {
            "warmup"
        } else if now < self.measure_to {
            "measure"
        } else {
            "drain"
        };
        if !self.quiet {
            let delivered_rate = (delivered - self.last_delivered) as f64 / seconds;
            let line = format!(
                "[{:>6.1}s {phase:<7}] pub {:>9.0}/s  deliv {:>10.0}/s  invalid {}  resets {}\n",
                now.saturating_sub(self.t0) as f64 / 1e9,
                (published - self.last_published) as f64 / seconds,
                delivered_rate,
                shared.invalid.load(Ordering::Relaxed),
                shared.resets.load(Ordering::Relaxed),
            );
            let _ = io::stderr().write_all(line.as_bytes());
        }
        self.last_at = Instant::now();
        self.last_published = published;
        self.last_delivered = delivered;
    }
}
