//! The client signing helper produces frames a receiver accepts: the delimited frame
//! decodes to the same `Broadcast`, the chunk id is the session-feed's (docs/PROTOCOL.md §1.1), and
//! the chunk validates at keccak256(id ‖ signer).

use bps_proto::{
    FRAME_BYTES_MAX_DEFAULT, Kind, decode_broadcast, next_frame, session_chunk_id, soc_address,
};
use bps_verify::{
    CHUNK_SIZE, Expect, PayloadTooLarge, SigningKey, SocRef, VerifyRequest, sign_broadcast,
    sign_implicit, try_sign_broadcast, try_sign_soc, verify,
};
use bytes::BytesMut;

#[test]
fn broadcast_frames_round_trip_for_every_kind() {
    let key = SigningKey::random();
    let topic = [0x11; 32];
    let challenge = [0x22; 32];
    for (kind, payload) in [
        (Kind::Data, b"hello".as_slice()),
        (Kind::Auth, b"".as_slice()),
        (Kind::Roster, b"\x0a\x14aaaaaaaaaaaaaaaaaaaa".as_slice()),
        (Kind::Eos, b"".as_slice()),
    ] {
        let signed = sign_broadcast(&key, kind, &topic, &challenge, 7, payload);
        let mut buf = BytesMut::from(signed.frame.as_ref());
        let body = next_frame(&mut buf, FRAME_BYTES_MAX_DEFAULT)
            .expect("well formed")
            .expect("complete");
        assert!(buf.is_empty());
        let decoded = decode_broadcast(body).expect("decodes");
        assert_eq!(decoded, signed.broadcast);
        assert_eq!(decoded.soc, signed.chunk);
        assert_eq!(decoded.kind, kind as i32);
        assert_eq!(decoded.challenge.as_ref(), &challenge);
        assert_eq!(decoded.index, 7);

        let soc = SocRef::parse(&signed.chunk).expect("parses");
        let id = session_chunk_id(kind, topic, challenge, 7);
        assert_eq!(soc.id, &id);
        assert_eq!(
            soc.span_value(),
            payload.len() as u64,
            "span 0 for AUTH/EOS"
        );
        let verified = verify(&VerifyRequest {
            chunk: signed.chunk.clone(),
            expect: Expect::At {
                owner: key.address(),
            },
        })
        .expect("valid at the signer's address");
        assert_eq!(verified.address, soc_address(id, key.address()));
    }
}

#[test]
fn implicit_frames_have_no_challenge() {
    let key = SigningKey::random();
    let id = [0x33; 32];
    let plain = sign_implicit(&key, &id, None, b"p");
    assert!(plain.broadcast.challenge.is_empty());
    assert_eq!(plain.broadcast.index, 0);
    assert_eq!(plain.broadcast.kind, Kind::Data as i32);
    assert_eq!(SocRef::parse(&plain.chunk).expect("parses").id, &id);
    let indexed = sign_implicit(&key, &id, Some(42), b"p");
    assert_eq!(indexed.broadcast.index, 42);
}

#[test]
fn oversized_payloads_are_errors_in_the_try_forms() {
    let key = SigningKey::random();
    let big = vec![0u8; CHUNK_SIZE + 1];
    let expected = PayloadTooLarge {
        len: CHUNK_SIZE + 1,
        max: CHUNK_SIZE,
    };
    assert_eq!(try_sign_soc(&key, &[0; 32], 0, &big), Err(expected));
    assert_eq!(
        try_sign_broadcast(&key, Kind::Data, &[0; 32], &[0; 32], 0, &big).err(),
        Some(expected)
    );
    assert!(try_sign_soc(&key, &[0; 32], 0, &big[..CHUNK_SIZE]).is_ok());
}
