//! The settings of one run, as the command line gave them and as the report records them.
//!
//! Owns: [`LoadConfig`] (every knob of `pubsub`, `pub`, `sub` and `nats`, with its unit in
//! its name) and [`Mode`]. The binary fills it from flags; the run reads it; the report
//! serialises it under `config`.
//!
//! Never: parses flags (the binary does) or opens sockets.

use std::time::Duration;

use bps_proto::Binding;
use serde::Serialize;

/// What the generator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Publishers and subscribers against a BPS broker, end to end.
    Pubsub,
    /// Publishers only (the subscribers run elsewhere).
    Pub,
    /// Subscribers only (the publishers run elsewhere).
    Sub,
    /// The pubsub shape against a NATS server.
    Nats,
    /// Idle subscriber streams and the broker's memory per stream.
    Conns,
    /// The single-core verification ceiling.
    Verify,
}

impl Mode {
    /// The report's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pubsub => "pubsub",
            Self::Pub => "pub",
            Self::Sub => "sub",
            Self::Nats => "nats",
            Self::Conns => "conns",
            Self::Verify => "verify",
        }
    }

    /// Whether publishers run in this process.
    pub fn publishes(self) -> bool {
        matches!(self, Self::Pubsub | Self::Pub | Self::Nats)
    }

    /// Whether subscribers run in this process.
    pub fn subscribes(self) -> bool {
        matches!(self, Self::Pubsub | Self::Sub | Self::Nats)
    }
}

/// One run's settings.
#[derive(Debug, Clone, Serialize)]
pub struct LoadConfig {
    /// The mode.
    pub mode: Mode,
    /// The broker (or NATS server), `HOST:PORT`.
    pub target: String,
    /// Messages per second per publisher; 0 = closed loop.
    pub rate: f64,
    /// Payload bytes per message (at least the 32-byte stamp, at most 4096).
    pub size: usize,
    /// The measured phase.
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    /// Traffic before the measured phase (connections, buffers and caches settle).
    #[serde(serialize_with = "seconds")]
    pub warmup: Duration,
    /// After the last message, how long deliveries are still awaited.
    #[serde(serialize_with = "seconds")]
    pub drain: Duration,
    /// Cohorts.
    pub cohorts: u32,
    /// Publishers per cohort.
    pub publishers: u32,
    /// Subscribers per cohort.
    pub subscribers: u32,
    /// The cohorts' binding.
    #[serde(serialize_with = "binding_name")]
    pub binding: Binding,
    /// Seed of every topic, key and address.
    pub seed: u64,
    /// Fraction of each cohort's subscribers that verify every delivery end to end (at
    /// least one when above 0); the others compare bytes with the published frame.
    pub verify_fraction: f64,
    /// Receiving threads.
    pub threads: usize,
    /// CPUs the sending and receiving threads are pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Closed loop: messages presigned per publisher (the run ends early if they run out).
    pub presign: u64,
    /// Closed loop: messages a publisher may be ahead of its cohort's average subscriber
    /// (0: unbounded, only TCP pushes back).
    pub window: u64,
    /// No progress lines.
    pub quiet: bool,
}

fn seconds<S: serde::Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

fn binding_name<S: serde::Serializer>(binding: &Binding, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(binding.to_pb().as_str_name())
}

impl LoadConfig {
    /// Whether the publishers run closed loop.
    pub fn closed_loop(&self) -> bool {
        !(self.rate.is_finite() && self.rate > 0.0)
    }

    /// Subscribers per cohort that verify end to end.
    pub fn verifying_per_cohort(&self) -> u32 {
        if self.verify_fraction <= 0.0 {
            return 0;
        }
        let wanted = (self.verify_fraction * f64::from(self.subscribers)).ceil() as u32;
        wanted.clamp(1, self.subscribers)
    }
}
