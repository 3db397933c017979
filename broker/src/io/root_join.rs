//! Joining a cohort's root, for an edge (docs/SCALING.md, "Edges"): which broker of
//! `relay.upstreams` to try first for a cohort, and one attempt: connect, send the Join, read
//! exactly the Ack, within `relay.connect_timeout_ms`.
//!
//! Owns: `RelaySettings`, the ranking of the list by placement, the attempt and its
//! `Failure`s, and the root's `Answer` (its status and the whole Ack frame, to hand on).
//! Never does: read past the Ack (what follows is the carrier's), retry, or decide what an
//! answer means (`upstream` and `splice` do).

use std::net::IpAddr;
use std::time::Duration;

use bps_proto::{CohortKey, RelayId, Status, decode_ack, rank, relay_id_of_ack};
use bytes::Bytes;
use monoio::io::{AsyncReadRentExt, AsyncWriteRentExt};
use monoio::net::TcpStream;

/// The bytes of an `Ack` body at most: a status and a 32-byte challenge, well inside one
/// varint byte, so the edge reads exactly the Ack and leaves what follows to the carrier.
const ACK_BODY_BYTES_MAX: usize = 127;

/// What an edge needs to keep its upstreams, from `[relay]`.
#[derive(Clone, Debug)]
pub struct RelaySettings {
    pub upstreams: std::sync::Arc<[String]>,
    pub connect_timeout_ms: u64,
    pub reconnect_backoff_min_ms: u64,
    pub reconnect_backoff_max_ms: u64,
}

/// `relay.upstreams` ranked for the cohort `key` (placement), names trimmed.
pub fn ranked(relay: &RelaySettings, key: &CohortKey) -> Vec<String> {
    let Ok(order) = rank(&relay.upstreams, key) else {
        // Config validation refuses a list placement cannot rank.
        unreachable!("relay.upstreams was validated");
    };
    order
        .into_iter()
        .map(|index| relay.upstreams[index].trim_ascii().to_owned())
        .collect()
}

/// Why one attempt gave no upstream stream.
#[derive(Debug)]
pub enum Failure {
    Timeout,
    Io(std::io::Error),
    /// The Ack is not one frame of a decodable `Ack` with a known status.
    Malformed,
    /// FULL or REJECTED (a loop of edges is REJECTED: docs/SCALING.md).
    Refused(Status),
}

/// The root's answer to a Join: its status and the whole Ack frame, to hand on as it came.
pub struct Answer {
    pub status: Status,
    pub frame: Bytes,
    /// The relay id an OK names: the root is itself an edge (docs/PROTOCOL.md §10).
    pub relay_id: Option<RelayId>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => {
                f.write_str("no connection and Ack within relay.connect_timeout_ms")
            }
            Failure::Io(error) => write!(f, "{error}"),
            Failure::Malformed => f.write_str("the answer to the Join is not an Ack"),
            Failure::Refused(status) => write!(
                f,
                "Join answered {}: the root is full, refuses the spec, or the relay path is a loop",
                status.as_str_name()
            ),
        }
    }
}

/// Connects to `target`, sends the Join and reads exactly its Ack, within the timeout.
pub async fn join(
    target: &str,
    frame: &Bytes,
    timeout_ms: u64,
) -> Result<(TcpStream, IpAddr, Answer), Failure> {
    let attempt = async {
        let mut stream = TcpStream::connect(target).await.map_err(Failure::Io)?;
        let root = stream.peer_addr().map_err(Failure::Io)?.ip();
        let (written, _) = stream.write_all(frame.clone()).await;
        written.map_err(Failure::Io)?;
        let answer = read_ack(&mut stream).await?;
        Ok((stream, root, answer))
    };
    monoio::time::timeout(Duration::from_millis(timeout_ms), attempt)
        .await
        .map_err(|_| Failure::Timeout)?
}

/// The Ack, and not a byte more: what follows is the carrier's.
async fn read_ack(stream: &mut TcpStream) -> Result<Answer, Failure> {
    let (read, length) = stream.read_exact(vec![0u8; 1]).await;
    read.map_err(Failure::Io)?;
    let body_bytes = usize::from(length[0]);
    if body_bytes > ACK_BODY_BYTES_MAX {
        return Err(Failure::Malformed);
    }
    let (read, body) = stream.read_exact(vec![0u8; body_bytes]).await;
    read.map_err(Failure::Io)?;
    // The frame as it came: its length byte, then its body.
    let mut frame = length;
    frame.extend_from_slice(&body);
    let frame = Bytes::from(frame);
    let ack = decode_ack(frame.slice(1..)).map_err(|_| Failure::Malformed)?;
    let relay_id = relay_id_of_ack(frame.slice(1..));
    match Status::try_from(ack.status) {
        Ok(Status::Unspecified) | Err(_) => Err(Failure::Malformed),
        Ok(status) => Ok(Answer {
            status,
            frame,
            relay_id,
        }),
    }
}
