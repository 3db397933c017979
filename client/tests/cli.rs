//! The `bps` binary's contract (issue 2, item 4; issue 4, terminal client): subcommands,
//! JSON field names and exit codes, run as a user would run them.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};
use std::thread;

use bps_proto::{
    Ack, Binding, FRAME_BYTES_MAX_DEFAULT, Kind, Spec, Status, encode_frame, encode_roster,
    next_frame,
};
use bps_verify::{SigningKey, sign_broadcast};
use bytes::{Bytes, BytesMut};
use serde_json::Value;

/// bee's test key (bee-js docs and pkg/soc tests): its address is the owner of bee's SOC
/// vectors.
const BEE_KEY: &str = "634fb5a872396d9693e5c9f9d7233cfa93f395c093371017ff44aa9ae6564cdd";
const BEE_OWNER: &str = "8d3766440f0d7b949a5e32995d09619a7f86e632";
/// bee @ pkg/soc/soc_test.go (TestFromChunk): id 0, payload "foo", signed by BEE_OWNER.
const BEE_FOO_SOC: &str = concat!(
    "0000000000000000000000000000000000000000000000000000000000000000",
    "5acd384febc133b7b245e5ddc62d82d2cded9182d2716126cd8844509af65a05",
    "3deb418208027f548e3e88343af6f84a8772fb3cebc0a1833a0ea7ec0c134831",
    "1b",
    "0300000000000000",
    "666f6f"
);
/// bee @ pkg/soc/soc_test.go (TestCreateAddress).
const BEE_FOO_SOC_ADDRESS: &str =
    "9d453ebb73b2fedaaf44ceddcf7a0aa37f3e3d6453fea5841c31f0ea6d61dc85";
/// bee @ pkg/cac/cac_test.go (TestValid): BMT address of "foo".
const BEE_FOO_CAC: &str = "2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48";
const ZERO_ID: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn bps(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bps"))
        .args(args)
        .output()
        .expect("run bps")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_owned()
}

fn json(output: &Output) -> Value {
    serde_json::from_str(&stdout(output)).expect("one JSON object on stdout")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code")
}

/// Exit 2, nothing on stdout, exactly one `error: ARGUMENT: ...` line on stderr.
fn assert_bad_input(args: &[&str], argument: &str) {
    let output = bps(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(code(&output), 2, "{args:?}: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}");
    assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with(&format!("error: {argument}: ")),
        "{args:?}: {stderr}"
    );
}

#[test]
fn sign_reproduces_bees_foo_soc_and_inspect_round_trips() {
    let signed = bps(&[
        "soc",
        "sign",
        "--key",
        BEE_KEY,
        "--id",
        ZERO_ID,
        "--payload",
        "666f6f",
    ]);
    assert_eq!(code(&signed), 0);
    assert_eq!(stdout(&signed), BEE_FOO_SOC);

    let inspected = bps(&["soc", "inspect", &stdout(&signed)]);
    assert_eq!(code(&inspected), 0);
    let report = json(&inspected);
    assert_eq!(report["id"], ZERO_ID);
    assert_eq!(report["owner"], BEE_OWNER);
    assert_eq!(report["address"], BEE_FOO_SOC_ADDRESS);
    assert_eq!(report["wrapped_address"], BEE_FOO_CAC);
    assert_eq!(report["span"], 3);
    assert_eq!(report["payload_len"], 3);
    assert_eq!(report["valid"], true);
    assert!(report.get("error").is_none());

    let as_json = bps(&[
        "soc",
        "sign",
        "--key",
        &format!("0x{BEE_KEY}"),
        "--id",
        ZERO_ID,
        "--payload",
        "0x666F6F",
        "--json",
    ]);
    assert_eq!(code(&as_json), 0);
    let fields = json(&as_json);
    assert_eq!(fields["chunk"], BEE_FOO_SOC);
    assert_eq!(fields["owner"], BEE_OWNER);
    assert_eq!(fields["address"], BEE_FOO_SOC_ADDRESS);
    assert_eq!(fields["wrapped_address"], BEE_FOO_CAC);
    assert_eq!(fields["span"], 3);
    assert_eq!(fields["payload_len"], 3);
    assert_eq!(fields["id"], ZERO_ID);
}

#[test]
fn sign_takes_a_payload_file_and_a_span() {
    let path = std::env::temp_dir().join(format!("bps-cli-payload-{}", std::process::id()));
    std::fs::write(&path, b"foo").expect("write payload");
    let from_file = bps(&[
        "soc",
        "sign",
        "--key",
        BEE_KEY,
        "--id",
        ZERO_ID,
        "--payload-file",
        path.to_str().expect("utf-8 path"),
    ]);
    std::fs::remove_file(&path).expect("remove payload");
    assert_eq!(stdout(&from_file), BEE_FOO_SOC);

    let spanned = bps(&[
        "soc",
        "sign",
        "--key",
        BEE_KEY,
        "--id",
        ZERO_ID,
        "--payload",
        "666f6f",
        "--span",
        "4096",
        "--json",
    ]);
    let fields = json(&spanned);
    assert_eq!(fields["span"], 4096);
    let inspected = json(&bps(&[
        "soc",
        "inspect",
        fields["chunk"].as_str().expect("chunk"),
    ]));
    assert_eq!(inspected["span"], 4096);
    assert_eq!(inspected["payload_len"], 3);
    assert_eq!(inspected["owner"], BEE_OWNER);
    assert_ne!(inspected["wrapped_address"], BEE_FOO_CAC);
}

#[test]
fn inspect_with_address_exits_0_when_valid_and_1_when_not() {
    let valid = bps(&[
        "soc",
        "inspect",
        "--address",
        BEE_FOO_SOC_ADDRESS,
        BEE_FOO_SOC,
    ]);
    assert_eq!(code(&valid), 0);
    assert_eq!(json(&valid)["valid"], true);

    let elsewhere = format!("00{}", &BEE_FOO_SOC_ADDRESS[2..]);
    let invalid = bps(&["soc", "inspect", "--address", &elsewhere, BEE_FOO_SOC]);
    assert_eq!(code(&invalid), 1);
    let report = json(&invalid);
    assert_eq!(report["valid"], false);
    assert_eq!(report["owner"], BEE_OWNER, "the owner still recovers");
    assert!(
        report["error"]
            .as_str()
            .expect("error")
            .contains("not at the expected")
    );

    // A tampered payload recovers some other owner: invalid at bee's address.
    let tampered = format!("{}666f6e", &BEE_FOO_SOC[..BEE_FOO_SOC.len() - 6]);
    let moved = bps(&[
        "soc",
        "inspect",
        "--address",
        BEE_FOO_SOC_ADDRESS,
        &tampered,
    ]);
    assert_eq!(code(&moved), 1);
    assert_ne!(json(&moved)["owner"], BEE_OWNER);
}

#[test]
fn inspect_without_address_exits_1_when_no_signature_recovers() {
    // v = 0 is outside bee's 27..=34.
    let v_offset = 2 * (32 + 64);
    let broken = format!(
        "{}00{}",
        &BEE_FOO_SOC[..v_offset],
        &BEE_FOO_SOC[v_offset + 2..]
    );
    let output = bps(&["soc", "inspect", &broken]);
    assert_eq!(code(&output), 1);
    let report = json(&output);
    assert_eq!(report["valid"], false);
    assert_eq!(report["owner"], Value::Null);
    assert_eq!(report["address"], Value::Null);
    assert_eq!(report["wrapped_address"], BEE_FOO_CAC);
    assert!(report["error"].as_str().expect("error").contains("v = 0"));
}

#[test]
fn cac_address_matches_bees_vectors() {
    assert_eq!(stdout(&bps(&["cac", "address", "666f6f"])), BEE_FOO_CAC);
    // bee @ pkg/cac/cac_test.go (TestNewCAC, TestNewWithDataSpan): "greaterthanspan" with
    // its own length as span, and with its first 8 bytes read as the span.
    let data = hex::encode(b"greaterthanspan");
    assert_eq!(
        stdout(&bps(&["cac", "address", &data])),
        "27913f1bdb6e8e52cbd5a5fd4ab577c857287edf6969b41efe926b51de0f4f23"
    );
    let span = u64::from_le_bytes(*b"greatert").to_string();
    assert_eq!(
        stdout(&bps(&[
            "cac",
            "address",
            "--span",
            &span,
            &hex::encode(b"hanspan")
        ])),
        "95022e6af5c6d6a564ee55a67f8455a3e18c511b5697c932d9e44f07f2fb8c53"
    );
    let empty = bps(&["cac", "address", ""]);
    assert_eq!(code(&empty), 0);
    assert_eq!(stdout(&empty).len(), 64);
    let full = bps(&["cac", "address", &"ab".repeat(4096)]);
    assert_eq!(code(&full), 0);
}

#[test]
fn keys_print_their_address() {
    assert_eq!(
        stdout(&bps(&["key", "address", "--key", BEE_KEY])),
        BEE_OWNER
    );
    let fresh = json(&bps(&["key", "new"]));
    let key = fresh["key"].as_str().expect("key");
    assert_eq!(key.len(), 64);
    assert_eq!(
        stdout(&bps(&["key", "address", "--key", key])),
        fresh["address"].as_str().expect("address")
    );
}

#[test]
fn every_bad_input_exits_2_naming_the_argument() {
    let id31 = "00".repeat(31);
    let oversize = "00".repeat(4097);
    let chunk_short = "00".repeat(104);
    let chunk_long = "00".repeat(4202);
    let path = std::env::temp_dir().join(format!("bps-cli-oversize-{}", std::process::id()));
    std::fs::write(&path, vec![0u8; 4097]).expect("write payload");
    let oversize_file = path.to_str().expect("utf-8 path").to_owned();
    let sign = |extra: &[&str]| -> Vec<String> {
        ["soc", "sign"]
            .iter()
            .chain(extra)
            .map(|arg| (*arg).to_owned())
            .collect()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            sign(&["--key", BEE_KEY, "--id", &id31, "--payload", "00"]),
            "--id",
        ),
        (
            sign(&["--key", BEE_KEY, "--id", "abc", "--payload", "00"]),
            "--id",
        ),
        (
            sign(&["--key", BEE_KEY, "--id", "zz", "--payload", "00"]),
            "--id",
        ),
        (
            sign(&["--key", "1234", "--id", ZERO_ID, "--payload", "00"]),
            "--key",
        ),
        (
            sign(&["--key", ZERO_ID, "--id", ZERO_ID, "--payload", "00"]),
            "--key",
        ),
        (
            sign(&[
                "--key",
                &"ff".repeat(32),
                "--id",
                ZERO_ID,
                "--payload",
                "00",
            ]),
            "--key",
        ),
        (
            sign(&["--key", BEE_KEY, "--id", ZERO_ID, "--payload", "0"]),
            "--payload",
        ),
        (
            sign(&["--key", BEE_KEY, "--id", ZERO_ID, "--payload", &oversize]),
            "--payload",
        ),
        (
            sign(&[
                "--key",
                BEE_KEY,
                "--id",
                ZERO_ID,
                "--payload-file",
                "/nonexistent/bps",
            ]),
            "--payload-file",
        ),
        (
            sign(&[
                "--key",
                BEE_KEY,
                "--id",
                ZERO_ID,
                "--payload-file",
                &oversize_file,
            ]),
            "--payload-file",
        ),
    ];
    for (args, argument) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_bad_input(&args, argument);
    }
    std::fs::remove_file(&path).expect("remove payload");

    assert_bad_input(&["soc", "inspect", "abc"], "CHUNK_HEX");
    assert_bad_input(&["soc", "inspect", &chunk_short], "CHUNK_HEX");
    assert_bad_input(&["soc", "inspect", &chunk_long], "CHUNK_HEX");
    assert_bad_input(
        &["soc", "inspect", "--address", &id31, BEE_FOO_SOC],
        "--address",
    );
    assert_bad_input(&["cac", "address", "xyz0"], "PAYLOAD_HEX");
    assert_bad_input(&["cac", "address", &oversize], "PAYLOAD_HEX");
    assert_bad_input(&["frame", "decode", "0a0"], "HEX");
    assert_bad_input(&["frame", "decode", "0a05"], "HEX");
    assert_bad_input(&["frame", "decode", "00"], "HEX");
    assert_bad_input(&["key", "address", "--key", "00"], "--key");

    // The terminal client checks its input before connecting (nobody listens on port 9).
    let topic = "42".repeat(32);
    let admin = "11".repeat(20);
    let base = |command: &str| -> Vec<String> {
        [
            command,
            "--target",
            "127.0.0.1:9",
            "--topic",
            &topic,
            "--binding",
            "feed-topic",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect()
    };
    let with = |mut args: Vec<String>, extra: &[&str]| -> Vec<String> {
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        args
    };
    let client_cases: Vec<(Vec<String>, &str)> = vec![
        (with(base("sub"), &["--admin", "11"]), "--admin"),
        (
            [
                "sub",
                "--target",
                "127.0.0.1:9",
                "--topic",
                "42",
                "--binding",
                "mnemonic",
            ]
            .iter()
            .map(|arg| (*arg).to_owned())
            .collect(),
            "--topic",
        ),
        (with(base("sub"), &["--all"]), "spec"),
        (with(base("sub"), &["--addr", "1234"]), "--addr"),
        (
            with(
                base("pub"),
                &[
                    "--admin",
                    &admin,
                    "--key",
                    BEE_KEY,
                    "--message",
                    &"x".repeat(4097),
                ],
            ),
            "--message",
        ),
        (
            with(
                base("pub"),
                &[
                    "--admin",
                    &admin,
                    "--key",
                    BEE_KEY,
                    "--message",
                    "hi",
                    "--rate",
                    "0",
                ],
            ),
            "--rate",
        ),
        (
            with(
                base("pub"),
                &[
                    "--admin",
                    &admin,
                    "--key",
                    BEE_KEY,
                    "--message",
                    "hi",
                    "--id",
                    ZERO_ID,
                ],
            ),
            "--id",
        ),
        (
            with(base("pub"), &["--key", "12", "--message", "hi"]),
            "--key",
        ),
        (
            with(
                base("roster"),
                &["--admin", &admin, "--key", BEE_KEY, "--publisher", &admin],
            ),
            "--key",
        ),
        (
            with(
                base("roster"),
                &["--admin", BEE_OWNER, "--key", BEE_KEY, "--publisher", "12"],
            ),
            "--publisher",
        ),
        (with(base("eos"), &["--key", BEE_KEY]), "--admin"),
    ];
    for (args, argument) in &client_cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_bad_input(&args, argument);
    }
}

#[test]
fn pub_refuses_keys_that_do_not_fit_an_implicit_binding() {
    let topic = "42".repeat(32);
    for (binding, argument) in [("owner", "--key"), ("soc-id", "--key"), ("anchor", "--id")] {
        assert_bad_input(
            &[
                "pub",
                "--target",
                "127.0.0.1:9",
                "--topic",
                &topic,
                "--binding",
                binding,
                "--key",
                BEE_KEY,
                "--message",
                "hi",
            ],
            argument,
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["soc", "sign", "--key", BEE_KEY][..],
        &[
            "soc",
            "sign",
            "--key",
            BEE_KEY,
            "--id",
            ZERO_ID,
            "--payload",
            "00",
            "--payload-file",
            "x",
        ],
        &["cac", "address", "--span", "nan", "00"],
        &["sub", "--target", "127.0.0.1:9"],
        &[
            "pub",
            "--target",
            "127.0.0.1:9",
            "--topic",
            ZERO_ID,
            "--binding",
            "mnemonic",
            "--key",
            BEE_KEY,
        ],
        &["frobnicate"],
        &[],
    ] {
        let output = bps(args);
        assert_eq!(code(&output), 2, "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}");
    }
    assert_eq!(code(&bps(&["--help"])), 0);
    assert_eq!(code(&bps(&["sub", "--help"])), 0);
}

#[test]
fn a_target_list_that_cannot_be_ranked_is_bad_input() {
    for list in ["127.0.0.1:9,127.0.0.1:9", "127.0.0.1:9,,127.0.0.1:10", " "] {
        let args = [
            "sub",
            "--target",
            list,
            "--topic",
            ZERO_ID,
            "--binding",
            "mnemonic",
        ];
        assert_bad_input(&args, "--target");
    }
}

fn spec() -> Spec {
    Spec {
        topic: [0x42; 32],
        binding: Binding::FeedTopic,
        admin: Some([0x11; 20]),
        all: false,
        history: false,
        closed: true,
    }
}

#[test]
fn frame_decode_reports_each_frame_type() {
    let join = encode_frame(&spec().to_join(&[0x22; 20]));
    let report = json(&bps(&["frame", "decode", &hex::encode(&join)]));
    assert_eq!(report["type"], "Join");
    assert_eq!(report["addr"], "22".repeat(20));
    assert_eq!(report["cohort"]["topic"], "42".repeat(32));
    assert_eq!(report["cohort"]["binding"], "FEED_TOPIC");
    assert_eq!(report["cohort"]["admin"], "11".repeat(20));
    assert_eq!(report["cohort"]["closed"], true);
    assert_eq!(report["valid"], true);
    assert_eq!(report["cohort_key"], spec().key().to_hex());

    let ack = encode_frame(&Ack {
        status: Status::Ok as i32,
        challenge: Bytes::from(vec![0x33; 32]),
    });
    let report = json(&bps(&[
        "frame",
        "decode",
        &format!("0x{}", hex::encode(&ack)),
    ]));
    assert_eq!(report["type"], "Ack");
    assert_eq!(report["status"], "OK");
    assert_eq!(report["challenge"], "33".repeat(32));
    let body = json(&bps(&[
        "frame",
        "decode",
        "--body",
        &hex::encode(&ack[1..]),
    ]));
    assert_eq!(body, report);

    let key = SigningKey::from_bytes(&[5; 32]).expect("key");
    let data = sign_broadcast(&key, Kind::Data, &[0x42; 32], &[0x33; 32], 9, b"hello");
    let report = json(&bps(&["frame", "decode", &hex::encode(&data.frame)]));
    assert_eq!(report["type"], "Broadcast");
    assert_eq!(report["kind"], "DATA");
    assert_eq!(report["index"], 9);
    assert_eq!(report["challenge"], "33".repeat(32));
    assert_eq!(report["soc"], hex::encode(&data.chunk));
    assert_eq!(report["chunk"]["owner"], hex::encode(key.address()));
    assert_eq!(report["chunk"]["payload_len"], 5);
    assert_eq!(report["chunk"]["valid"], true);

    let roster = sign_broadcast(
        &key,
        Kind::Roster,
        &[0x42; 32],
        &[0x33; 32],
        2,
        &encode_roster(&[[0x44; 20]]),
    );
    let report = json(&bps(&["frame", "decode", &hex::encode(&roster.frame)]));
    assert_eq!(report["kind"], "ROSTER");
    assert_eq!(report["roster"][0], "44".repeat(20));

    let eos = sign_broadcast(&key, Kind::Eos, &[0x42; 32], &[0x33; 32], 0, b"");
    let mut wire = BytesMut::from(&eos.frame[..]);
    let body = next_frame(&mut wire, FRAME_BYTES_MAX_DEFAULT)
        .expect("frame")
        .expect("complete");
    let report = json(&bps(&["frame", "decode", "--body", &hex::encode(&body)]));
    assert_eq!(report["kind"], "EOS");
    assert_eq!(report["chunk"]["span"], 0);
}

/// A peer that answers the first Join with `status` and returns the Join's bytes.
fn refusing_peer(status: Status) -> (String, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("addr").to_string();
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut join = vec![0u8; 512];
        let read = stream.read(&mut join).expect("read join");
        join.truncate(read);
        let ack = encode_frame(&Ack {
            status: status as i32,
            challenge: Bytes::new(),
        });
        stream.write_all(&ack).expect("ack");
        join
    });
    (target, handle)
}

#[test]
fn a_refused_join_exits_3() {
    let topic = "42".repeat(32);
    // A bare Ack says FULL alone: every bound is named with its setting (cli_refusal.rs
    // shows the one a real broker names over WebSocket).
    let full = "FULL: the broker is at one of its bounds";
    for (status, name) in [(Status::Full, full), (Status::Rejected, "REJECTED")] {
        let (target, peer) = refusing_peer(status);
        let output = bps(&[
            "sub",
            "--target",
            &target,
            "--topic",
            &topic,
            "--binding",
            "mnemonic",
        ]);
        assert_eq!(code(&output), 3);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: join refused: {name}")),
            "{stderr}"
        );
        let join = peer.join().expect("peer");
        let report = json(&bps(&["frame", "decode", &hex::encode(&join)]));
        assert_eq!(report["type"], "Join");
        assert_eq!(report["cohort"]["binding"], "MNEMONIC");
    }
    let (target, peer) = refusing_peer(Status::Full);
    let output = bps(&[
        "pub",
        "--target",
        &target,
        "--topic",
        &topic,
        "--binding",
        "mnemonic",
        "--key",
        BEE_KEY,
        "--message",
        "hi",
    ]);
    assert_eq!(code(&output), 3);
    let join = peer.join().expect("peer");
    let report = json(&bps(&["frame", "decode", &hex::encode(&join)]));
    assert_eq!(
        report["addr"], BEE_OWNER,
        "a publisher joins as its key's address"
    );
}

/// A broker stand-in: answers the first Join with OK, writes `frames`, then reads until the
/// client closes.
fn scripted_peer(frames: Vec<Bytes>) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let target = listener.local_addr().expect("addr").to_string();
    let handle = thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buf = BytesMut::new();
        while next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
            .expect("frame")
            .is_none()
        {
            let mut chunk = [0u8; 512];
            let read = stream.read(&mut chunk).expect("read join");
            assert!(read > 0, "the client closed before its Join");
            buf.extend_from_slice(&chunk[..read]);
        }
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![0x33; 32]),
        });
        stream.write_all(&ack).expect("ack");
        for frame in &frames {
            stream.write_all(frame).expect("frame");
        }
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
    });
    (target, handle)
}

fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn sub_json_prints_gaps_and_next_addresses() {
    let admin = SigningKey::from_bytes(&[5; 32]).expect("key");
    let challenge = [0x44; 32];
    let topic = [0x42; 32];
    let signed = |index: u64| sign_broadcast(&admin, Kind::Data, &topic, &challenge, index, b"hi");
    let eos = sign_broadcast(&admin, Kind::Eos, &topic, &challenge, 0, b"");
    let (target, peer) = scripted_peer(vec![
        signed(0).frame,
        signed(1).frame,
        signed(4).frame,
        eos.frame,
    ]);
    let admin_hex = hex::encode(admin.address());
    let output = bps(&[
        "sub",
        "--target",
        &target,
        "--topic",
        &hex::encode(topic),
        "--binding",
        "feed-topic",
        "--admin",
        &admin_hex,
        "--json",
        "--no-reconnect",
        "--timeout-ms",
        "20000",
    ]);
    assert_eq!(
        code(&output),
        0,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    peer.join().expect("peer");
    let printed = json_lines(&output);
    let kinds: Vec<&str> = printed
        .iter()
        .map(|line| line["kind"].as_str().expect("kind"))
        .collect();
    assert_eq!(kinds, ["joined", "data", "data", "gap", "data", "eos"]);
    assert_eq!(printed[3]["owner"], admin_hex);
    assert_eq!(printed[3]["expected"], 2);
    assert_eq!(printed[3]["got"], 4);
    for (line, index) in [(&printed[1], 1u64), (&printed[2], 2), (&printed[4], 5)] {
        // The chunk the admin would sign next on that stream, and its address by hand.
        let upcoming = signed(index).chunk;
        let mut preimage = upcoming[..32].to_vec();
        preimage.extend_from_slice(&admin.address());
        assert_eq!(line["next_index"], index);
        assert_eq!(
            line["next_address"],
            hex::encode(bps_proto::keccak256(&preimage))
        );
        assert_eq!(line["owner"], admin_hex);
    }
    assert_eq!(printed[4]["index"], 4);
}

#[test]
fn history_is_joined_by_sub_and_pub_and_its_help_says_it_is_identity() {
    let topic = "42".repeat(32);
    for (command, extra) in [
        ("sub", &["--no-reconnect"][..]),
        ("pub", &["--key", BEE_KEY, "--message", "hi"][..]),
    ] {
        let (target, peer) = refusing_peer(Status::Rejected);
        let mut args = vec![
            command,
            "--target",
            &target,
            "--topic",
            &topic,
            "--binding",
            "mnemonic",
            "--history",
        ];
        args.extend_from_slice(extra);
        let output = bps(&args);
        assert_eq!(code(&output), 3, "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("rejects --history"), "{stderr}");
        let join = peer.join().expect("peer");
        let report = json(&bps(&["frame", "decode", &hex::encode(&join)]));
        assert_eq!(report["cohort"]["history"], true, "{args:?}");
    }
    for command in ["sub", "pub"] {
        let help = bps(&[command, "--help"]);
        let text = String::from_utf8_lossy(&help.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            text.contains("identity (R1)") && text.contains("must all join with it"),
            "{command}: {text}"
        );
    }
}
