//! The repository's tidy rules, checked on every `cargo test` so that a branch cannot land
//! untidy: every Rust file opens with a `//!` header, nothing unwraps or expects on peer
//! data (and production code never unwraps bare), no tracked file cites a path outside the
//! repository, and no production function outgrows `scripts/fn-length`'s limit.
//!
//! Owns: the list of peer-data modules, the allow-lists (each entry with its reason), a
//! comment-and-literal stripper for Rust and the four checks. Every failure names file:line.
//! Never does: build or run anything but `git ls-files` and `python3 scripts/fn-length`, or
//! judge style rustfmt and clippy already judge.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The top-level directories holding the Rust crates: the workspace's members (`proto/ws`,
/// `proto/bee` and `broker/core` lie inside two of them) and the separate fuzz workspace.
const CRATE_ROOTS: &[&str] = &["proto", "verify", "broker", "client", "bench", "fuzz"];

/// Directories that hold no source of ours: build output, npm packages, fuzz corpora.
const SKIPPED_DIRS: &[&str] = &[
    "target",
    "node_modules",
    "corpus",
    "corpus-work",
    "artifacts",
];

/// Directories whose Rust is test code (integration tests, benches, examples, fuzz targets).
const TEST_DIRS: &[&str] = &["tests", "benches", "examples"];

/// Modules that read what a peer sent (a socket, a browser, a broker answering a client,
/// a chunk handed to the `bps` tool): a path ending in `/` is a directory, everything below
/// it. Here a malformed input must be a typed error, never a panic, so `.unwrap()` and
/// `.expect(` are refused outside `#[cfg(test)]`.
const PEER_DATA_MODULES: &[&str] = &[
    // The wire: frames, rosters, specs and chunk ids decoded from peer bytes.
    "proto/src/",
    // The WebSocket wire: frames, HTTP heads, queries, forwarded headers, bridge messages.
    "proto/ws/src/",
    // Bee's control protocols: handshake messages, signed records, underlay lists, hive.
    "proto/bee/src/",
    // Chunks, signatures and bindings as peers sent them, and the jobs that verify them.
    "verify/src/soc.rs",
    "verify/src/shape.rs",
    "verify/src/bmt.rs",
    "verify/src/batch.rs",
    "verify/src/job.rs",
    "verify/src/verifier.rs",
    // The core's checks of a peer's frames, rosters and W5 service chunks.
    "broker/core/src/validation.rs",
    "broker/core/src/roster.rs",
    "broker/core/src/relay.rs",
    // The broker's readers: TCP frames, the carrier's read loop, WebSocket requests and
    // sessions, and the admin port's HTTP requests.
    "broker/src/io/tcp.rs",
    "broker/src/io/read_buffer.rs",
    "broker/src/io/carrier/",
    "broker/src/io/ws/",
    // The libp2p host: the key file, the bytes and events of libp2p peers it hands on.
    "broker/p2p/src/",
    // The libp2p carrier: bee's handshake, headers, pricing and hive messages and BPS frames
    // as bee nodes sent them.
    "broker/src/io/p2p/",
    "broker/src/admin.rs",
    // `bps-broker top`: what a broker's admin port answers.
    "broker/src/top/client.rs",
    "broker/src/top/exposition.rs",
    "broker/src/top/scrape.rs",
    // The client: what the broker sends back, and chunks and frames given to `bps`.
    "client/src/client.rs",
    "client/src/session.rs",
    "client/src/websocket.rs",
    "client/src/subscriber.rs",
    "client/src/refusal.rs",
    "client/src/inspect.rs",
    // The load generator's readers: deliveries, WebSocket frames, the sink's peers, stamps.
    "bench/src/load/receiver.rs",
    "bench/src/load/websocket.rs",
    "bench/src/load/sink.rs",
    "bench/src/load/stamp.rs",
    "bench/src/load/dial.rs",
];

/// An exception to a rule: the file, a fragment of the source line it excuses, and why the
/// call there cannot fail on what a peer sent.
struct Allowed {
    file: &'static str,
    fragment: &'static str,
    reason: &'static str,
}

/// `.expect(` calls in peer-data modules that are invariants, not peer faults.
const PEER_DATA_EXPECTS_ALLOWED: &[Allowed] = &[
    Allowed {
        file: "broker/src/io/ws/service.rs",
        fragment: r#".expect("the body parsed before")"#,
        reason: "the relay re-parses the body the handler parsed and refused on error before",
    },
    Allowed {
        file: "broker/src/io/ws/service.rs",
        fragment: r#".expect("an assembled frame is one whole frame")"#,
        reason: "to_frame assembles the frame itself (FUZZING.md bridge_inbound checks it)",
    },
];

/// Bare `.unwrap()` calls in production code outside the peer-data modules. Empty: write
/// `.expect("invariant ...")` saying why the value is there instead.
const UNWRAPS_ALLOWED: &[Allowed] = &[];

/// Paths that point outside the repository: machines, home directories and sibling trees
/// differ between whoever reads the file, so a file naming one is wrong for everyone else.
const OUTSIDE_MARKERS: &[&str] = &[
    "/work/",
    ".library",
    "../shared/",
    "/home/",
    "/Users/",
    "/root/",
];

/// This file: it spells out the markers above, so it cannot be held to them.
const THIS_FILE: &str = "broker/tests/tidy.rs";

#[test]
fn every_rust_file_opens_with_a_doc_header() {
    let failures: Vec<String> = rust_files()
        .into_iter()
        .filter(|file| !read(file).starts_with("//!"))
        .map(|file| {
            format!(
                "{}:1: does not open with a `//!` header saying what it owns",
                file
            )
        })
        .collect();
    assert_clean("files without a `//!` header", &failures);
}

#[test]
fn nothing_unwraps_or_expects_on_peer_data() {
    check_listed_paths_exist();
    let files = rust_files();
    let test_only = test_only_modules(&files);
    let lists = [PEER_DATA_EXPECTS_ALLOWED, UNWRAPS_ALLOWED];
    let (mut failures, mut used) = (Vec::new(), Vec::new());
    for file in files.iter().filter(|file| !is_test_code(file, &test_only)) {
        let peer_data = is_peer_data(file);
        for (line, call, raw_line) in panicking_calls(file, peer_data) {
            // A peer-data module may expect an invariant, never unwrap; elsewhere only
            // `.unwrap()` is refused.
            let list = match (peer_data, call) {
                (true, ".expect(") => Some(0),
                (true, _) => None,
                (false, _) => Some(1),
            };
            let fits = |a: &Allowed| a.file == file && raw_line.contains(a.fragment);
            match list.and_then(|list| Some((list, lists[list].iter().position(fits)?))) {
                Some(found) => used.push(found),
                None => failures.push(unwrap_failure(file, line, call, peer_data)),
            }
        }
    }
    for (list, entries) in lists.iter().enumerate() {
        for (entry, allowed) in entries.iter().enumerate() {
            if !used.contains(&(list, entry)) {
                failures.push(format!(
                    "{}: the allow-list entry `{}` ({}) excuses nothing any more: remove it",
                    allowed.file, allowed.fragment, allowed.reason
                ));
            }
        }
    }
    assert_clean("unwraps and expects", &failures);
}

#[test]
fn no_tracked_file_cites_a_path_outside_the_repository() {
    let mut failures = Vec::new();
    for file in tracked_files() {
        if file == THIS_FILE {
            continue;
        }
        let Some(text) = fs::read(repo().join(&file)).ok().and_then(text_of) else {
            continue; // binary (a fuzz seed, an image) or gone from the work tree
        };
        let depth = file.matches('/').count();
        for (index, line) in text.lines().enumerate() {
            if let Some(cited) = outside_citation(line, depth) {
                failures.push(format!(
                    "{}:{}: cites `{}`, a path outside the repository",
                    file,
                    index + 1,
                    cited
                ));
            }
        }
    }
    assert_clean("citations of paths outside the repository", &failures);
}

#[test]
fn no_function_is_longer_than_fn_length_allows() {
    let output = Command::new("python3")
        .arg("scripts/fn-length")
        .current_dir(repo())
        .output()
        .expect("python3 runs scripts/fn-length (CI has python3)");
    assert!(
        output.status.success(),
        "scripts/fn-length failed: split the functions it names into named phases\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The repository root: this crate is `broker/`.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("broker/ lies in the repository")
        .to_path_buf()
}

fn read(file: &str) -> String {
    fs::read_to_string(repo().join(file)).unwrap_or_else(|error| panic!("reading {file}: {error}"))
}

fn assert_clean(what: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} {}:\n{}",
        failures.len(),
        what,
        failures.join("\n")
    );
}

/// Every `.rs` file under the crate roots, as a `/`-separated path from the repository root,
/// sorted. Walks the work tree rather than asking git, so a new file is checked before it
/// is committed.
fn rust_files() -> Vec<String> {
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = CRATE_ROOTS.iter().map(|root| repo().join(root)).collect();
    while let Some(dir) = pending.pop() {
        let entries = fs::read_dir(&dir).unwrap_or_else(|e| panic!("listing {dir:?}: {e}"));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("listing {dir:?}: {e}"))
                .path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name) {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                found.push(relative(&path));
            }
        }
    }
    found.sort();
    found
}

fn relative(path: &Path) -> String {
    let inside = path
        .strip_prefix(repo())
        .expect("a walked path lies under the repository");
    inside
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Every tracked file, from `git ls-files`.
fn tracked_files() -> Vec<String> {
    let output = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo())
        .output()
        .expect("git runs (the tidy test reads the tracked files)");
    assert!(output.status.success(), "git ls-files failed: {:?}", output);
    let listing = String::from_utf8(output.stdout).expect("tracked paths are UTF-8");
    listing
        .split('\0')
        .filter(|path| !path.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A file's text, or `None` for a binary file (a NUL byte, or not UTF-8).
fn text_of(bytes: Vec<u8>) -> Option<String> {
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// The first path on `line` that leads outside the repository: one of `OUTSIDE_MARKERS`
/// starting a path, or a run of `../` climbing above the root from a file `depth`
/// directories down.
fn outside_citation(line: &str, depth: usize) -> Option<String> {
    let starts_path = |at: usize| {
        let before = line[..at].chars().next_back();
        !before.is_some_and(|c| c.is_alphanumeric() || "_-.".contains(c))
    };
    for marker in OUTSIDE_MARKERS {
        if let Some((at, _)) = line.match_indices(marker).find(|(at, _)| starts_path(*at)) {
            return Some(citation_at(line, at));
        }
    }
    // A `../` right after a `/` is inside a path (`a/../b`), not at the start of one.
    let climbs = line
        .match_indices("../")
        .filter(|(at, _)| starts_path(*at) && !line[..*at].ends_with('/'));
    for (at, _) in climbs {
        let ups = line.as_bytes()[at..]
            .chunks(3)
            .take_while(|c| *c == b"../")
            .count();
        if ups > depth {
            return Some(citation_at(line, at));
        }
    }
    None
}

/// The path-like run of `line` starting at byte `at`, for the failure message.
fn citation_at(line: &str, at: usize) -> String {
    line[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !"`'\"),;".contains(*c))
        .collect()
}

fn is_peer_data(file: &str) -> bool {
    PEER_DATA_MODULES.iter().any(|module| covers(module, file))
}

fn covers(module: &str, file: &str) -> bool {
    if module.ends_with('/') {
        file.starts_with(module)
    } else {
        file == module
    }
}

/// A listed module that names nothing would silently stop being checked.
fn check_listed_paths_exist() {
    for module in PEER_DATA_MODULES {
        assert!(
            repo().join(module).exists(),
            "{module} is listed as a peer-data module and does not exist: update PEER_DATA_MODULES"
        );
    }
}

fn is_test_code(file: &str, test_only: &[String]) -> bool {
    file.starts_with("fuzz/")
        || file.split('/').any(|part| TEST_DIRS.contains(&part))
        || test_only.iter().any(|module| covers(module, file))
}

/// The files and directories of modules declared `#[cfg(test)] mod name;`: `name.rs` and
/// everything under `name/`, next to the declaring file (`lib.rs`, `main.rs`, `mod.rs`) or
/// in the directory named after it (`foo.rs` declares into `foo/`).
fn test_only_modules(files: &[String]) -> Vec<String> {
    let mut modules = Vec::new();
    for file in files {
        let code = strip(&read(file));
        let base = match file.rsplit_once('/') {
            Some((dir, "lib.rs" | "main.rs" | "mod.rs")) => dir.to_owned(),
            _ => file.trim_end_matches(".rs").to_owned(),
        };
        for (at, _) in code.match_indices("#[cfg(test)]") {
            let rest = code[at + "#[cfg(test)]".len()..].trim_start();
            let rest = rest.strip_prefix("pub ").unwrap_or(rest).trim_start();
            let Some(declared) = rest.strip_prefix("mod ") else {
                continue;
            };
            let name: String = declared
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if declared.trim_start()[name.len()..]
                .trim_start()
                .starts_with(';')
            {
                modules.push(format!("{base}/{name}.rs"));
                modules.push(format!("{base}/{name}/"));
            }
        }
    }
    modules
}

/// The calls the rules refuse in `file`'s production code, outside `#[cfg(test)]` items:
/// `.unwrap()` everywhere, `.expect(` too in a peer-data module. Each with its line number
/// and its source line.
fn panicking_calls(file: &str, peer_data: bool) -> Vec<(usize, &'static str, String)> {
    let raw = read(file);
    let code = drop_test_items(&strip(&raw));
    let calls: &[&'static str] = if peer_data {
        &[".unwrap()", ".expect("]
    } else {
        &[".unwrap()"]
    };
    let mut found = Vec::new();
    for (index, (line, raw_line)) in code.lines().zip(raw.lines()).enumerate() {
        for call in calls.iter().filter(|call| line.contains(**call)) {
            found.push((index + 1, *call, raw_line.to_owned()));
        }
    }
    found
}

fn unwrap_failure(file: &str, line: usize, call: &str, peer_data: bool) -> String {
    if peer_data {
        format!(
            "{file}:{line}: `{call}` in a peer-data module: a malformed input must be a typed \
             error, not a panic (an `.expect(` on an invariant may be listed, with its reason, \
             in PEER_DATA_EXPECTS_ALLOWED)"
        )
    } else {
        format!(
            "{file}:{line}: a bare `.unwrap()` in production code: write \
             `.expect(\"invariant ...\")` saying why the value is there"
        )
    }
}

/// `text` with every comment and the whole of every string and char literal blanked to
/// spaces, newlines kept, so that the rules read code, not prose, and line numbers hold.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < chars.len() {
        match skipped_at(&chars, at) {
            Some(end) => {
                out.extend(
                    chars[at..end]
                        .iter()
                        .map(|&c| if c == '\n' { '\n' } else { ' ' }),
                );
                at = end;
            }
            None => {
                out.push(chars[at]);
                at += 1;
            }
        }
    }
    out
}

/// Where the comment or literal starting at `at` ends (exclusive), or `None` when code
/// starts there. An unterminated one runs to the end of the text.
fn skipped_at(chars: &[char], at: usize) -> Option<usize> {
    let next = |k: usize| chars.get(at + k).copied();
    match (chars[at], next(1)) {
        ('/', Some('/')) => Some(find(chars, at, &['\n']).unwrap_or(chars.len())),
        ('/', Some('*')) => Some(block_comment_end(chars, at)),
        ('"', _) => Some(quoted_end(chars, at + 1, '"')),
        ('\'', Some('\\')) => Some(quoted_end(chars, at + 1, '\'')),
        ('\'', Some(_)) if next(2) == Some('\'') => Some(at + 3),
        ('r' | 'b' | 'c', _) => raw_string_end(chars, at),
        _ => None,
    }
}

fn find(chars: &[char], from: usize, wanted: &[char]) -> Option<usize> {
    (from..chars.len()).find(|&k| chars[k..].starts_with(wanted))
}

/// Block comments nest in Rust.
fn block_comment_end(chars: &[char], at: usize) -> usize {
    let (mut depth, mut k) = (0, at);
    while k < chars.len() {
        if chars[k..].starts_with(&['/', '*']) {
            depth += 1;
            k += 2;
        } else if chars[k..].starts_with(&['*', '/']) {
            depth -= 1;
            k += 2;
            if depth == 0 {
                return k;
            }
        } else {
            k += 1;
        }
    }
    chars.len()
}

/// The end of a literal whose body starts at `from` and closes with `close`, past escapes.
fn quoted_end(chars: &[char], from: usize, close: char) -> usize {
    let mut k = from;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            c if c == close => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// `r"…"`, `r#"…"#`, `br"…"`, `cr#"…"#`: the end of the raw string starting at `at`, or
/// `None` for an identifier (`r#type`, `bar`) or a plain `b"…"` (the `"` is handled next).
fn raw_string_end(chars: &[char], at: usize) -> Option<usize> {
    let identifier = |c: char| c.is_alphanumeric() || c == '_';
    if at > 0 && identifier(chars[at - 1]) {
        return None;
    }
    let mut k = if chars[at] == 'r' { at + 1 } else { at + 2 };
    if chars[at] != 'r' && chars.get(at + 1) != Some(&'r') {
        return None;
    }
    let hashes = chars[k..].iter().take_while(|&&c| c == '#').count();
    k += hashes;
    if chars.get(k) != Some(&'"') {
        return None;
    }
    let mut close = vec!['"'];
    close.extend(std::iter::repeat_n('#', hashes));
    Some(find(chars, k + 1, &close).map_or(chars.len(), |end| end + close.len()))
}

/// Stripped `code` with every item marked `#[cfg(test)]` blanked (newlines kept): from the
/// attribute to the `;` or the closing `}` that ends the item at its own nesting level.
fn drop_test_items(code: &str) -> String {
    let mut bytes = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let start = from + found;
        let end = item_end(code.as_bytes(), start + "#[cfg(test)]".len());
        for byte in &mut bytes[start..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(bytes).expect("only ASCII bytes were replaced, by spaces")
}

fn item_end(code: &[u8], from: usize) -> usize {
    let mut depth = 0usize;
    for (k, &byte) in code.iter().enumerate().skip(from) {
        match byte {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return k + 1;
                }
            }
            b';' if depth == 0 => return k + 1,
            _ => {}
        }
    }
    code.len()
}

#[test]
fn the_stripper_blanks_comments_and_literals_and_keeps_lines() {
    let source = "let a = \"x.unwrap()\"; // .unwrap()\n/* /* .expect( */ */ b.expect(r#\"\"#);\n\
                  let c = '\\''; let d: &'static str = br\"q\"; 'l: loop {}\n";
    let stripped = strip(source);
    assert_eq!(stripped.lines().count(), source.lines().count());
    assert!(!stripped.contains(".unwrap()"), "{stripped}");
    assert_eq!(stripped.matches(".expect(").count(), 1, "{stripped}");
    assert!(
        stripped.contains("&'static str") && stripped.contains("'l: loop"),
        "{stripped}"
    );
    assert!(!stripped.contains('q'), "{stripped}");
}

#[test]
fn test_items_are_dropped_up_to_their_end() {
    let code = "#[cfg(test)]\nconst X: [u8; 2] = [1, 2];\nfn a() {}\n\
                #[cfg(test)]\nmod t {\n fn b() { x.unwrap() }\n}\nfn c() {}\n";
    let dropped = drop_test_items(code);
    assert_eq!(dropped.lines().count(), code.lines().count());
    assert!(
        dropped.contains("fn a() {}") && dropped.contains("fn c() {}"),
        "{dropped}"
    );
    assert!(
        !dropped.contains("unwrap") && !dropped.contains("const"),
        "{dropped}"
    );
}

#[test]
fn citations_outside_the_repository_are_found() {
    assert_eq!(
        outside_citation("see `/work/main/x`", 1).as_deref(),
        Some("/work/main/x")
    );
    assert_eq!(outside_citation("a network/work/ path", 1), None);
    assert_eq!(outside_citation("path = \"../proto/ws\"", 1), None);
    assert_eq!(
        outside_citation("path = \"../../x\"", 1).as_deref(),
        Some("../../x")
    );
    assert_eq!(
        outside_citation("~/.cache and /tmp/x are no citation", 0),
        None
    );
}
