//! The other control streams a bee node opens to a connected peer, and the headers exchange
//! in front of each (bee `pkg/p2p/libp2p/headers.go`, `pkg/pricing/pricing.go`,
//! `pkg/hive/hive.go`).
//!
//! Owns: the protocol ids of pricing and hive, reading a stream's [`Headers`] and our empty
//! answer, reading pricing's threshold and hive's peer records (each record checked on its
//! own: bee drops a bad one and keeps the rest).
//!
//! Never: acts on what it reads. The broker stores no peers and settles nothing; it reads
//! these messages only because bee disconnects a peer whose pricing or hive stream fails.
//!
//! Bee facts, checked at bee master a404d601: on every stream but the handshake's, the side
//! that opened it writes its `Headers` first and reads the answer, the side that accepted it
//! reads them and answers (bee answers what its handler returns, often nothing: an empty
//! message, one zero byte on the wire). Bee keeps the last value of a repeated key. Pricing
//! sends one `AnnouncePaymentThreshold` each way when a connection starts; hive sends batches
//! of at most 30 records.

use bytes::{Bytes, BytesMut};

use crate::address::{AddressError, PeerAddress, parse_address};
use crate::delimited::{ReadError, read_message, write_message};
use crate::pb::{AnnouncePaymentThreshold, Headers, Peers};

/// Pricing's libp2p protocol id.
pub const PRICING_PROTOCOL: &str = "/swarm/pricing/1.0.0/pricing";

/// Hive's libp2p protocol id.
pub const HIVE_PROTOCOL: &str = "/swarm/hive/2.0.0/peers";

/// Most records bee puts in one hive message (its `maxBatchSize`); a receiver does not
/// enforce it (the message cap bounds a batch), it says what to expect.
pub const HIVE_PEERS_PER_MESSAGE: usize = 30;

/// Reads a stream's headers off the front of `buf` (`Ok(None)`: need more).
///
/// # Errors
/// A malformed or oversize message.
pub fn read_headers(buf: &mut BytesMut) -> Result<Option<Headers>, ReadError> {
    read_message(buf, "Headers")
}

/// Our answer to a peer's headers, and the headers we open a stream with: none.
pub fn empty_headers() -> Bytes {
    write_message(&Headers::default())
}

/// Reads pricing's announcement off the front of `buf` (`Ok(None)`: need more).
///
/// # Errors
/// A malformed or oversize message.
pub fn read_payment_threshold(
    buf: &mut BytesMut,
) -> Result<Option<AnnouncePaymentThreshold>, ReadError> {
    read_message(buf, "AnnouncePaymentThreshold")
}

/// Reads hive's batch off the front of `buf` (`Ok(None)`: need more).
///
/// # Errors
/// A malformed or oversize message.
pub fn read_peers(buf: &mut BytesMut) -> Result<Option<Peers>, ReadError> {
    read_message(buf, "Peers")
}

/// Each record of a hive batch checked on its own for `network_id` (ours), in order.
pub fn check_peers(peers: &Peers, network_id: u64) -> Vec<Result<PeerAddress, AddressError>> {
    peers
        .peers
        .iter()
        .map(|record| parse_address(record, network_id))
        .collect()
}
