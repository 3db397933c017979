//! The libp2p host's events on the core that owns p2p streams: connections recorded in
//! `Peers`, bee's handshake started on every connection we dialed (we are the dialer) and
//! answered on every handshake stream a peer opens (we respond), every stream handed to its
//! task by protocol: a pubsub stream of a handshaken peer becomes a BPS stream of this core
//! (`stream`; one that arrives while the peer's handshake runs waits for its end), one of a
//! peer with no handshake completed or running is reset; pricing and hive
//! are served (`side`); the outcomes counted in the core's `P2pMetrics`. A connection whose
//! handshake failed, or that has none completed or running at the handshake deadline, is
//! closed (bee closes a connection whose handshake fails too), so a peer cannot hold a
//! connection slot without proving its overlay.
//! Never does: block the core (every stream runs in a task of its own) or drop an event
//! (the host waits for room, `bps_p2p::EVENTS_QUEUED`).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bps_bee::{HANDSHAKE_PROTOCOL, LocalNode};
use bps_p2p::{
    Direction, HostEvent, HostHandle, Multiaddr, PUBSUB_PROTOCOL, PeerId, StreamPipe,
    StreamProtocol,
};
use bps_proto::Hash;

use super::exchange::Fault;
use super::peers::{NoHandshake, Peers};
use super::side::{self, Side};
use super::{handshake, stream};
use crate::io::link::CoreLink;

/// The dispatcher's state, shared by the tasks it starts on this core.
pub struct Dispatcher {
    pub link: Rc<CoreLink>,
    pub handle: HostHandle,
    pub node: Arc<LocalNode>,
    pub peers: RefCell<Peers>,
    pub network_id: u64,
    pub deadline: Duration,
    /// Woken whenever a handshake ends or a connection closes (pubsub streams wait on it).
    pub handshakes_ended: tokio::sync::Notify,
}

impl Dispatcher {
    /// Handles one event of the host.
    pub fn on_event(self: &Rc<Self>, event: HostEvent) {
        match event {
            HostEvent::Listening { address } => {
                let address = bps_bee::with_peer_id(&address, self.node.peer_id());
                tracing::info!(%address, "p2p listening");
            }
            HostEvent::ConnectionEstablished {
                peer,
                remote,
                direction,
                ..
            } => {
                self.link.metrics().p2p.connection(direction);
                let serial = self
                    .peers
                    .borrow_mut()
                    .connected(peer, remote.clone(), direction);
                monoio::spawn(Rc::clone(self).close_if_idle(peer, serial));
                if direction == Direction::Outbound {
                    monoio::spawn(Rc::clone(self).dial_handshake(peer, remote));
                }
            }
            HostEvent::ConnectionClosed { peer, cause, .. } => {
                self.peers.borrow_mut().closed(&peer);
                self.handshakes_ended.notify_waiters();
                tracing::debug!(%peer, cause = cause.as_deref().unwrap_or("closed"), "p2p connection closed");
            }
            HostEvent::DialFailed { peer, error } => {
                tracing::debug!(peer = ?peer, %error, "p2p dial failed");
            }
            HostEvent::IncomingFailed { remote, error } => {
                tracing::debug!(%remote, %error, "p2p inbound connection failed");
            }
            HostEvent::StreamOpened(pipe) => self.on_stream(pipe),
            HostEvent::Identified { .. }
            | HostEvent::IdentifySent { .. }
            | HostEvent::Pong { .. } => {}
        }
    }

    fn on_stream(self: &Rc<Self>, pipe: StreamPipe) {
        let protocol = pipe.protocol.as_ref().to_owned();
        self.link.metrics().p2p.stream(&protocol);
        if protocol == HANDSHAKE_PROTOCOL {
            monoio::spawn(Rc::clone(self).respond_handshake(pipe));
        } else if protocol == PUBSUB_PROTOCOL {
            monoio::spawn(Rc::clone(self).pubsub(pipe));
        } else if let Some(side) = Side::of(&protocol) {
            let (link, network_id, deadline) =
                (Rc::clone(&self.link), self.network_id, self.deadline);
            monoio::spawn(async move {
                if let Err(fault) = side::serve(pipe, side, network_id, deadline).await {
                    link.metrics().p2p.stream_refused(fault.reason());
                }
            });
        } else {
            pipe.reset.reset();
        }
    }

    /// A pubsub stream: run once its peer's handshake completed (waiting for one that runs,
    /// within the deadline: bee opens its streams as soon as it sent its last handshake
    /// message, which we may not have read yet); reset when none completed or runs.
    async fn pubsub(self: Rc<Self>, pipe: StreamPipe) {
        let ready = monoio::time::timeout(self.deadline, self.handshaken(pipe.peer))
            .await
            .ok()
            .flatten();
        let Some(overlay) = ready else {
            self.link
                .metrics()
                .p2p
                .stream_refused(Fault::NoHandshake.reason());
            tracing::debug!(peer = %pipe.peer, "p2p pubsub stream without a handshake: reset");
            pipe.reset.reset();
            return;
        };
        if let Err(fault) = stream::run(Rc::clone(&self.link), pipe, overlay, self.deadline).await {
            self.link.metrics().p2p.stream_refused(fault.reason());
        }
    }

    /// `peer`'s overlay once its handshake completed, waiting while one runs; `None` when
    /// none completed and none runs.
    async fn handshaken(&self, peer: PeerId) -> Option<Hash> {
        loop {
            // Made before the check, so an end between the check and the wait is not lost.
            let ended = self.handshakes_ended.notified();
            {
                let peers = self.peers.borrow();
                if let Some(ready) = peers.ready(&peer) {
                    return Some(ready);
                }
                if !peers.handshaking(&peer) {
                    return None;
                }
            }
            ended.await;
        }
    }

    /// The peer opened a handshake stream: we respond.
    async fn respond_handshake(self: Rc<Self>, pipe: StreamPipe) {
        let peer = pipe.peer;
        let begun = self.peers.borrow_mut().begin_handshake(&peer);
        let outcome = match begun {
            Ok((remote, _)) => {
                handshake::respond(pipe, Arc::clone(&self.node), &remote, self.deadline).await
            }
            Err(refused) => {
                pipe.reset.reset();
                Err(Fault::Refused(refused))
            }
        };
        self.handshake_ended(peer, outcome.map(|peer| peer.address.overlay))
            .await;
    }

    /// We dialed `peer`: we open the handshake stream and lead it.
    async fn dial_handshake(self: Rc<Self>, peer: PeerId, remote: Multiaddr) {
        let begun = self.peers.borrow_mut().begin_handshake(&peer);
        let outcome = match begun {
            Ok(_) => {
                let protocol = StreamProtocol::new(HANDSHAKE_PROTOCOL);
                match self.handle.open_stream(peer, protocol).await {
                    Ok(pipe) => {
                        handshake::dial(pipe, Arc::clone(&self.node), peer, &remote, self.deadline)
                            .await
                    }
                    Err(error) => {
                        tracing::debug!(%peer, %error, "p2p handshake stream not opened");
                        Err(Fault::Ended)
                    }
                }
            }
            Err(refused) => Err(Fault::Refused(refused)),
        };
        self.handshake_ended(peer, outcome.map(|peer| peer.address.overlay))
            .await;
    }

    /// Closes connection `serial` of `peer` if, at the handshake deadline, no handshake of
    /// it completed or runs (a running one has its own deadline).
    async fn close_if_idle(self: Rc<Self>, peer: PeerId, serial: u64) {
        monoio::time::sleep(self.deadline).await;
        if self.peers.borrow().idle_since(&peer, serial) {
            self.link
                .metrics()
                .p2p
                .handshake(Some(Fault::Unhandshaken.reason()));
            tracing::debug!(%peer, "p2p connection without a handshake: closed");
            self.disconnect(peer).await;
        }
    }

    async fn disconnect(&self, peer: PeerId) {
        // A host that stopped has closed every connection already.
        let _ = self.handle.disconnect(peer).await;
    }

    async fn handshake_ended(&self, peer: PeerId, outcome: Result<Hash, Fault>) {
        self.link
            .metrics()
            .p2p
            .handshake(outcome.as_ref().err().map(Fault::reason));
        match outcome {
            Ok(overlay) => {
                tracing::info!(%peer, overlay = %hex::encode(overlay), "p2p handshake completed");
                self.peers.borrow_mut().end_handshake(&peer, Some(overlay));
                self.handshakes_ended.notify_waiters();
            }
            // Another handshake of the peer runs, or the peer is gone: nothing of ours ended.
            Err(Fault::Refused(NoHandshake::Running | NoHandshake::Unknown)) => {}
            Err(fault) => {
                tracing::debug!(%peer, %fault, "p2p handshake failed: connection closed");
                self.peers.borrow_mut().end_handshake(&peer, None);
                self.handshakes_ended.notify_waiters();
                self.disconnect(peer).await;
            }
        }
    }
}
