//! Compiles `bps.proto` into prost types at build time.
//!
//! protox parses the file in pure Rust, so no system `protoc` is needed; prost-build then
//! generates `$OUT_DIR/bps.rs`, which `lib.rs` includes as `pub mod pb`. Every `bytes` field
//! becomes `bytes::Bytes`, so decoding from a `Bytes` frame slices it instead of copying.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
    let crate_dir = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR is not set")?,
    );
    let proto_file = crate_dir.join("bps.proto");
    println!("cargo:rerun-if-changed={}", proto_file.display());

    let descriptors = protox::compile([&proto_file], [&crate_dir])?;
    prost_build::Config::new()
        .bytes(["."])
        .compile_fds(descriptors)?;
    Ok(())
}
