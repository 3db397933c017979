//! `docs/LIMITS.md` says, for every bound an operator can hit, which key moves it, and names
//! every term of the memory budget. These tests fail when a bound key of the example config,
//! a budget term or a constant the page names has no counterpart, so a new bound cannot land
//! undocumented and a renamed constant cannot leave the page stale.
//!
//! Owns: reading the example config's keys, the budget's term names and the page's constant
//! names, and the three checks.
//! Never does: judge the page's prose, or check figures (the config's own tests do).

use std::fs;
use std::path::{Path, PathBuf};

/// The page, relative to the repository root.
const DOC: &str = "docs/LIMITS.md";

/// The config with every key, relative to the repository root.
const EXAMPLE_CONFIG: &str = "broker/bps-broker.example.toml";

/// The memory budget's source, relative to the repository root.
const BUDGET: &str = "broker/src/budget.rs";

/// Where the constants the page names may be defined.
const SOURCE_DIRS: &[&str] = &[
    "broker/src",
    "proto/ws/src",
    "broker/core/src",
    "broker/p2p/src",
    "proto/bee/src",
    "proto/src",
];

/// Sections all of whose keys are bounds.
const BOUND_SECTIONS: &[&str] = &["limits", "timeouts", "verify"];

/// Capitalised names on the page that are the system's or the environment's, not constants.
const SYSTEM_NAMES: &[&str] = &[
    "BPS_BROKER__SECTION__KEY",
    "RLIMIT_NOFILE",
    "EMFILE",
    "ENFILE",
];

/// Key endings that make a key of any other section a bound (a size, a count, a duration, a
/// rate).
const BOUND_SUFFIXES: &[&str] = &["_max", "_ms", "_us", "_per_s", "_entries", "_percent"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the broker crate sits one level below the repository root")
        .to_path_buf()
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `section.key` of every key set in the example config.
fn config_keys(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut keys = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            section = name.to_owned();
        } else if let Some((key, _)) = line.split_once('=') {
            keys.push(format!("{section}.{}", key.trim()));
        }
    }
    keys
}

fn is_bound(key: &str) -> bool {
    let (section, name) = key.split_once('.').expect("keys are section.key");
    BOUND_SECTIONS.contains(&section) || BOUND_SUFFIXES.iter().any(|end| name.ends_with(end))
}

/// The quoted `name` of every term the budget sums.
fn budget_terms(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("name: \""))
        .filter_map(|rest| rest.split_once('"').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Backticked all-capitals names on the page (`HEAD_BYTES_MAX`): the constants it cites.
fn cited_constants(page: &str) -> Vec<String> {
    page.split('`')
        .skip(1)
        .step_by(2)
        .filter(|word| {
            !SYSTEM_NAMES.contains(word)
                && word.len() > 2
                && word.starts_with(|c: char| c.is_ascii_uppercase())
                && word
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

fn rust_sources(dir: &Path, found: &mut String) {
    let entries = fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
    for entry in entries.map(|entry| entry.expect("a readable directory entry")) {
        let path = entry.path();
        if path.is_dir() {
            rust_sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push_str(&fs::read_to_string(&path).expect("a readable source"));
        }
    }
}

#[test]
fn every_bound_key_of_the_example_config_is_on_the_page() {
    let page = read(DOC);
    let keys = config_keys(&read(EXAMPLE_CONFIG));
    assert!(
        keys.len() > 40,
        "the example config parsed to only {} keys",
        keys.len()
    );
    let missing: Vec<&String> = keys
        .iter()
        .filter(|key| is_bound(key) && !page.contains(&format!("`{key}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "{DOC} does not say what these bounds do or where they are hit: {missing:?}"
    );
}

#[test]
fn every_term_of_the_memory_budget_is_on_the_page() {
    let page = read(DOC);
    let terms = budget_terms(&read(BUDGET));
    assert!(
        terms.len() > 10,
        "{BUDGET} parsed to only {} terms",
        terms.len()
    );
    let missing: Vec<&String> = terms
        .iter()
        .filter(|term| !page.contains(&format!("| {term} |")))
        .collect();
    assert!(
        missing.is_empty(),
        "{DOC}'s memory budget table lacks the terms {missing:?}"
    );
}

#[test]
fn every_constant_the_page_names_exists() {
    let page = read(DOC);
    let mut sources = String::new();
    for dir in SOURCE_DIRS {
        rust_sources(&repo_root().join(dir), &mut sources);
    }
    let cited = cited_constants(&page);
    assert!(cited.len() > 10, "{DOC} cites only {cited:?}");
    let missing: Vec<&String> = cited
        .iter()
        .filter(|name| !sources.contains(&format!("const {name}:")))
        .collect();
    assert!(
        missing.is_empty(),
        "{DOC} names constants no source defines: {missing:?}"
    );
}
