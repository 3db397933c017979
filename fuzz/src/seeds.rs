//! The seed corpus: the golden frames of `proto/tests/golden.rs`, the Join examples of
//! `proto/tests/join_validation.rs` and bee's vectors of `verify/tests/bee_vectors.rs`,
//! each in its target's input layout, plus the boundary cases those tests pin (oversize and
//! overlong length varints, the 105- and 4201-byte SOC bounds, the dispersed-replicas rule);
//! for the state machine, fixed pseudo-random choice streams of growing length.
//!
//! Owns: [`all`]. Never: writes files (`examples/seed_corpus.rs` does), or anything large:
//! the biggest seed is one full-size frame, so the committed corpus stays small.

use bps_proto::{
    Ack, Binding, Broadcast, CohortSpec, FRAME_BYTES_MAX_DEFAULT, Join, Kind, PublisherRegime,
    Spec, Status, TopicBinding, encode_frame, encode_roster,
};
use bps_verify::{SigningKey, sign_soc};
use bytes::Bytes;
use prost::Message;

use crate::keccak_reference::{self, CHUNK_BYTES};
use crate::{bmt_input, frame_input, soc_input, varint_reference};

/// One seed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    /// The fuzz target it seeds.
    pub target: &'static str,
    /// Its file name in `fuzz/corpus/<target>/`, after the `seed-` prefix.
    pub name: &'static str,
    /// The input, in the target's layout.
    pub input: Vec<u8>,
}

const TOPIC: [u8; 32] = [0x11; 32];
const ADMIN: [u8; 20] = [0xaa; 20];
const ADDR: [u8; 20] = [0xbb; 20];
const CHALLENGE: [u8; 32] = [0xcc; 32];

/// bee's signer-test secret key (pkg/crypto/signer_test.go), the owner of its SOC vectors.
const BEE_OWNER_KEY: [u8; 32] = [
    0x63, 0x4f, 0xb5, 0xa8, 0x72, 0x39, 0x6d, 0x96, 0x93, 0xe5, 0xc9, 0xf9, 0xd7, 0x23, 0x3c, 0xfa,
    0x93, 0xf3, 0x95, 0xc0, 0x93, 0x37, 0x10, 0x17, 0xff, 0x44, 0xaa, 0x9a, 0xe6, 0x56, 0x4c, 0xdd,
];

/// Proximity order OWNER and SOC_ID demand (docs/PROTOCOL.md §4); the seeds search for ids
/// and keys that meet it so the fuzzer starts inside those branches.
const PO_MIN: u8 = 16;

/// Every seed of every target.
pub fn all() -> Vec<Seed> {
    [
        frame_decoder(),
        join(),
        broadcast(),
        soc(),
        roster(),
        keccak_bmt(),
        machine(),
        forwarded(),
        crate::ws_seeds::all(),
        crate::bee_seeds::all(),
    ]
    .concat()
}

fn seed(target: &'static str, name: &'static str, input: Vec<u8>) -> Seed {
    Seed {
        target,
        name,
        input,
    }
}

fn spec_pb(binding: TopicBinding, admin: &[u8], publishers: i32, history: bool) -> CohortSpec {
    CohortSpec {
        topic: Bytes::copy_from_slice(&TOPIC),
        binding: binding as i32,
        admin: Bytes::copy_from_slice(admin),
        publishers,
        history,
        closed: false,
    }
}

fn join_explicit_feed_topic() -> Join {
    Join {
        cohort: Some(spec_pb(TopicBinding::FeedTopic, &ADMIN, 0, false)),
        addr: Bytes::copy_from_slice(&ADDR),
    }
}

fn join_all_mnemonic_history() -> Join {
    Join {
        cohort: Some(spec_pb(
            TopicBinding::Mnemonic,
            &ADMIN,
            PublisherRegime::All as i32,
            true,
        )),
        addr: Bytes::copy_from_slice(&ADDR),
    }
}

fn broadcast_small() -> Broadcast {
    Broadcast {
        soc: Bytes::from_static(&[1, 2, 3]),
        kind: Kind::Data as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: 300,
    }
}

fn broadcast_implicit() -> Broadcast {
    Broadcast {
        soc: Bytes::from_static(&[1, 2, 3]),
        kind: Kind::Data as i32,
        challenge: Bytes::new(),
        index: 0,
    }
}

fn broadcast_largest() -> Broadcast {
    Broadcast {
        soc: Bytes::from(vec![0x5a; bps_proto::SOC_BYTES_MAX]),
        kind: Kind::Eos as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: u64::MAX,
    }
}

/// golden.rs: kind 7 is no `Kind`, yet the body decodes.
const BROADCAST_UNKNOWN_KIND: [u8; 5] = [0x0a, 0x01, 0xaa, 0x10, 0x07];

fn ack(status: Status, challenge: &[u8]) -> Ack {
    Ack {
        status: status as i32,
        challenge: Bytes::copy_from_slice(challenge),
    }
}

fn frame_decoder() -> Vec<Seed> {
    let target = "frame_decoder";
    let cap_default = u16::try_from(FRAME_BYTES_MAX_DEFAULT).expect("the default cap fits u16");
    let small_frames: Vec<u8> = [
        encode_frame(&join_explicit_feed_topic()),
        encode_frame(&join_all_mnemonic_history()),
        encode_frame(&ack(Status::Ok, &CHALLENGE)),
        encode_frame(&ack(Status::Full, &[])),
        encode_frame(&ack(Status::Rejected, &[])),
        encode_frame(&broadcast_small()),
        encode_frame(&broadcast_implicit()),
        Bytes::from([&[0x05][..], &BROADCAST_UNKNOWN_KIND].concat()),
    ]
    .concat();
    let largest = encode_frame(&broadcast_largest());
    let largest_body = u16::try_from(largest.len() - 2).expect("a 4251-byte body");
    let stream = [small_frames.as_slice(), &largest, &small_frames[..40]].concat();
    let oversize = varint_reference::encode(FRAME_BYTES_MAX_DEFAULT as u64 + 1);
    let mut overflowing = vec![0xff; 9];
    overflowing.push(0x02);
    vec![
        seed(
            target,
            "golden-stream",
            frame_input::encode(cap_default, &[1, 50, 83, 84, 200, 300, 4400], &stream),
        ),
        seed(
            target,
            "largest-at-exact-cap",
            frame_input::encode(largest_body, &[2], &largest),
        ),
        seed(
            target,
            "largest-one-over-cap",
            frame_input::encode(largest_body - 1, &[1], &largest),
        ),
        seed(
            target,
            "length-one-over-default-cap",
            frame_input::encode(cap_default, &[1], &oversize),
        ),
        seed(
            target,
            "varint-ten-continuations",
            frame_input::encode(frame_input::CAP_UNLIMITED, &[5], &[0x80; 10]),
        ),
        seed(
            target,
            "varint-beyond-64-bits",
            frame_input::encode(frame_input::CAP_UNLIMITED, &[], &overflowing),
        ),
        seed(
            target,
            "length-u64-max-unlimited-cap",
            frame_input::encode(
                frame_input::CAP_UNLIMITED,
                &[3],
                &varint_reference::encode(u64::MAX),
            ),
        ),
        seed(
            target,
            "non-minimal-length",
            frame_input::encode(16, &[1], &[0x83, 0x00, 1, 2, 3]),
        ),
        seed(
            target,
            "empty-bodies-zero-cap",
            frame_input::encode(0, &[1], &[0x00, 0x00, 0x01]),
        ),
    ]
}

/// golden.rs `unknown_fields_and_explicit_defaults_do_not_change_the_key`: a cohort with
/// its fields out of order, every default written out, unknown fields 15 and 16 in the
/// cohort and 3 in the Join.
fn noisy_join_body() -> Vec<u8> {
    let mut cohort = vec![0x10, 0x05, 0x1a, 0x00, 0x20, 0x00, 0x78, 0x01, 0x0a, 0x20];
    cohort.extend_from_slice(&TOPIC);
    cohort.extend_from_slice(&[0x28, 0x00, 0x82, 0x01, 0x02, 0xff, 0xff, 0x30, 0x00]);
    let mut body = vec![0x0a, u8::try_from(cohort.len()).expect("a short cohort")];
    body.extend_from_slice(&cohort);
    body.extend_from_slice(&[0x1a, 0x02, 0xff, 0xff, 0x12, 0x14]);
    body.extend_from_slice(&ADDR);
    body
}

fn join() -> Vec<Seed> {
    let target = "join";
    let implicit = Spec {
        topic: TOPIC,
        binding: Binding::Owner,
        admin: None,
        all: false,
        history: true,
        closed: false,
    };
    let closed = Spec {
        binding: Binding::SocId,
        admin: Some(ADMIN),
        closed: true,
        ..implicit
    };
    let all_anchor = Join {
        cohort: Some(spec_pb(
            TopicBinding::Anchor,
            &ADMIN,
            PublisherRegime::All as i32,
            false,
        )),
        addr: Bytes::copy_from_slice(&ADDR),
    };
    let no_addr = Join {
        addr: Bytes::new(),
        ..join_explicit_feed_topic()
    };
    vec![
        seed(
            target,
            "explicit-feed-topic",
            join_explicit_feed_topic().encode_to_vec(),
        ),
        seed(
            target,
            "all-mnemonic-history",
            join_all_mnemonic_history().encode_to_vec(),
        ),
        seed(
            target,
            "implicit-owner-history",
            implicit.to_join(&ADDR).encode_to_vec(),
        ),
        seed(
            target,
            "explicit-soc-id-closed",
            closed.to_join(&ADDR).encode_to_vec(),
        ),
        seed(target, "unknown-fields-and-defaults", noisy_join_body()),
        seed(
            target,
            "reject-all-without-mnemonic",
            all_anchor.encode_to_vec(),
        ),
        seed(target, "reject-missing-addr", no_addr.encode_to_vec()),
    ]
}

fn broadcast() -> Vec<Seed> {
    let target = "broadcast";
    let bee_soc = Broadcast {
        soc: foo_chunk(),
        kind: Kind::Data as i32,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: 1,
    };
    let negative_kind = Broadcast {
        kind: -1,
        ..broadcast_small()
    };
    vec![
        seed(target, "small", broadcast_small().encode_to_vec()),
        seed(target, "implicit", broadcast_implicit().encode_to_vec()),
        seed(target, "largest", broadcast_largest().encode_to_vec()),
        seed(target, "unknown-kind", BROADCAST_UNKNOWN_KIND.to_vec()),
        seed(target, "negative-kind", negative_kind.encode_to_vec()),
        seed(target, "bee-foo-soc", bee_soc.encode_to_vec()),
    ]
}

fn bee_key() -> SigningKey {
    SigningKey::from_bytes(&BEE_OWNER_KEY).expect("bee's test key is a valid secret")
}

/// bee's soc_test.go chunk: id 0, span 3, "foo", signed by bee's test key (RFC 6979, so
/// these are exactly bee's published bytes; bee_vectors.rs checks that).
fn foo_chunk() -> Bytes {
    sign_soc(&bee_key(), &[0; 32], 3, b"foo")
}

/// The replicas owner's key `0x01 ‖ 0^31` (validator_test.go TestValidDispersedReplica).
fn replicas_key() -> SigningKey {
    let mut secret = [0u8; 32];
    secret[0] = 1;
    SigningKey::from_bytes(&secret).expect("a valid secret")
}

/// The first id (a counter in its last 8 bytes) whose SOC address under `owner` is at
/// proximity 16 or more to `topic`: about 65,536 keccaks.
fn id_near(topic: &[u8; 32], owner: &[u8; 20]) -> [u8; 32] {
    (0u64..)
        .map(|counter| {
            let mut id = [0u8; 32];
            id[24..].copy_from_slice(&counter.to_be_bytes());
            id
        })
        .find(|id| {
            keccak_reference::proximity(&keccak_reference::soc_address(id, owner), topic) >= PO_MIN
        })
        .expect("some counter reaches the proximity")
}

/// The first key (secrets 1, 2, ...) whose SOC address for `id` is at proximity 16 or more
/// to `id` itself, as SOC_ID needs: about 65,536 key derivations.
fn key_near(id: &[u8; 32]) -> SigningKey {
    (1u64..)
        .filter_map(|counter| {
            let mut secret = [0u8; 32];
            secret[24..].copy_from_slice(&counter.to_be_bytes());
            SigningKey::from_bytes(&secret).ok()
        })
        .find(|key| {
            keccak_reference::proximity(&keccak_reference::soc_address(id, &key.address()), id)
                >= PO_MIN
        })
        .expect("some key reaches the proximity")
}

/// A soc seed: the expectations say "this chunk, at its own address, signed by its owner".
fn soc_seed(
    name: &'static str,
    selector: u8,
    index: u64,
    topic: Option<[u8; 32]>,
    chunk: &[u8],
) -> Seed {
    let mut id = [0u8; 32];
    id.copy_from_slice(&chunk[..32]);
    let owner = bps_verify::recover_soc(chunk).map_or([0; 20], |recovered| recovered.owner);
    let address = topic.unwrap_or_else(|| keccak_reference::soc_address(&id, &owner));
    seed(
        "soc",
        name,
        soc_input::encode(selector, index, &owner, &address, chunk),
    )
}

fn soc() -> Vec<Seed> {
    let key = bee_key();
    let owner = key.address();
    let full_payload: Vec<u8> = (0..CHUNK_BYTES).map(|i| (i * 31 + 7) as u8).collect();
    let feed_topic = keccak_reference::keccak256(&[b"bps fuzz feed"]);
    let feed_index = 7;
    let feed_chunk = sign_soc(
        &key,
        &keccak_reference::feed_id(&feed_topic, feed_index),
        4096,
        &full_payload,
    );
    let owner_topic = keccak_reference::keccak256(&[&owner]);
    let owner_chunk = sign_soc(&key, &id_near(&owner_topic, &owner), 5, b"owner");
    let soc_id_topic = keccak_reference::keccak256(&[b"bps fuzz soc id"]);
    let soc_id_chunk = sign_soc(&key_near(&soc_id_topic), &soc_id_topic, 2, b"id");

    let replicas_cac = keccak_reference::cac_address(4096u64.to_le_bytes(), &full_payload);
    let mut replica_id = replicas_cac;
    replica_id[0] = 1;
    let replica = sign_soc(&replicas_key(), &replica_id, 4096, &full_payload);
    replica_id[2] = replica_id[2].wrapping_add(1);
    let bad_replica = sign_soc(&replicas_key(), &replica_id, 4096, &full_payload);

    let bee_chunk = foo_chunk();
    let foo_address = keccak_reference::soc_address(&[0; 32], &owner);
    vec![
        soc_seed("bee-foo-mnemonic", 5, 0, None, &bee_chunk),
        soc_seed("bee-foo-anchor", 1, 0, Some(foo_address), &bee_chunk),
        soc_seed(
            "feed-topic-full-payload",
            4,
            feed_index,
            Some(feed_topic),
            &feed_chunk,
        ),
        soc_seed("owner-binding", 3, 0, Some(owner_topic), &owner_chunk),
        soc_seed("soc-id-binding", 2, 0, Some(soc_id_topic), &soc_id_chunk),
        soc_seed("dispersed-replica", 0, 0, None, &replica),
        soc_seed("dispersed-replica-bad-id", 0, 0, None, &bad_replica),
        soc_seed("too-short", 0, 0, None, &[0; 104]),
        soc_seed("recovery-byte-a", 0, 0, None, &vec![b'a'; CHUNK_BYTES + 9]),
        soc_seed("too-long", 0, 0, None, &vec![b'a'; 4202]),
    ]
}

fn roster() -> Vec<Seed> {
    let target = "roster";
    let mut bad_entry = vec![0x0a, 0x14];
    bad_entry.extend_from_slice(&[1; 20]);
    bad_entry.extend_from_slice(&[0x0a, 0x13]);
    bad_entry.extend_from_slice(&[2; 19]);
    // An unknown varint field 2, then an unknown group 3 holding a varint field 1.
    let mut unknown_fields = vec![0x10, 0x01, 0x1b, 0x08, 0x01, 0x1c];
    unknown_fields.extend_from_slice(&encode_roster(&[ADMIN]));
    vec![
        seed(target, "two-entries", encode_roster(&[ADMIN, ADDR])),
        seed(target, "empty", encode_roster(&[])),
        seed(target, "nineteen-byte-entry", bad_entry),
        seed(target, "truncated", vec![0x0a, 0x14, 0x01, 0x02]),
        seed(target, "unknown-fields", unknown_fields),
    ]
}

fn keccak_bmt() -> Vec<Seed> {
    let target = "keccak_bmt";
    let pattern: Vec<u8> = (0..CHUNK_BYTES + 8 * 64)
        .map(|i| (i * 7 + 3) as u8)
        .collect();
    vec![
        seed(target, "bee-foo", bmt_input::encode(3, b"foo")),
        seed(
            target,
            "bee-greaterthanspan",
            bmt_input::encode(15, b"greaterthanspan"),
        ),
        // cac_test.go TestNewWithDataSpan: the same bytes read as span ‖ payload.
        seed(target, "bee-data-span", b"greaterthanspan".to_vec()),
        seed(target, "empty-payload", bmt_input::encode(0, &[])),
        seed(
            target,
            "one-segment-plus-one",
            bmt_input::encode(33, &pattern[..33]),
        ),
        seed(
            target,
            "one-pair-minus-one",
            bmt_input::encode(63, &pattern[..63]),
        ),
        seed(
            target,
            "one-pair-plus-one",
            bmt_input::encode(65, &pattern[..65]),
        ),
        seed(
            target,
            "half-chunk-plus-one",
            bmt_input::encode(2049, &pattern[..2049]),
        ),
        seed(
            target,
            "full-chunk",
            bmt_input::encode(4096, &pattern[..CHUNK_BYTES]),
        ),
        seed(
            target,
            "full-chunk-and-eight-messages",
            bmt_input::encode(4096, &pattern),
        ),
    ]
}

/// The `machine` target's seeds: its input is a challenge seed and two bytes per choice, and
/// no golden test pins a choice stream, so these are fixed pseudo-random streams (splitmix64
/// of the seed's number) of 4 to 256 choices, long enough to reach Joins, claims, frames,
/// verifications and closes from the start.
fn machine() -> Vec<Seed> {
    const NAMES: [&str; 8] = [
        "choices-28",
        "choices-60",
        "choices-92",
        "choices-124",
        "choices-156",
        "choices-188",
        "choices-220",
        "choices-252",
    ];
    NAMES
        .iter()
        .zip(0_u64..)
        .map(|(name, number)| {
            let bytes = 64 * (usize::try_from(number).expect("a small number") + 1);
            seed("machine", name, splitmix_bytes(number, bytes))
        })
        .collect()
}

/// `bytes` bytes of the splitmix64 stream started at `state`.
fn splitmix_bytes(mut state: u64, bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    while out.len() < bytes {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut mixed = state;
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^= mixed >> 31;
        out.extend_from_slice(&mixed.to_le_bytes());
    }
    out.truncate(bytes);
    out
}

/// The forwarding headers: the trusted ranges, then `F`orwarded and `X`-Forwarded-For lines
/// (the target's layout), one seed per shape the walk meets.
fn forwarded() -> Vec<Seed> {
    let target = "forwarded";
    vec![
        seed(target, "x-forwarded-for-two-lines", b"127.0.0.1,10.0.0.0/8\nX203.0.113.9, 198.51.100.2\nX10.1.2.3, 127.0.0.1".to_vec()),
        seed(target, "ports-and-ipv6", b"fd00::/8\nX[2001:db8::7]:51000, 198.51.100.2:4711, [fd00::1]:443, 2001:db8::9".to_vec()),
        seed(target, "unknown-and-obfuscated", b"127.0.0.1\nXunknown, _hidden:_port, 127.0.0.1".to_vec()),
        seed(target, "malformed-hop", b"127.0.0.1\nX198.51.100.2, not an address, 127.0.0.1".to_vec()),
        seed(target, "forwarded-elements", b"10.0.0.0/8,::ffff:192.0.2.0/120\nFfor=192.0.2.60;proto=http;by=203.0.113.43, for=\"[2001:db8:cafe::17]:4711\"\nFFor=\"10.0.0.5:443\";host=\"a,b;c\\\"d\"\nX198.51.100.2".to_vec()),
        seed(target, "forwarded-unclosed-quote", b"127.0.0.1\nFfor=\"192.0.2.1, for=unknown".to_vec()),
    ]
}
