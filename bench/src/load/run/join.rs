//! Step 1 and 2 of a run (module docs of [`run`](super)): every subscriber and publisher
//! stream joins, a few joining threads at a time; a pending publisher claims at once.
//!
//! Owns: [`Joined`] and how each stream joins (BPS through [`dial`], NATS `SUB`/connect).
//!
//! Never: retries a refused Join (it would hide loss).

use std::io::Write;
use std::net::{IpAddr, TcpStream};
use std::thread;

use bps_client::publisher::{Publisher, PublisherConfig, Role};
use bps_client::websocket::Framing;
use bps_proto::{Hash, Status};
use bytes::BytesMut;

use super::{RunError, failed};
use crate::load::config::{CheckKind, LoadConfig, Mode};
use crate::load::dial::{self, JoinError};
use crate::load::nats;
use crate::load::p2p::P2pPool;
use crate::load::plan::{CohortPlan, Member, Plan, PublisherPlan};
use crate::load::receiver::Wire;
use crate::load::websocket::Transport;

/// How the run's streams are dialed: its settings, and over `--transport p2p` the light
/// nodes they are opened on.
pub(super) type Dialing<'a> = (&'a LoadConfig, Option<&'a P2pPool>);

/// Every stream of the run, joined.
pub(super) struct Joined {
    pub(super) subscribers: Vec<JoinedSubscriber>,
    pub(super) publishers: Vec<JoinedPublisher>,
}

/// Joins the subscribers, then the publishers, as far as the mode has them.
pub(super) fn join_all(
    (config, p2p): Dialing<'_>,
    plan: &Plan,
    wire: Wire,
    base_index: u64,
) -> Result<Joined, RunError> {
    let subscribers = if config.mode.subscribes() {
        join_subscribers((config, p2p), plan, wire)?
    } else {
        Vec::new()
    };
    let publishers = if config.mode.publishes() {
        join_publishers((config, p2p), plan, base_index)?
    } else {
        Vec::new()
    };
    Ok(Joined {
        subscribers,
        publishers,
    })
}

/// Threads that open the run's streams: a Join is a round trip, and a few at a time keep
/// ten thousand of them to seconds.
const JOIN_THREADS: usize = 8;

/// A joined publisher stream, ready to send.
pub(super) struct JoinedPublisher {
    pub(super) global: u32,
    pub(super) cohort: u32,
    pub(super) stream: TcpStream,
    pub(super) challenge: Hash,
    pub(super) leftover: BytesMut,
}

/// A joined subscriber stream, before its reader is built.
pub(super) struct JoinedSubscriber {
    pub(super) cohort: u32,
    pub(super) member: u32,
    pub(super) kind: CheckKind,
    pub(super) stream: TcpStream,
    pub(super) leftover: BytesMut,
}

/// Runs `work` on every item, `threads` contiguous shares in parallel; results in order,
/// or the first error.
fn in_parallel<T: Send, R: Send>(
    items: Vec<T>,
    threads: usize,
    work: &(dyn Fn(T) -> Result<R, RunError> + Sync),
) -> Result<Vec<R>, RunError> {
    let share = items.len().div_ceil(threads.max(1)).max(1);
    let mut shares: Vec<Vec<T>> = Vec::new();
    let mut items = items.into_iter().peekable();
    while items.peek().is_some() {
        shares.push(items.by_ref().take(share).collect());
    }
    thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || share.into_iter().map(work).collect::<Result<Vec<R>, _>>())
            })
            .collect();
        let mut results = Vec::new();
        for handle in handles {
            let part = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            results.extend(part);
        }
        Ok(results)
    })
}

/// The NATS subscription id of subscriber `member` (ids start at 1).
pub(super) fn nats_sid(member: u32) -> u64 {
    u64::from(member) + 1
}

/// Joins every subscriber of the plan, [`JOIN_THREADS`] at a time.
fn join_subscribers(
    (config, p2p): Dialing<'_>,
    plan: &Plan,
    wire: Wire,
) -> Result<Vec<JoinedSubscriber>, RunError> {
    let members: Vec<(u32, u32)> = plan
        .cohorts
        .iter()
        .flat_map(|cohort| {
            (0..cohort.subscribers.len() as u32).map(|member| (cohort.index, member))
        })
        .collect();
    in_parallel(members, JOIN_THREADS, &|(cohort, member)| {
        join_subscriber((config, p2p), plan, wire, cohort, member)
    })
}

fn join_subscriber(
    (config, p2p): Dialing<'_>,
    plan: &Plan,
    wire: Wire,
    cohort_index: u32,
    member: u32,
) -> Result<JoinedSubscriber, RunError> {
    let cohort = plan
        .cohorts
        .get(cohort_index as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {cohort_index}")))?;
    let source = plan
        .source_of(cohort_index, Member::Subscriber(member))
        .map(IpAddr::V4);
    let kind = config.check_of(member);
    let (stream, leftover) = match wire {
        Wire::Bps | Wire::WebSocket => {
            let addr = cohort
                .subscribers
                .get(member as usize)
                .copied()
                .unwrap_or([0; 20]);
            let joined = join((config, p2p), source, cohort, &addr)?;
            (joined.stream, joined.leftover)
        }
        Wire::Nats => {
            let connected = nats::connect(&config.target, source, "bps-bench-sub")
                .map_err(failed("NATS connect"))?;
            let subscribed = nats::subscribe(
                connected,
                &plan.nats_subject(cohort_index),
                nats_sid(member),
            )
            .map_err(failed("NATS subscribe"))?;
            (subscribed.stream, subscribed.leftover)
        }
    };
    Ok(JoinedSubscriber {
        cohort: cohort_index,
        member,
        kind,
        stream,
        leftover,
    })
}

fn join(
    (config, p2p): Dialing<'_>,
    source: Option<IpAddr>,
    cohort: &CohortPlan,
    addr: &[u8; 20],
) -> Result<dial::Joined, RunError> {
    let joined = match p2p {
        Some(pool) => pool
            .open()
            .map_err(|error| JoinError::Failed(format!("{}: {error}", config.target)))
            .and_then(|stream| {
                dial::join_on(stream, &config.target, &cohort.spec, addr, config.transport)
            }),
        None => dial::join(&config.target, source, &cohort.spec, addr, config.transport),
    };
    joined.map_err(|error| match error {
        JoinError::Refused(refusal) => RunError::Refused(format!(
            "join of cohort {} refused: {refusal}{}",
            cohort.index,
            if refusal.status == Status::Full {
                " (the per-peer bounds count source addresses: more --sources spreads the load)"
            } else {
                ""
            }
        )),
        JoinError::Failed(message) => {
            RunError::Failed(format!("join of cohort {}: {message}", cohort.index))
        }
    })
}

/// Joins every publisher, [`JOIN_THREADS`] at a time; a pending stream (the live stream's
/// admin) claims at once.
fn join_publishers(
    (config, p2p): Dialing<'_>,
    plan: &Plan,
    base_index: u64,
) -> Result<Vec<JoinedPublisher>, RunError> {
    let publishers: Vec<(u32, u32)> = plan
        .cohorts
        .iter()
        .flat_map(|cohort| (0..cohort.publishers.len() as u32).map(|local| (cohort.index, local)))
        .collect();
    in_parallel(publishers, JOIN_THREADS, &|(cohort, local)| {
        join_publisher((config, p2p), plan, base_index, cohort, local)
    })
}

fn join_publisher(
    (config, p2p): Dialing<'_>,
    plan: &Plan,
    base_index: u64,
    cohort_index: u32,
    local: u32,
) -> Result<JoinedPublisher, RunError> {
    let cohort = plan
        .cohorts
        .get(cohort_index as usize)
        .ok_or_else(|| RunError::Failed(format!("no cohort {cohort_index}")))?;
    let publisher = cohort.publishers.get(local as usize).ok_or_else(|| {
        RunError::Failed(format!("no publisher {local} in cohort {cohort_index}"))
    })?;
    let source = plan
        .source_of(cohort_index, Member::Publisher(local))
        .map(IpAddr::V4);
    if config.mode == Mode::Nats {
        let connected = nats::connect(&config.target, source, "bps-bench-pub")
            .map_err(failed("NATS connect"))?;
        return Ok(JoinedPublisher {
            global: publisher.global,
            cohort: cohort_index,
            stream: connected.stream,
            challenge: [0; 32],
            leftover: connected.leftover,
        });
    }
    let mut joined = join((config, p2p), source, cohort, &publisher.key.address())?;
    claim_if_pending(config, cohort, publisher, base_index, &mut joined)?;
    Ok(JoinedPublisher {
        global: publisher.global,
        cohort: cohort_index,
        stream: joined.stream,
        challenge: joined.challenge,
        leftover: joined.leftover,
    })
}

/// A publisher whose stream joined pending (the live stream's admin) claims it at once
/// (AUTH at index 0, D3), through the client library's [`Publisher`].
fn claim_if_pending(
    config: &LoadConfig,
    cohort: &CohortPlan,
    publisher: &PublisherPlan,
    base_index: u64,
    joined: &mut dial::Joined,
) -> Result<(), RunError> {
    let mut client = Publisher::new(
        cohort.spec,
        publisher.key.clone(),
        PublisherConfig {
            data_index_start: base_index,
            ..PublisherConfig::default()
        },
    )
    .map_err(|error| RunError::Failed(error.to_string()))?;
    client.begin_session(joined.challenge);
    if client.role() != Some(Role::Pending) {
        return Ok(());
    }
    let claim = client
        .next_frame()
        .map_err(|error| RunError::Failed(error.to_string()))?
        .ok_or_else(|| RunError::Failed("a pending publisher has no claim to send".to_owned()))?;
    let claim = match config.transport {
        Transport::Tcp | Transport::P2p => claim.signed.frame.to_vec(),
        Transport::Ws => Framing::wrap(&claim.signed.frame),
    };
    joined.stream.write_all(&claim).map_err(failed("claim"))?;
    client.mark_sent();
    Ok(())
}
