//! The key table (`config::keys::KEYS`) is the one declaration of every config key; the
//! example config and docs/CONFIG.md are renderings of it, and docs/LIMITS.md marks the keys
//! a reload cannot change. These tests fail when any of them disagrees with the table.
//! `BPS_BLESS_CONFIG=1` writes the two renderings again instead of comparing them.
//!
//! Owns: the comparison of the committed files with `config::render`, and the check of
//! docs/LIMITS.md's *restart* marks against the table's reload column.
//! Never does: judge the prose of the whys (the table holds it).

use std::fs;
use std::path::{Path, PathBuf};

use bps_broker::config::keys::{KEYS, Reload};
use bps_broker::config::render::{example_toml, reference_markdown};

/// The example config, relative to the repository root.
const EXAMPLE: &str = "broker/bps-broker.example.toml";

/// The key reference, relative to the repository root.
const REFERENCE: &str = "docs/CONFIG.md";

/// The page of bounds, which marks restart-only keys `*restart*`.
const LIMITS_PAGE: &str = "docs/LIMITS.md";

/// Set to 1 to write the renderings instead of comparing them.
const BLESS: &str = "BPS_BLESS_CONFIG";

fn repo_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the broker crate sits one level below the repository root")
        .join(relative)
}

/// Compares the committed file with its rendering (or writes it when blessing), naming the
/// first line that differs.
fn check_rendering(relative: &str, rendered: &str) {
    let path = repo_file(relative);
    if std::env::var(BLESS).is_ok_and(|value| value == "1") {
        fs::write(&path, rendered).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        return;
    }
    let committed =
        fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    if committed == rendered {
        return;
    }
    let first = committed
        .lines()
        .zip(rendered.lines())
        .position(|(left, right)| left != right)
        .map_or_else(
            || "one ends before the other".to_owned(),
            |index| {
                format!(
                    "line {}:\n  committed: {}\n  table:     {}",
                    index + 1,
                    committed.lines().nth(index).unwrap_or(""),
                    rendered.lines().nth(index).unwrap_or("")
                )
            },
        );
    panic!(
        "{relative} disagrees with the key table (broker/src/config/keys.rs) at {first}\n\
         edit the table, then run {BLESS}=1 cargo test -p bps-broker --test config_reference"
    );
}

#[test]
fn the_example_config_is_the_table() {
    check_rendering(EXAMPLE, &example_toml());
}

#[test]
fn the_key_reference_is_the_table() {
    check_rendering(REFERENCE, &reference_markdown());
}

#[test]
fn limits_page_marks_exactly_the_restart_only_keys_it_names_as_restart() {
    let page = fs::read_to_string(repo_file(LIMITS_PAGE)).expect("docs/LIMITS.md");
    let mut wrong = Vec::new();
    for key in KEYS {
        let dotted = key.dotted();
        let marked = page.contains(&format!("`{dotted}` (*restart*"));
        let named = page.contains(&format!("`{dotted}`"));
        // A restart-only key in a section SIGHUP otherwise applies must say so where it is
        // named; a key marked restart-only must be one.
        let mixed = KEYS
            .iter()
            .any(|other| other.section == key.section && other.reload == Reload::Live);
        let unmarked = key.reload == Reload::Restart && mixed && named && !marked;
        if unmarked || (marked && key.reload == Reload::Live) {
            wrong.push(dotted);
        }
    }
    assert!(
        wrong.is_empty(),
        "{LIMITS_PAGE} and the key table disagree on whether a reload applies {wrong:?}"
    );
}
