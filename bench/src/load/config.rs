//! The settings of one run, as the command line gave them and as the report records them.
//!
//! Owns: [`LoadConfig`] (every knob of `pubsub`, `pub`, `sub` and `nats`, with its unit in
//! its name), [`Mode`], the named [`Shape`]s users run, and which subscribers of a cohort
//! read every frame ([`LoadConfig::check_of`]). The binary fills it from flags; the run
//! reads it; the report serialises it under `config`.
//!
//! Never: parses flags (the binary does) or opens sockets.

use std::time::Duration;

use bps_proto::Binding;
use serde::Serialize;

use crate::load::progress::ProgressMode;
use crate::load::websocket::Transport;

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

/// A named shape of cohorts, publishers and subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Whatever `--cohorts`, `--publishers`, `--subscribers` and `--binding` say.
    Custom,
    /// One cohort under publishers ALL and MNEMONIC with an admin (D7): 50 members that all
    /// publish and 50 that only listen (every joiner is a publisher stream, R10, so each
    /// member receives the other members' messages, R25). Over NATS: one subject, 50
    /// publishers and 100 subscribers.
    GroupChat,
    /// 1000 live streams (the admin publishes, R6–R7) of 10 spectators each. Over NATS:
    /// 1000 subjects of 10 subscribers and one publisher each.
    ManyCohorts,
}

/// Cohorts, publishers per cohort, subscribers per cohort and binding of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShapeSize {
    /// Cohorts.
    pub cohorts: u32,
    /// Publishers per cohort.
    pub publishers: u32,
    /// Subscribers per cohort (BPS: besides the publisher streams).
    pub subscribers: u32,
    /// The cohorts' binding.
    pub binding: Binding,
}

/// Group chat: members that publish.
const GROUP_CHAT_PUBLISHERS: u32 = 50;
/// Group chat: members that only listen.
const GROUP_CHAT_LISTENERS: u32 = 50;
/// Many cohorts: live streams.
const MANY_COHORTS: u32 = 1000;
/// Many cohorts: spectators per live stream.
const MANY_COHORTS_SPECTATORS: u32 = 10;

impl Shape {
    /// The report's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Custom => "custom",
            Self::GroupChat => "group-chat",
            Self::ManyCohorts => "many-cohorts",
        }
    }

    /// The size of a named shape in `mode` (`None` for [`Shape::Custom`]). Over NATS every
    /// receiving connection is a subscriber; over BPS the publishers' own streams receive.
    pub fn size(self, mode: Mode) -> Option<ShapeSize> {
        match self {
            Self::Custom => None,
            Self::GroupChat => Some(ShapeSize {
                cohorts: 1,
                publishers: GROUP_CHAT_PUBLISHERS,
                subscribers: if mode == Mode::Nats {
                    GROUP_CHAT_PUBLISHERS + GROUP_CHAT_LISTENERS
                } else {
                    GROUP_CHAT_LISTENERS
                },
                binding: Binding::Mnemonic,
            }),
            Self::ManyCohorts => Some(ShapeSize {
                cohorts: MANY_COHORTS,
                publishers: 1,
                subscribers: MANY_COHORTS_SPECTATORS,
                binding: Binding::FeedTopic,
            }),
        }
    }
}

/// How one subscriber of a cohort reads its deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// Verifies every delivery end to end with the client library (R41) and times it.
    Verify,
    /// Reads every frame, compares it with the published one (or, without the published
    /// frames, reads its stamp) and times it.
    Compare,
    /// Counts bytes only: the kernel discards the data (`MSG_TRUNC`).
    Count,
}

/// One run's settings.
#[derive(Debug, Clone, Serialize)]
pub struct LoadConfig {
    /// The mode.
    pub mode: Mode,
    /// The broker (or NATS server), `HOST:PORT`.
    pub target: String,
    /// The BPS streams' carrier: TCP, the broker's native WebSocket endpoint at
    /// `ws://TARGET/bps/v1`, or libp2p pubsub streams (the target a multiaddr).
    pub transport: Transport,
    /// The Swarm network of the light nodes of `--transport p2p`.
    pub network_id: u64,
    /// Streams on one libp2p connection over `--transport p2p`.
    pub p2p_streams_per_connection: u32,
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
    /// The named shape, if any (it set cohorts, publishers, subscribers and binding).
    pub shape: Shape,
    /// Fraction of each cohort's subscribers that verify every delivery end to end (at
    /// least one when above 0).
    pub verify_fraction: f64,
    /// Fraction of each cohort's subscribers that read every frame, compare it with the
    /// published one and record latency; the others only count bytes.
    pub check_fraction: f64,
    /// At least this many subscribers in the run read every frame (spread evenly over the
    /// cohorts, at most all), so latency percentiles rest on enough samples.
    pub check_min: u32,
    /// Loopback source addresses the streams connect from (1: the kernel's choice).
    pub sources: u32,
    /// Threads the publishers are spread over.
    pub send_threads: usize,
    /// Receiving threads.
    pub threads: usize,
    /// CPUs the sending and receiving threads are pinned to (empty: not pinned).
    pub cpus: Vec<usize>,
    /// Closed loop: messages presigned per publisher (the run ends early if they run out).
    pub presign: u64,
    /// Open loop, BPS: sign during the run, at most this many frames ahead of each
    /// publisher's sender, instead of every message before `t0` (0); a run of any length
    /// then holds this many frames per publisher. Readers check stamps, not bytes.
    pub sign_ahead: u64,
    /// Closed loop: messages a cohort's publishers may be ahead of its average subscriber,
    /// shared among them (0: unbounded, only TCP pushes back).
    pub window: u64,
    /// `--quiet` was given (kept in the report's config as it always was; `progress`
    /// is what it decided).
    pub quiet: bool,
    /// When the progress line is drawn on stderr; not part of the report.
    #[serde(skip)]
    pub progress: ProgressMode,
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

    /// Whether BPS frames are signed during the run ([`LoadConfig::sign_ahead`]).
    pub fn signs_ahead(&self) -> bool {
        self.sign_ahead > 0
            && !self.closed_loop()
            && self.mode.publishes()
            && self.mode != Mode::Nats
    }

    /// Subscribers per cohort that verify end to end (none over NATS, which carries opaque
    /// bytes).
    pub fn verifying_per_cohort(&self) -> u32 {
        if self.verify_fraction <= 0.0 || self.mode == Mode::Nats {
            return 0;
        }
        let wanted = (self.verify_fraction * f64::from(self.subscribers)).ceil() as u32;
        wanted.clamp(1, self.subscribers)
    }

    /// Subscribers per cohort in the evenly spaced sample that reads every frame:
    /// `--check-fraction` of the cohort, raised so the run holds at least `--check-min`.
    pub fn checked_per_cohort(&self) -> u32 {
        let by_fraction = if self.check_fraction > 0.0 {
            ((self.check_fraction * f64::from(self.subscribers)).ceil() as u32).max(1)
        } else {
            0
        };
        let by_minimum = self.check_min.div_ceil(self.cohorts.max(1));
        by_fraction.max(by_minimum).min(self.subscribers)
    }

    /// How subscriber `member` of a cohort reads: the first `verifying_per_cohort` verify;
    /// a sample of `checked_per_cohort` spread evenly over the cohort's members (the first
    /// and the last included, so the sample sees the whole fan-out order) compares; the
    /// rest count bytes. `sub` mode knows neither the published frames nor their lengths,
    /// so there every subscriber that does not verify compares (reads the stamp).
    pub fn check_of(&self, member: u32) -> CheckKind {
        if member < self.verifying_per_cohort() {
            return CheckKind::Verify;
        }
        if self.mode == Mode::Sub || is_sampled(member, self.checked_per_cohort(), self.subscribers)
        {
            CheckKind::Compare
        } else {
            CheckKind::Count
        }
    }
}

/// Whether `member` of `total` is one of `sampled` positions spread evenly from the first
/// to the last: positions `round(i × (total − 1) / (sampled − 1))`.
fn is_sampled(member: u32, sampled: u32, total: u32) -> bool {
    if sampled == 0 || member >= total {
        return false;
    }
    if sampled >= total {
        return true;
    }
    if sampled == 1 {
        return member == 0;
    }
    let span = u64::from(total - 1);
    let steps = u64::from(sampled - 1);
    // The nearest sample position at or after `member` is step ceil(member × steps / span)
    // rounded: check the two candidates around it.
    let guess = u64::from(member) * steps / span;
    (guess..=(guess + 1).min(steps))
        .any(|step| (step * span + steps / 2) / steps == u64::from(member))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(cohorts: u32, subscribers: u32, check_fraction: f64, check_min: u32) -> LoadConfig {
        LoadConfig {
            mode: Mode::Pubsub,
            target: "127.0.0.1:1".to_owned(),
            transport: Transport::Tcp,
            network_id: 1,
            p2p_streams_per_connection: 63,
            rate: 0.0,
            size: 4096,
            duration: Duration::from_secs(1),
            warmup: Duration::ZERO,
            drain: Duration::ZERO,
            cohorts,
            publishers: 1,
            subscribers,
            binding: Binding::FeedTopic,
            seed: 1,
            shape: Shape::Custom,
            verify_fraction: 0.0,
            check_fraction,
            check_min,
            sources: 1,
            send_threads: 1,
            threads: 1,
            cpus: Vec::new(),
            presign: 1,
            sign_ahead: 0,
            window: 0,
            quiet: true,
            progress: ProgressMode::Never,
        }
    }

    fn kinds(config: &LoadConfig) -> Vec<CheckKind> {
        (0..config.subscribers)
            .map(|member| config.check_of(member))
            .collect()
    }

    #[test]
    fn the_sample_is_spread_from_the_first_to_the_last_member() {
        let run = config(1, 1000, 0.05, 20);
        assert_eq!(run.checked_per_cohort(), 50);
        let sampled: Vec<u32> = (0..1000)
            .filter(|member| run.check_of(*member) == CheckKind::Compare)
            .collect();
        assert_eq!(sampled.len(), 50);
        assert_eq!((sampled[0], sampled[49]), (0, 999));
        let gaps: Vec<u32> = sampled.windows(2).map(|pair| pair[1] - pair[0]).collect();
        assert!(gaps.iter().all(|gap| (20..=21).contains(gap)), "{gaps:?}");
    }

    #[test]
    fn the_minimum_holds_over_the_run_and_small_cohorts_are_read_whole() {
        // N = 100: 5 % is 5, the minimum of 20 wins.
        assert_eq!(config(1, 100, 0.05, 20).checked_per_cohort(), 20);
        // N = 10 and N = 1: every subscriber.
        assert!(
            kinds(&config(1, 10, 0.05, 20))
                .iter()
                .all(|kind| *kind == CheckKind::Compare)
        );
        assert_eq!(kinds(&config(1, 1, 0.05, 20)), [CheckKind::Compare]);
        // 1000 cohorts of 10: one per cohort already makes the minimum.
        let many = config(1000, 10, 0.05, 20);
        assert_eq!(many.checked_per_cohort(), 1);
        assert_eq!(
            kinds(&many),
            [CheckKind::Compare]
                .into_iter()
                .chain([CheckKind::Count; 9])
                .collect::<Vec<_>>()
        );
        // Nothing asked for: everyone counts.
        assert!(
            kinds(&config(1, 10, 0.0, 0))
                .iter()
                .all(|kind| *kind == CheckKind::Count)
        );
    }

    #[test]
    fn verifying_subscribers_come_first_and_sub_mode_never_counts() {
        let mut run = config(1, 100, 0.0, 2);
        run.verify_fraction = 0.03;
        let got = kinds(&run);
        assert_eq!(&got[..3], [CheckKind::Verify; 3]);
        assert_eq!(
            got[99],
            CheckKind::Compare,
            "the last member is in the sample"
        );
        assert_eq!(
            got.iter().filter(|kind| **kind == CheckKind::Count).count(),
            96
        );
        run.mode = Mode::Sub;
        assert!(kinds(&run).iter().all(|kind| *kind != CheckKind::Count));
    }

    #[test]
    fn shapes_differ_over_nats_only_in_who_subscribes() {
        let bps = Shape::GroupChat.size(Mode::Pubsub).expect("named");
        let nats = Shape::GroupChat.size(Mode::Nats).expect("named");
        assert_eq!((bps.cohorts, bps.publishers, bps.subscribers), (1, 50, 50));
        assert_eq!(bps.binding, Binding::Mnemonic);
        assert_eq!((nats.publishers, nats.subscribers), (50, 100));
        let many = Shape::ManyCohorts.size(Mode::Nats).expect("named");
        assert_eq!(
            (many.cohorts, many.publishers, many.subscribers),
            (1000, 1, 10)
        );
        assert_eq!(Shape::Custom.size(Mode::Pubsub), None);
    }
}
