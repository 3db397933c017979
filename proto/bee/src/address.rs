//! A node's Swarm identity and the signed record bee calls a `BzzAddress` (bee
//! `pkg/bzz/address.go`, `pkg/bzz/timestamp.go`, `pkg/crypto/crypto.go`).
//!
//! Owns: overlay derivation ([`overlay_address`]), the signed bytes ([`sign_data`]), our own
//! identity and the records it signs ([`Identity`]), and a peer's record checked as bee checks
//! it ([`parse_address`], [`check_timestamp`]) into a [`PeerAddress`].
//!
//! Never: keeps state between records. Bee's address book (a record older than the stored
//! one is stale) and its chequebook verification against the chain are not ours: the broker
//! stores no peers and settles nothing.
//!
//! Bee facts, checked at bee master a404d601 (the text agrees except where noted):
//! - overlay = keccak256(eth address ‖ le64(network id) ‖ nonce), the nonce exactly 32 bytes
//!   (`NewOverlayFromEthereumAddress`);
//! - signed = "bee-handshake-" ‖ underlay field ‖ overlay ‖ be64(network id) ‖ nonce ‖
//!   be64(timestamp) ‖ chequebook, EIP-191 (`generateSignData`). Correction: the chequebook
//!   part is always 20 bytes, zeros when the node has none (bee signs
//!   `common.Address.Bytes()`), and bee sends those 20 bytes too; a field of any length but 0
//!   or 20 is refused;
//! - the timestamp is unix seconds, must be positive, and may lead our clock by at most
//!   [`CLOCK_SKEW_MAX_SECS`] (`CheckTimestamp`, `MaxClockSkew`);
//! - the network id signed is the receiver's own: a record from another network does not
//!   recover to its overlay;
//! - a record must carry at least one underlay address.

use std::fmt;

use bps_proto::{ADDRESS_BYTES, Address, Hash, keccak256};
use bps_verify::{KeyError, SignatureError, SigningKey};
use bytes::Bytes;
use k256::FieldBytes;
use multiaddr::Multiaddr;

use crate::eip191::{recover_message, sign_message};
use crate::pb::BzzAddress;
use crate::underlay::{UnderlayError, deserialize_underlays, serialize_truncated};

/// Bytes of the nonce an overlay is mined with (bee `NonceLength`).
pub const NONCE_BYTES: usize = 32;
/// Bytes of an overlay address (a keccak256 output).
pub const OVERLAY_BYTES: usize = 32;
/// Bytes of a signature `r ‖ s ‖ v`.
pub const SIGNATURE_BYTES: usize = 65;
/// How far a record's timestamp may lead our clock, in seconds (bee `MaxClockSkew`): clocks
/// drift, a record from the future would outrank every honest one.
pub const CLOCK_SKEW_MAX_SECS: i64 = 60;
/// The domain tag in front of the signed bytes, so a record signature is never a signature
/// over anything else.
pub const SIGN_DATA_PREFIX: &[u8] = b"bee-handshake-";

/// The overlay of `eth_address` on `network_id` with `nonce` (bee
/// `NewOverlayFromEthereumAddress`).
pub fn overlay_address(eth_address: &Address, network_id: u64, nonce: &[u8; NONCE_BYTES]) -> Hash {
    let mut data = [0u8; ADDRESS_BYTES + 8 + NONCE_BYTES];
    data[..ADDRESS_BYTES].copy_from_slice(eth_address);
    data[ADDRESS_BYTES..ADDRESS_BYTES + 8].copy_from_slice(&network_id.to_le_bytes());
    data[ADDRESS_BYTES + 8..].copy_from_slice(nonce);
    keccak256(&data)
}

/// The bytes a record's signature covers (bee `generateSignData`); `chequebook` is 20 bytes,
/// zeros for none.
pub fn sign_data(
    underlay: &[u8],
    overlay: &[u8],
    network_id: u64,
    nonce: &[u8],
    timestamp: i64,
    chequebook: &Address,
) -> Vec<u8> {
    let mut data = Vec::with_capacity(
        SIGN_DATA_PREFIX.len() + underlay.len() + overlay.len() + nonce.len() + 16 + ADDRESS_BYTES,
    );
    data.extend_from_slice(SIGN_DATA_PREFIX);
    data.extend_from_slice(underlay);
    data.extend_from_slice(overlay);
    data.extend_from_slice(&network_id.to_be_bytes());
    data.extend_from_slice(nonce);
    data.extend_from_slice(&timestamp.to_be_bytes());
    data.extend_from_slice(chequebook);
    data
}

/// Our Swarm identity: the key, the nonce and the network its overlay is derived for.
#[derive(Clone)]
pub struct Identity {
    key: k256::ecdsa::SigningKey,
    eth_address: Address,
    nonce: [u8; NONCE_BYTES],
    network_id: u64,
    overlay: Hash,
}

impl fmt::Debug for Identity {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        formatter
            .debug_struct("Identity")
            .field("overlay", &hex::encode(self.overlay))
            .field("network_id", &self.network_id)
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// The identity of `key` with `nonce` on `network_id`.
    ///
    /// # Errors
    /// Never for a key `bps_verify` made; the error is k256's refusal of the same bytes.
    pub fn new(
        key: &SigningKey,
        nonce: [u8; NONCE_BYTES],
        network_id: u64,
    ) -> Result<Identity, KeyError> {
        let signing = k256::ecdsa::SigningKey::from_bytes(&FieldBytes::from(key.to_bytes()))
            .map_err(|_| KeyError::OutOfRange)?;
        let eth_address = key.address();
        Ok(Identity {
            key: signing,
            eth_address,
            nonce,
            network_id,
            overlay: overlay_address(&eth_address, network_id, &nonce),
        })
    }

    /// The overlay address.
    pub fn overlay(&self) -> Hash {
        self.overlay
    }

    /// The Ethereum address of the key.
    pub fn eth_address(&self) -> Address {
        self.eth_address
    }

    /// The network id.
    pub fn network_id(&self) -> u64 {
        self.network_id
    }

    /// Our record for `underlays` (cut to bee's bounds, [`crate::underlay`]), signed at
    /// `timestamp` (unix seconds) with `chequebook` (none: the zero address).
    pub fn sign(
        &self,
        underlays: &[Multiaddr],
        timestamp: i64,
        chequebook: Option<Address>,
    ) -> BzzAddress {
        let underlay = serialize_truncated(underlays);
        let chequebook = chequebook.unwrap_or_default();
        let data = sign_data(
            &underlay,
            &self.overlay,
            self.network_id,
            &self.nonce,
            timestamp,
            &chequebook,
        );
        BzzAddress {
            signature: Bytes::copy_from_slice(&sign_message(&self.key, &data)),
            underlay: Bytes::from(underlay),
            overlay: Bytes::copy_from_slice(&self.overlay),
            nonce: Bytes::copy_from_slice(&self.nonce),
            timestamp,
            chequebook_address: Bytes::copy_from_slice(&chequebook),
        }
    }
}

/// A peer's record that passed every check of [`parse_address`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddress {
    /// Its addresses, at least one.
    pub underlays: Vec<Multiaddr>,
    /// Its overlay, which its key and nonce derive.
    pub overlay: Hash,
    /// The Ethereum address its signature recovers to.
    pub eth_address: Address,
    /// The nonce.
    pub nonce: [u8; NONCE_BYTES],
    /// When it was signed, unix seconds (positive).
    pub timestamp: i64,
    /// Its chequebook; `None` when absent or the zero address (bee: "missing").
    pub chequebook: Option<Address>,
    /// The signature.
    pub signature: [u8; SIGNATURE_BYTES],
}

/// Why a peer's record is refused: each a peer fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressError {
    /// The nonce is not [`NONCE_BYTES`] long.
    NonceLength {
        /// Its length.
        bytes: usize,
    },
    /// The chequebook is neither empty nor 20 bytes.
    ChequebookLength {
        /// Its length.
        bytes: usize,
    },
    /// The timestamp is zero or negative.
    TimestampNotPositive {
        /// The timestamp.
        timestamp: i64,
    },
    /// The timestamp leads our clock by more than [`CLOCK_SKEW_MAX_SECS`].
    TimestampInFuture {
        /// The timestamp, unix seconds.
        timestamp: i64,
        /// Our clock, unix seconds.
        now: i64,
    },
    /// The signature is not [`SIGNATURE_BYTES`] long.
    SignatureLength {
        /// Its length.
        bytes: usize,
    },
    /// The signature recovers no key.
    Signature(SignatureError),
    /// The key the signature recovers does not derive the claimed overlay (a forged or
    /// altered record, or one signed for another network id).
    OverlayMismatch {
        /// The overlay the record claims (any length).
        claimed: Bytes,
        /// The overlay of the recovered key on our network.
        recovered: Hash,
    },
    /// The underlay field does not parse.
    Underlay(UnderlayError),
    /// The underlay field holds no address.
    NoUnderlay,
}

impl fmt::Display for AddressError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonceLength { bytes } => {
                write!(formatter, "nonce of {bytes} bytes, not {NONCE_BYTES}")
            }
            Self::ChequebookLength { bytes } => {
                write!(
                    formatter,
                    "chequebook of {bytes} bytes, not 0 or {ADDRESS_BYTES}"
                )
            }
            Self::TimestampNotPositive { timestamp } => {
                write!(formatter, "timestamp {timestamp} is not positive")
            }
            Self::TimestampInFuture { timestamp, now } => write!(
                formatter,
                "timestamp {timestamp} is more than {CLOCK_SKEW_MAX_SECS} s ahead of our clock {now}"
            ),
            Self::SignatureLength { bytes } => {
                write!(
                    formatter,
                    "signature of {bytes} bytes, not {SIGNATURE_BYTES}"
                )
            }
            Self::Signature(error) => write!(formatter, "bad record signature: {error}"),
            Self::OverlayMismatch { claimed, recovered } => write!(
                formatter,
                "signature recovers overlay {} but the record claims {}",
                hex::encode(recovered),
                hex::encode(claimed)
            ),
            Self::Underlay(error) => write!(formatter, "bad underlay: {error}"),
            Self::NoUnderlay => formatter.write_str("record carries no underlay address"),
        }
    }
}

impl std::error::Error for AddressError {}

/// A peer's record checked as bee's `ParseAddress` checks it, with the signature over
/// `network_id` (ours). The timestamp is only checked positive; its window is
/// [`check_timestamp`], which needs the clock.
///
/// # Errors
/// The first check that fails, in bee's order.
pub fn parse_address(wire: &BzzAddress, network_id: u64) -> Result<PeerAddress, AddressError> {
    let nonce: [u8; NONCE_BYTES] =
        wire.nonce
            .as_ref()
            .try_into()
            .map_err(|_| AddressError::NonceLength {
                bytes: wire.nonce.len(),
            })?;
    let chequebook = parse_chequebook(&wire.chequebook_address)?;
    if wire.timestamp <= 0 {
        return Err(AddressError::TimestampNotPositive {
            timestamp: wire.timestamp,
        });
    }
    let signature: [u8; SIGNATURE_BYTES] =
        wire.signature
            .as_ref()
            .try_into()
            .map_err(|_| AddressError::SignatureLength {
                bytes: wire.signature.len(),
            })?;
    let data = sign_data(
        &wire.underlay,
        &wire.overlay,
        network_id,
        &nonce,
        wire.timestamp,
        &chequebook,
    );
    let eth_address = recover_message(&signature, &data).map_err(AddressError::Signature)?;
    let recovered = overlay_address(&eth_address, network_id, &nonce);
    if wire.overlay.as_ref() != recovered {
        return Err(AddressError::OverlayMismatch {
            claimed: wire.overlay.clone(),
            recovered,
        });
    }
    let underlays = deserialize_underlays(&wire.underlay).map_err(AddressError::Underlay)?;
    if underlays.is_empty() {
        return Err(AddressError::NoUnderlay);
    }
    Ok(PeerAddress {
        underlays,
        overlay: recovered,
        eth_address,
        nonce,
        timestamp: wire.timestamp,
        chequebook: (chequebook != [0; ADDRESS_BYTES]).then_some(chequebook),
        signature,
    })
}

/// The chequebook field as the 20 bytes bee signs: empty is the zero address.
fn parse_chequebook(field: &[u8]) -> Result<Address, AddressError> {
    match field.len() {
        0 => Ok([0; ADDRESS_BYTES]),
        _ => field
            .try_into()
            .map_err(|_| AddressError::ChequebookLength { bytes: field.len() }),
    }
}

/// Bee's window for a record received in a handshake, at `now` (unix seconds): positive and
/// at most [`CLOCK_SKEW_MAX_SECS`] ahead. A record may be old: bee re-presents one record for
/// its whole session.
///
/// # Errors
/// The timestamp is not positive or is too far ahead.
pub fn check_timestamp(timestamp: i64, now: i64) -> Result<(), AddressError> {
    if timestamp <= 0 {
        return Err(AddressError::TimestampNotPositive { timestamp });
    }
    if timestamp > now.saturating_add(CLOCK_SKEW_MAX_SECS) {
        return Err(AddressError::TimestampInFuture { timestamp, now });
    }
    Ok(())
}
