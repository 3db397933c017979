//! Rendering: the example config and the key reference, written from the key table.
//!
//! Owns: `example_toml` (broker/bps-broker.example.toml, every key at its default with its
//! why) and `reference_markdown` (docs/CONFIG.md: every key's default, unit, bounds and
//! reload). broker/tests/config_reference.rs compares both files with these renderings, so
//! the table, the example and the docs cannot disagree.
//! Never does: write files (the test does, when asked to regenerate them).

use std::fmt::Write as _;

use super::keys::{KEYS, Key, Reload, sections};

/// Width of the example config's comment lines, `# ` included.
const COMMENT_COLUMNS: usize = 94;

/// The end of a restart-only key's comment in a section SIGHUP otherwise applies.
const RESTART_NOTE: &str = "Needs a restart.";

/// The example config's opening comment (the per-section reload notes follow the table).
const EXAMPLE_PREAMBLE: &str = "\
# bps-broker example configuration. Every key is here, set to its default.
# Generated from the key table (broker/src/config/keys.rs); edit the table, then run
# BPS_BLESS_CONFIG=1 cargo test -p bps-broker --test config_reference.
#
# Use it with `bps-broker --config /etc/bps-broker/broker.toml` (the Debian package ships it
# there); check it with `bps-broker check-config FILE` (exit 0 and the effective config, or 1
# and every error with its key). Unknown keys are errors.
#
# Precedence, lowest first: these defaults < this file < environment variables
# BPS_BROKER__SECTION__KEY (e.g. BPS_BROKER__LIMITS__COHORTS_MAX=2048) <
# --set section.key=value (repeatable) < --listen / --admin-listen / --cores.
#
# SIGHUP re-reads the same sources and applies the keys each section's first comment names
# reloadable; a change to any other key is logged and needs a restart (those keys size what
# is built at start). A reload whose worst-case memory exceeds limits.memory_bytes_max is
# refused.
# Rule numbers (R.., D..) refer to the BPS spec digest.
";

/// The key reference's opening, before the per-section tables.
const REFERENCE_PREAMBLE: &str = "\
# Config keys

Every key of the broker's configuration: its default, unit, the values it may take and whether
SIGHUP applies it. This page and `broker/bps-broker.example.toml` are generated from the key
table, `broker/src/config/keys.rs`; `broker/tests/config_reference.rs` fails when they and the
table disagree (`BPS_BLESS_CONFIG=1 cargo test -p bps-broker --test config_reference` writes
both again from the table).

Set a key in the config file (`[section]`, then `key = value`), as
`BPS_BROKER__SECTION__KEY=value`, or with `--set section.key=value`; `bps-broker check-config
FILE` reports every bad value at once. A key marked *restart* sizes what is built at start: a
SIGHUP logs its change and keeps the old value. The others apply on SIGHUP. Rules between keys
(listeners on distinct ports, the history rings within frame memory and within a stream's
queue, a verification batch within its queue, the memory budget) are checked too;
`docs/LIMITS.md` says what happens at each bound.
";

/// The example config: the preamble, then every section with its reload note and every key
/// with its why above it, at its default.
#[must_use]
pub fn example_toml() -> String {
    let mut text = EXAMPLE_PREAMBLE.to_owned();
    for section in sections() {
        let rows: Vec<&Key> = KEYS.iter().filter(|key| key.section == section).collect();
        let _ = write!(text, "\n[{section}]\n");
        push_comment(&mut text, reload_note(&rows));
        for key in &rows {
            push_comment(&mut text, &example_comment(key, &rows));
            let _ = writeln!(text, "{} = {}", key.name, key.default_value());
        }
    }
    text
}

/// The key reference (docs/CONFIG.md): one table per section.
#[must_use]
pub fn reference_markdown() -> String {
    let mut text = REFERENCE_PREAMBLE.to_owned();
    for section in sections() {
        let _ = write!(
            text,
            "\n## [{section}]\n\n| key | default | unit | valid values | reload | what and why |\n|---|---|---|---|---|---|\n"
        );
        for key in KEYS.iter().filter(|key| key.section == section) {
            let _ = writeln!(text, "{}", reference_row(key));
        }
    }
    text
}

/// One key's row of the reference.
fn reference_row(key: &Key) -> String {
    let mut valid = key.bounds.describe();
    if let (Some(gate), false) = (key.gate, valid.is_empty()) {
        let _ = write!(valid, ", when `{gate}`");
    }
    let reload = match key.reload {
        Reload::Live => "SIGHUP",
        Reload::Restart => "*restart*",
    };
    format!(
        "| `{}` | `{}` | {} | {} | {} | {} |",
        key.dotted(),
        key.default_value(),
        key.unit.label(),
        valid,
        reload,
        key.why.replace('|', "\\|")
    )
}

/// Which keys of one section SIGHUP applies. In a section with both kinds, each
/// restart-only key's comment ends with `RESTART_NOTE`.
fn reload_note(rows: &[&Key]) -> &'static str {
    let live = rows.iter().any(|key| key.reload == Reload::Live);
    let restart = rows.iter().any(|key| key.reload == Reload::Restart);
    match (live, restart) {
        (false, _) => "Reload: every key of this section needs a restart.",
        (true, false) => "Reload: SIGHUP applies every key of this section.",
        (true, true) => {
            "Reload: SIGHUP applies every key of this section but those marked \"Needs a restart.\""
        }
    }
}

/// A key's comment in the example: its why, and in a section SIGHUP otherwise applies, the
/// note that it needs a restart.
fn example_comment(key: &Key, rows: &[&Key]) -> String {
    let mixed = rows.iter().any(|row| row.reload != key.reload);
    if mixed && key.reload == Reload::Restart {
        format!("{} {RESTART_NOTE}", key.why)
    } else {
        key.why.to_owned()
    }
}

/// `text` as `# ` comment lines of at most `COMMENT_COLUMNS` columns, broken between words.
fn push_comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() > 1 && line.chars().count() + 1 + word.chars().count() > COMMENT_COLUMNS {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_break_between_words_within_the_width() {
        let mut out = String::new();
        push_comment(&mut out, &"word ".repeat(40));
        assert!(out.lines().count() > 1);
        for line in out.lines() {
            assert!(line.len() <= COMMENT_COLUMNS, "{line}");
            assert!(line.starts_with("# word"), "{line}");
        }
    }

    #[test]
    fn every_key_has_a_why_and_a_row() {
        let reference = reference_markdown();
        for key in KEYS {
            assert!(!key.why.trim().is_empty(), "{} has no why", key.dotted());
            assert!(reference.contains(&format!("| `{}` |", key.dotted())));
        }
    }
}
