//! Microbenchmark of the verification primitives (one thread): median time per operation.
//!
//! Run: `cargo bench -p bps-verify --bench primitives`. Each operation is timed in many
//! samples; a sample runs the operation in a small batch (sized so that a sample lasts
//! well above the timer's resolution) and records the time per operation. Samples are
//! sorted and the median is reported with p10/p90 to show the spread. Rows marked "per
//! SOC" or "per signature" time a whole batch and divide by its size. Prints a markdown
//! table, then the speed-ups of the fast paths over the old ones (medians).

use std::hint::black_box;
use std::time::{Duration, Instant};

use bps_proto::{keccak256, soc_address};
use bps_verify::keccak::hash_pairs;
use bps_verify::{
    CHUNK_SIZE, Expect, KeyedSignature, KnownKey, KnownKeysBatch, Lanes, SignedDigest, SigningKey,
    Verifier, VerifyRequest, bmt_root, bmt_root_with, recover_eth, sign_soc, validate_soc_at,
    validate_soc_at_with, verify, verify_with_key,
};

/// Wall time spent sampling one operation.
const SAMPLING_BUDGET: Duration = Duration::from_millis(1500);
/// A sample should last at least this long, so timer overhead stays below ~1%.
const SAMPLE_TARGET: Duration = Duration::from_micros(20);
/// At most this many samples per operation.
const SAMPLES_MAX: usize = 20_000;

/// Same-owner chunks or signatures per batch in the batched rows (the pool's default
/// `batch_jobs_max`).
const BATCH: usize = 64;

struct Row {
    name: String,
    samples: usize,
    batch: u32,
    p10: f64,
    median: f64,
    p90: f64,
}

fn measure(name: impl Into<String>, op: impl FnMut()) -> Row {
    measure_per(name, 1, op)
}

/// Like [`measure`] for an operation that handles `units` items; reports time per item.
fn measure_per(name: impl Into<String>, units: u32, mut op: impl FnMut()) -> Row {
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
        per_op_ns.push(start.elapsed().as_nanos() as f64 / f64::from(batch) / f64::from(units));
    }
    per_op_ns.sort_by(f64::total_cmp);
    let at = |quantile: f64| per_op_ns[((per_op_ns.len() - 1) as f64 * quantile).round() as usize];
    Row {
        name: name.into(),
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

/// The curve operations the batch check is made of, each alone, so the per-signature cost
/// of [`KnownKeysBatch::check`] can be split: one nonce point decompression (a field
/// square root), one table of 8 odd multiples (a doubling and 7 additions), about 22
/// additions in the shared chain, a few scalar products, and the EIP-191 hash.
fn curve_rows(signature: &[u8; 65], digest: &[u8; 32]) -> Vec<Row> {
    use bps_verify::nonce::{NonceX, decompress_all};
    use k256::elliptic_curve::hazmat::FieldArithmetic;
    use k256::elliptic_curve::ops::{MulByGeneratorVartime, Reduce};
    use k256::elliptic_curve::point::{AffineCoordinates, DecompressPoint};
    use k256::elliptic_curve::subtle::Choice;
    use k256::{AffinePoint, FieldBytes, ProjectivePoint, Scalar, Secp256k1};
    type FieldElement = <Secp256k1 as FieldArithmetic>::FieldElement;

    let mut r = [0u8; 32];
    r.copy_from_slice(&signature[..32]);
    let r = FieldBytes::from(r);
    let odd = Choice::from(signature[64] & 1);
    let nonce = AffinePoint::decompress(&r, odd)
        .into_option()
        .expect("a nonce point");
    let point = ProjectivePoint::from(nonce);
    let other = point.double();
    let element = FieldElement::from_bytes(&r).into_option().expect("below p");
    let scalar = Scalar::from(u64::from(signature[5]) + 3).square();
    let wide = <Scalar as Reduce<FieldBytes>>::reduce(&FieldBytes::from(*digest));
    let wide_too = wide.square();
    let nonces: Vec<NonceX> = (1..=BATCH as u64)
        .map(|seed| {
            let point = ProjectivePoint::mul_by_generator(&Scalar::from(seed * 7919)).to_affine();
            NonceX {
                x: point.x(),
                y_is_odd: bool::from(point.y_is_odd()),
            }
        })
        .collect();
    let mut points = Vec::with_capacity(BATCH);
    assert!(decompress_all(&nonces, &mut points));
    vec![
        measure("EIP-191 hash of a digest", || {
            black_box(bps_verify::eip191_hash(black_box(digest)));
        }),
        measure("nonce point decompression (field sqrt)", || {
            black_box(AffinePoint::decompress(black_box(&r), odd));
        }),
        measure_per(
            format!("nonce point decompression, {BATCH} at once (decompress_all), per point"),
            BATCH as u32,
            || {
                black_box(decompress_all(black_box(&nonces), &mut points));
            },
        ),
        measure("field mul (k256, 5x52)", || {
            black_box(black_box(element).mul(black_box(&element)));
        }),
        measure("field sqrt (k256)", || {
            black_box(black_box(element).sqrt());
        }),
        measure("field invert (k256)", || {
            black_box(black_box(element).invert());
        }),
        measure("point add, projective (k256, complete)", || {
            black_box(black_box(point) + black_box(&other));
        }),
        measure("point add, projective + affine (k256, complete)", || {
            black_box(black_box(point) + black_box(&nonce));
        }),
        measure("point double (k256)", || {
            black_box(black_box(point).double());
        }),
        measure("scalar mul (k256)", || {
            black_box(black_box(scalar) * black_box(&scalar));
        }),
        measure("mul_by_generator, 256-bit scalar (k256)", || {
            black_box(ProjectivePoint::mul_by_generator(black_box(&wide)));
        }),
        measure("variable-base mul, 256-bit scalar (k256)", || {
            black_box(black_box(point) * black_box(&wide));
        }),
        measure("u1·G + u2·Q, 256-bit scalars (k256, vartime)", || {
            black_box(ProjectivePoint::mul_by_generator_and_mul_add_vartime(
                black_box(&wide),
                black_box(&wide_too),
                black_box(&point),
            ));
        }),
        measure("scalar invert_vartime (k256)", || {
            black_box(black_box(scalar).invert_vartime());
        }),
    ]
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

    let known = KnownKey::new(&key.public_key());
    let signed = SignedDigest::parse(&signature, &digest).expect("own signature parses");
    let signed_batch: Vec<KeyedSignature> = (0..BATCH)
        .map(|index| {
            let data = keccak256(&index.to_be_bytes());
            let signature =
                SignedDigest::parse(&key.sign_eth(&data), &data).expect("own signature parses");
            KeyedSignature { key: 0, signature }
        })
        .collect();
    let mut batch = KnownKeysBatch::new();
    assert!(batch.check(&[known], &signed_batch));
    // A same-owner stream of distinct 4 KiB chunks, and a verifier that has seen the owner.
    let stream: Vec<VerifyRequest> = (0..BATCH)
        .map(|index| {
            let id = keccak256(&index.to_be_bytes());
            let payload: Vec<u8> = payload_4k.iter().map(|byte| byte ^ index as u8).collect();
            VerifyRequest {
                chunk: sign_soc(&key, &id, CHUNK_SIZE as u64, &payload),
                expect: Expect::At {
                    owner: key.address(),
                },
            }
        })
        .collect();
    let mut verifier = Verifier::new(16);
    let mut results = Vec::new();
    verifier.verify_batch(&stream[..1], &mut results);
    assert!(results.iter().all(Result::is_ok));

    let fastest = Lanes::fastest();
    let mut rows = vec![
        measure("keccak256, 64 B", || {
            black_box(keccak256(black_box(&bytes_64)));
        }),
        measure("keccak256, 4 KiB", || {
            black_box(keccak256(black_box(&payload_4k)));
        }),
    ];
    for lanes in Lanes::available() {
        let mut digests = [0u8; 8 * 32];
        rows.push(measure_per(
            format!("keccak256 of 8 × 64 B, {lanes}, per message"),
            8,
            || {
                hash_pairs(lanes, black_box(&payload_4k[..8 * 64]), &mut digests);
                black_box(&digests);
            },
        ));
    }
    for lanes in Lanes::available() {
        rows.push(measure(format!("BMT root, 4 KiB payload, {lanes}"), || {
            black_box(bmt_root_with(lanes, black_box(&payload_4k)));
        }));
    }
    rows.extend([
        measure(format!("BMT root, 32 B payload ({fastest})"), || {
            black_box(bmt_root(black_box(&payload_4k[..32])));
        }),
        measure("sign_eth (EIP-191, RFC 6979)", || {
            black_box(key.sign_eth(black_box(&digest)));
        }),
        measure("recover_eth (owner from signature)", || {
            let _ = black_box(recover_eth(black_box(&signature), black_box(&digest)));
        }),
        measure("verify_with_key (cached key, one signature)", || {
            black_box(verify_with_key(black_box(&known), black_box(&signed)));
        }),
        measure_per(
            format!("KnownKeysBatch::check, {BATCH} signatures of one key, per signature"),
            BATCH as u32,
            || {
                black_box(batch.check(black_box(&[known]), black_box(&signed_batch)));
            },
        ),
        measure("SOC validate_soc_at, 4 KiB, scalar BMT (old path)", || {
            let _ = black_box(validate_soc_at_with(
                Lanes::Scalar,
                black_box(&chunk_4k),
                black_box(&address),
            ));
        }),
        measure(format!("SOC validate_soc_at, 4 KiB ({fastest})"), || {
            let _ = black_box(validate_soc_at(black_box(&chunk_4k), black_box(&address)));
        }),
        measure(format!("SOC validate_soc_at, 32 B ({fastest})"), || {
            let _ = black_box(validate_soc_at(
                black_box(&chunk_small),
                black_box(&address),
            ));
        }),
        measure("verify job (Expect::At), 4 KiB payload", || {
            let _ = black_box(verify(black_box(&request)));
        }),
        measure_per(
            format!("Verifier, {BATCH} same-owner 4 KiB SOCs (warm key), per SOC"),
            BATCH as u32,
            || {
                results.clear();
                verifier.verify_batch(black_box(&stream), &mut results);
                black_box(&results);
            },
        ),
    ]);
    rows.extend(curve_rows(&signature, &digest));
    assert!(results.iter().all(Result::is_ok));

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
    let median = |prefix: &str| {
        rows.iter()
            .find(|row| row.name.starts_with(prefix))
            .map_or(f64::NAN, |row| row.median)
    };
    let bmt_scalar = median("BMT root, 4 KiB payload, scalar");
    println!();
    for lanes in Lanes::available().filter(|lanes| *lanes != Lanes::Scalar) {
        // The AVX2 target is issue 12's (AVX2-only CPUs); AVX-512 has met 3× since issue 6.
        let target = if lanes == Lanes::Avx2 { 4 } else { 3 };
        println!(
            "BMT, 4 KiB: scalar / {lanes} = {:.2}× (target ≥ {target}×)",
            bmt_scalar / median(&format!("BMT root, 4 KiB payload, {lanes}"))
        );
    }
    println!(
        "signature: recover_eth / batched check per signature = {:.2}×",
        median("recover_eth") / median("KnownKeysBatch::check")
    );
    println!(
        "SOC, 4 KiB: old path / Verifier per SOC = {:.2}× (target ≥ 3×)",
        median("SOC validate_soc_at, 4 KiB, scalar") / median("Verifier,")
    );
}
