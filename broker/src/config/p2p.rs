//! The `[p2p]` section: its typed form (`P2pSection`), the checks of its values that serde
//! cannot make (multiaddrs that parse, dial addresses that name their peer, a welcome message
//! bee accepts), and the host's configuration it maps to (`host_config`).
//! Never does: read a key file or start the host (that is `io::p2p`).

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use bps_bee::WELCOME_MESSAGE_BYTES_MAX;
use bps_p2p::{Multiaddr, P2pConfig, dial_target};
use serde::{Deserialize, Serialize};

use super::{ConfigError, quote};

/// `[p2p]`: the libp2p carrier (issue 20).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct P2pSection {
    pub enabled: bool,
    pub listen: Vec<String>,
    pub mode: P2pMode,
    pub network_id: u64,
    pub swarm_key_file: String,
    pub libp2p_key_file: String,
    pub dial: Vec<String>,
    pub welcome_message: String,
    pub connections_max: u32,
    pub streams_per_connection_max: u32,
    pub pending_handshakes_per_ip_max: u32,
    pub handshake_deadline_ms: u64,
}

/// What the broker tells bee nodes it is, and whether it dials them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum P2pMode {
    /// A light node: dials `p2p.dial`, serves no storage protocols.
    Light,
    /// A full node, for bee nodes that dial the broker.
    Full,
}

impl P2pMode {
    /// The name as the config writes it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            P2pMode::Light => "light",
            P2pMode::Full => "full",
        }
    }
}

impl P2pSection {
    /// The listen addresses, parsed (`errors` reports the ones that do not parse).
    #[must_use]
    pub fn listen_addrs(&self) -> Vec<Multiaddr> {
        self.listen
            .iter()
            .filter_map(|text| text.parse().ok())
            .collect()
    }

    /// The handshake deadline.
    #[must_use]
    pub fn handshake_deadline(&self) -> Duration {
        Duration::from_millis(self.handshake_deadline_ms)
    }

    /// What the libp2p host is started with.
    #[must_use]
    pub fn host_config(&self) -> P2pConfig {
        let mut config = P2pConfig::new(PathBuf::from(&self.libp2p_key_file));
        config.listen = self.listen_addrs();
        config.dial = self
            .dial
            .iter()
            .filter_map(|text| text.parse().ok())
            .collect();
        config.max_connections = nonzero(self.connections_max);
        config.max_streams_per_connection = nonzero(self.streams_per_connection_max);
        config.max_pending_per_ip = nonzero(self.pending_handshakes_per_ip_max);
        config
    }

    /// The problems of the section when it is enabled (its bounds are the key table's).
    #[must_use]
    pub fn errors(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if !self.enabled {
            return errors;
        }
        for text in &self.listen {
            if let Err(error) = text.parse::<Multiaddr>() {
                errors.push(ConfigError::new(
                    "p2p.listen",
                    Some(quote(text)),
                    format!("{error}: expected multiaddrs such as \"/ip4/0.0.0.0/tcp/1634\""),
                ));
            }
        }
        for text in &self.dial {
            let checked = text
                .parse::<Multiaddr>()
                .map_err(|error| error.to_string())
                .and_then(|addr| dial_target(&addr).map_err(|error| error.to_string()));
            if let Err(error) = checked {
                errors.push(ConfigError::new(
                    "p2p.dial",
                    Some(quote(text)),
                    format!("{error}: expected multiaddrs such as \"/ip4/10.0.0.5/tcp/1634/p2p/16Uiu2HAm...\""),
                ));
            }
        }
        if self.welcome_message.len() > WELCOME_MESSAGE_BYTES_MAX {
            errors.push(ConfigError::new(
                "p2p.welcome_message",
                Some(quote(&self.welcome_message)),
                format!("expected at most {WELCOME_MESSAGE_BYTES_MAX} bytes (bee's bound)"),
            ));
        }
        for (key, path) in [
            ("p2p.swarm_key_file", &self.swarm_key_file),
            ("p2p.libp2p_key_file", &self.libp2p_key_file),
        ] {
            if path.is_empty() {
                errors.push(ConfigError::new(
                    key,
                    Some(quote(path)),
                    "expected a file path",
                ));
            }
        }
        errors
    }
}

fn nonzero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn enabled() -> P2pSection {
        P2pSection {
            enabled: true,
            ..BrokerConfig::default().p2p
        }
    }

    fn keys(errors: &[ConfigError]) -> Vec<&str> {
        errors.iter().map(|error| error.key.as_str()).collect()
    }

    #[test]
    fn the_defaults_are_bees_and_valid() {
        let section = enabled();
        assert!(section.errors().is_empty(), "{:?}", section.errors());
        assert_eq!(section.mode, P2pMode::Light);
        assert_eq!(section.network_id, 1);
        assert_eq!(section.handshake_deadline(), Duration::from_secs(15));
        let host = section.host_config();
        assert_eq!(host.listen[0].to_string(), "/ip4/0.0.0.0/tcp/1634");
    }

    #[test]
    fn bad_values_name_their_key() {
        let mut section = enabled();
        section.listen = vec!["0.0.0.0:1634".into()];
        section.dial = vec!["/ip4/10.0.0.5/tcp/1634".into(), "not a multiaddr".into()];
        section.welcome_message = "x".repeat(WELCOME_MESSAGE_BYTES_MAX + 1);
        section.swarm_key_file = String::new();
        let errors = section.errors();
        assert_eq!(
            keys(&errors),
            [
                "p2p.listen",
                "p2p.dial",
                "p2p.dial",
                "p2p.welcome_message",
                "p2p.swarm_key_file"
            ]
        );
        assert!(
            errors[1].message.contains("/p2p/<peer id>"),
            "{}",
            errors[1]
        );
        section.enabled = false;
        assert!(
            section.errors().is_empty(),
            "a disabled section is not judged"
        );
    }
}
