//! The shipped `bps-broker.example.toml` must stay the documentation of the defaults: it
//! parses, it equals `BrokerConfig::default()`, and it names every key the default has.

use std::collections::BTreeSet;

use bps_broker::config::BrokerConfig;
use toml::{Table, Value};

const EXAMPLE: &str = include_str!("../bps-broker.example.toml");

/// Every `section.key` of a two-level table.
fn keys(table: &Table) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for (section, value) in table {
        match value {
            Value::Table(fields) => {
                for key in fields.keys() {
                    keys.insert(format!("{section}.{key}"));
                }
            }
            _ => {
                keys.insert(section.clone());
            }
        }
    }
    keys
}

#[test]
fn example_equals_the_defaults() {
    let parsed = BrokerConfig::from_toml_str(EXAMPLE)
        .unwrap_or_else(|errors| panic!("example does not load: {errors:?}"));
    assert_eq!(parsed, BrokerConfig::default());
    assert!(parsed.validate().is_empty(), "{:?}", parsed.validate());
}

#[test]
fn example_names_every_key() {
    let example: Table = EXAMPLE.parse().expect("example is TOML");
    let defaults = Table::try_from(BrokerConfig::default()).expect("defaults serialize");
    assert_eq!(keys(&example), keys(&defaults));
}

#[test]
fn every_key_in_the_example_has_a_comment() {
    let mut previous = "";
    for line in EXAMPLE.lines() {
        let is_key = !line.is_empty() && !line.starts_with('#') && !line.starts_with('[');
        if is_key {
            assert!(
                previous.starts_with('#'),
                "key without a comment above it: {line}"
            );
        }
        previous = line;
    }
}

#[test]
fn effective_config_round_trips() {
    let config = BrokerConfig::default();
    let printed = config.to_toml();
    assert_eq!(BrokerConfig::from_toml_str(&printed), Ok(config));
}
