//! The generator's WebSocket carrier (`--transport ws`): the broker's native endpoint
//! `ws://TARGET/bps/v1`, where every binary message is exactly one BPS frame both ways
//! (docs/WEBSOCKET.md).
//!
//! Owns: [`Transport`], the upgrade on a dialled socket ([`upgrade`], the client library's
//! handshake), the size of one delivery on the wire ([`message_bytes`]: the server's
//! unmasked header in front of the frame, so counting streams count whole messages exactly),
//! the publishers' masked messages ([`Masker`], a fresh key per message drawn from a cheap
//! generator seeded at random, masked while the frame is copied into the write buffer
//! anyway), and the reading sample's view of server frames ([`peek_server_frame`]).
//!
//! Never: a fragmented or compressed message (the broker sends each delivery as one frame
//! and negotiates nothing; a fragment is an error here, not something reassembled), or a
//! copy of a received frame: the reading sample compares each BPS frame in place.

use std::net::TcpStream;
use std::time::Duration;

use bps_client::websocket::{NATIVE_PATH, WsError, WsUrl, upgrade as client_upgrade};
use bps_ws::Head;
use bps_ws::codec::{Opcode, apply_mask};
use bytes::BytesMut;
use serde::Serialize;

/// Which carrier the BPS streams use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// Bare frames on TCP (docs/PROTOCOL.md §2).
    #[default]
    Tcp,
    /// One frame per binary message on the native WebSocket endpoint.
    Ws,
    /// Bare frames on `/swarm/pubsub/1.0.0/pubsub` streams of Swarm light nodes
    /// ([`crate::load::p2p`]).
    P2p,
}

impl Transport {
    /// The report's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Ws => "ws",
            Self::P2p => "p2p",
        }
    }
}

/// Mask bit of a client frame's second byte (RFC 6455 section 5.2).
const MASK_BIT: u8 = 0x80;

/// Bytes of a masking key.
const MASK_KEY_BYTES: usize = 4;

/// FIN bit of a frame's first byte.
const FIN_BIT: u8 = 0x80;

/// RSV1-3 of a frame's first byte (nothing is negotiated, so always 0 from the broker).
const RSV_BITS: u8 = 0x70;

/// Upgrades a connected socket to the native endpoint at `target` (`HOST:PORT`) within
/// `timeout`; returns the bytes that followed the `101`.
pub fn upgrade(
    stream: &mut TcpStream,
    target: &str,
    timeout: Duration,
) -> Result<BytesMut, WsError> {
    let url = WsUrl {
        authority: target.to_owned(),
        path: NATIVE_PATH.to_owned(),
    };
    client_upgrade(stream, &url, timeout)
}

/// Wire bytes of one server message carrying a `frame_bytes`-byte BPS frame.
pub fn message_bytes(frame_bytes: usize) -> usize {
    Head::new(Opcode::Binary, frame_bytes).as_bytes().len() + frame_bytes
}

/// Masking keys for one publisher stream: splitmix64 over a random seed, a few
/// nanoseconds a key (a key must be unpredictable to the page's script in a browser; here it
/// only has to be a real, varying mask the broker removes).
#[derive(Debug, Clone)]
pub struct Masker {
    seed: u64,
}

impl Masker {
    /// A masker with a random seed.
    pub fn new() -> Self {
        Self {
            seed: rand::random(),
        }
    }

    /// The key of message `sequence`.
    fn key(&self, sequence: u64) -> [u8; MASK_KEY_BYTES] {
        let mut mixed = self.seed ^ sequence.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        mixed = (mixed ^ (mixed >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        mixed ^= mixed >> 31;
        let bytes = mixed.to_le_bytes();
        [bytes[0], bytes[1], bytes[2], bytes[3]]
    }

    /// Appends `frame` to `out` as one masked binary message, keyed by `sequence`.
    pub fn append(&self, sequence: u64, frame: &[u8], out: &mut Vec<u8>) {
        let key = self.key(sequence);
        let head = Head::new(Opcode::Binary, frame.len());
        let start = out.len();
        out.extend_from_slice(head.as_bytes());
        out[start + 1] |= MASK_BIT;
        out.extend_from_slice(&key);
        let payload = out.len();
        out.extend_from_slice(frame);
        apply_mask(&mut out[payload..], key);
    }
}

impl Default for Masker {
    fn default() -> Self {
        Self::new()
    }
}

/// One whole server frame at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFrame {
    /// Its opcode.
    pub opcode: Opcode,
    /// Header bytes (2, 4 or 10).
    pub header_bytes: usize,
    /// Payload bytes.
    pub payload_bytes: usize,
}

impl ServerFrame {
    /// Header and payload.
    pub fn total_bytes(&self) -> usize {
        self.header_bytes + self.payload_bytes
    }
}

/// The server frame whose header starts `available`, once the header is complete (the
/// payload may still be arriving: compare [`ServerFrame::total_bytes`] with what is there).
/// A frame the broker never sends (masked, fragmented, reserved bits or opcodes) is an error.
pub fn peek_server_frame(available: &[u8]) -> Result<Option<ServerFrame>, String> {
    let [first, second, ..] = *available else {
        return Ok(None);
    };
    if first & FIN_BIT == 0 || first & RSV_BITS != 0 {
        return Err(format!(
            "a fragmented or extended server frame (first byte {first:#04x})"
        ));
    }
    let opcode = Opcode::from_wire(first & 0x0f)
        .filter(|opcode| *opcode != Opcode::Continuation)
        .ok_or_else(|| format!("server frame with opcode {:#x}", first & 0x0f))?;
    if second & MASK_BIT != 0 {
        return Err("a masked server frame".to_owned());
    }
    let (header_bytes, payload_bytes) = match second & 0x7f {
        126 => match available.get(2..4) {
            Some(length) => (4, usize::from(u16::from_be_bytes([length[0], length[1]]))),
            None => return Ok(None),
        },
        127 => match available.get(2..10) {
            Some(length) => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(length);
                let length = usize::try_from(u64::from_be_bytes(bytes))
                    .map_err(|_| "a server frame longer than memory".to_owned())?;
                (10, length)
            }
            None => return Ok(None),
        },
        short => (2, usize::from(short)),
    };
    Ok(Some(ServerFrame {
        opcode,
        header_bytes,
        payload_bytes,
    }))
}

/// A pong answering a ping with `payload`, masked (the reading sample answers the broker's
/// pings, docs/WEBSOCKET.md: an idle session is closed).
pub fn pong(payload: &[u8]) -> Vec<u8> {
    bps_ws::encode_client_frame(Opcode::Pong, true, payload, rand::random())
}

#[cfg(test)]
mod tests {
    use bps_ws::codec::{Decoder, Event};
    use bps_ws::encode_server_frame;
    use bytes::Bytes;

    use super::*;

    #[test]
    fn masked_messages_decode_to_the_frame_under_varying_keys() {
        let masker = Masker::new();
        let frame: Vec<u8> = (0..4300u32).map(|byte| byte as u8).collect();
        let mut out = b"before".to_vec();
        masker.append(0, &frame, &mut out);
        masker.append(1, &frame, &mut out);
        assert_eq!(&out[..6], b"before", "appended, not overwritten");
        assert_ne!(masker.key(0), masker.key(1));
        let mut buf = BytesMut::from(&out[6..]);
        let mut server = Decoder::new(1 << 16);
        for _ in 0..2 {
            assert_eq!(
                server.decode(&mut buf).expect("valid client frame"),
                Some(Event::Message {
                    text: false,
                    payload: Bytes::from(frame.clone())
                })
            );
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn server_frames_are_measured_as_the_broker_writes_them() {
        for frame_bytes in [10, 125, 126, 4300, 70_000] {
            let message = encode_server_frame(Opcode::Binary, &vec![1u8; frame_bytes]);
            assert_eq!(message_bytes(frame_bytes), message.len(), "{frame_bytes}");
            let peeked = peek_server_frame(&message)
                .expect("valid")
                .expect("complete header");
            assert_eq!(peeked.opcode, Opcode::Binary);
            assert_eq!(peeked.total_bytes(), message.len());
            assert_eq!(peek_server_frame(&message[..1]).expect("partial"), None);
        }
        let ping = encode_server_frame(Opcode::Ping, b"x");
        assert_eq!(
            peek_server_frame(&ping)
                .expect("ping")
                .map(|frame| frame.opcode),
            Some(Opcode::Ping)
        );
        let mut fragment = encode_server_frame(Opcode::Binary, b"part");
        fragment[0] &= !FIN_BIT;
        assert!(peek_server_frame(&fragment).is_err());
        let masked = bps_ws::encode_client_frame(Opcode::Binary, true, b"m", [1, 2, 3, 4]);
        assert!(peek_server_frame(&masked).is_err());
    }
}
