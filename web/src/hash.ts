/**
 * keccak256 (the pre-standard Keccak that Ethereum and Swarm use, not SHA3-256), from the
 * audited @noble/hashes.
 *
 * Owns: `keccak256` over one or more parts.
 *
 * Never: any other hash; every address, id and digest of the protocol is keccak256.
 */

import { keccak_256 } from "@noble/hashes/sha3.js";

/** keccak256 of the parts concatenated, without copying them together. */
export function keccak256(...parts: readonly Uint8Array[]): Uint8Array {
  const hasher = keccak_256.create();
  for (const part of parts) hasher.update(part);
  return hasher.digest();
}
