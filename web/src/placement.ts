/**
 * Placement by cohort key: which broker of a list is a cohort's root (docs/SCALING.md,
 * "Placement"), the same function as the Rust `bps_proto::placement`.
 *
 * Owns: `rankBrokers`, rendezvous (highest-random-weight) hashing of a broker list over the
 * canonical cohort key (R1, `cohortKey`), the `placementWeight` it ranks by, the one
 * normalisation of a list entry (`brokerName`) and `PlacementError`. Every client and every
 * edge given the same list ranks a cohort's brokers the same way with no coordination, so
 * all members of a cohort meet at one root. `proto/vectors/placement.json` holds the vectors
 * this and the Rust implementation are tested against.
 *
 * Never: resolves, connects to or probes a broker. A name is a string; reaching it and
 * moving on when it fails is the reconnect loop's (`brokerList` in reconnect.ts).
 */

import { utf8 } from "./bytes.js";
import { BpsError } from "./errors.js";
import { keccak256 } from "./hash.js";

/** The domain-separation tag at the start of every weight's preimage. */
export const PLACEMENT_TAG = "bps/placement/v1";

/** The longest broker name in bytes: a `host:port` or a `ws://` URL is far shorter, so a longer entry is a mistake. */
export const BROKER_NAME_BYTES_MAX = 1024;

/** Why a broker list cannot be ranked; `position` counts from 0. */
export type PlacementFault =
  | { readonly code: "empty-list" }
  | { readonly code: "empty-name"; readonly position: number }
  | { readonly code: "name-too-long"; readonly position: number; readonly bytes: number }
  | { readonly code: "duplicate-name"; readonly name: string };

/** The fault as a sentence, word for word the Rust `PlacementError`'s `Display`. */
export function describePlacementFault(fault: PlacementFault): string {
  switch (fault.code) {
    case "empty-list":
      return "the broker list is empty";
    case "empty-name":
      return `broker ${fault.position} of the list is empty`;
    case "name-too-long":
      return `broker ${fault.position} of the list is ${fault.bytes} bytes long, over ${BROKER_NAME_BYTES_MAX}`;
    case "duplicate-name":
      return `broker ${fault.name} is in the list twice`;
  }
}

/** A broker list that cannot be ranked. */
export class PlacementError extends BpsError<PlacementFault> {}

/** ASCII whitespace as Rust's `trim_ascii` knows it (not `String.prototype.trim`'s Unicode set). */
const SURROUNDING_ASCII_WHITESPACE = /^[\t\n\f\r ]+|[\t\n\f\r ]+$/g;

/**
 * A list entry's name: the entry as written, leading and trailing ASCII whitespace (space,
 * tab, CR, LF, form feed) removed, nothing else changed.
 */
export function brokerName(entry: string): string {
  return entry.replace(SURROUNDING_ASCII_WHITESPACE, "");
}

/** keccak256(`PLACEMENT_TAG` ‖ be32(len(name)) ‖ name ‖ key), `name` in UTF-8; the highest wins. */
export function placementWeight(name: string, key: Uint8Array): Uint8Array {
  const bytes = utf8(name);
  const length = new Uint8Array(4);
  new DataView(length.buffer).setUint32(0, bytes.length, false);
  return keccak256(utf8(PLACEMENT_TAG), length, bytes, key);
}

/** Byte order; for two 32-byte weights, the order of the big-endian integers. */
function compareBytes(one: Uint8Array, other: Uint8Array): number {
  const shorter = Math.min(one.length, other.length);
  for (let index = 0; index < shorter; index += 1) {
    if (one[index] !== other[index]) return one[index]! - other[index]!;
  }
  return one.length - other.length;
}

/** The names of a list, in its order, checked: not empty, none empty or too long, no two the same. */
export function brokerNames(entries: readonly string[]): string[] {
  const fault = (value: PlacementFault) => new PlacementError(value, describePlacementFault(value));
  if (entries.length === 0) throw fault({ code: "empty-list" });
  const seen = new Set<string>();
  return entries.map((entry, position) => {
    const name = brokerName(entry);
    const bytes = utf8(name).length;
    if (bytes === 0) throw fault({ code: "empty-name", position });
    if (bytes > BROKER_NAME_BYTES_MAX) throw fault({ code: "name-too-long", position, bytes });
    if (seen.has(name)) throw fault({ code: "duplicate-name", name });
    seen.add(name);
    return name;
  });
}

/**
 * The brokers of `entries` ranked for the cohort whose canonical key is `key`: positions
 * into `entries`, the root first, then the fallbacks in the order failover tries them.
 * Highest weight first; equal weights go by name, lower UTF-8 bytes first. Throws
 * `PlacementError`.
 */
export function rankBrokers(entries: readonly string[], key: Uint8Array): number[] {
  const weighed = brokerNames(entries).map((name, position) => ({
    name: utf8(name),
    weight: placementWeight(name, key),
    position,
  }));
  weighed.sort((one, other) => compareBytes(other.weight, one.weight) || compareBytes(one.name, other.name));
  return weighed.map((entry) => entry.position);
}
