//! Edge mode's upstream streams (docs/SCALING.md, "Edges"): for each cohort the machine
//! asks for (`Action::OpenUpstream`), one TCP connection to the cohort's root that joins as
//! a subscriber and is then read like any stream of this core, its frames the cohort's
//! publications (the machine's `upstream` checks them as a subscriber does).
//!
//! Owns: `Upstreams` (the cohorts this core keeps an upstream for), the task that keeps one
//! (the Join with this broker's relay id on its path, then the TCP carrier, then R38's
//! backoff and the next broker in rank after a failure) and the `bps_relay_upstream*` counts
//! of it.
//! Never does: check a frame (the machine does), or write anything but the Join (a
//! subscriber sends nothing after it).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use bps_proto::{CohortKey, RelayId, Spec, Status, encode_relayed_join};
use bytes::Bytes;
use monoio::net::TcpStream;
use rand::Rng;

use super::carrier;
use super::link::CoreLink;
use super::root_join::{Failure, RelaySettings, join, ranked};
use super::tcp;
use crate::protocol::CohortSerial;

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

/// One cohort's upstream: where to join, in the order to try, and with what.
struct Plan {
    ranked: Vec<String>,
    join: Bytes,
    cohort: CohortSerial,
}

/// Keeps `plan.cohort`'s upstream while it is wanted: join, hand the stream to the carrier
/// until it ends, back off (R38), and try again; a failed attempt moves to the next broker
/// in rank, an upstream that ended is tried again where it was.
async fn keep(link: Rc<CoreLink>, wanted: Rc<Cell<bool>>, plan: Plan, relay: RelaySettings) {
    let metrics = link.metrics();
    metrics.relay_upstreams_waiting.add(1);
    let mut position = 0;
    let mut attempt = 0u32;
    let mut joined_before = false;
    while wanted.get() && !link.draining() {
        let target = &plan.ranked[position % plan.ranked.len()];
        let joined = join(target, &plan.join, relay.connect_timeout_ms)
            .await
            .and_then(|(stream, root, answer)| match answer.status {
                Status::Ok => Ok((stream, (root, answer.relay_id))),
                status => Err(Failure::Refused(status)),
            });
        match joined {
            Ok((stream, root)) if wanted.get() => {
                attempt = 0;
                if joined_before {
                    metrics.relay_upstream_reconnects.inc();
                }
                joined_before = true;
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

/// One upstream stream from the Ack to its end, read by the TCP carrier; `root` is where it
/// goes, with the relay id the Ack named.
async fn carry(
    link: &Rc<CoreLink>,
    stream: TcpStream,
    (root, relay_id): (IpAddr, Option<RelayId>),
    cohort: CohortSerial,
) {
    let metrics = link.metrics();
    metrics.relay_upstream_joins.inc();
    let Ok(port) = link.admit_upstream(root) else {
        return;
    };
    carrier::configure(&stream, link.settings());
    link.attach_upstream(&port, cohort, relay_id);
    metrics.relay_upstreams_waiting.sub(1);
    metrics.relay_upstreams_attached.add(1);
    tcp::run(Rc::clone(link), port, stream).await;
    metrics.relay_upstreams_attached.sub(1);
    metrics.relay_upstreams_waiting.add(1);
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
