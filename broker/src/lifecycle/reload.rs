//! What a SIGHUP applies.
//!
//! Owns: `plan_reload`, which decides a `ReloadPlan` from the running configuration and the
//! freshly loaded one: invalid, unchanged, or the reloadable changes to apply and the changed
//! keys that need a restart.
//! Never does: load, apply or log a reload (`serve` does), or say which key is reloadable
//! (`config`'s table does).

use crate::config::{BrokerConfig, ConfigError, apply_reloadable, reloadable_diff};

/// What a SIGHUP does, decided from the running configuration and the freshly loaded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReloadPlan {
    /// The new configuration did not load or validate: keep running with the old one.
    Invalid(Vec<ConfigError>),
    /// Nothing changed.
    Unchanged,
    /// Apply `config`: `changes` lists the reloadable keys applied
    /// (`"timeouts.claim_deadline_ms: 30000 -> 5000"`), `restart_required` the changed keys
    /// kept at their old value until a restart.
    Apply {
        /// The configuration to run with from now on.
        config: Box<BrokerConfig>,
        /// Reloadable changes applied.
        changes: Vec<String>,
        /// Changed keys that need a restart, ignored.
        restart_required: Vec<String>,
    },
}

/// Decides a reload: validate the new configuration, apply its reloadable keys, and report the
/// others.
#[must_use]
pub fn plan_reload(
    current: &BrokerConfig,
    loaded: Result<BrokerConfig, Vec<ConfigError>>,
) -> ReloadPlan {
    let new = match loaded {
        Ok(new) => new,
        Err(errors) => return ReloadPlan::Invalid(errors),
    };
    let errors = new.validate();
    if !errors.is_empty() {
        return ReloadPlan::Invalid(errors);
    }
    let (config, restart_required) = match reloadable_diff(current, &new) {
        Ok(_) => (new, Vec::new()),
        Err(restart_required) => (apply_reloadable(current, &new), restart_required),
    };
    // `config` differs from `current` in reloadable keys only, so this diff is always `Ok`.
    let changes = reloadable_diff(current, &config).unwrap_or_default();
    if changes.is_empty() && restart_required.is_empty() {
        ReloadPlan::Unchanged
    } else {
        ReloadPlan::Apply {
            config: Box::new(config),
            changes,
            restart_required,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reload_plans() {
        let current = BrokerConfig::default();
        assert_eq!(
            plan_reload(&current, Ok(current.clone())),
            ReloadPlan::Unchanged
        );

        let mut new = current.clone();
        new.protocol.claim_deadline_ms = 5000;
        new.server.cores = 3;
        new.protocol.frame_bytes_max = 20_000;
        let ReloadPlan::Apply {
            config,
            changes,
            restart_required,
        } = plan_reload(&current, Ok(new))
        else {
            panic!("expected apply");
        };
        assert_eq!(config.protocol.claim_deadline_ms, 5000);
        assert_eq!(config.server.cores, 0);
        assert_eq!(
            config.protocol.frame_bytes_max,
            current.protocol.frame_bytes_max
        );
        assert_eq!(
            changes,
            vec!["timeouts.claim_deadline_ms: 30000 -> 5000".to_owned()]
        );
        assert_eq!(
            restart_required,
            vec![
                "limits.frame_bytes_max".to_owned(),
                "server.cores".to_owned()
            ]
        );

        let mut invalid = current.clone();
        invalid.protocol.cohorts_max = 0;
        let ReloadPlan::Invalid(errors) = plan_reload(&current, Ok(invalid)) else {
            panic!("expected invalid");
        };
        assert_eq!(errors[0].key, "limits.cohorts_max");
    }
}
