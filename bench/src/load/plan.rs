//! Who takes part in a run: cohorts, their specs, publisher keys and subscriber addresses,
//! all derived from `--seed` so that `bps-bench pub` and `bps-bench sub` started apart (on
//! two hosts) with the same seed and shape meet in the same cohorts.
//!
//! Owns: [`Plan`] and the derivation `keccak256(seed ‖ label ‖ cohort ‖ member)` of every
//! topic, key and address. A cohort with one publisher is a live stream (explicit
//! authorship, the publisher is the admin and claims, R6–R7); with several it is publishers
//! ALL under MNEMONIC with the first publisher as admin (D7), where every joiner is a
//! publisher stream from its Join (R10): the subscribers are then members that never
//! publish. Also which loopback source address each stream connects from
//! ([`Plan::source_of`]): the streams, numbered cohort by cohort (publishers first), take
//! the `--sources` addresses in turn, so that a broker's per-peer bounds (a peer is the
//! remote IP, docs/PROTOCOL.md §2; R32 cohorts per peer, R33 streams per peer and cohort) see the
//! load spread as [`Plan::peer_load`] says.
//!
//! Never: connects or signs.

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv4Addr;

use bps_proto::{Address, Binding, Hash, Spec, keccak256};
use bps_verify::SigningKey;

/// One publisher of the run.
#[derive(Debug, Clone)]
pub struct PublisherPlan {
    /// Its number across the run (the stamp's `publisher`).
    pub global: u32,
    /// Its cohort's number.
    pub cohort: u32,
    /// Its key; the Join addr is the key's address.
    pub key: SigningKey,
}

/// One cohort of the run.
#[derive(Debug, Clone)]
pub struct CohortPlan {
    /// Its number in the run.
    pub index: u32,
    /// The spec every member joins with.
    pub spec: Spec,
    /// Its publishers (global numbers `index × P .. (index + 1) × P`).
    pub publishers: Vec<PublisherPlan>,
    /// Its subscribers' addresses (spectators: neither admin nor rostered, R8).
    pub subscribers: Vec<Address>,
}

/// The whole run's membership.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every cohort.
    pub cohorts: Vec<CohortPlan>,
    /// Publishers per cohort.
    pub publishers_per_cohort: u32,
    /// Loopback source addresses the streams are spread over (1: the kernel's choice).
    pub sources: u32,
}

/// One stream of a cohort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Member {
    /// The cohort's publisher with this local number (0 is the admin).
    Publisher(u32),
    /// The cohort's subscriber with this number.
    Subscriber(u32),
}

/// How the run's streams load each source address, against a broker's per-peer bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLoad {
    /// Source addresses in use.
    pub sources: u32,
    /// The most streams one source holds in one cohort (R33's bound must be at least this).
    pub streams_per_source_per_cohort_max: u32,
    /// The most cohorts one source is in (R32's bound must be at least this).
    pub cohorts_per_source_max: u32,
}

/// Most source addresses: the host numbers .1 to .254 of 127.0.0.x up to 127.0.255.x.
pub const SOURCES_MAX: u32 = 254 * 256;

/// The `index`-th loopback source address: 127.0.0.1 .. 127.0.0.254, then 127.0.1.1 ..
/// (last octets 0 and 255 are skipped).
pub fn source_address(index: u32) -> Ipv4Addr {
    assert!(index < SOURCES_MAX, "source index {index} out of range");
    let third = u8::try_from(index / 254).unwrap_or(u8::MAX);
    let last = u8::try_from(1 + index % 254).unwrap_or(u8::MAX);
    Ipv4Addr::new(127, 0, third, last)
}

/// A shape that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

impl Plan {
    /// `cohorts` cohorts of `publishers` publishers and `subscribers` subscribers each.
    pub fn new(
        seed: u64,
        cohorts: u32,
        publishers: u32,
        subscribers: u32,
        binding: Binding,
    ) -> Result<Self, PlanError> {
        if cohorts == 0 {
            return Err(PlanError("--cohorts: at least 1".to_owned()));
        }
        if publishers > 1 && binding != Binding::Mnemonic {
            return Err(PlanError(format!(
                "--publishers {publishers}: several publishers per cohort need publishers ALL, \
                 which needs --binding mnemonic (D7)"
            )));
        }
        let mut plans = Vec::new();
        for cohort in 0..cohorts {
            let publisher_plans = (0..publishers)
                .map(|member| PublisherPlan {
                    global: cohort * publishers + member,
                    cohort,
                    key: derive_key(seed, cohort, member),
                })
                .collect::<Vec<_>>();
            let admin = match publisher_plans.first() {
                Some(first) => first.key.address(),
                None => derive_address(seed, b"admin", cohort, 0),
            };
            let spec = Spec {
                topic: derive(seed, b"topic", cohort, 0),
                binding,
                admin: Some(admin),
                all: publishers > 1,
                history: false,
                closed: false,
            };
            spec.check()
                .map_err(|reason| PlanError(format!("cohort spec: {reason}")))?;
            let subscriber_addrs = (0..subscribers)
                .map(|member| derive_address(seed, b"subscriber", cohort, member))
                .collect();
            plans.push(CohortPlan {
                index: cohort,
                spec,
                publishers: publisher_plans,
                subscribers: subscriber_addrs,
            });
        }
        Ok(Self {
            cohorts: plans,
            publishers_per_cohort: publishers,
            sources: 1,
        })
    }

    /// The same plan with its streams spread over `sources` loopback source addresses.
    pub fn with_sources(mut self, sources: u32) -> Result<Self, PlanError> {
        if !(1..=SOURCES_MAX).contains(&sources) {
            return Err(PlanError(format!(
                "--sources {sources}: expected 1 to {SOURCES_MAX}"
            )));
        }
        self.sources = sources;
        Ok(self)
    }

    /// Every stream of the run in connection order: cohort by cohort, publishers first.
    pub fn members(&self) -> impl Iterator<Item = (u32, Member)> + '_ {
        self.cohorts.iter().flat_map(|cohort| {
            let publishers = (0..cohort.publishers.len() as u32).map(Member::Publisher);
            let subscribers = (0..cohort.subscribers.len() as u32).map(Member::Subscriber);
            publishers
                .chain(subscribers)
                .map(move |member| (cohort.index, member))
        })
    }

    /// The source address of a stream (`None`: one source, the kernel's choice).
    pub fn source_of(&self, cohort: u32, member: Member) -> Option<Ipv4Addr> {
        if self.sources <= 1 {
            return None;
        }
        let subscribers = self
            .cohorts
            .first()
            .map_or(0, |first| first.subscribers.len() as u64);
        let per_cohort = u64::from(self.publishers_per_cohort) + subscribers;
        let slot = match member {
            Member::Publisher(local) => u64::from(local),
            Member::Subscriber(number) => u64::from(self.publishers_per_cohort) + u64::from(number),
        };
        let connection = u64::from(cohort) * per_cohort + slot;
        let index = u32::try_from(connection % u64::from(self.sources)).unwrap_or(0);
        Some(source_address(index))
    }

    /// How the streams load the source addresses (module docs).
    pub fn peer_load(&self) -> PeerLoad {
        let mut per_source_cohort: HashMap<(Option<Ipv4Addr>, u32), u32> = HashMap::new();
        for (cohort, member) in self.members() {
            *per_source_cohort
                .entry((self.source_of(cohort, member), cohort))
                .or_insert(0) += 1;
        }
        let mut cohorts_per_source: HashMap<Option<Ipv4Addr>, u32> = HashMap::new();
        for (source, _) in per_source_cohort.keys() {
            *cohorts_per_source.entry(*source).or_insert(0) += 1;
        }
        PeerLoad {
            sources: cohorts_per_source.len() as u32,
            streams_per_source_per_cohort_max: per_source_cohort
                .values()
                .copied()
                .max()
                .unwrap_or(0),
            cohorts_per_source_max: cohorts_per_source.values().copied().max().unwrap_or(0),
        }
    }

    /// Every publisher, in global order.
    pub fn publishers(&self) -> impl Iterator<Item = &PublisherPlan> {
        self.cohorts
            .iter()
            .flat_map(|cohort| cohort.publishers.iter())
    }

    /// Publishers in the run.
    pub fn publisher_count(&self) -> usize {
        self.cohorts
            .iter()
            .map(|cohort| cohort.publishers.len())
            .sum()
    }

    /// Subscribers in the run.
    pub fn subscriber_count(&self) -> usize {
        self.cohorts
            .iter()
            .map(|cohort| cohort.subscribers.len())
            .sum()
    }

    /// The NATS subject standing for cohort `index` in `nats` mode.
    pub fn nats_subject(&self, index: u32) -> String {
        let topic = self
            .cohorts
            .get(index as usize)
            .map_or([0; 32], |cohort| cohort.spec.topic);
        format!("bps.bench.{}", hex::encode(&topic[..8]))
    }
}

fn derive(seed: u64, label: &[u8], cohort: u32, member: u32) -> Hash {
    let mut input = Vec::with_capacity(8 + label.len() + 8);
    input.extend_from_slice(&seed.to_le_bytes());
    input.extend_from_slice(label);
    input.extend_from_slice(&cohort.to_le_bytes());
    input.extend_from_slice(&member.to_le_bytes());
    keccak256(&input)
}

fn derive_address(seed: u64, label: &[u8], cohort: u32, member: u32) -> Address {
    let hash = derive(seed, label, cohort, member);
    let mut address = [0u8; 20];
    address.copy_from_slice(&hash[12..]);
    address
}

/// A key from the seed; a hash outside the curve order (probability 2^-128) is hashed again.
fn derive_key(seed: u64, cohort: u32, member: u32) -> SigningKey {
    let mut secret = derive(seed, b"publisher", cohort, member);
    loop {
        match SigningKey::from_bytes(&secret) {
            Ok(key) => return key,
            Err(_) => secret = keccak256(&secret),
        }
    }
}
