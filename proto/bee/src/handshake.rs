//! Bee's handshake on `/swarm/handshake/15.0.0/handshake`, both roles, as a state machine fed
//! bytes and the clock (bee `pkg/p2p/libp2p/internal/handshake/handshake.go`).
//!
//! Owns: our side's settings ([`LocalNode`]), the exchange ([`Handshake`]: the dialer sends
//! `Syn`, reads `SynAck`, sends `Ack`; the responder reads `Syn`, sends `SynAck`, reads
//! `Ack`), every check bee makes of the other side, each a [`HandshakeError`] variant, and
//! the deadline the I/O side enforces ([`HANDSHAKE_DEADLINE_SECS`]).
//!
//! Never: reads a stream or a clock, or times anything out: the caller feeds what arrived and
//! `now`, writes what comes back and resets the stream on an error or at the deadline.
//!
//! Bee facts, checked at bee master a404d601:
//! - the dialer's `Syn` names how it reaches the responder (its addresses of the peer, each
//!   ending in `/p2p/<peer id>`); the responder answers with how it sees the dialer and its
//!   own record; the dialer checks that every address the responder observed ends in
//!   `/p2p/<our peer id>`. Bee's responder checks nothing of the `Syn` but that it parses;
//! - both check the network id first, then the record ([`crate::address::parse_address`]
//!   over their own network id) and its timestamp window;
//! - a missing `Syn`, `Ack` or record in a message that decodes is refused, not defaulted;
//! - bee limits its own welcome message to 140 bytes but does not check the peer's (the
//!   message cap bounds it): neither do we;
//! - bee's responder also asks its peer picker (kademlia) and both verify a full node's
//!   chequebook against the chain when configured: the broker has neither.
//!
//! Our record advertises the configured addresses, then the addresses the peer observed of us
//! that carry our peer id (bee adds its observed addresses too, after resolving NAT), cut to
//! bee's bounds; it is signed afresh per handshake at `now`.

use std::fmt;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use multiaddr::{Multiaddr, PeerId, Protocol};

use crate::address::{AddressError, Identity, PeerAddress, check_timestamp, parse_address};
use crate::delimited::{ReadError, read_message, write_message};
use crate::pb::{Ack, Syn, SynAck};
use crate::underlay::{UnderlayError, deserialize_underlays, serialize_truncated};

/// The handshake's libp2p protocol id.
pub const HANDSHAKE_PROTOCOL: &str = "/swarm/handshake/15.0.0/handshake";

/// How long a handshake may take from the stream's opening, in seconds (bee's
/// `handshakeTimeout`): a peer that never finishes must not hold a connection slot.
pub const HANDSHAKE_DEADLINE_SECS: u64 = 15;

/// Longest welcome message we send, in bytes (bee `MaxWelcomeMessageLength`): bee refuses
/// to configure a longer one.
pub const WELCOME_MESSAGE_BYTES_MAX: usize = 140;

/// Why our own settings are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The welcome message is longer than [`WELCOME_MESSAGE_BYTES_MAX`].
    WelcomeMessageTooLong {
        /// Its length in bytes.
        bytes: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WelcomeMessageTooLong { bytes } => write!(
                formatter,
                "welcome message of {bytes} bytes exceeds {WELCOME_MESSAGE_BYTES_MAX}"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Our side of every handshake: identity, libp2p peer id, mode, greeting and addresses.
#[derive(Debug)]
pub struct LocalNode {
    identity: Identity,
    peer_id: PeerId,
    full_node: bool,
    welcome_message: String,
    underlays: Vec<Multiaddr>,
}

impl LocalNode {
    /// Our settings; each of `underlays` gets `/p2p/<peer_id>` appended unless it names a
    /// peer already (bee's dialers need the peer id in every address they learn).
    ///
    /// # Errors
    /// A welcome message over [`WELCOME_MESSAGE_BYTES_MAX`] bytes.
    pub fn new(
        identity: Identity,
        peer_id: PeerId,
        full_node: bool,
        welcome_message: String,
        underlays: &[Multiaddr],
    ) -> Result<LocalNode, ConfigError> {
        if welcome_message.len() > WELCOME_MESSAGE_BYTES_MAX {
            return Err(ConfigError::WelcomeMessageTooLong {
                bytes: welcome_message.len(),
            });
        }
        let underlays = underlays
            .iter()
            .map(|address| with_peer_id(address, peer_id))
            .collect();
        Ok(LocalNode {
            identity,
            peer_id,
            full_node,
            welcome_message,
            underlays,
        })
    }

    /// The identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Our libp2p peer id.
    #[must_use]
    pub fn peer_id(&self) -> PeerId {
        self.peer_id
    }

    /// Our addresses as we advertise them, each ending in our peer id.
    pub fn underlays(&self) -> &[Multiaddr] {
        &self.underlays
    }

    /// Our `Ack`: the record for `underlays` signed at `now`, and our settings.
    fn ack(&self, observed: &[Multiaddr], now: i64) -> Ack {
        let advertised: Vec<Multiaddr> = self
            .underlays
            .iter()
            .chain(observed.iter().filter(|address| {
                final_peer_id(address).is_some_and(|peer_id| peer_id == self.peer_id)
            }))
            .cloned()
            .collect();
        Ack {
            address: Some(self.identity.sign(&advertised, now, None)),
            network_id: self.identity.network_id(),
            full_node: self.full_node,
            welcome_message: Bytes::copy_from_slice(self.welcome_message.as_bytes()),
        }
    }
}

/// `address` ending in `/p2p/<peer_id>`, unless it names a peer already (bee
/// `buildFullMA`).
pub fn with_peer_id(address: &Multiaddr, peer_id: PeerId) -> Multiaddr {
    if address
        .iter()
        .any(|protocol| matches!(protocol, Protocol::P2p(_)))
    {
        return address.clone();
    }
    address.clone().with(Protocol::P2p(peer_id))
}

/// The peer id of an address whose last component is `/p2p/<id>` (go-libp2p
/// `AddrInfoFromP2pAddr`, which bee's dialer uses on what the responder observed).
pub fn final_peer_id(address: &Multiaddr) -> Option<PeerId> {
    match address.iter().last() {
        Some(Protocol::P2p(peer_id)) => Some(peer_id),
        _ => None,
    }
}

/// The other side, once the handshake succeeded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its checked record: overlay, addresses, key.
    pub address: PeerAddress,
    /// Whether it says it serves Swarm's storage protocols.
    pub full_node: bool,
    /// Its greeting as sent (bee's `string`, not checked for UTF-8).
    pub welcome_message: Bytes,
    /// How it saw us: the addresses it observed.
    pub observed: Vec<Multiaddr>,
}

/// A handshake that finished: the last message to send, if any, and the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    /// The dialer's `Ack`, to write before the connection is used; `None` for the responder.
    pub send: Option<Bytes>,
    /// The peer.
    pub peer: Peer,
}

/// What [`Handshake::feed`] asks of the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Read more and feed again.
    NeedMore,
    /// Write these bytes, then feed again: the buffer may already hold the next message.
    Send(Bytes),
    /// The handshake succeeded.
    Done(Box<Completed>),
}

/// Why a handshake failed: every variant but [`HandshakeError::Finished`] is the peer's fault;
/// the stream is reset and the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandshakeError {
    /// A message's length or protobuf is malformed, or it is over the cap.
    Read(ReadError),
    /// The `SynAck` carries no `Syn`.
    MissingSyn,
    /// The `SynAck` carries no `Ack`.
    MissingAck,
    /// The `Ack` carries no record.
    MissingAddress,
    /// The addresses the peer observed of us do not parse.
    ObservedUnderlay(UnderlayError),
    /// An address the peer observed of us does not end in a peer id.
    ObservedWithoutPeerId {
        /// The address.
        address: Multiaddr,
    },
    /// An address the peer observed of us names another peer: it reached someone else.
    ObservedPeerIdMismatch {
        /// Our peer id (boxed, as `theirs`: a peer id is 80 bytes inline).
        ours: Box<PeerId>,
        /// The one it names.
        theirs: Box<PeerId>,
    },
    /// The peer is on another Swarm network.
    NetworkIdMismatch {
        /// Ours.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// The peer's record fails a check (signature, overlay, fields, underlays, timestamp).
    Address(AddressError),
    /// Fed after it succeeded or failed: a caller bug, not the peer's.
    Finished,
}

impl HandshakeError {
    /// A short stable label for metrics ("handshakes by reason").
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Read(ReadError::Frame(_)) => "framing",
            Self::Read(ReadError::Decode { .. }) => "protobuf",
            Self::MissingSyn | Self::MissingAck | Self::MissingAddress => "missing_field",
            Self::ObservedUnderlay(_) => "observed_underlay",
            Self::ObservedWithoutPeerId { .. } | Self::ObservedPeerIdMismatch { .. } => {
                "observed_peer_id"
            }
            Self::NetworkIdMismatch { .. } => "network_id",
            Self::Address(AddressError::TimestampInFuture { .. }) => "timestamp_in_future",
            Self::Address(AddressError::Signature(_) | AddressError::OverlayMismatch { .. }) => {
                "signature"
            }
            Self::Address(AddressError::Underlay(_) | AddressError::NoUnderlay) => "underlay",
            Self::Address(_) => "address",
            Self::Finished => "finished",
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(error) => write!(formatter, "handshake message: {error}"),
            Self::MissingSyn => formatter.write_str("SynAck carries no Syn"),
            Self::MissingAck => formatter.write_str("SynAck carries no Ack"),
            Self::MissingAddress => formatter.write_str("Ack carries no address record"),
            Self::ObservedUnderlay(error) => {
                write!(formatter, "addresses the peer observed of us: {error}")
            }
            Self::ObservedWithoutPeerId { address } => {
                write!(formatter, "observed address {address} names no peer id")
            }
            Self::ObservedPeerIdMismatch { ours, theirs } => {
                write!(formatter, "peer observed us as {theirs}, but we are {ours}")
            }
            Self::NetworkIdMismatch { ours, theirs } => {
                write!(formatter, "peer is on network {theirs}, we are on {ours}")
            }
            Self::Address(error) => write!(formatter, "peer's record: {error}"),
            Self::Finished => formatter.write_str("handshake already finished"),
        }
    }
}

impl std::error::Error for HandshakeError {}

impl From<ReadError> for HandshakeError {
    fn from(error: ReadError) -> Self {
        Self::Read(error)
    }
}

impl From<AddressError> for HandshakeError {
    fn from(error: AddressError) -> Self {
        Self::Address(error)
    }
}

#[derive(Debug)]
enum State {
    /// Dialer: `Syn` sent, waiting for `SynAck`.
    AwaitSynAck,
    /// Responder: waiting for `Syn`; holds how we reach the dialer, serialized.
    AwaitSyn {
        remote: Vec<u8>,
    },
    /// Responder: `SynAck` sent, waiting for `Ack`; holds how the dialer saw us.
    AwaitAck {
        observed: Vec<Multiaddr>,
    },
    Finished,
}

/// One handshake on one stream, in either role.
#[derive(Debug)]
pub struct Handshake {
    local: Arc<LocalNode>,
    state: State,
}

/// How we reach the peer, as the `Syn`'s or `SynAck`'s observed field: each address with
/// the peer's id, cut to bee's bounds.
fn observed_field(remote_peer: PeerId, remote_addresses: &[Multiaddr]) -> Vec<u8> {
    let full: Vec<Multiaddr> = remote_addresses
        .iter()
        .map(|address| with_peer_id(address, remote_peer))
        .collect();
    serialize_truncated(&full)
}

impl Handshake {
    /// The dialer's handshake with `remote_peer`, reached at `remote_addresses`; write the
    /// returned `Syn` first.
    pub fn dial(
        local: Arc<LocalNode>,
        remote_peer: PeerId,
        remote_addresses: &[Multiaddr],
    ) -> (Handshake, Bytes) {
        let syn = Syn {
            observed_underlay: Bytes::from(observed_field(remote_peer, remote_addresses)),
        };
        let handshake = Handshake {
            local,
            state: State::AwaitSynAck,
        };
        (handshake, write_message(&syn))
    }

    /// The responder's handshake with `remote_peer`, whose connection comes from
    /// `remote_addresses`.
    pub fn respond(
        local: Arc<LocalNode>,
        remote_peer: PeerId,
        remote_addresses: &[Multiaddr],
    ) -> Handshake {
        Handshake {
            local,
            state: State::AwaitSyn {
                remote: observed_field(remote_peer, remote_addresses),
            },
        }
    }

    /// Feeds what the stream delivered (`buf`, consumed from the front) at `now` (unix
    /// seconds). Bytes after the last handshake message stay in `buf`.
    ///
    /// # Errors
    /// The first check the peer fails; the handshake is then finished.
    pub fn feed(&mut self, buf: &mut BytesMut, now: i64) -> Result<Step, HandshakeError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let (next, step) = match state {
            State::AwaitSynAck => self.on_syn_ack(buf, now)?,
            State::AwaitSyn { remote } => self.on_syn(buf, remote, now)?,
            State::AwaitAck { observed } => self.on_ack(buf, observed, now)?,
            State::Finished => return Err(HandshakeError::Finished),
        };
        self.state = next;
        Ok(step)
    }

    fn on_syn_ack(&self, buf: &mut BytesMut, now: i64) -> Result<(State, Step), HandshakeError> {
        let Some(syn_ack) = read_message::<SynAck>(buf, "SynAck")? else {
            return Ok((State::AwaitSynAck, Step::NeedMore));
        };
        let syn = syn_ack.syn.ok_or(HandshakeError::MissingSyn)?;
        let ack = syn_ack.ack.ok_or(HandshakeError::MissingAck)?;
        if ack.address.is_none() {
            return Err(HandshakeError::MissingAddress);
        }
        let observed = self.check_observed(&syn.observed_underlay)?;
        let peer = self.check_ack(ack, observed, now)?;
        let send = Some(write_message(&self.local.ack(&peer.observed, now)));
        Ok((State::Finished, done(send, peer)))
    }

    fn on_syn(
        &self,
        buf: &mut BytesMut,
        remote: Vec<u8>,
        now: i64,
    ) -> Result<(State, Step), HandshakeError> {
        let Some(syn) = read_message::<Syn>(buf, "Syn")? else {
            return Ok((State::AwaitSyn { remote }, Step::NeedMore));
        };
        let observed = deserialize_underlays(&syn.observed_underlay)
            .map_err(HandshakeError::ObservedUnderlay)?;
        let syn_ack = SynAck {
            syn: Some(Syn {
                observed_underlay: Bytes::from(remote),
            }),
            ack: Some(self.local.ack(&observed, now)),
        };
        Ok((
            State::AwaitAck { observed },
            Step::Send(write_message(&syn_ack)),
        ))
    }

    fn on_ack(
        &self,
        buf: &mut BytesMut,
        observed: Vec<Multiaddr>,
        now: i64,
    ) -> Result<(State, Step), HandshakeError> {
        let Some(ack) = read_message::<Ack>(buf, "Ack")? else {
            return Ok((State::AwaitAck { observed }, Step::NeedMore));
        };
        let peer = self.check_ack(ack, observed, now)?;
        Ok((State::Finished, done(None, peer)))
    }

    /// The dialer's check of what the responder observed: every address ends in our id.
    fn check_observed(&self, field: &[u8]) -> Result<Vec<Multiaddr>, HandshakeError> {
        let observed = deserialize_underlays(field).map_err(HandshakeError::ObservedUnderlay)?;
        for address in &observed {
            let theirs =
                final_peer_id(address).ok_or_else(|| HandshakeError::ObservedWithoutPeerId {
                    address: address.clone(),
                })?;
            if theirs != self.local.peer_id {
                return Err(HandshakeError::ObservedPeerIdMismatch {
                    ours: Box::new(self.local.peer_id),
                    theirs: Box::new(theirs),
                });
            }
        }
        Ok(observed)
    }

    /// Bee's checks of the peer's `Ack`, in its order.
    fn check_ack(
        &self,
        ack: Ack,
        observed: Vec<Multiaddr>,
        now: i64,
    ) -> Result<Peer, HandshakeError> {
        let record = ack.address.ok_or(HandshakeError::MissingAddress)?;
        let ours = self.local.identity.network_id();
        if ack.network_id != ours {
            return Err(HandshakeError::NetworkIdMismatch {
                ours,
                theirs: ack.network_id,
            });
        }
        let address = parse_address(&record, ours)?;
        check_timestamp(address.timestamp, now)?;
        Ok(Peer {
            address,
            full_node: ack.full_node,
            welcome_message: ack.welcome_message,
            observed,
        })
    }
}

fn done(send: Option<Bytes>, peer: Peer) -> Step {
    Step::Done(Box::new(Completed { send, peer }))
}
