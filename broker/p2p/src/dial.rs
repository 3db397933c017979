//! The configured peers the host keeps a connection to: when each is due for a dial, and
//! the backoff between attempts (doubling from `REDIAL_BACKOFF_MIN` to `REDIAL_BACKOFF_MAX`,
//! back to the minimum once a connection is up).
//! Never does: dial (the host does, with what `due` returns) or touch the swarm.

use std::time::{Duration, Instant};

use libp2p::{Multiaddr, PeerId};

/// First wait after a lost connection or a failed dial: a restarting bee node is back
/// within seconds.
pub const REDIAL_BACKOFF_MIN: Duration = Duration::from_secs(1);

/// Longest wait between attempts: a bee node down for hours is retried a minute apart, not
/// hammered, and is found within a minute of its return.
pub const REDIAL_BACKOFF_MAX: Duration = Duration::from_secs(60);

/// How often the host asks which peers are due, in time: the backoff's resolution.
pub const REDIAL_TICK: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not connected; dial at this instant.
    Waiting(Instant),
    Dialing,
    Connected,
}

#[derive(Debug)]
struct Target {
    peer: PeerId,
    addr: Multiaddr,
    state: State,
    backoff: Duration,
}

/// The peers to keep connected.
#[derive(Debug, Default)]
pub struct Redial {
    targets: Vec<Target>,
}

impl Redial {
    /// Every target due at once.
    pub fn new(targets: Vec<(PeerId, Multiaddr)>, now: Instant) -> Self {
        let targets = targets
            .into_iter()
            .map(|(peer, addr)| Target {
                peer,
                addr,
                state: State::Waiting(now),
                backoff: REDIAL_BACKOFF_MIN,
            })
            .collect();
        Self { targets }
    }

    /// The targets due now, marked as being dialed.
    pub fn due(&mut self, now: Instant) -> Vec<(PeerId, Multiaddr)> {
        let mut due = Vec::new();
        for target in &mut self.targets {
            if matches!(target.state, State::Waiting(at) if at <= now) {
                target.state = State::Dialing;
                due.push((target.peer, target.addr.clone()));
            }
        }
        due
    }

    /// `peer` is connected (whoever dialed): no dial until it is lost; the backoff restarts.
    pub fn connected(&mut self, peer: PeerId) {
        for target in self.targets.iter_mut().filter(|t| t.peer == peer) {
            target.state = State::Connected;
            target.backoff = REDIAL_BACKOFF_MIN;
        }
    }

    /// `peer`'s last connection closed or its dial failed: dial again after the backoff,
    /// doubled for the next time.
    pub fn lost(&mut self, peer: PeerId, now: Instant) {
        for target in self.targets.iter_mut().filter(|t| t.peer == peer) {
            target.state = State::Waiting(now + target.backoff);
            target.backoff = (target.backoff * 2).min(REDIAL_BACKOFF_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_max_and_restarts_once_connected() {
        let peer = PeerId::random();
        let addr: Multiaddr = "/ip4/127.0.0.1/tcp/1634".parse().unwrap();
        let start = Instant::now();
        let mut redial = Redial::new(vec![(peer, addr.clone())], start);
        assert_eq!(redial.due(start), vec![(peer, addr.clone())]);
        assert!(redial.due(start).is_empty(), "not twice while dialing");
        let mut now = start;
        let mut waits = Vec::new();
        for _ in 0..9 {
            redial.lost(peer, now);
            let mut wait = Duration::ZERO;
            while redial.due(now + wait).is_empty() {
                wait += Duration::from_millis(500);
            }
            waits.push(wait.as_secs());
            now += wait;
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        redial.connected(peer);
        assert!(
            redial.due(now + REDIAL_BACKOFF_MAX * 2).is_empty(),
            "connected: no dial"
        );
        redial.lost(peer, now);
        assert_eq!(
            redial.due(now + REDIAL_BACKOFF_MIN).len(),
            1,
            "backoff restarted"
        );
    }
}
