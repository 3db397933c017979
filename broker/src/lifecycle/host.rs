//! The host against the configuration.
//!
//! Owns: `HostFacts` (the cores this process may run on, the `RLIMIT_NOFILE` soft limit, the
//! memory), the file-descriptor arithmetic (`nofile_needed` with its NOFILE margins,
//! `raise_nofile_limit`), and `startup_checks`: refuse clear misconfiguration of the host
//! with a message naming the fix, and a configuration whose worst-case memory exceeds its
//! budget; a default `limits.connections_max` that does not fit is lowered to what does.
//! Never does: say its warnings and refusals (it returns them: `run` logs them,
//! `check-config` prints them), or check a key on its own (that is `config`'s rules).

use crate::budget::MemoryBudget;
use crate::config::{BrokerConfig, LimitsConfig};

/// File descriptors the broker needs besides its streams: stdio, the admin listener and its
/// connections, the notify socket, the verification pool's wakes, log files.
pub const NOFILE_BASE_MARGIN: u64 = 64;

/// File descriptors each core needs besides its streams: its listener, its io_uring or epoll
/// instance, its eventfd and timer.
pub const NOFILE_PER_CORE_MARGIN: u64 = 8;

/// What the startup checks need to know about the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// Cores this process may run on.
    pub available_cores: usize,
    /// `RLIMIT_NOFILE` soft limit after `raise_nofile_limit`, if it could be read.
    pub nofile_soft: Option<u64>,
    /// The host's memory (or its cgroup's limit), for the default memory budget.
    pub memory_bytes: u64,
}

impl HostFacts {
    /// Reads the host: the affinity mask's cores, the current `RLIMIT_NOFILE`, the memory.
    #[must_use]
    pub fn probe() -> HostFacts {
        HostFacts {
            available_cores: available_cores(),
            nofile_soft: nofile_limits().map(|(soft, _)| soft),
            memory_bytes: crate::budget::host_memory_bytes(),
        }
    }

    /// The worst case of `config` on this host.
    #[must_use]
    pub fn budget_of(&self, config: &BrokerConfig) -> MemoryBudget {
        let cores = config.effective_cores(self.available_cores);
        MemoryBudget::of(
            config,
            cores,
            config.effective_verify_workers(cores),
            self.memory_bytes,
        )
    }
}

/// Cores this process may run on (its affinity mask, as the I/O layer pins to).
#[must_use]
pub fn available_cores() -> usize {
    core_affinity::get_core_ids()
        .map(|ids| ids.len())
        .filter(|count| *count > 0)
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
}

/// File descriptors the configuration needs on `cores` cores.
#[must_use]
pub fn nofile_needed(config: &BrokerConfig, cores: usize) -> u64 {
    let streams = u64::try_from(config.limits.connections_max).unwrap_or(u64::MAX);
    let cores = u64::try_from(cores).unwrap_or(u64::MAX);
    streams
        .saturating_mul(config.server.nofile_per_stream)
        .saturating_add(NOFILE_BASE_MARGIN)
        .saturating_add(cores.saturating_mul(NOFILE_PER_CORE_MARGIN))
}

/// The `RLIMIT_NOFILE` (soft, hard) limits.
fn nofile_limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the valid, exclusively borrowed `limit`.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) };
    (status == 0).then_some((limit.rlim_cur, limit.rlim_max))
}

/// Raises the `RLIMIT_NOFILE` soft limit towards `needed` (up to the hard limit, which only
/// the service manager may raise) and returns the soft limit in force afterwards.
pub fn raise_nofile_limit(needed: u64) -> Option<u64> {
    let (soft, hard) = nofile_limits()?;
    if soft >= needed {
        return Some(soft);
    }
    let target = needed.min(hard);
    if target <= soft {
        return Some(soft);
    }
    let limit = libc::rlimit {
        rlim_cur: target,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the valid `limit`.
    let status = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit) };
    if status == 0 {
        tracing::info!(
            from = soft,
            to = target,
            "raised the RLIMIT_NOFILE soft limit"
        );
        Some(target)
    } else {
        Some(soft)
    }
}

/// Refuses clear misconfiguration of the host, each message naming the fix. Returns the
/// configuration to run with and its worst-case memory: when `limits.connections_max` is
/// left at its default and the file-descriptor limit or the memory budget cannot hold it,
/// the default is lowered to what fits (with a warning from the caller); an explicit value
/// that does not fit is refused.
///
/// # Errors
/// Every refusal, one message each.
pub fn startup_checks(
    config: &BrokerConfig,
    host: &HostFacts,
) -> Result<(BrokerConfig, Vec<String>, MemoryBudget), Vec<String>> {
    let mut refusals = Vec::new();
    let mut warnings = Vec::new();
    let mut effective = config.clone();
    check_cores(config, host, (&mut refusals, &mut warnings));
    let cores = config.effective_cores(host.available_cores);
    let is_default = config.limits.connections_max == LimitsConfig::default().connections_max;
    fit_nofile(
        &mut effective,
        host,
        cores,
        is_default,
        (&mut refusals, &mut warnings),
    );
    let budget = fit_budget(
        &mut effective,
        host,
        is_default,
        (&mut refusals, &mut warnings),
    );
    check_verify_queue(config, cores, &mut refusals);
    if refusals.is_empty() {
        Ok((effective, warnings, budget))
    } else {
        Err(refusals)
    }
}

/// The `server.cores` part of `startup_checks`: no more cores than the host offers, and a
/// warning when "all of them" is more than a broker runs.
fn check_cores(
    config: &BrokerConfig,
    host: &HostFacts,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) {
    if config.server.cores > host.available_cores {
        refusals.push(format!(
            "server.cores = {} but only {} cores are available to this process: lower \
             --cores / server.cores, or set it to 0 to use all of them",
            config.server.cores, host.available_cores
        ));
    }
    if config.server.cores == 0 && host.available_cores > crate::config::CORES_MAX {
        warnings.push(format!(
            "{} cores are available but a broker runs at most {} (a stream id names its core \
             in 8 bits); running on {}",
            host.available_cores,
            crate::config::CORES_MAX,
            crate::config::CORES_MAX
        ));
    }
}

/// The `verify.queue_jobs_max` part of `startup_checks`: an explicit queue holds every job
/// that may be in flight.
fn check_verify_queue(config: &BrokerConfig, cores: usize, refusals: &mut Vec<String>) {
    let jobs_needed = config.verify_jobs_in_flight_max(cores);
    if config.verify.queue_jobs_max != 0 && config.verify.queue_jobs_max < jobs_needed {
        refusals.push(format!(
            "verify.queue_jobs_max = {} is below the {cores} cores x \
             (limits.frames_in_flight_per_core_max = {} + {} W5 relays) = {jobs_needed} jobs \
             that may be in flight: raise it, or set it to 0 to size it so",
            config.verify.queue_jobs_max,
            config.limits.frames_in_flight_per_core_max,
            crate::limits::SERVICE_RELAYS_IN_FLIGHT_PER_CORE_MAX
        ));
    }
}

/// The `RLIMIT_NOFILE` part of `startup_checks`.
fn fit_nofile(
    effective: &mut BrokerConfig,
    host: &HostFacts,
    cores: usize,
    is_default: bool,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) {
    let needed = nofile_needed(effective, cores);
    let Some(soft) = host.nofile_soft.filter(|soft| *soft < needed) else {
        return;
    };
    let margin = needed
        - u64::try_from(effective.limits.connections_max)
            .unwrap_or(u64::MAX)
            .saturating_mul(effective.server.nofile_per_stream);
    let fitting = soft.saturating_sub(margin) / effective.server.nofile_per_stream.max(1);
    if is_default && fitting > 0 {
        warnings.push(format!(
            "RLIMIT_NOFILE is {soft}, too low for the default limits.connections_max = {} \
             (needs {needed}); running with limits.connections_max = {fitting}. Raise \
             LimitNOFILE= in the unit or `ulimit -n` to get the default",
            effective.limits.connections_max
        ));
        effective.limits.connections_max = usize::try_from(fitting).unwrap_or(usize::MAX);
    } else {
        refusals.push(format!(
            "RLIMIT_NOFILE is {soft} but limits.connections_max = {} x \
             server.nofile_per_stream = {} plus {margin} for listeners and runtimes needs \
             {needed}: raise LimitNOFILE= in the unit or `ulimit -n`, or lower \
             limits.connections_max to at most {fitting}",
            effective.limits.connections_max, effective.server.nofile_per_stream
        ));
    }
}

/// The memory-budget part of `startup_checks`: the worst case must fit; a default
/// `limits.connections_max` is lowered until it does.
fn fit_budget(
    effective: &mut BrokerConfig,
    host: &HostFacts,
    is_default: bool,
    (refusals, warnings): (&mut Vec<String>, &mut Vec<String>),
) -> MemoryBudget {
    let mut budget = host.budget_of(effective);
    if budget.fits() || !is_default {
        if !budget.fits() {
            refusals.push(budget.refusal());
        }
        return budget;
    }
    let wanted = effective.limits.connections_max;
    while !budget.fits() && effective.limits.connections_max > 1 {
        effective.limits.connections_max /= 2;
        budget = host.budget_of(effective);
    }
    if budget.fits() {
        warnings.push(format!(
            "the default limits.connections_max = {wanted} does not fit the memory budget \
             (limits.memory_bytes_max); running with limits.connections_max = {} ({budget})",
            effective.limits.connections_max
        ));
    } else {
        refusals.push(budget.refusal());
    }
    budget
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(cores: usize, nofile: u64) -> HostFacts {
        HostFacts {
            available_cores: cores,
            nofile_soft: Some(nofile),
            memory_bytes: 64 << 30,
        }
    }

    #[test]
    fn startup_checks_pass_with_room() {
        let config = BrokerConfig::default();
        let Ok((effective, warnings, _)) = startup_checks(&config, &host(4, 1 << 20)) else {
            panic!("refused");
        };
        assert_eq!(effective, config);
        assert!(warnings.is_empty());
    }

    #[test]
    fn startup_checks_refuse_too_many_cores_and_explicit_connections() {
        let mut config = BrokerConfig::default();
        config.server.cores = 8;
        config.limits.connections_max = 10_000;
        let Err(refusals) = startup_checks(&config, &host(2, 1024)) else {
            panic!("accepted");
        };
        assert_eq!(refusals.len(), 2);
        assert!(refusals[0].contains("server.cores = 8"));
        assert!(refusals[1].contains("LimitNOFILE="));
        assert!(refusals[1].contains("ulimit -n"));
        assert!(refusals[1].contains("limits.connections_max"));
    }

    #[test]
    fn startup_checks_fit_the_default_connection_bound() {
        let config = BrokerConfig::default();
        let Ok((effective, warnings, _)) = startup_checks(&config, &host(2, 20_000)) else {
            panic!("refused");
        };
        // 20000 minus 64 base minus 2 x 8 per core.
        assert_eq!(effective.limits.connections_max, 19_920);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("LimitNOFILE="));
    }

    #[test]
    fn more_cpus_than_a_stream_id_names_run_on_the_most_it_can() {
        let config = BrokerConfig::default();
        let Ok((_, warnings, _)) = startup_checks(&config, &host(300, 1 << 20)) else {
            panic!("refused");
        };
        assert_eq!(config.effective_cores(300), crate::config::CORES_MAX);
        assert!(
            warnings
                .iter()
                .any(|warning| warning.contains("running on 256")),
            "{warnings:?}"
        );
    }

    #[test]
    fn the_memory_budget_lowers_a_default_and_refuses_an_explicit_bound() {
        let mut small = host(2, 1 << 20);
        small.memory_bytes = 4 << 30;
        let config = BrokerConfig::default();
        let Ok((effective, warnings, budget)) = startup_checks(&config, &small) else {
            panic!("refused");
        };
        assert!(effective.limits.connections_max < config.limits.connections_max);
        assert!(budget.fits(), "{budget}");
        assert!(warnings[0].contains("memory budget"), "{warnings:?}");
        let mut explicit = config.clone();
        explicit.limits.connections_max = config.limits.connections_max - 1;
        let Err(refusals) = startup_checks(&explicit, &small) else {
            panic!("accepted");
        };
        assert!(
            refusals[0].contains("limits.memory_bytes_max"),
            "{refusals:?}"
        );
    }

    #[test]
    fn a_verification_queue_too_small_for_the_frames_in_flight_is_refused() {
        let mut config = BrokerConfig::default();
        config.verify.queue_jobs_max = 100;
        let Err(refusals) = startup_checks(&config, &host(2, 1 << 20)) else {
            panic!("accepted");
        };
        assert!(
            refusals[0].contains("verify.queue_jobs_max = 100"),
            "{refusals:?}"
        );
    }

    #[test]
    fn nofile_needed_counts_margins() {
        let mut config = BrokerConfig::default();
        config.limits.connections_max = 1000;
        config.server.nofile_per_stream = 2;
        assert_eq!(nofile_needed(&config, 4), 2000 + 64 + 32);
    }
}
