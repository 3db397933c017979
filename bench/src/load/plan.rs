//! Who takes part in a run: cohorts, their specs, publisher keys and subscriber addresses,
//! all derived from `--seed` so that `bps-bench pub` and `bps-bench sub` started apart (on
//! two hosts) with the same seed and shape meet in the same cohorts.
//!
//! Owns: [`Plan`] and the derivation `keccak256(seed ‖ label ‖ cohort ‖ member)` of every
//! topic, key and address. A cohort with one publisher is a live stream (explicit
//! authorship, the publisher is the admin and claims, R6–R7); with several it is publishers
//! ALL under MNEMONIC (D7), where every publisher publishes from its Join (R10).
//!
//! Never: connects or signs.

use std::fmt;

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
        })
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
