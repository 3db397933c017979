//! The run's report: a versioned JSON document (`--json PATH`) and the human summary.
//!
//! Owns: [`Report`] and its schema (version [`REPORT_VERSION`]; the top-level fields
//! `version`, `mode`, `closed_loop`, `subscribers`, `publishers`, `cohorts`, `size`,
//! `publications_per_s`, `deliveries_per_s`, `delivered_bytes_per_s`, `loss`, `latency_us`
//! {p50, p90, p99, p999, max} are a contract read by other tools: add fields, never rename
//! or remove one without bumping the version), [`Environment`] (kernel, CPU, git revision),
//! [`Report::merge_figures`] (mode-specific figures such as the verification ceiling or
//! memory per stream, merged at the top level by one call) and [`Report::summary`].
//!
//! Never: measures anything; it formats what the run measured.

use std::fmt::Write as _;
use std::process::Command;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::load::latency::LatencySummary;
pub use crate::load::rounding::round;
use crate::load::thread_cpu::ThreadCpu;

/// The report schema's version.
pub const REPORT_VERSION: u32 = 1;

/// Where and what the run ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Environment {
    /// `uname -r`.
    pub kernel: String,
    /// The CPU model.
    pub cpu: String,
    /// CPUs this process may run on.
    pub cpus_available: usize,
    /// The host's name.
    pub hostname: String,
    /// `git rev-parse --short HEAD` of the source tree, or `BPS_BENCH_GIT_REVISION`, or
    /// "unknown".
    pub git_revision: String,
    /// This tool's version.
    pub bps_bench_version: String,
}

impl Environment {
    /// Reads the environment of this process.
    pub fn detect() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned())
        };
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|line| line.starts_with("model name"))
                    .and_then(|line| line.split_once(':'))
                    .map(|(_, model)| model.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            kernel: read("/proc/sys/kernel/osrelease"),
            cpu,
            cpus_available: std::thread::available_parallelism().map_or(1, usize::from),
            hostname: read("/proc/sys/kernel/hostname"),
            git_revision: git_revision(),
            bps_bench_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

fn git_revision() -> String {
    if let Ok(revision) = std::env::var("BPS_BENCH_GIT_REVISION")
        && !revision.is_empty()
    {
        return revision;
    }
    Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short",
            "HEAD",
        ])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|revision| revision.trim().to_owned())
        .filter(|revision| !revision.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// How deliveries were checked. Every subscriber is in exactly one of the four counts;
/// all but the counted-only ones record latency.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct Verification {
    /// `--verify-fraction`.
    pub fraction: f64,
    /// `--check-fraction`.
    pub check_fraction: f64,
    /// `--check-min`.
    pub check_min: u32,
    /// Subscribers that verified every delivery end to end (R41).
    pub verifying_subscribers: u64,
    /// Subscribers that compared every delivery byte for byte with the published frame.
    pub byte_checked_subscribers: u64,
    /// Subscribers that read every delivery's stamp only (NATS, or `sub` mode).
    pub stamp_only_subscribers: u64,
    /// Subscribers that only counted bytes (`MSG_TRUNC`): no latency, loss from the count.
    pub counted_only_subscribers: u64,
    /// Publishers' own streams counted the same way (under ALL they receive the other
    /// publishers, R25); not subscribers, but their deliveries are in the totals.
    pub counted_publisher_streams: u64,
    /// What the counting streams received.
    pub counted: CountedFigures,
}

/// The counting streams' tally at the end of the run.
#[derive(Debug, Clone, Copy, Serialize, Default, PartialEq, Eq)]
pub struct CountedFigures {
    /// Frames written completely by the publishers each counting stream receives from,
    /// summed over the streams (warm-up included).
    pub expected_frames: u64,
    /// Whole frames received, each stream counted up to what it was sent.
    pub received_frames: u64,
    /// Frames that completed inside the measurement window.
    pub measured_frames: u64,
    /// Streams that received fewer frames than were sent to them or ended inside a frame.
    pub short_streams: u64,
    /// Counting streams the server closed.
    pub reset_streams: u64,
}

/// What the generator itself did.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Generator {
    /// Receiving threads.
    pub threads: usize,
    /// CPUs the run threads were pinned to.
    pub cpus: Vec<usize>,
    /// Messages signed before the run.
    pub presigned: u64,
    /// Seconds spent signing them (all cores).
    pub presign_s: f64,
    /// Closed loop: presigned messages ran out before the end.
    pub presign_exhausted: bool,
    /// Open loop: write time minus intended time over all publishers, µs (how well the
    /// generator kept its schedule).
    pub send_lag_us: LatencySummary,
    /// Open loop: messages never written because the deadline passed.
    pub send_backlog: u64,
    /// Open loop: warm-up messages skipped because signing ran past their intended time.
    pub warmup_skipped: u64,
    /// Open loop: every sender thread ran with real-time priority (SCHED_FIFO), so the
    /// receiving threads on the same core did not delay its pacing.
    pub senders_realtime: bool,
    /// CPU time the generator used while sending and receiving, in cores (1.0 = one core
    /// fully busy): near the number of CPUs in `cpus`, the generator was the bottleneck.
    pub cpu_cores_used: f64,
    /// Sending threads (the publishers are spread over them).
    pub send_threads: usize,
    /// The busiest receiving thread's CPU inside the measurement window, in cores: near
    /// 1.0, the generator's receiving side set the pace, not the server.
    pub receive_window_busy_cores_max: Option<f64>,
    /// Every sending and receiving thread's CPU use.
    pub thread_cpu: Vec<ThreadCpu>,
}

/// A run's report (module docs).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Schema version.
    pub version: u32,
    /// The mode's name.
    pub mode: String,
    /// The named shape (`custom`, `group-chat`, `many-cohorts`).
    pub shape: String,
    /// The carrier of the BPS streams: `tcp`, or `ws` (the native WebSocket endpoint,
    /// `--transport ws`); NATS runs say `tcp`.
    pub transport: String,
    /// Publishers ran closed loop (`--rate 0`): latency is measured from the actual write,
    /// and the offered load follows the system under test.
    pub closed_loop: bool,
    /// The server, if any.
    pub target: Option<String>,
    /// Unix seconds at the start.
    pub started_at: u64,
    /// Seconds measured.
    pub measured_s: f64,
    /// Cohorts.
    pub cohorts: u64,
    /// Publishers in total.
    pub publishers: u64,
    /// Subscribers in total.
    pub subscribers: u64,
    /// Payload bytes per message.
    pub size: u64,
    /// Measured publications written per second, all publishers.
    pub publications_per_s: f64,
    /// Publications per second the schedule asked for in the window (open loop; equal to
    /// `publications_per_s` unless the stream pushed back); every one counts toward
    /// `expected`.
    pub offered_per_s: f64,
    /// Measured deliveries per second, all subscribers.
    pub deliveries_per_s: f64,
    /// Measured payload bytes delivered per second.
    pub delivered_bytes_per_s: f64,
    /// Measured bytes on the wire delivered per second (framing, chunk header, signature).
    pub delivered_wire_bytes_per_s: f64,
    /// Measured publications written.
    pub published: u64,
    /// Deliveries expected: each measured publication × its cohort's subscribers that read
    /// every frame, plus every frame written to the counting streams (`verification.counted`).
    pub expected: u64,
    /// Of those, received: measured publications by their stamps, and whole frames on the
    /// counting streams.
    pub delivered: u64,
    /// 1 − delivered / expected, at least 0.
    pub loss: f64,
    /// Deliveries out of order (at or below a sequence already seen).
    pub reordered: u64,
    /// Deliveries that failed their check.
    pub invalid: u64,
    /// Subscriber streams closed by the server.
    pub subscriber_resets: u64,
    /// Publish-to-deliver latency of measured deliveries, µs.
    pub latency_us: LatencySummary,
    /// How deliveries were checked.
    pub verification: Verification,
    /// The generator's own figures.
    pub generator: Generator,
    /// The first failure seen, if any.
    pub first_error: Option<String>,
    /// How the streams loaded their source addresses (a broker's per-peer bounds, R32, R33).
    pub peer_load: Option<PeerLoadFigures>,
    /// Where it ran.
    pub environment: Environment,
    /// The settings.
    pub config: Value,
    /// SLO verdict: `null` when none was set.
    pub slo: Option<SloVerdict>,
    /// Mode-specific figures, at the top level.
    #[serde(flatten)]
    pub figures: Map<String, Value>,
}

/// The run's streams over their loopback source addresses.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct PeerLoadFigures {
    /// Source addresses used.
    pub sources: u32,
    /// The most streams of one source in one cohort.
    pub streams_per_source_per_cohort_max: u32,
    /// The most cohorts one source joined.
    pub cohorts_per_source_max: u32,
}

/// Whether the run met its objectives.
#[derive(Debug, Clone, Serialize)]
pub struct SloVerdict {
    /// All objectives met.
    pub passed: bool,
    /// One line per missed objective.
    pub misses: Vec<String>,
}

impl Report {
    /// An empty report of `mode` (figures are filled by the run).
    pub fn new(mode: &str, config: Value) -> Self {
        Self {
            version: REPORT_VERSION,
            mode: mode.to_owned(),
            shape: "custom".to_owned(),
            transport: "tcp".to_owned(),
            closed_loop: false,
            target: None,
            started_at: crate::load::schedule::now_ns() / 1_000_000_000,
            measured_s: 0.0,
            cohorts: 0,
            publishers: 0,
            subscribers: 0,
            size: 0,
            publications_per_s: 0.0,
            offered_per_s: 0.0,
            deliveries_per_s: 0.0,
            delivered_bytes_per_s: 0.0,
            delivered_wire_bytes_per_s: 0.0,
            published: 0,
            expected: 0,
            delivered: 0,
            loss: 0.0,
            reordered: 0,
            invalid: 0,
            subscriber_resets: 0,
            latency_us: LatencySummary::default(),
            verification: Verification::default(),
            generator: Generator::default(),
            first_error: None,
            peer_load: None,
            environment: Environment::detect(),
            config,
            slo: None,
            figures: Map::new(),
        }
    }

    /// Merges the fields of a JSON object (e.g. `serde_json::to_value(figures)`) into the
    /// top level; a field of the report itself is never overwritten (its name gets a
    /// `figures.` prefix instead). A value that is not an object is stored as `figures`.
    pub fn merge_figures(&mut self, figures: Value) {
        let Value::Object(object) = figures else {
            self.figures.insert("figures".to_owned(), figures);
            return;
        };
        let reserved = serde_json::to_value(Self::new("", Value::Null))
            .ok()
            .and_then(|value| {
                value
                    .as_object()
                    .map(|fields| fields.keys().cloned().collect::<Vec<_>>())
            })
            .unwrap_or_default();
        for (name, value) in object {
            let name = if reserved.contains(&name) {
                format!("figures.{name}")
            } else {
                name
            };
            self.figures.insert(name, value);
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|error| format!("{{\"error\":\"{error}\"}}"))
    }

    /// The final human summary.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        self.write_headline(&mut text);
        if self.publishers + self.subscribers > 0 {
            self.write_traffic(&mut text);
            self.write_checks(&mut text);
            self.write_generator(&mut text);
        }
        for (name, value) in &self.figures {
            let _ = writeln!(text, "  {name}: {value}");
        }
        if let Some(error) = &self.first_error {
            let _ = writeln!(text, "  first error: {error}");
        }
        if let Some(slo) = &self.slo {
            if slo.passed {
                let _ = writeln!(text, "  SLO met");
            }
            for miss in &slo.misses {
                let _ = writeln!(text, "  {miss}");
            }
        }
        text
    }

    /// The summary's first line: mode, target, shape and loop.
    fn write_headline(&self, text: &mut String) {
        let _ = writeln!(
            text,
            "bps-bench {} {} over {} ({}): {} cohort(s) x {} publisher(s), {} subscriber(s), {} B payload, {} s measured{}",
            self.mode,
            self.target.as_deref().unwrap_or("-"),
            self.transport,
            self.shape,
            self.cohorts,
            self.publishers,
            self.subscribers,
            self.size,
            round(self.measured_s, 2),
            if self.closed_loop {
                ", CLOSED LOOP"
            } else {
                ", open loop"
            }
        );
    }

    /// Rates in and out, what was delivered of what was expected, and the latency.
    fn write_traffic(&self, text: &mut String) {
        let mib = |bytes: f64| bytes / (1024.0 * 1024.0);
        let ratio = if self.expected > 0 {
            self.delivered as f64 / self.expected as f64
        } else {
            0.0
        };
        let _ = writeln!(
            text,
            "  in  {:>12.0} msg/s (offered {:.0})    out {:>12.0} msg/s    {:>9.1} MiB/s payload ({:.1} MiB/s wire)",
            self.publications_per_s,
            self.offered_per_s,
            self.deliveries_per_s,
            mib(self.delivered_bytes_per_s),
            mib(self.delivered_wire_bytes_per_s)
        );
        let _ = writeln!(
            text,
            "  delivered {}/{} ({:.6}), loss {:.6}, reordered {}, invalid {}, resets {}",
            self.delivered,
            self.expected,
            ratio,
            self.loss,
            self.reordered,
            self.invalid,
            self.subscriber_resets
        );
        let latency = &self.latency_us;
        let _ = writeln!(
            text,
            "  latency us: p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} samples)",
            latency.p50, latency.p90, latency.p99, latency.p999, latency.max, latency.count
        );
    }

    /// Who checked how, and the counting streams' tally when there are any.
    fn write_checks(&self, text: &mut String) {
        let verification = &self.verification;
        let _ = writeln!(
            text,
            "  checks: {} verifying end to end, {} byte-for-byte, {} stamp only, {} counted only \
             (+{} publisher streams; verify fraction {}, check fraction {}, check min {})",
            verification.verifying_subscribers,
            verification.byte_checked_subscribers,
            verification.stamp_only_subscribers,
            verification.counted_only_subscribers,
            verification.counted_publisher_streams,
            verification.fraction,
            verification.check_fraction,
            verification.check_min
        );
        let counted = &verification.counted;
        if counted.expected_frames > 0 || verification.counted_only_subscribers > 0 {
            let _ = writeln!(
                text,
                "  counted: {}/{} frames, {} short stream(s), {} reset",
                counted.received_frames,
                counted.expected_frames,
                counted.short_streams,
                counted.reset_streams
            );
        }
    }

    /// What the generator itself did: its cores, threads, send lag and presigning.
    fn write_generator(&self, text: &mut String) {
        let generator = &self.generator;
        let lag = &generator.send_lag_us;
        let receive_busy = generator
            .receive_window_busy_cores_max
            .map_or_else(|| "-".to_owned(), |busy| format!("{busy:.2}"));
        let _ = writeln!(
            text,
            "  generator: {:.2} cores busy, {} receiving thread(s) (busiest {receive_busy} cores in the window), \
             {} sending; send lag us p50 {} p99 {} max {}{}, \
             backlog {}, presigned {} in {:.2} s{}",
            generator.cpu_cores_used,
            generator.threads,
            generator.send_threads,
            lag.p50,
            lag.p99,
            lag.max,
            if generator.senders_realtime {
                " (real-time)"
            } else {
                ""
            },
            generator.send_backlog,
            generator.presigned,
            generator.presign_s,
            if generator.presign_exhausted {
                " (EXHAUSTED)"
            } else {
                ""
            }
        );
    }
}
