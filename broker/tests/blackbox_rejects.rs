//! Black-box: REJECTED for every spec outside the SWIP and every malformed Join (R3, R5, D6,
//! D7, D11), each answered with a bare REJECTED Ack and a clean close, with no cohort created
//! and no penalty for the peer.

mod support;

use bps_proto::{CohortSpec, Join, PublisherRegime, Status, TopicBinding};
use bytes::Bytes;
use support::{Broker, End, explicit, key};

fn spec(binding: TopicBinding) -> CohortSpec {
    CohortSpec {
        topic: Bytes::from(vec![0xab; 32]),
        binding: binding as i32,
        admin: Bytes::from(key(1).address().to_vec()),
        publishers: PublisherRegime::Unspecified as i32,
        history: false,
        closed: false,
    }
}

fn join(cohort: CohortSpec) -> Join {
    Join {
        cohort: Some(cohort),
        addr: Bytes::from(key(2).address().to_vec()),
    }
}

#[test]
fn specs_outside_the_swip_and_malformed_joins_are_rejected_and_closed() {
    // D11: this broker refuses history (R3 allows it; the default serves it).
    let broker = Broker::start(&["protocol.history=refuse"]);
    let cases: Vec<(&str, Join)> = vec![
        ("unspecified binding", join(spec(TopicBinding::Unspecified))),
        ("unknown binding", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.binding = 9;
            join(cohort)
        }),
        ("topic of 31 bytes", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.topic = Bytes::from(vec![0xab; 31]);
            join(cohort)
        }),
        ("topic of 33 bytes", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.topic = Bytes::from(vec![0xab; 33]);
            join(cohort)
        }),
        ("admin of 19 bytes", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.admin = Bytes::from(vec![1; 19]);
            join(cohort)
        }),
        ("addr missing", {
            let mut join = join(spec(TopicBinding::FeedTopic));
            join.addr = Bytes::new();
            join
        }),
        ("addr of 21 bytes", {
            let mut join = join(spec(TopicBinding::FeedTopic));
            join.addr = Bytes::from(vec![2; 21]);
            join
        }),
        (
            "no cohort spec",
            Join {
                cohort: None,
                addr: Bytes::from(key(2).address().to_vec()),
            },
        ),
        ("closed with ALL", {
            let mut cohort = spec(TopicBinding::Mnemonic);
            cohort.publishers = PublisherRegime::All as i32;
            cohort.closed = true;
            join(cohort)
        }),
        ("closed without admin", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.admin = Bytes::new();
            cohort.closed = true;
            join(cohort)
        }),
        ("ALL without MNEMONIC", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.publishers = PublisherRegime::All as i32;
            join(cohort)
        }),
        ("ALL without admin", {
            let mut cohort = spec(TopicBinding::Mnemonic);
            cohort.publishers = PublisherRegime::All as i32;
            cohort.admin = Bytes::new();
            join(cohort)
        }),
        ("unknown publisher regime", {
            let mut cohort = spec(TopicBinding::Mnemonic);
            cohort.publishers = 7;
            join(cohort)
        }),
        ("history (D11: refused by this broker)", {
            let mut cohort = spec(TopicBinding::FeedTopic);
            cohort.history = true;
            join(cohort)
        }),
    ];
    for (what, bad) in &cases {
        let mut raw = broker.raw();
        let ack = raw.join(bad);
        assert_eq!(ack.status, Status::Rejected as i32, "{what}: {ack:?}");
        assert!(
            ack.challenge.is_empty(),
            "{what}: a refusal has no challenge"
        );
        // A non-OK Ack ends the stream (R5), cleanly.
        let (end, frames) = raw.expect_end();
        assert_eq!((end, frames.len()), (End::Eof, 0), "{what}");
    }
    // A first frame that is not a Join at all.
    let mut raw = broker.raw();
    raw.send(&[3, 0xff, 0xff, 0xff]).expect("send garbage");
    let ack = bps_proto::decode_ack(
        raw.recv(support::WAIT)
            .expect("open")
            .expect("an Ack for garbage"),
    )
    .expect("an Ack");
    assert_eq!(ack.status, Status::Rejected as i32, "garbage Join: {ack:?}");
    assert_eq!(raw.expect_end().0, End::Eof);

    let rejected = cases.len() as u64 + 1;
    broker.assert_metrics(&[
        ("bps_joins_rejected_total", rejected),
        ("bps_joins_ok_total", 0),
        ("bps_cohorts_created_total", 0),
        ("bps_blocklisted_total", 0),
    ]);
    // No penalty: the same peer joins a valid spec at once.
    let _session = broker.join(&explicit(1, &key(1).address(), false), &key(2).address());
    broker.assert_metrics(&[
        ("bps_joins_ok_total", 1),
        ("bps_joins_rejected_total", rejected),
    ]);
}
