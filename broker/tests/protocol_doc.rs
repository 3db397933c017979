//! `docs/PROTOCOL.md` is where every rule id of the repository resolves: R1..R41, D1..D13,
//! W1..W11. These tests fail when an id cited in a source, test or document has no entry
//! there, when an entry names a file that does not exist, a name its file does not contain
//! or a test its file does not define, when a cited section of it does not exist, and when
//! any file cites the protocol digest that used to live outside the repository.
//!
//! Owns: the walk over the repository's own files and those four checks.
//! Never does: judge what a rule says; the entries' prose is for readers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The protocol reference, relative to the repository root.
const DOC: &str = "docs/PROTOCOL.md";

/// Directories never walked: installed packages, bundles, git's own data, generated code
/// (`web/src/gen`, regenerated from `proto/bps.proto`), and fuzz inputs, finds and logs.
const SKIPPED_DIRS: &[&str] = &[
    "node_modules",
    "dist",
    ".git",
    "gen",
    "corpus",
    "corpus-work",
    "artifacts",
    "coverage",
    "logs",
];

/// Build output directories: `target` and any `target-*` a helper may keep.
const SKIPPED_DIR_PREFIX: &str = "target";

/// Files whose rule ids must resolve.
const CITING_EXTENSIONS: &[&str] = &["rs", "ts", "md", "proto"];

/// Files a section citation (`PROTOCOL.md §5`) may appear in.
const SECTION_CITING_EXTENSIONS: &[&str] = &["rs", "ts", "md", "proto", "toml"];

/// Larger files are data, not text anyone cites from (lock files stay below it).
const TEXT_FILE_BYTES_MAX: u64 = 2 << 20;

/// The longest rule number: ids have one or two digits, three leaves room.
const RULE_DIGITS_MAX: usize = 3;

/// Where the digest lived, outside the repository. Split so this file does not match them.
const OUTSIDE_PATHS: &[&str] = &[
    concat!("shared", "/spec"),
    concat!("shared", "/design"),
    concat!("BPS", ".md"),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the broker crate sits one level below the repository root")
        .to_path_buf()
}

fn skipped(name: &str) -> bool {
    SKIPPED_DIRS.contains(&name) || name.starts_with(SKIPPED_DIR_PREFIX)
}

/// Every regular file of the repository outside the skipped directories, sorted.
fn files(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            fs::read_dir(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        for entry in entries {
            let entry = entry.unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
            let kind = entry.file_type().expect("a directory entry has a type");
            let path = entry.path();
            if kind.is_dir() && !skipped(&entry.file_name().to_string_lossy()) {
                pending.push(path);
            } else if kind.is_file() {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

fn extension_in(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| extensions.contains(&extension))
}

/// The file's text, or `None` for a large or binary file.
fn text(path: &Path) -> Option<String> {
    let size = fs::metadata(path).ok()?.len();
    if size > TEXT_FILE_BYTES_MAX {
        return None;
    }
    String::from_utf8(fs::read(path).ok()?).ok()
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether a byte may be part of a word around an id: then it is no id (`0xD1`, `R2D2`,
/// `%D0`, `r17_name`).
fn joins_word(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'%'
}

/// Rule ids standing alone in `text` (`R17`, `(R26)`, `D11,`, `W1..W11`), with their lines.
fn rule_ids(text: &str) -> Vec<(String, usize)> {
    let bytes = text.as_bytes();
    let mut ids = Vec::new();
    let mut line = 1;
    for (at, &byte) in bytes.iter().enumerate() {
        if byte == b'\n' {
            line += 1;
            continue;
        }
        if !matches!(byte, b'R' | b'D' | b'W') || (at > 0 && joins_word(bytes[at - 1])) {
            continue;
        }
        let digits = bytes[at + 1..]
            .iter()
            .take_while(|digit| digit.is_ascii_digit())
            .count();
        let end = at + 1 + digits;
        if digits == 0
            || digits > RULE_DIGITS_MAX
            || bytes[at + 1] == b'0'
            || bytes.get(end).is_some_and(|&next| joins_word(next))
        {
            continue;
        }
        ids.push((text[at..end].to_owned(), line));
    }
    ids
}

/// The ids of the doc's entries: headings whose first word is an id. Fails on a duplicate.
fn entries(doc: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in doc.lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let first = heading.trim_start_matches('#').split_whitespace().next();
        if let Some(first) = first
            && rule_ids(first).first().is_some_and(|(id, _)| id == first)
        {
            assert!(
                ids.insert(first.to_owned()),
                "{DOC}: two entries for {first}"
            );
        }
    }
    ids
}

/// Section numbers of the doc: `## 5. …` gives `5`, `### 1.1 …` gives `1.1`.
fn sections(doc: &str) -> BTreeSet<String> {
    doc.lines()
        .filter(|line| line.starts_with("## ") || line.starts_with("### "))
        .filter_map(|line| line.trim_start_matches('#').split_whitespace().next())
        .map(|number| number.trim_end_matches('.').to_owned())
        .filter(|number| {
            !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .collect()
}

/// The sections cited right after each mention of the doc: `PROTOCOL.md §1 and §5`.
fn cited_sections(text: &str) -> Vec<(String, usize)> {
    let mut cited = Vec::new();
    for (number, line) in text.lines().enumerate() {
        for (at, _) in line.match_indices("PROTOCOL.md") {
            let mut rest = &line[at + "PROTOCOL.md".len()..];
            loop {
                rest = rest.trim_start_matches([' ', ',', '(']);
                rest = rest.strip_prefix("and ").unwrap_or(rest);
                let Some(after) = rest.strip_prefix('§') else {
                    break;
                };
                let after = after.trim_start_matches('§');
                let end = after
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(after.len());
                let section = after[..end].trim_end_matches('.');
                if section.is_empty() {
                    break;
                }
                cited.push((section.to_owned(), number + 1));
                rest = &after[end..];
            }
        }
    }
    cited
}

/// The backticked spans of one line, in order.
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// A span that names a repository path: a slash and no whitespace.
fn is_path(span: &str) -> bool {
    span.contains('/') && !span.contains(char::is_whitespace)
}

/// Whether `name` occurs in `text` as a whole identifier.
fn has_word(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Whether a Rust file defines `#[test] fn name`, attributes and doc comments between.
fn defines_rust_test(text: &str, name: &str) -> bool {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let signature = format!("fn {name}(");
    lines.iter().enumerate().any(|(at, line)| {
        line.starts_with(&signature)
            && lines[..at]
                .iter()
                .rev()
                .take_while(|above| above.starts_with("#[") || above.starts_with("//"))
                .any(|above| above.starts_with("#[test]"))
    })
}

/// Whether a TypeScript test file has an `it`/`test` case of that title.
fn defines_ts_test(text: &str, title: &str) -> bool {
    ["it(", "test("].iter().any(|call| {
        ['"', '\'', '`']
            .iter()
            .any(|quote| text.contains(&format!("{call}{quote}{title}{quote}")))
    })
}

/// Problems with one `- Code:` or `- Tests:` line of the doc.
fn check_references(root: &Path, line_number: usize, line: &str, tests: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut current: Option<(String, Option<String>)> = None;
    for span in spans(line) {
        if is_path(span) {
            let path = root.join(span);
            if !path.is_file() {
                problems.push(format!("{DOC}:{line_number}: `{span}` is not a file"));
            }
            current = Some((span.to_owned(), text(&path)));
            continue;
        }
        let Some((file, contents)) = &current else {
            problems.push(format!("{DOC}:{line_number}: `{span}` follows no file"));
            continue;
        };
        let Some(contents) = contents else {
            continue;
        };
        let found = if !tests {
            span.split("::").all(|segment| has_word(contents, segment))
        } else if file.ends_with(".rs") {
            defines_rust_test(contents, span)
        } else {
            defines_ts_test(contents, span)
        };
        if !found {
            let what = if tests { "test" } else { "name" };
            problems.push(format!(
                "{DOC}:{line_number}: {what} `{span}` is not in `{file}`"
            ));
        }
    }
    problems
}

fn doc_text(root: &Path) -> String {
    fs::read_to_string(root.join(DOC)).unwrap_or_else(|error| panic!("{DOC}: {error}"))
}

fn report(problems: &[String], what: &str) {
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

#[test]
fn every_cited_rule_id_and_section_resolves_in_the_protocol_doc() {
    let root = repo_root();
    let doc = doc_text(&root);
    let known = entries(&doc);
    let numbered = sections(&doc);
    let mut problems = Vec::new();
    for path in files(&root) {
        let citing = extension_in(&path, CITING_EXTENSIONS);
        if !citing && !extension_in(&path, SECTION_CITING_EXTENSIONS) {
            continue;
        }
        let Some(text) = text(&path) else {
            continue;
        };
        let name = relative(&root, &path);
        if citing {
            for (id, line) in rule_ids(&text) {
                if !known.contains(&id) {
                    problems.push(format!("{name}:{line}: {id} has no entry in {DOC}"));
                }
            }
        }
        for (section, line) in cited_sections(&text) {
            if !numbered.contains(&section) {
                problems.push(format!("{name}:{line}: {DOC} has no section {section}"));
            }
        }
    }
    report(&problems, "citations that do not resolve");
}

#[test]
fn every_entry_names_code_and_tests_that_exist() {
    let root = repo_root();
    let doc = doc_text(&root);
    let top_dirs: BTreeSet<String> = fs::read_dir(&root)
        .expect("the repository root is readable")
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    let mut problems = Vec::new();
    // Per entry: whether it has a Code and a Tests line.
    let mut lists: BTreeMap<String, (bool, bool)> = BTreeMap::new();
    let mut entry: Option<String> = None;
    for (at, line) in doc.lines().enumerate() {
        let number = at + 1;
        if line.starts_with('#') {
            entry = entries(line).into_iter().next();
            if let Some(id) = &entry {
                lists.insert(id.clone(), (false, false));
            }
            continue;
        }
        let trimmed = line.trim_start();
        let list = if trimmed.starts_with("- Code:") {
            Some(false)
        } else if trimmed.starts_with("- Tests:") {
            Some(true)
        } else {
            None
        };
        match list {
            Some(tests) => {
                problems.extend(check_references(&root, number, line, tests));
                if let Some(seen) = entry.as_ref().and_then(|id| lists.get_mut(id)) {
                    if tests {
                        seen.1 = true;
                    } else {
                        seen.0 = true;
                    }
                }
            }
            // In prose, a path into one of the repository's directories must exist.
            None => {
                for span in spans(line).into_iter().filter(|span| is_path(span)) {
                    let first = span.split('/').next().unwrap_or_default();
                    if top_dirs.contains(first) && !root.join(span).exists() {
                        problems.push(format!("{DOC}:{number}: `{span}` does not exist"));
                    }
                }
            }
        }
    }
    for (id, (code, tests)) in &lists {
        if !code || !tests {
            problems.push(format!(
                "{DOC}: the entry {id} needs a `- Code:` and a `- Tests:` line"
            ));
        }
    }
    report(&problems, "entries that name what does not exist");
}

#[test]
fn no_file_cites_the_digest_outside_the_repository() {
    let root = repo_root();
    let mut problems = Vec::new();
    for path in files(&root) {
        let Some(text) = text(&path) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            for needle in OUTSIDE_PATHS.iter().filter(|needle| line.contains(*needle)) {
                let name = relative(&root, &path);
                problems.push(format!(
                    "{name}:{}: cites `{needle}`; cite {DOC}",
                    number + 1
                ));
            }
        }
    }
    report(&problems, "citations of a path outside the repository");
}

#[test]
fn the_id_scanner_takes_citations_and_leaves_words_and_hex_alone() {
    let found: Vec<String> =
        rule_ids("R17, (R26) D11. W1..W11 `R3` 0xD1 R2D2 %D0 r17_x R0 R1234 WR1")
            .into_iter()
            .map(|(id, _)| id)
            .collect();
    assert_eq!(found, ["R17", "R26", "D11", "W1", "W11", "R3"]);
    let cited: Vec<String> = cited_sections("see docs/PROTOCOL.md §1 and §5, PROTOCOL.md §1.1.")
        .into_iter()
        .map(|(section, _)| section)
        .collect();
    assert_eq!(cited, ["1", "5", "1.1"]);
}
