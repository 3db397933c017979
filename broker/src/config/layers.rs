//! Loading: the layering of sources into one `BrokerConfig`.
//!
//! Owns: the layering (defaults < TOML file < env `BPS_BROKER__SECTION__KEY` <
//! `--set section.key=value` < the dedicated flags), each reported problem's origin, and the
//! typing of override text. Layering works on a `toml::Table`: the table's defaults
//! (`keys::default_table`) are the first layer, each source overwrites the keys it names (an
//! unknown section or key is an error naming it and the known ones), and the result is
//! deserialized once. Override values from env and `--set` are parsed as TOML scalars (`64`,
//! `true`, `"x"`) and fall back to a plain string (`0.0.0.0:1637`, `prefer`); a key whose
//! default is a string always takes the text as written, and a list key takes a TOML array
//! (`["a", "b"]`) or a comma-separated list (`a,b`).
//! Never does: read the process environment implicitly (the caller passes it in, so tests
//! never race on `std::env`, except `load_from_process_env`), or judge values beyond their
//! type (`rules`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::DeserializeOwned;
use toml::{Table, Value};

use super::keys;
use super::p2p::P2pSection;
use super::schema::{
    BrokerConfig, LimitsConfig, LogConfig, ServerConfig, TimeoutsConfig, VerifyConfig, WsConfig,
};
use super::sections::take_core_keys;
use super::{ConfigError, quote};
use crate::protocol::ProtocolConfig;

/// Prefix of the environment variables that set config keys:
/// `BPS_BROKER__SECTION__KEY=value`, e.g. `BPS_BROKER__LIMITS__COHORTS_MAX=2048`.
pub const ENV_PREFIX: &str = "BPS_BROKER__";

/// Separator between the section and the key in an environment variable name.
const ENV_SEPARATOR: &str = "__";

/// Where the configuration comes from, besides the defaults and the environment: what the
/// command line said. Kept so that SIGHUP can redo the same layering.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// `--config FILE`.
    pub file: Option<PathBuf>,
    /// `--set section.key=value`, in command-line order (a later one wins).
    pub sets: Vec<(String, String)>,
    /// `--listen ADDR` (wins over `--set server.listen=`).
    pub listen: Option<SocketAddr>,
    /// `--admin-listen ADDR`.
    pub admin_listen: Option<SocketAddr>,
    /// `--ws-listen ADDR`.
    pub ws_listen: Option<SocketAddr>,
    /// `--cores N`.
    pub cores: Option<usize>,
}

/// Where an overridden key got its value, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    File(PathBuf),
    Env(String),
    Set,
    Flag(&'static str),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "in {}", path.display()),
            Origin::Env(name) => write!(f, "from env {name}"),
            Origin::Set => write!(f, "from --set"),
            Origin::Flag(flag) => write!(f, "from {flag}"),
        }
    }
}

/// The table being layered, with the origin of every key set by a source.
struct Layers {
    table: Table,
    origins: BTreeMap<String, Origin>,
    errors: Vec<ConfigError>,
}

impl Layers {
    fn new() -> Layers {
        Layers {
            table: keys::default_table(),
            origins: BTreeMap::new(),
            errors: Vec::new(),
        }
    }

    /// The names of the keys of `section`, for "known keys" hints.
    fn known_keys(&self, section: &str) -> String {
        match self.table.get(section) {
            Some(Value::Table(keys)) => keys.keys().cloned().collect::<Vec<_>>().join(", "),
            _ => String::new(),
        }
    }

    fn known_sections(&self) -> String {
        self.table.keys().cloned().collect::<Vec<_>>().join(", ")
    }

    /// The default value at `section.key`, or an error naming the unknown part.
    fn check_key(&self, section: &str, key: &str, origin: &Origin) -> Result<&Value, ConfigError> {
        let full = format!("{section}.{key}");
        match self.table.get(section) {
            Some(Value::Table(keys)) => keys.get(key).ok_or_else(|| {
                ConfigError::new(
                    full,
                    None,
                    format!(
                        "unknown key ({origin}); [{section}] has: {}",
                        self.known_keys(section)
                    ),
                )
            }),
            _ => Err(ConfigError::new(
                full,
                None,
                format!(
                    "unknown section [{section}] ({origin}); sections are: {}",
                    self.known_sections()
                ),
            )),
        }
    }

    /// Sets `section.key` to `value`, recording its origin, or records an unknown-key error.
    fn set(&mut self, section: &str, key: &str, value: Value, origin: Origin) {
        if let Err(error) = self.check_key(section, key, &origin) {
            self.errors.push(error);
            return;
        }
        if let Some(Value::Table(keys)) = self.table.get_mut(section) {
            keys.insert(key.to_owned(), value);
            self.origins.insert(format!("{section}.{key}"), origin);
        }
    }

    /// Sets `section.key` from override text (env or `--set`), typed by the key's default.
    fn set_text(&mut self, section: &str, key: &str, text: &str, origin: Origin) {
        match self.check_key(section, key, &origin) {
            Ok(default) => {
                let value = parse_override(text, default);
                self.set(section, key, value, origin);
            }
            Err(error) => self.errors.push(error),
        }
    }

    /// Layers a parsed TOML file over the table.
    fn merge_file(&mut self, file: Table, path: &Path) {
        for (section, keys) in file {
            let origin = Origin::File(path.to_owned());
            match keys {
                Value::Table(keys) => {
                    for (key, value) in keys {
                        self.set(&section, &key, value, origin.clone());
                    }
                }
                other => {
                    let message = if self.table.contains_key(&section) {
                        format!("expected a [{section}] table ({origin})")
                    } else {
                        format!(
                            "unknown section [{section}] ({origin}); sections are: {}",
                            self.known_sections()
                        )
                    };
                    self.errors
                        .push(ConfigError::new(section, Some(other.to_string()), message));
                }
            }
        }
    }

    /// Layers the `BPS_BROKER__SECTION__KEY` variables of `env` over the table.
    fn merge_env<I, K, V>(&mut self, env: I)
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut variables: Vec<(String, String)> = env
            .into_iter()
            .filter(|(name, _)| name.as_ref().starts_with(ENV_PREFIX))
            .map(|(name, value)| (name.as_ref().to_owned(), value.as_ref().to_owned()))
            .collect();
        // Process order must not depend on how the caller iterates the environment.
        variables.sort();
        for (name, value) in variables {
            let rest = &name[ENV_PREFIX.len()..];
            match rest.split_once(ENV_SEPARATOR) {
                Some((section, key))
                    if !section.is_empty() && !key.is_empty() && !key.contains(ENV_SEPARATOR) =>
                {
                    let section = section.to_ascii_lowercase();
                    let key = key.to_ascii_lowercase();
                    self.set_text(&section, &key, &value, Origin::Env(name.clone()));
                }
                _ => self.errors.push(ConfigError::new(
                    name.clone(),
                    Some(quote(&value)),
                    format!("expected an environment variable named {ENV_PREFIX}SECTION__KEY"),
                )),
            }
        }
    }

    /// Layers `--set` pairs and the dedicated flags over the table.
    fn merge_command_line(&mut self, sources: &ConfigSources) {
        for (dotted, text) in &sources.sets {
            match split_dotted_key(dotted) {
                Some((section, key)) => self.set_text(section, key, text, Origin::Set),
                None => self.errors.push(ConfigError::new(
                    dotted.clone(),
                    Some(quote(text)),
                    "expected --set SECTION.KEY=VALUE",
                )),
            }
        }
        if let Some(listen) = sources.listen {
            self.set(
                "server",
                "listen",
                Value::String(listen.to_string()),
                Origin::Flag("--listen"),
            );
        }
        if let Some(admin_listen) = sources.admin_listen {
            self.set(
                "server",
                "admin_listen",
                Value::String(admin_listen.to_string()),
                Origin::Flag("--admin-listen"),
            );
        }
        if let Some(ws_listen) = sources.ws_listen {
            self.set(
                "ws",
                "listen",
                Value::String(ws_listen.to_string()),
                Origin::Flag("--ws-listen"),
            );
        }
        if let Some(cores) = sources.cores {
            let value = i64::try_from(cores)
                .map_or_else(|_| Value::String(cores.to_string()), Value::Integer);
            self.set("server", "cores", value, Origin::Flag("--cores"));
        }
    }

    /// Deserializes the layered table. Every overridden key is first checked on its own, so a
    /// bad value is reported with its key, its value and its origin, and all of them at once.
    fn finish(mut self) -> Result<BrokerConfig, Vec<ConfigError>> {
        let checked: Vec<ConfigError> = self
            .origins
            .iter()
            .filter_map(|(full, origin)| self.check_override(full, origin))
            .collect();
        self.errors.extend(checked);
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        BrokerConfig::deserialize(self.table)
            .map_err(|error| vec![ConfigError::new("config", None, error.to_string())])
    }

    /// The error of one overridden key's value, deserialized with its section's defaults.
    fn check_override(&self, full: &str, origin: &Origin) -> Option<ConfigError> {
        let (section, key) = split_dotted_key(full)?;
        let value = self.table.get(section)?.get(key)?;
        check_value(section, key, value).err().map(|message| {
            ConfigError::new(
                full.to_owned(),
                Some(value.to_string()),
                format!("{message} ({origin})"),
            )
        })
    }
}

/// Serde's message when `section.key = value` does not deserialize: the value tried in its
/// section's struct, the other keys at their defaults (a protocol core key in
/// `ProtocolConfig`, with the core's keys at their defaults).
fn check_value(section: &str, key: &str, value: &Value) -> Result<(), String> {
    let mut defaults = keys::default_table();
    let core = take_core_keys(&mut defaults);
    if keys::find(section, key).is_some_and(keys::is_core) {
        return check_section::<ProtocolConfig>(core, key, value);
    }
    let Some(Value::Table(single)) = defaults.remove(section) else {
        return Ok(());
    };
    match section {
        "server" => check_section::<ServerConfig>(single, key, value),
        "limits" => check_section::<LimitsConfig>(single, key, value),
        "timeouts" => check_section::<TimeoutsConfig>(single, key, value),
        "verify" => check_section::<VerifyConfig>(single, key, value),
        "log" => check_section::<LogConfig>(single, key, value),
        "ws" => check_section::<WsConfig>(single, key, value),
        "p2p" => check_section::<P2pSection>(single, key, value),
        _ => Ok(()),
    }
}

/// Deserializes a section with `key` set to `value` (the others at their defaults) and
/// returns serde's message on failure.
fn check_section<T: DeserializeOwned>(
    mut section: Table,
    key: &str,
    value: &Value,
) -> Result<(), String> {
    section.insert(key.to_owned(), value.clone());
    T::deserialize(section)
        .map(drop)
        .map_err(|error| error.message().trim().to_owned())
}

/// `section.key` split at its one dot.
pub(super) fn split_dotted_key(dotted: &str) -> Option<(&str, &str)> {
    let (section, key) = dotted.trim().split_once('.')?;
    (!section.is_empty() && !key.is_empty() && !key.contains('.')).then_some((section, key))
}

/// Override text as a TOML value: a TOML scalar when it parses as one (and the key is not a
/// string key), otherwise the text itself as a string.
pub(super) fn parse_override(text: &str, default: &Value) -> Value {
    let parsed = format!("value = {text}")
        .parse::<Table>()
        .ok()
        .and_then(|mut table| table.remove("value"));
    match (parsed, default) {
        (Some(list @ Value::Array(_)), Value::Array(_)) => list,
        // A list key also takes `a,b` (what a shell-friendly --set or env value looks like).
        (_, Value::Array(_)) => Value::Array(
            text.split(',')
                .map(str::trim)
                .filter(|item| !item.is_empty())
                .map(|item| Value::String(item.to_owned()))
                .collect(),
        ),
        (Some(Value::String(string)), _) => Value::String(string),
        (_, Value::String(_)) => Value::String(text.to_owned()),
        (Some(value @ (Value::Integer(_) | Value::Float(_) | Value::Boolean(_))), _) => value,
        _ => Value::String(text.to_owned()),
    }
}

/// A TOML syntax error on one line: where it is and what is wrong.
fn syntax_message(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', "; ");
    match error.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before
                .rsplit('\n')
                .next()
                .map_or(0, |last| last.chars().count())
                + 1;
            format!("not valid TOML at line {line}, column {column}: {message}")
        }
        None => format!("not valid TOML: {message}"),
    }
}

impl BrokerConfig {
    /// Loads the configuration: defaults < `sources.file` < the `BPS_BROKER__SECTION__KEY`
    /// variables of `env` < `sources.sets` < the dedicated flags. Every unknown key and bad
    /// value of every source is reported, each naming its key. Does not validate relations
    /// between values: call `validate` for that.
    ///
    /// # Errors
    /// Every problem found, in source order.
    pub fn load<I, K, V>(sources: &ConfigSources, env: I) -> Result<BrokerConfig, Vec<ConfigError>>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut layers = Layers::new();
        if let Some(path) = &sources.file {
            match std::fs::read_to_string(path) {
                Ok(text) => match text.parse::<Table>() {
                    Ok(file) => layers.merge_file(file, path),
                    Err(error) => layers.errors.push(ConfigError::new(
                        "--config",
                        Some(quote(&path.display().to_string())),
                        syntax_message(&text, &error),
                    )),
                },
                Err(error) => layers.errors.push(ConfigError::new(
                    "--config",
                    Some(quote(&path.display().to_string())),
                    format!("cannot read the file: {error}"),
                )),
            }
        }
        layers.merge_env(env);
        layers.merge_command_line(sources);
        layers.finish()
    }

    /// Loads the configuration with the process environment (see `load`). Variables that are
    /// not valid Unicode cannot name a key and are skipped.
    ///
    /// # Errors
    /// Every problem found, in source order.
    pub fn load_from_process_env(
        sources: &ConfigSources,
    ) -> Result<BrokerConfig, Vec<ConfigError>> {
        let env = std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        });
        BrokerConfig::load(sources, env)
    }

    /// Parses a TOML document over the defaults (no environment, no command line).
    ///
    /// # Errors
    /// Every unknown key and bad value, each naming its key.
    pub fn from_toml_str(text: &str) -> Result<BrokerConfig, Vec<ConfigError>> {
        let mut layers = Layers::new();
        match text.parse::<Table>() {
            Ok(file) => layers.merge_file(file, Path::new("<toml>")),
            Err(error) => layers.errors.push(ConfigError::new(
                "config",
                None,
                syntax_message(text, &error),
            )),
        }
        layers.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_text_is_typed_by_the_default() {
        let integer = Value::Integer(1);
        let string = Value::String(String::new());
        assert_eq!(parse_override("64", &integer), Value::Integer(64));
        assert_eq!(parse_override("1_000", &integer), Value::Integer(1000));
        assert_eq!(parse_override("true", &integer), Value::Boolean(true));
        assert_eq!(parse_override("abc", &integer), Value::String("abc".into()));
        assert_eq!(parse_override("[1]", &integer), Value::String("[1]".into()));
        assert_eq!(parse_override("5", &string), Value::String("5".into()));
        assert_eq!(parse_override("\"q\"", &string), Value::String("q".into()));
        assert_eq!(
            parse_override("0.0.0.0:1", &string),
            Value::String("0.0.0.0:1".into())
        );
    }

    #[test]
    fn dotted_keys_split_once() {
        assert_eq!(split_dotted_key("a.b"), Some(("a", "b")));
        assert_eq!(split_dotted_key("a"), None);
        assert_eq!(split_dotted_key("a.b.c"), None);
        assert_eq!(split_dotted_key(".b"), None);
    }
}
