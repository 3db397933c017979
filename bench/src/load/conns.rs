//! `bps-bench conns`: open many idle subscriber streams and report what each costs the
//! broker in memory.
//!
//! Owns: [`measure_conns`]: read the broker's resident set (`VmRSS` in
//! `/proc/<pid>/status`) before, join `streams` spectator streams (several joining
//! threads, their joins so far on the progress line), hold them while the broker settles,
//! read it again, and divide; and [`ConnsFigures`], merged into the report.
//!
//! Never: sends anything after the Joins (the streams are idle by design) or needs the
//! broker's admin endpoint (a pid is enough on the same host).

use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use bps_proto::Status;
use serde::Serialize;

use crate::load::plan::Plan;
use crate::load::poller::raise_open_files_limit;
use crate::load::progress::{JoinSample, ProgressMode, watch};
use bps_client::session::{JoinOutcome, Session, SessionConfig};

/// How long the streams are held before the second reading.
const SETTLE: Duration = Duration::from_secs(1);

/// What `conns` measured.
#[derive(Debug, Clone, Serialize)]
pub struct ConnsFigures {
    /// Streams asked for.
    pub streams_requested: u64,
    /// Streams answered OK.
    pub streams_open: u64,
    /// Joins answered FULL or REJECTED.
    pub streams_refused: u64,
    /// Joins that failed otherwise (connect, timeout).
    pub streams_failed: u64,
    /// Joins per second while opening.
    pub joins_per_s: f64,
    /// The broker's RSS before, KiB (`null` without `--broker-pid`).
    pub rss_before_kib: Option<u64>,
    /// The broker's RSS with every stream open, KiB.
    pub rss_after_kib: Option<u64>,
    /// (after − before) / open streams, bytes.
    pub rss_per_stream_bytes: Option<f64>,
    /// The open-files limit this process raised itself to.
    pub open_files_limit: u64,
}

/// The `VmRSS` of process `pid` in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// Joins so far, for the progress line (each joining thread adds its own; `Relaxed`).
#[derive(Debug, Default)]
struct JoinCounts {
    open: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// Opens `plan`'s subscribers against `target` on `threads` joining threads (module docs),
/// with the progress line as `progress` says.
pub fn measure_conns(
    target: &str,
    plan: &Plan,
    threads: usize,
    broker_pid: Option<u32>,
    progress: ProgressMode,
) -> ConnsFigures {
    let open_files_limit = raise_open_files_limit();
    let rss_before_kib = broker_pid.and_then(rss_kib);
    let members: Vec<(usize, usize)> = plan
        .cohorts
        .iter()
        .enumerate()
        .flat_map(|(cohort, plan)| (0..plan.subscribers.len()).map(move |member| (cohort, member)))
        .collect();
    let started = Instant::now();
    // Held open until the second reading: the streams are what is measured.
    let results = join_all(target, plan, &members, threads.max(1), progress);
    let joining = started.elapsed().as_secs_f64();
    let streams_open: u64 = results.iter().map(|share| share.open.len() as u64).sum();
    thread::sleep(SETTLE);
    let rss_after_kib = broker_pid.and_then(rss_kib);
    let rss_per_stream_bytes = match (rss_before_kib, rss_after_kib) {
        (Some(before), Some(after)) if streams_open > 0 => {
            Some(((after as f64 - before as f64) * 1024.0 / streams_open as f64).round())
        }
        _ => None,
    };
    ConnsFigures {
        streams_requested: members.len() as u64,
        streams_open,
        streams_refused: results.iter().map(|share| share.refused).sum(),
        streams_failed: results.iter().map(|share| share.failed).sum(),
        joins_per_s: (streams_open as f64 / joining.max(1e-9)).round(),
        rss_before_kib,
        rss_after_kib,
        rss_per_stream_bytes,
        open_files_limit,
    }
}

/// One joining thread's streams: the open ones, and how many Joins were refused or failed.
struct JoinedShare {
    open: Vec<TcpStream>,
    refused: u64,
    failed: u64,
}

/// Joins every `(cohort, member)` of `members`, dealt round robin over `threads` joining
/// threads, with the progress line meanwhile.
fn join_all(
    target: &str,
    plan: &Plan,
    members: &[(usize, usize)],
    threads: usize,
    progress: ProgressMode,
) -> Vec<JoinedShare> {
    let counts = JoinCounts::default();
    let started = Instant::now();
    thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|worker| {
                let mine: Vec<(usize, usize)> = members
                    .iter()
                    .copied()
                    .skip(worker)
                    .step_by(threads)
                    .collect();
                let counts = &counts;
                scope.spawn(move || join_share(target, plan, mine, counts))
            })
            .collect();
        let requested = members.len() as u64;
        let mut last_open = 0;
        watch(
            progress,
            &|| !handles.iter().all(thread::ScopedJoinHandle::is_finished),
            &mut |seconds| {
                let open = counts.open.load(Ordering::Relaxed);
                let sample = JoinSample {
                    elapsed_s: started.elapsed().as_secs_f64(),
                    open,
                    requested,
                    joins_per_s: open.saturating_sub(last_open) as f64 / seconds,
                    refused: counts.refused.load(Ordering::Relaxed),
                    failed: counts.failed.load(Ordering::Relaxed),
                };
                last_open = open;
                sample.line()
            },
        );
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

/// One joining thread: joins its `(cohort, member)` pairs one after another.
fn join_share(
    target: &str,
    plan: &Plan,
    mine: Vec<(usize, usize)>,
    counts: &JoinCounts,
) -> JoinedShare {
    let mut share = JoinedShare {
        open: Vec::with_capacity(mine.len()),
        refused: 0,
        failed: 0,
    };
    for (cohort, member) in mine {
        let cohort = &plan.cohorts[cohort];
        let addr = cohort.subscribers[member];
        match Session::join(target, &cohort.spec, &addr, SessionConfig::default()) {
            Ok(JoinOutcome::Joined(session)) => {
                share.open.push(session.into_parts().0);
                counts.open.fetch_add(1, Ordering::Relaxed);
            }
            Ok(JoinOutcome::Refused(Status::Full | Status::Rejected)) => {
                share.refused += 1;
                counts.refused.fetch_add(1, Ordering::Relaxed);
            }
            Ok(JoinOutcome::Refused(_)) | Err(_) => {
                share.failed += 1;
                counts.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    share
}
