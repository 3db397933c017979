//! Writes the seed corpus (`bps_fuzz::seeds::all`) into `fuzz/corpus/<target>/seed-<name>`,
//! replacing every earlier `seed-*` file so a renamed or dropped seed does not linger.
//! Other files there (kept crash inputs, `regression-*`) are left alone.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example
//! seed_corpus` (stable or nightly). The seeds are committed; rerun this after changing a
//! target's input layout or the golden tests it draws on.

use std::collections::BTreeSet;
use std::error::Error;
use std::fs;
use std::path::Path;

/// File-name prefix of a generated seed; nothing else in a corpus directory is touched.
const SEED_PREFIX: &str = "seed-";

fn main() -> Result<(), Box<dyn Error>> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let seeds = bps_fuzz::seeds::all();
    let targets: BTreeSet<&str> = seeds.iter().map(|seed| seed.target).collect();
    for target in &targets {
        let directory = corpus.join(target);
        fs::create_dir_all(&directory)?;
        for entry in fs::read_dir(&directory)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(SEED_PREFIX) {
                fs::remove_file(entry.path())?;
            }
        }
    }
    let mut bytes_total = 0;
    for seed in &seeds {
        let path = corpus
            .join(seed.target)
            .join(format!("{SEED_PREFIX}{}", seed.name));
        fs::write(&path, &seed.input)?;
        bytes_total += seed.input.len();
    }
    println!(
        "wrote {} seeds ({bytes_total} bytes) for {} targets into {}",
        seeds.len(),
        targets.len(),
        corpus.display()
    );
    Ok(())
}
