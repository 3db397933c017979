//! Edge mode's spliced streams, the I/O side (docs/SCALING.md, "Publishers at an edge"): for
//! a local stream the machine splices (`Action::OpenSplice`), the connection to the cohort's
//! root that carries the root's side of it.
//!
//! Owns: the attempt through `relay.upstreams` in rank, once each, the root's answer handed
//! to the machine (`on_splice`), the TCP carrier of the root's side until it ends, and the
//! `bps_relay_splice*` counts.
//! Never does: relay a frame itself (the machine sends each side's frames to the other) or
//! retry: a client whose splice failed reconnects as after any refusal (R38).

use std::rc::Rc;

use bps_proto::{CohortKey, Join, RelayId, Status, encode_relayed_join};
use bytes::Bytes;

use super::carrier;
use super::link::CoreLink;
use super::root_join::{join, ranked};
use super::tcp;
use crate::protocol::{SpliceOutcome, StreamId};

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
