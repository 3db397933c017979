//! This process's identity as a relay edge: its relay id (on the relay path of every upstream
//! Join it sends, so a loop comes back to it, docs/PROTOCOL.md §10) and the addr its upstream
//! streams declare (a subscriber's, which signs nothing: R41).
//!
//! Owns: both values, drawn once from the OS's randomness on first use and the same for the
//! process's life (a reload compares configurations that carry the relay id).
//! Never does: anything else; a leaf that the config and the I/O layer import.

use std::sync::OnceLock;

use bps_proto::{Address, RelayId};
use rand::{RngCore, SeedableRng};

/// This broker's relay id.
pub fn relay_id() -> RelayId {
    static RELAY_ID: OnceLock<RelayId> = OnceLock::new();
    *RELAY_ID.get_or_init(|| {
        let mut id = RelayId::default();
        rand::rngs::StdRng::from_os_rng().fill_bytes(&mut id);
        id
    })
}

/// The addr this broker's upstream streams declare: random, so it is never an admin's or a
/// rostered one, and its streams are spectators at the root.
pub fn upstream_addr() -> Address {
    static ADDR: OnceLock<Address> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let mut addr = Address::default();
        rand::rngs::StdRng::from_os_rng().fill_bytes(&mut addr);
        addr
    })
}
