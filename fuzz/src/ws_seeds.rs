//! The seeds of the WebSocket side's targets (`ws_decoder`, `http_head`, `query`,
//! `bridge_inbound`): the examples of RFC 6455 (sections 1.2 and 5.7) and of the `bps-ws`
//! unit tests, each in its target's layout, plus the boundary cases those tests pin.
//!
//! Owns: [`all`]. Never: writes files (`examples/seed_corpus.rs` does) or anything large.

use bps_ws::{Opcode, close_payload, encode_client_frame};

use crate::frame_input;
use crate::seeds::Seed;

/// The masking key of RFC 6455 section 5.7's masked examples.
const RFC_MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];
/// The message bound a bridge session decodes under: the whole SOC (4201 bytes).
const BRIDGE_MESSAGE_BYTES_MAX: u16 = 4201;
/// The `ws_decoder` role byte of a client-side decoder (unmasked frames).
const CLIENT: u8 = 1;
/// The `ws_decoder` role byte of the server's decoder (masked frames).
const SERVER: u8 = 0;

/// The opening handshake of RFC 6455 section 1.2, as the `bps-ws` tests use it.
const RFC_REQUEST: &[u8] = b"GET /chat HTTP/1.1\r\n\
    Host: server.example.com\r\n\
    Upgrade: websocket\r\n\
    Connection: Upgrade\r\n\
    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Origin: http://example.com\r\n\
    Sec-WebSocket-Protocol: chat, superchat\r\n\
    Sec-WebSocket-Version: 13\r\n\r\n";

/// Every WebSocket-side seed.
pub fn all() -> Vec<Seed> {
    [ws_decoder(), http_head(), query(), bridge_inbound()].concat()
}

fn seed(target: &'static str, name: &'static str, input: Vec<u8>) -> Seed {
    Seed {
        target,
        name,
        input,
    }
}

fn decoder_seed(name: &'static str, role: u8, cap: u16, cuts: &[u16], stream: &[u8]) -> Seed {
    let mut input = vec![role];
    input.extend(frame_input::encode(cap, cuts, stream));
    seed("ws_decoder", name, input)
}

fn masked(opcode: Opcode, fin: bool, payload: &[u8]) -> Vec<u8> {
    encode_client_frame(opcode, fin, payload, RFC_MASK)
}

fn ws_decoder() -> Vec<Seed> {
    let hello_masked = masked(Opcode::Text, true, b"Hello");
    let mut fragmented = masked(Opcode::Text, false, b"Hel");
    fragmented.extend(masked(Opcode::Ping, true, b"Hello"));
    fragmented.extend(masked(Opcode::Continuation, true, b"lo"));
    let mut closing = masked(Opcode::Binary, true, &[0xab; 256]);
    closing.extend(masked(
        Opcode::Close,
        true,
        &close_payload(1000, "going home"),
    ));
    let mut after_close = masked(Opcode::Close, true, &[]);
    after_close.push(0x81);
    let mut unmasked_fragments = vec![0x01, 0x03, b'H', b'e', b'l'];
    unmasked_fragments.extend([0x80, 0x02, b'l', b'o']);
    let mut unmasked_256 = vec![0x82, 0x7e, 0x01, 0x00];
    unmasked_256.extend([0x5a; 256]);
    let full_soc = masked(Opcode::Binary, true, &[0x11; 4201]);
    vec![
        decoder_seed("rfc-masked-hello", SERVER, 8192, &[1, 6], &hello_masked),
        decoder_seed(
            "rfc-unmasked-hello",
            CLIENT,
            8192,
            &[],
            &[0x81, 0x05, b'H', b'e', b'l', b'l', b'o'],
        ),
        decoder_seed(
            "rfc-unmasked-fragments",
            CLIENT,
            8192,
            &[4],
            &unmasked_fragments,
        ),
        decoder_seed(
            "rfc-unmasked-ping",
            CLIENT,
            8192,
            &[],
            &[0x89, 0x05, b'H', b'e', b'l', b'l', b'o'],
        ),
        decoder_seed(
            "rfc-masked-pong",
            SERVER,
            8192,
            &[],
            &masked(Opcode::Pong, true, b"Hello"),
        ),
        decoder_seed("rfc-unmasked-256", CLIENT, 8192, &[3], &unmasked_256),
        decoder_seed(
            "rfc-64-bit-length-header",
            CLIENT,
            u16::MAX,
            &[],
            &[0x82, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x00, 0x00],
        ),
        decoder_seed(
            "fragments-around-a-ping",
            SERVER,
            8192,
            &[2, 9, 20],
            &fragmented,
        ),
        decoder_seed("binary-then-close", SERVER, 8192, &[100], &closing),
        decoder_seed("bytes-after-close", SERVER, 8192, &[], &after_close),
        decoder_seed(
            "whole-soc-at-the-bridge-bound",
            SERVER,
            BRIDGE_MESSAGE_BYTES_MAX,
            &[4, 8, 4000],
            &full_soc,
        ),
        decoder_seed(
            "whole-soc-one-over-the-bound",
            SERVER,
            BRIDGE_MESSAGE_BYTES_MAX - 1,
            &[],
            &full_soc,
        ),
        decoder_seed(
            "non-minimal-16-bit-length",
            SERVER,
            8192,
            &[],
            &[0x82, 0xfe, 0x00, 0x05, 1, 2, 3, 4],
        ),
        decoder_seed(
            "64-bit-length-top-bit",
            SERVER,
            u16::MAX,
            &[],
            &[0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0],
        ),
        decoder_seed(
            "reserved-bits",
            SERVER,
            8192,
            &[],
            &[0xc1, 0x80, 0, 0, 0, 0],
        ),
        decoder_seed(
            "invalid-utf8-text",
            SERVER,
            8192,
            &[],
            &masked(Opcode::Text, true, b"caf\xe9"),
        ),
        decoder_seed(
            "close-code-1005",
            SERVER,
            8192,
            &[],
            &masked(Opcode::Close, true, &[0x03, 0xed]),
        ),
    ]
}

fn head_seed(
    name: &'static str,
    headers_max: u8,
    bytes_max: u16,
    cuts: &[u16],
    bytes: &[u8],
) -> Seed {
    let mut input = vec![headers_max];
    input.extend(frame_input::encode(bytes_max, cuts, bytes));
    seed("http_head", name, input)
}

fn http_head() -> Vec<Seed> {
    let mut with_body = RFC_REQUEST.to_vec();
    with_body.extend_from_slice(b"body");
    let long = format!("GET / HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "p".repeat(200));
    let many = format!("GET / HTTP/1.1\r\n{}\r\n", "X-A: 1\r\n".repeat(3));
    vec![
        head_seed("rfc-opening-handshake", 64, 8192, &[10, 100], RFC_REQUEST),
        head_seed("rfc-handshake-and-body", 64, 8192, &[], &with_body),
        head_seed(
            "query-and-repeats",
            64,
            8192,
            &[],
            b"GET /pubsub/caf%C3%A9?binding=mnemonic&x=a+b HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
        ),
        head_seed("over-the-byte-bound", 64, 100, &[99], long.as_bytes()),
        head_seed("over-the-header-bound", 2, 8192, &[], many.as_bytes()),
        head_seed(
            "http-1-0",
            64,
            8192,
            &[],
            b"GET / HTTP/1.0\r\nHost: h\r\n\r\n",
        ),
        head_seed(
            "tls-client-hello",
            64,
            8192,
            &[],
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        ),
        head_seed(
            "non-utf8-value",
            64,
            8192,
            &[],
            b"GET / HTTP/1.1\r\nX-Name: caf\xe9\r\n\r\n",
        ),
        head_seed(
            "service-post",
            64,
            8192,
            &[],
            b"POST /pubsub/news/service?binding=mnemonic&admin=0x1111111111111111111111111111111111111111 HTTP/1.1\r\nContent-Length: 4\r\nOrigin: https://app.example\r\n\r\nbody",
        ),
    ]
}

fn query() -> Vec<Seed> {
    let target = "query";
    vec![
        seed(target, "feed-topic-spec", b"0x1111111111111111111111111111111111111111111111111111111111111111\nbinding=feed_topic&admin=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa&addr=bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb&swarm-keep-alive=30".to_vec()),
        seed(target, "all-with-history-and-fields", b"caf%C3%A9\nbinding=MNEMONIC&publishers=all&history=1&admin=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nswarm-soc-fields: payload, identifier,signature,payload\nSwarm-Keep-Alive: 3600".to_vec()),
        seed(target, "query-test-pieces", b"news\nbinding=feed_topic&closed&&name=a+b%26c&=v&admin=".to_vec()),
        seed(target, "escapes-and-errors", b"a%zz\na=1&&b=%ff&c=%2".to_vec()),
        seed(target, "closed-without-addr", b"news\nbinding=owner&closed=true&admin=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\nbinding: soc_id".to_vec()),
        seed(target, "parameter-bound", format!("t\n{}&p=1", vec!["p=1"; 32].join("&")).into_bytes()),
    ]
}

fn bridge_inbound() -> Vec<Seed> {
    let target = "bridge_inbound";
    let challenge = [0xcc; 32];
    let topic = [0x11; 32];
    let admin = [0xaa; 20];
    let session = |mode: u8, message: &[u8]| {
        let mut input = vec![mode];
        input.extend_from_slice(&challenge);
        input.extend_from_slice(&topic);
        input.extend_from_slice(&admin);
        input.extend_from_slice(message);
        input
    };
    let signed = |payload_bytes: usize| {
        let mut signed = vec![0x55; 65];
        signed.extend_from_slice(&(payload_bytes as u64).to_le_bytes());
        signed.extend(std::iter::repeat_n(0x66, payload_bytes));
        signed
    };
    let with_prefix = |prefix: &[u8], payload_bytes: usize| {
        let mut message = prefix.to_vec();
        message.extend(signed(payload_bytes));
        message
    };
    let roster_prefix = [&[3u8][..], &7u64.to_be_bytes()].concat();
    let post = |body: &[u8]| {
        let mut input = vec![0x80];
        input.extend_from_slice(&challenge);
        input.extend_from_slice(
            format!(
                "POST /pubsub/news/service?binding=mnemonic&admin=0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        );
        input.extend_from_slice(body);
        input
    };
    vec![
        // Mode 0x08: MNEMONIC with an admin (explicit); 0x18 adds ALL.
        seed(
            target,
            "explicit-data",
            session(
                0x08,
                &with_prefix(&[&[1u8][..], &0u64.to_be_bytes()].concat(), 3),
            ),
        ),
        seed(
            target,
            "all-roster",
            session(0x18, &with_prefix(&roster_prefix, 40)),
        ),
        seed(
            target,
            "unknown-kind",
            session(
                0x08,
                &with_prefix(&[&[9u8][..], &1u64.to_be_bytes()].concat(), 0),
            ),
        ),
        // Mode 0x04: FEED_TOPIC, implicit.
        seed(
            target,
            "implicit-feed-full-payload",
            session(0x04, &with_prefix(&5u64.to_be_bytes(), 4096)),
        ),
        seed(
            target,
            "implicit-feed-one-over",
            session(0x04, &with_prefix(&5u64.to_be_bytes(), 4097)),
        ),
        // Mode 0x01: ANCHOR, implicit: the message carries its id.
        seed(
            target,
            "implicit-own-id",
            session(0x01, &with_prefix(&[0x77; 32], 8)),
        ),
        seed(
            target,
            "one-byte-short",
            session(0x01, &with_prefix(&[0x77; 32], 0)[..104]),
        ),
        seed(
            target,
            "post-roster",
            post(&with_prefix(&roster_prefix, 20)),
        ),
        seed(
            target,
            "post-eos",
            post(&with_prefix(&[&[4u8][..], &9u64.to_be_bytes()].concat(), 0)),
        ),
    ]
}
