//! Reload: which keys a SIGHUP may change, and what a reload changes.
//!
//! Owns: the classification of a reload from one configuration to another into reloadable
//! changes and restart-only changes, and the merge that applies only the reloadable ones.
//! Which key is which is the `reload` column of `keys::KEYS`; nothing here lists keys.
//! Never does: load or validate the new configuration, or apply it to the cores
//! (`lifecycle` does).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::{Table, Value};

use super::keys::{self, KEYS, Reload};
use super::layers::split_dotted_key;
use super::schema::BrokerConfig;

/// The keys a SIGHUP may change in a running broker.
#[must_use]
pub fn is_reloadable(key: &str) -> bool {
    split_dotted_key(key)
        .and_then(|(section, name)| keys::find(section, name))
        .is_some_and(|key| key.reload == Reload::Live)
}

/// The configuration as a TOML table (every field is a TOML scalar or list of strings).
fn table(config: &BrokerConfig) -> Table {
    match Table::try_from(config) {
        Ok(table) => table,
        // TOML integers are i64: only a value set in code past i64::MAX fails, a bug there.
        Err(error) => panic!("config does not serialize to TOML: {error}"),
    }
}

/// Every `section.key` with its value, in section order.
fn flatten(config: &BrokerConfig) -> Vec<(String, Value)> {
    let mut flat = Vec::new();
    for (section, keys) in table(config) {
        if let Value::Table(keys) = keys {
            for (key, value) in keys {
                flat.push((format!("{section}.{key}"), value));
            }
        }
    }
    flat
}

/// What a reload from `old` to `new` changes. `Ok` lists every change as
/// `"timeouts.claim_deadline_ms: 30000 -> 5000"` when all of them are reloadable; `Err` lists
/// the changed keys that need a restart (the reloadable ones can still be applied with
/// `apply_reloadable`).
///
/// # Errors
/// The changed keys that a running broker cannot take.
pub fn reloadable_diff(old: &BrokerConfig, new: &BrokerConfig) -> Result<Vec<String>, Vec<String>> {
    let new_values: BTreeMap<String, Value> = flatten(new).into_iter().collect();
    let mut changes = Vec::new();
    let mut restart = Vec::new();
    for (key, old_value) in flatten(old) {
        let Some(new_value) = new_values.get(&key) else {
            continue;
        };
        if *new_value == old_value {
            continue;
        }
        if is_reloadable(&key) {
            changes.push(format!("{key}: {old_value} -> {new_value}"));
        } else {
            restart.push(key);
        }
    }
    if restart.is_empty() {
        Ok(changes)
    } else {
        Err(restart)
    }
}

/// `old` with the reloadable keys of `new` applied and every other key kept.
#[must_use]
pub fn apply_reloadable(old: &BrokerConfig, new: &BrokerConfig) -> BrokerConfig {
    let mut merged = table(old);
    let new = table(new);
    for key in KEYS.iter().filter(|key| key.reload == Reload::Live) {
        let value = new.get(key.section).and_then(|keys| keys.get(key.name));
        let section = merged.get_mut(key.section);
        if let (Some(value), Some(Value::Table(keys))) = (value, section) {
            keys.insert(key.name.to_owned(), value.clone());
        }
    }
    match BrokerConfig::deserialize(merged) {
        Ok(config) => config,
        // Each value came from a configuration of the same type.
        Err(error) => panic!("a merge of two configurations does not deserialize: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reloadable_keys() {
        assert!(is_reloadable("timeouts.claim_deadline_ms"));
        assert!(is_reloadable("timeouts.healthz_deadline_ms"));
        assert!(is_reloadable("limits.cohorts_max"));
        assert!(!is_reloadable("limits.frame_bytes_max"));
        assert!(!is_reloadable("limits.connections_max"));
        assert!(is_reloadable("log.level"));
        assert!(is_reloadable("protocol.history"));
        assert!(is_reloadable("limits.history_frames_max"));
        assert!(is_reloadable("limits.history_bytes_max"));
        assert!(!is_reloadable("log.format"));
        assert!(!is_reloadable("server.cores"));
        assert!(!is_reloadable("verify.workers"));
        assert!(!is_reloadable("limits.no_such_key"));
    }

    #[test]
    fn a_reload_applies_the_reloadable_keys_and_keeps_the_others() {
        let old = BrokerConfig::default();
        let mut new = old.clone();
        new.protocol.cohorts_max = 7;
        new.limits.connections_max = 9;
        new.protocol.claim_deadline_ms = 11;
        new.server.cores = 2;
        new.log.level = "debug".to_owned();
        let merged = apply_reloadable(&old, &new);
        assert_eq!(merged.protocol.cohorts_max, 7);
        assert_eq!(merged.protocol.claim_deadline_ms, 11);
        assert_eq!(merged.log.level, "debug");
        assert_eq!(merged.limits.connections_max, old.limits.connections_max);
        assert_eq!(merged.server.cores, old.server.cores);
        let mut restart = reloadable_diff(&old, &new).expect_err("two restart-only changes");
        restart.sort();
        assert_eq!(restart, vec!["limits.connections_max", "server.cores"]);
    }
}
