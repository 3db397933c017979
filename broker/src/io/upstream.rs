//! Edge mode's upstream streams (docs/SCALING.md, "Edges"): for each cohort the machine
//! asks for (`Action::OpenUpstream`), one TCP connection to the cohort's root that joins as
//! a subscriber and is then read like any stream of this core, its frames the cohort's
//! publications (the machine's `upstream` checks them as a subscriber does).
//!
//! Owns: `Upstreams` (the cohorts this core keeps an upstream for), the task that keeps one
//! (placement of the cohort key over `relay.upstreams`, the connection and its deadline, the
//! Join with this broker's relay id on its path, the Ack, then the TCP carrier, then R38's
//! backoff and the next broker in rank after a failure) and the `bps_relay_*` counts of it.
//! Never does: check a frame (the machine does), or write anything but the Join (a
//! subscriber sends nothing after it).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use bps_proto::{CohortKey, Join, RelayId, Spec, Status, decode_ack, encode_relayed_join, rank};
use bytes::Bytes;
use monoio::io::{AsyncReadRentExt, AsyncWriteRentExt};
use monoio::net::TcpStream;
use rand::Rng;

use super::carrier;
use super::link::CoreLink;
use super::tcp;
use crate::protocol::{CohortSerial, SpliceOutcome, StreamId};

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

/// The cohorts this core keeps an upstream for, each with the flag its task reads.
#[derive(Debug, Default)]
pub struct Upstreams {
    wanted: RefCell<HashMap<CohortSerial, Rc<Cell<bool>>>>,
}

impl Upstreams {
    /// Starts keeping an upstream for `cohort` (one task, until `close`).
    pub fn open(
        &self,
        link: &Rc<CoreLink>,
        cohort: CohortSerial,
        key: &CohortKey,
        spec: &Spec,
        mut path: Vec<RelayId>,
    ) {
        let relay = link.settings().relay.clone();
        path.push(crate::edge::relay_id());
        let plan = Plan {
            ranked: ranked(&relay, key),
            join: encode_relayed_join(&spec.to_join(&crate::edge::upstream_addr()), &path),
            cohort,
        };
        let wanted = Rc::new(Cell::new(true));
        if let Some(earlier) = self.wanted.borrow_mut().insert(cohort, Rc::clone(&wanted)) {
            earlier.set(false);
        }
        monoio::spawn(keep(Rc::clone(link), wanted, plan, relay));
    }

    /// Stops keeping the upstream of `cohort`; its task ends at its next step (the machine
    /// closes the stream itself if one is attached).
    pub fn close(&self, cohort: CohortSerial) {
        if let Some(wanted) = self.wanted.borrow_mut().remove(&cohort) {
            wanted.set(false);
        }
    }
}

/// Splices the local stream `stream` to the root of `key`: joins it with the stream's own
/// `join` and `path` plus this broker's relay id, hands the root's answer to the machine
/// (`on_splice`) and, after OK, carries the root's side until it ends. Every broker of the
/// list is tried once, in rank, within `relay.connect_timeout_ms` each.
pub fn splice(
    link: &Rc<CoreLink>,
    stream: StreamId,
    (key, join): (&CohortKey, &Join),
    mut path: Vec<RelayId>,
) {
    let relay = link.settings().relay.clone();
    path.push(crate::edge::relay_id());
    let ranked = ranked(&relay, key);
    let frame = encode_relayed_join(join, &path);
    monoio::spawn(carry_splice(
        Rc::clone(link),
        stream,
        (ranked, frame),
        relay.connect_timeout_ms,
    ));
}

/// `relay.upstreams` ranked for the cohort `key` (placement), names trimmed.
fn ranked(relay: &RelaySettings, key: &CohortKey) -> Vec<String> {
    let Ok(order) = rank(&relay.upstreams, key) else {
        // Config validation refuses a list placement cannot rank.
        unreachable!("relay.upstreams was validated");
    };
    order
        .into_iter()
        .map(|index| relay.upstreams[index].trim_ascii().to_owned())
        .collect()
}

/// The spliced stream's root side: the first broker in rank that answers, its answer to the
/// machine, and after OK the TCP carrier until the stream ends.
async fn carry_splice(
    link: Rc<CoreLink>,
    stream: StreamId,
    (ranked, frame): (Vec<String>, Bytes),
    timeout_ms: u64,
) {
    let metrics = link.metrics();
    for target in &ranked {
        let (socket, root, answer) = match join(target, &frame, timeout_ms).await {
            Ok(joined) => joined,
            Err(failure) => {
                if link.may_log() {
                    tracing::warn!(upstream = %target, %failure, "relay splice failed");
                }
                continue;
            }
        };
        if answer.status != Status::Ok {
            metrics.relay_splice_failures.inc();
            let ack = answer.frame;
            return link.spliced(None, stream, SpliceOutcome::Refused { ack });
        }
        let Ok(port) = link.admit_upstream(root) else {
            break;
        };
        carrier::configure(&socket, link.settings());
        let upstream = port.id;
        let ack = answer.frame;
        link.spliced(Some(&port), stream, SpliceOutcome::Joined { upstream, ack });
        metrics.relay_splices.inc();
        metrics.relay_splices_open.add(1);
        tcp::run(Rc::clone(&link), port, socket).await;
        metrics.relay_splices_open.sub(1);
        return;
    }
    metrics.relay_splice_failures.inc();
    link.spliced(None, stream, SpliceOutcome::Unreachable);
}

/// One cohort's upstream: where to join, in the order to try, and with what.
struct Plan {
    ranked: Vec<String>,
    join: Bytes,
    cohort: CohortSerial,
}

/// Why one attempt gave no upstream stream.
#[derive(Debug)]
enum Failure {
    Timeout,
    Io(std::io::Error),
    /// The Ack is not one frame of a decodable `Ack` with a known status.
    Malformed,
    /// FULL or REJECTED (a loop of edges is REJECTED: docs/SCALING.md).
    Refused(Status),
}

/// The root's answer to a Join: its status and the whole Ack frame, to hand on as it came.
struct Answer {
    status: Status,
    frame: Bytes,
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

/// Keeps `plan.cohort`'s upstream while it is wanted: join, hand the stream to the carrier
/// until it ends, back off (R38), and try again; a failed attempt moves to the next broker
/// in rank, an upstream that ended is tried again where it was.
async fn keep(link: Rc<CoreLink>, wanted: Rc<Cell<bool>>, plan: Plan, relay: RelaySettings) {
    let metrics = link.metrics();
    metrics.relay_upstreams_waiting.add(1);
    let mut position = 0;
    let mut attempt = 0u32;
    while wanted.get() && !link.draining() {
        let target = &plan.ranked[position % plan.ranked.len()];
        let joined = join(target, &plan.join, relay.connect_timeout_ms)
            .await
            .and_then(|(stream, root, answer)| match answer.status {
                Status::Ok => Ok((stream, root)),
                status => Err(Failure::Refused(status)),
            });
        match joined {
            Ok((stream, root)) if wanted.get() => {
                attempt = 0;
                carry(&link, stream, root, plan.cohort).await;
            }
            Ok(_) => break,
            Err(failure) => {
                position += 1;
                metrics.relay_upstream_failures.inc();
                if link.may_log() {
                    tracing::warn!(upstream = %target, %failure, "relay upstream failed");
                }
            }
        }
        if !wanted.get() {
            break;
        }
        monoio::time::sleep(backoff(&relay, attempt)).await;
        attempt = attempt.saturating_add(1);
    }
    metrics.relay_upstreams_waiting.sub(1);
}

/// One upstream stream from the Ack to its end, read by the TCP carrier.
async fn carry(link: &Rc<CoreLink>, stream: TcpStream, root: IpAddr, cohort: CohortSerial) {
    let metrics = link.metrics();
    metrics.relay_upstream_joins.inc();
    let Ok(port) = link.admit_upstream(root) else {
        return;
    };
    carrier::configure(&stream, link.settings());
    link.attach_upstream(&port, cohort);
    metrics.relay_upstreams_waiting.sub(1);
    metrics.relay_upstreams_attached.add(1);
    tcp::run(Rc::clone(link), port, stream).await;
    metrics.relay_upstreams_attached.sub(1);
    metrics.relay_upstreams_waiting.add(1);
}

/// Connects to `target`, sends the Join and reads exactly its Ack, within the timeout.
async fn join(
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
    match Status::try_from(ack.status) {
        Ok(Status::Unspecified) | Err(_) => Err(Failure::Malformed),
        Ok(status) => Ok(Answer { status, frame }),
    }
}

/// R38: randomised exponential backoff with full jitter, between the configured bounds.
fn backoff(relay: &RelaySettings, attempt: u32) -> Duration {
    let ceiling = relay
        .reconnect_backoff_min_ms
        .saturating_mul(1u64 << attempt.min(16))
        .min(relay.reconnect_backoff_max_ms);
    let floor = relay.reconnect_backoff_min_ms.min(ceiling);
    Duration::from_millis(rand::rng().random_range(floor..=ceiling))
}
