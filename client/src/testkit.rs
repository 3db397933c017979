//! Fixtures the library's unit tests share: deterministic keys and the test cohort specs.
//! Compiled for tests only; never part of the library's API.

use bps_proto::{Address, Binding, Hash, Spec};
use bps_verify::SigningKey;

/// The topic every unit-test cohort uses.
pub const TOPIC: Hash = [0x42; 32];

/// A deterministic key (every secret byte `byte`).
pub fn key(byte: u8) -> SigningKey {
    SigningKey::from_bytes(&[byte; 32]).expect("a small non-zero scalar is a valid key")
}

/// A spec on [`TOPIC`].
pub fn spec(admin: Option<Address>, binding: Binding, all: bool) -> Spec {
    Spec {
        topic: TOPIC,
        binding,
        admin,
        all,
        history: false,
        closed: false,
    }
}

/// An explicit FEED_TOPIC spec with `admin`.
pub fn explicit(admin: &SigningKey) -> Spec {
    spec(Some(admin.address()), Binding::FeedTopic, false)
}
