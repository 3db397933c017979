//! The control streams bee opens to every peer it keeps besides the handshake: pricing
//! (`/swarm/pricing/1.0.0/pricing`, one payment threshold announced) and hive
//! (`/swarm/hive/2.0.0/peers`, a batch of peer records). Each is accepted, its headers
//! answered, its one message read and checked with bps-bee, and the stream closed in order:
//! bee disconnects a peer whose pricing or hive stream fails.
//! Never does: act on what it reads (the broker settles nothing and keeps no address book).

use std::time::Duration;

use bps_bee::{HIVE_PROTOCOL, PRICING_PROTOCOL, check_peers, read_payment_threshold, read_peers};
use bps_p2p::StreamPipe;

use super::exchange::{self, Fault, Incoming};

/// Which control stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Pricing,
    Hive,
}

impl Side {
    /// The control stream of `protocol`, if it is one.
    pub fn of(protocol: &str) -> Option<Side> {
        match protocol {
            PRICING_PROTOCOL => Some(Side::Pricing),
            HIVE_PROTOCOL => Some(Side::Hive),
            _ => None,
        }
    }
}

/// Serves one pricing or hive stream within `deadline`; records of a hive batch that fail
/// their checks are counted in the result (bee drops them and keeps the rest).
pub async fn serve(
    pipe: StreamPipe,
    side: Side,
    network_id: u64,
    deadline: Duration,
) -> Result<usize, Fault> {
    let StreamPipe {
        inbound,
        outbound,
        reset,
        ..
    } = pipe;
    let mut incoming = Incoming::new(inbound);
    let read = monoio::time::timeout(deadline, async {
        exchange::headers(&mut incoming, &outbound).await?;
        match side {
            Side::Pricing => incoming.next(read_payment_threshold).await.map(|_| 0),
            Side::Hive => {
                let peers = incoming.next(read_peers).await?;
                let bad = check_peers(&peers, network_id)
                    .iter()
                    .filter(|checked| checked.is_err())
                    .count();
                Ok(bad)
            }
        }
    })
    .await
    .unwrap_or(Err(Fault::Deadline));
    match read {
        Ok(bad) => {
            drop(outbound);
            Ok(bad)
        }
        Err(fault) => {
            reset.reset();
            Err(fault)
        }
    }
}
