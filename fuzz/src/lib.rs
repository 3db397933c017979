//! Shared pieces of the BPS fuzz targets (fuzz_targets/, one binary per target).
//!
//! Owns: the byte layouts of the structured target inputs ([`frame_input`], [`soc_input`],
//! [`bmt_input`]) with the [`reader`] they parse through, the independent reference models
//! the targets compare against ([`keccak_reference`]: keccak256, BMT, CAC and SOC addresses
//! straight from tiny-keccak; [`varint_reference`]: LEB128 as protobuf defines it;
//! [`bee_reference`]: bee's overlay, signed bytes and underlay framing;
//! [`ws_reference`]: an RFC 6455 receiver), and the seed inputs written into `fuzz/corpus/`
//! ([`seeds`], with the WebSocket side's in [`ws_seeds`] and bee's control protocols' in
//! [`bee_seeds`], which also holds those targets' fixed nodes and clock).
//!
//! Never: calls the code under test to compute an expected value. A reference model here is
//! written from the specification (docs/PROTOCOL.md, bee's definitions, protobuf's encoding rules),
//! so a target that compares against it can fail when the crates are wrong.

pub mod bee_reference;
pub mod bee_seeds;
pub mod bmt_input;
pub mod frame_input;
pub mod keccak_reference;
pub mod reader;
pub mod seeds;
pub mod soc_input;
pub mod varint_reference;
pub mod ws_reference;
pub mod ws_seeds;
