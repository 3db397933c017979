/**
 * Single-owner chunks (SOC): layout, parsing, signing, owner recovery and bee's `soc.Valid`
 * (docs/PROTOCOL.md §3; bee `pkg/soc/soc.go`, `pkg/soc/validator.go`).
 *
 * Owns: the SOC size constants, `REPLICAS_OWNER`, `parseSoc` (views into peer bytes,
 * lengths checked), `recoverSoc`, `validateSoc`, `validateSocAt` (bee's dispersed-replicas
 * owner rule included) and `signSoc`.
 *
 * Never: throws on peer bytes (every check returns a `Result`), checks the span against
 * the payload length (bee does not), or decides what an owner may publish (`shape.ts` and
 * `admission.ts`).
 *
 * Layout: `id(32) ‖ signature(65) ‖ span(8, LE) ‖ payload(0..=4096)`. The wrapped CAC is
 * `span ‖ payload`; the owner signs keccak256(id ‖ cacAddress) with EIP-191; the SOC
 * address is keccak256(id ‖ owner).
 */

import { CHUNK_SIZE, SPAN_SIZE, cacAddress } from "./bmt.js";
import { HASH_BYTES, equalBytes, fromHex, le64, readLe64, toHex } from "./bytes.js";
import { BpsError, type Result, fail, ok } from "./errors.js";
import { keccak256 } from "./hash.js";
import { type SignatureFault, SIGNATURE_BYTES, type SigningKey, describeSignatureFault, recoverAddress } from "./signer.js";
import { socAddress } from "./chunkId.js";

/** Smallest SOC: id, signature and span with an empty payload (bee `SocMinChunkSize`). */
export const SOC_MIN_CHUNK_SIZE = HASH_BYTES + SIGNATURE_BYTES + SPAN_SIZE;
/** Largest SOC: a full 4096-byte payload (bee `SocMaxChunkSize`). */
export const SOC_MAX_CHUNK_SIZE = SOC_MIN_CHUNK_SIZE + CHUNK_SIZE;

/**
 * Owner of bee's dispersed replicas (the key 0x01 ‖ 0^31, bee's `swarm.ReplicasOwner`). A
 * SOC of this owner is valid only if its id equals its wrapped CAC address in bytes 1..32.
 */
export const REPLICAS_OWNER: Uint8Array = fromHex("dc5b20847f43d67928f49cd4f85d696b5a7617b5");

/** Why bytes are not a valid SOC (at the expected address). */
export type SocFault =
  | { readonly code: "soc-too-short"; readonly length: number; readonly min: number }
  | { readonly code: "soc-too-long"; readonly length: number; readonly max: number }
  | { readonly code: "soc-signature"; readonly fault: SignatureFault }
  | { readonly code: "replica-id-mismatch"; readonly id: Uint8Array; readonly cacAddress: Uint8Array }
  | {
      readonly code: "address-mismatch";
      readonly expected: Uint8Array;
      readonly actual: Uint8Array;
      readonly owner: Uint8Array;
    };

/** Text for a SOC fault, as the Rust `SocError`'s `Display`. */
export function describeSocFault(fault: SocFault): string {
  switch (fault.code) {
    case "soc-too-short":
      return `SOC of ${fault.length} bytes is shorter than the minimum ${fault.min}`;
    case "soc-too-long":
      return `SOC of ${fault.length} bytes is longer than the maximum ${fault.max}`;
    case "soc-signature":
      return `SOC signature: ${describeSignatureFault(fault.fault)}`;
    case "replica-id-mismatch":
      return `SOC signed by the replicas owner has id ${toHex(fault.id)} whose bytes 1..32 differ from its wrapped chunk address ${toHex(fault.cacAddress)}`;
    case "address-mismatch":
      return `SOC signed by 0x${toHex(fault.owner)} is at ${toHex(fault.actual)}, not at the expected ${toHex(fault.expected)}`;
  }
}

/** Views into SOC bytes whose lengths are checked; nothing is verified yet. */
export interface SocView {
  readonly id: Uint8Array;
  readonly signature: Uint8Array;
  /** 8 bytes, little-endian. */
  readonly span: Uint8Array;
  /** 0..=4096 bytes. */
  readonly payload: Uint8Array;
}

/** Splits `data` into its fields: `SOC_MIN_CHUNK_SIZE <= length <= SOC_MAX_CHUNK_SIZE`. */
export function parseSoc(data: Uint8Array): Result<SocView, SocFault> {
  if (data.length > SOC_MAX_CHUNK_SIZE) {
    return fail({ code: "soc-too-long", length: data.length, max: SOC_MAX_CHUNK_SIZE });
  }
  if (data.length < SOC_MIN_CHUNK_SIZE) {
    return fail({ code: "soc-too-short", length: data.length, min: SOC_MIN_CHUNK_SIZE });
  }
  const signatureEnd = HASH_BYTES + SIGNATURE_BYTES;
  return ok({
    id: data.subarray(0, HASH_BYTES),
    signature: data.subarray(HASH_BYTES, signatureEnd),
    span: data.subarray(signatureEnd, SOC_MIN_CHUNK_SIZE),
    payload: data.subarray(SOC_MIN_CHUNK_SIZE),
  });
}

/** The span as an integer (not checked against the payload length, as bee). */
export function spanValue(soc: SocView): bigint {
  return readLe64(soc.span);
}

/** What the owner signs (before EIP-191): keccak256(id ‖ cacAddress). */
export function signingDigest(id: Uint8Array, wrappedAddress: Uint8Array): Uint8Array {
  return keccak256(id, wrappedAddress);
}

/** What a SOC's bytes and signature say about it. */
export interface Recovered {
  /** The recovered signer. */
  readonly owner: Uint8Array;
  readonly id: Uint8Array;
  /** keccak256(id ‖ owner). */
  readonly address: Uint8Array;
  /** The wrapped CAC's address. */
  readonly cacAddress: Uint8Array;
}

function recoverView(soc: SocView): Result<Recovered, SocFault> {
  const wrapped = cacAddress(soc.span, soc.payload);
  const owner = recoverAddress(soc.signature, signingDigest(soc.id, wrapped));
  if (!owner.ok) return fail({ code: "soc-signature", fault: owner.fault });
  const id = soc.id.slice();
  return ok({ owner: owner.value, id, address: socAddress(id, owner.value), cacAddress: wrapped });
}

/** Parses `data` and recovers its owner (bee `soc.FromChunk`); this alone is not validity. */
export function recoverSoc(data: Uint8Array): Result<Recovered, SocFault> {
  const parsed = parseSoc(data);
  return parsed.ok ? recoverView(parsed.value) : parsed;
}

/**
 * bee's `soc.Valid` for a chunk at the address its own signature makes (owner not fixed in
 * advance, as under implicit authorship): parse, recover, the replicas-owner rule.
 */
export function validateSoc(data: Uint8Array): Result<Recovered, SocFault> {
  const recovered = recoverSoc(data);
  if (!recovered.ok) return recovered;
  const { owner, id, cacAddress: wrapped } = recovered.value;
  if (equalBytes(owner, REPLICAS_OWNER) && !equalBytes(id.subarray(1), wrapped.subarray(1))) {
    return fail({ code: "replica-id-mismatch", id, cacAddress: wrapped });
  }
  return recovered;
}

/**
 * What checks a SOC as `validateSoc` does; another one (a Web Worker's answer looked up on
 * the page, say) must give the same result for the same bytes.
 */
export type SocValidator = (data: Uint8Array) => Result<Recovered, SocFault>;

/**
 * bee's `soc.Valid(expectedAddress, data)`. BPS "validates at the expected address" by
 * passing keccak256(id ‖ expectedOwner), which forces the owner. `validate` is what
 * recovers the owner (default `validateSoc`).
 */
export function validateSocAt(
  data: Uint8Array,
  expectedAddress: Uint8Array,
  validate: SocValidator = validateSoc,
): Result<Recovered, SocFault> {
  const valid = validate(data);
  if (!valid.ok) return valid;
  const { address, owner } = valid.value;
  if (!equalBytes(address, expectedAddress)) {
    return fail({ code: "address-mismatch", expected: expectedAddress.slice(), actual: address, owner });
  }
  return valid;
}

/** A payload the caller gave is longer than a chunk can carry. */
export interface PayloadTooLarge {
  readonly code: "payload-too-large";
  readonly bytes: number;
  readonly max: number;
}

/** Thrown when the caller's payload does not fit a chunk. */
export class PayloadError extends BpsError<PayloadTooLarge> {}

/** Throws `PayloadError` if `payload` does not fit one chunk. */
export function checkPayload(payload: Uint8Array): void {
  if (payload.length > CHUNK_SIZE) {
    throw new PayloadError(
      { code: "payload-too-large", bytes: payload.length, max: CHUNK_SIZE },
      `payload of ${payload.length} bytes exceeds the chunk size ${CHUNK_SIZE}`,
    );
  }
}

/**
 * SOC bytes `id ‖ sig ‖ span(LE) ‖ payload`, signed by `key` (bee `soc.Sign`). The span is
 * written as given, by default the payload length (0 for AUTH and EOS). Throws
 * `PayloadError` for a payload over 4096 bytes.
 */
export function signSoc(key: SigningKey, id: Uint8Array, payload: Uint8Array, span: bigint = BigInt(payload.length)): Uint8Array {
  if (id.length !== HASH_BYTES) throw new RangeError(`signSoc: id of ${id.length} bytes, expected ${HASH_BYTES}`);
  checkPayload(payload);
  const spanBytes = le64(span);
  const signature = key.sign(signingDigest(id, cacAddress(spanBytes, payload)));
  const chunk = new Uint8Array(SOC_MIN_CHUNK_SIZE + payload.length);
  chunk.set(id, 0);
  chunk.set(signature, HASH_BYTES);
  chunk.set(spanBytes, HASH_BYTES + SIGNATURE_BYTES);
  chunk.set(payload, SOC_MIN_CHUNK_SIZE);
  return chunk;
}
