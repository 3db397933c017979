//! Single-owner chunks (SOC): layout, parsing, owner recovery and bee's `soc.Valid`
//! (docs/PROTOCOL.md §3; bee `pkg/soc/soc.go`, `pkg/soc/validator.go`).
//!
//! Owns: the SOC size constants, [`SocRef::parse`] (zero-copy view of peer bytes),
//! [`recover_soc`], [`validate_soc`], [`validate_soc_at`] (and [`validate_soc_at_with`],
//! the same with a chosen BMT keccak), including bee's dispersed-replicas owner rule.
//!
//! Never: panics or allocates on peer bytes, checks the span against the payload length
//! (bee does not), or decides what an owner may publish (that is [`crate::shape`] and the
//! broker's roster logic).
//!
//! Layout: `id(32) ‖ signature(65) ‖ span(8, LE) ‖ payload(0..=4096)`. The wrapped CAC is
//! `span ‖ payload`; the owner signs `keccak256(id ‖ cac_address)` with EIP-191; the SOC
//! address is `keccak256(id ‖ owner)`.

use core::fmt;

use k256::PublicKey;

use crate::bmt::{CHUNK_SIZE, Lanes, SPAN_SIZE, cac_address, cac_address_with};
use crate::hexfmt::Hex;
use crate::signer::{
    CompressedKey, SignatureError, address_of, compressed_key, recover_public_key_eth,
};
use crate::wire::{Address, Hash, keccak256, soc_address};

/// Bytes of a SOC id, a CAC address and a SOC address (bee `swarm.HashSize`).
pub const HASH_SIZE: usize = 32;
/// Bytes of a SOC signature `r ‖ s ‖ v` (bee `swarm.SocSignatureSize`).
pub const SIGNATURE_SIZE: usize = 65;
/// Smallest SOC: id, signature and span with an empty payload (bee `SocMinChunkSize`).
pub const SOC_MIN_CHUNK_SIZE: usize = HASH_SIZE + SIGNATURE_SIZE + SPAN_SIZE;
/// Largest SOC: a full 4096-byte payload (bee `SocMaxChunkSize`).
pub const SOC_MAX_CHUNK_SIZE: usize = SOC_MIN_CHUNK_SIZE + CHUNK_SIZE;
const _: () = assert!(SOC_MIN_CHUNK_SIZE == 105 && SOC_MAX_CHUNK_SIZE == 4201);

/// Owner of bee's dispersed replicas (the key `0x01 ‖ 0^31`, published by bee as
/// `swarm.ReplicasOwner`). A SOC of this owner is valid only if its id equals its wrapped
/// CAC address in bytes 1..32.
pub const REPLICAS_OWNER: Address = [
    0xdc, 0x5b, 0x20, 0x84, 0x7f, 0x43, 0xd6, 0x79, 0x28, 0xf4, 0x9c, 0xd4, 0xf8, 0x5d, 0x69, 0x6b,
    0x5a, 0x76, 0x17, 0xb5,
];

/// Why bytes are not a valid SOC (at the expected address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SocError {
    /// Fewer than [`SOC_MIN_CHUNK_SIZE`] bytes.
    TooShort { len: usize, min: usize },
    /// More than [`SOC_MAX_CHUNK_SIZE`] bytes.
    TooLong { len: usize, max: usize },
    /// The signature yields no owner.
    Signature(SignatureError),
    /// Signed by [`REPLICAS_OWNER`] but `id[1..32] != cac_address[1..32]`.
    ReplicaIdMismatch { id: Hash, cac_address: Hash },
    /// Valid signature, but `keccak256(id ‖ owner)` is not the expected address.
    AddressMismatch {
        expected: Hash,
        actual: Hash,
        owner: Address,
    },
}

impl fmt::Display for SocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len, min } => {
                write!(f, "SOC of {len} bytes is shorter than the minimum {min}")
            }
            Self::TooLong { len, max } => {
                write!(f, "SOC of {len} bytes is longer than the maximum {max}")
            }
            Self::Signature(error) => write!(f, "SOC signature: {error}"),
            Self::ReplicaIdMismatch { id, cac_address } => write!(
                f,
                "SOC signed by the replicas owner has id {} whose bytes 1..32 differ from its \
                 wrapped chunk address {}",
                Hex(id),
                Hex(cac_address)
            ),
            Self::AddressMismatch {
                expected,
                actual,
                owner,
            } => write!(
                f,
                "SOC signed by 0x{} is at {}, not at the expected {}",
                Hex(owner),
                Hex(actual),
                Hex(expected)
            ),
        }
    }
}

impl std::error::Error for SocError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Signature(error) => Some(error),
            _ => None,
        }
    }
}

impl From<SignatureError> for SocError {
    fn from(error: SignatureError) -> Self {
        Self::Signature(error)
    }
}

/// A zero-copy view of SOC bytes whose lengths are checked; nothing is verified yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocRef<'a> {
    pub id: &'a Hash,
    pub signature: &'a [u8; SIGNATURE_SIZE],
    pub span: &'a [u8; SPAN_SIZE],
    /// 0..=4096 bytes, guaranteed by [`SocRef::parse`].
    pub payload: &'a [u8],
}

impl<'a> SocRef<'a> {
    /// Splits `data` into its fields: `SOC_MIN_CHUNK_SIZE <= len <= SOC_MAX_CHUNK_SIZE`.
    pub fn parse(data: &'a [u8]) -> Result<Self, SocError> {
        if data.len() > SOC_MAX_CHUNK_SIZE {
            return Err(SocError::TooLong {
                len: data.len(),
                max: SOC_MAX_CHUNK_SIZE,
            });
        }
        let too_short = SocError::TooShort {
            len: data.len(),
            min: SOC_MIN_CHUNK_SIZE,
        };
        let Some((id, rest)) = data.split_first_chunk::<HASH_SIZE>() else {
            return Err(too_short);
        };
        let Some((signature, rest)) = rest.split_first_chunk::<SIGNATURE_SIZE>() else {
            return Err(too_short);
        };
        let Some((span, payload)) = rest.split_first_chunk::<SPAN_SIZE>() else {
            return Err(too_short);
        };
        Ok(Self {
            id,
            signature,
            span,
            payload,
        })
    }

    /// The span as an integer (little-endian); not checked against the payload length.
    pub fn span_value(&self) -> u64 {
        u64::from_le_bytes(*self.span)
    }

    /// The wrapped CAC's address (BMT over the payload, then the span).
    pub fn cac_address(&self) -> Hash {
        cac_address(*self.span, self.payload)
    }

    /// [`SocRef::cac_address`] with a chosen keccak implementation for the BMT.
    ///
    /// # Panics
    /// If `lanes` is not available on this CPU (a caller bug, see [`Lanes::is_available`]).
    pub fn cac_address_with(&self, lanes: Lanes) -> Hash {
        cac_address_with(lanes, *self.span, self.payload)
    }

    /// What the owner signs (before EIP-191): `keccak256(id ‖ cac_address)`.
    pub fn signing_digest(&self) -> Hash {
        signing_digest(self.id, &self.cac_address())
    }

    /// [`recover_soc`] on an already parsed view.
    pub fn recover(&self) -> Result<Recovered, SocError> {
        self.recover_keyed(self.cac_address())
            .map(|(recovered, _)| recovered)
    }

    /// Recovery given the wrapped chunk's address, also returning the signer's key (the
    /// verifier caches it).
    pub(crate) fn recover_keyed(
        &self,
        cac_address: Hash,
    ) -> Result<(Recovered, PublicKey), SocError> {
        let key = recover_public_key_eth(self.signature, &signing_digest(self.id, &cac_address))?;
        let owner = address_of(&key);
        let recovered = Recovered {
            owner,
            id: *self.id,
            address: soc_address(self.id, owner),
            cac_address,
            public_key: compressed_key(&key),
        };
        Ok((recovered, key))
    }
}

/// `keccak256(id ‖ cac_address)`.
pub(crate) fn signing_digest(id: &Hash, cac_address: &Hash) -> Hash {
    let mut preimage = [0u8; 2 * HASH_SIZE];
    preimage[..HASH_SIZE].copy_from_slice(id);
    preimage[HASH_SIZE..].copy_from_slice(cac_address);
    keccak256(&preimage)
}

/// What a SOC's bytes and signature say about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Recovered {
    /// The recovered signer.
    pub owner: Address,
    pub id: Hash,
    /// `keccak256(id ‖ owner)`.
    pub address: Hash,
    /// The wrapped CAC's address.
    pub cac_address: Hash,
    /// The signer's key, compressed.
    pub public_key: CompressedKey,
}

impl Recovered {
    /// Bee's dispersed-replicas rule (the only owner-specific validity rule in `soc.Valid`).
    fn check_replicas_rule(&self) -> Result<(), SocError> {
        if self.owner == REPLICAS_OWNER && self.id[1..] != self.cac_address[1..] {
            return Err(SocError::ReplicaIdMismatch {
                id: self.id,
                cac_address: self.cac_address,
            });
        }
        Ok(())
    }
}

/// Parses `data` and recovers its owner (bee `soc.FromChunk`). This alone is not
/// validity: see [`validate_soc`] and [`validate_soc_at`].
pub fn recover_soc(data: &[u8]) -> Result<Recovered, SocError> {
    SocRef::parse(data)?.recover()
}

/// Bee's `soc.Valid` for a chunk stored at the address its own signature makes
/// (`keccak256(id ‖ recovered owner)`): parse, recover, the replicas-owner rule. Used where
/// the owner is not fixed in advance (implicit authorship).
pub fn validate_soc(data: &[u8]) -> Result<Recovered, SocError> {
    validate_parsed(&SocRef::parse(data)?)
}

/// Bee's `soc.Valid(expected_address, data)`. BPS "validates at the expected address" by
/// passing `keccak256(id ‖ expected_owner)`, which forces the owner.
pub fn validate_soc_at(data: &[u8], expected_address: &Hash) -> Result<Recovered, SocError> {
    validate_parsed_at(&SocRef::parse(data)?, expected_address)
}

/// [`validate_soc_at`] with a chosen keccak implementation for the BMT (the benchmark's
/// "naive" path forces [`Lanes::Scalar`]); the outcome is the same for every one.
///
/// # Panics
/// If `lanes` is not available on this CPU (a caller bug, see [`Lanes::is_available`]).
pub fn validate_soc_at_with(
    lanes: Lanes,
    data: &[u8],
    expected_address: &Hash,
) -> Result<Recovered, SocError> {
    let soc = SocRef::parse(data)?;
    validate_keyed_at(&soc, soc.cac_address_with(lanes), expected_address)
        .map(|(recovered, _)| recovered)
}

pub(crate) fn validate_parsed(soc: &SocRef<'_>) -> Result<Recovered, SocError> {
    let recovered = soc.recover()?;
    recovered.check_replicas_rule()?;
    Ok(recovered)
}

pub(crate) fn validate_parsed_at(
    soc: &SocRef<'_>,
    expected_address: &Hash,
) -> Result<Recovered, SocError> {
    check_address(validate_parsed(soc)?, expected_address)
}

/// [`validate_parsed_at`] given the wrapped chunk's address, also returning the signer's
/// key: the same checks in the same order, so the same outcome.
pub(crate) fn validate_keyed_at(
    soc: &SocRef<'_>,
    cac_address: Hash,
    expected_address: &Hash,
) -> Result<(Recovered, PublicKey), SocError> {
    let (recovered, key) = soc.recover_keyed(cac_address)?;
    recovered.check_replicas_rule()?;
    Ok((check_address(recovered, expected_address)?, key))
}

fn check_address(recovered: Recovered, expected_address: &Hash) -> Result<Recovered, SocError> {
    if recovered.address != *expected_address {
        return Err(SocError::AddressMismatch {
            expected: *expected_address,
            actual: recovered.address,
            owner: recovered.owner,
        });
    }
    Ok(recovered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_bounds() {
        let data = vec![0u8; SOC_MAX_CHUNK_SIZE + 1];
        assert_eq!(
            SocRef::parse(&data[..SOC_MIN_CHUNK_SIZE - 1]),
            Err(SocError::TooShort { len: 104, min: 105 })
        );
        assert_eq!(
            SocRef::parse(&data),
            Err(SocError::TooLong {
                len: 4202,
                max: 4201
            })
        );
        let min = SocRef::parse(&data[..SOC_MIN_CHUNK_SIZE]).expect("minimum parses");
        assert!(min.payload.is_empty());
        let max = SocRef::parse(&data[..SOC_MAX_CHUNK_SIZE]).expect("maximum parses");
        assert_eq!(max.payload.len(), CHUNK_SIZE);
    }

    #[test]
    fn errors_display_context() {
        let error = SocError::TooShort { len: 3, min: 105 };
        assert_eq!(
            error.to_string(),
            "SOC of 3 bytes is shorter than the minimum 105"
        );
    }
}
