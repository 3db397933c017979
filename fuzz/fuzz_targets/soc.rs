//! Fuzz target `soc`: `SocRef::parse`, `recover_soc`, `validate_soc`, `validate_soc_at(_with)`
//! and `bps_verify::verify` / `verify_batch` on arbitrary chunk bytes with arbitrary expected
//! owners, addresses and implicit bindings (layout: `bps_fuzz::soc_input`).
//!
//! Asserts, with every hash recomputed by `keccak_reference` (tiny-keccak, no shortcut):
//! - a chunk outside 105..=4201 bytes is `TooShort`/`TooLong` with its length, from every
//!   entry point; inside, the fields are the layout's slices;
//! - the wrapped CAC address (every available `Lanes` path) and the signing digest
//!   `keccak256(id ‖ cac)` match the reference; a recovered chunk's address is
//!   `keccak256(id ‖ recovered owner)`;
//! - `validate_soc` is recovery plus bee's replicas-owner rule; `validate_soc_at` accepts
//!   exactly the address `keccak256(id ‖ owner)` (so a chunk that validates at an address
//!   is at that address) and names the mismatch otherwise, the same on every `Lanes` path;
//! - `verify` with `Expect::At { owner }` accepts exactly the recovered owner, and with
//!   `Expect::Implicit` gives the verdict and dedup key of R11's shape table (docs/PROTOCOL.md §4),
//!   modelled here;
//! - `verify_batch` (cached keys, same-key batches) gives `verify`'s result for every job,
//!   including warm repeats (enough for the batch check to take the vector square roots
//!   of two groups of eight where the CPU has AVX-512 IFMA) and a tampered copy of the
//!   chunk under the same owner, which fails the batch and sends its halves down to single
//!   checks against the cached key (the vector double multiplication where the CPU has
//!   IFMA);
//! - the batch decompression of nonce points (`nonce::decompress_all`, IFMA where present)
//!   is exactly k256's decompression of each (`decompress_portable`), on x coordinates and
//!   parities cut from the chunk's bytes, for every group size up to 17.

#![no_main]

// Comparison tracing instruments every comparison inside k256's field arithmetic: an input
// ran 3.7 times slower with it (71 against 19 ms, measured here). The few comparisons of
// ours it would guide (lengths, the recovery byte, the selector) mutation finds anyway.
// fuzz/run build options: --no-trace-compares

use bps_fuzz::keccak_reference as reference;
use bps_fuzz::soc_input::SocInput;
use bps_proto::Binding;
use bps_verify::nonce::{NonceX, decompress_all, decompress_portable};
use bps_verify::{
    Expect, Lanes, REPLICAS_OWNER, Recovered, ShapeError, SocError, SocRef, Verified, VerifyError,
    VerifyRequest, recover_soc, validate_soc, validate_soc_at, validate_soc_at_with, verify,
    verify_batch,
};
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

/// SOC layout (docs/PROTOCOL.md §3): id 32, signature 65, span 8, payload 0..=4096.
const ID_BYTES: usize = 32;
const SIGNATURE_END: usize = ID_BYTES + 65;
const SPAN_END: usize = SIGNATURE_END + 8;
const CHUNK_BYTES_MIN: usize = SPAN_END;
const CHUNK_BYTES_MAX: usize = SPAN_END + reference::CHUNK_BYTES;

/// Proximity order OWNER and SOC_ID demand (docs/PROTOCOL.md §4).
const PO_MIN: u8 = 16;

fn length_error(len: usize) -> Option<SocError> {
    if len < CHUNK_BYTES_MIN {
        Some(SocError::TooShort {
            len,
            min: CHUNK_BYTES_MIN,
        })
    } else if len > CHUNK_BYTES_MAX {
        Some(SocError::TooLong {
            len,
            max: CHUNK_BYTES_MAX,
        })
    } else {
        None
    }
}

fn request(chunk: &[u8], expect: Expect) -> VerifyRequest {
    VerifyRequest {
        chunk: Bytes::copy_from_slice(chunk),
        expect,
    }
}

/// Every entry point refuses a chunk of the wrong length with the same error.
fn check_length_refused(input: &SocInput<'_>, error: &SocError) {
    let chunk = input.chunk;
    assert_eq!(SocRef::parse(chunk).as_ref(), Err(error));
    assert_eq!(recover_soc(chunk).as_ref(), Err(error));
    assert_eq!(validate_soc(chunk).as_ref(), Err(error));
    assert_eq!(validate_soc_at(chunk, &input.address).as_ref(), Err(error));
    for lanes in Lanes::available() {
        assert_eq!(
            validate_soc_at_with(lanes, chunk, &input.address).as_ref(),
            Err(error)
        );
    }
    let expected = Err(VerifyError::Soc(error.clone()));
    let at = request(chunk, Expect::At { owner: input.owner });
    assert_eq!(verify(&at), expected);
    if let Some(binding) = input.binding {
        let implicit = request(
            chunk,
            Expect::Implicit {
                binding,
                topic: input.address,
                index: input.index,
            },
        );
        assert_eq!(verify(&implicit), expected);
    }
}

/// The fields of a chunk of valid length, sliced by hand.
struct Fields {
    id: [u8; 32],
    cac_address: [u8; 32],
}

fn check_layout(chunk: &[u8]) -> Fields {
    let soc = SocRef::parse(chunk).expect("a chunk of valid length parses");
    assert_eq!(&soc.id[..], &chunk[..ID_BYTES]);
    assert_eq!(&soc.signature[..], &chunk[ID_BYTES..SIGNATURE_END]);
    assert_eq!(&soc.span[..], &chunk[SIGNATURE_END..SPAN_END]);
    assert_eq!(soc.payload, &chunk[SPAN_END..]);
    let cac_address = reference::cac_address(*soc.span, soc.payload);
    assert_eq!(soc.cac_address(), cac_address);
    for lanes in Lanes::available() {
        assert_eq!(soc.cac_address_with(lanes), cac_address, "{lanes}");
    }
    assert_eq!(
        soc.signing_digest(),
        reference::keccak256(&[soc.id, &cac_address])
    );
    Fields {
        id: *soc.id,
        cac_address,
    }
}

/// bee's `soc.Valid` for the chunk at its own address: recovery, then the replicas rule.
fn model_valid(
    fields: &Fields,
    recovered: Result<Recovered, SocError>,
) -> Result<Recovered, SocError> {
    let recovered = recovered?;
    if recovered.owner == REPLICAS_OWNER && recovered.id[1..] != fields.cac_address[1..] {
        return Err(SocError::ReplicaIdMismatch {
            id: fields.id,
            cac_address: fields.cac_address,
        });
    }
    Ok(recovered)
}

fn model_at(
    valid: &Result<Recovered, SocError>,
    expected: &[u8; 32],
) -> Result<Recovered, SocError> {
    let recovered = valid.clone()?;
    if recovered.address != *expected {
        return Err(SocError::AddressMismatch {
            expected: *expected,
            actual: recovered.address,
            owner: recovered.owner,
        });
    }
    Ok(recovered)
}

fn proximity_check(binding: Binding, topic: &[u8; 32], soc: &Recovered) -> Result<(), ShapeError> {
    let po = reference::proximity(&soc.address, topic);
    if po < PO_MIN {
        return Err(ShapeError::ProximityTooLow {
            binding,
            po,
            min: PO_MIN,
            address: soc.address,
            topic: *topic,
        });
    }
    Ok(())
}

/// The R11 shape table (docs/PROTOCOL.md §4): what each binding demands and what it dedups on.
fn model_shape(
    binding: Binding,
    topic: &[u8; 32],
    index: u64,
    soc: &Recovered,
) -> Result<[u8; 32], ShapeError> {
    match binding {
        Binding::Mnemonic => Ok(soc.address),
        Binding::Anchor if soc.address == *topic => Ok(soc.cac_address),
        Binding::Anchor => Err(ShapeError::AddressNotTopic {
            address: soc.address,
            topic: *topic,
        }),
        Binding::Owner if reference::keccak256(&[&soc.owner]) != *topic => {
            Err(ShapeError::OwnerNotTopic {
                owner: soc.owner,
                topic: *topic,
            })
        }
        Binding::Owner => proximity_check(binding, topic, soc).map(|()| soc.address),
        Binding::FeedTopic => {
            let expected = reference::feed_id(topic, index);
            if soc.id == expected {
                Ok(soc.address)
            } else {
                Err(ShapeError::FeedIdMismatch {
                    id: soc.id,
                    expected,
                    index,
                })
            }
        }
        Binding::SocId if soc.id != *topic => Err(ShapeError::IdNotTopic {
            id: soc.id,
            topic: *topic,
        }),
        Binding::SocId => proximity_check(binding, topic, soc).map(|()| soc.address),
    }
}

/// What `verify` must return for a recovered chunk: the wrapped address is the reference
/// CAC address of the layout check; the key is the recovery's (whose owner the target
/// checks against the signer).
fn verified(fields: &Fields, recovered: &Recovered, dedup_key: [u8; 32]) -> Verified {
    Verified {
        owner: recovered.owner,
        address: recovered.address,
        dedup_key,
        wrapped: fields.cac_address,
        public_key: recovered.public_key,
    }
}

fn model_verify_at(
    fields: &Fields,
    valid: &Result<Recovered, SocError>,
    owner: &[u8; 20],
) -> Result<Verified, VerifyError> {
    let expected = reference::soc_address(&fields.id, owner);
    let recovered = model_at(valid, &expected)?;
    Ok(verified(fields, &recovered, recovered.address))
}

/// The chunk with one bit of its wrapped data flipped: same id and signature, so under the
/// same owner it must fail (unless a key check wrongly accepts it).
fn tampered(chunk: &[u8]) -> Vec<u8> {
    let mut copy = chunk.to_vec();
    if let Some(last) = copy.last_mut() {
        *last ^= 0x01;
    }
    copy
}

/// Warm repeats of the chunk under its recovered owner in [`check_batch`]: more than one
/// group of eight, so the batch check of a valid chunk takes two groups of vector square
/// roots where the CPU has IFMA.
const WARM_REPEATS: usize = 10;
/// Most nonces cut from one input: two groups of eight and one more.
const NONCES_MAX: usize = 17;

/// `decompress_all` against k256's decompression of each nonce, on x coordinates cut from
/// the chunk at every byte offset (stepping by 13, so consecutive ones overlap) with the
/// parity of the byte after, in every prefix length up to [`NONCES_MAX`].
fn check_nonces(chunk: &[u8]) {
    let nonces: Vec<NonceX> = chunk
        .windows(33)
        .step_by(13)
        .take(NONCES_MAX)
        .map(|window| {
            let mut x = [0u8; 32];
            x.copy_from_slice(&window[..32]);
            NonceX {
                x: x.into(),
                y_is_odd: window[32] & 1 == 1,
            }
        })
        .collect();
    let mut points = Vec::new();
    for len in 0..=nonces.len() {
        let group = &nonces[..len];
        let expected: Option<Vec<_>> = group.iter().map(decompress_portable).collect();
        assert_eq!(
            decompress_all(group, &mut points),
            expected.is_some(),
            "{len}"
        );
        if let Some(expected) = expected {
            assert_eq!(points, expected, "{len}");
        }
    }
}

/// `verify_batch` against the results already established for `verify`: the job with
/// the input's owner, the recovered owner [`WARM_REPEATS`] + 1 times (all but the first
/// are warm: its key is cached), the tampered chunk under that owner (its only extra
/// recovery) and the implicit job.
fn check_batch(
    input: &SocInput<'_>,
    fields: &Fields,
    valid: &Result<Recovered, SocError>,
    implicit: Option<(Expect, Result<Verified, VerifyError>)>,
) {
    let owner = valid
        .as_ref()
        .map_or(input.owner, |recovered| recovered.owner);
    let tampered = request(&tampered(input.chunk), Expect::At { owner });
    let mut jobs = vec![(
        request(input.chunk, Expect::At { owner: input.owner }),
        model_verify_at(fields, valid, &input.owner),
    )];
    let at_owner = (
        request(input.chunk, Expect::At { owner }),
        model_verify_at(fields, valid, &owner),
    );
    jobs.extend(std::iter::repeat_n(at_owner, WARM_REPEATS + 1));
    jobs.push((tampered.clone(), verify(&tampered)));
    if let Some((expect, expected)) = implicit {
        jobs.push((request(input.chunk, expect), expected));
    }
    let requests: Vec<VerifyRequest> = jobs.iter().map(|(request, _)| request.clone()).collect();
    let mut results = Vec::new();
    verify_batch(&requests, &mut results);
    assert_eq!(results.len(), jobs.len());
    for (position, ((_, expected), result)) in jobs.iter().zip(&results).enumerate() {
        assert_eq!(result, expected, "batch job {position}");
    }
}

fuzz_target!(|input: &[u8]| {
    let input = SocInput::parse(input);
    let chunk = input.chunk;
    if let Some(error) = length_error(chunk.len()) {
        check_length_refused(&input, &error);
        return;
    }
    let fields = check_layout(chunk);
    check_nonces(chunk);

    let recovered = recover_soc(chunk);
    if let Ok(soc) = &recovered {
        assert_eq!(soc.id, fields.id);
        assert_eq!(soc.cac_address, fields.cac_address);
        assert_eq!(soc.address, reference::soc_address(&fields.id, &soc.owner));
    }
    let valid = model_valid(&fields, recovered);
    assert_eq!(validate_soc(chunk), valid);

    let at = validate_soc_at(chunk, &input.address);
    assert_eq!(at, model_at(&valid, &input.address));
    if let Ok(soc) = &at {
        assert_eq!(
            input.address,
            reference::soc_address(&fields.id, &soc.owner)
        );
    }
    for lanes in Lanes::available() {
        assert_eq!(
            validate_soc_at_with(lanes, chunk, &input.address),
            at,
            "{lanes}"
        );
    }
    if let Ok(soc) = &valid {
        let own_address = reference::soc_address(&fields.id, &soc.owner);
        assert_eq!(validate_soc_at(chunk, &own_address).as_ref(), Ok(soc));
    }

    let at_owner = request(chunk, Expect::At { owner: input.owner });
    assert_eq!(
        verify(&at_owner),
        model_verify_at(&fields, &valid, &input.owner)
    );
    let implicit = input.binding.map(|binding| {
        let expect = Expect::Implicit {
            binding,
            topic: input.address,
            index: input.index,
        };
        let expected = valid.clone().map_err(VerifyError::Soc).and_then(|soc| {
            model_shape(binding, &input.address, input.index, &soc)
                .map(|dedup_key| verified(&fields, &soc, dedup_key))
                .map_err(VerifyError::Shape)
        });
        assert_eq!(verify(&request(chunk, expect)), expected, "{binding:?}");
        (expect, expected)
    });
    check_batch(&input, &fields, &valid, implicit);
});
