//! `validate_join` (R3, D6, D7): one test per `RejectReason`, accepted examples for each
//! authorship, and a property test that every valid typed spec survives the wire.

use bps_proto::{
    Authorship, Binding, CohortSpec, Join, PublisherRegime, RejectReason, Spec, TopicBinding,
    ValidJoin, decode_join, encode_frame, validate_join,
};
use bytes::Bytes;
use proptest::prelude::*;

const TOPIC: [u8; 32] = [0x11; 32];
const ADMIN: [u8; 20] = [0xaa; 20];
const ADDR: [u8; 20] = [0xbb; 20];

/// An explicit MNEMONIC Join that passes every rule; each test breaks exactly one.
fn good_join() -> Join {
    Join {
        cohort: Some(CohortSpec {
            topic: Bytes::copy_from_slice(&TOPIC),
            binding: TopicBinding::Mnemonic as i32,
            admin: Bytes::copy_from_slice(&ADMIN),
            publishers: PublisherRegime::Unspecified as i32,
            history: false,
            closed: false,
        }),
        addr: Bytes::copy_from_slice(&ADDR),
    }
}

fn with_cohort(change: impl FnOnce(&mut CohortSpec)) -> Join {
    let mut join = good_join();
    if let Some(cohort) = join.cohort.as_mut() {
        change(cohort);
    }
    join
}

fn rejected(join: &Join) -> RejectReason {
    validate_join(join).expect_err("the Join breaks a rule")
}

#[test]
fn the_base_join_is_valid() {
    assert!(validate_join(&good_join()).is_ok());
}

#[test]
fn missing_cohort() {
    let join = Join {
        cohort: None,
        ..good_join()
    };
    assert_eq!(rejected(&join), RejectReason::MissingCohort);
}

#[test]
fn binding_unspecified() {
    let join = with_cohort(|cohort| cohort.binding = TopicBinding::Unspecified as i32);
    assert_eq!(rejected(&join), RejectReason::BindingUnspecified);
}

#[test]
fn binding_unknown_value() {
    for value in [6, 100, -1, i32::MIN] {
        let join = with_cohort(|cohort| cohort.binding = value);
        assert_eq!(rejected(&join), RejectReason::BindingUnknown { value });
    }
}

#[test]
fn publishers_unknown_value() {
    for value in [2, -1] {
        let join = with_cohort(|cohort| cohort.publishers = value);
        assert_eq!(rejected(&join), RejectReason::PublishersUnknown { value });
    }
}

#[test]
fn topic_length() {
    for bytes in [0, 31, 33] {
        let join = with_cohort(|cohort| cohort.topic = Bytes::from(vec![0x11; bytes]));
        assert_eq!(rejected(&join), RejectReason::TopicLength { bytes });
    }
}

#[test]
fn admin_length() {
    for bytes in [1, 19, 21, 32] {
        let join = with_cohort(|cohort| cohort.admin = Bytes::from(vec![0xaa; bytes]));
        assert_eq!(rejected(&join), RejectReason::AdminLength { bytes });
    }
}

#[test]
fn addr_length() {
    for bytes in [0, 19, 21] {
        let join = Join {
            addr: Bytes::from(vec![0xbb; bytes]),
            ..good_join()
        };
        assert_eq!(rejected(&join), RejectReason::AddrLength { bytes });
    }
}

#[test]
fn closed_with_all() {
    let join = with_cohort(|cohort| {
        cohort.publishers = PublisherRegime::All as i32;
        cohort.closed = true;
    });
    assert_eq!(rejected(&join), RejectReason::ClosedWithAll);
}

#[test]
fn closed_with_implicit_authorship() {
    let join = with_cohort(|cohort| {
        cohort.admin = Bytes::new();
        cohort.closed = true;
    });
    assert_eq!(rejected(&join), RejectReason::ClosedImplicit);
}

#[test]
fn all_without_admin() {
    let join = with_cohort(|cohort| {
        cohort.admin = Bytes::new();
        cohort.publishers = PublisherRegime::All as i32;
    });
    assert_eq!(rejected(&join), RejectReason::AllWithoutAdmin);
}

#[test]
fn all_without_mnemonic() {
    for binding in [
        Binding::Anchor,
        Binding::SocId,
        Binding::Owner,
        Binding::FeedTopic,
    ] {
        let join = with_cohort(|cohort| {
            cohort.binding = binding.to_pb() as i32;
            cohort.publishers = PublisherRegime::All as i32;
        });
        assert_eq!(
            rejected(&join),
            RejectReason::AllWithoutMnemonic { binding }
        );
    }
}

#[test]
fn every_reason_displays_its_context() {
    let cases = [
        (RejectReason::MissingCohort, "Join has no cohort spec"),
        (
            RejectReason::BindingUnspecified,
            "cohort binding is TOPIC_BINDING_UNSPECIFIED",
        ),
        (
            RejectReason::BindingUnknown { value: 9 },
            "cohort binding 9 is not a known TopicBinding",
        ),
        (
            RejectReason::PublishersUnknown { value: 2 },
            "cohort publishers 2 is not a known PublisherRegime",
        ),
        (
            RejectReason::TopicLength { bytes: 31 },
            "cohort topic is 31 bytes, expected 32",
        ),
        (
            RejectReason::AdminLength { bytes: 19 },
            "cohort admin is 19 bytes, expected 20 or absent",
        ),
        (
            RejectReason::AddrLength { bytes: 0 },
            "Join addr is missing (required, 20 bytes)",
        ),
        (
            RejectReason::AddrLength { bytes: 21 },
            "Join addr is 21 bytes, expected 20",
        ),
        (
            RejectReason::ClosedWithAll,
            "closed is not allowed with publishers ALL",
        ),
        (
            RejectReason::ClosedImplicit,
            "closed is not allowed under implicit authorship (no admin)",
        ),
        (
            RejectReason::AllWithoutAdmin,
            "publishers ALL requires an admin",
        ),
        (
            RejectReason::AllWithoutMnemonic {
                binding: Binding::FeedTopic,
            },
            "publishers ALL requires binding MNEMONIC, not FEED_TOPIC",
        ),
    ];
    for (reason, text) in cases {
        assert_eq!(reason.to_string(), text);
    }
}

fn accepted(join: &Join) -> ValidJoin {
    validate_join(join).expect("a valid Join")
}

#[test]
fn accepts_implicit_authorship_for_every_binding() {
    for binding in [
        Binding::Anchor,
        Binding::SocId,
        Binding::Owner,
        Binding::FeedTopic,
        Binding::Mnemonic,
    ] {
        let join = with_cohort(|cohort| {
            cohort.binding = binding.to_pb() as i32;
            cohort.admin = Bytes::new();
        });
        let valid = accepted(&join);
        assert_eq!(valid.spec.authorship(), Authorship::Implicit);
        assert_eq!(valid.spec.binding, binding);
        assert_eq!(valid.spec.admin, None);
        assert_eq!(valid.addr, ADDR);
    }
}

#[test]
fn accepts_explicit_authorship_closed_and_history() {
    let join = with_cohort(|cohort| {
        cohort.binding = TopicBinding::FeedTopic as i32;
        cohort.closed = true;
        cohort.history = true;
    });
    let valid = accepted(&join);
    assert_eq!(valid.spec.authorship(), Authorship::Explicit);
    assert_eq!(
        valid.spec,
        Spec {
            topic: TOPIC,
            binding: Binding::FeedTopic,
            admin: Some(ADMIN),
            all: false,
            history: true,
            closed: true,
        }
    );
    assert_eq!(valid.key, valid.spec.key());
}

#[test]
fn accepts_all_with_mnemonic_and_admin() {
    let join = with_cohort(|cohort| cohort.publishers = PublisherRegime::All as i32);
    let valid = accepted(&join);
    assert_eq!(valid.spec.authorship(), Authorship::All);
    assert!(valid.spec.all);
    assert_eq!(valid.spec.admin, Some(ADMIN));
}

#[test]
fn history_is_broker_policy_not_a_rejection() {
    let join = with_cohort(|cohort| {
        cohort.admin = Bytes::new();
        cohort.history = true;
    });
    assert!(accepted(&join).spec.history);
}

fn binding() -> impl Strategy<Value = Binding> {
    prop_oneof![
        Just(Binding::Anchor),
        Just(Binding::SocId),
        Just(Binding::Owner),
        Just(Binding::FeedTopic),
        Just(Binding::Mnemonic),
    ]
}

fn any_spec() -> impl Strategy<Value = Spec> {
    (
        any::<[u8; 32]>(),
        binding(),
        proptest::option::of(any::<[u8; 20]>()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(topic, binding, admin, all, history, closed)| Spec {
            topic,
            binding,
            admin,
            all,
            history,
            closed,
        })
}

/// R1 by hand: `0A 20 <topic> 10 <binding> [1A 14 <admin>] [20 01] [28 01] [30 01]`.
fn canonical_by_hand(spec: &Spec) -> Vec<u8> {
    let mut out = vec![0x0a, 0x20];
    out.extend_from_slice(&spec.topic);
    out.extend_from_slice(&[0x10, spec.binding.to_pb() as u8]);
    if let Some(admin) = spec.admin {
        out.extend_from_slice(&[0x1a, 0x14]);
        out.extend_from_slice(&admin);
    }
    for (set, field_key) in [(spec.all, 0x20), (spec.history, 0x28), (spec.closed, 0x30)] {
        if set {
            out.extend_from_slice(&[field_key, 0x01]);
        }
    }
    out
}

proptest! {
    #[test]
    fn key_is_the_r1_layout(spec in any_spec()) {
        let key = spec.key();
        prop_assert_eq!(key.as_bytes(), &canonical_by_hand(&spec)[..]);
    }

    #[test]
    fn a_spec_survives_the_wire_iff_it_passes_check(spec in any_spec(), addr in any::<[u8; 20]>()) {
        let frame = encode_frame(&spec.to_join(&addr));
        // The frame is a one-byte varint (every Join is under 128 bytes) and the body.
        let join = decode_join(frame.slice(1..)).expect("our own encoding decodes");
        match (spec.check(), validate_join(&join)) {
            (Ok(()), Ok(valid)) => {
                prop_assert_eq!(valid.spec, spec);
                prop_assert_eq!(valid.addr, addr);
                prop_assert_eq!(valid.key, spec.key());
            }
            (Err(expected), Err(reason)) => prop_assert_eq!(expected, reason),
            (check, validated) => {
                prop_assert!(false, "check {:?} but validate {:?}", check, validated);
            }
        }
    }
}
