//! The latency math of `bps-bench` on synthetic input: the open-loop schedule (intended
//! times, due counts, measurement windows), histogram percentiles, and the stamp that
//! carries the intended time inside the signed payload.

use bps_bench::load::latency::{Latency, Percentile};
use bps_bench::load::schedule::Schedule;
use bps_bench::load::stamp::{STAMP_BYTES, Stamp, StampError, broadcast_payload, payload};
use bps_proto::Kind;
use bps_verify::{SigningKey, sign_broadcast};

const T0: u64 = 1_700_000_000_000_000_000;

#[test]
fn open_loop_intended_times_are_t0_plus_k_over_rate_without_drift() {
    let schedule = Schedule::new(T0, 3.0);
    assert_eq!(schedule.intended_ns(0), Some(T0));
    assert_eq!(schedule.intended_ns(1), Some(T0 + 333_333_333));
    assert_eq!(schedule.intended_ns(2), Some(T0 + 666_666_667));
    assert_eq!(schedule.intended_ns(3), Some(T0 + 1_000_000_000));
    // A million messages later the time is still exact: computed from t0, not summed.
    assert_eq!(
        schedule.intended_ns(3_000_000),
        Some(T0 + 1_000_000 * 1_000_000_000)
    );
    let fast = Schedule::new(T0, 10_000.0);
    assert_eq!(fast.intended_ns(123_456), Some(T0 + 12_345_600_000));
}

#[test]
fn due_counts_agree_with_intended_times_at_every_boundary() {
    for rate in [1.0, 3.0, 7.5, 1000.0, 12_345.0, 1e6] {
        let schedule = Schedule::new(T0, rate);
        assert_eq!(schedule.due(T0 - 1), Some(0), "nothing before t0");
        for sequence in [0u64, 1, 2, 9, 10, 99, 1000, 12_345] {
            let at = schedule.intended_ns(sequence).expect("open loop");
            assert_eq!(
                schedule.due(at),
                Some(sequence + 1),
                "rate {rate}, at message {sequence}"
            );
            assert_eq!(
                schedule.due(at - 1),
                Some(sequence),
                "rate {rate}, just before message {sequence}"
            );
        }
    }
}

#[test]
fn the_measurement_window_holds_exactly_the_messages_intended_inside_it() {
    let schedule = Schedule::new(T0, 1000.0);
    // Warm-up of 2 s, then 10 s measured: messages 2000..12000.
    let from = T0 + 2_000_000_000;
    let to = from + 10_000_000_000;
    assert_eq!(schedule.window(from, to), Some(2000..12_000));
    // A window starting between two messages begins at the next one.
    assert_eq!(schedule.window(from + 1, to), Some(2001..12_000));
    assert_eq!(schedule.window(T0, T0), Some(0..0));
    assert_eq!(Schedule::new(0, 10.0).window(0, 1_000_000_000), Some(0..10));
}

#[test]
fn rate_zero_is_the_closed_loop() {
    for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let schedule = Schedule::new(T0, rate);
        assert!(schedule.is_closed(), "rate {rate}");
        assert_eq!(schedule.intended_ns(5), None);
        assert_eq!(schedule.due(T0 + 1), None);
        assert_eq!(schedule.window(T0, T0 + 1), None);
    }
}

#[test]
fn latency_from_the_intended_time_exposes_a_stall_coordinated_omission_would_hide() {
    // 1000 msg/s for 1 s; the system under test stalls for 100 ms at t = 500 ms, then
    // serves the backlog at once. Every message answers 50 us after it could be sent.
    let schedule = Schedule::new(T0, 1000.0);
    let stall_from = T0 + 500_000_000;
    let stall_to = T0 + 600_000_000;
    let mut open_loop = Latency::new();
    let mut closed_loop = Latency::new();
    for sequence in 0..1000 {
        let intended = schedule.intended_ns(sequence).expect("open loop");
        let sent = if (stall_from..stall_to).contains(&intended) {
            stall_to
        } else {
            intended
        };
        let delivered = sent + 50_000;
        open_loop.record_ns(delivered - intended);
        closed_loop.record_ns(delivered - sent);
    }
    let open = open_loop.summary();
    let closed = closed_loop.summary();
    assert_eq!(open.count, 1000);
    assert_eq!(
        closed.max, 50,
        "timing from the actual send hides the stall entirely"
    );
    assert!(open.p90 >= 50 && open.p90 < 100, "p90 {}", open.p90);
    // 10 % of the messages were due during the stall: p99 sees ~90 ms.
    assert!((85_000..=100_100).contains(&open.p99), "p99 {}", open.p99);
    assert!((99_000..=100_100).contains(&open.max), "max {}", open.max);
}

#[test]
fn histogram_percentiles_on_a_uniform_distribution() {
    let mut latency = Latency::new();
    for micros in 1..=10_000u64 {
        latency.record_ns(micros * 1000);
    }
    let summary = latency.summary();
    let within = |value: u64, expected: u64| value.abs_diff(expected) * 1000 <= expected;
    assert!(within(summary.p50, 5000), "p50 {}", summary.p50);
    assert!(within(summary.p90, 9000), "p90 {}", summary.p90);
    assert!(within(summary.p99, 9900), "p99 {}", summary.p99);
    assert!(within(summary.p999, 9990), "p999 {}", summary.p999);
    assert!(within(summary.max, 10_000), "max {}", summary.max);
    assert_eq!(summary.count, 10_000);
    for percentile in Percentile::ALL {
        assert_eq!(Percentile::parse(percentile.name()), Some(percentile));
    }
    assert_eq!(summary.get(Percentile::P999), summary.p999);
}

#[test]
fn histograms_merge_across_threads_and_clamp_their_range() {
    let mut first = Latency::new();
    let mut second = Latency::new();
    for _ in 0..99 {
        first.record_ns(100_000);
    }
    second.record_ns(20_000_000);
    first.merge(&second);
    let summary = first.summary();
    assert_eq!(summary.count, 100);
    assert_eq!(summary.p50, 100);
    assert!(summary.max.abs_diff(20_000) <= 20, "max {}", summary.max);
    // Sub-microsecond latencies count as 1 us; absurd ones saturate at the top bound.
    let mut edges = Latency::new();
    edges.record_ns(0);
    edges.record_ns(u64::MAX);
    let edges = edges.summary();
    assert_eq!(edges.p50, 1);
    assert!(edges.max >= 59_000_000, "max {}", edges.max);
    assert_eq!(
        Latency::new().summary().p99,
        0,
        "an empty histogram reports zeros"
    );
}

#[test]
fn the_stamp_round_trips_and_is_found_inside_a_signed_broadcast() {
    let stamp = Stamp {
        publisher: 7,
        sequence: 123_456_789,
        intended_ns: T0 + 42,
        cohort: 3,
    };
    assert_eq!(Stamp::decode(&stamp.encode()), Ok(stamp));
    let body = payload(&stamp, 4096);
    assert_eq!(body.len(), 4096);
    assert_eq!(Stamp::decode(&body), Ok(stamp));
    assert_eq!(
        payload(&stamp, 10).len(),
        STAMP_BYTES,
        "never shorter than the stamp"
    );
    assert_eq!(
        Stamp::decode(&body[..31]),
        Err(StampError::Short { bytes: 31 })
    );
    assert_eq!(Stamp::decode(&[0u8; 32]), Err(StampError::Magic));

    let key = SigningKey::from_bytes(&[5; 32]).expect("key");
    for size in [STAMP_BYTES, 100, 4096] {
        let signed = sign_broadcast(
            &key,
            Kind::Data,
            &[1; 32],
            &[2; 32],
            99,
            &payload(&stamp, size),
        );
        // The frame is varint ‖ body; the body's payload is found without decoding.
        let frame = &signed.frame[..];
        let prefix = frame.len() - prost::Message::encoded_len(&signed.broadcast);
        let found = broadcast_payload(&frame[prefix..]).expect("a broadcast");
        assert_eq!(found.len(), size);
        assert_eq!(Stamp::decode(found), Ok(stamp));
    }
    assert_eq!(
        broadcast_payload(&[0x12, 0x00]),
        Err(StampError::NotABroadcast)
    );
    assert_eq!(
        broadcast_payload(&[0x0a, 0x05, 1, 2]),
        Err(StampError::NotABroadcast)
    );
}
