//! Config loading: precedence (defaults < file < env < --set < flags), unknown keys from every
//! source, typed errors naming key and value, validation reporting every error at once, and the
//! classification of a reload. The environment is always passed explicitly, so these tests
//! never touch (or race on) the process environment.

use std::net::SocketAddr;
use std::path::PathBuf;

use bps_broker::config::{
    BrokerConfig, ConfigSources, IoUringMode, LogFormat, apply_reloadable, reloadable_diff,
};

/// A config file in a fresh temporary directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "bps-broker-config-test-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("broker.toml");
        std::fs::write(&path, text).expect("write config");
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

const NO_ENV: [(&str, &str); 0] = [];

fn sources(file: Option<&TempFile>, sets: &[(&str, &str)]) -> ConfigSources {
    ConfigSources {
        file: file.map(|file| file.0.clone()),
        sets: sets
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect(),
        ..ConfigSources::default()
    }
}

fn messages(errors: &[bps_broker::config::ConfigError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn no_sources_give_the_defaults() {
    assert_eq!(
        BrokerConfig::load(&ConfigSources::default(), NO_ENV),
        Ok(BrokerConfig::default())
    );
}

#[test]
fn file_beats_defaults_env_beats_file_set_beats_env_flags_beat_set() {
    let file = TempFile::new(
        "precedence",
        r#"
[server]
listen = "127.0.0.1:1000"
cores = 2
io_uring = "off"

[limits]
cohorts_max = 100
streams_per_cohort_max = 10

[timeouts]
claim_deadline_ms = 1000

[log]
format = "json"
"#,
    );
    let env = [
        ("BPS_BROKER__LIMITS__COHORTS_MAX", "200"),
        ("BPS_BROKER__TIMEOUTS__CLAIM_DEADLINE_MS", "2000"),
        ("BPS_BROKER__SERVER__LISTEN", "127.0.0.1:2000"),
        ("BPS_BROKER__SERVER__CORES", "3"),
        ("PATH", "/usr/bin"),
        ("BPS_BROKERAGE", "not ours"),
    ];
    let mut sources = sources(
        Some(&file),
        &[
            ("timeouts.claim_deadline_ms", "3000"),
            ("server.listen", "127.0.0.1:3000"),
            ("server.cores", "4"),
            ("log.level", "debug"),
            ("log.level", "warn"),
        ],
    );
    sources.listen = Some(SocketAddr::from(([127, 0, 0, 1], 4000)));
    sources.cores = Some(5);
    let config = BrokerConfig::load(&sources, env).expect("loads");

    // Only the file sets these.
    assert_eq!(config.protocol.streams_per_cohort_max, 10);
    assert_eq!(config.server.io_uring, IoUringMode::Off);
    assert_eq!(config.log.format, LogFormat::Json);
    // The environment beats the file.
    assert_eq!(config.protocol.cohorts_max, 200);
    // --set beats the environment; a later --set beats an earlier one.
    assert_eq!(config.protocol.claim_deadline_ms, 3000);
    assert_eq!(config.log.level, "warn");
    // The dedicated flags beat --set.
    assert_eq!(
        config.server.listen,
        SocketAddr::from(([127, 0, 0, 1], 4000))
    );
    assert_eq!(config.server.cores, 5);
    // Untouched keys keep their defaults.
    assert_eq!(config.verify, BrokerConfig::default().verify);
}

#[test]
fn admin_listen_flag_and_string_keys_take_text_as_written() {
    let mut sources = sources(
        None,
        &[("log.level", "5"), ("server.admin_listen", "[::1]:9")],
    );
    let config = BrokerConfig::load(&sources, NO_ENV).expect("loads");
    assert_eq!(config.log.level, "5");
    assert_eq!(config.server.admin_listen, "[::1]:9".parse().expect("addr"));
    sources.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 7)));
    let config = BrokerConfig::load(&sources, NO_ENV).expect("loads");
    assert_eq!(
        config.server.admin_listen,
        SocketAddr::from(([127, 0, 0, 1], 7))
    );
}

#[test]
fn env_names_are_case_insensitive_after_the_prefix() {
    let env = [("BPS_BROKER__limits__Cohorts_Max", "7")];
    let config = BrokerConfig::load(&ConfigSources::default(), env).expect("loads");
    assert_eq!(config.protocol.cohorts_max, 7);
}

#[test]
fn unknown_keys_from_every_source_are_errors_naming_them() {
    let file = TempFile::new(
        "unknown",
        "top = 1\n[server]\nlisten_addr = \"0.0.0.0:1\"\n[bogus]\nx = 1\n",
    );
    let env = [
        ("BPS_BROKER__LIMITS__COHORT_MAX", "1"),
        ("BPS_BROKER__NOSECTION", "1"),
    ];
    let errors = BrokerConfig::load(
        &sources(
            Some(&file),
            &[("verify.threads", "4"), ("server.listen", "0.0.0.0:1")],
        ),
        env,
    )
    .expect_err("unknown keys");
    let text = messages(&errors).join("\n");
    for needle in [
        "server.listen_addr: unknown key",
        "bogus.x: unknown section [bogus]",
        "top = 1: unknown section [top]",
        "limits.cohort_max: unknown key (from env BPS_BROKER__LIMITS__COHORT_MAX)",
        "BPS_BROKER__NOSECTION = \"1\": expected an environment variable named",
        "verify.threads: unknown key (from --set)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert_eq!(errors.len(), 6, "{text}");
}

#[test]
fn bad_values_name_key_value_origin_and_expectation_all_at_once() {
    let file = TempFile::new(
        "values",
        "[limits]\ncohorts_max = -1\n[server]\nlisten = \"localhost\"\n",
    );
    let env = [("BPS_BROKER__SERVER__IO_URING", "maybe")];
    let errors = BrokerConfig::load(
        &sources(
            Some(&file),
            &[
                ("timeouts.claim_deadline_ms", "soon"),
                ("log.format", "xml"),
            ],
        ),
        env,
    )
    .expect_err("bad values");
    let text = messages(&errors);
    assert_eq!(errors.len(), 5, "{text:?}");
    let find = |key: &str| {
        errors
            .iter()
            .find(|error| error.key == key)
            .unwrap_or_else(|| panic!("no error for {key}: {text:?}"))
            .to_string()
    };
    assert!(find("limits.cohorts_max").starts_with("limits.cohorts_max = -1: "));
    assert!(find("limits.cohorts_max").contains("expected usize"));
    assert!(find("server.listen").contains("\"localhost\""));
    assert!(find("server.listen").contains("expected an IP:PORT socket address"));
    assert!(find("server.io_uring").contains("`required`, `prefer`, `off`"));
    assert!(find("server.io_uring").contains("from env BPS_BROKER__SERVER__IO_URING"));
    assert!(find("timeouts.claim_deadline_ms").contains("\"soon\""));
    assert!(find("timeouts.claim_deadline_ms").contains("from --set"));
    assert!(find("log.format").contains("`text` or `json`"));
}

#[test]
fn unreadable_and_malformed_files_are_reported() {
    let missing = ConfigSources {
        file: Some(PathBuf::from("/nonexistent/bps-broker.toml")),
        ..ConfigSources::default()
    };
    let errors = BrokerConfig::load(&missing, NO_ENV).expect_err("missing file");
    assert_eq!(errors[0].key, "--config");
    assert!(errors[0].message.contains("cannot read"));

    let file = TempFile::new("syntax", "[server]\ncores = \n");
    let errors = BrokerConfig::load(&sources(Some(&file), &[]), NO_ENV).expect_err("syntax");
    assert_eq!(errors.len(), 1);
    assert!(errors[0].message.contains("line 2"), "{}", errors[0]);
    assert!(!errors[0].to_string().contains('\n'), "one line per error");
}

#[test]
fn validation_reports_every_error_with_its_key() {
    let sets = [
        ("limits.cohorts_max", "0"),
        ("limits.outbound_queue_frames_max", "1"),
        ("limits.frame_bytes_max", "10"),
        ("limits.connections_max", "0"),
        ("timeouts.claim_deadline_ms", "0"),
        ("timeouts.healthz_deadline_ms", "0"),
        ("server.cores", "300"),
        ("server.write_batch_frames_max", "5000"),
        ("server.write_coalesce_us", "10001"),
        ("server.listen", "0.0.0.0:5000"),
        ("server.admin_listen", "127.0.0.1:5000"),
        ("verify.batch_jobs_max", "100"),
        ("verify.queue_jobs_max", "10"),
        ("log.level", "not a [filter"),
    ];
    let config = BrokerConfig::load(&sources(None, &sets), NO_ENV).expect("types are fine");
    let errors = config.validate();
    let mut keys: Vec<&str> = errors.iter().map(|error| error.key.as_str()).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            "limits.cohorts_max",
            "limits.connections_max",
            "limits.frame_bytes_max",
            "limits.outbound_queue_frames_max",
            "log.level",
            "server.admin_listen",
            "server.cores",
            "server.write_batch_frames_max",
            "server.write_coalesce_us",
            "timeouts.claim_deadline_ms",
            "timeouts.healthz_deadline_ms",
            "verify.batch_jobs_max",
        ],
        "{:?}",
        messages(&errors)
    );
    for error in &errors {
        let line = error.to_string();
        assert!(line.starts_with(&error.key), "{line}");
        assert!(line.contains("expected"), "{line}");
        assert!(error.value.is_some(), "{line}");
    }
}

#[test]
fn protocol_config_follows_the_broker_config() {
    let config = BrokerConfig::load(
        &sources(
            None,
            &[
                ("limits.streams_per_cohort_max", "5"),
                ("timeouts.revocation_grace_ms", "7"),
                ("timeouts.blocklist_violation_ms", "0"),
                ("protocol.history", "refuse"),
                ("limits.history_frames_max", "9"),
            ],
        ),
        NO_ENV,
    )
    .expect("loads");
    let protocol = config.effective_protocol();
    assert_eq!(protocol.streams_per_cohort_max, 5);
    assert_eq!(protocol.revocation_grace_ms, 7);
    assert_eq!(protocol.blocklist_violation_ms, 0);
    assert_eq!(
        protocol.history,
        bps_broker::protocol::HistoryPolicy::Refuse
    );
    assert_eq!(protocol.history_frames_max, 9);
}

#[test]
fn reload_diff_classifies_changes() {
    let old = BrokerConfig::default();
    assert_eq!(reloadable_diff(&old, &old), Ok(Vec::new()));

    let mut reloadable = old.clone();
    reloadable.protocol.claim_deadline_ms = 5000;
    reloadable.protocol.cohorts_max = 9;
    reloadable.log.level = "debug".to_owned();
    assert_eq!(
        reloadable_diff(&old, &reloadable),
        Ok(vec![
            "limits.cohorts_max: 512 -> 9".to_owned(),
            "log.level: \"info\" -> \"debug\"".to_owned(),
            "timeouts.claim_deadline_ms: 30000 -> 5000".to_owned(),
        ])
    );

    let mut restart = reloadable.clone();
    restart.protocol.frame_bytes_max = 20_000;
    restart.limits.connections_max = 10;
    restart.protocol.outbound_queue_frames_max = 8;
    restart.server.listen = SocketAddr::from(([127, 0, 0, 1], 1));
    restart.verify.workers = 3;
    restart.log.format = LogFormat::Json;
    assert_eq!(
        reloadable_diff(&old, &restart),
        Err(vec![
            "limits.connections_max".to_owned(),
            "limits.frame_bytes_max".to_owned(),
            "limits.outbound_queue_frames_max".to_owned(),
            "log.format".to_owned(),
            "server.listen".to_owned(),
            "verify.workers".to_owned(),
        ])
    );
    // Applying keeps every restart-only key and takes every reloadable one.
    assert_eq!(apply_reloadable(&old, &restart), reloadable);
}

#[test]
fn list_keys_take_a_toml_array_or_a_comma_separated_list_and_bad_entries_are_named() {
    for text in [
        r#"["https://a.example", "https://b.example"]"#,
        "https://a.example, https://b.example",
    ] {
        let config = BrokerConfig::load(&sources(None, &[("ws.allowed_origins", text)]), NO_ENV)
            .expect("a valid list");
        assert_eq!(
            config.ws.allowed_origins,
            vec![
                "https://a.example".to_owned(),
                "https://b.example".to_owned()
            ],
            "{text}"
        );
    }
    let config = BrokerConfig::load(
        &sources(
            None,
            &[
                ("ws.trusted_proxies", "10.0.0.1,nonsense"),
                ("ws.allowed_origins", "app.example"),
            ],
        ),
        NO_ENV,
    )
    .expect("lists load");
    let errors = messages(&config.validate());
    assert!(
        errors
            .iter()
            .any(|error| error.contains("ws.trusted_proxies") && error.contains("nonsense")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|error| error.contains("ws.allowed_origins") && error.contains("app.example")),
        "{errors:?}"
    );
}

#[test]
fn bad_p2p_values_name_their_key() {
    let file = TempFile::new("p2p", "[p2p]\nenabled = true\nmode = \"heavy\"\n");
    let errors = BrokerConfig::load(&sources(Some(&file), &[]), NO_ENV).expect_err("bad mode");
    let text = messages(&errors);
    assert_eq!(errors.len(), 1, "{text:?}");
    assert_eq!(errors[0].key, "p2p.mode");
    assert!(text[0].contains("`light` or `full`"), "{text:?}");
    let file = TempFile::new(
        "p2p-rules",
        "[p2p]\nenabled = true\ndial = [\"/ip4/10.0.0.5/tcp/1634\"]\n\
         listen = [\"0.0.0.0:1634\"]\nhandshake_deadline_ms = 0\n",
    );
    let config = BrokerConfig::load(&sources(Some(&file), &[]), NO_ENV).expect("parses");
    let errors = config.validate();
    let keys: Vec<&str> = errors.iter().map(|error| error.key.as_str()).collect();
    assert_eq!(
        keys,
        ["p2p.handshake_deadline_ms", "p2p.listen", "p2p.dial"],
        "{:?}",
        messages(&errors)
    );
    assert!(errors[2].to_string().contains("/p2p/<peer id>"));
}
