//! Black-box: `bps sub --json` knows what comes next (issue 13, item 4), through the real
//! broker binary and the real `bps` binary. Publishers skip indices; the subscriber's lines
//! must report each gap with its missing range (per writer on the implicit FEED_TOPIC feed)
//! and, after each delivery, the SOC address of that publisher's next update. The test
//! derives every such address itself from docs/PROTOCOL.md (§1.1 for session feeds, §4 for the
//! implicit FEED_TOPIC feed, §3 for the SOC address) and checks it against the address of the
//! frame delivered next: equal where the next delivered index is the expected one, different
//! where the publisher skipped.
//!
//! Owns: the independent derivation (tiny-keccak over the bytes docs/PROTOCOL.md names) and the
//! checks of the JSON lines.
//! Never: derives an id or an address with the project's own functions. The frames are
//! signed with the library; the broker and the `bps` binary then verify them on their own.

mod support;

use std::collections::HashMap;

use bps_proto::{Address, Binding, Hash, Kind, Spec, encode_roster};
use bps_verify::{SignedFrame, SigningKey, sign_broadcast, sign_implicit};
use serde_json::Value;
use support::cli::JsonSub;
use support::{Broker, explicit, implicit, key, topic};
use tiny_keccak::{Hasher, Keccak};

/// The live-stream admin's DATA indices: two runs skipped (3..5 and 7..9).
const LIVE_INDICES: [u64; 6] = [0, 1, 2, 5, 6, 9];
/// Two graffiti writers on one implicit FEED_TOPIC feed, each with its own skips.
const FEED_INDICES: [[u64; 5]; 2] = [[0, 1, 4, 5, 6], [10, 12, 13, 14, 20]];
/// The prefix of a service kind's session-feed topic (docs/PROTOCOL.md §1.1).
const SERVICE_PREFIX: &[u8] = b"bps-service:v1";
/// `Kind.ROSTER` as the one byte after the service prefix (D1, D2).
const ROSTER_KIND_BYTE: u8 = 3;
/// How long `bps sub` may run at most, in milliseconds: far above what the test needs, so
/// that a lost frame fails the test instead of hanging it.
const SUB_TIMEOUT_MS: &str = "20000";
/// The subscriber and two writers all connect from 127.0.0.1 to one cohort (R33).
const STREAMS_PER_PEER: &str = "limits.streams_per_peer_per_cohort_max=8";

// ---- the derivation, from docs/PROTOCOL.md ----

/// keccak256 of the parts, concatenated.
fn keccak(parts: &[&[u8]]) -> Hash {
    let mut hasher = Keccak::v256();
    for part in parts {
        hasher.update(part);
    }
    let mut hash = [0u8; 32];
    hasher.finalize(&mut hash);
    hash
}

/// A SOC's address: keccak256(id ‖ owner) (docs/PROTOCOL.md §3).
fn soc_address(id: &[u8], owner: &Address) -> Hash {
    keccak(&[id, owner])
}

/// The address of update `index` on a session feed (docs/PROTOCOL.md §1.1): topic_s =
/// keccak256(prefix ‖ topic ‖ challenge), id = keccak256(topic_s ‖ be64(index)).
fn session_feed_address(
    prefix: &[u8],
    topic: &Hash,
    challenge: &Hash,
    index: u64,
    owner: &Address,
) -> Hash {
    let topic_s = keccak(&[prefix, topic, challenge]);
    soc_address(&keccak(&[&topic_s, &index.to_be_bytes()]), owner)
}

/// The id of update `index` of a feed (docs/PROTOCOL.md §4): keccak256(topic ‖ be64(index)).
fn feed_update_id(topic: &Hash, index: u64) -> Hash {
    keccak(&[topic, &index.to_be_bytes()])
}

/// The address of a chunk that was delivered, from its own id and its owner.
fn address_of_chunk(signed: &SignedFrame, owner: &Address) -> Hash {
    soc_address(&signed.chunk[..32], owner)
}

// ---- reading the lines ----

fn hex_of(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn number(line: &Value, field: &str) -> u64 {
    line[field]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {field} in {line}"))
}

fn owner_of(line: &Value) -> Address {
    let text = line["owner"]
        .as_str()
        .unwrap_or_else(|| panic!("no owner in {line}"));
    let bytes = hex::decode(text).expect("hex owner");
    Address::try_from(bytes.as_slice()).expect("a 20-byte owner")
}

fn kinds(lines: &[Value]) -> Vec<&str> {
    lines
        .iter()
        .map(|line| line["kind"].as_str().expect("every line has a kind"))
        .collect()
}

/// The `(expected, got)` gaps a sequence of indices makes: every run it skips.
fn gaps_in(indices: &[u64]) -> Vec<(u64, u64)> {
    indices
        .windows(2)
        .filter(|pair| pair[1] > pair[0] + 1)
        .map(|pair| (pair[0] + 1, pair[1]))
        .collect()
}

/// A publication the test sent: its index, payload and signed frame.
struct Sent {
    index: u64,
    payload: String,
    signed: SignedFrame,
}

/// Checks one publisher's data lines, in delivery order, against what it sent (in order,
/// end to end) and checks each line's next update: `next_index` is the index after it,
/// `next_address` is the test's own `address_at(next_index)`, and it is the address of the
/// frame delivered next exactly when that frame has the expected index. Returns how many
/// deliveries were followed by the expected index and how many by a skip.
fn check_next_updates(
    lines: &[&Value],
    sent: &[Sent],
    owner: &Address,
    address_at: impl Fn(u64) -> Hash,
) -> (usize, usize) {
    let delivered: Vec<(u64, &str)> = lines
        .iter()
        .map(|line| {
            (
                number(line, "index"),
                line["payload_utf8"].as_str().expect("payload_utf8"),
            )
        })
        .collect();
    let published: Vec<(u64, &str)> = sent
        .iter()
        .map(|sent| (sent.index, sent.payload.as_str()))
        .collect();
    assert_eq!(delivered, published, "every frame of 0x{}", hex_of(owner));
    let (mut followed, mut skipped) = (0, 0);
    for (position, line) in lines.iter().enumerate() {
        assert_eq!(owner_of(line), *owner);
        let index = number(line, "index");
        let next_index = number(line, "next_index");
        assert_eq!(next_index, index + 1, "next_index after {index}");
        let next_address = line["next_address"].as_str().expect("next_address");
        assert_eq!(
            next_address,
            hex_of(&address_at(next_index)),
            "next_address after index {index}: not the address docs/PROTOCOL.md gives"
        );
        let Some(next) = sent.get(position + 1) else {
            continue;
        };
        let delivered_next = hex_of(&address_of_chunk(&next.signed, owner));
        if next.index == next_index {
            assert_eq!(
                next_address, delivered_next,
                "after index {index}, the next frame delivered (index {}) is elsewhere",
                next.index
            );
            followed += 1;
        } else {
            assert_ne!(
                next_address, delivered_next,
                "after index {index} the publisher skipped to {}",
                next.index
            );
            skipped += 1;
        }
    }
    (followed, skipped)
}

// ---- the live stream ----

fn sub_args(broker: &Broker, spec: &Spec) -> Vec<String> {
    let mut args = vec![
        "--target".to_owned(),
        broker.target(),
        "--topic".to_owned(),
        hex_of(&spec.topic),
        "--binding".to_owned(),
        "feed-topic".to_owned(),
        "--no-reconnect".to_owned(),
        "--timeout-ms".to_owned(),
        SUB_TIMEOUT_MS.to_owned(),
    ];
    if let Some(admin) = spec.admin {
        args.extend(["--admin".to_owned(), hex_of(&admin)]);
    }
    args
}

fn start_sub(args: &[String]) -> JsonSub {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let sub = JsonSub::start(&args);
    sub.joined();
    sub
}

/// The admin's stream: ROSTER 0 (its claim), DATA at [`LIVE_INDICES`], ROSTER 1, EOS, all
/// under its own challenge. Returns the challenge, the rosters and the DATA sent.
fn publish_live_stream(
    broker: &Broker,
    spec: &Spec,
    admin: &SigningKey,
) -> (Hash, [SignedFrame; 2], Vec<Sent>) {
    let mut session = broker.join(spec, &admin.address());
    let challenge = *session.challenge();
    let roster = |index| {
        sign_broadcast(
            admin,
            Kind::Roster,
            &spec.topic,
            &challenge,
            index,
            &encode_roster(&[]),
        )
    };
    let rosters = [roster(0), roster(1)];
    let data: Vec<Sent> = LIVE_INDICES
        .iter()
        .map(|&index| {
            let payload = format!("live {index}");
            let signed = sign_broadcast(
                admin,
                Kind::Data,
                &spec.topic,
                &challenge,
                index,
                payload.as_bytes(),
            );
            Sent {
                index,
                payload,
                signed,
            }
        })
        .collect();
    let eos = sign_broadcast(admin, Kind::Eos, &spec.topic, &challenge, 0, b"");
    let frames = std::iter::once(&rosters[0])
        .chain(data.iter().map(|sent| &sent.signed))
        .chain([&rosters[1], &eos]);
    for signed in frames {
        session.send(&signed.frame).expect("publish");
    }
    (challenge, rosters, data)
}

#[test]
fn sub_json_reports_the_gaps_of_a_live_stream_and_the_address_of_each_next_update() {
    let broker = Broker::start(&[STREAMS_PER_PEER]);
    let admin = key(1);
    let owner = admin.address();
    let spec = explicit(1, &owner, false);
    let sub = start_sub(&sub_args(&broker, &spec));
    let (challenge, rosters, sent) = publish_live_stream(&broker, &spec, &admin);
    let lines = sub.finish();

    let gaps = gaps_in(&LIVE_INDICES);
    let mut expected_kinds = vec!["roster"];
    for index in LIVE_INDICES {
        if gaps.iter().any(|(_, got)| *got == index) {
            expected_kinds.push("gap");
        }
        expected_kinds.push("data");
    }
    expected_kinds.extend(["roster", "eos"]);
    assert_eq!(kinds(&lines), expected_kinds, "{lines:#?}");

    // Each gap names the missing range, just before the frame that jumped, and starts where
    // the line before it said the next update would be.
    let mut reported_gaps = Vec::new();
    for (position, line) in lines.iter().enumerate() {
        if line["kind"] != "gap" {
            continue;
        }
        let (expected, got) = (number(line, "expected"), number(line, "got"));
        assert_eq!(owner_of(line), owner);
        assert_eq!(number(&lines[position + 1], "index"), got);
        assert_eq!(number(&lines[position - 1], "next_index"), expected);
        reported_gaps.push((expected, got));
    }
    assert_eq!(reported_gaps, gaps);

    let data: Vec<&Value> = lines.iter().filter(|line| line["kind"] == "data").collect();
    let (followed, skipped) = check_next_updates(&data, &sent, &owner, |index| {
        session_feed_address(&[], &spec.topic, &challenge, index, &owner)
    });
    assert_eq!(skipped, gaps.len());
    assert_eq!(followed, LIVE_INDICES.len() - 1 - gaps.len());

    // The admin's ROSTER feed: its own prefix, the next roster on the same stream.
    let roster_prefix = [SERVICE_PREFIX, &[ROSTER_KIND_BYTE]].concat();
    let (first, second) = (&lines[0], &lines[lines.len() - 2]);
    assert_eq!(
        (number(first, "index"), number(second, "index")),
        (0, 1),
        "the rosters"
    );
    assert!(second.get("liveness_fault").is_none(), "{second}");
    for (line, index) in [(first, 0), (second, 1)] {
        assert_eq!(number(line, "next_index"), index + 1);
        assert_eq!(
            line["next_address"],
            hex_of(&session_feed_address(
                &roster_prefix,
                &spec.topic,
                &challenge,
                index + 1,
                &owner
            ))
        );
    }
    assert_eq!(
        first["next_address"],
        hex_of(&address_of_chunk(&rosters[1], &owner)),
        "the next roster delivered"
    );
    assert!(lines[lines.len() - 1].get("next_address").is_none());
}

// ---- the implicit FEED_TOPIC feed ----

/// One writer's updates at `indices` of the feed: ids keccak256(topic ‖ be64(index)), the
/// index in the frame (D4).
fn feed_updates(writer: &SigningKey, topic: &Hash, indices: &[u64]) -> Vec<Sent> {
    indices
        .iter()
        .map(|&index| {
            let payload = format!("0x{} at {index}", hex_of(&writer.address()));
            let id = feed_update_id(topic, index);
            let signed = sign_implicit(writer, &id, Some(index), payload.as_bytes());
            Sent {
                index,
                payload,
                signed,
            }
        })
        .collect()
}

#[test]
fn sub_json_reports_each_writers_gaps_and_next_feed_update_under_implicit_feed_topic() {
    let broker = Broker::start(&[STREAMS_PER_PEER]);
    let spec = implicit(topic(2), Binding::FeedTopic);
    let writers = [key(2), key(3)];
    let updates: Vec<Vec<Sent>> = writers
        .iter()
        .zip(FEED_INDICES)
        .map(|(writer, indices)| feed_updates(writer, &spec.topic, &indices))
        .collect();
    let total: usize = updates.iter().map(Vec::len).sum();
    let mut args = sub_args(&broker, &spec);
    args.extend(["--count".to_owned(), total.to_string()]);
    let sub = start_sub(&args);
    let mut sessions: Vec<_> = writers
        .iter()
        .map(|writer| broker.join(&spec, &writer.address()))
        .collect();
    // Interleaved: the feed is one topic, each writer's next update is its own.
    for position in 0..FEED_INDICES[0].len() {
        for (session, sent) in sessions.iter_mut().zip(&updates) {
            session.send(&sent[position].signed.frame).expect("publish");
        }
    }
    let lines = sub.finish();
    let gap_count: usize = FEED_INDICES
        .iter()
        .map(|indices| gaps_in(indices).len())
        .sum();
    let data_count = kinds(&lines).iter().filter(|kind| **kind == "data").count();
    assert_eq!(data_count, total, "{lines:#?}");
    assert_eq!(
        lines.len(),
        total + gap_count,
        "data and gap lines only: {lines:#?}"
    );

    let mut by_owner: HashMap<Address, Vec<&Value>> = HashMap::new();
    let mut gaps_by_owner: HashMap<Address, Vec<(u64, u64)>> = HashMap::new();
    for (position, line) in lines.iter().enumerate() {
        let owner = owner_of(line);
        if line["kind"] == "gap" {
            // Just before the writer's update that jumped, and starting where that writer's
            // previous line said its next update would be.
            let (expected, got) = (number(line, "expected"), number(line, "got"));
            let jumped = &lines[position + 1];
            assert_eq!(
                (jumped["kind"].as_str(), owner_of(jumped)),
                (Some("data"), owner)
            );
            assert_eq!(number(jumped, "index"), got);
            let previous = by_owner.get(&owner).and_then(|seen| seen.last());
            let previous = previous.unwrap_or_else(|| panic!("a gap on a first update: {line}"));
            assert_eq!(number(previous, "next_index"), expected);
            gaps_by_owner
                .entry(owner)
                .or_default()
                .push((expected, got));
            continue;
        }
        by_owner.entry(owner).or_default().push(line);
    }
    for (writer, indices) in writers.iter().zip(FEED_INDICES) {
        assert_eq!(
            gaps_by_owner.remove(&writer.address()).unwrap_or_default(),
            gaps_in(&indices),
            "the gaps of 0x{}",
            hex_of(&writer.address())
        );
    }
    assert!(
        gaps_by_owner.is_empty(),
        "gaps of no writer: {gaps_by_owner:?}"
    );
    let (mut followed, mut skipped) = (0, 0);
    for (writer, sent) in writers.iter().zip(&updates) {
        let owner = writer.address();
        let lines = by_owner.get(&owner).map_or(&[][..], Vec::as_slice);
        let (writer_followed, writer_skipped) = check_next_updates(lines, sent, &owner, |index| {
            soc_address(&feed_update_id(&spec.topic, index), &owner)
        });
        followed += writer_followed;
        skipped += writer_skipped;
    }
    assert_eq!(
        (followed, skipped),
        (total - FEED_INDICES.len() - gap_count, gap_count)
    );
}
