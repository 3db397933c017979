//! The command line: `bps-broker [run] [FLAGS]` and `bps-broker check-config [FLAGS] [FILE]`.
//!
//! Owns: the clap definitions and their translation into `config::ConfigSources`. `run` is the
//! default when no subcommand is given; the flags are the same for both subcommands, and
//! `check-config` also takes the file as a positional argument.
//! Never does: read the config file or the environment (that is `config::BrokerConfig::load`),
//! or decide exit codes beyond clap's own (2 for bad usage).
//!
//! `--set` checks only the `SECTION.KEY=VALUE` form here; whether the key exists is a config
//! error reported with the others by the loader (so `check-config` lists it with every other
//! problem).
//!
//! `top` takes flags of its own (`TopArgs`): it watches a running broker through its admin
//! address and reads no config.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::config::{BrokerConfig, ConfigSources};
use crate::top::{self, SortKey};

/// The BPS broker: Broadcast Pub/Sub for Swarm over TCP.
#[derive(Debug, Parser)]
#[command(
    name = "bps-broker",
    version,
    about,
    args_conflicts_with_subcommands = true,
    after_help = "Precedence: --listen/--admin-listen/--cores > --set > env BPS_BROKER__SECTION__KEY > --config FILE > defaults."
)]
pub struct Cli {
    /// What to do; `run` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The flags of `run` when no subcommand is given.
    #[command(flatten)]
    pub args: ConfigArgs,
}

impl Cli {
    /// The subcommand to execute, `run` with the top-level flags when none was given.
    #[must_use]
    pub fn into_command(self) -> Command {
        self.command.unwrap_or(Command::Run(self.args))
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker (the default).
    Run(ConfigArgs),
    /// Validate the configuration: exit 0 and print it, or exit 1 listing every error.
    CheckConfig(CheckConfigArgs),
    /// Watch a running broker live: cores, memory, busiest cohorts (docs/TOP.md).
    Top(TopArgs),
    /// Print the libp2p peer id, the Swarm overlay and the addresses to give bee nodes,
    /// creating the key files of the config when absent (docs/LIBP2P.md).
    P2pIdentity(ConfigArgs),
}

/// The flags of `top`.
#[derive(Clone, Debug, Args)]
pub struct TopArgs {
    /// The broker's admin address.
    #[arg(long, value_name = "HOST:PORT", default_value_t = BrokerConfig::default().server.admin_listen.to_string())]
    pub admin: String,
    /// Time between refreshes: seconds, or with ms or s (0.5, 500ms, 2s).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = top::parse_interval)]
    pub interval: Duration,
    /// The cohort order (keys d, p, s, r change it live).
    #[arg(long, value_name = "KEY", value_enum, default_value_t = SortKey::Deliveries)]
    pub sort: SortKey,
    /// Print one screen (two scrapes one interval apart, for the rates) and exit.
    #[arg(long)]
    pub once: bool,
}

impl TopArgs {
    /// What `top` is to do.
    #[must_use]
    pub fn options(&self) -> top::Options {
        top::Options {
            admin: self.admin.clone(),
            interval: self.interval,
            sort: self.sort,
            once: self.once,
        }
    }
}

/// The sources `check-config` validates: the flags of `run`, or the file as its argument.
#[derive(Clone, Debug, Default, Args)]
pub struct CheckConfigArgs {
    /// TOML config file to check (the same as --config FILE).
    #[arg(value_name = "FILE", conflicts_with = "config")]
    pub file: Option<PathBuf>,
    /// The flags, as for `run`.
    #[command(flatten)]
    pub args: ConfigArgs,
}

impl CheckConfigArgs {
    /// The config sources these arguments name.
    #[must_use]
    pub fn sources(&self) -> ConfigSources {
        let mut sources = self.args.sources();
        if let Some(file) = &self.file {
            sources.file = Some(file.clone());
        }
        sources
    }
}

/// Where the configuration comes from.
#[derive(Clone, Debug, Default, Args)]
pub struct ConfigArgs {
    /// TOML config file (unknown keys are errors).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// BPS listen address (server.listen; default 0.0.0.0:1637).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Admin HTTP listen address (server.admin_listen; default 127.0.0.1:1638).
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<SocketAddr>,
    /// WebSocket listen address (ws.listen; default 0.0.0.0:1639).
    #[arg(long, value_name = "ADDR")]
    pub ws_listen: Option<SocketAddr>,
    /// Cores to run on (server.cores; 0 = all available).
    #[arg(long, value_name = "N")]
    pub cores: Option<usize>,
    /// Set any config key, e.g. --set limits.cohorts_max=1024 (repeatable; later wins).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE", value_parser = parse_set)]
    pub sets: Vec<(String, String)>,
}

impl ConfigArgs {
    /// The config sources these flags name.
    #[must_use]
    pub fn sources(&self) -> ConfigSources {
        ConfigSources {
            file: self.config.clone(),
            sets: self.sets.clone(),
            listen: self.listen,
            admin_listen: self.admin_listen,
            ws_listen: self.ws_listen,
            cores: self.cores,
        }
    }
}

/// Parses `SECTION.KEY=VALUE` (the value may be empty and may contain `=`).
fn parse_set(text: &str) -> Result<(String, String), String> {
    let expected = "expected SECTION.KEY=VALUE, e.g. limits.cohorts_max=1024";
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: {expected}"))?;
    let key = key.trim();
    let well_formed = key.split_once('.').is_some_and(|(section, field)| {
        !section.is_empty() && !field.is_empty() && !field.contains('.')
    });
    if !well_formed {
        return Err(format!("{key:?}: {expected}"));
    }
    Ok((key.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("bps-broker").chain(args.iter().copied()))
            .map(Cli::into_command)
    }

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_is_the_default() {
        let Ok(Command::Run(args)) = parse(&["--listen", "127.0.0.1:0", "--cores", "2"]) else {
            panic!("expected run");
        };
        assert_eq!(args.listen, Some(SocketAddr::from(([127, 0, 0, 1], 0))));
        assert_eq!(args.cores, Some(2));
        let Ok(Command::Run(args)) = parse(&[]) else {
            panic!("expected run");
        };
        assert_eq!(args.sources(), ConfigSources::default());
    }

    #[test]
    fn top_takes_its_own_flags() {
        let Ok(Command::Top(args)) = parse(&["top"]) else {
            panic!("expected top");
        };
        let options = args.options();
        assert_eq!(options.admin, "127.0.0.1:1638");
        assert_eq!(options.interval, Duration::from_secs(1));
        assert_eq!(options.sort, SortKey::Deliveries);
        assert!(!options.once);
        let Ok(Command::Top(args)) = parse(&[
            "top",
            "--admin",
            "broker.example:1638",
            "--interval",
            "250ms",
            "--sort",
            "resets",
            "--once",
        ]) else {
            panic!("expected top");
        };
        let options = args.options();
        assert_eq!(options.admin, "broker.example:1638");
        assert_eq!(options.interval, Duration::from_millis(250));
        assert_eq!(options.sort, SortKey::Resets);
        assert!(options.once);
        for args in [
            &["top", "--interval", "0"][..],
            &["top", "--sort", "bogus"],
            &["top", "--config", "/x.toml"],
        ] {
            let error = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert_eq!(error.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn subcommands_take_the_same_flags() {
        let Ok(Command::Run(args)) = parse(&["run", "--admin-listen", "127.0.0.1:9"]) else {
            panic!("expected run");
        };
        assert_eq!(
            args.admin_listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 9)))
        );
        let Ok(Command::CheckConfig(args)) = parse(&[
            "check-config",
            "--config",
            "/x.toml",
            "--set",
            "limits.cohorts_max=7",
            "--set",
            "log.level=a=b",
        ]) else {
            panic!("expected check-config");
        };
        let sources = args.sources();
        assert_eq!(sources.file, Some(PathBuf::from("/x.toml")));
        assert_eq!(
            sources.sets,
            vec![
                ("limits.cohorts_max".to_owned(), "7".to_owned()),
                ("log.level".to_owned(), "a=b".to_owned())
            ]
        );
    }

    #[test]
    fn check_config_takes_the_file_as_an_argument() {
        let Ok(Command::CheckConfig(args)) = parse(&[
            "check-config",
            "/etc/bps-broker/broker.toml",
            "--set",
            "limits.cohorts_max=7",
        ]) else {
            panic!("expected check-config");
        };
        let sources = args.sources();
        assert_eq!(
            sources.file,
            Some(PathBuf::from("/etc/bps-broker/broker.toml"))
        );
        assert_eq!(
            sources.sets,
            vec![("limits.cohorts_max".to_owned(), "7".to_owned())]
        );
    }

    #[test]
    fn bad_usage_is_a_clap_error() {
        for args in [
            &["--listen", "nowhere"][..],
            &["--cores", "-1"],
            &["--set", "cohorts_max=1"],
            &["--set", "limits.cohorts_max"],
            &["--bogus"],
            &["--listen", "127.0.0.1:1", "run"],
            &["frobnicate"],
            &["run", "/x.toml"],
            &["check-config", "--config", "/x.toml", "/y.toml"],
            &["check-config", "/x.toml", "/y.toml"],
        ] {
            let error = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert_ne!(error.kind(), ErrorKind::DisplayHelp, "{args:?}");
            assert_eq!(error.exit_code(), 2, "{args:?}");
        }
    }
}
