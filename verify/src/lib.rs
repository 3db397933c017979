//! `bps_verify`: Swarm chunks and keys for the BPS broker and its clients.
//!
//! Owns: the BMT hash and CAC address ([`bmt`]), SOC parsing and validation exactly as
//! bee's `soc.Valid` ([`soc`]), EIP-191 signing and owner recovery ([`signer`]), the
//! implicit-authorship binding shapes and proximity order of BPS.md R11 ([`shape`]), the
//! client-side signing helper ([`publish`]), the stateless verification job ([`job`]) and
//! the worker pool that runs jobs in batches ([`pool`]).
//!
//! Never: a socket, a runtime (monoio), a clock, or state that outlives one call. Every
//! function here is a pure function of its arguments, so any thread may run it and a batch
//! of jobs is just a slice.
//!
//! Two error worlds (ARCHITECTURE.md §4.5): anything a peer controls (chunk bytes,
//! signatures, lengths) yields a typed error with context and never panics; a broken
//! caller invariant (a payload over 4096 bytes handed to a hashing or signing helper that
//! documents the limit) is an `assert!`.
//!
//! Hashing and the wire-level derivations (`keccak256`, `feed_id`, `soc_address`,
//! `session_chunk_id`, frame encoding) come from `bps_proto`; nothing here duplicates them.

mod hexfmt;
mod wire;

pub mod bmt;
pub mod job;
pub mod pool;
pub mod publish;
pub mod shape;
pub mod signer;
pub mod soc;

pub use bmt::{
    BRANCHES, CHUNK_SIZE, CacError, SEGMENT_SIZE, SPAN_SIZE, bmt_root, cac_address, validate_cac,
};
pub use job::{Expect, Verified, VerifyError, VerifyRequest, verify, verify_batch};
pub use publish::{
    PayloadTooLarge, SignedFrame, sign_broadcast, sign_implicit, sign_soc, try_sign_broadcast,
    try_sign_implicit, try_sign_soc,
};
pub use shape::{MAX_PO, PO_MIN, ShapeError, check_implicit, proximity};
pub use signer::{
    EIP191_PREFIX, KeyError, SignatureError, SigningKey, address_of, eip191_hash, recover_eth,
    recover_public_key_eth,
};
pub use soc::{
    HASH_SIZE, REPLICAS_OWNER, Recovered, SIGNATURE_SIZE, SOC_MAX_CHUNK_SIZE, SOC_MIN_CHUNK_SIZE,
    SocError, SocRef, recover_soc, validate_soc, validate_soc_at,
};
pub use wire::{Address, Hash};
