//! The libp2p peers as the carrier sees them: each connection's IP and remote address,
//! whether bee's handshake with it completed (and the overlay it proved), and the handshakes
//! each IP has pending, against `p2p.pending_handshakes_per_ip_max`.
//! Never does: I/O or timing (the handshake task enforces the deadline); it only answers
//! whether a stream of a peer may go on.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use bps_p2p::{Direction, Multiaddr, PeerId, Protocol};
use bps_proto::Hash;

/// Where a peer's handshake stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Connected; no handshake finished yet (counts as pending for its IP).
    Pending,
    /// A handshake stream runs (counts as pending for its IP).
    Handshaking,
    /// The handshake completed: the peer proved this overlay.
    Ready { overlay: Hash },
}

#[derive(Debug)]
struct PeerState {
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
    /// Its IP has more than `p2p.pending_handshakes_per_ip_max` connections not handshaken.
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
    pending_per_ip: HashMap<IpAddr, u32>,
    pending_max: u32,
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
    pub fn new(pending_max: u32) -> Peers {
        Peers {
            peers: HashMap::new(),
            pending_per_ip: HashMap::new(),
            pending_max,
        }
    }

    /// A connection to `peer` is up.
    pub fn connected(&mut self, peer: PeerId, remote: Multiaddr, direction: Direction) {
        let ip = ip_of(&remote);
        let state = PeerState {
            ip,
            remote,
            direction,
            stage: Stage::Pending,
        };
        if let Some(old) = self.peers.insert(peer, state) {
            self.release(&old);
        }
        *self.pending_per_ip.entry(ip).or_insert(0) += 1;
    }

    /// `peer`'s connection closed.
    pub fn closed(&mut self, peer: &PeerId) {
        if let Some(old) = self.peers.remove(peer) {
            self.release(&old);
        }
    }

    fn release(&mut self, state: &PeerState) {
        if matches!(state.stage, Stage::Ready { .. }) {
            return;
        }
        if let Some(count) = self.pending_per_ip.get_mut(&state.ip) {
            *count -= 1;
            if *count == 0 {
                self.pending_per_ip.remove(&state.ip);
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
        let pending = self.pending_per_ip.get(&state.ip).copied().unwrap_or(0);
        if matches!(state.stage, Stage::Pending) && pending > self.pending_max {
            return Err(NoHandshake::PendingPerIp);
        }
        if let Stage::Ready { .. } = state.stage {
            // A new handshake on a ready connection counts as pending again until it ends.
            *self.pending_per_ip.entry(state.ip).or_insert(0) += 1;
        }
        state.stage = Stage::Handshaking;
        Ok((state.remote.clone(), state.direction))
    }

    /// `peer`'s handshake ended: with the overlay it proved, or failed (`None`).
    pub fn end_handshake(&mut self, peer: &PeerId, overlay: Option<Hash>) {
        let Some(state) = self.peers.get_mut(peer) else {
            return;
        };
        if state.stage != Stage::Handshaking {
            return;
        }
        match overlay {
            Some(overlay) => {
                state.stage = Stage::Ready { overlay };
                let ip = state.ip;
                if let Some(count) = self.pending_per_ip.get_mut(&ip) {
                    *count -= 1;
                    if *count == 0 {
                        self.pending_per_ip.remove(&ip);
                    }
                }
            }
            None => state.stage = Stage::Pending,
        }
    }

    /// The IP and overlay of `peer` once its handshake completed; `None` before.
    pub fn ready(&self, peer: &PeerId) -> Option<(IpAddr, Hash)> {
        let state = self.peers.get(peer)?;
        match state.stage {
            Stage::Ready { overlay } => Some((state.ip, overlay)),
            Stage::Pending | Stage::Handshaking => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Peers {
        /// Connections whose handshake has not completed, from `ip`.
        fn pending(&self, ip: IpAddr) -> u32 {
            self.pending_per_ip.get(&ip).copied().unwrap_or(0)
        }
    }

    fn addr(ip: &str) -> Multiaddr {
        format!("/ip4/{ip}/tcp/1634").parse().expect("multiaddr")
    }

    #[test]
    fn a_peer_is_ready_only_after_its_handshake_and_pending_counts_follow() {
        let mut peers = Peers::new(8);
        let peer = PeerId::random();
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        assert_eq!(peers.begin_handshake(&peer), Err(NoHandshake::Unknown));
        peers.connected(peer, addr("10.0.0.1"), Direction::Inbound);
        assert_eq!(peers.pending(ip), 1);
        assert!(peers.ready(&peer).is_none());
        assert!(peers.begin_handshake(&peer).is_ok());
        assert_eq!(peers.begin_handshake(&peer), Err(NoHandshake::Running));
        peers.end_handshake(&peer, None);
        assert!(
            peers.ready(&peer).is_none(),
            "a failed handshake proves nothing"
        );
        assert!(peers.begin_handshake(&peer).is_ok());
        peers.end_handshake(&peer, Some([7; 32]));
        assert_eq!(peers.ready(&peer), Some((ip, [7; 32])));
        assert_eq!(peers.pending(ip), 0);
        peers.closed(&peer);
        assert!(peers.ready(&peer).is_none());
        assert_eq!(peers.pending(ip), 0);
    }

    #[test]
    fn one_ip_past_its_pending_bound_gets_no_handshake() {
        let mut peers = Peers::new(2);
        let all: Vec<PeerId> = (0..3).map(|_| PeerId::random()).collect();
        for peer in &all {
            peers.connected(*peer, addr("10.0.0.2"), Direction::Inbound);
        }
        assert_eq!(
            peers.begin_handshake(&all[0]),
            Err(NoHandshake::PendingPerIp)
        );
        peers.closed(&all[2]);
        assert!(peers.begin_handshake(&all[0]).is_ok());
        let other = PeerId::random();
        peers.connected(other, addr("10.0.0.3"), Direction::Outbound);
        assert!(
            peers.begin_handshake(&other).is_ok(),
            "another IP has its own bound"
        );
    }
}
