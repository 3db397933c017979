//! The broker's configuration: one table of keys, and what reads it.
//!
//! Owns: the layout of the concept. `keys` declares every key once (name, default, unit,
//! bounds, reloadable or restart-only, why); `schema` is the typed `BrokerConfig` a running
//! broker reads (the protocol core's keys in bps-core's `ProtocolConfig`, declared there
//! once), and `sections` its TOML form, each key in its table row's section; `layers` loads it from the defaults, a file, the environment and the command
//! line; `rules` validates it (every key's bounds and the rules between keys, all errors at
//! once); `reload` says what a SIGHUP may change; `render` writes the example config and the
//! key reference (docs/CONFIG.md) from the table. Also owns `ConfigError`, the one shape of
//! every problem, naming its key.
//! Never does: start anything or check the host (that is `lifecycle`'s startup check).

use std::fmt;

use toml::Value;

pub mod keys;
mod layers;
mod p2p;
mod relay;
mod reload;
pub mod render;
mod rules;
mod schema;
mod sections;

pub use keys::{
    CORES_MAX, SERVICE_POSTS_PER_PEER_PER_S_MAX, WRITE_BATCH_FRAMES_MAX, WRITE_COALESCE_US_MAX,
};
pub use layers::{ConfigSources, ENV_PREFIX};
pub use p2p::{P2pMode, P2pSection};
pub use relay::RelaySection;
pub use reload::{apply_reloadable, is_reloadable, reloadable_diff};
pub use schema::{
    BrokerConfig, IoUringMode, LimitsConfig, LogConfig, LogFormat, ServerConfig, TimeoutsConfig,
    VerifyConfig, VerifyMode, WsConfig,
};

/// One configuration problem, naming the key it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The dotted key (`limits.cohorts_max`), or the source that failed (`--config`).
    pub key: String,
    /// The offending value as TOML, when there is one.
    pub value: Option<String>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, value: Option<String>, message: impl Into<String>) -> Self {
        ConfigError {
            key: key.into(),
            value,
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{} = {}: {}", self.key, value, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A string as a TOML literal, for error messages.
fn quote(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}
