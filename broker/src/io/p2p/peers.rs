//! The libp2p peers as the carrier sees them: each connection's IP and remote address,
//! whether bee's handshake with it completed (and the overlay it proved), and the handshakes
//! running per IP, against `p2p.pending_handshakes_per_ip_max` (one more is refused).
//! Never does: I/O or timing (the handshake task enforces the deadline); it only answers
//! whether a stream of a peer may go on.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use bps_p2p::{Direction, Multiaddr, PeerId, Protocol};
use bps_proto::Hash;

/// Where a peer's handshake stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Connected; no handshake completed yet.
    Pending,
    /// A handshake stream runs (counted for its IP).
    Handshaking,
    /// The handshake completed: the peer proved this overlay.
    Ready { overlay: Hash },
}

#[derive(Debug)]
struct PeerState {
    /// Which connection of the peer this is (`Peers::connected` numbers them).
    serial: u64,
    ip: IpAddr,
    remote: Multiaddr,
    direction: Direction,
    stage: Stage,
}

/// Why a handshake may not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoHandshake {
    /// The peer has no connection (it closed meanwhile).
    Unknown,
    /// A handshake of this peer is running already.
    Running,
    /// Its IP has `p2p.pending_handshakes_per_ip_max` handshakes running.
    PendingPerIp,
}

impl NoHandshake {
    /// The metrics' reason label.
    pub fn reason(self) -> &'static str {
        match self {
            NoHandshake::Unknown => "unknown_peer",
            NoHandshake::Running => "running",
            NoHandshake::PendingPerIp => "pending_per_ip",
        }
    }
}

/// Every connected peer of the host.
#[derive(Debug)]
pub struct Peers {
    peers: HashMap<PeerId, PeerState>,
    running_per_ip: HashMap<IpAddr, u32>,
    running_max: u32,
    next_serial: u64,
}

/// The IP of a multiaddr (`/ip4/..` or `/ip6/..`), unspecified when it names none.
pub fn ip_of(addr: &Multiaddr) -> IpAddr {
    addr.iter()
        .find_map(|protocol| match protocol {
            Protocol::Ip4(ip) => Some(IpAddr::V4(ip)),
            Protocol::Ip6(ip) => Some(IpAddr::V6(ip)),
            _ => None,
        })
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

impl Peers {
    pub fn new(running_max: u32) -> Peers {
        Peers {
            peers: HashMap::new(),
            running_per_ip: HashMap::new(),
            running_max,
            next_serial: 0,
        }
    }

    /// A connection to `peer` is up; its serial, for `idle_since`.
    pub fn connected(&mut self, peer: PeerId, remote: Multiaddr, direction: Direction) -> u64 {
        let serial = self.next_serial;
        self.next_serial += 1;
        let state = PeerState {
            serial,
            ip: ip_of(&remote),
            remote,
            direction,
            stage: Stage::Pending,
        };
        if let Some(old) = self.peers.insert(peer, state) {
            self.stop_running(&old);
        }
        serial
    }

    /// Whether connection `serial` of `peer` is up with no handshake completed or running.
    pub fn idle_since(&self, peer: &PeerId, serial: u64) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|state| state.serial == serial && state.stage == Stage::Pending)
    }

    /// `peer`'s connection closed.
    pub fn closed(&mut self, peer: &PeerId) {
        if let Some(old) = self.peers.remove(peer) {
            self.stop_running(&old);
        }
    }

    /// A handshake of `state` no longer runs.
    fn stop_running(&mut self, state: &PeerState) {
        if state.stage != Stage::Handshaking {
            return;
        }
        if let Some(count) = self.running_per_ip.get_mut(&state.ip) {
            *count -= 1;
            if *count == 0 {
                self.running_per_ip.remove(&state.ip);
            }
        }
    }

    /// Starts `peer`'s handshake: its remote address and direction, or why not.
    pub fn begin_handshake(
        &mut self,
        peer: &PeerId,
    ) -> Result<(Multiaddr, Direction), NoHandshake> {
        let state = self.peers.get_mut(peer).ok_or(NoHandshake::Unknown)?;
        if state.stage == Stage::Handshaking {
            return Err(NoHandshake::Running);
        }
        let running = self.running_per_ip.entry(state.ip).or_insert(0);
        if *running >= self.running_max {
            return Err(NoHandshake::PendingPerIp);
        }
        *running += 1;
        state.stage = Stage::Handshaking;
        Ok((state.remote.clone(), state.direction))
    }

    /// `peer`'s handshake ended: with the overlay it proved, or failed (`None`).
    pub fn end_handshake(&mut self, peer: &PeerId, overlay: Option<Hash>) {
        let Some(state) = self.peers.remove(peer) else {
            return;
        };
        self.stop_running(&state);
        let stage = match (state.stage, overlay) {
            (Stage::Handshaking, Some(overlay)) => Stage::Ready { overlay },
            (Stage::Handshaking, None) => Stage::Pending,
            (stage, _) => stage,
        };
        self.peers.insert(*peer, PeerState { stage, ..state });
    }

    /// Whether a handshake of `peer` runs.
    pub fn handshaking(&self, peer: &PeerId) -> bool {
        self.peers
            .get(peer)
            .is_some_and(|state| state.stage == Stage::Handshaking)
    }

    /// The overlay of `peer` once its handshake completed; `None` before.
    pub fn ready(&self, peer: &PeerId) -> Option<Hash> {
        let state = self.peers.get(peer)?;
        match state.stage {
            Stage::Ready { overlay } => Some(overlay),
            Stage::Pending | Stage::Handshaking => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Peers {
        /// Handshakes running from `ip`.
        fn running(&self, ip: IpAddr) -> u32 {
            self.running_per_ip.get(&ip).copied().unwrap_or(0)
        }
    }

    fn addr(ip: &str) -> Multiaddr {
        format!("/ip4/{ip}/tcp/1634").parse().expect("multiaddr")
    }

    #[test]
    fn a_peer_is_ready_only_after_its_handshake_and_running_counts_follow() {
        let mut peers = Peers::new(8);
        let peer = PeerId::random();
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        assert_eq!(peers.begin_handshake(&peer), Err(NoHandshake::Unknown));
        let serial = peers.connected(peer, addr("10.0.0.1"), Direction::Inbound);
        assert!(peers.idle_since(&peer, serial));
        assert!(!peers.idle_since(&peer, serial + 1), "another connection");
        assert!(peers.ready(&peer).is_none());
        assert!(!peers.handshaking(&peer));
        assert!(peers.begin_handshake(&peer).is_ok());
        assert!(peers.handshaking(&peer));
        assert_eq!(peers.running(ip), 1);
        assert_eq!(peers.begin_handshake(&peer), Err(NoHandshake::Running));
        peers.end_handshake(&peer, None);
        assert_eq!(peers.running(ip), 0);
        assert!(
            peers.ready(&peer).is_none(),
            "a failed handshake proves nothing"
        );
        assert!(peers.begin_handshake(&peer).is_ok());
        peers.end_handshake(&peer, Some([7; 32]));
        assert_eq!(peers.ready(&peer), Some([7; 32]));
        assert_eq!(peers.running(ip), 0);
        assert!(peers.begin_handshake(&peer).is_ok());
        peers.closed(&peer);
        assert!(peers.ready(&peer).is_none());
        assert_eq!(peers.running(ip), 0, "a closed connection's handshake ends");
    }

    #[test]
    fn one_more_handshake_than_the_bound_from_one_ip_is_refused() {
        let mut peers = Peers::new(2);
        let all: Vec<PeerId> = (0..3).map(|_| PeerId::random()).collect();
        for peer in &all {
            peers.connected(*peer, addr("10.0.0.2"), Direction::Inbound);
        }
        assert!(peers.begin_handshake(&all[0]).is_ok());
        assert!(peers.begin_handshake(&all[1]).is_ok());
        assert_eq!(
            peers.begin_handshake(&all[2]),
            Err(NoHandshake::PendingPerIp)
        );
        let other = PeerId::random();
        peers.connected(other, addr("10.0.0.3"), Direction::Outbound);
        assert!(
            peers.begin_handshake(&other).is_ok(),
            "another IP has its own bound"
        );
        peers.end_handshake(&all[0], Some([1; 32]));
        assert!(!peers.idle_since(&all[0], 0), "handshaken");
        assert!(
            peers.begin_handshake(&all[2]).is_ok(),
            "a finished one frees its slot"
        );
    }
}
