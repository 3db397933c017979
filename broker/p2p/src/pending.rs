//! The bound on inbound connections from one IP still in the libp2p upgrade (TCP accepted,
//! the Noise or TLS handshake and yamux not done): a `NetworkBehaviour` with no handler of
//! its own that denies the next inbound connection of an IP at the bound.
//!
//! libp2p's `connection_limits` bounds pending connections in total, not per address; this
//! is the per-address bound beside it, so one address cannot hold every upgrade slot.
//! Never does: bound established connections (`connection_limits` does) or streams.

use std::{
    collections::HashMap,
    convert::Infallible,
    fmt,
    net::IpAddr,
    task::{Context, Poll},
};

use libp2p::{
    Multiaddr, PeerId,
    core::{Endpoint, transport::PortUse},
    multiaddr::Protocol,
    swarm::{
        ConnectionDenied, ConnectionId, FromSwarm, NetworkBehaviour, THandler, THandlerInEvent,
        THandlerOutEvent, ToSwarm, dummy,
    },
};

/// Counts each IP's inbound connections still upgrading.
#[derive(Debug)]
pub struct PendingPerIp {
    max: u32,
    pending: HashMap<ConnectionId, IpAddr>,
    per_ip: HashMap<IpAddr, u32>,
}

/// The denial the swarm reports (`IncomingConnectionError`) for a connection over the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingPerIpExceeded {
    pub ip: IpAddr,
    pub max: u32,
}

impl fmt::Display for PendingPerIpExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} already has {} connections in the libp2p upgrade",
            self.ip, self.max
        )
    }
}

impl std::error::Error for PendingPerIpExceeded {}

impl PendingPerIp {
    pub fn new(max: u32) -> Self {
        Self {
            max,
            pending: HashMap::new(),
            per_ip: HashMap::new(),
        }
    }

    /// Connections of `ip` still upgrading.
    #[cfg(test)]
    pub fn pending(&self, ip: IpAddr) -> u32 {
        self.per_ip.get(&ip).copied().unwrap_or(0)
    }

    fn admit(
        &mut self,
        connection: ConnectionId,
        remote: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        // An address with no IP (none this host listens on) is not bounded here.
        let Some(ip) = ip_of(remote) else {
            return Ok(());
        };
        let count = self.per_ip.entry(ip).or_insert(0);
        if *count >= self.max {
            return Err(ConnectionDenied::new(PendingPerIpExceeded {
                ip,
                max: self.max,
            }));
        }
        *count += 1;
        self.pending.insert(connection, ip);
        Ok(())
    }

    /// The upgrade of `connection` ended: established, failed or denied by another bound.
    fn release(&mut self, connection: ConnectionId) {
        let Some(ip) = self.pending.remove(&connection) else {
            return;
        };
        if let Some(count) = self.per_ip.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&ip);
            }
        }
    }
}

/// The IP a multiaddr starts with.
pub fn ip_of(addr: &Multiaddr) -> Option<IpAddr> {
    match addr.iter().next()? {
        Protocol::Ip4(ip) => Some(ip.into()),
        Protocol::Ip6(ip) => Some(ip.into()),
        _ => None,
    }
}

impl NetworkBehaviour for PendingPerIp {
    type ConnectionHandler = dummy::ConnectionHandler;
    type ToSwarm = Infallible;

    fn handle_pending_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _local_addr: &Multiaddr,
        remote_addr: &Multiaddr,
    ) -> Result<(), ConnectionDenied> {
        self.admit(connection_id, remote_addr)
    }

    fn handle_established_inbound_connection(
        &mut self,
        connection_id: ConnectionId,
        _peer: PeerId,
        _local_addr: &Multiaddr,
        _remote_addr: &Multiaddr,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        self.release(connection_id);
        Ok(dummy::ConnectionHandler)
    }

    fn handle_established_outbound_connection(
        &mut self,
        _connection_id: ConnectionId,
        _peer: PeerId,
        _addr: &Multiaddr,
        _role_override: Endpoint,
        _port_use: PortUse,
    ) -> Result<THandler<Self>, ConnectionDenied> {
        Ok(dummy::ConnectionHandler)
    }

    fn on_swarm_event(&mut self, event: FromSwarm) {
        match event {
            FromSwarm::ListenFailure(failure) => self.release(failure.connection_id),
            // Established past a behaviour before this one that denied it after the upgrade.
            FromSwarm::ConnectionEstablished(established) => {
                self.release(established.connection_id)
            }
            _ => {}
        }
    }

    fn on_connection_handler_event(
        &mut self,
        _peer_id: PeerId,
        _connection_id: ConnectionId,
        event: THandlerOutEvent<Self>,
    ) {
        libp2p::core::util::unreachable(event)
    }

    fn poll(
        &mut self,
        _cx: &mut Context<'_>,
    ) -> Poll<ToSwarm<Self::ToSwarm, THandlerInEvent<Self>>> {
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_per_ip_and_released_when_the_upgrade_ends() {
        let mut limiter = PendingPerIp::new(2);
        let a: Multiaddr = "/ip4/10.0.0.1/tcp/5000".parse().unwrap();
        let b: Multiaddr = "/ip4/10.0.0.2/tcp/5000".parse().unwrap();
        let ids: Vec<_> = (0..4)
            .map(|_| ConnectionId::new_unchecked(rand_id()))
            .collect();
        assert!(limiter.admit(ids[0], &a).is_ok());
        assert!(limiter.admit(ids[1], &a).is_ok());
        assert!(
            limiter.admit(ids[2], &a).is_err(),
            "a third pending connection of one IP"
        );
        assert!(
            limiter.admit(ids[3], &b).is_ok(),
            "another IP has its own bound"
        );
        limiter.release(ids[0]);
        limiter.release(ids[0]);
        assert_eq!(
            limiter.pending(ip_of(&a).unwrap()),
            1,
            "a release counts once"
        );
        assert!(limiter.admit(ids[2], &a).is_ok());
    }

    fn rand_id() -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(1_000_000);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}
