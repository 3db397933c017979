//! The TOML form of `BrokerConfig`: which section each field's key is in.
//!
//! Owns: `Serialize` and `Deserialize` for `BrokerConfig`. The broker's own keys are the
//! fields of its section structs (`[server]`, `[limits]`, ...); the protocol core's keys are
//! the fields of bps-core's `ProtocolConfig`, declared there once, and `keys::KEYS` says
//! which section each is in (`[limits]`, `[timeouts]` or `[protocol]`). Keys are written in
//! table order, so the effective config reads like the example.
//! Never does: say what a key is (`keys`), judge values (`rules`) or layer sources
//! (`layers`, which refuses unknown keys against the table before anything is deserialized;
//! what is left over here is refused too).

use serde::de::Error as _;
use serde::ser::{Error as _, SerializeMap};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use toml::{Table, Value};

use super::keys::{self, KEYS};
use super::p2p::P2pSection;
use super::relay::RelaySection;
use super::schema::{BrokerConfig, LimitsConfig, LogConfig, ServerConfig, TimeoutsConfig};
use super::schema::{VerifyConfig, WsConfig};
use crate::protocol::ProtocolConfig;

impl Serialize for BrokerConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let values = self.sections().map_err(S::Error::custom)?;
        let mut map = serializer.serialize_map(None)?;
        for section in keys::sections() {
            if let Some(Value::Table(values)) = values.get(section) {
                map.serialize_entry(section, &InTableOrder { section, values })?;
            }
        }
        map.end()
    }
}

/// One section's values, written in the order of `keys::KEYS`.
struct InTableOrder<'a> {
    section: &'a str,
    values: &'a Table,
}

impl Serialize for InTableOrder<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for key in KEYS.iter().filter(|key| key.section == self.section) {
            if let Some(value) = self.values.get(key.name) {
                map.serialize_entry(key.name, value)?;
            }
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for BrokerConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let table = Table::deserialize(deserializer)?;
        BrokerConfig::from_sections(table).map_err(D::Error::custom)
    }
}

impl BrokerConfig {
    /// Every key's value as a two-level table (section -> key -> value): the broker's
    /// section structs, and the protocol core's fields each in its row's section.
    fn sections(&self) -> Result<Table, toml::ser::Error> {
        let mut table = Table::new();
        table.insert("server".to_owned(), Value::try_from(&self.server)?);
        table.insert("limits".to_owned(), Value::try_from(&self.limits)?);
        table.insert("timeouts".to_owned(), Value::try_from(&self.timeouts)?);
        table.insert("verify".to_owned(), Value::try_from(&self.verify)?);
        table.insert("log".to_owned(), Value::try_from(&self.log)?);
        table.insert("ws".to_owned(), Value::try_from(&self.ws)?);
        table.insert("p2p".to_owned(), Value::try_from(&self.p2p)?);
        table.insert("relay".to_owned(), Value::try_from(&self.relay)?);
        for (name, value) in Table::try_from(&self.protocol)? {
            let key = keys::core_key(&name).ok_or_else(|| {
                toml::ser::Error::custom(format!("ProtocolConfig's {name} has no key row"))
            })?;
            let section = table
                .entry(key.section)
                .or_insert_with(|| Value::Table(Table::new()));
            if let Value::Table(section) = section {
                section.insert(name, value);
            }
        }
        Ok(table)
    }

    /// The configuration from a two-level table: the protocol core's keys taken out of their
    /// sections into `ProtocolConfig`, the rest into the broker's section structs (each of
    /// which refuses a key it does not have).
    fn from_sections(mut table: Table) -> Result<BrokerConfig, toml::de::Error> {
        let protocol = ProtocolConfig::deserialize(take_core_keys(&mut table))?;
        let mut section = |name: &str| {
            table
                .remove(name)
                .unwrap_or_else(|| Value::Table(Table::new()))
        };
        let config = BrokerConfig {
            server: ServerConfig::deserialize(section("server"))?,
            limits: LimitsConfig::deserialize(section("limits"))?,
            timeouts: TimeoutsConfig::deserialize(section("timeouts"))?,
            protocol,
            verify: VerifyConfig::deserialize(section("verify"))?,
            log: LogConfig::deserialize(section("log"))?,
            ws: WsConfig::deserialize(section("ws"))?,
            p2p: P2pSection::deserialize(section("p2p"))?,
            relay: RelaySection::deserialize(section("relay"))?,
        };
        // What is left is `[protocol]`, empty once the core's keys are out, or unknown.
        for (name, rest) in table {
            let emptied = matches!(&rest, Value::Table(keys) if keys.is_empty());
            if !(emptied && keys::sections().contains(&name.as_str())) {
                return Err(toml::de::Error::custom(format!(
                    "unknown keys in [{name}]: {rest}"
                )));
            }
        }
        Ok(config)
    }
}

/// Takes the protocol core's keys out of their sections of `table`, as the flat table
/// `ProtocolConfig` deserializes from.
pub(super) fn take_core_keys(table: &mut Table) -> Table {
    let mut core = Table::new();
    for key in KEYS.iter().filter(|key| keys::is_core(key)) {
        if let Some(Value::Table(section)) = table.get_mut(key.section)
            && let Some(value) = section.remove(key.name)
        {
            core.insert(key.name.to_owned(), value);
        }
    }
    core
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_field_names_exactly_one_row_of_a_core_section() {
        let fields = Table::try_from(ProtocolConfig::default()).expect("scalars");
        for name in fields.keys() {
            let rows: Vec<_> = KEYS.iter().filter(|key| key.name == name).collect();
            assert_eq!(rows.len(), 1, "{name}");
            assert!(
                ["limits", "timeouts", "protocol"].contains(&rows[0].section),
                "{name}"
            );
        }
        assert_eq!(
            KEYS.iter().filter(|key| keys::is_core(key)).count(),
            fields.len()
        );
    }

    #[test]
    fn the_table_round_trips_in_table_order() {
        let config = BrokerConfig::default();
        let printed = config.to_toml();
        let order: Vec<String> = printed
            .lines()
            .filter_map(|line| line.split_once(" = ").map(|(key, _)| key.to_owned()))
            .collect();
        let names: Vec<&str> = KEYS.iter().map(|key| key.name).collect();
        assert_eq!(order, names);
        assert_eq!(
            printed.parse::<Table>().expect("TOML"),
            keys::default_table()
        );
    }

    #[test]
    fn a_leftover_key_is_refused() {
        let mut table = keys::default_table();
        if let Some(Value::Table(protocol)) = table.get_mut("protocol") {
            protocol.insert("bogus".to_owned(), Value::Integer(1));
        }
        let error = BrokerConfig::deserialize(table).expect_err("unknown key");
        assert!(error.to_string().contains("bogus"), "{error}");
    }
}
