/**
 * The Binary Merkle Tree hash of a chunk payload and the content-addressed chunk (CAC)
 * address built on it, bit for bit as bee computes them (`pkg/bmt/reference`, `pkg/cac`;
 * docs/PROTOCOL.md §3).
 *
 * Owns: `bmtRoot`, `cacAddress`, bee's `cac.Valid` as `validateCac`, and the chunk size
 * constants.
 *
 * Never: checks the span against the payload length (bee takes the span as given), or
 * touches signatures. A payload longer than `CHUNK_SIZE` is a caller bug for `bmtRoot` and
 * `cacAddress` (peer bytes go through `parseSoc` or `validateCac`, which return faults).
 *
 * The tree: the payload is zero-padded to 4096 bytes, cut into 128 segments of 32 bytes,
 * and pairs are hashed upward with keccak256(left ‖ right) for 7 levels. A subtree holding
 * only padding has a fixed hash per height, computed once, so a short payload costs only
 * the hashes on its own path, with the same root as hashing the zeros.
 */

import { equalBytes, le64 } from "./bytes.js";
import { type Result, fail, ok } from "./errors.js";
import { keccak256 } from "./hash.js";

/** Bytes in one leaf segment (one keccak output). */
export const SEGMENT_SIZE = 32;
/** Leaf segments in a full chunk. */
export const BRANCHES = 128;
/** Largest chunk payload in bytes (bee `swarm.ChunkSize`). */
export const CHUNK_SIZE = SEGMENT_SIZE * BRANCHES;
/** Bytes of the little-endian span before a CAC payload (bee `swarm.SpanSize`). */
export const SPAN_SIZE = 8;
/** Hashing levels from 128 leaves to the root. */
const LEVELS = Math.log2(BRANCHES);

/** `ZERO_SUBTREES[h]`: the hash of a subtree of height h over zeros (h = 0: one segment). */
const ZERO_SUBTREES: readonly Uint8Array[] = (() => {
  const hashes: Uint8Array[] = [new Uint8Array(SEGMENT_SIZE)];
  for (let height = 1; height <= LEVELS; height++) {
    const child = hashes[height - 1]!;
    hashes.push(keccak256(child, child));
  }
  return hashes;
})();

/** The BMT root of `payload` (bee `RefHasher(keccak256, 128)`), without the span. */
export function bmtRoot(payload: Uint8Array): Uint8Array {
  if (payload.length > CHUNK_SIZE) {
    throw new RangeError(`bmtRoot: payload of ${payload.length} bytes exceeds ${CHUNK_SIZE}`);
  }
  // The live nodes of a level are a prefix; the rest of the level is padding.
  let nodes: Uint8Array[] = [];
  for (let offset = 0; offset < payload.length; offset += SEGMENT_SIZE) {
    const segment = new Uint8Array(SEGMENT_SIZE);
    segment.set(payload.subarray(offset, offset + SEGMENT_SIZE));
    nodes.push(segment);
  }
  if (nodes.length === 0) return ZERO_SUBTREES[LEVELS]!;
  for (let height = 0; height < LEVELS; height++) {
    // A live node without a live sibling pairs with the padding subtree of its height.
    if (nodes.length % 2 === 1) nodes.push(ZERO_SUBTREES[height]!);
    const parents: Uint8Array[] = [];
    for (let pair = 0; pair < nodes.length; pair += 2) {
      parents.push(keccak256(nodes[pair]!, nodes[pair + 1]!));
    }
    nodes = parents;
  }
  return nodes[0]!;
}

/** The CAC address `keccak256(span ‖ bmtRoot(payload))`, span as given (8 bytes LE). */
export function cacAddress(span: Uint8Array, payload: Uint8Array): Uint8Array {
  if (span.length !== SPAN_SIZE) throw new RangeError(`cacAddress: span of ${span.length} bytes`);
  return keccak256(span, bmtRoot(payload));
}

/** `cac.New`: span = the payload length. */
export function cacAddressOf(payload: Uint8Array): Uint8Array {
  return cacAddress(le64(BigInt(payload.length)), payload);
}

/** Why raw bytes are not the CAC at an expected address (bee `cac.Valid`). */
export type CacFault =
  | { readonly code: "cac-too-short"; readonly length: number; readonly min: number }
  | { readonly code: "cac-too-long"; readonly length: number; readonly max: number }
  | { readonly code: "cac-address-mismatch"; readonly computed: Uint8Array };

/**
 * bee's `cac.Valid`: `data = span(8) ‖ payload(≤ 4096)` must hash to `expected` (compared
 * as raw bytes, so an expected address of another length never matches). Returns the
 * computed address.
 */
export function validateCac(data: Uint8Array, expected: Uint8Array): Result<Uint8Array, CacFault> {
  if (data.length < SPAN_SIZE) return fail({ code: "cac-too-short", length: data.length, min: SPAN_SIZE });
  if (data.length > SPAN_SIZE + CHUNK_SIZE) {
    return fail({ code: "cac-too-long", length: data.length, max: SPAN_SIZE + CHUNK_SIZE });
  }
  const computed = cacAddress(data.subarray(0, SPAN_SIZE), data.subarray(SPAN_SIZE));
  return equalBytes(computed, expected) ? ok(computed) : fail({ code: "cac-address-mismatch", computed });
}
