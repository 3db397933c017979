//! Bee's record and underlay rules restated from bee's code (bee `pkg/bzz/address.go`,
//! `pkg/bzz/underlay.go`, `pkg/crypto/crypto.go`), for the bee targets to compare with
//! `bps_bee`.
//!
//! Owns: the overlay ([`overlay`]), the signed bytes ([`sign_data`]) and the framing of an
//! underlay field ([`underlay_entries`]). Never: calls `bps_bee`; multiaddr validity itself
//! is the multiaddr crate's, not modelled here.

use crate::keccak_reference::keccak256;

/// First byte of bee's list form.
const LIST_PREFIX: u8 = 0x99;
/// Bee's `maxUnderlaysPerPeer`.
pub const UNDERLAYS_MAX: usize = 20;
/// Bee's `maxUnderlayBytes`.
const UNDERLAY_BYTES_MAX: usize = 2048;
/// go-varint's longest unsigned varint (63 bits).
const GO_VARINT_BYTES_MAX: usize = 9;

/// keccak256(eth address ‖ le64(network id) ‖ nonce).
pub fn overlay(eth_address: &[u8; 20], network_id: u64, nonce: &[u8]) -> [u8; 32] {
    keccak256(&[eth_address, &network_id.to_le_bytes(), nonce])
}

/// "bee-handshake-" ‖ underlay ‖ overlay ‖ be64(network id) ‖ nonce ‖ be64(timestamp) ‖
/// chequebook (20 bytes).
pub fn sign_data(
    underlay: &[u8],
    overlay: &[u8],
    network_id: u64,
    nonce: &[u8],
    timestamp: i64,
    chequebook: &[u8; 20],
) -> Vec<u8> {
    [
        &b"bee-handshake-"[..],
        underlay,
        overlay,
        &network_id.to_be_bytes(),
        nonce,
        &timestamp.to_be_bytes(),
        chequebook,
    ]
    .concat()
}

/// go-varint's `ReadUvarint`: at most 9 bytes, the last without its top bit, minimal.
fn go_varint(input: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (index, &byte) in input.iter().enumerate().take(GO_VARINT_BYTES_MAX) {
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return (byte != 0 || index == 0).then_some((value, index + 1));
        }
    }
    None
}

/// The address byte strings of an underlay field, or `None` where bee refuses its framing
/// (empty, oversize, more than 20 entries, a bad or overlong entry length).
pub fn underlay_entries(field: &[u8]) -> Option<Vec<&[u8]>> {
    if field.is_empty() || field.len() > UNDERLAY_BYTES_MAX {
        return None;
    }
    let Some(mut rest) = field.strip_prefix(&[LIST_PREFIX]) else {
        return Some(vec![field]);
    };
    let mut entries = Vec::new();
    while !rest.is_empty() {
        if entries.len() == UNDERLAYS_MAX {
            return None;
        }
        let (length, prefix) = go_varint(rest)?;
        let length = usize::try_from(length).ok()?;
        let entry = rest.get(prefix..prefix.checked_add(length)?)?;
        entries.push(entry);
        rest = &rest[prefix + length..];
    }
    Some(entries)
}
