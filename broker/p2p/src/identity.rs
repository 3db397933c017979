//! The host's libp2p identity key file: loaded when present, created on first start (mode
//! 0600, never overwritten) when absent.
//!
//! The file holds libp2p's protobuf `PrivateKey` (key type and key bytes: for ECDSA the
//! SEC1 DER of the P-256 secret), the encoding go-libp2p marshals its keys with, so a key
//! file of this host, of bee's libp2p key store and of the go-libp2p daemon (`p2pd -id`)
//! are the same format. New keys are ECDSA P-256, the key type bee creates for its libp2p
//! identity: the broker then looks to bee's peer management like another bee node.
//! Never does: hold the Swarm (overlay) key; that is bee's handshake's, not libp2p's.

use std::{
    fmt, fs,
    io::{self, Write},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::Path,
};

use libp2p::identity::Keypair;

/// The key file's mode: the secret is readable by the broker's user alone.
pub const KEY_FILE_MODE: u32 = 0o600;

/// Largest key file read, in bytes: an ECDSA P-256 key is about 130; an RSA key of 4096 bits
/// about 2400. A larger file is not a key file.
pub const KEY_FILE_MAX_BYTES: u64 = 8 * 1024;

/// The identity in `path`, or a new ECDSA P-256 identity written there (mode 0600) when no
/// file is there. Whether it was created is returned so start-up can say so.
pub fn load_or_create(path: &Path) -> Result<(Keypair, bool), KeyError> {
    match load(path) {
        Ok(key) => Ok((key, false)),
        Err(KeyError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
            let key = Keypair::generate_ecdsa();
            create(path, &key)?;
            Ok((key, true))
        }
        Err(e) => Err(e),
    }
}

/// The identity in `path`.
pub fn load(path: &Path) -> Result<Keypair, KeyError> {
    let meta = fs::metadata(path).map_err(KeyError::Io)?;
    if meta.len() > KEY_FILE_MAX_BYTES {
        return Err(KeyError::TooLarge(meta.len()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(KeyError::Readable(meta.permissions().mode() & 0o777));
    }
    let bytes = fs::read(path).map_err(KeyError::Io)?;
    Keypair::from_protobuf_encoding(&bytes).map_err(|e| KeyError::Decode(e.to_string()))
}

/// Writes `key` to a new file at `path` with mode 0600; an existing file is an error, never
/// overwritten (it may be the identity bee nodes know this broker by).
pub fn create(path: &Path, key: &Keypair) -> Result<(), KeyError> {
    let bytes = key
        .to_protobuf_encoding()
        .map_err(|e| KeyError::Decode(e.to_string()))?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(KEY_FILE_MODE)
        .open(path)
        .map_err(KeyError::Io)?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(KeyError::Io)
}

/// Why the key file gives no identity.
#[derive(Debug)]
pub enum KeyError {
    Io(io::Error),
    /// The file is larger than `KEY_FILE_MAX_BYTES`.
    TooLarge(u64),
    /// Group or others may read or write it (its mode): a leaked libp2p key lets anyone be
    /// this broker to bee nodes.
    Readable(u32),
    /// Not a libp2p private key of a type this build knows.
    Decode(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "libp2p key file: {e}"),
            Self::TooLarge(n) => write!(
                f,
                "libp2p key file: {n} bytes, at most {KEY_FILE_MAX_BYTES}"
            ),
            Self::Readable(mode) => write!(
                f,
                "libp2p key file: mode {mode:o}, must be 600 (only its owner reads it)"
            ),
            Self::Decode(e) => write!(f, "libp2p key file: not a libp2p private key: {e}"),
        }
    }
}

impl std::error::Error for KeyError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bps-p2p-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn created_0600_and_reloaded_to_the_same_peer_id() {
        let dir = temp_dir("key");
        let path = dir.join("libp2p.key");
        let (created, was_created) = load_or_create(&path).unwrap();
        assert!(was_created);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(created.key_type(), libp2p::identity::KeyType::Ecdsa);
        let (loaded, was_created) = load_or_create(&path).unwrap();
        assert!(!was_created);
        assert_eq!(loaded.public().to_peer_id(), created.public().to_peer_id());
        assert!(
            matches!(create(&path, &loaded), Err(KeyError::Io(e)) if e.kind() == io::ErrorKind::AlreadyExists)
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_a_key_others_can_read_or_that_is_no_key() {
        let dir = temp_dir("badkey");
        let path = dir.join("libp2p.key");
        fs::write(&path, b"not a key").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(load(&path), Err(KeyError::Readable(0o644))));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(load(&path), Err(KeyError::Decode(_))));
        fs::remove_dir_all(dir).unwrap();
    }
}
