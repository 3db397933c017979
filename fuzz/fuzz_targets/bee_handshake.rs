//! Fuzz target `bee_handshake`: `bps_bee::Handshake` reading what a peer sends on
//! `/swarm/handshake/15.0.0/handshake`, as the dialer (a `SynAck`) or the responder (a `Syn`,
//! then an `Ack`), with our node and the clock fixed (`bps_fuzz::bee_seeds`).
//!
//! Input: `role (1 byte: bit 0 set, we dial) ‖ cut count (1) ‖ cuts (u16 LE each) ‖ stream`;
//! a cut is reduced modulo `stream.len() + 1`, and the stream is fed as reads ending there.
//!
//! Asserts, besides never panicking:
//! - fed whole and fed in reads, the handshake ends the same: the same bytes sent and the
//!   same peer, or the same error, or still waiting;
//! - a peer accepted has a record that holds: its overlay is keccak256(eth address ‖
//!   le64(network id) ‖ nonce) (`bps_fuzz::bee_reference`), 1 to 20 underlays, a timestamp in (0, now + 60]; as dialer,
//!   every address it observed of us ends in our peer id;
//! - everything we send decodes as the message our role sends, with our record, which
//!   `parse_address` accepts and which names our overlay.

#![no_main]

use bps_bee::pb::{Ack, SynAck};
use bps_bee::{
    CLOCK_SKEW_MAX_SECS, Handshake, HandshakeError, Peer, Step, UNDERLAYS_PER_PEER_MAX,
    final_peer_id, parse_address, read_message,
};
use bps_fuzz::bee_reference;
use bps_fuzz::bee_seeds::{NETWORK_ID, NOW, ROLE_DIALER, peer_id, us};
use bps_fuzz::reader::Reader;
use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

/// How a run ended: what we sent, and the peer, the error, or `None` (still waiting).
type Outcome = (Vec<Bytes>, Option<Result<Peer, HandshakeError>>);

fn run(dialer: bool, reads: &[&[u8]]) -> Outcome {
    let (mut handshake, mut sent) = if dialer {
        let (handshake, syn) = Handshake::dial(us(), peer_id(1), &[]);
        (handshake, vec![syn])
    } else {
        (Handshake::respond(us(), peer_id(1), &[]), Vec::new())
    };
    let mut buf = BytesMut::new();
    for read in reads {
        buf.extend_from_slice(read);
        loop {
            match handshake.feed(&mut buf, NOW) {
                Ok(Step::NeedMore) => break,
                Ok(Step::Send(bytes)) => sent.push(bytes),
                Ok(Step::Done(done)) => {
                    sent.extend(done.send);
                    return (sent, Some(Ok(done.peer)));
                }
                Err(error) => return (sent, Some(Err(error))),
            }
        }
    }
    (sent, None)
}

fn check_peer(peer: &Peer, dialer: bool) {
    let record = &peer.address;
    assert_eq!(
        record.overlay,
        bee_reference::overlay(&record.eth_address, NETWORK_ID, &record.nonce)
    );
    assert!((1..=UNDERLAYS_PER_PEER_MAX).contains(&record.underlays.len()));
    assert!(record.timestamp > 0 && record.timestamp <= NOW + CLOCK_SKEW_MAX_SECS);
    if dialer {
        for address in &peer.observed {
            assert_eq!(final_peer_id(address), Some(peer_id(0)), "{address}");
        }
    }
}

fn check_ours(ack: Option<Ack>) {
    let record = ack
        .and_then(|ack| ack.address)
        .expect("our Ack has our record");
    let parsed = parse_address(&record, NETWORK_ID).expect("our record is valid");
    assert_eq!(parsed.overlay, us().identity().overlay());
}

/// Every message we sent, decoded as our role sends them: `Syn` then `Ack` when dialing,
/// `SynAck` when responding.
fn check_sent(sent: &[Bytes], dialer: bool) {
    for (index, bytes) in sent.iter().enumerate() {
        let mut buf = BytesMut::from(&bytes[..]);
        if dialer && index > 0 {
            let ack: Option<Ack> = read_message(&mut buf, "Ack").expect("our Ack decodes");
            check_ours(ack);
        } else if !dialer {
            let syn_ack: Option<SynAck> =
                read_message(&mut buf, "SynAck").expect("our SynAck decodes");
            check_ours(syn_ack.and_then(|syn_ack| syn_ack.ack));
        }
    }
}

fuzz_target!(|input: &[u8]| {
    let mut reader = Reader::new(input);
    let dialer = reader.byte() & ROLE_DIALER != 0;
    let cut_count = reader.byte();
    let raw_cuts: Vec<u16> = (0..cut_count).map(|_| reader.u16_le()).collect();
    let stream = reader.rest();
    let mut cuts: Vec<usize> = raw_cuts
        .iter()
        .map(|&cut| usize::from(cut) % (stream.len() + 1))
        .collect();
    cuts.push(stream.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut start = 0;
    let reads: Vec<&[u8]> = cuts
        .iter()
        .map(|&end| {
            let read = &stream[start..end];
            start = end;
            read
        })
        .collect();
    let whole = run(dialer, &[stream]);
    assert_eq!(run(dialer, &reads), whole, "fed in reads, the same end");
    let (sent, end) = whole;
    if let Some(Ok(peer)) = &end {
        check_peer(peer, dialer);
    }
    check_sent(&sent, dialer);
});
