//! The files the WebSocket listener serves besides its endpoints (the demo page, issue 11):
//! the contents of `ws.static_dir`, read once at start, and the HTTP answers to them.
//!
//! Owns: `StaticFiles`, every file of the directory tree in memory with its answer heads
//! built once at load (content type, length, a strong `ETag` from the bytes, `nosniff`, and
//! for HTML pages a restrictive `Content-Security-Policy`), bounded (`STATIC_FILE_BYTES_MAX`
//! each, `STATIC_BYTES_MAX` in all, heads included) so that serving a file never touches the
//! disk nor copies a body on a core thread; which request path names which file; and the
//! answer a request gets (`200`, `HEAD`, `304` on a matching `If-None-Match`, `405`).
//! Also `STATIC_IN_FLIGHT_PER_CORE_MAX`, the bound the connection enforces.
//! Never does: list a directory, follow a symbolic link (files are opened with
//! `O_NOFOLLOW`), follow a path out of the tree, or serve a hidden file.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use bytes::Bytes;

use crate::limits::STATIC_BYTES_MAX;

/// The largest file served: a bundled page script is a few hundred KiB.
pub const STATIC_FILE_BYTES_MAX: u64 = 4 << 20;
/// Static answers being written at once on one core. Each holds a connection and up to a
/// socket send buffer of kernel memory while a slow client reads; a page load asks for
/// three or four files, each done in milliseconds on a working link, so 32 serve many
/// visitors at once and keep a crowd of clients that never read from holding more.
pub const STATIC_IN_FLIGHT_PER_CORE_MAX: u64 = 32;
/// `Retry-After` of an answer refused at that bound: answers in flight end within seconds.
pub const STATIC_RETRY_AFTER_S: u64 = 2;
/// Directory levels walked below `ws.static_dir`.
const STATIC_DEPTH_MAX: usize = 8;
/// Bytes of the file's keccak256 in its `ETag`: 128 bits never collide by chance.
const ETAG_HASH_BYTES: usize = 16;
/// The policy of an HTML page: scripts, styles and everything else from the broker's origin
/// only (the demo page has no inline script or style), WebSocket connections to any broker
/// (the demo's `ws` parameter may name another one), no plugins, no `<base>`, no forms, no
/// framing by another site.
pub const HTML_CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// One served file with its answer heads.
#[derive(Debug)]
struct StaticFile {
    /// The head of a `200`, which is also the whole answer to `HEAD`.
    ok_head: Bytes,
    /// The head of a `304 Not Modified`.
    not_modified_head: Bytes,
    /// The strong entity tag, quoted.
    etag: String,
    body: Bytes,
}

/// What a request for a path of the static tree gets.
#[derive(Debug, PartialEq, Eq)]
pub enum StaticAnswer {
    /// The path names no file.
    Missing,
    /// A method other than `GET` and `HEAD`.
    MethodNotAllowed,
    /// A head and a body (empty for `HEAD` and `304`), both shared: written as they are.
    Reply {
        status: u16,
        head: Bytes,
        body: Bytes,
    },
}

/// The served files by request path (`/index.html`, `/app.js`).
#[derive(Debug, Default)]
pub struct StaticFiles {
    files: HashMap<String, StaticFile>,
    /// Bytes held: bodies, heads and paths.
    held: u64,
}

impl StaticFiles {
    /// Reads every file under `dir`; an error names what could not be served and why. A
    /// symbolic link is skipped with a logged reason.
    pub fn load(dir: &Path) -> Result<StaticFiles, String> {
        let mut files = StaticFiles::default();
        files.walk(dir, "", 0)?;
        if !files.files.contains_key("/index.html") {
            return Err(format!("{} has no index.html", dir.display()));
        }
        Ok(files)
    }

    fn walk(&mut self, dir: &Path, prefix: &str, depth: usize) -> Result<(), String> {
        let entries =
            std::fs::read_dir(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|error| format!("{}: {error}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            // The entry itself, never what a link points to.
            let kind = entry
                .file_type()
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let served = format!("{prefix}/{name}");
            if kind.is_symlink() {
                refuse_link(&path);
            } else if kind.is_dir() && depth < STATIC_DEPTH_MAX {
                self.walk(&path, &served, depth + 1)?;
            } else if kind.is_file()
                && let Some(bytes) = read_regular(&path)?
            {
                self.add(dir, served, &name, Bytes::from(bytes))?;
            }
        }
        Ok(())
    }

    fn add(&mut self, dir: &Path, served: String, name: &str, body: Bytes) -> Result<(), String> {
        let content_type = content_type(name);
        let hash = bps_proto::keccak256(&body);
        let etag = format!("\"{}\"", hex::encode(&hash[..ETAG_HASH_BYTES]));
        let html = content_type.starts_with("text/html");
        let mut common = vec![
            ("ETag", etag.clone()),
            // Revalidated on every load (answered 304 while unchanged): a new build of the
            // page is seen at once.
            ("Cache-Control", "no-cache".to_owned()),
            ("X-Content-Type-Options", "nosniff".to_owned()),
        ];
        if html {
            common.push((
                "Content-Security-Policy",
                HTML_CONTENT_SECURITY_POLICY.to_owned(),
            ));
        }
        let mut ok = vec![
            ("Content-Type", content_type.to_owned()),
            ("Content-Length", body.len().to_string()),
        ];
        ok.extend(common.iter().cloned());
        let file = StaticFile {
            ok_head: head("200 OK", &ok),
            not_modified_head: head("304 Not Modified", &common),
            etag,
            body,
        };
        self.held += (file.body.len()
            + file.ok_head.len()
            + file.not_modified_head.len()
            + file.etag.len()
            + served.len()) as u64;
        if self.held > STATIC_BYTES_MAX {
            return Err(format!(
                "{} holds more than {STATIC_BYTES_MAX} bytes (answer heads included)",
                dir.display()
            ));
        }
        self.files.insert(served, file);
        Ok(())
    }

    /// The answer to `method` on `path` (`/` is `/index.html`) given the request's
    /// `If-None-Match`.
    pub fn answer(&self, method: &str, path: &str, if_none_match: Option<&str>) -> StaticAnswer {
        let path = if path == "/" { "/index.html" } else { path };
        let Some(file) = self.files.get(path) else {
            return StaticAnswer::Missing;
        };
        if method != "GET" && method != "HEAD" {
            return StaticAnswer::MethodNotAllowed;
        }
        if if_none_match.is_some_and(|header| none_match_lists(header, &file.etag)) {
            return StaticAnswer::Reply {
                status: 304,
                head: file.not_modified_head.clone(),
                body: Bytes::new(),
            };
        }
        StaticAnswer::Reply {
            status: 200,
            head: file.ok_head.clone(),
            body: if method == "HEAD" {
                Bytes::new()
            } else {
                file.body.clone()
            },
        }
    }

    /// Bytes held: the files, their answer heads and paths.
    pub fn bytes(&self) -> u64 {
        self.held
    }
}

fn refuse_link(path: &Path) {
    tracing::warn!(
        path = %path.display(),
        "ws.static_dir: a symbolic link is not served (regular files only)"
    );
}

/// A regular file's bytes, opened without following a link (the entry may have been
/// replaced since the directory was listed): `None` for a link or anything but a regular
/// file, which is skipped with a logged reason.
fn read_regular(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let opened = std::fs::OpenOptions::new()
        .read(true)
        // O_NONBLOCK: a FIFO put in its place must not block the start.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(error) if error.raw_os_error() == Some(libc::ELOOP) => {
            refuse_link(path);
            return Ok(None);
        }
        Err(error) => return Err(format!("{}: {error}", path.display())),
    };
    let metadata = file
        .metadata()
        .map_err(|error| format!("{}: {error}", path.display()))?;
    if !metadata.is_file() {
        tracing::warn!(path = %path.display(), "ws.static_dir: not a regular file, not served");
        return Ok(None);
    }
    let size = metadata.len();
    if size > STATIC_FILE_BYTES_MAX {
        return Err(format!(
            "{} is {size} bytes, over {STATIC_FILE_BYTES_MAX}",
            path.display()
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // One byte more than the bound: a file that grew while read is caught, not truncated.
    file.take(STATIC_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    if bytes.len() as u64 > STATIC_FILE_BYTES_MAX {
        return Err(format!(
            "{} grew over {STATIC_FILE_BYTES_MAX} bytes while read",
            path.display()
        ));
    }
    Ok(Some(bytes))
}

/// An answer head: the status line, `headers`, `Connection: close` (every answer of the
/// listener ends its connection) and the blank line. The values are ours, built at load.
fn head(status: &str, headers: &[(&str, String)]) -> Bytes {
    let mut head = format!("HTTP/1.1 {status}\r\n");
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    Bytes::from(head)
}

/// Whether an `If-None-Match` value lists `etag` (quoted) or is `*`. Weak comparison, as
/// RFC 9110 section 13.1.2 asks: a `W/` tag matches the same opaque tag.
fn none_match_lists(header: &str, etag: &str) -> bool {
    let mut rest = header;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return false;
        }
        if rest.starts_with('*') {
            return true;
        }
        let tag = rest.strip_prefix("W/").unwrap_or(rest);
        let Some(quoted) = tag.strip_prefix('"') else {
            // Not an entity tag: skip to the next list member.
            rest = rest.split_once(',').map_or("", |(_, after)| after);
            continue;
        };
        let Some(end) = quoted.find('"') else {
            return false;
        };
        if tag[..end + 2] == *etag {
            return true;
        }
        rest = &quoted[end + 1..];
    }
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, extension)| extension) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json" | "map") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("wasm") => "application/wasm",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(answer: &StaticAnswer) -> Option<&[u8]> {
        match answer {
            StaticAnswer::Reply { body, .. } => Some(body),
            _ => None,
        }
    }

    fn head_text(answer: &StaticAnswer) -> String {
        match answer {
            StaticAnswer::Reply { head, .. } => String::from_utf8_lossy(head).into_owned(),
            _ => String::new(),
        }
    }

    #[test]
    fn a_tree_is_served_by_path_and_nothing_else_is() {
        let dir = std::env::temp_dir().join(format!("bps-statics-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("assets")).expect("dir");
        std::fs::write(dir.join("index.html"), "<p>hi</p>").expect("write");
        std::fs::write(dir.join("assets/app.js"), "1").expect("write");
        std::fs::write(dir.join(".secret"), "no").expect("write");
        std::os::unix::fs::symlink(dir.join("assets/app.js"), dir.join("link.js")).expect("link");
        let files = StaticFiles::load(&dir).expect("load");
        let page = files.answer("GET", "/", None);
        assert!(head_text(&page).contains("Content-Type: text/html; charset=utf-8\r\n"));
        assert!(head_text(&page).contains("Content-Security-Policy: default-src 'self';"));
        assert_eq!(body(&page), Some(b"<p>hi</p>".as_slice()));
        let script = files.answer("GET", "/assets/app.js", None);
        assert_eq!(body(&script), Some(b"1".as_slice()));
        assert!(head_text(&script).contains("X-Content-Type-Options: nosniff\r\n"));
        assert!(!head_text(&script).contains("Content-Security-Policy"));
        assert_eq!(files.answer("GET", "/.secret", None), StaticAnswer::Missing);
        assert_eq!(files.answer("GET", "/link.js", None), StaticAnswer::Missing);
        assert_eq!(
            files.answer("GET", "/../etc/passwd", None),
            StaticAnswer::Missing
        );
        assert_eq!(
            files.answer("POST", "/", None),
            StaticAnswer::MethodNotAllowed
        );
        assert!(files.bytes() > 10);
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert!(StaticFiles::load(&dir).is_err());
    }

    #[test]
    fn head_and_a_matching_tag_answer_without_a_body() {
        let mut files = StaticFiles::default();
        files
            .add(
                Path::new("/"),
                "/index.html".to_owned(),
                "index.html",
                Bytes::from_static(b"page"),
            )
            .expect("add");
        let get = files.answer("GET", "/index.html", None);
        let etag = head_text(&get)
            .lines()
            .find_map(|line| line.strip_prefix("ETag: ").map(str::to_owned))
            .expect("an ETag");
        let head = files.answer("HEAD", "/index.html", None);
        assert_eq!(body(&head), Some(b"".as_slice()));
        assert!(head_text(&head).contains("Content-Length: 4\r\n"));
        for listed in [
            etag.clone(),
            format!("W/{etag}"),
            format!("\"other\", {etag}"),
            "*".to_owned(),
        ] {
            let answer = files.answer("GET", "/", Some(&listed));
            assert!(
                matches!(answer, StaticAnswer::Reply { status: 304, ref body, .. } if body.is_empty()),
                "{listed}"
            );
            assert!(!head_text(&answer).contains("Content-Length"));
        }
        for unlisted in ["\"other\"", "\"x,", "garbage", ""] {
            let answer = files.answer("GET", "/", Some(unlisted));
            assert!(
                matches!(answer, StaticAnswer::Reply { status: 200, .. }),
                "{unlisted}"
            );
        }
    }
}
