//! Placement by cohort key: which broker of a list is a cohort's root (docs/SCALING.md,
//! "Placement").
//!
//! Owns: [`rank`], rendezvous (highest-random-weight) hashing of a broker list over the
//! canonical cohort key (R1), the [`weight`] it ranks by, the one normalisation of a list
//! entry ([`broker_name`]) and the [`PlacementError`]s of a list. Every client and every edge
//! that is given the same list ranks a cohort's brokers the same way with no coordination,
//! so all members of a cohort meet at one root, and a changed list moves only about 1/n of
//! the cohorts. `web/src/placement.ts` is the same function; `proto/vectors/placement.json`
//! holds the vectors both are tested against.
//!
//! Never: resolves, connects to or probes a broker. A name is a string; what it reaches and
//! what to do when it fails (the next in rank, wrapping) is the caller's.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

use crate::{CohortKey, Hash, Keccak256};

/// The domain-separation tag at the start of every weight's preimage, so a weight is never
/// also some other keccak256 of the protocol (chunk ids, addresses, topics).
pub const PLACEMENT_TAG: &[u8] = b"bps/placement/v1";

/// The longest broker name, in bytes: a `host:port` or a `ws://` URL is far shorter, so a
/// longer entry is a mistake (a pasted file), and the bound keeps the length prefix's
/// meaning plain.
pub const BROKER_NAME_BYTES_MAX: usize = 1024;

/// Why a broker list cannot be ranked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PlacementError {
    /// The list has no broker.
    EmptyList,
    /// An entry is empty once surrounding whitespace is trimmed.
    EmptyName {
        /// Its position in the list, from 0.
        position: usize,
    },
    /// An entry is longer than [`BROKER_NAME_BYTES_MAX`].
    NameTooLong {
        /// Its position in the list, from 0.
        position: usize,
        /// Its length in bytes.
        bytes: usize,
    },
    /// Two entries are the same name once trimmed.
    DuplicateName {
        /// The name.
        name: String,
    },
}

impl fmt::Display for PlacementError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyList => formatter.write_str("the broker list is empty"),
            Self::EmptyName { position } => {
                write!(formatter, "broker {position} of the list is empty")
            }
            Self::NameTooLong { position, bytes } => write!(
                formatter,
                "broker {position} of the list is {bytes} bytes long, over \
                 {BROKER_NAME_BYTES_MAX}"
            ),
            Self::DuplicateName { name } => {
                write!(formatter, "broker {name} is in the list twice")
            }
        }
    }
}

impl std::error::Error for PlacementError {}

/// A list entry's name: the entry as written, with leading and trailing ASCII whitespace
/// (space, tab, CR, LF, form feed) removed and nothing else changed (no case folding, no
/// default port, no resolving), so every implementation derives the same bytes.
pub fn broker_name(entry: &str) -> &str {
    entry.trim_ascii()
}

/// A broker's weight for a cohort: keccak256(`PLACEMENT_TAG` ‖ be32(len(name)) ‖ name ‖
/// key), `name` in UTF-8. Compared as a big-endian 256-bit integer, the highest wins.
pub fn weight(name: &str, key: &CohortKey) -> Hash {
    // `rank` weighs only names within BROKER_NAME_BYTES_MAX; saturating keeps this total.
    let length = u32::try_from(name.len()).unwrap_or(u32::MAX);
    let mut hasher = Keccak256::new();
    hasher
        .update(PLACEMENT_TAG)
        .update(&length.to_be_bytes())
        .update(name.as_bytes())
        .update(key.as_bytes());
    hasher.finalize()
}

/// The brokers of `entries` ranked for the cohort `key`: positions into `entries`, first the
/// root, then the fallbacks in the order failover tries them. Highest [`weight`] first; two
/// equal weights (never seen with keccak256) go by name, lower bytes first.
pub fn rank<S: AsRef<str>>(entries: &[S], key: &CohortKey) -> Result<Vec<usize>, PlacementError> {
    let names = names(entries)?;
    let mut weighed: Vec<(Hash, &str, usize)> = names
        .iter()
        .enumerate()
        .map(|(position, name)| (weight(name, key), *name, position))
        .collect();
    weighed.sort_unstable_by(|one, other| by_rank((&one.0, one.1), (&other.0, other.1)));
    Ok(weighed
        .into_iter()
        .map(|(_, _, position)| position)
        .collect())
}

/// The names of a list, in its order, checked: not empty, none empty or too long, no two
/// the same.
pub fn names<S: AsRef<str>>(entries: &[S]) -> Result<Vec<&str>, PlacementError> {
    if entries.is_empty() {
        return Err(PlacementError::EmptyList);
    }
    let mut seen = HashSet::with_capacity(entries.len());
    let mut names = Vec::with_capacity(entries.len());
    for (position, entry) in entries.iter().enumerate() {
        let name = broker_name(entry.as_ref());
        if name.is_empty() {
            return Err(PlacementError::EmptyName { position });
        }
        if name.len() > BROKER_NAME_BYTES_MAX {
            return Err(PlacementError::NameTooLong {
                position,
                bytes: name.len(),
            });
        }
        if !seen.insert(name) {
            return Err(PlacementError::DuplicateName {
                name: name.to_owned(),
            });
        }
        names.push(name);
    }
    Ok(names)
}

/// Rank order: the higher weight first (byte order of big-endian integers is their numeric
/// order), then the lower name.
fn by_rank(one: (&Hash, &str), other: (&Hash, &str)) -> Ordering {
    other
        .0
        .cmp(one.0)
        .then_with(|| one.1.as_bytes().cmp(other.1.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Binding, Spec, keccak256};

    /// Cohorts counted in the movement tests: enough that 1/n is measured to a few percent.
    const KEYS: usize = 10_000;

    fn spec_of(seed: usize) -> Spec {
        Spec {
            topic: keccak256(&seed.to_be_bytes()),
            binding: Binding::Mnemonic,
            admin: None,
            all: false,
            history: false,
            closed: false,
        }
    }

    fn key(seed: usize) -> CohortKey {
        spec_of(seed).key()
    }

    fn brokers(count: usize) -> Vec<String> {
        (0..count).map(|n| format!("10.0.0.{n}:1637")).collect()
    }

    fn root(list: &[String], key: &CohortKey) -> String {
        let ranked = rank(list, key).expect("a valid list");
        list[ranked[0]].clone()
    }

    #[test]
    fn removing_a_broker_moves_only_its_cohorts_and_each_to_its_next_in_rank() {
        let before = brokers(5);
        let gone = before[2].clone();
        let after: Vec<String> = before.iter().filter(|b| **b != gone).cloned().collect();
        let mut moved = 0;
        for seed in 0..KEYS {
            let key = key(seed);
            let ranked = rank(&before, &key).expect("valid");
            let (old, new) = (&before[ranked[0]], root(&after, &key));
            if *old == new {
                continue;
            }
            moved += 1;
            assert_eq!(*old, gone, "only the removed broker's cohorts move");
            assert_eq!(new, before[ranked[1]], "to their first fallback");
        }
        // About 1/5 of the cohorts were on the removed broker; a generous bound.
        assert!((KEYS / 10..KEYS * 3 / 10).contains(&moved), "moved {moved}");
    }

    #[test]
    fn adding_a_broker_moves_about_one_in_n_plus_one_and_only_to_it() {
        let before = brokers(5);
        let mut after = before.clone();
        after.push("ws://edge.example:1639/bps/v1".to_owned());
        let mut moved = 0;
        for seed in 0..KEYS {
            let key = key(seed);
            let new = root(&after, &key);
            if root(&before, &key) != new {
                moved += 1;
                assert_eq!(new, after[5], "a cohort moves only to the new broker");
            }
        }
        // Expected KEYS / 6 ≈ 1 667; between half and twice that.
        assert!((KEYS / 12..KEYS / 3).contains(&moved), "moved {moved}");
    }

    #[test]
    fn the_list_order_and_surrounding_whitespace_do_not_change_the_ranking() {
        let list = brokers(4);
        let shuffled = [
            format!(" {}", list[3]),
            list[1].clone(),
            format!("{}\t", list[0]),
            list[2].clone(),
        ];
        for seed in 0..100 {
            let key = key(seed);
            let names_in = |entries: &[String]| -> Vec<String> {
                let ranked = rank(entries, &key).expect("valid");
                ranked
                    .iter()
                    .map(|&p| broker_name(&entries[p]).to_owned())
                    .collect()
            };
            assert_eq!(names_in(&list), names_in(&shuffled));
        }
    }

    proptest::proptest! {
        /// The strong form of "removing a broker moves only its cohorts": the ranking of the
        /// shorter list is the longer one's with that broker left out.
        #[test]
        fn removing_a_broker_keeps_the_order_of_the_others(
            topic in proptest::array::uniform32(proptest::num::u8::ANY),
            count in 2usize..9,
            removed in 0usize..9,
        ) {
            let key = Spec { topic, ..spec_of(0) }.key();
            let before = brokers(count);
            let gone = before[removed % count].clone();
            let after: Vec<String> = before.iter().filter(|b| **b != gone).cloned().collect();
            let named = |list: &[String]| -> Vec<String> {
                let ranked = rank(list, &key).expect("valid");
                ranked.iter().map(|&p| list[p].clone()).collect()
            };
            let expected: Vec<String> = named(&before).into_iter().filter(|b| *b != gone).collect();
            proptest::prop_assert_eq!(named(&after), expected);
        }
    }

    #[test]
    fn a_bad_list_is_an_error_naming_the_entry() {
        let key = key(0);
        let none: [&str; 0] = [];
        assert_eq!(rank(&none, &key), Err(PlacementError::EmptyList));
        assert_eq!(
            rank(&["a:1", " \t"], &key),
            Err(PlacementError::EmptyName { position: 1 })
        );
        assert_eq!(
            rank(&["a:1", "b:2", " a:1"], &key),
            Err(PlacementError::DuplicateName {
                name: "a:1".to_owned()
            })
        );
        let long = "x".repeat(BROKER_NAME_BYTES_MAX + 1);
        assert_eq!(
            rank(&["a:1", long.as_str()], &key),
            Err(PlacementError::NameTooLong {
                position: 1,
                bytes: BROKER_NAME_BYTES_MAX + 1
            })
        );
        assert_eq!(rank(&["only:1"], &key), Ok(vec![0]));
    }

    #[test]
    fn equal_weights_go_by_name() {
        let weight = [7; 32];
        assert_eq!(by_rank((&weight, "a"), (&weight, "b")), Ordering::Less);
        assert_eq!(by_rank((&[8; 32], "b"), (&weight, "a")), Ordering::Less);
    }
}
