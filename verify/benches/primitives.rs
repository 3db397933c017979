//! Microbenchmark of the verification primitives (one thread): median time per operation.
//!
//! Run: `cargo bench -p bps-verify --bench primitives`. Each operation is timed in many
//! samples; a sample runs the operation in a small batch (sized so that a sample lasts
//! well above the timer's resolution) and records the time per operation. Samples are
//! sorted and the median is reported with p10/p90 to show the spread. Prints a markdown
//! table.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bps_proto::{keccak256, soc_address};
use bps_verify::{
    CHUNK_SIZE, Expect, SigningKey, VerifyRequest, bmt_root, recover_eth, sign_soc,
    validate_soc_at, verify,
};

/// Wall time spent sampling one operation.
const SAMPLING_BUDGET: Duration = Duration::from_millis(1500);
/// A sample should last at least this long, so timer overhead stays below ~1%.
const SAMPLE_TARGET: Duration = Duration::from_micros(20);
/// At most this many samples per operation.
const SAMPLES_MAX: usize = 20_000;

struct Row {
    name: &'static str,
    samples: usize,
    batch: u32,
    p10: f64,
    median: f64,
    p90: f64,
}

fn measure(name: &'static str, mut op: impl FnMut()) -> Row {
    // Warm up and size the batch.
    let mut batch: u32 = 1;
    loop {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        if start.elapsed() >= SAMPLE_TARGET || batch >= 1 << 20 {
            break;
        }
        batch *= 2;
    }
    let mut per_op_ns = Vec::with_capacity(SAMPLES_MAX);
    let began = Instant::now();
    while began.elapsed() < SAMPLING_BUDGET && per_op_ns.len() < SAMPLES_MAX {
        let start = Instant::now();
        for _ in 0..batch {
            op();
        }
        per_op_ns.push(start.elapsed().as_nanos() as f64 / f64::from(batch));
    }
    per_op_ns.sort_by(f64::total_cmp);
    let at = |quantile: f64| per_op_ns[((per_op_ns.len() - 1) as f64 * quantile).round() as usize];
    Row {
        name,
        samples: per_op_ns.len(),
        batch,
        p10: at(0.10),
        median: at(0.50),
        p90: at(0.90),
    }
}

fn human(ns: f64) -> String {
    if ns >= 1_000.0 {
        format!("{:.2} µs", ns / 1_000.0)
    } else {
        format!("{ns:.0} ns")
    }
}

fn main() {
    let key = SigningKey::from_bytes(&keccak256(b"bench key")).expect("valid key");
    let payload_4k: Vec<u8> = (0..CHUNK_SIZE)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7))
        .collect();
    let bytes_64 = [0x5au8; 64];
    let id = keccak256(b"bench id");
    let digest = keccak256(b"bench digest");
    let signature = key.sign_eth(&digest);
    let chunk_4k = sign_soc(&key, &id, CHUNK_SIZE as u64, &payload_4k);
    let chunk_small = sign_soc(&key, &id, 32, &payload_4k[..32]);
    let address = soc_address(id, key.address());
    let request = VerifyRequest {
        chunk: chunk_4k.clone(),
        expect: Expect::At {
            owner: key.address(),
        },
    };
    assert!(validate_soc_at(&chunk_4k, &address).is_ok());
    assert!(validate_soc_at(&chunk_small, &address).is_ok());

    let rows = vec![
        measure("keccak256, 64 B", || {
            black_box(keccak256(black_box(&bytes_64)));
        }),
        measure("keccak256, 4 KiB", || {
            black_box(keccak256(black_box(&payload_4k)));
        }),
        measure("BMT root, 4 KiB payload", || {
            black_box(bmt_root(black_box(&payload_4k)));
        }),
        measure("BMT root, 32 B payload", || {
            black_box(bmt_root(black_box(&payload_4k[..32])));
        }),
        measure("sign_eth (EIP-191, RFC 6979)", || {
            black_box(key.sign_eth(black_box(&digest)));
        }),
        measure("recover_eth (owner from signature)", || {
            let _ = black_box(recover_eth(black_box(&signature), black_box(&digest)));
        }),
        measure("SOC validate_soc_at, 4 KiB payload", || {
            let _ = black_box(validate_soc_at(black_box(&chunk_4k), black_box(&address)));
        }),
        measure("SOC validate_soc_at, 32 B payload", || {
            let _ = black_box(validate_soc_at(
                black_box(&chunk_small),
                black_box(&address),
            ));
        }),
        measure("verify job (Expect::At), 4 KiB payload", || {
            let _ = black_box(verify(black_box(&request)));
        }),
    ];

    println!("| operation | median | p10 | p90 | samples × batch |");
    println!("|---|---:|---:|---:|---:|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {} | {} × {} |",
            row.name,
            human(row.median),
            human(row.p10),
            human(row.p90),
            row.samples,
            row.batch
        );
    }
}
