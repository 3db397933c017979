//! Fuzz target `ws_decoder`: `bps_ws::Decoder`, the RFC 6455 frame decoder a browser's bytes
//! reach first, on a stream read in one buffer and in pieces cut where the input says.
//!
//! Input: `role (1: bit 0 set reads as a client, else as the server) ‖ message bound (u16
//! LE, 0xffff = usize::MAX) ‖ cut count (1) ‖ cuts (u16 LE each) ‖ stream` (the last four as
//! `bps_fuzz::frame_input`).
//!
//! Asserts, against `bps_fuzz::ws_reference` (section 5 of the RFC restated, not the
//! decoder):
//! - the whole-buffer decode yields exactly the model's events, then its fault or its "need
//!   more", leaves exactly the bytes of the incomplete frame in the buffer and asks
//!   (`bytes_wanted`) for exactly what the model says that frame still lacks;
//! - fed as reads ending at the cuts, the same events and the same end;
//! - no message is longer than the bound and no control payload longer than 125 bytes;
//! - every event decoded, re-encoded as a browser sends it (`encode_client_frame`, masked,
//!   a message in two fragments with a ping between them) and as the server sends it
//!   (`encode_server_frame`, close payloads by `close_payload`), decodes to itself.

#![no_main]

use bps_fuzz::frame_input::FrameInput;
use bps_fuzz::ws_reference::{self, End};
use bps_ws::{
    CloseFrame, Decoder, Event, Opcode, ProtocolError, close_payload, encode_client_frame,
    encode_server_frame,
};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

/// Largest control payload (RFC 6455 section 5.5).
const CONTROL_BYTES_MAX: usize = 125;
/// The ping put between two fragments in the round trip.
const PING_BETWEEN: &[u8] = b"between";

fn new_decoder(client: bool, message_bytes_max: usize) -> Decoder {
    if client {
        Decoder::client(message_bytes_max)
    } else {
        Decoder::new(message_bytes_max)
    }
}

/// Decodes what `buf` holds until it needs more or fails; the fault, if any.
fn drain(
    decoder: &mut Decoder,
    buf: &mut BytesMut,
    events: &mut Vec<Event>,
) -> Option<ProtocolError> {
    loop {
        match decoder.decode(buf) {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return None,
            Err(fault) => return Some(fault),
        }
    }
}

fn check_bounds(events: &[Event], message_bytes_max: usize) {
    for event in events {
        match event {
            Event::Message { payload, .. } => assert!(payload.len() <= message_bytes_max),
            Event::Ping(payload) | Event::Pong(payload) => {
                assert!(payload.len() <= CONTROL_BYTES_MAX)
            }
            Event::Close(close) => {
                if let Some(close) = close {
                    assert!(2 + close.reason.len() <= CONTROL_BYTES_MAX)
                }
            }
        }
    }
}

/// The frame a server sends for `event`.
fn server_frame(event: &Event) -> Vec<u8> {
    match event {
        Event::Message { text, payload } => {
            let opcode = if *text { Opcode::Text } else { Opcode::Binary };
            encode_server_frame(opcode, payload)
        }
        Event::Ping(payload) => encode_server_frame(Opcode::Ping, payload),
        Event::Pong(payload) => encode_server_frame(Opcode::Pong, payload),
        Event::Close(None) => encode_server_frame(Opcode::Close, &[]),
        Event::Close(Some(CloseFrame { code, reason })) => {
            encode_server_frame(Opcode::Close, &close_payload(*code, reason))
        }
    }
}

/// The frames a browser sends for `event` (a message in two fragments cut at `cut`, with a
/// ping between them), and the events they decode to.
fn client_frames(event: &Event, mask: [u8; 4], cut: usize) -> (Vec<u8>, Vec<Event>) {
    let (opcode, payload) = match event {
        Event::Message { text, payload } => {
            let opcode = if *text { Opcode::Text } else { Opcode::Binary };
            let cut = cut % (payload.len() + 1);
            let mut frames = encode_client_frame(opcode, false, &payload[..cut], mask);
            frames.extend(encode_client_frame(Opcode::Ping, true, PING_BETWEEN, mask));
            frames.extend(encode_client_frame(
                Opcode::Continuation,
                true,
                &payload[cut..],
                mask,
            ));
            let ping = Event::Ping(PING_BETWEEN.to_vec().into());
            return (frames, vec![ping, event.clone()]);
        }
        Event::Ping(payload) => (Opcode::Ping, payload.to_vec()),
        Event::Pong(payload) => (Opcode::Pong, payload.to_vec()),
        Event::Close(None) => (Opcode::Close, Vec::new()),
        Event::Close(Some(CloseFrame { code, reason })) => {
            (Opcode::Close, close_payload(*code, reason))
        }
    };
    (
        encode_client_frame(opcode, true, &payload, mask),
        vec![event.clone()],
    )
}

fn check_round_trip(events: &[Event], message_bytes_max: usize, mask: [u8; 4], cut: usize) {
    for event in events {
        for client in [false, true] {
            let (frames, expected) = if client {
                (server_frame(event), vec![event.clone()])
            } else {
                client_frames(event, mask, cut)
            };
            let mut decoder = new_decoder(client, message_bytes_max);
            let mut buf = BytesMut::from(&frames[..]);
            let mut decoded = Vec::new();
            let fault = drain(&mut decoder, &mut buf, &mut decoded);
            assert_eq!(fault, None, "{event:?} re-encoded (client side: {client})");
            assert_eq!(decoded, expected, "client side: {client}");
            assert!(buf.is_empty());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&role, rest)) = data.split_first() else {
        return;
    };
    let client = role & 1 != 0;
    let input = FrameInput::parse(rest);
    let max = input.frame_bytes_max;
    let stream = input.stream;
    let model = ws_reference::decode(stream, !client, max);

    // One buffer.
    let mut decoder = new_decoder(client, max);
    let mut buf = BytesMut::from(stream);
    let mut events = Vec::new();
    let fault = drain(&mut decoder, &mut buf, &mut events);
    assert_eq!(events, model.events);
    match (&model.end, fault) {
        (End::Fault(expected), Some(fault)) => assert_eq!(fault, *expected),
        (End::NeedMore(wanted), None) => {
            assert_eq!(buf.len(), stream.len() - model.consumed);
            assert_eq!(decoder.bytes_wanted(&buf), *wanted);
        }
        (end, fault) => panic!("model ends {end:?}, decoder with {fault:?}"),
    }
    check_bounds(&events, max);

    // Reads ending at the cuts.
    let mut decoder = new_decoder(client, max);
    let mut buf = BytesMut::new();
    let mut piecewise = Vec::new();
    let mut fault = None;
    let mut start = 0;
    for end in input.cuts.iter().copied().chain([stream.len()]) {
        buf.extend_from_slice(&stream[start..end]);
        start = end;
        fault = drain(&mut decoder, &mut buf, &mut piecewise);
        if fault.is_some() {
            break;
        }
    }
    assert_eq!(piecewise, model.events);
    match (&model.end, fault) {
        (End::Fault(expected), Some(fault)) => assert_eq!(fault, *expected),
        (End::NeedMore(_), None) => assert_eq!(buf.len(), stream.len() - model.consumed),
        (end, fault) => panic!("piecewise: model ends {end:?}, decoder with {fault:?}"),
    }

    let mask = [
        role,
        stream.first().copied().unwrap_or(0),
        stream.last().copied().unwrap_or(0),
        0x5a,
    ];
    check_round_trip(&model.events, max, mask, usize::from(role >> 1));
});
