//! One load run of `pubsub`, `pub`, `sub` or `nats`: join, presign, pace, receive,
//! report.
//!
//! Owns: the run's timeline and threads. In order:
//! 1. every subscriber stream joins (BPS `Join`/`Ack` through
//!    [`dial`](crate::load::dial), from its source address; NATS `SUB`), a few joining
//!    threads at a time;
//! 2. every publisher stream joins and, when pending, claims at once (AUTH at index 0,
//!    D3) through the client library's [`Publisher`](bps_client::publisher::Publisher);
//! 3. every message of the run is signed under its stream's challenge
//!    ([`presign`](crate::load::presign)), the open-loop `t0` placed after the estimated
//!    signing time; the warm-up absorbs any error of the estimate, and a run whose signing
//!    ran past the warm-up fails rather than measure a burst; with `--sign-ahead` (open
//!    loop) only the first frames are signed before `t0` and a
//!    [`SignFeed`](crate::load::sign_feed::SignFeed) per publisher signs the rest during
//!    the run;
//! 4. each subscriber gets its reader
//!    ([`LoadConfig::check_of`](crate::load::config::LoadConfig::check_of): verify,
//!    compare, or count bytes against the run's one frame length) and, under publishers
//!    ALL, each publisher stream a counting reader too; receiving threads (one per CPU,
//!    epoll) and sending threads (a few publishers each) start, pinned to `--cpus` when
//!    given; the [`progress`](crate::load::progress) line is redrawn every second on a
//!    terminal;
//! 5. after the last scheduled message, deliveries are awaited until every measured
//!    message reached every reading subscriber and every written frame every counting
//!    stream, or `--drain` passed; then the report is built.
//!
//! Loss is exact in `pubsub`, `pub` and `nats`: the publishers count the messages, each
//! must reach every stream it is sent to (measured ones, by stamp, on the reading streams;
//! all of them, by bytes, on the counting streams). `sub` mode estimates it from the span
//! of sequences each stream saw.
//!
//! The phases are functions returning what they hold: [`join`]'s `Joined` streams,
//! [`signing`]'s `Pacing` and `Signed` frames, the `Started` threads with their
//! [`readers`], the `Finished` threads' results (checked against [`written`]'s frames),
//! and the report filled from those.
//!
//! Never: retries a refused Join or a reset stream during a run (it would hide loss).

use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Instant;

use bytes::Bytes;

use crate::load::config::{LoadConfig, Mode};
use crate::load::p2p::P2pPool;
use crate::load::plan::Plan;
use crate::load::progress::{RunProgress, RunTimeline};
use crate::load::receiver::{self, Endpoint, Totals, Wire};
use crate::load::report::{Generator, PeerLoadFigures, Report, round};
use crate::load::schedule::now_ns;
use crate::load::sender::{self, SendOutcome, SendTask, SendThread, Source};
use crate::load::shared::{PublisherShared, Shared};
use crate::load::thread_cpu::ThreadCpu;
use crate::load::websocket::{Masker, Transport};
use join::{Joined, JoinedPublisher};
use readers::Readers;
use signing::{Pacing, Signed, Times};
use written::Written;

mod join;
mod readers;
mod signing;
mod written;

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

/// Runs `config` (mode `pubsub`, `pub`, `sub` or `nats`) and returns its report.
pub fn run(config: &LoadConfig) -> Result<Report, RunError> {
    let plan = plan_of(config)?;
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
    let p2p = p2p_pool(config, &plan)?;
    let joined = join::join_all((config, p2p.as_ref()), &plan, wire, base_index)?;
    report.peer_load = Some(peer_load_of(&plan));
    let pacing = Pacing::of(config, &plan, wire, base_index);
    let signed = signing::sign_all(config, &plan, &pacing, &joined.publishers)?;
    let started = start(config, &plan, wire, &pacing, joined, signed)?;
    let finished = finish(config, &plan, started)?;
    fill_report(&mut report, config, &plan, &pacing, finished);
    if let Some(pool) = &p2p {
        let cost = pool.cost(report.delivered);
        report.figures.insert(
            "p2p".to_owned(),
            serde_json::to_value(cost).unwrap_or_default(),
        );
    }
    Ok(report)
}

/// Over `--transport p2p`, the light nodes every stream of the plan fits on.
fn p2p_pool(config: &LoadConfig, plan: &Plan) -> Result<Option<P2pPool>, RunError> {
    if config.transport != Transport::P2p {
        return Ok(None);
    }
    let mut streams = 0usize;
    if config.mode.subscribes() {
        streams += plan
            .cohorts
            .iter()
            .map(|c| c.subscribers.len())
            .sum::<usize>();
    }
    if config.mode.publishes() {
        streams += plan
            .cohorts
            .iter()
            .map(|c| c.publishers.len())
            .sum::<usize>();
    }
    let streams = u32::try_from(streams).unwrap_or(u32::MAX);
    P2pPool::connect(
        &config.target,
        config.network_id,
        streams,
        config.p2p_streams_per_connection,
    )
    .map(Some)
    .map_err(RunError::Failed)
}

/// The run's plan from the seed and shape; `--sources` only towards loopback.
fn plan_of(config: &LoadConfig) -> Result<Plan, RunError> {
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
    Ok(plan)
}

/// How the plan spreads its streams over source addresses (the report's `peer_load`).
fn peer_load_of(plan: &Plan) -> PeerLoadFigures {
    let peer_load = plan.peer_load();
    PeerLoadFigures {
        sources: peer_load.sources,
        streams_per_source_per_cohort_max: peer_load.streams_per_source_per_cohort_max,
        cohorts_per_source_max: peer_load.cohorts_per_source_max,
    }
}

/// The run under way (module docs, step 4): its threads and what its end is checked against.
struct Started {
    shared: Arc<Shared>,
    receivers: Vec<thread::JoinHandle<io::Result<Totals>>>,
    senders: Vec<thread::JoinHandle<SendThread>>,
    readers: Readers,
    times: Times,
    /// Seconds spent signing before `t0`.
    presign_s: f64,
    cpu_at_start: f64,
    wall_at_start: Instant,
}

/// Builds every reader and the shared state, and starts the receiving and sending threads.
fn start(
    config: &LoadConfig,
    plan: &Plan,
    wire: Wire,
    pacing: &Pacing,
    joined: Joined,
    signed: Signed,
) -> Result<Started, RunError> {
    let Signed {
        mut frames_by_publisher,
        times,
        presign_s,
    } = signed;
    let (readers, buckets) = readers::build(
        config,
        plan,
        wire,
        joined.subscribers,
        &joined.publishers,
        &frames_by_publisher,
    )?;
    let cpu_at_start = cpu_seconds();
    let wall_at_start = Instant::now();
    let shared = Arc::new(shared_of(
        config,
        plan,
        pacing,
        &times,
        &frames_by_publisher,
        &readers,
    ));
    let mut cpus = CpuRing::new(&config.cpus);
    let receivers = spawn_receivers(buckets, &shared, &mut cpus)?;
    let start = SendStart {
        config,
        plan,
        wire,
        pacing,
        times: &times,
    };
    let tasks = joined
        .publishers
        .into_iter()
        .map(|publisher| start.task(publisher, &mut frames_by_publisher))
        .collect::<Result<Vec<_>, _>>()?;
    let senders = spawn_senders(config, tasks, &shared, &mut cpus)?;
    Ok(Started {
        shared,
        receivers,
        senders,
        readers,
        times,
        presign_s,
        cpu_at_start,
        wall_at_start,
    })
}

/// What the run's threads share: the window and, per publisher, its frames to compare
/// against and (closed loop) its send times.
fn shared_of(
    config: &LoadConfig,
    plan: &Plan,
    pacing: &Pacing,
    times: &Times,
    frames_by_publisher: &[Vec<Bytes>],
    readers: &Readers,
) -> Shared {
    let publishers = plan
        .publishers()
        .map(|publisher| {
            let frames = frames_by_publisher
                .get(publisher.global as usize)
                .cloned()
                .unwrap_or_default();
            let sent_ns = if pacing.closed && pacing.signs {
                (0..frames.len()).map(|_| AtomicU64::new(0)).collect()
            } else {
                Vec::new()
            };
            PublisherShared {
                cohort: publisher.cohort,
                base_index: (config.mode == Mode::Pubsub).then_some(pacing.base_index),
                frames: if config.mode == Mode::Pubsub && !pacing.feeds {
                    frames
                } else {
                    Vec::new()
                },
                sent_ns,
            }
        })
        .collect();
    Shared::new(
        times.measure_from,
        times.measure_to,
        publishers,
        readers.window_subscribers(),
    )
}

/// The `--cpus` the run's threads are pinned to, round robin (none: not pinned).
struct CpuRing<'a> {
    cpus: &'a [usize],
    slot: usize,
}

impl<'a> CpuRing<'a> {
    fn new(cpus: &'a [usize]) -> Self {
        Self { cpus, slot: 0 }
    }

    /// The next thread's CPU.
    fn next(&mut self) -> Option<usize> {
        let cpu = self.cpus.get(self.slot % self.cpus.len().max(1)).copied();
        self.slot += 1;
        cpu
    }
}

/// One receiving thread per non-empty bucket.
fn spawn_receivers(
    buckets: Vec<Vec<Endpoint>>,
    shared: &Arc<Shared>,
    cpus: &mut CpuRing<'_>,
) -> Result<Vec<thread::JoinHandle<io::Result<Totals>>>, RunError> {
    let mixed = buckets.iter().flatten().any(Endpoint::verifies)
        && !buckets.iter().flatten().all(Endpoint::verifies);
    buckets
        .into_iter()
        .filter(|bucket| !bucket.is_empty())
        .enumerate()
        .map(|(index, bucket)| {
            let shared = Arc::clone(shared);
            let cpu = cpus.next();
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
        .map_err(failed("spawning a receiver"))
}

/// What every publisher's send task is made from.
struct SendStart<'a> {
    config: &'a LoadConfig,
    plan: &'a Plan,
    wire: Wire,
    pacing: &'a Pacing,
    times: &'a Times,
}

impl SendStart<'_> {
    /// One publisher's task: its stream, what it sends (presigned frames, a feed, or NATS
    /// messages) and when.
    fn task(
        &self,
        publisher: JoinedPublisher,
        frames_by_publisher: &mut [Vec<Bytes>],
    ) -> Result<SendTask, RunError> {
        let (config, pacing) = (self.config, self.pacing);
        let source = if self.wire == Wire::Nats {
            Source::Nats {
                subject: self.plan.nats_subject(publisher.cohort),
                size: config.size,
                publisher: publisher.global,
                cohort: publisher.cohort,
            }
        } else {
            let frames = frames_by_publisher
                .get_mut(publisher.global as usize)
                .map(std::mem::take)
                .unwrap_or_default();
            if pacing.feeds {
                assert!(
                    config.transport == Transport::Tcp,
                    "a feed signs bare frames: TCP only (bps-bench refuses --sign-ahead over ws)"
                );
                let schedule = pacing.schedule(publisher.global);
                Source::Fed(signing::start_feed(
                    config,
                    self.plan,
                    &publisher,
                    schedule,
                    pacing.base_index,
                    pacing.open_count,
                    frames,
                )?)
            } else {
                match config.transport {
                    Transport::Tcp | Transport::P2p => Source::Presigned(Arc::new(frames)),
                    Transport::Ws => Source::PresignedWs(Arc::new(frames), Masker::new()),
                }
            }
        };
        Ok(SendTask {
            publisher: publisher.global,
            stream: publisher.stream,
            source,
            schedule: pacing.schedule(publisher.global),
            end_ns: self.times.measure_to,
            deadline_ns: self.times.deadline,
            cohort: publisher.cohort,
            window: config.window,
        })
    }
}

/// The send tasks dealt round robin over `--send-threads` threads.
fn spawn_senders(
    config: &LoadConfig,
    tasks: Vec<SendTask>,
    shared: &Arc<Shared>,
    cpus: &mut CpuRing<'_>,
) -> Result<Vec<thread::JoinHandle<SendThread>>, RunError> {
    let send_threads = config.send_threads.clamp(1, tasks.len().max(1));
    let mut per_thread: Vec<Vec<SendTask>> = (0..send_threads).map(|_| Vec::new()).collect();
    for (at, task) in tasks.into_iter().enumerate() {
        per_thread[at % send_threads].push(task);
    }
    per_thread
        .into_iter()
        .filter(|tasks| !tasks.is_empty())
        .enumerate()
        .map(|(index, tasks)| {
            let shared = Arc::clone(shared);
            let cpu = cpus.next();
            thread::Builder::new()
                .name("bps-bench-send".to_owned())
                .spawn(move || {
                    pin(cpu);
                    sender::run(tasks, &shared, index, cpu)
                })
        })
        .collect::<Result<_, _>>()
        .map_err(failed("spawning a sender"))
}

/// The run over (module docs, step 5): every thread's results.
struct Finished {
    shared: Arc<Shared>,
    readers: Readers,
    outcomes: Vec<SendOutcome>,
    totals: Totals,
    /// Each sending thread's CPU use, in thread order.
    send_cpu: Vec<ThreadCpu>,
    receiving_threads: usize,
    sending_threads: usize,
    presign_s: f64,
    written: Written,
    /// Measured deliveries the reading subscribers should have received.
    expected_checked: u64,
    cpu_cores_used: f64,
}

/// Shows progress until the measured phase ends, joins the senders, drains the
/// deliveries and joins the receivers.
fn finish(config: &LoadConfig, plan: &Plan, started: Started) -> Result<Finished, RunError> {
    let Started {
        shared,
        receivers,
        senders,
        readers,
        times,
        presign_s,
        cpu_at_start,
        wall_at_start,
    } = started;
    let timeline = timeline_of(config, &times, readers.deliveries_per_message);
    let mut progress = RunProgress::new(config.progress, timeline);
    if !(senders.is_empty() && receivers.is_empty()) {
        await_measured(times.measure_to, &shared, &senders, &mut progress);
    }
    let sending_threads = senders.len();
    let (outcomes, send_cpu) = join_senders(senders);
    let cohort_of = |publisher: u32| {
        shared
            .publishers
            .get(publisher as usize)
            .map_or(0, |publisher| publisher.cohort)
    };
    let written = Written::of(plan, &outcomes, &cohort_of);
    let expected_checked: u64 = outcomes
        .iter()
        .map(|outcome| outcome.measured * readers.reading_in(cohort_of(outcome.publisher)))
        .sum();
    let expected_counted = written.expected_total(&readers.counted_per_cohort, plan);
    if !receivers.is_empty() {
        let until = now_ns().max(times.measure_to) + config.drain.as_nanos() as u64;
        drain(
            config,
            &shared,
            &mut progress,
            until,
            (expected_checked, expected_counted),
        );
    }
    progress.finish();
    shared.stop.store(true, Ordering::Relaxed);
    let receiving_threads = receivers.len();
    let totals = join_receivers(receivers)?;
    let cpu_cores_used = (cpu_seconds() - cpu_at_start) / wall_at_start.elapsed().as_secs_f64();
    Ok(Finished {
        shared,
        readers,
        outcomes,
        totals,
        send_cpu,
        receiving_threads,
        sending_threads,
        presign_s,
        written,
        expected_checked,
        cpu_cores_used,
    })
}

/// Shows progress until the measured phase ends at `measure_to`, or every sender is done.
fn await_measured(
    measure_to: u64,
    shared: &Shared,
    senders: &[thread::JoinHandle<SendThread>],
    progress: &mut RunProgress,
) {
    while now_ns() < measure_to {
        if !senders.is_empty() && senders.iter().all(thread::JoinHandle::is_finished) {
            break;
        }
        progress.tick(shared);
    }
}

/// Awaits deliveries until every measured message reached every reading subscriber and
/// every written frame every counting stream (`expected`: those two counts), or `until`.
fn drain(
    config: &LoadConfig,
    shared: &Shared,
    progress: &mut RunProgress,
    until: u64,
    (expected_checked, expected_counted): (u64, u64),
) {
    while now_ns() < until {
        if config.mode != Mode::Sub
            && shared.delivered_measured.load(Ordering::Relaxed) >= expected_checked
            && shared.counted_frames.load(Ordering::Relaxed) >= expected_counted
        {
            break;
        }
        progress.tick(shared);
    }
}

/// What the progress line draws against.
fn timeline_of(config: &LoadConfig, times: &Times, deliveries_per_message: f64) -> RunTimeline {
    RunTimeline {
        t0_ns: times.t0,
        measure_from_ns: times.measure_from,
        measure_to_ns: times.measure_to,
        drain: config.drain,
        publishes: config.mode.publishes(),
        receives: config.mode.subscribes() || deliveries_per_message > 0.0,
        deliveries_per_message,
    }
}

/// Every publisher's outcome and each sending thread's CPU use.
fn join_senders(
    senders: Vec<thread::JoinHandle<SendThread>>,
) -> (Vec<SendOutcome>, Vec<ThreadCpu>) {
    let mut outcomes: Vec<SendOutcome> = Vec::new();
    let mut thread_cpu = Vec::new();
    for handle in senders {
        let sent = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        outcomes.extend(sent.outcomes);
        thread_cpu.push(sent.cpu);
    }
    (outcomes, thread_cpu)
}

/// The receiving threads' totals, merged.
fn join_receivers(
    receivers: Vec<thread::JoinHandle<io::Result<Totals>>>,
) -> Result<Totals, RunError> {
    let mut totals = Totals::default();
    for handle in receivers {
        let thread_totals = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .map_err(failed("receiver"))?;
        totals.merge(&thread_totals);
    }
    Ok(totals)
}

/// The report's figures from the finished run (module docs, step 6).
fn fill_report(
    report: &mut Report,
    config: &LoadConfig,
    plan: &Plan,
    pacing: &Pacing,
    finished: Finished,
) {
    let generator = generator_of(config, pacing, &finished);
    let Finished {
        shared,
        readers,
        outcomes,
        totals,
        written,
        expected_checked,
        ..
    } = finished;
    let first_error = totals
        .first_error
        .clone()
        .or_else(|| outcomes.iter().find_map(|outcome| outcome.error.clone()));
    let measured_s = measured_seconds(&shared, config, pacing.closed);
    let published: u64 = outcomes.iter().map(|outcome| outcome.measured_sent).sum();
    let offered: u64 = outcomes.iter().map(|outcome| outcome.measured).sum();
    let mut verification = readers.verification;
    verification.counted = written.tally(&totals.counted_streams, totals.counted_measured);
    let (expected, delivered) = if config.mode == Mode::Sub {
        (totals.measured_span, totals.measured)
    } else {
        (
            expected_checked + verification.counted.expected_frames,
            totals.measured + verification.counted.received_frames,
        )
    };
    fill_shape(report, config, plan, pacing);
    report.measured_s = round(measured_s, 3);
    report.published = published;
    report.publications_per_s = round(published as f64 / measured_s, 1);
    report.offered_per_s = round(offered as f64 / measured_s, 1);
    fill_delivery_rates(report, &totals, measured_s);
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
}

/// The report's run shape: loop, target, cohorts, streams and payload size.
fn fill_shape(report: &mut Report, config: &LoadConfig, plan: &Plan, pacing: &Pacing) {
    report.closed_loop = pacing.closed;
    report.target = Some(config.target.clone());
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
}

/// The report's delivery rates over the measured seconds.
fn fill_delivery_rates(report: &mut Report, totals: &Totals, measured_s: f64) {
    let measured_deliveries = totals.measured + totals.counted_measured;
    report.deliveries_per_s = round(measured_deliveries as f64 / measured_s, 1);
    report.delivered_bytes_per_s = round(totals.payload_bytes as f64 / measured_s, 1);
    report.delivered_wire_bytes_per_s = round(totals.wire_bytes as f64 / measured_s, 1);
}

/// What the generator itself did (the report's `generator`).
fn generator_of(config: &LoadConfig, pacing: &Pacing, finished: &Finished) -> Generator {
    let (outcomes, totals) = (&finished.outcomes, &finished.totals);
    let receive_window_busy_cores_max = totals
        .threads
        .iter()
        .filter_map(|thread| thread.window_busy_cores)
        .reduce(f64::max);
    let thread_cpu = totals
        .threads
        .iter()
        .cloned()
        .chain(finished.send_cpu.iter().cloned())
        .collect();
    let mut generator = Generator {
        threads: finished.receiving_threads,
        cpus: config.cpus.clone(),
        presigned: pacing.presigned(),
        presign_s: round(finished.presign_s, 3),
        send_threads: finished.sending_threads,
        receive_window_busy_cores_max,
        thread_cpu,
        ..Generator::default()
    };
    for outcome in outcomes {
        generator.presign_exhausted |= outcome.exhausted;
        generator.send_backlog += outcome.backlog;
        generator.warmup_skipped += outcome.skipped;
    }
    generator.send_lag_us = summary_of_lags(outcomes);
    generator.senders_realtime =
        !outcomes.is_empty() && outcomes.iter().all(|outcome| outcome.realtime);
    generator.cpu_cores_used = round(finished.cpu_cores_used, 2);
    generator
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
