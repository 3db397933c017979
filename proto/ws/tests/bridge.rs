//! The bridge's formats against the rest of the system: requests of the five SWIP-60
//! configurations, parameter errors that name their parameter, inbound messages built as a
//! browser builds them from chunks `bps_verify` signs (the assembled frame must be byte for
//! byte what a native client sends), and deliveries rendered from verified chunks.

use bps_proto::{
    Binding, FRAME_BYTES_MAX_DEFAULT, Frame, Hash, Kind, Spec, decode_broadcast, encode_frame,
    encode_roster, feed_id, keccak256, soc_address,
};
use bps_verify::{SigningKey, cac_address, sign_broadcast, sign_implicit, validate_soc};
use bps_ws::bridge::{
    BridgeParams, ChunkFacts, EOS_TEXT, Field, Fields, INBOUND_BYTES_MAX, InboundError, Lookup,
    ParamError, RenderError, Rendered, challenge_text, parse_inbound, parse_spec, parse_topic,
    render_delivery, render_roster,
};
use bps_ws::http::RequestHead;
use bytes::Bytes;

const ADMIN_HEX: &str = "0x9f3bA5c0A1d4e5F60718293a4B5c6D7e8F901234";
const ADMIN: [u8; 20] = [
    0x9f, 0x3b, 0xa5, 0xc0, 0xa1, 0xd4, 0xe5, 0xf6, 0x07, 0x18, 0x29, 0x3a, 0x4b, 0x5c, 0x6d, 0x7e,
    0x8f, 0x90, 0x12, 0x34,
];
const SEAT_HEX: &str = "1111111111111111111111111111111111111111";
const SEAT: [u8; 20] = [0x11; 20];
const TOPIC: Hash = [0x42; 32];
const CHALLENGE: Hash = [0xc4; 32];

fn head(query: &str, headers: &[(&str, &str)]) -> RequestHead {
    RequestHead {
        method: "GET".to_owned(),
        path: "/pubsub/room".to_owned(),
        query: query.to_owned(),
        headers: headers
            .iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), (*value).to_owned()))
            .collect(),
    }
}

fn params_with(query: &str, headers: &[(&str, &str)]) -> Result<BridgeParams, ParamError> {
    let request = head(query, headers);
    let lookup = Lookup::new(&request).expect("decodable query");
    BridgeParams::parse(TOPIC, &lookup)
}

fn params(query: &str) -> Result<BridgeParams, ParamError> {
    params_with(query, &[])
}

fn spec(binding: Binding, admin: Option<[u8; 20]>, all: bool, closed: bool) -> Spec {
    Spec {
        topic: TOPIC,
        binding,
        admin,
        all,
        history: false,
        closed,
    }
}

#[test]
fn topics_are_64_hex_digits_or_hashed_names() {
    let hex_topic = "ab".repeat(32);
    for segment in [
        hex_topic.clone(),
        format!("0x{hex_topic}"),
        hex_topic.to_uppercase(),
        format!("0X{}", hex_topic.to_uppercase()),
    ] {
        assert_eq!(parse_topic(&segment), Ok([0xab; 32]), "{segment}");
    }
    // 63 or 65 digits are names, not topics.
    let short = &hex_topic[..63];
    assert_eq!(parse_topic(short), Ok(keccak256(short.as_bytes())));
    let long = format!("{hex_topic}a");
    assert_eq!(parse_topic(&long), Ok(keccak256(long.as_bytes())));
    assert_eq!(parse_topic("jam-room"), Ok(keccak256(b"jam-room")));
    assert_eq!(
        parse_topic("caf%C3%A9%20bar"),
        Ok(keccak256("café bar".as_bytes()))
    );
    assert_eq!(
        parse_topic("a+b"),
        Ok(keccak256(b"a+b")),
        "+ is literal in a path"
    );
    for bad in ["", "%zz", "%ff"] {
        let error = parse_topic(bad).expect_err("refused");
        assert_eq!(error.parameter, "topic", "{bad:?}");
    }
}

#[test]
fn the_five_configurations_parse_from_realistic_queries() {
    // jam: explicit and closed, every seat joins with its addr.
    let jam = params(&format!(
        "binding=mnemonic&admin={ADMIN_HEX}&closed=true&addr={SEAT_HEX}&peer=ignored"
    ))
    .expect("jam");
    assert_eq!(jam.spec, spec(Binding::Mnemonic, Some(ADMIN), false, true));
    assert_eq!(jam.addr, Some(SEAT));

    // spectator-jam: explicit, open, a viewer without addr.
    let viewer = params(&format!("binding=mnemonic&admin={ADMIN_HEX}")).expect("viewer");
    assert_eq!(
        viewer.spec,
        spec(Binding::Mnemonic, Some(ADMIN), false, false)
    );
    assert_eq!(viewer.addr, None);

    // live-stream: a single admin on a feed topic, the broadcaster joins as the admin.
    let broadcaster = params(&format!(
        "binding=feed_topic&admin={ADMIN_HEX}&addr={ADMIN_HEX}&swarm-soc-fields=payload,span"
    ))
    .expect("live-stream");
    assert_eq!(
        broadcaster.spec,
        spec(Binding::FeedTopic, Some(ADMIN), false, false)
    );
    assert_eq!(broadcaster.addr, Some(ADMIN));
    assert_eq!(
        broadcaster.fields,
        Fields::new(&[Field::Payload, Field::Span])
    );

    // group-chat: ALL on a mnemonic, every member publishes as itself.
    let member = params(&format!(
        "binding=MNEMONIC&admin={ADMIN_HEX}&publishers=ALL&addr=0x{SEAT_HEX}"
    ))
    .expect("group-chat");
    assert_eq!(
        member.spec,
        spec(Binding::Mnemonic, Some(ADMIN), true, false)
    );
    assert_eq!(member.addr, Some(SEAT));

    // implicit: no admin, a graffiti feed.
    let graffiti =
        params(&format!("binding=feed_topic&addr={SEAT_HEX}&history=0")).expect("implicit");
    assert_eq!(graffiti.spec, spec(Binding::FeedTopic, None, false, false));
    assert_eq!(
        graffiti.spec.key(),
        spec(Binding::FeedTopic, None, false, false).key()
    );
    for session in [jam, viewer, graffiti] {
        assert_eq!(session.fields, Fields::default());
        assert_eq!(session.keep_alive_s, 60);
    }
}

#[test]
fn every_parameter_error_names_its_parameter() {
    let cases = [
        (String::new(), "binding"),
        ("binding=foo".to_owned(), "binding"),
        ("binding=".to_owned(), "binding"),
        ("binding=mnemonic&admin=0x1234".to_owned(), "admin"),
        ("binding=mnemonic&admin=".to_owned(), "admin"),
        (
            format!("binding=mnemonic&admin={}", "zz".repeat(20)),
            "admin",
        ),
        (
            format!("binding=mnemonic&admin={ADMIN_HEX}&publishers=some"),
            "publishers",
        ),
        ("binding=mnemonic&publishers=all".to_owned(), "publishers"),
        (
            format!("binding=anchor&admin={ADMIN_HEX}&publishers=all"),
            "publishers",
        ),
        (
            format!("binding=mnemonic&admin={ADMIN_HEX}&closed=yes"),
            "closed",
        ),
        (
            format!("binding=mnemonic&admin={ADMIN_HEX}&publishers=all&closed=1&addr={SEAT_HEX}"),
            "closed",
        ),
        (
            format!("binding=mnemonic&closed=true&addr={SEAT_HEX}"),
            "closed",
        ),
        ("binding=mnemonic&history=2".to_owned(), "history"),
        ("binding=mnemonic&addr=11".to_owned(), "addr"),
        (
            format!("binding=mnemonic&admin={ADMIN_HEX}&closed=true"),
            "addr",
        ),
        (
            "binding=mnemonic&swarm-soc-fields=payload,owner".to_owned(),
            "swarm-soc-fields",
        ),
        (
            "binding=mnemonic&swarm-keep-alive=0".to_owned(),
            "swarm-keep-alive",
        ),
        (
            "binding=mnemonic&swarm-keep-alive=3601".to_owned(),
            "swarm-keep-alive",
        ),
        (
            "binding=mnemonic&swarm-keep-alive=soon".to_owned(),
            "swarm-keep-alive",
        ),
        (
            "binding=mnemonic&swarm-keep-alive=-5".to_owned(),
            "swarm-keep-alive",
        ),
    ];
    for (query, parameter) in cases {
        let error = params(&query).expect_err("refused");
        assert_eq!(error.parameter, parameter, "{query}: {error}");
        let line = error.to_string();
        assert!(
            line.starts_with(&format!("parameter \"{parameter}\": ")),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
    }
    assert_eq!(
        params("binding=foo").expect_err("unknown").to_string(),
        "parameter \"binding\": unknown binding \"foo\" (expected mnemonic, anchor, soc_id, \
         owner or feed_topic)"
    );
}

#[test]
fn headers_win_over_the_query_and_names_and_values_ignore_case() {
    let from_header = params_with(
        "binding=mnemonic&swarm-soc-fields=payload",
        &[
            ("Swarm-SOC-Fields", "signature, identifier"),
            ("swarm-keep-alive", "30"),
        ],
    )
    .expect("valid");
    assert_eq!(
        from_header.fields,
        Fields::new(&[Field::Signature, Field::Identifier])
    );
    assert_eq!(from_header.keep_alive_s, 30);

    let shouting = params(&format!(
        "BINDING=Feed_Topic&Admin={}&CLOSED=TRUE&Addr={SEAT_HEX}&History=True&SWARM-KEEP-ALIVE=3600",
        ADMIN_HEX.to_uppercase().replace("0X", "0x")
    ))
    .expect("valid");
    let mut expected = spec(Binding::FeedTopic, Some(ADMIN), false, true);
    expected.history = true;
    assert_eq!(shouting.spec, expected);
    assert_eq!(shouting.keep_alive_s, 3600);

    // Bee's storage switch means nothing here, a repeated parameter counts once.
    let repeated =
        params("binding=owner&binding=anchor&swarm-cache-wrapped-chunk=true").expect("valid");
    assert_eq!(repeated.spec.binding, Binding::Owner);
}

#[test]
fn the_service_endpoint_reads_the_spec_without_session_parameters() {
    // W5: a POST for a jam carries the spec but no addr; the closed check of W11 is the
    // session's, not the spec's.
    let request = head(
        &format!("binding=mnemonic&admin={ADMIN_HEX}&closed=true"),
        &[],
    );
    let lookup = Lookup::new(&request).expect("decodable");
    assert_eq!(
        parse_spec(TOPIC, &lookup),
        Ok(spec(Binding::Mnemonic, Some(ADMIN), false, true))
    );
}

fn key() -> SigningKey {
    SigningKey::from_bytes(&[0x5a; 32]).expect("a valid secret")
}

/// What a browser sends for a session-feed chunk: kind, index, then the SOC without its id.
fn session_message(kind: u8, index: u64, soc: &[u8]) -> Vec<u8> {
    [&[kind][..], &index.to_be_bytes(), &soc[32..]].concat()
}

#[test]
fn explicit_and_all_messages_assemble_the_native_clients_frames() {
    let explicit = spec(Binding::Mnemonic, Some(ADMIN), false, false);
    let all = spec(Binding::Mnemonic, Some(ADMIN), true, false);
    let roster = encode_roster(&[SEAT, [0x22; 20]]);
    let cases: [(Kind, u64, &[u8]); 5] = [
        (Kind::Auth, 0, b""),
        (Kind::Data, 7, b"hello, jam"),
        (Kind::Data, u64::MAX - 1, &[0xee; 4096]),
        (Kind::Roster, 3, &roster),
        (Kind::Eos, 0, b""),
    ];
    for cohort in [explicit, all] {
        for (kind, index, payload) in cases {
            let signed = sign_broadcast(&key(), kind, &TOPIC, &CHALLENGE, index, payload);
            let message = session_message(kind as u8, index, &signed.chunk);
            let inbound = parse_inbound(&message, &cohort).expect("well-formed");
            assert_eq!(inbound.kind(), kind as i32);
            assert_eq!(inbound.index(), index);
            assert_eq!(
                inbound.to_frame(&CHALLENGE),
                signed.frame,
                "{kind:?} {index}"
            );
        }
    }
}

#[test]
fn an_implicit_feed_message_assembles_a_graffiti_feed_frame() {
    let graffiti = spec(Binding::FeedTopic, None, false, false);
    for index in [0u64, 1, 1 << 40] {
        let signed = sign_implicit(&key(), &feed_id(TOPIC, index), Some(index), b"tag");
        let message = [&index.to_be_bytes()[..], &signed.chunk[32..]].concat();
        let inbound = parse_inbound(&message, &graffiti).expect("well-formed");
        assert_eq!(inbound.kind(), Kind::Data as i32);
        // The stream's challenge plays no part under implicit authorship.
        assert_eq!(inbound.to_frame(&CHALLENGE), signed.frame, "{index}");
        assert_eq!(inbound.to_frame(&[0; 32]), signed.frame);
    }
}

#[test]
fn other_implicit_messages_are_the_whole_soc() {
    for binding in [
        Binding::Mnemonic,
        Binding::Anchor,
        Binding::Owner,
        Binding::SocId,
    ] {
        let cohort = spec(binding, None, false, false);
        let id = keccak256(b"my own id");
        let signed = sign_implicit(&key(), &id, None, b"gsoc message");
        let inbound = parse_inbound(&signed.chunk, &cohort).expect("well-formed");
        assert_eq!(inbound.index(), 0);
        assert_eq!(inbound.to_frame(&CHALLENGE), signed.frame, "{binding:?}");
    }
}

#[test]
fn an_unknown_kind_is_assembled_for_the_core_to_count() {
    let explicit = spec(Binding::Mnemonic, Some(ADMIN), false, false);
    let signed = sign_broadcast(&key(), Kind::Data, &TOPIC, &CHALLENGE, 4, b"x");
    for unknown in [0u8, 5, 255] {
        let message = session_message(unknown, 4, &signed.chunk);
        let frame = parse_inbound(&message, &explicit)
            .expect("well-formed")
            .to_frame(&CHALLENGE);
        let body = Frame::parse_exact(frame, FRAME_BYTES_MAX_DEFAULT).expect("one frame");
        let broadcast = decode_broadcast(body.body()).expect("a Broadcast");
        assert_eq!(broadcast.kind, i32::from(unknown));
        assert_eq!(broadcast.index, 4);
        assert_eq!(broadcast.challenge.as_ref(), CHALLENGE);
        assert_eq!(&broadcast.soc[..32], [0; 32], "no id for an unknown kind");
        assert_eq!(&broadcast.soc[32..], &signed.chunk[32..]);
    }
}

#[test]
fn inbound_messages_too_short_or_too_large_are_refused() {
    let layouts = [
        (spec(Binding::Mnemonic, Some(ADMIN), false, false), 82),
        (spec(Binding::FeedTopic, None, false, false), 81),
        (spec(Binding::Anchor, None, false, false), 105),
    ];
    for (cohort, min) in layouts {
        for bytes in [0, 1, min - 1] {
            let error = parse_inbound(&vec![0u8; bytes], &cohort).expect_err("too short");
            assert!(
                matches!(error, InboundError::TooShort { bytes: found, min: wanted, .. }
                    if found == bytes && wanted == min),
                "{error}"
            );
            assert!(
                error.to_string().contains(&format!("the {min} bytes of")),
                "{error}"
            );
        }
        assert!(
            parse_inbound(&vec![0u8; min], &cohort).is_ok(),
            "empty payload"
        );
        assert!(parse_inbound(&vec![0u8; min + 4096], &cohort).is_ok());
        assert!(min + 4096 <= INBOUND_BYTES_MAX, "the bound covers {min}");
        assert_eq!(
            parse_inbound(&vec![0u8; min + 4097], &cohort),
            Err(InboundError::PayloadTooLarge {
                bytes: 4097,
                max: 4096
            })
        );
    }
    assert_eq!(INBOUND_BYTES_MAX, bps_verify::SOC_MAX_CHUNK_SIZE);
}

/// A signed DATA chunk's frame body and the facts verification establishes for it.
fn verified_data(payload: &[u8]) -> (Bytes, Bytes, ChunkFacts) {
    let signed = sign_broadcast(&key(), Kind::Data, &TOPIC, &CHALLENGE, 11, payload);
    let recovered = validate_soc(&signed.chunk).expect("a valid SOC");
    let facts = ChunkFacts {
        address: recovered.address,
        public_key: recovered.public_key,
        wrapped: recovered.cac_address,
    };
    let body = Frame::parse_exact(signed.frame, FRAME_BYTES_MAX_DEFAULT)
        .expect("one frame")
        .body();
    (signed.chunk, body, facts)
}

fn rendered_parts(fields: &str, body: &Bytes, facts: &ChunkFacts) -> Vec<Bytes> {
    match render_delivery(Fields::parse(fields).expect("known"), body, facts) {
        Ok(Rendered::Binary(parts)) => parts,
        other => panic!("{fields}: {other:?}"),
    }
}

fn rendered_bytes(fields: &str, body: &Bytes, facts: &ChunkFacts) -> Bytes {
    rendered_parts(fields, body, facts).concat().into()
}

#[test]
fn data_renders_each_field_from_the_soc_or_the_facts() {
    let payload = b"a verified payload";
    let (soc, body, facts) = verified_data(payload);
    // The facts agree with what the wire and bps_verify compute on their own.
    let id: Hash = soc[..32].try_into().expect("32 bytes");
    assert_eq!(facts.address, soc_address(id, key().address()));
    let span: [u8; 8] = soc[97..105].try_into().expect("8 bytes");
    assert_eq!(facts.wrapped, cac_address(span, payload));
    assert_eq!(
        facts.public_key,
        bps_verify::compressed_key(&key().public_key())
    );

    let cases: [(&str, &[u8]); 7] = [
        ("identifier", &soc[..32]),
        ("signature", &soc[32..97]),
        ("span", &(payload.len() as u64).to_le_bytes()),
        ("payload", payload),
        ("address", &facts.address),
        ("recoveredPubKey", &facts.public_key),
        ("wrappedAddress", &facts.wrapped),
    ];
    for (field, expected) in cases {
        assert_eq!(
            rendered_bytes(field, &body, &facts).as_ref(),
            expected,
            "{field}"
        );
    }
    let all_seven = rendered_bytes(
        "address,recoveredPubKey,identifier,signature,wrappedAddress,span,payload",
        &body,
        &facts,
    );
    let expected = [
        &facts.address[..],
        &facts.public_key,
        &soc[..32],
        &soc[32..97],
        &facts.wrapped,
        &soc[97..105],
        payload,
    ]
    .concat();
    assert_eq!(all_seven.as_ref(), expected);
    assert_eq!(
        rendered_bytes("payload,identifier", &body, &facts).as_ref(),
        [&payload[..], &soc[..32]].concat()
    );
    assert_eq!(
        rendered_bytes("identifier,payload", &body, &facts).as_ref(),
        [&soc[..32], &payload[..]].concat()
    );
}

#[test]
fn the_default_payload_is_a_slice_of_the_frame() {
    let (_, body, facts) = verified_data(&[9u8; 4096]);
    let parts = rendered_parts("", &body, &facts);
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].len(), 4096);
    assert!(within(&parts[0], &body), "not copied out of the frame");
    let (_, empty_body, facts) = verified_data(b"");
    assert!(rendered_bytes("payload", &empty_body, &facts).is_empty());
}

#[test]
fn fields_of_the_soc_are_slices_of_the_frame_and_adjacent_ones_one_part() {
    let (soc, body, facts) = verified_data(&[5u8; 1000]);
    // identifier, signature, span and payload are the SOC in order: one slice.
    let whole = rendered_parts("identifier,signature,span,payload", &body, &facts);
    assert_eq!(whole.len(), 1);
    assert_eq!(whole[0], soc);
    assert!(within(&whole[0], &body));
    // Facts between SOC fields: the facts next to each other are one small copy.
    let mixed = rendered_parts("identifier,address,recoveredPubKey,payload", &body, &facts);
    assert_eq!(mixed.len(), 3);
    assert!(within(&mixed[0], &body) && within(&mixed[2], &body));
    assert!(!within(&mixed[1], &body));
    assert_eq!(&mixed[1][..32], facts.address.as_slice());
    assert_eq!(&mixed[1][32..], facts.public_key.as_slice());
}

/// Whether `part` points into `frame`'s bytes (a slice, not a copy).
fn within(part: &Bytes, frame: &Bytes) -> bool {
    let frame = frame.as_ptr_range();
    let part = part.as_ptr_range();
    frame.start <= part.start && part.end <= frame.end
}

fn service_body(kind: Kind, index: u64, payload: &[u8]) -> Bytes {
    let signed = sign_broadcast(&key(), kind, &TOPIC, &CHALLENGE, index, payload);
    Frame::parse_exact(signed.frame, FRAME_BYTES_MAX_DEFAULT)
        .expect("one frame")
        .body()
}

#[test]
fn service_kinds_render_as_text_and_auth_as_nothing() {
    let (_, _, facts) = verified_data(b"");
    let fields = Fields::default();
    let roster = service_body(Kind::Roster, 12, &encode_roster(&[SEAT, ADMIN]));
    let expected = format!(
        "{{\"type\":\"roster\",\"index\":12,\"publishers\":[\"{SEAT_HEX}\",\"{}\"]}}",
        hex::encode(ADMIN)
    );
    assert_eq!(
        render_delivery(fields, &roster, &facts),
        Ok(Rendered::Text(expected.clone()))
    );
    assert_eq!(render_roster(&roster), Ok(expected.clone()));
    let json: serde_json::Value = serde_json::from_str(&expected).expect("valid JSON");
    assert_eq!(json["type"], "roster");
    assert_eq!(json["index"], 12);
    assert_eq!(
        json["publishers"][1],
        "9f3ba5c0a1d4e5f60718293a4b5c6d7e8f901234"
    );

    let nobody = service_body(Kind::Roster, 0, &encode_roster(&[]));
    assert_eq!(
        render_roster(&nobody),
        Ok(r#"{"type":"roster","index":0,"publishers":[]}"#.to_owned())
    );

    let eos = service_body(Kind::Eos, 0, b"");
    assert_eq!(
        render_delivery(fields, &eos, &facts),
        Ok(Rendered::Text(EOS_TEXT.to_owned()))
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(EOS_TEXT).expect("JSON")["type"],
        "eos"
    );
    let auth = service_body(Kind::Auth, 0, b"");
    assert_eq!(
        render_delivery(fields, &auth, &facts),
        Ok(Rendered::Nothing)
    );
    assert_eq!(
        render_roster(&auth),
        Err(RenderError::NotRoster {
            kind: Kind::Auth as i32
        })
    );
}

#[test]
fn frames_the_broker_never_delivers_are_errors_or_nothing() {
    let (soc, _, facts) = verified_data(b"x");
    let fields = Fields::default();
    let garbled = service_body(Kind::Roster, 1, &[0x0a, 0x14, 0x01]);
    assert!(matches!(
        render_delivery(fields, &garbled, &facts),
        Err(RenderError::Roster(_))
    ));
    assert!(matches!(
        render_roster(&garbled),
        Err(RenderError::Roster(_))
    ));

    let unknown = encode_frame(&bps_proto::Broadcast {
        soc: soc.clone(),
        kind: 9,
        challenge: Bytes::copy_from_slice(&CHALLENGE),
        index: 0,
    });
    let unknown = Frame::parse_exact(unknown, FRAME_BYTES_MAX_DEFAULT)
        .expect("one frame")
        .body();
    assert_eq!(
        render_delivery(fields, &unknown, &facts),
        Ok(Rendered::Nothing)
    );

    let short = encode_frame(&bps_proto::Broadcast {
        soc: soc.slice(..104),
        kind: Kind::Data as i32,
        challenge: Bytes::new(),
        index: 0,
    });
    let short = Frame::parse_exact(short, FRAME_BYTES_MAX_DEFAULT)
        .expect("one frame")
        .body();
    assert_eq!(
        render_delivery(fields, &short, &facts),
        Err(RenderError::ShortSoc { bytes: 104 })
    );
    let not_protobuf = Bytes::from_static(&[0x0a, 0xff]);
    assert!(matches!(
        render_delivery(fields, &not_protobuf, &facts),
        Err(RenderError::Malformed(_))
    ));
}

#[test]
fn the_challenge_text_is_w10s() {
    let text = challenge_text(&CHALLENGE);
    assert_eq!(
        text,
        format!(
            "{{\"type\":\"challenge\",\"challenge\":\"{}\"}}",
            "c4".repeat(32)
        )
    );
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(json["type"], "challenge");
}
