//! The `bps-bench` load generator: honest load (open loop, no coordinated omission, every
//! delivery accounted for: a sample of subscribers reads, checks and times every frame,
//! the others count bytes), reported as percentiles and a versioned JSON document.
//!
//! Owns, one file per concept:
//! - [`config`]: a run's settings, modes, named shapes and who checks what;
//! - [`plan`]: cohorts, keys and addresses derived from the seed, and source addresses;
//! - [`dial`]: connecting from a source address and the BPS handshake;
//! - [`websocket`]: the WebSocket carrier of `--transport ws` (upgrade, masked messages,
//!   server frames, a delivery's wire size);
//! - [`p2p`]: the libp2p carrier of `--transport p2p` (Swarm light nodes, many pubsub
//!   streams per connection, bridged to the generator's sockets, and their CPU cost);
//! - [`stamp`]: the publisher/sequence/intended-time stamp inside every payload;
//! - [`schedule`]: the open-loop schedule `t0 + k / rate` and the clock;
//! - [`presign`]: signing every message before `t0` on every core;
//! - [`sign_feed`]: or, for long open-loop runs, signing a bounded distance ahead;
//! - [`sender`]: the publisher threads that pace and write;
//! - [`receiver`]: the epoll receive loop that checks and times deliveries, or counts them;
//! - [`byte_counter`]: deliveries counted from bytes discarded in the kernel (`MSG_TRUNC`);
//! - [`poller`]: the epoll and `ppoll` wrappers;
//! - [`progress`]: the progress line on a terminal (elapsed, rates, loss so far);
//! - [`thread_cpu`]: each generator thread's CPU use;
//! - [`shared`]: what the run's threads share (window, counters, published frames);
//! - [`latency`]: HdrHistogram recording and percentiles;
//! - [`slo`]: `--slo` and `--max-loss`;
//! - [`report`]: the JSON report and summary;
//! - [`chart`]: SVG bar charts; [`report_chart`]: which chart shows which report fields;
//! - [`run`]: the timeline of `pubsub`, `pub`, `sub` and `nats`;
//! - [`nats`]: the NATS handshake for side-by-side runs;
//! - [`conns`]: idle streams and broker memory per stream;
//! - [`ceiling`]: the single-core verification ceiling, on [`verify_measure`]'s harness
//!   (the old path against the verification pool's, timed on the calling thread);
//! - [`sink`]: a bare relay, to measure the generator's own ceiling.
//!
//! Never: broker internals. Like any client, the generator speaks to a broker only through
//! the wire, with the client library's [`bps_client::publisher`] and
//! [`bps_client::subscriber`] (and [`bps_client::session`] for idle streams; the load runs
//! join through [`dial`], which can pick a source address).

pub mod byte_counter;
pub mod ceiling;
pub mod chart;
pub mod config;
pub mod conns;
pub mod dial;
pub mod latency;
pub mod nats;
pub mod p2p;
pub mod plan;
pub mod poller;
pub mod presign;
pub mod progress;
pub mod receiver;
pub mod report;
pub mod report_chart;
pub mod rounding;
pub mod run;
pub mod schedule;
pub mod sender;
pub mod shared;
pub mod sign_feed;
pub mod sink;
pub mod slo;
pub mod stamp;
pub mod thread_cpu;
pub mod verify_measure;
pub mod websocket;

/// Exit code: the run completed and met its objectives (if any).
pub const EXIT_OK: u8 = 0;
/// Exit code: the run failed (connection, stream error, a check that cannot proceed).
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad input (flags); clap's own usage errors also exit 2.
pub const EXIT_USAGE: u8 = 2;
/// Exit code: a Join was refused (FULL or REJECTED), as `bps` does.
pub const EXIT_REFUSED: u8 = 3;
/// Exit code: the run completed but missed an `--slo` or `--max-loss` objective.
pub const EXIT_SLO_MISSED: u8 = 4;
