//! Bee's handshake on a `/swarm/handshake/15.0.0/handshake` stream, in either role, as I/O
//! around bps-bee's state machine: the bytes the stream delivers are fed to `Handshake` with
//! the unix clock, what it answers is written, the whole exchange within the handshake
//! deadline. A stream that fails is reset; one that succeeds is closed in order (bee closes
//! it too).
//! Never does: a check of its own (every check is bps-bee's), or decide what the peer may
//! do next (the dispatcher records the outcome in `Peers`).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bps_bee::{Handshake, LocalNode, Peer, Step};
use bps_p2p::{Multiaddr, PeerId, StreamPipe};

use super::exchange::{self, Fault, Incoming};

/// The responder's side: the peer dialed us and opened the stream.
pub async fn respond(
    pipe: StreamPipe,
    local: Arc<LocalNode>,
    remote: &Multiaddr,
    deadline: Duration,
) -> Result<Peer, Fault> {
    let handshake = Handshake::respond(local, pipe.peer, std::slice::from_ref(remote));
    run(pipe, handshake, None, deadline).await
}

/// The dialer's side, on a stream we opened to `peer`.
pub async fn dial(
    pipe: StreamPipe,
    local: Arc<LocalNode>,
    peer: PeerId,
    remote: &Multiaddr,
    deadline: Duration,
) -> Result<Peer, Fault> {
    let (handshake, syn) = Handshake::dial(local, peer, std::slice::from_ref(remote));
    run(pipe, handshake, Some(syn), deadline).await
}

async fn run(
    pipe: StreamPipe,
    handshake: Handshake,
    first: Option<bytes::Bytes>,
    deadline: Duration,
) -> Result<Peer, Fault> {
    let StreamPipe {
        inbound,
        outbound,
        reset,
        ..
    } = pipe;
    let mut incoming = Incoming::new(inbound);
    let exchanged = monoio::time::timeout(
        deadline,
        exchange_messages(handshake, first, &mut incoming, &outbound),
    )
    .await
    .unwrap_or(Err(Fault::Deadline));
    match exchanged {
        Ok(peer) => {
            // The sender dropped: the stream's write side closes once the last message is out.
            drop(outbound);
            Ok(peer)
        }
        Err(fault) => {
            reset.reset();
            Err(fault)
        }
    }
}

async fn exchange_messages(
    mut handshake: Handshake,
    first: Option<bytes::Bytes>,
    incoming: &mut Incoming,
    outbound: &tokio::sync::mpsc::Sender<bytes::Bytes>,
) -> Result<Peer, Fault> {
    if let Some(syn) = first {
        exchange::send(outbound, syn).await?;
    }
    loop {
        match handshake
            .feed(&mut incoming.buf, unix_now())
            .map_err(Fault::Handshake)?
        {
            Step::NeedMore => incoming.more().await?,
            Step::Send(bytes) => exchange::send(outbound, bytes).await?,
            Step::Done(completed) => {
                if let Some(ack) = completed.send {
                    exchange::send(outbound, ack).await?;
                }
                return Ok(completed.peer);
            }
        }
    }
}

/// Unix seconds, the handshake's clock (a clock before 1970 reads as 0).
fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}
