//! The broker's two identities on the Swarm network, from their key files: the libp2p key
//! (bps-p2p's format, created by bps-p2p) and the Swarm key whose Ethereum address, with the
//! network id and a zero nonce, gives the overlay (bee derives a new node's overlay with a
//! zero nonce too). The Swarm key file holds the 32 raw bytes of the secp256k1 secret,
//! mode 0600, created when absent and never overwritten; a file others may read is refused.
//! Never does: sign anything (bps-bee's `Identity` does) or hold the libp2p key's secrets
//! beyond handing them to the host.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use bps_verify::SigningKey;

/// The Swarm key file's mode: its owner alone reads it.
pub const SWARM_KEY_FILE_MODE: u32 = 0o600;

/// Bytes of the Swarm key file: one secp256k1 secret.
pub const SWARM_KEY_FILE_BYTES: usize = 32;

/// The key in `path`, or a new one written there (mode 0600) when no file is there; whether
/// it was created.
pub fn load_or_create_swarm_key(path: &Path) -> Result<(SigningKey, bool), String> {
    match fs::metadata(path) {
        Ok(meta) => {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(format!(
                    "swarm key file {}: mode {mode:o}, must be 600 (only its owner reads it)",
                    path.display()
                ));
            }
            let bytes =
                fs::read(path).map_err(|e| format!("swarm key file {}: {e}", path.display()))?;
            let secret: [u8; SWARM_KEY_FILE_BYTES] =
                bytes.try_into().map_err(|bytes: Vec<u8>| {
                    format!(
                        "swarm key file {}: {} bytes, expected {SWARM_KEY_FILE_BYTES}",
                        path.display(),
                        bytes.len()
                    )
                })?;
            let key = SigningKey::from_bytes(&secret).map_err(|_| {
                format!("swarm key file {}: not a secp256k1 secret", path.display())
            })?;
            Ok((key, false))
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let key = SigningKey::random();
            create(path, &key.to_bytes())
                .map_err(|e| format!("swarm key file {}: {e}", path.display()))?;
            Ok((key, true))
        }
        Err(error) => Err(format!("swarm key file {}: {error}", path.display())),
    }
}

fn create(path: &Path, secret: &[u8]) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(SWARM_KEY_FILE_MODE)
        .open(path)?;
    file.write_all(secret)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_0600_reloaded_the_same_and_a_readable_file_refused() {
        let dir = std::env::temp_dir().join(format!("bps-swarm-key-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("swarm.key");
        let (created, was_created) = load_or_create_swarm_key(&path).expect("created");
        assert!(was_created);
        let mode = fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (loaded, was_created) = load_or_create_swarm_key(&path).expect("loaded");
        assert!(!was_created);
        assert_eq!(loaded.address(), created.address());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = load_or_create_swarm_key(&path).expect_err("readable by others");
        assert!(error.contains("mode 644"), "{error}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        fs::write(&path, b"short").expect("write");
        assert!(load_or_create_swarm_key(&path).is_err());
        fs::remove_dir_all(dir).expect("cleanup");
    }
}
