//! What the `bps` chunk tool reports about chunks and frames, as JSON-ready structs.
//!
//! Owns: [`inspect_soc`] (bee's `soc.Valid` at a given address, or recovery and the implied
//! address), [`decode_frame`] (one varint-delimited frame, or a bare body, decoded as the
//! `Join`, `Ack` or `Broadcast` it most plausibly is) and the JSON field names of `bps soc
//! inspect` and `bps frame decode`, which are a contract (issue 2, item 4): hex is lowercase
//! without `0x`, `span` is a number (u64 little-endian on the wire).
//!
//! Never: reads files or sockets, prints, or decides exit codes (the binary does).

use bps_proto::{
    Ack, Broadcast, FRAME_BYTES_MAX_DEFAULT, Join, Kind, PublisherRegime, Status, TopicBinding,
    decode_ack, decode_broadcast, decode_join, decode_roster, peek_frame, validate_join,
};
use bps_verify::{SocError, SocRef, validate_soc, validate_soc_at};
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Value, json};

/// `bps soc inspect`'s object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SocReport {
    /// The chunk id.
    pub id: String,
    /// The recovered owner; `null` when the signature recovers no key.
    pub owner: Option<String>,
    /// keccak256(id ‖ owner); `null` when there is no owner.
    pub address: Option<String>,
    /// With `--address`: the address validated at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_address: Option<String>,
    /// The wrapped CAC's address (BMT of span ‖ payload).
    pub wrapped_address: String,
    /// The span, little-endian u64 (not checked against the payload length, as bee).
    pub span: u64,
    /// Payload bytes.
    pub payload_len: usize,
    /// bee's `soc.Valid` at the expected address (or at the implied one).
    pub valid: bool,
    /// Why not valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Inspects SOC bytes. With `expected`, validity is bee's `soc.Valid(expected, chunk)`
/// (replicas rule included); without, it is `soc.Valid` at keccak256(id ‖ recovered owner),
/// which fails only when no key recovers or the replicas rule does. A chunk whose length is
/// not 105..=4201 bytes has no fields and is an error.
pub fn inspect_soc(chunk: &[u8], expected: Option<&[u8; 32]>) -> Result<SocReport, SocError> {
    let soc = SocRef::parse(chunk)?;
    let recovered = soc.recover().ok();
    let validity = match expected {
        Some(expected) => validate_soc_at(chunk, expected),
        None => validate_soc(chunk),
    };
    Ok(SocReport {
        id: hex::encode(soc.id),
        owner: recovered.map(|recovered| hex::encode(recovered.owner)),
        address: recovered.map(|recovered| hex::encode(recovered.address)),
        expected_address: expected.map(hex::encode),
        wrapped_address: hex::encode(soc.cac_address()),
        span: soc.span_value(),
        payload_len: soc.payload.len(),
        valid: validity.is_ok(),
        error: validity.err().map(|error| error.to_string()),
    })
}

/// Why frame bytes are not one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameDecodeError(pub String);

impl std::fmt::Display for FrameDecodeError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for FrameDecodeError {}

/// Decodes `bytes` as exactly one varint-delimited frame (`bare_body`: as a body without
/// the length) and reports it as JSON with a `"type"` of `Join`, `Ack` or `Broadcast`.
///
/// A frame has no envelope, so the type is inferred. The three messages differ in wire
/// types (Ack's field 1 is a varint, Join's and Broadcast's are bytes; Join's field 2 is
/// bytes, Broadcast's a varint), so usually only one decodes. When several do, the first
/// that carries its defining field wins, in the order Broadcast (soc and a kind), Join (a
/// cohort), Ack (a status); failing that, the first that decodes at all in that order.
pub fn decode_frame(bytes: &[u8], bare_body: bool) -> Result<Value, FrameDecodeError> {
    let body = if bare_body {
        Bytes::copy_from_slice(bytes)
    } else {
        let header = peek_frame(bytes, FRAME_BYTES_MAX_DEFAULT)
            .map_err(|error| FrameDecodeError(error.to_string()))?
            .ok_or_else(|| FrameDecodeError("incomplete length prefix".to_owned()))?;
        let total = header.total_bytes();
        if bytes.len() < total {
            return Err(FrameDecodeError(format!(
                "incomplete frame: the prefix declares {} body bytes, {} follow",
                header.body_bytes,
                bytes.len() - header.prefix_bytes
            )));
        }
        if bytes.len() > total {
            return Err(FrameDecodeError(format!(
                "{} bytes after the frame (decode one frame at a time)",
                bytes.len() - total
            )));
        }
        Bytes::copy_from_slice(&bytes[header.prefix_bytes..])
    };
    if body.is_empty() {
        return Err(FrameDecodeError(
            "empty body: every field at its default is no meaningful Join, Ack or Broadcast"
                .to_owned(),
        ));
    }
    let broadcast = decode_broadcast(body.clone());
    let join = decode_join(body.clone());
    let ack = decode_ack(body);
    if let Ok(broadcast) = &broadcast
        && !broadcast.soc.is_empty()
        && broadcast.kind != 0
    {
        return Ok(broadcast_json(broadcast));
    }
    if let Ok(join) = &join
        && join.cohort.is_some()
    {
        return Ok(join_json(join));
    }
    if let Ok(ack) = &ack
        && ack.status != 0
    {
        return Ok(ack_json(ack));
    }
    match (broadcast, join, ack) {
        (Ok(broadcast), _, _) => Ok(broadcast_json(&broadcast)),
        (_, Ok(join), _) => Ok(join_json(&join)),
        (_, _, Ok(ack)) => Ok(ack_json(&ack)),
        (Err(broadcast), Err(join), Err(ack)) => Err(FrameDecodeError(format!(
            "not a Join, Ack or Broadcast: {}; {}; {}",
            broadcast, join, ack
        ))),
    }
}

fn enum_name(name: Option<&str>, value: i32) -> String {
    name.map_or_else(|| format!("UNKNOWN({value})"), str::to_owned)
}

fn broadcast_json(broadcast: &Broadcast) -> Value {
    let kind = Kind::try_from(broadcast.kind).ok();
    let mut report = json!({
        "type": "Broadcast",
        "kind": enum_name(kind.map(|kind| kind.as_str_name()), broadcast.kind),
        "kind_value": broadcast.kind,
        "challenge": hex::encode(&broadcast.challenge),
        "index": broadcast.index,
        "soc": hex::encode(&broadcast.soc),
    });
    match inspect_soc(&broadcast.soc, None) {
        Ok(chunk) => {
            report["chunk"] = json!(chunk);
            if kind == Some(Kind::Roster) {
                let payload = SocRef::parse(&broadcast.soc)
                    .map(|soc| soc.payload)
                    .unwrap_or_default();
                report["roster"] = match decode_roster(payload) {
                    Ok(publishers) => json!(publishers.iter().map(hex::encode).collect::<Vec<_>>()),
                    Err(error) => json!({ "error": error.to_string() }),
                };
            }
        }
        Err(error) => report["chunk_error"] = json!(error.to_string()),
    }
    report
}

fn join_json(join: &Join) -> Value {
    let cohort = join.cohort.as_ref().map(|cohort| {
        json!({
            "topic": hex::encode(&cohort.topic),
            "binding": enum_name(
                TopicBinding::try_from(cohort.binding).ok().map(|binding| binding.as_str_name()),
                cohort.binding,
            ),
            "admin": (!cohort.admin.is_empty()).then(|| hex::encode(&cohort.admin)),
            "publishers": enum_name(
                PublisherRegime::try_from(cohort.publishers)
                    .ok()
                    .map(|regime| regime.as_str_name()),
                cohort.publishers,
            ),
            "history": cohort.history,
            "closed": cohort.closed,
        })
    });
    let mut report = json!({
        "type": "Join",
        "cohort": cohort,
        "addr": hex::encode(&join.addr),
    });
    match validate_join(join) {
        Ok(valid) => {
            report["valid"] = json!(true);
            report["cohort_key"] = json!(valid.key.to_hex());
        }
        Err(reason) => {
            report["valid"] = json!(false);
            report["error"] = json!(reason.to_string());
        }
    }
    report
}

fn ack_json(ack: &Ack) -> Value {
    json!({
        "type": "Ack",
        "status": enum_name(
            Status::try_from(ack.status).ok().map(|status| status.as_str_name()),
            ack.status,
        ),
        "challenge": hex::encode(&ack.challenge),
    })
}

#[cfg(test)]
mod tests {
    use bps_proto::{Binding, Spec, encode_frame, encode_roster};
    use bps_verify::{SigningKey, sign_broadcast, sign_soc};

    use super::*;

    /// bee @ pkg/soc/soc_test.go (TestFromChunk, TestCreateAddress): the SOC of payload
    /// "foo", id 0, signed by 0x8d3766440f0d7b949a5e32995d09619a7f86e632.
    const BEE_FOO_SOC: &str = concat!(
        "0000000000000000000000000000000000000000000000000000000000000000",
        "5acd384febc133b7b245e5ddc62d82d2cded9182d2716126cd8844509af65a05",
        "3deb418208027f548e3e88343af6f84a8772fb3cebc0a1833a0ea7ec0c134831",
        "1b",
        "0300000000000000",
        "666f6f"
    );

    #[test]
    fn inspects_bees_foo_soc() {
        let chunk = hex::decode(BEE_FOO_SOC).expect("hex");
        let report = inspect_soc(&chunk, None).expect("parses");
        assert!(report.valid);
        assert_eq!(
            report.owner.as_deref(),
            Some("8d3766440f0d7b949a5e32995d09619a7f86e632")
        );
        assert_eq!(
            report.address.as_deref(),
            Some("9d453ebb73b2fedaaf44ceddcf7a0aa37f3e3d6453fea5841c31f0ea6d61dc85")
        );
        assert_eq!(
            report.wrapped_address,
            "2387e8e7d8a48c2a9339c97c1dc3461a9a7aa07e994c5cb8b38fd7c1b3e6ea48"
        );
        assert_eq!((report.span, report.payload_len), (3, 3));
        let mut wrong = [0u8; 32];
        wrong[0] = 1;
        let report = inspect_soc(&chunk, Some(&wrong)).expect("parses");
        assert!(!report.valid);
        assert!(report.error.is_some());
    }

    #[test]
    fn decodes_each_frame_type() {
        let key = SigningKey::from_bytes(&[5; 32]).expect("key");
        let roster = sign_broadcast(
            &key,
            Kind::Roster,
            &[1; 32],
            &[2; 32],
            3,
            &encode_roster(&[[9; 20]]),
        );
        let report = decode_frame(&roster.frame, false).expect("broadcast");
        assert_eq!(report["type"], "Broadcast");
        assert_eq!(report["kind"], "ROSTER");
        assert_eq!(report["index"], 3);
        assert_eq!(report["chunk"]["owner"], hex::encode(key.address()));
        assert_eq!(report["roster"][0], hex::encode([9u8; 20]));

        let spec = Spec {
            topic: [1; 32],
            binding: Binding::FeedTopic,
            admin: Some([4; 20]),
            all: false,
            history: false,
            closed: true,
        };
        let join = encode_frame(&spec.to_join(&[4; 20]));
        let report = decode_frame(&join, false).expect("join");
        assert_eq!(report["type"], "Join");
        assert_eq!(report["cohort"]["binding"], "FEED_TOPIC");
        assert_eq!(report["cohort"]["closed"], true);
        assert_eq!(report["valid"], true);
        assert_eq!(report["cohort_key"], spec.key().to_hex());

        let ack = encode_frame(&Ack {
            status: Status::Full as i32,
            challenge: Bytes::new(),
        });
        let report = decode_frame(&ack[1..], true).expect("ack body");
        assert_eq!(report["type"], "Ack");
        assert_eq!(report["status"], "FULL");

        let chunk = sign_soc(&key, &[0; 32], 0, b"");
        let data = encode_frame(&Broadcast {
            soc: chunk,
            kind: 9,
            challenge: Bytes::new(),
            index: 0,
        });
        let report = decode_frame(&data, false).expect("unknown kind");
        assert_eq!(report["kind"], "UNKNOWN(9)");
    }

    #[test]
    fn refuses_partial_and_trailing_bytes() {
        let ack = encode_frame(&Ack {
            status: Status::Ok as i32,
            challenge: Bytes::from(vec![1; 32]),
        });
        assert!(decode_frame(&ack[..ack.len() - 1], false).is_err());
        assert!(decode_frame(&[ack.as_ref(), &[0]].concat(), false).is_err());
        assert!(decode_frame(&[], false).is_err());
    }
}
