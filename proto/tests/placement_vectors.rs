//! The placement vectors shared with the TypeScript client: `proto/vectors/placement.json`.
//!
//! The file is this test's output, checked byte for byte: a change to placement (or to the
//! canonical key) fails here and in `web/test/placement.test.ts` until the file is written
//! again on purpose with `BPS_BLESS_PLACEMENT=1 cargo test -p bps-proto --test
//! placement_vectors`. The JSON is written by hand (no serde in this crate) in one fixed
//! layout, so the comparison is of text.

use std::fmt::Write as _;
use std::path::PathBuf;

use bps_proto::{
    BROKER_NAME_BYTES_MAX, Binding, PLACEMENT_TAG, PlacementError, Spec, broker_name, keccak256,
    rank, weight,
};

/// The environment variable that rewrites the file instead of checking it.
const BLESS: &str = "BPS_BLESS_PLACEMENT";

/// Broker lists of the vectors: one broker, TCP targets, WebSocket URLs, a mix with
/// surrounding whitespace (trimmed) and a non-ASCII name (weighed as UTF-8).
fn lists() -> Vec<Vec<&'static str>> {
    vec![
        vec!["127.0.0.1:1637"],
        vec!["10.0.0.1:1637", "10.0.0.2:1637"],
        vec![
            "ws://a.example:1639/bps/v1",
            "ws://b.example:1639/bps/v1",
            "ws://c.example:1639/bps/v1",
        ],
        vec![
            "root.example:1637",
            " edge-1.example:1637",
            "edge-2.example:1637\t",
            "[2001:db8::1]:1637",
            "bröker.example:1637",
        ],
    ]
}

/// The cohorts of the vectors: each regime and flag of R1's key at least once.
fn specs() -> Vec<Spec> {
    let topic = |label: &str| keccak256(label.as_bytes());
    let admin = Some([0xaa; 20]);
    let base = Spec {
        topic: topic("placement/implicit"),
        binding: Binding::Mnemonic,
        admin: None,
        all: false,
        history: false,
        closed: false,
    };
    vec![
        base,
        Spec {
            topic: topic("placement/explicit"),
            binding: Binding::FeedTopic,
            admin,
            ..base
        },
        Spec {
            topic: topic("placement/all"),
            admin,
            all: true,
            ..base
        },
        Spec {
            topic: topic("placement/history-closed"),
            binding: Binding::SocId,
            admin,
            history: true,
            closed: true,
            ..base
        },
    ]
}

/// Lists that are errors, with the error's code as the TypeScript client names it.
fn bad_lists() -> Vec<(Vec<String>, PlacementError, &'static str)> {
    let long = "x".repeat(BROKER_NAME_BYTES_MAX + 1);
    vec![
        (Vec::new(), PlacementError::EmptyList, "empty-list"),
        (
            vec!["a:1".to_owned(), " ".to_owned()],
            PlacementError::EmptyName { position: 1 },
            "empty-name",
        ),
        (
            vec!["a:1".to_owned(), "b:2".to_owned(), "a:1 ".to_owned()],
            PlacementError::DuplicateName {
                name: "a:1".to_owned(),
            },
            "duplicate-name",
        ),
        (
            vec![long.clone()],
            PlacementError::NameTooLong {
                position: 0,
                bytes: long.len(),
            },
            "name-too-long",
        ),
    ]
}

/// A JSON string; the vectors' names need only `"`, `\` and control characters escaped.
fn string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            control if u32::from(control) < 0x20 => {
                let _ = write!(quoted, "\\u{:04x}", u32::from(control));
            }
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

fn strings<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| string(item.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

/// The `cohort` field of the Join the key comes from, as its proto field names and values.
fn cohort_json(spec: &Spec) -> String {
    let pb = spec.to_pb();
    let binding = bps_proto::TopicBinding::try_from(pb.binding).map_or("?", |b| b.as_str_name());
    let publishers =
        bps_proto::PublisherRegime::try_from(pb.publishers).map_or("?", |p| p.as_str_name());
    format!(
        "{{\"topic\": {}, \"binding\": {}, \"admin\": {}, \"publishers\": {}, \"history\": {}, \
         \"closed\": {}}}",
        string(&hex::encode(&pb.topic)),
        string(binding),
        string(&hex::encode(&pb.admin)),
        string(publishers),
        pb.history,
        pb.closed
    )
}

fn case_json(spec: &Spec, list: &[&str]) -> String {
    let key = spec.key();
    let names: Vec<&str> = list.iter().map(|entry| broker_name(entry)).collect();
    let weights: Vec<String> = names
        .iter()
        .map(|name| hex::encode(weight(name, &key)))
        .collect();
    let ranking: Vec<&str> = rank(list, &key)
        .expect("the vectors' lists are valid")
        .into_iter()
        .map(|position| names[position])
        .collect();
    format!(
        "    {{\n      \"cohort\": {},\n      \"key\": {},\n      \"brokers\": {},\n      \
         \"weights\": {},\n      \"ranking\": {}\n    }}",
        cohort_json(spec),
        string(&key.to_hex()),
        strings(list),
        strings(&weights),
        strings(&ranking)
    )
}

fn error_json(list: &[String], expected: &PlacementError, code: &str) -> String {
    assert_eq!(rank(list, &specs()[0].key()).as_ref(), Err(expected));
    format!(
        "    {{\"brokers\": {}, \"error\": {}}}",
        strings(list),
        string(code)
    )
}

/// The whole file.
fn vectors() -> String {
    let mut cases = Vec::new();
    for spec in specs() {
        for list in lists() {
            cases.push(case_json(&spec, &list));
        }
    }
    let errors: Vec<String> = bad_lists()
        .iter()
        .map(|(list, error, code)| error_json(list, error, code))
        .collect();
    format!(
        "{{\n  \"about\": {},\n  \"tag\": {},\n  \"cases\": [\n{}\n  ],\n  \"errors\": [\n{}\n  \
         ]\n}}\n",
        string(
            "Placement by cohort key (docs/SCALING.md, Placement): for each cohort and broker \
             list, the canonical key (R1) as hex, each broker's weight in list order and the \
             brokers ranked, root first. Written by proto/tests/placement_vectors.rs."
        ),
        string(&String::from_utf8_lossy(PLACEMENT_TAG)),
        cases.join(",\n"),
        errors.join(",\n")
    )
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors/placement.json")
}

#[test]
fn the_shared_placement_vectors_are_what_this_implementation_computes() {
    let expected = vectors();
    if std::env::var_os(BLESS).is_some() {
        std::fs::write(path(), &expected).expect("write the vectors");
        return;
    }
    let stored = std::fs::read_to_string(path()).expect("proto/vectors/placement.json exists");
    assert!(
        stored == expected,
        "proto/vectors/placement.json differs from what placement computes; if the change is \
         meant, run with {BLESS}=1 and review the diff"
    );
}
