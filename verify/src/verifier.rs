//! The fast verification path of one worker: a batch of jobs in, one result per job out,
//! exactly [`crate::verify`]'s result for each (ARCHITECTURE.md §3).
//!
//! Owns: [`Verifier`] (a key cache, batch scratch and counters), [`verify_batch`] (one
//! batch through a fresh verifier) and its policy:
//! - every BMT goes through the multi-lane keccak ([`crate::bmt_root`] picks the widest);
//! - `Expect::At { owner }` jobs are grouped by owner, in job order within a group. An
//!   owner whose key is not cached ("cold") has its chunks recovered one by one, exactly
//!   as [`crate::verify`] does, until one passes; that chunk's key goes into the cache
//!   ([`KeyCache`]). The rest of every group ("warm": its owner's key is known) goes into
//!   one check for the whole batch of jobs, all owners together, each chunk against its
//!   own owner's key ([`KnownKeysBatch`], each owner's key listed once; a lone warm chunk
//!   gets the single check). So a group chat of many speakers costs one multi-scalar
//!   multiplication per batch, not one check per chunk. If that check fails, the warm
//!   chunks are bisected: each half is checked as a batch of its own, a half that passes is
//!   accepted, a half that fails is split again, down to single chunks (and a half whose
//!   sibling passed after their parent failed holds a bad chunk for sure, so it is split
//!   without its own check). `k` bad chunks among `n` cost at most `1 + 2·k·⌈log2 n⌉`
//!   checks, so one bad chunk spoils no honest owner's acceptance and costs the batch a
//!   dozen checks of shrinking halves, not one check per chunk or per owner;
//! - implicit-authorship jobs (owner unknown in advance) are recovered one by one.
//!
//! Never: rejects on the fast path. The key checks can only accept, and they accept only
//! what recovery would accept with the same owner (proof in [`crate::batch`]); any chunk
//! they do not accept (bad lengths, out-of-range signature, replicas rule, failed check)
//! goes through [`crate::verify`], whose result is then the answer, error and all. So a
//! result differs from [`crate::verify`]'s only if a batch with an invalid signature
//! passed, which happens with probability at most 2^-128 per batch. Never shares state
//! between threads: each worker owns its verifier.
//!
//! Cost (measured here, 4 KiB payloads): a warm chunk in a batch of 64 of one owner
//! ≈ 17 µs against ≈ 88 µs for recovery with the scalar BMT; with AVX-512 IFMA (vector
//! nonce decompression and multi-scalar multiplication, [`crate::batch`]) ≈ 8 µs, of
//! which the signature is 3 µs (docs/BENCHMARKS.md, issue 23). With 64 owners taking turns
//! (one chunk each per batch), the one multi-key check makes this path 1.6–1.9× faster
//! than one check per owner (docs/BENCHMARKS.md, issue 12). A batch that holds a bad chunk
//! costs the failed multi-key check, the bisection's checks of halves (their sizes sum to
//! at most twice the batch per bad chunk and level) and the bad chunk's recovery; the
//! broker closes the stream that sent it (R17) and takes back its jobs still queued.

use std::borrow::Borrow;
use std::ops::Range;

use crate::batch::{KeyedSignature, KnownKey, KnownKeysBatch, SignedDigest, verify_with_key};
use crate::job::{Expect, Verified, VerifyError, VerifyRequest, verify};
use crate::keycache::KeyCache;
use crate::signer::COMPRESSED_KEY_SIZE;
use crate::soc::{REPLICAS_OWNER, SocRef, signing_digest, validate_keyed_at};
use crate::wire::{Address, Hash, soc_address};

/// Runs `requests`, appending one result per request to `results` in request order (the
/// caller owns the vector and may reuse it across batches). Each result is [`verify`]'s;
/// the work goes through a fresh [`Verifier`], so each owner's `Expect::At` chunks after
/// its first valid one are checked against its key, all owners' together in one batch (a
/// verification pool worker keeps its verifier, and so its key cache, across batches).
pub fn verify_batch(requests: &[VerifyRequest], results: &mut Vec<Result<Verified, VerifyError>>) {
    Verifier::new(requests.len().max(1)).verify_batch(requests, results);
}

/// What a [`Verifier`] did since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifierStats {
    /// Chunks settled by full recovery: cold owners, implicit authorship, and every chunk
    /// the key checks did not accept.
    pub recoveries: u64,
    /// Chunks accepted against a cached key.
    pub key_accepts: u64,
    /// Batch checks run: one per job batch with two or more warm chunks (of any owners),
    /// and after a failed one, one per half of two or more the bisection checks.
    pub batch_checks: u64,
    /// Batch checks that failed.
    pub batch_failures: u64,
    /// Failed batches split in two by the bisection.
    pub bisections: u64,
}

/// A `Expect::At` job that may be settled against a cached key.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    /// Index of the job in the request slice.
    request: usize,
    /// Index of its result in the results vector.
    slot: usize,
    owner: Address,
    /// `keccak256(id ‖ owner)`: the expected address, and the result's address if valid.
    address: Hash,
    cac_address: Hash,
    signature: SignedDigest,
}

/// One worker's verification state: the key cache and reusable scratch.
#[derive(Debug)]
pub struct Verifier {
    keys: KeyCache,
    batch: KnownKeysBatch,
    candidates: Vec<Candidate>,
    /// The warm owners' keys of the batch being settled, one per owner.
    warm_keys: Vec<KnownKey>,
    /// The warm chunks' signatures, each naming its owner's entry in `warm_keys`.
    warm_signatures: Vec<KeyedSignature>,
    /// For each entry of `warm_signatures`, its index in `candidates`.
    warm_candidates: Vec<usize>,
    verdicts: Vec<bool>,
    stats: VerifierStats,
}

impl Verifier {
    /// A verifier whose key cache holds up to `keys_max` owners.
    ///
    /// # Panics
    /// If `keys_max` is zero.
    pub fn new(keys_max: usize) -> Self {
        Self {
            keys: KeyCache::new(keys_max),
            batch: KnownKeysBatch::new(),
            candidates: Vec::new(),
            warm_keys: Vec::new(),
            warm_signatures: Vec::new(),
            warm_candidates: Vec::new(),
            verdicts: Vec::new(),
            stats: VerifierStats::default(),
        }
    }

    /// Counters since the verifier was made.
    pub fn stats(&self) -> VerifierStats {
        self.stats
    }

    /// The key cache (read-only: entries come only from successful recoveries).
    pub fn keys(&self) -> &KeyCache {
        &self.keys
    }

    /// Verifies `requests`, appending one result per request to `results` in request order:
    /// for each, what [`crate::verify`] returns (module docs).
    pub fn verify_batch<R: Borrow<VerifyRequest>>(
        &mut self,
        requests: &[R],
        results: &mut Vec<Result<Verified, VerifyError>>,
    ) {
        results.reserve(requests.len());
        self.candidates.clear();
        for (index, request) in requests.iter().enumerate() {
            let request = request.borrow();
            match prepare(request) {
                Some((signature, owner, address, cac_address)) => {
                    self.candidates.push(Candidate {
                        request: index,
                        slot: results.len(),
                        owner,
                        address,
                        cac_address,
                        signature,
                    });
                    // What the result is if the signature checks out; replaced otherwise.
                    // The key is filled in once it is known (`gather_owner`).
                    results.push(Ok(Verified {
                        owner,
                        address,
                        dedup_key: address,
                        wrapped: cac_address,
                        public_key: [0; COMPRESSED_KEY_SIZE],
                    }));
                }
                None => {
                    self.stats.recoveries += 1;
                    results.push(verify(request));
                }
            }
        }
        // A stable sort: job order is kept within each owner's group.
        self.candidates.sort_by_key(|candidate| candidate.owner);
        self.warm_keys.clear();
        self.warm_signatures.clear();
        self.warm_candidates.clear();
        let mut start = 0;
        while start < self.candidates.len() {
            let owner = self.candidates[start].owner;
            let len = self.candidates[start..]
                .iter()
                .take_while(|candidate| candidate.owner == owner)
                .count();
            self.gather_owner(start, start + len, requests, results);
            start += len;
        }
        self.settle_warm(requests, results);
    }

    /// Takes `self.candidates[start..end]`, all of one owner: recovers them one by one
    /// while the owner's key is unknown, then adds the rest, with the key, to the warm
    /// lists.
    fn gather_owner<R: Borrow<VerifyRequest>>(
        &mut self,
        mut start: usize,
        end: usize,
        requests: &[R],
        results: &mut [Result<Verified, VerifyError>],
    ) {
        let owner = self.candidates[start].owner;
        let mut key = self.keys.get(&owner);
        while key.is_none() && start < end {
            let candidate = self.candidates[start];
            start += 1;
            self.stats.recoveries += 1;
            let (result, recovered) = recover_at(requests[candidate.request].borrow(), &candidate);
            results[candidate.slot] = result;
            if let Some(known) = recovered.filter(|known| known.address() == owner) {
                self.keys.insert(known);
                key = Some(known);
            }
        }
        let Some(key) = key else {
            return;
        };
        if start == end {
            return;
        }
        let key_index = self.warm_keys.len();
        self.warm_keys.push(key);
        for (candidate, index) in self.candidates[start..end].iter().zip(start..) {
            if let Ok(verified) = &mut results[candidate.slot] {
                verified.public_key = key.compressed();
            }
            self.warm_signatures.push(KeyedSignature {
                key: key_index,
                signature: candidate.signature,
            });
            self.warm_candidates.push(index);
        }
    }

    /// Checks every warm chunk of the batch in one multi-key check, bisecting on failure
    /// (module docs); the chunks not accepted go through [`crate::verify`].
    fn settle_warm<R: Borrow<VerifyRequest>>(
        &mut self,
        requests: &[R],
        results: &mut [Result<Verified, VerifyError>],
    ) {
        if self.warm_signatures.is_empty() {
            return;
        }
        self.verdicts.clear();
        self.verdicts.resize(self.warm_signatures.len(), false);
        self.bisect(0..self.warm_signatures.len(), false);
        for (index, accepted) in self.warm_candidates.iter().zip(&self.verdicts) {
            let candidate = &self.candidates[*index];
            if *accepted {
                self.stats.key_accepts += 1;
            } else {
                self.stats.recoveries += 1;
                results[candidate.slot] = verify(requests[candidate.request].borrow());
            }
        }
    }

    /// Verdicts for `self.warm_signatures[range]`: a lone signature by the single check,
    /// more by one batch check, and a failed batch by its two halves in turn. `bad` says a
    /// bad signature is known to be in the range (its parent failed and its sibling passed):
    /// then the range is split without a check of its own, and a lone one is left to
    /// recovery. The recursion is `log2` of the batch deep (at most a few dozen levels).
    fn bisect(&mut self, range: Range<usize>, bad: bool) {
        if range.len() == 1 {
            if !bad {
                let keyed = self.warm_signatures[range.start];
                self.verdicts[range.start] =
                    verify_with_key(&self.warm_keys[keyed.key], &keyed.signature);
            }
            return;
        }
        if !bad {
            let passed = self
                .batch
                .check(&self.warm_keys, &self.warm_signatures[range.clone()]);
            self.stats.batch_checks += 1;
            if passed {
                self.verdicts[range].fill(true);
                return;
            }
            self.stats.batch_failures += 1;
        }
        self.stats.bisections += 1;
        let middle = range.start + range.len() / 2;
        self.bisect(range.start..middle, false);
        let left_passed = self.verdicts[range.start..middle].iter().all(|ok| *ok);
        self.bisect(middle..range.end, left_passed);
    }
}

/// The parts of an `Expect::At` job the key checks need: its parsed signature, owner,
/// expected address and wrapped chunk address. `None` sends the job to full recovery:
/// another expectation, bad lengths, a signature recovery would refuse, or a chunk of the
/// replicas owner that breaks the replicas rule.
fn prepare(request: &VerifyRequest) -> Option<(SignedDigest, Address, Hash, Hash)> {
    let Expect::At { owner } = request.expect else {
        return None;
    };
    let soc = SocRef::parse(&request.chunk).ok()?;
    let cac_address = soc.cac_address();
    if owner == REPLICAS_OWNER && soc.id[1..] != cac_address[1..] {
        return None;
    }
    let signature =
        SignedDigest::parse(soc.signature, &signing_digest(soc.id, &cac_address)).ok()?;
    Some((signature, owner, soc_address(soc.id, owner), cac_address))
}

/// [`crate::verify`] of an `Expect::At` job by full recovery, reusing the wrapped chunk
/// address already computed, with the recovered key if the chunk passed.
fn recover_at(
    request: &VerifyRequest,
    candidate: &Candidate,
) -> (Result<Verified, VerifyError>, Option<KnownKey>) {
    let soc = match SocRef::parse(&request.chunk) {
        Ok(soc) => soc,
        Err(error) => return (Err(error.into()), None),
    };
    match validate_keyed_at(&soc, candidate.cac_address, &candidate.address) {
        Ok((recovered, public_key)) => (
            Ok(Verified::of(&recovered, recovered.address)),
            Some(KnownKey::new(&public_key)),
        ),
        Err(error) => (Err(error.into()), None),
    }
}
