//! Black-box: a trusted relay (`limits.trusted_relays`) gets its raised R32 and R33 bounds
//! from a running broker and FULL at them; a peer next to it keeps the usual bounds.

mod support;

use std::net::Ipv4Addr;

use bps_proto::Status;
use support::{Broker, explicit, key};

/// The trusted relay: the address the test's own Joins come from.
const RELAY: &str = "limits.trusted_relays=127.0.0.1";
/// An untrusted peer next to it.
const NEIGHBOUR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

#[test]
fn a_trusted_relay_passes_the_usual_bounds_up_to_its_raised_ones_and_its_neighbour_does_not() {
    let broker = Broker::start(&[
        RELAY,
        "limits.cohorts_per_peer_max=1",
        "limits.trusted_relay_cohorts_max=3",
        "limits.streams_per_peer_per_cohort_max=1",
        "limits.trusted_relay_streams_per_cohort_max=2",
    ]);
    let admin = key(1).address();
    // R32: three cohorts, the fourth refused.
    let _cohorts: Vec<_> = (1..=3)
        .map(|topic| broker.join(&explicit(topic, &admin, false), &key(10).address()))
        .collect();
    assert_eq!(
        broker.join_refused(&explicit(4, &admin, false), &key(10).address()),
        Status::Full
    );
    // R33: a second stream in one cohort, the third refused.
    let _second = broker.join(&explicit(1, &admin, false), &key(11).address());
    assert_eq!(
        broker.join_refused(&explicit(1, &admin, false), &key(12).address()),
        Status::Full
    );
    // The neighbour: one cohort, one stream.
    let mut first = broker.raw_from(NEIGHBOUR);
    let ack = first.join(&explicit(1, &admin, false).to_join(&key(13).address()));
    assert_eq!(ack.status, Status::Ok as i32, "{ack:?}");
    let mut second = broker.raw_from(NEIGHBOUR);
    let ack = second.join(&explicit(1, &admin, false).to_join(&key(14).address()));
    assert_eq!(ack.status, Status::Full as i32, "{ack:?}");
    let mut other = broker.raw_from(NEIGHBOUR);
    let ack = other.join(&explicit(2, &admin, false).to_join(&key(15).address()));
    assert_eq!(ack.status, Status::Full as i32, "{ack:?}");
    // The relay is attached to three cohorts, the neighbour to one.
    broker.assert_metrics(&[
        ("bps_joins_ok_total", 5),
        ("bps_joins_full_total", 4),
        ("bps_peers_attached", 2),
        ("bps_trusted_relays_attached", 1),
        ("bps_trusted_relay_cohorts", 3),
        ("bps_blocklistings_waived_total", 0),
    ]);
}
