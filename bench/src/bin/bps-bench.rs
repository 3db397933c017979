//! `bps-bench`: the BPS load generator.
//!
//! Owns: the command line (clap derive; the flag names and the JSON report's fields are a
//! contract checked by other tools), turning flags into a [`LoadConfig`], writing the
//! report (`--json PATH`, `-` for stdout) and the summary, and the exit codes: 0 success,
//! 1 a failed run, 2 bad input (one `error: ARGUMENT: ...` line; clap's usage errors also
//! exit 2), 3 a Join refused with FULL or REJECTED, 4 an `--slo`/`--max-loss` objective
//! missed; and whether the progress line is drawn on stderr (`--progress`, `--quiet`; the
//! line is `bps_bench::load::progress`'s).
//!
//! Never: load logic; that lives in `bps_bench::load`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bps_bench::load::ceiling::{measure_pipeline, measure_verify};
use bps_bench::load::config::{LoadConfig, Mode, Shape};
use bps_bench::load::conns::measure_conns;
use bps_bench::load::p2p::STREAMS_PER_CONNECTION_DEFAULT;
use bps_bench::load::plan::Plan;
use bps_bench::load::progress::ProgressMode;
use bps_bench::load::report::{Report, SloVerdict};
use bps_bench::load::report_chart::{ChartKind, ReportSeries, chart_of};
use bps_bench::load::run::{RunError, run};
use bps_bench::load::sender::PUBLISHERS_PER_SEND_THREAD;
use bps_bench::load::sink::Sink;
use bps_bench::load::slo::{Slo, parse_duration_us};
use bps_bench::load::stamp::STAMP_BYTES;
use bps_bench::load::websocket::Transport;
use bps_bench::load::{EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_SLO_MISSED, EXIT_USAGE};
use bps_client::bee_node::DEFAULT_NETWORK_ID;
use bps_client::spec::BindingArg;
use bps_proto::Binding;
use bps_verify::CHUNK_SIZE;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// The BPS load generator.
#[derive(Debug, Parser)]
#[command(
    name = "bps-bench",
    version,
    about = "Load generator for BPS brokers: open-loop pub/sub with end-to-end verification, \
             side-by-side NATS runs, idle-stream memory and the verification ceiling",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    mode: ModeCommand,
}

#[derive(Debug, Subcommand)]
enum ModeCommand {
    /// P publishers -> N subscribers per cohort, C cohorts, end to end against a broker.
    Pubsub(LoadArgs),
    /// Publishers only (run `sub` with the same --seed and shape elsewhere).
    Pub(LoadArgs),
    /// Subscribers only (run `pub` with the same --seed and shape elsewhere).
    Sub(LoadArgs),
    /// The pubsub shape against a NATS server (text protocol), for side-by-side runs.
    Nats(LoadArgs),
    /// Open --subscribers idle streams and report broker memory per stream.
    Conns(ConnsArgs),
    /// The single-core verification ceiling: sign once, verify in a loop.
    Verify(VerifyArgs),
    /// A bare relay without verification, to measure the generator's own ceiling.
    Sink(SinkArgs),
    /// Draw an SVG bar chart from JSON reports (`bench/compare` draws its charts so).
    Chart(ChartArgs),
}

/// Where the report goes and what it must meet.
#[derive(Debug, Args)]
struct OutputArgs {
    /// Write the JSON report here (`-`: stdout).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Latency objectives, e.g. `p99=2ms` or `p50=300us,p999=5ms` (repeatable); a miss
    /// exits 4.
    #[arg(long, value_name = "PERCENTILE=DURATION")]
    slo: Vec<String>,
    /// Largest acceptable loss fraction (0: none); more exits 4.
    #[arg(long, value_name = "FRACTION")]
    max_loss: Option<f64>,
    /// The progress line on stderr (elapsed time, rates, loss so far, redrawn each
    /// second): `auto` draws it only when stderr is a terminal.
    #[arg(long, value_enum, default_value = "auto", conflicts_with = "quiet")]
    progress: ProgressArg,
    /// No progress line (`--progress never`).
    #[arg(long)]
    quiet: bool,
}

/// `--progress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProgressArg {
    /// Only when stderr is a terminal.
    Auto,
    /// Always, even into a file or a pipe.
    Always,
    /// Never.
    Never,
}

impl From<ProgressArg> for ProgressMode {
    fn from(progress: ProgressArg) -> Self {
        match progress {
            ProgressArg::Auto => Self::Auto,
            ProgressArg::Always => Self::Always,
            ProgressArg::Never => Self::Never,
        }
    }
}

impl OutputArgs {
    fn progress(&self) -> ProgressMode {
        if self.quiet {
            ProgressMode::Never
        } else {
            self.progress.into()
        }
    }
}

#[derive(Debug, Args)]
struct LoadArgs {
    /// The broker (or NATS server); over `--transport p2p` its libp2p multiaddr
    /// `/ip4/HOST/tcp/PORT/p2p/PEER_ID`.
    #[arg(long, value_name = "HOST:PORT|MULTIADDR")]
    target: String,
    /// The BPS streams' carrier: `tcp`; `ws`: the broker's native WebSocket endpoint
    /// `ws://TARGET/bps/v1` (its `[ws]` listener, default port 1639), one BPS frame per
    /// binary message, client frames masked; `p2p`: each stream a
    /// `/swarm/pubsub/1.0.0/pubsub` stream of a Swarm light node (bee's handshake, Noise,
    /// yamux), several streams per libp2p connection.
    #[arg(long, value_enum, default_value = "tcp")]
    transport: TransportArg,
    /// The Swarm network id of `--transport p2p` (the broker's p2p.network_id).
    #[arg(long, default_value_t = DEFAULT_NETWORK_ID, value_name = "N")]
    network_id: u64,
    /// Streams per libp2p connection over `--transport p2p`: at most the broker's
    /// p2p.streams_per_connection_max less one (a handshake or headers exchange in flight);
    /// the run opens as many connections as its streams need (at most p2p.connections_max).
    #[arg(long, default_value_t = STREAMS_PER_CONNECTION_DEFAULT, value_name = "N")]
    p2p_streams_per_connection: u32,
    /// Messages per second per publisher (open loop); 0 = closed loop.
    #[arg(long, default_value = "1000", value_name = "PER_S")]
    rate: f64,
    /// Payload bytes per message (32..=4096; NATS up to 1 MiB).
    #[arg(long, default_value = "4096", value_name = "BYTES")]
    size: usize,
    /// The measured phase (`10`, `10s`, `500ms`).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    duration: String,
    /// Traffic before the measured phase; presigning happens before it starts.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    warmup: String,
    /// How long deliveries are awaited after the last message.
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    drain: String,
    /// A named shape: `group-chat` (one cohort under publishers ALL and MNEMONIC with an
    /// admin: 50 members publishing, 50 listening; NATS: one subject, 50 publishers, 100
    /// subscribers) or `many-cohorts` (1000 live streams of 10 spectators; NATS: 1000
    /// subjects). It sets --cohorts, --publishers, --subscribers and --binding.
    #[arg(long, value_enum, default_value = "custom",
          conflicts_with_all = ["cohorts", "publishers", "subscribers", "binding"])]
    shape: ShapeArg,
    /// Cohorts.
    #[arg(long, default_value = "1", value_name = "C")]
    cohorts: u32,
    /// Publishers per cohort (more than 1 needs --binding mnemonic: publishers ALL).
    #[arg(long, default_value = "1", value_name = "P")]
    publishers: u32,
    /// Subscribers per cohort (under publishers ALL: members that never publish).
    #[arg(long, default_value = "10", value_name = "N")]
    subscribers: u32,
    /// The cohorts' binding.
    #[arg(long, value_enum, default_value = "feed-topic")]
    binding: BindingArg,
    /// Loopback source addresses (127.0.0.1, .2, ...) the streams connect from, in turn,
    /// so a broker's per-peer bounds (R32, R33) see several peers; 1: the kernel's choice.
    #[arg(long, default_value = "1", value_name = "N")]
    sources: u32,
    /// Seed of topics, keys and addresses (default: random; `pub` and `sub` must share it).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Fraction of each cohort's subscribers verifying every delivery end to end (at least
    /// one when above 0).
    #[arg(long, default_value = "1", value_name = "FRACTION")]
    verify_fraction: f64,
    /// Fraction of each cohort's subscribers (spread evenly over it) that read every frame,
    /// compare it byte for byte with the published frame and record latency; the rest only
    /// count bytes, discarded in the kernel (loss still shows as bytes short of what was
    /// sent, or a reset).
    #[arg(long, default_value = "0.02", value_name = "FRACTION")]
    check_fraction: f64,
    /// At least this many subscribers in the run read every frame (spread over the
    /// cohorts), so latency percentiles rest on enough samples.
    #[arg(long, default_value = "20", value_name = "N")]
    check_min: u32,
    /// Receiving threads (default: one per CPU in --cpus, or per available CPU).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Sending threads the publishers are spread over (default: one per 64 publishers).
    #[arg(long, value_name = "N")]
    send_threads: Option<usize>,
    /// Pin the sending and receiving threads to these CPUs (e.g. `1` or `2-3,6`).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Closed loop: messages presigned per publisher (the run ends early if they run out).
    #[arg(long, default_value = "20000", value_name = "N")]
    presign: u64,
    /// Open loop: sign during the run, at most this many frames ahead of each publisher,
    /// instead of every message before it starts (0), so a long run (a soak) holds a
    /// bounded number of frames; the reading subscribers then check stamps, not bytes.
    #[arg(long, default_value = "0", value_name = "FRAMES")]
    sign_ahead: u64,
    /// Closed loop: messages a cohort's publishers may be ahead of its average subscriber
    /// (shared among them, at least 1 each), so the offered load is what the server
    /// delivers without dropping (0: unbounded).
    #[arg(long, default_value = "32", value_name = "MESSAGES")]
    window: u64,
    #[command(flatten)]
    output: OutputArgs,
}

/// `--transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    /// Bare BPS frames on TCP.
    Tcp,
    /// One BPS frame per WebSocket message on the native endpoint.
    Ws,
    /// Bare BPS frames on libp2p pubsub streams, as a Swarm light node.
    P2p,
}

impl From<TransportArg> for Transport {
    fn from(transport: TransportArg) -> Self {
        match transport {
            TransportArg::Tcp => Self::Tcp,
            TransportArg::Ws => Self::Ws,
            TransportArg::P2p => Self::P2p,
        }
    }
}

/// `--shape`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ShapeArg {
    /// --cohorts, --publishers, --subscribers and --binding as given.
    Custom,
    /// One cohort, 50 members publishing under ALL, 50 listening.
    GroupChat,
    /// 1000 live streams of 10 spectators each.
    ManyCohorts,
}

impl From<ShapeArg> for Shape {
    fn from(shape: ShapeArg) -> Self {
        match shape {
            ShapeArg::Custom => Self::Custom,
            ShapeArg::GroupChat => Self::GroupChat,
            ShapeArg::ManyCohorts => Self::ManyCohorts,
        }
    }
}

#[derive(Debug, Args)]
struct ConnsArgs {
    /// The broker.
    #[arg(long, value_name = "HOST:PORT")]
    target: String,
    /// Idle streams per cohort.
    #[arg(long, default_value = "1000", value_name = "N")]
    subscribers: u32,
    /// Cohorts the streams are spread over.
    #[arg(long, default_value = "1", value_name = "C")]
    cohorts: u32,
    /// The cohorts' binding.
    #[arg(long, value_enum, default_value = "feed-topic")]
    binding: BindingArg,
    /// Seed of topics and addresses (default: random).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Joining threads.
    #[arg(long, default_value = "4", value_name = "N")]
    threads: usize,
    /// The broker's pid, for its RSS from /proc/PID/status.
    #[arg(long, value_name = "PID")]
    broker_pid: Option<u32>,
    /// Write the JSON report here (`-`: stdout).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// The progress line on stderr (streams open, joins/s, refusals, redrawn each
    /// second): `auto` draws it only when stderr is a terminal.
    #[arg(long, value_enum, default_value = "auto")]
    progress: ProgressArg,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Payload bytes of the verified chunk.
    #[arg(long, default_value = "4096", value_name = "BYTES")]
    size: usize,
    /// How long to verify.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    duration: String,
    /// Pin the loop to this CPU.
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Seed of the signing key.
    #[arg(long, default_value = "1", value_name = "N")]
    seed: u64,
    /// Publishers of the many-publisher shape (chunks signed round robin, all keys warm):
    /// naive vs one check per owner vs one multi-key check per batch vs the pool.
    #[arg(long, default_value = "64", value_name = "N")]
    owners: usize,
    /// Write the JSON report here (`-`: stdout).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SinkArgs {
    /// Address to listen on; the bound address is printed on stderr.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    listen: SocketAddr,
    /// Stop after this long (default: run until killed).
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
}

#[derive(Debug, Args)]
struct ChartArgs {
    /// What the chart shows: `fanout` (deliveries/s against N, log scale), `latency`
    /// (p50..p99.9 of one run per series), `shapes` (deliveries/s per named shape).
    #[arg(value_enum)]
    kind: ChartKindArg,
    /// One series: `NAME=REPORT.json[,REPORT.json...]` (repeatable, one colour each); a
    /// missing or failed report shows as n/a.
    #[arg(long = "series", value_name = "NAME=PATHS", required = true)]
    series: Vec<String>,
    /// Where the SVG goes.
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// The title (default: the kind's own).
    #[arg(long, default_value = "", value_name = "TEXT")]
    title: String,
    /// A line under the title (default: the first report's commit, CPU and payload size).
    #[arg(long, value_name = "TEXT")]
    subtitle: Option<String>,
}

/// `bps-bench chart KIND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ChartKindArg {
    /// Deliveries per second against subscribers per cohort.
    Fanout,
    /// Latency percentiles.
    Latency,
    /// Deliveries per second per named shape.
    Shapes,
}

impl From<ChartKindArg> for ChartKind {
    fn from(kind: ChartKindArg) -> Self {
        match kind {
            ChartKindArg::Fanout => Self::Fanout,
            ChartKindArg::Latency => Self::Latency,
            ChartKindArg::Shapes => Self::Shapes,
        }
    }
}

/// Bad input: the argument and why.
#[derive(Debug)]
struct UsageError {
    argument: &'static str,
    reason: String,
}

fn usage(argument: &'static str, reason: impl Into<String>) -> UsageError {
    UsageError {
        argument,
        reason: reason.into(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.mode {
        ModeCommand::Pubsub(args) => load(Mode::Pubsub, args),
        ModeCommand::Pub(args) => load(Mode::Pub, args),
        ModeCommand::Sub(args) => load(Mode::Sub, args),
        ModeCommand::Nats(args) => load(Mode::Nats, args),
        ModeCommand::Conns(args) => conns(args),
        ModeCommand::Verify(args) => verify(args),
        ModeCommand::Sink(args) => sink(args),
        ModeCommand::Chart(args) => chart(args),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            eprintln!("error: {}: {}", error.argument, error.reason);
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// A duration: a number of seconds, or a number with a unit (`ns`, `us`, `ms`, `s`).
fn parse_duration(argument: &'static str, text: &str) -> Result<Duration, UsageError> {
    let micros = match text.parse::<f64>() {
        Ok(seconds) => seconds * 1e6,
        Err(_) => parse_duration_us(text).map_err(|reason| usage(argument, reason))?,
    };
    if !micros.is_finite() || micros < 0.0 {
        return Err(usage(argument, format!("{text:?} is not a duration")));
    }
    Ok(Duration::from_secs_f64(micros / 1e6))
}

/// A CPU list: `1`, `0,2`, `2-3,6`.
fn parse_cpus(text: &str) -> Result<Vec<usize>, UsageError> {
    let mut cpus = Vec::new();
    for part in text
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let bad = || {
            usage(
                "--cpus",
                format!("expected a CPU list like 1 or 2-3,6, got {text:?}"),
            )
        };
        match part.split_once('-') {
            Some((first, last)) => {
                let first: usize = first.trim().parse().map_err(|_| bad())?;
                let last: usize = last.trim().parse().map_err(|_| bad())?;
                if first > last {
                    return Err(bad());
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    if cpus.is_empty() {
        return Err(usage("--cpus", "an empty list"));
    }
    Ok(cpus)
}

fn random_seed() -> u64 {
    rand::random()
}

fn slo_of(output: &OutputArgs) -> Result<Slo, UsageError> {
    let mut slo = Slo::default();
    for text in &output.slo {
        slo.parse_latency(text)
            .map_err(|error| usage("--slo", error.0))?;
    }
    if let Some(max_loss) = output.max_loss {
        slo.set_max_loss(max_loss)
            .map_err(|error| usage("--max-loss", error.0))?;
    }
    Ok(slo)
}

fn load(mode: Mode, args: LoadArgs) -> Result<u8, UsageError> {
    let slo = slo_of(&args.output)?;
    check_load_args(mode, &args)?;
    let json = args.output.json.clone();
    let config = load_config(mode, args)?;
    match run(&config) {
        Ok(mut report) => finish(&mut report, &slo, json.as_ref()),
        Err(RunError::Refused(message)) => {
            eprintln!("bps-bench: {message}");
            Ok(EXIT_REFUSED)
        }
        Err(RunError::Failed(message)) => {
            eprintln!("bps-bench: {message}");
            Ok(EXIT_FAILED)
        }
    }
}

/// The load flags that stand alone: transport, size, rate and fractions.
fn check_load_args(mode: Mode, args: &LoadArgs) -> Result<(), UsageError> {
    if mode == Mode::Nats && args.transport != TransportArg::Tcp {
        return Err(usage(
            "--transport",
            "NATS runs are TCP; ws and p2p are the BPS broker's carriers",
        ));
    }
    if args.transport == TransportArg::P2p && args.sources > 1 {
        return Err(usage(
            "--sources",
            "libp2p connections dial from the address the kernel picks: 1 over p2p",
        ));
    }
    if args.transport == TransportArg::P2p && args.p2p_streams_per_connection == 0 {
        return Err(usage("--p2p-streams-per-connection", "at least 1"));
    }
    if args.sign_ahead > 0 && args.transport != TransportArg::Tcp {
        return Err(usage(
            "--sign-ahead",
            "frames signed during the run go over TCP only; over ws and p2p every frame is \
             presigned",
        ));
    }
    let size_max = if mode == Mode::Nats {
        1 << 20
    } else {
        CHUNK_SIZE
    };
    if !(STAMP_BYTES..=size_max).contains(&args.size) {
        return Err(usage(
            "--size",
            format!(
                "expected {STAMP_BYTES} to {size_max} bytes, got {}",
                args.size
            ),
        ));
    }
    if !args.rate.is_finite() || args.rate < 0.0 {
        return Err(usage(
            "--rate",
            format!("expected a rate of 0 or more, got {}", args.rate),
        ));
    }
    for (argument, fraction) in [
        ("--verify-fraction", args.verify_fraction),
        ("--check-fraction", args.check_fraction),
    ] {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(usage(
                argument,
                format!("expected a fraction from 0 to 1, got {fraction}"),
            ));
        }
    }
    Ok(())
}

/// The run's settings from checked flags: durations, CPUs, threads and the shape's size.
fn load_config(mode: Mode, args: LoadArgs) -> Result<LoadConfig, UsageError> {
    let duration = parse_duration("--duration", &args.duration)?;
    if duration.is_zero() {
        return Err(usage("--duration", "must be above 0"));
    }
    let cpus = args
        .cpus
        .as_deref()
        .map(parse_cpus)
        .transpose()?
        .unwrap_or_default();
    let threads = receiving_threads(args.threads, &cpus)?;
    let shape = Shape::from(args.shape);
    let (cohorts, publishers, subscribers, binding) = shape_size(mode, shape, &args);
    let send_threads = args.send_threads.unwrap_or_else(|| {
        (cohorts as usize * publishers as usize).div_ceil(PUBLISHERS_PER_SEND_THREAD)
    });
    if send_threads == 0 {
        return Err(usage("--send-threads", "at least 1"));
    }
    Ok(LoadConfig {
        mode,
        target: args.target,
        transport: args.transport.into(),
        network_id: args.network_id,
        p2p_streams_per_connection: args.p2p_streams_per_connection,
        rate: args.rate,
        size: args.size,
        duration,
        warmup: parse_duration("--warmup", &args.warmup)?,
        drain: parse_duration("--drain", &args.drain)?,
        cohorts,
        publishers,
        subscribers,
        binding,
        seed: args.seed.unwrap_or_else(random_seed),
        shape,
        verify_fraction: args.verify_fraction,
        check_fraction: args.check_fraction,
        check_min: args.check_min,
        sources: args.sources,
        send_threads,
        threads,
        cpus,
        presign: args.presign.max(1),
        sign_ahead: args.sign_ahead,
        window: args.window,
        quiet: args.output.quiet,
        progress: args.output.progress(),
    })
}

/// Cohorts, publishers and subscribers per cohort, and binding: the named shape's, or
/// the flags' for `custom`.
fn shape_size(mode: Mode, shape: Shape, args: &LoadArgs) -> (u32, u32, u32, Binding) {
    match shape.size(mode) {
        Some(size) => (
            size.cohorts,
            size.publishers,
            size.subscribers,
            size.binding,
        ),
        None => (
            args.cohorts,
            args.publishers,
            args.subscribers,
            args.binding.into(),
        ),
    }
}

/// `--threads`, by default one receiving thread per `--cpus` entry or per available CPU.
fn receiving_threads(threads: Option<usize>, cpus: &[usize]) -> Result<usize, UsageError> {
    let available = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = threads.unwrap_or(if cpus.is_empty() {
        available
    } else {
        cpus.len()
    });
    if threads == 0 {
        return Err(usage("--threads", "at least 1"));
    }
    Ok(threads)
}

/// Applies the objectives, prints the summary, writes the JSON; returns the exit code.
fn finish(report: &mut Report, slo: &Slo, json: Option<&PathBuf>) -> Result<u8, UsageError> {
    let mut code = EXIT_OK;
    if !slo.is_empty() {
        let misses = slo.check(&report.latency_us, report.loss);
        if !misses.is_empty() {
            code = EXIT_SLO_MISSED;
        }
        report.slo = Some(SloVerdict {
            passed: misses.is_empty(),
            misses: misses.iter().map(ToString::to_string).collect(),
        });
    }
    let to_stdout = json.is_some_and(|path| path.as_os_str() == "-");
    if to_stdout {
        eprint!("{}", report.summary());
        println!("{}", report.to_json());
    } else {
        print!("{}", report.summary());
    }
    if let Some(path) = json.filter(|_| !to_stdout)
        && let Err(error) = std::fs::write(path, report.to_json() + "\n")
    {
        eprintln!("bps-bench: cannot write {}: {error}", path.display());
        return Ok(EXIT_FAILED);
    }
    Ok(code)
}

fn conns(args: ConnsArgs) -> Result<u8, UsageError> {
    let seed = args.seed.unwrap_or_else(random_seed);
    let plan = Plan::new(seed, args.cohorts, 1, args.subscribers, args.binding.into())
        .map_err(|error| usage("--cohorts", error.0))?;
    let config = serde_json::json!({
        "target": args.target,
        "subscribers": args.subscribers,
        "cohorts": args.cohorts,
        "seed": seed,
        "threads": args.threads,
        "broker_pid": args.broker_pid,
    });
    let figures = measure_conns(
        &args.target,
        &plan,
        args.threads,
        args.broker_pid,
        args.progress.into(),
    );
    let mut report = Report::new(Mode::Conns.name(), config);
    report.target = Some(args.target);
    report.cohorts = u64::from(args.cohorts);
    report.subscribers = figures.streams_open;
    let failed = figures.streams_open == 0;
    let refused = figures.streams_refused > 0 && figures.streams_open < figures.streams_requested;
    report.merge_figures(serde_json::to_value(&figures).unwrap_or_default());
    let code = finish(&mut report, &Slo::default(), args.json.as_ref())?;
    Ok(if failed {
        EXIT_FAILED
    } else if refused {
        EXIT_REFUSED
    } else {
        code
    })
}

fn verify(args: VerifyArgs) -> Result<u8, UsageError> {
    if !(STAMP_BYTES..=CHUNK_SIZE).contains(&args.size) {
        return Err(usage(
            "--size",
            format!(
                "expected {STAMP_BYTES} to {CHUNK_SIZE} bytes, got {}",
                args.size
            ),
        ));
    }
    let duration = parse_duration("--duration", &args.duration)?;
    // Every owner's key must fit the pipeline's key cache, or the shape is not warm.
    let owners_max = bps_bench::load::verify_measure::MeasureConfig::default()
        .pool
        .key_cache_keys_max;
    if !(1..=owners_max).contains(&args.owners) {
        return Err(usage(
            "--owners",
            format!("expected 1 to {owners_max} publishers, got {}", args.owners),
        ));
    }
    let config = serde_json::json!({
        "size": args.size,
        "duration": duration.as_secs_f64(),
        "cpu": args.cpu,
        "seed": args.seed,
        "owners": args.owners,
    });
    let mut report = Report::new(Mode::Verify.name(), config);
    report.size = args.size as u64;
    match measure_verify(args.size, duration, args.cpu, args.seed) {
        Ok(figures) => {
            report.measured_s = duration.as_secs_f64();
            report.merge_figures(serde_json::to_value(&figures).unwrap_or_default());
            // The same core, next: the old per-chunk path against the pool's real path.
            let pipeline = measure_pipeline(args.size, duration, args.owners);
            report.merge_figures(serde_json::to_value(&pipeline).unwrap_or_default());
            finish(&mut report, &Slo::default(), args.json.as_ref())
        }
        Err(error) => {
            eprintln!("bps-bench: {error}");
            Ok(EXIT_FAILED)
        }
    }
}

fn sink(args: SinkArgs) -> Result<u8, UsageError> {
    let duration = args
        .duration
        .as_deref()
        .map(|text| parse_duration("--duration", text))
        .transpose()?;
    let mut sink = match Sink::bind(args.listen) {
        Ok(sink) => sink,
        Err(error) => {
            eprintln!("bps-bench: cannot listen on {}: {error}", args.listen);
            return Ok(EXIT_FAILED);
        }
    };
    match sink.local_addr() {
        Ok(address) => eprintln!("bps-bench sink listening listen={address}"),
        Err(error) => {
            eprintln!("bps-bench: {error}");
            return Ok(EXIT_FAILED);
        }
    }
    let started = Instant::now();
    let stop = || duration.is_some_and(|limit| started.elapsed() >= limit);
    match sink.serve(&stop) {
        Ok(()) => {
            eprintln!("bps-bench sink relayed {} frames", sink.relayed);
            Ok(EXIT_OK)
        }
        Err(error) => {
            eprintln!("bps-bench: sink: {error}");
            Ok(EXIT_FAILED)
        }
    }
}

/// A report file as JSON; a missing or unreadable one is `null` (drawn as n/a).
fn read_report(path: &str) -> serde_json::Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The default subtitle: where the first report that ran came from.
fn subtitle_of(series: &[ReportSeries]) -> String {
    series
        .iter()
        .flat_map(|one| one.reports.iter())
        .find_map(|report| {
            let environment = report.get("environment")?;
            Some(format!(
                "commit {}, {}, {} B payload; shared 2-vCPU VM, noisy",
                environment.get("git_revision")?.as_str()?,
                environment.get("cpu")?.as_str()?,
                report.get("size")?.as_u64()?
            ))
        })
        .unwrap_or_default()
}

fn chart(args: ChartArgs) -> Result<u8, UsageError> {
    let mut series = Vec::new();
    for text in &args.series {
        let Some((name, paths)) = text.split_once('=') else {
            return Err(usage(
                "--series",
                format!("expected NAME=REPORT.json[,REPORT.json...], got {text:?}"),
            ));
        };
        series.push(ReportSeries {
            name: name.to_owned(),
            reports: paths.split(',').map(read_report).collect(),
        });
    }
    let mut chart = chart_of(args.kind.into(), &series, &args.title);
    chart.subtitle = args.subtitle.unwrap_or_else(|| subtitle_of(&series));
    if let Err(error) = std::fs::write(&args.out, chart.to_svg()) {
        eprintln!("bps-bench: cannot write {}: {error}", args.out.display());
        return Ok(EXIT_FAILED);
    }
    Ok(EXIT_OK)
}
