//! The verification job: one chunk plus what the broker expects of it, in; the owner,
//! address and dedup key, or a typed reason, out (R17 and R11, the expensive part).
//!
//! Owns: [`Expect`], [`VerifyRequest`], [`Verified`], [`VerifyError`] and [`verify`].
//!
//! Never: the cheap checks (kind, challenge, id derivation, span 0 for AUTH/EOS), which
//! the broker core does before a job exists; state (cursors, dedup windows, rosters); or
//! threads. A job is a pure function of its request, so the verification pool can run any
//! request on any worker, and a slice of requests is the natural unit of work (the batch
//! path, `crate::verifier::verify_batch`, builds on these types; this file knows nothing
//! of it, so the two never import each other).

use core::fmt;

use bytes::Bytes;

use crate::shape::{ShapeError, check_implicit};
use crate::signer::CompressedKey;
use crate::soc::{Recovered, SocError, SocRef};
use crate::wire::{Address, Binding, Hash, soc_address};

/// What the chunk must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Explicit authorship, ALL and service kinds: valid at `keccak256(id ‖ owner)`,
    /// i.e. signed by `owner` (the stream's addr, or the admin for service kinds).
    At { owner: Address },
    /// Implicit authorship: any valid SOC that fits the binding's shape (R11). `index` is
    /// the frame's index (read by FEED_TOPIC only, D4).
    Implicit {
        binding: Binding,
        topic: Hash,
        index: u64,
    },
    /// Any valid SOC, whoever signed it: a subscriber's check of a session-feed DATA chunk
    /// (R41), whose owner it admits afterwards (a relay edge's upstream frames).
    Recover,
}

/// One chunk to verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyRequest {
    /// The SOC bytes, as received (a zero-copy slice of the frame).
    pub chunk: Bytes,
    pub expect: Expect,
}

/// A chunk that passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Verified {
    /// The recovered signer.
    pub owner: Address,
    /// The SOC address `keccak256(id ‖ owner)`.
    pub address: Hash,
    /// What the broker dedups on: the SOC address, or for ANCHOR the wrapped CAC address
    /// (R28). For `Expect::At` it is the SOC address (the broker dedups by cursor there).
    pub dedup_key: Hash,
    /// The wrapped CAC's address (the BMT address the signature covers).
    pub wrapped: Hash,
    /// The signer's key, compressed: what the bridge's `recoveredPubKey` field carries
    /// (docs/PROTOCOL.md W6), known here for free because verification recovered or looked it up.
    pub public_key: CompressedKey,
}

impl Verified {
    /// What a recovery established, deduplicated on `dedup_key`.
    pub(crate) fn of(recovered: &Recovered, dedup_key: Hash) -> Verified {
        Verified {
            owner: recovered.owner,
            address: recovered.address,
            dedup_key,
            wrapped: recovered.cac_address,
            public_key: recovered.public_key,
        }
    }
}

/// Why a chunk failed (always an `invalid_soc` violation for the broker, R17).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// Not a valid SOC at the expected address.
    Soc(SocError),
    /// A valid SOC that does not fit the implicit binding.
    Shape(ShapeError),
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Soc(error) => write!(f, "invalid SOC: {error}"),
            Self::Shape(error) => write!(f, "SOC does not fit the binding: {error}"),
        }
    }
}

impl std::error::Error for VerifyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Soc(error) => Some(error),
            Self::Shape(error) => Some(error),
        }
    }
}

impl From<SocError> for VerifyError {
    fn from(error: SocError) -> Self {
        Self::Soc(error)
    }
}

impl From<ShapeError> for VerifyError {
    fn from(error: ShapeError) -> Self {
        Self::Shape(error)
    }
}

/// Runs one job: bee's `soc.Valid` at the expected address (`Expect::At`), or validity
/// plus the binding shape (`Expect::Implicit`).
pub fn verify(request: &VerifyRequest) -> Result<Verified, VerifyError> {
    let soc = SocRef::parse(&request.chunk)?;
    match request.expect {
        Expect::At { owner } => {
            let expected = soc_address(soc.id, owner);
            let recovered = crate::soc::validate_parsed_at(&soc, &expected)?;
            Ok(Verified::of(&recovered, recovered.address))
        }
        Expect::Recover => {
            let recovered = crate::soc::validate_parsed(&soc)?;
            Ok(Verified::of(&recovered, recovered.address))
        }
        Expect::Implicit {
            binding,
            topic,
            index,
        } => {
            let recovered = crate::soc::validate_parsed(&soc)?;
            let dedup_key = check_implicit(binding, &topic, index, &recovered)?;
            Ok(Verified::of(&recovered, dedup_key))
        }
    }
}
