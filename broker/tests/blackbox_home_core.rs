//! Black-box: which core a cohort is homed on is chosen with a hash key drawn per process
//! (review C11), so nobody can pick cohort keys that all land on one core of every broker.
//! `/cohortz` names each cohort's home core.

mod support;

use std::collections::BTreeMap;

use bps_proto::Binding;
use support::{Broker, implicit, key, topic};

/// Cohorts each run creates: the chance that two runs with fresh hash keys place all of them
/// alike on two cores is 2^-COHORTS.
const COHORTS: u8 = 24;

/// The home core of each cohort of a fresh two-core broker, by canonical key.
fn placement() -> BTreeMap<String, u64> {
    let broker = Broker::start(&[&format!("limits.cohorts_per_peer_max={COHORTS}")]);
    let _sessions: Vec<_> = (0..COHORTS)
        .map(|n| broker.join(&implicit(topic(n), Binding::Mnemonic), &key(1).address()))
        .collect();
    let (status, body) = broker.get(&format!("/cohortz?limit={COHORTS}"));
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let cohorts = page["cohorts"].as_array().expect("a cohort list");
    assert_eq!(cohorts.len(), usize::from(COHORTS), "{body}");
    cohorts
        .iter()
        .map(|cohort| {
            let core = cohort["core"].as_u64().expect("a home core");
            assert!(core < 2, "{body}");
            (cohort["key"].as_str().expect("a key").to_owned(), core)
        })
        .collect()
}

#[test]
fn the_same_cohorts_are_placed_differently_by_two_broker_processes() {
    let first = placement();
    let second = placement();
    for run in [&first, &second] {
        let on_core_0 = run.values().filter(|core| **core == 0).count();
        assert!(
            (1..usize::from(COHORTS)).contains(&on_core_0),
            "every cohort on one core: {run:?}"
        );
    }
    assert_eq!(
        first.keys().collect::<Vec<_>>(),
        second.keys().collect::<Vec<_>>()
    );
    assert_ne!(first, second, "two processes placed every cohort alike");
}
