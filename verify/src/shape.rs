//! Binding shapes under implicit authorship and Swarm proximity order (docs/PROTOCOL.md §4, R11,
//! D4, D8; bee `pkg/swarm/proximity.go`).
//!
//! Owns: [`PO_MIN`], [`MAX_PO`], [`proximity`] and [`check_implicit`], which decides
//! whether an already valid SOC fits a cohort's binding and what its dedup key is (R28).
//!
//! Never: verifies signatures (the caller passes a [`Recovered`] from
//! [`crate::validate_soc`]), applies to explicit authorship or `ALL` (there the owner is
//! fixed by the stream and PO does not apply, R12), or keeps a dedup window (the broker's).
//!
//! | binding | the SOC must satisfy | dedup key |
//! |---|---|---|
//! | MNEMONIC | any owner | SOC address |
//! | ANCHOR (GSOC) | `keccak256(id ‖ owner) == topic` | wrapped CAC address |
//! | OWNER (MIC) | `keccak256(owner) == topic`, `PO(address, topic) >= 16` | SOC address |
//! | FEED_TOPIC | `id == keccak256(topic ‖ be64(index))` (D4), any owner | SOC address |
//! | SOC_ID (MOC) | `id == topic`, `PO(address, topic) >= 16` (D8: anchor = topic) | SOC address |

use core::fmt;

use crate::hexfmt::Hex;
use crate::soc::Recovered;
use crate::wire::{Address, Binding, Hash, feed_id, keccak256};

/// Minimum proximity order between the SOC address and the topic for OWNER and SOC_ID
/// (a protocol constant, docs/PROTOCOL.md §4).
pub const PO_MIN: u8 = 16;
/// Bee's cap on proximity order (`swarm.MaxPO`): only the first 4 bytes are compared.
pub const MAX_PO: u8 = 31;
const _: () = assert!(PO_MIN <= MAX_PO);

/// Bytes bee compares: `MaxPO / 8 + 1`.
const PO_BYTES: usize = MAX_PO as usize / 8 + 1;

/// Bee's `swarm.Proximity`: the number of leading equal bits of `one` and `other`,
/// most significant bit first, over at most their first 4 bytes (and no more than the
/// shorter one's length); [`MAX_PO`] when no differing bit is found there.
pub fn proximity(one: &[u8], other: &[u8]) -> u8 {
    for (index, (a, b)) in one.iter().zip(other).take(PO_BYTES).enumerate() {
        let differing = a ^ b;
        if differing != 0 {
            // index < 4, leading_zeros < 8: the sum is below 32.
            return (index * 8) as u8 + differing.leading_zeros() as u8;
        }
    }
    MAX_PO
}

/// Why a valid SOC does not fit the cohort's binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// ANCHOR: the SOC address is not the topic.
    AddressNotTopic { address: Hash, topic: Hash },
    /// OWNER: `keccak256(owner)` is not the topic.
    OwnerNotTopic { owner: Address, topic: Hash },
    /// OWNER, SOC_ID: the SOC address is too far from the topic.
    ProximityTooLow {
        binding: Binding,
        po: u8,
        min: u8,
        address: Hash,
        topic: Hash,
    },
    /// FEED_TOPIC: the id is not `keccak256(topic ‖ be64(index))`.
    FeedIdMismatch {
        id: Hash,
        expected: Hash,
        index: u64,
    },
    /// SOC_ID: the id is not the topic.
    IdNotTopic { id: Hash, topic: Hash },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AddressNotTopic { address, topic } => write!(
                f,
                "ANCHOR: SOC address {} is not the topic {}",
                Hex(address),
                Hex(topic)
            ),
            Self::OwnerNotTopic { owner, topic } => write!(
                f,
                "OWNER: keccak256 of owner 0x{} is not the topic {}",
                Hex(owner),
                Hex(topic)
            ),
            Self::ProximityTooLow {
                binding,
                po,
                min,
                address,
                topic,
            } => write!(
                f,
                "{binding:?}: SOC address {} has proximity {po} to the topic {}, below {min}",
                Hex(address),
                Hex(topic)
            ),
            Self::FeedIdMismatch {
                id,
                expected,
                index,
            } => write!(
                f,
                "FEED_TOPIC: id {} is not the feed id {} of index {index}",
                Hex(id),
                Hex(expected)
            ),
            Self::IdNotTopic { id, topic } => {
                write!(f, "SOC_ID: id {} is not the topic {}", Hex(id), Hex(topic))
            }
        }
    }
}

impl std::error::Error for ShapeError {}

fn check_proximity(binding: Binding, topic: &Hash, soc: &Recovered) -> Result<(), ShapeError> {
    let po = proximity(&soc.address, topic);
    if po < PO_MIN {
        return Err(ShapeError::ProximityTooLow {
            binding,
            po,
            min: PO_MIN,
            address: soc.address,
            topic: *topic,
        });
    }
    Ok(())
}

/// Whether `soc` (already valid, owner recovered) fits `binding` at `topic` under implicit
/// authorship (R11). `index` is the frame's index; only FEED_TOPIC reads it (D4). Returns
/// the dedup key (R28).
pub fn check_implicit(
    binding: Binding,
    topic: &Hash,
    index: u64,
    soc: &Recovered,
) -> Result<Hash, ShapeError> {
    match binding {
        Binding::Mnemonic => Ok(soc.address),
        Binding::Anchor => {
            if soc.address != *topic {
                return Err(ShapeError::AddressNotTopic {
                    address: soc.address,
                    topic: *topic,
                });
            }
            // Many payloads share one GSOC address; the wrapped chunk tells them apart.
            Ok(soc.cac_address)
        }
        Binding::Owner => {
            if keccak256(&soc.owner) != *topic {
                return Err(ShapeError::OwnerNotTopic {
                    owner: soc.owner,
                    topic: *topic,
                });
            }
            check_proximity(binding, topic, soc)?;
            Ok(soc.address)
        }
        Binding::FeedTopic => {
            let expected = feed_id(topic, index);
            if soc.id != expected {
                return Err(ShapeError::FeedIdMismatch {
                    id: soc.id,
                    expected,
                    index,
                });
            }
            Ok(soc.address)
        }
        Binding::SocId => {
            if soc.id != *topic {
                return Err(ShapeError::IdNotTopic {
                    id: soc.id,
                    topic: *topic,
                });
            }
            check_proximity(binding, topic, soc)?;
            Ok(soc.address)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proximity_matches_bee_definition() {
        let zero = [0u8; 32];
        assert_eq!(proximity(&zero, &zero), MAX_PO);
        let mut other = zero;
        other[0] = 0x80;
        assert_eq!(proximity(&zero, &other), 0);
        other[0] = 0x01;
        assert_eq!(proximity(&zero, &other), 7);
        other[0] = 0;
        other[2] = 0x40;
        assert_eq!(proximity(&zero, &other), 17);
        other[2] = 0;
        // Bit 31 differs: bee's loop reports 31 = MaxPO; bit 32+ is never looked at.
        other[3] = 0x01;
        assert_eq!(proximity(&zero, &other), 31);
        other[3] = 0;
        other[4] = 0xff;
        assert_eq!(proximity(&zero, &other), MAX_PO);
        // Shorter inputs: only the common prefix is compared.
        assert_eq!(proximity(&[0x00], &[0x00, 0xff]), MAX_PO);
        assert_eq!(proximity(&[], &[0xff]), MAX_PO);
    }
}
