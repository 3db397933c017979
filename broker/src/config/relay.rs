//! The `[relay]` section: edge mode (docs/SCALING.md, "Edges"). A broker with upstreams is
//! an edge: it holds one upstream subscriber stream per cohort it has local streams for, to
//! that cohort's root, placed over `upstreams` by the cohort key.
//!
//! Owns: `RelaySection`, the checks serde cannot make (each upstream a `HOST:PORT`, the list
//! one placement accepts, none naming this broker's own TCP listener) and the machines'
//! `EdgePolicy`.
//! Never does: connect (that is `io::upstream`).

use std::net::{IpAddr, SocketAddr};

use bps_proto::{BROKER_NAME_BYTES_MAX, CohortKey, RelayId, rank};
use serde::{Deserialize, Serialize};

use super::{ConfigError, quote};
use crate::protocol::EdgePolicy;

/// `[relay]`: edge mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelaySection {
    pub upstreams: Vec<String>,
    pub upstream_linger_ms: u64,
    pub connect_timeout_ms: u64,
    pub reconnect_backoff_min_ms: u64,
    pub reconnect_backoff_max_ms: u64,
}

impl RelaySection {
    /// Whether this broker is an edge.
    #[must_use]
    pub fn is_edge(&self) -> bool {
        !self.upstreams.is_empty()
    }

    /// What the machines are told of edge mode, with this process's relay id.
    #[must_use]
    pub fn edge_policy(&self, relay_id: RelayId) -> Option<EdgePolicy> {
        self.is_edge().then_some(EdgePolicy {
            relay_id,
            linger_ms: self.upstream_linger_ms,
        })
    }

    /// Every problem with the section: an entry that is not `HOST:PORT`, a list placement
    /// refuses (empty or duplicate names), an entry naming `listen`, backoff bounds reversed.
    #[must_use]
    pub fn errors(&self, listen: SocketAddr) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        for entry in &self.upstreams {
            if let Err(why) = check_entry(entry, listen) {
                errors.push(ConfigError::new("relay.upstreams", Some(quote(entry)), why));
            }
        }
        if let Err(error) = rank(&self.upstreams, &CohortKey::from_bytes(bytes::Bytes::new())) {
            let empty = self.upstreams.is_empty();
            if !empty {
                errors.push(ConfigError::new(
                    "relay.upstreams",
                    None,
                    format!("{error}: placement needs distinct, non-empty names"),
                ));
            }
        }
        if self.reconnect_backoff_min_ms > self.reconnect_backoff_max_ms {
            errors.push(ConfigError::new(
                "relay.reconnect_backoff_min_ms",
                Some(self.reconnect_backoff_min_ms.to_string()),
                format!(
                    "expected at most relay.reconnect_backoff_max_ms ({})",
                    self.reconnect_backoff_max_ms
                ),
            ));
        }
        errors
    }
}

/// One upstream: `HOST:PORT` with a port, at most `BROKER_NAME_BYTES_MAX` bytes, not this
/// broker's own listener (an edge of itself would be a loop at once).
fn check_entry(entry: &str, listen: SocketAddr) -> Result<(), String> {
    let name = bps_proto::broker_name(entry);
    if name.len() > BROKER_NAME_BYTES_MAX {
        return Err(format!(
            "expected at most {BROKER_NAME_BYTES_MAX} bytes, like \"10.0.0.1:1637\""
        ));
    }
    let Some((host, port)) = name.rsplit_once(':') else {
        return Err("expected HOST:PORT, like \"10.0.0.1:1637\" or \"root.example:1637\"".into());
    };
    let Ok(port) = port.parse::<u16>() else {
        return Err(format!("{port:?} is not a port: expected HOST:PORT"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err("expected HOST:PORT with a host".into());
    }
    if port == listen.port() && names_this_host(host, listen.ip()) {
        return Err(format!(
            "names this broker's own listener ({listen}): an edge cannot be its own upstream"
        ));
    }
    Ok(())
}

/// Whether `host` is the listener's address, or a loopback or unspecified one while the
/// listener takes every address or a loopback one.
fn names_this_host(host: &str, listen: IpAddr) -> bool {
    let ip = match host {
        "localhost" => IpAddr::from([127, 0, 0, 1]),
        other => match other.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => return false,
        },
    };
    ip == listen
        || ((listen.is_unspecified() || listen.is_loopback())
            && (ip.is_loopback() || ip.is_unspecified()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(upstreams: &[&str]) -> RelaySection {
        RelaySection {
            upstreams: upstreams.iter().map(|entry| (*entry).to_owned()).collect(),
            upstream_linger_ms: 30_000,
            connect_timeout_ms: 5_000,
            reconnect_backoff_min_ms: 1_000,
            reconnect_backoff_max_ms: 30_000,
        }
    }

    fn listen() -> SocketAddr {
        "0.0.0.0:1637".parse().expect("an address")
    }

    #[test]
    fn upstreams_that_are_host_and_port_and_not_this_broker_pass() {
        let good = section(&["10.0.0.1:1637", "root.example:1637", "[2001:db8::1]:1637"]);
        assert_eq!(good.errors(listen()), Vec::new());
        assert!(good.is_edge());
        assert!(!section(&[]).is_edge());
    }

    #[test]
    fn an_upstream_naming_this_broker_or_no_port_is_refused_with_its_value() {
        for entry in [
            "127.0.0.1:1637",
            "localhost:1637",
            "0.0.0.0:1637",
            "10.0.0.1",
            "x:y",
        ] {
            let errors = section(&[entry]).errors(listen());
            assert_eq!(errors.len(), 1, "{entry}: {errors:?}");
            let text = errors[0].to_string();
            assert!(
                text.contains("relay.upstreams") && text.contains(entry),
                "{text}"
            );
        }
        let duplicate = section(&["10.0.0.1:1637", " 10.0.0.1:1637"]).errors(listen());
        assert!(
            duplicate[0].to_string().contains("distinct"),
            "{duplicate:?}"
        );
    }
}
