//! Step 3 of a run (module docs of [`run`](super)): the timeline and presigning.
//!
//! Owns: [`Pacing`] (open or closed loop, how much is signed before `t0`, the planned
//! `t0` after the estimated signing time), [`sign_all`] and its [`Signed`] frames and
//! [`Times`], and the feeds that sign during a run with `--sign-ahead`.
//!
//! Never: sends anything; the senders do.

use std::time::{Duration, Instant};

use bps_proto::Spec;
use bps_verify::SigningKey;
use bytes::Bytes;

use super::RunError;
use super::failed;
use super::join::JoinedPublisher;
use crate::load::config::LoadConfig;
use crate::load::plan::Plan;
use crate::load::presign::{SignJob, presign, signing_cost};
use crate::load::receiver::Wire;
use crate::load::schedule::{Schedule, now_ns};
use crate::load::sign_feed::{FeedJob, SignFeed};
use crate::load::stamp::{Stamp, payload};

/// Time between the end of signing and `t0` (threads start, sockets settle).
const START_LEAD: Duration = Duration::from_millis(300);

/// Margin on the estimated signing time.
const SIGNING_ESTIMATE_MARGIN: f64 = 2.0;

/// How the run is paced and how much is signed before `t0` (module docs of
/// [`run`](super), step 3).
pub(super) struct Pacing {
    /// Closed loop: every stream as fast as the broker takes it, within `--window`.
    pub(super) closed: bool,
    /// A feed signs during the run; only the first frames are signed before `t0`.
    pub(super) feeds: bool,
    /// BPS publishers sign (NATS and `sub` runs do not).
    pub(super) signs: bool,
    /// Messages signed per publisher before `t0`.
    count: u64,
    /// Messages per publisher of the whole open-loop run.
    pub(super) open_count: u64,
    /// Publishers of the plan (at least 1: the stagger divides by it).
    publishers: u64,
    /// Signing threads.
    workers: usize,
    /// The planned `t0` (Unix ns): after the estimated signing time in open loop.
    t0: u64,
    /// Open loop: ns between one publisher's messages.
    interval_ns: f64,
    /// Messages per second per publisher.
    rate: f64,
    /// The DATA index of sequence 0.
    pub(super) base_index: u64,
}

impl Pacing {
    /// The pacing of `config` and the planned `t0`, from now.
    pub(super) fn of(config: &LoadConfig, plan: &Plan, wire: Wire, base_index: u64) -> Self {
        let closed = config.closed_loop();
        let publishers = plan.publisher_count().max(1) as u64;
        let open_count =
            ((config.warmup + config.duration).as_secs_f64() * config.rate).ceil() as u64 + 1;
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
        Self {
            closed,
            feeds,
            signs,
            count,
            open_count,
            publishers,
            workers,
            t0,
            interval_ns: if closed { 0.0 } else { 1e9 / config.rate },
            rate: config.rate,
            base_index,
        }
    }

    /// Publisher `global`'s open-loop schedule from the planned `t0`, staggered over one
    /// interval (what the stamps are signed with, closed loop included).
    fn open_schedule(&self, global: u32) -> Schedule {
        let stagger = (self.interval_ns * f64::from(global) / self.publishers as f64) as u64;
        Schedule::new(self.t0 + stagger, self.rate)
    }

    /// Publisher `global`'s schedule during the run.
    pub(super) fn schedule(&self, global: u32) -> Schedule {
        if self.closed {
            Schedule::Closed
        } else {
            self.open_schedule(global)
        }
    }

    /// Messages signed before `t0`, all publishers (the report's `presigned`).
    pub(super) fn presigned(&self) -> u64 {
        if self.signs {
            self.count * self.publishers
        } else {
            0
        }
    }
}

/// The run's clock (Unix ns), fixed once signing is done.
pub(super) struct Times {
    /// The schedule's start.
    pub(super) t0: u64,
    /// The measured phase, after the warm-up.
    pub(super) measure_from: u64,
    pub(super) measure_to: u64,
    /// When the senders give up on a write: the measured phase and a drain.
    pub(super) deadline: u64,
}

/// Every publisher's frames signed before `t0`, and the clock.
pub(super) struct Signed {
    /// By global publisher index (empty where nothing is signed).
    pub(super) frames_by_publisher: Vec<Vec<Bytes>>,
    /// Seconds spent signing.
    pub(super) presign_s: f64,
    pub(super) times: Times,
}

/// Signs every joined publisher's first messages and fixes the clock; an open-loop run
/// whose signing ran past the warm-up fails rather than measure a burst.
pub(super) fn sign_all(
    config: &LoadConfig,
    plan: &Plan,
    pacing: &Pacing,
    publishers: &[JoinedPublisher],
) -> Result<Signed, RunError> {
    let signing_started = Instant::now();
    let mut frames_by_publisher: Vec<Vec<Bytes>> = vec![Vec::new(); plan.publisher_count()];
    if pacing.signs {
        for publisher in publishers {
            let schedule = pacing.open_schedule(publisher.global);
            let frames = sign_publisher(config, plan, publisher, schedule, pacing)?;
            if let Some(slot) = frames_by_publisher.get_mut(publisher.global as usize) {
                *slot = frames;
            }
        }
    }
    let presign_s = if pacing.signs {
        signing_started.elapsed().as_secs_f64()
    } else {
        0.0
    };
    let t0 = if pacing.closed {
        now_ns() + START_LEAD.as_nanos() as u64
    } else {
        pacing.t0
    };
    let measure_from = t0 + config.warmup.as_nanos() as u64;
    let measure_to = measure_from + config.duration.as_nanos() as u64;
    let deadline = measure_to + config.drain.as_nanos() as u64;
    if !pacing.closed && pacing.signs && now_ns() > measure_from {
        return Err(RunError::Failed(format!(
            "presigning took {presign_s:.1} s and ran past the warm-up; lengthen --warmup or lower --rate/--duration"
        )));
    }
    Ok(Signed {
        frames_by_publisher,
        presign_s,
        times: Times {
            t0,
            measure_from,
            measure_to,
            deadline,
        },
    })
}

/// Signs every message of one publisher (module docs of [`run`](super), step 3), or
/// with a feed its first `count`.
fn sign_publisher(
    config: &LoadConfig,
    plan: &Plan,
    publisher: &JoinedPublisher,
    schedule: Schedule,
    pacing: &Pacing,
) -> Result<Vec<Bytes>, RunError> {
    let (spec, key) = publisher_key(plan, publisher)?;
    let job = SignJob {
        spec,
        key,
        challenge: publisher.challenge,
        base_index: pacing.base_index,
        count: pacing.count,
    };
    presign(&job, pacing.workers, &stamped(config, publisher, schedule))
        .map_err(|error| RunError::Failed(format!("presigning: {error}")))
}

/// Starts the feed that signs the rest of one publisher's `count` messages during the run,
/// after its `presigned` first ones.
pub(super) fn start_feed(
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
