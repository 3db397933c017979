//! `bps_verify`: Swarm chunks and keys for the BPS broker and its clients.
//!
//! Owns: the BMT hash and CAC address ([`bmt`]) on a multi-lane keccak ([`keccak`]), SOC
//! parsing and validation exactly as bee's `soc.Valid` ([`soc`]), EIP-191 signing and
//! owner recovery ([`signer`]), signature checks against known keys, singly and in
//! batches that mix keys ([`batch`]), the owner-key cache ([`keycache`]), the
//! implicit-authorship binding shapes and proximity order of docs/PROTOCOL.md R11 ([`shape`]), the
//! client-side signing helper ([`publish`]), the stateless verification job ([`job`]),
//! one worker's fast path and the batch entry point ([`verifier`]), the worker pool that
//! runs jobs in batches ([`pool`]). The throughput measurement `bps-bench verify` reports is
//! the bench crate's.
//!
//! Never: a socket, a runtime (monoio), or state shared between threads. Every function
//! outside [`verifier`], [`keycache`] and [`pool`] is a pure function of its
//! arguments, so any thread may run it and a batch of jobs is just a slice; a
//! [`Verifier`] is one worker's state (a key cache), and its results are still exactly
//! [`verify`]'s. Only [`pool`] (latency) reads the clock.
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

pub mod batch;
pub mod bmt;
pub mod double_mul;
pub mod fair;
pub mod field_ifma;
pub mod job;
pub mod keccak;
pub mod keycache;
pub mod msm_ifma;
pub mod nonce;
pub mod pool;
pub mod publish;
pub mod shape;
pub mod signer;
pub mod soc;
pub mod sqrt_ifma;
pub mod verifier;

pub use batch::{KeyedSignature, KnownKey, KnownKeysBatch, SignedDigest, verify_with_key};
pub use bmt::{
    BRANCHES, CHUNK_SIZE, CacError, SEGMENT_SIZE, SPAN_SIZE, bmt_root, bmt_root_with, cac_address,
    cac_address_with, validate_cac,
};
pub use job::{Expect, Verified, VerifyError, VerifyRequest, verify};
pub use keccak::Lanes;
pub use keycache::KeyCache;
pub use publish::{
    PayloadTooLarge, SignedFrame, sign_broadcast, sign_implicit, sign_soc, try_sign_broadcast,
    try_sign_implicit, try_sign_soc,
};
pub use shape::{MAX_PO, PO_MIN, ShapeError, check_implicit, proximity};
pub use signer::{
    COMPRESSED_KEY_SIZE, CompressedKey, EIP191_PREFIX, KeyError, SignatureError, SigningKey,
    address_of, compressed_key, eip191_hash, recover_eth, recover_public_key_eth,
};
pub use soc::{
    HASH_SIZE, REPLICAS_OWNER, Recovered, SIGNATURE_SIZE, SOC_MAX_CHUNK_SIZE, SOC_MIN_CHUNK_SIZE,
    SocError, SocRef, recover_soc, validate_soc, validate_soc_at, validate_soc_at_with,
};
pub use verifier::{Verifier, VerifierStats, verify_batch};
pub use wire::{Address, Hash};
