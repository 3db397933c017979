//! The shapes users run, as `bps-bench` plans them: how many streams, from which loopback
//! source addresses, joining which cohorts as whom, and what a broker's per-peer bounds
//! (R32 cohorts per peer, R33 streams per peer and cohort) must allow for them.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use bps_bench::load::config::{Mode, Shape};
use bps_bench::load::plan::{Member, Plan, source_address};
use bps_proto::{Authorship, Binding};

fn plan_of(shape: Shape, mode: Mode, sources: u32) -> Plan {
    let size = shape.size(mode).expect("a named shape");
    Plan::new(
        7,
        size.cohorts,
        size.publishers,
        size.subscribers,
        size.binding,
    )
    .expect("plannable")
    .with_sources(sources)
    .expect("sources")
}

#[test]
fn source_addresses_are_127_0_0_x_first_and_skip_0_and_255() {
    assert_eq!(source_address(0), Ipv4Addr::new(127, 0, 0, 1));
    assert_eq!(source_address(49), Ipv4Addr::new(127, 0, 0, 50));
    assert_eq!(source_address(253), Ipv4Addr::new(127, 0, 0, 254));
    assert_eq!(source_address(254), Ipv4Addr::new(127, 0, 1, 1));
    assert_eq!(source_address(699), Ipv4Addr::new(127, 0, 2, 192));
}

#[test]
fn group_chat_is_one_all_cohort_of_50_publishing_members_and_50_listeners() {
    let plan = plan_of(Shape::GroupChat, Mode::Pubsub, 50);
    assert_eq!(plan.cohorts.len(), 1);
    let cohort = &plan.cohorts[0];
    // D7: ALL needs MNEMONIC and an admin; the admin is the first member.
    assert_eq!(cohort.spec.binding, Binding::Mnemonic);
    assert!(cohort.spec.all);
    assert_eq!(cohort.spec.authorship(), Authorship::All);
    assert_eq!(cohort.spec.admin, Some(cohort.publishers[0].key.address()));
    assert!(cohort.spec.check().is_ok());
    // Joins: 50 publishing members with their keys' addresses, 50 listeners, all distinct
    // (R29 bounds publisher streams per address, and every joiner here is one, R10).
    assert_eq!(cohort.publishers.len(), 50);
    assert_eq!(cohort.subscribers.len(), 50);
    let addrs: HashSet<[u8; 20]> = cohort
        .publishers
        .iter()
        .map(|publisher| publisher.key.address())
        .chain(cohort.subscribers.iter().copied())
        .collect();
    assert_eq!(addrs.len(), 100);
    // 100 streams over 127.0.0.1 ..= 127.0.0.50, two each: within R33's default of 2.
    let streams: Vec<_> = plan.members().collect();
    assert_eq!(streams.len(), 100);
    let mut per_source: HashMap<Ipv4Addr, u32> = HashMap::new();
    for (cohort, member) in &streams {
        *per_source
            .entry(plan.source_of(*cohort, *member).expect("a source"))
            .or_insert(0) += 1;
    }
    assert_eq!(per_source.len(), 50);
    assert!(per_source.values().all(|streams| *streams == 2));
    assert!(per_source.contains_key(&Ipv4Addr::new(127, 0, 0, 50)));
    assert_eq!(
        plan.source_of(0, Member::Publisher(0)),
        Some(Ipv4Addr::new(127, 0, 0, 1))
    );
    assert_eq!(
        plan.source_of(0, Member::Subscriber(0)),
        Some(Ipv4Addr::new(127, 0, 0, 1)),
        "stream 50 wraps around to the first source"
    );
    let load = plan.peer_load();
    assert_eq!(
        (
            load.sources,
            load.streams_per_source_per_cohort_max,
            load.cohorts_per_source_max
        ),
        (50, 2, 1)
    );
}

#[test]
fn group_chat_over_nats_is_one_subject_with_50_publishers_and_100_subscribers() {
    let plan = plan_of(Shape::GroupChat, Mode::Nats, 1);
    assert_eq!(plan.cohorts.len(), 1);
    assert_eq!(plan.publisher_count(), 50);
    assert_eq!(plan.subscriber_count(), 100);
    assert_eq!(plan.members().count(), 150);
    assert_eq!(plan.source_of(0, Member::Subscriber(3)), None, "one source");
}

#[test]
fn many_cohorts_is_1000_live_streams_of_10_spectators_spread_within_default_bounds() {
    let plan = plan_of(Shape::ManyCohorts, Mode::Pubsub, 700);
    assert_eq!(plan.cohorts.len(), 1000);
    for cohort in &plan.cohorts {
        // A live stream: explicit authorship, the one publisher is the admin and claims.
        assert_eq!(cohort.spec.authorship(), Authorship::Explicit);
        assert_eq!(cohort.publishers.len(), 1);
        assert_eq!(cohort.spec.admin, Some(cohort.publishers[0].key.address()));
        assert_eq!(cohort.subscribers.len(), 10);
    }
    let topics: HashSet<_> = plan
        .cohorts
        .iter()
        .map(|cohort| cohort.spec.topic)
        .collect();
    assert_eq!(topics.len(), 1000, "1000 distinct cohorts");
    assert_eq!(plan.members().count(), 11_000);
    // 11 000 streams over 700 sources: one stream per source per cohort, and at most 16
    // cohorts per source (R32's default); only R31 (cohorts per broker) must be raised.
    let load = plan.peer_load();
    assert_eq!(
        (
            load.sources,
            load.streams_per_source_per_cohort_max,
            load.cohorts_per_source_max
        ),
        (700, 1, 16)
    );
    // From one address the same shape needs R33 at 11 and R32 at 1000.
    let single = plan_of(Shape::ManyCohorts, Mode::Pubsub, 1).peer_load();
    assert_eq!(
        (
            single.sources,
            single.streams_per_source_per_cohort_max,
            single.cohorts_per_source_max
        ),
        (1, 11, 1000)
    );
}

#[test]
fn too_many_sources_are_refused() {
    let plan = Plan::new(1, 1, 1, 1, Binding::FeedTopic).expect("plan");
    assert!(plan.clone().with_sources(0).is_err());
    assert!(plan.with_sources(254 * 256 + 1).is_err());
}
