//! Black-box: `bps-broker p2p-identity` against the real binary. It creates the two key files
//! of the config when absent (mode 0600), prints the peer id of the libp2p key, the overlay
//! of the Swarm key for the configured network (derived here by hand, as docs/LIBP2P.md
//! states it) and the addresses to give bee nodes; a second run prints the same; a key file
//! others may read is refused with exit 1 naming the file.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tiny_keccak::{Hasher, Keccak};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bps-p2p-identity-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn identity(dir: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_bps-broker"));
    command.arg("p2p-identity").args([
        "--set",
        &format!("p2p.swarm_key_file={}", dir.join("swarm.key").display()),
        "--set",
        &format!("p2p.libp2p_key_file={}", dir.join("libp2p.key").display()),
        "--set",
        r#"p2p.listen=["/ip4/192.0.2.10/tcp/1634","/ip6/2001:db8::10/tcp/1634"]"#,
    ]);
    command.args(extra).output().expect("runs bps-broker")
}

/// The value of the `name value` line.
fn field<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} line in {stdout:?}"))
}

fn keccak(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Keccak::v256();
    for part in parts {
        hasher.update(part);
    }
    let mut out = [0; 32];
    hasher.finalize(&mut out);
    out
}

/// keccak256(eth address ‖ le64(network id) ‖ nonce), the nonce zero.
fn overlay_of(swarm_key: &[u8; 32], network_id: u64) -> String {
    let key = bps_verify::SigningKey::from_bytes(swarm_key).expect("a valid key");
    let overlay = keccak(&[&key.address(), &network_id.to_le_bytes(), &[0; 32]]);
    hex::encode(overlay)
}

#[test]
fn creates_both_keys_and_prints_the_identity_they_give() {
    let dir = temp_dir("create");
    let first = identity(&dir, &["--set", "p2p.network_id=10"]);
    assert!(first.status.success(), "{first:?}");
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("swarm.key") && stderr.contains("libp2p.key"),
        "{stderr}"
    );
    for file in ["swarm.key", "libp2p.key"] {
        let mode = std::fs::metadata(dir.join(file))
            .expect("created")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file}");
    }
    let stdout = String::from_utf8(first.stdout).expect("utf-8");
    let swarm_key: [u8; 32] = std::fs::read(dir.join("swarm.key"))
        .expect("reads")
        .try_into()
        .expect("32 bytes");
    assert_eq!(field(&stdout, "overlay"), overlay_of(&swarm_key, 10));
    assert_eq!(field(&stdout, "network_id"), "10");
    let keypair = bps_p2p::load(&dir.join("libp2p.key")).expect("a libp2p key");
    let peer_id = keypair.public().to_peer_id().to_string();
    assert_eq!(field(&stdout, "peer_id"), peer_id);
    let addresses: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.strip_prefix("address "))
        .collect();
    assert_eq!(
        addresses,
        [
            format!("/ip4/192.0.2.10/tcp/1634/p2p/{peer_id}"),
            format!("/ip6/2001:db8::10/tcp/1634/p2p/{peer_id}"),
        ]
    );
    let second = identity(&dir, &["--set", "p2p.network_id=10"]);
    assert!(second.status.success(), "{second:?}");
    assert_eq!(String::from_utf8_lossy(&second.stdout), stdout);
    assert!(second.stderr.is_empty(), "nothing created the second time");
}

#[test]
fn a_key_file_others_may_read_is_refused_naming_it() {
    let dir = temp_dir("readable");
    assert!(identity(&dir, &[]).status.success());
    let swarm_key = dir.join("swarm.key");
    std::fs::set_permissions(&swarm_key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let refused = identity(&dir, &[]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(refused.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&swarm_key.display().to_string()) && stderr.contains("600"),
        "{stderr}"
    );
}
