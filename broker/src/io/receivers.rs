//! Slow receivers: how a core resets the streams that do not take what it queues for them,
//! so that output never gates input.
//!
//! Owns: the slow-consumer reset (R26, a stream over its bytes bound, a refused backlog),
//! the write-progress deadline (an open stream holding bytes its socket took none of for
//! `timeouts.write_progress_deadline_ms` is reset whatever its frame count), and the
//! memory-pressure shed: while frame memory is full (readers on every core wait for room),
//! each core resets its stalled streams holding the most bytes, a few a turn, instead of
//! leaving every reader paused behind receivers that do not read. A stalled stream is one
//! whose bytes have not moved for `STALLED_MS_MIN`, so a receiver that is merely being
//! written this turn is never a victim.
//! Never does: decide protocol matters, or pick a victim that takes bytes.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::link::CoreLink;
use super::port::{Closing, Port};
use super::router::HomeMsg;
use crate::protocol::ClosedBy;

/// How often a core looks for streams past their write-progress deadline: the deadline is
/// seconds, so a second late is within its tolerance, and a scan costs one pass over ports.
const PROGRESS_SCAN_INTERVAL: Duration = Duration::from_secs(1);

/// How often a core under memory pressure looks for victims: often enough that readers wait
/// milliseconds, rarely enough that a pass over every port is not paid every turn.
const SHED_SCAN_INTERVAL: Duration = Duration::from_millis(10);

/// Streams one core resets per memory-pressure scan: the largest holders first; the next
/// scan sees what that freed.
const SHED_STREAMS_PER_SCAN_MAX: usize = 16;

/// How long a stream's bytes must have stood still before it counts as stalled under memory
/// pressure: longer than a coalesced flush and a busy turn, so a reading receiver is never
/// taken for a stalled one.
const STALLED_MS_MIN: u64 = 250;

/// Why a stream is reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stall {
    /// Nothing moved within the write-progress deadline.
    Deadline { ms: u64 },
    /// Frame memory was full and it was among the largest stalled holders.
    Pressure { held_bytes: usize },
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stall::Deadline { ms } => write!(
                f,
                "its socket took none of its queued bytes for {ms} ms (timeouts.write_progress_deadline_ms)"
            ),
            Stall::Pressure { held_bytes } => write!(
                f,
                "frame memory was full while it held {held_bytes} queued bytes its socket did not take"
            ),
        }
    }
}

/// When this core next looks at its receivers.
#[derive(Debug)]
pub struct Receivers {
    next_progress_scan: Cell<Instant>,
    next_shed_scan: Cell<Instant>,
}

impl Default for Receivers {
    fn default() -> Receivers {
        let now = Instant::now();
        Receivers {
            next_progress_scan: Cell::new(now + PROGRESS_SCAN_INTERVAL),
            next_shed_scan: Cell::new(now),
        }
    }
}

impl Receivers {
    /// Resets the streams past their write-progress deadline, and under memory pressure the
    /// largest stalled holders; each check at most at its interval.
    pub fn check(&self, link: &CoreLink, now: Instant) {
        if now >= self.next_progress_scan.get() {
            self.next_progress_scan.set(now + PROGRESS_SCAN_INTERVAL);
            expire_stalled(link, now);
        }
        if !link.memory().has_room() && now >= self.next_shed_scan.get() {
            self.next_shed_scan.set(now + SHED_SCAN_INTERVAL);
            shed_largest(link, now);
        }
    }
}

/// Streams whose bytes have stood still for at least `still`, with what they hold.
fn stalled(link: &CoreLink, now: Instant, still: Duration) -> Vec<(usize, Rc<Port>)> {
    let mut found = Vec::new();
    link.each_port(|port| {
        if port.is_open()
            && let Some(since) = port.held_since_moved()
            && now.saturating_duration_since(since) >= still
        {
            found.push((port.held_bytes(), Rc::clone(port)));
        }
    });
    found
}

fn expire_stalled(link: &CoreLink, now: Instant) {
    let ms = link.shared.write_progress_deadline_ms();
    for (_, port) in stalled(link, now, Duration::from_millis(ms)) {
        link.metrics().write_progress_timeouts.inc();
        reset_slow(link, &port, &Stall::Deadline { ms });
    }
}

fn shed_largest(link: &CoreLink, now: Instant) {
    let mut holders = stalled(link, now, Duration::from_millis(STALLED_MS_MIN));
    holders.sort_unstable_by_key(|(held_bytes, _)| std::cmp::Reverse(*held_bytes));
    for (held_bytes, port) in holders.into_iter().take(SHED_STREAMS_PER_SCAN_MAX) {
        link.metrics().memory_pressure_resets.inc();
        reset_slow(link, &port, &Stall::Pressure { held_bytes });
    }
}

/// Resets a stream that does not keep up and tells its home core (counted as a queue
/// reset, R26).
pub fn reset_slow(link: &CoreLink, port: &Port, why: &dyn fmt::Display) {
    let stream = port.id;
    link.metrics().queue_resets.inc();
    if link.may_log() {
        tracing::debug!(%stream, peer = %port.peer(), %why, "slow consumer reset (R26)");
    }
    port.note_closing(Closing::SlowConsumer);
    port.reset();
    if port.end_unreported()
        && let Some(home) = port.home()
    {
        port.mark_reported();
        link.router.to_home(
            home,
            HomeMsg::Closed {
                stream,
                cause: ClosedBy::QueueOverflow,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::rc::Rc;
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use super::{Receivers, expire_stalled};
    use crate::io::harness;
    use crate::io::link::CoreLink;
    use crate::io::outgoing::Outgoing;
    use crate::io::port::{Life, Port, Transport};
    use crate::protocol::CoreId;

    fn link_with(edit: impl FnOnce(&mut crate::config::BrokerConfig)) -> CoreLink {
        let (shared, _) = harness::shared(1, |config| {
            config.protocol.prejoin_connections_per_peer_max = 64;
            edit(config);
        });
        CoreLink::new(CoreId::new(0), shared)
    }

    /// A port of `link` from 127.0.0.`host` holding `bytes` queued, stamped at `at`.
    fn holding(link: &CoreLink, host: u8, bytes: usize, at: Instant) -> Rc<Port> {
        let port = link
            .admit(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)), Transport::Tcp)
            .expect("admitted");
        link.start_turn(at);
        port.enqueue(Outgoing::bare(Bytes::from(vec![0; bytes])), None, None)
            .expect("room");
        port
    }

    #[test]
    fn under_memory_pressure_the_largest_stalled_holders_go_first_a_few_a_scan() {
        let link = link_with(|config| {
            config.limits.frame_memory_bytes_max = 4096;
            config.protocol.history_bytes_max = 8194;
        });
        let now = Instant::now();
        let long_ago = now
            .checked_sub(Duration::from_secs(1))
            .expect("a second ago");
        let stalled: Vec<Rc<Port>> = (1..=20)
            .map(|host| holding(&link, host, usize::from(host) * 10, long_ago))
            .collect();
        let moving = holding(&link, 30, 10_000, now);
        let receivers = Receivers::default();
        receivers.check(&link, now);
        assert!(
            stalled.iter().all(|port| port.is_open()),
            "no pressure, no reset"
        );
        let hog = link.memory().frame(&[0; 4096]);
        receivers.check(&link, now + Duration::from_millis(20));
        let reset: Vec<bool> = stalled
            .iter()
            .map(|port| port.life() == Life::Resetting)
            .collect();
        assert_eq!(reset[..4], [false; 4], "the four smallest are kept");
        assert_eq!(reset[4..], [true; 16], "the sixteen largest are reset");
        assert!(
            moving.is_open(),
            "a stream whose bytes move is never a victim"
        );
        assert_eq!(link.metrics().memory_pressure_resets.get(), 16);
        assert_eq!(link.metrics().queue_resets.get(), 16);
        drop(hog);
    }

    #[test]
    fn a_stream_whose_bytes_stood_still_past_the_deadline_is_reset() {
        let link = link_with(|config| config.timeouts.write_progress_deadline_ms = 500);
        let now = Instant::now();
        let long_ago = now
            .checked_sub(Duration::from_secs(1))
            .expect("a second ago");
        let stuck = holding(&link, 1, 100, long_ago);
        let recent = holding(&link, 2, 100, now);
        let idle = link
            .admit(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), Transport::Tcp)
            .expect("admitted");
        expire_stalled(&link, now);
        assert_eq!(stuck.life(), Life::Resetting);
        assert!(recent.is_open() && idle.is_open(), "{recent:?} {idle:?}");
        assert_eq!(link.metrics().write_progress_timeouts.get(), 1);
    }
}
