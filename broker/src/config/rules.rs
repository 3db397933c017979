//! Validation: every key's bounds from the table, and the rules between keys, written once.
//!
//! Owns: `BrokerConfig::validate`, which reports every problem at once, each naming its key,
//! its value and what was expected; the bounds of single keys come from `keys::KEYS`, the
//! rules that relate keys are here (listeners on distinct ports, the `[ws]` lists, the
//! verification batch within its queue, the history rings within frame memory and within a
//! stream's queue). Also the values derived from those rules (`effective_history_bytes`,
//! `outbound_queue_bytes_min`).
//! Never does: parse sources (`layers`), or check the host (`lifecycle`).

use std::net::SocketAddr;

use toml::{Table, Value};

use super::keys::KEYS;
use super::schema::{BrokerConfig, WsConfig};
use super::{ConfigError, quote};
use crate::protocol::ProtocolConfig;

impl BrokerConfig {
    /// Every problem with this configuration (empty when it is usable), each naming its key:
    /// the bounds of every key, then the rules between keys.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut errors = self.bound_errors();
        errors.extend(self.listener_error());
        errors.extend(self.ws_errors());
        errors.extend(self.verify_batch_error());
        errors.extend(self.history_frame_error());
        errors.extend(self.history_memory_error());
        errors.extend(self.queue_bytes_error());
        errors.extend(self.log_level_error());
        errors.extend(self.p2p.errors());
        errors.extend(self.relay.errors(self.server.listen));
        errors
    }

    /// Every key whose integer value is outside its row's bounds (a gated row only when its
    /// gate is on).
    fn bound_errors(&self) -> Vec<ConfigError> {
        let table = match Table::try_from(self) {
            Ok(table) => table,
            Err(error) => return vec![ConfigError::new("config", None, error.to_string())],
        };
        let value_of = |section: &str, name: &str| table.get(section)?.get(name).cloned();
        KEYS.iter()
            .filter(|key| {
                key.gate
                    .and_then(|gate| gate.split_once('.'))
                    .is_none_or(|(section, name)| {
                        value_of(section, name) == Some(Value::Boolean(true))
                    })
            })
            .filter_map(|key| match value_of(key.section, key.name) {
                Some(Value::Integer(value)) if !key.bounds.admits(value) => Some(ConfigError::new(
                    key.dotted(),
                    Some(value.to_string()),
                    format!("expected {}", key.bounds.describe()),
                )),
                _ => None,
            })
            .collect()
    }

    /// The admin listener must not take the BPS listener's port.
    fn listener_error(&self) -> Option<ConfigError> {
        let server = &self.server;
        addresses_collide(server.listen, server.admin_listen).then(|| {
            ConfigError::new(
                "server.admin_listen",
                Some(quote(&server.admin_listen.to_string())),
                format!(
                    "expected a port other than server.listen's ({})",
                    server.listen
                ),
            )
        })
    }

    /// The problems of the `[ws]` section.
    fn ws_errors(&self) -> Vec<ConfigError> {
        let ws = &self.ws;
        let mut errors = Vec::new();
        if !ws.enabled {
            return errors;
        }
        for (other, name) in [
            (self.server.listen, "server.listen"),
            (self.server.admin_listen, "server.admin_listen"),
        ] {
            if addresses_collide(ws.listen, other) {
                errors.push(ConfigError::new(
                    "ws.listen",
                    Some(quote(&ws.listen.to_string())),
                    format!("expected a port other than {name}'s ({other})"),
                ));
            }
        }
        errors.extend(ws_list_errors(ws));
        if ws.idle_deadline_ms <= ws.ping_interval_ms {
            errors.push(ConfigError::new(
                "ws.idle_deadline_ms",
                Some(ws.idle_deadline_ms.to_string()),
                format!(
                    "expected more than ws.ping_interval_ms ({}): a session answers pings",
                    ws.ping_interval_ms
                ),
            ));
        }
        errors
    }

    /// A worker's batch must fit the pool's queue when the queue is sized explicitly.
    fn verify_batch_error(&self) -> Option<ConfigError> {
        let verify = &self.verify;
        (verify.queue_jobs_max != 0 && verify.batch_jobs_max > verify.queue_jobs_max).then(|| {
            ConfigError::new(
                "verify.batch_jobs_max",
                Some(verify.batch_jobs_max.to_string()),
                format!(
                    "expected at most verify.queue_jobs_max ({})",
                    verify.queue_jobs_max
                ),
            )
        })
    }

    /// D11: a history ring always holds the newest frame, so its byte bound in force must
    /// hold the largest frame read; a derived bound says where it came from.
    fn history_frame_error(&self) -> Option<ConfigError> {
        let protocol = self.effective_protocol();
        let largest_frame = protocol.largest_frame_bytes();
        if protocol.history_bytes_max >= largest_frame {
            return None;
        }
        let expected = format!(
            ">= {largest_frame} (the largest frame read, frame_bytes_max with its length prefix, so a ring always holds the newest frame)"
        );
        let message = if self.protocol.history_bytes_max == 0 {
            format!(
                "expected {expected} (derived from limits.history_bytes_max = 0: half of limits.frame_memory_bytes_max over limits.cohorts_max; raise the one or lower the other)"
            )
        } else {
            format!("expected {expected}")
        };
        Some(ConfigError::new(
            "limits.history_bytes_max",
            Some(protocol.history_bytes_max.to_string()),
            message,
        ))
    }

    /// `log.level` must be a filter `tracing` understands.
    fn log_level_error(&self) -> Option<ConfigError> {
        let error = tracing_subscriber::EnvFilter::try_new(&self.log.level).err()?;
        Some(ConfigError::new(
            "log.level",
            Some(quote(&self.log.level)),
            format!("expected a tracing filter such as info or bps_broker=debug,warn ({error})"),
        ))
    }

    /// D11: the history ring bound in force: `limits.history_bytes_max`, or when it is 0 the
    /// largest that keeps `limits.cohorts_max` full rings within half of
    /// `limits.frame_memory_bytes_max`, at most the protocol core's default (256 KiB). So
    /// raising `cohorts_max` or lowering frame memory shrinks the default instead of refusing
    /// to start.
    #[must_use]
    pub fn effective_history_bytes(&self) -> usize {
        let protocol = &self.protocol;
        if protocol.history_bytes_max != 0 {
            return protocol.history_bytes_max;
        }
        let share = self.limits.frame_memory_bytes_max / 2 / protocol.cohorts_max.max(1);
        share.min(ProtocolConfig::default().history_bytes_max)
    }

    /// D11: every cohort's full history ring together must leave at least half of frame
    /// memory to live traffic. Retained frames are frame bytes (charged to frame memory while
    /// a ring holds them); if rings could fill it, readers would wait for room that only a
    /// reclaim gives back. (The derived bound fits by construction.)
    fn history_memory_error(&self) -> Option<ConfigError> {
        let protocol = &self.protocol;
        let rings = protocol
            .cohorts_max
            .saturating_mul(protocol.history_bytes_max);
        let half = self.limits.frame_memory_bytes_max / 2;
        (rings > half).then(|| {
            ConfigError::new(
                "limits.history_bytes_max",
                Some(protocol.history_bytes_max.to_string()),
                format!(
                    "expected at most {} (limits.cohorts_max = {} full history rings may hold at most half of limits.frame_memory_bytes_max = {})",
                    half / protocol.cohorts_max.max(1),
                    protocol.cohorts_max,
                    self.limits.frame_memory_bytes_max
                ),
            )
        })
    }

    /// The least `limits.outbound_queue_bytes_max` may be: a full history backlog and one
    /// largest frame behind it, so a late joiner that reads is never reset for its backlog.
    #[must_use]
    pub fn outbound_queue_bytes_min(&self) -> usize {
        self.effective_history_bytes() + 2 * self.protocol.frame_bytes_max
    }

    fn queue_bytes_error(&self) -> Option<ConfigError> {
        let least = self.outbound_queue_bytes_min();
        (self.limits.outbound_queue_bytes_max < least).then(|| {
            ConfigError::new(
                "limits.outbound_queue_bytes_max",
                Some(self.limits.outbound_queue_bytes_max.to_string()),
                format!(
                    "expected at least {least} (a full history backlog, limits.history_bytes_max in effect = {}, and two frames of limits.frame_bytes_max = {})",
                    self.effective_history_bytes(),
                    self.protocol.frame_bytes_max
                ),
            )
        })
    }
}

/// The entries of `ws.trusted_proxies` and `ws.allowed_origins` that do not parse.
fn ws_list_errors(ws: &WsConfig) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    for proxy in &ws.trusted_proxies {
        if let Err(error) = proxy.parse::<bps_ws::IpRange>() {
            errors.push(ConfigError::new(
                "ws.trusted_proxies",
                Some(quote(proxy)),
                format!(
                    "{error}: expected IP addresses or CIDR ranges such as \"127.0.0.1\", \
                     \"::1\", \"10.0.0.0/8\" or \"fd00::/8\""
                ),
            ));
        }
    }
    for origin in &ws.allowed_origins {
        let well_formed = origin == "*"
            || ((origin.starts_with("http://") || origin.starts_with("https://"))
                && !origin.ends_with('/'));
        if !well_formed {
            errors.push(ConfigError::new(
                "ws.allowed_origins",
                Some(quote(origin)),
                "expected \"*\" or origins such as \"https://app.example\" (scheme://host[:port], no path)",
            ));
        }
    }
    errors
}

/// Whether two listeners would fight over one port: same non-zero port, and the same IP or
/// either one on the wildcard address.
fn addresses_collide(first: SocketAddr, second: SocketAddr) -> bool {
    first.port() != 0
        && first.port() == second.port()
        && (first.ip() == second.ip()
            || first.ip().is_unspecified()
            || second.ip().is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reload::{apply_reloadable, reloadable_diff};
    use crate::protocol::HistoryPolicy;

    #[test]
    fn defaults_validate() {
        assert_eq!(BrokerConfig::default().validate(), Vec::new());
    }

    #[test]
    fn defaults_match_the_protocol_core() {
        assert_eq!(
            BrokerConfig::default().effective_protocol(),
            ProtocolConfig::default()
        );
    }

    #[test]
    fn every_bound_error_names_key_value_and_expectation() {
        let mut config = BrokerConfig::default();
        config.protocol.streams_per_cohort_max = 0;
        config.protocol.cursors_per_cohort_max = 0;
        config.protocol.outbound_queue_frames_max = 1;
        config.protocol.frame_bytes_max = 100;
        config.protocol.claim_deadline_ms = 0;
        config.protocol.history_frames_max = 0;
        config.protocol.history_bytes_max = 50;
        config.limits.outbound_queue_bytes_max = 1 << 20;
        let messages: Vec<String> = config.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "limits.streams_per_cohort_max = 0: expected >= 1".to_string(),
                "limits.outbound_queue_frames_max = 1: expected >= 2 (an Ack and the roster-first delivery are queued together)"
                    .to_string(),
                "limits.cursors_per_cohort_max = 0: expected >= 1".to_string(),
                format!(
                    "limits.frame_bytes_max = 100: expected >= {} (the largest valid Broadcast body)",
                    bps_proto::BROADCAST_FRAME_BYTES_MAX
                ),
                "limits.history_frames_max = 0: expected >= 1".to_string(),
                "timeouts.claim_deadline_ms = 0: expected >= 1".to_string(),
                "limits.history_bytes_max = 50: expected >= 101 (the largest frame read, frame_bytes_max with its length prefix, so a ring always holds the newest frame)".to_string(),
            ]
        );
    }

    #[test]
    fn ipv6_prefix_bits_are_16_to_64() {
        for (bits, valid) in [(15, false), (16, true), (48, true), (64, true), (65, false)] {
            let mut config = BrokerConfig::default();
            config.protocol.ipv6_prefix_bits = bits;
            assert_eq!(config.validate().is_empty(), valid, "{bits}");
        }
        let mut config = BrokerConfig::default();
        config.protocol.ipv6_prefix_bits = 8;
        let messages: Vec<String> = config.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec!["limits.ipv6_prefix_bits = 8: expected 16..=64 (no shorter than a regional block, no longer than one peer)".to_string()]
        );
    }

    #[test]
    fn zero_blocklist_durations_are_valid() {
        let mut config = BrokerConfig::default();
        config.protocol.blocklist_violation_ms = 0;
        config.protocol.blocklist_claim_timeout_ms = 0;
        assert!(config.validate().is_empty());
    }

    #[test]
    fn ws_bounds_apply_only_to_a_running_listener() {
        let mut config = BrokerConfig::default();
        config.ws.ping_interval_ms = 0;
        config.ws.idle_deadline_ms = 0;
        config.ws.service_posts_per_peer_per_s = 0;
        let mut keys: Vec<String> = config
            .validate()
            .into_iter()
            .map(|error| error.key)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            vec![
                "ws.idle_deadline_ms",
                "ws.ping_interval_ms",
                "ws.service_posts_per_peer_per_s"
            ]
        );
        config.ws.enabled = false;
        assert_eq!(config.validate(), Vec::new());
    }

    #[test]
    fn the_derived_history_bound_keeps_the_rings_within_half_of_frame_memory() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.protocol.history_bytes_max, 0);
        assert_eq!(config.effective_history_bytes(), 256 << 10);
        // More cohorts, or less frame memory: a smaller ring, never a refusal.
        config.protocol.cohorts_max = 2_000;
        let derived = config.effective_history_bytes();
        assert_eq!(derived, (512 << 20) / 2 / 2_000);
        assert!(config.protocol.cohorts_max * derived <= config.limits.frame_memory_bytes_max / 2);
        assert_eq!(config.validate(), Vec::new());
        assert_eq!(config.effective_protocol().history_bytes_max, derived);
        // Too little to hold the largest frame: refused, saying where the value came from.
        config.limits.frame_memory_bytes_max = 8 << 20;
        let errors = config.validate();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].key, "limits.history_bytes_max");
        assert!(
            errors[0]
                .message
                .contains("derived from limits.history_bytes_max = 0")
        );
    }

    #[test]
    fn history_rings_may_take_at_most_half_of_frame_memory() {
        let mut config = BrokerConfig::default();
        config.protocol.cohorts_max = 4;
        config.limits.frame_memory_bytes_max = 8 << 20;
        config.protocol.history_bytes_max = 1 << 20;
        config.limits.outbound_queue_bytes_max = 2 << 20;
        assert_eq!(config.validate(), Vec::new());
        config.protocol.history_bytes_max = (1 << 20) + 1;
        let messages: Vec<String> = config.validate().iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            vec![
                "limits.history_bytes_max = 1048577: expected at most 1048576 (limits.cohorts_max = 4 full history rings may hold at most half of limits.frame_memory_bytes_max = 8388608)"
                    .to_string()
            ]
        );
        // The core's own bound names the key in its section.
        config.protocol.history_bytes_max = 100;
        assert_eq!(config.validate()[0].key, "limits.history_bytes_max");
        config.protocol.history_bytes_max = 1 << 20;
        config.protocol.history_frames_max = 0;
        assert_eq!(config.validate()[0].key, "limits.history_frames_max");
    }

    #[test]
    fn a_stream_may_hold_at_least_a_full_backlog_and_two_frames() {
        let mut config = BrokerConfig::default();
        config.protocol.history_bytes_max = 100_000;
        config.limits.outbound_queue_bytes_max = 100_000 + 2 * 8192;
        assert_eq!(config.validate(), Vec::new());
        config.limits.outbound_queue_bytes_max -= 1;
        let errors = config.validate();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].key, "limits.outbound_queue_bytes_max");
        assert!(
            errors[0].to_string().contains("expected at least 116384"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn the_history_policy_reloads_and_maps_onto_the_core() {
        let old = BrokerConfig::default();
        let new = BrokerConfig::from_toml_str("[protocol]\nhistory = \"refuse\"\n")
            .expect("a valid [protocol] section");
        assert_eq!(old.effective_protocol().history, HistoryPolicy::Serve);
        assert_eq!(new.effective_protocol().history, HistoryPolicy::Refuse);
        assert_eq!(
            reloadable_diff(&old, &new),
            Ok(vec![
                "protocol.history: \"serve\" -> \"refuse\"".to_string()
            ])
        );
        assert_eq!(apply_reloadable(&old, &new), new);
        let errors =
            BrokerConfig::from_toml_str("[protocol]\nhistory = \"sometimes\"\n").unwrap_err();
        assert_eq!(errors[0].key, "protocol.history", "{errors:?}");
    }

    #[test]
    fn collisions() {
        let any = |port| SocketAddr::from(([0, 0, 0, 0], port));
        let local = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let other = |port| SocketAddr::from(([127, 0, 0, 2], port));
        assert!(addresses_collide(any(5), local(5)));
        assert!(addresses_collide(local(5), local(5)));
        assert!(!addresses_collide(local(5), other(5)));
        assert!(!addresses_collide(local(0), local(0)));
        assert!(!addresses_collide(any(5), any(6)));
    }
}
