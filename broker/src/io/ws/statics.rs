//! The files the WebSocket listener serves besides its endpoints (the demo page, issue 11):
//! the contents of `ws.static_dir`, read once at start.
//!
//! Owns: `StaticFiles`, every file of the directory tree in memory with its content type,
//! bounded (`STATIC_FILE_BYTES_MAX` each, `STATIC_BYTES_MAX` in all) so that serving a
//! file never touches the disk on a core thread; and which request path names which file.
//! Never does: list a directory, follow a path out of the tree, or serve a hidden file.

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;

/// The largest file served: a bundled page script is a few hundred KiB.
pub const STATIC_FILE_BYTES_MAX: u64 = 4 << 20;
/// All files together, held in memory for the broker's life (counted in the memory budget).
pub const STATIC_BYTES_MAX: u64 = 16 << 20;
/// Directory levels walked below `ws.static_dir`.
const STATIC_DEPTH_MAX: usize = 8;

/// The served files by request path (`/index.html`, `/app.js`).
#[derive(Debug, Default)]
pub struct StaticFiles {
    files: HashMap<String, (&'static str, Bytes)>,
}

impl StaticFiles {
    /// Reads every file under `dir`; an error names what could not be served and why.
    pub fn load(dir: &Path) -> Result<StaticFiles, String> {
        let mut files = StaticFiles::default();
        let mut total = 0;
        files.walk(dir, "", 0, &mut total)?;
        if !files.files.contains_key("/index.html") {
            return Err(format!("{} has no index.html", dir.display()));
        }
        Ok(files)
    }

    fn walk(
        &mut self,
        dir: &Path,
        prefix: &str,
        depth: usize,
        total: &mut u64,
    ) -> Result<(), String> {
        let entries =
            std::fs::read_dir(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|error| format!("{}: {error}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let served = format!("{prefix}/{name}");
            if kind.is_dir() && depth < STATIC_DEPTH_MAX {
                self.walk(&path, &served, depth + 1, total)?;
            } else if kind.is_file() {
                let size = entry
                    .metadata()
                    .map_err(|error| format!("{}: {error}", path.display()))?
                    .len();
                if size > STATIC_FILE_BYTES_MAX {
                    return Err(format!(
                        "{} is {size} bytes, over {STATIC_FILE_BYTES_MAX}",
                        path.display()
                    ));
                }
                *total += size;
                if *total > STATIC_BYTES_MAX {
                    return Err(format!(
                        "{} holds more than {STATIC_BYTES_MAX} bytes",
                        dir.display()
                    ));
                }
                let bytes =
                    std::fs::read(&path).map_err(|error| format!("{}: {error}", path.display()))?;
                self.files
                    .insert(served, (content_type(&name), Bytes::from(bytes)));
            }
        }
        Ok(())
    }

    /// The file a request path names (`/` is `/index.html`), with its content type.
    pub fn get(&self, path: &str) -> Option<&(&'static str, Bytes)> {
        let path = if path == "/" { "/index.html" } else { path };
        self.files.get(path)
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.files
            .values()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum()
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

    #[test]
    fn a_tree_is_served_by_path_and_nothing_else_is() {
        let dir = std::env::temp_dir().join(format!("bps-statics-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("assets")).expect("dir");
        std::fs::write(dir.join("index.html"), "<p>hi</p>").expect("write");
        std::fs::write(dir.join("assets/app.js"), "1").expect("write");
        std::fs::write(dir.join(".secret"), "no").expect("write");
        let files = StaticFiles::load(&dir).expect("load");
        assert_eq!(
            files.get("/").map(|(kind, _)| *kind),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(
            files.get("/assets/app.js").map(|(_, bytes)| bytes.as_ref()),
            Some(b"1".as_slice())
        );
        assert!(files.get("/.secret").is_none());
        assert!(files.get("/../etc/passwd").is_none());
        assert_eq!(files.bytes(), 10);
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert!(StaticFiles::load(&dir).is_err());
    }
}
